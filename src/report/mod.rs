//! Reports: text for people in fio's layout, and JSON shaped like fio's
//! `--output-format=json` (`jobs[]` with `read`/`write` blocks holding
//! `iops`, `bw`, `clat_ns`/`lat_ns` with `percentile`, `usr_cpu`/`sys_cpu`),
//! so tools that read fio results read ours; our own figures sit beside
//! them under `nvme_bypass`.

use crate::engine::{DirResult, JobSpec, ThreadResult};
use crate::measure::cpu::{self, ThreadCpu};
pub use crate::measure::cpu::{CpuSummary, SystemSummary};
use crate::measure::stats::{new_histogram, LatSummary};
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Text for people.
    Normal,
    /// JSON shaped like fio's --output-format=json.
    Json,
}

/// Per-direction summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DirSummary {
    /// I/Os.
    pub ios: u64,
    /// Bytes.
    pub bytes: u64,
    /// I/Os per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Latency, ns.
    pub lat_ns: LatSummary,
}

impl DirSummary {
    fn of(d: &DirResult, elapsed_ns: u64) -> Self {
        let secs = elapsed_ns.max(1) as f64 / 1e9;
        DirSummary {
            ios: d.ios,
            bytes: d.bytes,
            iops: d.ios as f64 / secs,
            bw_bytes: d.bytes as f64 / secs,
            lat_ns: LatSummary::of(&d.lat),
        }
    }
    fn fio_json(&self, elapsed_ns: u64) -> Value {
        json!({
            "io_bytes": self.bytes,
            "io_kbytes": self.bytes / 1024,
            "bw_bytes": self.bw_bytes as u64,
            "bw": (self.bw_bytes / 1024.0) as u64,
            "iops": self.iops,
            "runtime": elapsed_ns / 1_000_000,
            "total_ios": self.ios,
            "short_ios": 0,
            "drop_ios": 0,
            "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
            "clat_ns": self.lat_ns,
            "lat_ns": self.lat_ns,
        })
    }
}

/// One run of one path, summarized.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// Path name.
    pub backend: String,
    /// True when the device is emulated (QEMU or the simulator).
    pub emulated: bool,
    /// Why it is emulated, in words.
    pub emulated_note: Option<String>,
    /// Facts about the target.
    pub target: Vec<(String, String)>,
    /// Threads.
    pub threads: usize,
    /// Measured wall time, ns (longest thread).
    pub elapsed_ns: u64,
    /// Reads.
    pub read: DirSummary,
    /// Writes.
    pub write: DirSummary,
    /// All I/Os per second.
    pub iops: f64,
    /// All bytes per second.
    pub bw_bytes: f64,
    /// Latency of all I/Os, ns.
    pub lat_ns: LatSummary,
    /// CPU accounting of the benchmark threads.
    pub cpu: CpuSummary,
    /// Doorbell / syscall counters per I/O.
    pub sq_doorbells_per_io: f64,
    /// Completion doorbells per I/O.
    pub cq_doorbells_per_io: f64,
    /// MMIO writes per I/O.
    pub mmio_writes_per_io: f64,
    /// System calls per I/O.
    pub syscalls_per_io: f64,
    /// Completions rejected as protocol errors.
    pub rejected_completions: u64,
    /// Blocks verified / mismatched.
    pub verified_blocks: u64,
    /// Mismatches.
    pub mismatches: u64,
    /// The first mismatch.
    pub first_mismatch: Option<String>,
    /// Failed I/Os.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Stopped by a signal.
    pub interrupted: bool,
    /// Clock used for latencies.
    pub clock: String,
    /// Core-to-core cache line latency before / after the run (simulator), ns.
    pub core_to_core_ns: Option<(Option<f64>, Option<f64>)>,
    /// Right after the run (simulator): the driver's CPU's multiply speed
    /// while the simulator's CPU multiplies too, over its speed while that
    /// CPU only pauses (`c2c::core_share`); clearly under 1 means the two
    /// share a core.
    pub core_share: Option<crate::measure::c2c::CoreShare>,
    /// System-wide CPU over the measured interval (/proc/stat deltas), so
    /// interrupt and softirq completion work on other cores counts.
    pub system: Option<SystemSummary>,
}

impl RunSummary {
    /// Summarize thread results.
    pub fn new(backend: String, target: Vec<(String, String)>, threads: &[ThreadResult], clock: &str) -> Self {
        let per_thread: Vec<ThreadCpu> = threads.iter().map(thread_cpu).collect();
        let elapsed_ns = threads.iter().map(|t| t.elapsed_ns).max().unwrap_or(0);
        let mut read = DirResult::default();
        let mut write = DirResult::default();
        for t in threads {
            read.add(&t.read);
            write.add(&t.write);
        }
        let mut lat = new_histogram();
        lat.add(&read.lat).unwrap();
        lat.add(&write.lat).unwrap();
        let ios: u64 = threads.iter().map(|t| t.ios()).sum();
        let per = |x: u64| if ios == 0 { 0.0 } else { x as f64 / ios as f64 };
        let secs = elapsed_ns.max(1) as f64 / 1e9;
        RunSummary {
            backend,
            emulated: false,
            emulated_note: None,
            target,
            threads: threads.len(),
            elapsed_ns,
            iops: ios as f64 / secs,
            bw_bytes: (read.bytes + write.bytes) as f64 / secs,
            read: DirSummary::of(&read, elapsed_ns),
            write: DirSummary::of(&write, elapsed_ns),
            lat_ns: LatSummary::of(&lat),
            cpu: CpuSummary::of(&per_thread),
            sq_doorbells_per_io: per(threads.iter().map(|t| t.counters.sq_doorbells).sum()),
            cq_doorbells_per_io: per(threads.iter().map(|t| t.counters.cq_doorbells).sum()),
            mmio_writes_per_io: per(threads.iter().map(|t| t.counters.mmio_writes).sum()),
            syscalls_per_io: per(threads.iter().map(|t| t.counters.syscalls).sum()),
            rejected_completions: threads.iter().map(|t| t.counters.rejected_completions).sum(),
            verified_blocks: threads.iter().map(|t| t.verified_blocks).sum(),
            mismatches: threads.iter().map(|t| t.mismatches).sum(),
            first_mismatch: threads.iter().find_map(|t| t.first_mismatch.clone()),
            errors: threads.iter().map(|t| t.errors).sum(),
            first_error: threads.iter().find_map(|t| t.first_error.clone()),
            interrupted: threads.iter().any(|t| t.interrupted),
            clock: clock.into(),
            core_to_core_ns: None,
            core_share: None,
            system: threads.iter().find_map(|t| t.system_cpu).map(|c| SystemSummary::of(c, &per_thread, elapsed_ns)),
        }
    }

    /// The per-core ceiling at the useful cost (compare's and sweep's
    /// `ceiling`); None without system-wide figures.
    pub fn useful_ceiling_iops(&self) -> Option<f64> {
        cpu::useful_ceiling(&self.cpu, self.system.as_ref())
    }
}

/// What the CPU accounting needs of one thread's results.
fn thread_cpu(t: &ThreadResult) -> ThreadCpu {
    ThreadCpu {
        ios: t.ios(),
        elapsed_ns: t.elapsed_ns,
        user_ns: t.cpu_time.user_ns,
        sys_ns: t.cpu_time.sys_ns,
        cpu_ns: t.cpu_ns,
        polls: t.polls,
        empty_polls: t.empty_polls,
        empty_poll_ns: t.empty_poll_ns,
    }
}

fn si(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn bw(bytes_per_s: f64) -> String {
    let mib = bytes_per_s / (1 << 20) as f64;
    if mib >= 1024.0 {
        format!("{:.2}GiB/s ({:.2}GB/s)", mib / 1024.0, bytes_per_s / 1e9)
    } else {
        format!("{mib:.1}MiB/s ({:.1}MB/s)", bytes_per_s / 1e6)
    }
}

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
    for (k, v) in &s.target {
        o.push_str(&format!("  {k}: {v}\n"));
    }
    let secs = s.elapsed_ns as f64 / 1e9;
    for (name, d) in [("read", &s.read), ("write", &s.write)] {
        if d.ios == 0 {
            continue;
        }
        o.push_str(&format!(
            "  {name}: IOPS={}, BW={}({}B/{:.1}s)\n",
            si(d.iops),
            bw(d.bw_bytes),
            si(d.bytes as f64),
            secs
        ));
        lat_lines(&mut o, "lat", &d.lat_ns);
    }
    let c = &s.cpu;
    o.push_str(&format!(
        "  cpu          : usr={:.2}%, sys={:.2}% (of {} thread{} x {:.2}s)\n",
        100.0 * c.user_ns as f64 / (s.elapsed_ns.max(1) * s.threads as u64) as f64,
        100.0 * c.sys_ns as f64 / (s.elapsed_ns.max(1) * s.threads as u64) as f64,
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        secs
    ));
    o.push_str(&format!(
        "  cpu per I/O  : {:.1} ns raw (usr {:.1}, sys {:.1}); {:.1} ns useful = raw less the share of time in empty polls ({} of {} polls, {:.1}% of the time)\n",
        c.cpu_ns_per_io, c.user_ns_per_io, c.sys_ns_per_io, c.useful_cpu_ns_per_io, c.empty_polls, c.polls, c.empty_poll_pct
    ));
    if c.ceiling_iops_per_core > 0.0 {
        o.push_str(&format!("  ceiling      : {} IOPS per core at the useful cost\n", si(c.ceiling_iops_per_core)));
    }
    if let Some(sy) = &s.system {
        o.push_str(&format!(
            "  system-wide  : {:.2} cores busy; per I/O {:.1} ns (usr {:.1}, kernel {:.1} incl. irq {:.1} + softirq {:.1}); {} IOPS per busy core\n",
            sy.cores_busy,
            sy.busy_ns_per_io,
            sy.user_ns_per_io,
            sy.kernel_ns_per_io,
            sy.irq_ns_per_io,
            sy.softirq_ns_per_io,
            si(sy.iops_per_busy_core)
        ));
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

/// The JSON report of one run, shaped like fio's.
pub fn fio_json(s: &RunSummary, spec: &JobSpec, threads: &[ThreadResult]) -> Value {
    let jobs: Vec<Value> = threads
        .iter()
        .map(|t| {
            let ts = RunSummary::new(s.backend.clone(), vec![], std::slice::from_ref(t), &s.clock);
            let el = t.elapsed_ns.max(1) as f64;
            json!({
                "jobname": format!("{}-{}", s.backend, t.thread),
                "groupid": 0,
                "error": if t.errors > 0 { 5 } else { 0 },
                "eta": 0,
                "elapsed": (t.elapsed_ns / 1_000_000_000).max(1),
                "job options": job_options(spec, &s.backend),
                "read": ts.read.fio_json(t.elapsed_ns),
                "write": ts.write.fio_json(t.elapsed_ns),
                "trim": DirSummary::default().fio_json(t.elapsed_ns),
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
                    "cpu_accounting": ts.cpu,
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
        "nvme_bypass": s,
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
