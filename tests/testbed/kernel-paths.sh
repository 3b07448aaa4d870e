#!/bin/sh
# nvme-bypass test bed: the two kernel paths (runs in the guest).
#
#   scripts/testbed/run.sh --bin PATH --poll-queues 1 tests/testbed/kernel-paths.sh
#
# Checks, on the emulated controller's first namespace:
#   * passthru (/dev/ng0n1, io_uring IORING_OP_URING_CMD) and block
#     (/dev/nvme0n1 with --ioengine io_uring, libaio, psync) run randread,
#     randwrite and randrw 75/25 with --verify: 0 errors, 0 mismatches;
#   * the io_uring options (--fixedbufs, --registerfiles, --sqthread-poll,
#     --batch) on both paths;
#   * cross-path: data written through one path verifies through the others
#     (--verify-only with the same --verify-seed);
#   * polled completions (--hipri, IOPOLL) on both paths when the guest has
#     nvme poll queues (run.sh --poll-queues N), the clear refusal otherwise;
#   * the clear refusals: passthru on the block device, --hipri without poll
#     queues; `info --backend passthru` identifies the controller.
# Writes $NVB_RESULTS/kernel-paths.json (IOPS and system calls per I/O of each run).
set -eu
# shellcheck source=tests/testbed/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"

: "${NVB_POLL_QUEUES:=0}"
NG=/dev/ng0n1
BLK=/dev/nvme0n1
RUNTIME=${KP_RUNTIME:-2}
SIZE=${KP_SIZE:-64M}
SUMMARY=

# field NAME FILE: the largest integer value of "NAME": N in a JSON report
field() { sed -n "s/.*\"$1\": \([0-9][0-9]*\).*/\1/p" "$2" | sort -n | tail -n 1; }
# ffield NAME FILE: the first number value of "NAME" (may be a float)
ffield() { sed -n "s/.*\"$1\": \([0-9.e+-][0-9.e+-]*\).*/\1/p" "$2" | head -n 1; }

# bench NAME ARGS...: run `nvme-bypass bench ARGS` with JSON output into
# $NVB_RESULTS/kp-NAME.json; fail unless it exits 0 (no failed I/O, no
# mismatch) and, with --verify, checked some blocks.
bench() {
  _name=$1; shift
  _out=$NVB_RESULTS/kp-$_name.json
  _err=$NVB_RESULTS/kp-$_name.err
  if nvme-bypass bench --output-format json "$@" > "$_out" 2> "$_err"; then :; else
    _rc=$?
    echo "---- $_err ----" >&2; tail -n 20 "$_err" >&2
    fail "$_name: 'nvme-bypass bench $*' exited with rc=$_rc"
  fi
  _ver=$(field verified_blocks "$_out"); _mis=$(field mismatches "$_out"); _errs=$(field errors "$_out")
  [ "${_mis:-0}" = 0 ] || fail "$_name: $_mis mismatching blocks"
  [ "${_errs:-0}" = 0 ] || fail "$_name: $_errs failed I/Os"
  case " $* " in
    *" --verify "*) [ "${_ver:-0}" -gt 0 ] || fail "$_name: --verify checked no blocks" ;;
  esac
  _riops=$(ffield iops "$_out"); _sc=$(field syscalls "$_out")
  info "ok: $_name: verified=${_ver:-0} read_iops=${_riops:-?} syscalls=${_sc:-0} ($*)"
  SUMMARY="$SUMMARY${SUMMARY:+,
  }$(json_str "$_name"): {\"verified_blocks\": ${_ver:-0}, \"read_iops\": ${_riops:-0}, \"syscalls\": ${_sc:-0}}"
}

# refuse NAME WANT ARGS...: `nvme-bypass ARGS` must exit 2 and say WANT
refuse() {
  _name=$1; _want=$2; shift 2
  _err=$NVB_RESULTS/kp-$_name.err
  _rc=0; nvme-bypass "$@" > /dev/null 2> "$_err" || _rc=$?
  [ "$_rc" = 2 ] || { cat "$_err" >&2; fail "$_name: expected exit 2, got $_rc ('nvme-bypass $*')"; }
  grep -q -- "$_want" "$_err" || { cat "$_err" >&2; fail "$_name: message lacks '$_want'"; }
  info "ok: $_name refused: $(head -c 160 "$_err")"
}

# ------------------------------------------------------------------ devices
step devices
command -v nvme-bypass > /dev/null || fail "no nvme-bypass binary on PATH (run.sh --bin PATH)"
[ -c "$NG" ] || fail "$NG (generic char device) missing"
[ -b "$BLK" ] || fail "$BLK missing"
info "kernel $(uname -r); nvme poll_queues=$(cat /sys/module/nvme/parameters/poll_queues) multipath=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null || echo ?)"
info "$BLK: io_poll=$(cat /sys/block/nvme0n1/queue/io_poll) max_hw_sectors_kb=$(cat /sys/block/nvme0n1/queue/max_hw_sectors_kb) scheduler: $(cat /sys/block/nvme0n1/queue/scheduler 2>/dev/null || echo ?)"

step info
check_cmd kp-info-ctrl nvme-bypass info --backend passthru --device /dev/nvme0
grep -q "NVME Identify Controller" "$NVB_RESULTS/kp-info-ctrl.log" || fail "info printed no Identify Controller"
check_cmd kp-info-ng nvme-bypass info --backend passthru --device "$NG"

step refusals
refuse passthru-on-block "io_uring_cmd needs the generic char device /dev/ngXnY" bench --backend passthru --device "$BLK"
refuse block-on-ng "character device" bench --backend block --device "$NG"
refuse write-without-allow "--allow-write" bench --backend passthru --device "$NG" --rw randwrite
if [ "$NVB_POLL_QUEUES" = 0 ]; then
  refuse hipri-without-poll-queues "poll queues" bench --backend passthru --device "$NG" --hipri --runtime 1
  refuse hipri-block-without-poll-queues "poll queues" bench --backend block --device "$BLK" --hipri --runtime 1
fi

# ------------------------------------------------------------------ workloads with --verify
step matrix
for rw in randread randwrite randrw; do
  mix="--rw $rw --rwmixread 75"
  # shellcheck disable=SC2086  # $mix: several words on purpose
  bench "passthru-$rw" --backend passthru --device "$NG" $mix --iodepth 16 --runtime "$RUNTIME" --size "$SIZE" --verify --allow-write
  for eng in io_uring libaio; do
    # shellcheck disable=SC2086
    bench "block-$eng-$rw" --backend block --device "$BLK" --ioengine "$eng" $mix --iodepth 16 --runtime "$RUNTIME" --size "$SIZE" --verify --allow-write
  done
done
bench block-psync-randrw --backend block --device "$BLK" --ioengine psync --rw randrw --rwmixread 75 --iodepth 1 --runtime "$RUNTIME" --size 16M --verify --allow-write
bench passthru-bs64k-seq --backend passthru --device "$NG" --rw rw --bs 64k --iodepth 8 --runtime "$RUNTIME" --size "$SIZE" --verify --allow-write

step uring-options
for dev in passthru block; do
  if [ "$dev" = passthru ]; then d=$NG; else d=$BLK; fi
  bench "$dev-fixedbufs-regfiles" --backend "$dev" --device "$d" --fixedbufs --registerfiles --batch 4 --rw randrw --iodepth 16 --runtime "$RUNTIME" --size 32M --verify --allow-write
  # 8M: the verify prefill went through the SQ thread too, about 700
  # writes per second under TCG (32M took 12 s).
  bench "$dev-sqpoll" --backend "$dev" --device "$d" --sqthread-poll --rw randrw --iodepth 16 --runtime "$RUNTIME" --size 8M --verify --allow-write
  bench "$dev-2jobs" --backend "$dev" --device "$d" --numjobs 2 --rw randrw --iodepth 8 --runtime "$RUNTIME" --size 32M --verify --allow-write
done

# ------------------------------------------------------------------ cross-path verification
step cross-path
# Each writer stamps a region with its own seed; every other path checks it.
cross() { # cross NAME WRITER-ARGS... -- : then reads with every path
  _n=$1; _seed=$2; _off=$3; shift 3
  bench "cross-$_n-write" "$@" --rw write --bs 4k --iodepth 16 --offset "$_off" --size 16M --verify --verify-seed "$_seed" --allow-write
  bench "cross-$_n-by-passthru" --backend passthru --device "$NG" --rw read --iodepth 16 --offset "$_off" --size 16M --verify --verify-only --verify-seed "$_seed"
  for eng in io_uring libaio; do
    bench "cross-$_n-by-block-$eng" --backend block --device "$BLK" --ioengine "$eng" --rw read --iodepth 16 --offset "$_off" --size 16M --verify --verify-only --verify-seed "$_seed"
  done
  bench "cross-$_n-by-block-psync" --backend block --device "$BLK" --ioengine psync --rw read --iodepth 1 --offset "$_off" --size 4M --verify --verify-only --verify-seed "$_seed"
  _v=$(field verified_blocks "$NVB_RESULTS/kp-cross-$_n-by-block-io_uring.json")
  _lbs=$(cat /sys/block/nvme0n1/queue/logical_block_size)
  [ "$_v" = $((16 * 1024 * 1024 / _lbs)) ] || fail "cross-$_n: block/io_uring checked $_v blocks, expected every block of 16M"
}
cross passthru 1111 128M --backend passthru --device "$NG"
cross block-libaio 2222 160M --backend block --device "$BLK" --ioengine libaio
cross block-io_uring 3333 192M --backend block --device "$BLK" --ioengine io_uring --fixedbufs
# A wrong seed must fail: the cross checks are real.
_rc=0; nvme-bypass bench --backend passthru --device "$NG" --rw read --iodepth 4 --offset 128M --size 1M --verify --verify-only --verify-seed 9999 > /dev/null 2>&1 || _rc=$?
[ "$_rc" = 1 ] || fail "verify-only with the wrong seed exited $_rc, expected 1 (mismatches)"
info "ok: wrong seed detected (rc=1)"

# ------------------------------------------------------------------ polled completions
step polled
if [ "$NVB_POLL_QUEUES" -gt 0 ]; then
  for rw in randread randrw; do
    bench "passthru-hipri-$rw" --backend passthru --device "$NG" --hipri --rw "$rw" --rwmixread 75 --iodepth 16 --runtime "$RUNTIME" --size 32M --verify --allow-write
    bench "block-hipri-$rw" --backend block --device "$BLK" --hipri --rw "$rw" --rwmixread 75 --iodepth 16 --runtime "$RUNTIME" --size 32M --verify --allow-write
  done
  bench passthru-hipri-fixed --backend passthru --device "$NG" --hipri --fixedbufs --registerfiles --rw randread --iodepth 32 --runtime "$RUNTIME" --size 32M --verify --allow-write
  bench passthru-hipri-sqpoll --backend passthru --device "$NG" --hipri --sqthread-poll --rw randread --iodepth 16 --runtime "$RUNTIME" --size 8M --verify --allow-write
  bench block-hipri-sqpoll --backend block --device "$BLK" --hipri --sqthread-poll --rw randread --iodepth 16 --runtime "$RUNTIME" --size 8M --verify --allow-write
else
  info "skipped: no nvme poll queues (run.sh --poll-queues 1 runs the polled variants)"
fi

# ------------------------------------------------------------------ summary
step summary
cat > "$NVB_RESULTS/kernel-paths.json" <<EOF
{
  "kernel": $(json_str "$(uname -r)"), "poll_queues": $NVB_POLL_QUEUES,
  "runs": {
  $SUMMARY
  }
}
EOF
info "wrote $NVB_RESULTS/kernel-paths.json"
echo "kernel-paths: PASS"
