#!/usr/bin/env python3
"""Cache lines two jobs share on the hot path of `bench --sim-sync
--numjobs 2`, counted, not timed: the run under valgrind's lackey
(--trace-mem, --trace-sched: every load and store, and which thread ran),
then per 64-byte line and 128-byte block (the pair Intel's adjacent-line
prefetcher moves together) each thread's loads and stores.

A block is hot-shared when one job thread stores to it at least N times and
another job thread touches it at least N times (the main thread, valgrind's
thread 1, is left out: it only sets up, samples progress every 500 ms and
reports). Read-shared blocks (touched N times by both jobs, stored to by
neither) are listed too: they cost nothing while nobody writes them.

    scripts/line-sharing.py [BIN] [--ios N] [--min N]

Exit status: 0 no hot-shared block, 1 some, 2 bad usage, 3 the run failed.
It takes a minute or two (lackey is slow); the figures are the same for
the same binary and input, whatever else the machine does."""
import argparse, collections, os, re, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("bin", nargs="?", default="target/release/nvme-bypass")
ap.add_argument("--ios", type=int, default=20000, help="I/Os per job (default 20000)")
ap.add_argument("--min", type=int, default=200, help="N, accesses that make a block hot (default 200)")
a = ap.parse_args()

cmd = ["valgrind", "--tool=lackey", "--trace-mem=yes", "--trace-sched=yes", "--log-fd=9", a.bin, "bench", "--backend", "sim",
       "--sim-sync", "--no-c2c", "--sim-data", "null", "--rw", "randread", "--bs", "4k", "--iodepth", "64", "--numjobs", "2",
       "--cpus", "0,1", "--ios", str(a.ios), "--output-format", "json"]
# valgrind's log (the trace) on fd 9, the program's output away.
r, w = os.pipe()
os.set_inheritable(w, True)
try:
    proc = subprocess.Popen(["sh", "-c", f'exec "$@" 9>&{w}', "sh"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(w,))
except OSError as e:
    print(f"FAIL: could not run valgrind: {e}", file=sys.stderr)
    sys.exit(3)
os.close(w)
stores = collections.defaultdict(collections.Counter)
loads = collections.defaultdict(collections.Counter)
sched = re.compile(r"SCHED\[(\d+)\]:\s+acquired lock")
cur = 1
with os.fdopen(r, "r", errors="replace") as f:
    for raw in f:
        c = raw[:2]
        if c == " L" or c == " S" or c == " M":
            at, size = raw[3:].split(",")
            at = int(at, 16)
            lo, hi = at >> 6, (at + int(size) - 1) >> 6
            for ln in (lo,) if lo == hi else (lo, hi):
                (loads if c == " L" else stores)[ln][cur] += 1
        elif c == "--" and "SCHED[" in raw:
            m = sched.search(raw)
            if m:
                cur = int(m.group(1))
if proc.wait() != 0:
    print(f"FAIL: {' '.join(cmd)} exited {proc.returncode}", file=sys.stderr)
    sys.exit(3)

hot_any = False
for shift, name in ((0, "64-byte lines"), (1, "128-byte blocks")):
    S = collections.defaultdict(collections.Counter)
    L = collections.defaultdict(collections.Counter)
    for ln, c in stores.items():
        S[ln >> shift].update(c)
    for ln, c in loads.items():
        L[ln >> shift].update(c)
    hot, ro = [], []
    for b in set(S) | set(L):
        jobs = {t for t in set(S[b]) | set(L[b]) if t != 1}
        touched = {t: S[b][t] + L[b][t] for t in jobs}
        if any(S[b][w] >= a.min and any(touched[o] >= a.min for o in jobs if o != w) for w in jobs):
            hot.append(b)
        elif sum(touched[t] >= a.min for t in jobs) > 1:
            ro.append(b)
    size = 64 << shift
    for title, rows in ((f"hot-shared (a job stores >= {a.min}, another touches >= {a.min})", hot), ("read-shared", ro)):
        print(f"{name}, {title}: {len(rows)}")
        for b in sorted(rows):
            print(f"  {b * size:#x} stores {dict(S[b])} loads {dict(L[b])} (by valgrind thread)")
    hot_any |= bool(hot)
print(f"{a.ios} I/Os per job, 2 jobs; {'some block is hot-shared' if hot_any else 'no hot-shared line or block'} (COUNTED under valgrind lackey)")
sys.exit(1 if hot_any else 0)
