#!/usr/bin/env python3
"""The driver's per-core ceiling on the threaded simulator, against issue 8's
goal: null data, 4 KiB random reads, QD 64, one thread, latency recording
on, at most 25 ns of useful driver CPU per I/O.

Two things about the pair of CPUs the driver and the simulated controller
run on move such a run most, and on a shared or virtual machine both change
under us. `bench` measures both around each run:

* core-to-core latency, the cache-line transfer time between the two CPUs
  (printed before and after the run);
* core share, the driver CPU's multiply speed while the controller's CPU
  multiplies too, over its speed while that CPU only pauses (after the
  run): about 1.0 on separate cores, about 0.5 when the two are hardware
  threads of one core.

On the machine in docs/results.md the rare "fast" core-to-core state
(11-30 ns) is exactly the shared-core state: both threads then run on one
core, and a per-core figure taken there is for a core shared with the
controller. So this script judges, by default (--state separate-cores),
runs taken on separate cores, whatever their core-to-core latency; with
--state fast-c2c it judges runs that started and ended at or under --fast
ns core-to-core (the issue's first wording), and with --catch SECONDS each
try waits, inside bench (--wait-fast-c2c), for that state and starts at
once. Each judged try runs the default store mode and then
--cached-sq-stores, until it has --pairs such pairs; the verdict is the
better mode's median against the goal (one lucky run does not decide it).
Every run is printed with its state, so nothing is hidden.

    scripts/sim-ceiling.py [BIN] [--state separate-cores|fast-c2c] [--tries N] [--catch S]

Exit status: 0 goal met in the judged state, 1 not met, 2 no run in that
state seen in N tries (nothing to judge), 3 the bench failed. Figures are
the driver against a simulated controller (labelled EMULATED by bench),
not a device."""
import argparse, json, statistics, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("bin", nargs="?", default="target/release/nvme-bypass")
ap.add_argument("--tries", type=int, default=10, help="runs at most (default 10)")
ap.add_argument("--runtime", default="2", help="seconds per run (default 2)")
ap.add_argument("--goal", type=float, default=25.0, help="useful ns per I/O to meet (default 25)")
ap.add_argument("--state", choices=["separate-cores", "fast-c2c"], default="separate-cores",
                help="which runs to judge (default separate-cores: core share at or over --shared)")
ap.add_argument("--fast", type=float, default=30.0,
                help="core-to-core ns at or under which a state counts as fast (default 30)")
ap.add_argument("--shared", type=float, default=0.85,
                help="core share under which the two CPUs count as one shared core (default 0.85)")
ap.add_argument("--pairs", "--fast-runs", dest="pairs", type=int, default=5,
                help="judged pairs (default and --cached-sq-stores) to collect before judging (default 5)")
ap.add_argument("--catch", type=float, metavar="SECONDS",
                help="each try waits up to SECONDS for a fast state and starts the run in it (bench --wait-fast-c2c)")
a = ap.parse_args()
if a.catch and a.state != "fast-c2c":
    ap.error("--catch waits for the fast core-to-core state; use it with --state fast-c2c")
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
    cs = nb.get("core_share") or {}
    share, solo = cs.get("share"), cs.get("solo_muls_per_ns")
    later = cs.get("core_to_core_after_ns")
    moved = later is not None and after is not None and (later <= a.fast) != (after <= a.fast)
    # A share measured while the placement moved describes neither state.
    separate = share is not None and share >= a.shared and not moved
    judged = fast if a.state == "fast-c2c" else separate
    useful = nb["cpu"]["useful_cpu_ns_per_io"]
    runs.append((judged, useful, nb["iops"], before, after, label))
    c2c = lambda x: "-" if x is None else f"{x:.0f}"
    where = "-" if share is None else f"{share:.2f} ({'separate cores' if share >= a.shared else 'one shared core'}), " \
        f"driver CPU alone {solo:.2f} multiply-adds/ns" + \
        (f", core-to-core {later:.0f} ns after it: the placement changed during the share measurement" if moved else "")
    print(f"run {len(runs)} ({label}): {nb['iops'] / 1e6:6.2f}M IOPS, {useful:5.1f} ns useful CPU per I/O, "
          f"core-to-core {c2c(before)} ns before / {c2c(after)} ns after ({'fast' if fast else 'slow'}), "
          f"core share {where}: {'judged' if judged else 'not judged'} (EMULATED: simulated controller)", flush=True)
    return judged


pairs = 0
for i in range(a.tries):
    if run("default", []):
        # Streaming entry stores (the default) suit a device, which reads
        # entries from memory; with both cores sharing caches, ordinary
        # stores may do better. The driver at its best is the better one.
        run("--cached-sq-stores", ["--cached-sq-stores"])
        pairs += 1
        if pairs >= a.pairs:
            break

if not runs:
    print(f"no run in {a.tries} tries ({waited_out} waited {a.catch:.0f} s each for a fast state that did not come): "
          f"nothing to judge against the {a.goal:.0f} ns goal")
    sys.exit(2)
state = "separate cores" if a.state == "separate-cores" else f"fast core-to-core state (<= {a.fast:.0f} ns)"
judged = [r for r in runs if r[0]]
best = min(runs, key=lambda r: r[1])
print(f"best of all {len(runs)} runs: {best[1]:.1f} ns useful per I/O ({best[2] / 1e6:.2f}M IOPS, {best[5]})")
others = [r[1] for r in runs if not r[0] and r[5] == "default"]
if others:
    # Context, not a verdict: the goal is judged in one state.
    print(f"runs not in the judged state (default stores): {len(others)}, useful CPU per I/O median "
          f"{statistics.median(others):.1f} ns, range {min(others):.1f}-{max(others):.1f} ns, "
          f"{sum(u <= a.goal for u in others)} at or under {a.goal:.0f} ns (not judged)")
if not judged:
    print(f"no run on {state} in {len(runs)} runs"
          f"{f' and {waited_out} tries that waited it out' if waited_out else ''}: "
          f"nothing to judge against the {a.goal:.0f} ns goal; try again later or with --tries")
    sys.exit(2)
modes = {}
for r in judged:
    modes.setdefault(r[5], []).append(r[1])
for label, us in modes.items():
    print(f"{state}, {label}: {len(us)} runs, useful CPU per I/O median {statistics.median(us):.1f} ns, "
          f"range {min(us):.1f}-{max(us):.1f} ns, {sum(u <= a.goal for u in us)} at or under {a.goal:.0f} ns")
label, us = min(modes.items(), key=lambda m: statistics.median(m[1]))
m = statistics.median(us)
verdict = "met" if m <= a.goal else "NOT met"
few = f" (only {pairs} of the {a.pairs} pairs asked for)" if pairs < a.pairs else ""
print(f"{state}, the driver at its best ({label}): median {m:.1f} ns useful CPU per I/O over {len(us)} runs: "
      f"goal of {a.goal:.0f} ns {verdict}{few}")
sys.exit(0 if m <= a.goal else 1)
