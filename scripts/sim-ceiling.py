#!/usr/bin/env python3
"""The driver's timed per-core figure on the threaded simulator, reported
without a verdict (the performance goals are judged on instruction counts):
null data, 4 KiB random reads, QD 64, one thread, latency recording on, the
default store mode, a fixed number of runs.

Two things about the pair of CPUs the driver and the simulated controller
run on move such a run most, and on a shared or virtual machine both change
under us. `bench` measures both around each run:

* core-to-core latency, the cache-line transfer time between the two CPUs,
  before the run, right after it, and again after the core-share probe;
* core share, the driver CPU's multiply speed while the controller's CPU
  multiplies too, over its speed while that CPU only pauses (after the
  run): about 1.0 on separate cores, about 0.5 when the two are hardware
  threads of one core.

Every run is printed (IOPS, useful CPU ns per I/O, the three core-to-core
figures, the core share and the state they make: separate cores, one
shared core, or placement changed during the share probe). The median and
min-max range are over the runs on separate cores only; the others are
printed and counted, not summarised.

    scripts/sim-ceiling.py [BIN] [--runs N] [--runtime S]

Exit status: 0 when the runs ran (whatever their state), 2 bad usage, 3 the
bench could not run or failed. Figures are measured, the driver against a
simulated controller, not a device."""
import argparse, json, statistics, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("bin", nargs="?", default="target/release/nvme-bypass")
ap.add_argument("--runs", type=int, default=3, help="runs, all printed (default 3)")
ap.add_argument("--runtime", default="2", help="seconds per run (default 2)")
ap.add_argument("--fast", type=float, default=30.0,
                help="core-to-core ns at or under which the state counts as fast; a run whose state differs either side "
                     "of the share probe had its placement change (default 30)")
ap.add_argument("--shared", type=float, default=0.85,
                help="core share under which the two CPUs count as one shared core (default 0.85)")
a = ap.parse_args()
if a.runs < 1:
    ap.error("--runs must be at least 1")

LABEL = "MEASURED, SIMULATED controller"


def c2c(x):
    return "-" if x is None else f"{x:.0f}"


def run(i):
    """One bench run: (state, IOPS, useful ns per I/O), printed."""
    cmd = [a.bin, "bench", "--backend", "sim", "--sim-data", "null", "--rw", "randread",
           "--bs", "4k", "--iodepth", "64", "--runtime", a.runtime, "--output-format", "json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: could not run {a.bin} bench: {e}; build it (cargo build --release) or give its path", file=sys.stderr)
        sys.exit(3)
    if p.returncode != 0:
        print(f"FAIL: bench exited {p.returncode}: {p.stderr.strip()}", file=sys.stderr)
        sys.exit(3)
    nb = json.loads(p.stdout)["nvme_bypass"]
    before, after = nb.get("core_to_core_ns") or (None, None)
    cs = nb.get("core_share") or {}
    share, solo, later = cs.get("share"), cs.get("solo_muls_per_ns"), cs.get("core_to_core_after_ns")
    moved = later is not None and after is not None and (later <= a.fast) != (after <= a.fast)
    if share is None:
        state = "core share not measured"
    elif moved:
        # A share measured while the placement moved describes neither state.
        state = "placement changed during the share probe"
    else:
        state = "separate cores" if share >= a.shared else "one shared core"
    useful = nb["cpu"]["useful_cpu_ns_per_io"]
    share_s = "-" if share is None else f"{share:.2f} (driver CPU alone {solo:.2f} multiply-adds/ns)"
    print(f"run {i}: {nb['iops'] / 1e6:.2f}M IOPS, {useful:.1f} ns useful CPU per I/O, core-to-core "
          f"{c2c(before)} ns before / {c2c(after)} ns after the run / {c2c(later)} ns after the share probe, "
          f"core share {share_s}: {state} ({LABEL})", flush=True)
    return state, nb["iops"], useful


runs = [run(i + 1) for i in range(a.runs)]
sep = [r for r in runs if r[0] == "separate cores"]
left = len(runs) - len(sep)
if left:
    print(f"{left} of {len(runs)} runs not on separate cores, left out of the median")
if sep:
    def spread(xs, fmt):
        return f"median {fmt(statistics.median(xs))} [{fmt(min(xs))}-{fmt(max(xs))}] (n={len(xs)})"
    print(f"separate cores, default store mode: IOPS {spread([r[1] for r in sep], lambda x: f'{x / 1e6:.2f}M')}, "
          f"useful CPU per I/O {spread([r[2] for r in sep], lambda x: f'{x:.1f} ns')} ({LABEL})")
else:
    print(f"no run on separate cores in {len(runs)}: no median ({LABEL})")
sys.exit(0)
