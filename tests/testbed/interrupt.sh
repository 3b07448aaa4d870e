#!/bin/sh
# nvme-bypass test bed: interrupting the userspace driver (runs in the guest).
#
#   scripts/testbed/run.sh [--bin PATH] tests/testbed/interrupt.sh
#
# 1. writes random sentinel data through the kernel just before and just
#    after the benchmark region, and remembers its checksums;
# 2. binds the controller to vfio-pci; starts a verified randrw vfio run in
#    the background; while it runs, a second process is refused the device
#    (exit 2, "already open");
# 3. SIGINT to the run: it must stop within seconds, exit 0, print its
#    figures with "interrupted" and 0 mismatches (it drained what was in
#    flight and shut the controller down);
# 4. the same with SIGTERM, then with SIGINT during the verify prefill;
# 5. our driver brings the controller up again (`info --backend vfio`);
# 6. `nvme-bypass unbind`: the kernel's nvme driver takes it back,
#    /dev/nvme0n1 reads through the kernel, the sentinels are unchanged
#    (nothing outside the benchmark region was touched) and the region's
#    stamps verify through the kernel block path;
# 7. `nvme-bypass compare --paths vfio` (which binds and unbinds by itself)
#    interrupted mid-run gives the controller back to nvme; so does its
#    watcher when compare is killed (SIGKILL).
# Writes $NVB_RESULTS/interrupt.json.
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

command -v nvme-bypass >/dev/null 2>&1 || fail "no nvme-bypass binary in the share (do not use run.sh --no-bin)"
[ "${NVB_IOMMU:-pt}" != off ] || fail "VFIO needs the vIOMMU: run without --no-iommu"
MB=1048576
REGION_OFF_MB=16      # the benchmark region: 16 MiB .. 48 MiB
REGION_MB=32
SENT_MB=4             # sentinels: 12..16 MiB and 48..52 MiB

# ------------------------------------------------------------------ kernel view
step sysfs
BDF=$(nvb_bdf) || fail "no NVMe controller (PCI class 0x010802)"
CTRL=$(nvme_ctrl_of "$BDF") || fail "$BDF is not bound to nvme (driver: $(pci_driver "$BDF"))"
NS=/dev/${CTRL}n1
wait_for "$NS" 10 || fail "$NS missing"
info "$BDF = $CTRL, namespace $NS"

# region_sum DEV OFFSET_MB COUNT_MB: md5 of that part of DEV, read through the kernel
region_sum() {
  dd if="$1" bs=$MB skip="$2" count="$3" 2>/dev/null | md5sum | cut -d' ' -f1
}

step sentinels
dd if=/dev/urandom of=/tmp/sentinel bs=$MB count=$SENT_MB 2>/dev/null || fail "cannot make random data"
LO=$((REGION_OFF_MB - SENT_MB)); HI=$((REGION_OFF_MB + REGION_MB))
dd if=/tmp/sentinel of="$NS" bs=$MB seek=$LO conv=fsync 2>/dev/null || fail "cannot write the low sentinel"
dd if=/tmp/sentinel of="$NS" bs=$MB seek=$HI conv=fsync 2>/dev/null || fail "cannot write the high sentinel"
sync
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
SUM=$(md5sum /tmp/sentinel | cut -d' ' -f1)
[ "$(region_sum "$NS" $LO $SENT_MB)" = "$SUM" ] || fail "low sentinel did not read back"
[ "$(region_sum "$NS" $HI $SENT_MB)" = "$SUM" ] || fail "high sentinel did not read back"
info "sentinels at ${LO}M and ${HI}M ($SENT_MB MiB each, md5 $SUM)"

# ------------------------------------------------------------------ bind
step bind
check_cmd bind nvme-bypass bind "$BDF"
[ "$(pci_driver "$BDF")" = vfio-pci ] || fail "$BDF is on '$(pci_driver "$BDF")' after bind"

BENCH="nvme-bypass bench --backend vfio --device $BDF --allow-write --verify --offset ${REGION_OFF_MB}M --size ${REGION_MB}M --bs 4k"

# ------------------------------------------------------------------ refusals without root
step refusals-without-root
# as_nobody CMD...: run CMD as user nobody (busybox su; the guest has no
# other user, so one is added)
grep -q '^nobody:' /etc/passwd 2>/dev/null || echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >> /etc/passwd
grep -q '^nogroup:' /etc/group 2>/dev/null || echo 'nogroup:x:65534:' >> /etc/group
as_nobody() { busybox su -s /bin/sh nobody -c "$*"; }
NONROOT=skipped
MEMLOCK=skipped
if as_nobody true 2>/dev/null; then
  GROUP=$(iommu_group "$BDF") || fail "$BDF has no IOMMU group"
  rc=0
  as_nobody "PATH=$PATH nvme-bypass info --backend vfio --device $BDF" > "$NVB_RESULTS/nonroot.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$NVB_RESULTS/nonroot.log" >&2; fail "vfio as nobody: exit $rc, expected 2"; }
  grep -q "permission denied, run as root" "$NVB_RESULTS/nonroot.log" || { cat "$NVB_RESULTS/nonroot.log" >&2; fail "vfio as nobody: the message does not say to run as root"; }
  NONROOT=ok
  info "refused as nobody: $(head -n 1 "$NVB_RESULTS/nonroot.log" | cut -c 1-160)"
  # The group opened to nobody, but a 64 KiB locked-memory limit: DMA
  # memory cannot be pinned.
  chmod 666 "/dev/vfio/$GROUP"
  rc=0
  as_nobody "ulimit -l 64; PATH=$PATH exec nvme-bypass info --backend vfio --device $BDF" > "$NVB_RESULTS/memlock.log" 2>&1 || rc=$?
  chmod 600 "/dev/vfio/$GROUP"
  [ "$rc" = 2 ] || { cat "$NVB_RESULTS/memlock.log" >&2; fail "vfio with ulimit -l 64: exit $rc, expected 2"; }
  grep -q "ulimit -l" "$NVB_RESULTS/memlock.log" || { cat "$NVB_RESULTS/memlock.log" >&2; fail "vfio with ulimit -l 64: the message does not say how to raise the limit"; }
  MEMLOCK=ok
  info "refused with a low memlock limit: $(head -n 1 "$NVB_RESULTS/memlock.log" | cut -c 1-200)"
  [ "$(pci_driver "$BDF")" = vfio-pci ] || fail "a refused run moved the controller"
else
  info "skipped: busybox su cannot switch to nobody here"
fi

# interrupt NAME SIGNAL DELAY ARGS...: start a vfio bench in the background,
# send SIGNAL DELAY seconds after it opened the device, and check it ends
# within 15 s, exit 0, "interrupted" and 0 mismatches. Sets STOP_S (seconds
# from the signal to the exit).
interrupt() {
  _name=$1; _sig=$2; _delay=$3; shift 3
  _log=$NVB_RESULTS/$_name.log
  # shellcheck disable=SC2086
  $BENCH "$@" > "$_log" 2>&1 &
  _pid=$!
  wait_open "$_pid" || { cat "$_log" >&2; fail "$_name: the run never opened the device"; }
  sleep "$_delay"
  kill -0 "$_pid" 2>/dev/null || { cat "$_log" >&2; fail "$_name: the run ended before the signal"; }
  _t0=$(cut -d' ' -f1 /proc/uptime)
  kill -"$_sig" "$_pid"
  wait_exit "$_pid" 15 || { kill -9 "$_pid"; fail "$_name: still running 15 s after SIG$_sig"; }
  _rc=0; wait "$_pid" || _rc=$?
  _t1=$(cut -d' ' -f1 /proc/uptime)
  STOP_S=$(awk -v a="$_t0" -v b="$_t1" 'BEGIN{printf "%.2f", b-a}')
  [ "$_rc" = 0 ] || { tail -n 20 "$_log" >&2; fail "$_name: exit $_rc after SIG$_sig, expected 0"; }
  grep -q "interrupted  : stopped by a signal" "$_log" || { cat "$_log" >&2; fail "$_name: no 'interrupted' line"; }
  if grep -q "verify       :" "$_log"; then
    grep -q " 0 mismatches" "$_log" || { grep verify "$_log" >&2; fail "$_name: verify mismatches"; }
  fi
  grep -q "errors       :" "$_log" && { grep errors "$_log" >&2; fail "$_name: failed I/Os"; }
  [ "$(pci_driver "$BDF")" = vfio-pci ] || fail "$_name: the controller left vfio-pci"
  info "$_name: SIG$_sig, stopped in ${STOP_S}s, exit 0, $(grep -c . "$_log") lines of report"
}

# ------------------------------------------------------------------ busy + SIGINT
step busy-and-sigint
$BENCH --rw randrw --rwmixread 70 --iodepth 16 --runtime 60 > "$NVB_RESULTS/sigint.log" 2>&1 &
PID=$!
wait_open "$PID" || { cat "$NVB_RESULTS/sigint.log" >&2; fail "the background vfio run never opened the device"; }
sleep 3
kill -0 "$PID" 2>/dev/null || { cat "$NVB_RESULTS/sigint.log" >&2; fail "the background vfio run ended early"; }
# A second process cannot have the device while the first holds it.
rc=0
nvme-bypass info --backend vfio --device "$BDF" > "$NVB_RESULTS/busy.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$NVB_RESULTS/busy.log" >&2; fail "a second user of the device: exit $rc, expected 2"; }
grep -q "already open" "$NVB_RESULTS/busy.log" || { cat "$NVB_RESULTS/busy.log" >&2; fail "the refusal does not say the device is already open"; }
info "a second process is refused: $(head -n 1 "$NVB_RESULTS/busy.log" | cut -c 1-150)"
t0=$(cut -d' ' -f1 /proc/uptime)
kill -INT "$PID"
rc=0; wait "$PID" || rc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
SIGINT_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
[ "$rc" = 0 ] || { tail -n 20 "$NVB_RESULTS/sigint.log" >&2; fail "SIGINT: exit $rc, expected 0"; }
grep -q "interrupted  : stopped by a signal" "$NVB_RESULTS/sigint.log" || fail "SIGINT: no 'interrupted' line"
grep -q " 0 mismatches" "$NVB_RESULTS/sigint.log" || fail "SIGINT: verify mismatches"
awk -v s="$SIGINT_S" 'BEGIN{exit !(s < 15)}' || fail "SIGINT: took ${SIGINT_S}s to stop"
info "SIGINT: stopped in ${SIGINT_S}s, exit 0, 0 mismatches"

step sigterm
interrupt sigterm TERM 3 --rw randwrite --iodepth 32 --runtime 60
SIGTERM_S=$STOP_S
step sigint-in-prefill
# A larger region (prefilled first) and SIGINT early: stopped in the prefill.
BENCH_SAVED=$BENCH
BENCH="nvme-bypass bench --backend vfio --device $BDF --allow-write --verify --offset ${REGION_OFF_MB}M --size ${REGION_MB}M --bs 512"
interrupt sigint-prefill INT 0.5 --rw randread --iodepth 8 --runtime 60
PREFILL_S=$STOP_S
BENCH=$BENCH_SAVED

# ------------------------------------------------------------------ usable again
step usable-by-our-driver
check_cmd info-after nvme-bypass info --backend vfio --device "$BDF"
info "our driver brings the controller up again after the interrupted runs"
# A clean, uninterrupted verified run over the region (so every block holds
# a complete stamp for the kernel to check).
check_cmd final-run $BENCH --rw randrw --iodepth 8 --runtime 1
grep -q " 0 mismatches" "$NVB_RESULTS/final-run.log" || fail "final run: verify mismatches"

# ------------------------------------------------------------------ back to the kernel
step unbind
check_cmd unbind nvme-bypass unbind "$BDF"
[ "$(pci_driver "$BDF")" = nvme ] || fail "$BDF is on '$(pci_driver "$BDF")' after unbind, not nvme"
wait_for "$NS" 30 || fail "$NS did not come back"
step kernel-reads
dd if="$NS" of=/dev/null bs=$MB count=64 2>"$NVB_RESULTS/dd.log" || { cat "$NVB_RESULTS/dd.log" >&2; fail "$NS is not readable through the kernel"; }
[ "$(region_sum "$NS" $LO $SENT_MB)" = "$SUM" ] || fail "the low sentinel (${LO}M) changed: data outside the benchmark region was touched"
[ "$(region_sum "$NS" $HI $SENT_MB)" = "$SUM" ] || fail "the high sentinel (${HI}M) changed: data outside the benchmark region was touched"
info "$NS reads through the kernel; both sentinels unchanged"
KERNEL_VERIFY=skipped
if nvme-bypass bench --backend block --device "$NS" --rw read --bs 4k --iodepth 8 --offset ${REGION_OFF_MB}M --size ${REGION_MB}M \
     --verify --verify-only > "$NVB_RESULTS/kernel-verify.log" 2>&1; then
  KERNEL_VERIFY=ok
  info "the benchmark region's stamps verify through the kernel block path"
else
  if grep -q "mismatch" "$NVB_RESULTS/kernel-verify.log"; then
    tail -n 5 "$NVB_RESULTS/kernel-verify.log" >&2; fail "stamps written through vfio do not verify through the kernel"
  fi
  info "skipped kernel verify: $(tail -n 1 "$NVB_RESULTS/kernel-verify.log")"
fi

# ------------------------------------------------------------------ compare interrupted
# compare_ended NAME HOW: start `compare --paths vfio` (which binds and
# unbinds by itself), end it HOW while its vfio row runs (int: SIGINT;
# kill: SIGKILL, as any end that runs no guard of ours, a second Ctrl-C
# among them), then require the controller back on nvme within 60 s, no
# state file left, the namespace readable and the sentinels unchanged.
# After `kill` the run gives nothing back itself: its watcher does.
compare_ended() {
  _log="$NVB_RESULTS/compare-$1.log"
  # In a session and process group of its own (setsid does not fork here:
  # a non-interactive shell's job leads no group), so that `kill` below can
  # signal compare's whole group as a terminal's `kill -9 %1` would.
  setsid nvme-bypass compare --device "$BDF" --paths vfio --runtime 60 --ramp-time 0 --offset ${REGION_OFF_MB}M --size ${REGION_MB}M \
    --out "$NVB_RESULTS/compare-$1" > "$_log" 2>&1 &
  PID=$!
  # Bound and holding the device, or ended early (said below).
  wait_until 30 '! kill -0 "$PID" 2>/dev/null || { [ "$(pci_driver "$BDF")" = vfio-pci ] && ls -l /proc/"$PID"/fd 2>/dev/null | grep -q "/dev/vfio/[0-9]"; }' ||
    { kill -9 "$PID"; cat "$_log" >&2; fail "compare ($1) never bound $BDF to vfio-pci"; }
  kill -0 "$PID" 2>/dev/null || { cat "$_log" >&2; fail "compare ($1) ended before binding"; }
  sleep 3
  case "$2" in
    int) kill -INT "$PID" ;;
    kill) kill -KILL "-$PID" ;;
  esac
  wait_exit "$PID" 30 || { kill -9 "$PID"; fail "compare ($1) still running 30 s after its signal"; }
  rc=0; wait "$PID" || rc=$?
  info "compare exited $rc after $2"
  WAITED=0
  if [ "$2" = int ]; then
    # compare's own guard: back before it exited, the watcher not needed.
    [ "$(pci_driver "$BDF")" = nvme ] || { tail -n 20 "$_log" >&2; fail "compare exited after SIGINT with $BDF on '$(pci_driver "$BDF")', not nvme"; }
  else
    # The watcher: back, its state file gone and what it did said.
    wait_until 60 '[ "$(pci_driver "$BDF")" = nvme ] && [ ! -e "/run/nvme-bypass/$BDF.json" ] && grep -q "ended before it gave back what it changed" "$_log"' ||
      { tail -n 20 "$_log" >&2; fail "60 s after compare ended ($2) $BDF is on '$(pci_driver "$BDF")' (state file: $(ls /run/nvme-bypass/ 2>/dev/null)), not given back by the watcher"; }
  fi
  wait_for "$NS" 30 || fail "$NS did not come back after compare ended ($2)"
  dd if="$NS" of=/dev/null bs=$MB count=16 2>/dev/null || fail "$NS not readable after compare ended ($2)"
  [ "$(region_sum "$NS" $LO $SENT_MB)" = "$SUM" ] && [ "$(region_sum "$NS" $HI $SENT_MB)" = "$SUM" ] ||
    fail "a sentinel changed during compare ($2)"
  [ ! -e "/run/nvme-bypass/$BDF.json" ] || fail "compare ended ($2) and left its state file /run/nvme-bypass/$BDF.json"
  ! grep -q "ended before it gave back" "$_log" || [ "$2" != int ] || fail "after SIGINT compare left its controller to the watcher"
  info "compare ended ($2) gave $BDF back to nvme after $WAITED s; $NS reads; sentinels unchanged"
}

step compare-interrupted
compare_ended int int

step compare-killed
# SIGKILL to compare's process group (as `kill -9 %1` or `timeout -k`
# send it) runs no guard of ours: the watcher gives the controller back.
compare_ended killed kill

cat > "$NVB_RESULTS/interrupt.json" <<EOF
{"bdf": $(json_str "$BDF"), "sigint_stop_s": $SIGINT_S, "sigterm_stop_s": $SIGTERM_S, "prefill_sigint_stop_s": $PREFILL_S,
 "busy_refused": true, "nonroot_refused": $(json_str "$NONROOT"), "memlock_refused": $(json_str "$MEMLOCK"), "sentinels_unchanged": true, "kernel_verify": $(json_str "$KERNEL_VERIFY"), "compare_rebound": true, "compare_killed_rebound": true}
EOF
echo "PASS: interrupt.sh"
