#!/usr/bin/env bash
# fio-plot (https://github.com/louwrentius/fio-plot) reads the JSON of
# `nvme-bypass fio --output-format=json` as it reads fio's: runs randread
# on the simulated controller (measured, simulated) at iodepth 1, 2, 4, 8
# into one folder laid out as fio-plot's bench-fio lays it out
# (randread-iodepth-N-numjobs-1.json), then draws fio-plot's JSON charts
# (3D IOPS and latency bars, 2D IOPS/latency per queue depth, latency
# histogram) and, from the bandwidth and IOPS logs written beside the
# iodepth-8 run (write_bw_log, write_iops_log, log_avg_msec), its log
# graph (-g), and checks each wrote an image.
#
# Needs fio-plot: taken from $FIO_PLOT, else from a venv made in
# $FIO_PLOT_VENV (default /tmp/fp) with pip. Without network (pip cannot
# install it) prints "skipped: ..." and exits 0.
#
# usage: scripts/check-fio-plot.sh [path/to/nvme-bypass]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-}
[ -z "$bin" ] || bin=$(realpath "$bin")
if [ -z "$bin" ]; then
    (cd "$here" && cargo build -q --bin nvme-bypass)
    bin=$here/target/debug/nvme-bypass
fi
plot=${FIO_PLOT:-}
if [ -z "$plot" ]; then
    venv=${FIO_PLOT_VENV:-/tmp/fp}
    if [ ! -x "$venv/bin/fio-plot" ]; then
        if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q fio-plot; } >/dev/null 2>&1; then
            echo "skipped: fio-plot could not be installed (python3 -m venv $venv && $venv/bin/pip install fio-plot failed: no network?); set FIO_PLOT to an installed fio-plot"
            exit 0
        fi
    fi
    plot=$venv/bin/fio-plot
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sim-randread" "$work/charts"
for qd in 1 2 4 8; do
    name=sim-randread/randread-iodepth-$qd-numjobs-1
    logs=()
    [ "$qd" != 8 ] || logs=(--write_bw_log="$name" --write_iops_log="$name" --write_lat_log="$name" --log_avg_msec=100)
    (cd "$work" && "$bin" fio --name=randread --ioengine=nvme-bypass-sim --rw=randread --bs=4k --iodepth=$qd --numjobs=1 \
        --size=64M --runtime=1 --time_based --output-format=json --output="$work/$name.json" "${logs[@]}")
done
cd "$work/charts"
fail=0
chart() {
    local name=$1; shift
    local before after
    before=$(find . -name '*.png' | wc -l)
    if ! "$plot" -i "$work/sim-randread" -T "nvme-bypass fio, measured, simulated" "$@" >"$work/$name.log" 2>&1; then
        echo "FAIL: fio-plot $* exited non-zero:"; sed 's/^/  /' "$work/$name.log"; fail=1; return
    fi
    after=$(find . -name '*.png' | wc -l)
    if [ "$after" -le "$before" ]; then
        echo "FAIL: fio-plot $* wrote no image:"; sed 's/^/  /' "$work/$name.log"; fail=1; return
    fi
    echo "ok: fio-plot $*"
}
chart bar3d-iops -L -t iops -r randread
chart bar3d-lat -L -t lat -r randread
chart bar2d -l -r randread -d 1 2 4 8 -n 1
chart histogram -H -r randread -d 4 -n 1
chart log2d -g -t iops bw -r randread -d 8 -n 1
chart log2d-lat -g -t lat clat -r randread -d 8 -n 1
[ "$fail" = 0 ] && echo "fio-plot read nvme-bypass fio's JSON and logs: $(find . -name '*.png' | wc -l) charts"
exit $fail
