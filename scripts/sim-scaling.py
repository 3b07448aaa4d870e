#!/usr/bin/env python3
"""Scaling in one box: IOPS of two jobs against one, each job stepping its
own simulated controller on its own thread (`bench --sim-sync`), pinned to
CPUs 0 and 1. Null data, 4 KiB random reads, QD 64, latency recording on.
Two jobs that share no cache line on the hot path give twice one job's
IOPS on two free cores; the goal is at least 1.9x.

The rule, fixed before any data: N pairs (default 3), each one job then two
jobs, back to back; the figure is the median of the N ratios (two jobs'
IOPS over the one job's IOPS of the same pair), printed with its min-max
range and every pair; "met" when that median is at least 1.9. A timed
figure on a 2-vCPU virtual machine moves with the hypervisor's placement of
the vCPUs, so every pair is printed and none is dropped.

    scripts/sim-scaling.py [BIN] [--pairs N] [--runtime S]

Exit status: 0 when the runs ran (met or not: the verdict is printed), 2 bad
usage, 3 the bench could not run. Figures are measured, against simulated
controllers, not a device."""
import argparse, json, statistics, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("bin", nargs="?", default="target/release/nvme-bypass")
ap.add_argument("--pairs", type=int, default=3, help="pairs of runs (default 3)")
ap.add_argument("--runtime", default="1", help="seconds per run (default 1)")
a = ap.parse_args()
if a.pairs < 1:
    ap.error("--pairs must be at least 1")

GOAL = 1.9
LABEL = "MEASURED, SIMULATED controllers"


def iops(jobs):
    cmd = [a.bin, "bench", "--backend", "sim", "--sim-sync", "--no-c2c", "--sim-data", "null", "--rw", "randread",
           "--bs", "4k", "--iodepth", "64", "--numjobs", str(jobs), "--cpus", "0,1", "--runtime", a.runtime,
           "--output-format", "json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: could not run {a.bin} bench: {e}; build it (cargo build --release) or give its path", file=sys.stderr)
        sys.exit(3)
    if p.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}", file=sys.stderr)
        sys.exit(3)
    return json.loads(p.stdout)["nvme_bypass"]["iops"]


print(f"command: {a.bin} bench --backend sim --sim-sync --sim-data null --rw randread --bs 4k --iodepth 64 "
      f"--cpus 0,1 --runtime {a.runtime} --numjobs 1, then --numjobs 2")
ratios = []
for i in range(1, a.pairs + 1):
    one, two = iops(1), iops(2)
    ratios.append(two / one)
    print(f"pair {i}: one job {one / 1e6:.2f}M IOPS, two jobs {two / 1e6:.2f}M IOPS: {two / one:.2f}x ({LABEL})")
med = statistics.median(ratios)
print(f"two jobs over one: median {med:.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] (n={len(ratios)}); "
      f"goal at least {GOAL}x: {'met' if med >= GOAL else 'not met'} ({LABEL})")
