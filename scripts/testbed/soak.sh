#!/bin/bash
# nvme-bypass test bed: N consecutive boots of tests/testbed/all.sh, as CI
# runs it, and a tally of passes, retries and failures.
#
# usage: scripts/testbed/soak.sh N [--bin PATH] [--results DIR] [-- RUN.SH OPTIONS...]
#
# Builds nvme-bypass once (or uses --bin), then boots N times with
# `run.sh --multipath N --poll-queues 1 --timeout 1500 --quiet` (plus the
# options after --), one results directory per boot under DIR (default
# target/testbed/results/soak-<time>). Prints one line per boot and, at the
# end, the command and `soak: N boots: P passed (R of them after a retry),
# F failed, T retries in all`; writes DIR/soak.json. Exit 0 when every boot
# passed (retried or not).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
[ $# -ge 1 ] && [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
N=$1; shift
BIN=; DIR=; EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --results) DIR=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "soak.sh: unknown argument $1 (run.sh options go after --)" >&2; exit 2 ;;
  esac
done
DIR=${DIR:-$REPO/target/testbed/results/soak-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$DIR"
if [ -z "$BIN" ]; then
  ( cd "$REPO" && RUSTFLAGS='-C target-feature=+crt-static' \
      cargo build --release --target x86_64-unknown-linux-gnu -p nvme-bypass --bin nvme-bypass )
  BIN=${CARGO_TARGET_DIR:-$REPO/target}/x86_64-unknown-linux-gnu/release/nvme-bypass
fi
cp "$BIN" "$DIR/nvme-bypass"        # every boot runs the same binary
CMD=("$HERE/run.sh" --multipath N --poll-queues 1 --timeout 1500 --quiet --bin "$DIR/nvme-bypass" "${EXTRA[@]}")
echo "soak: $N boots of: ${CMD[*]} --results $DIR/boot-K tests/testbed/all.sh"
pass=0; fail=0; retried=0; retries=0; rows=
T0=$SECONDS
for ((k = 1; k <= N; k++)); do
  t=$SECONDS; rc=0
  "${CMD[@]}" --results "$DIR/boot-$k" "$REPO/tests/testbed/all.sh" > "$DIR/boot-$k.log" 2>&1 || rc=$?
  j=$DIR/boot-$k/run.json
  st=$(sed -n 's/.*"status": "\([a-z-]*\)".*/\1/p' "$j" 2>/dev/null | head -n 1)
  r=$(sed -n 's/.*"retries": \([0-9]*\).*/\1/p' "$j" 2>/dev/null | head -n 1)
  msg=$(sed -n 's/.*"message": "\([^"]*\)".*/\1/p' "$j" 2>/dev/null | head -n 1)
  r=${r:-0}; retries=$((retries + r))
  if [ "$rc" = 0 ]; then pass=$((pass + 1)); [ "$r" = 0 ] || retried=$((retried + 1)); else fail=$((fail + 1)); fi
  echo "soak: boot $k/$N: ${st:-no run.json} (exit $rc, $r retries, $((SECONDS - t)) s)${msg:+: $msg}"
  rows+="${rows:+, }{\"boot\": $k, \"exit\": $rc, \"status\": \"${st:-unknown}\", \"retries\": $r, \"wall_s\": $((SECONDS - t))}"
done
cat > "$DIR/soak.json" <<JSON
{"boots": $N, "passed": $pass, "passed_after_retry": $retried, "failed": $fail, "retries": $retries, "wall_s": $((SECONDS - T0)),
 "command": "scripts/testbed/soak.sh $N", "runs": [$rows]}
JSON
echo "soak: command: scripts/testbed/soak.sh $N${EXTRA[*]:+ -- ${EXTRA[*]}} (run.sh ${CMD[*]:1} tests/testbed/all.sh)"
echo "soak: $N boots: $pass passed ($retried of them after a retry), $fail failed, $retries retries in all; $((SECONDS - T0)) s; $DIR/soak.json"
[ "$fail" = 0 ]
