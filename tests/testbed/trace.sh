#!/bin/sh
# Guest script: `nvme-bypass trace` over vfio on the emulated controller.
# The same story as on the simulator (bring-up, Identify, a 4-entry I/O queue
# pair wrapped by writes and reads, a PRP-list transfer, shutdown), with
# QEMU's controller on the other side: there are no controller-side lines,
# but every register access, entry (admin and I/O), doorbell, completion
# and phase flip of the host is there. Checks the story's order and gives the controller back.
. "$(dirname "$0")/lib.sh"
BDF=$(nvb_bdf) || fail "no NVMe controller"
OUT=$NVB_RESULTS/trace
mkdir -p "$OUT"
step bind
nvme-bypass bind "$BDF" > "$OUT/bind.txt" 2>&1 || fail "bind: $(tail -3 "$OUT/bind.txt")"
step trace
nvme-bypass trace --backend vfio --device "$BDF" --allow-write > "$OUT/trace.txt" 2>"$OUT/trace.err" || { nvme-bypass unbind "$BDF"; fail "trace (text): $(tail -3 "$OUT/trace.err")"; }
nvme-bypass trace --backend vfio --device "$BDF" --allow-write --output-format json > "$OUT/trace.json" 2>>"$OUT/trace.err" || { nvme-bypass unbind "$BDF"; fail "trace (json): $(tail -3 "$OUT/trace.err")"; }
step unbind
nvme-bypass unbind "$BDF" > "$OUT/unbind.txt" 2>&1 || fail "unbind: $(tail -3 "$OUT/unbind.txt")"
expect_on_nvme "$BDF" "the trace"
step check
# The story's landmarks, in order, in the text trace.
last=0
# Admin commands show the host's post and reap, as I/O commands do.
for pat in "read  CAP" "write AQA" "write CC .*EN=1" "read  CSTS .*RDY=1" "post SQ0\[0\] Identify" "write SQ0TDBL" "reap CQ0\[0\]" \
  "post SQ0.* Create I/O CQ" "post SQ0.* Create I/O SQ" "post SQ1\[0\]" "write SQ1TDBL" "reap CQ1\[0\]" "phase_flip" "prp2=0x[1-9a-f]" \
  "post SQ0.* Delete I/O SQ" "post SQ0.* Delete I/O CQ" "write CC .*SHN=01"; do
  n=$(grep -n "$pat" "$OUT/trace.txt" | head -1 | cut -d: -f1)
  [ -n "$n" ] || fail "trace over vfio lacks '$pat'"
  [ "$n" -gt "$last" ] || fail "'$pat' (line $n) is out of order (after line $last)"
  last=$n
done
flips=$(grep -c "phase_flip" "$OUT/trace.txt")
[ "$flips" -ge 2 ] || fail "expected the CQ to wrap at least twice, saw $flips phase flips"
grep -q '"kind": "cqe"' "$OUT/trace.json" || fail "JSON trace has no completions"
info "trace over vfio: $(grep -c '^\[' "$OUT/trace.txt") steps, $flips phase flips, controller back on nvme"
