//! # nvme-sim: an in-process NVMe controller
//!
//! A model of a PCIe NVMe controller that runs on its own thread inside the
//! test or benchmark process. The driver talks to it exactly as to hardware:
//! through a [`RegisterWindow`](nvme_hal::RegisterWindow) ([`SimRegisters`])
//! and DMA memory at bus addresses ([`SimMemory`]); the controller thread
//! polls its doorbells, fetches submission entries, executes admin and NVM
//! commands against RAM-backed namespaces, and posts completions with the
//! phase tag.
//!
//! It validates like a real controller and answers malformed commands with
//! the status the specification (NVMe 1.4c) names: Invalid Opcode, Invalid
//! Field, LBA Out of Range, Invalid Namespace, Invalid Queue Identifier,
//! Invalid Queue Size, Invalid PRP Offset, Command Sequence Error...
//!
//! [`DataMode::Null`] moves no data (the commands are still checked), so a
//! benchmark measures the driver rather than `memcpy`. When idle, the thread
//! spins briefly, then yields, then parks (a register write wakes it), so
//! many simulated controllers can share two cores in a test run.
//!
//! [`Faults`] injects device misbehaviour at run time for reliability tests.

mod device;
mod memory;
mod regs;

pub use device::{Faults, SimEvent, SimStats};
pub use memory::{IovaMap, SimAllocator, SimMemory};
pub use regs::SimRegisters;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What happens to the data of reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataMode {
    /// Namespaces are RAM: writes store, reads return what was written.
    Ram,
    /// No data moves; commands are validated and completed. Reads leave the
    /// host buffer untouched.
    Null,
}

/// One namespace. A namespace of 0 blocks is an inactive NSID (allocated,
/// not attached): Identify returns zeroes for it, the active list skips it,
/// and I/O to it fails with Invalid Namespace. That gives NSID lists with
/// gaps, or without NSID 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamespaceConfig {
    /// Size in logical blocks.
    pub blocks: u64,
    /// Logical block size in bytes: 512 or 4096.
    pub lba_size: u32,
}

/// How a namespace presents itself beyond its block size: metadata,
/// end-to-end protection and its I/O command set, as Identify reports them.
/// Only reported: the simulator moves data as for a plain namespace, so
/// this is for testing what a driver refuses before it sends any I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamespaceFormat {
    /// Metadata bytes per block of the format in use (0 = none).
    pub ms: u16,
    /// Metadata at the end of each block (FLBAS bit 4), else separate.
    pub extended: bool,
    /// Protection information type in use (DPS bits 2:0): 0 none, 1..3.
    pub pi: u8,
    /// Command Set Identifier (Identify CNS 03h): 0 NVM, 2 zoned.
    pub csi: u8,
}

/// A callback receiving controller-side events (for `nvme-bypass trace`).
pub type EventHook = Arc<dyn Fn(&SimEvent) + Send + Sync>;

/// Configuration of a simulated controller.
#[derive(Clone)]
pub struct SimConfig {
    /// Namespaces, NSID 1.. in order. NN reports `namespaces.len() + inactive_namespaces`.
    pub namespaces: Vec<NamespaceConfig>,
    /// Extra namespace IDs that exist but are inactive (Identify returns zeroes).
    pub inactive_namespaces: u32,
    /// Formats of the namespaces, by index as in `namespaces`; a namespace
    /// without an entry is plain NVM without metadata.
    pub namespace_formats: Vec<NamespaceFormat>,
    /// Data handling.
    pub data: DataMode,
    /// MDTS: max transfer `4 KiB << mdts` (0 = unlimited).
    pub mdts: u8,
    /// Largest queue, in entries (CAP.MQES + 1), at most 65536 (MQES =
    /// FFFFh). 1 (MQES = 0) is below the specification's minimum of 2 and
    /// exists to show what a host does with a controller that reports it.
    pub max_queue_entries: u32,
    /// I/O queue pairs the controller can grant.
    pub max_io_queues: u16,
    /// CAP.DSTRD: doorbell stride `4 << dstrd`.
    pub dstrd: u8,
    /// CAP.TO in 500 ms units.
    pub timeout_500ms: u8,
    /// Time from CC.EN=1 to CSTS.RDY=1. Clearing CC.EN again before
    /// CSTS.RDY is 1 has undefined results (NVMe 1.4c §3.1.5, CC.EN); this
    /// controller then reports fatal status (CSTS.CFS) and stays failed
    /// until a reset.
    pub ready_delay: Duration,
    /// NVMe 2.0 ready timeouts (CAP.CRMS, CRTO register at 68h), in 500 ms
    /// units: (CRWMT, CRIMT). `None`: a 1.4 controller (CRMS = 0, CRTO reads 0).
    pub ready_timeouts_500ms: Option<(u16, u16)>,
    /// RTD3 Entry Latency reported in Identify Controller, microseconds
    /// (the time a normal shutdown may take; 0 = not reported).
    pub rtd3e_us: u32,
    /// Time from CC.SHN = 01b to CSTS.SHST = 10b (SHST reads 01b,
    /// "occurring", meanwhile); `Duration::MAX`: the shutdown never completes.
    pub shutdown_time: Duration,
    /// Set Features Number of Queues grants every queue the controller has,
    /// whatever was asked, as QEMU's emulated controller does (the
    /// specification lets a controller allocate more than requested).
    pub grants_every_queue: bool,
    /// Serial number (Identify SN).
    pub serial: String,
    /// Model number (Identify MN).
    pub model: String,
    /// Firmware revision (Identify FR).
    pub firmware: String,
    /// Advertise and implement Doorbell Buffer Config (OACS bit 8).
    pub shadow_doorbells: bool,
    /// Count register writes (an atomic increment per write).
    pub count_register_writes: bool,
    /// Pin the controller thread to this CPU.
    pub cpu: Option<usize>,
    /// Busy-poll iterations with no work before the thread starts yielding.
    pub idle_spins: u32,
    /// Longest park when idle (a register write wakes it sooner).
    pub max_park: Duration,
    /// Controller-side event callback.
    pub events: Option<EventHook>,
    /// Run the controller on its own thread (true), or synchronously inside
    /// the host's register accesses (false): deterministic, single threaded,
    /// for traces and instruction counting. See [`SimController::step`].
    pub threaded: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            namespaces: vec![NamespaceConfig { blocks: 1 << 17, lba_size: 512 }],
            inactive_namespaces: 0,
            namespace_formats: vec![],
            data: DataMode::Ram,
            mdts: 7,
            max_queue_entries: 2048,
            max_io_queues: 64,
            dstrd: 0,
            timeout_500ms: 4,
            ready_delay: Duration::ZERO,
            ready_timeouts_500ms: None,
            rtd3e_us: 0,
            shutdown_time: Duration::ZERO,
            grants_every_queue: false,
            serial: "NVBSIM0001".into(),
            model: "nvme-bypass simulated controller".into(),
            firmware: "1.0".into(),
            shadow_doorbells: true,
            count_register_writes: false,
            cpu: None,
            idle_spins: 20_000,
            max_park: Duration::from_millis(2),
            events: None,
            threaded: true,
        }
    }
}

impl SimConfig {
    /// One namespace of `bytes` bytes with `lba_size`-byte blocks.
    pub fn with_namespace(mut self, bytes: u64, lba_size: u32) -> Self {
        self.namespaces = vec![NamespaceConfig { blocks: bytes / lba_size as u64, lba_size }];
        self
    }
}

/// Why a simulated controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Bad configuration.
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    /// Namespace memory could not be had.
    #[error("could not allocate {0} bytes for the simulated namespaces; use a smaller --size or the null data mode")]
    Memory(u64),
}

/// A running simulated controller. Dropping it stops the thread.
pub struct SimController {
    regs: Arc<SimRegisters>,
    mem: Arc<SimMemory>,
    stats: Arc<SimStats>,
    faults: Arc<Faults>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    config: SimConfig,
}

impl SimController {
    /// Start a controller with `config`.
    pub fn start(config: SimConfig) -> Result<Self, SimError> {
        if config.namespaces.iter().any(|n| n.lba_size != 512 && n.lba_size != 4096) {
            return Err(SimError::Config("LBA size must be 512 or 4096".into()));
        }
        if config.namespaces.iter().all(|n| n.blocks == 0) {
            return Err(SimError::Config("at least one namespace needs blocks (0 blocks is an inactive NSID)".into()));
        }
        if !(1..=65536).contains(&config.max_queue_entries) {
            return Err(SimError::Config("max_queue_entries must be 1..=65536".into()));
        }
        if config.max_io_queues == 0 || config.max_io_queues > 1024 {
            return Err(SimError::Config("max_io_queues must be 1..=1024".into()));
        }
        if config.dstrd > 8 {
            return Err(SimError::Config("dstrd must be at most 8".into()));
        }
        let db_len = nvme_spec::regs::cq_head_doorbell(config.max_io_queues, config.dstrd) + 4;
        let regs = Arc::new(SimRegisters::new(db_len.next_multiple_of(4096), config.count_register_writes));
        let mem = SimMemory::new();
        let stats = Arc::new(SimStats::default());
        let faults = Arc::new(Faults::default());
        let stop = Arc::new(AtomicBool::new(false));
        let dev = device::Device::new(config.clone(), regs.clone(), mem.clone(), stats.clone(), faults.clone())?;
        let thread = if config.threaded {
            let stop2 = stop.clone();
            let regs2 = regs.clone();
            let cpu = config.cpu;
            let t = std::thread::Builder::new()
                .name("nvme-sim".into())
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        let _ = nvme_hal::pin_current_thread(cpu);
                    }
                    let _ = regs2.thread.set(std::thread::current());
                    dev.run(&stop2)
                })
                .expect("spawn simulator thread");
            while regs.thread.get().is_none() {
                std::thread::yield_now();
            }
            Some(t)
        } else {
            *regs.inline.lock().unwrap() = Some(Arc::new(std::sync::Mutex::new(dev)));
            regs.auto_step.store(true, Ordering::Relaxed);
            None
        };
        Ok(SimController { regs, mem, stats, faults, stop, thread, config })
    }

    /// The register window (what BAR0 is on hardware).
    pub fn registers(&self) -> Arc<SimRegisters> {
        self.regs.clone()
    }
    /// The DMA address space.
    pub fn memory(&self) -> Arc<SimMemory> {
        self.mem.clone()
    }
    /// A DMA allocator for the driver.
    pub fn allocator(&self) -> Arc<dyn nvme_hal::DmaAllocator> {
        Arc::new(SimAllocator(self.mem.clone()))
    }
    /// Controller-side counters.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }
    /// Fault injection switches.
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }
    /// The configuration it runs with.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Synchronous mode: run the controller one step now (fetch and execute
    /// everything the submission queues hold). Returns the work done.
    pub fn step(&self) -> usize {
        self.regs.step()
    }

    /// Synchronous mode: whether every register access also steps the
    /// controller (on by default). Turn it off to step explicitly, e.g. to
    /// count only the host's instructions.
    pub fn set_auto_step(&self, on: bool) {
        if !self.config.threaded {
            self.regs.auto_step.store(on, Ordering::Relaxed);
        }
    }
}

impl Drop for SimController {
    fn drop(&mut self) {
        // Break the registers <-> controller cycle of synchronous mode.
        self.regs.auto_step.store(false, Ordering::Relaxed);
        self.regs.inline.lock().unwrap().take();
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
