#!/bin/sh
# nvme-bypass test bed: the seed's three fio jobs as one job file, run by
# fio and by `nvme-bypass fio` on every path (runs in the guest, which has
# fio). Boot it with a device limit, so that the device and not the
# emulated CPU sets the pace, as a real SSD does for a tool cheap enough:
#
#   scripts/testbed/run.sh --iops-limit 2000 tests/testbed/fio-seed.sh   # 2000 reads + 2000 writes a second
#
# The jobs: randrw 75/25, randread, randwrite; iodepth 64, 4 KiB,
# runtime=1 and ramp_time=0.5, which fio reads as no ramp (a time is a
# whole number: "0.5" is 0), and so do we: each job is measured from its
# first I/O, and opens on the throttle's idle burst (QEMU lets a tenth of
# a second's worth through at once). Block (ioengine=libaio, direct=1, /dev/nvme0n1) and
# passthru (io_uring_cmd, cmd_type=nvme, /dev/ng0n1): fio and ours
# alternately, three rounds; vfio (ioengine=nvme-bypass-vfio, the PCI
# address with escaped colons): ours only, three rounds, no fio engine
# drives it. The host's scripts/fio-seed-table.py compares IOPS. Writes
# every output to $NVB_RESULTS/fio-seed/.
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

fio_setup fio-seed
info "device limit: ${NVB_IOPS_LIMIT:-none} I/Os per second (run.sh --iops-limit)"

seed_file() { # seed_file ENGINE FILENAME EXTRA...
  printf '[global]\nioengine=%s\nfilename=%s\nbs=4k\niodepth=64\nsize=64M\nruntime=1\ntime_based=1\nramp_time=0.5\nrandrepeat=1\nrwmixread=75\n' "$1" "$2"
  shift 2
  for x in "$@"; do printf '%s\n' "$x"; done
  printf '[randrw]\nrw=randrw\n[randread]\nstonewall\nrw=randread\n[randwrite]\nstonewall\nrw=randwrite\n'
}

# The kernel's counters around each run (page faults, compaction, reclaim,
# interrupts), so a run that read low can be told apart by what the
# kernel did during it: vmstat.NAME.{before,after}, interrupts.NAME.*.
snap() { # snap NAME before|after
  cat /proc/vmstat > "vmstat.$1.$2" 2>/dev/null || true
  cat /proc/interrupts > "interrupts.$1.$2" 2>/dev/null || true
}
run_snap() { # run_snap NAME CMD...: check_cmd NAME CMD..., between snapshots
  n=$1; snap "$n" before; check_cmd "$@"; snap "$n" after
}

step seed-jobs
seed_file libaio "$NS" direct=1 > seed.block.fio
# (a character device has no O_DIRECT: fio refuses direct=1 on it)
seed_file io_uring_cmd "$NG" cmd_type=nvme > seed.passthru.fio
for round in 1 2 3; do
  for path in block passthru; do
    run_snap "seed-$path-fio-$round" fio --output-format=json --output="seed.$path.fio.$round.json" "seed.$path.fio"
    run_snap "seed-$path-ours-$round" nvme-bypass fio --output-format=json --output="seed.$path.ours.$round.json" "seed.$path.fio"
  done
done

step seed-vfio
bind_vfio "$BDF"
ESC=$(echo "$BDF" | sed 's/:/\\:/g')
seed_file nvme-bypass-vfio "$ESC" > seed.vfio.fio
for round in 1 2 3; do
  run_snap "seed-vfio-ours-$round" nvme-bypass fio --output-format=json --output="seed.vfio.ours.$round.json" seed.vfio.fio
done
bind_nvme "$BDF"
info "fio-seed: all runs done"
