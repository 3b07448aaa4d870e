//! The JSON report of one run, shaped like fio's `--output-format=json`
//! (`jobs[]` with `read`/`write` blocks holding `iops`, `bw`,
//! `clat_ns`/`lat_ns` with `percentile`, `usr_cpu`/`sys_cpu`), so tools that
//! read fio results read ours; our own figures sit beside them under
//! `nvme_bypass`.

use super::summary::{DirSummary, RunSummary};
use crate::engine::{JobSpec, ThreadResult};
use serde_json::{json, Value};

/// The JSON report of one run, shaped like fio's.
pub fn fio_json(s: &RunSummary, spec: &JobSpec, threads: &[ThreadResult]) -> Value {
    let jobs: Vec<Value> = threads
        .iter()
        .map(|t| {
            let ts = RunSummary::new(s.backend.clone(), vec![], std::slice::from_ref(t), &s.clock);
            let el = t.elapsed_ns.max(1) as f64;
            let mut cpu_accounting = serde_json::to_value(&ts.cpu).unwrap_or_default();
            super::summary::name_thread_ceiling(&mut cpu_accounting);
            json!({
                "jobname": format!("{}-{}", s.backend, t.thread),
                "groupid": 0,
                "error": if t.errors > 0 { 5 } else { 0 },
                "total_err": t.errors,
                "eta": 0,
                "elapsed": (t.elapsed_ns / 1_000_000_000).max(1),
                "job options": job_options(spec, &s.backend),
                "read": dir_json(&ts.read, t.elapsed_ns),
                "write": dir_json(&ts.write, t.elapsed_ns),
                "trim": dir_json(&DirSummary::default(), t.elapsed_ns),
                "job_runtime": t.elapsed_ns / 1_000_000,
                "usr_cpu": 100.0 * t.cpu_time.user_ns as f64 / el,
                "sys_cpu": 100.0 * t.cpu_time.sys_ns as f64 / el,
                "ctx": 0,
                "majf": 0,
                "minf": 0,
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
            })
        })
        .collect();
    json!({
        "fio version": concat!("nvme-bypass-", env!("CARGO_PKG_VERSION")),
        "timestamp": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
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
        "runtime": spec.runtime.map(|r| format!("{}", r.as_secs_f64())),
        "ramp_time": format!("{}", spec.ramp.as_secs_f64()),
        "verify": spec.verify.map(|_| "crc32c"),
    })
}

/// One direction's block (`read`, `write`, `trim`) of a fio job.
fn dir_json(d: &DirSummary, elapsed_ns: u64) -> Value {
    json!({
        "io_bytes": d.bytes,
        "io_kbytes": d.bytes / 1024,
        "bw_bytes": d.bw_bytes as u64,
        "bw": (d.bw_bytes / 1024.0) as u64,
        "iops": d.iops,
        "runtime": elapsed_ns / 1_000_000,
        "total_ios": d.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "errors": d.errors,
        "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
        "clat_ns": d.lat_ns,
        "lat_ns": d.lat_ns,
    })
}
