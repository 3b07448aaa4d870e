//! Command line: options named as fio names them, subcommands as nvme-cli
//! and SPDK's tools would lead a user to expect.

use crate::backend::sim::{SimOptions, SimTarget};
use crate::backend::namespace::NamespaceInfo;
use crate::backend::{BackendError, Target};
use crate::clock::Clock;
use crate::engine::{self, JobSpec, VerifySpec};
use crate::report::{self, RunSummary};
use crate::workload::Rw;
use clap::{Parser, Subcommand, ValueEnum};
use std::time::Duration;

/// Exit codes.
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// The run happened but found errors (failed I/Os, verify mismatches).
    pub const RUN_FAILED: i32 = 1;
    /// Bad input or environment: nothing was done to the device.
    pub const USAGE: i32 = 2;
    /// Not started: the state it was told to wait for did not come in time
    /// (`bench --wait-fast-c2c`).
    pub const NOT_STARTED: i32 = 3;
}

#[derive(Parser, Debug)]
#[command(name = "nvme-bypass", version, about = "Measure how much of an NVMe I/O's CPU cost is the kernel's: block layer vs io_uring passthrough vs a userspace VFIO driver", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one workload on one path and report IOPS, bandwidth, latency percentiles and CPU per I/O.
    Bench(BenchArgs),
    /// The main job: the same workload through block, passthru and vfio side by side, with the per-core ceiling of each.
    Compare(crate::compare::CompareArgs),
    /// Grid over iodepth, block size and threads for each path: sweep.json and SVG charts (IOPS per core, latency, throughput).
    Sweep(crate::sweep::SweepArgs),
    /// Print Identify Controller and Identify Namespace data, as nvme-cli's id-ctrl/id-ns name the fields.
    Info(InfoArgs),
    /// Move a controller from the kernel's nvme driver to vfio-pci (refuses when it is in use).
    Bind(crate::bind::BindArgs),
    /// Give a controller back to the driver it had before `bind`.
    Unbind(crate::bind::BindArgs),
    /// Tell the story of NVMe queues: every register access, submission entry, doorbell and completion of a short run.
    Trace(crate::trace::TraceArgs),
    /// The driver's own work per I/O on the synchronous simulator, repeatable (for callgrind).
    DriverCost(crate::cost::CostArgs),
}

/// The paths to a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// Our userspace driver against the in-process simulated controller (no hardware, no root).
    Sim,
    /// Our userspace driver on a controller bound to vfio-pci (--device 0000:01:00.0).
    Vfio,
    /// io_uring NVMe passthrough on the generic char device (--device /dev/ng0n1).
    Passthru,
    /// The kernel block layer with O_DIRECT (--device /dev/nvme0n1).
    Block,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Text for people.
    Normal,
    /// JSON shaped like fio's --output-format=json.
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimData {
    /// Namespaces in RAM: data is stored and read back.
    Ram,
    /// No data moves: measures the driver's own cost.
    Null,
}

/// Options of the simulated controller.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Simulated namespace data handling.
    #[arg(long, value_enum, default_value = "ram")]
    pub sim_data: SimData,
    /// Simulated namespace size (k/m/g suffixes are powers of 1024).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pub sim_size: u64,
    /// Simulated logical block size: 512 or 4096.
    #[arg(long, default_value_t = 512)]
    pub sim_lba_size: u32,
    /// CPU for the simulated controller's thread (default: a CPU the job threads do not use).
    #[arg(long, value_parser = parse_cpu)]
    pub sim_cpu: Option<usize>,
    /// Simulated MDTS (max transfer 4 KiB << MDTS).
    #[arg(long, default_value_t = 7)]
    pub sim_mdts: u8,
    /// Simulated CAP.MQES, 0's based as in QEMU's `mqes=` option: queues of up to N + 1 entries (65535: 65536; 1: 2-entry queues).
    #[arg(long, default_value_t = 2047)]
    pub sim_mqes: u16,
    /// Run the simulated controller on the job's own thread, stepped at each MMIO doorbell write (so shadow doorbells are off), instead of on its own CPU. Timings then include the controller's work; it exists for repeatable instruction counts of the whole I/O loop (scripts/callgrind-driver.sh).
    #[arg(long)]
    pub sim_sync: bool,
    /// Inject a device fault into the simulated controller (repeatable; key=value[,key=value]): drop-every=N, delay-us=N, status-every=N, status=SCT:SC, dnr=0|1, fatal-after=N, hang-after=N, stall-every=N, corrupt-cid-every=N, bad-sqid-every=N, corrupt-data-every=N. See docs/reliability.md.
    #[arg(long, value_parser = crate::reliability::sim_fault_arg)]
    pub sim_fault: Vec<Vec<crate::parse::SimFault>>,
}

/// Options of the kernel paths (passthru, block), named as fio's.
#[derive(clap::Args, Debug, Clone)]
pub struct KernelArgs {
    /// Block path engine, as fio names it.
    #[arg(long, value_enum, default_value = "io_uring")]
    pub ioengine: crate::backend::kernel::IoEngine,
    /// Register the I/O buffers with io_uring (fio fixedbufs).
    #[arg(long)]
    pub fixedbufs: bool,
    /// Register the device file with io_uring (fio registerfiles).
    #[arg(long)]
    pub registerfiles: bool,
    /// Polled completions (IORING_SETUP_IOPOLL); needs nvme poll queues (nvme.poll_queues=N).
    #[arg(long)]
    pub hipri: bool,
    /// Kernel submission-queue polling thread (IORING_SETUP_SQPOLL).
    #[arg(long)]
    pub sqthread_poll: bool,
    /// CPU of the SQPOLL thread.
    #[arg(long)]
    pub sqthread_poll_cpu: Option<u32>,
    /// Buffered I/O through the page cache instead of O_DIRECT (block path; fio --direct=0).
    #[arg(long)]
    pub buffered: bool,
    /// io_uring: IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN (completion work batched into our io_uring_enter calls; 6.1+).
    #[arg(long)]
    pub defer_taskrun: bool,
    /// io_uring: register the ring fd (IORING_REGISTER_RING_FDS) so io_uring_enter skips the fd lookup (5.18+).
    #[arg(long)]
    pub register_ring: bool,
    /// Our driver on vfio: interrupt-driven completions (MSI-X, the thread sleeps when idle) instead of polling.
    #[arg(long)]
    pub interrupts: bool,
    /// Our driver (vfio, sim): write every doorbell to MMIO instead of using shadow doorbells.
    #[arg(long)]
    pub no_shadow_doorbells: bool,
    /// Our driver (vfio, sim): write submission entries with ordinary cached stores instead of streaming (non-temporal) stores.
    #[arg(long)]
    pub cached_sq_stores: bool,
}

impl KernelArgs {
    fn options(&self, device: &str, nsid: u32) -> crate::backend::kernel::KernelOptions {
        crate::backend::kernel::KernelOptions {
            device: device.to_string(),
            nsid,
            ioengine: self.ioengine,
            fixedbufs: self.fixedbufs,
            registerfiles: self.registerfiles,
            hipri: self.hipri,
            sqthread_poll: self.sqthread_poll,
            sqthread_poll_cpu: self.sqthread_poll_cpu,
            buffered: self.buffered,
            defer_taskrun: self.defer_taskrun,
            register_ring: self.register_ring,
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Path to the namespace.
    #[arg(long, value_enum, default_value = "sim")]
    pub backend: BackendKind,
    /// Device: a PCI address (vfio) or a device path (/dev/ng0n1 for passthru, /dev/nvme0n1 for block).
    /// Give it more than once to drive several devices from every thread (--iodepth is then per device).
    #[arg(long)]
    pub device: Vec<String>,
    /// Namespace ID.
    #[arg(long, default_value_t = 1)]
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
    pub cpus: Option<crate::cli::CpuList>,
    /// I/Os per submission (doorbell or system call); 0 = all that fit.
    #[arg(long, default_value_t = 0)]
    pub batch: usize,
    /// Keep going after failed I/Os.
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
    pub reliability: crate::reliability::ReliabilityArgs,
    #[command(flatten)]
    pub sim: SimArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct InfoArgs {
    /// Path to the controller.
    #[arg(long, value_enum, default_value = "sim")]
    pub backend: BackendKind,
    /// Device (as for bench).
    #[arg(long)]
    pub device: Option<String>,
    /// Namespace ID (default: every active namespace; on /dev/ngXnY or /dev/nvmeXnY, that one).
    #[arg(long)]
    pub nsid: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    #[command(flatten)]
    pub sim: SimArgs,
}

pub use crate::parse::{parse_duration, parse_size};

/// A list of CPUs, parsed from one argument ("0,1" or "0-3"). An alias so
/// clap takes the whole list as one value (it treats a literal `Vec` field as
/// a repeated option, and panics when the parser returns a Vec).
pub type CpuList = Vec<usize>;

/// Parse "0,1" or "0-3" or "0-1,4": CPUs this machine has.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let v = crate::parse::parse_cpu_list(s)?;
    let n = crate::c2c::online_cpus();
    if let Some(bad) = v.iter().find(|&&c| c >= n) {
        return Err(format!("CPU {bad} does not exist: this machine has CPUs 0-{}", n - 1));
    }
    Ok(v)
}

/// One CPU this machine has.
pub fn parse_cpu(s: &str) -> Result<usize, String> {
    match parse_cpus(s)?[..] {
        [c] => Ok(c),
        _ => Err("one CPU number, such as 1".into()),
    }
}

/// An error the CLI prints, with its exit code.
#[derive(Debug)]
pub struct CliError {
    pub msg: String,
    pub code: i32,
}

impl CliError {
    pub fn usage(msg: impl Into<String>) -> Self {
        CliError { msg: msg.into(), code: exit::USAGE }
    }
}

impl From<BackendError> for CliError {
    fn from(e: BackendError) -> Self {
        // Errors before any I/O are about input or environment.
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            let t = s.to_string();
            if !msg.contains(&t) {
                msg.push_str(&format!(": {t}"));
            }
            src = s.source();
        }
        // A device that failed mid-run (recovery gave up) is not bad input.
        let code = if matches!(e, BackendError::Failed(_)) { exit::RUN_FAILED } else { exit::USAGE };
        CliError { msg, code }
    }
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    install_signal_handlers();
    let r = match cli.cmd {
        Command::Bench(a) => bench(&a),
        Command::Compare(a) => crate::compare::compare(&a),
        Command::Sweep(a) => crate::sweep::sweep(&a),
        Command::Info(a) => info(&a),
        Command::Bind(a) => crate::bind::bind(&a),
        Command::Unbind(a) => crate::bind::unbind(&a),
        Command::Trace(a) => crate::trace::trace(&a),
        Command::DriverCost(a) => crate::cost::driver_cost(&a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("nvme-bypass: error: {}", e.msg);
            e.code
        }
    }
}

fn install_signal_handlers() {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while the first is being handled ends the process
        // at once (exit 1); VFIO's release of the device then resets it.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 1, engine::STOP.clone());
        let _ = signal_hook::flag::register(sig, engine::STOP.clone());
    }
}

/// Simulator runs: keep the job threads and the controller thread on
/// different CPUs, as a device would be. Job threads go on `cpus` or, when
/// none are given, round robin over every CPU but the last; the controller on
/// `sim_cpu` or the highest CPU no job thread uses. Returns (job CPUs,
/// controller CPU); a one-CPU machine pins nothing.
pub(crate) fn sim_placement(numjobs: usize, cpus: Option<&[usize]>, sim_cpu: Option<usize>) -> (Vec<usize>, Option<usize>) {
    let ncpu = crate::c2c::online_cpus();
    let mut cpus = cpus.map(<[usize]>::to_vec).unwrap_or_default();
    if cpus.is_empty() && ncpu >= 2 {
        cpus = (0..numjobs).map(|i| i % (ncpu - 1)).collect();
    }
    let sim_cpu = sim_cpu.or_else(|| (ncpu >= 2).then(|| (0..ncpu).rev().find(|c| !cpus.contains(c)).unwrap_or(ncpu - 1)));
    (cpus, sim_cpu)
}

fn sim_options(a: &SimArgs, queues: u16, cpu: Option<usize>) -> Result<SimOptions, CliError> {
    if a.sim_lba_size != 512 && a.sim_lba_size != 4096 {
        return Err(CliError::usage(format!("--sim-lba-size {} is not supported; use 512 or 4096", a.sim_lba_size)));
    }
    if a.sim_size < a.sim_lba_size as u64 {
        return Err(CliError::usage("--sim-size is smaller than one block"));
    }
    Ok(SimOptions { size: a.sim_size, lba_size: a.sim_lba_size, null: a.sim_data == SimData::Null, queues, cpu, mdts: a.sim_mdts, mqes: a.sim_mqes, threaded: !a.sim_sync,
        // A synchronous controller runs only when a register is written.
        shadow_doorbells: !a.sim_sync, streaming_sq: true })
}

/// Open the path a command asks for.
fn open_target(
    kind: BackendKind,
    device: Option<&str>,
    nsid: u32,
    sim: &SimArgs,
    kernel: &KernelArgs,
    queues: u16,
    sim_cpu: Option<usize>,
) -> Result<Box<dyn Target>, CliError> {
    let need_device = |example: &str| {
        device.ok_or_else(|| {
            CliError::usage(format!(
                "--backend {} needs --device (e.g. --device {example})",
                kind.to_possible_value().unwrap().get_name()
            ))
        })
    };
    match kind {
        BackendKind::Sim => {
            if nsid != 1 {
                return Err(CliError::usage(format!("namespace {nsid} is not active on the simulated controller; it has namespace 1")));
            }
            if device.is_some_and(|d| d != "sim") {
                return Err(CliError::usage("--device is not used by --backend sim; drop it, or pick --backend vfio|passthru|block"));
            }
            let mut o = sim_options(sim, queues, sim_cpu)?;
            o.shadow_doorbells &= !kernel.no_shadow_doorbells;
            o.streaming_sq = !kernel.cached_sq_stores;
            let t = SimTarget::open(&o)?;
            crate::reliability::inject(&t.sim, &sim.sim_fault);
            Ok(Box::new(t))
        }
        BackendKind::Vfio => {
            let bdf = need_device("0000:01:00.0")?;
            Ok(crate::backend::vfio::open(&crate::backend::vfio::VfioOptions { bdf: bdf.into(), nsid, queues, shadow_doorbells: !kernel.no_shadow_doorbells, interrupts: kernel.interrupts, streaming_sq: !kernel.cached_sq_stores })?)
        }
        BackendKind::Passthru => Ok(crate::backend::passthru::open(&kernel.options(need_device("/dev/ng0n1")?, nsid))?),
        BackendKind::Block => Ok(crate::backend::block::open(&kernel.options(need_device("/dev/nvme0n1")?, nsid))?),
    }
}

fn bench(a: &BenchArgs) -> Result<i32, CliError> {
    if a.backend != BackendKind::Sim && !a.allow_write && (a.rw.writes() || (a.verify && !a.verify_only)) {
        return Err(CliError::usage(format!(
            "--rw {}{} writes to the device, which destroys its data; add --allow-write if {} holds nothing you need",
            a.rw.as_str(),
            if a.verify && !a.rw.writes() { " with --verify (which first writes the region)" } else { "" },
            if a.device.is_empty() { "the device".to_string() } else { a.device.join(", ") }
        )));
    }
    if a.verify_only && !a.verify {
        return Err(CliError::usage("--verify-only needs --verify"));
    }
    a.reliability.apply()?;
    if a.backend != BackendKind::Sim && !a.sim.sim_fault.is_empty() {
        return Err(CliError::usage("--sim-fault injects faults into the simulated controller; it needs --backend sim"));
    }
    if a.verify_only && a.rw.writes() {
        return Err(CliError::usage("--verify-only checks existing data; use a read pattern (--rw read or randread)"));
    }
    if a.bs > u32::MAX as u64 {
        return Err(CliError::usage("--bs is too large"));
    }
    let is_sim = a.backend == BackendKind::Sim;
    let (cpus, sim_cpu) = if is_sim { sim_placement(a.numjobs, a.cpus.as_deref(), a.sim.sim_cpu) } else { (a.cpus.clone().unwrap_or_default(), None) };
    // A synchronous controller has no thread (and no CPU) of its own.
    let sim_cpu = sim_cpu.filter(|_| !a.sim.sim_sync);
    // Core-to-core latency is measured while the simulator's thread is not
    // running (it would compete for the CPU), right before and after the run.
    let c2c_pair = match (cpus.first(), sim_cpu) {
        (Some(&a_cpu), Some(b_cpu)) if is_sim && !a.no_c2c => Some((a_cpu, b_cpu)),
        _ => None,
    };
    if let Some(ns) = a.wait_fast_c2c {
        let Some((x, y)) = c2c_pair else {
            return Err(CliError::usage(
                "--wait-fast-c2c needs the simulator on a thread of its own and the core-to-core measurement: --backend sim, without --sim-sync or --no-c2c, and two CPUs",
            ));
        };
        let seen = crate::c2c::wait_until_at_most(x, y, ns, a.wait_timeout).ok_or_else(|| {
            CliError::usage(format!("--wait-fast-c2c could not pin its probe's threads to CPUs {x} and {y}; check --cpus and --sim-cpu against the CPUs this process may use"))
        })?;
        if !seen {
            return Err(CliError {
                msg: format!(
                    "core-to-core latency between CPUs {x} and {y} was never at or under {ns} ns in {:?}; nothing was run (try again later, or a longer --wait-timeout)",
                    a.wait_timeout
                ),
                code: exit::NOT_STARTED,
            });
        }
    }
    let before = c2c_pair.and_then(|(x, y)| crate::c2c::measure(x, y, 20_000));
    let queues = a.numjobs.min(u16::MAX as usize) as u16;
    let target: Box<dyn Target> = if a.device.len() > 1 {
        if a.verify {
            return Err(CliError::usage(
                "--verify with several --device is not supported (a unit's expected content would depend on which device served it); verify each device on its own",
            ));
        }
        let mut ts = vec![];
        for d in &a.device {
            ts.push(open_target(a.backend, Some(d), a.nsid, &a.sim, &a.kernel, queues, sim_cpu)?);
        }
        Box::new(crate::backend::multi::MultiTarget::new(ts)?)
    } else {
        open_target(a.backend, a.device.first().map(String::as_str), a.nsid, &a.sim, &a.kernel, queues, sim_cpu)?
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
        runtime: a.runtime,
        ios: a.ios,
        ramp: a.ramp_time,
        verify: a.verify.then_some(VerifySpec { seed: a.verify_seed, only: a.verify_only }),
        batch: a.batch,
        numjobs: a.numjobs,
        cpus: cpus.clone(),
        continue_on_error: a.continue_on_error,
        seed: a.seed,
    };
    engine::validate(&spec, &geo)?;
    let clock = Clock::calibrate();
    let status = a.output_format == OutputFormat::Normal && crate::sys::isatty(2);
    let threads = engine::run(&*target, &spec, clock, status)?;
    let mut summary = RunSummary::new(target.name(), target.describe(), &threads, clock.source());
    drop(target);
    let after = c2c_pair.and_then(|(x, y)| crate::c2c::measure(x, y, 20_000));
    if let Some(note) = a.device.first().map(String::as_str).and_then(crate::topology::emulation_of) {
        summary.emulated = true;
        summary.emulated_note = Some(note);
    }
    if is_sim {
        summary.emulated = true;
        summary.emulated_note = Some(if a.sim.sim_sync {
            "in-process simulated controller, run on the job's thread (--sim-sync): CPU figures include the controller's work; use it to count instructions, not to time".into()
        } else {
            "in-process simulated controller: figures are the driver's cost against a model, not a device".into()
        });
    }
    if let Some((x, y)) = c2c_pair {
        summary.core_to_core_ns = Some((before, after));
        summary.core_share = crate::c2c::core_share(x, y, Duration::from_millis(5));
    }
    match a.output_format {
        OutputFormat::Normal => print!("{}", report::text(&summary, &spec)),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&report::fio_json(&summary, &spec, &threads)).unwrap()),
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

fn info(a: &InfoArgs) -> Result<i32, CliError> {
    let (ctrl, namespaces, path) = match a.backend {
        BackendKind::Sim => {
            if a.device.as_deref().is_some_and(|d| d != "sim") {
                return Err(CliError::usage("--device is not used by --backend sim; drop it, or pick --backend vfio|passthru"));
            }
            let o = sim_options(&a.sim, 1, None)?;
            let sim = nvme_sim::SimController::start(nvme_sim::SimConfig {
                mdts: o.mdts,
                ..nvme_sim::SimConfig::default().with_namespace(o.size, o.lba_size)
            })
            .map_err(BackendError::from)?;
            let mut c = nvme_driver::Controller::new(sim.registers(), sim.allocator(), nvme_driver::ControllerConfig::default()).map_err(BackendError::from)?;
            let (ctrl, ns) = identify_all(&mut c, a.nsid)?;
            (ctrl, ns, "sim".to_string())
        }
        BackendKind::Vfio => {
            let bdf = a.device.as_deref().ok_or_else(|| CliError::usage("--backend vfio needs --device (e.g. --device 0000:01:00.0)"))?;
            let mut v = crate::backend::vfio::open_controller(bdf)?;
            let (ctrl, ns) = identify_all(&mut v.ctrl, a.nsid)?;
            (ctrl, ns, "vfio".to_string())
        }
        BackendKind::Passthru => {
            // Identify through the kernel's admin passthrough ioctl, on the
            // controller (/dev/nvme0) or a namespace (/dev/ng0n1, /dev/nvme0n1).
            let dev = a.device.as_deref().ok_or_else(|| CliError::usage("--backend passthru needs --device (e.g. --device /dev/nvme0 or /dev/ng0n1)"))?;
            let (ctrl, ns) = crate::backend::passthru::identify(dev, a.nsid)?;
            (ctrl, ns, format!("NVME_IOCTL_ADMIN_CMD on {dev}"))
        }
        other => {
            return Err(CliError::usage(format!(
                "info --backend {} is not available in this build yet; use --backend sim",
                other.to_possible_value().unwrap().get_name()
            )))
        }
    };
    print!("{}", identify_report(&ctrl, &namespaces, a.output_format, &path));
    Ok(exit::OK)
}

/// Identify Controller, then every active namespace (or only `nsid`).
fn identify_all<R: nvme_hal::RegisterWindow>(
    c: &mut nvme_driver::Controller<R>,
    nsid: Option<u32>,
) -> Result<(nvme_spec::identify::IdentifyController, Vec<NamespaceInfo>), CliError> {
    Ok((c.identify().clone(), crate::backend::namespace::active(c, nsid)?))
}

/// Identify data as nvme-cli's id-ctrl / id-ns print it, one id-ns block per
/// namespace, each followed by its size and whether a workload can run on it
/// (or as JSON).
pub fn identify_report(ctrl: &nvme_spec::identify::IdentifyController, namespaces: &[NamespaceInfo], fmt: OutputFormat, path: &str) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    match fmt {
        OutputFormat::Json => {
            let ns: Vec<_> = namespaces
                .iter()
                .map(|n| {
                    serde_json::json!({
                        "nsid": n.nsid,
                        "id_ns": n.id_ns,
                        "command_set": nvme_spec::identify::NsDescriptors::command_set_name(n.csi),
                        "csi": n.csi,
                        "lba_size": n.id_ns.lba_size(),
                        "metadata_size": n.id_ns.current_format().ms,
                        "size_bytes": n.id_ns.size_bytes(),
                        "usable": n.unusable.is_none(),
                        "unusable_reason": n.unusable,
                    })
                })
                .collect();
            let mut v = serde_json::json!({
                "path": path,
                "id_ctrl": ctrl,
                "active_namespaces": namespaces.iter().map(|n| n.nsid).collect::<Vec<_>>(),
                "namespaces": ns,
            });
            // The first namespace also at the top level, as before.
            if let Some(n) = namespaces.first() {
                v["nsid"] = n.nsid.into();
                v["id_ns"] = serde_json::to_value(&n.id_ns).unwrap();
                v["lba_size"] = n.id_ns.lba_size().into();
                v["size_bytes"] = n.id_ns.size_bytes().into();
            }
            writeln!(out, "{}", serde_json::to_string_pretty(&v).unwrap()).unwrap();
        }
        OutputFormat::Normal => {
            writeln!(out, "NVME Identify Controller (via {path}):").unwrap();
            for (k, v) in ctrl.nvme_cli_fields() {
                writeln!(out, "{k:<9} : {v}").unwrap();
            }
            writeln!(out).unwrap();
            let ids: Vec<_> = namespaces.iter().map(|n| n.nsid.to_string()).collect();
            writeln!(out, "namespaces: {} shown ({})", namespaces.len(), if ids.is_empty() { "none active".into() } else { ids.join(", ") }).unwrap();
            for n in namespaces {
                writeln!(out).unwrap();
                writeln!(out, "NVME Identify Namespace {}:", n.nsid).unwrap();
                for (k, v) in n.id_ns.nvme_cli_fields() {
                    if k.starts_with("lbaf") {
                        writeln!(out, "{k} : {v}").unwrap(); // nvme-cli: "lbaf  0 : ms:0 ..."
                    } else {
                        writeln!(out, "{k:<9} : {v}").unwrap();
                    }
                }
                writeln!(out).unwrap();
                writeln!(out, "namespace {}: {} blocks of {} bytes = {} bytes", n.nsid, n.id_ns.nsze, n.id_ns.lba_size(), n.id_ns.size_bytes()).unwrap();
                let set = nvme_spec::identify::NsDescriptors::command_set_name(n.csi);
                match &n.unusable {
                    None => writeln!(out, "namespace {}: {set} command set, {} bytes of metadata per block: usable by bench", n.nsid, n.id_ns.current_format().ms).unwrap(),
                    Some(why) => writeln!(out, "namespace {}: not usable by bench: {why}", n.nsid).unwrap(),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_durations_cpus() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("128K"), Ok(128 << 10));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("4x").is_err());
        assert!(parse_size("k").is_err());
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_cpus("0"), Ok(vec![0]));
        assert!(parse_cpus("0-").is_err());
        assert!(parse_cpus("99999").is_err());
    }
}

#[cfg(test)]
mod info_tests {
    use super::*;
    use nvme_sim::{NamespaceConfig, NamespaceFormat, SimConfig, SimController};

    /// NSIDs 2, 4 (4 KiB blocks), 5 (8 bytes of metadata, extended) and 6
    /// (zoned) active; 1 and 3 allocated but inactive.
    fn controller_with_gaps() -> (SimController, nvme_driver::Controller<nvme_sim::SimRegisters>) {
        let ns = |blocks, lba_size| NamespaceConfig { blocks, lba_size };
        let meta = NamespaceFormat { ms: 8, extended: true, ..Default::default() };
        let zoned = NamespaceFormat { csi: nvme_spec::identify::csi::ZONED, ..Default::default() };
        let sim = SimController::start(SimConfig {
            namespaces: vec![ns(0, 512), ns(2048, 512), ns(0, 512), ns(256, 4096), ns(1024, 512), ns(1024, 512)],
            namespace_formats: vec![Default::default(), Default::default(), Default::default(), Default::default(), meta, zoned],
            idle_spins: 2000,
            ..SimConfig::default()
        })
        .unwrap();
        let c = nvme_driver::Controller::new(sim.registers(), sim.allocator(), nvme_driver::ControllerConfig::default()).unwrap();
        (sim, c)
    }

    #[test]
    fn info_shows_every_active_namespace_and_its_formats() {
        let (_sim, mut c) = controller_with_gaps();
        let (ctrl, ns) = identify_all(&mut c, None).unwrap();
        assert_eq!(ns.iter().map(|n| n.nsid).collect::<Vec<_>>(), [2, 4, 5, 6]);
        let text = identify_report(&ctrl, &ns, OutputFormat::Normal, "sim");
        for n in [2, 4, 5, 6] {
            assert!(text.contains(&format!("NVME Identify Namespace {n}:")), "{text}");
        }
        assert!(!text.contains("Namespace 1:") && !text.contains("Namespace 3:"), "{text}");
        assert!(text.contains("namespaces: 4 shown (2, 4, 5, 6)"), "{text}");
        // nvme-cli's id-ns lines for the LBA formats
        assert!(text.contains("lbaf  0 : ms:0   lbads:9  rp:0 (in use)"), "{text}");
        assert!(text.contains("lbaf  1 : ms:0   lbads:12 rp:0 (in use)"), "{text}");
        assert!(text.contains("lbaf  2 : ms:8   lbads:9  rp:0 (in use)"), "{text}");
        assert!(text.contains("namespace 4: 256 blocks of 4096 bytes = 1048576 bytes"), "{text}");
        assert!(text.contains("namespace 2: NVM command set, 0 bytes of metadata per block: usable by bench"), "{text}");
        assert!(text.contains("namespace 5: not usable by bench: namespace 5 is formatted with 8 bytes of metadata"), "{text}");
        assert!(text.contains("namespace 6: not usable by bench: namespace 6 is a zoned namespace"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&identify_report(&ctrl, &ns, OutputFormat::Json, "sim")).unwrap();
        assert_eq!(json["active_namespaces"], serde_json::json!([2, 4, 5, 6]));
        assert_eq!(json["namespaces"][1]["lba_size"], 4096);
        assert_eq!(json["namespaces"][2]["usable"], false);
        assert_eq!(json["namespaces"][3]["command_set"], "Zoned Namespace");
        assert_eq!(json["nsid"], 2);
        // One namespace asked for; an inactive one is refused, naming the active ones.
        assert_eq!(identify_all(&mut c, Some(4)).unwrap().1.len(), 1);
        let e = identify_all(&mut c, Some(3)).unwrap_err();
        assert!(e.msg.contains("namespace 3 is not active") && e.msg.contains("2, 4, 5, 6"), "{}", e.msg);
    }

    #[test]
    fn workloads_refuse_unusable_namespaces_before_any_io() {
        use crate::backend::userspace::UserspaceTarget;
        for (nsid, want) in [
            (1, "namespace 1 is not active on this controller; its active namespaces are 2, 4, 5, 6: use --nsid 2"),
            (3, "its active namespaces are 2, 4, 5, 6"),
            (5, "8 bytes of metadata per block, at the end of each block's data"),
            (6, "zoned namespace"),
        ] {
            let (sim, c) = controller_with_gaps();
            let fetched = sim.stats().fetched.load(std::sync::atomic::Ordering::Relaxed);
            let e = UserspaceTarget::new("sim", c, nsid).err().expect("refused");
            assert!(e.to_string().contains(want), "nsid {nsid}: {e}");
            // Admin commands only (Identify): no I/O queue was even created.
            let after = sim.stats().fetched.load(std::sync::atomic::Ordering::Relaxed);
            assert!(after - fetched <= 4, "nsid {nsid}: {} commands", after - fetched);
        }
        let (_sim, c) = controller_with_gaps();
        let t = UserspaceTarget::new("sim", c, 4).unwrap();
        assert_eq!(crate::backend::Target::geometry(&t).lba_size, 4096);
    }
}
