#!/bin/sh
# Guest script: the main job in the emulated test bed. Runs
# `nvme-bypass compare` on the emulated controller (all paths, one boot),
# leaves table.txt and compare.json in $NVB_RESULTS/compare, then checks
# that the controller is back on nvme and its namespace readable.
# Arguments are passed on to `nvme-bypass compare`.
. "$(dirname "$0")/lib.sh"

BDF=$(nvb_bdf) || fail "no NVMe controller in the guest"
step compare
info "controller $BDF on $(pci_driver "$BDF"); poll_queues=$(cat /sys/module/nvme/parameters/poll_queues 2>/dev/null) multipath=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)"
rc=0
# stderr to a file: progress goes there (not a terminal, so no status line)
nvme-bypass compare --device "$BDF" --out "$NVB_RESULTS/compare" "$@" 2>"$NVB_RESULTS/compare.stderr" || rc=$?
cat "$NVB_RESULTS/compare.stderr"
echo "compare exit code: $rc"

step restored
expect_on_nvme "$BDF" compare
[ -s "$NVB_RESULTS/compare/compare.json" ] || fail "no compare.json"
exit "$rc"
