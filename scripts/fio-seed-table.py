#!/usr/bin/env python3
"""IOPS of the seed's three fio jobs (randrw 75/25, randread, randwrite;
libaio-style, direct, iodepth 64) written as one job file, run by fio and
by `nvme-bypass fio` in one test-bed boot (tests/testbed/fio-seed.sh): on
the block path (ioengine=libaio, /dev/nvme0n1) and on passthru
(io_uring_cmd, /dev/ng0n1), fio and ours alternately in three rounds, and
on our vfio driver (ours only: no fio engine drives it, so it is set
beside fio's block figure for the same job and device).

Per path and job: each tool's IOPS (read + write iops of its JSON) as the
median and [min-max] of its rounds, and ours over fio's median. The goal,
set before any run: ours within 10% of fio's median either way (median
ratio in [0.90, 1.10]). The spread of each tool's own rounds is printed
beside it.

The boot's device limit (run.sh --iops-limit, read from the boot's
run.json) is printed: with one, the device sets the pace, as a real SSD
does; without, the emulated CPU does, and the tool that executes less per
I/O completes more (a figure of the tools' cost, not of the job).

Figures are measured in the emulated test bed (QEMU TCG): compare within
one boot only. Usage: fio-seed-table.py DIR (RESULTS/results/fio-seed).
Exit 0 when every file was there (goals met or not), 1 when some were
missing, 2 on bad usage."""
import glob, json, os, statistics, sys

if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
    print("usage: fio-seed-table.py DIR, DIR being the results/fio-seed directory of a boot of tests/testbed/fio-seed.sh", file=sys.stderr)
    sys.exit(2)
d = sys.argv[1]
JOBS = ("randrw", "randread", "randwrite")


def runs(path, tool):
    """{job: [IOPS per round]} of one path and tool."""
    out = {j: [] for j in JOBS}
    files = sorted(glob.glob(os.path.join(d, f"seed.{path}.{tool}.*.json")))
    for f in files:
        try:
            doc = json.load(open(f))
        except (OSError, ValueError) as e:
            print(f"fio-seed-table: {f}: {e}", file=sys.stderr)
            continue
        for j in doc.get("jobs", []):
            if j.get("jobname") in out:
                out[j["jobname"]].append(j["read"]["iops"] + j["write"]["iops"])
    return out, len(files)


def fmt(v):
    if not v:
        return "-"
    m = statistics.median(v)
    return f"{m/1000:.1f}k [{min(v)/1000:.1f}k-{max(v)/1000:.1f}k]"


def spread(v):
    return (max(v) - min(v)) / statistics.median(v) if v and statistics.median(v) > 0 else 0.0


def device_limit():
    """The boot's run.sh --iops-limit, or None."""
    try:
        return json.load(open(os.path.join(d, "..", "..", "run.json"))).get("iops_limit")
    except (OSError, ValueError):
        return None


missing = False
limit = device_limit()
pace = f"device limited to {limit} reads and {limit} writes per second: the device sets the pace" if limit else "no device limit: the emulated CPU sets the pace"
print(f"seed jobs as one job file, IOPS (measured, emulated; {pace}), median [min-max] of each tool's rounds:")
print(f"  {'path':9} {'job':10} {'fio (vfio: fio block)':24} {'nvme-bypass fio':24} {'ours/fio':>8}  goal (within 10%)")
met, judged = 0, 0
fio_block = None
for path in ("block", "passthru", "vfio"):
    fio, nf = runs(path, "fio")
    if path == "block":
        fio_block = fio
    if path == "vfio":
        # No fio engine drives our driver: fio's block run of the same job
        # on the same device stands beside it.
        fio, nf = fio_block, 1
    ours, no = runs(path, "ours")
    if no == 0 or (path != "vfio" and nf == 0):
        print(f"  {path:9} missing runs (fio {nf}, ours {no})")
        missing = True
        continue
    for job in JOBS:
        f, o = fio[job], ours[job]
        if not f or not o:
            print(f"  {path:9} {job:10} {fmt(f):24} {fmt(o):24} {'-':>8}  missing")
            missing = True
            continue
        r = statistics.median(o) / statistics.median(f)
        ok = 0.90 <= r <= 1.10
        judged += 1
        met += ok
        note = f" (own rounds spread: fio {100*spread(f):.0f}%, ours {100*spread(o):.0f}%)"
        print(f"  {path:9} {job:10} {fmt(f):24} {fmt(o):24} {r:8.2f}  {'met' if ok else 'NOT met'}{note}")
print(f"seed jobs: {met} of {judged} pairs within 10% of fio's IOPS (block, passthru; vfio against fio's block)")
sys.exit(1 if missing else 0)
