#!/bin/sh
# Test-bed self-test: fio (dynamic, with its libraries in the initramfs) runs
# both kernel paths for 1 s: io_uring on /dev/nvme0n1 (O_DIRECT) and
# io_uring_cmd passthrough on /dev/ng0n1; with --poll-queues also --hipri.
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/../lib.sh"
: "${NVB_POLL_QUEUES:=0}"
RT=${1:-1}

run_fio() { # run_fio NAME fio-args...: terse output to $NVB_RESULTS/NAME.log, print IOPS
  name=$1; shift
  check_cmd "$name" fio --name="$name" --rw=randread --bs=4k --iodepth=16 --runtime="$RT" --time_based \
    --output-format=terse --terse-version=3 "$@"
  iops=$(awk -F';' '$1 == 3 { print $8 }' "$NVB_RESULTS/$name.log")
  if [ -z "$iops" ] || [ "$iops" -le 0 ]; then fail "$name: no IOPS in fio output"; fi
  info "$name: $iops IOPS (emulated; compare paths only within one boot)"
}

step fio-version
check_cmd fio-version fio --version
step fio-block
run_fio fio-block --filename=/dev/nvme0n1 --ioengine=io_uring --direct=1
step fio-passthru
run_fio fio-passthru --filename=/dev/ng0n1 --ioengine=io_uring_cmd --cmd_type=nvme
if [ "$NVB_POLL_QUEUES" -gt 0 ]; then
  step fio-block-hipri
  run_fio fio-block-hipri --filename=/dev/nvme0n1 --ioengine=io_uring --direct=1 --hipri
  step fio-passthru-hipri
  run_fio fio-passthru-hipri --filename=/dev/ng0n1 --ioengine=io_uring_cmd --cmd_type=nvme --hipri
fi
echo "fio: PASS"
