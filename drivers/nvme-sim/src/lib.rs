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

mod config;
mod device;
mod event;
mod hot;
mod memory;
mod regs;

pub use config::{DataMode, EventHook, NamespaceConfig, NamespaceFormat, SimConfig, SimError};
pub use device::{Faults, SimStats};
pub use event::SimEvent;
pub use memory::{IovaMap, SimAllocator, SimMemory};
pub use hot::{check_no_shared_block, HotMemory};
pub use regs::SimRegisters;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

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
    /// The memory a step of this controller writes when it runs
    /// synchronously, on the thread that rings its doorbells: its register
    /// window, its doorbells, the controller's own state and counters. Two
    /// controllers stepped by two threads (`bench --sim-sync --numjobs 2`)
    /// scale only if these share no cache line; each is aligned to 128
    /// bytes for that, which [`HotMemory::owns_its_lines`] checks.
    pub fn hot_memory(&self) -> Vec<HotMemory> {
        let doorbells = nvme_spec::regs::offset::DOORBELL_BASE..nvme_spec::regs::cq_head_doorbell(self.config.max_io_queues, self.config.dstrd) + 4;
        let mut v = self.regs.hot_memory(doorbells);
        v.push(HotMemory::of("controller counters", &*self.stats));
        v
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two synchronous controllers made one after the other on one thread
    /// (as `bench --sim-sync --numjobs 2` makes them) and stepped by two:
    /// what a step writes owns its 128-byte blocks, so the two share no
    /// cache line, wherever the allocator put them.
    /// A RAM namespace the machine cannot commit is an error to report,
    /// never an aborted process: 63 GiB (under the 64 GiB cap) is either
    /// had, lazily, or refused with `SimError::Memory`; 65 GiB is refused.
    #[test]
    fn a_namespace_too_large_for_the_machine_is_an_error() {
        for (gib, may_start) in [(63u64, true), (65, false)] {
            let ns = NamespaceConfig { blocks: (gib << 30) / 4096, lba_size: 4096 };
            let cfg = SimConfig { namespaces: vec![ns], threaded: false, ..SimConfig::default() };
            match SimController::start(cfg) {
                Ok(_) => assert!(may_start, "{gib} GiB is above the cap"),
                Err(SimError::Memory(b)) => assert_eq!(b, gib << 30),
                Err(e) => panic!("{gib} GiB: {e}"),
            }
        }
    }

    #[test]
    fn synchronous_controllers_share_no_line_a_step_writes() {
        let cfg = SimConfig { threaded: false, data: DataMode::Null, max_io_queues: 1, ..SimConfig::default() };
        let (a, b) = (SimController::start(cfg.clone()).unwrap(), SimController::start(cfg).unwrap());
        let (ha, hb) = (a.hot_memory(), b.hot_memory());
        assert_eq!(ha.len(), 6, "{ha:#?}");
        if let Err(e) = check_no_shared_block(&ha, &hb) {
            panic!("{e}");
        }
    }
}
