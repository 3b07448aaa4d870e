//! Option groups several commands share, and opening the path they name.

pub use crate::backend::path::PathKind;
use crate::backend::path::PathSpec;
use crate::backend::userspace::sim::SimOptions;
use crate::backend::userspace::vfio::VfioOptions;
use crate::cli::parse::parse_size;
use crate::error::Error;
use clap::ValueEnum;

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
    /// CPU for the simulated controller's thread (default: a CPU the job threads do not use; without --cpus the jobs then go round the other CPUs).
    #[arg(long, value_parser = parse_cpu)]
    pub sim_cpu: Option<usize>,
    /// Simulated MDTS (max transfer 4 KiB << MDTS): 1 to 13, or 0 for no limit (our driver then caps transfers at 1 MiB).
    #[arg(long, default_value_t = 7, value_parser = parse_sim_mdts)]
    pub sim_mdts: u8,
    /// Simulated CAP.MQES, 0's based as in QEMU's `mqes=` option: queues of up to N + 1 entries (65535: 65536; 1: 2-entry queues).
    #[arg(long, default_value_t = 2047, value_parser = parse_sim_mqes)]
    pub sim_mqes: u16,
    /// Run the simulated controller on the job's own thread, stepped at each MMIO doorbell write (so shadow doorbells are off), instead of on its own CPU. Timings then include the controller's work; it exists for repeatable instruction counts of the whole I/O loop (scripts/callgrind-driver.sh).
    #[arg(long)]
    pub sim_sync: bool,
    /// Inject a device fault into the simulated controller (repeatable; key=value[,key=value]): drop-every=N, delay-us=N, status-every=N, status=SCT:SC, dnr=0|1, fatal-after=N, hang-after=N, stall-every=N, refuse-abort=0|1, corrupt-cid-every=N, bad-sqid-every=N, corrupt-data-every=N, pause=N:MS. See docs/reliability.md.
    #[arg(long, value_parser = crate::commands::reliability_args::sim_fault_arg)]
    pub sim_fault: Vec<Vec<crate::cli::parse::SimFault>>,
}

/// Largest `--sim-mdts`: 4 KiB << 13 = 32 MiB, the most one read or write
/// carries with 512-byte blocks (65536 blocks), where our driver caps every
/// transfer; a larger MDTS would be capped without a word (and from 52 up
/// the simulator's own limit wraps to nothing, failing every I/O).
pub const SIM_MDTS_MAX: u8 = 13;

/// `--sim-mdts`: 0 (no limit) or 1 to [`SIM_MDTS_MAX`].
pub fn parse_sim_mdts(s: &str) -> Result<u8, String> {
    let range = format!("use 1 to {SIM_MDTS_MAX} (max transfer 4 KiB << MDTS: 7 = 512 KiB, {SIM_MDTS_MAX} = 32 MiB), or 0 for no limit");
    match s.trim().parse::<u64>() {
        Ok(m) if m <= SIM_MDTS_MAX as u64 => Ok(m as u8),
        Ok(m) => Err(format!("MDTS {m} is more than our driver can use (it caps one transfer at 32 MiB, MDTS {SIM_MDTS_MAX}); {range}")),
        Err(_) => Err(format!("'{s}' is not a number; {range}")),
    }
}

/// `--sim-mqes`: 1 (2-entry queues, the least the specification allows) to 65535.
pub fn parse_sim_mqes(s: &str) -> Result<u16, String> {
    let range = "use 1 (2-entry queues, the least NVMe allows) to 65535 (65536 entries); it is 0's based, as QEMU's mqes=";
    match s.trim().parse::<u64>() {
        Ok(m @ 1..=65535) => Ok(m as u16),
        Ok(m) => Err(format!("{m} is out of range; {range}")),
        Err(_) => Err(format!("'{s}' is not a number; {range}")),
    }
}

/// `--nsid`: a namespace ID, 1 to FFFFFFFEh (NVMe 2.0 §3.2.1: 0 names no
/// namespace and FFFFFFFFh all of them), decimal or 0x-hex as nvme-cli takes it.
pub fn parse_nsid(s: &str) -> Result<u32, String> {
    let hint = "namespaces are numbered from 1 (0 is no namespace, 0xffffffff all of them); `nvme-bypass info --device DEV` lists the active ones";
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    };
    match v {
        Ok(n @ 1..=0xffff_fffe) => Ok(n as u32),
        Ok(_) => Err(format!("{t} is not a namespace ID; {hint}")),
        Err(_) => Err(format!("'{s}' is not a number; {hint}")),
    }
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
}

/// Options of our driver (vfio, and sim where they apply).
#[derive(clap::Args, Debug, Clone)]
pub struct DriverArgs {
    /// Our driver on vfio: interrupt-driven completions (MSI-X, the thread sleeps when idle) instead of polling.
    #[arg(long)]
    pub interrupts: bool,
    /// Our driver (vfio, sim): write every doorbell to MMIO instead of using shadow doorbells.
    #[arg(long)]
    pub no_shadow_doorbells: bool,
    /// Our driver (vfio, sim): write submission entries with ordinary cached stores instead of streaming (non-temporal) stores.
    #[arg(long)]
    pub cached_sq_stores: bool,
    /// Our driver on vfio: the most host memory, in MiB, given to a controller that asks for a Host Memory Buffer (a DRAM-less SSD); 0 gives none. As Linux's nvme.max_host_mem_size_mb.
    #[arg(long, value_name = "MIB", default_value_t = 128, value_parser = clap::value_parser!(u32))]
    pub host_memory_max_mb: u32,
}

/// As with no option given (a Host Memory Buffer of up to 128 MiB).
impl Default for DriverArgs {
    fn default() -> Self {
        DriverArgs { interrupts: false, no_shadow_doorbells: false, cached_sq_stores: false, host_memory_max_mb: (nvme_driver::HOST_MEMORY_MAX >> 20) as u32 }
    }
}

impl KernelArgs {
    pub fn options(&self, device: &str, nsid: u32) -> crate::backend::kernel::KernelOptions {
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
            // bench's buffered rows keep what the page cache holds (the
            // compare figures' rule); the fio drop-in drops it per pass.
            invalidate: false,
            // bench has no O_SYNC rows (the fio drop-in's sync=).
            sync_open: 0,
            // bench gives the page cache no hint (its buffered rows keep
            // the kernel's default readahead).
            fadvise: None,
            // bench's buffered rows keep the file's block size.
            granule: 0,
            defer_taskrun: self.defer_taskrun,
            register_ring: self.register_ring,
            // bench sets the ring up as its options say, nothing more.
            fio_ring: false,
            // bench opens read-write: its write guard is --allow-write.
            read_only: false,
            // libaio completions from the ring in user memory, as the
            // compare rows count them.
            aio_reap: Default::default(),
        }
    }
}

/// The options that belong to some backends only, each with the backends
/// it has an effect on (clap's ids: the field names). One given for
/// another backend is refused, not ignored: a user who adds --sim-mdts to
/// a block run believes it did something.
const OWN_OPTIONS: &[(&str, &[PathKind])] = {
    use PathKind::*;
    &[
        ("sim_data", &[Sim]),
        ("sim_size", &[Sim]),
        ("sim_lba_size", &[Sim]),
        ("sim_cpu", &[Sim]),
        ("sim_mdts", &[Sim]),
        ("sim_mqes", &[Sim]),
        ("sim_sync", &[Sim]),
        ("sim_fault", &[Sim]),
        // The kernel's nvme driver times its own commands out
        // (nvme_core.io_timeout); the kernel paths never abort.
        ("io_timeout", &[Sim, Vfio]),
        ("no_c2c", &[Sim]),
        ("wait_fast_c2c", &[Sim]),
        ("wait_timeout", &[Sim]),
        ("ioengine", &[Block]),
        ("buffered", &[Block]),
        ("fixedbufs", &[Block, Passthru]),
        ("registerfiles", &[Block, Passthru]),
        ("hipri", &[Block, Passthru]),
        ("sqthread_poll", &[Block, Passthru]),
        ("sqthread_poll_cpu", &[Block, Passthru]),
        ("defer_taskrun", &[Block, Passthru]),
        ("register_ring", &[Block, Passthru]),
        ("interrupts", &[Vfio]),
        ("no_shadow_doorbells", &[Vfio, Sim]),
        ("cached_sq_stores", &[Vfio, Sim]),
        ("host_memory_max_mb", &[Vfio]),
    ]
};

/// An option's id as the command line spells it.
fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// Refuse every option in `given` (the ids of the options on the command
/// line) that has no effect on `backend`, naming the backend it belongs to.
/// (The kernel paths' options among themselves, an io_uring option with
/// another engine, are [`crate::backend::kernel::KernelOptions::check`]'s.)
pub fn refuse_foreign_options(given: &[String], backend: PathKind) -> Result<(), Error> {
    for id in given {
        let Some((_, kinds)) = OWN_OPTIONS.iter().find(|(o, _)| o == id) else { continue };
        if !kinds.contains(&backend) {
            let names: Vec<String> = kinds.iter().map(|k| format!("--backend {}", k.name())).collect();
            return Err(Error::usage(format!(
                "{} has no effect on --backend {}: it is an option of {}; drop it, or pick {}",
                flag(id),
                backend.name(),
                names.join(" and "),
                names.join(" or ")
            )));
        }
    }
    if given.iter().any(|g| g == "wait_timeout") && !given.iter().any(|g| g == "wait_fast_c2c") {
        return Err(Error::usage("--wait-timeout bounds the wait of --wait-fast-c2c: add --wait-fast-c2c NS, or drop it"));
    }
    Ok(())
}

/// Simulator runs: keep the job threads and the controller thread on
/// different CPUs, as a device would be. Job threads go on `cpus` or, when
/// none are given, round robin over every CPU but the controller's (`sim_cpu`,
/// else the last); the controller on `sim_cpu` or the highest CPU no job
/// thread uses. A controller that is not
/// `threaded` (`--sim-sync`) has no thread and no CPU of its own: the job
/// threads go round robin over every CPU, and no controller CPU is returned.
/// Returns (job CPUs, controller CPU); a one-CPU machine pins nothing.
pub fn sim_placement(numjobs: usize, cpus: Option<&[usize]>, sim_cpu: Option<usize>, threaded: bool) -> (Vec<usize>, Option<usize>) {
    place_sim(crate::measure::c2c::online_cpus(), numjobs, cpus, sim_cpu, threaded)
}

/// [`sim_placement`] on a machine of `ncpu` CPUs.
fn place_sim(ncpu: usize, numjobs: usize, cpus: Option<&[usize]>, sim_cpu: Option<usize>, threaded: bool) -> (Vec<usize>, Option<usize>) {
    let mut cpus = cpus.map(<[usize]>::to_vec).unwrap_or_default();
    if cpus.is_empty() && ncpu >= 2 {
        // Every CPU but the controller's (the one given, else the last),
        // or every CPU when it has no thread.
        let controller = if threaded { Some(sim_cpu.unwrap_or(ncpu - 1)) } else { None };
        let free: Vec<usize> = (0..ncpu).filter(|&c| Some(c) != controller).collect();
        cpus = (0..numjobs).map(|i| free[i % free.len()]).collect();
    }
    if !threaded {
        return (cpus, None);
    }
    let sim_cpu = sim_cpu.or_else(|| (ncpu >= 2).then(|| (0..ncpu).rev().find(|c| !cpus.contains(c)).unwrap_or(ncpu - 1)));
    (cpus, sim_cpu)
}

/// A warning when a simulator run's polling threads would share a CPU:
/// job `i` runs on `cpus[i % len]` (as the engine pins it), and the
/// controller's thread, when it has one, on `sim_cpu`. Pollers that share a
/// CPU take turns at the scheduler's pace, so latency and IOPS are the
/// scheduler's, not the path's. None when nothing is pinned (a one-CPU
/// machine) or every poller has a CPU of its own.
pub fn sim_sharing(numjobs: usize, cpus: &[usize], sim_cpu: Option<usize>) -> Option<String> {
    sim_sharing_advised(
        numjobs,
        cpus,
        sim_cpu,
        "give each its own CPU (fewer jobs, --cpus, --sim-cpu), or use --sim-sync (the controller steps on each job's own thread)",
    )
}

/// [`sim_sharing`], ending in `advice` (what to do about it) for a command
/// whose options are not bench's: sweep has no --sim-sync.
pub fn sim_sharing_advised(numjobs: usize, cpus: &[usize], sim_cpu: Option<usize>, advice: &str) -> Option<String> {
    if cpus.is_empty() {
        return None;
    }
    let mut on = std::collections::BTreeMap::<usize, usize>::new();
    for i in 0..numjobs {
        *on.entry(cpus[i % cpus.len()]).or_default() += 1;
    }
    if let Some(c) = sim_cpu {
        *on.entry(c).or_default() += 1;
    }
    let (&cpu, &n) = on.iter().max_by_key(|(_, n)| **n)?;
    let pollers = numjobs + sim_cpu.is_some() as usize;
    (n > 1).then(|| {
        format!(
            "{pollers} polling threads ({numjobs} job{}{}) on {} CPU{}, {n} of them on CPU {cpu}: threads that share a CPU take turns at the scheduler's pace, so these latencies and IOPS are the scheduler's, not the path's; {advice}",
            if numjobs == 1 { "" } else { "s" },
            if sim_cpu.is_some() { " and the simulator's controller" } else { "" },
            on.len(),
            if on.len() == 1 { "" } else { "s" },
        )
    })
}

/// The simulator's options from its arguments and our driver's (`queues` as
/// [`PathSpec::open`] is given them, `cpu` from [`sim_placement`]).
pub fn sim_options(a: &SimArgs, driver: &DriverArgs, queues: u16, cpu: Option<usize>) -> Result<SimOptions, Error> {
    if a.sim_lba_size != 512 && a.sim_lba_size != 4096 {
        return Err(Error::usage(format!("--sim-lba-size {} is not supported; use 512 or 4096", a.sim_lba_size)));
    }
    let lba = a.sim_lba_size as u64;
    if a.sim_size < lba {
        return Err(Error::usage(format!("--sim-size {} is smaller than one {lba}-byte block (--sim-lba-size); use e.g. --sim-size 1G", a.sim_size)));
    }
    if a.sim_size % lba != 0 {
        return Err(Error::usage(format!(
            "--sim-size {} is not a whole number of {lba}-byte blocks (--sim-lba-size); use a multiple of {lba}, such as {} or {}",
            a.sim_size,
            a.sim_size / lba * lba,
            (a.sim_size / lba + 1) * lba
        )));
    }
    Ok(SimOptions {
        size: a.sim_size,
        lba_size: a.sim_lba_size,
        null: a.sim_data == SimData::Null,
        queues,
        cpu,
        mdts: a.sim_mdts,
        mqes: a.sim_mqes,
        threaded: !a.sim_sync,
        // A synchronous controller runs only when a register is written.
        shadow_doorbells: !a.sim_sync && !driver.no_shadow_doorbells,
        streaming_sq: !driver.cached_sq_stores,
        faults: crate::commands::reliability_args::sim_faults(&a.sim_fault),
    })
}

/// Refuse a `--device` that names a PCI function other than an NVMe
/// controller, first of all: what else there is to say about it (its
/// driver, binding it to vfio-pci or giving it back) sends a user round in
/// circles. Device paths, and addresses with no device behind them, are
/// left to the path that opens them.
pub fn refuse_non_nvme(device: &str) -> Result<(), Error> {
    let Some(bdf) = crate::measure::topology::canonical_bdf(device) else { return Ok(()) };
    let host = nvme_vfio::Host::system();
    let bdf = nvme_vfio::Bdf::parse(&bdf)?;
    if !host.pci_device(&bdf).exists() {
        return Ok(());
    }
    nvme_vfio::bind::check_device(&host, &bdf)?;
    Ok(())
}

/// The one name of a device, for telling two `--device` apart: a PCI
/// address in its canonical form (`01:00.0` is `0000:01:00.0`), a path with
/// its links resolved (`/dev/disk/by-id/...` is the `/dev/nvme0n1` it
/// points to). `sim` names no device: each is a controller of its own.
pub fn device_identity(d: &str) -> Option<String> {
    if d == "sim" {
        return None;
    }
    if let Some(b) = crate::measure::topology::canonical_bdf(d) {
        return Some(b);
    }
    Some(std::fs::canonicalize(d).map(|p| p.display().to_string()).unwrap_or_else(|_| d.to_string()))
}

/// Refuse a device given twice: two jobs on one controller are not two
/// devices, and figures per device would be wrong by half.
pub fn refuse_duplicate_devices(devices: &[String]) -> Result<(), Error> {
    let mut seen: Vec<(String, &str)> = vec![];
    for d in devices {
        let Some(id) = device_identity(d) else { continue };
        if let Some((_, first)) = seen.iter().find(|(s, _)| *s == id) {
            let same = if *first == d.as_str() { String::new() } else { format!(" ({first} and {d} are both {id})") };
            return Err(Error::usage(format!(
                "--device {d} is given twice{same}: one device driven as two would count its I/Os twice; give each device once (--iodepth is per device: raise it for more I/Os in flight on one)"
            )));
        }
        seen.push((id, d));
    }
    Ok(())
}

/// Refuse a namespace the simulated controller does not have: it has
/// namespace 1 only.
pub fn sim_namespace(nsid: u32) -> Result<(), Error> {
    if nsid != 1 {
        return Err(Error::usage(format!("namespace {nsid} is not active on the simulated controller; it has namespace 1")));
    }
    Ok(())
}

/// The path a command asks for: `--backend`, `--device`, `--nsid` and the
/// option groups, checked. `sim_cpu` is the simulator's from [`sim_placement`].
pub fn path_spec(kind: PathKind, device: Option<&str>, nsid: u32, sim: &SimArgs, kernel: &KernelArgs, driver: &DriverArgs, sim_cpu: Option<usize>) -> Result<PathSpec, Error> {
    let need_device = |example: &str| device.ok_or_else(|| Error::usage(format!("--backend {} needs --device (e.g. --device {example})", kind.name())));
    Ok(match kind {
        PathKind::Sim => {
            sim_namespace(nsid)?;
            if device.is_some_and(|d| d != "sim") {
                return Err(Error::usage("--device is not used by --backend sim; drop it, or pick --backend vfio|passthru|block"));
            }
            PathSpec::Sim(sim_options(sim, driver, 1, sim_cpu)?)
        }
        PathKind::Vfio => PathSpec::Vfio(VfioOptions {
            shadow_doorbells: !driver.no_shadow_doorbells,
            interrupts: driver.interrupts,
            streaming_sq: !driver.cached_sq_stores,
            host_memory_max: (driver.host_memory_max_mb as usize) << 20,
            ..VfioOptions::new(need_device("0000:01:00.0")?.into(), nsid)
        }),
        PathKind::Passthru => PathSpec::Passthru(kernel.options(need_device("/dev/ng0n1")?, nsid)),
        PathKind::Block => PathSpec::Block(kernel.options(need_device("/dev/nvme0n1")?, nsid)),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_controller_thread_gets_a_cpu_of_its_own_and_sync_jobs_take_every_cpu() {
        // Threaded: jobs round robin over every CPU but the last, the
        // controller on the highest CPU no job uses (or the last).
        assert_eq!(place_sim(4, 2, None, None, true), (vec![0, 1], Some(3)));
        assert_eq!(place_sim(4, 5, None, None, true), (vec![0, 1, 2, 0, 1], Some(3)));
        assert_eq!(place_sim(4, 2, Some(&[2, 3][..]), None, true), (vec![2, 3], Some(1)));
        assert_eq!(place_sim(2, 2, Some(&[0, 1][..]), None, true), (vec![0, 1], Some(1)));
        // --sim-cpu alone: the jobs go round the other CPUs, not onto it.
        assert_eq!(place_sim(4, 2, None, Some(0), true), (vec![1, 2], Some(0)));
        assert_eq!(place_sim(2, 2, None, Some(0), true), (vec![1, 1], Some(0)));
        // Synchronous (--sim-sync): no controller thread, so no controller
        // CPU (not even one asked for), and the jobs take every CPU.
        assert_eq!(place_sim(4, 5, None, None, false), (vec![0, 1, 2, 3, 0], None));
        assert_eq!(place_sim(2, 2, None, Some(1), false), (vec![0, 1], None));
        assert_eq!(place_sim(4, 2, Some(&[3][..]), None, false), (vec![3], None));
        // A one-CPU machine pins nothing either way.
        assert_eq!(place_sim(1, 2, None, None, true), (vec![], None));
        assert_eq!(place_sim(1, 2, None, None, false), (vec![], None));
        // What the warning then says: two threaded jobs on a 2-CPU machine
        // share CPU 0; two synchronous ones have a CPU each.
        let (c, s) = place_sim(2, 2, None, None, true);
        assert!(sim_sharing(2, &c, s).unwrap().contains("2 of them on CPU 0"));
        let (c, s) = place_sim(2, 2, None, None, false);
        assert_eq!(sim_sharing(2, &c, s), None);
    }

    #[test]
    fn pollers_that_share_a_cpu_are_warned_of() {
        // Two jobs and the controller on two CPUs: both jobs on CPU 0.
        let w = sim_sharing(2, &[0, 0], Some(1)).unwrap();
        assert!(w.contains("3 polling threads") && w.contains("2 of them on CPU 0") && w.contains("--sim-sync"), "{w}");
        // The controller on a job's CPU.
        assert!(sim_sharing(1, &[0], Some(0)).unwrap().contains("2 of them on CPU 0"));
        // One each, or synchronous (no controller thread), or unpinned: nothing.
        assert_eq!(sim_sharing(1, &[0], Some(1)), None);
        assert_eq!(sim_sharing(2, &[0, 1], None), None);
        assert_eq!(sim_sharing(4, &[], Some(1)), None);
    }

    #[test]
    fn namespace_ids_are_one_to_fffffffe() {
        assert_eq!(parse_nsid("1"), Ok(1));
        assert_eq!(parse_nsid("0x10"), Ok(16));
        assert_eq!(parse_nsid("4294967294"), Ok(0xffff_fffe));
        for bad in ["0", "0xffffffff", "4294967295", "-1", "one", ""] {
            let e = parse_nsid(bad).unwrap_err();
            assert!(e.contains("numbered from 1") && e.contains("nvme-bypass info"), "{bad}: {e}");
        }
    }

    use super::*;
    use crate::backend::kernel::IoEngine;
    use clap::Parser;

    /// The option groups as a command flattens them.
    #[derive(Parser)]
    struct Groups {
        #[arg(long, value_enum, default_value = "sim")]
        backend: PathKind,
        #[arg(long)]
        device: Option<String>,
        #[command(flatten)]
        sim: SimArgs,
        #[command(flatten)]
        kernel: KernelArgs,
        #[command(flatten)]
        driver: DriverArgs,
    }

    fn spec(args: &[&str]) -> Result<PathSpec, Error> {
        let g = Groups::try_parse_from(std::iter::once("t").chain(args.iter().copied())).expect("parses");
        path_spec(g.backend, g.device.as_deref(), 1, &g.sim, &g.kernel, &g.driver, Some(3))
    }

    #[test]
    fn arg_groups_map_to_the_path_they_describe() {
        let PathSpec::Sim(o) = spec(&[]).unwrap() else { panic!("sim") };
        assert!(o.threaded && o.shadow_doorbells && o.streaming_sq && !o.null);
        assert_eq!((o.size, o.lba_size, o.mdts, o.mqes, o.cpu), (1 << 30, 512, 7, 2047, Some(3)));
        let PathSpec::Sim(o) = spec(&["--sim-data", "null", "--no-shadow-doorbells", "--cached-sq-stores", "--sim-fault", "drop-every=5,status-every=7"]).unwrap() else { panic!("sim") };
        assert!(o.null && !o.shadow_doorbells && !o.streaming_sq);
        assert_eq!((o.faults.drop_every, o.faults.status_every), (5, 7));
        assert_eq!(o.faults.status_sc, nvme_spec::status::generic::INTERNAL_ERROR as u32);
        let PathSpec::Sim(o) = spec(&["--sim-sync"]).unwrap() else { panic!("sim") };
        assert!(!o.threaded && !o.shadow_doorbells);

        let PathSpec::Vfio(v) = spec(&["--backend", "vfio", "--device", "0000:01:00.0", "--interrupts", "--no-shadow-doorbells"]).unwrap() else { panic!("vfio") };
        assert_eq!((v.bdf.as_str(), v.nsid, v.interrupts, v.shadow_doorbells, v.streaming_sq), ("0000:01:00.0", 1, true, false, true));
        assert_eq!(v.host_memory_max, 128 << 20, "Linux's max_host_mem_size_mb by default");
        let PathSpec::Vfio(v) = spec(&["--backend", "vfio", "--device", "0000:01:00.0", "--host-memory-max-mb", "0"]).unwrap() else { panic!("vfio") };
        assert_eq!(v.host_memory_max, 0);

        let s = spec(&["--backend", "block", "--device", "/dev/nvme0n1", "--ioengine", "libaio", "--buffered"]).unwrap();
        assert_eq!(s.label(), "block/libaio buffered");
        let PathSpec::Block(k) = s else { panic!("block") };
        assert_eq!((k.device.as_str(), k.ioengine, k.buffered), ("/dev/nvme0n1", IoEngine::Libaio, true));

        let s = spec(&["--backend", "passthru", "--device", "/dev/ng0n1", "--fixedbufs", "--registerfiles", "--register-ring", "--defer-taskrun"]).unwrap();
        assert_eq!(s.label(), "passthru best");
        assert_eq!(s.kind(), PathKind::Passthru);
    }

    #[test]
    fn a_path_without_what_it_needs_is_a_usage_error() {
        for (args, want) in [
            (&["--backend", "vfio"][..], "--backend vfio needs --device (e.g. --device 0000:01:00.0)"),
            (&["--backend", "block"][..], "--backend block needs --device (e.g. --device /dev/nvme0n1)"),
            (&["--device", "/dev/nvme0n1"][..], "--device is not used by --backend sim"),
            (&["--sim-lba-size", "1024"][..], "--sim-lba-size 1024 is not supported"),
        ] {
            let e = spec(args).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn a_device_given_twice_is_refused_after_normalising_its_name() {
        let v = |d: &[&str]| d.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let dir = std::env::temp_dir().join(format!("nvb-dup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ns");
        std::fs::write(&file, b"").unwrap();
        let link = dir.join("by-id");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let (file, link) = (file.display().to_string(), link.display().to_string());
        for (devices, want) in [
            (v(&["0000:01:00.0", "0000:01:00.0"]), "--device 0000:01:00.0 is given twice:".to_string()),
            (v(&["01:00.0", "0000:01:00.0"]), "--device 0000:01:00.0 is given twice (01:00.0 and 0000:01:00.0 are both 0000:01:00.0)".to_string()),
            (v(&["0000:AB:00.0", "0000:ab:00.0"]), "are both 0000:ab:00.0".to_string()),
            (v(&["/dev/nvme9n9", "/dev/nvme9n9"]), "--device /dev/nvme9n9 is given twice".to_string()),
            (v(&[&file, &link]), format!("({file} and {link} are both {file})")),
        ] {
            let e = refuse_duplicate_devices(&devices).unwrap_err().to_string();
            assert!(e.contains(&want) && e.contains("give each device once"), "{devices:?}: {e}");
        }
        // Two devices, and the simulator's controllers (each its own), pass.
        refuse_duplicate_devices(&v(&["0000:01:00.0", "0000:02:00.0"])).unwrap();
        refuse_duplicate_devices(&v(&["sim", "sim"])).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A list of CPUs, parsed from one argument ("0,1" or "0-3"). An alias so
/// clap takes the whole list as one value (it treats a literal `Vec` field as
/// a repeated option, and panics when the parser returns a Vec).
pub type CpuList = Vec<usize>;

/// Parse "0,1" or "0-3" or "0-1,4": CPUs this machine has.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let v = crate::cli::parse::parse_cpu_list(s)?;
    let n = crate::measure::c2c::online_cpus();
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

#[cfg(test)]
mod cli_value_tests {
    use super::*;
    use crate::cli::parse::{parse_duration, parse_size};
    use std::time::Duration;

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
