#!/bin/sh
# Test-bed self-test: a healthy guest that prints nothing for 130 s. run.sh's
# hang watcher must not take it for hung (the /init heartbeat keeps the
# console alive): exit 0.
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/../lib.sh"
step quiet
sleep 130
echo "quiet: PASS"
