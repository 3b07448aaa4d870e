#!/bin/sh
# Guest script: a short `nvme-bypass sweep` on the emulated controller
# (block, passthru and vfio; iodepth 1,8,32; bs 4k,64k; 1 s per run, every
# point twice), leaving sweep.json, table.txt and the four SVG charts in
# $NVB_RESULTS/sweep, then checks the outputs (every run in the JSON, the
# figures named measured or modelled, polled vfio's modelled ceiling dashed
# beside its measured line, the latency-throughput curve) and that the
# controller is back on nvme with its namespace readable. Arguments replace
# the default sweep options, e.g.
#   scripts/testbed/run.sh --multipath N --poll-queues 1 tests/testbed/sweep.sh --iodepth 1,32 --bs 4k
. "$(dirname "$0")/lib.sh"

BDF=$(nvb_bdf) || fail "no NVMe controller in the guest"
OUT=$NVB_RESULTS/sweep
step sweep
info "controller $BDF on $(pci_driver "$BDF"); poll_queues=$(cat /sys/module/nvme/parameters/poll_queues 2>/dev/null) multipath=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)"
if [ $# -eq 0 ]; then
  set -- --paths block,passthru,vfio --iodepth 1,8,32 --bs 4k,64k --numjobs 1 --runtime 1 --ramp-time 0.2 --repeat 2
fi
rc=0
# stderr to a file: progress goes there (not a terminal, so no status line)
nvme-bypass sweep --device "$BDF" --out "$OUT" "$@" 2>"$NVB_RESULTS/sweep.stderr" || rc=$?
cat "$NVB_RESULTS/sweep.stderr"
echo "sweep exit code: $rc"

step restored
expect_on_nvme "$BDF" sweep

step outputs
[ -s "$OUT/sweep.json" ] || fail "no sweep.json in $OUT"
grep -q '"emulated": "QEMU' "$OUT/sweep.json" || fail "sweep.json does not say the figures are emulated"
grep -q '"modelled_ceiling_iops_per_core"' "$OUT/sweep.json" || fail "sweep.json has no modelled ceiling"
grep -q '"measured_iops_per_busy_core"' "$OUT/sweep.json" || fail "sweep.json has no measured IOPS per busy core"
repeat=$(sed -n 's/^  "repeat": \([0-9]*\),*$/\1/p' "$OUT/sweep.json")
points=$(grep -c '^      "path": ' "$OUT/sweep.json")
runs=$(grep -c '^          "round": ' "$OUT/sweep.json")
[ -n "$repeat" ] && [ "$points" -gt 0 ] || fail "sweep.json: no repeat count or no points"
[ "$runs" -eq $((points * repeat)) ] || fail "sweep.json has $runs runs, want $points points x $repeat"
info "sweep.json: $points points x $repeat runs, every run kept"
grep -q '^EMULATED: ' "$OUT/table.txt" || fail "table.txt does not say EMULATED"
grep -q ' emulated ' "$OUT/table.txt" || fail "table.txt's device column does not say emulated"
grep -q 'modelled' "$OUT/table.txt" || fail "table.txt does not say which figures are modelled"
for svg in iops_per_core_vs_qd.svg latency_percentiles.svg throughput_vs_bs.svg latency_vs_iops.svg; do
  [ -s "$OUT/$svg" ] || fail "no $svg in $OUT"
  grep -q '</svg>' "$OUT/$svg" || fail "$svg is not a complete SVG"
  grep -q 'EMULATED' "$OUT/$svg" || fail "$svg does not say EMULATED"
  grep -q '^measured' "$OUT/$svg" || fail "$svg has no key saying measured"
  for p in block/io_uring passthru vfio; do
    grep -qx "$p" "$OUT/$svg" || fail "$svg has no legend entry for $p"   # plotters puts text on a line of its own
  done
done
# Colours in path order (block/io_uring, passthru, vfio); measured lines are
# 2 px wide, modelled (dashed) ones 3 px. Only vfio polls here.
IPC=$OUT/iops_per_core_vs_qd.svg
grep -q '^modelled ceiling' "$IPC" || fail "the IOPS-per-core chart has no key for the modelled ceiling"
for c in 1F77B4 FF7F0E 2CA02C; do
  grep -q "stroke=\"#$c\" stroke-width=\"2\"" "$IPC" || fail "the IOPS-per-core chart has no measured line in #$c"
done
dashes=$(grep -c 'stroke="#2CA02C" stroke-width="3"' "$IPC")
[ "$dashes" -ge 3 ] || fail "the IOPS-per-core chart has no dashed modelled line for polled vfio ($dashes dashes)"
if grep -q 'stroke="#1F77B4" stroke-width="3"\|stroke="#FF7F0E" stroke-width="3"' "$IPC"; then
  fail "the IOPS-per-core chart draws a modelled ceiling for an interrupt-driven path"
fi
for qd in 1 8 32; do
  [ "$(grep -cx "QD $qd" "$OUT/latency_vs_iops.svg")" -eq 3 ] || fail "latency_vs_iops.svg does not label QD $qd once per path"
done
info "sweep.json and 4 charts in $OUT"
exit "$rc"
