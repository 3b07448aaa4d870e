#!/usr/bin/env python3
"""Check count-report's count.json: every row that ran has its instructions
per I/O (user, kernel, total, empty polls), a layer breakdown that sums to
the total, events per I/O, and the measured/emulated label. With two files
(two boots of the same build), print how far each path's instructions per
I/O (empty polls excluded) moved between them against the 2% goal, and,
beside it, how far with the waits for an interrupt excluded as well (the
part of an interrupt-driven row that follows the device's pace; not the
goal's rule, which is the first figure).

  check-count.py A/count.json [B/count.json]

Exit 1 when a file lacks a figure or its layers do not add up (a broken
report); the goals (2% between boots, unmapped kernel functions under 5%)
are reported as met or not met, with the numbers, and do not fail the run."""
import json, sys

def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)

def load(path):
    c = json.load(open(path))
    if "emulated" not in c.get("measurement", "") or "measured" not in c.get("measurement", ""):
        fail(f"{path}: not labelled measured and emulated: {c.get('measurement')!r}")
    rows = {}
    for r in c["rows"]:
        if r.get("error") or not r.get("instructions_per_io"):
            continue
        k = r
        p = k.get("instructions_per_io") or fail(f"{path}: {r['label']}: no instructions_per_io")
        for f in ("user", "kernel", "total", "empty_polls", "waits"):
            if not isinstance(p.get(f), (int, float)):
                fail(f"{path}: {r['label']}: instructions_per_io.{f} missing")
        if abs(p["user"] + p["kernel"] - p["total"]) > 1e-6 * max(1, abs(p["total"])) + 0.01:
            fail(f"{path}: {r['label']}: user {p['user']} + kernel {p['kernel']} != total {p['total']}")
        layers = k.get("layers") or fail(f"{path}: {r['label']}: no layers")
        s = sum(layers.values())
        if abs(s - p["total"]) > 0.001 * max(1, abs(p["total"])) + 0.01:
            fail(f"{path}: {r['label']}: layers sum to {s:.1f}, total is {p['total']:.1f}")
        if not isinstance(k.get("unmapped_share_of_kernel"), (int, float)):
            fail(f"{path}: {r['label']}: unmapped_share_of_kernel missing")
        for f in ("processes_started", "processes_exited"):
            if not isinstance(k.get(f), int):
                fail(f"{path}: {r['label']}: {f} missing")
        ev = k.get("events_per_io") or fail(f"{path}: {r['label']}: no events_per_io")
        for f in ("syscalls", "interrupts", "doorbell_writes", "context_switches"):
            if f not in ev:
                fail(f"{path}: {r['label']}: events_per_io.{f} missing")
        rows[r["label"]] = r
    if not rows:
        fail(f"{path}: no row has counts")
    return c, rows

a, ra = load(sys.argv[1])
print(f"count ok: {len(ra)} rows with counts ({', '.join(ra)})")
for label, r in ra.items():
    k = r
    kern = k["instructions_per_io"]["kernel"]
    share = k["unmapped_share_of_kernel"]
    verdict = "met" if share < 0.05 else "NOT met"
    print(f"  {label:28} total {k['instructions_per_io']['total']:9.0f}  kernel {kern:9.0f}  unmapped kernel {100*share:5.1f}% (goal < 5%: {verdict})")
if len(sys.argv) > 2:
    b, rb = load(sys.argv[2])
    worst = worst_w = 0.0
    print("two boots, instructions per I/O with empty polls excluded (goal: within 2%), and beside it with waits for an interrupt excluded too:")
    for label in ra:
        if label not in rb:
            print(f"  {label:28} only in the first boot")
            continue
        x = ra[label]["instructions_per_io"]; y = rb[label]["instructions_per_io"]
        vx, vy = x["total"] - x["empty_polls"], y["total"] - y["empty_polls"]
        d = abs(vx - vy) / ((vx + vy) / 2) if vx + vy > 0 else 0.0
        worst = max(worst, d)
        wx, wy = vx - x["waits"], vy - y["waits"]
        dw = abs(wx - wy) / ((wx + wy) / 2) if wx + wy > 0 else 0.0
        worst_w = max(worst_w, dw)
        waits = f"   waits excluded {wx:9.0f} {wy:9.0f}  {100*dw:5.1f}%" if x["waits"] or y["waits"] else ""
        procs = sum(r[f] for r in (ra[label], rb[label]) for f in ("processes_started", "processes_exited"))
        why = f" ({procs} process starts/exits in its windows)" if procs else ""
        print(f"  {label:28} {vx:9.0f} {vy:9.0f}  {100*d:5.1f}%  {'within 2%' if d <= 0.02 else 'NOT within 2%'}{why}{waits}")
    print(f"two boots: largest difference {100*worst:.1f}%: goal of 2% {'met' if worst <= 0.02 else 'NOT met'}")
    print(f"two boots, waits for an interrupt excluded too (not the goal's rule): largest difference {100*worst_w:.1f}%")
