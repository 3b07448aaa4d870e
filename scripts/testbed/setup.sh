#!/bin/bash
# nvme-bypass test bed: one-time host setup (idempotent).
#
# Installs everything the emulated-NVMe test bed needs and records the result
# in a stamp file, so a second run only verifies and exits (~0.05 s):
#   * a private apt configuration (the host's own sources are left untouched)
#     that adds bookworm-backports from the machine's own Debian mirror;
#   * qemu-system-x86 10.x from bookworm-backports (companions pinned to it),
#     qemu-utils, busybox-static, fio, xz-utils and zstd (installed on the host:
#     the initramfs copies busybox and fio from there);
#   * the Debian guest kernel linux-image-6.12.*+deb12-amd64-unsigned, newest
#     available, DOWNLOADED and EXTRACTED into the cache (never installed);
#   * kmod, extracted, for depmod (the host has none); depmod on the guest tree.
#
# usage: scripts/testbed/setup.sh [--force] [--quiet]
# env:   NVB_TESTBED_DIR  cache dir (default /var/tmp/nvme-bypass-testbed)
#        NVB_KERNEL_PKG   pin the guest kernel package name
#                         (e.g. linux-image-6.12.117+deb12-amd64-unsigned)
# output: $NVB_TESTBED_DIR/testbed.env (KVER, KERNEL, KROOT, ...), the stamp.
set -euo pipefail

CACHE=${NVB_TESTBED_DIR:-/var/tmp/nvme-bypass-testbed}
# Bump when this script's output changes in a way that needs a re-run.
SETUP_VERSION=1
FALLBACK_KPKG=linux-image-6.12.117+deb12-amd64-unsigned
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
ENVFILE=$CACHE/testbed.env

FORCE=0; QUIET=0
for a in "$@"; do
  case "$a" in
    --force) FORCE=1 ;;
    --quiet) QUIET=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done

say()  { [ "$QUIET" = 1 ] || echo "testbed-setup: $*"; }
die()  { echo "testbed-setup: ERROR: $*" >&2; exit 1; }
# timed STEP-DESCRIPTION CMD...: run CMD, print how long it took
timed() {
  local what=$1; shift
  local t0=${EPOCHREALTIME/./}
  "$@"
  local dt=$(( ${EPOCHREALTIME/./} - t0 ))
  say "$(printf '%-44s %3d.%02d s' "$what" $((dt / 1000000)) $((dt / 10000 % 100)))"
}

[ "$(id -u)" = 0 ] || die "must run as root (apt-get install)"
mkdir -p "$CACHE"

# Serialise concurrent setups (two run.sh at once).
exec 9>"$CACHE/.setup.lock"
flock 9

# ---------------------------------------------------------------- fast path
# Everything the stamp promises must still be there: a machine can be handed
# back with the cache kept but packages gone (or the other way round).
setup_is_current() {
  [ -f "$ENVFILE" ] || return 1
  # shellcheck disable=SC1090
  ( . "$ENVFILE"
    [ "${SETUP_VERSION_DONE:-}" = "$SETUP_VERSION" ] &&
    [ -f "$KERNEL" ] && [ -f "$KROOT/lib/modules/$KVER/modules.dep" ] &&
    [ -x /bin/busybox ] && [ -x /usr/bin/fio ] && command -v qemu-img >/dev/null &&
    command -v zstd >/dev/null && command -v xz >/dev/null &&
    qemu_ok ) 2>/dev/null
}
qemu_ok() { # qemu-system-x86_64 present and major version >= 10
  local v
  v=$(qemu-system-x86_64 --version 2>/dev/null | sed -n '1s/.*version \([0-9]*\)\..*/\1/p')
  [ -n "$v" ] && [ "$v" -ge 10 ]
}

if [ "$FORCE" = 0 ] && setup_is_current; then
  # shellcheck disable=SC1090
  . "$ENVFILE"
  say "already set up: kernel $KVER, $(qemu-system-x86_64 --version | head -1) (cache $CACHE; --force to redo)"
  exit 0
fi

T_START=${EPOCHREALTIME/./}
say "setting up the test bed in $CACHE"
mkdir -p "$CACHE"/{apt/lists/partial,apt/cache/archives/partial,debs,kernel,tools}

# ---------------------------------------------------------------- private apt
# The machine's own mirror URIs (deb822 first, then one-line sources.list).
mirror_for() { # mirror_for security|main
  local want=$1 f uri=
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk -v want="$want" 'BEGIN{RS=""; FS="\n"}
      { uris=""; suites=""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i);   uris = $i }
          if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites = " " $i " " }
        }
        split(uris, u, /[ \t]+/)
        if (want == "security" && suites ~ / bookworm-security /) { print u[1]; exit }
        if (want == "main" && suites ~ / bookworm /)             { print u[1]; exit } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  if [ -f /etc/apt/sources.list ]; then
    if [ "$want" = security ]; then
      uri=$(awk '/^deb / && / bookworm-security/ {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)
    else
      uri=$(awk '/^deb / && / bookworm / {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)
    fi
  fi
  if [ -z "$uri" ]; then
    [ "$want" = security ] && uri=http://deb.debian.org/debian-security || uri=http://deb.debian.org/debian
  fi
  echo "$uri"
}
MIRROR=$(mirror_for main)
SECMIRROR=$(mirror_for security)
say "mirrors: $MIRROR (+ bookworm-backports), $SECMIRROR"
[ -f "$KEYRING" ] || die "missing $KEYRING (package debian-archive-keyring)"

{
  for suite in bookworm bookworm-updates bookworm-backports; do
    echo "deb [signed-by=$KEYRING] $MIRROR $suite main"
  done
  echo "deb [signed-by=$KEYRING] $SECMIRROR bookworm-security main"
} > "$CACHE/apt/sources.list"
cat > "$CACHE/apt/apt.conf" <<EOF
// nvme-bypass test bed: private apt configuration (host sources untouched)
Dir::Etc::sourcelist "$CACHE/apt/sources.list";
Dir::Etc::sourceparts "-";
Dir::State::lists "$CACHE/apt/lists/";
Dir::Cache "$CACHE/apt/cache/";
APT::Sandbox::User "root";
EOF
export APT_CONFIG=$CACHE/apt/apt.conf DEBIAN_FRONTEND=noninteractive

apt_log=$CACHE/apt/last.log
run_apt() { # run_apt WHAT CMD...: quiet apt call, full log kept, tail on failure
  local what=$1; shift
  if ! "$@" >"$apt_log" 2>&1; then
    tail -n 25 "$apt_log" >&2
    die "$what failed (full log: $apt_log)"
  fi
}
timed "apt-get update (private lists)" run_apt "apt-get update" apt-get -q update

# ---------------------------------------------------------------- packages
# qemu-system-x86 from backports needs its companions from backports too.
PKGS=(qemu-system-x86/bookworm-backports qemu-system-common/bookworm-backports
      qemu-system-data/bookworm-backports seabios/bookworm-backports
      qemu-utils/bookworm-backports busybox-static fio xz-utils zstd)
timed "apt-get install qemu 10 + busybox + fio" \
  run_apt "apt-get install ${PKGS[*]}" \
  apt-get -q -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${PKGS[@]}"
qemu_ok || die "qemu-system-x86_64 >= 10 not usable after install: $(qemu-system-x86_64 --version 2>&1 | head -1)"
[ -x /bin/busybox ] || die "/bin/busybox missing after installing busybox-static"
[ -x /usr/bin/fio ] || die "/usr/bin/fio missing after installing fio"
say "$(qemu-system-x86_64 --version | head -1); fio $(fio --version); $(busybox | head -1 | cut -d' ' -f1-2)"

# ---------------------------------------------------------------- guest kernel
if [ -n "${NVB_KERNEL_PKG:-}" ]; then
  KPKG=$NVB_KERNEL_PKG
else
  KPKG=$(apt-cache pkgnames linux-image-6.12. 2>/dev/null |
         grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | sort -V | tail -n 1 || true)
  if [ -z "$KPKG" ]; then
    say "no linux-image-6.12.*+deb12-amd64-unsigned found via apt-cache; falling back to $FALLBACK_KPKG"
    KPKG=$FALLBACK_KPKG
  fi
fi
say "guest kernel package: $KPKG"

cd "$CACHE/debs"
if ! ls "${KPKG}"_*.deb >/dev/null 2>&1; then
  timed "apt-get download $KPKG" run_apt "apt-get download $KPKG" apt-get -q download "$KPKG"
fi
if ! ls kmod_*.deb >/dev/null 2>&1; then
  timed "apt-get download kmod" run_apt "apt-get download kmod" apt-get -q download kmod
fi
newest() { printf '%s\n' "$@" | sort -V | tail -n 1; }   # newest of several .deb versions
KDEB=$(newest "${KPKG}"_*.deb)
KMODDEB=$(newest kmod_*.deb)

# Extract into a temporary folder, then rename: an interrupted run never
# leaves a half-extracted tree that looks complete.
KNAME=${KPKG#linux-image-}; KNAME=${KNAME%-unsigned}       # e.g. 6.12.117+deb12-amd64
KROOT=$CACHE/kernel/$KNAME
if [ ! -d "$KROOT/lib/modules" ]; then
  rm -rf "$KROOT.tmp"
  timed "dpkg-deb -x $(basename "$KDEB")" dpkg-deb -x "$KDEB" "$KROOT.tmp"
  rm -rf "$KROOT"; mv "$KROOT.tmp" "$KROOT"
fi
if [ ! -x "$CACHE/tools/kmod/bin/kmod" ]; then
  rm -rf "$CACHE/tools/kmod"
  dpkg-deb -x "$KMODDEB" "$CACHE/tools/kmod"
fi
ln -sfn kmod/bin/kmod "$CACHE/tools/depmod"     # kmod dispatches on argv[0]

KVER=; KERNEL=
for d in "$KROOT"/lib/modules/*/; do d=${d%/}; KVER=${d##*/}; break; done
for f in "$KROOT"/boot/vmlinuz-*; do KERNEL=$f; break; done
if [ -z "$KVER" ] || [ "$KVER" = "*" ] || [ ! -f "$KERNEL" ]; then
  die "unexpected layout in $KDEB (no lib/modules/<ver> or boot/vmlinuz-*)"
fi
# (depmod writes its files atomically: an existing modules.dep is complete)
if [ ! -s "$KROOT/lib/modules/$KVER/modules.dep" ]; then
  timed "depmod $KVER" "$CACHE/tools/depmod" -b "$KROOT" "$KVER"
fi
[ -s "$KROOT/lib/modules/$KVER/modules.dep" ] || die "depmod produced no modules.dep"

# ---------------------------------------------------------------- stamp
# Written last: its presence means every step above succeeded.
cat > "$ENVFILE.tmp" <<EOF
# written by scripts/testbed/setup.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ); sourced by the other scripts
SETUP_VERSION_DONE=$SETUP_VERSION
KPKG=$KPKG
KVER=$KVER
KROOT=$KROOT
KERNEL=$KERNEL
DEPMOD=$CACHE/tools/depmod
QEMU_VERSION="$(qemu-system-x86_64 --version | head -1)"
FIO_VERSION=$(fio --version)
EOF
mv "$ENVFILE.tmp" "$ENVFILE"
dt=$(( ${EPOCHREALTIME/./} - T_START ))
say "done in $((dt / 1000000)).$((dt / 100000 % 10)) s: kernel $KVER ($KERNEL); settings in $ENVFILE"
