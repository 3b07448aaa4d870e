#!/bin/sh
# Guest script (boot with run.sh --controllers 2): one thread drives two
# controllers at once (--device given twice), on block, passthru and vfio,
# as in the 10-SSD experiment where a core serves several devices. Checks
# each run reports both devices' queues on the one thread and completes
# I/O, and that both controllers go back to nvme.
. "$(dirname "$0")/lib.sh"
OUT=$NVB_RESULTS/multi
mkdir -p "$OUT"
set -- $(for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/class")" = 0x010802 ] && echo "${d##*/}"; done)
[ $# -ge 2 ] || fail "need two NVMe controllers (run.sh --controllers 2), found $#"
A=$1; B=$2
CA=$(nvme_ctrl_of "$A") || fail "$A not on nvme"
CB=$(nvme_ctrl_of "$B") || fail "$B not on nvme"
J="--numjobs 1 --iodepth 16 --runtime 2 --output-format json"
check() { # name file
  grep -q '"queue": "device 0: .*device 1: ' "$2" || fail "$1: the thread does not report two devices' queues"
  grep -q '"errors": 0' "$2" || fail "$1: I/O errors"
  info "$1: $(grep -o '"queue": "[^"]*"' "$2" | head -1)"
}
step multi-block
# shellcheck disable=SC2086
nvme-bypass bench --backend block --device "/dev/${CA}n1" --device "/dev/${CB}n1" $J > "$OUT/block.json" 2>"$OUT/block.err" || fail "block: $(tail -3 "$OUT/block.err")"
check block "$OUT/block.json"
step multi-passthru
NA=/dev/ng${CA#nvme}n1; NB=/dev/ng${CB#nvme}n1
# shellcheck disable=SC2086
nvme-bypass bench --backend passthru --device "$NA" --device "$NB" $J > "$OUT/passthru.json" 2>"$OUT/passthru.err" || fail "passthru: $(tail -3 "$OUT/passthru.err")"
check passthru "$OUT/passthru.json"
step multi-vfio
nvme-bypass bind "$A" > "$OUT/bind.txt" 2>&1 || fail "bind $A"
nvme-bypass bind "$B" >> "$OUT/bind.txt" 2>&1 || { nvme-bypass unbind "$A"; fail "bind $B"; }
rc=0
# shellcheck disable=SC2086
nvme-bypass bench --backend vfio --device "$A" --device "$B" $J > "$OUT/vfio.json" 2>"$OUT/vfio.err" || rc=1
nvme-bypass unbind "$A" > "$OUT/unbind.txt" 2>&1 || rc=1
nvme-bypass unbind "$B" >> "$OUT/unbind.txt" 2>&1 || rc=1
[ "$rc" = 0 ] || fail "vfio two-device run or unbind failed: $(tail -3 "$OUT/vfio.err") $(tail -3 "$OUT/unbind.txt")"
check vfio "$OUT/vfio.json"
[ "$(pci_driver "$A")" = nvme ] && [ "$(pci_driver "$B")" = nvme ] || fail "a controller did not go back to nvme"
info "one thread drove two controllers on every path; both back on nvme"
