#!/usr/bin/env python3
"""Check a compare.json: every path ran, every figure of the table is in the
JSON, the controller ended on the driver it started on, and emulated runs
say so. With --count, also the instruction counts of the same rows
(count-report's count.json, checked by check-count.py): every path has
instructions_per_io (user, kernel, total, empty_polls), layers that add up
to the total, and events per I/O.
Usage: check-compare.py compare.json [--require block,libaio,passthru,vfio] [--count count.json]"""
import json, os, subprocess, sys

args = sys.argv[1:]
path = args.pop(0)
require = ["block/io_uring", "block/libaio", "passthru", "vfio"]
count = None
while args:
    a = args.pop(0)
    if a == "--require":
        require = args.pop(0).split(",")
    elif a == "--count":
        count = args.pop(0)
    else:
        print(f"check-compare.py: unknown argument {a}", file=sys.stderr)
        sys.exit(2)
c = json.load(open(path))

def fail(msg):
    print(f"FAIL: {path}: {msg}", file=sys.stderr)
    sys.exit(1)

rows = {r["variant"]["label"]: r for r in c["rows"]}
for label in require:
    if label not in rows:
        fail(f"no row {label}; rows: {list(rows)}")
    r = rows[label]
    if r.get("error"):
        fail(f"row {label} failed: {r['error']}")
    s = r["summary"]
    if not s or s["iops"] <= 0:
        fail(f"row {label} has no IOPS")
    # every column of the table
    for k in ("iops", "bw_bytes"):
        if k not in s:
            fail(f"row {label} lacks {k}")
    for p in ("50.000000", "99.000000", "99.900000"):
        if p not in s["lat_ns"]["percentile"]:
            fail(f"row {label} lacks latency percentile {p}")
    y = s.get("system")
    if not y:
        fail(f"row {label} lacks system-wide CPU accounting")
    for k in ("user_ns_per_io", "kernel_ns_per_io", "cores_busy", "iops_per_busy_core"):
        if k not in y:
            fail(f"row {label} lacks system.{k}")
    for k in ("iops_per_busy_core", "useful_ceiling_iops", "ratio_vs_baseline"):
        if r.get(k) is None:
            fail(f"row {label} lacks {k}")
    if c.get("emulated") and not s.get("emulated"):
        fail(f"row {label} is not labelled emulated")
if c["driver_after"] != c["driver_before"]:
    fail(f"controller ended on {c['driver_after']}, started on {c['driver_before']}")
if not c["headline"]:
    fail("no headline")
print(f"compare ok: {len(rows)} rows ({', '.join(rows)}), controller back on {c['driver_after']}")
for h in c["headline"]:
    print("  " + h)
if count:
    rc = subprocess.call([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-count.py"), count])
    if rc != 0:
        sys.exit(rc)
    counted = {r["label"] for r in json.load(open(count))["rows"] if r.get("instructions_per_io")}
    for label in require:
        if label not in counted:
            fail(f"{count}: no instruction counts for {label}")
