#!/usr/bin/env bash
# Instructions per I/O, counted by valgrind's callgrind: repeatable for the
# same binary and input, whatever else the machine does. Two figures:
#
# 1. driver: our driver's submit + complete path (the host side of
#    `nvme-bypass driver-cost`: post a batch of 4 KiB reads, ring once, reap,
#    record each latency in the histogram), collection toggled on exactly
#    those two functions. The simulated controller runs synchronously
#    between them and is not counted.
# 2. loop: the whole I/O loop of `nvme-bypass bench` on the driver's thread
#    (the engine: workload, slot bookkeeping, latency groups; and the driver),
#    with the controller stepped on the same thread (--sim-sync) and not
#    counted (collection toggled off inside SimRegisters::step). Two runs of
#    different lengths, so start-up and teardown cancel out.
#
# Fails when either count moves more than 2% from its record in
# scripts/driver-cost.record (NVB_CALLGRIND_TOLERANCE, a fraction, to
# explore); after a deliberate change, update the record with the new value
# and a reason (and docs/results.md). Each figure also has a goal in the
# record: printed met or not, and once its `_goal_met=yes` is set there,
# a build above the goal fails too, so what was won is kept.
#
#   scripts/callgrind-driver.sh [path/to/nvme-bypass]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/nvme-bypass}
IOS=${NVB_CALLGRIND_IOS:-16000}
RECORD=scripts/driver-cost.record
TOL=${NVB_CALLGRIND_TOLERANCE:-0.02}
if ! command -v valgrind >/dev/null; then
  echo "installing valgrind (apt)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null
fi
[ -x "$BIN" ] || cargo build --release --quiet
OUT=$(mktemp)
valgrind --tool=callgrind --callgrind-out-file="$OUT" \
  --toggle-collect='*host_submit_batch*' --toggle-collect='*host_complete_pass*' \
  "$BIN" driver-cost --ios "$IOS" --iodepth 64 --bs 4k >/dev/null 2>"$OUT.log"
total=$(grep -oE 'Collected : [0-9,]+' "$OUT.log" | tr -d ', ' | cut -d: -f2)
rm -f "$OUT" "$OUT.log"
per=$(awk -v t="$total" -v n="$IOS" 'BEGIN{printf "%.1f", t/n}')

# The whole loop: collected instructions of a long and a short run.
loop_run() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    --toggle-collect='*engine*worker*' --toggle-collect='*SimRegisters::step*' \
    "$BIN" bench --no-c2c --sim-sync --backend sim --sim-data null --rw randread --bs 4k --iodepth 64 --ios "$1" 2>&1 >/dev/null |
    grep -oE 'Collected : [0-9,]+' | tr -d ', ' | cut -d: -f2
}
short=$(loop_run 64000)
long=$(loop_run 320000)
loop=$(awk -v a="$short" -v b="$long" 'BEGIN{printf "%.1f", (b-a)/256000}')

fail=0
rec_of() { awk -F= -v k="$1" '$1==k{print $2}' "$RECORD"; }
check() { # name value key
  local rec why goal met
  rec=$(rec_of "$3")
  why=$(rec_of "$3_reason")
  goal=$(rec_of "$3_goal")
  met=$(rec_of "$3_goal_met")
  echo "$1: $2 instructions per I/O; record: $rec ($why)"
  awk -v p="$2" -v r="$rec" -v t="$TOL" 'BEGIN{d=(p-r)/r; if (d>t||d<-t) exit 1}' || {
    echo "FAIL: $1: $2 instructions per I/O is more than $(awk -v t="$TOL" 'BEGIN{print t*100}')% away from the record $rec in $RECORD." >&2
    echo "      If the change is deliberate, update $RECORD (value and reason) and docs/results.md." >&2
    fail=1
  }
  if [ -n "$goal" ]; then
    if awk -v p="$2" -v g="$goal" 'BEGIN{exit !(p<=g)}'; then
      echo "  goal: at most $goal: met"
    elif [ "$met" = yes ]; then
      echo "FAIL: $1: $2 instructions per I/O is above the goal of $goal, which an earlier build met ($RECORD: $3_goal_met=yes)." >&2
      fail=1
    else
      echo "  goal: at most $goal: not met ($2)"
    fi
  fi
}
check "driver submit+complete (QD 64, 4 KiB reads, latency record included)" "$per" instructions_per_io
check "whole I/O loop on the driver's thread (engine + driver, bench --sim-sync, controller not counted)" "$loop" loop_instructions_per_io
exit $fail
