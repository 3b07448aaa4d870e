#!/bin/sh
# Guest script: a short `nvme-bypass sweep` on the emulated controller
# (block, passthru and vfio; iodepth 1,8,32; bs 4k,64k; 1 s per point),
# leaving sweep.json, table.txt and the SVG charts in $NVB_RESULTS/sweep,
# then checks the outputs and that the controller is back on nvme with its
# namespace readable. Arguments replace the default sweep options, e.g.
#   scripts/testbed/run.sh --multipath N --poll-queues 1 tests/testbed/sweep.sh --iodepth 1,32 --bs 4k
. "$(dirname "$0")/lib.sh"

BDF=$(nvb_bdf) || fail "no NVMe controller in the guest"
OUT=$NVB_RESULTS/sweep
step sweep
info "controller $BDF on $(pci_driver "$BDF"); poll_queues=$(cat /sys/module/nvme/parameters/poll_queues 2>/dev/null) multipath=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)"
if [ $# -eq 0 ]; then
  set -- --paths block,passthru,vfio --iodepth 1,8,32 --bs 4k,64k --numjobs 1 --runtime 1 --ramp-time 0.2
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
for svg in iops_per_core_vs_qd.svg latency_percentiles.svg throughput_vs_bs.svg; do
  [ -s "$OUT/$svg" ] || fail "no $svg in $OUT"
  grep -q '</svg>' "$OUT/$svg" || fail "$svg is not a complete SVG"
  grep -q 'EMULATED' "$OUT/$svg" || fail "$svg does not say EMULATED"
  for p in block/io_uring passthru vfio; do
    grep -qx "$p" "$OUT/$svg" || fail "$svg has no legend entry for $p"   # plotters puts text on a line of its own
  done
done
info "sweep.json and 3 charts in $OUT"
exit "$rc"
