//! The simulated controller's register window. The driver sees an ordinary
//! [`RegisterWindow`]; writes to read-only registers are dropped as hardware
//! drops them, and a write while the controller thread is parked wakes it.

use nvme_hal::{MemRegisters, RegisterWindow};
use nvme_spec::regs::offset;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

/// A controller run synchronously, inside the register accesses of the
/// host. The register window names the controller only through this, so
/// the controller builds on the window and not the other way round.
pub(crate) trait InlineController: Send {
    /// One pass of the controller; returns the work done.
    fn step(&mut self) -> usize;
    /// The memory of its own a step writes, besides itself (see
    /// [`crate::SimController::hot_memory`]).
    fn hot_memory(&self) -> Vec<crate::hot::HotMemory>;
}

/// Register window of a simulated controller.
///
/// Aligned to 128 bytes (two cache lines, as `nvme_driver::QueuePair`): in
/// synchronous mode every doorbell write takes the `inline` lock (and may
/// count the write) on the writing thread. One controller per benchmark
/// job, all created one after another on one thread: without the alignment
/// two jobs' windows could share a line.
#[repr(align(128))]
pub struct SimRegisters {
    mem: MemRegisters,
    /// Set by the controller thread before it parks.
    pub(crate) sleeping: AtomicBool,
    pub(crate) thread: OnceLock<Thread>,
    /// Register writes the driver made (doorbells included): a stand-in for
    /// MMIO writes, which are what cost on real and virtual hardware.
    pub(crate) writes: AtomicU64,
    count_writes: bool,
    /// Synchronous mode: the controller runs inside register accesses
    /// (no thread), one step per access while `auto_step` is set.
    pub(crate) inline: Mutex<Option<Arc<Mutex<dyn InlineController>>>>,
    pub(crate) auto_step: AtomicBool,
}

impl SimRegisters {
    pub(crate) fn new(len: usize, count_writes: bool) -> Self {
        SimRegisters {
            mem: MemRegisters::new(len),
            sleeping: AtomicBool::new(false),
            thread: OnceLock::new(),
            writes: AtomicU64::new(0),
            count_writes,
            inline: Mutex::new(None),
            auto_step: AtomicBool::new(false),
        }
    }
    /// Controller-side access to a register (no filtering, no wake-up).
    #[inline]
    pub(crate) fn dev_load(&self, off: usize) -> u32 {
        self.mem.word(off).load(Ordering::Acquire)
    }
    #[inline]
    pub(crate) fn dev_store(&self, off: usize, v: u32) {
        self.mem.word(off).store(v, Ordering::Release)
    }
    pub(crate) fn dev_store64(&self, off: usize, v: u64) {
        self.dev_store(off, v as u32);
        self.dev_store(off + 4, (v >> 32) as u32);
    }
    pub(crate) fn dev_load64(&self, off: usize) -> u64 {
        self.dev_load(off) as u64 | (self.dev_load(off + 4) as u64) << 32
    }
    /// What a synchronous step writes, of the window and of the controller
    /// it runs (see [`crate::SimController::hot_memory`]); `doorbells`:
    /// the doorbell registers' offsets.
    pub(crate) fn hot_memory(&self, doorbells: std::ops::Range<usize>) -> Vec<crate::hot::HotMemory> {
        let words = self.mem.word(0) as *const std::sync::atomic::AtomicU32 as usize;
        let mut v = vec![
            crate::hot::HotMemory::of("register window (inline lock, write count)", self),
            crate::hot::HotMemory {
                what: "doorbell registers",
                written: words + doorbells.start..words + doorbells.end,
                within: words..words + self.mem.len(),
            },
        ];
        if let Some(dev) = self.inline.lock().unwrap().clone() {
            // The controller's lock and fields; its Arc's counts (changed at
            // every step) lie before them in the same allocation.
            v.push(crate::hot::HotMemory::of("synchronous controller (lock, fields)", &*dev));
            v.extend(dev.lock().unwrap().hot_memory());
        }
        v
    }
    /// Number of register writes so far (when counting is enabled).
    pub fn write_count(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }
    #[inline]
    fn wake(&self) {
        // The register store before the load of `sleeping` (store-load
        // order needs a full fence): the controller sets `sleeping`, fences,
        // then looks at the doorbells, so one of us sees the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
        self.step_if_inline();
    }

    /// In synchronous mode, let the controller run one step now.
    #[inline]
    fn step_if_inline(&self) {
        if self.auto_step.load(Ordering::Relaxed) {
            self.step();
        }
    }

    /// Run the synchronous controller one step (no-op in threaded mode).
    /// Returns the work done (commands fetched, state changes).
    pub(crate) fn step(&self) -> usize {
        let dev = self.inline.lock().unwrap().clone();
        match dev {
            Some(d) => d.lock().unwrap().step(),
            None => 0,
        }
    }
}

impl RegisterWindow for SimRegisters {
    #[inline]
    fn read32(&self, off: usize) -> u32 {
        // A synchronous controller advances when the host looks at it
        // (e.g. while the host waits for CSTS.RDY).
        self.step_if_inline();
        self.mem.read32(off)
    }
    #[inline]
    fn write32(&self, off: usize, value: u32) {
        if self.count_writes {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        // Writable registers: CC, AQA, ASQ, ACQ, INTMS/INTMC and the
        // doorbells. CAP, VS and CSTS are read only.
        let writable = off >= offset::DOORBELL_BASE
            || matches!(off, offset::CC | offset::AQA | offset::INTMS | offset::INTMC)
            || (offset::ASQ..offset::ACQ + 8).contains(&off);
        if writable && off < self.mem.len() {
            self.mem.write32(off, value);
            self.wake();
        }
    }
    fn len(&self) -> usize {
        self.mem.len()
    }
}
