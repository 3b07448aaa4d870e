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

use crate::backend::path::PathKind;
use crate::error::{exit, Error};
use crate::report::OutputFormat;
use crate::measure::clock::Clock;
use crate::engine::{JobSpec, Stop};
use crate::experiment::plan::{plan_paths, Variant};
use crate::experiment::session::{self, Session};
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

/// The rows `args` asks for, in run order (kernel paths first, vfio last so
/// the controller moves once).
pub fn plan(args: &CompareArgs, t: &Topology) -> (Vec<Variant>, Vec<String>) {
    plan_paths(args.paths.as_deref(), t)
}

/// Fill the derived columns and the headline.
fn finish(rows: &mut [Row], baseline: &str) -> Vec<String> {
    for r in rows.iter_mut() {
        if let Some(s) = &r.summary {
            r.iops_per_busy_core = s.system.as_ref().map(|y| y.iops_per_busy_core);
            r.useful_ceiling_iops = s.useful_ceiling_iops();
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

/// The side-by-side table.
pub fn table(c: &Comparison) -> String {
    let mut o = String::new();
    if let Some(e) = &c.emulated {
        o.push_str(&format!("EMULATED: {e}\n"));
    }
    o.push_str(&format!("{}\nworkload: {}\n\n", session::device_line(&c.topology), c.workload));
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
                    si(s.iops),
                    s.bw_bytes / (1 << 20) as f64,
                    us(s.lat_ns.p(50.0)),
                    us(s.lat_ns.p(99.0)),
                    us(s.lat_ns.p(99.9)),
                    y.user_ns_per_io,
                    y.kernel_ns_per_io,
                    y.cores_busy,
                    r.iops_per_busy_core.map(si).unwrap_or("-".into()),
                    r.useful_ceiling_iops.map(si).unwrap_or("-".into()),
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
        runtime: Some(a.runtime),
        ios: None,
        ramp: a.ramp_time,
        verify: None,
        batch: a.batch,
        batch_complete: a.batch_complete,
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
    for v in &variants {
        if stop.requested() {
            rows.push(Row { variant: v.clone(), summary: None, error: Some("interrupted".into()), iops_per_busy_core: None, useful_ceiling_iops: None, ratio_vs_baseline: None, useful_ratio_vs_baseline: None });
            continue;
        }
        if v.path == PathKind::Vfio {
            if let Err(e) = session.bind_vfio() {
                rows.push(Row { variant: v.clone(), summary: None, error: Some(e), iops_per_busy_core: None, useful_ceiling_iops: None, ratio_vs_baseline: None, useful_ratio_vs_baseline: None });
                continue;
            }
        }
        eprintln!("nvme-bypass: running {} ({})", v.label, v.note);
        // With NVB_MARKERS=N, row i is the instruction counter's window N + i.
        crate::measure::marker::set_offset(rows.len() as u64);
        let r = session::run_variant(v, &t, &spec, clock, status);
        let (summary, error) = match r {
            Ok((s, _)) => (Some(s), None),
            Err(e) => (None, Some(crate::error::chain(&e))),
        };
        rows.push(Row { variant: v.clone(), summary, error, iops_per_busy_core: None, useful_ceiling_iops: None, ratio_vs_baseline: None, useful_ratio_vs_baseline: None });
    }
    // Give the controller back (the guard also does it on unwinding).
    let after = session.finish();
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
        std::fs::write(dir.join("table.txt"), &text).map_err(|e| Error::io(format!("cannot write {}", dir.join("table.txt").display()), e))?;
        std::fs::write(dir.join("compare.json"), &json).map_err(|e| Error::io(format!("cannot write {}", dir.join("compare.json").display()), e))?;
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
