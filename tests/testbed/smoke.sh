#!/bin/sh
# nvme-bypass test bed: smoke test of the plumbing (runs in the guest).
#
#   scripts/testbed/run.sh [--bin PATH] tests/testbed/smoke.sh
#
# Checks: NVMe device nodes exist (block /dev/nvmeXnY and char /dev/ngXnY);
# controller model/serial/firmware and namespace size/block size match what
# run.sh configured (NVB_* variables); module parameters took effect; a direct
# read works; the controller binds to vfio-pci (/dev/vfio/<group> appears) and
# back to nvme (the block device is readable again); `nvme-bypass --version`
# runs if the binary is in the share. Writes $NVB_RESULTS/smoke.json.
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

: "${NVB_CONTROLLERS:=1}" "${NVB_NAMESPACES:=1}" "${NVB_LBA_SIZE:=512}"
: "${NVB_POLL_QUEUES:=0}" "${NVB_MULTIPATH:=Y}" "${NVB_IOMMU:=pt}"

# ------------------------------------------------------------------ devices
step devices
# shellcheck disable=SC2012  # a listing for the log
ls -l /dev/nvme* /dev/ng* 2>&1 | sed 's/^/  /'
BDF=$(nvb_bdf) || fail "no NVMe controller (PCI class 0x010802) found"
CTRL=$(nvme_ctrl_of "$BDF") || fail "$BDF is not bound to nvme (driver: $(pci_driver "$BDF"))"
info "first controller: $BDF = $CTRL (NVB_BDF=${NVB_BDF:-unset}); all: ${NVB_BDFS:-?}"
[ -c "/dev/$CTRL" ] || fail "/dev/$CTRL is not a character device"
[ -b /dev/nvme0n1 ] || fail "/dev/nvme0n1 is not a block device"
[ -c /dev/ng0n1 ] || fail "/dev/ng0n1 (io_uring passthrough char device) missing"

# identify strings are space-padded in sysfs
MODEL=$(sed 's/ *$//' "/sys/class/nvme/$CTRL/model")
SERIAL=$(sed 's/ *$//' "/sys/class/nvme/$CTRL/serial")
FWREV=$(sed 's/ *$//' "/sys/class/nvme/$CTRL/firmware_rev")
info "model='$MODEL' serial='$SERIAL' firmware_rev='$FWREV'"
case "$SERIAL" in nvb0*) ;; *) fail "serial '$SERIAL' is not the one run.sh set (nvb0000...)" ;; esac

# Visible namespaces (multipath hides the per-path nvmeXcYnZ disks).
NS_JSON=; NS_COUNT=0
for b in /sys/block/nvme*n*; do
  [ -e "$b" ] || continue
  name=${b##*/}
  case "$name" in *c*n*) continue ;; esac
  [ "$(cat "$b/hidden" 2>/dev/null || echo 0)" = 1 ] && continue
  sectors=$(cat "$b/size"); lbs=$(cat "$b/queue/logical_block_size")
  bytes=$((sectors * 512))
  info "$name: $bytes bytes, logical_block_size=$lbs, io_poll=$(cat "$b/queue/io_poll" 2>/dev/null || echo ?), scheduler: $(cat "$b/queue/scheduler" 2>/dev/null || echo ?)"
  [ "$lbs" = "$NVB_LBA_SIZE" ] || fail "$name: logical_block_size $lbs, expected $NVB_LBA_SIZE"
  [ "$bytes" -gt 0 ] || fail "$name: size 0"
  NS_COUNT=$((NS_COUNT + 1))
  NS_JSON="$NS_JSON${NS_JSON:+, }{\"name\": \"$name\", \"bytes\": $bytes, \"logical_block_size\": $lbs}"
done
EXPECT_NS=$((NVB_CONTROLLERS * NVB_NAMESPACES))
[ "$NS_COUNT" = "$EXPECT_NS" ] || fail "found $NS_COUNT namespaces, expected $EXPECT_NS"

# ------------------------------------------------------------------ module parameters
step module-params
PQ=$(cat /sys/module/nvme/parameters/poll_queues)
MP=$(cat /sys/module/nvme_core/parameters/multipath)
info "nvme.poll_queues=$PQ nvme_core.multipath=$MP"
[ "$PQ" = "$NVB_POLL_QUEUES" ] || fail "nvme.poll_queues is $PQ, expected $NVB_POLL_QUEUES"
[ "$MP" = "$NVB_MULTIPATH" ] || fail "nvme_core.multipath is $MP, expected $NVB_MULTIPATH"
if [ "$NVB_MULTIPATH" = N ]; then
  # a plain blk-mq disk with an I/O scheduler file
  grep -q none /sys/block/nvme0n1/queue/scheduler || fail "multipath=N but nvme0n1 has no blk-mq scheduler"
fi
if [ "$NVB_POLL_QUEUES" -gt 0 ]; then
  [ "$(cat /sys/block/nvme0n1/queue/io_poll)" = 1 ] || fail "poll queues requested but nvme0n1 io_poll != 1"
fi

# ------------------------------------------------------------------ block read
step read-block
check_cmd dd-before dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1 iflag=direct

# ------------------------------------------------------------------ vfio and back
step vfio-bind
if [ "$NVB_IOMMU" = off ]; then
  info "skipped: no vIOMMU (--no-iommu), vfio-pci cannot bind"
  VFIO_GROUP=none
else
  bind_vfio "$BDF"
  # shellcheck disable=SC2012  # a listing for the log
  ls -l /dev/vfio/ | sed 's/^/  /'
  [ -c "$VFIO_GROUP_DEV" ] || fail "$VFIO_GROUP_DEV is not a character device"
  # with one controller its namespaces must be gone while vfio-pci owns it
  if [ "$NVB_CONTROLLERS" = 1 ]; then
    wait_gone /dev/nvme0n1 10 || fail "/dev/nvme0n1 still present with $BDF on vfio-pci"
  fi

  step nvme-rebind
  bind_nvme "$BDF" /dev/nvme0n1
  check_cmd dd-after dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1 iflag=direct
fi

# ------------------------------------------------------------------ project binary
step binary
if command -v nvme-bypass >/dev/null 2>&1; then
  check_cmd nvme-bypass-version nvme-bypass --version
  VERSION=$(head -n 1 "$NVB_RESULTS/nvme-bypass-version.log")
  info "nvme-bypass --version: $VERSION"
else
  info "no nvme-bypass binary in the share (run.sh --no-bin); skipped"
  VERSION=
fi

# ------------------------------------------------------------------ summary
step summary
cat > "$NVB_RESULTS/smoke.json" <<EOF
{
  "bdf": $(json_str "$BDF"), "controller": $(json_str "$CTRL"),
  "model": $(json_str "$MODEL"), "serial": $(json_str "$SERIAL"), "firmware_rev": $(json_str "$FWREV"),
  "namespaces": [$NS_JSON],
  "poll_queues": $PQ, "multipath": $(json_str "$MP"), "iommu": $(json_str "$NVB_IOMMU"),
  "vfio_group": $(json_str "$VFIO_GROUP"), "nvme_bypass_version": $(json_str "$VERSION"),
  "kernel": $(json_str "$(uname -r)")
}
EOF
info "wrote $NVB_RESULTS/smoke.json"
echo "smoke: PASS"
