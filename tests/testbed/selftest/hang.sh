#!/bin/sh
# Test-bed self-test: a guest script that never ends (step "hanging").
# run.sh --timeout N must kill QEMU after N seconds and exit 124.
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/../lib.sh"
step hanging
while :; do sleep 5; done
