//! `nvme-bypass compare`: the project's main job. The same workload on the
//! same namespace through every path, one after another in one process, and
//! one side-by-side table: IOPS, bandwidth, latency percentiles, CPU per I/O
//! split user/kernel, cores busy, IOPS per busy core (all measured), then
//! the system ceiling (modelled) from them, and the headline: how far IOPS
//! per busy core moved from the block layer to passthrough to our userspace
//! driver, and the model beside it.
//!
//! With `--repeat N` every row runs N times in rotated rounds with a noise
//! control (`experiment::repeat`), and every figure is a median with its
//! range.
//!
//! The controller is moved to vfio-pci only for the vfio rows and given back
//! to its original driver afterwards, also after an error or Ctrl-C (the
//! binding guard restores on drop). Scheduler changes are restored the same way.

use crate::backend::path::PathKind;
use crate::error::{exit, Error};
use crate::report::OutputFormat;
use crate::measure::clock::Clock;
use crate::engine::{JobSpec, Stop};
use crate::experiment::plan::{plan_paths, Variant};
use crate::experiment::session::{self, Session};
use crate::experiment::repeat::{noise_control_index, ratio, rotated_order, Ratio, Reading, RowFigures, RunFigures, NOISE_CONTROL_SUFFIX};
use crate::measure::spread::Spread;
use crate::report::fmt::{si, us};
use crate::report::RunSummary;
use crate::measure::topology::Topology;
use crate::engine::workload::Rw;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// The controller (PCI address) or one of its namespace devices (/dev/nvme0n1, /dev/ng0n1).
    #[arg(long)]
    pub device: String,
    /// Namespace ID.
    #[arg(long, default_value_t = 1, value_parser = crate::commands::args::parse_nsid)]
    pub nsid: u32,
    /// Rows to run, comma separated, from: block, libaio, psync, passthru, vfio, buffered, sched
    /// (mq-deadline against none), best (each path's best variant), interrupts and mmio (vfio's
    /// variants of those names). Default: all that apply.
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
    /// I/Os per submission on every path (doorbell or system call); 0 = all that fit.
    #[arg(long, default_value_t = 0)]
    pub batch: usize,
    /// Completions per reap on every path: 0 reaps whatever is there; N > 1
    /// reaps exactly N at a time, once N are ready, so every pass does the
    /// same work whatever the device's speed (the counting boot uses 8).
    #[arg(long, default_value_t = 0)]
    pub batch_complete: usize,
    /// Percentage of reads in mixed patterns.
    #[arg(long, default_value_t = 50)]
    pub rwmixread: u8,
    /// Measured time per row.
    #[arg(long, default_value = "5", value_parser = crate::cli::parse::parse_duration)]
    pub runtime: Duration,
    /// Warm-up per row.
    #[arg(long, default_value = "1", value_parser = crate::cli::parse::parse_duration)]
    pub ramp_time: Duration,
    /// Stop each row after this many I/Os per thread, counted from the
    /// row's start (--ramp-time included); --runtime is then an upper
    /// bound. The same work in every row whatever the device's speed: the
    /// counting boot uses it with --ramp-time 0, so a window's fixed costs
    /// (the first fill of the queue, the last drain) are the same share of
    /// every boot's count.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ios: Option<u64>,
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
    #[arg(long, value_parser = crate::commands::args::parse_cpus)]
    pub cpus: Option<crate::commands::args::CpuList>,
    /// Allow writing to the device (needed for write patterns).
    #[arg(long)]
    pub allow_write: bool,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    /// Rounds: run every row this many times, each round starting at a
    /// different row, with the baseline run once more per round as the
    /// noise control; figures are then medians with their min-max range,
    /// and a ratio whose range overlaps the noise control's reads "within
    /// noise". 1: one run per row, no noise verdicts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Folder for table.txt and compare.json (created).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One run of a row.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Round, from 0.
    pub round: usize,
    /// Place in the whole run order, from 0 (with NVB_MARKERS=N the run is
    /// the instruction counter's window N + position).
    pub position: usize,
    /// Its figures, when it ran.
    pub figures: Option<RunFigures>,
    /// Its summary, when it ran.
    #[serde(serialize_with = "crate::report::summary::serialize_opt")]
    pub summary: Option<RunSummary>,
    /// Why it did not run or failed.
    pub error: Option<String>,
}

/// The result of one row over every round.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// What ran.
    pub variant: Variant,
    /// True for the noise control: the baseline's configuration run once
    /// more in every round.
    pub noise_control: bool,
    /// Every run, in run order (one per round).
    pub runs: Vec<Run>,
    /// The summary of the median run (by measured IOPS per busy core, else
    /// IOPS; the lower middle for an even count), for readers of one run
    /// per row.
    #[serde(serialize_with = "crate::report::summary::serialize_opt")]
    pub summary: Option<RunSummary>,
    /// The first run's failure, if any failed.
    pub error: Option<String>,
    /// Each figure's median, min, max and n over the runs that ran.
    pub figures: RowFigures,
    /// Measured IOPS per busy core over the baseline's median, with its
    /// reading against the noise control.
    pub iops_per_busy_core_ratio_measured: Option<Ratio>,
    /// Measured system-wide CPU per I/O over the baseline's median.
    pub cpu_ns_per_io_ratio_measured: Option<Ratio>,
    /// The system ceiling (modelled) over the baseline's median.
    pub system_ceiling_ratio_modelled: Option<Ratio>,
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
    /// Rounds: every row ran this many times.
    pub repeat: usize,
    /// The rows' labels in the order they ran, one list per round.
    pub run_order: Vec<Vec<String>>,
    /// Rows in plan order (the noise control half a round from the baseline).
    pub rows: Vec<Row>,
    /// Baseline row label.
    pub baseline: String,
    /// Noise control row label (None with one round, or without a baseline).
    pub noise_control: Option<String>,
    /// One line per path: the measured figures against the baseline, then
    /// the modelled ceiling.
    pub headline: Vec<String>,
    /// Set when the baseline and its noise control do not overlap.
    pub noise_warning: Option<String>,
    /// Driver of the controller before and after the run.
    pub driver_before: Option<String>,
    /// Driver after.
    pub driver_after: Option<String>,
}

/// The rows `args` asks for, in run order (kernel paths first, vfio last so
/// the controller moves once).
pub fn plan(args: &CompareArgs, t: &Topology) -> (Vec<Variant>, Vec<String>) {
    plan_paths(args.paths.as_deref(), t)
}

/// The namespace's block size and capacity as the kernel gives them for
/// its block device (`/sys/block/NAME/queue/logical_block_size`, `size` in
/// 512-byte sectors), to check the settings every row shares before any
/// row runs. The largest transfer is each path's own and is left to the
/// rows.
fn block_geometry(block: &std::path::Path, nsid: u32) -> Option<crate::backend::Geometry> {
    use crate::backend::kernel::read_sys_u64;
    let dir = std::path::Path::new("/sys/block").join(block.file_name()?);
    let lba = read_sys_u64(dir.join("queue/logical_block_size"))?;
    let sectors = read_sys_u64(dir.join("size"))?;
    (lba > 0).then(|| crate::backend::Geometry { nsid, lba_size: lba as u32, blocks: sectors * 512 / lba, max_transfer: usize::MAX })
}

/// Label of the baseline row.
pub const BASELINE: &str = "block/io_uring";

/// The rows of a comparison of `repeat` rounds: `variants` and, with more
/// than one round and a baseline, its noise control half a round from it
/// (second of each pair: true for the noise control).
pub fn rows_with_noise_control(variants: Vec<Variant>, repeat: usize) -> Vec<(Variant, bool)> {
    let mut rows: Vec<(Variant, bool)> = variants.into_iter().map(|v| (v, false)).collect();
    if repeat > 1 {
        if let Some(b) = rows.iter().position(|(v, _)| v.label == BASELINE) {
            let mut n = rows[b].0.clone();
            n.label.push_str(NOISE_CONTROL_SUFFIX);
            n.note = format!("the baseline again ({}): run-to-run noise", n.note);
            rows.insert(noise_control_index(rows.len(), b), (n, true));
        }
    }
    rows
}

/// One row from its runs: figures, the median run's summary, first error.
pub fn row_of(variant: Variant, noise_control: bool, runs: Vec<Run>) -> Row {
    let figs: Vec<RunFigures> = runs.iter().filter_map(|r| r.figures).collect();
    let mut ok: Vec<&Run> = runs.iter().filter(|r| r.summary.is_some() && r.figures.is_some()).collect();
    let key = |r: &Run| r.figures.map(|f| f.iops_per_busy_core_measured.unwrap_or(f.iops_measured)).unwrap_or(0.0);
    ok.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let summary = ok.get(ok.len().saturating_sub(1) / 2).and_then(|r| r.summary.clone());
    let error = runs.iter().find_map(|r| r.error.clone());
    Row {
        variant,
        noise_control,
        figures: RowFigures::of(&figs),
        runs,
        summary,
        error,
        iops_per_busy_core_ratio_measured: None,
        cpu_ns_per_io_ratio_measured: None,
        system_ceiling_ratio_modelled: None,
    }
}

/// Fill the ratios and readings against the baseline and its noise
/// control, and write the headline.
pub fn finish(rows: &mut [Row], repeat: usize) -> Vec<String> {
    let base = rows.iter().find(|r| r.variant.label == BASELINE && !r.noise_control).map(|r| r.figures);
    let noise = rows.iter().find(|r| r.noise_control).map(|r| r.figures);
    let repeated = repeat > 1;
    for r in rows.iter_mut() {
        let f = r.figures;
        let b = base.unwrap_or_default();
        let n = noise.unwrap_or_default();
        r.iops_per_busy_core_ratio_measured = ratio(f.iops_per_busy_core_measured, b.iops_per_busy_core_measured, n.iops_per_busy_core_measured, repeated);
        r.cpu_ns_per_io_ratio_measured = ratio(f.cpu_ns_per_io_measured, b.cpu_ns_per_io_measured, n.cpu_ns_per_io_measured, repeated);
        r.system_ceiling_ratio_modelled = ratio(f.system_ceiling_iops_modelled, b.system_ceiling_iops_modelled, n.system_ceiling_iops_modelled, repeated);
    }
    let mut headline = vec![];
    let bcpu = base.and_then(|b| b.cpu_ns_per_io_measured);
    for r in rows.iter().filter(|r| r.variant.label != BASELINE && !r.noise_control) {
        let (Some(a), Some(cpu), Some(bc)) = (r.iops_per_busy_core_ratio_measured, r.figures.cpu_ns_per_io_measured, bcpu) else { continue };
        let mut line = format!(
            "{}: {} the IOPS per busy core of {BASELINE} (measured, {}), at {} CPU per I/O against {} (measured)",
            r.variant.label,
            times(&a.spread),
            a.reading.words(),
            ns_range(&cpu),
            ns_range(&bc),
        );
        if let Some(m) = r.system_ceiling_ratio_modelled {
            line.push_str(&format!("; system ceiling (modelled) {} the baseline's ({})", times(&m.spread), m.reading.words()));
        }
        headline.push(line);
    }
    headline
}

/// "2.31x [2.10-2.45]" (the range only when repeated).
fn times(s: &Spread) -> String {
    if s.n > 1 {
        format!("{:.2}x [{:.2}-{:.2}]", s.median, s.min, s.max)
    } else {
        format!("{:.2}x", s.median)
    }
}

/// "1.23 us [1.20-1.31]" (the range only when repeated).
fn ns_range(s: &Spread) -> String {
    let u = |ns: f64| format!("{:.2}", ns / 1000.0);
    if s.n > 1 {
        format!("{} us [{}-{}]", u(s.median), u(s.min), u(s.max))
    } else {
        format!("{} us", u(s.median))
    }
}

/// "[98.1K-105K]", or "-" for one run.
fn range_si(s: Option<Spread>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("[{}-{}]", si(s.min), si(s.max)),
        _ => "-".into(),
    }
}

/// "[0.97-1.03]", or "-" for one run.
fn range_x(r: Option<Ratio>) -> String {
    match r {
        Some(r) if r.spread.n > 1 => format!("[{:.2}-{:.2}]", r.spread.min, r.spread.max),
        _ => "-".into(),
    }
}

/// The reading column: the baseline and its control by their role.
fn reading(r: &Row, x: Option<Ratio>) -> String {
    if r.noise_control {
        "noise control".into()
    } else if r.variant.label == BASELINE {
        "baseline".into()
    } else {
        x.map(|x| x.reading.words().to_string()).unwrap_or("-".into())
    }
}

/// When the baseline and its noise control, the same configuration, do
/// not overlap in measured IOPS per busy core: the run-to-run noise is
/// larger than either range shows, and every reading is doubtful.
pub fn noise_warning(c: &Comparison) -> Option<String> {
    let b = c.rows.iter().find(|r| r.variant.label == BASELINE && !r.noise_control)?;
    let r = b.iops_per_busy_core_ratio_measured?;
    (r.reading == Reading::Higher || r.reading == Reading::Lower).then(|| {
        format!(
            "{BASELINE} and its noise control, the same configuration, do not overlap in IOPS per busy core ({} against {}): the run-to-run noise here is larger than the ranges show; read no verdict as settled (more rounds, longer --runtime, a quieter machine)",
            range_si(b.figures.iops_per_busy_core_measured),
            range_si(c.rows.iter().find(|r| r.noise_control).and_then(|r| r.figures.iops_per_busy_core_measured)),
        )
    })
}

/// The side-by-side table: measured figures first, then the modelled ceiling.
pub fn table(c: &Comparison) -> String {
    let mut o = String::new();
    if let Some(e) = &c.emulated {
        o.push_str(&format!("EMULATED: {e}\n"));
    }
    o.push_str(&format!("{}\nworkload: {}\n", session::device_line(&c.topology), c.workload));
    if c.repeat > 1 {
        o.push_str(&format!(
            "{} rounds, each row once per round in rotated order (round r starts r rows on); figures are medians, [min-max] over the rounds\n",
            c.repeat
        ));
    } else {
        o.push_str("one round: each figure from one run (not repeated: no range, no noise control; --repeat 3 gives both)\n");
    }
    o.push_str(&format!(
        "\nmeasured{}:\n{:<34} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6} {:>10} {:>15} {:>6} {:>13} {:>13} {:>8}\n",
        if c.emulated.is_some() { ", emulated" } else { "" },
        "path", "IOPS", "MiB/s", "p50 us", "p99 us", "p99.9 us", "usr ns/IO", "krn ns/IO", "cores", "IOPS/core", "IOPS/core range", "x core", "x core range", "x core is", "MMIO/IO"
    ));
    let med = |s: Option<Spread>| s.map(|s| s.median);
    let f0 = |x: Option<f64>, p: usize| x.map(|x| format!("{x:.p$}")).unwrap_or("-".into());
    let usf = |x: Option<f64>| x.map(|x| us(x.round() as u64)).unwrap_or("-".into());
    for r in &c.rows {
        if r.figures.iops_measured.is_none() {
            o.push_str(&format!("{:<34} not run: {}\n", r.variant.label, r.error.as_deref().unwrap_or("?")));
            continue;
        }
        let f = &r.figures;
        o.push_str(&format!(
            "{:<34} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6} {:>10} {:>15} {:>6} {:>13} {:>13} {:>8}\n",
            r.variant.label,
            med(f.iops_measured).map(si).unwrap_or("-".into()),
            f0(med(f.bw_bytes_measured).map(|b| b / (1 << 20) as f64), 1),
            usf(med(f.lat_p50_ns_measured)),
            usf(med(f.lat_p99_ns_measured)),
            usf(med(f.lat_p999_ns_measured)),
            f0(med(f.user_ns_per_io_measured), 0),
            f0(med(f.kernel_ns_per_io_measured), 0),
            f0(med(f.cores_busy_measured), 2),
            med(f.iops_per_busy_core_measured).map(si).unwrap_or("-".into()),
            range_si(f.iops_per_busy_core_measured),
            r.iops_per_busy_core_ratio_measured.map(|x| format!("{:.2}", x.spread.median)).unwrap_or("-".into()),
            range_x(r.iops_per_busy_core_ratio_measured),
            reading(r, r.iops_per_busy_core_ratio_measured),
            // MMIO doorbell writes exist only on our driver's path.
            match (&r.summary, r.variant.path) {
                (Some(s), PathKind::Vfio) => format!("{:.3}", s.mmio_writes_per_io),
                _ => "-".into(),
            },
        ));
    }
    // A row a signal cut short has figures of the time it ran: said, as
    // sweep and bench say it, so it is not read as a whole row.
    let cut: Vec<&str> = c.rows.iter().filter(|r| r.runs.iter().any(|x| x.summary.as_ref().is_some_and(|s| s.interrupted))).map(|r| r.variant.label.as_str()).collect();
    if !cut.is_empty() {
        o.push_str(&format!("interrupted : stopped by a signal during {}; figures cover the time run, not --runtime\n", cut.join(", ")));
    }
    o.push_str(
        "\nCPU columns are system-wide (/proc/stat over the measured interval: user; kernel = system + irq + softirq),\n\
         so completion work in interrupt context on other cores counts. cores = busy cores on average.\n\
         IOPS/core = IOPS per busy core. x core = IOPS/core over the baseline's median; x core is: higher or lower when\n\
         its range clears the noise control's (the baseline run again each round, over the same median), else within noise.\n\
         MMIO/IO: doorbell register writes per I/O of our driver (the kernel paths' doorbells are the kernel's).\n",
    );
    // Without irq-time accounting the kernel sees interrupts between ticks
    // only by sampling: an interrupt-driven row's kernel CPU is a lower bound.
    let lower: Vec<(&str, &str)> = c
        .rows
        .iter()
        .filter_map(|r| r.summary.as_ref().filter(|s| s.kernel_cpu_lower_bound()).map(|s| (r.variant.label.as_str(), s.irq_time_accounting_how.as_str())))
        .collect();
    if let Some((_, how)) = lower.first() {
        let labels: Vec<&str> = lower.iter().map(|(l, _)| *l).collect();
        o.push_str(&format!("irq time: {how}: the kernel CPU of the interrupt-driven rows ({}) is a lower bound\n", labels.join(", ")));
    }
    o.push_str(&format!(
        "\nmodelled (from the measured figures above):\n{:<34} {:>10} {:>12} {:>16} {:>15} {:>7} {:>13} {:>13}\n",
        "path", "CPU ns/IO", "empty ns/IO", "modelled ceiling", "modelled range", "x model", "x model range", "x model is"
    ));
    for r in c.rows.iter().filter(|r| r.figures.iops_measured.is_some()) {
        let f = &r.figures;
        o.push_str(&format!(
            "{:<34} {:>10} {:>12} {:>16} {:>15} {:>7} {:>13} {:>13}\n",
            r.variant.label,
            f0(med(f.cpu_ns_per_io_measured), 0),
            f0(med(f.empty_poll_ns_per_io_measured), 0),
            med(f.system_ceiling_iops_modelled).map(si).unwrap_or("-".into()),
            range_si(f.system_ceiling_iops_modelled),
            r.system_ceiling_ratio_modelled.map(|x| format!("{:.2}", x.spread.median)).unwrap_or("-".into()),
            range_x(r.system_ceiling_ratio_modelled),
            reading(r, r.system_ceiling_ratio_modelled),
        ));
    }
    o.push_str(
        "\nCPU ns/IO = system-wide busy CPU per I/O (measured); empty ns/IO = what the benchmark threads spent per I/O in\n\
         polls that found nothing (measured). modelled ceiling = the system ceiling (modelled): 1 s / (CPU ns/IO - empty ns/IO),\n\
         IOPS per core with a device fast enough that polling never waits. A model, not a measurement.\n",
    );
    if let Some(w) = noise_warning(c) {
        o.push_str(&format!("\nWARNING: {w}\n"));
    }
    if !c.headline.is_empty() {
        o.push_str(&format!("\nheadline (relative to {}; measured first, then the model):\n", c.baseline));
        for h in &c.headline {
            o.push_str(&format!("  {h}\n"));
        }
    }
    if c.repeat > 1 {
        o.push_str("\nrun order:\n");
        for (i, r) in c.run_order.iter().enumerate() {
            o.push_str(&format!("  round {}: {}\n", i + 1, r.join(", ")));
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
    crate::commands::args::refuse_non_nvme(&a.device)?;
    if a.rw.writes() && !a.allow_write {
        return Err(Error::usage(format!(
            "--rw {} writes to {}, destroying its data; add --allow-write if it holds nothing you need",
            a.rw.as_str(),
            a.device
        )));
    }
    if a.repeat > 1 && crate::measure::marker::base().is_some() {
        return Err(Error::usage(
            "NVB_MARKERS with --repeat: count-report reads one instruction-counting window per row; count one round (drop --repeat), and time the rows in a boot without the counting plugin",
        ));
    }
    // Settings every row shares are refused here, before the controller is
    // touched, rather than by each row.
    if let Some(why) = a.paths.as_deref().and_then(crate::experiment::plan::unknown_path) {
        return Err(Error::usage(why));
    }
    if a.runtime.is_zero() {
        return Err(Error::usage("--runtime 0 measures nothing; give each row e.g. --runtime 5 (the default)"));
    }
    let mut session = Session::open(&a.device, a.nsid, "compare", "")?;
    // The results folder exists before any row runs: a folder that cannot
    // be made is bad input, found before anything is done to the device.
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| Error::setup(format!("cannot create --out {}", dir.display()), "pick a folder you can write", e))?;
    }
    let t = session.topology.clone();
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
        size_given: a.size.is_some(),
        runtime: Some(a.runtime),
        ios: a.ios,
        ramp: a.ramp_time,
        verify: None,
        // fio's default scramble_buffers=1 (writes unique per block).
        scramble: true,
        batch: a.batch,
        batch_complete: a.batch_complete,
        reap_max: 0,
        split_lat: false,
        rate_iops: None,
        think: None,
        sync_every: 0,
        end_sync: false,
        log_ns: None,
        numjobs: a.numjobs,
        cpus: a.cpus.clone().unwrap_or_default(),
        continue_on_error: false,
        seed: 1,
        random_map: false, distribution: Default::default(), files: 1, spread_threads: true,
        reliability: Default::default(),
        stop: stop.clone(),
    };
    if let Some((block, geo)) = t.block.as_deref().and_then(|b| Some((b, block_geometry(b, t.nsid)?))) {
        let mut s = spec.clone();
        if !s.size_given {
            s.size = geo.bytes().saturating_sub(s.offset);
        }
        crate::engine::validate(&s, &geo).map_err(|e| Error::usage(format!("{e} (the namespace as {} gives it; no row was run)", block.display())))?;
    }
    let clock = Clock::calibrate();
    let status = a.output_format == OutputFormat::Normal && crate::sys::isatty(2);
    let driver_before = t.driver.clone();
    let repeat = a.repeat as usize;
    let plan_rows = rows_with_noise_control(variants, repeat);
    let order = rotated_order(plan_rows.len(), repeat);
    let mut runs: Vec<Vec<Run>> = vec![vec![]; plan_rows.len()];
    let mut position = 0;
    for (round, idx) in order.iter().enumerate() {
        for &i in idx {
            let v = &plan_rows[i].0;
            let mut run = Run { round, position, figures: None, summary: None, error: None };
            position += 1;
            if stop.requested() {
                run.error = Some("interrupted".into());
                runs[i].push(run);
                continue;
            }
            // The controller moves to vfio-pci for a vfio row and back to
            // nvme for a kernel row after one (rotated rounds mix them).
            let moved = if v.path == PathKind::Vfio { session.bind_vfio() } else { session.release_vfio() };
            if let Err(e) = moved {
                run.error = Some(e);
                runs[i].push(run);
                continue;
            }
            if repeat > 1 {
                eprintln!("nvme-bypass: round {}/{}: running {} ({})", round + 1, repeat, v.label, v.note);
            } else {
                eprintln!("nvme-bypass: running {} ({})", v.label, v.note);
            }
            // With NVB_MARKERS=N, the run at position p is the instruction
            // counter's window N + p (one round: row i is window N + i).
            crate::measure::marker::set_offset(run.position as u64);
            // pread/pwrite do one I/O at a time per thread whatever
            // --iodepth says (fio's sync engines ignore it too): the psync
            // row runs at depth 1, as its note says.
            let psync = v.spec.kernel().is_some_and(|k| k.ioengine == crate::backend::kernel::IoEngine::Psync);
            let row_spec = if psync && spec.iodepth > 1 { JobSpec { iodepth: 1, batch: 0, batch_complete: 0, ..spec.clone() } } else { spec.clone() };
            match session::run_variant(v, &t, &row_spec, clock, status) {
                Ok((s, _)) => {
                    run.figures = Some(RunFigures::of(&s));
                    run.summary = Some(s);
                }
                Err(e) => run.error = Some(crate::error::chain(&e)),
            }
            runs[i].push(run);
        }
    }
    // Give the controller back (the guard also does it on unwinding).
    let after = session.finish();
    let run_order: Vec<Vec<String>> = order.iter().map(|r| r.iter().map(|&i| plan_rows[i].0.label.clone()).collect()).collect();
    let noise_control = plan_rows.iter().find(|(_, n)| *n).map(|(v, _)| v.label.clone());
    let mut rows: Vec<Row> = plan_rows.into_iter().zip(runs).map(|((v, n), r)| row_of(v, n, r)).collect();
    let headline = finish(&mut rows, repeat);
    let c = Comparison {
        version: env!("CARGO_PKG_VERSION"),
        emulated: t.emulated.clone(),
        topology: t.clone(),
        workload: serde_json::json!({
            "rw": a.rw.as_str(), "bs": a.bs, "iodepth": a.iodepth, "rwmixread": a.rwmixread,
            "runtime_s": a.runtime.as_secs_f64(), "ios_per_thread": a.ios.unwrap_or(0), "ramp_s": a.ramp_time.as_secs_f64(), "numjobs": a.numjobs,
            "cpus": a.cpus, "offset": a.offset, "size": a.size,
        }),
        repeat: repeat,
        run_order,
        rows,
        baseline: BASELINE.to_string(),
        noise_control,
        headline,
        noise_warning: None,
        driver_before,
        driver_after: after,
    };
    let mut c = c;
    c.noise_warning = noise_warning(&c);
    let text = table(&c);
    let json = serde_json::to_string_pretty(&c).unwrap();
    if let Some(dir) = &a.out {
        std::fs::write(dir.join("table.txt"), &text).map_err(|e| Error::io(format!("cannot write {}", dir.join("table.txt").display()), e))?;
        std::fs::write(dir.join("compare.json"), &json).map_err(|e| Error::io(format!("cannot write {}", dir.join("compare.json").display()), e))?;
    }
    match a.output_format {
        OutputFormat::Normal => print!("{text}"),
        OutputFormat::Json => println!("{json}"),
    }
    let failed = c.rows.iter().any(|r| r.error.is_some() || r.runs.iter().any(|x| x.summary.as_ref().is_some_and(|s| s.errors > 0)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::topology::Topology;
    use crate::report::SystemSummary;
    use std::path::PathBuf;

    fn variants() -> Vec<Variant> {
        let t = Topology {
            bdf: Some("0000:01:00.0".into()),
            nsid: 1,
            block: Some(PathBuf::from("/dev/nvme0n1")),
            generic: Some(PathBuf::from("/dev/ng0n1")),
            ..Default::default()
        };
        let want: Vec<String> = ["block", "libaio", "passthru", "vfio"].iter().map(|s| s.to_string()).collect();
        plan_paths(Some(&want), &t).0
    }

    /// A run of `iops_per_core` IOPS per busy core at one busy core.
    fn run(round: usize, position: usize, label: &str, iops_per_core: f64) -> Run {
        let mut s = RunSummary::new(label.into(), vec![], &[], "test");
        s.iops = iops_per_core;
        s.bw_bytes = iops_per_core * 4096.0;
        s.system = Some(SystemSummary { cores_busy: 1.0, busy_ns_per_io: 1e9 / iops_per_core, iops_per_busy_core: iops_per_core, interval_ns: 2_000_000_000, ..Default::default() });
        Run { round, position, figures: Some(RunFigures::of(&s)), summary: Some(s), error: None }
    }

    #[test]
    fn one_round_has_no_noise_control_and_keeps_the_plan_order() {
        let rows = rows_with_noise_control(variants(), 1);
        let labels: Vec<&str> = rows.iter().map(|(v, _)| v.label.as_str()).collect();
        assert_eq!(labels, ["block/io_uring", "block/libaio", "passthru", "vfio"]);
        // Row i is run i: the instruction counter's windows stay one per row.
        assert_eq!(rotated_order(rows.len(), 1), vec![vec![0, 1, 2, 3]]);
    }

    #[test]
    fn repeated_rounds_rotate_with_a_noise_control() {
        let rows = rows_with_noise_control(variants(), 3);
        let labels: Vec<&str> = rows.iter().map(|(v, _)| v.label.as_str()).collect();
        assert_eq!(labels, ["block/io_uring", "block/libaio", "block/io_uring (noise control)", "passthru", "vfio"]);
        assert_eq!(rows.iter().filter(|(_, n)| *n).count(), 1);
        let (control, _) = &rows[2];
        assert_eq!(control.path, PathKind::Block);
        assert_eq!(control.spec.kernel().map(|k| k.device.clone()), rows[0].0.spec.kernel().map(|k| k.device.clone()), "same configuration as the baseline");
        let order: Vec<Vec<&str>> = rotated_order(rows.len(), 3).iter().map(|r| r.iter().map(|&i| labels[i]).collect()).collect();
        assert_eq!(order[0][0], "block/io_uring");
        assert_eq!(order[1][0], "block/libaio");
        assert_eq!(order[2][0], "block/io_uring (noise control)");
        assert_eq!(order[1].last(), Some(&"block/io_uring"), "the baseline runs last in round 2");
        // No baseline asked for: no noise control.
        let v: Vec<Variant> = variants().into_iter().filter(|v| v.path == PathKind::Vfio).collect();
        assert!(rows_with_noise_control(v, 3).iter().all(|(_, n)| !n));
    }

    fn comparison(rows: Vec<Row>, repeat: usize) -> Comparison {
        let mut rows = rows;
        let headline = finish(&mut rows, repeat);
        Comparison {
            version: "test",
            emulated: Some("emulated in a test".into()),
            topology: Topology::default(),
            workload: serde_json::json!({}),
            repeat,
            run_order: vec![],
            noise_control: rows.iter().find(|r| r.noise_control).map(|r| r.variant.label.clone()),
            rows,
            baseline: BASELINE.into(),
            headline,
            noise_warning: None,
            driver_before: Some("nvme".into()),
            driver_after: Some("nvme".into()),
        }
    }

    fn three_rounds() -> Comparison {
        let v = rows_with_noise_control(variants(), 3);
        // IOPS per busy core of each row in rounds 1-3.
        let per_row: [[f64; 3]; 5] = [
            [100e3, 104e3, 96e3],  // baseline
            [103e3, 98e3, 112e3],  // libaio: overlaps the noise
            [95e3, 101e3, 99e3],   // noise control
            [150e3, 160e3, 155e3], // passthru: clearly higher
            [60e3, 62e3, 58e3],    // vfio: clearly lower (made up)
        ];
        let rows = v
            .into_iter()
            .zip(per_row)
            .enumerate()
            .map(|(i, ((v, n), xs))| {
                let runs = xs.iter().enumerate().map(|(r, &x)| run(r, r * 5 + i, &v.label, x)).collect();
                row_of(v, n, runs)
            })
            .collect();
        comparison(rows, 3)
    }

    #[test]
    fn ratios_are_read_against_the_noise_control() {
        let c = three_rounds();
        let get = |l: &str| c.rows.iter().find(|r| r.variant.label == l).unwrap();
        let reading = |l: &str| get(l).iops_per_busy_core_ratio_measured.unwrap().reading;
        assert_eq!(reading("block/libaio"), Reading::WithinNoise);
        assert_eq!(reading("passthru"), Reading::Higher);
        assert_eq!(reading("vfio"), Reading::Lower);
        assert_eq!(reading("block/io_uring"), Reading::WithinNoise, "the baseline is within its own noise here");
        let p = get("passthru").iops_per_busy_core_ratio_measured.unwrap().spread;
        assert_eq!((p.min, p.median, p.max, p.n), (1.5, 1.55, 1.6, 3));
        // CPU per I/O goes the other way, read the same way.
        assert_eq!(get("passthru").cpu_ns_per_io_ratio_measured.unwrap().reading, Reading::Lower);
        // The median run's summary is the row's.
        assert_eq!(get("passthru").summary.as_ref().unwrap().iops, 155e3);
        let h = c.headline.iter().find(|h| h.starts_with("passthru")).unwrap();
        assert!(h.contains("1.55x [1.50-1.60] the IOPS per busy core") && h.contains("(measured, higher)"), "{h}");
        assert!(c.headline.iter().find(|h| h.starts_with("block/libaio")).unwrap().contains("within noise"));
        assert!(!c.headline.iter().any(|h| h.contains("noise control:")), "the control has no headline");
        let t = table(&c);
        assert!(t.contains("within noise") && t.contains("noise control") && t.contains("modelled"), "{t}");
    }

    #[test]
    fn a_noise_control_apart_from_its_baseline_is_warned_about() {
        assert_eq!(noise_warning(&three_rounds()), None);
        let v = rows_with_noise_control(variants(), 3);
        let per_row: [[f64; 3]; 5] = [[20e3, 22e3, 3e3], [21e3, 22e3, 20e3], [40e3, 43e3, 34e3], [41e3, 46e3, 34e3], [26e3, 27e3, 16e3]];
        let rows = v.into_iter().zip(per_row).map(|((v, n), xs)| {
            let runs = xs.iter().enumerate().map(|(r, &x)| run(r, r, &v.label, x)).collect();
            row_of(v, n, runs)
        }).collect();
        let c = comparison(rows, 3);
        let w = noise_warning(&c).expect("a warning");
        assert!(w.contains("do not overlap") && w.contains("[3.0k-22.0k]"), "{w}");
        assert!(table(&c).contains("WARNING: block/io_uring and its noise control"));
    }

    #[test]
    fn one_round_says_not_repeated() {
        let rows: Vec<Row> = rows_with_noise_control(variants(), 1)
            .into_iter()
            .enumerate()
            .map(|(i, (v, n))| {
                let r = run(0, i, &v.label, 100e3 * (i + 1) as f64);
                row_of(v, n, vec![r])
            })
            .collect();
        let c = comparison(rows, 1);
        for r in &c.rows {
            assert_eq!(r.iops_per_busy_core_ratio_measured.unwrap().reading, Reading::NotRepeated);
        }
        assert!(c.headline[0].contains("2.00x the IOPS per busy core") && c.headline[0].contains("not repeated"), "{}", c.headline[0]);
        assert!(table(&c).contains("not repeated"));
    }

    #[test]
    fn the_json_carries_every_run_and_names_each_figure_measured_or_modelled() {
        let c = three_rounds();
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j["repeat"], 3);
        assert_eq!(j["noise_control"], "block/io_uring (noise control)");
        for r in j["rows"].as_array().unwrap() {
            assert_eq!(r["runs"].as_array().unwrap().len(), 3);
            let f = &r["figures"]["iops_per_busy_core_measured"];
            assert_eq!(f["n"], 3);
            assert!(f["min"].as_f64() <= f["median"].as_f64() && f["median"].as_f64() <= f["max"].as_f64());
            assert!(r["figures"]["system_ceiling_iops_modelled"].is_object());
            assert!(r["system_ceiling_ratio_modelled"]["reading"].is_string());
            assert!(r["iops_per_busy_core_ratio_measured"]["spread"]["median"].is_number());
            let s = &r["runs"][0]["summary"];
            assert!(s["system_ceiling_iops_modelled"].is_number(), "{s}");
            assert!(s["cpu"].get("ceiling_iops_per_core").is_none() && s["cpu"].get("thread_ceiling_iops_modelled").is_some());
        }
        assert_eq!(j["rows"][3]["iops_per_busy_core_ratio_measured"]["reading"], "higher");
        assert_eq!(j["rows"][1]["iops_per_busy_core_ratio_measured"]["reading"], "within_noise");
    }
}
