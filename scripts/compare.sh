#!/usr/bin/env bash
# The main job: one namespace through every path, side by side.
#
#   scripts/compare.sh                          # no NVMe at hand: the emulated test bed
#   scripts/compare.sh --device 0000:01:00.0    # a spare NVMe controller on this machine
#
# Any other options go to `nvme-bypass compare` (see --help); without a
# --repeat of their own it runs three rounds (medians with ranges, and a
# noise control; the instruction-counting boot runs one). Results (the
# table, the JSON with every figure, the sweep's charts) land in
# results/<timestamp>/. On the test bed every figure is labelled emulated.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${NVB_OUT:-$ROOT/results/$(date +%Y%m%d-%H%M%S)}
DEVICE=
ARGS=()
COUNT_ARGS=()  # the counting boot runs one round: one counting window per row
REPEAT=        # set when --repeat is given; else three rounds (medians, ranges, a noise control)
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=$2; shift 2;;
    --device=*) DEVICE=${1#--device=}; shift;;
    --repeat) ARGS+=("$1" "$2"); REPEAT=1; shift 2;;
    --repeat=*) ARGS+=("$1"); REPEAT=1; shift;;
    *) ARGS+=("$1"); COUNT_ARGS+=("$1"); shift;;
  esac
done
mkdir -p "$OUT"

if [ -n "$DEVICE" ]; then
  # A real controller on this machine. compare refuses a controller whose
  # namespaces are mounted, held or swap, and gives it back to nvme at the end.
  cargo build --release --quiet
  [ -n "$REPEAT" ] || ARGS=(--repeat 3 ${ARGS[@]+"${ARGS[@]}"})
  sudo "$ROOT/target/release/nvme-bypass" compare --device "$DEVICE" --out "$OUT" "${ARGS[@]}"
  sudo "$ROOT/target/release/nvme-bypass" sweep --device "$DEVICE" --out "$OUT/sweep" --paths block,passthru,vfio \
    --iodepth 1,4,16,32,64,128 --bs 4k,16k,64k,128k --runtime 3
  echo "results: $OUT"
  exit 0
fi

echo "No --device given: running the comparison in the emulated test bed (QEMU, software emulation)." >&2
echo "Every figure below is EMULATED: ratios between paths in one boot, not device speeds." >&2
RESULTS=$OUT/testbed
# multipath=N gives a plain blk-mq /dev/nvme0n1 with a choice of I/O
# scheduler; one poll queue lets the polled (IOPOLL) variants run.
# Three rounds of every row (main.sh's --repeat 3) take about three times
# one round's time: the compare step gets 15 minutes.
scripts/testbed/run.sh --multipath N --poll-queues 1 --timeout 1800 --step-timeout 900 --stall-timeout 900 --results "$RESULTS" --quiet \
  tests/testbed/main.sh --runtime "${NVB_RUNTIME:-3}" --ramp-time 1 --iodepth 32 ${ARGS[@]+"${ARGS[@]}"}
cp "$RESULTS/results/compare/table.txt" "$RESULTS/results/compare/compare.json" "$OUT/"
mkdir -p "$OUT/sweep" && cp "$RESULTS"/results/sweep/* "$OUT/sweep/"
cat "$OUT/table.txt"
python3 scripts/check-compare.py "$OUT/compare.json"
# The same rows once more, in a second boot under the instruction-counting
# plugin: exact instructions per I/O by path and kernel layer, which hold on
# any machine where the timed figures above do not (docs/methodology.md).
echo >&2
echo "Counting instructions: the same comparison in a second boot under the counting plugin (measured, emulated)." >&2
scripts/testbed/count.sh --results "$OUT/testbed-count" --bin "$RESULTS/bin/nvme-bypass" \
  --ios "${NVB_COUNT_IOS:-32000}" --runtime 60 --ramp-time 0 --iodepth 32 ${COUNT_ARGS[@]+"${COUNT_ARGS[@]}"} > "$OUT/count.txt"
cp "$OUT"/testbed-count/count/count.json "$OUT"/testbed-count/count/instructions_per_io_by_layer.svg "$OUT/"
cp "$OUT"/testbed-count/results/count-compare/compare.json "$OUT/count-compare.json"
cp "$OUT/instructions_per_io_by_layer.svg" "$OUT/sweep/"
echo
cat "$OUT/count.txt"
python3 scripts/check-compare.py "$OUT/count-compare.json" --count "$OUT/count.json"
echo "sweep: $(ls "$OUT"/sweep/*.svg | wc -l) charts in $OUT/sweep (open the .svg files in a browser)"
echo "instructions per I/O by layer: $OUT/instructions_per_io_by_layer.svg; every figure in $OUT/count.json"
echo "results: $OUT (console log and guest files in $RESULTS)"
