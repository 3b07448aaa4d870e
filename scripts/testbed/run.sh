#!/bin/bash
# nvme-bypass test bed: boot a QEMU guest with emulated NVMe and run one guest
# script in it. See scripts/testbed/README.md.
#
# usage: scripts/testbed/run.sh [options] GUEST_SCRIPT [ARGS...]
#
# GUEST_SCRIPT is a host path (normally under tests/testbed/); ARGS are handed
# to it in the guest (through the file args in the share, one per line).
#
# NVMe topology and kernel:
#   --controllers N       NVMe controllers (default 1); serials nvb0000, nvb0001, ...
#   --namespaces N        namespaces per controller (default 1)
#   --lba-size 512|4096   logical (= physical) block size (default 512)
#   --disk-size SIZE      size of each namespace's raw image (default 1G)
#   --nvme-opts ",k=v,.." appended to every -device nvme (e.g. ",mdts=5,max_ioqpairs=4")
#   --poll-queues N       nvme.poll_queues=N (default: kernel default, 0)
#   --multipath Y|N       nvme_core.multipath=... (default: kernel default, Y)
#   --iommu-pt            vIOMMU, guest iommu=pt (default)
#   --iommu-translate     vIOMMU translating DMA for kernel drivers too
#   --no-iommu            no vIOMMU (VFIO cannot bind then)
#   --extra-append "..."  extra guest kernel command-line words (last wins)
#   --qemu-args "..."     extra QEMU arguments (split on spaces)
# Machine and run:
#   --smp N (default 2)   --mem SIZE (default 2G)
#   --timeout SECS        hard limit for the whole boot (default 600)
#   --results DIR         results/share dir (default target/testbed/results/<script>-<time>)
#   --bin PATH            use this static nvme-bypass binary instead of building it
#   --no-bin              run without a project binary
#   --keep-disks          keep the namespace images (RESULTS/work/*.img) afterwards
#   --quiet               do not echo the console (it is still logged)
#   --shell               after the script, a shell on the console (interactive)
#
# Exit status: the guest script's exit code when the guest printed
# `NVB-GUEST-EXIT rc=N`; otherwise 124 = timeout, 125 = the guest or QEMU
# failed before that line (init failure, kernel panic, QEMU error),
# 3 = host-side preparation failed, 2 = usage error.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${NVB_TESTBED_DIR:-/var/tmp/nvme-bypass-testbed}
export NVB_TESTBED_DIR=$CACHE

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die_usage() { echo "run.sh: $*" >&2; echo "run.sh: see --help" >&2; exit 2; }
die_prep() { echo "run.sh: ERROR: $*" >&2; exit 3; }
say() { echo "testbed: $*"; }

# ---------------------------------------------------------------- options
POLL_QUEUES=; MULTIPATH=; LBA_SIZE=512; NAMESPACES=1; CONTROLLERS=1
DISK_SIZE=1G; NVME_OPTS=; IOMMU=pt; EXTRA_APPEND=; QEMU_EXTRA=
SMP=2; MEM=2G; TIMEOUT=600; RESULTS=; BIN=; NO_BIN=0; KEEP_DISKS=0; QUIET=0; SHELL_AFTER=0

need_arg() { [ $# -ge 2 ] || die_usage "option $1 needs a value"; }
is_uint() { case "$1" in ''|*[!0-9]*) return 1 ;; esac; }
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; opt=$1 ;; esac
  case "$opt" in
    --poll-queues)  need_arg "$@"; POLL_QUEUES=$2; shift 2 ;;
    --multipath)    need_arg "$@"; MULTIPATH=$2; shift 2 ;;
    --lba-size)     need_arg "$@"; LBA_SIZE=$2; shift 2 ;;
    --namespaces)   need_arg "$@"; NAMESPACES=$2; shift 2 ;;
    --controllers)  need_arg "$@"; CONTROLLERS=$2; shift 2 ;;
    --disk-size)    need_arg "$@"; DISK_SIZE=$2; shift 2 ;;
    --nvme-opts)    need_arg "$@"; NVME_OPTS=$2; shift 2 ;;
    --iommu-pt)        IOMMU=pt; shift ;;
    --iommu-translate) IOMMU=translate; shift ;;
    --no-iommu)        IOMMU=off; shift ;;
    --extra-append) need_arg "$@"; EXTRA_APPEND=$2; shift 2 ;;
    --qemu-args)    need_arg "$@"; QEMU_EXTRA=$2; shift 2 ;;
    --smp)          need_arg "$@"; SMP=$2; shift 2 ;;
    --mem)          need_arg "$@"; MEM=$2; shift 2 ;;
    --timeout)      need_arg "$@"; TIMEOUT=$2; shift 2 ;;
    --results)      need_arg "$@"; RESULTS=$2; shift 2 ;;
    --bin)          need_arg "$@"; BIN=$2; shift 2 ;;
    --no-bin)       NO_BIN=1; shift ;;
    --keep-disks)   KEEP_DISKS=1; shift ;;
    --quiet)        QUIET=1; shift ;;
    --shell)        SHELL_AFTER=1; shift ;;
    -h|--help)      usage; exit 0 ;;
    --)             shift; break ;;
    -*)             die_usage "unknown option $opt" ;;
    *)              break ;;
  esac
done
[ $# -ge 1 ] || die_usage "missing GUEST_SCRIPT"
SCRIPT_HOST=$1; shift
GUEST_ARGS=("$@")

[ -z "$POLL_QUEUES" ] || is_uint "$POLL_QUEUES" || die_usage "--poll-queues wants a number"
case "$MULTIPATH" in ''|Y|N) ;; y|1) MULTIPATH=Y ;; n|0) MULTIPATH=N ;; *) die_usage "--multipath wants Y or N" ;; esac
case "$LBA_SIZE" in 512|4096) ;; *) die_usage "--lba-size wants 512 or 4096" ;; esac
in_range() { is_uint "$1" && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
in_range "$NAMESPACES" 1 256 || die_usage "--namespaces wants 1..256"
in_range "$CONTROLLERS" 1 16 || die_usage "--controllers wants 1..16"
in_range "$SMP" 1 64 || die_usage "--smp wants 1..64"
in_range "$TIMEOUT" 1 86400 || die_usage "--timeout wants seconds (1..86400)"
[ -z "$NVME_OPTS" ] || [ "${NVME_OPTS:0:1}" = , ] || NVME_OPTS=,$NVME_OPTS
[ "$NO_BIN" = 0 ] || [ -z "$BIN" ] || die_usage "--bin and --no-bin exclude each other"
[ -f "$SCRIPT_HOST" ] || die_usage "guest script '$SCRIPT_HOST' not found"
SCRIPT_HOST=$(cd "$(dirname "$SCRIPT_HOST")" && pwd)/$(basename "$SCRIPT_HOST")
for a in "${GUEST_ARGS[@]}"; do
  case "$a" in *$'\n'*) die_usage "guest script arguments cannot contain newlines" ;; esac
done
[ "$(id -u)" = 0 ] || die_prep "must run as root (setup installs packages; QEMU shares the results dir)"

T_RUN0=${EPOCHREALTIME/./}
elapsed() { local d=$(( ${EPOCHREALTIME/./} - ${1:-$T_RUN0} )); printf '%d.%02d' $((d / 1000000)) $((d / 10000 % 100)); }

# ---------------------------------------------------------------- host side
"$HERE/setup.sh" || die_prep "setup.sh failed (see above)"
# shellcheck disable=SC1091
. "$CACHE/testbed.env"
BUILD_OUT=$("$HERE/build-initramfs.sh") || die_prep "build-initramfs.sh failed (see above)"
INITRD=$(tail -n 1 <<<"$BUILD_OUT")
TOOLS=$(sed -n 's/^TOOLS=//p' <<<"$BUILD_OUT")
[ -f "$INITRD" ] || die_prep "build-initramfs.sh gave no image"

if [ "$NO_BIN" = 1 ]; then
  BIN=
elif [ -n "$BIN" ]; then
  if [ ! -f "$BIN" ] || [ ! -x "$BIN" ]; then die_prep "--bin $BIN is not an executable file"; fi
else
  [ -f "$REPO/Cargo.toml" ] || die_prep "no Cargo.toml in $REPO: pass --bin PATH (or --no-bin)"
  say "building nvme-bypass (static, release)"
  T_B=${EPOCHREALTIME/./}
  ( cd "$REPO" && RUSTFLAGS='-C target-feature=+crt-static' \
      cargo build --release --target x86_64-unknown-linux-gnu -p nvme-bypass --bin nvme-bypass ) ||
    die_prep "cargo build of nvme-bypass failed; fix it, or pass --bin PATH / --no-bin"
  BIN=${CARGO_TARGET_DIR:-$REPO/target}/x86_64-unknown-linux-gnu/release/nvme-bypass
  [ -x "$BIN" ] || die_prep "cargo build succeeded but $BIN is missing"
  say "built $BIN in $(elapsed "$T_B") s"
fi
if [ -n "$BIN" ] && ! ldd "$BIN" 2>&1 | grep -qE 'statically linked|not a dynamic executable'; then
  echo "testbed: WARNING: $BIN is dynamically linked; the guest has only fio's libraries" >&2
fi

# ---------------------------------------------------------------- the share
# One directory is the 9p share and the results dir at once:
#   bin/nvme-bypass  tests/ (copy of tests/testbed)  results/ (guest writes)
#   args  testbed.env  work/ (namespace images)  console.log  run.json
SCRIPT_NAME=$(basename "$SCRIPT_HOST"); SCRIPT_NAME=${SCRIPT_NAME%.*}
if [ -z "$RESULTS" ]; then
  RESULTS=$REPO/target/testbed/results/$SCRIPT_NAME-$(date +%Y%m%d-%H%M%S)
  [ ! -e "$RESULTS" ] || RESULTS=$RESULTS-$$
fi
if [ -e "$RESULTS" ] && [ -n "$(ls -A "$RESULTS" 2>/dev/null)" ]; then
  die_prep "--results $RESULTS exists and is not empty"
fi
mkdir -p "$RESULTS"/{bin,results,work}
RESULTS=$(cd "$RESULTS" && pwd)
PIDFILE=$RESULTS/work/qemu.pid
GUARD_PIDFILE=$RESULTS/work/guard.pid
TIMEOUT_PIDFILE=$RESULTS/work/timeout.pid
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local p
  for p in "$TIMEOUT_PIDFILE" "$PIDFILE" "$GUARD_PIDFILE"; do
    # (QEMU deletes its pidfile as it exits: tolerate it vanishing)
    [ -f "$p" ] && kill "$(cat "$p" 2>/dev/null)" 2>/dev/null
    rm -f "$p"
  done
  if [ "$KEEP_DISKS" = 0 ]; then rm -f "$RESULTS"/work/*.img; fi
  rmdir "$RESULTS/work" 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo "testbed: interrupted" >&2; exit 130' INT TERM
[ -z "$BIN" ] || cp "$BIN" "$RESULTS/bin/nvme-bypass"
if [ -d "$REPO/tests/testbed" ]; then
  cp -r "$REPO/tests/testbed" "$RESULTS/tests"
else
  mkdir -p "$RESULTS/tests"
fi
case "$SCRIPT_HOST" in
  "$REPO/tests/testbed/"*) SCRIPT_REL=tests/${SCRIPT_HOST#"$REPO/tests/testbed/"} ;;
  *) mkdir -p "$RESULTS/scripts"; cp "$SCRIPT_HOST" "$RESULTS/scripts/"
     SCRIPT_REL=scripts/$(basename "$SCRIPT_HOST") ;;
esac
: > "$RESULTS/args"
for a in "${GUEST_ARGS[@]}"; do printf '%s\n' "$a" >> "$RESULTS/args"; done
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }      # single-quote for a POSIX shell
{
  echo "# test-bed settings for the guest script (sourced by /init)"
  echo "export NVB_CONTROLLERS=$(q "$CONTROLLERS") NVB_NAMESPACES=$(q "$NAMESPACES") NVB_LBA_SIZE=$(q "$LBA_SIZE")"
  echo "export NVB_POLL_QUEUES=$(q "${POLL_QUEUES:-0}") NVB_MULTIPATH=$(q "${MULTIPATH:-Y}") NVB_IOMMU=$(q "$IOMMU")"
  echo "export NVB_DISK_SIZE=$(q "$DISK_SIZE") NVB_NVME_OPTS=$(q "$NVME_OPTS") NVB_SMP=$(q "$SMP") NVB_MEM=$(q "$MEM")"
  echo "export NVB_SCRIPT_ARGS_FILE=/mnt/host/args"
} > "$RESULTS/testbed.env"

# ---------------------------------------------------------------- QEMU
MACHINE=q35
QARGS=()
qv() { printf '%s' "${1//,/,,}"; }       # a path inside a QEMU option list: double commas
if [ "$IOMMU" != off ]; then
  # interrupt remapping needs the split irqchip; the vIOMMU must be created
  # before the devices it translates
  MACHINE=q35,kernel-irqchip=split
  QARGS+=(-device "intel-iommu,intremap=on,caching-mode=on")
fi
# Namespaces: plain `-device nvme,drive=` for the simple case, otherwise
# explicit nvme-ns devices (several namespaces or 4 KiB blocks).
USE_NS_DEVICES=0
if [ "$NAMESPACES" -gt 1 ] || [ "$LBA_SIZE" != 512 ]; then USE_NS_DEVICES=1; fi
for ((c = 0; c < CONTROLLERS; c++)); do
  serial=$(printf 'nvb%04d' "$c")
  if [ "$USE_NS_DEVICES" = 0 ]; then
    img=$RESULTS/work/nvme${c}n1.img
    qemu-img create -q -f raw "$img" "$DISK_SIZE" || die_prep "qemu-img create $img $DISK_SIZE failed"
    QARGS+=(-drive "file=$(qv "$img"),if=none,id=nvm${c}n1,format=raw"
            -device "nvme,id=ctrl$c,serial=$serial,drive=nvm${c}n1$NVME_OPTS")
  else
    QARGS+=(-device "nvme,id=ctrl$c,serial=$serial$NVME_OPTS")
    for ((n = 1; n <= NAMESPACES; n++)); do
      img=$RESULTS/work/nvme${c}n$n.img
      qemu-img create -q -f raw "$img" "$DISK_SIZE" || die_prep "qemu-img create $img $DISK_SIZE failed"
      QARGS+=(-drive "file=$(qv "$img"),if=none,id=nvm${c}n$n,format=raw"
              -device "nvme-ns,drive=nvm${c}n$n,bus=ctrl$c,nsid=$n,logical_block_size=$LBA_SIZE,physical_block_size=$LBA_SIZE")
    done
  fi
done
# after the NVMe devices, so the first controller keeps PCI address 00:01.0
QARGS+=(-virtfs "local,path=$(qv "$RESULTS"),mount_tag=host,security_model=none,id=host")
# fio and its libraries (see build-initramfs.sh), read-only
[ -z "$TOOLS" ] || QARGS+=(-virtfs "local,path=$(qv "$TOOLS"),mount_tag=tools,security_model=none,readonly=on,id=tools")

APPEND="console=ttyS0 panic=-1 quiet loglevel=4"
case "$IOMMU" in
  pt)        APPEND+=" intel_iommu=on iommu=pt" ;;
  translate) APPEND+=" intel_iommu=on iommu=nopt" ;;
esac
[ -z "$POLL_QUEUES" ] || APPEND+=" nvme.poll_queues=$POLL_QUEUES"
[ -z "$MULTIPATH" ] || APPEND+=" nvme_core.multipath=$MULTIPATH"
APPEND+=" nvb.script=$SCRIPT_REL nvb.ns=$((CONTROLLERS * NAMESPACES))"
[ "$SHELL_AFTER" = 0 ] || APPEND+=" nvb.shell=1"
[ -z "$EXTRA_APPEND" ] || APPEND+=" $EXTRA_APPEND"

# shellcheck disable=SC2206  # --qemu-args is split on spaces on purpose
QEMU=(qemu-system-x86_64 -machine "$MACHINE" -accel tcg -cpu max -m "$MEM" -smp "$SMP"
      -nographic -no-reboot -nodefaults -serial stdio -pidfile "$PIDFILE"
      -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" "${QARGS[@]}" $QEMU_EXTRA)
# the command line, for reruns by hand (quoted where needed)
for a in "${QEMU[@]}"; do
  case "$a" in *[!A-Za-z0-9_.,:=/+-]*|'') printf "'%s' " "${a//\'/\'\\\'\'}" ;; *) printf '%s ' "$a" ;; esac
done > "$RESULTS/qemu-cmdline.txt"
echo >> "$RESULTS/qemu-cmdline.txt"

LOG=$RESULTS/console.log

# Console filter: prefix each line with host seconds since QEMU started, log
# it, echo it. Once the guest printed its exit line, QEMU must be gone within
# 30 s; a guard kills it otherwise (a guest that cannot power off).
console_filter() {
  local t0=${EPOCHREALTIME/./} line d esc=$'\e'
  shopt -s extglob
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%$'\r'}
    # drop terminal control sequences (SeaBIOS and the kernel clear the screen)
    line=${line//${esc}\[*([0-9;?])[A-Za-z]/}
    line=${line//${esc}[A-Za-z]/}
    d=$(( ${EPOCHREALTIME/./} - t0 ))
    printf -v line '[%4d.%03d] %s' $((d / 1000000)) $((d / 1000 % 1000)) "$line"
    printf '%s\n' "$line" >> "$LOG"
    [ "$QUIET" = 1 ] || printf '%s\n' "$line"
    case "$line" in
      *NVB-GUEST-EXIT\ rc=*)
        if [ ! -f "$GUARD_PIDFILE" ]; then
          # (killed by cleanup when QEMU exits in time; takes its sleep along)
          ( trap 'kill "$s" 2>/dev/null; exit 0' TERM
            sleep 30 & s=$!; wait "$s"
            if [ -f "$PIDFILE" ]; then kill "$(cat "$PIDFILE")"; fi ) </dev/null >/dev/null 2>&1 &
          echo $! > "$GUARD_PIDFILE"
        fi ;;
    esac
  done
}

say "results: $RESULTS"
say "guest: $SCRIPT_REL${GUEST_ARGS[*]:+$(printf ' %q' "${GUEST_ARGS[@]}")} | kernel $KVER | $CONTROLLERS ctrl x $NAMESPACES ns, lba $LBA_SIZE, iommu $IOMMU${POLL_QUEUES:+, poll_queues=$POLL_QUEUES}${MULTIPATH:+, multipath=$MULTIPATH} | timeout ${TIMEOUT}s"
: > "$LOG"
T_Q0=${EPOCHREALTIME/./}
set +e
if [ "$SHELL_AFTER" = 1 ]; then
  # interactive: QEMU reads the terminal; raw output, no timestamps
  timeout --foreground "$TIMEOUT" "${QEMU[@]}" 2>&1 | tee -a "$LOG"
  QEMU_RC=${PIPESTATUS[0]}
else
  # In the background, so that `wait` returns at once on Ctrl-C/SIGTERM and
  # the traps can stop QEMU (bash runs traps only after a foreground job ends).
  # timeout(1) passes a SIGTERM it gets on to QEMU.
  { timeout --kill-after=15 "$TIMEOUT" "${QEMU[@]}" </dev/null 2>&1 & echo $! > "$TIMEOUT_PIDFILE"
    wait $!; echo $? 2>/dev/null > "$RESULTS/work/qemu.rc"; } | console_filter &
  wait $!
  QEMU_RC=$(cat "$RESULTS/work/qemu.rc" 2>/dev/null || echo 255)
  rm -f "$TIMEOUT_PIDFILE" "$RESULTS/work/qemu.rc"
fi
set -e
QEMU_WALL=$(elapsed "$T_Q0")

# ---------------------------------------------------------------- verdict
# Times are the console's host timestamps of /init's own lines.
stamp_of() { { grep -a -m1 -- "$1" "$LOG" || true; } | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }
T_INIT=$(stamp_of 'NVB-INIT: start'); T_SCRIPT=$(stamp_of 'NVB-INIT: running')
T_DONE=$(stamp_of 'NVB-INIT: script finished')
EXIT_LINE=$(grep -a 'NVB-GUEST-EXIT rc=' "$LOG" | tail -n 1 || true)
GUEST_RC=$(printf '%s' "$EXIT_LINE" | sed -n 's/.*NVB-GUEST-EXIT rc=\([0-9]*\).*/\1/p')
INIT_FAIL=$(grep -a -m1 'NVB-INIT-FAIL:' "$LOG" | sed 's/.*NVB-INIT-FAIL: //' || true)
PANIC=$(grep -a -m1 'Kernel panic' "$LOG" | sed 's/^\[[^]]*\] //' || true)
LAST_STEP=$(grep -a 'NVB-STEP ' "$LOG" | tail -n 1 | sed 's/.*NVB-STEP //' || true)

if [ -n "$GUEST_RC" ]; then
  RC=$GUEST_RC
  if [ "$RC" = 0 ]; then STATUS=pass; MSG="guest script passed"
  else STATUS=fail; MSG="guest script FAILED with rc=$RC${LAST_STEP:+ (last step: $LAST_STEP)}"; fi
elif [ "$QEMU_RC" = 124 ] || [ "$QEMU_RC" = 137 ]; then
  RC=124; STATUS=timeout
  MSG="TIMEOUT: the guest did not finish within ${TIMEOUT}s; QEMU was killed${LAST_STEP:+ (last step: $LAST_STEP)}"
elif [ -n "$INIT_FAIL" ]; then
  RC=125; STATUS=init-fail; MSG="guest /init failed: $INIT_FAIL"
elif [ -n "$PANIC" ]; then
  RC=125; STATUS=panic; MSG="guest kernel panic: $PANIC"
elif [ "$QEMU_RC" != 0 ]; then
  RC=125; STATUS=qemu-error; MSG="QEMU exited with rc=$QEMU_RC before the guest finished"
else
  RC=125; STATUS=no-exit-line; MSG="the guest powered off without printing NVB-GUEST-EXIT"
fi
if [ "$STATUS" != pass ] && [ "$STATUS" != fail ]; then
  echo "testbed: ---- last console lines ----" >&2
  tail -n 15 "$LOG" >&2
fi

js() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/ }; printf '"%s"' "$s"; }
num() { if [ -n "$1" ]; then printf '%s' "$1"; else printf null; fi; }
span() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b - a}'; fi; }
SCRIPT_S=$(span "$T_SCRIPT" "$T_DONE")
WALL=$(elapsed)
cat > "$RESULTS/run.json" <<EOF
{
  "script": $(js "$SCRIPT_REL"), "args": $(js "${GUEST_ARGS[*]}"),
  "status": $(js "$STATUS"), "guest_rc": $(num "$GUEST_RC"), "exit_code": $RC, "qemu_rc": $QEMU_RC,
  "message": $(js "$MSG"), "last_step": $(js "$LAST_STEP"),
  "boot_to_init_s": $(num "$T_INIT"), "boot_to_script_s": $(num "$T_SCRIPT"),
  "script_s": $(num "$SCRIPT_S"), "qemu_wall_s": $QEMU_WALL, "total_wall_s": $WALL,
  "kernel": $(js "$KVER"), "qemu": $(js "$QEMU_VERSION"), "append": $(js "$APPEND"),
  "controllers": $CONTROLLERS, "namespaces": $NAMESPACES, "lba_size": $LBA_SIZE,
  "poll_queues": $(num "$POLL_QUEUES"), "multipath": $(js "${MULTIPATH:-default}"), "iommu": $(js "$IOMMU"),
  "nvme_opts": $(js "$NVME_OPTS"), "smp": $SMP, "mem": $(js "$MEM"), "timeout_s": $TIMEOUT
}
EOF
say "$MSG"
say "boot to /init ${T_INIT:-?} s, to script ${T_SCRIPT:-?} s, script ${SCRIPT_S:-?} s, QEMU ${QEMU_WALL} s, total ${WALL} s"
say "results: $RESULTS (console.log, run.json, results/)"
exit "$RC"
