#!/usr/bin/env python3
"""Summarise the counting plugin's windows (scripts/testbed/insn-count) of a
test-bed run of tests/testbed/count-smoke.sh, and compare two runs.

usage: scripts/testbed/insn-summary.py RESULTS [RESULTS2] [--top N] [--json OUT]

RESULTS is run.sh's results folder (insn.jsonl beside results/). Per window:
user and kernel instructions (all vCPUs) per I/O, the same after
subtracting the idle background (the idle windows' instructions per second
times the bench's measured seconds), entries into the kernel (syscalls,
interrupts, __schedule, from /proc/kallsyms), and MMIO writes to the
controller's doorbells (BAR0 + 0x1000 and up). With RESULTS2, how far the
second run's figures are from the first's, in percent.
"""
import argparse
import bisect
import json
import os
import subprocess
import sys


def load(results):
    out = {"windows": {}, "names": {}, "ios": {}, "elapsed": {}, "empty": {}, "polls": {}}
    res = os.path.join(results, "results")
    with open(os.path.join(results, "insn.jsonl")) as f:
        for line in f:
            w = json.loads(line)
            out["windows"][w["window"]] = w
    p = os.path.join(res, "count-windows.txt")
    if os.path.exists(p):
        for line in open(p):
            i, name, ios = line.split()
            out["names"][int(i)] = name
            out["ios"][int(i)] = int(ios)
    for i in out["windows"]:
        p = os.path.join(res, f"count-{i}.json")
        if os.path.exists(p):
            report = json.load(open(p))
            out["elapsed"][i] = elapsed_s(report)
            cpu = (report.get("nvme_bypass") or {}).get("cpu") or {}
            out["empty"][i] = cpu.get("empty_polls")
            out["polls"][i] = cpu.get("polls")
    bar = open(os.path.join(res, "bar0.txt")).read().split()
    out["bar0"] = (int(bar[0], 16), int(bar[1], 16))
    out["ksyms"] = kallsyms(os.path.join(res, "kallsyms.txt"))
    out["usyms"] = binsyms(os.path.join(results, "bin", "nvme-bypass"))
    return out


def elapsed_s(report):
    """The measured seconds of a bench JSON report (fio's layout: per job
    `elapsed` or `job_runtime` in ms)."""
    jobs = report.get("jobs") or []
    ms = [j.get("job_runtime") for j in jobs if j.get("job_runtime")]
    if ms:
        return max(ms) / 1000.0
    return None


def kallsyms(path):
    syms = []
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) >= 3 and parts[1] in "tTwW":
                a = int(parts[0], 16)
                if a:
                    syms.append((a, parts[2]))
    syms.sort()
    return syms


def binsyms(path):
    """(address, name) of the binary's functions, and the address of
    measure::marker::start (to relocate with the window's marker_fn)."""
    if not os.path.exists(path):
        return [], None
    try:
        txt = subprocess.run(["nm", "-C", "-S", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [], None
    syms, start = [], None
    for line in txt.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2] in "tTwW":
            a = int(parts[0], 16)
            syms.append((a, parts[3], int(parts[1], 16)))
            if parts[3].startswith("nvme_bypass::measure::marker::start"):
                start = a
    syms.sort()
    return syms, start


def name_of(syms, addrs, a):
    """The function holding `a`, or "[outside the binary]" (the vDSO,
    the dynamic loader's code)."""
    i = bisect.bisect_right(addrs, a) - 1
    if i >= 0 and a < syms[i][0] + max(syms[i][2], 1):
        return syms[i][1]
    return "[outside the binary]"


def summarise(run, top):
    ks = run["ksyms"]
    kaddr = [a for a, _ in ks]
    usyms, ustart = run["usyms"]
    uaddr = [a for a, _, _ in usyms]
    b0, b0_end = run["bar0"]
    idle = [w for i, w in run["windows"].items() if run["names"].get(i) == "idle"]
    bg_per_s = None
    if idle:
        # the quietest idle window (1 s): anything the guest happened to be
        # doing besides (a driver probing, console output) only adds
        def per_s(w, mode):
            return sum(v[mode] for v in w["vcpus"]) / (w["host_ns"] / 1e9 if w["host_ns"] else 1.0)
        bg_per_s = (min(per_s(w, "user") for w in idle), min(per_s(w, "kernel") for w in idle))
    rows = {}
    for i, w in sorted(run["windows"].items()):
        user = sum(v["user"] for v in w["vcpus"])
        kernel = sum(v["kernel"] for v in w["vcpus"])
        ios = run["ios"].get(i) or 0
        r = {"window": i, "name": run["names"].get(i, "?"), "ios": ios, "user": user, "kernel": kernel,
             "host_s": w["host_ns"] / 1e9, "elapsed_s": run["elapsed"].get(i), "empty_polls": run["empty"].get(i),
             "polls": run["polls"].get(i)}
        entries = {"syscall": 0, "interrupt": 0, "schedule": 0}
        kfun, ufun = {}, {}
        bias = (w["marker_fn"] - ustart) if ustart is not None and w["marker_fn"] else None
        for vaddr, insns, execs in w["tbs"]:
            if vaddr >= 0xffff800000000000:
                if not ks:
                    continue
                j = bisect.bisect_right(kaddr, vaddr) - 1
                if j < 0:
                    continue
                a, n = ks[j]
                kfun[n] = kfun.get(n, 0) + insns
                if a == vaddr:
                    if n == "entry_SYSCALL_64":
                        entries["syscall"] += execs
                    elif n.startswith("asm_sysvec_") or n == "asm_common_interrupt":
                        entries["interrupt"] += execs
                    elif n == "__schedule":
                        entries["schedule"] += execs
            elif bias is not None and usyms:
                n = name_of(usyms, uaddr, vaddr - bias)
                ufun[n] = ufun.get(n, 0) + insns
        db_w = sum(wr for p, wr, _ in w["io"] if b0 + 0x1000 <= p <= b0_end)
        bar_w = sum(wr for p, wr, _ in w["io"] if b0 <= p <= b0_end)
        bar_r = sum(rd for p, _, rd in w["io"] if b0 <= p <= b0_end)
        r.update(entries)
        r.update({"doorbell_writes": db_w, "bar0_writes": bar_w, "bar0_reads": bar_r})
        if ios:
            r["user_per_io"] = user / ios
            r["kernel_per_io"] = kernel / ios
            if bg_per_s and r["elapsed_s"]:
                r["bg_user"] = bg_per_s[0] * r["elapsed_s"]
                r["bg_kernel"] = bg_per_s[1] * r["elapsed_s"]
                r["user_per_io_net"] = (user - bg_per_s[0] * r["elapsed_s"]) / ios
                r["kernel_per_io_net"] = (kernel - bg_per_s[1] * r["elapsed_s"]) / ios
            if r["empty_polls"] is not None:
                r["empty_polls_per_io"] = r["empty_polls"] / ios
            for e in ("syscall", "interrupt", "schedule", "doorbell_writes"):
                r[e + "_per_io"] = r[e] / ios
        r["top_kernel"] = sorted(kfun.items(), key=lambda x: -x[1])[:top]
        r["top_user"] = sorted(ufun.items(), key=lambda x: -x[1])[:top]
        rows[i] = r
    return rows


def fmt(x, nd=1):
    return "-" if x is None else f"{x:,.{nd}f}"


def show(rows, label, ios_only=False):
    print(f"== {label}")
    print(f"{'win':>3} {'name':<15} {'ios':>6} {'user':>13} {'kernel':>13} {'user/io':>9} {'kern/io':>9} "
          f"{'net u/io':>9} {'net k/io':>9} {'sysc/io':>7} {'irq/io':>6} {'sched/io':>8} {'db/io':>6} {'empty/io':>8} {'secs':>6}")
    for r in rows.values():
        print(f"{r['window']:>3} {r['name']:<15} {r['ios']:>6} {r['user']:>13,} {r['kernel']:>13,} "
              f"{fmt(r.get('user_per_io')):>9} {fmt(r.get('kernel_per_io')):>9} {fmt(r.get('user_per_io_net')):>9} "
              f"{fmt(r.get('kernel_per_io_net')):>9} {fmt(r.get('syscall_per_io'), 2):>7} {fmt(r.get('interrupt_per_io'), 2):>6} "
              f"{fmt(r.get('schedule_per_io'), 2):>8} {fmt(r.get('doorbell_writes_per_io'), 2):>6} "
              f"{fmt(r.get('empty_polls_per_io'), 2):>8} {fmt(r.get('elapsed_s') or r['host_s'], 2):>6}")


def polled_fit(runs):
    """A run's instructions are its work per I/O plus a fixed cost per
    pass of its loop (a polled path spins; a kernel path enters the
    kernel once a pass), and how many passes it makes depends on the
    emulated device's speed. Across runs (same window, same I/O count)
    fit insns = a * ios + p * polls by least squares, for user and for
    kernel instructions (net of the idle background); a + p is then the instructions per I/O at one
    pass per I/O, which should not depend on the device's timing. With two
    runs the fit is exact; with three or more the spread says how well it
    holds."""
    ids = set(runs[0])
    for r in runs[1:]:
        ids &= set(r)
    for i, mode in [(i, m) for i in sorted(ids) for m in ("user", "kernel")]:
        # net of the idle background over the run's seconds, when known
        pts = [(r[i]["polls"], r[i][mode] - r[i].get("bg_" + mode, 0.0), r[i]["ios"]) for r in runs]
        if any(e is None or not n for e, _, n in pts) or len({e for e, _, _ in pts}) < 2:
            continue
        if len({n for _, _, n in pts}) != 1:
            continue
        n = pts[0][2]
        es = [e for e, _, _ in pts]
        us = [u for _, u, _ in pts]
        me, mu = sum(es) / len(es), sum(us) / len(us)
        p = sum((e - me) * (u - mu) for e, u in zip(es, us)) / sum((e - me) ** 2 for e in es)
        one_pass = [(u - p * (e - n)) / n for e, u in zip(es, us)]
        spread = 100.0 * (max(one_pass) - min(one_pass)) / abs(min(one_pass))
        print(f"== window {i} {runs[0][i]['name']} {mode}: {sum(one_pass) / len(one_pass) - p:,.1f}/io + {p:,.1f} per pass; "
              f"per I/O at one pass per I/O: {', '.join(f'{x:,.1f}' for x in one_pass)} (spread {spread:.2f}%"
              f"{', exact with two runs' if len(runs) == 2 else ''})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--top", type=int, default=8, help="functions to list per window")
    ap.add_argument("--json", help="write the summaries here")
    a = ap.parse_args()
    runs = [summarise(load(r), a.top) for r in a.results]
    for path, rows in zip(a.results, runs):
        show(rows, path)
        for r in rows.values():
            if r["ios"]:
                print(f"  window {r['window']} {r['name']}: top kernel " +
                      ", ".join(f"{n} {v / r['ios']:.0f}" for n, v in r["top_kernel"]) + " (insns/io)")
                print(f"  window {r['window']} {r['name']}: top user " +
                      ", ".join(f"{n[:60]} {v / r['ios']:.0f}" for n, v in r["top_user"]) + " (insns/io)")
    if len(runs) >= 2:
        polled_fit(runs)
        a0, b0 = runs[0], runs[1]
        print("== second run vs first (percent)")
        keys = ["user", "kernel", "user_per_io_net", "kernel_per_io_net", "syscall", "interrupt", "schedule", "doorbell_writes", "empty_polls"]
        print(f"{'win':>3} {'name':<15} " + " ".join(f"{k:>17}" for k in keys))
        for i in sorted(set(a0) & set(b0)):
            cells = []
            for k in keys:
                x, y = a0[i].get(k), b0[i].get(k)
                cells.append("-" if x in (None, 0) or y is None else f"{100.0 * (y - x) / x:+.2f}")
            print(f"{i:>3} {a0[i]['name']:<15} " + " ".join(f"{c:>17}" for c in cells))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{str(k): v for k, v in r.items()} for r in runs], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
