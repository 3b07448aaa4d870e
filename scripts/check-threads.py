#!/usr/bin/env python3
"""Check tests/testbed/threads.sh's reports: two threads, pinned to CPUs 0
and 1, each with its own queue (different queue pair or ring), the
aggregate I/O count is the threads' sum, its IOPS that count over the longest
thread's time, and /proc/stat covers at least that time.
Usage: check-threads.py DIR"""
import json, os, sys

d = sys.argv[1]
def fail(m):
    print(f"FAIL: {m}", file=sys.stderr)
    sys.exit(1)
for path in ("block", "passthru", "vfio"):
    j = json.load(open(os.path.join(d, path + ".json")))
    jobs = j["jobs"]
    if len(jobs) != 2:
        fail(f"{path}: {len(jobs)} jobs, expected 2")
    cpus = sorted(x["nvme_bypass"]["cpu"] for x in jobs)
    if cpus != [0, 1]:
        fail(f"{path}: threads on CPUs {cpus}, expected [0, 1]")
    queues = [x["nvme_bypass"]["queue"] for x in jobs]
    if len(set(queues)) != 2 or not all(queues):
        fail(f"{path}: threads share or lack a queue: {queues}")
    agg = j["nvme_bypass"]
    ios = sum(x["read"]["total_ios"] + x["write"]["total_ios"] for x in jobs)
    agg_ios = agg["read"]["ios"] + agg["write"]["ios"]
    if ios != agg_ios:
        fail(f"{path}: threads did {ios} I/Os, aggregate says {agg_ios}")
    # The aggregate IOPS is all I/Os over the longest thread's measured time,
    # exactly (not the sum of the threads' IOPS: one thread can end well
    # after the other), and /proc/stat covers the union of the intervals.
    el = agg["elapsed_ns"]
    if abs(agg["iops"] * el / 1e9 - agg_ios) > 1e-6 * max(agg_ios, 1):
        fail(f"{path}: {agg['iops']:.0f} IOPS over {el} ns is not {agg_ios} I/Os")
    if max(x["job_runtime"] for x in jobs) != el // 1_000_000:
        fail(f"{path}: run time {el} ns is not the longest thread's ({[x['job_runtime'] for x in jobs]} ms)")
    if agg.get("system") and agg["system"]["interval_ns"] < el:
        fail(f"{path}: /proc/stat interval {agg['system']['interval_ns']} ns shorter than the longest thread's {el} ns")
    print(f"threads ok: {path}: " + "; ".join(f"CPU {x['nvme_bypass']['cpu']}: {x['nvme_bypass']['queue']}, {x['read']['iops']:.0f} IOPS" for x in jobs) + f"; aggregate {agg['iops']:.0f} IOPS")
