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
//! to the others, as `bench` does, and as `bench` it warns when polling
//! threads must share a CPU (once for each numjobs that makes them); the
//! core-to-core latency the simulator's figures depend on is measured
//! before and after the simulator points.
//!
//! `--repeat N` runs every point N times, in N rounds; round r rotates each
//! path's settings, and the paths of each group, r places, so no point is
//! always the first or the last run. Each figure is then the median of the
//! runs with its min-max range (`measure::spread::Spread`), and sweep.json
//! keeps every run.
//!
//! Every figure is named **measured** or **modelled** (the per-core ceiling
//! at the useful cost, 1 s / (busy time per I/O less empty polls), and the
//! useful CPU per I/O are models built from measured figures), and the
//! table and charts say **SIMULATED** (the simulator paths) or **EMULATED**
//! (QEMU's NVMe model on the test bed).
//!
//! Outputs in `--out`: `sweep.json` (every point and run), `table.txt`,
//! and four SVG charts: `iops_per_core_vs_qd.svg` (measured IOPS per busy
//! core; polled paths add their modelled ceiling, dashed),
//! `latency_percentiles.svg`, `throughput_vs_bs.svg` and
//! `latency_vs_iops.svg` (p99 latency against IOPS, a point per queue
//! depth); medians with min-max bars.

use crate::error::{exit, Error};
use crate::report::OutputFormat;
use crate::measure::clock::Clock;
use crate::measure::spread::Spread;
use crate::backend::path::{PathKind, PathSpec};
use crate::experiment::plan::{self, plan_paths, Variant};
use crate::experiment::session::{self, Session, SIM_NOTE};
use crate::engine::{self, JobSpec, Stop};
use crate::report::fmt::{self, join, si, size_label, us};
use crate::report::RunSummary;
use crate::engine::workload::Rw;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Names `--paths` takes for the simulator: RAM data and null data.
const SIM_PATHS: [&str; 2] = ["sim", "sim-null"];
/// Row names of `compare` that `--paths` takes with `--device`: compare's
/// own list, so the two commands take the same names.
const DEVICE_PATHS: [&str; plan::PATH_NAMES.len()] = plan::PATH_NAMES;
/// What `sweep --help` says after the options: the outputs and the words on every figure.
const AFTER_HELP: &str = "\
Outputs in --out: sweep.json (every point and every run), table.txt, and four SVG charts:
  iops_per_core_vs_qd.svg  measured IOPS per busy core against queue depth; polled paths (sim, vfio,
                           IOPOLL, SQPOLL) add their modelled ceiling as a dashed line of the same colour
  latency_percentiles.svg  measured p50, p99, p99.9 latency against queue depth
  throughput_vs_bs.svg     measured MiB/s against block size
  latency_vs_iops.svg      measured p99 latency against measured IOPS, a point per queue depth
With --repeat N every figure is the median of N runs with its min-max range (bars on the charts).
Figures are named measured, or modelled: the ceiling, 1 s / (busy CPU per I/O less empty polls), and the
useful CPU per I/O are models built from measured figures. Simulator figures say SIMULATED, the test
bed's EMULATED. docs/methodology.md (\"The sweep\") says how each is made.

Example (no hardware): nvme-bypass sweep --paths sim,sim-null --iodepth 1,8,32 --repeat 3 --out /tmp/sweep";
/// How `--repeat` orders the runs, as sweep.json says it.
const ORDER: &str = "round r runs each path's settings rotated r places, and the paths of each group (simulator, kernel, vfio) rotated r places; the simulator's rounds first, then the kernel paths', then vfio's (the controller moves to vfio-pci once)";
/// Paths swept with `--device` when `--paths` is not given.
const DEFAULT_DEVICE_PATHS: [&str; 3] = ["block", "passthru", "vfio"];

/// Options of `sweep`.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = AFTER_HELP)]
pub struct SweepArgs {
    /// The controller (PCI address) or one of its namespace devices (/dev/nvme0n1, /dev/ng0n1).
    /// Without it only the simulator paths can run.
    #[arg(long)]
    pub device: Option<String>,
    /// Namespace ID (device paths; the simulator has namespace 1).
    #[arg(long, default_value_t = 1, value_parser = crate::commands::args::parse_nsid)]
    pub nsid: u32,
    /// Paths, comma separated: sim, sim-null (the simulator, RAM or null data; no hardware), or
    /// compare's rows with --device: block, libaio, psync, buffered, sched, best, passthru, vfio, interrupts, mmio.
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
    /// Runs of every point (path x setting), in rounds: round r runs the settings, and the paths of each
    /// group, rotated r places. Each figure is then the median of the runs with their min-max range;
    /// sweep.json keeps every run.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Measured time per run of a point.
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
    #[arg(long, value_parser = crate::commands::args::parse_cpus)]
    pub cpus: Option<crate::commands::args::CpuList>,
    /// Simulated namespace size (sim paths).
    #[arg(long, default_value = "1G", value_parser = crate::cli::parse::parse_size)]
    pub sim_size: u64,
    /// CPU of the simulated controller's thread (default: one the job threads do not use).
    #[arg(long, value_parser = crate::commands::args::parse_cpu)]
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
    /// The options given on the command line (clap's ids), filled in by
    /// the dispatcher: those of another backend are refused.
    #[arg(skip)]
    pub given: Vec<String>,
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
    if let Some(d) = &a.device {
        crate::commands::args::refuse_non_nvme(d)?;
    }
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
    // Options of the paths not swept have no effect: refused, not ignored.
    let given = |id: &str| a.given.iter().any(|g| g == id);
    for (id, flag) in [("sim_size", "--sim-size"), ("sim_cpu", "--sim-cpu")] {
        if given(id) && sim.is_empty() {
            return Err(Error::usage(format!("{flag} has no effect on --paths {}: it is an option of the simulator paths (sim, sim-null); drop it, or add them to --paths", paths.join(","))));
        }
    }
    if given("nsid") && device.is_empty() {
        return Err(Error::usage(format!("--nsid has no effect on --paths {}: the simulator has namespace 1 only; drop it, or sweep a device's paths with --device", paths.join(","))));
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
    // No namespace has blocks under 512 bytes: refused before anything opens.
    if let Some(&b) = a.bs.iter().find(|&&b| b % 512 != 0) {
        return Err(Error::usage(format!(
            "--bs {b} (of --bs {}) is not a whole number of 512-byte blocks; use multiples of the namespace's block size, e.g. 4k,16k,64k,128k; nothing was run",
            a.bs.iter().map(|&b| size_label(b)).collect::<Vec<_>>().join(",")
        )));
    }
    if a.numjobs.contains(&0) {
        return Err(Error::usage("--numjobs 0: every point needs at least one thread"));
    }
    if a.repeat == 0 || a.repeat > 1000 {
        return Err(Error::usage(format!("--repeat {} is out of range; use 1 (one run per point) to 1000, e.g. --repeat 3", a.repeat)));
    }
    if a.runtime.is_zero() {
        return Err(Error::usage("--runtime 0 measures nothing; give each point e.g. --runtime 2"));
    }
    if !sim.is_empty() && (a.sim_size < 512 || a.sim_size % 512 != 0) {
        return Err(Error::usage(format!("--sim-size {} is not a whole number of the simulator's 512-byte blocks; use e.g. --sim-size 64M", a.sim_size)));
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

/// The job of one point.
fn spec_for(a: &SweepArgs, s: Setting, size: u64, cpus: Vec<usize>, stop: &Stop) -> JobSpec {
    JobSpec {
        rw: a.rw,
        bs: s.bs as usize,
        iodepth: s.iodepth,
        rwmixread: a.rwmixread,
        offset: a.offset,
        size,
        size_given: a.size.is_some(),
        runtime: Some(a.runtime),
        ios: None,
        ramp: a.ramp_time,
        verify: None,
        // fio's default scramble_buffers=1 (writes unique per block).
        scramble: true,
        batch: 0,
        batch_complete: 0,
        reap_max: 0,
        split_lat: false,
        rate_iops: None,
        think: None,
        sync_every: 0,
        end_sync: false,
        log_ns: None,
        numjobs: s.numjobs,
        cpus,
        continue_on_error: false,
        seed: 1,
        random_map: false, distribution: Default::default(), files: 1, spread_threads: true,
        reliability: Default::default(),
        stop: stop.clone(),
    }
}

/// Check every point of the grid against path `v`'s namespace before any
/// point runs: a block size or a region the path cannot do is found before
/// the first I/O, not after the rounds before it ran. The path is opened
/// (no I/O) with a queue at the deepest point; a path that does not open is
/// left to its runs, which report why.
fn preflight(a: &SweepArgs, v: &Variant, settings: &[(Setting, Vec<Axis>)], stop: &Stop) -> Result<(), Error> {
    let queues = settings.iter().map(|(s, _)| s.numjobs).max().unwrap_or(1).min(u16::MAX as usize) as u16;
    let Ok(target) = v.spec.open(queues) else { return Ok(()) };
    let geo = target.geometry();
    check_points(a, v, settings, &geo, stop)?;
    // The deepest queue at the largest block size: a queue that cannot hold
    // it is bad input too (--iodepth above the controller's MQES).
    let depth = settings.iter().map(|(s, _)| s.iodepth).max().unwrap_or(1);
    let buf = settings.iter().map(|(s, _)| s.bs).max().unwrap_or(4096) as usize;
    match target.open_queue(crate::backend::QueueParams { depth, buf_size: buf, batch: 0 }) {
        Ok(q) => {
            let _ = q.close();
            Ok(())
        }
        Err(e @ crate::backend::BackendError::Invalid(_)) => {
            Err(Error::usage(format!("{}: {}; nothing was run", v.label, crate::error::chain(&Error::from(e)))))
        }
        Err(_) => Ok(()),
    }
}

/// Refuse the grid if any point cannot run on a namespace of `geo`, naming
/// the point and the option to change.
fn check_points(a: &SweepArgs, v: &Variant, settings: &[(Setting, Vec<Axis>)], geo: &crate::backend::Geometry, stop: &Stop) -> Result<(), Error> {
    let size = a.size.unwrap_or(geo.bytes().saturating_sub(a.offset));
    // Without --size the simulator's region is --sim-size from --offset.
    let sim_region = v.path == PathKind::Sim && a.size.is_none();
    for (s, _) in settings {
        if let Err(e) = engine::validate(&spec_for(a, *s, size, vec![], stop), geo) {
            // A larger namespace helps a point whose I/O fits a command,
            // not one above the largest transfer (MDTS).
            let sim_hint = if sim_region && s.bs as usize <= geo.max_transfer { " (or a larger --sim-size)" } else { "" };
            return Err(Error::usage(format!(
                "{} cannot run the point bs={} iodepth={} numjobs={}: {}{sim_hint}; nothing was run",
                v.label,
                size_label(s.bs),
                s.iodepth,
                s.numjobs,
                crate::error::chain(&Error::from(e))
            )));
        }
    }
    Ok(())
}

/// What every point's run needs, and the points the runs go to.
struct Runner<'a> {
    args: &'a SweepArgs,
    clock: Clock,
    /// Show the engine's live status line (stderr is a terminal).
    status: bool,
    progress: Progress,
    /// Ctrl-C: the remaining runs are not run.
    stop: Stop,
    /// The grid, in its own order.
    settings: Vec<(Setting, Vec<Axis>)>,
    /// Path by path, each path's settings in grid order.
    points: Vec<Point>,
    /// Runs made so far.
    seq: usize,
}

impl Runner<'_> {
    /// The point of path `pi` at setting `si`.
    fn point(&mut self, pi: usize, si: usize) -> &mut Point {
        let n = self.settings.len();
        &mut self.points[pi * n + si]
    }

    /// Record a run of path `pi` at setting `si`, numbered in run order.
    fn push(&mut self, pi: usize, si: usize, mut run: Run) {
        run.seq = self.seq;
        self.seq += 1;
        self.point(pi, si).runs.push(run);
    }

    /// The settings in the order round `round` runs them.
    fn order(&self, round: usize) -> Vec<usize> {
        rotated(&(0..self.settings.len()).collect::<Vec<_>>(), round)
    }
}

/// `v` rotated left by `by` places: round r of `--repeat` starts r places
/// later, so no point is always first (cold) or always last.
fn rotated<T: Clone>(v: &[T], by: usize) -> Vec<T> {
    if v.is_empty() {
        return vec![];
    }
    let k = by % v.len();
    v[k..].iter().chain(&v[..k]).cloned().collect()
}

/// Does the path poll for completions? Then its measured IOPS per busy core
/// is bounded by how often the device makes it wait, and the modelled
/// ceiling says what the path itself would do.
fn polled(spec: &PathSpec) -> bool {
    match spec {
        PathSpec::Sim(_) => true,
        PathSpec::Vfio(o) => !o.interrupts,
        PathSpec::Passthru(k) | PathSpec::Block(k) => k.hipri || k.sqthread_poll,
    }
}

/// One round of one simulator path (`pi`): every setting, in the round's
/// rotated order. The controller is started once for the round (with as
/// many queue pairs as the most threads any point uses) on `sim_cpu`; job
/// threads are placed as `bench` places them.
fn run_sim(r: &mut Runner, pi: usize, v: &Variant, round: usize, sim_cpu: Option<usize>) {
    let a = r.args;
    let label = v.label.as_str();
    let order = r.order(round);
    if r.stop.requested() {
        return;
    }
    let queues = r.settings.iter().map(|(s, _)| s.numjobs).max().unwrap_or(1).min(u16::MAX as usize) as u16;
    let target = match v.spec.open(queues) {
        Ok(t) => t,
        Err(e) => {
            let msg = crate::error::chain(&Error::from(e));
            for &si in &order {
                r.push(pi, si, Run::failed(round, format!("simulator did not start: {msg}")));
            }
            r.progress.skip(order.len());
            return;
        }
    };
    let geo = target.geometry();
    let size = a.size.unwrap_or(geo.bytes().saturating_sub(a.offset));
    let threaded = matches!(&v.spec, PathSpec::Sim(o) if o.threaded);
    for si in order {
        if r.stop.requested() {
            return;
        }
        let setting = r.settings[si].0;
        r.progress.announce(label, setting, round);
        let (cpus, _) = crate::commands::args::sim_placement(setting.numjobs, a.cpus.as_deref(), sim_cpu, threaded);
        let spec = spec_for(a, setting, size, cpus, &r.stop);
        let run = match engine::validate(&spec, &geo).and_then(|_| engine::run(&*target, &spec, r.clock, r.status)) {
            Ok(threads) => {
                let mut s = RunSummary::new(label.to_string(), target.describe(), &threads, r.clock.source());
                s.simulated = true;
                s.simulated_note = Some(SIM_NOTE.into());
                Run::of(round, s)
            }
            Err(e) => Run::failed(round, crate::error::chain(&Error::from(e))),
        };
        r.push(pi, si, run);
    }
}

/// The warnings of [`sim_sharing`](crate::commands::args::sim_sharing) for
/// the simulator's points, as `bench` gives it (with sweep's options as the
/// advice: it has no --sim-sync): one for each of the `numjobs` whose
/// placement (`run_sim`'s, with the controller on `sim_cpu`) has polling
/// threads share a CPU. A point's placement depends on its numjobs alone,
/// so each is said once for the sweep, not at every point and round.
fn sim_sharing_warnings(numjobs: &[usize], cpus: Option<&[usize]>, sim_cpu: Option<usize>, threaded: bool) -> Vec<String> {
    numjobs
        .iter()
        .filter_map(|&n| {
            let (job_cpus, sim_cpu) = crate::commands::args::sim_placement(n, cpus, sim_cpu, threaded);
            let advice = "give each its own CPU (fewer --numjobs, --cpus, --sim-cpu)";
            crate::commands::args::sim_sharing_advised(n, &job_cpus, sim_cpu, advice).map(|w| format!("simulator points at numjobs={n}: {w}"))
        })
        .collect()
}

/// Every round of the device paths: the kernel paths' rounds first, then
/// the vfio paths' (the controller moves to vfio-pci once, before the first
/// vfio run, and goes back at the end; the guard also restores it on
/// unwinding). Within a group, round r rotates both the paths and each
/// path's settings r places. `paths` is the sweep's whole path list
/// (indices into the points).
fn run_device(r: &mut Runner, session: &mut Session, paths: &[Variant]) {
    let a = r.args;
    let t = session.topology.clone();
    let device: Vec<usize> = (0..paths.len()).filter(|&i| paths[i].path != PathKind::Sim).collect();
    let kernel: Vec<usize> = device.iter().copied().filter(|&i| paths[i].path != PathKind::Vfio).collect();
    let vfio: Vec<usize> = device.iter().copied().filter(|&i| paths[i].path == PathKind::Vfio).collect();
    let mut bind_error: Option<String> = None;
    // vfio's limits (the controller's MDTS and MQES, not the kernel's) are
    // checked once it is on vfio-pci, before its first point runs.
    let mut vfio_refused: Option<Option<String>> = None;
    for group in [kernel, vfio] {
        for round in 0..a.repeat {
            for pi in rotated(&group, round) {
                let v = &paths[pi];
                if v.path == PathKind::Vfio && bind_error.is_none() && !r.stop.requested() {
                    bind_error = session.bind_vfio().err();
                }
                if v.path == PathKind::Vfio && bind_error.is_none() && vfio_refused.is_none() {
                    vfio_refused = Some(preflight(a, v, &r.settings, &r.stop).err().map(|e| crate::error::chain(&e)));
                }
                for si in r.order(round) {
                    if r.stop.requested() {
                        return;
                    }
                    let s = r.settings[si].0;
                    if let (PathKind::Vfio, Some(e)) = (v.path, &bind_error) {
                        let e = format!("could not bind to vfio-pci: {e}");
                        r.push(pi, si, Run::failed(round, e));
                        r.progress.skip(1);
                        continue;
                    }
                    if let (PathKind::Vfio, Some(Some(e))) = (v.path, &vfio_refused) {
                        r.push(pi, si, Run::failed(round, format!("not run: {e}")));
                        r.progress.skip(1);
                        continue;
                    }
                    r.progress.announce(&v.label, s, round);
                    let spec = spec_for(a, s, a.size.unwrap_or(0), a.cpus.clone().unwrap_or_default(), &r.stop);
                    let run = match session::run_variant(v, &t, &spec, r.clock, r.status) {
                        Ok((summary, _)) => Run::of(round, summary),
                        Err(e) => Run::failed(round, crate::error::chain(&e)),
                    };
                    r.push(pi, si, run);
                }
            }
        }
    }
}

/// Counts runs for the progress lines on stderr.
struct Progress {
    done: usize,
    total: usize,
    rounds: usize,
}

impl Progress {
    fn announce(&mut self, label: &str, s: Setting, round: usize) {
        self.done += 1;
        let r = if self.rounds > 1 { format!(" round {}/{}", round + 1, self.rounds) } else { String::new() };
        eprintln!("nvme-bypass: [{}/{}]{r} {label}: bs={} iodepth={} numjobs={}", self.done, self.total, size_label(s.bs), s.iodepth, s.numjobs);
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
    let mut session: Option<Session> = None;
    let mut variants: Vec<Variant> = vec![];
    if !device_paths.is_empty() {
        let dev = a.device.as_deref().expect("checked: device paths need --device");
        let s = Session::open(dev, a.nsid, "sweep on a device", " (or sweep the simulator: --paths sim,sim-null)")?;
        let (v, skipped) = plan_paths(Some(&device_paths), &s.topology);
        for s in &skipped {
            eprintln!("nvme-bypass: skipping {s}");
        }
        if v.is_empty() && sim_paths.is_empty() {
            return Err(Error::usage(format!("none of --paths {} applies to {dev}; see the lines above", device_paths.join(","))));
        }
        variants = v;
        session = Some(s);
    }
    let topo = session.as_ref().map(|s| s.topology.clone());
    if device_paths.is_empty() && a.device.is_some() {
        eprintln!("nvme-bypass: note: --device is not used by --paths {}: only the simulator runs", sim_paths.join(","));
    }
    // The simulator's job threads and controller thread on CPUs of their own
    // (plan::sim's controllers run on a thread of their own).
    let max_jobs = numjobs.iter().copied().max().unwrap_or(1);
    let (sim_job_cpus, sim_cpu) = crate::commands::args::sim_placement(max_jobs, a.cpus.as_deref(), a.sim_cpu, true);
    let mut paths: Vec<Variant> = sim_paths.iter().map(|&l| plan::sim(l == "sim-null", a.sim_size, sim_cpu)).collect();
    // Kernel rows first, vfio last, so the controller moves once.
    variants.sort_by_key(|v| v.path == PathKind::Vfio);
    paths.extend(variants);

    // Every point of every path checked before the first I/O of any.
    // (vfio's own limits are checked once the controller is on vfio-pci,
    // before its first point runs; here against the kernel's view.)
    for v in paths.iter().filter(|v| v.path != PathKind::Vfio) {
        preflight(a, v, &settings, stop)?;
    }
    if !sim_paths.is_empty() {
        for w in sim_sharing_warnings(&numjobs, a.cpus.as_deref(), sim_cpu, true) {
            eprintln!("nvme-bypass: warning: {w}");
        }
    }

    let out = a.out.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        PathBuf::from(format!("results/sweep-{}", utc_stamp(now)))
    });
    // A sweep's figures are measurements: an earlier one's are not
    // written over (a report made from inputs, as count-report's, may be).
    if out.join("sweep.json").exists() {
        return Err(Error::usage(format!(
            "--out {} holds an earlier sweep's results (sweep.json), which this one would overwrite: give another --out, or move that one away first",
            out.display()
        )));
    }
    std::fs::create_dir_all(&out).map_err(|e| Error::setup(format!("cannot create --out {}", out.display()), "pick a folder you can write", e))?;
    eprintln!(
        "nvme-bypass: sweeping {} point{} x {} path{}{} ({} each, {} warm-up) into {}",
        settings.len(),
        if settings.len() == 1 { "" } else { "s" },
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        if a.repeat > 1 { format!(" x {} rounds in rotated order", a.repeat) } else { String::new() },
        fmt::secs(a.runtime),
        fmt::secs(a.ramp_time),
        out.display()
    );

    let qemu = topo.as_ref().is_some_and(|t| t.emulated.is_some());
    let mut points = vec![];
    for v in &paths {
        for (s, axes) in &settings {
            let mut p = Point::new(&v.label, *s, axes, a.repeat);
            p.polled = polled(&v.spec);
            p.simulated = v.path == PathKind::Sim;
            p.emulated = v.path != PathKind::Sim && qemu;
            points.push(p);
        }
    }
    let mut r = Runner {
        args: a,
        clock: Clock::calibrate(),
        status: a.output_format == OutputFormat::Normal && crate::sys::isatty(2),
        progress: Progress { done: 0, total: settings.len() * paths.len() * a.repeat, rounds: a.repeat },
        stop: stop.clone(),
        settings: settings.clone(),
        points,
        seq: 0,
    };

    // Simulator paths: the controller thread on a CPU of its own; the
    // core-to-core latency measured before and after, while it is not running.
    let mut c2c = None;
    let mut share = None;
    if !sim_paths.is_empty() {
        let pair = sim_job_cpus.first().copied().zip(sim_cpu);
        let before = pair.and_then(|(x, y)| crate::measure::c2c::measure(x, y, 20_000));
        for round in 0..a.repeat {
            let sims: Vec<usize> = (0..paths.len()).filter(|&i| paths[i].path == PathKind::Sim).collect();
            for pi in rotated(&sims, round) {
                run_sim(&mut r, pi, &paths[pi], round, sim_cpu);
            }
        }
        let after = pair.and_then(|(x, y)| crate::measure::c2c::measure(x, y, 20_000));
        c2c = pair.map(|_| (before, after));
        share = pair.and_then(|(x, y)| crate::measure::c2c::core_share(x, y, std::time::Duration::from_millis(5)));
    }

    // Device paths, kernel first, then vfio.
    let driver_before = topo.as_ref().and_then(|t| t.driver.clone());
    let mut driver_after = None;
    if let Some(mut s) = session {
        run_device(&mut r, &mut s, &paths);
        driver_after = s.finish();
    }
    let mut points = r.points;
    for p in &mut points {
        p.finish();
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
        simulated: (!sim_paths.is_empty()).then(|| format!("simulator ({}): {SIM_NOTE}", sim_paths.join(", "))),
        emulated: topo.as_ref().and_then(|t| t.emulated.clone()),
        topology: topo,
        workload: serde_json::json!({
            "rw": a.rw.as_str(), "rwmixread": a.rwmixread, "iodepth": iodepths, "bs": bss, "numjobs": numjobs,
            "runtime_s": a.runtime.as_secs_f64(), "ramp_s": a.ramp_time.as_secs_f64(), "offset": a.offset, "size": a.size,
            "cpus": a.cpus, "sim_size": (!sim_paths.is_empty()).then_some(a.sim_size), "plan": plan,
            "repeat": a.repeat, "order": ORDER,
        }),
        paths: paths.iter().map(|p| p.label.clone()).collect(),
        polled_paths: paths.iter().filter(|p| polled(&p.spec)).map(|p| p.label.clone()).collect(),
        repeat: a.repeat,
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
        ("latency_vs_iops.svg", charts::latency_vs_iops),
    ] {
        match draw(&sw, &out.join(file)) {
            Ok(()) => sw.charts.push(file.to_string()),
            Err(e) => chart_errors.push(format!("{file}: {e}")),
        }
    }
    let text = table(&sw, &out);
    let json = serde_json::to_string_pretty(&sw).expect("serializable");
    let write = |name: &str, body: &str| {
        std::fs::write(out.join(name), body).map_err(|e| Error::io(format!("cannot write {}", out.join(name).display()), e))
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

/// What produced a point's figures, as the table's `device` column says it.
fn device_word(p: &Point) -> &'static str {
    if p.simulated {
        "simulated"
    } else if p.emulated {
        "emulated"
    } else {
        "hardware"
    }
}

/// The compact text table: one line per point, path by path, with the
/// figures' medians; with `--repeat` above 1 a second line under each
/// gives every figure's min-max range over the runs.
pub fn table(sw: &Sweep, out: &Path) -> String {
    let mut o = String::new();
    if let Some(e) = &sw.simulated {
        o.push_str(&format!("SIMULATED: {e}\n"));
    }
    if let Some(e) = &sw.emulated {
        o.push_str(&format!("EMULATED: {e}\n"));
    }
    if let Some(t) = &sw.topology {
        o.push_str(&format!("{}\n", session::device_line(t)));
    }
    let runs = if sw.repeat > 1 { format!(", {} runs per point in rotated order", sw.repeat) } else { String::new() };
    o.push_str(&format!(
        "workload: rw={}, {}s per run after {}s warm-up{runs}\n",
        sw.workload["rw"].as_str().unwrap_or("?"),
        sw.workload["runtime_s"],
        sw.workload["ramp_s"]
    ));
    for line in sw.workload["plan"].as_array().into_iter().flatten() {
        o.push_str(&format!("  {}\n", line.as_str().unwrap_or("")));
    }
    o.push('\n');
    let ranges = sw.repeat > 1;
    // Wide enough for "999.9k-999.9k" when ranges are shown.
    let w = if ranges { 13 } else { 10 };
    let lead_w = 24 + 1 + 5 + 1 + 4 + 1 + 4 + 1 + 9;
    let measured = if ranges { format!(" measured: median of {} runs, min-max below ", sw.repeat) } else { " measured ".to_string() };
    // A label centred in dashes over `cells` columns.
    let bar = |label: &str, cells: usize| {
        let n = (cells * (w + 1) - 1).saturating_sub(label.chars().count());
        format!("{}{label}{}", "-".repeat(n / 2), "-".repeat(n - n / 2))
    };
    o.push_str(&format!("{:lead_w$} {} | {}\n", "", bar(&measured, 8), bar(" modelled ", 2)));
    o.push_str(&format!(
        "{:<24} {:>5} {:>4} {:>4} {:<9} {:>w$} {:>w$} {:>w$} {:>w$} {:>w$} {:>w$} {:>w$} {:>w$} | {:>w$} {:>w$}\n",
        "path", "bs", "QD", "jobs", "device", "IOPS", "MiB/s", "p50 us", "p99 us", "p99.9 us", "cores", "IOPS/core", "cpu ns", "ceiling", "useful ns"
    ));
    type Cell = (Option<Spread>, fn(f64) -> String);
    for p in &sw.points {
        let lead = format!("{:<24} {:>5} {:>4} {:>4} {:<9}", p.path, size_label(p.bs), p.iodepth, p.numjobs, device_word(p));
        if !p.ok() {
            o.push_str(&format!("{lead} not run: {}\n", p.error.as_deref().unwrap_or("?")));
            continue;
        }
        let cells: [Cell; 10] = [
            (p.measured_iops, si),
            (p.measured_mib_per_s, |x| format!("{x:.1}")),
            (p.measured_lat_p50_ns, |x| us(x as u64)),
            (p.measured_lat_p99_ns, |x| us(x as u64)),
            (p.measured_lat_p999_ns, |x| us(x as u64)),
            (p.measured_cores_busy, |x| format!("{x:.2}")),
            (p.measured_iops_per_busy_core, si),
            (p.measured_cpu_ns_per_io, |x| format!("{x:.0}")),
            (p.modelled_ceiling_iops_per_core, si),
            (p.modelled_useful_cpu_ns_per_io, |x| format!("{x:.0}")),
        ];
        let row = |pick: fn(&Spread, fn(f64) -> String) -> String| {
            let c: Vec<String> = cells.iter().map(|(v, f)| v.as_ref().map(|v| pick(v, *f)).unwrap_or_else(|| "-".into())).collect();
            format!(
                "{:>w$} {:>w$} {:>w$} {:>w$} {:>w$} {:>w$} {:>w$} {:>w$} | {:>w$} {:>w$}",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]
            )
        };
        o.push_str(&format!("{lead} {}{}\n", row(|v, f| f(v.median)), p.error.as_deref().map(|e| format!("  ({e})")).unwrap_or_default()));
        if ranges {
            let n = p.measured_iops.map(|s| s.n).unwrap_or(0);
            let what = if n < sw.repeat { format!("min-max n={n}") } else { "min-max".to_string() };
            o.push_str(&format!("{:>lead_w$} {}\n", what, row(|v, f| format!("{}-{}", f(v.min), f(v.max)))));
        }
    }
    o.push_str(
        "\nmeasured: cores and IOPS/core are system-wide (/proc/stat over the measured interval, as in compare):\n\
         IOPS/core = IOPS per busy core; cpu ns = the benchmark threads' own CPU per I/O.\n\
         modelled: ceiling = 1 s / (busy CPU per I/O less the time of polls that found nothing), the IOPS one core\n\
         would do if the device never made the path wait; useful ns = the threads' CPU per I/O less empty polls.\n\
         For polled paths measured IOPS/core is bounded by the device and the modelled ceiling is the path's own\n\
         cost; for interrupt-driven paths the two agree. Short runs make /proc/stat figures coarse (10 ms ticks):\n\
         prefer --runtime of a few seconds for figures you quote.\n",
    );
    if let Some((b, a)) = sw.core_to_core_ns {
        let f = |x: Option<f64>| x.map(|v| format!("{v:.0} ns")).unwrap_or("n/a".into());
        o.push_str(&format!("simulator core-to-core latency, measured: {} before, {} after (compare simulated figures only within one state)\n", f(b), f(a)));
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

mod charts;
pub mod model;

pub use model::{grid, Axis, Point, Run, Setting, Sweep};

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
    fn rounds_rotate_and_points_sum_up_their_runs() {
        assert_eq!(rotated(&[0, 1, 2], 0), vec![0, 1, 2]);
        assert_eq!(rotated(&[0, 1, 2], 1), vec![1, 2, 0]);
        assert_eq!(rotated(&[0, 1, 2], 5), vec![2, 0, 1]);
        assert!(rotated::<usize>(&[], 3).is_empty());

        let s = Setting { bs: 4096, iodepth: 8, numjobs: 1 };
        let mut p = Point::new("sim", s, &[Axis::Iodepth], 3);
        for (round, iops) in [(0, 100.0), (1, 300.0), (2, 200.0)] {
            let mut r = Run::failed(round, String::new());
            r.error = None;
            r.measured_iops = Some(iops);
            r.modelled_ceiling_iops_per_core = Some(iops * 2.0);
            p.runs.push(r);
        }
        p.finish();
        let m = p.measured_iops.unwrap();
        assert_eq!((m.median, m.min, m.max, m.n), (200.0, 100.0, 300.0, 3));
        assert_eq!(p.modelled_ceiling_iops_per_core.unwrap().median, 400.0);
        assert!(p.measured_cores_busy.is_none() && p.error.is_none() && p.ok());

        // A failed run keeps the others' figures and names its round.
        p.runs[1] = Run::failed(1, "boom".into());
        p.finish();
        assert_eq!(p.measured_iops.unwrap().n, 2);
        assert_eq!(p.error.as_deref(), Some("round 2: boom"));

        // Runs missing after Ctrl-C are said to be.
        p.runs.truncate(1);
        p.finish();
        assert_eq!(p.error.as_deref(), Some("interrupted: 1 of 3 runs"));
        p.runs.clear();
        p.finish();
        assert!(!p.ok());
        assert_eq!(p.error.as_deref(), Some("interrupted"));
    }

    /// Pollers sharing a CPU are warned of once per numjobs whose placement
    /// shares one, whatever the number of points and rounds at it.
    #[test]
    fn sharing_is_warned_of_once_per_numjobs_that_shares() {
        // One job CPU, the controller on another: 1 job alone, 2 and 4 share.
        let w = sim_sharing_warnings(&[1, 2, 4], Some(&[0]), Some(1), true);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("simulator points at numjobs=2: ") && w[0].contains("2 of them on CPU 0"), "{}", w[0]);
        assert!(w[1].starts_with("simulator points at numjobs=4: ") && w[1].contains("4 of them on CPU 0"), "{}", w[1]);
        // What to do names sweep's options: it has no --sim-sync.
        assert!(w[0].ends_with("give each its own CPU (fewer --numjobs, --cpus, --sim-cpu)") && !w[0].contains("--sim-sync"), "{}", w[0]);
        // The controller on a job's CPU: shared from one job on.
        let w = sim_sharing_warnings(&[1], Some(&[0, 1]), Some(0), true);
        assert!(w.len() == 1 && w[0].contains("2 of them on CPU 0"), "{w:?}");
        // A CPU each: nothing to say.
        assert!(sim_sharing_warnings(&[1, 2, 3], Some(&[0, 1, 2]), Some(3), true).is_empty());
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
