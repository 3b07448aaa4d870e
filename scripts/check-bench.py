#!/usr/bin/env python3
"""Run `nvme-bypass bench` on the simulator and check what it prints:
the fio-shaped JSON (jobs[] with read/write blocks, iops, bw, clat_ns/lat_ns
percentiles, usr_cpu/sys_cpu) plus our CPU-per-I/O figures, and a mixed
verify run ending with 0 mismatches. Exits non-zero with the reason."""
import json, subprocess, sys

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
job = j["jobs"][0]
for k in ("jobname", "read", "write", "usr_cpu", "sys_cpu", "job options"):
    if k not in job:
        fail(f"jobs[0] lacks {k}")
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
if useful > 0 and abs(cpu["ceiling_iops_per_core"] - 1e9 / useful) > 1e-9 * cpu["ceiling_iops_per_core"]:
    fail(f"ceiling {cpu['ceiling_iops_per_core']} is not 1 s / {useful} ns")
# IOPS is the successful I/Os over the measured time; failed ones apart.
if abs(nb["iops"] * nb["elapsed_ns"] / 1e9 - rd["total_ios"]) > 1e-6 * rd["total_ios"]:
    fail(f"{nb['iops']} IOPS over {nb['elapsed_ns']} ns is not {rd['total_ios']} I/Os")
if rd.get("errors") != 0 or nb["errors"] != 0:
    fail(f"errors on a fault-free run: {rd.get('errors')} / {nb['errors']}")
for k in ("clock", "clocksource", "irq_time_accounting", "irq_time_accounting_how", "interrupt_driven"):
    if k not in nb:
        fail(f"nvme_bypass lacks {k}")
if not nb["emulated"]:
    fail("simulator figures must be labelled emulated")
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
