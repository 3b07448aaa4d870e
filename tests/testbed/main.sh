#!/bin/sh
# Guest script of the README's main command (scripts/compare.sh without a
# device): the comparison, then a short sweep, in one boot. Arguments go to
# compare; without a --repeat of their own, compare runs three rounds
# (--repeat 3: medians with ranges and a noise control). Results: $NVB_RESULTS/compare (table.txt, compare.json) and
# $NVB_RESULTS/sweep (sweep.json, table.txt, charts).
. "$(dirname "$0")/lib.sh"
DIR=$(dirname "$0")
rc=0
case " $* " in
  *" --repeat "* | *" --repeat="*) ;;
  *) set -- --repeat 3 "$@" ;;
esac
sh "$DIR/compare.sh" "$@" || rc=$?
echo "NVB-MAIN: compare exit $rc"
src=0
sh "$DIR/sweep.sh" || src=$?
echo "NVB-MAIN: sweep exit $src"
[ "$rc" = 0 ] && [ "$src" = 0 ]
