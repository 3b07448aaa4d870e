#!/usr/bin/env python3
"""Check tests/testbed/threads.sh's reports: two threads, pinned to CPUs 0
and 1, each with its own queue (different queue pair or ring), and the
aggregate IOPS and I/O counts add up to the threads' own.
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
    sum_iops = sum(x["read"]["iops"] + x["write"]["iops"] for x in jobs)
    if abs(sum_iops - agg["iops"]) > 0.05 * sum_iops:
        fail(f"{path}: threads' IOPS sum to {sum_iops:.0f}, aggregate says {agg['iops']:.0f}")
    print(f"threads ok: {path}: " + "; ".join(f"CPU {x['nvme_bypass']['cpu']}: {x['nvme_bypass']['queue']}, {x['read']['iops']:.0f} IOPS" for x in jobs) + f"; aggregate {agg['iops']:.0f} IOPS")
