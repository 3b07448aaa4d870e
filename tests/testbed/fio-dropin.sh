#!/bin/sh
# nvme-bypass test bed: `nvme-bypass fio` as a drop-in for fio (runs in the
# guest, which has fio).
#
#   scripts/testbed/run.sh tests/testbed/fio-dropin.sh
#
# 1. block: the seed's three fio command lines (randrw 75/25, randread,
#    randwrite; libaio, direct, gtod_reduce, iodepth 64) on /dev/nvme0n1,
#    each run by fio and by `nvme-bypass fio` with only `fio` replaced:
#    `grep IOPS` gives lines of the same shape (numbers masked), and the
#    other lines fio prints with a figure we have (job header, groupid,
#    cpu, issued rwts, latency, Run status) are there too;
# 2. passthru: ioengine=io_uring_cmd cmd_type=nvme on /dev/ng0n1, fio and
#    ours, same shape, with the latency block (no gtod_reduce);
#    ioscheduler= switches the namespace's scheduler for the job and puts
#    it back; killed (SIGKILL), the run's hand-back watcher puts it back;
# 3. a job file with ${DEV}, [global], stonewall and --section;
# 4. vfio: ioengine=nvme-bypass-vfio with filename=0000\:01\:00.0 (escaped
#    colons, as xNVMe's fio users write it), then with SPDK's fio plugin's
#    filename=trtype=PCIe traddr=0000.01.00.0 ns=1.
# The seed's jobs as one job file, fio against ours on every path, run in
# a boot of their own with a device limit: tests/testbed/fio-seed.sh.
# Writes every output to $NVB_RESULTS/fio-dropin/.
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

fio_setup fio-dropin

# mask FILE: its IOPS lines with every number replaced by N.
mask() { grep IOPS "$1" | sed -E 's/[0-9][0-9.]*[kKMGTP]?(i?B)?/N/g'; }

step block
for rw in randrw randread randwrite; do
  for tool in fio ours; do
    if [ $tool = fio ]; then CMD=fio; else CMD="nvme-bypass fio"; fi
    # shellcheck disable=SC2086
    check_cmd "$tool-$rw" $CMD --randrepeat=1 --ioengine=libaio --direct=1 --gtod_reduce=1 --name=test --filename="$NS" --bs=4k --iodepth=64 --size=64M --io_size=16M --readwrite=$rw --rwmixread=75 --output="$tool.$rw.txt" --output-format=normal
  done
  grep IOPS "fio.$rw.txt" "ours.$rw.txt" | sed 's/^/  /'
  [ "$(mask "fio.$rw.txt")" = "$(mask "ours.$rw.txt")" ] || fail "$rw: IOPS lines differ in shape from fio's"
  for pat in "^test: (g=0): rw=$rw, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, iodepth=64\$" \
    '^test: (groupid=0, jobs=1): err= 0: pid=' '^  cpu          : usr=' '^     issued rwts: total=' '^     latency   : target=0' '^Run status group 0 (all jobs):$'; do
    grep -q "$pat" "fio.$rw.txt" || fail "fio.$rw.txt lacks '$pat' (the check itself is wrong)"
    grep -q "$pat" "ours.$rw.txt" || fail "ours.$rw.txt lacks '$pat', which fio prints"
  done
  grep -q '^  nvme-bypass  : block/libaio (measured' "ours.$rw.txt" || fail "ours.$rw.txt: our figures are not there, or not labelled"
done

step ioscheduler
# ioscheduler= switches the namespace's scheduler for the job (fio's
# set_ioscheduler) and puts the one it found back when the run ends.
SCHED=/sys/block/$(basename "$NS")/queue/scheduler
before=$(cat "$SCHED")
check_cmd ours-ioscheduler nvme-bypass fio --name=s --ioengine=io_uring --direct=1 --filename="$NS" --rw=randread --bs=4k --iodepth=8 --size=64M --io_size=2M --ioscheduler=mq-deadline --output=ours.ioscheduler.txt
case $before in
  *"[mq-deadline]"*) ;;
  *) grep -q 'I/O scheduler .* -> mq-deadline' "$NVB_RESULTS/ours-ioscheduler.log" || fail "ioscheduler=mq-deadline: no switch reported (scheduler was '$before')" ;;
esac
[ "$(cat "$SCHED")" = "$before" ] || fail "ioscheduler=: $SCHED reads '$(cat "$SCHED")' after the run, '$before' before it"
info "ioscheduler=mq-deadline: switched for the job, '$before' put back"

step ioscheduler-killed
# Killed (SIGKILL to its process group) while the job runs, the run puts
# nothing back itself: the hand-back watcher it started does.
case $before in
  *"[mq-deadline]"*) info "ioscheduler-killed: skipped, the namespace is on mq-deadline already" ;;
  *)
    _log=$NVB_RESULTS/ours-ioscheduler-killed.log
    : > "$_log"
    # In its own process group (setsid does not fork here): the kill below
    # takes the whole group, as a terminal's `kill -9 %1` does.
    setsid nvme-bypass fio --name=s --ioengine=io_uring --direct=1 --filename="$NS" --rw=randread --bs=4k --iodepth=8 --size=64M \
      --time_based --runtime=60 --ioscheduler=mq-deadline --output=ours.ioscheduler-killed.txt > "$_log" 2>&1 &
    _pid=$!
    wait_until 30 'grep -q "I/O scheduler .* -> mq-deadline" "$_log" 2>/dev/null' ||
      { kill -9 "$_pid"; cat "$_log" >&2; fail "ioscheduler-killed: no switch reported in 30 s"; }
    sleep 1
    kill -KILL "-$_pid"
    wait "$_pid" || true
    wait_until 30 '[ "$(cat "$SCHED")" = "$before" ] && grep -q "ended before it gave back what it changed" "$_log"' ||
      { cat "$_log" >&2; fail "ioscheduler-killed: $SCHED reads '$(cat "$SCHED")' 30 s after the kill, '$before' before it"; }
    info "ioscheduler-killed: the watcher put '$before' back after SIGKILL"
    ;;
esac

step passthru
for tool in fio ours; do
  if [ $tool = fio ]; then CMD=fio; else CMD="nvme-bypass fio"; fi
  # shellcheck disable=SC2086
  check_cmd "$tool-passthru" $CMD --name=pt --ioengine=io_uring_cmd --cmd_type=nvme --filename="$NG" --rw=randread --bs=4k --iodepth=16 --size=64M --io_size=8M --output="$tool.passthru.txt"
done
grep IOPS fio.passthru.txt ours.passthru.txt | sed 's/^/  /'
[ "$(mask fio.passthru.txt)" = "$(mask ours.passthru.txt)" ] || fail "passthru: IOPS lines differ in shape from fio's"
# Without gtod_reduce: fio's latency lines (slat, clat, lat, clat
# percentiles), in fio's order; their units follow the figures.
lat_labels() { grep -E '^    (slat|clat| lat|clat percentiles) \(' "$1" | sed -E 's/ \((usec|nsec|msec)\).*//'; }
lat_labels ours.passthru.txt | sed 's/^/  ours:/'
[ -n "$(lat_labels fio.passthru.txt)" ] || fail "fio.passthru.txt has no latency lines (the check itself is wrong)"
[ "$(lat_labels fio.passthru.txt)" = "$(lat_labels ours.passthru.txt)" ] || fail "passthru: latency lines differ from fio's: $(lat_labels fio.passthru.txt | tr '\n' ',') against $(lat_labels ours.passthru.txt | tr '\n' ',')"
grep -q '^  nvme-bypass  : passthru' ours.passthru.txt || fail "not the passthru path"

step jobfile
cat > jobs.fio <<'JOB'
; two groups on the namespace
[global]
filename=${DEV}
ioengine=io_uring
direct=1
bs=4k
size=64M
io_size=4M
[writer]
rw=randwrite
iodepth=8
[reader]
stonewall
rw=randread
iodepth=8
JOB
check_cmd jobfile sh -c "DEV=$NS nvme-bypass fio jobs.fio > ours.jobfile.txt"
grep -q '^writer: (g=0)' ours.jobfile.txt && grep -q '^reader: (g=1)' ours.jobfile.txt || fail "groups not as stonewall says"
grep -q '^Run status group 1 (all jobs):' ours.jobfile.txt || fail "no status for group 1"
check_cmd section sh -c "DEV=$NS nvme-bypass fio --section=reader jobs.fio > ours.section.txt"
if grep -q '^writer' ours.section.txt; then fail "--section=reader ran writer too"; fi

step json-keys
# fio's JSON and ours for the same job, block and passthru: the host's
# scripts/fio-keys.py compares their key sets after the boot.
for tool in fio ours; do
  if [ $tool = fio ]; then CMD=fio; else CMD="nvme-bypass fio"; fi
  # shellcheck disable=SC2086
  check_cmd "$tool-json-block" $CMD --name=test --ioengine=libaio --direct=1 --filename="$NS" --rw=randread --bs=4k --iodepth=16 --size=64M --io_size=8M --output-format=json --output="$tool.block.json"
  # shellcheck disable=SC2086
  check_cmd "$tool-json-passthru" $CMD --name=pt --ioengine=io_uring_cmd --cmd_type=nvme --filename="$NG" --rw=randread --bs=4k --iodepth=16 --size=64M --io_size=8M --output-format=json --output="$tool.passthru.json"
done

step vfio
bind_vfio "$BDF"
ESC=$(echo "$BDF" | sed 's/:/\\:/g')
info "filename=$ESC"
check_cmd vfio nvme-bypass fio --name=v --ioengine=nvme-bypass-vfio --filename="$ESC" --rw=randread --bs=4k --iodepth=16 --size=64M --io_size=8M --output=ours.vfio.txt
grep IOPS ours.vfio.txt | sed 's/^/  /'
grep -q '^  nvme-bypass  : vfio (measured, emulated' ours.vfio.txt || fail "vfio run not labelled measured, emulated"
# The same controller named as SPDK's fio plugin names it.
TRID="trtype=PCIe traddr=$(echo "$BDF" | tr ':' '.') ns=1"
info "filename=$TRID"
check_cmd vfio-spdk-name nvme-bypass fio --name=v --ioengine=nvme-bypass-vfio --filename="$TRID" --rw=randread --bs=4k --iodepth=16 --size=64M --io_size=8M --output=ours.vfio-trid.txt
grep -q '^  nvme-bypass  : vfio (measured, emulated' ours.vfio-trid.txt || fail "vfio run named by a transport ID not labelled measured, emulated"
bind_nvme "$BDF"
info "fio-dropin: all checks passed"
