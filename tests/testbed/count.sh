#!/bin/sh
# Guest script: exact instruction counts of every compare row (run by
# scripts/testbed/run.sh --count, which loads the counting plugin; see
# scripts/testbed/insn-count/README.md). Marks, one after another:
#   window 9999         the idle background, $IDLE seconds, before anything
#                       else (count-report subtracts it per second)
#   window 9998         the busy background: a user-mode spin, $IDLE seconds
#                       (subtracted per CPU second of a row's threads)
#   window i            compare row i's measured interval (NVB_MARKERS=0)
#   window 10000 + i    row i's empty-poll calibration (the engine polls its
#                       drained queue 10000 times)
#   window 20001 on     fio and our drop-in, the same jobs, two lengths each
#                       (tools.tsv lists them; scripts/count-vs-fio.py)
# and leaves in $NVB_RESULTS: count-compare/ (table.txt, compare.json),
# kallsyms.txt and bar0.txt, which `nvme-bypass count-report` reads on the
# host with the plugin's insn.jsonl. Arguments go to `nvme-bypass compare`.
. "$(dirname "$0")/lib.sh"

IDLE=4
# Every row's thread runs on this CPU (compare --cpus), and a vfio queue's
# interrupt is steered to it: where the scheduler put the thread and where
# the interrupt landed differed between boots, and a wake-up across CPUs
# costs both CPUs an exit from idle and an inter-processor interrupt.
CPU=1
BDF=$(nvb_bdf) || fail "no NVMe controller in the guest"
[ "${NVB_COUNT:-0}" = 1 ] || info "run.sh --count not given: the windows are marked but nobody counts them"

step idle
read -r BAR0 BAR0_END _flags < "/sys/bus/pci/devices/$BDF/resource"
echo "$BAR0 $BAR0_END" > "$NVB_RESULTS/bar0.txt"
echo "$IDLE" > "$NVB_RESULTS/idle-seconds.txt"
# Quiet from here to the last window: the heartbeat prints nothing and the
# step watchdog looks every 60 s (lib.sh), so neither lands in a window at
# random (a console line or a wake-up is tens of thousands of instructions:
# several per I/O on a vfio row, and a different number in the idle window
# of each boot). The wait lets the naps already started run out and the
# boot's own work settle before the background is measured.
: > /run/nvb-quiet
sleep 6
nvme-bypass idle --seconds "$IDLE" --window 9999 || fail "nvme-bypass idle failed"
# The busy background: one vCPU spinning in user mode as long (a busy vCPU
# takes the timer ticks an idle one skips; count-report adds them per CPU
# second of each row's threads).
# On CPU 1, where the rows' threads run (below).
PIN=
if command -v taskset > /dev/null 2>&1; then PIN="taskset -c $CPU"; fi
$PIN nvme-bypass idle --spin --seconds "$IDLE" --window 9998 || fail "nvme-bypass idle --spin failed"

step compare
rc=0
# Fixed batches of 8 completions: each pass of every path does the same work
# whatever the emulated device's speed (docs/methodology.md, "Fixed batches").
NVB_MARKERS=0 nvme-bypass compare --device "$BDF" --out "$NVB_RESULTS/count-compare" --batch-complete 8 --cpus "$CPU" "$@" 2>"$NVB_RESULTS/count-compare.stderr" || rc=$?
cat "$NVB_RESULTS/count-compare.stderr"
echo "compare exit code: $rc"
expect_on_nvme "$BDF" compare
[ -s "$NVB_RESULTS/count-compare/compare.json" ] || fail "no compare.json"

step tools
# Our fio drop-in and fio itself, the same job with the same batching on
# each kernel engine, each run twice (2048 and 6144 I/Os) inside a counting
# window of its own (window 20001 on; without NVB_MARKERS our drop-in marks
# no window of its own). The host differences each pair (scripts/count-vs-fio.py):
# user instructions and system calls per I/O, start-up and exit cancelled.
CTRL=$(nvme_ctrl_of "$BDF") || fail "$BDF is not bound to nvme after compare"
NS=/dev/${CTRL}n1
NG=/dev/ng${CTRL#nvme}n1
mkdir -p "$NVB_RESULTS/tools"
: > "$NVB_RESULTS/tools.tsv"
id=20000
for eng in io_uring libaio io_uring_cmd; do
  if [ "$eng" = io_uring_cmd ]; then FILE=$NG; EXTRA=--cmd_type=nvme; else FILE=$NS; EXTRA=--direct=1; fi
  for tool in fio ours; do
    if [ "$tool" = fio ]; then CMD=fio; else CMD="nvme-bypass fio"; fi
    # An unmarked run first: the tool's first run in the boot pages its
    # binary and libraries in from the share, which belongs to neither run.
    # shellcheck disable=SC2086
    $CMD --name=w --ioengine="$eng" $EXTRA --filename="$FILE" --rw=randread --bs=4k --iodepth=32 --norandommap --size=64M --io_size=256k \
      --output-format=json --output=/dev/null > /dev/null || fail "$tool $eng warm-up failed"
    for n in 2048 6144; do
      id=$((id + 1))
      out=$NVB_RESULTS/tools/$tool.$eng.$n.json
      # shellcheck disable=SC2086
      nvme-bypass window --window "$id" -- $CMD --name=c --ioengine="$eng" $EXTRA --filename="$FILE" \
        --rw=randread --bs=4k --iodepth=32 --iodepth_batch_submit=8 --iodepth_batch_complete_min=8 --iodepth_batch_complete_max=8 \
        --norandommap --size=64M --io_size=$((n * 4))k --output-format=json --output="$out" > /dev/null || fail "$tool $eng $n failed"
      printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$tool" "$eng" "$n" "tools/$tool.$eng.$n.json" >> "$NVB_RESULTS/tools.tsv"
    done
  done
done
info "$(wc -l < "$NVB_RESULTS/tools.tsv") tool windows"

rm -f /run/nvb-quiet

step symbols
# Addresses are shown to root only when kptr_restrict allows it.
echo 0 > /proc/sys/kernel/kptr_restrict 2>/dev/null || true
cat /proc/kallsyms > "$NVB_RESULTS/kallsyms.txt"
info "$(wc -l < "$NVB_RESULTS/kallsyms.txt") kernel symbols"
exit "$rc"
