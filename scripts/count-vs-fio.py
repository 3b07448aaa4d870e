#!/usr/bin/env python3
"""Our tool's own cost on the kernel paths beside fio's, counted exactly in
one test-bed boot (tests/testbed/count.sh, step "tools"): the same job
(4 KiB random reads, QD 32, submit and reap in batches of 8, no random map)
run by fio and by `nvme-bypass fio` on each kernel engine (io_uring and
libaio on /dev/nvmeXnY, io_uring_cmd on /dev/ngXnY), each twice, 2048 and
6144 I/Os, each run inside a counting window of its own.

Per I/O = (long run's count - short run's) / (long run's I/Os - short's):
the process's start-up, set-up, report and exit are the same in both runs
and cancel, leaving the work of 4096 I/Os. User instructions (every vCPU:
the guest runs nothing else in user mode, 22 user instructions per second
idle) and system calls (executions of entry_SYSCALL_64). Measured,
emulated (QEMU TCG instruction counts).

Goal, set before any run: ours at or under fio's user instructions per
I/O on every engine, with no more system calls per I/O.

Usage: count-vs-fio.py RESULTS (run.sh --count's results folder, holding
insn.jsonl and results/{tools.tsv,tools/,kallsyms.txt}) [--json OUT].
Exit 0 when every window and report was there (goal met or not), 1 when
something was missing, 2 on bad usage."""
import json, os, sys

args = [a for a in sys.argv[1:]]
out_json = None
if "--json" in args:
    i = args.index("--json")
    out_json = args[i + 1] if i + 1 < len(args) else None
    del args[i:i + 2]
if len(args) != 1 or not os.path.isdir(args[0]) or ("--json" in sys.argv and not out_json):
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
R = args[0]
G = os.path.join(R, "results")
tsv = os.path.join(G, "tools.tsv")
if not os.path.exists(tsv):
    print(f"count-vs-fio: {tsv} missing: the boot ran no tool windows", file=sys.stderr)
    sys.exit(1)
syscall = None
for line in open(os.path.join(G, "kallsyms.txt")):
    p = line.split()
    if len(p) >= 3 and p[2] == "entry_SYSCALL_64":
        syscall = int(p[0], 16)
        break
windows = {}
for line in open(os.path.join(R, "insn.jsonl")):
    w = json.loads(line)
    windows[w["window"]] = w
missing = False
runs = {}
for line in open(tsv):
    wid, tool, eng, n, path = line.rstrip("\n").split("\t")
    w = windows.get(int(wid))
    try:
        j = json.load(open(os.path.join(G, path)))
        ios = sum(x["read"]["total_ios"] + x["write"]["total_ios"] for x in j["jobs"])
    except (OSError, ValueError, KeyError) as e:
        print(f"count-vs-fio: {path}: {e}", file=sys.stderr)
        missing = True
        continue
    if w is None:
        print(f"count-vs-fio: no window {wid} ({tool} {eng} {n}) in insn.jsonl", file=sys.stderr)
        missing = True
        continue
    user = sum(v["user"] for v in w["vcpus"])
    kernel = sum(v["kernel"] for v in w["vcpus"])
    sysc = sum(e for (va, _n, e) in w["tbs"] if va == syscall) if syscall else 0
    runs.setdefault((eng, tool), []).append((ios, user, kernel, sysc))

rows = []
print("our tool beside fio on the kernel engines, per I/O (measured, emulated: QEMU TCG instruction counts;")
print("the difference of a 6144- and a 2048-I/O run of each, start-up and exit cancelled):")
print(f"  {'engine':13} {'user instr (ours / fio)':>24} {'system calls (ours / fio)':>26} {'kernel instr (ours / fio)':>26}  goal: ours <= fio, both")
met_all = True
for eng in ("io_uring", "libaio", "io_uring_cmd"):
    fig = {}
    for tool in ("ours", "fio"):
        r = sorted(runs.get((eng, tool), []))
        if len(r) != 2 or r[1][0] <= r[0][0]:
            fig = None
            break
        (n1, u1, k1, s1), (n2, u2, k2, s2) = r
        d = n2 - n1
        fig[tool] = {"user": (u2 - u1) / d, "kernel": (k2 - k1) / d, "syscalls": (s2 - s1) / d, "ios": [n1, n2]}
    if fig is None:
        print(f"  {eng:13} missing runs")
        missing = True
        continue
    o, f = fig["ours"], fig["fio"]
    ok = o["user"] <= f["user"] and o["syscalls"] <= f["syscalls"] + 1e-9
    met_all &= ok
    print(f"  {eng:13} {o['user']:11.0f} / {f['user']:<10.0f} {o['syscalls']:12.3f} / {f['syscalls']:<11.3f} {o['kernel']:12.0f} / {f['kernel']:<11.0f}  {'met' if ok else 'NOT met'}")
    rows.append({"engine": eng, "ours": o, "fio": f, "goal_met": ok})
print(f"goal (ours at or under fio in user instructions and system calls per I/O, every engine): {'met' if met_all and rows and not missing else 'NOT met'}")
if out_json:
    json.dump({"measurement": "measured, emulated (QEMU TCG instruction counts)", "method": "difference of a 6144- and a 2048-I/O run", "rows": rows}, open(out_json, "w"), indent=1)
sys.exit(1 if missing else 0)
