#!/usr/bin/env python3
"""Compare the key sets of fio's JSON and nvme-bypass fio's for the same job.

    scripts/fio-keys.py FIO.json OURS.json [FIO.json OURS.json ...]

Every key path (objects as a.b, array elements as a[]) of fio's output must
be in ours and every one of ours in fio's, apart from our own section
(`nvme_bypass`, top level and per job) and `jobs[].job_start` (printed by
fio from 3.35 on; older fio lacks it). Prints each pair's verdict and the
differing paths; exits 1 when any pair differs, 2 on unreadable input.
"""
import json
import sys


def paths(x, p=""):
    out = set()
    if isinstance(x, dict):
        for k, v in x.items():
            q = f"{p}.{k}" if p else k
            out.add(q)
            out |= paths(v, q)
    elif isinstance(x, list):
        for v in x:
            out |= paths(v, p + "[]")
    return out


def load(path):
    try:
        text = open(path).read()
        return json.loads(text[text.index("{"):])
    except (OSError, ValueError) as e:
        print(f"fio-keys: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def ours_only(p):
    return p.startswith("nvme_bypass") or p.startswith("jobs[].nvme_bypass") or p == "jobs[].job_start"


args = sys.argv[1:]
if not args or len(args) % 2:
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
bad = 0
for fio_path, ours_path in zip(args[::2], args[1::2]):
    f = paths(load(fio_path))
    o = {p for p in paths(load(ours_path)) if not ours_only(p)}
    f = {p for p in f if p != "jobs[].job_start"}
    missing, extra = sorted(f - o), sorted(o - f)
    if missing or extra:
        bad += 1
        print(f"fio-keys: {ours_path}: NOT fio's key set ({fio_path})")
        for p in missing:
            print(f"  fio has, we lack: {p}")
        for p in extra:
            print(f"  we have, fio lacks: {p}")
    else:
        print(f"fio-keys: {ours_path}: fio's key set ({len(f)} paths, apart from nvme_bypass and job_start)")
sys.exit(1 if bad else 0)
