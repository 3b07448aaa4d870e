#!/usr/bin/env python3
"""Check a compare.json: every required path ran, and its figures agree
with each other, not only exist:
  * every run: latency percentiles ascend; N latencies == read + write I/Os;
    useful CPU per I/O is raw less exactly the empty-poll share; the system
    ceiling (modelled) is 1 s / (busy CPU per I/O less empty polls) and at
    or above the measured IOPS per busy core (scripts/invariants.py);
  * every row: runs == repeat; each figure's median within [min, max], and
    the median, min, max and n those of its runs; each ratio is the figure
    over the baseline's median; each reading (higher / lower / within
    noise) what its range says against the noise control's, and "not
    repeated" with one round;
  * the run order: every round runs every row once, round r starting r rows on;
  * the controller ended on the driver it started on; emulated runs say so.
With --count, also the instruction counts of the same rows (count-report's
count.json, checked by check-count.py).
Usage: check-compare.py compare.json [--require block,libaio,passthru,vfio] [--count count.json]
       check-compare.py --self-test   (tests/fixtures/compare-repeat.json passes, corruptions of it fail)"""
import copy, json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import invariants
from invariants import Bad, close

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = "block/io_uring"


def spread_of(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return {"median": med, "min": xs[0], "max": xs[-1], "n": n}


def same_spread(where, got, want):
    if (got is None) != (want is None):
        raise Bad(f"{where}: {got} where its runs give {want}")
    if got is None:
        return
    if not (got["min"] <= got["median"] <= got["max"]):
        raise Bad(f"{where}: median {got['median']} outside [{got['min']}, {got['max']}]")
    if got["n"] != want["n"] or not all(close(got[k], want[k], rel=1e-9) for k in ("median", "min", "max")):
        raise Bad(f"{where}: {got} is not the spread of its runs {want}")


def reading(r, noise, repeated):
    if not repeated:
        return "not_repeated"
    if noise is None:
        return "unjudged"
    if r["min"] <= noise["max"] and noise["min"] <= r["max"]:
        return "within_noise"
    return "higher" if r["min"] > noise["max"] else "lower"


RATIOS = {  # ratio field: the figure it divides
    "iops_per_busy_core_ratio_measured": "iops_per_busy_core_measured",
    "cpu_ns_per_io_ratio_measured": "cpu_ns_per_io_measured",
    "system_ceiling_ratio_modelled": "system_ceiling_iops_modelled",
}


def check(c, require):
    repeat = c["repeat"]
    rows = {r["variant"]["label"]: r for r in c["rows"]}
    for label in require:
        if label not in rows:
            raise Bad(f"no row {label}; rows: {list(rows)}")
        r = rows[label]
        if r.get("error"):
            raise Bad(f"row {label} failed: {r['error']}")
        if not r["summary"] or r["summary"]["iops"] <= 0:
            raise Bad(f"row {label} has no IOPS")
        if not r["summary"].get("system"):
            raise Bad(f"row {label} lacks system-wide CPU accounting")
    noise_rows = [r for r in c["rows"] if r["noise_control"]]
    if repeat > 1 and BASELINE in rows and len(noise_rows) != 1:
        raise Bad(f"{repeat} rounds with a baseline need one noise control row, found {len(noise_rows)}")
    if repeat == 1 and noise_rows:
        raise Bad("one round runs no noise control")
    # The run order: each round every row once, round r starting r rows on.
    labels = [r["variant"]["label"] for r in c["rows"]]
    if len(c["run_order"]) != repeat:
        raise Bad(f"run_order has {len(c['run_order'])} rounds, repeat is {repeat}")
    for i, rnd in enumerate(c["run_order"]):
        k = i % len(labels)
        if rnd != labels[k:] + labels[:k]:
            raise Bad(f"round {i + 1} ran {rnd}, the rotation gives {labels[k:] + labels[:k]}")
    base = rows.get(BASELINE)
    noise = noise_rows[0] if noise_rows else None
    for r in c["rows"]:
        label = r["variant"]["label"]
        if len(r["runs"]) != repeat:
            raise Bad(f"row {label}: {len(r['runs'])} runs, repeat is {repeat}")
        for j, run in enumerate(r["runs"]):
            if run["round"] != j or c["run_order"][j][run["position"] - j * len(labels)] != label:
                raise Bad(f"row {label}: run {j} (round {run['round']}, position {run['position']}) is not where run_order puts it")
            s = run["summary"]
            if s is None:
                continue
            invariants.summary(f"{label} round {j + 1}", s)
            if c.get("emulated") and not s.get("emulated"):
                raise Bad(f"row {label} round {j + 1} is not labelled emulated")
            f = run["figures"]
            y = s.get("system") or {}
            for k, want in (("iops_measured", s["iops"]), ("iops_per_busy_core_measured", y.get("iops_per_busy_core")),
                            ("cpu_ns_per_io_measured", y.get("busy_ns_per_io")), ("system_ceiling_iops_modelled", s.get("system_ceiling_iops_modelled"))):
                if (want is None) != (f[k] is None) or (want is not None and not close(f[k], want, rel=1e-9)):
                    raise Bad(f"row {label} round {j + 1}: figures.{k} {f[k]} is not its summary's {want}")
        ran = [run["figures"] for run in r["runs"] if run["figures"]]
        for k, got in r["figures"].items():
            same_spread(f"row {label} figures.{k}", got, spread_of([f[k] for f in ran]))
        for rk, fk in RATIOS.items():
            got = r[rk]
            b = base["figures"][fk] if base else None
            if not (r["figures"][fk] and b and b["median"] > 0):
                if got is not None:
                    raise Bad(f"row {label}: {rk} without a figure and a baseline")
                continue
            if got is None:
                raise Bad(f"row {label}: no {rk}")
            want = {k: r["figures"][fk][k] / b["median"] for k in ("median", "min", "max")}
            for k in want:
                if not close(got["spread"][k], want[k], rel=1e-6):
                    raise Bad(f"row {label}: {rk}.{k} {got['spread'][k]} is not {fk} over the baseline's median ({want[k]})")
            nf = noise["figures"][fk] if noise else None
            nr = {k: nf[k] / b["median"] for k in ("min", "max")} if nf else None
            want_reading = reading(got["spread"], nr, repeat > 1)
            if got["reading"] != want_reading:
                raise Bad(f"row {label}: {rk} reads {got['reading']}, its range {got['spread']} against the noise control's {nr} says {want_reading}")
    if c["driver_after"] != c["driver_before"]:
        raise Bad(f"controller ended on {c['driver_after']}, started on {c['driver_before']}")
    if not c["headline"]:
        raise Bad("no headline")
    return rows


def self_test():
    fixture = os.path.join(HERE, "..", "tests", "fixtures", "compare-repeat.json")
    good = json.load(open(fixture))
    require = [BASELINE, "passthru", "vfio"]
    check(good, require)
    row = lambda c, l: next(r for r in c["rows"] if r["variant"]["label"] == l)

    def ratio_off(c):
        row(c, "passthru")["iops_per_busy_core_ratio_measured"]["spread"]["median"] *= 1.1

    def gain_in_noise(c):
        r = row(c, "passthru")["iops_per_busy_core_ratio_measured"]
        r["reading"] = "within_noise" if r["reading"] != "within_noise" else "higher"

    def median_out_of_range(c):
        f = row(c, "vfio")["figures"]["iops_measured"]
        f["median"] = f["max"] * 1.5

    def run_missing(c):
        row(c, "vfio")["runs"].pop()

    def percentiles_descend(c):
        pct = row(c, "passthru")["runs"][0]["summary"]["lat_ns"]["percentile"]
        pct["99.900000"] = pct["50.000000"] - 1

    def ios_not_n(c):
        row(c, BASELINE)["runs"][1]["summary"]["read"]["ios"] += 7

    def useful_not_raw_less_empty(c):
        cpu = row(c, "vfio")["runs"][0]["summary"]["cpu"]
        cpu["useful_cpu_ns_per_io"] = cpu["cpu_ns_per_io"]

    def ceiling_below_measured(c):
        s = row(c, "vfio")["runs"][0]["summary"]
        s["system_ceiling_iops_modelled"] = s["system"]["iops_per_busy_core"] * 0.9

    def baseline_always_first(c):
        c["run_order"] = [c["run_order"][0]] * len(c["run_order"])

    cases = (ratio_off, gain_in_noise, median_out_of_range, run_missing, percentiles_descend, ios_not_n,
             useful_not_raw_less_empty, ceiling_below_measured, baseline_always_first)
    for corrupt in cases:
        c = copy.deepcopy(good)
        corrupt(c)
        try:
            check(c, require)
        except Bad as e:
            print(f"self-test: {corrupt.__name__}: caught ({e})")
            continue
        print(f"FAIL: self-test: {corrupt.__name__} was not caught", file=sys.stderr)
        sys.exit(1)
    print(f"check-compare.py self-test ok: {fixture} passes, {len(cases)} corruptions of it fail")


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        self_test()
        return
    if not args:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    path = args.pop(0)
    require = [BASELINE, "block/libaio", "passthru", "vfio"]
    count = None
    while args:
        a = args.pop(0)
        if a == "--require":
            require = args.pop(0).split(",")
        elif a == "--count":
            count = args.pop(0)
        else:
            print(f"check-compare.py: unknown argument {a}", file=sys.stderr)
            sys.exit(2)
    c = json.load(open(path))
    try:
        rows = check(c, require)
    except Bad as e:
        print(f"FAIL: {path}: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"compare ok: {len(rows)} rows x {c['repeat']} rounds ({', '.join(rows)}), controller back on {c['driver_after']}")
    for h in c["headline"]:
        print("  " + h)
    if count:
        rc = subprocess.call([sys.executable, os.path.join(HERE, "check-count.py"), count])
        if rc != 0:
            sys.exit(rc)
        counted = {r["label"] for r in json.load(open(count))["rows"] if r.get("instructions_per_io")}
        for label in require:
            if label not in counted:
                print(f"FAIL: {count}: no instruction counts for {label}", file=sys.stderr)
                sys.exit(1)


main()
