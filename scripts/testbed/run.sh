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
#   --ctrl "k=v,..."      instead of --controllers/--namespaces: one controller
#                         with these -device nvme options (repeatable); each
#                         --ns after it adds a namespace to it (default: one)
#   --ns "k=v,..."        -device nvme-ns options for the last --ctrl (nsid
#                         defaults to its position, logical_block_size to
#                         --lba-size); size=SIZE sets its image's size,
#                         file=PATH uses that image (kept; not created)
#   --iops-limit N        QEMU throttles every namespace's image to N reads and
#                         N writes per second (throttling.iops-read/-write;
#                         one bucket per direction: a shared one stalled
#                         mixed batches for most of a second at times): a
#                         device-bound guest, as a real SSD is to a tool
#                         cheap enough
#   --aio threads|io_uring
#                         how QEMU reads and writes the images on the host
#                         (the drives' aio=; default threads, QEMU's thread
#                         pool, which completes requests in any order; with
#                         io_uring a read of an image in the host's page
#                         cache completes as it is submitted, in order)
#   --poll-queues N       nvme.poll_queues=N (default: kernel default, 0)
#   --multipath Y|N       nvme_core.multipath=... (default: kernel default, Y)
#   --iommu-pt            vIOMMU, guest iommu=pt (default)
#   --iommu-translate     vIOMMU translating DMA for kernel drivers too
#   --no-iommu            no vIOMMU (VFIO cannot bind then)
#   --extra-append "..."  extra guest kernel command-line words (last wins)
#   --qemu-args "..."     extra QEMU arguments (split on spaces)
#   --count               load the instruction-counting plugin
#                         (scripts/testbed/insn-count, built if needed): the
#                         windows nvme-bypass marks go to RESULTS/insn.jsonl
#   --count-args ",k=v"   more plugin arguments (e.g. ",mmio=off")
# Machine and run:
#   --smp N (default 2)   --mem SIZE (default 2G)
#   --tcg-thread single|multi  TCG vCPU threads (default single; see README)
#   --timeout SECS        hard limit for the whole boot (default 600)
#   --step-timeout SECS   guest watchdog: a step running longer fails (default 360)
#   --stall-timeout SECS  no guest script output for this long: hung (default 600)
#   --retries N           boot again (N times, default 1) after a QEMU fault:
#                         QEMU aborted, or the guest lost its timer
#                         interrupts (RCU stall) or went silent with idle vCPUs
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
# 124 also for a hung guest (see --stall-timeout), 3 = host-side
# preparation failed, 2 = usage error.
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
COUNT=0; COUNT_ARGS=; IOPS_LIMIT=; AIO=
SMP=2; MEM=2G; TCG_THREAD=single; TIMEOUT=600; STEP_TIMEOUT=360; STALL_TIMEOUT=600; RETRIES=1; RESULTS=; BIN=; NO_BIN=0; KEEP_DISKS=0; QUIET=0; SHELL_AFTER=0

CTRL_OPTS=(); CTRL_NS=()    # --ctrl: per controller, its options and its namespaces ('|' separated)
need_arg() { [ $# -ge 2 ] || die_usage "option $1 needs a value"; }
is_uint() { case "$1" in ''|*[!0-9]*) return 1 ;; esac; }
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in --*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; opt=$1 ;; esac
  case "$opt" in
    --poll-queues)  need_arg "$@"; POLL_QUEUES=$2; shift 2 ;;
    --iops-limit)   need_arg "$@"; IOPS_LIMIT=$2; shift 2 ;;
    --aio)          need_arg "$@"; AIO=$2; shift 2 ;;
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
    --count)        COUNT=1; shift ;;
    --count-args)   need_arg "$@"; COUNT=1; COUNT_ARGS=$2; shift 2 ;;
    --smp)          need_arg "$@"; SMP=$2; shift 2 ;;
    --mem)          need_arg "$@"; MEM=$2; shift 2 ;;
    --tcg-thread)   need_arg "$@"; TCG_THREAD=$2; shift 2 ;;
    --ctrl)         need_arg "$@"; CTRL_OPTS+=("$2"); CTRL_NS+=(""); shift 2 ;;
    --ns)           need_arg "$@"; [ ${#CTRL_OPTS[@]} -gt 0 ] || die_usage "--ns belongs to a --ctrl: give --ctrl first"
                    case "$2" in *'|'*) die_usage "--ns options cannot contain '|'" ;; esac
                    CTRL_NS[-1]+="${CTRL_NS[-1]:+|}$2"; shift 2 ;;
    --step-timeout) need_arg "$@"; STEP_TIMEOUT=$2; shift 2 ;;
    --stall-timeout) need_arg "$@"; STALL_TIMEOUT=$2; shift 2 ;;
    --retries)      need_arg "$@"; RETRIES=$2; shift 2 ;;
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
[ -z "$IOPS_LIMIT" ] || in_range "$IOPS_LIMIT" 1 10000000 || die_usage "--iops-limit wants reads (and as many writes) per second (1..10000000)"
case "$AIO" in ''|threads|io_uring) ;; *) die_usage "--aio wants threads or io_uring" ;; esac
DRIVE_OPTS=${IOPS_LIMIT:+,throttling.iops-read=$IOPS_LIMIT,throttling.iops-write=$IOPS_LIMIT}${AIO:+,aio=$AIO}
in_range "$NAMESPACES" 1 256 || die_usage "--namespaces wants 1..256"
in_range "$CONTROLLERS" 1 16 || die_usage "--controllers wants 1..16"
in_range "$SMP" 1 64 || die_usage "--smp wants 1..64"
case "$TCG_THREAD" in single|multi) ;; *) die_usage "--tcg-thread wants single or multi" ;; esac
in_range "$STEP_TIMEOUT" 10 86400 || die_usage "--step-timeout wants seconds (10..86400)"
in_range "$STALL_TIMEOUT" 30 86400 || die_usage "--stall-timeout wants seconds (30..86400)"
in_range "$RETRIES" 0 5 || die_usage "--retries wants 0..5"
if [ ${#CTRL_OPTS[@]} -gt 0 ]; then
  [ "$CONTROLLERS" = 1 ] && [ "$NAMESPACES" = 1 ] || die_usage "--ctrl replaces --controllers and --namespaces: use one or the other"
  [ ${#CTRL_OPTS[@]} -le 16 ] || die_usage "at most 16 --ctrl"
  CONTROLLERS=${#CTRL_OPTS[@]}
fi
in_range "$TIMEOUT" 1 86400 || die_usage "--timeout wants seconds (1..86400)"
[ -z "$NVME_OPTS" ] || [ "${NVME_OPTS:0:1}" = , ] || NVME_OPTS=,$NVME_OPTS
[ -z "$COUNT_ARGS" ] || [ "${COUNT_ARGS:0:1}" = , ] || COUNT_ARGS=,$COUNT_ARGS
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

PLUGIN=
if [ "$COUNT" = 1 ]; then
  # its own workspace; cargo rebuilds only when its source changed
  PLUGIN_DIR=${CARGO_TARGET_DIR:-$REPO/target}/insn-count
  ( cd "$HERE/insn-count" && CARGO_TARGET_DIR=$PLUGIN_DIR cargo build --release --quiet ) ||
    die_prep "cargo build of the counting plugin (scripts/testbed/insn-count) failed"
  PLUGIN=$PLUGIN_DIR/release/libnvb_insn_count.so
  [ -f "$PLUGIN" ] || die_prep "the counting plugin built but $PLUGIN is missing"
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
WATCH_PIDFILE=$RESULTS/work/watch.pid
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local p
  for p in "$WATCH_PIDFILE" "$TIMEOUT_PIDFILE" "$PIDFILE" "$GUARD_PIDFILE"; do
    # (QEMU deletes its pidfile as it exits: tolerate it vanishing)
    # (|| true: under set -e a failing kill in this trap would turn the
    # exit status into 1; QEMU leaves its pidfile behind when it aborts)
    if [ -f "$p" ]; then kill "$(cat "$p" 2>/dev/null)" 2>/dev/null || true; fi
    rm -f "$p"
  done
  if [ "$KEEP_DISKS" = 0 ]; then rm -f "$RESULTS"/work/*.img; fi
  rm -f "$RESULTS"/work/{progress,alive,signs,hang}
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
  echo "export NVB_SCRIPT_ARGS_FILE=/mnt/host/args NVB_STEP_TIMEOUT=$(q "$STEP_TIMEOUT") NVB_TCG_THREAD=$(q "$TCG_THREAD") NVB_COUNT=$(q "$COUNT") NVB_IOPS_LIMIT=$(q "$IOPS_LIMIT")"
  # --ctrl: controller i's -device nvme options and its --ns list ('|' between namespaces)
  for ((c = 0; c < ${#CTRL_OPTS[@]}; c++)); do
    echo "export NVB_CTRL_$c=$(q "${CTRL_OPTS[c]}") NVB_CTRL_${c}_NS=$(q "${CTRL_NS[c]:-nsid=1}")"
  done
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
# Namespace images: created (fresh and zero) before every boot attempt,
# deleted afterwards unless --keep-disks; a --ns file= image is the
# caller's, used as it is.
IMG_PATH=(); IMG_SIZE=()
add_image() { IMG_PATH+=("$1"); IMG_SIZE+=("$2"); }
make_images() {
  local k
  for k in "${!IMG_PATH[@]}"; do
    [ -n "${IMG_SIZE[k]}" ] || continue
    rm -f "${IMG_PATH[k]}"
    qemu-img create -q -f raw "${IMG_PATH[k]}" "${IMG_SIZE[k]}" || die_prep "qemu-img create ${IMG_PATH[k]} ${IMG_SIZE[k]} failed"
  done
}
NS_TOTAL=0
if [ ${#CTRL_OPTS[@]} -gt 0 ]; then
  # --ctrl: each controller in a subsystem of its own (nvme-ns detached=on
  # needs one), its namespaces as nvme-ns devices.
  for ((c = 0; c < CONTROLLERS; c++)); do
    serial=$(printf 'nvb%04d' "$c")
    copts=${CTRL_OPTS[c]}; [ -z "$copts" ] || [ "${copts:0:1}" = , ] || copts=,$copts
    QARGS+=(-device "nvme-subsys,id=subsys$c,nqn=nvb-subsys-$c"
            -device "nvme,id=ctrl$c,serial=$serial,subsys=subsys$c$copts$NVME_OPTS")
    IFS='|' read -r -a nss <<< "${CTRL_NS[c]:-nsid=1}"
    n=0
    for nsopts in "${nss[@]}"; do
      n=$((n + 1))
      size=$DISK_SIZE; file=; rest=; nsid=$n; lbs=$LBA_SIZE; detached=0
      IFS=, read -r -a kvs <<< "$nsopts"
      for kv in "${kvs[@]}"; do
        case "$kv" in
          size=*) size=${kv#size=} ;;
          file=*) file=${kv#file=} ;;
          nsid=*) nsid=${kv#nsid=}; rest+=",$kv" ;;
          logical_block_size=*) lbs=${kv#logical_block_size=} ;;
          detached=on|detached=true) detached=1; rest+=",$kv" ;;
          '') ;;
          *) rest+=",$kv" ;;
        esac
      done
      case "$rest" in *,nsid=*) ;; *) rest=",nsid=$nsid$rest" ;; esac
      if [ -n "$file" ]; then
        [ -f "$file" ] || die_prep "--ns file=$file: no such image"
        img=$(cd "$(dirname "$file")" && pwd)/$(basename "$file"); add_image "$img" ""
      else
        img=$RESULTS/work/nvme${c}n$nsid.img; add_image "$img" "$size"
      fi
      [ "$detached" = 1 ] || NS_TOTAL=$((NS_TOTAL + 1))
      QARGS+=(-drive "file=$(qv "$img"),if=none,id=nvm${c}n$nsid,format=raw$DRIVE_OPTS"
              -device "nvme-ns,drive=nvm${c}n$nsid,bus=ctrl$c,logical_block_size=$lbs,physical_block_size=$lbs$rest")
    done
  done
else
  # plain `-device nvme,drive=` for the simple case, otherwise explicit
  # nvme-ns devices (several namespaces or 4 KiB blocks).
  USE_NS_DEVICES=0
  if [ "$NAMESPACES" -gt 1 ] || [ "$LBA_SIZE" != 512 ]; then USE_NS_DEVICES=1; fi
  NS_TOTAL=$((CONTROLLERS * NAMESPACES))
  for ((c = 0; c < CONTROLLERS; c++)); do
    serial=$(printf 'nvb%04d' "$c")
    if [ "$USE_NS_DEVICES" = 0 ]; then
      img=$RESULTS/work/nvme${c}n1.img; add_image "$img" "$DISK_SIZE"
      QARGS+=(-drive "file=$(qv "$img"),if=none,id=nvm${c}n1,format=raw$DRIVE_OPTS"
              -device "nvme,id=ctrl$c,serial=$serial,drive=nvm${c}n1$NVME_OPTS")
    else
      QARGS+=(-device "nvme,id=ctrl$c,serial=$serial$NVME_OPTS")
      for ((n = 1; n <= NAMESPACES; n++)); do
        img=$RESULTS/work/nvme${c}n$n.img; add_image "$img" "$DISK_SIZE"
        QARGS+=(-drive "file=$(qv "$img"),if=none,id=nvm${c}n$n,format=raw$DRIVE_OPTS"
                -device "nvme-ns,drive=nvm${c}n$n,bus=ctrl$c,nsid=$n,logical_block_size=$LBA_SIZE,physical_block_size=$LBA_SIZE")
      done
    fi
  done
fi
# the counting plugin: one JSON line per marked window (README "Counting")
[ -z "$PLUGIN" ] || QARGS+=(-plugin "$(qv "$PLUGIN"),out=$(qv "$RESULTS/insn.jsonl")$COUNT_ARGS")
# after the NVMe devices, so the first controller keeps PCI address 00:01.0
QARGS+=(-virtfs "local,path=$(qv "$RESULTS"),mount_tag=host,security_model=none,id=host")
# fio and its libraries (see build-initramfs.sh), read-only
[ -z "$TOOLS" ] || QARGS+=(-virtfs "local,path=$(qv "$TOOLS"),mount_tag=tools,security_model=none,readonly=on,id=tools")

# no_timer_check: the kernel's boot-time test that the timer interrupt
# arrives through the (interrupt-remapped) IO-APIC within a few busy-wait
# milliseconds fails under emulation on a loaded host ("Kernel panic - not
# syncing: timer doesn't work through Interrupt-remapped IO-APIC"); virtual
# machines skip it.
APPEND="console=ttyS0 panic=-1 quiet loglevel=4 no_timer_check"
case "$IOMMU" in
  pt)        APPEND+=" intel_iommu=on iommu=pt" ;;
  translate) APPEND+=" intel_iommu=on iommu=nopt" ;;
esac
[ -z "$POLL_QUEUES" ] || APPEND+=" nvme.poll_queues=$POLL_QUEUES"
[ -z "$MULTIPATH" ] || APPEND+=" nvme_core.multipath=$MULTIPATH"
APPEND+=" nvb.script=$SCRIPT_REL nvb.ns=$NS_TOTAL"
[ "$SHELL_AFTER" = 0 ] || APPEND+=" nvb.shell=1"
[ -z "$EXTRA_APPEND" ] || APPEND+=" $EXTRA_APPEND"

# shellcheck disable=SC2206  # --qemu-args is split on spaces on purpose
QEMU=(qemu-system-x86_64 -machine "$MACHINE" -accel "tcg,thread=$TCG_THREAD" -cpu max -m "$MEM" -smp "$SMP"
      -nographic -no-reboot -nodefaults -serial stdio -pidfile "$PIDFILE"
      -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" "${QARGS[@]}" $QEMU_EXTRA)
# the command line, for reruns by hand (quoted where needed)
for a in "${QEMU[@]}"; do
  case "$a" in *[!A-Za-z0-9_.,:=/+-]*|'') printf "'%s' " "${a//\'/\'\\\'\'}" ;; *) printf '%s ' "$a" ;; esac
done > "$RESULTS/qemu-cmdline.txt"
echo >> "$RESULTS/qemu-cmdline.txt"

LOG=$RESULTS/console.log
PROGRESS=$RESULTS/work/progress   # mtime: the guest's last own console line
ALIVE=$RESULTS/work/alive         # mtime: any console line (the kernel's too)
SIGNS=$RESULTS/work/signs         # console lines that name a QEMU fault
HANG=$RESULTS/work/hang           # why the hang watcher stopped QEMU

# Console filter: prefix each line with host seconds since QEMU started, log
# it, echo it. Once the guest printed its exit line, QEMU must be gone within
# 30 s; a guard kills it otherwise (a guest that cannot power off). It also
# feeds the hang watcher: the time of the guest's last own line (not the
# kernel's "[  12.345678] ..."), of any line, and the lines that name a fault
# of the emulator: QEMU's own assertion, or the guest kernel's report that
# a CPU's timer interrupts stopped (an RCU stall).
console_filter() {
  local t0=${EPOCHREALTIME/./} line raw d esc=$'\e' kre='^\[ *[0-9]+\.[0-9]+\] '
  shopt -s extglob
  while IFS= read -r raw || [ -n "$raw" ]; do
    raw=${raw%$'\r'}
    # drop terminal control sequences (SeaBIOS and the kernel clear the screen)
    raw=${raw//${esc}\[*([0-9;?])[A-Za-z]/}
    raw=${raw//${esc}[A-Za-z]/}
    d=$(( ${EPOCHREALTIME/./} - t0 ))
    printf -v line '[%4d.%03d] %s' $((d / 1000000)) $((d / 1000 % 1000)) "$raw"
    printf '%s\n' "$line" >> "$LOG"
    [ "$QUIET" = 1 ] || printf '%s\n' "$line"
    : > "$ALIVE"
    [[ $raw =~ $kre ]] || [[ $raw == NVB-HEARTBEAT* ]] || : > "$PROGRESS"
    case "$raw" in
      *NVB-GUEST-EXIT\ rc=*)
        if [ ! -f "$GUARD_PIDFILE" ]; then
          # (killed by cleanup when QEMU exits in time; takes its sleep along)
          ( trap 'kill "$s" 2>/dev/null; exit 0' TERM
            sleep 30 & s=$!; wait "$s"
            if [ -f "$PIDFILE" ]; then kill "$(cat "$PIDFILE")"; fi ) </dev/null >/dev/null 2>&1 &
          echo $! > "$GUARD_PIDFILE"
        fi ;;
      qemu-system-*Assertion*|*"rcu_preempt detected stalls"*|*"timer wakeup didn't happen"*|*"Possible timer handling issue"*)
        printf '%s\n' "$line" >> "$SIGNS" ;;
    esac
  done
}

# Hang watcher: stops QEMU, saying why in $HANG, when
# - the guest kernel reported lost timer interrupts and the guest script
#   printed nothing for 60 s since (a vCPU stopped taking interrupts: a
#   QEMU fault, see README "Flakiness");
# - the console was silent for 120 s while QEMU's threads used (almost) no
#   CPU: every vCPU halted for good, a guest that can never wake up;
# - the guest script printed nothing for --stall-timeout seconds.
# A hung boot then fails in minutes instead of at --timeout.
hang_watch() {
  local qpid= now prog alive cpu cpu_alive=0 last_alive=0 hz f
  hz=$(getconf CLK_TCK)
  while sleep 5; do
    [ -n "$qpid" ] || { qpid=$(cat "$PIDFILE" 2>/dev/null) || true; continue; }
    read -r -a f < "/proc/$qpid/stat" 2>/dev/null || return 0
    cpu=$(( f[13] + f[14] ))                        # utime + stime, clock ticks
    now=$EPOCHSECONDS
    prog=$(stat -c %Y "$PROGRESS" 2>/dev/null || echo "$now")
    alive=$(stat -c %Y "$ALIVE" 2>/dev/null || echo "$now")
    if [ "$alive" != "$last_alive" ]; then last_alive=$alive; cpu_alive=$cpu; fi
    if [ -s "$SIGNS" ] && grep -q -v Assertion "$SIGNS" && [ $((now - prog)) -ge 60 ]; then
      echo "qemu-fault: the guest kernel reported lost timer interrupts (RCU stall) and the guest script printed nothing for $((now - prog)) s" > "$HANG"
    elif [ $((now - alive)) -ge 120 ] && [ $((cpu - cpu_alive)) -lt "$hz" ]; then
      echo "qemu-fault: the console was silent for $((now - alive)) s with QEMU's threads idle ($(( (cpu - cpu_alive) * 1000 / hz )) ms of CPU): the guest's vCPUs halted for good" > "$HANG"
    elif [ $((now - prog)) -ge "$STALL_TIMEOUT" ]; then
      echo "stall: the guest script printed nothing for $((now - prog)) s (--stall-timeout $STALL_TIMEOUT)" > "$HANG"
    else
      continue
    fi
    kill "$qpid" 2>/dev/null
    return 0
  done
}

stamp_of() { { grep -a -m1 -- "$1" "$LOG" || true; } | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }
js() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/ }; printf '"%s"' "$s"; }
num() { if [ -n "$1" ]; then printf '%s' "$1"; else printf null; fi; }
span() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b - a}'; fi; }

# boot: one boot of the guest; sets QEMU_RC and QEMU_WALL.
boot() {
  : > "$LOG"; rm -f "$SIGNS" "$HANG" "$GUARD_PIDFILE"
  : > "$PROGRESS"; : > "$ALIVE"                 # the clocks start with QEMU
  T_Q0=${EPOCHREALTIME/./}
  set +e
  if [ "$SHELL_AFTER" = 1 ]; then
    # interactive: QEMU reads the terminal; raw output, no timestamps
    timeout --foreground "$TIMEOUT" "${QEMU[@]}" 2>&1 | tee -a "$LOG"
    QEMU_RC=${PIPESTATUS[0]}
  else
    hang_watch </dev/null >/dev/null 2>&1 &
    echo $! > "$WATCH_PIDFILE"
    # In the background, so that `wait` returns at once on Ctrl-C/SIGTERM and
    # the traps can stop QEMU (bash runs traps only after a foreground job ends).
    # timeout(1) passes a SIGTERM it gets on to QEMU.
    { timeout --kill-after=15 "$TIMEOUT" "${QEMU[@]}" </dev/null 2>&1 & echo $! > "$TIMEOUT_PIDFILE"
      wait $!; echo $? 2>/dev/null > "$RESULTS/work/qemu.rc"; } | console_filter &
    wait $!
    QEMU_RC=$(cat "$RESULTS/work/qemu.rc" 2>/dev/null || echo 255)
    kill "$(cat "$WATCH_PIDFILE" 2>/dev/null)" 2>/dev/null
    rm -f "$TIMEOUT_PIDFILE" "$WATCH_PIDFILE" "$RESULTS/work/qemu.rc"
  fi
  set -e
  QEMU_WALL=$(elapsed "$T_Q0")
}

# verdict: what the boot came to. Sets STATUS, RC, MSG, QEMU_FAULT (1 when
# the failure is the emulator's: worth one more boot) and the timings.
verdict() {
  # Times are the console's host timestamps of /init's own lines.
  T_INIT=$(stamp_of 'NVB-INIT: start'); T_SCRIPT=$(stamp_of 'NVB-INIT: running')
  T_DONE=$(stamp_of 'NVB-INIT: script finished')
  EXIT_LINE=$(grep -a 'NVB-GUEST-EXIT rc=' "$LOG" | tail -n 1 || true)
  GUEST_RC=$(printf '%s' "$EXIT_LINE" | sed -n 's/.*NVB-GUEST-EXIT rc=\([0-9]*\).*/\1/p')
  INIT_FAIL=$(grep -a -m1 'NVB-INIT-FAIL:' "$LOG" | sed 's/.*NVB-INIT-FAIL: //' || true)
  PANIC=$(grep -a -m1 'Kernel panic' "$LOG" | sed 's/^\[[^]]*\] //' || true)
  LAST_STEP=$(grep -a 'NVB-STEP ' "$LOG" | tail -n 1 | sed 's/.*NVB-STEP //' || true)
  ASSERT=$(grep -a -m1 'qemu-system.*Assertion' "$LOG" | sed 's/^\[[^]]*\] //' || true)
  HANG_WHY=$(cat "$HANG" 2>/dev/null || true)
  QEMU_FAULT=0
  if [ -n "$GUEST_RC" ]; then
    RC=$GUEST_RC
    if [ "$RC" = 0 ]; then STATUS=pass; MSG="guest script passed"
    else STATUS=fail; MSG="guest script FAILED with rc=$RC${LAST_STEP:+ (last step: $LAST_STEP)}"; fi
  elif [ -n "$ASSERT" ]; then
    RC=125; STATUS=qemu-crash; QEMU_FAULT=1
    MSG="QEMU aborted${LAST_STEP:+ (last step: $LAST_STEP)}: $ASSERT"
  elif [ -n "$HANG_WHY" ]; then
    RC=124; STATUS=hang
    MSG="HUNG: ${HANG_WHY#*: }; QEMU was stopped${LAST_STEP:+ (last step: $LAST_STEP)}"
    case "$HANG_WHY" in qemu-fault:*) QEMU_FAULT=1 ;; esac
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
  # A failure after the guest kernel saw a CPU's timer interrupts stop is
  # the emulator's, whatever the script then made of it.
  if [ "$STATUS" != pass ] && [ -s "$SIGNS" ]; then QEMU_FAULT=1; fi
  SCRIPT_S=$(span "$T_SCRIPT" "$T_DONE")
}

say "results: $RESULTS"
ARGS_SHOWN=${GUEST_ARGS[*]:+$(printf ' %q' "${GUEST_ARGS[@]}")}
[ ${#ARGS_SHOWN} -le 160 ] || ARGS_SHOWN=" (${#GUEST_ARGS[@]} arguments, see $RESULTS/args)"
say "guest: $SCRIPT_REL$ARGS_SHOWN | kernel $KVER | $CONTROLLERS ctrl x $NAMESPACES ns, lba $LBA_SIZE, iommu $IOMMU${POLL_QUEUES:+, poll_queues=$POLL_QUEUES}${MULTIPATH:+, multipath=$MULTIPATH} | TCG $TCG_THREAD-threaded | timeout ${TIMEOUT}s"
ATTEMPT=1; RETRY_REASONS=()
while :; do
  make_images
  boot
  verdict
  if [ "$STATUS" = pass ] || [ "$QEMU_FAULT" = 0 ] || [ "$ATTEMPT" -gt "$RETRIES" ]; then break; fi
  # A QEMU fault: keep this attempt's console and results, boot once more.
  A=$RESULTS/attempt-$ATTEMPT
  mkdir -p "$A"
  mv "$LOG" "$RESULTS/results" "$A/"
  [ ! -s "$SIGNS" ] || cp "$SIGNS" "$A/fault-lines.txt"
  printf '{"attempt": %d, "status": %s, "message": %s, "last_step": %s, "qemu_wall_s": %s}\n' \
    "$ATTEMPT" "$(js "$STATUS")" "$(js "$MSG")" "$(js "$LAST_STEP")" "$QEMU_WALL" > "$A/attempt.json"
  mkdir -p "$RESULTS/results"
  RETRY_REASONS+=("$STATUS: $MSG")
  echo "testbed: RETRY $ATTEMPT/$RETRIES: attempt $ATTEMPT failed with a QEMU fault: $MSG" >&2
  echo "testbed: RETRY: that attempt's console and results are in $A; booting again" >&2
  ATTEMPT=$((ATTEMPT + 1))
done
if [ "$STATUS" != pass ] && [ "$STATUS" != fail ]; then
  echo "testbed: ---- last console lines ----" >&2
  tail -n 15 "$LOG" >&2
fi

WALL=$(elapsed)
REASONS_JSON=
for r in "${RETRY_REASONS[@]}"; do REASONS_JSON+="${REASONS_JSON:+, }$(js "$r")"; done
cat > "$RESULTS/run.json" <<JSON
{
  "script": $(js "$SCRIPT_REL"), "args": $(js "${GUEST_ARGS[*]}"),
  "status": $(js "$STATUS"), "guest_rc": $(num "$GUEST_RC"), "exit_code": $RC, "qemu_rc": $QEMU_RC,
  "message": $(js "$MSG"), "last_step": $(js "$LAST_STEP"),
  "qemu_fault": $([ "$QEMU_FAULT" = 1 ] && echo true || echo false), "attempts": $ATTEMPT, "retries": $((ATTEMPT - 1)), "retry_reasons": [$REASONS_JSON],
  "boot_to_init_s": $(num "$T_INIT"), "boot_to_script_s": $(num "$T_SCRIPT"),
  "script_s": $(num "$SCRIPT_S"), "qemu_wall_s": $QEMU_WALL, "total_wall_s": $WALL,
  "kernel": $(js "$KVER"), "qemu": $(js "$QEMU_VERSION"), "tcg_thread": $(js "$TCG_THREAD"), "append": $(js "$APPEND"),
  "controllers": $CONTROLLERS, "namespaces": $NAMESPACES, "lba_size": $LBA_SIZE,
  "poll_queues": $(num "$POLL_QUEUES"), "multipath": $(js "${MULTIPATH:-default}"), "iommu": $(js "$IOMMU"),
  "nvme_opts": $(js "$NVME_OPTS"), "iops_limit": $(num "$IOPS_LIMIT"), "aio": $(js "${AIO:-threads}"), "smp": $SMP, "mem": $(js "$MEM"), "timeout_s": $TIMEOUT,
  "step_timeout_s": $STEP_TIMEOUT, "stall_timeout_s": $STALL_TIMEOUT
}
JSON
say "$MSG"
[ "$ATTEMPT" = 1 ] || say "RETRIED: $((ATTEMPT - 1)) retry after a QEMU fault (${RETRY_REASONS[0]}); see attempt-*/"
say "boot to /init ${T_INIT:-?} s, to script ${T_SCRIPT:-?} s, script ${SCRIPT_S:-?} s, QEMU ${QEMU_WALL} s, total ${WALL} s"
say "results: $RESULTS (console.log, run.json, results/)"
exit "$RC"
