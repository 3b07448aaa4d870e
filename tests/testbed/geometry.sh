#!/bin/sh
# Guest script: our driver on controllers shaped unlike QEMU's default, one
# boot with several of them. Run by scripts/testbed/geometry.sh, which sets
# up the controllers (run.sh --ctrl/--ns), prefills sentinels in the
# namespace images, and afterwards checks the images and writes the table.
#
# Arguments, one per case: "LABEL|CTRL|NSID|BENCH ARGS|EXPECT", CTRL the
# controller's index (its PCI address is the CTRL-th of $NVB_BDFS), EXPECT
# `work` (must work) or a word a refusal must name. Environment:
# GEOMETRY_OFFSET, GEOMETRY_SIZE (the benchmark range), GEOMETRY_TIMEOUT
# (seconds per command). Per controller: bind, `info --backend vfio`, each
# of its cases as `bench --backend vfio --verify` over the range, unbind.
# Writes $NVB_RESULTS/geometry/cases.tsv (one line per case: label, ctrl,
# nsid, exit status, outcome, message) and info-CTRL.txt; exit 0 unless the
# test bed itself failed (the verdicts are the host's).
set -u
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
OUT=$NVB_RESULTS/geometry
mkdir -p "$OUT"
: > "$OUT/cases.tsv"
OFF=${GEOMETRY_OFFSET:-1M}; SIZE=${GEOMETRY_SIZE:-4M}; T=${GEOMETRY_TIMEOUT:-180}
command -v nvme-bypass >/dev/null 2>&1 || fail "no nvme-bypass binary in the share"
NCASES=$#

# the controllers, in order
i=0
for b in $NVB_BDFS; do eval "BDF_$i=$b"; i=$((i + 1)); done
info "$i controllers: $NVB_BDFS; $NCASES cases; range $OFF + $SIZE"

# tsv LABEL CTRL NSID RC OUTCOME MESSAGE
tsv() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$(printf '%s' "$6" | tr '\t\n' '  ' | cut -c 1-400)" >> "$OUT/cases.tsv"; }

last_ctrl=
finish_ctrl() {
  [ -n "$last_ctrl" ] || return 0
  eval "_b=\$BDF_$last_ctrl"
  _rc=0; timeout "$T" nvme-bypass unbind "$_b" > "$OUT/unbind-$last_ctrl.txt" 2>&1 || _rc=$?
  if [ "$_rc" = 0 ]; then
    info "controller $last_ctrl ($_b) back on $(pci_driver "$_b")"
  else
    info "controller $last_ctrl ($_b): unbind failed: $(tail -n 1 "$OUT/unbind-$last_ctrl.txt")"
    tsv "unbind" "$last_ctrl" "-" "$_rc" "unbind-failed" "$(tail -n 2 "$OUT/unbind-$last_ctrl.txt")"
  fi
}

for c in "$@"; do
  label=${c%%|*}; r=${c#*|}
  ctrl=${r%%|*}; r=${r#*|}
  nsid=${r%%|*}; r=${r#*|}
  args=${r%%|*}; expect=${r#*|}
  eval "bdf=\${BDF_$ctrl:-}"
  [ -n "$bdf" ] || fail "case '$label': no controller $ctrl (have: $NVB_BDFS)"
  if [ "$ctrl" != "$last_ctrl" ]; then
    finish_ctrl
    last_ctrl=$ctrl
    step "ctrl$ctrl-bind"
    rc=0; timeout "$T" nvme-bypass bind "$bdf" > "$OUT/bind-$ctrl.txt" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
      tsv "bind" "$ctrl" "-" "$rc" "bind-failed" "$(tail -n 2 "$OUT/bind-$ctrl.txt")"; continue
    fi
    step "ctrl$ctrl-info"
    rc=0; timeout "$T" nvme-bypass info --backend vfio --device "$bdf" > "$OUT/info-$ctrl.txt" 2>&1 || rc=$?
    shown=$(sed -n 's/^namespaces: [0-9]* shown (\(.*\))$/\1/p' "$OUT/info-$ctrl.txt")
    tsv "info" "$ctrl" "-" "$rc" "$([ "$rc" = 0 ] && echo info || echo info-failed)" "namespaces: ${shown:-?}; $(grep -c '^lbaf' "$OUT/info-$ctrl.txt") lbaf lines$([ "$rc" = 0 ] || printf '; %s' "$(tail -n 1 "$OUT/info-$ctrl.txt")")"
  fi
  step "case: $label"
  log=$OUT/case-$ctrl-$nsid-$(printf '%s' "$label" | tr -c 'A-Za-z0-9' '_' | cut -c 1-40).log
  rc=0
  # shellcheck disable=SC2086  # the case's arguments, split on purpose
  timeout "$T" nvme-bypass bench --backend vfio --device "$bdf" --nsid "$nsid" --allow-write --verify \
    --offset "$OFF" --size "$SIZE" --runtime 1 --rw randrw $args > "$log" 2>&1 || rc=$?
  mis=$(sed -n 's/.* \([0-9]*\) mismatches.*/\1/p' "$log" | head -n 1)
  err=$(sed -n 's/^ *errors *: *\([0-9]*\).*/\1/p' "$log" | head -n 1)
  case "$rc" in
    0) outcome=works; msg="$(grep -m1 'verify *:' "$log" | sed 's/^ *verify *: *//'), ${err:-0} failed I/Os; $(grep -m1 'read: IOPS' "$log" | sed 's/^ *//; s/, BW.*//')" ;;
    2) outcome=refused; msg=$(grep -m1 'nvme-bypass: error:' "$log" | sed 's/^nvme-bypass: error: //') ;;
    124|143) outcome=hung; msg="no exit within $T s (killed): $(tail -n 1 "$log")" ;;
    *) outcome=failed; msg="exit $rc: $(grep -v '^ ' "$log" | tail -n 2 | tr '\n' ' ')" ;;
  esac
  [ "$outcome" != works ] || [ "${mis:-0}" = 0 ] || outcome=mismatch
  tsv "$label" "$ctrl" "$nsid" "$rc" "$outcome" "$msg"
  info "$label: $outcome: $(printf '%s' "$msg" | cut -c 1-160)"
done
finish_ctrl
step done
info "wrote $OUT/cases.tsv ($(grep -c . "$OUT/cases.tsv") lines)"
