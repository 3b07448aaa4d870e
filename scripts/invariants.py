"""Invariants shared by check-bench.py and check-compare.py: what must hold
between the figures of one run summary (nvme-bypass's RunSummary JSON),
whatever the machine. Each check raises Bad with the reason."""
import math


class Bad(Exception):
    pass


def close(a, b, rel=1e-6, abs_=1e-6):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)


def percentiles_ascending(where, lat):
    pct = lat.get("percentile") or {}
    vals = [v for _, v in sorted(pct.items(), key=lambda kv: float(kv[0]))]
    if any(b < a for a, b in zip(vals, vals[1:])):
        raise Bad(f"{where}: latency percentiles not ascending: {sorted(pct.items(), key=lambda kv: float(kv[0]))}")
    if pct and lat.get("N", 0) > 0 and not (lat["min"] <= vals[0] and vals[-1] <= lat["max"] * 1.01 + 1):
        raise Bad(f"{where}: latency percentiles outside [min, max] = [{lat['min']}, {lat['max']}]")


def useful_is_raw_less_empty_share(where, cpu, threads=1):
    """Useful CPU per I/O = raw x (1 - the share of wall time in empty
    polls), exactly for one thread; at most raw for several."""
    raw, useful = cpu["cpu_ns_per_io"], cpu["useful_cpu_ns_per_io"]
    if useful > raw * (1 + 1e-9) or useful < 0:
        raise Bad(f"{where}: useful CPU per I/O {useful} is not within [0, raw {raw}]")
    if threads == 1:
        want = raw * (1 - min(cpu["empty_poll_pct"], 100.0) / 100)
        if not close(useful, want, rel=1e-6, abs_=1e-3):
            raise Bad(f"{where}: useful CPU per I/O {useful} is not raw {raw} less the empty-poll share {cpu['empty_poll_pct']:.3f}% ({want})")


def summary(where, s):
    """Every invariant of one RunSummary JSON."""
    ios = s["read"]["ios"] + s["write"]["ios"]
    if s["lat_ns"]["N"] != ios:
        raise Bad(f"{where}: N {s['lat_ns']['N']} latencies but {ios} I/Os (read {s['read']['ios']} + write {s['write']['ios']})")
    secs = s["elapsed_ns"] / 1e9
    if secs > 0 and not close(s["iops"], ios / secs, rel=1e-6):
        raise Bad(f"{where}: iops {s['iops']} is not {ios} I/Os over {secs} s")
    for d in ("read", "write"):
        percentiles_ascending(f"{where}.{d}", s[d]["lat_ns"])
    percentiles_ascending(where, s["lat_ns"])
    cpu = s["cpu"]
    if "ceiling_iops_per_core" in cpu:
        raise Bad(f"{where}: cpu.ceiling_iops_per_core: the thread ceiling is a model, named thread_ceiling_iops_modelled")
    useful_is_raw_less_empty_share(where, cpu, s["threads"])
    useful = cpu["useful_cpu_ns_per_io"]
    tc = s.get("thread_ceiling_iops_modelled")
    if useful > 0 and (tc is None or not close(tc, 1e9 / useful)):
        raise Bad(f"{where}: thread_ceiling_iops_modelled {tc} is not 1 s / useful CPU per I/O {useful}")
    y = s.get("system")
    sc = s.get("system_ceiling_iops_modelled")
    if y and y["busy_ns_per_io"] > 0:
        if not close(y["iops_per_busy_core"], 1e9 / y["busy_ns_per_io"], rel=1e-6):
            raise Bad(f"{where}: iops_per_busy_core {y['iops_per_busy_core']} is not 1 s / busy CPU per I/O {y['busy_ns_per_io']}")
        empty = cpu["cpu_ns_per_io"] - useful
        model = y["busy_ns_per_io"] - empty
        # Under 100 ticks of /proc/stat (1 s at USER_HZ 100) the system-wide
        # figures are not shown, and no ceiling is modelled from them.
        if y.get("interval_ns", 1e9) < 1e9:
            if sc is not None:
                raise Bad(f"{where}: system_ceiling_iops_modelled {sc} from a {y['interval_ns'] / 1e6:.0f} ms interval, too short for /proc/stat")
        elif model > 0:
            if sc is None or sc < y["iops_per_busy_core"] * (1 - 1e-9):
                raise Bad(f"{where}: system ceiling (modelled) {sc} below the measured IOPS per busy core {y['iops_per_busy_core']}")
            if not close(sc, 1e9 / model):
                raise Bad(f"{where}: system_ceiling_iops_modelled {sc} is not 1 s / (busy {y['busy_ns_per_io']} - empty polls {empty} ns per I/O)")
