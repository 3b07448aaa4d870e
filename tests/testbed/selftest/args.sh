#!/bin/sh
# Test-bed self-test: arguments and environment reach the guest script.
#   run.sh tests/testbed/selftest/args.sh one "two words" ''
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/../lib.sh"
step args
[ "$#" = 3 ] || fail "expected 3 arguments, got $#: $*"
[ "$1" = one ] || fail "arg 1 is '$1'"
[ "$2" = "two words" ] || fail "arg 2 is '$2'"
[ -z "$3" ] || fail "arg 3 is '$3', expected empty"
step env
[ "${NVB_GUEST:-}" = 1 ] || fail "NVB_GUEST is not 1"
[ -d "$NVB_RESULTS" ] || fail "NVB_RESULTS=$NVB_RESULTS is not a directory"
[ -n "${NVB_BDF:-}" ] || fail "NVB_BDF is empty"
[ "$(cat "/sys/bus/pci/devices/$NVB_BDF/class")" = 0x010802 ] || fail "NVB_BDF=$NVB_BDF is not an NVMe controller"
case ":$PATH:" in *:/mnt/host/bin:*) ;; *) fail "PATH lacks /mnt/host/bin: $PATH" ;; esac
step share-write
echo hello > "$NVB_RESULTS/written-by-guest"
[ "$(cat "$NVB_RESULTS/written-by-guest")" = hello ] || fail "cannot read back a file written to the share"
echo "args: PASS"
