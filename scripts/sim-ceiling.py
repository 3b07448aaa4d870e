#!/usr/bin/env python3
"""The driver's per-core ceiling on the threaded simulator, against issue 8's
goal: null data, 4 KiB random reads, QD 64, one thread, latency recording
on, at most 25 ns of useful driver CPU per I/O, measured in the machine's
fast core-to-core state.

The cache-line transfer time between the driver's core and the simulator's
core is the one figure that moves such a run most, and on a shared or
virtual machine it changes under us (72-124 ns in one state, about 12 ns in
the other, on the machine in docs/results.md). `bench` measures it before
and after each run; this script repeats the run until it sees one that
started and ended in the fast state (then runs it once more with
--cached-sq-stores), until it has --fast-runs such pairs, and judges only
fast-state runs: the median of each store mode's, the better mode's
against the goal (one lucky run does not decide it). Every run is printed
with its state, so nothing is hidden.

On a machine whose fast state comes only in short spells (under a second),
--catch SECONDS has each try wait, inside bench, until a quick probe sees
the fast state (at most SECONDS; bench --wait-fast-c2c) and then start at
once; pair it with a short --runtime such as 0.1. Tries in which the state
never came run nothing and are counted as such.

    scripts/sim-ceiling.py [BIN] [--tries N] [--goal NS] [--fast NS] [--catch S]

Exit status: 0 goal met in the fast state, 1 not met (in the fast state),
2 no fast-state run seen in N tries (nothing to judge), 3 the bench failed.
Figures are the driver against a simulated controller (labelled EMULATED by
bench), not a device."""
import argparse, json, statistics, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("bin", nargs="?", default="target/release/nvme-bypass")
ap.add_argument("--tries", type=int, default=10, help="runs at most (default 10)")
ap.add_argument("--runtime", default="2", help="seconds per run (default 2)")
ap.add_argument("--goal", type=float, default=25.0, help="useful ns per I/O to meet (default 25)")
ap.add_argument("--fast", type=float, default=30.0,
                help="core-to-core ns at or below which a state counts as fast (default 30)")
ap.add_argument("--fast-runs", type=int, default=5,
                help="fast-state pairs (default and --cached-sq-stores) to collect before judging (default 5)")
ap.add_argument("--catch", type=float, metavar="SECONDS",
                help="each try waits up to SECONDS for a fast state and starts the run in it (bench --wait-fast-c2c)")
a = ap.parse_args()
waited_out = 0

runs = []


def run(label, extra):
    global waited_out
    wait = ["--wait-fast-c2c", str(a.fast), "--wait-timeout", f"{a.catch}s"] if a.catch else []
    p = subprocess.run([a.bin, "bench", "--backend", "sim", "--sim-data", "null", "--rw", "randread",
                        "--bs", "4k", "--iodepth", "64", "--runtime", a.runtime, "--output-format", "json", *wait, *extra],
                       capture_output=True, text=True, timeout=300 + (a.catch or 0))
    if p.returncode == 3 and a.catch:
        waited_out += 1
        print(f"try ({label}): no fast state within {a.catch:.0f} s, nothing run", flush=True)
        return False
    if p.returncode != 0:
        print(f"FAIL: bench exited {p.returncode}: {p.stderr.strip()}", file=sys.stderr)
        sys.exit(3)
    nb = json.loads(p.stdout)["nvme_bypass"]
    before, after = nb.get("core_to_core_ns") or (None, None)
    fast = before is not None and after is not None and max(before, after) <= a.fast
    useful = nb["cpu"]["useful_cpu_ns_per_io"]
    runs.append((fast, useful, nb["iops"], before, after, label))
    c2c = lambda x: "-" if x is None else f"{x:.0f}"
    print(f"run {len(runs)} ({label}): {nb['iops'] / 1e6:6.2f}M IOPS, {useful:5.1f} ns useful CPU per I/O, "
          f"core-to-core {c2c(before)} ns before / {c2c(after)} ns after: "
          f"{'fast' if fast else 'slow'} state (EMULATED: simulated controller)", flush=True)
    return fast


pairs = 0
for i in range(a.tries):
    if run("default", []):
        # Streaming entry stores (the default) suit a device, which reads
        # entries from memory; with both cores sharing caches, ordinary
        # stores may do better. The driver at its best is the better one.
        run("--cached-sq-stores", ["--cached-sq-stores"])
        pairs += 1
        if pairs >= a.fast_runs:
            break

if not runs:
    print(f"no run in {a.tries} tries ({waited_out} waited {a.catch:.0f} s each for a fast state that did not come): "
          f"nothing to judge against the {a.goal:.0f} ns goal")
    sys.exit(2)
fast = [r for r in runs if r[0]]
best = min(runs, key=lambda r: r[1])
print(f"best of all {len(runs)} runs: {best[1]:.1f} ns useful per I/O ({best[2] / 1e6:.2f}M IOPS, {best[5]})")
slow = [r[1] for r in runs if not r[0] and r[5] == "default"]
if slow:
    # Context, not a verdict: the goal is stated for the fast state.
    print(f"slow-state runs: {len(slow)}, useful CPU per I/O median {statistics.median(slow):.1f} ns, "
          f"range {min(slow):.1f}-{max(slow):.1f} ns, {sum(u <= a.goal for u in slow)} at or under {a.goal:.0f} ns "
          f"(not judged: the goal is for the fast state)")
if not fast:
    print(f"no run started and ended in the fast state (core-to-core <= {a.fast:.0f} ns) in {len(runs)} runs"
          f"{f' and {waited_out} tries that waited it out' if waited_out else ''}: "
          f"nothing to judge against the {a.goal:.0f} ns goal; try again later or with --tries")
    sys.exit(2)
modes = {}
for r in fast:
    modes.setdefault(r[5], []).append(r[1])
for label, us in modes.items():
    print(f"fast state, {label}: {len(us)} runs, useful CPU per I/O median {statistics.median(us):.1f} ns, "
          f"range {min(us):.1f}-{max(us):.1f} ns, {sum(u <= a.goal for u in us)} at or under {a.goal:.0f} ns")
label, us = min(modes.items(), key=lambda m: statistics.median(m[1]))
m = statistics.median(us)
verdict = "met" if m <= a.goal else "NOT met"
few = f" (only {pairs} of the {a.fast_runs} fast-state pairs asked for)" if pairs < a.fast_runs else ""
print(f"fast state, the driver at its best ({label}): median {m:.1f} ns useful CPU per I/O over {len(us)} runs: "
      f"goal of {a.goal:.0f} ns {verdict}{few}")
sys.exit(0 if m <= a.goal else 1)
