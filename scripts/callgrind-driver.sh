#!/usr/bin/env bash
# Instructions per I/O of our driver's submit + complete path (the host side
# of `nvme-bypass driver-cost`: post a batch of 4 KiB reads, ring once, reap,
# record each latency in the histogram), counted by valgrind's callgrind with
# collection toggled on exactly those two functions. The simulated controller
# runs synchronously between them and is not counted. The count is
# repeatable for the same binary and input, whatever else the machine does.
#
# Fails when the count moves more than 5% from the record in
# scripts/driver-cost.record; after a deliberate change, update the record
# with the new value and a reason (and docs/results.md).
#
#   scripts/callgrind-driver.sh [path/to/nvme-bypass]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/nvme-bypass}
IOS=${NVB_CALLGRIND_IOS:-16000}
RECORD=scripts/driver-cost.record
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
rec=$(awk -F= '/^instructions_per_io=/{print $2}' "$RECORD")
why=$(awk -F= '/^reason=/{print $2}' "$RECORD")
echo "driver submit+complete: $per instructions per I/O (QD 64, 4 KiB reads, latency record included); record: $rec ($why)"
awk -v p="$per" -v r="$rec" 'BEGIN{d=(p-r)/r; if (d>0.05||d<-0.05) exit 1}' || {
  echo "FAIL: $per instructions per I/O is more than 5% away from the record $rec in $RECORD." >&2
  echo "      If the change is deliberate, update $RECORD (value and reason) and docs/results.md." >&2
  exit 1
}
