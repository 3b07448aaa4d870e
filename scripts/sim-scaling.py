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

Beside each pair, a control that shares nothing: two processes of one job
each, started together, one pinned to each CPU; their IOPS summed over the
same one job's. It is what this machine gives two copies of the same
work at that moment (two vCPUs on one physical core's hyperthreads, or a
busy neighbour, give less than 2x to anything). Printed with its median,
and each pair's two jobs over its two processes with their median: near 1
when the one process shares nothing the two do not. The verdict stays the
rule's above.

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


def command(jobs, cpus):
    return [a.bin, "bench", "--backend", "sim", "--sim-sync", "--no-c2c", "--sim-data", "null", "--rw", "randread",
            "--bs", "4k", "--iodepth", "64", "--numjobs", str(jobs), "--cpus", cpus, "--runtime", a.runtime,
            "--output-format", "json"]


def start(cmd):
    try:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        print(f"FAIL: could not run {a.bin} bench: {e}; build it (cargo build --release) or give its path", file=sys.stderr)
        sys.exit(3)


def result(cmd, p):
    try:
        out, err = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.kill()
        print(f"FAIL: {' '.join(cmd)} ran over 300 s", file=sys.stderr)
        sys.exit(3)
    if p.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {err.strip()[-400:]}", file=sys.stderr)
        sys.exit(3)
    return json.loads(out)["nvme_bypass"]["iops"]


def iops(jobs):
    cmd = command(jobs, "0,1")
    return result(cmd, start(cmd))


def two_processes():
    """Two one-job processes at once, on CPU 0 and CPU 1: IOPS summed."""
    cmds = [command(1, "0"), command(1, "1")]
    procs = [start(c) for c in cmds]
    return sum(result(c, p) for c, p in zip(cmds, procs))


print(f"command: {a.bin} bench --backend sim --sim-sync --sim-data null --rw randread --bs 4k --iodepth 64 "
      f"--cpus 0,1 --runtime {a.runtime} --numjobs 1, then --numjobs 2")
print(f"control: two processes at once, {a.bin} bench ... --numjobs 1 --cpus 0 and --cpus 1")
ratios, controls = [], []
for i in range(1, a.pairs + 1):
    one, two, procs = iops(1), iops(2), two_processes()
    ratios.append(two / one)
    controls.append(procs / one)
    print(f"pair {i}: one job {one / 1e6:.2f}M IOPS, two jobs {two / 1e6:.2f}M IOPS: {two / one:.2f}x; "
          f"control, two processes {procs / 1e6:.2f}M IOPS: {procs / one:.2f}x ({LABEL})")
med = statistics.median(ratios)
cmed = statistics.median(controls)
print(f"two jobs over one: median {med:.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] (n={len(ratios)}); "
      f"goal at least {GOAL}x: {'met' if med >= GOAL else 'not met'} ({LABEL})")
shares = [r / c for r, c in zip(ratios, controls)]
print(f"control, two processes over one job: median {cmed:.2f}x [{min(controls):.2f}-{max(controls):.2f}]; "
      f"two jobs over two processes, per pair: median {statistics.median(shares):.2f} "
      f"[{min(shares):.2f}-{max(shares):.2f}] ({LABEL})")
