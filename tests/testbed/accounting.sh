#!/bin/sh
# nvme-bypass test bed: what a run says about its own measurement (runs in
# the guest).
#
#   scripts/testbed/run.sh [--bin PATH] tests/testbed/accounting.sh
#
# 1. the guest kernel's configuration is in the initramfs
#    (/boot/config-<release>) and says CONFIG_IRQ_TIME_ACCOUNTING;
# 2. an interrupt-driven block run with two threads reports
#    irq_time_accounting as the configuration says, and, when it is off,
#    says in its text that the kernel CPU is a lower bound;
# 3. it names the clock and the kernel's clocksource, and its system-wide
#    interval covers at least its longest thread's;
# 4. a polled vfio run is not told its kernel CPU is a lower bound.
# Writes $NVB_RESULTS/accounting-*.json and .txt.
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

command -v nvme-bypass >/dev/null 2>&1 || fail "no nvme-bypass binary in the share (do not use run.sh --no-bin)"

step config
CONFIG=/boot/config-$(uname -r)
[ -f "$CONFIG" ] || fail "$CONFIG missing from the initramfs (scripts/testbed/build-initramfs.sh copies it)"
if grep -qx 'CONFIG_IRQ_TIME_ACCOUNTING=y' "$CONFIG"; then WANT=true; else WANT=false; fi
info "CONFIG_IRQ_TIME_ACCOUNTING: $WANT; clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) (available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource))"

step block
BDF=$(nvb_bdf) || fail "no NVMe controller (PCI class 0x010802)"
CTRL=$(nvme_ctrl_of "$BDF") || fail "$BDF is not bound to nvme"
NS=/dev/${CTRL}n1
wait_for "$NS" 10 || fail "$NS missing"
ARGS="--backend block --device $NS --rw randread --iodepth 8 --numjobs 2 --size 64M --runtime 2"
# shellcheck disable=SC2086
check_cmd accounting-block-json sh -c "nvme-bypass bench $ARGS --output-format json > $NVB_RESULTS/accounting-block.json"
# shellcheck disable=SC2086
check_cmd accounting-block-text sh -c "nvme-bypass bench $ARGS > $NVB_RESULTS/accounting-block.txt"
J=$NVB_RESULTS/accounting-block.json
T=$NVB_RESULTS/accounting-block.txt
sed -n 's/^    "\(irq_time_accounting[a-z_]*\|clocksource\|interrupt_driven\)": /  \1: /p' "$J"
grep -q "^    \"irq_time_accounting\": $WANT," "$J" || fail "irq_time_accounting is not $WANT in $J"
grep -q '^    "interrupt_driven": true' "$J" || fail "the block run is not said to be interrupt-driven"
grep -q '^    "clocksource": "' "$J" || fail "no clocksource in $J"
grep '^  clock\|^  clocksource\|^  irq time\|^  system-wide' "$T" | sed 's/^/  /'
if [ "$WANT" = false ]; then
  grep -q "^  irq time     : off: .*kernel CPU above is a lower bound" "$T" || fail "the text does not say the kernel CPU is a lower bound"
fi
# The system-wide interval (the union of the two threads') covers the longest thread's.
EL=$(sed -n 's/^    "elapsed_ns": \([0-9]*\),/\1/p' "$J" | tail -1)
IV=$(sed -n 's/^      "interval_ns": \([0-9]*\),/\1/p' "$J" | tail -1)
info "elapsed (longest thread) $EL ns, /proc/stat interval (union) $IV ns"
[ -n "$EL" ] && [ -n "$IV" ] && [ "$IV" -ge "$EL" ] || fail "system interval '$IV' shorter than the longest thread's '$EL'"

step vfio
bind_vfio "$BDF"
check_cmd accounting-vfio sh -c "nvme-bypass bench --backend vfio --device $BDF --rw randread --iodepth 8 --size 64M --runtime 1 > $NVB_RESULTS/accounting-vfio.txt"
grep '^  irq time' "$NVB_RESULTS/accounting-vfio.txt" | sed 's/^/  /'
if grep -q "lower bound" "$NVB_RESULTS/accounting-vfio.txt"; then fail "a polled run was told its kernel CPU is a lower bound"; fi
bind_nvme "$BDF"

echo "accounting: PASS"
