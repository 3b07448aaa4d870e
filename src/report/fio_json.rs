//! The JSON report of one run in fio 3.x's `--output-format=json` layout
//! (`jobs[]` with `read`/`write`/`trim` blocks holding `iops`, `bw`,
//! `clat_ns`/`lat_ns` with `percentile`, the bandwidth/IOPS sample
//! statistics, `usr_cpu`/`sys_cpu`, the iodepth maps; no `null`), so tools
//! that read fio results read ours (docs/fio.md says what each key holds
//! and which are not measured); our own figures sit beside them under
//! `nvme_bypass`.

use super::summary::{DirSummary, RunSummary};
use crate::engine::{JobSpec, ThreadResult};
use serde_json::{json, Value};

/// The JSON report of one run, shaped like fio's.

/// A runtime in ms as fio keeps it: rounded up (its `update_runtime`
/// adds `(elapsed_us + 999) / 1000`), so a job under a millisecond ran 1.
pub fn fio_ms(ns: u64) -> u64 {
    ns.div_ceil(1_000_000)
}
/// The fio-shaped JSON of a run. `genesis_ms` is when the command started
/// (fio's `elapsed` counts from it, set-up included: whole seconds, rounded
/// up), `started_ms` when its jobs started (`job_start`), both in ms since
/// the epoch.
pub fn fio_json(s: &RunSummary, spec: &JobSpec, threads: &[ThreadResult], genesis_ms: u64, started_ms: u64) -> Value {
    let now_ms = unix_ms();
    let elapsed_s = now_ms.saturating_sub(genesis_ms).div_ceil(1000).max(1);
    let jobs: Vec<Value> = threads
        .iter()
        .map(|t| {
            let ts = RunSummary::new(s.backend.clone(), vec![], std::slice::from_ref(t), &s.clock);
            let usr_sys = crate::measure::cpu::usr_sys_pct(t.cpu_time.user_ns, t.cpu_time.sys_ns, t.cpu_ns, t.elapsed_ns);
            let mut cpu_accounting = serde_json::to_value(&ts.cpu).unwrap_or_default();
            super::summary::name_thread_ceiling(&mut cpu_accounting);
            let mut job = json!({
                "jobname": format!("{}-{}", s.backend, t.thread),
                "groupid": 0,
                "error": if t.errors > 0 { 5 } else { 0 },
                // What fio 3.33 reports for a job that has finished (its
                // ETA is unknown once the job is gone: INT_MAX).
                "eta": i32::MAX,
                "elapsed": elapsed_s,
                "job options": job_options(spec, &s.backend),
                "read": dir_json(&ts.read, t, s.read.bw_bytes, false),
                "write": dir_json(&ts.write, t, s.write.bw_bytes, true),
                "trim": dir_json(&DirSummary::default(), t, 0.0, true),
                // (fio's total_run_time: mtime_since_now, truncated; the
                // directions' runtime is rounded up)
                "job_runtime": t.elapsed_ns / 1_000_000,
                "usr_cpu": usr_sys.0,
                "sys_cpu": usr_sys.1,
                "ctx": t.rusage.ctx,
                "majf": t.rusage.majf,
                "minf": t.rusage.minf,
                "iodepth_level": depth_map(&DEPTH_KEYS, &t.depths.level),
                "iodepth_submit": depth_map(&BATCH_KEYS, &t.depths.submit),
                "iodepth_complete": depth_map(&BATCH_KEYS, &t.depths.complete),
                "job_start": started_ms,
                // fio's latency target (latency_target= not supported: its
                // defaults, as fio prints them for a job without one).
                "latency_depth": spec.iodepth,
                "latency_target": 0,
                "latency_percentile": 100.0,
                "latency_window": 0,
                // fio's fsync/fdatasync statistics (its percentiles only
                // with samples, as fio's add_ddir_lat_json).
                "sync": match t.sync_lat.as_ref().filter(|h| !h.is_empty()) {
                    Some(h) => json!({"total_ios": h.len(), "lat_ns": crate::measure::stats::LatSummary::of(h)}),
                    None => json!({"total_ios": 0, "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}}),
                },
                "nvme_bypass": {
                    "thread": t.thread,
                    "cpu": t.cpu,
                    "queue": t.queue,
                    "cpu_accounting": cpu_accounting,
                    "counters": t.counters,
                    "blocking_waits": t.waits,
                    "verified_blocks": t.verified_blocks,
                    "mismatches": t.mismatches,
                    "errors": t.errors,
                    "first_error": t.first_error,
                },
            });
            // fio prints the failed I/Os of a job only with continue_on_error.
            if spec.continue_on_error {
                job["total_err"] = t.errors.into();
                job["first_error"] = if t.errors > 0 { 5 } else { 0 }.into();
            }
            job
        })
        .collect();
    json!({
        "fio version": concat!("nvme-bypass-", env!("CARGO_PKG_VERSION")),
        "timestamp": now_ms / 1000,
        "timestamp_ms": now_ms,
        "time": super::fmt::fio_date((now_ms / 1000) as i64),
        "global options": job_options(spec, &s.backend),
        "jobs": jobs,
        "nvme_bypass": s.to_json(),
    })
}

fn job_options(spec: &JobSpec, backend: &str) -> Value {
    json!({
        "ioengine": backend,
        "rw": spec.rw.as_str(),
        "bs": spec.bs.to_string(),
        "iodepth": spec.iodepth.to_string(),
        "rwmixread": spec.rwmixread.to_string(),
        "numjobs": spec.numjobs.to_string(),
        "offset": spec.offset.to_string(),
        "size": spec.size.to_string(),
        "runtime": spec.runtime.map_or_else(|| "0".into(), fio_time),
        "ramp_time": fio_time(spec.ramp),
        "verify": if spec.verify.is_some() { "crc32c" } else { "0" },
    })
}

/// Now, in milliseconds since the epoch (fio's `job_start` clock).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A time option's value as fio's parser reads it back: whole seconds
/// bare ("2"), anything finer in ms or us ("1500ms", "250us"); fio would
/// read "1.5" as 1 s.
fn fio_time(d: std::time::Duration) -> String {
    match (d.subsec_nanos(), d.as_micros()) {
        (0, _) => d.as_secs().to_string(),
        (n, _) if n % 1_000_000 == 0 => format!("{}ms", d.as_millis()),
        (_, us) => format!("{us}us"),
    }
}

/// fio's keys of `iodepth_level` and of `iodepth_submit` / `_complete`.
pub const DEPTH_KEYS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
pub const BATCH_KEYS: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];

/// One of fio's I/O depth maps (`iodepth_level`, `_submit`, `_complete`):
/// each slot's share in percent ([`IoDepths`](crate::engine::job::IoDepths)).
fn depth_map(keys: &[&str; 7], map: &[u64; 7]) -> Value {
    let pct = crate::engine::job::IoDepths::percentages(map);
    keys.iter().zip(pct).map(|(k, p)| (k.to_string(), Value::from(p))).collect::<serde_json::Map<_, _>>().into()
}

/// min, max, mean, sample standard deviation of `v` (all 0 when empty,
/// as fio reports a direction with no samples).
pub fn sample_stats(v: &[f64]) -> (f64, f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (v.iter().cloned().fold(f64::INFINITY, f64::min), v.iter().cloned().fold(0.0, f64::max), mean, var.sqrt())
}

/// One direction's bandwidth (KiB/s) and IOPS samples, as fio takes them:
/// the thread's 500 ms intervals (`ThreadResult::samples`), each that
/// direction's I/Os in it over the interval's whole milliseconds, in
/// integers as fio's `__add_samples` computes them; an interval without
/// I/Os in the direction is no sample (fio: "no entries for interval").
/// `write` false: reads.
fn dir_samples(d: &DirSummary, samples: &[crate::engine::job::Sample], write: bool) -> (Vec<f64>, Vec<f64>) {
    if d.ios == 0 {
        return (vec![], vec![]);
    }
    let bs = d.bytes / d.ios;
    samples
        .iter()
        .filter(|x| x.ns >= 1_000_000 && x.dir_ios(write) > 0)
        .map(|x| {
            let (ios, ms) = (x.dir_ios(write), x.ns / 1_000_000);
            ((ios * bs * 1000 / ms / 1024) as f64, (ios * 1000 / ms) as f64)
        })
        .unzip()
}

/// The statistics of a set of samples as fio keeps them (`struct io_stat`):
/// min, max, mean, standard deviation, count.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampleStats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub dev: f64,
    pub n: usize,
}

impl SampleStats {
    pub fn of(v: &[f64]) -> SampleStats {
        let (min, max, mean, dev) = sample_stats(v);
        SampleStats { min, max, mean, dev, n: v.len() }
    }

    /// Clones' statistics as fio's group_reporting sums them
    /// (`sum_stat(.., pure_sum = true)` for bandwidth and IOPS): min, max,
    /// mean and the sums of squared deviations added, the counts added.
    fn pure_sum(all: &[SampleStats]) -> SampleStats {
        let live: Vec<&SampleStats> = all.iter().filter(|s| s.n > 0).collect();
        let n: usize = live.iter().map(|s| s.n).sum();
        let s: f64 = live.iter().map(|s| s.dev * s.dev * (s.n as f64 - 1.0)).sum();
        SampleStats {
            min: live.iter().map(|s| s.min).sum(),
            max: live.iter().map(|s| s.max).sum(),
            mean: live.iter().map(|s| s.mean).sum(),
            dev: if n > 1 { (s / (n as f64 - 1.0)).sqrt() } else { 0.0 },
            n,
        }
    }
}

/// One direction's bandwidth (KiB/s) and IOPS sample statistics, fio's:
/// over the thread's samples ([`dir_samples`]), or, for the clones of a
/// group_reporting entry (`ThreadResult::clone_samples`), each clone's
/// summed as fio sums them.
pub fn dir_sample_stats(d: &DirSummary, t: &ThreadResult, write: bool) -> (SampleStats, SampleStats) {
    if t.clone_samples.is_empty() {
        let (bw, iops) = dir_samples(d, &t.samples, write);
        return (SampleStats::of(&bw), SampleStats::of(&iops));
    }
    let (bw, iops): (Vec<_>, Vec<_>) = t
        .clone_samples
        .iter()
        .map(|s| {
            let (bw, iops) = dir_samples(d, s, write);
            (SampleStats::of(&bw), SampleStats::of(&iops))
        })
        .unzip();
    (SampleStats::pure_sum(&bw), SampleStats::pure_sum(&iops))
}

/// fio's `per=` and `bw_agg`: a mean bandwidth sample (KiB/s, taken as a
/// whole number as fio passes it) as a percentage of the group's aggregate
/// bandwidth in that direction (bytes/s), at most 100; 100 when that is
/// 1 KiB/s or less.
pub fn percent_of_agg(mean_kib: f64, agg_bytes: f64) -> f64 {
    if agg_bytes > 1024.0 {
        (mean_kib.trunc() * 100.0 / (agg_bytes / 1024.0)).min(100.0)
    } else {
        100.0
    }
}

/// One direction's block (`read`, `write`, `trim`) of a fio job. The
/// bandwidth and IOPS sample statistics are fio's ([`dir_sample_stats`]);
/// `bw_agg` is the mean as a percentage of `group_bw` (bytes/s, the run's
/// bandwidth in this direction).
fn dir_json(d: &DirSummary, t: &ThreadResult, group_bw: f64, write: bool) -> Value {
    let (bw, iops) = dir_sample_stats(d, t, write);
    let SampleStats { min: bmin, max: bmax, mean: bmean, dev: bdev, .. } = bw;
    let SampleStats { min: imin, max: imax, mean: imean, dev: idev, .. } = iops;
    let agg = if bw.n == 0 { 0.0 } else { percent_of_agg(bmean, group_bw) };
    // fio gives percentiles of the completion latency (clat_percentiles=1)
    // and not of the total (lat_percentiles=0), and none for a direction
    // without samples. Without clat measured apart, clat_ns holds the one
    // latency (submission to reap), so fio's tools find its percentiles.
    let no_percentiles = |l: &crate::measure::stats::LatSummary| {
        let mut v = serde_json::to_value(l).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.remove("percentile");
        }
        v
    };
    let mut clat = serde_json::to_value(d.clat_ns.as_ref().unwrap_or(&d.lat_ns)).unwrap_or_default();
    let lat = no_percentiles(&d.lat_ns);
    let slat = match d.slat_ns.as_ref().filter(|s| s.n > 0) {
        Some(s) => no_percentiles(s),
        None => json!({"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}),
    };
    if d.ios == 0 {
        if let Some(o) = clat.as_object_mut() {
            o.remove("percentile");
        }
    }
    json!({
        "io_bytes": d.bytes,
        "io_kbytes": d.bytes / 1024,
        "bw_bytes": d.bw_bytes as u64,
        "bw": (d.bw_bytes / 1024.0) as u64,
        "iops": d.iops,
        "runtime": if d.ios == 0 { 0 } else { fio_ms(t.elapsed_ns) },
        "total_ios": d.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": slat,
        "clat_ns": clat,
        "lat_ns": lat,
        "bw_min": bmin as u64,
        "bw_max": bmax as u64,
        "bw_agg": agg,
        "bw_mean": bmean,
        "bw_dev": bdev,
        "bw_samples": bw.n,
        "iops_min": imin as u64,
        "iops_max": imax as u64,
        "iops_mean": imean,
        "iops_stddev": idev,
        "iops_samples": iops.n,
    })
}

#[cfg(test)]
mod tests {
    use super::SampleStats;

    #[test]
    fn runtimes_round_up_to_the_millisecond_as_fios() {
        // fio's update_runtime: (elapsed_us + 999) / 1000.
        assert_eq!([0, 1, 400_000, 1_000_000, 1_000_001, 2_681_000_000].map(super::fio_ms), [0, 1, 1, 1, 2, 2681]);
    }

    #[test]
    fn clones_statistics_are_summed_as_fios_group_reporting_sums_them() {
        let a = SampleStats::of(&[100.0, 110.0, 120.0]);
        let b = SampleStats::of(&[200.0, 220.0]);
        let g = SampleStats::pure_sum(&[a, b]);
        assert_eq!((g.min, g.max, g.mean, g.n), (300.0, 340.0, 320.0, 5));
        // S = 200 (a: var 100 x 2) + 200 (b: var 200 x 1); sqrt(400 / 4).
        assert!((g.dev - 10.0).abs() < 1e-9, "{}", g.dev);
        assert_eq!(SampleStats::pure_sum(&[a, SampleStats::default()]), a, "a clone without samples adds nothing");
    }
}
