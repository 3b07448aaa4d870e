#!/bin/sh
# Guest script: our kernel-path engines side by side with fio, same boot,
# same device, same job. For each pair, fio first then nvme-bypass, each with
# /proc/stat sampled around it; JSON outputs in $NVB_RESULTS/fio-compare/.
# The host builds the table (scripts/fio-table.py).
#   jobs: 4 KiB randread QD 32; the classic --rw=randrw --rwmixread=75 --bs=4k --iodepth=64
#   pairs: block/io_uring vs fio io_uring; block/libaio vs fio libaio;
#          passthru vs fio io_uring_cmd (cmd_type=nvme)
. "$(dirname "$0")/lib.sh"
OUT=$NVB_RESULTS/fio-compare
mkdir -p "$OUT"
T=${FIO_RUNTIME:-3}
command -v fio >/dev/null || fail "no fio in the guest"
step fio-compare

stat_cpu() { head -1 /proc/stat; }

run_pair() { # name job-args(fio) bench-args
  name=$1; fjob=$2; bjob=$3
  stat_cpu > "$OUT/$name.fio.stat0"
  # shellcheck disable=SC2086
  fio --name="$name" --runtime="$T" --time_based --output-format=json $fjob > "$OUT/$name.fio.json" 2>"$OUT/$name.fio.err" \
    || fail "fio $name: $(tail -3 "$OUT/$name.fio.err")"
  stat_cpu > "$OUT/$name.fio.stat1"
  stat_cpu > "$OUT/$name.nvb.stat0"
  # shellcheck disable=SC2086
  nvme-bypass bench --runtime "$T" --output-format json $bjob > "$OUT/$name.nvb.json" 2>"$OUT/$name.nvb.err" \
    || fail "nvme-bypass $name: $(tail -3 "$OUT/$name.nvb.err")"
  stat_cpu > "$OUT/$name.nvb.stat1"
  info "$name done"
}

# --direct=1 for the block device engines; io_uring_cmd has no such notion.
RR="--rw=randread --bs=4k --iodepth=32"
RB="--rw randread --bs 4k --iodepth 32"
MX="--rw=randrw --rwmixread=75 --bs=4k --iodepth=64"
MB="--rw randrw --rwmixread 75 --bs 4k --iodepth 64 --allow-write"
run_pair randread-io_uring "--ioengine=io_uring --direct=1 --filename=/dev/nvme0n1 $RR" "--backend block --device /dev/nvme0n1 --ioengine io_uring $RB"
run_pair randread-libaio "--ioengine=libaio --direct=1 --filename=/dev/nvme0n1 $RR" "--backend block --device /dev/nvme0n1 --ioengine libaio $RB"
run_pair randread-passthru "--ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 $RR" "--backend passthru --device /dev/ng0n1 $RB"
run_pair randrw-io_uring "--ioengine=io_uring --direct=1 --filename=/dev/nvme0n1 $MX" "--backend block --device /dev/nvme0n1 --ioengine io_uring $MB"
run_pair randrw-libaio "--ioengine=libaio --direct=1 --filename=/dev/nvme0n1 $MX" "--backend block --device /dev/nvme0n1 --ioengine libaio $MB"
run_pair randrw-passthru "--ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 $MX" "--backend passthru --device /dev/ng0n1 $MB"
info "all pairs ran; table: scripts/fio-table.py $OUT"
