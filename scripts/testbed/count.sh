#!/usr/bin/env bash
# Exact instructions per I/O of every compare row, by path and by kernel
# layer: one test-bed boot under the counting plugin (run.sh --count), then
# `nvme-bypass count-report` on the host. Prints the table; leaves
# count.txt, count.json and instructions_per_io_by_layer.svg in
# RESULTS/count, beside the guest's files.
#
#   scripts/testbed/count.sh [--results DIR] [--bin STATIC_BIN] [--aio threads|io_uring] [compare options...]
#
# The emulated controller reads its image through the host's io_uring
# (run.sh --aio io_uring) when the host has one: a read of the image in the
# host's page cache completes as QEMU submits it, so the controller posts
# completions in the order it took the commands, in every boot. QEMU's
# default thread pool completes them in any order, and which submit
# batches a completion pass mixes (so how many latency groups our engine
# records) then followed the boot (docs/methodology.md, "In-order device").
#
# Every figure is MEASURED on an EMULATED machine (QEMU TCG): instructions
# of an emulated CPU, exact and repeatable, not time (docs/methodology.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RESULTS=$ROOT/target/testbed/count-$(date +%Y%m%d-%H%M%S)
BIN_ARGS=(); RUN_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --results) RESULTS=$2; shift 2;;
    --bin) BIN_ARGS=(--bin "$2"); shift 2;;
    --aio) RUN_ARGS+=(--aio "$2"); shift 2;;
    *) break;;
  esac
done
if [ ${#RUN_ARGS[@]} -eq 0 ]; then
  scripts/testbed/setup.sh   # qemu-io with QEMU (idempotent; run.sh calls it too)
  probe=$(mktemp)
  truncate -s 4096 "$probe"
  if qemu-io -f raw --aio io_uring -c 'read 0 4096' "$probe" >/dev/null 2>&1; then
    RUN_ARGS=(--aio io_uring)
  else
    echo "count: QEMU cannot use io_uring on this host (qemu-io --aio io_uring failed); the controller's host I/O uses QEMU's thread pool, which completes in any order (docs/methodology.md, \"In-order device\")" >&2
    RUN_ARGS=(--aio threads)
  fi
  rm -f "$probe"
fi
# tsc=reliable: the guest's clock is read in user mode through the vDSO, as
# on a real machine with an invariant TSC; the kernel's default under TCG
# (no invariant TSC flag) is a clocksource read by a system call, which put
# a system call in every clock read of a polling loop (docs/methodology.md).
scripts/testbed/run.sh --count --multipath N --poll-queues 1 --timeout 1200 --quiet --results "$RESULTS" "${BIN_ARGS[@]}" "${RUN_ARGS[@]}" \
  --extra-append "tsc=reliable clocksource=tsc" \
  tests/testbed/count.sh "$@"
HOSTBIN=${NVB_HOST_BIN:-$ROOT/target/release/nvme-bypass}
[ -x "$HOSTBIN" ] || cargo build --release --quiet
G=$RESULTS/results
"$HOSTBIN" count-report --compare "$G/count-compare/compare.json" --windows "$RESULTS/insn.jsonl" \
  --kallsyms "$G/kallsyms.txt" --binary "$RESULTS/bin/nvme-bypass" --bar0 "$(cut -d' ' -f1 "$G/bar0.txt")" \
  --idle-seconds "$(cat "$G/idle-seconds.txt")" --out "$RESULTS/count"
# Our tool beside fio on the kernel engines (the boot's "tools" windows).
python3 scripts/count-vs-fio.py "$RESULTS" --json "$RESULTS/count/vs-fio.json" | tee "$RESULTS/count/vs-fio.txt"
