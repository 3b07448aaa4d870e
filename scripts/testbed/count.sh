#!/usr/bin/env bash
# Exact instructions per I/O of every compare row, by path and by kernel
# layer: one test-bed boot under the counting plugin (run.sh --count), then
# `nvme-bypass count-report` on the host. Prints the table; leaves
# count.txt, count.json and instructions_per_io_by_layer.svg in
# RESULTS/count, beside the guest's files.
#
#   scripts/testbed/count.sh [--results DIR] [--bin STATIC_BIN] [compare options...]
#
# Every figure is MEASURED on an EMULATED machine (QEMU TCG): instructions
# of an emulated CPU, exact and repeatable, not time (docs/methodology.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RESULTS=$ROOT/target/testbed/count-$(date +%Y%m%d-%H%M%S)
BIN_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --results) RESULTS=$2; shift 2;;
    --bin) BIN_ARGS=(--bin "$2"); shift 2;;
    *) break;;
  esac
done
# tsc=reliable: the guest's clock is read in user mode through the vDSO, as
# on a real machine with an invariant TSC; the kernel's default under TCG
# (no invariant TSC flag) is a clocksource read by a system call, which put
# a system call in every clock read of a polling loop (docs/methodology.md).
scripts/testbed/run.sh --count --multipath N --poll-queues 1 --timeout 1200 --quiet --results "$RESULTS" "${BIN_ARGS[@]}" \
  --extra-append "tsc=reliable clocksource=tsc" \
  tests/testbed/count.sh "$@"
HOSTBIN=${NVB_HOST_BIN:-$ROOT/target/release/nvme-bypass}
[ -x "$HOSTBIN" ] || cargo build --release --quiet
G=$RESULTS/results
"$HOSTBIN" count-report --compare "$G/count-compare/compare.json" --windows "$RESULTS/insn.jsonl" \
  --kallsyms "$G/kallsyms.txt" --binary "$RESULTS/bin/nvme-bypass" --bar0 "$(cut -d' ' -f1 "$G/bar0.txt")" \
  --idle-seconds "$(cat "$G/idle-seconds.txt")" --out "$RESULTS/count"
# Our tool beside fio on the kernel engines (the boot's "tools" windows).
python3 scripts/count-vs-fio.py "$RESULTS" --json "$RESULTS/count/vs-fio.json" | tee "$RESULTS/count/vs-fio.txt"
