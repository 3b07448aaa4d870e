#!/bin/bash
# nvme-bypass test bed: build the BASE guest initramfs and the guest tools
# tree (both cached; rebuilt only when an input changes).
#
# Initramfs: busybox (static) with its applet links, /dev/console, /init
# (scripts/testbed/init), the kernel modules for NVMe (nvme-core, nvme), VFIO
# (vfio, vfio_iommu_type1, vfio-pci), the 9p host share (9p, 9pnet_virtio;
# virtio_pci is built into Debian's kernel) and a file system to mount on a
# namespace (ext4, which mounts busybox mke2fs's ext2, and crc32c_generic,
# which ext4 loads at mount), decompressed, listed in load order in
# /lib/modules/<kver>/load-order, and the kernel's /boot/config-<kver>.
#
# Guest tools: fio with every shared library ldd lists and the dynamic loader,
# copied into a small sysroot, $CACHE/initramfs/tools-<kver>-<hash>/. run.sh exports
# it read-only as the 9p share `tools`; /init mounts it at /opt/nvb-tools, and
# the initramfs holds symlinks at the usual places (/usr/bin/fio,
# /lib/x86_64-linux-gnu/..., /lib64/ld-linux-x86-64.so.2) pointing into it, so
# `fio` runs as if installed. Why not inside the initramfs: fio's libraries
# are ~85 MB, and unpacking them costs ~3 s of every TCG boot (measured: boot
# to /init 7.7 s with them, 4.8 s without). NVB_FIO_IN_INITRAMFS=1 bakes them
# in instead (no tools share needed; slower boots).
#
# The project binary and the guest test scripts are in neither: they reach the
# guest through the `host` share set up by run.sh, so a rebuild of the Rust
# code never rebuilds this. A hash of the inputs (this script, init, kernel,
# busybox, fio) is stored beside the image.
#
# usage: scripts/testbed/build-initramfs.sh [--force] [--quiet]
#        last stdout line: the image path; the tools tree is printed on
#        stdout's line before it (TOOLS=<dir>, empty with NVB_FIO_IN_INITRAMFS=1)
# env:   NVB_TESTBED_DIR (default /var/tmp/nvme-bypass-testbed); setup.sh must have run.
#        NVB_INITRAMFS_COMP=zstd|gzip|none  (default zstd)
#        NVB_FIO_IN_INITRAMFS=1             put fio + libraries into the image
set -euo pipefail

CACHE=${NVB_TESTBED_DIR:-/var/tmp/nvme-bypass-testbed}
HERE=$(cd "$(dirname "$0")" && pwd)
COMP=${NVB_INITRAMFS_COMP:-zstd}
FIO_IN=${NVB_FIO_IN_INITRAMFS:-0}
TOOLS_MNT=/opt/nvb-tools          # where /init mounts the tools share
FORCE=0; QUIET=0
for a in "$@"; do
  case "$a" in
    --force) FORCE=1 ;;
    --quiet) QUIET=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-initramfs.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
say() { [ "$QUIET" = 1 ] || echo "testbed-initramfs: $*" >&2; }
die() { echo "testbed-initramfs: ERROR: $*" >&2; exit 1; }

# Modules wanted (their dependencies are added from modules.dep), in the order
# /init loads them: nvme first so its asynchronous probe starts early.
MODULES=(nvme vfio vfio_iommu_type1 vfio-pci 9p 9pnet_virtio virtio_pci ext4 crc32c_generic)

[ -f "$CACHE/testbed.env" ] || die "$CACHE/testbed.env missing: run scripts/testbed/setup.sh first"
# shellcheck disable=SC1091
. "$CACHE/testbed.env"
MD=$KROOT/lib/modules/$KVER
[ -f "$MD/modules.dep" ] || die "$MD/modules.dep missing: re-run scripts/testbed/setup.sh --force"
for t in /bin/busybox /usr/bin/fio; do [ -x "$t" ] || die "$t missing: re-run scripts/testbed/setup.sh --force"; done
case "$COMP" in
  zstd) COMPRESS=(zstd -q -3 -T0 -c); EXT=cpio.zst ;;
  gzip) COMPRESS=(gzip -6 -c);        EXT=cpio.gz ;;
  none) COMPRESS=(cat);               EXT=cpio ;;
  *) die "NVB_INITRAMFS_COMP must be zstd, gzip or none (got '$COMP')" ;;
esac
case "$FIO_IN" in 0|1) ;; *) die "NVB_FIO_IN_INITRAMFS must be 0 or 1" ;; esac

mkdir -p "$CACHE/initramfs"
# Inputs whose change must produce a new image.
HASH=$( { cat "$0" "$HERE/init"; echo "$KVER ${MODULES[*]} $COMP $FIO_IN";
          fio --version; sha256sum /bin/busybox /usr/bin/fio; } | sha256sum | cut -c1-16)
# The names carry the hash: checkouts with different inputs sharing one
# cache each get their own image and tools tree, and a build never replaces
# files a running guest of another checkout is using (its fio vanished).
if [ "$FIO_IN" = 1 ]; then
  OUT=$CACHE/initramfs/base-$KVER-fio-$HASH.$EXT; TOOLS=
else
  OUT=$CACHE/initramfs/base-$KVER-$HASH.$EXT; TOOLS=$CACHE/initramfs/tools-$KVER-$HASH
fi

report() { echo "TOOLS=$TOOLS"; echo "$OUT"; }
exec 8>"$CACHE/.initramfs.lock"
flock 8
if [ "$FORCE" = 0 ] && [ -f "$OUT" ] && [ "$(cat "$OUT.hash" 2>/dev/null)" = "$HASH" ] &&
   { [ -z "$TOOLS" ] || [ "$(cat "$TOOLS.hash" 2>/dev/null)" = "$HASH" ]; }; then
  say "up to date: $OUT${TOOLS:+ + $TOOLS}"
  touch "$OUT" ${TOOLS:+"$TOOLS"}        # in use: not pruned (see below)
  report
  exit 0
fi

T0=${EPOCHREALTIME/./}
STAGE=$(mktemp -d "$CACHE/initramfs/stage.XXXXXX")
SYSROOT=$(mktemp -d "$CACHE/initramfs/tools.XXXXXX")
trap 'rm -rf "$STAGE" "$SYSROOT"' EXIT
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,proc,sys,dev,tmp,run,mnt/host,etc,root,"lib/modules/$KVER"}
mkdir -p "$STAGE$TOOLS_MNT"

# busybox + one symlink per applet (busybox-static needs no libraries)
cp /bin/busybox "$STAGE/bin/busybox"
for a in $("$STAGE/bin/busybox" --list); do
  [ "$a" = busybox ] || ln -s busybox "$STAGE/bin/$a"
done
ln -s ../../bin/busybox "$STAGE/usr/bin/env"     # for '#!/usr/bin/env sh' scripts
cp "$HERE/init" "$STAGE/init"
chmod 755 "$STAGE/init"
# The kernel's build configuration, where Debian keeps it: the tool reads
# CONFIG_IRQ_TIME_ACCOUNTING from it (Debian's kernel has no /proc/config.gz).
mkdir -p "$STAGE/boot"
[ -f "$KROOT/boot/config-$KVER" ] && cp "$KROOT/boot/config-$KVER" "$STAGE/boot/"
# The kernel opens /dev/console before /init mounts devtmpfs.
mknod -m 600 "$STAGE/dev/console" c 5 1
echo "root:x:0:0:root:/root:/bin/sh" > "$STAGE/etc/passwd"
echo "root:x:0:" > "$STAGE/etc/group"

# ---------------------------------------------------------------- modules
# Dependency closure from modules.dep, dependencies first. A module that is
# built into the kernel (modules.builtin) needs nothing; one that is neither
# there nor in modules.dep is an error.
ORDER=$(awk -v want="${MODULES[*]}" -v builtin="$MD/modules.builtin" '
  function norm(s) { gsub(/-/, "_", s); return s }
  function modname(p,  b) { b = p; sub(/.*\//, "", b); sub(/\.ko(\.(xz|zst|gz))?$/, "", b); return norm(b) }
  # modules.dep lists a module deepest-dependency-last: visit in reverse
  function visit(p,  n, d, i) {
    if (p in seen) return
    seen[p] = 1
    n = split(deps[p], d, " ")
    for (i = n; i >= 1; i--) visit(d[i])
    print p
  }
  { p = $1; sub(/:$/, "", p); $1 = ""; deps[p] = $0; path[modname(p)] = p }
  END {
    while ((getline line < builtin) > 0) isbuiltin[modname(line)] = 1
    n = split(want, w, " ")
    for (i = 1; i <= n; i++) {
      m = norm(w[i])
      if (m in path) visit(path[m])
      else if (m in isbuiltin) print "builtin " m > "/dev/stderr"
      else { print "missing " m > "/dev/stderr"; bad = 1 }
    }
    exit bad
  }' "$MD/modules.dep" 2>"$STAGE/modorder.err") || die "module(s) not found in $KVER: $(grep missing "$STAGE/modorder.err" | tr '\n' ' ')"
BUILTIN=$(sed -n 's/^builtin //p' "$STAGE/modorder.err" | tr '\n' ' '); BUILTIN=${BUILTIN% }
rm -f "$STAGE/modorder.err"
: > "$STAGE/lib/modules/$KVER/load-order"
for m in $ORDER; do
  rel=${m%.xz}; rel=${rel%.zst}; rel=${rel%.gz}
  dst=$STAGE/lib/modules/$KVER/$rel
  mkdir -p "$(dirname "$dst")"
  # decompressed, so busybox insmod needs no decompressor
  case "$m" in
    *.xz)  xz -dc "$MD/$m" > "$dst" ;;
    *.zst) zstd -qdc "$MD/$m" > "$dst" ;;
    *.gz)  gzip -dc "$MD/$m" > "$dst" ;;
    *)     cp "$MD/$m" "$dst" ;;
  esac
  echo "$rel" >> "$STAGE/lib/modules/$KVER/load-order"
done

# ---------------------------------------------------------------- fio
# fio is dynamically linked: its sysroot holds it, every library ldd resolves
# and the loader, each at its host path.
mkdir -p "$SYSROOT/usr/bin" "$SYSROOT/lib64"
cp /usr/bin/fio "$SYSROOT/usr/bin/fio"
LDD=$(ldd /usr/bin/fio) || die "ldd /usr/bin/fio failed"
if grep -q 'not found' <<<"$LDD"; then die "fio has unresolved libraries: $(grep 'not found' <<<"$LDD")"; fi
awk '/=> \// {print $3} /^[ \t]*\/[^ ]*ld-linux/ {print $1}' <<<"$LDD" | sort -u | while read -r lib; do
  mkdir -p "$SYSROOT$(dirname "$lib")"
  cp -L "$lib" "$SYSROOT$lib"
done
[ -e "$SYSROOT/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$SYSROOT/lib64/"
if [ "$FIO_IN" = 1 ]; then
  cp -a "$SYSROOT/." "$STAGE/"
else
  # symlinks from the usual paths into the tools share
  ( cd "$SYSROOT" && find . -type f ) | while read -r f; do
    f=${f#./}
    mkdir -p "$STAGE/$(dirname "$f")"
    ln -s "$TOOLS_MNT/$f" "$STAGE/$f"
  done
fi

# ---------------------------------------------------------------- archive
# The host has no cpio; busybox's writes the newc format the kernel wants.
( cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | /bin/busybox cpio -o -H newc -R 0:0 2>/dev/null ) |
  "${COMPRESS[@]}" > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$HASH" > "$OUT.hash"
if [ -n "$TOOLS" ]; then
  chmod 755 "$SYSROOT"
  rm -rf "$TOOLS"; mv "$SYSROOT" "$TOOLS"
  echo "$HASH" > "$TOOLS.hash"
fi
# Other builds unused for two days go.
find "$CACHE/initramfs" -maxdepth 1 \( -name "base-$KVER*" -o -name "tools-$KVER*" \) \
  ! -name "$(basename "$OUT")*" ! -name "$(basename "${TOOLS:-none}")*" -mtime +1 -exec rm -rf {} + 2>/dev/null || true
dt=$(( ${EPOCHREALTIME/./} - T0 ))
say "built $OUT ($(du -h "$OUT" | cut -f1), $(du -sh "$STAGE" | cut -f1) unpacked) in $((dt / 1000000)).$((dt / 100000 % 10)) s"
say "  kernel $KVER; modules: $(sed 's|.*/||; s|\.ko$||' "$STAGE/lib/modules/$KVER/load-order" | tr '\n' ' ')${BUILTIN:+(built in: $BUILTIN)}"
if [ -n "$TOOLS" ]; then say "  fio + libraries: $TOOLS ($(du -sh "$TOOLS" | cut -f1)), shared read-only as 9p tag 'tools'"
else say "  fio + libraries inside the image"; fi
report
