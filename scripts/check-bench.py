#!/usr/bin/env python3
"""Run `nvme-bypass bench` on the simulator and check what it prints:
the fio-shaped JSON (jobs[] with read/write blocks, iops, bw, clat_ns/lat_ns
percentiles, usr_cpu/sys_cpu) plus our CPU-per-I/O figures, and a mixed
verify run ending with 0 mismatches. Exits non-zero with the reason.

Beyond presence, the figures must agree with each other (check_json):
per-direction total_ios add up to the run's I/Os and to its latency count
N, latency percentiles ascend, useful CPU per I/O is raw less exactly the
empty-poll share, the thread ceiling (modelled) is 1 s over useful CPU per
I/O, and the system ceiling (modelled) is at or above the measured IOPS per
busy core.

Usage: check-bench.py BIN
       check-bench.py --self-test   (the checks against tests/fixtures/bench-sim.json,
                                     then each of a few corruptions of it, which must fail)"""
import copy, json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import invariants
from invariants import Bad


def check_json(j):
    """Every invariant of a bench JSON; raises Bad."""
    job = j["jobs"][0]
    for k in ("jobname", "read", "write", "usr_cpu", "sys_cpu", "job options"):
        if k not in job:
            raise Bad(f"jobs[0] lacks {k}")
    nb = j["nvme_bypass"]
    total = {"read": 0, "write": 0}
    for i, job in enumerate(j["jobs"]):
        for d in ("read", "write"):
            blk = job[d]
            total[d] += blk["total_ios"]
            if blk["clat_ns"]["N"] != blk["total_ios"]:
                raise Bad(f"jobs[{i}].{d}: N {blk['clat_ns']['N']} latencies but total_ios {blk['total_ios']}")
            invariants.percentiles_ascending(f"jobs[{i}].{d}.clat_ns", blk["clat_ns"])
        invariants.useful_is_raw_less_empty_share(f"jobs[{i}].cpu_accounting", job["nvme_bypass"]["cpu_accounting"])
        if "ceiling_iops_per_core" in job["nvme_bypass"]["cpu_accounting"]:
            raise Bad(f"jobs[{i}].cpu_accounting.ceiling_iops_per_core: a model, named thread_ceiling_iops_modelled")
    for d in ("read", "write"):
        if total[d] != nb[d]["ios"]:
            raise Bad(f"{d}: jobs' total_ios add up to {total[d]}, the run's {d}.ios is {nb[d]['ios']}")
    invariants.summary("nvme_bypass", nb)
    if not nb.get("simulated") or nb["emulated"]:
        raise Bad("simulator figures must be labelled simulated, not emulated")


def self_test():
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "bench-sim.json")
    good = json.load(open(fixture))
    check_json(good)

    def p50_above_p99(j):
        pct = j["nvme_bypass"]["lat_ns"]["percentile"]
        pct["50.000000"], pct["99.000000"] = pct["99.000000"] + 1, pct["50.000000"]

    def useful_off(j):
        j["nvme_bypass"]["cpu"]["useful_cpu_ns_per_io"] *= 0.9

    def one_more_io(j):
        j["jobs"][0]["read"]["total_ios"] += 1

    def ceiling_below_measured(j):
        nb = j["nvme_bypass"]
        nb["system_ceiling_iops_modelled"] = nb["system"]["iops_per_busy_core"] * 0.5

    def thread_ceiling_off(j):
        j["nvme_bypass"]["thread_ceiling_iops_modelled"] *= 1.2

    def unlabelled_model(j):
        c = j["nvme_bypass"]["cpu"]
        c["ceiling_iops_per_core"] = c.pop("thread_ceiling_iops_modelled")

    def labelled_emulated(j):
        j["nvme_bypass"]["emulated"] = True

    for corrupt in (p50_above_p99, useful_off, one_more_io, ceiling_below_measured, thread_ceiling_off, unlabelled_model, labelled_emulated):
        j = copy.deepcopy(good)
        corrupt(j)
        try:
            check_json(j)
        except Bad as e:
            print(f"self-test: {corrupt.__name__}: caught ({e})")
            continue
        print(f"FAIL: self-test: {corrupt.__name__} was not caught", file=sys.stderr)
        sys.exit(1)
    print(f"check-bench.py self-test ok: {fixture} passes, 7 corruptions of it fail")


if sys.argv[1:] == ["--self-test"]:
    self_test()
    sys.exit(0)
if len(sys.argv) != 2:
    print(__doc__, file=sys.stderr)
    sys.exit(2)
BIN = sys.argv[1]

def run(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr

def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)

rc, out, err = run("bench", "--backend", "sim", "--rw", "randread", "--bs", "4k", "--iodepth", "64",
                   "--runtime", "2", "--output-format", "json", "--sim-data", "null")
if rc != 0:
    fail(f"bench exited {rc}: {err}")
j = json.loads(out)
try:
    check_json(j)
except Bad as e:
    fail(str(e))
job = j["jobs"][0]
rd = job["read"]
for k in ("iops", "bw", "bw_bytes", "io_bytes", "runtime", "total_ios", "clat_ns", "lat_ns"):
    if k not in rd:
        fail(f"read block lacks {k}")
if rd["iops"] <= 0:
    fail("no read IOPS")
pct = rd["clat_ns"]["percentile"]
for p in ("50.000000", "90.000000", "99.000000", "99.900000", "99.990000"):
    if p not in pct:
        fail(f"no {p} percentile")
nb = j["nvme_bypass"]
cpu = nb["cpu"]
for k in ("cpu_ns_per_io", "useful_cpu_ns_per_io", "empty_polls", "empty_poll_ns", "user_ns_per_io", "sys_ns_per_io"):
    if k not in cpu:
        fail(f"cpu accounting lacks {k}")
# One thread: useful CPU is raw times the share of the loop's time not in
# empty polls, exactly (to rounding); the ceiling is 1 s over it.
raw, useful, empty_pct = cpu["cpu_ns_per_io"], cpu["useful_cpu_ns_per_io"], cpu["empty_poll_pct"]
if raw <= 0 or abs(useful - raw * (1 - empty_pct / 100)) > 1e-9 * raw:
    fail(f"useful CPU per I/O {useful} is not raw {raw} x (1 - {empty_pct}% empty polls)")
if useful > 0 and abs(cpu["thread_ceiling_iops_modelled"] - 1e9 / useful) > 1e-9 * cpu["thread_ceiling_iops_modelled"]:
    fail(f"thread ceiling (modelled) {cpu['thread_ceiling_iops_modelled']} is not 1 s / {useful} ns")
# IOPS is the successful I/Os over the measured time; failed ones apart.
if abs(nb["iops"] * nb["elapsed_ns"] / 1e9 - rd["total_ios"]) > 1e-6 * rd["total_ios"]:
    fail(f"{nb['iops']} IOPS over {nb['elapsed_ns']} ns is not {rd['total_ios']} I/Os")
if nb["read"].get("errors") != 0 or nb["errors"] != 0:
    fail(f"errors on a fault-free run: {nb['read'].get('errors')} / {nb['errors']}")
for k in ("clock", "clocksource", "irq_time_accounting", "irq_time_accounting_how", "interrupt_driven"):
    if k not in nb:
        fail(f"nvme_bypass lacks {k}")
if not nb.get("simulated") or nb["emulated"]:
    fail("simulator figures must be labelled simulated, not emulated")
# On two CPUs the simulator runs on a thread of its own, and bench says
# whether the two CPUs are separate cores (core share about 1) or one core
# shared (about 0.5), with the driver CPU's own speed.
import os
if (os.cpu_count() or 1) >= 2:
    cs = nb.get("core_share")
    if not cs or not all(isinstance(cs[k], (int, float)) and cs[k] == cs[k] for k in ("share", "solo_muls_per_ns")):
        fail(f"core_share missing or not a number on a two-CPU machine: {cs}")
print(f"json ok: {rd['iops']:.0f} IOPS, {cpu['cpu_ns_per_io']:.1f} ns raw / "
      f"{cpu['useful_cpu_ns_per_io']:.1f} ns useful CPU per I/O, p99 {pct['99.000000']} ns, "
      f"core-to-core {nb.get('core_to_core_ns')}, core share {nb.get('core_share')}")

def verify(what, *args):
    """A verified randrw run on the RAM-backed simulator: 0 mismatches."""
    rc, out, err = run("bench", "--backend", "sim", "--rw", "randrw", "--verify", "--iodepth", "16",
                       "--output-format", "json", *args)
    if rc != 0:
        fail(f"verify run ({what}) exited {rc}: {err}")
    nb = json.loads(out)["nvme_bypass"]
    if nb["mismatches"] != 0 or nb["verified_blocks"] == 0:
        fail(f"verify ({what}): {nb['verified_blocks']} checked, {nb['mismatches']} mismatches")
    print(f"verify ok ({what}): {nb['verified_blocks']} blocks checked, 0 mismatches")


verify("randrw 75/25", "--rwmixread", "75", "--runtime", "2", "--sim-size", "64M")
# The driver's other way of writing submission entries (cached stores, the
# streaming ones being the default) must deliver the same data.
verify("--cached-sq-stores", "--cached-sq-stores", "--runtime", "1", "--sim-size", "16M")
