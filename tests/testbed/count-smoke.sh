#!/bin/sh
# nvme-bypass test bed: exact instruction counts per path (runs in the guest).
#
#   scripts/testbed/run.sh --count --poll-queues 1 --multipath N tests/testbed/count-smoke.sh [IOS]
#
# Marks counting windows for the instruction-counting plugin (run.sh
# --count; scripts/testbed/insn-count/README.md), one after another:
#   1 idle 1 s (background: timer ticks, kernel threads)
#   2 bench --backend block --ioengine io_uring, randread 4 KiB QD1, IOS I/Os
#   3 bench --backend passthru, the same
#   4 idle 1 s again (before the controller moves: after `unbind` the
#     kernel's nvme driver probes it again in the background)
#   5 bench --backend vfio (polled), the same as 2 and 3
# IOS defaults to 20000. Writes into $NVB_RESULTS: count-<window>.json (each
# bench's JSON report), count-windows.txt ("ID NAME IOS" per window),
# kallsyms.txt (/proc/kallsyms, addresses visible), bar0.txt (the
# controller's BAR0 physical base and end, from sysfs), and the plugin
# writes insn.jsonl there (host side).
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

IOS=${1:-20000}
command -v nvme-bypass >/dev/null 2>&1 || fail "no nvme-bypass binary in the share (do not use run.sh --no-bin)"
[ "${NVB_COUNT:-0}" = 1 ] || info "run.sh --count not given: the windows are marked but nobody counts them"

step setup
BDF=$(nvb_bdf) || fail "no NVMe controller (PCI class 0x010802)"
CTRL=$(nvme_ctrl_of "$BDF") || fail "$BDF is not bound to nvme (driver: $(pci_driver "$BDF"))"
BLK=/dev/${CTRL}n1
NG=/dev/ng${CTRL#nvme}n1
wait_for "$BLK" 10 || fail "$BLK missing"
wait_for "$NG" 10 || fail "$NG missing"
read -r BAR0 BAR0_END _flags < "/sys/bus/pci/devices/$BDF/resource"
echo "$BAR0 $BAR0_END" > "$NVB_RESULTS/bar0.txt"
info "$BDF BAR0 $BAR0-$BAR0_END; $BLK, $NG; $IOS I/Os per window"
: > "$NVB_RESULTS/count-windows.txt"

# settle: before a window, let the console drain (its interrupts would
# count) and the previous process's teardown finish
settle() { sleep "${COUNT_SETTLE:-2}"; }

# window ID NAME BENCH-ARGS...: one bench run marked as window ID
window() {
  _id=$1; _name=$2; shift 2
  _out=$NVB_RESULTS/count-$_id.json
  settle
  if NVB_MARKERS=$_id nvme-bypass bench --output-format json --rw randread --bs 4k --iodepth 1 \
      --ios "$IOS" "$@" > "$_out" 2> "$NVB_RESULTS/count-$_id.err"; then :; else
    cat "$NVB_RESULTS/count-$_id.err" >&2
    fail "window $_id ($_name): nvme-bypass bench $* failed"
  fi
  echo "$_id $_name $IOS" >> "$NVB_RESULTS/count-windows.txt"
  info "window $_id: $_name done"
}

idle() {
  settle
  nvme-bypass idle --seconds 1 --window "$1" || fail "nvme-bypass idle failed"
  echo "$1 idle 0" >> "$NVB_RESULTS/count-windows.txt"
}

step idle
idle 1
step block
window 2 block-io_uring --backend block --device "$BLK" --ioengine io_uring
step passthru
window 3 passthru --backend passthru --device "$NG"
step idle-again
idle 4
step vfio
nvme-bypass bind "$BDF" > "$NVB_RESULTS/count-bind.log" 2>&1 || { cat "$NVB_RESULTS/count-bind.log" >&2; fail "bind $BDF failed"; }
window 5 vfio-polled --backend vfio --device "$BDF"
nvme-bypass unbind "$BDF" > "$NVB_RESULTS/count-unbind.log" 2>&1 || { cat "$NVB_RESULTS/count-unbind.log" >&2; fail "unbind $BDF failed"; }

step symbols
# addresses are shown to root only when kptr_restrict allows it
echo 0 > /proc/sys/kernel/kptr_restrict 2>/dev/null || true
cat /proc/kallsyms > "$NVB_RESULTS/kallsyms.txt"
info "$(wc -l < "$NVB_RESULTS/kallsyms.txt") kernel symbols"
echo "count-smoke: ok"
