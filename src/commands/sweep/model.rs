//! What a sweep is made of: the grid of settings, the points measured at
//! each, and the whole sweep as written to sweep.json. The sweep command
//! fills it; the charts draw it.

use crate::measure::topology::Topology;
use crate::report::RunSummary;
use serde::Serialize;

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
    pub fn new(path: &str, s: Setting, sweeps: &[Axis]) -> Self {
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
    pub fn record(&mut self, s: RunSummary) {
        self.iops = Some(s.iops);
        self.mib_per_s = Some(s.bw_bytes / (1u64 << 20) as f64);
        self.lat_p50_ns = Some(s.lat_ns.p(50.0));
        self.lat_p99_ns = Some(s.lat_ns.p(99.0));
        self.lat_p999_ns = Some(s.lat_ns.p(99.9));
        self.cores_busy = s.system.as_ref().map(|y| y.cores_busy);
        self.iops_per_busy_core = s.system.as_ref().map(|y| y.iops_per_busy_core);
        self.useful_ceiling_iops = s.useful_ceiling_iops();
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
    pub fn ok(&self) -> bool {
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

