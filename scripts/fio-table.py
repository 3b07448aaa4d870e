#!/usr/bin/env python3
"""Side-by-side table of nvme-bypass and fio from tests/testbed/fio-compare.sh's
outputs: IOPS, and CPU per I/O two ways (the job thread's own user+system
time, and system-wide busy time from /proc/stat). Marks each pair against the
goal (ours: IOPS within 10% of fio, CPU per I/O no higher). Figures are from
the emulated test bed. Usage: fio-table.py DIR [--markdown]"""
import json, os, sys

d = sys.argv[1]
md = "--markdown" in sys.argv

def stat(path):
    v = [int(x) for x in open(path).read().split()[1:]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6]
    return busy * 10_000_000  # USER_HZ = 100 -> ns

def sysbusy(prefix):
    return stat(prefix + ".stat1") - stat(prefix + ".stat0")

def fio(prefix):
    j = json.load(open(prefix + ".json"))["jobs"][0]
    ios = j["read"]["total_ios"] + j["write"]["total_ios"]
    rt = max(j["read"]["runtime"], j["write"]["runtime"], 1) / 1000.0
    thread = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * rt * 1e9
    return ios / rt, thread / ios, sysbusy(prefix) / ios

def nvb(prefix):
    j = json.load(open(prefix + ".json"))
    nb = j["nvme_bypass"]
    ios = nb["read"]["ios"] + nb["write"]["ios"]
    return nb["iops"], nb["cpu"]["cpu_ns_per_io"], sysbusy(prefix) / ios

names = sorted({f.split(".")[0] for f in os.listdir(d) if f.endswith(".nvb.json")})
rows = []
for n in names:
    try:
        fi, fc, fs = fio(os.path.join(d, n + ".fio"))
        ni, nc, ns = nvb(os.path.join(d, n + ".nvb"))
    except (OSError, KeyError, ValueError) as e:
        rows.append((n, None, str(e)))
        continue
    ok_iops = ni >= 0.9 * fi
    ok_cpu = ns <= fs * 1.0
    rows.append((n, (fi, ni, fc, nc, fs, ns, ok_iops, ok_cpu), None))

if md:
    print("| job / engine | fio IOPS | ours IOPS | fio thread CPU/IO | ours thread CPU/IO | fio system CPU/IO | ours system CPU/IO | IOPS within 10% | CPU/IO no higher |")
    print("|---|---|---|---|---|---|---|---|---|")
else:
    print(f"{'job/engine':<20} {'fio IOPS':>9} {'ours':>9} {'fio thr ns/IO':>13} {'ours':>9} {'fio sys ns/IO':>13} {'ours':>9}  goal")
for n, v, err in rows:
    if v is None:
        print(f"{n}: missing ({err})")
        continue
    fi, ni, fc, nc, fs, ns, a, b = v
    goal = ("yes" if a else "NO") + "/" + ("yes" if b else "NO")
    if md:
        print(f"| {n} | {fi/1e3:.1f}k | {ni/1e3:.1f}k | {fc:.0f} | {nc:.0f} | {fs:.0f} | {ns:.0f} | {'yes' if a else 'no'} | {'yes' if b else 'no'} |")
    else:
        print(f"{n:<20} {fi:>9.0f} {ni:>9.0f} {fc:>13.0f} {nc:>9.0f} {fs:>13.0f} {ns:>9.0f}  {goal}")
print("EMULATED (QEMU TCG test bed): ratios within one boot only. CPU/IO in ns; system = /proc/stat busy (user+system+irq+softirq).")
