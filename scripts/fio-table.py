#!/usr/bin/env python3
"""Side-by-side table of nvme-bypass and fio from tests/testbed/fio-compare.sh's
outputs, both tools run alike (the settings that were matched are printed
with the table): IOPS, CPU per I/O and system calls per I/O, each counted
the same way for both. Marks each pair against the goal (ours: IOPS within
10% of fio's either way, CPU per I/O no higher) and, where a pair misses
it, says where the two differ.

* IOPS and CPU per I/O come from each tool's own fio-shaped JSON, read by
  the same code: I/Os (read + write total_ios) over jobs[].job_runtime,
  and the I/O thread's user + system time (getrusage RUSAGE_THREAD, both
  tools), jobs[].usr_cpu + sys_cpu times job_runtime, over I/Os. Both
  cover the measured interval only: after the same ramp_time, start-up and
  the drain excluded. With two timed runs per tool (fio, ours, ours, fio),
  the figure is the pooled one: all I/Os over all runtime, all CPU over
  all I/Os; each run's figure is printed beside it.
* System calls per I/O: from the separate traced runs, the I/O thread's
  calls (tracefs hist on raw_syscalls:sys_enter, per thread) over the
  commands completed on the controller's I/O queues while it ran
  (nvme:nvme_complete_rq); start-up and ramp included for both alike.

Figures are measured in the emulated test bed (QEMU TCG): compare within
one boot only. Usage: fio-table.py DIR [--markdown]. Exit status 0 when
every pair's files were there (goals met or not), 1 when some were missing,
2 on bad usage."""
import json, os, re, sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
md = "--markdown" in sys.argv
if len(args) != 1 or not os.path.isdir(args[0]):
    print("usage: fio-table.py DIR [--markdown], DIR being a results/fio-compare directory of tests/testbed/fio-compare.sh", file=sys.stderr)
    sys.exit(2)
d = args[0]


def timed(path):
    """(I/Os, runtime s, thread CPU ns) of one fio-shaped JSON report."""
    j = json.load(open(path))["jobs"][0]
    ios = j["read"]["total_ios"] + j["write"]["total_ios"]
    rt = j["job_runtime"] / 1000.0
    cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * rt * 1e9
    return ios, rt, cpu


SYS_LINE = re.compile(r"common_pid:\s*(.*?)\s*\[\s*(\d+)\],\s*id:\s*(\S+)\s*\[\s*\d+\]\s*\}\s*hitcount:\s*(\d+)")
IO_CALLS = {"io_uring_enter", "io_submit", "io_getevents", "io_pgetevents"}
NVME_LINE = re.compile(r"qid:\s*(\d+)\s*\}\s*hitcount:\s*(\d+)")


def counted(prefix, comm):
    """(calls per I/O, {call: per I/O}, tid, completions) of the traced run:
    the I/O thread (named `comm`, a prefix) and the I/O queues' completions."""
    per_tid = {}
    for line in open(prefix + ".syscalls.hist"):
        m = SYS_LINE.search(line)
        if m and m.group(1).startswith(comm):
            calls = per_tid.setdefault(int(m.group(2)), {})
            name = m.group(3).removeprefix("sys_")
            calls[name] = calls.get(name, 0) + int(m.group(4))
    done = sum(int(m.group(2)) for m in map(NVME_LINE.search, open(prefix + ".nvme.hist")) if m and m.group(1) != "0")
    if not per_tid or done == 0:
        raise ValueError(f"{prefix}: no {comm} thread or no completions in the traced run")
    # The I/O thread: the one that made the most I/O calls (fio's parent
    # process, also named fio, makes more calls of other kinds).
    tid, calls = max(per_tid.items(), key=lambda kv: sum(v for k, v in kv[1].items() if k in IO_CALLS))
    return sum(calls.values()) / done, {k: v / done for k, v in calls.items()}, tid, done


def tool(name, t, comm):
    runs = []
    for r in (1, 2):
        p = os.path.join(d, f"{name}.{t}.{r}.json")
        if os.path.exists(p):
            runs.append(timed(p))
    if not runs:
        raise OSError(f"no {name}.{t}.1.json")
    ios = sum(r[0] for r in runs)
    iops = ios / sum(r[1] for r in runs)
    cpu = sum(r[2] for r in runs) / ios
    each = [(r[0] / r[1], r[2] / r[0]) for r in runs]
    sc, calls, tid, done = counted(os.path.join(d, f"{name}.{t}"), comm)
    return dict(iops=iops, cpu=cpu, each=each, sc=sc, calls=calls, tid=tid, done=done)


def settings():
    s = {}
    try:
        for line in open(os.path.join(d, "settings.txt")):
            k, _, v = line.rstrip("\n").partition("=")
            s[k] = v
    except OSError:
        pass
    return s


def why(n, f, o):
    """Where a pair that misses the goal differs, from what was counted."""
    notes = []
    for label, x in (("fio", f), ("ours", o)):
        iops = [i for i, _ in x["each"]]
        if len(iops) > 1 and max(iops) / min(iops) - 1 > 0.1:
            notes.append(f"{label}: its own timed runs differ by {100 * (max(iops) / min(iops) - 1):.0f}% in IOPS "
                         "(the machine's speed moved more than the 10% band)")
    if o["cpu"] < 0.9 * f["cpu"] and o["iops"] > f["iops"]:
        busy = f["iops"] * f["cpu"] / 1e9
        notes.append(f"ours spends {100 * (1 - o['cpu'] / f['cpu']):.0f}% less CPU per I/O than fio at {o['sc']:.2f} vs {f['sc']:.2f} "
                     f"system calls per I/O; in the emulated guest the I/O thread's own CPU is a large share of each I/O's time "
                     f"(fio's thread was busy {100 * busy:.0f}% of its run), so less CPU per I/O shows as more IOPS")
    if "libaio" in n and f["calls"].get("io_getevents", 0) - o["calls"].get("io_getevents", 0) >= 0.05:
        notes.append("fio's libaio reaps with an io_getevents call every time it looks for completions "
                     "(its userspace_reap works only with iodepth_batch_complete_min=0, which has fio spin instead of sleep); "
                     "ours reads the completion ring in user space and calls io_getevents only to sleep")
    diff = sorted(set(f["calls"]) | set(o["calls"]), key=lambda k: -abs(f["calls"].get(k, 0) - o["calls"].get(k, 0)))
    big = [k for k in diff if abs(f["calls"].get(k, 0) - o["calls"].get(k, 0)) >= 0.05][:3]
    if big:
        notes.append("calls per I/O that differ: " + ", ".join(f"{k} fio {f['calls'].get(k, 0):.2f} / ours {o['calls'].get(k, 0):.2f}" for k in big))
    return "; ".join(notes) or "no difference in the system calls counted; not explained by them"


names = sorted({f.split(".")[0] for f in os.listdir(d) if f.endswith(".nvb.1.json")})
if not names:
    print(f"fio-table.py: no results in {d} (no *.nvb.1.json): did tests/testbed/fio-compare.sh run?", file=sys.stderr)
    sys.exit(1)
rows, missing = [], 0
for n in names:
    try:
        rows.append((n, tool(n, "fio", "fio"), tool(n, "nvb", "nvb-job"), None))
    except (OSError, KeyError, ValueError) as e:
        rows.append((n, None, None, str(e)))
        missing += 1

s = settings()
batch = s.get("batch", "?")
print(f"fio and nvme-bypass, like for like ({s.get('fio', 'fio ?')}, kernel {s.get('kernel', '?')}); "
      "all figures MEASURED in the EMULATED test bed (QEMU TCG), one boot")
if batch == "1":
    print("  batching matched: one I/O per submitting system call: fio --iodepth_batch_submit=1 "
          "--iodepth_batch_complete_min=1 --iodepth_batch_complete_max=QD --iodepth_low=QD; ours --batch 1")
else:
    print("  batching matched: up to QD I/Os per submitting system call: fio --iodepth_batch_submit=QD "
          "--iodepth_batch_complete_min=1 --iodepth_batch_complete_max=QD --iodepth_low=QD; ours --batch QD")
print("  (both refill every free slot, reap every completion there, and wait in the kernel for one only when none is)")
print(f"  measured interval: ramp {s.get('ramp_s', '?')} s then {s.get('runtime_s', '?')} s on both, "
      f"{s.get('repeat', '?')} timed run(s) each in the order fio, ours{', ours, fio' if s.get('repeat') == '2' else ''}; fio --norandommap")
print("  CPU/IO: the I/O thread's user+system time (getrusage, RUSAGE_THREAD) over the measured interval, from each tool's usr_cpu/sys_cpu")
print(f"  calls/IO: separate traced runs ({s.get('count_runtime_s', '?')} s after the ramp): the I/O thread's system calls "
      "(tracefs hist, raw_syscalls:sys_enter) / I/O-queue completions (nvme:nvme_complete_rq)")
print()
hdr = ["job/engine", "fio IOPS", "ours IOPS", "ours/fio", "fio CPU ns/IO", "ours CPU ns/IO", "fio calls/IO", "ours calls/IO", "IOPS within 10%", "CPU/IO no higher"]
if md:
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
else:
    print(f"{hdr[0]:<18} {'fio IOPS':>9} {'ours':>9} {'ours/fio':>8} {'fio CPU/IO':>10} {'ours':>7} {'fio calls/IO':>12} {'ours':>6}  IOPS±10% CPU≤fio")
notes = []
for n, f, o, err in rows:
    if f is None:
        print(f"{n}: missing ({err})")
        continue
    ratio = o["iops"] / f["iops"]
    ok_iops = abs(ratio - 1) <= 0.1
    ok_cpu = o["cpu"] <= f["cpu"]
    yn = lambda b: "yes" if b else "NO"
    if md:
        print(f"| {n} | {f['iops'] / 1e3:.1f}k | {o['iops'] / 1e3:.1f}k | {ratio:.2f} | {f['cpu']:.0f} | {o['cpu']:.0f} | "
              f"{f['sc']:.2f} | {o['sc']:.2f} | {yn(ok_iops)} | {yn(ok_cpu)} |")
    else:
        print(f"{n:<18} {f['iops']:>9.0f} {o['iops']:>9.0f} {ratio:>8.2f} {f['cpu']:>10.0f} {o['cpu']:>7.0f} {f['sc']:>12.2f} {o['sc']:>6.2f}  {yn(ok_iops):<8} {yn(ok_cpu)}")
    if not (ok_iops and ok_cpu):
        notes.append((n, why(n, f, o)))
print()
print("each timed run (IOPS, CPU ns/IO), and the traced runs' calls per I/O by call:")
for n, f, o, err in rows:
    if f is None:
        continue
    for label, x in (("fio", f), ("ours", o)):
        runs = ", ".join(f"{i:.0f} IOPS {c:.0f} ns" for i, c in x["each"])
        calls = ", ".join(f"{k} {v:.2f}" for k, v in sorted(x["calls"].items(), key=lambda kv: -kv[1]) if v >= 0.005)
        print(f"  {n} {label}: runs: {runs}; calls/IO: {calls} (thread {x['tid']}, {x['done']} completions)")
if notes:
    print()
    print("pairs that miss the goal, and where they differ:")
    for n, w in notes:
        print(f"  {n}: {w}")
print()
print("MEASURED, EMULATED (QEMU TCG test bed): ratios within one boot only; ns of CPU per I/O; calls per completed command.")
sys.exit(1 if missing else 0)
