//! What a sweep is made of: the grid of settings, the points measured at
//! each, and the whole sweep as written to sweep.json. The sweep command
//! fills it; the charts draw it.

use crate::measure::topology::Topology;
use crate::report::RunSummary;
use crate::measure::spread::Spread;
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

/// One run of one point: its figures as measured (or, where the name says
/// so, modelled from what was measured), with the whole run summary.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Round it ran in, from 0 (`--repeat N` runs N rounds).
    pub round: usize,
    /// Its place in the sweep's run order, from 0 (the sweep numbers every run it makes).
    pub seq: usize,
    /// All I/Os per second, measured.
    pub measured_iops: Option<f64>,
    /// MiB (2^20 bytes) per second, measured.
    pub measured_mib_per_s: Option<f64>,
    /// Submit-to-reap latency percentiles, ns, measured.
    pub measured_lat_p50_ns: Option<u64>,
    /// 99th percentile, ns, measured.
    pub measured_lat_p99_ns: Option<u64>,
    /// 99.9th percentile, ns, measured.
    pub measured_lat_p999_ns: Option<u64>,
    /// System-wide busy cores on average (/proc/stat), measured.
    pub measured_cores_busy: Option<f64>,
    /// IOPS / cores busy, measured.
    pub measured_iops_per_busy_core: Option<f64>,
    /// Benchmark threads' CPU per I/O, raw (empty polls included), ns, measured.
    pub measured_cpu_ns_per_io: Option<f64>,
    /// Benchmark threads' CPU per I/O less the share of empty polls, ns:
    /// modelled (what the I/Os would cost if no poll came back empty).
    pub modelled_useful_cpu_ns_per_io: Option<f64>,
    /// Per-core ceiling at the useful cost, 1 s / (busy time per I/O less
    /// empty polls): modelled (compare's `ceiling`).
    pub modelled_ceiling_iops_per_core: Option<f64>,
    /// Why the run failed or is incomplete (failed I/Os, interrupted).
    pub error: Option<String>,
    /// The whole run summary, as `bench --output-format json` has it under `nvme_bypass`.
    pub summary: Option<RunSummary>,
}

impl Run {
    /// A run that produced no figures.
    pub fn failed(round: usize, error: String) -> Self {
        Run {
            round,
            seq: 0,
            measured_iops: None,
            measured_mib_per_s: None,
            measured_lat_p50_ns: None,
            measured_lat_p99_ns: None,
            measured_lat_p999_ns: None,
            measured_cores_busy: None,
            measured_iops_per_busy_core: None,
            measured_cpu_ns_per_io: None,
            modelled_useful_cpu_ns_per_io: None,
            modelled_ceiling_iops_per_core: None,
            error: Some(error),
            summary: None,
        }
    }

    /// The figures of a run (and its errors, if any I/O failed).
    pub fn of(round: usize, s: RunSummary) -> Self {
        let error = if s.errors > 0 {
            Some(format!("{} I/Os failed; first: {}", s.errors, s.first_error.as_deref().unwrap_or("?")))
        } else if s.interrupted {
            Some("interrupted: figures cover the time run".into())
        } else {
            None
        };
        Run {
            round,
            seq: 0,
            measured_iops: Some(s.iops),
            measured_mib_per_s: Some(s.bw_bytes / (1u64 << 20) as f64),
            measured_lat_p50_ns: Some(s.lat_ns.p(50.0)),
            measured_lat_p99_ns: Some(s.lat_ns.p(99.0)),
            measured_lat_p999_ns: Some(s.lat_ns.p(99.9)),
            measured_cores_busy: s.system.as_ref().map(|y| y.cores_busy),
            measured_iops_per_busy_core: s.system.as_ref().map(|y| y.iops_per_busy_core),
            measured_cpu_ns_per_io: Some(s.cpu.cpu_ns_per_io),
            modelled_useful_cpu_ns_per_io: Some(s.cpu.useful_cpu_ns_per_io),
            modelled_ceiling_iops_per_core: s.useful_ceiling_iops(),
            error,
            summary: Some(s),
        }
    }
}

/// The result of one path at one setting: each figure as the median with
/// the min-max range of its runs (`Spread`), and every run.
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
    /// The path polls for completions (sim, vfio, IOPOLL, SQPOLL): its
    /// measured IOPS per busy core is bounded by the device, and its
    /// modelled ceiling is the path's own cost.
    pub polled: bool,
    /// The figures are the in-process simulated controller's.
    pub simulated: bool,
    /// The figures are an emulated device's (QEMU's NVMe model).
    pub emulated: bool,
    /// Runs asked for (`--repeat`).
    pub repeat: usize,
    /// All I/Os per second, measured.
    pub measured_iops: Option<Spread>,
    /// MiB (2^20 bytes) per second, measured.
    pub measured_mib_per_s: Option<Spread>,
    /// Submit-to-reap latency percentiles, ns, measured.
    pub measured_lat_p50_ns: Option<Spread>,
    /// 99th percentile, ns, measured.
    pub measured_lat_p99_ns: Option<Spread>,
    /// 99.9th percentile, ns, measured.
    pub measured_lat_p999_ns: Option<Spread>,
    /// System-wide busy cores on average (/proc/stat), measured.
    pub measured_cores_busy: Option<Spread>,
    /// IOPS / cores busy, measured.
    pub measured_iops_per_busy_core: Option<Spread>,
    /// Benchmark threads' CPU per I/O, raw, ns, measured.
    pub measured_cpu_ns_per_io: Option<Spread>,
    /// Benchmark threads' CPU per I/O less the share of empty polls, ns, modelled.
    pub modelled_useful_cpu_ns_per_io: Option<Spread>,
    /// Per-core ceiling at the useful cost, modelled.
    pub modelled_ceiling_iops_per_core: Option<Spread>,
    /// Why the point, or one of its runs, did not run or failed.
    pub error: Option<String>,
    /// Every run, in the order they ran.
    pub runs: Vec<Run>,
}

impl Point {
    pub fn new(path: &str, s: Setting, sweeps: &[Axis], repeat: usize) -> Self {
        Point {
            path: path.to_string(),
            bs: s.bs,
            iodepth: s.iodepth,
            numjobs: s.numjobs,
            sweeps: sweeps.to_vec(),
            polled: false,
            simulated: false,
            emulated: false,
            repeat,
            measured_iops: None,
            measured_mib_per_s: None,
            measured_lat_p50_ns: None,
            measured_lat_p99_ns: None,
            measured_lat_p999_ns: None,
            measured_cores_busy: None,
            measured_iops_per_busy_core: None,
            measured_cpu_ns_per_io: None,
            modelled_useful_cpu_ns_per_io: None,
            modelled_ceiling_iops_per_core: None,
            error: None,
            runs: vec![],
        }
    }

    /// The setting of this point.
    pub fn setting(&self) -> Setting {
        Setting { bs: self.bs, iodepth: self.iodepth, numjobs: self.numjobs }
    }

    /// Sum up the runs: every figure's median and range over the runs that
    /// produced it; the first error (with its round when there are several
    /// runs), or how many runs are missing.
    pub fn finish(&mut self) {
        let runs = &self.runs;
        let f = |pick: fn(&Run) -> Option<f64>| Spread::of(&runs.iter().filter_map(pick).collect::<Vec<f64>>());
        let ns = |pick: fn(&Run) -> Option<u64>| Spread::of(&runs.iter().filter_map(pick).map(|v| v as f64).collect::<Vec<f64>>());
        self.measured_iops = f(|r| r.measured_iops);
        self.measured_mib_per_s = f(|r| r.measured_mib_per_s);
        self.measured_lat_p50_ns = ns(|r| r.measured_lat_p50_ns);
        self.measured_lat_p99_ns = ns(|r| r.measured_lat_p99_ns);
        self.measured_lat_p999_ns = ns(|r| r.measured_lat_p999_ns);
        self.measured_cores_busy = f(|r| r.measured_cores_busy);
        self.measured_iops_per_busy_core = f(|r| r.measured_iops_per_busy_core);
        self.measured_cpu_ns_per_io = f(|r| r.measured_cpu_ns_per_io);
        self.modelled_useful_cpu_ns_per_io = f(|r| r.modelled_useful_cpu_ns_per_io);
        self.modelled_ceiling_iops_per_core = f(|r| r.modelled_ceiling_iops_per_core);
        let first = runs.iter().find_map(|r| r.error.as_ref().map(|e| (r.round, e.clone())));
        self.error = match first {
            Some((round, e)) if self.repeat > 1 => Some(format!("round {}: {e}", round + 1)),
            Some((_, e)) => Some(e),
            None if runs.len() < self.repeat && runs.is_empty() => Some("interrupted".into()),
            None if runs.len() < self.repeat => Some(format!("interrupted: {} of {} runs", runs.len(), self.repeat)),
            None => None,
        };
    }

    /// Did it run and produce figures?
    pub fn ok(&self) -> bool {
        self.measured_iops.is_some()
    }
}

/// The whole sweep, as written to sweep.json.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    /// Tool version.
    pub version: &'static str,
    /// Simulated? What the simulator's figures are (with simulator paths).
    pub simulated: Option<String>,
    /// Emulated? Why (QEMU's NVMe model, on the test bed).
    pub emulated: Option<String>,
    /// Device names (with --device).
    pub topology: Option<Topology>,
    /// Workload and grid: lists, per-point time, what was run.
    pub workload: serde_json::Value,
    /// Path labels in run order.
    pub paths: Vec<String>,
    /// Paths that poll for completions (their charts add the modelled ceiling).
    pub polled_paths: Vec<String>,
    /// Runs of every point (`--repeat`).
    pub repeat: usize,
    /// Every point, path by path in the grid's order (runs went in rotated order).
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

