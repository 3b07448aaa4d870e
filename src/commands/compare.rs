//! `nvme-bypass compare`: the project's main job. The same workload on the
//! same namespace through every path, one after another in one process, and
//! one side-by-side table: IOPS, bandwidth, latency percentiles, CPU per I/O
//! split user/kernel, cores busy, IOPS per busy core, and the headline: how
//! far the per-core ceiling moved from the block layer to passthrough to our
//! userspace driver.
//!
//! The controller is moved to vfio-pci only for the vfio rows and given back
//! to its original driver afterwards, also after an error or Ctrl-C (the
//! binding guard restores on drop). Scheduler changes are restored the same way.

use crate::backend::kernel::{IoEngine, KernelOptions};
use crate::backend::Target;
use crate::error::{exit, Error};
use crate::report::OutputFormat;
use crate::measure::clock::Clock;
use crate::engine::{self, JobSpec, Stop, ThreadResult};
use crate::report::RunSummary;
use crate::measure::topology::{self, Topology};
use crate::engine::workload::Rw;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One row of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Variant {
    /// Row label.
    pub label: String,
    /// Which path.
    pub path: PathKind,
    /// Kernel path options (ignored for vfio).
    #[serde(skip)]
    pub kernel: Option<KernelOptions>,
    /// I/O scheduler to set on the block device for this row.
    pub scheduler: Option<String>,
    /// What the row shows, in a few words.
    pub note: String,
}

/// The three paths (and the simulator, for runs without hardware).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PathKind {
    /// Kernel block layer.
    Block,
    /// io_uring NVMe passthrough.
    Passthru,
    /// Our userspace driver over VFIO.
    Vfio,
}

/// Options of `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// The controller (PCI address) or one of its namespace devices (/dev/nvme0n1, /dev/ng0n1).
    #[arg(long)]
    pub device: String,
    /// Namespace ID.
    #[arg(long, default_value_t = 1)]
    pub nsid: u32,
    /// Rows to run, comma separated, from: block, libaio, psync, passthru, vfio, buffered, sched
    /// (mq-deadline against none), best (each path's best variant). Default: all that apply.
    #[arg(long, value_delimiter = ',')]
    pub paths: Option<Vec<String>>,
    /// Access pattern.
    #[arg(long, value_enum, default_value = "randread")]
    pub rw: Rw,
    /// Block size.
    #[arg(long, default_value = "4k", value_parser = crate::cli::parse::parse_size)]
    pub bs: u64,
    /// I/Os in flight per thread.
    #[arg(long, default_value_t = 32)]
    pub iodepth: usize,
    /// Percentage of reads in mixed patterns.
    #[arg(long, default_value_t = 50)]
    pub rwmixread: u8,
    /// Measured time per row.
    #[arg(long, default_value = "5", value_parser = crate::cli::parse::parse_duration)]
    pub runtime: Duration,
    /// Warm-up per row.
    #[arg(long, default_value = "1", value_parser = crate::cli::parse::parse_duration)]
    pub ramp_time: Duration,
    /// First byte of the region.
    #[arg(long, default_value = "0", value_parser = crate::cli::parse::parse_size)]
    pub offset: u64,
    /// Bytes of the region (default: the whole namespace from --offset).
    #[arg(long, value_parser = crate::cli::parse::parse_size)]
    pub size: Option<u64>,
    /// Threads per row, each with its own queue pair or ring.
    #[arg(long, default_value_t = 1)]
    pub numjobs: usize,
    /// Pin threads to these CPUs.
    #[arg(long, value_parser = crate::cli::parse::parse_cpus)]
    pub cpus: Option<crate::cli::parse::CpuList>,
    /// Allow writing to the device (needed for write patterns).
    #[arg(long)]
    pub allow_write: bool,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    /// Folder for table.txt and compare.json (created).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The result of one row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// What ran.
    pub variant: Variant,
    /// The run's summary, when it ran.
    pub summary: Option<RunSummary>,
    /// Why it did not run or failed.
    pub error: Option<String>,
    /// IOPS per busy core (system-wide CPU).
    pub iops_per_busy_core: Option<f64>,
    /// Per-core ceiling at the useful cost: 1 s / (system-wide CPU per I/O
    /// minus empty-poll time per I/O).
    pub useful_ceiling_iops: Option<f64>,
    /// iops_per_busy_core relative to the baseline row.
    pub ratio_vs_baseline: Option<f64>,
    /// useful_ceiling_iops relative to the baseline row.
    pub useful_ratio_vs_baseline: Option<f64>,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Tool version.
    pub version: &'static str,
    /// Emulated? Why.
    pub emulated: Option<String>,
    /// Device names.
    pub topology: Topology,
    /// Workload.
    pub workload: serde_json::Value,
    /// Rows in run order.
    pub rows: Vec<Row>,
    /// Baseline row label.
    pub baseline: String,
    /// One line per path: how far the per-core ceiling moved.
    pub headline: Vec<String>,
    /// Driver of the controller before and after the run.
    pub driver_before: Option<String>,
    /// Driver after.
    pub driver_after: Option<String>,
}

fn kopts(t: &Topology, dev: &Path, engine: IoEngine) -> KernelOptions {
    KernelOptions { device: dev.display().to_string(), nsid: t.nsid, ioengine: engine, ..Default::default() }
}

/// A kernel path at its best, as Axboe's per-core records ran it: fixed
/// buffers, registered file and ring fd, single issuer with deferred task
/// work, and polled completions when nvme has poll queues.
fn best_variant(label: &str, path: PathKind, t: &Topology, dev: &Path) -> Variant {
    let mut k = kopts(t, dev, IoEngine::IoUring);
    k.fixedbufs = true;
    k.registerfiles = true;
    k.register_ring = true;
    k.defer_taskrun = true;
    k.hipri = poll_queues_available();
    Variant {
        label: label.into(),
        path,
        kernel: Some(k),
        scheduler: None,
        note: format!(
            "fixed buffers, registered file and ring fd, single issuer + deferred task work{}",
            if poll_queues_available() { ", polled (IOPOLL)" } else { "; no poll queues for IOPOLL" }
        ),
    }
}

fn poll_queues_available() -> bool {
    std::fs::read_to_string("/sys/module/nvme/parameters/poll_queues")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(|n| n > 0)
}

fn schedulers(block: &Path) -> Vec<String> {
    let name = block.file_name().and_then(|n| n.to_str()).unwrap_or("");
    std::fs::read_to_string(format!("/sys/block/{name}/queue/scheduler"))
        .map(|s| s.split_whitespace().map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string()).collect())
        .unwrap_or_default()
}

/// The rows `args` asks for, in run order (kernel paths first, vfio last so
/// the controller moves once).
pub fn plan(args: &CompareArgs, t: &Topology) -> (Vec<Variant>, Vec<String>) {
    plan_paths(args.paths.as_deref(), t)
}

/// [`plan`] for a list of row names (None: all that apply); also used by `sweep`.
pub(crate) fn plan_paths(paths: Option<&[String]>, t: &Topology) -> (Vec<Variant>, Vec<String>) {
    let all = ["block", "libaio", "passthru", "vfio", "buffered", "sched", "best"];
    let want: Vec<String> = paths.map(<[String]>::to_vec).unwrap_or_else(|| all.iter().map(|s| s.to_string()).collect());
    let has = |p: &str| want.iter().any(|w| w == p);
    let mut v = vec![];
    let mut skipped = vec![];
    if let Some(b) = &t.block {
        if has("block") {
            v.push(Variant { label: "block/io_uring".into(), path: PathKind::Block, kernel: Some(kopts(t, b, IoEngine::IoUring)), scheduler: None, note: "O_DIRECT, interrupts (baseline)".into() });
        }
        if has("libaio") {
            v.push(Variant { label: "block/libaio".into(), path: PathKind::Block, kernel: Some(kopts(t, b, IoEngine::Libaio)), scheduler: None, note: "O_DIRECT, the classic fio engine".into() });
        }
        if has("psync") {
            v.push(Variant { label: "block/psync".into(), path: PathKind::Block, kernel: Some(kopts(t, b, IoEngine::Psync)), scheduler: None, note: "pread/pwrite, one I/O per thread".into() });
        }
        if has("buffered") {
            let mut k = kopts(t, b, IoEngine::IoUring);
            k.buffered = true;
            v.push(Variant { label: "block/io_uring buffered".into(), path: PathKind::Block, kernel: Some(k), scheduler: None, note: "page cache instead of O_DIRECT (caches dropped first)".into() });
        }
        if has("sched") {
            let s = schedulers(b);
            if s.iter().any(|x| x == "mq-deadline") && s.iter().any(|x| x == "none") {
                for sched in ["none", "mq-deadline"] {
                    v.push(Variant {
                        label: format!("block/io_uring sched={sched}"),
                        path: PathKind::Block,
                        kernel: Some(kopts(t, b, IoEngine::IoUring)),
                        scheduler: Some(sched.into()),
                        note: format!("I/O scheduler {sched} (restored after)"),
                    });
                }
            } else {
                skipped.push(format!(
                    "sched: {} has no choice of I/O scheduler ({}); a multipath head has none: boot with nvme_core.multipath=N",
                    b.display(),
                    if s.is_empty() { "no scheduler file".to_string() } else { s.join(" ") }
                ));
            }
        }
        if has("best") {
            v.push(best_variant("block/io_uring best", PathKind::Block, t, b));
        }
    } else if want.iter().any(|w| matches!(w.as_str(), "block" | "libaio" | "psync" | "buffered" | "sched")) {
        skipped.push("block rows: no block device for this namespace (is the controller bound to nvme?)".into());
    }
    if let Some(g) = &t.generic {
        if has("passthru") {
            v.push(Variant { label: "passthru".into(), path: PathKind::Passthru, kernel: Some(kopts(t, g, IoEngine::IoUring)), scheduler: None, note: "io_uring URING_CMD, interrupts".into() });
        }
        if has("best") {
            v.push(best_variant("passthru best", PathKind::Passthru, t, g));
        }
    } else if has("passthru") {
        skipped.push("passthru: no /dev/ngXnY for this namespace (kernel older than 5.19, or controller not on nvme)".into());
    }
    if has("vfio") {
        if t.bdf.is_some() {
            v.push(Variant { label: "vfio".into(), path: PathKind::Vfio, kernel: None, scheduler: None, note: "userspace driver, polled, shadow doorbells when offered".into() });
            if has("best") || has("interrupts") {
                v.push(Variant {
                    label: "vfio interrupts".into(),
                    path: PathKind::Vfio,
                    kernel: None,
                    scheduler: None,
                    note: "userspace driver, MSI-X interrupts through VFIO eventfds: the thread sleeps when idle".into(),
                });
            }
            if has("best") || has("mmio") {
                v.push(Variant {
                    label: "vfio mmio doorbells".into(),
                    path: PathKind::Vfio,
                    kernel: None,
                    scheduler: None,
                    note: "userspace driver, polled, every doorbell an MMIO write (no shadow doorbells)".into(),
                });
            }
        } else {
            skipped.push("vfio: no PCI address for this device".into());
        }
    }
    (v, skipped)
}

/// Sets a block device's scheduler and puts the old one back on drop.
struct SchedulerGuard {
    file: PathBuf,
    old: String,
}

impl SchedulerGuard {
    fn set(block: &Path, sched: &str) -> Result<Self, Error> {
        let name = block.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let file = PathBuf::from(format!("/sys/block/{name}/queue/scheduler"));
        let cur = std::fs::read_to_string(&file).map_err(|e| Error::io(format!("read {}", file.display()), e))?;
        let old = cur
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
            .unwrap_or_else(|| "none".into());
        std::fs::write(&file, sched).map_err(|e| Error::io(format!("set scheduler {sched} in {}", file.display()), e))?;
        Ok(SchedulerGuard { file, old })
    }
}

impl Drop for SchedulerGuard {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.file, &self.old) {
            eprintln!("nvme-bypass: warning: could not restore scheduler {} in {}: {e}", self.old, self.file.display());
        }
    }
}

fn drop_caches() {
    // SAFETY-free: sync then drop clean page cache so buffered reads start cold.
    let _ = std::process::Command::new("sync").status();
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
}

fn open_variant(v: &Variant, t: &Topology, numjobs: usize) -> Result<Box<dyn Target>, Error> {
    let r = match v.path {
        PathKind::Block => crate::backend::kernel::block::open(v.kernel.as_ref().unwrap()),
        PathKind::Passthru => crate::backend::kernel::passthru::open(v.kernel.as_ref().unwrap()),
        PathKind::Vfio => crate::backend::userspace::vfio::open(&crate::backend::userspace::vfio::VfioOptions {
            bdf: t.bdf.clone().unwrap_or_default(),
            nsid: t.nsid,
            queues: numjobs as u16,
            shadow_doorbells: !v.label.contains("mmio doorbells"),
            interrupts: v.label.contains("interrupts"),
            streaming_sq: true,
        }),
    };
    Ok(r?)
}

/// Run one row: open its path, run `spec`, summarize (emulation carried from `t`).
pub(crate) fn run_variant(v: &Variant, t: &Topology, spec: &JobSpec, clock: Clock, status: bool) -> Result<(RunSummary, Vec<ThreadResult>), Error> {
    let _sched = match (&v.scheduler, &t.block) {
        (Some(s), Some(b)) => Some(SchedulerGuard::set(b, s)?),
        _ => None,
    };
    if v.kernel.as_ref().is_some_and(|k| k.buffered) {
        drop_caches();
    }
    let target = open_variant(v, t, spec.numjobs)?;
    let geo = target.geometry();
    let mut spec = spec.clone();
    if spec.size == 0 {
        spec.size = geo.bytes().saturating_sub(spec.offset);
    }
    engine::validate(&spec, &geo)?;
    let threads = engine::run(&*target, &spec, clock, status)?;
    let mut s = RunSummary::new(v.label.clone(), target.describe(), &threads, clock.source());
    s.emulated = t.emulated.is_some();
    s.emulated_note = t.emulated.clone();
    Ok((s, threads))
}

/// The per-core ceiling at the useful cost: 1 s / (system-wide busy CPU per
/// I/O less what the benchmark threads spent in empty polls, i.e. raw minus
/// useful thread CPU). None without system-wide figures.
pub(crate) fn useful_ceiling(s: &RunSummary) -> Option<f64> {
    s.system.as_ref().and_then(|y| {
        let useful = y.busy_ns_per_io - (s.cpu.cpu_ns_per_io - s.cpu.useful_cpu_ns_per_io);
        (useful > 0.0).then(|| 1e9 / useful)
    })
}

/// Fill the derived columns and the headline.
fn finish(rows: &mut [Row], baseline: &str) -> Vec<String> {
    for r in rows.iter_mut() {
        if let Some(s) = &r.summary {
            r.iops_per_busy_core = s.system.as_ref().map(|y| y.iops_per_busy_core);
            r.useful_ceiling_iops = useful_ceiling(s);
        }
    }
    let base = rows.iter().find(|r| r.variant.label == baseline).cloned();
    let mut headline = vec![];
    for r in rows.iter_mut() {
        if let (Some(b), Some(x)) = (base.as_ref().and_then(|b| b.iops_per_busy_core), r.iops_per_busy_core) {
            r.ratio_vs_baseline = Some(x / b);
        }
        if let (Some(b), Some(x)) = (base.as_ref().and_then(|b| b.useful_ceiling_iops), r.useful_ceiling_iops) {
            r.useful_ratio_vs_baseline = Some(x / b);
        }
        if r.variant.label != baseline {
            if let (Some(a), Some(u)) = (r.ratio_vs_baseline, r.useful_ratio_vs_baseline) {
                headline.push(format!(
                    "{}: {:.2}x the IOPS per busy core of {baseline}; {:.2}x its per-core ceiling at useful cost (empty polls excluded)",
                    r.variant.label, a, u
                ));
            }
        }
    }
    headline
}

fn us(ns: u64) -> String {
    if ns >= 100_000 {
        format!("{:.0}", ns as f64 / 1000.0)
    } else {
        format!("{:.1}", ns as f64 / 1000.0)
    }
}

fn k(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// The side-by-side table.
pub fn table(c: &Comparison) -> String {
    let mut o = String::new();
    if let Some(e) = &c.emulated {
        o.push_str(&format!("EMULATED: {e}\n"));
    }
    o.push_str(&format!(
        "device: {} (controller {}, block {}, generic {}), namespace {}\nworkload: {}\n\n",
        c.topology.bdf.as_deref().unwrap_or("?"),
        c.topology.controller.as_deref().unwrap_or("?"),
        c.topology.block.as_ref().map(|p| p.display().to_string()).unwrap_or("-".into()),
        c.topology.generic.as_ref().map(|p| p.display().to_string()).unwrap_or("-".into()),
        c.topology.nsid,
        c.workload
    ));
    o.push_str(&format!(
        "{:<32} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6} {:>10} {:>10} {:>7} {:>7} {:>8}\n",
        "path", "IOPS", "MiB/s", "p50 us", "p99 us", "p99.9 us", "usr ns/IO", "krn ns/IO", "cores", "IOPS/core", "ceiling", "x core", "x ceil", "MMIO/IO"
    ));
    for r in &c.rows {
        match (&r.summary, &r.error) {
            (Some(s), _) => {
                let y = s.system.clone().unwrap_or_default();
                o.push_str(&format!(
                    "{:<32} {:>8} {:>8.1} {:>8} {:>8} {:>9} {:>9.0} {:>9.0} {:>6.2} {:>10} {:>10} {:>7} {:>7} {:>8}\n",
                    r.variant.label,
                    k(s.iops),
                    s.bw_bytes / (1 << 20) as f64,
                    us(s.lat_ns.p(50.0)),
                    us(s.lat_ns.p(99.0)),
                    us(s.lat_ns.p(99.9)),
                    y.user_ns_per_io,
                    y.kernel_ns_per_io,
                    y.cores_busy,
                    r.iops_per_busy_core.map(k).unwrap_or("-".into()),
                    r.useful_ceiling_iops.map(k).unwrap_or("-".into()),
                    r.ratio_vs_baseline.map(|x| format!("{x:.2}")).unwrap_or("-".into()),
                    r.useful_ratio_vs_baseline.map(|x| format!("{x:.2}")).unwrap_or("-".into()),
                    // MMIO doorbell writes exist only on our driver's path.
                    if r.variant.path == PathKind::Vfio { format!("{:.3}", s.mmio_writes_per_io) } else { "-".into() },
                ));
            }
            (None, Some(e)) => o.push_str(&format!("{:<32} not run: {e}\n", r.variant.label)),
            _ => {}
        }
    }
    o.push_str(
        "\nCPU columns are system-wide (/proc/stat over the measured interval: user; kernel = system + irq + softirq),\n\
         so completion work in interrupt context on other cores counts. cores = busy cores on average.\n\
         ceiling = 1 s / (busy CPU per I/O minus the time of polls that found nothing): the per-core ceiling\n\
         with a device fast enough that polling never waits. x core / x ceil: relative to the baseline row.\n\
         MMIO/IO: doorbell register writes per I/O of our driver (the kernel paths' doorbells are the kernel's).\n",
    );
    if !c.headline.is_empty() {
        o.push_str("\nheadline (per-core ceiling, relative to ");
        o.push_str(&c.baseline);
        o.push_str("):\n");
        for h in &c.headline {
            o.push_str(&format!("  {h}\n"));
        }
    }
    o.push_str(&format!(
        "\ncontroller driver: {} before, {} after\n",
        c.driver_before.as_deref().unwrap_or("none"),
        c.driver_after.as_deref().unwrap_or("none")
    ));
    o
}

/// Run the comparison.
pub fn compare(a: &CompareArgs, stop: &Stop) -> Result<i32, Error> {
    if a.rw.writes() && !a.allow_write {
        return Err(Error::usage(format!(
            "--rw {} writes to {}, destroying its data; add --allow-write if it holds nothing you need",
            a.rw.as_str(),
            a.device
        )));
    }
    if crate::sys::geteuid() != 0 {
        return Err(Error::usage("compare needs root: it opens /dev/nvme*, /dev/ng* and moves the controller to vfio-pci; run it with sudo"));
    }
    let t = topology::resolve(&a.device, a.nsid)?;
    if t.driver.as_deref() != Some("nvme") {
        return Err(Error::usage(format!(
            "controller {} is bound to {}, not nvme: give it back first with `nvme-bypass unbind {}`",
            t.bdf.as_deref().unwrap_or("?"),
            t.driver.as_deref().unwrap_or("no driver"),
            t.bdf.as_deref().unwrap_or("BDF")
        )));
    }
    let (variants, skipped) = plan(a, &t);
    for s in &skipped {
        eprintln!("nvme-bypass: skipping {s}");
    }
    let spec = JobSpec {
        rw: a.rw,
        bs: a.bs as usize,
        iodepth: a.iodepth,
        rwmixread: a.rwmixread,
        offset: a.offset,
        size: a.size.unwrap_or(0),
        runtime: Some(a.runtime),
        ios: None,
        ramp: a.ramp_time,
        verify: None,
        batch: 0,
        numjobs: a.numjobs,
        cpus: a.cpus.clone().unwrap_or_default(),
        continue_on_error: false,
        seed: 1,
        reliability: Default::default(),
        stop: stop.clone(),
    };
    let clock = Clock::calibrate();
    let status = a.output_format == OutputFormat::Normal && crate::sys::isatty(2);
    let driver_before = t.driver.clone();
    let mut rows: Vec<Row> = vec![];
    let mut binding = None;
    for v in &variants {
        if stop.requested() {
            rows.push(Row { variant: v.clone(), summary: None, error: Some("interrupted".into()), iops_per_busy_core: None, useful_ceiling_iops: None, ratio_vs_baseline: None, useful_ratio_vs_baseline: None });
            continue;
        }
        if v.path == PathKind::Vfio && binding.is_none() {
            match crate::commands::bind::bind_guard(t.bdf.as_deref().unwrap_or("")) {
                Ok(b) => binding = Some(b),
                Err(e) => {
                    rows.push(Row { variant: v.clone(), summary: None, error: Some(crate::error::chain(&e)), iops_per_busy_core: None, useful_ceiling_iops: None, ratio_vs_baseline: None, useful_ratio_vs_baseline: None });
                    continue;
                }
            }
        }
        eprintln!("nvme-bypass: running {} ({})", v.label, v.note);
        let r = run_variant(v, &t, &spec, clock, status);
        let (summary, error) = match r {
            Ok((s, _)) => (Some(s), None),
            Err(e) => (None, Some(crate::error::chain(&e))),
        };
        rows.push(Row { variant: v.clone(), summary, error, iops_per_busy_core: None, useful_ceiling_iops: None, ratio_vs_baseline: None, useful_ratio_vs_baseline: None });
    }
    // Give the controller back (the guard also does it on unwinding).
    if let Some(b) = binding.take() {
        if let Err(e) = crate::commands::bind::release_guard(b) {
            eprintln!("nvme-bypass: warning: {}", crate::error::chain(&e));
        }
    }
    let after = topology::resolve(t.bdf.as_deref().unwrap_or(&a.device), a.nsid).ok().and_then(|x| x.driver);
    let baseline = "block/io_uring".to_string();
    let headline = finish(&mut rows, &baseline);
    let c = Comparison {
        version: env!("CARGO_PKG_VERSION"),
        emulated: t.emulated.clone(),
        topology: t.clone(),
        workload: serde_json::json!({
            "rw": a.rw.as_str(), "bs": a.bs, "iodepth": a.iodepth, "rwmixread": a.rwmixread,
            "runtime_s": a.runtime.as_secs_f64(), "ramp_s": a.ramp_time.as_secs_f64(), "numjobs": a.numjobs,
            "cpus": a.cpus, "offset": a.offset, "size": a.size,
        }),
        rows,
        baseline,
        headline,
        driver_before,
        driver_after: after,
    };
    let text = table(&c);
    let json = serde_json::to_string_pretty(&c).unwrap();
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| Error::usage(format!("create {}: {e}", dir.display())))?;
        std::fs::write(dir.join("table.txt"), &text).map_err(|e| Error::usage(format!("write table: {e}")))?;
        std::fs::write(dir.join("compare.json"), &json).map_err(|e| Error::usage(format!("write json: {e}")))?;
    }
    match a.output_format {
        OutputFormat::Normal => print!("{text}"),
        OutputFormat::Json => println!("{json}"),
    }
    let failed = c.rows.iter().any(|r| r.error.is_some() || r.summary.as_ref().is_some_and(|s| s.errors > 0));
    if c.driver_after != c.driver_before {
        eprintln!(
            "nvme-bypass: error: the controller is on {} now, it was on {}: run `nvme-bypass unbind {}`",
            c.driver_after.as_deref().unwrap_or("no driver"),
            c.driver_before.as_deref().unwrap_or("no driver"),
            c.topology.bdf.as_deref().unwrap_or("BDF")
        );
        return Ok(exit::RUN_FAILED);
    }
    Ok(if failed { exit::RUN_FAILED } else { exit::OK })
}
