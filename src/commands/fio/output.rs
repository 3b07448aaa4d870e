//! fio's normal output, line for line where the figure exists: the job
//! header, per job the `(groupid=0, jobs=1): err= 0: pid=...` line, per
//! direction `IOPS=..., BW=...` with fio's num2str rounding, the latency
//! block (left out with gtod_reduce, as fio does), `cpu`, `issued rwts`,
//! `latency`, and `Run status group` lines. Our own figures follow as lines
//! starting `nvme-bypass`, each saying it is measured and on what.

use super::options::{JobOpts, Percentiles};
use crate::engine::{DirResult, ThreadResult};
use crate::measure::stats::{percentile_values, LatSummary};
use hdrhistogram::Histogram;
use crate::report::fio_json::SampleStats;
use crate::report::RunSummary;
pub use crate::report::fmt::{num2str, Unit};

/// fio's job header: `test: (g=0): rw=randrw, bs=(R) 4096B-4096B, (W)
/// 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, iodepth=64`.
pub fn header_line(o: &JobOpts, group: usize) -> String {
    // num2str with fio's 4 significant figures and kb_base 1024: 4096B,
    // 64.0KiB, 128KiB, 1024KiB.
    let b = num2str(o.bs as u64, 4, 1, true, Unit::Byte);
    format!(
        "{}: (g={group}): rw={}, bs=(R) {b}-{b}, (W) {b}-{b}, (T) {b}-{b}, ioengine={}, iodepth={}\n",
        o.name,
        o.rw.as_str(),
        o.ioengine,
        o.iodepth_reported()
    )
}

/// fio's per-direction line: `  read: IOPS=391k, BW=1528MiB/s
/// (1602MB/s)(4096MiB/2681msec)`, writes ending `; 0 zone resets`.
pub fn dir_line(name: &str, ios: u64, bytes: u64, runtime_ms: u64, errors: u64) -> String {
    let runt = runtime_ms.max(1);
    let iops = ios * 1000 / runt;
    let bw = bytes * 1000 / runt;
    format!(
        "  {name}: IOPS={}, BW={} ({})({}/{runtime_ms}msec){}{}\n",
        num2str(iops, 4, 1, false, Unit::None),
        num2str(bw, 4, 1, true, Unit::BytePerSec),
        num2str(bw, 4, 1, false, Unit::BytePerSec),
        num2str(bytes, 4, 1, true, Unit::Byte),
        if name == "write" { "; 0 zone resets" } else { "" },
        if errors > 0 { format!("; {errors} failed I/Os (not in IOPS, BW or latency)") } else { String::new() }
    )
}

/// fio's `display_lat`: `     lat (usec): min=83, max=2531, avg=161.09, stdev=44.73`.
pub fn lat_line(name: &str, l: &LatSummary) -> String {
    let (mut min, mut max, mut mean, mut dev) = (l.min, l.max, l.mean, l.stddev);
    let mut base = "nsec";
    if min > 2_000_000 && max > 99_999_999 && dev > 1_000_000.0 {
        (min, max, mean, dev) = (min / 1_000_000, max / 1_000_000, mean / 1e6, dev / 1e6);
        base = "msec";
    } else if min > 2000 && max > 99_999 && dev > 1000.0 {
        (min, max, mean, dev) = (min / 1000, max / 1000, mean / 1e3, dev / 1e3);
        base = "usec";
    }
    format!(
        "    {name} ({base}): min={}, max={}, avg={mean:5.02}, stdev={dev:5.02}\n",
        num2str(min, 6, 1, false, Unit::None),
        num2str(max, 6, 1, false, Unit::None)
    )
}

/// fio's `show_clat_percentiles`: the values at percentiles `vals`
/// (ascending, from [`percentile_values`](crate::measure::stats::percentile_values)),
/// each written with `precision` decimals, in the unit the values' range
/// picks and rounded up as fio rounds them, as many to a line as fit
/// fio's 80 columns (four at its defaults).
pub fn percentile_lines(name: &str, vals: &[(f64, u64)], precision: usize) -> String {
    let Some(&(_, maxv)) = vals.iter().max_by_key(|(_, v)| *v) else { return String::new() };
    let minv = vals.iter().map(|&(_, v)| v).min().unwrap_or(0);
    let (unit, scale) = if minv > 2_000_000 && maxv > 99_999_999 {
        ("msec", 2)
    } else if minv > 2000 && maxv > 99_999 {
        ("usec", 1)
    } else {
        ("nsec", 0)
    };
    let divisor = 1000u64.pow(scale);
    // fio: max(5, (int)(log10(maxv / divisor) + 1)); per_line = (80 - 7) /
    // (precision + 10 + time_width).
    let width = 5.max((maxv / divisor).max(1).ilog10() as usize + 1);
    let per_line = 73 / (precision + 10 + width);
    let mut o = format!("    {name} percentiles ({unit}):\n     |");
    for (j, &(p, v)) in vals.iter().enumerate() {
        if j != 0 && j % per_line == 0 {
            o.push_str("     |");
        }
        let mut v = v;
        for _ in 0..scale {
            v = v.div_ceil(1000);
        }
        let last = j == vals.len() - 1;
        o.push_str(&format!(" {p:>w$.precision$}th=[{v:>width$}]{}", if last { '\n' } else { ',' }, w = precision + 3));
        if !last && j % per_line == per_line - 1 {
            o.push('\n');
        }
    }
    o
}

/// The latencies fio gives percentiles of, in its order (stat.c
/// `show_latencies`: slat, clat, lat), each with its histogram: those the
/// job's options ask for that have samples. A latency not measured apart
/// (no `clat`) stands for clat and lat, as `lat`.
pub fn percentile_sets<'a>(d: &'a DirResult, p: &Percentiles) -> Vec<(&'static str, &'a Histogram<u64>)> {
    let mut v = vec![];
    match d.clat.as_ref() {
        Some(c) => {
            if let Some(s) = d.slat.as_ref().filter(|_| p.slat) {
                v.push(("slat", s));
            }
            if p.clat {
                v.push(("clat", c));
            }
            if p.lat {
                v.push(("lat", &d.lat));
            }
        }
        None if p.clat || p.lat => v.push(("lat", &d.lat)),
        None => {}
    }
    v.retain(|(_, h)| !h.is_empty());
    v
}

const EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

/// fio's latency buckets (io_u_lat_n/u/m): the share in percent of the
/// I/Os in each, 10 nsec, 10 usec, then 12 msec buckets (upper bounds 2,
/// 4, 10, ... 1000, then 2000 and >=2000 for msec); a bucket with any I/O
/// is at least 0.01%, as fio's stat_calc_lat makes it.
pub fn lat_buckets(h: &hdrhistogram::Histogram<u64>) -> [f64; 32] {
    let mut counts = [0u64; 32];
    for v in h.iter_recorded() {
        let ns = v.value_iterated_to();
        let (base, x) = if ns < 1000 {
            (0, ns)
        } else if ns < 1_000_000 {
            (10, ns / 1000)
        } else {
            (20, ns / 1_000_000)
        };
        let i = if base == 20 && x >= 1000 { if x >= 2000 { 11 } else { 10 } } else { EDGES.iter().position(|&e| x < e).unwrap_or(9) };
        counts[base + i] += v.count_at_value();
    }
    let total = h.len().max(1) as f64;
    counts.map(|c| if c == 0 { 0.0 } else { (100.0 * c as f64 / total).max(0.01) })
}

/// The share in percent of the I/Os under 1 usec, without the 0.01%
/// floor of [`lat_buckets`]: fio's terse line adds it to its first usec
/// bucket (`stat_calc_lat_nu`).
pub fn under_usec_share(h: &hdrhistogram::Histogram<u64>) -> f64 {
    let under: u64 = h.iter_recorded().filter(|v| v.value_iterated_to() < 1000).map(|v| v.count_at_value()).sum();
    100.0 * under as f64 / h.len().max(1) as f64
}

/// The label of bucket `i` of a unit's buckets (`lat_buckets`' order).
pub fn bucket_label(msec: bool, i: usize) -> String {
    match (msec, i) {
        (true, 11) => ">=2000".into(),
        (true, 10) => "2000".into(),
        _ => EDGES[i].to_string(),
    }
}

/// fio's latency distribution lines (`show_latencies`): the non-empty
/// buckets of [`lat_buckets`], five to a line.
pub fn distribution_lines(h: &hdrhistogram::Histogram<u64>) -> String {
    if h.is_empty() {
        return String::new();
    }
    let b = lat_buckets(h);
    let mut o = String::new();
    for (unit, base, n) in [("nsec", 0usize, 10usize), ("usec", 10, 10), ("msec", 20, 12)] {
        let mut line = 0;
        let mut shown = false;
        for i in 0..n {
            let pct = b[base + i];
            if pct <= 0.0 {
                continue;
            }
            if line == 0 {
                if shown {
                    o.push('\n');
                }
                o.push_str(&format!("  lat ({unit})   : "));
            } else {
                o.push_str(", ");
            }
            shown = true;
            o.push_str(&format!("{}={pct:3.2}%", bucket_label(base == 20, i)));
            line = (line + 1) % 5;
        }
        if shown {
            o.push('\n');
        }
    }
    o
}

/// One reported block, fio's entry (its `threadstats`): one thread of a
/// job (fio's clones), or, under group_reporting, the threads fio adds
/// into one: a job's clones, and the jobs after it in its reporting group
/// (see `fio_entries` in mod.rs).
pub struct Block<'a> {
    /// The first job's options (its name heads the block).
    pub opts: &'a JobOpts,
    pub group: usize,
    pub threads: &'a [ThreadResult],
    pub summary: &'a RunSummary,
    pub started: i64,
    /// What the figures are: "measured, emulated: ..." etc.
    pub context: &'a str,
    /// fio's verify phase of the jobs that only write (verify=, do_verify's
    /// default): the reads that check what they wrote, which fio reports
    /// in the `read:` direction. (I/Os, bytes, runtime ms), measured (no
    /// latency is recorded for them), summed over the block's jobs
    /// ([`read_back`] of each, with its own bs); None when there were
    /// none, or when a job's own reads fill that line (then its read-back
    /// has a line of ours).
    pub read_back: Option<(u64, u64, u64)>,
    /// fio's `latency_depth`: the last job's iodepth, as fio takes it.
    pub depth: usize,
    /// The last job's percentile options, as fio takes them.
    pub percentiles: &'a Percentiles,
}

impl Block<'_> {
    /// A direction's runtime in ms as fio counts it (`pick` 0: read, 1:
    /// write): the longest of the threads that did it (fio's per-direction
    /// runtime, the largest of its members'), the longest thread when none
    /// did.
    pub fn dir_runtime_ms(&self, pick: usize) -> u64 {
        dir_runtime_ms(self.threads, pick)
    }

    /// Bytes and runtime (ms, at least 1) of one direction, as the `Run
    /// status group` lines count them: the read-back in the read direction.
    fn dir_bytes_ms(&self, pick: usize) -> (u64, u64) {
        let own = if pick == 0 { self.summary.read.bytes } else { self.summary.write.bytes };
        let ms = self.dir_runtime_ms(pick).max(1);
        match (pick, self.read_back) {
            (0, Some((_, bytes, rb_ms))) if own == 0 => (bytes, rb_ms),
            (0, Some((_, bytes, rb_ms))) => (own + bytes, ms.max(rb_ms)),
            _ => (own, ms),
        }
    }
}

/// A direction's runtime in ms of threads as fio counts it ([`Block::dir_runtime_ms`]).
pub fn dir_runtime_ms(threads: &[ThreadResult], pick: usize) -> u64 {
    let did = |t: &&ThreadResult| if pick == 0 { t.read.ios + t.read.errors > 0 } else { t.write.ios + t.write.errors > 0 };
    let ns = threads.iter().filter(did).map(|t| t.elapsed_ns).max().or_else(|| threads.iter().map(|t| t.elapsed_ns).max());
    crate::report::fio_json::fio_ms(ns.unwrap_or(0))
}

/// The read-backs of several jobs' threads ([`read_back`] of each) as one:
/// I/Os and bytes summed, the longest runtime; None when none had one.
pub fn sum_read_backs(each: impl IntoIterator<Item = Option<(u64, u64, u64)>>) -> Option<(u64, u64, u64)> {
    each.into_iter().flatten().reduce(|a, b| (a.0 + b.0, a.1 + b.1, a.2.max(b.2)))
}

/// The verify read-back of threads that did no reads of their own, as fio
/// reports its verify phase: (I/Os, bytes, runtime ms); see
/// [`Block::read_back`]. The text's block and the JSON's entries both
/// take it from here.
pub fn read_back(threads: &[ThreadResult], bs: u64) -> Option<(u64, u64, u64)> {
    let ios: u64 = threads.iter().map(|t| t.readback_ios).sum();
    let own_reads: u64 = threads.iter().map(|t| t.read.ios + t.read.errors).sum();
    let ms = crate::report::fio_json::fio_ms(threads.iter().map(|t| t.readback_ns).max().unwrap_or(0));
    (ios > 0 && own_reads == 0).then_some((ios, ios * bs, ms.max(1)))
}

/// fio's `bw` and `iops` sample lines of one direction (`show_ddir_status`):
/// min, max, share of the group's aggregate (`agg`, bytes/s), mean and
/// standard deviation of the 500 ms samples; bandwidth in MiB/s once its
/// mean passes 1 GiB/s; nothing without samples.
fn sample_lines(bw: SampleStats, iops: SampleStats, agg: f64) -> String {
    let mut o = String::new();
    if bw.n > 0 {
        let SampleStats { mut min, mut max, mut mean, mut dev, .. } = bw;
        let per = crate::report::fio_json::percent_of_agg(mean, agg);
        let mut unit = "KiB";
        if mean > 1024.0 * 1024.0 {
            (min, max, mean, dev) = ((min / 1024.0).trunc(), (max / 1024.0).trunc(), mean / 1024.0, dev / 1024.0);
            unit = "MiB";
        }
        o.push_str(&format!("   bw ({unit:>5}/s): min={:5}, max={:5}, per={per:3.2}%, avg={mean:5.02}, stdev={dev:5.02}, samples={}\n", min as u64, max as u64, bw.n));
    }
    if iops.n > 0 {
        let SampleStats { min, max, mean, dev, .. } = iops;
        o.push_str(&format!("   iops        : min={:5}, max={:5}, avg={mean:5.02}, stdev={dev:5.02}, samples={}\n", min as u64, max as u64, iops.n));
    }
    o
}

/// Bytes and runtime (ms, at least 1) of one direction (`pick` 0: read,
/// 1: write) of a job's threads as the `Run status group` lines count
/// them: a write job's verify phase is its read direction.
pub fn dir_bytes_ms(threads: &[ThreadResult], summary: &RunSummary, bs: u64, pick: usize) -> (u64, u64) {
    let runtime = crate::report::fio_json::fio_ms(threads.iter().map(|t| t.elapsed_ns).max().unwrap_or(0));
    match (pick, read_back(threads, bs)) {
        (0, Some((_, bytes, ms))) => (bytes, ms),
        (0, None) => (summary.read.bytes, runtime.max(1)),
        _ => (summary.write.bytes, runtime.max(1)),
    }
}

/// A group's aggregate bandwidth (bytes/s) in each direction (read,
/// write), fio's `rs->agg`, as its `Run status group` line gives it: the
/// bytes of its jobs (`per`: each job's bytes and runtime in ms, from
/// [`dir_bytes_ms`]) over the longest runtime.
pub fn group_agg(per: &[[(u64, u64); 2]]) -> [f64; 2] {
    [0, 1].map(|pick| {
        // over the jobs that did the direction, as the group lines
        let total: u64 = per.iter().map(|p| p[pick].0).sum();
        let max_run = per.iter().filter(|p| p[pick].0 > 0).map(|p| p[pick].1).max().unwrap_or(1).max(1);
        (total * 1000 / max_run) as f64
    })
}

/// fio's `IO depths`, `submit` and `complete` lines.
fn depth_lines(d: &crate::engine::job::IoDepths) -> String {
    let p = |m: &[u64; 7]| crate::engine::job::IoDepths::percentages(m);
    let (l, s, c) = (p(&d.level), p(&d.submit), p(&d.complete));
    let row = |keys: &[&str; 7], v: [f64; 7]| keys.iter().zip(v).map(|(k, x)| format!("{k}={x:3.1}%")).collect::<Vec<_>>().join(", ");
    use crate::report::fio_json::{BATCH_KEYS, DEPTH_KEYS};
    format!("  IO depths    : {}\n     submit    : {}\n     complete  : {}\n", row(&DEPTH_KEYS, l), row(&BATCH_KEYS, s), row(&BATCH_KEYS, c))
}

/// One job's block of fio's normal output; `agg`: its group's aggregate
/// bandwidth per direction ([`group_agg`]), for the bandwidth line's `per=`.
pub fn job_block(b: &Block, agg: [f64; 2]) -> String {
    let s = b.summary;
    let errors: u64 = b.threads.iter().map(|t| t.errors).sum();
    let mismatches: u64 = b.threads.iter().map(|t| t.mismatches).sum();
    // fio's error numbers: EILSEQ (84) for a verify failure, EIO (5) for
    // a failed I/O.
    let mut o = format!(
        "{}: (groupid={}, jobs={}): err={:>2}: pid={}: {}\n",
        b.opts.name,
        b.group,
        b.threads.len(),
        if mismatches > 0 {
            84
        } else if errors > 0 {
            5
        } else {
            0
        },
        b.threads.first().map_or(std::process::id(), |t| t.tid),
        crate::report::fmt::fio_date(b.started)
    );
    if let Some(d) = b.opts.description().filter(|d| !d.is_empty()) {
        o.push_str(&format!("  Description  : [{d}]\n"));
    }
    let read_back = b.read_back;
    // The clones of a group_reporting block as one (their sample
    // statistics summed as fio sums them: `dir_sample_stats`).
    let merged = ThreadResult::merged(b.threads);
    for (pick, name, d) in [(0, "read", &s.read), (1, "write", &s.write)] {
        let (mut ios, mut bytes, mut runt) = (d.ios, d.bytes, b.dir_runtime_ms(pick));
        if let (Some((rb_ios, rb_bytes, rb_ms)), "read") = (read_back, name) {
            if d.ios == 0 && d.errors == 0 {
                o.push_str(&dir_line(name, rb_ios, rb_bytes, rb_ms, 0));
                continue;
            }
            // One job's reads and another's read-back in one block: fio
            // counts both in its read direction.
            (ios, bytes, runt) = (ios + rb_ios, bytes + rb_bytes, runt.max(rb_ms));
        }
        if d.ios == 0 && d.errors == 0 {
            continue;
        }
        o.push_str(&dir_line(name, ios, bytes, runt, d.errors));
        if !b.opts.gtod_reduce {
            // fio's order: slat (none on a synchronous path), clat, lat,
            // then the percentiles asked for; one latency when not
            // measured apart.
            if let Some(sl) = d.slat_ns.as_ref().filter(|x| x.n > 0) {
                o.push_str(&lat_line("slat", sl));
            }
            if let Some(c) = d.clat_ns.as_ref().filter(|x| x.n > 0) {
                o.push_str(&lat_line("clat", c));
            }
            if d.lat_ns.n > 0 {
                o.push_str(&lat_line(" lat", &d.lat_ns));
            }
            let list = b.percentiles.reported();
            for (name, h) in percentile_sets(if name == "read" { &merged.read } else { &merged.write }, b.percentiles) {
                o.push_str(&percentile_lines(name, &percentile_values(h, &list), b.percentiles.precision));
            }
        }
        // fio takes these samples whatever gtod_reduce says.
        let write = name == "write";
        let (bw, iops) = crate::report::fio_json::dir_sample_stats(d, &merged, write);
        o.push_str(&sample_lines(bw, iops, agg[write as usize]));
    }
    if !b.opts.gtod_reduce {
        // fio's distribution is of clat (io_u_mark_latency), ours of the
        // one latency when clat is not measured apart.
        let mut all = crate::measure::stats::new_histogram();
        for t in b.threads {
            all.add(t.read.clat_or_lat()).expect("same bounds");
            all.add(t.write.clat_or_lat()).expect("same bounds");
        }
        o.push_str(&distribution_lines(&all));
    }
    // fio's sync statistics (stat.c show_ddir_status for DDIR_SYNC): the
    // flushes of fsync=N / fdatasync=N, when there were any.
    if let Some(h) = merged.sync_lat.as_ref().filter(|h| !h.is_empty()) {
        o.push_str("  fsync/fdatasync/sync_file_range:\n");
        o.push_str(&lat_line("sync", &LatSummary::of(h)));
        o.push_str(&percentile_lines("sync", &percentile_values(h, &b.percentiles.reported()), b.percentiles.precision));
    }
    let el: u64 = b.threads.iter().map(|t| t.elapsed_ns).sum::<u64>().max(1);
    let usr: u64 = b.threads.iter().map(|t| t.cpu_time.user_ns).sum();
    let sys: u64 = b.threads.iter().map(|t| t.cpu_time.sys_ns).sum();
    let (usr, sys) = crate::measure::cpu::usr_sys_pct(usr, sys, b.threads.iter().map(|t| t.cpu_ns).sum(), el);
    // Each thread's own (getrusage(RUSAGE_THREAD), as fio's), summed for
    // a group_reporting block as fio sums its clones'.
    let mut ru = crate::measure::stats::Rusage::default();
    b.threads.iter().for_each(|t| ru.add(&t.rusage));
    o.push_str(&format!(
        "  cpu          : usr={usr:.2}%, sys={sys:.2}%, ctx={}, majf={}, minf={}\n",
        ru.ctx,
        ru.majf,
        ru.minf
    ));
    o.push_str(&depth_lines(&merged.depths));
    let r: u64 = b.threads.iter().map(|t| t.read.ios + t.read.errors).sum::<u64>() + read_back.map_or(0, |r| r.0);
    let w: u64 = b.threads.iter().map(|t| t.write.ios + t.write.errors).sum();
    let syncs = merged.sync_lat.as_ref().map_or(0, |h| h.len());
    o.push_str(&format!("     issued rwts: total={r},{w},0,{syncs} short=0,0,0,0 dropped=0,0,0,0\n"));
    o.push_str(&format!("     latency   : target=0, window=0, percentile=100.00%, depth={}\n", b.depth));
    // Ours, after fio's, marked as ours.
    let c = &s.cpu;
    o.push_str(&format!("  nvme-bypass  : {} ({})\n", s.backend, b.context));
    o.push_str(&format!(
        "  nvme-bypass  : cpu per I/O {:.1} ns (usr {:.1}, sys {:.1}), useful {:.1} ns = less the {:.1}% of the time in empty polls (measured)\n",
        c.cpu_ns_per_io, c.user_ns_per_io, c.sys_ns_per_io, c.useful_cpu_ns_per_io, c.empty_poll_pct
    ));
    // Always: none is a figure too (sqthread_poll's system calls, a
    // path without doorbells of ours).
    o.push_str(&format!(
        "  nvme-bypass  : per I/O {:.3} SQ doorbells, {:.3} CQ doorbells, {:.3} MMIO writes, {:.3} syscalls (measured)\n",
        s.sq_doorbells_per_io, s.cq_doorbells_per_io, s.mmio_writes_per_io, s.syscalls_per_io
    ));
    let checked: u64 = b.threads.iter().map(|t| t.readback_ios).sum();
    if checked > 0 {
        let place = if read_back.is_some() { "the read: line above, as fio reports its verify phase" } else { "not in the read: line (fio counts them there)" };
        o.push_str(&format!(
            "  nvme-bypass  : verify read back {checked} I/Os after the job, {} blocks checked, {mismatches} mismatching; {place}; no latency recorded for them (measured)\n",
            b.threads.iter().map(|t| t.verified_blocks).sum::<u64>()
        ));
    }
    if let Some(sy) = &s.system {
        match sy.too_short() {
            Some(why) => o.push_str(&format!("  nvme-bypass  : system-wide CPU {why}\n")),
            None => o.push_str(&format!(
                "  nvme-bypass  : system-wide {:.2} cores busy, {:.1} ns per I/O (kernel {:.1}) (measured)\n",
                sy.cores_busy, sy.busy_ns_per_io, sy.kernel_ns_per_io
            )),
        }
    }
    o
}

/// fio's `Run status group N (all jobs):` block over the group's blocks.
pub fn group_block(group: usize, blocks: &[Block]) -> String {
    let mut o = format!("\nRun status group {group} (all jobs):\n");
    for (label, pick) in [("   READ", 0usize), ("  WRITE", 1)] {
        // The jobs that did this direction, as fio's group figures take
        // only those (a read job is no 0 B/s writer beside a write job).
        let per: Vec<(u64, u64)> = blocks.iter().map(|b| b.dir_bytes_ms(pick)).filter(|p| p.0 > 0).collect();
        let total: u64 = per.iter().map(|p| p.0).sum();
        if total == 0 {
            continue;
        }
        let min_run = per.iter().map(|p| p.1).min().unwrap_or(1);
        let max_run = per.iter().map(|p| p.1).max().unwrap_or(1);
        let bws: Vec<u64> = per.iter().map(|(b, r)| b * 1000 / r).collect();
        let agg = total * 1000 / max_run;
        let (minb, maxb) = (bws.iter().copied().min().unwrap_or(0), bws.iter().copied().max().unwrap_or(0));
        let n = |x: u64, p2: bool, u: Unit| num2str(x, 4, 1, p2, u);
        o.push_str(&format!(
            "{label}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={min_run}-{max_run}msec\n",
            n(agg, true, Unit::BytePerSec),
            n(agg, false, Unit::BytePerSec),
            n(minb, true, Unit::BytePerSec),
            n(maxb, true, Unit::BytePerSec),
            n(minb, false, Unit::BytePerSec),
            n(maxb, false, Unit::BytePerSec),
            n(total, true, Unit::Byte),
            n(total, false, Unit::Byte)
        ));
    }
    o
}

/// fio's bandwidth, IOPS and latency logs (`write_bw_log`,
/// `write_iops_log`, `write_lat_log`) of one job's threads, numbered from
/// `first` as fio numbers threads across jobs: `PREFIX_bw.N.log`,
/// `PREFIX_iops.N.log`, `PREFIX_lat.N.log` (and `_clat`, `_slat`), one
/// line per `log_avg_msec` interval and direction the job does, as fio
/// 3.33 writes them averaged: `ms since the start, value, direction (0
/// read, 1 write), 0, 0` (block size 0 when averaged, priority 0);
/// bandwidth in KiB/s, latency the interval's mean in ns (an interval
/// without I/O in a direction has no latency line). A file that cannot
/// be written is said on stderr and the others are still written, as fio
/// goes on past a log it cannot open (the run's report is not lost).
/// Returns the files written.
pub fn write_logs(o: &JobOpts, threads: &[ThreadResult], first: usize) -> Vec<String> {
    let prefix = |p: &str| if p.is_empty() { o.name.clone() } else { p.to_string() };
    let mut written = vec![];
    // As fio: gtod_reduce measures no latency (no latency files);
    // disable_slat, _clat and _lat each leave out their own file.
    let lat = o.lat_log.as_ref().filter(|_| !o.gtod_reduce);
    let unless = |off: bool| lat.filter(|_| !off);
    // (kind, prefix, which latency: 0 lat, 1 clat, 2 slat; None: bw or iops)
    let kinds = [
        ("bw", o.bw_log.as_ref(), None),
        ("iops", o.iops_log.as_ref(), None),
        ("lat", unless(o.disable_lat), Some(0)),
        ("clat", unless(o.disable_clat), Some(1)),
        ("slat", unless(o.disable_slat), Some(2)),
    ];
    for (kind, p, which) in kinds {
        let Some(p) = p else { continue };
        for (k, t) in threads.iter().enumerate() {
            let text = match which {
                Some(w) => lat_log_lines(o, t, w),
                None => log_lines(o, t, kind == "bw"),
            };
            // per_job_logs=0: fio appends every thread's entries to one
            // file (iolog.c flush_log), a file there before included.
            let (file, done) = if o.per_job_logs {
                let file = format!("{}_{kind}.{}.log", prefix(p), first + k);
                let done = std::fs::write(&file, text);
                (file, done)
            } else {
                let file = format!("{}_{kind}.log", prefix(p));
                let done = std::fs::OpenOptions::new().append(true).create(true).open(&file).and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
                (file, done)
            };
            match done {
                Ok(()) if !written.contains(&file) => written.push(file),
                Ok(()) => {}
                Err(e) => eprintln!("nvme-bypass: warning: cannot write the {kind} log {file}: {e}; the run's figures are below"),
            }
        }
    }
    written
}

/// One thread's latency log lines of kind `which` (0 lat, 1 clat, 2 slat;
/// see [`write_logs`]): each interval's mean, from the running counts and
/// sums the thread took every `log_avg_msec` (`ThreadResult::lat_log`).
fn lat_log_lines(o: &JobOpts, t: &ThreadResult, which: usize) -> String {
    let mut out = String::new();
    let mut prev = [(0u64, 0f64); 2];
    for e in &t.lat_log {
        let ms = e.end.saturating_sub(t.start_mono_ns) / 1_000_000;
        for (ddir, on) in [(0usize, o.rw.reads()), (1, o.rw.writes())] {
            let (n, sum) = e.dirs[ddir][which];
            let (n0, sum0) = std::mem::replace(&mut prev[ddir], (n, sum));
            if on && n > n0 {
                out.push_str(&format!("{ms}, {}, {ddir}, 0, 0\n", ((sum - sum0) / (n - n0) as f64).round() as u64));
            }
        }
    }
    out
}

/// One thread's log lines (see [`write_logs`]).
fn log_lines(o: &JobOpts, t: &ThreadResult, bw: bool) -> String {
    let mut out = String::new();
    for s in &t.log {
        let ms = s.end.saturating_sub(t.start_mono_ns) / 1_000_000;
        for (ddir, on) in [(0, o.rw.reads()), (1, o.rw.writes())] {
            if !on {
                continue;
            }
            let ios = s.dir_ios(ddir == 1) as u128;
            // fio writes no entry for a direction without I/O in the interval.
            if ios == 0 {
                continue;
            }
            let per_s = |x: u128| (x * 1_000_000_000 / s.ns.max(1) as u128) as u64;
            let v = if bw { per_s(ios * o.bs as u128) / 1024 } else { per_s(ios) };
            out.push_str(&format!("{ms}, {v}, {ddir}, 0, 0\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn log_lines_are_each_intervals_figures() {
        use crate::engine::job::{LatEntry, Sample};
        let o = JobOpts { rw: crate::engine::workload::Rw::Randrw, bs: 4096, ..Default::default() };
        let mut t = ThreadResult { start_mono_ns: 1_000_000_000, ..Default::default() };
        // 250 ms: 100 reads and 50 writes; 500 ms: 300 reads, no writes.
        t.log = vec![
            Sample { end: 1_250_000_000, ns: 250_000_000, ios: 150, bytes: 150 * 4096, writes: 50, flushes: 0 },
            Sample { end: 1_500_000_000, ns: 250_000_000, ios: 300, bytes: 300 * 4096, writes: 0, flushes: 0 },
        ];
        assert_eq!(log_lines(&o, &t, false), "250, 400, 0, 0, 0\n250, 200, 1, 0, 0\n500, 1200, 0, 0, 0\n");
        assert_eq!(log_lines(&o, &t, true), "250, 1600, 0, 0, 0\n250, 800, 1, 0, 0\n500, 4800, 0, 0, 0\n");
        // Running (count, sum ns) of lat, clat, slat: each entry is the
        // mean of the I/Os since the one before; none for a direction
        // without I/O in the interval.
        let e = |end: u64, r: (u64, f64), w: (u64, f64)| LatEntry { end, dirs: [[r, (r.0, r.1 / 2.0), (0, 0.0)], [w, (w.0, w.1 / 2.0), (0, 0.0)]], ..Default::default() };
        t.lat_log = vec![e(1_260_000_000, (10, 10_000.0), (5, 50_000.0)), e(1_510_000_000, (30, 50_000.0), (5, 50_000.0))];
        assert_eq!(lat_log_lines(&o, &t, 0), "260, 1000, 0, 0, 0\n260, 10000, 1, 0, 0\n510, 2000, 0, 0, 0\n");
        assert_eq!(lat_log_lines(&o, &t, 1), "260, 500, 0, 0, 0\n260, 5000, 1, 0, 0\n510, 1000, 0, 0, 0\n");
        assert_eq!(lat_log_lines(&o, &t, 2), "");
    }
    use super::*;

    #[test]
    fn num2str_rounds_as_fio() {
        // 4096 MiB in 2681 ms: fio prints IOPS=391k, BW=1528MiB/s (1602MB/s)(4096MiB/2681msec).
        let bytes = 4096u64 << 20;
        assert_eq!(dir_line("read", bytes / 4096, bytes, 2681, 0), "  read: IOPS=391k, BW=1528MiB/s (1602MB/s)(4096MiB/2681msec)\n");
        assert_eq!(num2str(1365 << 20, 4, 1, true, Unit::Byte), "1365MiB");
        assert_eq!(num2str(999, 4, 1, false, Unit::None), "999");
        assert_eq!(num2str(12345, 4, 1, false, Unit::None), "12.3k");
        assert_eq!(num2str(123_456, 4, 1, false, Unit::None), "123k");
        assert_eq!(num2str(1_999_999, 4, 1, false, Unit::None), "2000k");
        assert_eq!(num2str(8 << 20, 4, 1, true, Unit::Byte), "8192KiB");
        assert_eq!(num2str(8 << 20, 4, 1, false, Unit::Byte), "8389kB");
        assert!(dir_line("write", 1, 4096, 10, 0).ends_with("; 0 zone resets\n"));
    }

    #[test]
    fn the_job_header_gives_bs_as_fio_does() {
        // fio 3.33's lines for bs 4k, 64k, 128k and 1m.
        for (bs, shown) in [(4096, "4096B"), (65536, "64.0KiB"), (131072, "128KiB"), (1 << 20, "1024KiB"), (3072, "3072B")] {
            let o = super::JobOpts { name: "t".into(), bs, ..Default::default() };
            let want = format!("t: (g=0): rw=read, bs=(R) {shown}-{shown}, (W) {shown}-{shown}, (T) {shown}-{shown}, ioengine=psync, iodepth=1\n");
            assert_eq!(super::header_line(&o, 0), want);
        }
    }

    #[test]
    fn bandwidth_and_iops_sample_lines_as_fio_prints_them() {
        // fio 3.25, one job: "bw (  KiB/s): min=18952, max=19424, per=99.91%,
        // avg=19188.00, stdev=333.75, samples=2".
        let s = SampleStats::of;
        let o = sample_lines(s(&[18952.0, 19424.0]), s(&[4738.0, 4856.0]), 19205.0 * 1024.0);
        assert_eq!(
            o,
            "   bw (  KiB/s): min=18952, max=19424, per=99.91%, avg=19188.00, stdev=333.75, samples=2\n   iops        : min= 4738, max= 4856, avg=4797.00, stdev=83.44, samples=2\n"
        );
        // Past 1 GiB/s the bandwidth is in MiB/s, min and max truncated.
        let o = sample_lines(s(&[2_000_000.0, 2_100_000.0]), s(&[500_000.0]), 4.0e9);
        assert!(o.starts_with("   bw (  MiB/s): min= 1953, max= 2050, per=52.48%, avg=2001.95,"), "{o}");
        assert_eq!(sample_lines(s(&[]), s(&[]), 1.0), "", "no samples, no lines");
    }

    #[test]
    fn latency_lines_in_fios_units() {
        let l = LatSummary { min: 83_000, max: 2_531_000, mean: 161_090.0, stddev: 44_730.0, n: 10, ..Default::default() };
        assert_eq!(lat_line(" lat", &l), "     lat (usec): min=83, max=2531, avg=161.09, stdev=44.73\n");
        let d = Percentiles::default();
        let vals: Vec<(f64, u64)> = d.reported().iter().enumerate().map(|(i, &p)| (p, 100_000 + i as u64 * 1000)).collect();
        let p = percentile_lines("lat", &vals, d.precision);
        assert!(p.starts_with("    lat percentiles (usec):\n     |  1.00th=[  100],  5.00th=[  101], 10.00th=[  102], 20.00th=[  103],\n     | 30.00th=[  104],"), "{p}");
        assert!(p.ends_with("| 99.99th=[  116]\n"), "{p}");
    }

    #[test]
    fn percentile_lists_laid_out_as_fios() {
        // fio 3.33, --percentile_list=50:99:99.9:99.999 (precision 3): per
        // line (80 - 7) / (3 + 10 + 5) = 4, each " %6.3fth=[%5llu]".
        let vals = [(50.0, 12_000), (99.0, 20_000), (99.9, 40_000), (99.999, 150_000)];
        assert_eq!(
            percentile_lines("clat", &vals, 3),
            "    clat percentiles (usec):\n     | 50.000th=[   12], 99.000th=[   20], 99.900th=[   40], 99.999th=[  150]\n"
        );
        // Whole numbers (precision 0): " %3.0fth=[...]", 73 / 15 = 4 to a line.
        let vals: Vec<(f64, u64)> = (1..=7).map(|i| (i as f64 * 10.0, 500 + i)).collect();
        assert_eq!(
            percentile_lines("lat", &vals, 0),
            "    lat percentiles (nsec):\n     |  10th=[  501],  20th=[  502],  30th=[  503],  40th=[  504],\n     |  50th=[  505],  60th=[  506],  70th=[  507]\n"
        );
        // Wide values: fewer to a line (73 / (2 + 10 + 8) = 3), nsec
        // because the smallest is not over 2 usec.
        let vals = [(1.0, 1_500), (50.0, 2_000), (90.0, 30_000_000), (99.0, 50_000_000)];
        assert_eq!(
            percentile_lines("clat", &vals, 2),
            "    clat percentiles (nsec):\n     |  1.00th=[    1500], 50.00th=[    2000], 90.00th=[30000000],\n     | 99.00th=[50000000]\n"
        );
        assert_eq!(percentile_lines("clat", &[], 2), "", "an empty list prints nothing, as fio's");
    }

    #[test]
    fn percentile_sets_in_fios_order() {
        let mut h = crate::measure::stats::new_histogram();
        h.record(1000).unwrap();
        let d = DirResult { lat: h.clone(), slat: Some(h.clone()), clat: Some(h.clone()), ..Default::default() };
        let names = |p: &Percentiles, d: &DirResult| percentile_sets(d, p).iter().map(|(n, _)| *n).collect::<Vec<_>>();
        let all = Percentiles { slat: true, clat: true, lat: true, ..Default::default() };
        assert_eq!(names(&Percentiles::default(), &d), ["clat"]);
        assert_eq!(names(&all, &d), ["slat", "clat", "lat"]);
        assert_eq!(names(&Percentiles { clat: false, ..Default::default() }, &d), Vec::<&str>::new());
        // No slat measured (a synchronous path, disable_slat): none shown.
        assert_eq!(names(&all, &DirResult { slat: None, ..d.clone() }), ["clat", "lat"]);
        // One latency, not measured apart: once, as lat.
        assert_eq!(names(&all, &DirResult { slat: None, clat: None, ..d.clone() }), ["lat"]);
        assert!(names(&all, &DirResult::default()).is_empty(), "a direction without I/O has none");
    }

    #[test]
    fn latency_distribution_in_fios_buckets() {
        let mut h = crate::measure::stats::new_histogram();
        h.record_n(900, 3).unwrap(); // 1000 ns bucket
        h.record_n(60_000, 90).unwrap(); // 100 us
        h.record_n(200_000, 900).unwrap(); // 250 us
        h.record_n(300_000, 6).unwrap(); // 500 us
        h.record_n(600_000, 1).unwrap(); // 750 us
        h.record_n(900_000, 1).unwrap(); // 1000 us
        h.record_n(1_500_000, 1).unwrap(); // 2 ms
        h.record(3_000_000_000).unwrap(); // >= 2000 ms
        let d = distribution_lines(&h);
        assert_eq!(
            d,
            "  lat (nsec)   : 1000=0.30%\n  lat (usec)   : 100=8.97%, 250=89.73%, 500=0.60%, 750=0.10%, 1000=0.10%\n  lat (msec)   : 2=0.10%, >=2000=0.10%\n"
        );
        let mut big = crate::measure::stats::new_histogram();
        big.record_n(100_000, 100_000).unwrap();
        big.record(10_000).unwrap();
        assert_eq!(distribution_lines(&big), "  lat (usec)   : 20=0.01%, 250=100.00%\n", "a bucket with any I/O shows at least 0.01%");
    }

    #[test]
    fn dates_as_ctime() {
        let d = crate::report::fmt::fio_date(0);
        assert!(d.len() == 24 && (d.ends_with("1970") || d.ends_with("1969")), "{d}");
    }
}
