# shellcheck shell=sh
# nvme-bypass test bed: helpers for guest scripts (busybox ash / POSIX sh).
#
#   . "$(dirname "$0")/lib.sh"        # or: . "$NVB_TESTS/lib.sh"
#
# The guest's /init sets NVB_RESULTS (a host directory), NVB_BDF / NVB_BDFS
# (NVMe controllers' PCI addresses), NVB_GUEST=1 and the NVB_* settings of
# run.sh (NVB_CONTROLLERS, NVB_NAMESPACES, NVB_LBA_SIZE, NVB_POLL_QUEUES,
# NVB_MULTIPATH, NVB_IOMMU, NVB_DISK_SIZE, NVB_NVME_OPTS, NVB_SMP, NVB_MEM).
# Helpers that can fail call `fail`, which exits the script: call them
# directly, not inside $(...), where the exit would only leave the subshell.

: "${NVB_RESULTS:=/tmp/nvb-results}"
mkdir -p "$NVB_RESULTS"
NVB_CUR_STEP=

# step NAME: mark the start of a step (run.sh reports the last one on
# failure). The script's first step starts its watchdog: a step that runs
# longer than NVB_STEP_TIMEOUT seconds (run.sh --step-timeout, default 360)
# is reported as NVB-WATCHDOG, with the processes and the kernel log's
# tail, and the script and its children are stopped, so a hung step fails
# the script in minutes rather than hanging the boot.
step() {
  NVB_CUR_STEP=$1; echo "NVB-STEP $1"
  read -r _now _rest < /proc/uptime; echo "$_now $1" > "/run/nvb-step.$$"
  [ -n "${_nvb_wd:-}" ] || _nvb_watchdog
}

# nvb_nap SECONDS: wait without starting a process (`read -t` on the FIFO
# /init makes; `sleep` would be a fork and an exec each time)
nvb_nap() {
  [ -p /run/nvb-nap ] || mkfifo /run/nvb-nap 2>/dev/null || { sleep "$1"; return 0; }
  read -t "$1" _nap <> /run/nvb-nap
  return 0
}

# (the watchdog of `step`; ends with the script)
_nvb_watchdog() {
  _nvb_wd=$$
  ( _owner=$_nvb_wd; _limit=${NVB_STEP_TIMEOUT:-360}
    trap '' INT
    read -r _self _rest < /proc/self/stat      # this subshell's own pid
    # Every wait and test here is a shell builtin, so the watchdog starts
    # no process while nothing is wrong (a quiet guest for counted windows);
    # while /run/nvb-quiet exists it looks every 60 s instead of every 5,
    # so that its wake-ups seldom land in a counted window.
    while :; do
      if [ -e /run/nvb-quiet ]; then nvb_nap 60; else nvb_nap 5; fi
      kill -0 "$_owner" 2>/dev/null || break
      read -r _t0 _name < "/run/nvb-step.$_owner" 2>/dev/null || continue
      read -r _now _rest < /proc/uptime
      _el=$(( ${_now%.*} - ${_t0%.*} ))
      [ "$_el" -ge "$_limit" ] || continue
      echo "NVB-WATCHDOG: step '$_name' of $0 has run for ${_el} s (limit ${_limit} s, run.sh --step-timeout): stopping the script"
      ps 2>/dev/null | grep -v ' \[' | sed 's/^/NVB-WATCHDOG:   /'
      dmesg 2>/dev/null | tail -n 15 | sed 's/^/NVB-WATCHDOG:   /'
      # The script dies at once (SIGKILL: it fails, whatever it traps);
      # its children get SIGTERM, which nvme-bypass answers by stopping
      # its I/O and handing the controller back, then SIGKILL.
      _kids=
      for _s in /proc/[0-9]*/stat; do
        read -r _pid _comm _st _ppid _rest < "$_s" 2>/dev/null || continue
        [ "$_ppid" != "$_owner" ] || [ "$_pid" = "$_self" ] || _kids="$_kids $_pid"
      done
      kill -KILL "$_owner" 2>/dev/null
      [ -z "$_kids" ] || kill -TERM $_kids 2>/dev/null
      sleep 10
      [ -z "$_kids" ] || kill -KILL $_kids 2>/dev/null
      rm -f "/run/nvb-step.$_owner"
      exit 0
    done
    rm -f "/run/nvb-step.$_owner" ) &
}

# info MSG: an indented progress line
info() { echo "  $*"; }

# fail MSG: print FAIL with the current step and exit 1
fail() { echo "FAIL: ${NVB_CUR_STEP:+[$NVB_CUR_STEP] }$*" >&2; exit 1; }

# wait_until SECONDS CONDITION: evaluate the shell CONDITION every 0.1 s
# until it holds; 1 if it still does not after SECONDS. WAITED is left
# holding the seconds waited (whole seconds).
wait_until() {
  _wu_i=0
  until eval "$2"; do
    [ "$_wu_i" -lt $(( $1 * 10 )) ] || { WAITED=$((_wu_i / 10)); return 1; }
    sleep 0.1; _wu_i=$((_wu_i + 1))
  done
  WAITED=$((_wu_i / 10))
}

# wait_for PATH [SECONDS=10]: wait until PATH exists; status 1 on timeout
wait_for() {
  _wf_p=$1
  wait_until "${2:-10}" '[ -e "$_wf_p" ]'
}

# wait_gone PATH [SECONDS=10]: wait until PATH no longer exists
wait_gone() {
  _wg_p=$1
  wait_until "${2:-10}" '[ ! -e "$_wg_p" ]'
}

# nvb_bdf: PCI address of the first NVMe controller (class 0x010802)
nvb_bdf() {
  if [ -n "${NVB_BDF:-}" ]; then echo "$NVB_BDF"; return 0; fi
  for _d in /sys/bus/pci/devices/*; do
    if [ "$(cat "$_d/class" 2>/dev/null)" = 0x010802 ]; then echo "${_d##*/}"; return 0; fi
  done
  return 1
}

# pci_driver BDF: name of the bound driver, or "none"
pci_driver() {
  if [ -e "/sys/bus/pci/devices/$1/driver" ]; then
    _l=$(readlink "/sys/bus/pci/devices/$1/driver"); echo "${_l##*/}"
  else
    echo none
  fi
}

# wait_open PID: wait until PID has a VFIO group open (so it is past
# installing its signal handlers: a background job of this non-interactive
# shell starts with SIGINT ignored, and a static binary loaded over 9p under
# emulation can take a second to get that far).
wait_open() {
  _wo_p=$1
  wait_until 30 '! kill -0 "$_wo_p" 2>/dev/null || ls -l /proc/"$_wo_p"/fd 2>/dev/null | grep -q "/dev/vfio/[0-9]"' &&
    kill -0 "$_wo_p" 2>/dev/null
}

# wait_exit PID SECONDS: wait until process PID has ended; 1 if it still
# runs after SECONDS.
wait_exit() {
  _we_p=$1
  wait_until "$2" '! kill -0 "$_we_p" 2>/dev/null'
}

# iommu_group BDF: the device's IOMMU group number (status 1 if it has none)
iommu_group() {
  _g=$(readlink "/sys/bus/pci/devices/$1/iommu_group" 2>/dev/null) || return 1
  echo "${_g##*/}"
}

# nvme_ctrl_of BDF: the nvmeN controller name bound to BDF (status 1 if none)
nvme_ctrl_of() {
  for _c in /sys/bus/pci/devices/"$1"/nvme/nvme*; do
    [ -e "$_c" ] && { echo "${_c##*/}"; return 0; }
  done
  return 1
}

# sysfs_write VALUE FILE: write, or fail with a clear message
sysfs_write() {
  # shellcheck disable=SC2320
  echo "$1" 2>/dev/null > "$2" || fail "cannot write '$1' to $2"
}

# bind_vfio BDF: unbind BDF from its driver and bind it to vfio-pci, in the
# kernel's order: driver_override first (from the unbind on, only vfio-pci
# may take the device), unbind, drivers_probe.
# Sets VFIO_GROUP (number) and VFIO_GROUP_DEV (/dev/vfio/N).
bind_vfio() {
  _dev=/sys/bus/pci/devices/$1
  [ -d "$_dev" ] || fail "bind_vfio: no PCI device $1"
  VFIO_GROUP=$(iommu_group "$1") ||
    fail "bind_vfio: $1 has no IOMMU group (run.sh --no-iommu? VFIO needs the vIOMMU)"
  VFIO_GROUP_DEV=/dev/vfio/$VFIO_GROUP
  [ -d /sys/bus/pci/drivers/vfio-pci ] || fail "bind_vfio: vfio-pci driver not loaded"
  sysfs_write vfio-pci "$_dev/driver_override"
  if [ "$(pci_driver "$1")" != none ]; then sysfs_write "$1" "$_dev/driver/unbind"; fi
  echo "$1" 2>/dev/null > /sys/bus/pci/drivers_probe || true   # status checked below
  [ "$(pci_driver "$1")" = vfio-pci ] ||
    fail "bind_vfio: $1 is bound to '$(pci_driver "$1")', not vfio-pci: $(dmesg | grep -i vfio | tail -n 3)"
  wait_for "$VFIO_GROUP_DEV" 10 || fail "bind_vfio: $VFIO_GROUP_DEV did not appear"
  info "$1 bound to vfio-pci, group $VFIO_GROUP ($VFIO_GROUP_DEV)"
}

# bind_nvme BDF [DEV=/dev/nvme0n1]: give BDF back to the nvme driver, wait for
# DEV; in the same order (nvme in driver_override, unbind, drivers_probe),
# then the override cleared (that leaves the driver bound)
bind_nvme() {
  _dev=/sys/bus/pci/devices/$1
  [ -d "$_dev" ] || fail "bind_nvme: no PCI device $1"
  sysfs_write nvme "$_dev/driver_override"
  if [ "$(pci_driver "$1")" != none ]; then sysfs_write "$1" "$_dev/driver/unbind"; fi
  echo "$1" 2>/dev/null > /sys/bus/pci/drivers_probe || true
  sysfs_write "" "$_dev/driver_override"        # an empty write clears the override
  [ "$(pci_driver "$1")" = nvme ] || fail "bind_nvme: $1 is bound to '$(pci_driver "$1")', not nvme"
  wait_for "${2:-/dev/nvme0n1}" 30 || fail "bind_nvme: ${2:-/dev/nvme0n1} did not come back within 30 s"
  info "$1 bound to nvme again, ${2:-/dev/nvme0n1} present"
}

# expect_on_nvme BDF AFTER: after a run that may have moved BDF to vfio-pci,
# check it is back on nvme and /dev/nvme0n1 is there and readable (O_DIRECT);
# AFTER names the run in the failure message.
# fio_setup NAME: for a script that runs fio beside nvme-bypass: both are
# there, the current directory is $NVB_RESULTS/NAME, and BDF, CTRL, NS
# (/dev/nvmeXn1) and NG (/dev/ngXn1) name the first controller.
fio_setup() {
  command -v nvme-bypass >/dev/null 2>&1 || fail "no nvme-bypass binary in the share (do not use run.sh --no-bin)"
  command -v fio >/dev/null 2>&1 || fail "no fio in the guest (scripts/testbed/build-initramfs.sh puts it there)"
  OUT=$NVB_RESULTS/$1
  mkdir -p "$OUT"
  cd "$OUT" || fail "cannot enter $OUT"
  BDF=$(nvb_bdf) || fail "no NVMe controller (PCI class 0x010802)"
  CTRL=$(nvme_ctrl_of "$BDF") || fail "$BDF is not bound to nvme"
  NS=/dev/${CTRL}n1
  NG=/dev/ng${CTRL#nvme}n1
  wait_for "$NS" 10 || fail "$NS missing"
}

expect_on_nvme() {
  [ "$(pci_driver "$1")" = nvme ] || fail "controller $1 ended on $(pci_driver "$1") after $2, not nvme"
  wait_for /dev/nvme0n1 10 || fail "/dev/nvme0n1 did not come back after $2"
  dd if=/dev/nvme0n1 of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null || fail "/dev/nvme0n1 is not readable after $2"
  info "controller back on nvme, /dev/nvme0n1 readable"
}

# check_cmd NAME CMD [ARGS...]: run CMD, output to $NVB_RESULTS/NAME.log;
# on failure show the log's tail and fail.
check_cmd() {
  _cc_name=$1; shift
  _cc_log=$NVB_RESULTS/$_cc_name.log
  if "$@" > "$_cc_log" 2>&1; then
    info "ok: $_cc_name ($*)"
  else
    _cc_rc=$?
    echo "---- last lines of $_cc_log ----" >&2
    tail -n 20 "$_cc_log" >&2
    fail "$_cc_name: '$*' exited with rc=$_cc_rc"
  fi
}

# json_str STRING: STRING as a JSON string literal
json_str() {
  printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | tr '\t\n\r' '   ')"
}
