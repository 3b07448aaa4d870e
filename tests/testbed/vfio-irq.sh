#!/bin/sh
# Guest script: interrupt-driven completions on the vfio path (MSI-X
# through VFIO eventfds). Verified runs must pass, the thread must block
# (blocking_waits > 0, fewer cores busy than the polled run), and the
# controller must go back to nvme.
. "$(dirname "$0")/lib.sh"
BDF=$(nvb_bdf) || fail "no NVMe controller"
OUT=$NVB_RESULTS/vfio-irq
mkdir -p "$OUT"
step bind
nvme-bypass bind "$BDF" > "$OUT/bind.txt" 2>&1 || fail "bind: $(tail -3 "$OUT/bind.txt")"
rc=0
for rw in randread randrw; do
  step "irq-$rw"
  nvme-bypass bench --backend vfio --device "$BDF" --interrupts --rw "$rw" --rwmixread 75 --iodepth 32 --runtime 2 \
    --size 32M --verify --allow-write --output-format json > "$OUT/$rw.json" 2>"$OUT/$rw.err" || { rc=1; echo "FAIL $rw: $(tail -3 "$OUT/$rw.err")"; }
  grep -q '"mismatches": 0' "$OUT/$rw.json" || { rc=1; echo "FAIL $rw: mismatches"; }
done
step polled-reference
nvme-bypass bench --backend vfio --device "$BDF" --rw randread --iodepth 32 --runtime 2 --output-format json > "$OUT/polled.json" 2>"$OUT/polled.err" || rc=1
step unbind
nvme-bypass unbind "$BDF" > "$OUT/unbind.txt" 2>&1 || fail "unbind: $(tail -3 "$OUT/unbind.txt")"
expect_on_nvme "$BDF" "the interrupt-driven runs"
[ "$rc" = 0 ] || fail "interrupt-driven runs failed (see above)"
step check
waits=$(grep -o '"blocking_waits": [0-9]*' "$OUT/randread.json" | head -1 | grep -o '[0-9]*$')
[ "${waits:-0}" -gt 0 ] || fail "the interrupt-driven run never blocked (blocking_waits=${waits:-none})"
busy_irq=$(grep -o '"cores_busy": [0-9.]*' "$OUT/randread.json" | head -1 | grep -o '[0-9.]*$')
busy_poll=$(grep -o '"cores_busy": [0-9.]*' "$OUT/polled.json" | head -1 | grep -o '[0-9.]*$')
info "interrupts: $waits blocking waits, cores busy $busy_irq (polled: $busy_poll)"
awk -v a="$busy_irq" -v b="$busy_poll" 'BEGIN{exit !(a < b)}' || fail "interrupt-driven run kept as many cores busy ($busy_irq) as polling ($busy_poll)"
