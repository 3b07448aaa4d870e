#!/bin/bash
# nvme-bypass test bed: self-test of the test bed itself (host side).
#
# Boots the guest once per scenario and checks run.sh's exit status:
# smoke test in three NVMe/kernel configurations, argument passing, fio on
# both kernel paths, and the failure paths (failing script, hanging script
# killed at the timeout, a step stopped by the guest watchdog, a quiet but
# healthy guest, a dead guest caught by the hang watcher and retried, /init
# failure, QEMU refusing its options).
# Ends with the line "selftest: N passed, N failed"; exits non-zero on any
# failure. About 9 minutes on an idle 2-core machine (the quiet and
# dead-guest scenarios wait out the watcher's 120 s twice).
#
# usage: scripts/testbed/selftest.sh [--bin PATH | --no-bin] [--only NAME]...
#        (default --no-bin: the smoke test then skips `nvme-bypass --version`)
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN_OPT=(--no-bin); ONLY=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN_OPT=(--bin "$2"); shift 2 ;;
    --no-bin) BIN_OPT=(--no-bin); shift ;;
    --only) ONLY+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "selftest.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

OUT=$REPO/target/testbed/results/selftest-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
T=$REPO/tests/testbed
PASSED=0; FAILED=0; FAILED_NAMES=()

# scenario NAME EXPECTED_RC [run.sh options...] SCRIPT [args...]
scenario() {
  local name=$1 want=$2; shift 2
  if [ ${#ONLY[@]} -gt 0 ] && [[ " ${ONLY[*]} " != *" $name "* ]]; then return; fi
  local t0=$SECONDS rc
  "$HERE/run.sh" --quiet --results "$OUT/$name" "${BIN_OPT[@]}" "$@" > "$OUT/$name.out" 2>&1
  rc=$?
  if [ "$rc" = "$want" ]; then
    PASSED=$((PASSED + 1))
    printf 'selftest: ok   %-16s rc=%-3s %3ss  %s\n' "$name" "$rc" $((SECONDS - t0)) "$(grep -m1 'boot to' "$OUT/$name.out" | sed 's/^testbed: //')"
  else
    FAILED=$((FAILED + 1)); FAILED_NAMES+=("$name")
    printf 'selftest: FAIL %-16s rc=%s, expected %s (%ss); last lines:\n' "$name" "$rc" "$want" $((SECONDS - t0))
    tail -n 12 "$OUT/$name.out" | sed 's/^/    /'
  fi
}

# Prepare once up front, so the first scenario's time is only its boot.
"$HERE/setup.sh" || { echo "selftest: setup.sh failed"; exit 1; }
"$HERE/build-initramfs.sh" >/dev/null || { echo "selftest: build-initramfs.sh failed"; exit 1; }

scenario smoke            0   "$T/smoke.sh"
scenario smoke-poll-mpN   0   --poll-queues 1 --multipath N "$T/smoke.sh"
scenario smoke-2ns-4k     0   --namespaces 2 --lba-size 4096 "$T/smoke.sh"
scenario smoke-2ctrl      0   --controllers 2 "$T/smoke.sh"
scenario args             0   "$T/selftest/args.sh" one "two words" ''
scenario fio-poll         0   --poll-queues 1 --multipath N "$T/selftest/fio.sh"
scenario fail             3   "$T/selftest/fail.sh"
scenario hang             124 --timeout 30 "$T/selftest/hang.sh"
scenario smoke-ctrl       0   --ctrl "mdts=5,max_ioqpairs=4" --ns "nsid=1,size=256M" "$T/smoke.sh"
scenario step-timeout     137 --step-timeout 15 "$T/selftest/hang.sh"
scenario quiet            0   "$T/selftest/quiet.sh"
# A guest whose vCPUs never run (QEMU -S): silent with idle QEMU threads, so
# the hang watcher stops it after 120 s and run.sh boots once more.
scenario dead-guest-retry 124 --retries 1 --qemu-args "-S" "$T/selftest/hang.sh"
if [ -f "$OUT/dead-guest-retry/run.json" ] && ! grep -q '"retries": 1' "$OUT/dead-guest-retry/run.json"; then
  FAILED=$((FAILED + 1)); FAILED_NAMES+=(dead-guest-retry-count); echo "selftest: FAIL dead-guest-retry: run.json does not count 1 retry"
fi
scenario init-fail        125 --extra-append "nvb.ns=3 nvb.wait=2" "$T/smoke.sh"
scenario qemu-error       125 --nvme-opts ",no_such_property=1" "$T/smoke.sh"

echo "selftest: results in $OUT"
[ "$FAILED" = 0 ] || echo "selftest: failed: ${FAILED_NAMES[*]}"
echo "selftest: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
