#!/bin/sh
# Guest script: two threads pinned to CPUs 0 and 1, each with its own queue
# (a queue pair on vfio, an io_uring ring on passthru and block). Writes the
# JSON reports to $NVB_RESULTS/threads/; the host checks them with
# scripts/check-threads.py (each thread its own queue and CPU, and the
# aggregate adds up).
. "$(dirname "$0")/lib.sh"
BDF=$(nvb_bdf) || fail "no NVMe controller"
OUT=$NVB_RESULTS/threads
mkdir -p "$OUT"
J="--numjobs 2 --cpus 0,1 --iodepth 16 --runtime 2 --output-format json"
step threads-block
# shellcheck disable=SC2086
nvme-bypass bench --backend block --device /dev/nvme0n1 $J > "$OUT/block.json" 2>"$OUT/block.err" || fail "block: $(tail -3 "$OUT/block.err")"
step threads-passthru
# shellcheck disable=SC2086
nvme-bypass bench --backend passthru --device /dev/ng0n1 $J > "$OUT/passthru.json" 2>"$OUT/passthru.err" || fail "passthru: $(tail -3 "$OUT/passthru.err")"
step threads-vfio
nvme-bypass bind "$BDF" > "$OUT/bind.txt" 2>&1 || fail "bind: $(tail -3 "$OUT/bind.txt")"
# shellcheck disable=SC2086
nvme-bypass bench --backend vfio --device "$BDF" $J > "$OUT/vfio.json" 2>"$OUT/vfio.err" || { nvme-bypass unbind "$BDF"; fail "vfio: $(tail -3 "$OUT/vfio.err")"; }
nvme-bypass unbind "$BDF" > "$OUT/unbind.txt" 2>&1 || fail "unbind: $(tail -3 "$OUT/unbind.txt")"
expect_on_nvme "$BDF" "the two-thread vfio run"
info "three two-thread runs in $OUT"
