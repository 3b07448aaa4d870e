#!/bin/sh
# Guest script: every test bed check of the README's test command, in one
# boot (boot once, run each script in turn, report each). Each script is a
# standalone guest script too. Exit status: 0 when all passed.
#   vfio.sh          the userspace driver: bind, identify, verified runs, cross-path data, unbind
#   kernel-paths.sh  passthru and block (io_uring, libaio): verified runs, cross-path data, polled variants
#   vfio-irq.sh      interrupt-driven vfio completions (MSI-X eventfds)
#   threads.sh       two pinned threads, each with its own queue (checked by scripts/check-threads.py)
#   accounting.sh    what a run says of its measurement: irq-time accounting, the lower-bound note, clocksource
#   trace.sh         the queue story over vfio
#   interrupt.sh     Ctrl-C / SIGTERM during vfio runs; device back to the kernel, data outside the range untouched
#   fio-compare.sh   our kernel-path engines against fio, same device, same job, same batching (table: scripts/fio-table.py)
#   fio-dropin.sh    `nvme-bypass fio` for fio: the same command lines, output of fio's shape, every path
#   compare.sh       the main job: every path side by side, three rounds with a noise control
#                    (checked on the host by check-compare.py)
. "$(dirname "$0")/lib.sh"
DIR=$(dirname "$0")
SCRIPTS=${NVB_ALL:-"vfio.sh vfio-irq.sh kernel-paths.sh threads.sh accounting.sh trace.sh interrupt.sh fio-compare.sh fio-dropin.sh compare.sh"}
failed=""
# The verified runs of vfio.sh and kernel-paths.sh check that each path and
# option works and moves the right data, not how fast: 1 s each here, where
# the scripts alone run 2 s (about 30 runs).
# kernel-paths.sh's verified runs stamp their region first: 32M, not 64M.
export VFIO_RUNTIME="${VFIO_RUNTIME:-1}" KP_RUNTIME="${KP_RUNTIME:-1}" KP_SIZE="${KP_SIZE:-32M}"
for s in $SCRIPTS; do
  echo "NVB-ALL: ---- $s ----"
  start=$(cut -d' ' -f1 /proc/uptime)
  if [ "$s" = compare.sh ]; then
    # Three rounds of 1 s rows (36 runs with the noise control) instead of
    # one round of 2 s rows: the compare step took 74 s in a test-bed boot
    # (36 runs of about 2 s each), against about 34 s for one round of
    # 2 s rows: about 40 s more in this boot under TCG.
    sh "$DIR/$s" --repeat "${NVB_COMPARE_REPEAT:-3}" --runtime "${NVB_COMPARE_RUNTIME:-1}" --ramp-time 0.5 --iodepth 32; rc=$?
  elif [ "$s" = fio-compare.sh ]; then
    # 0.5 s ramp then 2 s, where the script alone takes 1 s then 3 s: its
    # six pairs took 140 s of this boot, 23 s each.
    sh "$DIR/$s" --runtime "${FIO_RUNTIME:-2}" --ramp "${FIO_RAMP:-0.5}"; rc=$?
  else
    sh "$DIR/$s"; rc=$?
  fi
  end=$(cut -d' ' -f1 /proc/uptime)
  echo "NVB-ALL: $s exit $rc ($(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s)"
  [ "$rc" = 0 ] || failed="$failed $s"
done
if [ -n "$failed" ]; then
  echo "NVB-ALL: FAILED:$failed"
  exit 1
fi
echo "NVB-ALL: all passed ($SCRIPTS)"
