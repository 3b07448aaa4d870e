//! `bench`: one workload on one path, reported as fio reports it, with what
//! the measurement rests on: the clock and the kernel's clocksource, and
//! whether the kernel accounts interrupt time (docs/methodology.md).

use crate::backend::Target;
use crate::cli::parse::{parse_duration, parse_size};
use crate::commands::args::parse_cpus;
use crate::commands::args::*;
use crate::error::{exit, Error};
use crate::measure::clock::Clock;
use crate::engine::{self, JobSpec, Stop, VerifySpec};
use crate::report::{self, OutputFormat, RunSummary};
use crate::engine::workload::Rw;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Path to the namespace.
    #[arg(long, value_enum, default_value = "sim")]
    pub backend: PathKind,
    /// Device: a PCI address (vfio) or a device path (/dev/ng0n1 for passthru, /dev/nvme0n1 for block).
    /// Give it more than once to drive several devices from every thread (--iodepth is then per device).
    #[arg(long)]
    pub device: Vec<String>,
    /// Namespace ID.
    #[arg(long, default_value_t = 1, value_parser = crate::commands::args::parse_nsid)]
    pub nsid: u32,
    /// Access pattern.
    #[arg(long, value_enum, default_value = "randread")]
    pub rw: Rw,
    /// Block size per I/O (k/m suffixes are powers of 1024).
    #[arg(long, default_value = "4k", value_parser = parse_size)]
    pub bs: u64,
    /// I/Os in flight per thread.
    #[arg(long, default_value_t = 1)]
    pub iodepth: usize,
    /// Percentage of reads in mixed patterns.
    #[arg(long, default_value_t = 50)]
    pub rwmixread: u8,
    /// First byte of the region.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub offset: u64,
    /// Bytes of the region (default: from --offset to the end of the namespace).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Measure for this long (seconds, or with s/ms/m suffix); time based.
    #[arg(long, value_parser = parse_duration)]
    pub runtime: Option<Duration>,
    /// Stop after this many I/Os per thread.
    #[arg(long)]
    pub ios: Option<u64>,
    /// Run this long before measuring.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub ramp_time: Duration,
    /// Stamp every written block (LBA, seed, generation, CRC-32C) and check every read.
    #[arg(long)]
    pub verify: bool,
    /// Seed of the verify stamps.
    #[arg(long, default_value_t = 0x6e76_6d65)]
    pub verify_seed: u64,
    /// Only check existing stamps (written earlier, maybe through another path): no prefill.
    #[arg(long)]
    pub verify_only: bool,
    /// Write the thread's fixed pattern as it is: no per-write scramble of
    /// each 512-byte sector with the write's offset and time, which is on
    /// by default as in fio (scramble_buffers=1), so no two written blocks
    /// are alike. This is fio's scramble_buffers=0. (--verify never
    /// scrambles: its stamps are unique already.)
    #[arg(long)]
    pub no_scramble: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    /// Allow writing to the device. Without it no backend writes (the simulator excepted).
    #[arg(long)]
    pub allow_write: bool,
    /// Threads, each with its own queue pair or ring.
    #[arg(long, default_value_t = 1)]
    pub numjobs: usize,
    /// Pin threads to these CPUs, round robin ("0,1" or "0-3").
    #[arg(long, value_parser = parse_cpus)]
    pub cpus: Option<crate::commands::args::CpuList>,
    /// I/Os per submission (doorbell or system call); 0 = all that fit.
    #[arg(long, default_value_t = 0)]
    pub batch: usize,
    /// Completions per reap: 0 reaps whatever is there; N > 1 reaps only
    /// when N are ready, N at a time (fio's iodepth_batch_complete_min and
    /// _max = N). With --batch N too, every pass does the same work.
    #[arg(long, default_value_t = 0)]
    pub batch_complete: usize,
    /// Keep going after failed I/Os. As in fio, a failed I/O is counted
    /// apart (errors per direction), never in IOPS, bandwidth or latency;
    /// any makes the run exit 1.
    #[arg(long)]
    pub continue_on_error: bool,
    /// Seed of the offset generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Do not measure core-to-core latency and core share around simulator
    /// runs.
    #[arg(long)]
    pub no_c2c: bool,
    /// Simulator: start the run only once the core-to-core latency between
    /// the driver's and the simulator's CPUs is at or under this many ns
    /// (probed every few ms; on some virtual machines a fast state lasts
    /// well under a second, so pair it with a short --runtime). The
    /// before/after figures still say whether the run stayed in it.
    #[arg(long, value_name = "NS")]
    pub wait_fast_c2c: Option<f64>,
    /// How long --wait-fast-c2c waits before giving up (exit status 3,
    /// nothing run).
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "TIME")]
    pub wait_timeout: Duration,
    #[command(flatten)]
    pub reliability: crate::commands::reliability_args::ReliabilityArgs,
    #[command(flatten)]
    pub sim: SimArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub driver: DriverArgs,
    /// The options given on the command line (clap's ids), filled in by
    /// the dispatcher: those of another backend are refused.
    #[arg(skip)]
    pub given: Vec<String>,
}

pub fn bench(a: &BenchArgs, stop: &Stop) -> Result<i32, Error> {
    let genesis_ms = report::unix_ms();
    for d in &a.device {
        refuse_non_nvme(d)?;
    }
    // Nothing measured is no figure (CPU shares of an empty interval).
    if a.runtime.is_some_and(|r| r.is_zero()) {
        return Err(Error::usage("--runtime 0 measures nothing; give e.g. --runtime 2"));
    }
    if a.ios == Some(0) {
        return Err(Error::usage("--ios 0 measures nothing; give e.g. --ios 100000, or --runtime"));
    }
    if a.backend != PathKind::Sim && !a.allow_write && (a.rw.writes() || (a.verify && !a.verify_only)) {
        return Err(Error::usage(format!(
            "--rw {}{} writes to the device, which destroys its data; add --allow-write if {} holds nothing you need",
            a.rw.as_str(),
            if a.verify && !a.rw.writes() { " with --verify (which first writes the region)" } else { "" },
            if a.device.is_empty() { "the device".to_string() } else { a.device.join(", ") }
        )));
    }
    if a.verify_only && !a.verify {
        return Err(Error::usage("--verify-only needs --verify"));
    }
    refuse_duplicate_devices(&a.device)?;
    refuse_foreign_options(&a.given, a.backend)?;
    let reliability = a.reliability.apply()?;
    if a.verify_only && a.rw.writes() {
        return Err(Error::usage("--verify-only checks existing data; use a read pattern (--rw read or randread)"));
    }
    if a.bs > u32::MAX as u64 {
        return Err(Error::usage("--bs is too large"));
    }
    let is_sim = a.backend == PathKind::Sim;
    if a.verify && is_sim && a.sim.sim_data == crate::commands::args::SimData::Null {
        return Err(Error::usage(
            "--verify checks the data read back, and --sim-data null moves no data (every read would be a mismatch): drop --verify, or use --sim-data ram",
        ));
    }
    // Without --size the simulator's region is --sim-size from --offset:
    // a refusal names the option that made it too small.
    if is_sim && a.size.is_none() && a.offset < a.sim.sim_size && a.sim.sim_size - a.offset < a.bs {
        return Err(Error::usage(format!(
            "--sim-size {} from --offset {} holds no whole --bs {} I/O; use --sim-size {} or more, or a smaller --bs",
            a.sim.sim_size,
            a.offset,
            a.bs,
            a.offset + a.bs
        )));
    }
    let (cpus, sim_cpu) = if is_sim {
        sim_placement(a.numjobs, a.cpus.as_deref(), a.sim.sim_cpu, !a.sim.sim_sync)
    } else {
        (a.cpus.clone().unwrap_or_default(), None)
    };
    if let Some(w) = is_sim.then(|| crate::commands::args::sim_sharing(a.numjobs, &cpus, sim_cpu)).flatten() {
        eprintln!("nvme-bypass: warning: {w}");
    }
    // Core-to-core latency is measured while the simulator's thread is not
    // running (it would compete for the CPU), right before and after the run.
    let c2c_pair = match (cpus.first(), sim_cpu) {
        (Some(&a_cpu), Some(b_cpu)) if is_sim && !a.no_c2c => Some((a_cpu, b_cpu)),
        _ => None,
    };
    if let Some(ns) = a.wait_fast_c2c {
        let Some((x, y)) = c2c_pair else {
            return Err(Error::usage(
                "--wait-fast-c2c needs the simulator on a thread of its own and the core-to-core measurement: --backend sim, without --sim-sync or --no-c2c, and two CPUs",
            ));
        };
        let seen = crate::measure::c2c::wait_until_at_most(x, y, ns, a.wait_timeout).ok_or_else(|| {
            Error::usage(format!("--wait-fast-c2c could not pin its probe's threads to CPUs {x} and {y}; check --cpus and --sim-cpu against the CPUs this process may use"))
        })?;
        if !seen {
            return Err(Error::NotStarted(format!(
                "core-to-core latency between CPUs {x} and {y} was never at or under {ns} ns in {:?}; nothing was run (try again later, or a longer --wait-timeout)",
                a.wait_timeout
            )));
        }
    }
    let before = c2c_pair.and_then(|(x, y)| crate::measure::c2c::measure(x, y, 20_000));
    let queues = a.numjobs.min(u16::MAX as usize) as u16;
    let target: Box<dyn Target> = if a.device.len() > 1 {
        if a.verify {
            return Err(Error::usage(
                "--verify with several --device is not supported (a unit's expected content would depend on which device served it); verify each device on its own",
            ));
        }
        let mut ts = vec![];
        for d in &a.device {
            ts.push(path_spec(a.backend, Some(d), a.nsid, &a.sim, &a.kernel, &a.driver, sim_cpu)?.open(queues)?);
        }
        Box::new(crate::backend::multi::MultiTarget::new(ts)?)
    } else {
        path_spec(a.backend, a.device.first().map(String::as_str), a.nsid, &a.sim, &a.kernel, &a.driver, sim_cpu)?.open(queues)?
    };
    let geo = target.geometry();
    let size = a.size.unwrap_or_else(|| geo.bytes().saturating_sub(a.offset));
    let spec = JobSpec {
        rw: a.rw,
        bs: a.bs as usize,
        iodepth: a.iodepth,
        rwmixread: a.rwmixread,
        offset: a.offset,
        size,
        size_given: a.size.is_some(),
        runtime: a.runtime,
        ios: a.ios,
        ramp: a.ramp_time,
        verify: a.verify.then_some(VerifySpec { seed: a.verify_seed, only: a.verify_only }),
        scramble: !a.no_scramble,
        random_map: false, distribution: Default::default(), files: 1, spread_threads: true,
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
        cpus: cpus.clone(),
        continue_on_error: a.continue_on_error,
        seed: a.seed,
        reliability,
        stop: stop.clone(),
    };
    engine::validate(&spec, &geo)?;
    let clock = Clock::calibrate();
    let status = a.output_format == OutputFormat::Normal && crate::sys::isatty(2);
    let started_ms = report::unix_ms();
    let threads = engine::run(&*target, &spec, clock, status)?;
    let mut summary = RunSummary::new(target.name(), target.describe(), &threads, clock.source());
    summary.interrupt_driven = Some(!target.polled());
    drop(target);
    let after = c2c_pair.and_then(|(x, y)| crate::measure::c2c::measure(x, y, 20_000));
    if let Some(note) = a.device.first().map(String::as_str).and_then(crate::measure::topology::emulation_of) {
        summary.emulated = true;
        summary.emulated_note = Some(note);
    }
    if is_sim {
        summary.simulated = true;
        summary.simulated_note = Some(if a.sim.sim_sync {
            "in-process simulated controller, run on the job's thread (--sim-sync): CPU figures include the controller's work; use it to count instructions, not to time".into()
        } else {
            crate::experiment::session::SIM_NOTE.into()
        });
    }
    if let Some((x, y)) = c2c_pair {
        summary.core_to_core_ns = Some((before, after));
        summary.core_share = crate::measure::c2c::core_share(x, y, Duration::from_millis(5));
    }
    match a.output_format {
        OutputFormat::Normal => print!("{}", report::text(&summary, &spec)),
        OutputFormat::Json => {
            let j = report::fio_json(&summary, &spec, &threads, genesis_ms, started_ms);
            // fio's keys and values in serde's layout (`"key": value`),
            // which the test bed's scripts and users' greps read; the fio
            // drop-in prints fio's own byte layout (`"key" : value`).
            println!("{}", serde_json::to_string_pretty(&j).unwrap())
        }
    }
    if let Some(r) = engine::recovery_summary(&threads) {
        eprintln!("nvme-bypass: {r}");
    }
    if summary.errors > 0 || summary.mismatches > 0 {
        if summary.mismatches > 0 {
            eprintln!("nvme-bypass: verify found {} mismatching blocks; first: {}", summary.mismatches, summary.first_mismatch.as_deref().unwrap_or("?"));
        }
        if summary.errors > 0 {
            eprintln!("nvme-bypass: {} I/Os failed; first: {}", summary.errors, summary.first_error.as_deref().unwrap_or("?"));
        }
        return Ok(exit::RUN_FAILED);
    }
    Ok(exit::OK)
}
