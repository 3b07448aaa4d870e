//! The backend trait: one interface for the four ways this tool drives a
//! namespace (simulated controller, userspace VFIO driver, io_uring NVMe
//! passthrough, kernel block layer).
//!
//! A [`Target`] is one opened namespace (a controller brought up, a device
//! file opened). Each benchmark thread asks it for its own [`IoQueue`]: a
//! queue pair (sim, vfio) or an io_uring ring / aio context (passthru,
//! block) plus `depth` registered buffers of `buf_size` bytes. Threads share
//! nothing on the hot path.
//!
//! The queue is batch-shaped like the hardware under it: [`IoQueue::submit`]
//! takes a slice of I/Os and makes them visible to the device with one
//! doorbell / one system call; [`IoQueue::poll`] reaps up to `out.len()`
//! completions. Data moves only through the registered buffers, addressed
//! by index, and is copied in and out with [`IoQueue::buf_write`] /
//! [`IoQueue::buf_read`] (the buffers are device-visible memory: no Rust
//! references into them).

pub mod kernel;
pub mod multi;
pub mod namespace;
pub mod path;
pub mod userspace;

use nvme_spec::Status;
use std::time::Duration;

/// What an I/O does. The values are the NVMe opcodes (NVM command set), so
/// our driver's backends turn an `Op` into an opcode at no cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum Op {
    /// Read `blocks` blocks at `lba` into buffer `buf`.
    Read = nvme_spec::NvmOpcode::Read as u8,
    /// Write `blocks` blocks at `lba` from buffer `buf`.
    Write = nvme_spec::NvmOpcode::Write as u8,
    /// Flush the volatile write cache.
    Flush = nvme_spec::NvmOpcode::Flush as u8,
}

/// One I/O request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Io {
    /// Operation.
    pub op: Op,
    /// First logical block.
    pub lba: u64,
    /// Number of logical blocks (>= 1 for reads and writes).
    pub blocks: u32,
    /// Index of the registered buffer holding the data (< depth).
    pub buf: u32,
    /// Caller's tag, returned with the completion.
    pub tag: u64,
}

/// fio's scramble of a write buffer (`scramble_buffers`, on by default;
/// io_u.c `small_content_scramble`), done just before the write goes out:
/// in every 512-byte sector of the buffer, the sector's byte offset (the
/// write's, plus 512 per sector before it) at the start of one of the
/// sector's first eight 64-byte lines, the same line in every sector,
/// picked by the time and the offset, and the issue time (seconds, then
/// nanoseconds) at bytes 48..64. Three stores a sector, not a refill, and
/// every block written differs from every other one (offset) and from an
/// earlier write of its own (time): deduplicating storage keeps each, as
/// it keeps fio's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scramble {
    /// Byte offset of the write.
    pub offset: u64,
    pub sec: u64,
    pub nsec: u64,
}

impl Scramble {
    /// Sector size the content is scrambled in (fio's smallest block).
    pub const SECTOR: usize = 512;

    /// The scramble of a write at byte `offset` issued at `time_ns`.
    #[inline]
    pub fn new(offset: u64, time_ns: u64) -> Self {
        Scramble { offset, sec: time_ns / 1_000_000_000, nsec: time_ns % 1_000_000_000 }
    }

    /// Where in each sector the offset goes: the start of 64-byte line
    /// 0 to 7, from the time and the offset, as fio picks it.
    #[inline]
    fn line(&self) -> usize {
        (((self.nsec ^ self.offset) & 7) << 6) as usize
    }

    /// Its stores into a buffer of `len` bytes: `store(byte position,
    /// word)`, each word 8-byte aligned, in native byte order (as fio
    /// stores them).
    pub fn apply(&self, len: usize, mut store: impl FnMut(usize, u64)) {
        let line = self.line();
        let mut offset = self.offset;
        for at in (0..len / Self::SECTOR).map(|i| i * Self::SECTOR) {
            store(at + line, offset);
            store(at + 48, self.sec);
            store(at + 56, self.nsec);
            offset = offset.wrapping_add(Self::SECTOR as u64);
        }
    }

    /// Into `mem` from byte `base` (8-byte aligned), `len` bytes: the
    /// same stores as [`apply`](Self::apply), bounds checked once.
    #[inline]
    pub fn to_region(&self, mem: &nvme_hal::DmaRegion, base: usize, len: usize) {
        let s = Self::SECTOR;
        let (offset, sec, nsec) = (self.offset, self.sec, self.nsec);
        mem.write64_blocks(base, s, len / s, [self.line(), 48, 56], move |k| [offset.wrapping_add((k * s) as u64), sec, nsec]);
    }

    /// Into `buf`.
    pub fn to_slice(&self, buf: &mut [u8]) {
        self.apply(buf.len(), |at, v| buf[at..at + 8].copy_from_slice(&v.to_ne_bytes()));
    }
}

/// How an I/O ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoStatus {
    /// Success.
    Ok,
    /// The controller returned an NVMe error status (sim, vfio, passthru).
    Nvme(Status),
    /// The kernel returned an error number (block path), negative errno.
    Errno(i32),
    /// The path transferred fewer bytes than asked.
    Short { done: u32 },
}

impl IoStatus {
    /// True for success.
    #[inline]
    pub fn is_ok(&self) -> bool {
        matches!(self, IoStatus::Ok)
    }
}

impl std::fmt::Display for IoStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoStatus::Ok => write!(f, "ok"),
            IoStatus::Nvme(s) => write!(f, "NVMe status {s}"),
            IoStatus::Errno(e) => write!(f, "{} (errno {})", std::io::Error::from_raw_os_error(-e), -e),
            IoStatus::Short { done } => write!(f, "short transfer ({done} bytes)"),
        }
    }
}

/// A completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoDone {
    /// The tag of the request.
    pub tag: u64,
    /// Its outcome.
    pub status: IoStatus,
}

impl Default for IoDone {
    fn default() -> Self {
        IoDone { tag: 0, status: IoStatus::Ok }
    }
}

/// Namespace geometry as the path reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    /// Namespace id.
    pub nsid: u32,
    /// Logical block size in bytes.
    pub lba_size: u32,
    /// Capacity in logical blocks.
    pub blocks: u64,
    /// Largest single transfer in bytes the path accepts.
    pub max_transfer: usize,
}

impl Geometry {
    /// Capacity in bytes.
    pub fn bytes(&self) -> u64 {
        self.blocks * self.lba_size as u64
    }
}

/// What a queue counted, for the report. Fields a path does not have stay 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueCounters {
    /// Submission doorbell writes (MMIO on hardware; vfio, sim).
    pub sq_doorbells: u64,
    /// Completion doorbell writes.
    pub cq_doorbells: u64,
    /// Doorbell writes that went to MMIO (without shadow doorbells, all of them).
    pub mmio_writes: u64,
    /// System calls made (io_uring_enter, io_submit, io_getevents, pread...).
    pub syscalls: u64,
    /// Completions rejected as protocol errors (unknown CID, wrong SQ id).
    pub rejected_completions: u64,
}

/// Errors of a backend, each with what to do next.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The driver failed.
    #[error(transparent)]
    Driver(#[from] nvme_driver::Error),
    /// The simulator could not start.
    #[error(transparent)]
    Sim(#[from] nvme_sim::SimError),
    /// DMA memory could not be had.
    #[error(transparent)]
    Dma(#[from] nvme_hal::DmaError),
    /// An I/O could not be submitted.
    #[error("submit failed: {0}")]
    Submit(#[from] nvme_driver::SubmitError),
    /// A system call failed.
    #[error("{what}: {source}{hint}")]
    Os {
        what: String,
        hint: String,
        #[source]
        source: std::io::Error,
    },
    /// The controller could not be opened through VFIO.
    #[error("could not open {bdf} through VFIO: {source}")]
    Vfio {
        bdf: String,
        #[source]
        source: nvme_vfio::VfioError,
    },
    /// A PCI address that does not parse.
    #[error(transparent)]
    Bdf(#[from] nvme_vfio::BdfError),
    /// An admin command sent through the kernel's passthrough ioctl failed.
    #[error("{what} failed on {device}: {source}")]
    Admin {
        what: String,
        device: String,
        #[source]
        source: kernel::nvme_ioctl::PassthruError,
    },
    /// Identify failed and sysfs has no geometry either: the namespace's
    /// size and block size are unknown.
    #[error("cannot learn the geometry of namespace {nsid}: Identify failed ({source}) and {} is unreadable", .sysfs.display())]
    NoGeometry {
        nsid: u32,
        sysfs: std::path::PathBuf,
        #[source]
        source: kernel::nvme_ioctl::PassthruError,
    },
    /// The running kernel or device lacks a feature the options need.
    #[error("{0}")]
    Unsupported(String),
    /// The options do not fit the device.
    #[error("{0}")]
    Invalid(String),
    /// The device failed during the run and could not be recovered; the
    /// run's figures are not valid (exit status 1, not 2: I/O was done).
    #[error("{0}")]
    Failed(String),
    /// The device failed during the run (`source`) and recovery gave up;
    /// as [`BackendError::Failed`].
    #[error("{what}: {source}. Check the device's health (`dmesg`, its SMART log), or give a longer --io-timeout if it is merely slow")]
    Unrecovered {
        what: String,
        #[source]
        source: Box<BackendError>,
    },
    /// A queue could not be set up (`source`), and giving it back to the
    /// controller failed too (`delete`): the controller may still use it.
    #[error("{source}; and then {delete}")]
    QueueSetup {
        #[source]
        source: Box<BackendError>,
        delete: nvme_driver::Error,
    },
}

impl BackendError {
    /// The device failed: I/O was done and the run's figures are not valid
    /// (exit status 1), as opposed to options or an environment that did
    /// not fit (exit status 2).
    pub fn device_failed(&self) -> bool {
        matches!(self, BackendError::Failed(_) | BackendError::Unrecovered { .. } | BackendError::QueueSetup { .. })
    }

    /// The device failed during the run (`what`, because of `source`) and
    /// recovery gave up.
    pub fn unrecovered(what: impl Into<String>, source: BackendError) -> Self {
        BackendError::Unrecovered { what: what.into(), source: Box::new(source) }
    }

    /// An OS error with context and a hint.
    pub fn os(what: impl Into<String>, hint: impl Into<String>, source: std::io::Error) -> Self {
        let hint = hint.into();
        BackendError::Os { what: what.into(), hint: if hint.is_empty() { hint } else { format!("; {hint}") }, source }
    }
}

/// What a path did about overdue I/Os or a controller in trouble: the
/// slow path of the engine's watchdog (`engine::watchdog::Watchdog`), which calls
/// [`IoQueue::check_health`], [`IoQueue::abort`] and [`IoQueue::reset`].
#[derive(Debug, Default)]
pub struct Recovery {
    /// Abort commands sent.
    pub aborts_sent: u64,
    /// Of those, the commands the controller says it aborted (their
    /// completions, "Command Abort Requested", follow on the queue).
    pub aborted: u64,
    /// The admin queue did not answer an Abort: reset now.
    pub escalate: bool,
    /// This queue reset the controller.
    pub reset: bool,
    /// This queue was re-created (after a reset, or because it was stuck).
    pub recreated: bool,
    /// Tags of the I/Os that will never complete: resubmit or fail them.
    pub abandoned: Vec<u64>,
    /// What happened, in a sentence, for the log.
    pub note: String,
}

/// Parameters of one thread's queue.
#[derive(Clone, Copy, Debug)]
pub struct QueueParams {
    /// Most I/Os in flight.
    pub depth: usize,
    /// Size of each registered buffer in bytes.
    pub buf_size: usize,
    /// Submission batch: I/Os per doorbell / system call (0 = as many as given).
    pub batch: usize,
}

/// One opened namespace.
pub trait Target: Send + Sync {
    /// Path name as printed in reports: "sim", "vfio", "passthru", "block/io_uring"...
    fn name(&self) -> String;
    /// Geometry of the namespace.
    fn geometry(&self) -> Geometry;
    /// True when completions are found by busy polling (the thread spins
    /// whether or not a completion is ready), so empty polls are meaningful.
    fn polled(&self) -> bool;
    /// A new queue for the calling thread.
    fn open_queue(&self, params: QueueParams) -> Result<Box<dyn IoQueue>, BackendError>;
    /// Facts about the path worth printing (e.g. "shadow doorbells: on").
    fn describe(&self) -> Vec<(String, String)> {
        vec![]
    }
    /// A thread starts another pass over its region (it has issued as many
    /// I/Os as the region has units since the last): a buffered file drops
    /// its page cache, as fio does at each pass with `invalidate=1`, so the
    /// pass measures the device, not memory. Nothing on other paths, which
    /// say so in [`wants_passes`](Self::wants_passes): the engine then does
    /// not count passes at all.
    fn new_pass(&self) {}
    /// Whether [`new_pass`](Self::new_pass) does anything.
    fn wants_passes(&self) -> bool {
        false
    }
    /// Why the namespace takes no writes, when it says so before any I/O
    /// (a write-protected NVMe namespace); a job that writes is refused.
    fn write_protected(&self) -> Option<String> {
        None
    }
}

/// One thread's queue: submission, completion, registered buffers.
pub trait IoQueue: Send {
    /// Most I/Os in flight.
    fn depth(&self) -> usize;
    /// Make a batch of I/Os visible to the device (one doorbell or system
    /// call; an io_uring ring leaves its last system call to the next
    /// `poll` or `wait`, which makes one enter do both). Returns how many
    /// were accepted; the rest did not fit.
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError>;
    /// Reap up to `out.len()` completions without blocking. Returns how many
    /// were written to `out`.
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError>;
    /// Are `n` completions waiting? A path whose completion queue is in
    /// our memory answers without taking anything (one load); None: this
    /// path cannot tell without asking the kernel (which then polls or
    /// waits in `wait`).
    fn ready(&self, n: usize) -> Option<bool> {
        let _ = n;
        None
    }
    /// A hint that `poll` comes soon (after this pass's submissions): a path
    /// whose completions arrive in shared memory starts loading them.
    fn prefetch_completions(&self) {}
    /// Hand the device now what `submit` left for the next `poll` or
    /// `wait` (an io_uring ring's last system call), so that the time
    /// after this is fio's issue time. Most paths leave nothing.
    fn submit_now(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
    /// `submit` does the I/O itself (psync): no submission latency apart
    /// from its completion, as fio's synchronous engines record none.
    fn synchronous(&self) -> bool {
        false
    }
    /// Reap at least `min` completions, blocking if the path can (interrupt
    /// driven paths wait in the kernel; polled paths spin).
    fn wait(&mut self, out: &mut [IoDone], min: usize) -> Result<usize, BackendError> {
        let mut n = 0;
        while n < min {
            n += self.poll(&mut out[n..])?;
        }
        Ok(n)
    }
    /// Copy `data` into registered buffer `buf` at byte offset `off`.
    fn buf_write(&mut self, buf: u32, off: usize, data: &[u8]);
    /// Copy from registered buffer `buf` at `off` into `out`.
    fn buf_read(&self, buf: u32, off: usize, out: &mut [u8]);
    /// fio's scramble of the first `len` bytes of registered buffer `buf`
    /// for its next write ([`Scramble`]). By default a copy per word
    /// through [`buf_write`](Self::buf_write); paths whose buffers are one
    /// [`DmaRegion`](nvme_hal::DmaRegion) store the words directly.
    fn buf_scramble(&mut self, buf: u32, len: usize, s: Scramble) {
        s.apply(len, |at, v| self.buf_write(buf, at, &v.to_ne_bytes()));
    }
    /// Counters so far.
    fn counters(&self) -> QueueCounters;
    /// How long to wait before retrying a command whose completion's
    /// Command Retry Delay is 1, 2 or 3 (NVMe ACRE, our driver's paths);
    /// zero where the path reports none (the kernel retries its own).
    fn retry_delays(&self) -> [std::time::Duration; 3] {
        [std::time::Duration::ZERO; 3]
    }
    /// Give the queue back (delete the queue pair, close the ring), saying
    /// what went wrong; dropping it does the same but can only warn.
    fn close(self: Box<Self>) -> Result<(), BackendError> {
        Ok(())
    }
    /// I/Os in flight now.
    fn in_flight(&self) -> usize;
    /// Which hardware or kernel queue this is, for per-thread reports
    /// (e.g. "I/O queue pair qid 2", "io_uring ring fd 7").
    fn describe(&self) -> String {
        String::new()
    }

    /// Slow path, called when I/Os are overdue: whether the controller has
    /// paused processing (a firmware activation, CSTS.PP) and for how long
    /// it may ([`nvme_driver::Controller::processing_paused`]): overdue
    /// I/Os then wait that long before they are aborted. Kernel paths:
    /// their driver watches this itself.
    fn processing_paused(&self) -> Option<Duration> {
        None
    }
    /// Slow path, called every few milliseconds: look at the controller.
    /// A path that owns its controller handles fatal status (reset, then
    /// re-create this queue) and a reset done by another thread's queue
    /// (re-create this one); `Some` says what it did. Admin commands wait
    /// at most `timeout`. Kernel paths have nothing to check.
    fn check_health(&mut self, _timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        Ok(None)
    }
    /// Ask the controller to abort the I/Os with these tags (overdue past
    /// the I/O timeout). `None`: this path does not handle timeouts itself
    /// (the kernel's nvme driver times out, aborts and resets its own
    /// commands, nvme_core.io_timeout), so the caller keeps waiting.
    fn abort(&mut self, _tags: &[u64], _timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        Ok(None)
    }
    /// Reset the controller and re-create this queue: every I/O in flight
    /// comes back in [`Recovery::abandoned`]. `stuck` are the tags of the
    /// overdue I/Os the reset is for (Abort did not bring them back): a
    /// queue over several controllers resets those that hold one ([`holds_any`](Self::holds_any)).
    /// `None` as for [`abort`](Self::abort).
    fn reset(&mut self, _stuck: &[u64], _timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        Ok(None)
    }
    /// Slow path: whether any I/O with one of these tags is still with the
    /// controller (submitted, its completion not yet taken). `true` when
    /// the path cannot tell.
    fn holds_any(&self, _tags: &[u64]) -> bool {
        true
    }
}
