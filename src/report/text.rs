//! The text report of one run, in fio's layout: a header line, per
//! direction IOPS, bandwidth and latency percentiles, then our CPU
//! accounting (docs/methodology.md) and counters.

use super::fmt::{bw, num2str, si, Unit};
use super::summary::RunSummary;
use crate::engine::JobSpec;
use crate::measure::stats::LatSummary;

fn lat_lines(out: &mut String, name: &str, l: &LatSummary) {
    if l.n == 0 {
        return;
    }
    let unit = if l.mean >= 10_000.0 { ("usec", 1000.0) } else { ("nsec", 1.0) };
    out.push_str(&format!(
        "    {name} ({}): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}\n",
        unit.0,
        l.min as f64 / unit.1,
        l.max as f64 / unit.1,
        l.mean / unit.1,
        l.stddev / unit.1
    ));
    out.push_str(&format!("    {name} percentiles ({}):\n", unit.0));
    let ps: Vec<String> = [1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99]
        .iter()
        .map(|p| format!("{:>6}th=[{:.0}]", format!("{p:.2}"), l.p(*p) as f64 / unit.1))
        .collect();
    for chunk in ps.chunks(4) {
        out.push_str(&format!("     | {}\n", chunk.join(", ")));
    }
}

/// The text report of one run, in fio's layout.
pub fn text(s: &RunSummary, spec: &JobSpec) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "{}: (jobs={}): rw={}, bs={}, iodepth={}{}\n",
        s.backend,
        s.threads,
        spec.rw.as_str(),
        spec.bs,
        spec.iodepth,
        if spec.rw.reads() && spec.rw.writes() { format!(", rwmixread={}", spec.rwmixread) } else { String::new() }
    ));
    if let Some(note) = &s.emulated_note {
        o.push_str(&format!("  EMULATED: {note}\n"));
    }
    if let Some(note) = &s.simulated_note {
        o.push_str(&format!("  SIMULATED: {note}\n"));
    }
    for (k, v) in &s.target {
        o.push_str(&format!("  {k}: {v}\n"));
    }
    let secs = s.elapsed_ns as f64 / 1e9;
    for (name, d) in [("read", &s.read), ("write", &s.write)] {
        if d.ios == 0 && d.errors == 0 {
            continue;
        }
        o.push_str(&format!(
            "  {name}: IOPS={}, BW={}({}/{}msec){}\n",
            si(d.iops),
            bw(d.bw_bytes),
            // fio's total: binary units, over the run time in whole msec
            num2str(d.bytes, 4, 1, true, Unit::Byte),
            s.elapsed_ns / 1_000_000,
            if d.errors > 0 { format!(", errors={} (failed I/Os, not in IOPS, BW or latency)", d.errors) } else { String::new() }
        ));
        lat_lines(&mut o, "lat", &d.lat_ns);
    }
    let c = &s.cpu;
    let (usr, sys) = crate::measure::cpu::usr_sys_pct(c.user_ns, c.sys_ns, c.cpu_ns, s.elapsed_ns.max(1) * s.threads as u64);
    o.push_str(&format!(
        "  cpu          : usr={usr:.2}%, sys={sys:.2}% (of {} thread{} x {:.2}s)\n",
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        secs
    ));
    o.push_str(&format!(
        "  cpu per I/O  : {:.1} ns raw (usr {:.1}, sys {:.1}); {:.1} ns useful = raw less the share of time in empty polls ({} of {} polls, {:.1}% of the time), measured\n",
        c.cpu_ns_per_io, c.user_ns_per_io, c.sys_ns_per_io, c.useful_cpu_ns_per_io, c.empty_polls, c.polls, c.empty_poll_pct
    ));
    if let Some(why) = s.system.as_ref().and_then(|sy| sy.too_short()) {
        o.push_str(&format!("  system-wide  : {why}\n"));
    } else if let Some(sy) = &s.system {
        o.push_str(&format!(
            "  system-wide  : {:.2} cores busy; per I/O {:.1} ns (usr {:.1}, kernel {:.1} incl. irq {:.1} + softirq {:.1}); {} IOPS per busy core (measured)\n",
            sy.cores_busy,
            sy.busy_ns_per_io,
            sy.user_ns_per_io,
            sy.kernel_ns_per_io,
            sy.irq_ns_per_io,
            sy.softirq_ns_per_io,
            si(sy.iops_per_busy_core)
        ));
    }
    if s.system.is_some() {
        if s.kernel_cpu_lower_bound() {
            o.push_str(&format!(
                "  irq time     : {}: this path is interrupt-driven, so its kernel CPU above is a lower bound\n",
                s.irq_time_accounting_how
            ));
        } else {
            o.push_str(&format!("  irq time     : {}\n", s.irq_time_accounting_how));
        }
    }
    // The two ceilings are models (docs/methodology.md), after the
    // measured figures they are computed from.
    if let Some(x) = s.thread_ceiling_iops_modelled() {
        o.push_str(&format!("  thread ceiling (modelled): {} IOPS per core = 1 s / the threads' useful CPU per I/O (kernel work on other cores not in it)\n", si(x)));
    }
    if let Some(x) = s.system_ceiling_iops_modelled() {
        o.push_str(&format!("  system ceiling (modelled): {} IOPS per core = 1 s / (system-wide CPU per I/O less the threads' empty polls), compare's ceiling\n", si(x)));
    }
    if s.sq_doorbells_per_io > 0.0 || s.syscalls_per_io > 0.0 {
        o.push_str(&format!(
            "  per I/O      : {:.3} SQ doorbells, {:.3} CQ doorbells, {:.3} MMIO writes, {:.3} syscalls\n",
            s.sq_doorbells_per_io, s.cq_doorbells_per_io, s.mmio_writes_per_io, s.syscalls_per_io
        ));
    }
    if let Some((a, b)) = s.core_to_core_ns {
        let f = |x: Option<f64>| x.map(|v| format!("{v:.0} ns")).unwrap_or("n/a".into());
        o.push_str(&format!(
            "  core-to-core : {} before, {} after (cache line transfer between the driver's and the simulator's cores; compare figures only within one state)\n",
            f(a),
            f(b)
        ));
    }
    if let Some(c) = s.core_share {
        o.push_str(&format!("  core share   : {}\n", crate::measure::c2c::describe_share(c)));
    }
    o.push_str(&format!("  clock        : {}\n", s.clock));
    o.push_str(&format!("  clocksource  : {}\n", crate::measure::clock::describe_clocksource(s.clocksource.as_deref())));
    if spec.verify.is_some() {
        o.push_str(&format!("  verify       : {} blocks checked, {} mismatches\n", s.verified_blocks, s.mismatches));
        if let Some(m) = &s.first_mismatch {
            o.push_str(&format!("  first mismatch: {m}\n"));
        }
    }
    if s.errors > 0 {
        o.push_str(&format!("  errors       : {} I/Os failed; first: {}\n", s.errors, s.first_error.as_deref().unwrap_or("?")));
    }
    if s.rejected_completions > 0 {
        o.push_str(&format!("  rejected     : {} completions with an unknown CID or SQ id\n", s.rejected_completions));
    }
    if s.interrupted {
        o.push_str("  interrupted  : stopped by a signal; figures cover the time run\n");
    }
    o
}

