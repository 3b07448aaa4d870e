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
[ "$(pci_driver "$BDF")" = nvme ] || fail "controller $BDF ended on $(pci_driver "$BDF"), not nvme"
wait_for /dev/nvme0n1 10 || fail "/dev/nvme0n1 did not come back"
dd if=/dev/nvme0n1 of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null || fail "/dev/nvme0n1 is not readable after compare"
info "controller back on nvme, /dev/nvme0n1 readable"
[ -s "$NVB_RESULTS/compare/compare.json" ] || fail "no compare.json"
exit "$rc"
