#!/bin/sh
# Guest script: our kernel-path engines side by side with fio, same boot,
# same device, same job, run alike; JSON outputs in $NVB_RESULTS/fio-compare/,
# the table from the host: scripts/fio-table.py DIR.
#   jobs: 4 KiB randread QD 32; the classic --rw=randrw --rwmixread=75 --bs=4k --iodepth=64
#   pairs: block/io_uring vs fio io_uring; block/libaio vs fio libaio;
#          passthru vs fio io_uring_cmd (cmd_type=nvme)
#
# What is made alike (settings.txt records it, the table prints it):
# * batching: fio is run with ours. FIO_BATCH=depth (default): up to
#   iodepth I/Os per submitting system call and every completion that is
#   there reaped at once (fio --iodepth_batch_submit=QD
#   --iodepth_batch_complete_min=1 --iodepth_batch_complete_max=QD
#   --iodepth_low=QD; ours --batch QD). FIO_BATCH=1: one I/O per
#   submitting call (fio --iodepth_batch_submit=1, the same reaping; ours
#   --batch 1). Both tools then refill every free slot before they wait, and
#   wait for one completion only when none is there.
# * the measured interval: --ramp_time / --ramp-time FIO_RAMP (default 1 s)
#   on both, then FIO_RUNTIME (default 3 s). CPU per I/O is the I/O
#   thread's user + system time (getrusage RUSAGE_THREAD) over that
#   interval, as each tool reports it (jobs[].usr_cpu, sys_cpu,
#   job_runtime): start-up, ramp and the drain after it are outside for
#   both. fio also gets --norandommap (ours keeps no map of blocks done).
# * order: the timed runs go fio, ours, ours, fio (FIO_REPEAT=2, default),
#   so a drift of the machine's speed weighs on both alike.
# * system calls: separate, traced runs (FIO_COUNT_RUNTIME, default 1 s,
#   after the same ramp), so tracing does not slow the timed ones. A
#   tracefs hist trigger on raw_syscalls:sys_enter counts every system call
#   per thread and call; one on nvme:nvme_complete_rq counts the commands
#   the controller completed, per queue. Per I/O = the tool's I/O thread's
#   calls over its whole life / the I/O-queue completions while it ran.
# Settings: FIO_BATCH, FIO_RAMP, FIO_RUNTIME, FIO_COUNT_RUNTIME, FIO_REPEAT
# in the environment, or as arguments: --batch, --ramp, --runtime,
# --count-runtime, --repeat.
. "$(dirname "$0")/lib.sh"
OUT=$NVB_RESULTS/fio-compare
mkdir -p "$OUT"
T=${FIO_RUNTIME:-3}
R=${FIO_RAMP:-1}
TC=${FIO_COUNT_RUNTIME:-1}
REPEAT=${FIO_REPEAT:-2}
BATCH=${FIO_BATCH:-depth}
# The same settings as arguments (run.sh ... fio-compare.sh --batch 1):
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || fail "$1 needs a value"
  case "$1" in
    --batch) BATCH=$2 ;;
    --runtime) T=$2 ;;
    --ramp) R=$2 ;;
    --count-runtime) TC=$2 ;;
    --repeat) REPEAT=$2 ;;
    *) fail "unknown argument '$1' (fio-compare.sh [--batch depth|1] [--runtime S] [--ramp S] [--count-runtime S] [--repeat 1|2])" ;;
  esac
  shift 2
done
case "$BATCH" in depth|1) ;; *) fail "--batch (FIO_BATCH) is depth or 1, not '$BATCH'" ;; esac
case "$REPEAT" in 1|2) ;; *) fail "--repeat (FIO_REPEAT) is 1 or 2, not '$REPEAT'" ;; esac
command -v fio >/dev/null || fail "no fio in the guest"
step fio-compare-setup

TR=/sys/kernel/tracing
[ -d "$TR/events" ] || mount -t tracefs tracefs "$TR" 2>/dev/null || fail "cannot mount tracefs on $TR"
SYS=$TR/events/raw_syscalls/sys_enter/trigger
NVE=$TR/events/nvme/nvme_complete_rq/trigger
[ -w "$SYS" ] || fail "no $SYS (kernel without syscall trace events?)"
[ -w "$NVE" ] || fail "no $NVE (nvme module without trace events?)"
HSYS='hist:keys=common_pid.execname,id.syscall:vals=hitcount:size=8192'
HNVE='hist:keys=qid:vals=hitcount'
# A run that fails leaves no trigger behind to trace the scripts after it.
untrace() { echo "!$HSYS" >> "$SYS" 2>/dev/null; echo "!$HNVE" >> "$NVE" 2>/dev/null; return 0; }
trap untrace EXIT
fio --version > "$OUT/fio-version.txt" 2>&1
{
  echo "batch=$BATCH"
  echo "ramp_s=$R"
  echo "runtime_s=$T"
  echo "count_runtime_s=$TC"
  echo "repeat=$REPEAT"
  echo "fio=$(cat "$OUT/fio-version.txt")"
  echo "kernel=$(uname -r)"
} > "$OUT/settings.txt"

# batching QD: the fio options and ours for FIO_BATCH
fio_batch() {
  if [ "$BATCH" = 1 ]; then s=1; else s=$1; fi
  echo "--iodepth_batch_submit=$s --iodepth_batch_complete_min=1 --iodepth_batch_complete_max=$1 --iodepth_low=$1"
}
nvb_batch() { if [ "$BATCH" = 1 ]; then echo "--batch 1"; else echo "--batch $1"; fi; }

# run_fio OUTFILE RUNTIME ARGS / run_nvb OUTFILE RUNTIME ARGS: one run, JSON to OUTFILE
# fio reads a time as a whole number ("0.5" is 0 s): both go to it in ms.
ms() { awk -v s="$1" 'BEGIN { printf "%dms", s * 1000 + 0.5 }'; }
for _t in "$T" "$R" "$TC"; do
  case "$_t" in ''|*[!0-9.]*) fail "times are seconds, as a plain number (--runtime 2, --ramp 0.5), not '$_t'" ;; esac
done
run_fio() {
  # shellcheck disable=SC2086
  fio --name="$name" --ramp_time="$(ms "$R")" --runtime="$(ms "$2")" --time_based --norandommap --output-format=json $3 > "$1" 2>"$1.err" \
    || fail "fio $name: $(tail -3 "$1.err")"
}
run_nvb() {
  # shellcheck disable=SC2086
  nvme-bypass bench --ramp-time "$R" --runtime "$2" --output-format json $3 > "$1" 2>"$1.err" \
    || fail "nvme-bypass $name: $(tail -3 "$1.err")"
}
# counted TOOL ARGS: a traced run of TOOL (fio or nvb); the hists beside it
counted() {
  echo "$HSYS" >> "$SYS" || fail "cannot set the system call hist trigger"
  echo "$HNVE" >> "$NVE" || fail "cannot set the nvme completion hist trigger"
  "run_$1" "$OUT/$name.$1.count.json" "$TC" "$2"
  cat "${SYS%trigger}hist" > "$OUT/$name.$1.syscalls.hist"
  cat "${NVE%trigger}hist" > "$OUT/$name.$1.nvme.hist"
  untrace
}

run_pair() { # name qd fio-job-args nvb-job-args
  name=$1; qd=$2
  fa="$3 $(fio_batch "$qd")"; ba="$4 $(nvb_batch "$qd")"
  step "fio-compare-$name"
  echo "fio $fa" > "$OUT/$name.args"
  echo "nvme-bypass bench $ba" >> "$OUT/$name.args"
  run_fio "$OUT/$name.fio.1.json" "$T" "$fa"
  run_nvb "$OUT/$name.nvb.1.json" "$T" "$ba"
  if [ "$REPEAT" = 2 ]; then
    run_nvb "$OUT/$name.nvb.2.json" "$T" "$ba"
    run_fio "$OUT/$name.fio.2.json" "$T" "$fa"
  fi
  counted fio "$fa"
  counted nvb "$ba"
  info "$name done"
}

# --direct=1 for the block device engines; io_uring_cmd has no such notion.
RR="--rw=randread --bs=4k --iodepth=32"
RB="--rw randread --bs 4k --iodepth 32"
MX="--rw=randrw --rwmixread=75 --bs=4k --iodepth=64"
MB="--rw randrw --rwmixread 75 --bs 4k --iodepth 64 --allow-write"
run_pair randread-io_uring 32 "--ioengine=io_uring --direct=1 --filename=/dev/nvme0n1 $RR" "--backend block --device /dev/nvme0n1 --ioengine io_uring $RB"
run_pair randread-libaio 32 "--ioengine=libaio --direct=1 --filename=/dev/nvme0n1 $RR" "--backend block --device /dev/nvme0n1 --ioengine libaio $RB"
run_pair randread-passthru 32 "--ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 $RR" "--backend passthru --device /dev/ng0n1 $RB"
run_pair randrw-io_uring 64 "--ioengine=io_uring --direct=1 --filename=/dev/nvme0n1 $MX" "--backend block --device /dev/nvme0n1 --ioengine io_uring $MB"
run_pair randrw-libaio 64 "--ioengine=libaio --direct=1 --filename=/dev/nvme0n1 $MX" "--backend block --device /dev/nvme0n1 --ioengine libaio $MB"
run_pair randrw-passthru 64 "--ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 $MX" "--backend passthru --device /dev/ng0n1 $MB"
info "all pairs ran; table: scripts/fio-table.py $OUT"
