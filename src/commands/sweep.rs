//! `nvme-bypass sweep`: how each path's figures move with queue depth, block
//! size and thread count, as charts a person would rather look at than read.
//!
//! Not the full cartesian product (that grows fast and most of it is never
//! looked at) but three one-dimensional sweeps through a shared centre:
//!
//! * **iodepth sweep**: every `--iodepth` at the first `--bs` and the first
//!   `--numjobs`: IOPS per busy core and latency percentiles vs queue depth;
//! * **bs sweep**: every `--bs` at the largest `--iodepth` and the first
//!   `--numjobs`: throughput vs block size;
//! * **numjobs sweep**: every `--numjobs` at the first `--bs` and the largest
//!   `--iodepth`: scaling with threads (in the JSON and the table).
//!
//! A point shared by two sweeps runs once. Every path runs every point; the
//! kernel paths first, then the controller moves to vfio-pci once for all vfio
//! points and goes back to its driver afterwards (also on error or Ctrl-C:
//! the binding guard restores on drop). Each point's figures are those of
//! `compare` (see `docs/methodology.md`).
//!
//! The simulator paths (`sim`: data in RAM, `sim-null`: no data moved) need
//! no hardware and no root. Each starts one simulated controller for all its
//! points, its thread pinned to a CPU of its own and the job threads pinned
//! to the others, as `bench` does; the core-to-core latency the simulator's
//! figures depend on is measured before and after the simulator points.
//!
//! Outputs in `--out`: `sweep.json` (every point), `table.txt`, and three SVG
//! charts: `iops_per_core_vs_qd.svg`, `latency_percentiles.svg`,
//! `throughput_vs_bs.svg`.

use crate::backend::userspace::sim::{SimOptions, SimTarget};
use crate::backend::Target;
use crate::error::{exit, Error};
use crate::report::OutputFormat;
use crate::measure::clock::Clock;
use crate::commands::compare::{PathKind, Variant};
use crate::engine::{self, JobSpec, Stop};
use crate::report::RunSummary;
use crate::measure::topology::{self, Topology};
use crate::engine::workload::Rw;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Names `--paths` takes for the simulator: RAM data and null data.
const SIM_PATHS: [&str; 2] = ["sim", "sim-null"];
/// Row names of `compare` that `--paths` takes with `--device` (`mmio`: vfio
/// with every doorbell an MMIO write, as compare's row of that name).
const DEVICE_PATHS: [&str; 9] = ["block", "libaio", "psync", "passthru", "vfio", "buffered", "sched", "best", "mmio"];
/// Paths swept with `--device` when `--paths` is not given.
const DEFAULT_DEVICE_PATHS: [&str; 3] = ["block", "passthru", "vfio"];

/// Options of `sweep`.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// The controller (PCI address) or one of its namespace devices (/dev/nvme0n1, /dev/ng0n1).
    /// Without it only the simulator paths can run.
    #[arg(long)]
    pub device: Option<String>,
    /// Namespace ID (device paths; the simulator has namespace 1).
    #[arg(long, default_value_t = 1)]
    pub nsid: u32,
    /// Paths, comma separated: sim, sim-null (the simulator, RAM or null data; no hardware), or
    /// compare's rows with --device: block, libaio, psync, passthru, vfio, buffered, sched, best.
    /// Default: block,passthru,vfio with --device, sim,sim-null without.
    #[arg(long, value_delimiter = ',')]
    pub paths: Option<Vec<String>>,
    /// Queue depths, comma separated: the iodepth sweep (at the first --bs and --numjobs); the bs and numjobs sweeps run at the largest.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,32,64")]
    pub iodepth: Vec<usize>,
    /// Block sizes, comma separated: the bs sweep (at the largest --iodepth, the first --numjobs); the other sweeps run at the first.
    #[arg(long, value_delimiter = ',', default_value = "4k,16k,64k,128k", value_parser = crate::cli::parse::parse_size)]
    pub bs: Vec<u64>,
    /// Thread counts, comma separated: the numjobs sweep (at the first --bs, the largest --iodepth); the other sweeps run at the first.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub numjobs: Vec<usize>,
    /// Access pattern.
    #[arg(long, value_enum, default_value = "randread")]
    pub rw: Rw,
    /// Percentage of reads in mixed patterns.
    #[arg(long, default_value_t = 50)]
    pub rwmixread: u8,
    /// Measured time per point.
    #[arg(long, default_value = "2", value_parser = crate::cli::parse::parse_duration)]
    pub runtime: Duration,
    /// Warm-up per point (not measured).
    #[arg(long, default_value = "0.5", value_parser = crate::cli::parse::parse_duration)]
    pub ramp_time: Duration,
    /// First byte of the region.
    #[arg(long, default_value = "0", value_parser = crate::cli::parse::parse_size)]
    pub offset: u64,
    /// Bytes of the region (default: the whole namespace from --offset).
    #[arg(long, value_parser = crate::cli::parse::parse_size)]
    pub size: Option<u64>,
    /// Pin job threads to these CPUs, round robin (simulator default: every CPU but the controller's).
    #[arg(long, value_parser = crate::cli::parse::parse_cpus)]
    pub cpus: Option<crate::cli::parse::CpuList>,
    /// Simulated namespace size (sim paths).
    #[arg(long, default_value = "1G", value_parser = crate::cli::parse::parse_size)]
    pub sim_size: u64,
    /// CPU of the simulated controller's thread (default: one the job threads do not use).
    #[arg(long, value_parser = crate::cli::parse::parse_cpu)]
    pub sim_cpu: Option<usize>,
    /// Allow writing to the device (needed for write patterns; the simulator needs no permission).
    #[arg(long)]
    pub allow_write: bool,
    /// Output format on stdout (the files in --out are written either way).
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    /// Folder for sweep.json, table.txt and the SVG charts (created; default results/sweep-<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The sweeps a point belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Queue depth varies (first bs, first numjobs).
    Iodepth,
    /// Block size varies (largest iodepth, first numjobs).
    Bs,
    /// Threads vary (first bs, largest iodepth).
    Numjobs,
}

/// One workload setting of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// Bytes per I/O.
    pub bs: u64,
    /// I/Os in flight per thread.
    pub iodepth: usize,
    /// Threads.
    pub numjobs: usize,
}

/// The settings to run, in run order, each with the sweeps it belongs to
/// (see the module documentation). `iodepths`, `bss`, `numjobs` must be
/// non-empty; duplicates are run once.
pub fn grid(iodepths: &[usize], bss: &[u64], numjobs: &[usize]) -> Vec<(Setting, Vec<Axis>)> {
    let qd_max = *iodepths.iter().max().expect("non-empty iodepth list");
    let (bs0, nj0) = (bss[0], numjobs[0]);
    let mut out: Vec<(Setting, Vec<Axis>)> = vec![];
    let mut add = |s: Setting, axis: Axis| match out.iter_mut().find(|(x, _)| *x == s) {
        Some((_, axes)) if !axes.contains(&axis) => axes.push(axis),
        Some(_) => {}
        None => out.push((s, vec![axis])),
    };
    for &iodepth in iodepths {
        add(Setting { bs: bs0, iodepth, numjobs: nj0 }, Axis::Iodepth);
    }
    for &bs in bss {
        add(Setting { bs, iodepth: qd_max, numjobs: nj0 }, Axis::Bs);
    }
    for &numjobs in numjobs {
        add(Setting { bs: bs0, iodepth: qd_max, numjobs }, Axis::Numjobs);
    }
    out
}

/// The result of one path at one setting.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// Path label (chart legends use it).
    pub path: String,
    /// Bytes per I/O.
    pub bs: u64,
    /// I/Os in flight per thread.
    pub iodepth: usize,
    /// Threads.
    pub numjobs: usize,
    /// The sweeps this point belongs to.
    pub sweeps: Vec<Axis>,
    /// All I/Os per second.
    pub iops: Option<f64>,
    /// MiB (2^20 bytes) per second.
    pub mib_per_s: Option<f64>,
    /// Submit-to-reap latency percentiles, ns.
    pub lat_p50_ns: Option<u64>,
    /// 99th percentile, ns.
    pub lat_p99_ns: Option<u64>,
    /// 99.9th percentile, ns.
    pub lat_p999_ns: Option<u64>,
    /// System-wide busy cores on average (/proc/stat).
    pub cores_busy: Option<f64>,
    /// IOPS / cores busy.
    pub iops_per_busy_core: Option<f64>,
    /// Per-core ceiling at the useful cost (as compare's `ceiling`).
    pub useful_ceiling_iops: Option<f64>,
    /// Benchmark threads' CPU per I/O, raw (empty polls included), ns.
    pub cpu_ns_per_io: Option<f64>,
    /// Benchmark threads' CPU per I/O less the share of empty polls, ns.
    pub useful_cpu_ns_per_io: Option<f64>,
    /// True when the device is emulated (QEMU, or the simulator).
    pub emulated: bool,
    /// Why the point did not run or failed.
    pub error: Option<String>,
    /// The whole run summary, as `bench --output-format json` has it under `nvme_bypass`.
    pub summary: Option<RunSummary>,
}

impl Point {
    fn new(path: &str, s: Setting, sweeps: &[Axis]) -> Self {
        Point {
            path: path.to_string(),
            bs: s.bs,
            iodepth: s.iodepth,
            numjobs: s.numjobs,
            sweeps: sweeps.to_vec(),
            iops: None,
            mib_per_s: None,
            lat_p50_ns: None,
            lat_p99_ns: None,
            lat_p999_ns: None,
            cores_busy: None,
            iops_per_busy_core: None,
            useful_ceiling_iops: None,
            cpu_ns_per_io: None,
            useful_cpu_ns_per_io: None,
            emulated: false,
            error: None,
            summary: None,
        }
    }

    /// Fill the figures from a run (and its errors, if any I/O failed).
    fn record(&mut self, s: RunSummary) {
        self.iops = Some(s.iops);
        self.mib_per_s = Some(s.bw_bytes / (1u64 << 20) as f64);
        self.lat_p50_ns = Some(s.lat_ns.p(50.0));
        self.lat_p99_ns = Some(s.lat_ns.p(99.0));
        self.lat_p999_ns = Some(s.lat_ns.p(99.9));
        self.cores_busy = s.system.as_ref().map(|y| y.cores_busy);
        self.iops_per_busy_core = s.system.as_ref().map(|y| y.iops_per_busy_core);
        self.useful_ceiling_iops = crate::commands::compare::useful_ceiling(&s);
        self.cpu_ns_per_io = Some(s.cpu.cpu_ns_per_io);
        self.useful_cpu_ns_per_io = Some(s.cpu.useful_cpu_ns_per_io);
        self.emulated = s.emulated;
        if s.errors > 0 {
            self.error = Some(format!("{} I/Os failed; first: {}", s.errors, s.first_error.as_deref().unwrap_or("?")));
        } else if s.interrupted {
            self.error = Some("interrupted: figures cover the time run".into());
        }
        self.summary = Some(s);
    }

    /// Did it run and produce figures?
    fn ok(&self) -> bool {
        self.iops.is_some()
    }
}

/// The whole sweep, as written to sweep.json.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    /// Tool version.
    pub version: &'static str,
    /// Emulated? Why (simulator, QEMU).
    pub emulated: Option<String>,
    /// Device names (with --device).
    pub topology: Option<Topology>,
    /// Workload and grid: lists, per-point time, what was run.
    pub workload: serde_json::Value,
    /// Path labels in run order.
    pub paths: Vec<String>,
    /// Every point, in run order (path by path).
    pub points: Vec<Point>,
    /// Simulator: core-to-core latency before and after the simulator points, ns.
    pub core_to_core_ns: Option<(Option<f64>, Option<f64>)>,
    /// Simulator: whether the two CPUs were separate cores, right after the
    /// simulator points (`c2c::core_share`).
    pub core_share: Option<crate::measure::c2c::CoreShare>,
    /// Controller driver before and after (with --device).
    pub driver_before: Option<String>,
    /// Driver after.
    pub driver_after: Option<String>,
    /// Chart files written beside sweep.json.
    pub charts: Vec<String>,
}

/// A path to sweep.
enum SweptPath {
    /// The simulator, RAM (`null` false) or null data.
    Sim { label: &'static str, null: bool },
    /// A row of `compare` on the device.
    Device(Variant),
}

impl SweptPath {
    fn label(&self) -> &str {
        match self {
            SweptPath::Sim { label, .. } => label,
            SweptPath::Device(v) => &v.label,
        }
    }
}

/// Keep the first of each value: `1,4,4,16` sweeps 1,4,16.
fn dedup<T: PartialEq + Copy>(v: &[T]) -> Vec<T> {
    let mut o: Vec<T> = vec![];
    for &x in v {
        if !o.contains(&x) {
            o.push(x);
        }
    }
    o
}

/// Check the options; returns (sim paths, device row names), in the order given.
fn check(a: &SweepArgs) -> Result<(Vec<&'static str>, Vec<String>), Error> {
    let paths: Vec<String> = match &a.paths {
        Some(p) => p.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None if a.device.is_some() => DEFAULT_DEVICE_PATHS.iter().map(|s| s.to_string()).collect(),
        None => SIM_PATHS.iter().map(|s| s.to_string()).collect(),
    };
    if paths.is_empty() {
        return Err(Error::usage("--paths is empty; name at least one path, e.g. --paths sim,sim-null"));
    }
    let mut sim = vec![];
    let mut device = vec![];
    for p in &paths {
        if let Some(s) = SIM_PATHS.iter().find(|s| *s == p) {
            if !sim.contains(s) {
                sim.push(*s);
            }
        } else if DEVICE_PATHS.contains(&p.as_str()) {
            if !device.contains(p) {
                device.push(p.clone());
            }
        } else {
            return Err(Error::usage(format!(
                "unknown path '{p}' in --paths; use {} (simulator) or, with --device, {}",
                SIM_PATHS.join(", "),
                DEVICE_PATHS.join(", ")
            )));
        }
    }
    if !device.is_empty() && a.device.is_none() {
        return Err(Error::usage(format!(
            "--paths {} needs --device (a PCI address such as 0000:01:00.0, or /dev/nvme0n1); without hardware use --paths sim,sim-null",
            device.join(",")
        )));
    }
    if !device.is_empty() && a.rw.writes() && !a.allow_write {
        return Err(Error::usage(format!(
            "--rw {} writes to {}, destroying its data; add --allow-write if it holds nothing you need",
            a.rw.as_str(),
            a.device.as_deref().unwrap_or("the device")
        )));
    }
    if let Some(&q) = a.iodepth.iter().find(|&&q| q == 0 || q > 65535) {
        return Err(Error::usage(format!("--iodepth {q} is out of range; use 1 to 65535")));
    }
    if let Some(&b) = a.bs.iter().find(|&&b| b == 0 || b > u32::MAX as u64) {
        return Err(Error::usage(format!("--bs {b} is out of range; use e.g. 4k,16k,64k,128k")));
    }
    if a.numjobs.contains(&0) {
        return Err(Error::usage("--numjobs 0: every point needs at least one thread"));
    }
    if a.runtime.is_zero() {
        return Err(Error::usage("--runtime 0 measures nothing; give each point e.g. --runtime 2"));
    }
    if !sim.is_empty() && a.sim_size < 4096 {
        return Err(Error::usage("--sim-size is smaller than one 4 KiB block"));
    }
    Ok((sim, device))
}

/// Seconds since the epoch as `YYYYmmdd-HHMMSS` (UTC), for the default folder name.
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}-{:02}{:02}{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

/// "4k", "128k", "1m", or bytes.
fn size_label(b: u64) -> String {
    if b > 0 && b.trailing_zeros() >= 20 {
        format!("{}m", b >> 20)
    } else if b > 0 && b.trailing_zeros() >= 10 {
        format!("{}k", b >> 10)
    } else {
        b.to_string()
    }
}

/// 1234567 -> "1.23M", 45600 -> "45.6k".
fn si(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// Nanoseconds as microseconds for the table.
fn us(ns: u64) -> String {
    if ns >= 100_000 {
        format!("{:.0}", ns as f64 / 1000.0)
    } else {
        format!("{:.1}", ns as f64 / 1000.0)
    }
}

/// The job of one point.
fn spec_for(a: &SweepArgs, s: Setting, size: u64, cpus: Vec<usize>, stop: &Stop) -> JobSpec {
    JobSpec {
        rw: a.rw,
        bs: s.bs as usize,
        iodepth: s.iodepth,
        rwmixread: a.rwmixread,
        offset: a.offset,
        size,
        runtime: Some(a.runtime),
        ios: None,
        ramp: a.ramp_time,
        verify: None,
        batch: 0,
        numjobs: s.numjobs,
        cpus,
        continue_on_error: false,
        seed: 1,
        reliability: Default::default(),
        stop: stop.clone(),
    }
}

/// Note of every simulator figure.
const SIM_NOTE: &str = "in-process simulated controller: figures are the driver's cost against a model, not a device";

/// What every point's run needs.
struct Runner<'a> {
    args: &'a SweepArgs,
    clock: Clock,
    /// Show the engine's live status line (stderr is a terminal).
    status: bool,
    progress: Progress,
    /// Ctrl-C: the remaining points are not run.
    stop: Stop,
}

/// Run every setting on one simulator path. The controller is started once
/// for all of them (with as many queue pairs as the most threads any point
/// uses) on `sim_cpu`; job threads are placed as `bench` places them.
fn run_sim(r: &mut Runner, label: &str, null: bool, settings: &[(Setting, Vec<Axis>)], sim_cpu: Option<usize>) -> Vec<Point> {
    let a = r.args;
    let mut points: Vec<Point> = settings.iter().map(|(s, ax)| Point::new(label, *s, ax)).collect();
    let queues = settings.iter().map(|(s, _)| s.numjobs).max().unwrap_or(1).min(u16::MAX as usize) as u16;
    let opts = SimOptions { size: a.sim_size, lba_size: 512, null, queues, cpu: sim_cpu, mdts: 7, mqes: 2047, threaded: true, shadow_doorbells: true, streaming_sq: true };
    let target = match SimTarget::open(&opts) {
        Ok(t) => t,
        Err(e) => {
            let msg = crate::error::chain(&Error::from(e));
            for p in &mut points {
                p.error = Some(format!("simulator did not start: {msg}"));
            }
            r.progress.skip(points.len());
            return points;
        }
    };
    let geo = target.geometry();
    let size = a.size.unwrap_or_else(|| geo.bytes().saturating_sub(a.offset));
    for p in &mut points {
        if r.stop.requested() {
            p.error = Some("interrupted".into());
            continue;
        }
        let setting = Setting { bs: p.bs, iodepth: p.iodepth, numjobs: p.numjobs };
        r.progress.announce(label, setting);
        let (cpus, _) = crate::commands::args::sim_placement(p.numjobs, a.cpus.as_deref(), sim_cpu);
        let spec = spec_for(a, setting, size, cpus, &r.stop);
        let run = engine::validate(&spec, &geo).and_then(|_| engine::run(&target, &spec, r.clock, r.status));
        match run {
            Ok(threads) => {
                let mut s = RunSummary::new(label.to_string(), target.describe(), &threads, r.clock.source());
                s.emulated = true;
                s.emulated_note = Some(SIM_NOTE.into());
                p.record(s);
            }
            Err(e) => p.error = Some(crate::error::chain(&Error::from(e))),
        }
    }
    points
}

/// Run every setting on each device path of `paths`, in order (kernel rows
/// first). The controller moves to vfio-pci once, before the first vfio
/// point, and goes back afterwards (the guard also restores it on unwinding).
fn run_device(r: &mut Runner, t: &Topology, paths: &[SweptPath], settings: &[(Setting, Vec<Axis>)]) -> Vec<Point> {
    let a = r.args;
    let mut points = vec![];
    let mut binding = None;
    let mut bind_error: Option<String> = None;
    for p in paths {
        let SweptPath::Device(v) = p else { continue };
        if v.path == PathKind::Vfio && binding.is_none() && bind_error.is_none() && !r.stop.requested() {
            match crate::commands::bind::bind_guard(t.bdf.as_deref().unwrap_or("")) {
                Ok(b) => binding = Some(b),
                Err(e) => bind_error = Some(crate::error::chain(&e)),
            }
        }
        for (s, axes) in settings {
            let mut pt = Point::new(&v.label, *s, axes);
            if r.stop.requested() {
                pt.error = Some("interrupted".into());
            } else if let (PathKind::Vfio, Some(e)) = (v.path, &bind_error) {
                pt.error = Some(format!("could not bind to vfio-pci: {e}"));
                r.progress.skip(1);
            } else {
                r.progress.announce(&v.label, *s);
                let spec = spec_for(a, *s, a.size.unwrap_or(0), a.cpus.clone().unwrap_or_default(), &r.stop);
                match crate::commands::compare::run_variant(v, t, &spec, r.clock, r.status) {
                    Ok((summary, _)) => pt.record(summary),
                    Err(e) => pt.error = Some(crate::error::chain(&e)),
                }
            }
            points.push(pt);
        }
    }
    if let Some(b) = binding.take() {
        if let Err(e) = crate::commands::bind::release_guard(b) {
            eprintln!("nvme-bypass: warning: {}", crate::error::chain(&e));
        }
    }
    points
}

/// Counts points for the progress lines on stderr.
struct Progress {
    done: usize,
    total: usize,
}

impl Progress {
    fn announce(&mut self, label: &str, s: Setting) {
        self.done += 1;
        eprintln!("nvme-bypass: [{}/{}] {label}: bs={} iodepth={} numjobs={}", self.done, self.total, size_label(s.bs), s.iodepth, s.numjobs);
    }
    fn skip(&mut self, n: usize) {
        self.done += n;
    }
}

/// Run the sweep.
pub fn sweep(a: &SweepArgs, stop: &Stop) -> Result<i32, Error> {
    let (sim_paths, device_paths) = check(a)?;
    let (iodepths, bss, numjobs) = (dedup(&a.iodepth), dedup(&a.bs), dedup(&a.numjobs));
    let settings = grid(&iodepths, &bss, &numjobs);

    // The device, when there is one: names, driver, rows.
    let mut topo: Option<Topology> = None;
    let mut variants: Vec<Variant> = vec![];
    if !device_paths.is_empty() {
        let dev = a.device.as_deref().expect("checked: device paths need --device");
        if crate::sys::geteuid() != 0 {
            return Err(Error::usage("sweep on a device needs root: it opens /dev/nvme*, /dev/ng* and moves the controller to vfio-pci; run it with sudo (or sweep the simulator: --paths sim,sim-null)"));
        }
        let t = topology::resolve(dev, a.nsid)?;
        if t.driver.as_deref() != Some("nvme") {
            return Err(Error::usage(format!(
                "controller {} is bound to {}, not nvme: give it back first with `nvme-bypass unbind {}`",
                t.bdf.as_deref().unwrap_or("?"),
                t.driver.as_deref().unwrap_or("no driver"),
                t.bdf.as_deref().unwrap_or("BDF")
            )));
        }
        let (v, skipped) = crate::commands::compare::plan_paths(Some(&device_paths), &t);
        for s in &skipped {
            eprintln!("nvme-bypass: skipping {s}");
        }
        if v.is_empty() && sim_paths.is_empty() {
            return Err(Error::usage(format!("none of --paths {} applies to {dev}; see the lines above", device_paths.join(","))));
        }
        variants = v;
        topo = Some(t);
    }
    if device_paths.is_empty() && a.device.is_some() {
        eprintln!("nvme-bypass: note: --device is not used by --paths {}: only the simulator runs", sim_paths.join(","));
    }
    let mut paths: Vec<SweptPath> = sim_paths.iter().map(|&l| SweptPath::Sim { label: l, null: l == "sim-null" }).collect();
    // Kernel rows first, vfio last, so the controller moves once.
    variants.sort_by_key(|v| v.path == PathKind::Vfio);
    paths.extend(variants.into_iter().map(SweptPath::Device));

    let out = a.out.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        PathBuf::from(format!("results/sweep-{}", utc_stamp(now)))
    });
    std::fs::create_dir_all(&out).map_err(|e| Error::usage(format!("cannot create --out {}: {e}; pick a folder you can write", out.display())))?;
    eprintln!(
        "nvme-bypass: sweeping {} point{} x {} path{} ({} each, {} warm-up) into {}",
        settings.len(),
        if settings.len() == 1 { "" } else { "s" },
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        fmt_secs(a.runtime),
        fmt_secs(a.ramp_time),
        out.display()
    );

    let mut r = Runner {
        args: a,
        clock: Clock::calibrate(),
        status: a.output_format == OutputFormat::Normal && crate::sys::isatty(2),
        progress: Progress { done: 0, total: settings.len() * paths.len() },
        stop: stop.clone(),
    };
    let mut points: Vec<Point> = vec![];

    // Simulator paths: the controller thread on a CPU of its own; the
    // core-to-core latency measured before and after, while it is not running.
    let mut c2c = None;
    let mut share = None;
    if !sim_paths.is_empty() {
        let max_jobs = numjobs.iter().copied().max().unwrap_or(1);
        let (cpus, sim_cpu) = crate::commands::args::sim_placement(max_jobs, a.cpus.as_deref(), a.sim_cpu);
        let pair = cpus.first().copied().zip(sim_cpu);
        let before = pair.and_then(|(x, y)| crate::measure::c2c::measure(x, y, 20_000));
        for p in &paths {
            if let SweptPath::Sim { label, null } = p {
                points.extend(run_sim(&mut r, label, *null, &settings, sim_cpu));
            }
        }
        let after = pair.and_then(|(x, y)| crate::measure::c2c::measure(x, y, 20_000));
        c2c = pair.map(|_| (before, after));
        share = pair.and_then(|(x, y)| crate::measure::c2c::core_share(x, y, std::time::Duration::from_millis(5)));
    }

    // Device paths, kernel first, then vfio.
    let driver_before = topo.as_ref().and_then(|t| t.driver.clone());
    let mut driver_after = None;
    if let Some(t) = &topo {
        points.extend(run_device(&mut r, t, &paths, &settings));
        driver_after = topology::resolve(t.bdf.as_deref().unwrap_or(""), a.nsid).ok().and_then(|x| x.driver);
    }

    let mut emulated = vec![];
    if !sim_paths.is_empty() {
        emulated.push(format!("simulator ({}): {SIM_NOTE}", sim_paths.join(", ")));
    }
    if let Some(e) = topo.as_ref().and_then(|t| t.emulated.clone()) {
        emulated.push(e);
    }
    let bs0 = bss[0];
    let qd_max = *iodepths.iter().max().expect("non-empty");
    let plan = vec![
        format!("iodepth sweep: iodepth {} at bs {}, numjobs {}", join(&iodepths), size_label(bs0), numjobs[0]),
        format!("bs sweep: bs {} at iodepth {qd_max}, numjobs {}", bss.iter().map(|&b| size_label(b)).collect::<Vec<_>>().join(","), numjobs[0]),
        format!("numjobs sweep: numjobs {} at bs {}, iodepth {qd_max}", join(&numjobs), size_label(bs0)),
    ];
    let mut sw = Sweep {
        version: env!("CARGO_PKG_VERSION"),
        emulated: (!emulated.is_empty()).then(|| emulated.join("; ")),
        topology: topo,
        workload: serde_json::json!({
            "rw": a.rw.as_str(), "rwmixread": a.rwmixread, "iodepth": iodepths, "bs": bss, "numjobs": numjobs,
            "runtime_s": a.runtime.as_secs_f64(), "ramp_s": a.ramp_time.as_secs_f64(), "offset": a.offset, "size": a.size,
            "cpus": a.cpus, "sim_size": (!sim_paths.is_empty()).then_some(a.sim_size), "plan": plan,
        }),
        paths: paths.iter().map(|p| p.label().to_string()).collect(),
        points,
        core_to_core_ns: c2c,
        core_share: share,
        driver_before,
        driver_after,
        charts: vec![],
    };
    let mut chart_errors = vec![];
    for (file, draw) in [
        ("iops_per_core_vs_qd.svg", charts::iops_per_core as fn(&Sweep, &Path) -> Result<(), String>),
        ("latency_percentiles.svg", charts::latency),
        ("throughput_vs_bs.svg", charts::throughput),
    ] {
        match draw(&sw, &out.join(file)) {
            Ok(()) => sw.charts.push(file.to_string()),
            Err(e) => chart_errors.push(format!("{file}: {e}")),
        }
    }
    let text = table(&sw, &out);
    let json = serde_json::to_string_pretty(&sw).expect("serializable");
    let write = |name: &str, body: &str| {
        std::fs::write(out.join(name), body).map_err(|e| Error::usage(format!("cannot write {}: {e}", out.join(name).display())))
    };
    write("sweep.json", &json)?;
    write("table.txt", &text)?;
    match a.output_format {
        OutputFormat::Normal => print!("{text}"),
        OutputFormat::Json => println!("{json}"),
    }
    for e in &chart_errors {
        eprintln!("nvme-bypass: error: chart not drawn: {e}");
    }
    if sw.driver_after != sw.driver_before {
        eprintln!(
            "nvme-bypass: error: the controller is on {} now, it was on {}: run `nvme-bypass unbind {}`",
            sw.driver_after.as_deref().unwrap_or("no driver"),
            sw.driver_before.as_deref().unwrap_or("no driver"),
            sw.topology.as_ref().and_then(|t| t.bdf.as_deref()).unwrap_or("BDF")
        );
        return Ok(exit::RUN_FAILED);
    }
    let failed = sw.points.iter().any(|p| p.error.is_some()) || !chart_errors.is_empty();
    Ok(if failed { exit::RUN_FAILED } else { exit::OK })
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn fmt_secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// The compact text table: one line per point, path by path.
pub fn table(sw: &Sweep, out: &Path) -> String {
    let mut o = String::new();
    if let Some(e) = &sw.emulated {
        o.push_str(&format!("EMULATED: {e}\n"));
    }
    if let Some(t) = &sw.topology {
        o.push_str(&format!(
            "device: {} (controller {}, block {}, generic {}), namespace {}\n",
            t.bdf.as_deref().unwrap_or("?"),
            t.controller.as_deref().unwrap_or("?"),
            t.block.as_ref().map(|p| p.display().to_string()).unwrap_or("-".into()),
            t.generic.as_ref().map(|p| p.display().to_string()).unwrap_or("-".into()),
            t.nsid
        ));
    }
    o.push_str(&format!(
        "workload: rw={}, {}s per point after {}s warm-up\n",
        sw.workload["rw"].as_str().unwrap_or("?"),
        sw.workload["runtime_s"],
        sw.workload["ramp_s"]
    ));
    for line in sw.workload["plan"].as_array().into_iter().flatten() {
        o.push_str(&format!("  {}\n", line.as_str().unwrap_or("")));
    }
    o.push('\n');
    o.push_str(&format!(
        "{:<24} {:>5} {:>4} {:>4} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>10} {:>9} {:>8} {:>8}\n",
        "path", "bs", "QD", "jobs", "IOPS", "MiB/s", "p50 us", "p99 us", "p99.9 us", "cores", "IOPS/core", "ceiling", "cpu ns", "useful"
    ));
    let opt = |x: Option<f64>, f: fn(f64) -> String| x.map(f).unwrap_or_else(|| "-".into());
    for p in &sw.points {
        let lead = format!("{:<24} {:>5} {:>4} {:>4}", p.path, size_label(p.bs), p.iodepth, p.numjobs);
        if !p.ok() {
            o.push_str(&format!("{lead} not run: {}\n", p.error.as_deref().unwrap_or("?")));
            continue;
        }
        o.push_str(&format!(
            "{lead} {:>8} {:>8.1} {:>8} {:>8} {:>9} {:>6} {:>10} {:>9} {:>8} {:>8}{}\n",
            opt(p.iops, si),
            p.mib_per_s.unwrap_or(0.0),
            us(p.lat_p50_ns.unwrap_or(0)),
            us(p.lat_p99_ns.unwrap_or(0)),
            us(p.lat_p999_ns.unwrap_or(0)),
            opt(p.cores_busy, |x| format!("{x:.2}")),
            opt(p.iops_per_busy_core, si),
            opt(p.useful_ceiling_iops, si),
            opt(p.cpu_ns_per_io, |x| format!("{x:.0}")),
            opt(p.useful_cpu_ns_per_io, |x| format!("{x:.0}")),
            p.error.as_deref().map(|e| format!("  ({e})")).unwrap_or_default(),
        ));
    }
    o.push_str(
        "\ncores, IOPS/core and ceiling are system-wide (/proc/stat over the measured interval, as in compare):\n\
         IOPS/core = IOPS per busy core; ceiling = 1 s / (busy CPU per I/O less the time of polls that found nothing).\n\
         cpu ns / useful: the benchmark threads' own CPU per I/O, raw and less empty polls. Short points make\n\
         /proc/stat figures coarse (10 ms ticks): prefer --runtime of a few seconds for figures you quote.\n",
    );
    if let Some((b, a)) = sw.core_to_core_ns {
        let f = |x: Option<f64>| x.map(|v| format!("{v:.0} ns")).unwrap_or("n/a".into());
        o.push_str(&format!("simulator core-to-core latency: {} before, {} after (compare simulator figures only within one state)\n", f(b), f(a)));
    }
    if let Some(c) = sw.core_share {
        o.push_str(&format!("simulator CPUs: {}\n", crate::measure::c2c::describe_share(c)));
    }
    if sw.topology.is_some() {
        o.push_str(&format!(
            "controller driver: {} before, {} after\n",
            sw.driver_before.as_deref().unwrap_or("none"),
            sw.driver_after.as_deref().unwrap_or("none")
        ));
    }
    o.push_str(&format!("written to {}: sweep.json, table.txt", out.display()));
    for c in &sw.charts {
        o.push_str(&format!(", {c}"));
    }
    o.push('\n');
    o
}

/// The SVG charts (plotters' SVG backend: no fonts or system libraries
/// needed; text is left to the viewer's sans-serif font).
mod charts {
    use super::{size_label, Axis, Point, Sweep};
    use plotters::coord::ranged1d::{AsRangedCoord, KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
    use plotters::coord::Shift;
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    use std::ops::Range;
    use std::path::Path;

    type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

    /// Colours of the paths, in path order (Tableau 10: colours that tell apart).
    const PALETTE: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];

    /// Height of the title block: title, workload line, legend.
    const HEADER: u32 = 96;

    /// A categorical x axis: one evenly spaced slot per label, values are
    /// slot indices, each drawn at the centre of its slot. Queue depths and
    /// block sizes are mostly powers of two, so equal spacing reads like a
    /// log2 axis, and the labels say the real values when they are not.
    #[derive(Clone)]
    struct Categories(Vec<String>);

    impl Ranged for Categories {
        type FormatOption = NoDefaultFormatting;
        type ValueType = usize;
        fn map(&self, v: &usize, limit: (i32, i32)) -> i32 {
            let slot = (limit.1 - limit.0) as f64 / self.0.len().max(1) as f64;
            (limit.0 as f64 + slot * (*v as f64 + 0.5)).round() as i32
        }
        fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<usize> {
            (0..self.0.len()).collect()
        }
        fn range(&self) -> Range<usize> {
            0..self.0.len()
        }
    }

    impl ValueFormatter<usize> for Categories {
        fn format_ext(&self, v: &usize) -> String {
            self.0.get(*v).cloned().unwrap_or_default()
        }
    }

    /// One line of a panel: a path.
    struct Series {
        color: RGBColor,
        /// (slot, value); values are finite and > 0.
        points: Vec<(usize, f64)>,
    }

    /// One plotting area.
    struct Panel {
        caption: Option<String>,
        x_desc: String,
        y_desc: String,
        x: Vec<String>,
        y_label: fn(f64) -> String,
        series: Vec<Series>,
    }

    /// The y axis of a panel.
    enum YAxis {
        /// 0 to this.
        Linear(f64),
        /// Logarithmic between these (both > 0).
        Log(f64, f64),
    }

    /// 1234567 -> "1.2M", for axis labels of counts.
    fn count_label(v: f64) -> String {
        let (x, unit) = match v.abs() {
            a if a >= 1e9 => (v / 1e9, "G"),
            a if a >= 1e6 => (v / 1e6, "M"),
            a if a >= 1e3 => (v / 1e3, "k"),
            _ => (v, ""),
        };
        if x.fract().abs() < 1e-9 || x.abs() >= 10.0 {
            format!("{x:.0}{unit}")
        } else {
            format!("{x:.1}{unit}")
        }
    }

    /// Microseconds for a latency axis: "5 µs", "1 ms".
    fn us_label(v: f64) -> String {
        let trim = |x: f64| if x.fract().abs() < 1e-9 || x >= 10.0 { format!("{x:.0}") } else { format!("{x:.1}") };
        if v >= 1e6 {
            format!("{} s", trim(v / 1e6))
        } else if v >= 1e3 {
            format!("{} ms", trim(v / 1e3))
        } else {
            format!("{} µs", trim(v))
        }
    }

    /// Plain number: MiB/s.
    fn plain_label(v: f64) -> String {
        format!("{v:.0}")
    }

    /// "4k" -> "4 KiB" for the block size axis.
    fn bs_label(b: u64) -> String {
        let s = size_label(b);
        match s.strip_suffix('k') {
            Some(n) => format!("{n} KiB"),
            None => match s.strip_suffix('m') {
                Some(n) => format!("{n} MiB"),
                None => format!("{s} B"),
            },
        }
    }

    fn err(e: impl std::fmt::Display) -> String {
        e.to_string()
    }

    /// The title block: the title (saying EMULATED when it is), a line of
    /// workload facts, and the legend: one coloured swatch and name per
    /// path, above the plots so it never hides a point. Returns the area below.
    fn header<'a>(root: &Area<'a>, title: &str, sub: &str, paths: &[String]) -> Result<Area<'a>, String> {
        root.fill(&WHITE).map_err(err)?;
        let (top, rest) = root.split_vertically(HEADER);
        let w = top.dim_in_pixel().0 as i32;
        let center = Pos::new(HPos::Center, VPos::Center);
        top.draw(&Text::new(title.to_string(), (w / 2, 18), ("sans-serif", 24).into_font().style(FontStyle::Bold).color(&BLACK).pos(center)))
            .map_err(err)?;
        top.draw(&Text::new(sub.to_string(), (w / 2, 44), ("sans-serif", 15).into_font().color(&RGBColor(80, 80, 80)).pos(center)))
            .map_err(err)?;
        // Legend row, centred; widths estimated from the name lengths.
        let font = ("sans-serif", 17).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        let widths: Vec<i32> = paths.iter().map(|p| 28 + 9 * p.chars().count() as i32 + 28).collect();
        let mut x = (w - widths.iter().sum::<i32>()).max(0) / 2;
        let y = 74;
        for (i, (p, width)) in paths.iter().zip(&widths).enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            top.draw(&Rectangle::new([(x, y - 3), (x + 22, y + 3)], c.filled())).map_err(err)?;
            top.draw(&Text::new(p.clone(), (x + 28, y), font.clone())).map_err(err)?;
            x += width;
        }
        Ok(rest)
    }

    fn draw_panel<Y>(area: &Area<'_>, p: &Panel, y: Y) -> Result<(), String>
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let mut b = ChartBuilder::on(area);
        b.margin(14).x_label_area_size(52).y_label_area_size(80);
        if let Some(c) = &p.caption {
            b.caption(c, ("sans-serif", 20));
        }
        let mut chart = b.build_cartesian_2d(Categories(p.x.clone()), y).map_err(err)?;
        let fmt = p.y_label;
        chart
            .configure_mesh()
            .x_desc(p.x_desc.as_str())
            .y_desc(p.y_desc.as_str())
            .y_label_formatter(&|v| fmt(*v))
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .bold_line_style(RGBColor(215, 215, 215))
            .light_line_style(RGBColor(242, 242, 242))
            .max_light_lines(4)
            .draw()
            .map_err(err)?;
        let mut any = false;
        for s in p.series.iter().filter(|s| !s.points.is_empty()) {
            any = true;
            chart.draw_series(LineSeries::new(s.points.iter().copied(), s.color.stroke_width(2))).map_err(err)?;
            chart.draw_series(s.points.iter().map(|&pt| Circle::new(pt, 4, s.color.filled()))).map_err(err)?;
        }
        if !any {
            let (w, h) = area.dim_in_pixel();
            area.draw(&Text::new(
                "no data: every point of this chart failed or was skipped (see sweep.json)",
                (w as i32 / 2, h as i32 / 2),
                ("sans-serif", 16).into_font().color(&RED).pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(err)?;
        }
        Ok(())
    }

    fn draw(area: &Area<'_>, p: &Panel, y: YAxis) -> Result<(), String> {
        match y {
            YAxis::Linear(max) => draw_panel(area, p, 0.0..max),
            YAxis::Log(lo, hi) => draw_panel(area, p, (lo..hi).log_scale()),
        }
    }

    /// The swept value of a point on an axis.
    fn x_of(p: &Point, axis: Axis) -> u64 {
        match axis {
            Axis::Bs => p.bs,
            Axis::Iodepth => p.iodepth as u64,
            Axis::Numjobs => p.numjobs as u64,
        }
    }

    /// The swept values of an axis over all points, ascending.
    fn slots(sw: &Sweep, axis: Axis) -> Vec<u64> {
        let mut v: Vec<u64> = sw.points.iter().filter(|p| p.sweeps.contains(&axis)).map(|p| x_of(p, axis)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// One series per path (in path order, so colours match the legend):
    /// the path's points of the sweep that ran, `value` of each.
    fn series(sw: &Sweep, axis: Axis, xs: &[u64], value: impl Fn(&Point) -> Option<f64>) -> Vec<Series> {
        sw.paths
            .iter()
            .enumerate()
            .map(|(i, path)| {
                let mut points: Vec<(usize, f64)> = sw
                    .points
                    .iter()
                    .filter(|p| &p.path == path && p.sweeps.contains(&axis) && p.ok())
                    .filter_map(|p| Some((xs.iter().position(|&v| v == x_of(p, axis))?, value(p).filter(|v| v.is_finite() && *v > 0.0)?)))
                    .collect();
                points.sort_by_key(|p| p.0);
                Series { color: PALETTE[i % PALETTE.len()], points }
            })
            .collect()
    }

    fn title(base: &str, sw: &Sweep) -> String {
        if sw.emulated.is_some() {
            format!("{base} (EMULATED)")
        } else {
            base.to_string()
        }
    }

    /// The line under the title: the sweep's fixed settings, the pattern,
    /// the time per point and, when emulated, what.
    fn subtitle(sw: &Sweep, axis: Axis) -> String {
        let fixed = match sw.points.iter().find(|p| p.sweeps.contains(&axis)) {
            Some(p) if axis == Axis::Bs => format!("iodepth {}, {} job{}", p.iodepth, p.numjobs, if p.numjobs == 1 { "" } else { "s" }),
            Some(p) => format!("bs {}, {} job{}", bs_label(p.bs), p.numjobs, if p.numjobs == 1 { "" } else { "s" }),
            None => String::new(),
        };
        let mut s = format!("{}, {fixed}, {}s per point", sw.workload["rw"].as_str().unwrap_or("?"), sw.workload["runtime_s"]);
        if let Some(bdf) = sw.topology.as_ref().and_then(|t| t.bdf.clone()) {
            s.push_str(&format!(", device {bdf}"));
        }
        if sw.emulated.is_some() {
            let sim = sw.paths.iter().any(|p| p.starts_with("sim"));
            let qemu = sw.topology.as_ref().is_some_and(|t| t.emulated.is_some());
            let what = match (sim, qemu) {
                (true, true) => "simulated controller and QEMU's NVMe model",
                (true, false) => "in-process simulated controller",
                _ => "QEMU's NVMe model",
            };
            s.push_str(&format!(". EMULATED ({what}): compare paths, not absolute speeds"));
        }
        s
    }

    fn linear_max(series: &[Series]) -> f64 {
        let max = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
        if max > 0.0 {
            max * 1.1
        } else {
            1.0
        }
    }

    /// IOPS per busy core vs queue depth, one line per path.
    pub fn iops_per_core(sw: &Sweep, file: &Path) -> Result<(), String> {
        let xs = slots(sw, Axis::Iodepth);
        let series = series(sw, Axis::Iodepth, &xs, |p| p.iops_per_busy_core);
        let root = SVGBackend::new(file, (1000, 640)).into_drawing_area();
        let area = header(&root, &title("IOPS per busy core vs queue depth", sw), &subtitle(sw, Axis::Iodepth), &sw.paths)?;
        let max = linear_max(&series);
        let panel = Panel {
            caption: None,
            x_desc: "iodepth (I/Os in flight per thread)".into(),
            y_desc: "IOPS per busy core (system-wide CPU)".into(),
            x: xs.iter().map(u64::to_string).collect(),
            y_label: count_label,
            series,
        };
        draw(&area, &panel, YAxis::Linear(max))?;
        root.present().map_err(err)
    }

    /// p50 / p99 / p99.9 latency vs queue depth: three panels side by side
    /// on one log scale (so they compare across panels), one line per path.
    pub fn latency(sw: &Sweep, file: &Path) -> Result<(), String> {
        let xs = slots(sw, Axis::Iodepth);
        type Pick = fn(&Point) -> Option<u64>;
        let pcts: [(&str, Pick); 3] = [("p50", |p| p.lat_p50_ns), ("p99", |p| p.lat_p99_ns), ("p99.9", |p| p.lat_p999_ns)];
        let per: Vec<Vec<Series>> = pcts.iter().map(|(_, pick)| series(sw, Axis::Iodepth, &xs, |p| pick(p).map(|ns| ns as f64 / 1000.0))).collect();
        let (lo, hi) = per.iter().flatten().flat_map(|s| s.points.iter().map(|p| p.1)).fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (lo, hi) = if hi > 0.0 { (lo / 1.5, hi * 1.5) } else { (1.0, 1000.0) };
        let root = SVGBackend::new(file, (1500, 600)).into_drawing_area();
        let area = header(&root, &title("Latency percentiles vs queue depth", sw), &subtitle(sw, Axis::Iodepth), &sw.paths)?;
        for (i, (cell, series)) in area.split_evenly((1, 3)).iter().zip(per).enumerate() {
            let panel = Panel {
                caption: Some(format!("{} latency", pcts[i].0)),
                x_desc: "iodepth".into(),
                y_desc: "submit-to-reap latency (log scale)".into(),
                x: xs.iter().map(u64::to_string).collect(),
                y_label: us_label,
                series,
            };
            draw(cell, &panel, YAxis::Log(lo, hi))?;
        }
        root.present().map_err(err)
    }

    /// MiB/s vs block size at the largest queue depth, one line per path.
    pub fn throughput(sw: &Sweep, file: &Path) -> Result<(), String> {
        let xs = slots(sw, Axis::Bs);
        let series = series(sw, Axis::Bs, &xs, |p| p.mib_per_s);
        let root = SVGBackend::new(file, (1000, 640)).into_drawing_area();
        let area = header(&root, &title("Throughput vs block size", sw), &subtitle(sw, Axis::Bs), &sw.paths)?;
        let max = linear_max(&series);
        let panel = Panel {
            caption: None,
            x_desc: "block size".into(),
            y_desc: "MiB/s".into(),
            x: xs.iter().map(|&b| bs_label(b)).collect(),
            y_label: plain_label,
            series,
        };
        draw(&area, &panel, YAxis::Linear(max))?;
        root.present().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_is_three_sweeps_through_one_centre() {
        let g = grid(&[1, 4, 16], &[4096, 65536], &[1, 2]);
        let at = |bs, iodepth, numjobs| g.iter().find(|(s, _)| *s == Setting { bs, iodepth, numjobs }).map(|(_, a)| a.clone());
        assert_eq!(at(4096, 1, 1), Some(vec![Axis::Iodepth]));
        assert_eq!(at(4096, 4, 1), Some(vec![Axis::Iodepth]));
        // The centre: first bs, largest QD, first numjobs, in all three, once.
        assert_eq!(at(4096, 16, 1), Some(vec![Axis::Iodepth, Axis::Bs, Axis::Numjobs]));
        assert_eq!(at(65536, 16, 1), Some(vec![Axis::Bs]));
        assert_eq!(at(4096, 16, 2), Some(vec![Axis::Numjobs]));
        assert_eq!(g.len(), 5, "3 QDs + 1 more bs + 1 more numjobs, not the 12 of the product");
        // The largest QD is the centre even when not listed last.
        let g = grid(&[32, 1], &[4096], &[1]);
        assert_eq!(g[0].0.iodepth, 32);
        assert_eq!(g[0].1, vec![Axis::Iodepth, Axis::Bs, Axis::Numjobs]);
    }

    #[test]
    fn labels_and_stamps() {
        assert_eq!(size_label(4096), "4k");
        assert_eq!(size_label(128 << 10), "128k");
        assert_eq!(size_label(1 << 20), "1m");
        assert_eq!(size_label(512), "512");
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400 + 3661), "20000229-010101");
        assert_eq!(utc_stamp(1_735_689_599), "20241231-235959");
        assert_eq!(dedup(&[1, 4, 4, 1, 16]), vec![1, 4, 16]);
    }
}
