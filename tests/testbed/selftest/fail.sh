#!/bin/sh
# Test-bed self-test: a guest script that fails with rc=3 in step "will-fail".
# run.sh must exit 3 and name the step.
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/../lib.sh"
step will-fail
echo "failing on purpose" > "$NVB_RESULTS/fail-marker"
exit 3
