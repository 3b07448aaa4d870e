//! io_uring rings for the kernel paths: setup with the options fio names
//! (`hipri` = IOPOLL, `sqthread_poll` = SQPOLL), feature probing with errors
//! that say what is missing, and the one place that decides when a system
//! call is needed, so every `io_uring_enter` is counted.
//!
//! When does a ring need `io_uring_enter`?
//!
//! | mode | submit | completions |
//! |---|---|---|
//! | interrupts (default) | one enter per batch, made by the next poll or wait (it also takes completions) | appear in the CQ by themselves (the IRQ's task work runs when the task next crosses into the kernel; the kernel kicks a running task with an IPI): peek, no syscall |
//! | IOPOLL (`--hipri`) | one enter per batch, made by the next poll or wait, with GETEVENTS so it also polls | only an enter with GETEVENTS polls the device: one per empty peek |
//! | SQPOLL (`--sqthread-poll`) | none: the kernel thread picks up the tail; an enter only to wake it when it sleeps | peek, no syscall (with IOPOLL the kernel thread polls) |
//!
//! Generic over the entry sizes: the block path uses 64-byte SQEs and
//! 16-byte CQEs, passthrough 128-byte SQEs (SQE128) and 32-byte CQEs (CQE32).

use super::{check_io, Buffers, Slots};
use crate::backend::{BackendError, Io, IoDone, IoQueue, IoStatus, Op, QueueCounters, Scramble};
use io_uring::{cqueue, squeue, EnterFlags, IoUring};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// How to set a ring up.
#[derive(Clone, Copy, Debug, Default)]
pub struct RingConfig {
    /// SQ entries (rounded up to a power of two by the kernel; the CQ gets twice that).
    pub entries: u32,
    /// IORING_SETUP_IOPOLL: completions are found by polling the device.
    pub iopoll: bool,
    /// IORING_SETUP_SQPOLL: a kernel thread consumes the SQ.
    pub sqpoll: bool,
    /// IORING_SETUP_SQ_AFF: the CPU of that thread.
    pub sqpoll_cpu: Option<u32>,
    /// IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN (6.1+):
    /// completion work runs only when the task asks for events, in batches.
    pub defer_taskrun: bool,
    /// IORING_REGISTER_RING_FDS (5.18+): io_uring_enter by registered
    /// index, skipping the file descriptor lookup.
    pub register_ring: bool,
    /// As fio's io_uring engines (engines/io_uring.c, fio 3.33 on): a CQ
    /// ring of `entries` (IORING_SETUP_CQSIZE), IORING_SETUP_COOP_TASKRUN
    /// and IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, each
    /// dropped in fio's order when the kernel refuses the set (EINVAL:
    /// an older kernel, or DEFER_TASKRUN beside SQPOLL).
    pub fio_ring: bool,
}

impl RingConfig {
    /// The ring a queue of `depth` I/Os needs under the kernel-path options.
    pub fn for_options(o: &super::KernelOptions, depth: usize) -> Self {
        RingConfig {
            entries: depth as u32,
            iopoll: o.hipri,
            sqpoll: o.sqthread_poll,
            sqpoll_cpu: o.sqthread_poll_cpu,
            defer_taskrun: o.defer_taskrun,
            register_ring: o.register_ring,
            fio_ring: o.fio_ring,
        }
    }
}

/// `struct io_uring_rsrc_update` (include/uapi/linux/io_uring.h).
#[repr(C)]
struct libc_io_uring_rsrc_update {
    offset: u32,
    resv: u32,
    data: u64,
}
const _: () = assert!(std::mem::size_of::<libc_io_uring_rsrc_update>() == 16);
/// IORING_REGISTER_RING_FDS.
const IORING_REGISTER_RING_FDS: u32 = 20;
/// IORING_ENTER_REGISTERED_RING.
const IORING_ENTER_REGISTERED_RING: u32 = 1 << 4;

/// Idle time before the SQPOLL thread sleeps (then one enter wakes it).
const SQPOLL_IDLE_MS: u32 = 1000;

/// Largest SQ a ring may have (the kernel's IORING_MAX_ENTRIES).
pub const MAX_ENTRIES: u32 = 32768;

/// Opcode number of IORING_OP_URING_CMD.
pub const OP_URING_CMD: u8 = io_uring::opcode::UringCmd80::CODE;

/// Explain a failed `io_uring_setup`. `what` names the ring ("passthrough
/// ring (SQE128|CQE32)").
fn setup_error(e: io::Error, what: &str, cfg: &RingConfig, big: bool) -> BackendError {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").ok();
    match e.raw_os_error() {
        Some(libc::ENOSYS) => BackendError::Unsupported(format!(
            "io_uring is not available: io_uring_setup returned ENOSYS (kernel built without CONFIG_IO_URING, or a seccomp filter blocks it, as container runtimes often do); run on a kernel with io_uring (5.1+) outside the sandbox{}",
            if big { ", 5.19+ for passthrough" } else { "" }
        )),
        Some(libc::EPERM) => BackendError::Unsupported(format!(
            "io_uring is disabled for this process (io_uring_setup: EPERM; /proc/sys/kernel/io_uring_disabled = {}); as root run `sysctl kernel.io_uring_disabled=0`, or add the user to the group in kernel.io_uring_group",
            disabled.as_deref().map(str::trim).unwrap_or("?")
        )),
        Some(libc::EINVAL) if big => BackendError::Unsupported(format!(
            "this kernel cannot create the {what}: io_uring_setup rejected IORING_SETUP_SQE128|CQE32{} with EINVAL; NVMe passthrough over io_uring needs Linux 5.19 or newer ({}){}",
            flags_desc(cfg),
            kernel_release(),
            cpu_hint(cfg)
        )),
        Some(libc::EINVAL) => BackendError::Unsupported(format!(
            "this kernel cannot create the {what}: io_uring_setup rejected{} with EINVAL ({}){}",
            if flags_desc(cfg).is_empty() { " the ring".to_string() } else { flags_desc(cfg) },
            kernel_release(),
            cpu_hint(cfg)
        )),
        Some(libc::ENOMEM) => BackendError::os(
            format!("io_uring_setup for the {what} ({} entries)", cfg.entries),
            "the ring's memory is charged to RLIMIT_MEMLOCK on kernels before 5.12: raise it (`ulimit -l unlimited`) or use a smaller --iodepth",
            e,
        ),
        _ => BackendError::os(format!("io_uring_setup for the {what} ({} entries)", cfg.entries), "", e),
    }
}

fn flags_desc(cfg: &RingConfig) -> String {
    let mut s = String::new();
    if cfg.iopoll {
        s.push_str(" IORING_SETUP_IOPOLL");
    }
    if cfg.sqpoll {
        s.push_str(" IORING_SETUP_SQPOLL");
    }
    if cfg.sqpoll_cpu.is_some() {
        s.push_str(" IORING_SETUP_SQ_AFF");
    }
    s
}

fn cpu_hint(cfg: &RingConfig) -> String {
    match cfg.sqpoll_cpu {
        Some(c) => format!("; check --sqthread-poll-cpu {c}: it must be an online CPU this process may use"),
        None => String::new(),
    }
}

/// The running kernel's release string, for messages.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("running {}", s.trim()))
        .unwrap_or_else(|_| "kernel release unknown".into())
}

/// One ring and its counters.
pub struct Ring<S: squeue::EntryMarker, C: cqueue::EntryMarker> {
    ring: IoUring<S, C>,
    iopoll: bool,
    sqpoll: bool,
    defer_taskrun: bool,
    /// Index of the registered ring fd, for IORING_ENTER_REGISTERED_RING.
    registered: Option<u32>,
    /// io_uring_enter calls made.
    syscalls: u64,
}

/// The registered file and buffers are given back before the ring closes:
/// closing it frees them only later, in the kernel's deferred teardown of
/// the ring, and until then the device file stays open. A controller moved
/// from nvme right after (compare's and sweep's vfio rows) then keeps its
/// namespace's name taken, and comes back from vfio-pci as nvme1.
impl<S: squeue::EntryMarker, C: cqueue::EntryMarker> Drop for Ring<S, C> {
    fn drop(&mut self) {
        // ENXIO when nothing was registered: nothing to give back.
        let _ = self.ring.submitter().unregister_files();
        let _ = self.ring.submitter().unregister_buffers();
    }
}

impl<S: squeue::EntryMarker, C: cqueue::EntryMarker> Ring<S, C> {
    /// Create a ring. The entry types pick SQE128/CQE32 (the io-uring crate
    /// adds the setup flags for `Entry128`/`Entry32`).
    pub fn new(cfg: RingConfig, what: &str) -> Result<Self, BackendError> {
        let big = std::mem::size_of::<S>() == 128 || std::mem::size_of::<C>() == 32;
        if cfg.entries == 0 || cfg.entries > MAX_ENTRIES {
            return Err(BackendError::Invalid(format!(
                "an io_uring holds 1 to {MAX_ENTRIES} entries; --iodepth {} does not fit: use --iodepth {MAX_ENTRIES} or less",
                cfg.entries
            )));
        }
        if cfg.defer_taskrun && cfg.sqpoll {
            return Err(BackendError::Invalid(
                "--defer-taskrun and --sqthread-poll exclude each other (the SQPOLL thread is a second issuer); pick one".into(),
            ));
        }
        // (CQSIZE, COOP_TASKRUN, DEFER_TASKRUN) to try, in turn while the
        // kernel answers EINVAL: fio's fallbacks, or the one set asked for.
        let tries: &[(bool, bool, bool)] =
            if cfg.fio_ring { &[(true, true, true), (true, true, false), (true, false, false), (false, false, false)] } else { &[(false, false, cfg.defer_taskrun)] };
        let mut got = None;
        for (i, &(cqsize, coop, defer)) in tries.iter().enumerate() {
            let mut b = IoUring::<S, C>::builder();
            if cfg.iopoll {
                b.setup_iopoll();
            }
            if cfg.sqpoll {
                b.setup_sqpoll(SQPOLL_IDLE_MS);
                if let Some(cpu) = cfg.sqpoll_cpu {
                    b.setup_sqpoll_cpu(cpu);
                }
            }
            if cqsize {
                b.setup_cqsize(cfg.entries);
            }
            if coop {
                b.setup_coop_taskrun();
            }
            if defer {
                b.setup_single_issuer();
                b.setup_defer_taskrun();
            }
            match b.build(cfg.entries) {
                Ok(ring) => {
                    got = Some((ring, defer));
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && i + 1 < tries.len() => continue,
                Err(e) if defer && !cfg.fio_ring && e.raw_os_error() == Some(libc::EINVAL) => {
                    return Err(BackendError::Unsupported(format!(
                        "this kernel's io_uring refused IORING_SETUP_DEFER_TASKRUN (needs Linux 6.1 or newer; {}); drop --defer-taskrun",
                        kernel_release()
                    )))
                }
                Err(e) => return Err(setup_error(e, what, &cfg, big)),
            }
        }
        let (ring, defer_taskrun) = got.expect("the last try returns");
        let mut r = Ring { ring, iopoll: cfg.iopoll, sqpoll: cfg.sqpoll, defer_taskrun, registered: None, syscalls: 0 };
        if cfg.register_ring {
            r.registered = Some(r.register_ring_fd()?);
        }
        Ok(r)
    }

    /// The ring's file descriptor.
    pub fn fd(&self) -> i32 {
        self.ring.as_raw_fd()
    }

    /// IORING_REGISTER_RING_FDS: returns the registered index.
    fn register_ring_fd(&self) -> Result<u32, BackendError> {
        let mut up = libc_io_uring_rsrc_update { offset: u32::MAX, resv: 0, data: self.ring.as_raw_fd() as u64 };
        // SAFETY: IORING_REGISTER_RING_FDS reads and writes one
        // io_uring_rsrc_update (our #[repr(C)] mirror, size-checked below)
        // through the pointer; nr_args = 1.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                self.ring.as_raw_fd(),
                IORING_REGISTER_RING_FDS,
                &mut up as *mut libc_io_uring_rsrc_update,
                1u32,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(BackendError::os(
                "this kernel cannot register the ring fd (IORING_REGISTER_RING_FDS)",
                format!("it needs Linux 5.18 or newer ({}); drop --register-ring", kernel_release()),
                e,
            ));
        }
        Ok(up.offset)
    }

    /// Which opcodes the kernel supports (IORING_REGISTER_PROBE, 5.6+).
    pub fn probe(&self) -> Result<io_uring::Probe, BackendError> {
        let mut p = io_uring::Probe::new();
        self.ring.submitter().register_probe(&mut p).map_err(|e| {
            BackendError::os(
                "io_uring cannot report its supported operations (IORING_REGISTER_PROBE)",
                format!("this tool needs Linux 5.6 or newer ({})", kernel_release()),
                e,
            )
        })?;
        Ok(p)
    }

    /// Fail with a clear message unless every opcode in `ops` (number, name) is supported.
    pub fn require_ops(&self, ops: &[(u8, &str)], need: &str) -> Result<(), BackendError> {
        let p = self.probe()?;
        let missing: Vec<&str> = ops.iter().filter(|(op, _)| !p.is_supported(*op)).map(|(_, n)| *n).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(BackendError::Unsupported(format!("this kernel's io_uring lacks {} ({}); {need}", missing.join(", "), kernel_release())))
        }
    }

    /// Register `bufs` as fixed buffers (indices 0..bufs.len()).
    ///
    /// # Safety
    /// The memory described must stay mapped until the ring is dropped.
    pub unsafe fn register_buffers(&self, bufs: &[libc::iovec]) -> Result<(), BackendError> {
        // SAFETY: the caller keeps the memory mapped for the ring's lifetime.
        unsafe { self.ring.submitter().register_buffers(bufs) }.map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::ENOMEM) => "registered buffers are pinned and charged to RLIMIT_MEMLOCK: raise it (`ulimit -l unlimited`), run as root, or drop --fixedbufs".to_string(),
                Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => format!("this kernel refuses these buffers ({}); drop --fixedbufs", kernel_release()),
                _ => "drop --fixedbufs".to_string(),
            };
            BackendError::os(format!("registering {} buffers with io_uring (--fixedbufs)", bufs.len()), hint, e)
        })
    }

    /// Register `fd` as fixed file 0.
    pub fn register_file(&self, fd: std::os::fd::RawFd) -> Result<(), BackendError> {
        self.ring
            .submitter()
            .register_files(&[fd])
            .map_err(|e| BackendError::os("registering the device file with io_uring (--registerfiles)", "drop --registerfiles", e))
    }

    /// io_uring_enter calls so far.
    #[inline]
    pub fn syscalls(&self) -> u64 {
        self.syscalls
    }

    /// Free SQ slots.
    #[inline]
    pub fn sq_space(&mut self) -> usize {
        let sq = self.ring.submission();
        sq.capacity() - sq.len()
    }

    /// Put entries in the SQ (not yet visible to a non-SQPOLL kernel): as
    /// many as `entries` yields while there is room; an entry is only
    /// pulled from the iterator when it fits. Returns how many went in. The
    /// new tail is published once, at the end (one release store).
    ///
    /// # Safety
    /// Every buffer an entry names must stay valid, and must not be touched
    /// by us, until that entry's completion has been reaped.
    #[inline]
    pub unsafe fn push(&mut self, entries: impl IntoIterator<Item = S>) -> usize {
        let mut sq = self.ring.submission();
        let mut it = entries.into_iter();
        let mut n = 0;
        while !sq.is_full() {
            let Some(e) = it.next() else { break };
            // SAFETY: forwarded from the caller; there is room (checked above).
            let pushed = unsafe { sq.push(&e) };
            debug_assert!(pushed.is_ok());
            n += 1;
        }
        n
        // Dropping `sq` publishes the new tail (release store).
    }

    /// The one `io_uring_enter`, counted. EINTR, EAGAIN and EBUSY mean "try
    /// again later" (the entries stay in the SQ and a later call hands them
    /// over): reported as Ok(0).
    fn enter(&mut self, to_submit: u32, min_complete: u32, flags: u32) -> Result<usize, BackendError> {
        self.syscalls += 1;
        let r = match self.registered {
            // SAFETY: io_uring_enter with a registered ring index and no
            // extended argument (null pointer, size 0) touches only the ring.
            Some(idx) => match unsafe {
                libc::syscall(
                    libc::SYS_io_uring_enter,
                    idx,
                    to_submit,
                    min_complete,
                    flags | IORING_ENTER_REGISTERED_RING,
                    std::ptr::null::<libc::c_void>(),
                    0usize,
                )
            } {
                n if n >= 0 => Ok(n as usize),
                _ => Err(io::Error::last_os_error()),
            },
            // SAFETY: no extended argument is passed (null arg, size of
            // sigset_t as the kernel expects for the plain form).
            None => unsafe { self.ring.submitter().enter::<libc::sigset_t>(to_submit, min_complete, flags, None) },
        };
        match r {
            Ok(n) => Ok(n),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => Ok(0),
            Err(e) => Err(BackendError::os(
                "io_uring_enter",
                match e.raw_os_error() {
                    Some(libc::EOPNOTSUPP) if self.iopoll => "this device or file cannot do polled I/O; drop --hipri",
                    _ => "",
                },
                e,
            )),
        }
    }

    /// Hand what is in the SQ to the kernel and, when `min_complete` > 0,
    /// wait for that many completions. Makes a system call only when the
    /// mode needs one (see the table at the top of this file).
    pub fn kick(&mut self, min_complete: u32) -> Result<(), BackendError> {
        const GETEVENTS: u32 = EnterFlags::GETEVENTS.bits();
        const SQ_WAKEUP: u32 = EnterFlags::SQ_WAKEUP.bits();
        if self.sqpoll {
            let sq = self.ring.submission();
            let mut flags = 0;
            if sq.need_wakeup() {
                flags |= SQ_WAKEUP;
            }
            if min_complete > 0 || sq.cq_overflow() {
                flags |= GETEVENTS;
            }
            drop(sq);
            if flags != 0 {
                self.enter(0, min_complete, flags)?;
            }
        } else {
            let sq = self.ring.submission();
            // Entries the kernel has not consumed yet.
            let to_submit = sq.len() as u32;
            // With DEFER_TASKRUN completions reach the CQ only when we ask
            // for events, so every kick asks (like IOPOLL).
            let getevents = self.iopoll || self.defer_taskrun || min_complete > 0 || sq.cq_overflow();
            drop(sq);
            if to_submit > 0 || getevents {
                self.enter(to_submit, min_complete, if getevents { GETEVENTS } else { 0 })?;
            }
        }
        Ok(())
    }

    /// Entries still waiting in the SQ for the kernel (non-SQPOLL: left over
    /// by an enter that stopped early).
    #[inline]
    pub fn unsubmitted(&mut self) -> usize {
        if self.sqpoll {
            0
        } else {
            self.ring.submission().len()
        }
    }

    /// Take up to `max` completions from the CQ, without a system call.
    #[inline]
    pub fn reap(&mut self, max: usize, mut f: impl FnMut(&C)) -> usize {
        let mut cq = self.ring.completion();
        let mut n = 0;
        while n < max {
            match cq.next() {
                Some(e) => {
                    f(&e);
                    n += 1;
                }
                None => break,
            }
        }
        n
        // Dropping `cq` publishes the new head (release store).
    }

    /// Reap without blocking: peek; when that finds nothing (or entries are
    /// still waiting to be submitted), kick once (a syscall only if the mode
    /// needs one: IOPOLL polls the device here) and peek again.
    #[inline]
    pub fn poll(&mut self, max: usize, in_flight: usize, mut f: impl FnMut(&C)) -> Result<usize, BackendError> {
        let mut n = self.reap(max, &mut f);
        if (n == 0 && in_flight > 0) || self.unsubmitted() > 0 {
            self.kick(0)?;
            n += self.reap(max - n, &mut f);
        }
        Ok(n)
    }

    /// Reap at least `min` (at most `max`) completions, waiting in the
    /// kernel; entries still waiting in the SQ are submitted by the same
    /// enter (or by one of their own when the completions are there).
    pub fn wait(&mut self, min: usize, max: usize, mut f: impl FnMut(&C)) -> Result<usize, BackendError> {
        let mut n = self.reap(max, &mut f);
        while n < min || self.unsubmitted() > 0 {
            self.kick(min.saturating_sub(n) as u32)?;
            n += self.reap(max - n, &mut f);
        }
        Ok(n)
    }
}

/// The file an entry names: the descriptor itself, or registered file 0
/// (`--registerfiles`, which spares the kernel a file table lookup and
/// reference count per I/O).
#[derive(Clone, Copy, Debug)]
pub enum FileRef {
    /// A plain descriptor.
    Fd(std::os::fd::RawFd),
    /// Fixed file slot 0.
    Fixed,
}

/// How one path turns an [`Io`] into a submission entry and a completion
/// entry back into an [`IoStatus`]: the only difference between the block
/// path's ring and the passthrough ring.
pub trait Codec: Send + 'static {
    /// Submission entry type (64 or 128 bytes).
    type Sqe: squeue::EntryMarker;
    /// Completion entry type (16 or 32 bytes).
    type Cqe: cqueue::EntryMarker;
    /// The entry for `io`, tagged with `slot` (user_data), its data `len`
    /// bytes at user address `addr` (registered buffer number `io.buf`).
    fn encode(&self, io: &Io, slot: u32, addr: u64, len: u32) -> Self::Sqe;
    /// The user_data of a completion.
    fn user_data(cqe: &Self::Cqe) -> u64;
    /// The outcome of a completion whose I/O asked for `asked` bytes.
    fn status(cqe: &Self::Cqe, asked: u32) -> IoStatus;
}

/// One thread's ring, buffers and slots: the [`IoQueue`] of both io_uring
/// kernel paths. Field order matters: the ring drops (and its fd closes)
/// before the buffers are unmapped, and `Drop` first waits for what is in
/// flight.
pub struct UringQueue<C: Codec> {
    ring: Ring<C::Sqe, C::Cqe>,
    codec: C,
    slots: Slots,
    bufs: Buffers,
    lba_size: u32,
    batch: usize,
    rejected: u64,
    _file: Arc<File>,
}

impl<C: Codec> UringQueue<C> {
    /// A queue over `ring`; registers `bufs` with it when `fixedbufs`.
    /// `file` is kept open as long as the queue lives.
    pub fn new(
        ring: Ring<C::Sqe, C::Cqe>,
        codec: C,
        bufs: Buffers,
        fixedbufs: bool,
        lba_size: u32,
        batch: usize,
        file: Arc<File>,
    ) -> Result<Self, BackendError> {
        if fixedbufs {
            // SAFETY: the buffers live in `bufs`, owned by the queue, whose
            // field order drops the ring (ending the registration) first.
            unsafe { ring.register_buffers(&bufs.iovecs())? };
        }
        Ok(UringQueue { ring, codec, slots: Slots::new(bufs.count()), bufs, lba_size, batch, rejected: 0, _file: file })
    }

    #[inline]
    fn complete(slots: &mut Slots, rejected: &mut u64, out: &mut [IoDone], n: &mut usize, c: &C::Cqe) {
        match slots.complete(C::user_data(c)) {
            Some((tag, asked)) => {
                out[*n] = IoDone { tag, status: C::status(c, asked) };
                *n += 1;
            }
            None => *rejected += 1,
        }
    }
}

impl<C: Codec> IoQueue for UringQueue<C> {
    fn depth(&self) -> usize {
        self.bufs.count()
    }

    #[inline]
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        let batch = if self.batch == 0 { usize::MAX } else { self.batch };
        let mut accepted = 0;
        for chunk in ios.chunks(batch) {
            // A chunk of at most `batch` entries per system call: the one
            // before this is entered now; the last waits for the next poll
            // or wait, whose enter both submits it and asks for completions
            // (one system call per batch, not two).
            if accepted > 0 {
                self.ring.kick(0)?;
            }
            let room = chunk.len().min(self.slots.available()).min(self.ring.sq_space());
            if room == 0 {
                break;
            }
            for io in &chunk[..room] {
                check_io(io, self.lba_size, &self.bufs)?;
            }
            let (codec, slots, bufs, lba) = (&self.codec, &mut self.slots, &self.bufs, self.lba_size);
            let entries = chunk[..room].iter().map(|io| {
                let len = if io.op == Op::Flush { 0 } else { io.blocks * lba };
                let slot = slots.take(io.tag, len).expect("room checked");
                codec.encode(io, slot, bufs.addr(io.buf), len)
            });
            // SAFETY: each entry names buffer `io.buf` of `bufs` (length
            // checked by check_io), which stays mapped until the ring is
            // gone; the caller does not touch it until the completion.
            let pushed = unsafe { self.ring.push(entries) };
            debug_assert_eq!(pushed, room, "room was checked");
            accepted += pushed;
            if pushed < chunk.len() {
                break;
            }
        }
        Ok(accepted)
    }

    #[inline]
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError> {
        let (slots, rejected) = (&mut self.slots, &mut self.rejected);
        let in_flight = slots.in_use();
        let mut n = 0;
        self.ring.poll(out.len(), in_flight, |c| Self::complete(slots, rejected, out, &mut n, c))?;
        Ok(n)
    }

    fn wait(&mut self, out: &mut [IoDone], min: usize) -> Result<usize, BackendError> {
        let (slots, rejected) = (&mut self.slots, &mut self.rejected);
        let min = min.min(slots.in_use()).min(out.len());
        let mut n = 0;
        self.ring.wait(min, out.len(), |c| Self::complete(slots, rejected, out, &mut n, c))?;
        Ok(n)
    }

    fn buf_write(&mut self, buf: u32, off: usize, data: &[u8]) {
        self.bufs.write(buf, off, data);
    }

    fn buf_read(&self, buf: u32, off: usize, out: &mut [u8]) {
        self.bufs.read(buf, off, out);
    }

    fn buf_scramble(&mut self, buf: u32, len: usize, s: Scramble) {
        self.bufs.scramble(buf, len, s);
    }

    fn counters(&self) -> QueueCounters {
        QueueCounters { syscalls: self.ring.syscalls(), rejected_completions: self.rejected, ..Default::default() }
    }

    fn in_flight(&self) -> usize {
        self.slots.in_use()
    }

    fn submit_now(&mut self) -> Result<(), BackendError> {
        if self.ring.unsubmitted() > 0 {
            self.ring.kick(0)?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("io_uring ring fd {}", self.ring.fd())
    }
}

impl<C: Codec> Drop for UringQueue<C> {
    fn drop(&mut self) {
        // Let what is in flight finish before the buffers go (the kernel
        // would keep the pages pinned, but a read landing in freed memory
        // helps no one).
        let mut out = [IoDone::default(); 32];
        while self.slots.in_use() > 0 {
            match self.wait(&mut out, 1) {
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::{cqueue, opcode, squeue};

    fn ring_or_skip<S: squeue::EntryMarker, C: cqueue::EntryMarker>(cfg: RingConfig) -> Option<Ring<S, C>> {
        match Ring::<S, C>::new(cfg, "test ring") {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    #[test]
    fn nop_round_trip_counts_syscalls() {
        let Some(mut r) = ring_or_skip::<squeue::Entry, cqueue::Entry>(RingConfig { entries: 4, ..Default::default() }) else { return };
        let nops: Vec<_> = (0..3u64).map(|i| opcode::Nop::new().build().user_data(i)).collect();
        // SAFETY: NOPs name no buffers.
        assert_eq!(unsafe { r.push(nops) }, 3);
        r.kick(0).unwrap();
        assert_eq!(r.syscalls(), 1);
        let mut seen = vec![];
        let n = r.wait(3, 8, |c| seen.push((c.user_data(), c.result()))).unwrap();
        assert_eq!(n, 3);
        seen.sort();
        assert_eq!(seen, vec![(0, 0), (1, 0), (2, 0)]);
        // Interrupt mode: an empty poll with nothing in flight is free.
        let before = r.syscalls();
        assert_eq!(r.poll(8, 0, |_| {}).unwrap(), 0);
        assert_eq!(r.syscalls(), before);
    }

    #[test]
    fn passthrough_ring_and_probe() {
        // SQE128|CQE32 rings exist since 5.19; IORING_OP_URING_CMD since 5.19.
        let Some(r) = ring_or_skip::<squeue::Entry128, cqueue::Entry32>(RingConfig { entries: 2, ..Default::default() }) else { return };
        let p = r.probe().unwrap();
        eprintln!("IORING_OP_URING_CMD supported: {}", p.is_supported(OP_URING_CMD));
        // Asking for an opcode no kernel has gives the clear error.
        let e = r.require_ops(&[(250, "IORING_OP_FROM_THE_FUTURE")], "upgrade").unwrap_err();
        assert!(e.to_string().contains("lacks IORING_OP_FROM_THE_FUTURE"), "{e}");
    }

    #[test]
    fn fios_ring_flags_where_the_kernel_takes_them() {
        // fio's: a CQ ring of the depth; SINGLE_ISSUER + DEFER_TASKRUN on a
        // 6.1+ kernel, completions then reached only by asking for events.
        let Some(mut r) = ring_or_skip::<squeue::Entry, cqueue::Entry>(RingConfig { entries: 4, fio_ring: true, ..Default::default() }) else { return };
        assert_eq!(r.ring.params().cq_entries(), 4, "CQSIZE: the CQ ring of the depth, not twice it");
        assert_eq!(r.ring.params().is_setup_single_issuer(), r.defer_taskrun);
        // SAFETY: a NOP names no buffer.
        assert_eq!(unsafe { r.push([opcode::Nop::new().build().user_data(9)]) }, 1);
        let n = r.wait(1, 4, |c| assert_eq!(c.user_data(), 9)).unwrap();
        assert_eq!(n, 1);
        // Beside SQPOLL the kernel refuses DEFER_TASKRUN: dropped, as fio
        // drops it, and the ring still made.
        if let Some(r) = ring_or_skip::<squeue::Entry, cqueue::Entry>(RingConfig { entries: 4, fio_ring: true, sqpoll: true, ..Default::default() }) {
            assert!(!r.defer_taskrun && r.ring.params().is_setup_sqpoll());
        }
    }

    #[test]
    fn too_deep_a_ring_is_refused_with_advice() {
        let e =
            Ring::<squeue::Entry, cqueue::Entry>::new(RingConfig { entries: MAX_ENTRIES + 1, ..Default::default() }, "x").err().unwrap();
        assert!(e.to_string().contains("--iodepth 32768 or less"), "{e}");
    }
}
