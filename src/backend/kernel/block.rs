//! The `block` backend: the kernel block layer, the path every ordinary
//! program takes. A read here is a file operation on /dev/nvmeXnY (or on a
//! regular file, for tests): `O_DIRECT` (or buffered with --buffered), then
//! bio, blk-mq, the I/O scheduler if any, the nvme driver.
//!
//! Three engines, named and behaving as fio's:
//! * `io_uring` (default): a plain ring (64-byte SQEs); Read/Write, or
//!   ReadFixed/WriteFixed with --fixedbufs; --registerfiles, --hipri
//!   (IOPOLL), --sqthread-poll (SQPOLL) as for passthrough.
//! * `libaio`: io_submit / io_getevents on an AIO context, one iocb per slot.
//! * `psync`: pread / pwrite. `submit` does the I/O there and then; `poll`
//!   hands back its completion. Depth 1 by nature: --iodepth above 1 is
//!   refused (fio ignores it silently), --numjobs gives parallelism.
//!
//! Regular files (tests, or a filesystem's view): the logical block size
//! is the alignment O_DIRECT needs there, as the filesystem states it
//! (statx STATX_DIOALIGN: 512 on ext4 and xfs over 512-byte sectors), else
//! the file's st_blksize when it is a power of two between 512 and 4096,
//! else 4096 — a size O_DIRECT accepts on every common filesystem; the
//! capacity is the file size rounded down to blocks (`file_block_size`).

use super::aio::{AioContext, IoEvent, Iocb, IOCB_CMD_FSYNC, IOCB_CMD_PREAD, IOCB_CMD_PWRITE};
use super::nvme_ioctl;
use super::sys::{fdatasync, pread_pwrite, read_write, seek, Dir};
use super::uring::{self, Codec, FileRef, Ring, RingConfig, UringQueue};
use super::{
    byte_count_status, check_io, file_name, open_rw, read_sys, read_sys_u64, require_poll_queues, stat_device, sysfs_block_dir,
    sysfs_block_dir_of, AioReap, Buffers, FileKind, IoEngine, KernelOptions, Slots,
};
use crate::backend::{BackendError, Geometry, Io, IoDone, IoQueue, IoStatus, Op, QueueCounters, QueueParams, Scramble, Target};
use io_uring::{cqueue, opcode, squeue, types};
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

/// Largest I/O on a regular file (no device limit applies; this keeps the
/// buffers sane).
const FILE_MAX_TRANSFER: usize = 64 << 20;

/// A block device or file opened for the block path.
pub struct BlockTarget {
    file: Arc<File>,
    kind: FileKind,
    opts: KernelOptions,
    geometry: Geometry,
    facts: Vec<(String, String)>,
}

/// The block size of I/O to a regular file (or, for a file not yet made,
/// to its directory): the O_DIRECT alignment the filesystem states (statx
/// STATX_DIOALIGN), else st_blksize when a power of two from 512 to 4096,
/// else 4096; with where it came from. The same rule for a run and for the
/// checks made before a file is laid out, so both agree.
pub fn file_block_size(path: &std::path::Path, md: &std::fs::Metadata) -> (u32, &'static str) {
    let fits = |b: &u64| b.is_power_of_two() && (512..=4096).contains(b);
    if let Some(a) = crate::sys::dio_offset_align(path).map(u64::from).filter(fits) {
        return (a as u32, "the filesystem's O_DIRECT alignment");
    }
    // A directory states no alignment of its own: its files' is the
    // logical block of the device under the filesystem (ext4, xfs).
    if md.is_dir() {
        if let Some(b) = sysfs_block_dir_of(md.dev()).and_then(|d| read_sys_u64(d.join("queue/logical_block_size"))).filter(fits) {
            return (b as u32, "the logical block of the device under the filesystem");
        }
    }
    match md.blksize() {
        b if fits(&b) => (b as u32, "st_blksize"),
        _ => (4096, "a size O_DIRECT accepts on every common filesystem"),
    }
}

/// Open the block device (or a regular file, for tests).
pub fn open(o: &KernelOptions) -> Result<Box<dyn Target>, BackendError> {
    o.check(false)?;
    let (kind, md) = stat_device(&o.device)?;
    let name = file_name(&o.device);
    if kind == FileKind::Char {
        let hint = match super::parse_generic_name(&name) {
            Some((c, n)) => format!("use /dev/nvme{c}n{n} (the same namespace's block device), or keep it with --backend passthru"),
            None => "use a block device such as /dev/nvme0n1".into(),
        };
        return Err(BackendError::Invalid(format!("{} is a character device; the block path needs a block device: {hint}", o.device)));
    }
    if o.ioengine == IoEngine::IoUring {
        // A clear message when io_uring is missing or disabled, before any open.
        let ring = Ring::<squeue::Entry, cqueue::Entry>::new(RingConfig { entries: 2, ..Default::default() }, "io_uring ring")?;
        ring.require_ops(
            &[
                (opcode::Read::CODE, "IORING_OP_READ"),
                (opcode::Write::CODE, "IORING_OP_WRITE"),
                (opcode::ReadFixed::CODE, "IORING_OP_READ_FIXED"),
                (opcode::WriteFixed::CODE, "IORING_OP_WRITE_FIXED"),
            ],
            "the io_uring engine needs Linux 5.6 or newer: use --ioengine libaio",
        )?;
    }
    let file = open_file(o, kind)?;
    let mut facts = vec![];
    let geometry = match kind {
        FileKind::Block => {
            let lba_size =
                nvme_ioctl::block_logical_size(file.as_fd()).map_err(|e| BackendError::os(format!("BLKSSZGET on {}", o.device), "", e))?;
            let bytes =
                nvme_ioctl::block_size_bytes(file.as_fd()).map_err(|e| BackendError::os(format!("BLKGETSIZE64 on {}", o.device), "", e))?;
            // An NVMe namespace knows its id; any other block device works too.
            let nsid = nvme_ioctl::namespace_id(file.as_fd()).ok();
            let sys = sysfs_block_dir(&md);
            let queue = sys.as_ref().map(|d| d.join("queue"));
            // The block layer splits above max_sectors_kb or max_segments
            // (pages of our buffers): one I/O must stay one request.
            let max = queue
                .as_ref()
                .and_then(|q| {
                    let soft = read_sys_u64(q.join("max_sectors_kb"))? as usize * 1024;
                    let segs = read_sys_u64(q.join("max_segments")).map(|s| s as usize * 4096).unwrap_or(usize::MAX);
                    Some(soft.min(segs))
                })
                .unwrap_or(128 << 10);
            facts.push((
                "device".into(),
                match nsid {
                    Some(id) => format!("{} (block device {name}, NVMe namespace {id})", o.device),
                    None => format!("{} (block device {name})", o.device),
                },
            ));
            if let Some(q) = &queue {
                if let Some(s) = read_sys(q.join("scheduler")) {
                    facts.push(("scheduler".into(), s));
                }
            }
            if o.hipri {
                facts.push(("poll queues".into(), require_poll_queues(queue.as_deref(), &o.device)?));
            }
            if lba_size == 0 || bytes < lba_size as u64 {
                return Err(BackendError::Invalid(format!("{} reports no capacity ({bytes} bytes)", o.device)));
            }
            Geometry { nsid: nsid.unwrap_or(o.nsid), lba_size, blocks: bytes / lba_size as u64, max_transfer: max }
        }
        FileKind::Regular => {
            let (lba_size, from) = match file_block_size(std::path::Path::new(&o.device), &md) {
                (b, _) if o.buffered && o.granule > 0 && o.granule < b => (o.granule, "buffered: the largest power of two dividing the I/O sizes and offsets"),
                found => found,
            };
            let blocks = md.len() / lba_size as u64;
            if blocks == 0 {
                return Err(BackendError::Invalid(format!(
                    "{} is smaller than one {lba_size}-byte block; give it a size first, e.g. `truncate -s 1G {}`",
                    o.device, o.device
                )));
            }
            facts.push(("device".into(), format!("{} (regular file, {lba_size}-byte blocks: {from})", o.device)));
            if o.hipri {
                // Polled direct I/O reaches the device under the filesystem;
                // without poll queues there, recent kernels fail it (EOPNOTSUPP).
                let queue = sysfs_block_dir_of(md.dev()).map(|d| d.join("queue"));
                facts.push(("poll queues".into(), require_poll_queues(queue.as_deref(), &format!("the device holding {}", o.device))?));
            }
            Geometry { nsid: o.nsid, lba_size, blocks, max_transfer: FILE_MAX_TRANSFER }
        }
        FileKind::Char => unreachable!("refused above"),
    };
    facts.push(("capacity".into(), format!("{} blocks of {} bytes = {} bytes", geometry.blocks, geometry.lba_size, geometry.bytes())));
    facts.push(("max transfer".into(), format!("{} KiB", geometry.max_transfer >> 10)));
    let sync = match o.sync_open {
        libc::O_SYNC => " | O_SYNC",
        libc::O_DSYNC => " | O_DSYNC",
        _ => "",
    };
    facts.push(("access".into(), format!("{}{sync}", if o.buffered { "buffered (page cache)" } else { "O_DIRECT" })));
    facts.push((
        "ioengine".into(),
        match o.ioengine {
            IoEngine::IoUring => format!("io_uring: {}", o.uring_desc()),
            IoEngine::Libaio if o.aio_reap == AioReap::Getevents => "libaio: io_submit; io_getevents for every reap (fio's libaio)".into(),
            IoEngine::Libaio if o.aio_reap == AioReap::Spin => "libaio: io_submit; completions read from the AIO ring in user memory, spinning on it to wait (fio's userspace_reap)".into(),
            IoEngine::Libaio => {
                "libaio: io_submit; completions read from the AIO ring in user memory (fio's userspace_reap), io_getevents only to wait"
                    .into()
            }
            IoEngine::Psync => "psync: pread / pwrite, one I/O at a time per thread".into(),
            IoEngine::Sync => "sync: read / write at the file position, lseek when it is elsewhere, one I/O at a time per thread".into(),
        },
    ));
    facts.push(("kernel".into(), uring::kernel_release()));
    Ok(Box::new(BlockTarget { file: Arc::new(file), kind, opts: o.clone(), geometry, facts }))
}

/// Open `o.device` as the block path does: O_DIRECT unless buffered, with
/// fio's `sync=` flag, read-only for a job that only reads, and the page
/// cache advice given.
fn open_file(o: &KernelOptions, kind: FileKind) -> Result<File, BackendError> {
    let flags = (if o.buffered { 0 } else { libc::O_DIRECT }) | o.sync_open;
    let file = open_rw(&o.device, kind, flags, !o.read_only)?;
    if let Some(advice) = o.fadvise {
        // A hint: the run goes on without it, as fio's does.
        if let Err(e) = crate::sys::fadvise(&file, advice) {
            eprintln!("nvme-bypass: warning: posix_fadvise on {} failed: {e}", o.device);
        }
    }
    Ok(file)
}

impl Target for BlockTarget {
    fn name(&self) -> String {
        format!("block/{}{}", self.opts.ioengine.name(), if self.opts.buffered { "-buffered" } else { "" })
    }
    fn geometry(&self) -> Geometry {
        self.geometry
    }
    fn polled(&self) -> bool {
        self.opts.ioengine == IoEngine::IoUring && (self.opts.hipri || self.opts.sqthread_poll)
    }
    fn describe(&self) -> Vec<(String, String)> {
        self.facts.clone()
    }
    fn wants_passes(&self) -> bool {
        self.opts.buffered && self.opts.invalidate
    }
    fn new_pass(&self) {
        if self.wants_passes() {
            if let Err(e) = crate::sys::drop_page_cache(&self.file) {
                eprintln!("nvme-bypass: warning: could not drop {}'s page cache at a new pass (invalidate=1): {e}", self.opts.device);
            }
        }
    }
    fn open_queue(&self, p: QueueParams) -> Result<Box<dyn IoQueue>, BackendError> {
        let o = &self.opts;
        let lba = self.geometry.lba_size;
        let bufs = Buffers::new(p.depth, p.buf_size)?;
        match o.ioengine {
            IoEngine::IoUring => {
                let cfg = RingConfig::for_options(o, p.depth);
                let ring = Ring::<squeue::Entry, cqueue::Entry>::new(cfg, "io_uring ring")?;
                let fd = if o.registerfiles {
                    ring.register_file(self.file.as_raw_fd())?;
                    FileRef::Fixed
                } else {
                    FileRef::Fd(self.file.as_raw_fd())
                };
                let codec = BlockCodec { fd, lba_size: lba as u64, fixedbufs: o.fixedbufs };
                Ok(Box::new(UringQueue::new(ring, codec, bufs, o.fixedbufs, lba, p.batch, self.file.clone())?))
            }
            IoEngine::Libaio => Ok(Box::new(AioQueue::new(self.file.clone(), bufs, lba, p.batch, o.aio_reap)?)),
            IoEngine::Psync | IoEngine::Sync if p.depth > 1 => Err(BackendError::Invalid(format!(
                "--ioengine {} does one I/O at a time per thread (each system call blocks until done), so --iodepth {} cannot be honoured: use --iodepth 1, and --numjobs for parallel I/O",
                o.ioengine.name(),
                p.depth
            ))),
            IoEngine::Psync => Ok(Box::new(PsyncQueue::new(self.file.clone(), bufs, lba, false))),
            // The file position is the open file's: each thread opens the
            // file again, as each of fio's clones has its own descriptor,
            // so one thread's lseek never moves another's reads and writes.
            IoEngine::Sync => Ok(Box::new(PsyncQueue::new(Arc::new(open_file(o, self.kind)?), bufs, lba, true))),
        }
    }
}

/// Read/Write/Fsync as 64-byte io_uring entries.
struct BlockCodec {
    fd: FileRef,
    lba_size: u64,
    fixedbufs: bool,
}

/// Build an opcode with either kind of file reference (the crate's builders
/// are generic over a sealed trait, so each arm names its own type).
macro_rules! with_file {
    ($fd:expr, |$f:ident| $build:expr) => {
        match $fd {
            FileRef::Fd(raw) => {
                let $f = types::Fd(raw);
                $build
            }
            FileRef::Fixed => {
                let $f = types::Fixed(0);
                $build
            }
        }
    };
}

impl Codec for BlockCodec {
    type Sqe = squeue::Entry;
    type Cqe = cqueue::Entry;

    #[inline]
    fn encode(&self, io: &Io, slot: u32, addr: u64, len: u32) -> squeue::Entry {
        let off = io.lba * self.lba_size;
        let (buf, idx) = (addr as *mut u8, io.buf as u16);
        let e = match (io.op, self.fixedbufs) {
            (Op::Read, false) => with_file!(self.fd, |f| opcode::Read::new(f, buf, len).offset(off).build()),
            (Op::Write, false) => with_file!(self.fd, |f| opcode::Write::new(f, buf, len).offset(off).build()),
            (Op::Read, true) => with_file!(self.fd, |f| opcode::ReadFixed::new(f, buf, len, idx).offset(off).build()),
            (Op::Write, true) => with_file!(self.fd, |f| opcode::WriteFixed::new(f, buf, len, idx).offset(off).build()),
            (Op::Flush, _) => with_file!(self.fd, |f| opcode::Fsync::new(f).flags(types::FsyncFlags::DATASYNC).build()),
        };
        e.user_data(slot as u64)
    }

    #[inline]
    fn user_data(c: &cqueue::Entry) -> u64 {
        c.user_data()
    }

    #[inline]
    fn status(c: &cqueue::Entry, asked: u32) -> IoStatus {
        byte_count_status(c.result() as i64, asked)
    }
}

/// One thread's AIO context. Every slot has its own iocb, so the address
/// the kernel reports back (`io_event.obj`) always names a live iocb.
/// Field order: the context drops first (io_destroy waits for what is in
/// flight), then the buffers.
struct AioQueue {
    ctx: AioContext,
    iocbs: Box<[Iocb]>,
    batch_ptrs: IocbPtrs,
    events: Box<[IoEvent]>,
    slots: Slots,
    bufs: Buffers,
    /// Keeps the descriptor in the iocbs open.
    _file: Arc<File>,
    lba_size: u32,
    batch: usize,
    syscalls: u64,
    rejected: u64,
    /// Ring, io_getevents, or spin on the ring ([`AioReap`]).
    reap: AioReap,
}

/// The pointer array io_submit reads.
struct IocbPtrs(Vec<*mut Iocb>);

// SAFETY: the pointers point into the owning AioQueue's boxed iocbs, which
// move with it; they are only handed to io_submit from the owning thread.
unsafe impl Send for IocbPtrs {}

impl AioQueue {
    fn new(file: Arc<File>, bufs: Buffers, lba_size: u32, batch: usize, reap: AioReap) -> Result<Self, BackendError> {
        let depth = bufs.count();
        let ctx = AioContext::new(depth as u32).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::EAGAIN) => format!(
                    "the system-wide AIO limit is reached (/proc/sys/fs/aio-nr {} of aio-max-nr {}): raise it with `sysctl fs.aio-max-nr=1048576`, or use a smaller --iodepth/--numjobs",
                    read_sys("/proc/sys/fs/aio-nr").unwrap_or("?".into()),
                    read_sys("/proc/sys/fs/aio-max-nr").unwrap_or("?".into())
                ),
                Some(libc::ENOSYS) => "this kernel has no native AIO (CONFIG_AIO off): use --ioengine io_uring or psync".into(),
                _ => String::new(),
            };
            BackendError::os(format!("io_setup({depth})"), hint, e)
        })?;
        let mut iocbs = vec![Iocb::default(); depth].into_boxed_slice();
        let fd = file.as_raw_fd() as u32;
        for (i, c) in iocbs.iter_mut().enumerate() {
            c.aio_fildes = fd;
            c.aio_data = i as u64;
        }
        Ok(AioQueue {
            ctx,
            iocbs,
            batch_ptrs: IocbPtrs(Vec::with_capacity(depth)),
            events: vec![IoEvent::default(); depth].into_boxed_slice(),
            slots: Slots::new(depth),
            bufs,
            _file: file,
            lba_size,
            batch,
            syscalls: 0,
            rejected: 0,
            reap,
        })
    }

    /// Turn the first `n` events into completions.
    #[inline]
    fn finish(&mut self, out: &mut [IoDone], n: usize) -> usize {
        let mut k = 0;
        for ev in &self.events[..n] {
            match self.slots.complete(ev.data) {
                Some((tag, asked)) => {
                    out[k] = IoDone { tag, status: byte_count_status(ev.res, asked) };
                    k += 1;
                }
                None => self.rejected += 1,
            }
        }
        k
    }

    /// io_getevents: `min` or more completions, waiting when `block`.
    fn reap(&mut self, out: &mut [IoDone], min: usize, block: bool) -> Result<usize, BackendError> {
        let max = out.len().min(self.events.len());
        loop {
            self.syscalls += 1;
            match self.ctx.get_events(min, &mut self.events[..max], block) {
                Ok(n) => return Ok(self.finish(out, n)),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if !block {
                        return Ok(0);
                    }
                }
                Err(e) => return Err(BackendError::os("io_getevents", "", e)),
            }
        }
    }
}

impl IoQueue for AioQueue {
    fn depth(&self) -> usize {
        self.bufs.count()
    }

    #[inline]
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        let batch = if self.batch == 0 { usize::MAX } else { self.batch };
        let mut accepted = 0;
        for chunk in ios.chunks(batch) {
            let room = chunk.len().min(self.slots.available());
            if room == 0 {
                break;
            }
            for io in &chunk[..room] {
                check_io(io, self.lba_size, &self.bufs)?;
            }
            self.batch_ptrs.0.clear();
            for io in &chunk[..room] {
                let len = if io.op == Op::Flush { 0 } else { io.blocks * self.lba_size };
                let slot = self.slots.take(io.tag, len).expect("room checked");
                let c = &mut self.iocbs[slot as usize];
                c.aio_lio_opcode = match io.op {
                    Op::Read => IOCB_CMD_PREAD,
                    Op::Write => IOCB_CMD_PWRITE,
                    Op::Flush => IOCB_CMD_FSYNC,
                };
                c.aio_buf = if io.op == Op::Flush { 0 } else { self.bufs.addr(io.buf) };
                c.aio_nbytes = len as u64;
                c.aio_offset = (io.lba * self.lba_size as u64) as i64;
                self.batch_ptrs.0.push(c as *mut Iocb);
            }
            self.syscalls += 1;
            // SAFETY: every pointer names one of our iocbs, filled above; each
            // names a buffer of `bufs` whose length check_io checked, and which
            // stays mapped until the context is destroyed.
            let r = unsafe { self.ctx.submit(&self.batch_ptrs.0) };
            let done = match r {
                Ok(n) => n,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => 0,
                Err(e) => {
                    for &p in self.batch_ptrs.0.iter().rev() {
                        // SAFETY: p points into self.iocbs (see above); reading a field is fine.
                        self.slots.untake(unsafe { (*p).aio_data } as u32);
                    }
                    let hint = if e.raw_os_error() == Some(libc::EINVAL) { "O_DIRECT needs block-aligned offsets and sizes" } else { "" };
                    return Err(BackendError::os("io_submit", hint, e));
                }
            };
            // Slots of iocbs the kernel did not take go back, newest first.
            for &p in self.batch_ptrs.0[done..].iter().rev() {
                // SAFETY: as above.
                self.slots.untake(unsafe { (*p).aio_data } as u32);
            }
            accepted += done;
            if done < chunk.len() {
                break;
            }
        }
        Ok(accepted)
    }

    /// From the ring in user memory, as `poll` reads it: a fixed batch
    /// already there is taken without io_getevents (fio's
    /// `userspace_reap`).
    fn ready(&self, n: usize) -> Option<bool> {
        if self.reap == AioReap::Getevents {
            return None;
        }
        self.ctx.ready_user().map(|k| k >= n)
    }

    #[inline]
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError> {
        if self.slots.in_use() == 0 {
            return Ok(0);
        }
        // Completions land in the ring from the interrupt handler: read
        // them there, as io_uring's CQ is peeked, without a system call.
        let max = out.len().min(self.events.len());
        if self.reap != AioReap::Getevents {
            if let Some(n) = self.ctx.reap_user(&mut self.events[..max]) {
                return Ok(self.finish(out, n));
            }
        }
        self.reap(out, 0, false)
    }

    fn wait(&mut self, out: &mut [IoDone], min: usize) -> Result<usize, BackendError> {
        let min = min.min(self.slots.in_use()).min(out.len());
        let mut n = 0;
        if self.reap == AioReap::Spin {
            // fio's userspace_reap: look at the ring until `min` are there,
            // for at most 100 ms (the caller's watchdog and Ctrl-C run
            // between calls).
            let t0 = std::time::Instant::now();
            while n < min && t0.elapsed() < std::time::Duration::from_millis(100) {
                let max = (out.len() - n).min(self.events.len());
                match self.ctx.reap_user(&mut self.events[..max]) {
                    Some(k) => n += self.finish(&mut out[n..], k),
                    // No ring to read (the kernel did not map one): wait
                    // in io_getevents for the rest.
                    None => return Ok(n + self.reap(&mut out[n..], min - n, true)?),
                }
                std::hint::spin_loop();
            }
            return Ok(n);
        }
        while n < min {
            n += self.reap(&mut out[n..], min - n, true)?;
        }
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
        QueueCounters { syscalls: self.syscalls, rejected_completions: self.rejected, ..Default::default() }
    }

    fn in_flight(&self) -> usize {
        self.slots.in_use()
    }

    fn describe(&self) -> String {
        "Linux AIO context".into()
    }
}

/// pread/pwrite (psync), or read/write at the file position (sync): the
/// I/O happens inside `submit`.
struct PsyncQueue {
    file: Arc<File>,
    bufs: Buffers,
    lba_size: u32,
    /// Completions done but not yet reaped (capacity: depth; never grows).
    done: VecDeque<IoDone>,
    syscalls: u64,
    /// fio's sync engine: read/write at the file position, which is
    /// `position` when known; an I/O that starts elsewhere seeks first
    /// (fio_syncio_prep), so a sequential job seeks once.
    positional: bool,
    position: Option<u64>,
}

impl PsyncQueue {
    fn new(file: Arc<File>, bufs: Buffers, lba_size: u32, positional: bool) -> Self {
        let depth = bufs.count();
        PsyncQueue { file, bufs, lba_size, done: VecDeque::with_capacity(depth), syscalls: 0, positional, position: None }
    }

    /// One read or write of `len` bytes at `off` into or from buffer `buf`.
    ///
    /// # Safety
    /// The buffer is one of ours, `len` bytes fit in it, and nothing else
    /// touches it during the call.
    unsafe fn transfer(&mut self, dir: Dir, buf: u32, len: u32, off: u64) -> i64 {
        let fd = self.file.as_fd();
        if !self.positional {
            // SAFETY: forwarded from the caller.
            return unsafe { pread_pwrite(fd, dir, self.bufs.addr(buf), len, off, &mut self.syscalls) };
        }
        if self.position != Some(off) {
            let r = seek(fd, off, &mut self.syscalls);
            if r < 0 {
                self.position = None;
                return r;
            }
        }
        // SAFETY: forwarded from the caller.
        let r = unsafe { read_write(fd, dir, self.bufs.addr(buf), len, &mut self.syscalls) };
        self.position = (r >= 0).then(|| off + r as u64);
        r
    }
}

impl IoQueue for PsyncQueue {
    fn depth(&self) -> usize {
        self.bufs.count()
    }

    /// Does the first I/O, synchronously (the queue has depth 1).
    #[inline]
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        let Some(io) = ios.first() else { return Ok(0) };
        if self.done.len() >= self.bufs.count() {
            return Ok(0);
        }
        let len = check_io(io, self.lba_size, &self.bufs)?;
        let off = io.lba * self.lba_size as u64;
        let res = match io.op {
            // SAFETY: the buffer is one of ours, `len` bytes fit (check_io),
            // and nothing else touches it during the call.
            Op::Read => unsafe { self.transfer(Dir::Read, io.buf, len, off) },
            // SAFETY: as for the read.
            Op::Write => unsafe { self.transfer(Dir::Write, io.buf, len, off) },
            Op::Flush => fdatasync(self.file.as_fd(), &mut self.syscalls),
        };
        self.done.push_back(IoDone { tag: io.tag, status: byte_count_status(res, len) });
        Ok(1)
    }

    #[inline]
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError> {
        let n = out.len().min(self.done.len());
        for (o, d) in out.iter_mut().zip(self.done.drain(..n)) {
            *o = d;
        }
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
        QueueCounters { syscalls: self.syscalls, ..Default::default() }
    }

    fn synchronous(&self) -> bool {
        true
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }
}

#[cfg(test)]
mod tests {
    //! The block path against a regular file on a real filesystem (not
    //! tmpfs: O_DIRECT needs a filesystem that supports it), through the
    //! Target/IoQueue API: write a pattern, read it back, compare.

    use super::*;
    use crate::backend::kernel::IoEngine;
    use std::path::PathBuf;

    /// A scratch file of `size` bytes under target/ (a disk filesystem in a
    /// checkout), or None with a message when O_DIRECT does not work there.
    fn scratch(tag: &str, size: u64) -> Option<PathBuf> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join("nvb-test-files");
        std::fs::create_dir_all(&dir).ok()?;
        let p = dir.join(format!("{tag}-{}", std::process::id()));
        let f = File::create(&p).ok()?;
        f.set_len(size).ok()?;
        drop(f);
        let direct = std::fs::OpenOptions::new().read(true).custom_flags_direct().open(&p);
        if let Err(e) = direct {
            eprintln!("skipped: {} does not support O_DIRECT ({e})", dir.display());
            let _ = std::fs::remove_file(&p);
            return None;
        }
        Some(p)
    }

    trait Direct {
        fn custom_flags_direct(&mut self) -> &mut Self;
    }
    impl Direct for std::fs::OpenOptions {
        fn custom_flags_direct(&mut self) -> &mut Self {
            use std::os::unix::fs::OpenOptionsExt;
            self.custom_flags(libc::O_DIRECT)
        }
    }

    fn opts(device: &str, ioengine: IoEngine) -> KernelOptions {
        KernelOptions { device: device.into(), nsid: 1, ioengine, ..Default::default() }
    }

    /// Write `n` I/Os of `bs` bytes with distinct patterns, read them back
    /// into other buffers, compare. Returns the queue's counters.
    fn round_trip(o: &KernelOptions, depth: usize, bs: usize, batch: usize) -> QueueCounters {
        let t = open(o).unwrap_or_else(|e| panic!("open {o:?}: {e}"));
        let geo = t.geometry();
        let mut q = t.open_queue(QueueParams { depth, buf_size: bs, batch }).unwrap();
        let blocks = (bs / geo.lba_size as usize) as u32;
        let n = depth as u64 * 3;
        let pattern = |i: u64| -> Vec<u8> { (0..bs).map(|b| (b as u64 * 31 + i * 7 + 1) as u8).collect() };
        let mut done = vec![IoDone::default(); depth];
        let run = |q: &mut Box<dyn IoQueue>, op: Op, done: &mut Vec<IoDone>, check: &mut dyn FnMut(&mut Box<dyn IoQueue>, u64)| {
            let mut next = 0u64;
            let mut completed = 0u64;
            let mut free: Vec<u32> = (0..depth as u32).collect();
            let mut unit_of = vec![0u64; depth];
            let mut spins = 0u64;
            while completed < n {
                let mut ios = vec![];
                while next < n {
                    let Some(b) = free.pop() else { break };
                    if op == Op::Write {
                        q.buf_write(b, 0, &pattern(next));
                    }
                    unit_of[b as usize] = next;
                    ios.push(Io { op, lba: next * blocks as u64, blocks, buf: b, tag: b as u64 });
                    next += 1;
                }
                let k = if ios.is_empty() { 0 } else { q.submit(&ios).unwrap() };
                for io in ios[k..].iter().rev() {
                    free.push(io.buf);
                    next -= 1;
                }
                let got = q.poll(done).unwrap();
                for d in &done[..got] {
                    assert_eq!(d.status, IoStatus::Ok, "{op:?} failed");
                    check(q, unit_of[d.tag as usize] * 1_000_000 + d.tag);
                    free.push(d.tag as u32);
                }
                completed += got as u64;
                spins += 1;
                assert!(spins < 50_000_000, "no progress");
            }
            assert_eq!(q.in_flight(), 0);
        };
        run(&mut q, Op::Write, &mut done, &mut |_, _| {});
        let mut buf = vec![0u8; bs];
        run(&mut q, Op::Read, &mut done, &mut |q, key| {
            let (unit, b) = (key / 1_000_000, (key % 1_000_000) as u32);
            q.buf_read(b, 0, &mut buf);
            assert!(buf == pattern(unit), "unit {unit} read back wrong data");
        });
        // A flush goes through too.
        assert_eq!(q.submit(&[Io { op: Op::Flush, lba: 0, blocks: 0, buf: 0, tag: 0 }]).unwrap(), 1);
        let got = q.wait(&mut done, 1).unwrap();
        assert_eq!((got, done[0].status), (1, IoStatus::Ok));
        q.counters()
    }

    #[test]
    fn io_uring_writes_then_reads_a_file() {
        let Some(p) = scratch("uring", 8 << 20) else { return };
        let o = opts(p.to_str().unwrap(), IoEngine::IoUring);
        let t = open(&o).unwrap();
        assert_eq!(t.name(), "block/io_uring");
        assert!(!t.polled());
        let c = round_trip(&o, 8, 8192, 0);
        assert!(c.syscalls > 0);
        // Fixed buffers + registered file, batches of 3.
        let c2 = round_trip(&KernelOptions { fixedbufs: true, registerfiles: true, ..o.clone() }, 8, 4096, 3);
        assert!(c2.syscalls > 0);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn io_uring_polled_modes_on_a_file() {
        let Some(p) = scratch("uring-poll", 4 << 20) else { return };
        let base = opts(p.to_str().unwrap(), IoEngine::IoUring);
        // IOPOLL on a file: the filesystem's direct I/O supports it; the
        // device underneath may complete by interrupt, which still works.
        let hipri = KernelOptions { hipri: true, ..base.clone() };
        match open(&hipri) {
            Ok(t) => {
                assert!(t.polled());
                round_trip(&hipri, 4, 4096, 0);
            }
            Err(e) => {
                // A disk of another driver is named as such, not sent to
                // the nvme module's poll_queues.
                let disk = std::fs::metadata(&p).ok().and_then(|m| sysfs_block_dir_of(m.dev())).and_then(|d| Some(d.file_name()?.to_string_lossy().into_owned()));
                if let Some(disk) = disk.filter(|d| !d.starts_with("nvme")) {
                    let m = e.to_string();
                    assert!(m.contains(&disk) && m.contains("not an NVMe namespace") && !m.contains("modprobe"), "{m}");
                }
                eprintln!("IOPOLL skipped: {e}")
            }
        }
        let sq = KernelOptions { sqthread_poll: true, ..base };
        match open(&sq).and_then(|t| t.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).map(|_| t)) {
            Ok(t) => {
                assert!(t.polled());
                round_trip(&sq, 4, 4096, 0);
            }
            Err(e) => eprintln!("SQPOLL skipped: {e}"),
        }
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn libaio_writes_then_reads_a_file() {
        let Some(p) = scratch("aio", 8 << 20) else { return };
        let o = opts(p.to_str().unwrap(), IoEngine::Libaio);
        assert_eq!(open(&o).unwrap().name(), "block/libaio");
        let c = round_trip(&o, 16, 4096, 4);
        assert!(c.syscalls > 0);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn libaio_sees_a_batch_in_its_ring_and_takes_it_without_a_system_call() {
        let Some(p) = scratch("aio-ready", 1 << 20) else { return };
        let o = opts(p.to_str().unwrap(), IoEngine::Libaio);
        let t = open(&o).unwrap();
        let mut q = t.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        if q.ready(1).is_none() {
            eprintln!("the AIO ring cannot be read in user memory here: skipped");
            return;
        }
        assert_eq!(q.ready(1), Some(false));
        let blocks = (4096 / t.geometry().lba_size) as u32;
        let ios: Vec<Io> = (0..4u32).map(|b| Io { op: Op::Read, lba: (b * blocks) as u64, blocks, buf: b, tag: b as u64 }).collect();
        assert_eq!(q.submit(&ios).unwrap(), 4);
        let t0 = std::time::Instant::now();
        while q.ready(4) != Some(true) {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "4 reads did not complete in 10 s");
            std::thread::yield_now();
        }
        let before = q.counters().syscalls;
        let mut done = vec![IoDone::default(); 4];
        assert_eq!(q.poll(&mut done).unwrap(), 4);
        assert_eq!(q.counters().syscalls, before, "taken from the ring, no io_getevents");
        assert_eq!(q.ready(1), Some(false));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn psync_writes_then_reads_a_file() {
        let Some(p) = scratch("psync", 4 << 20) else { return };
        let o = opts(p.to_str().unwrap(), IoEngine::Psync);
        let c = round_trip(&o, 1, 4096, 0);
        // One pread/pwrite per I/O (3 writes, 3 reads) plus the fdatasync.
        assert_eq!(c.syscalls, 7);
        let e = open(&o).unwrap().open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).err().unwrap();
        assert!(e.to_string().contains("use --iodepth 1"), "{e}");
        let b = KernelOptions { buffered: true, ..o };
        assert_eq!(open(&b).unwrap().name(), "block/psync-buffered");
        round_trip(&b, 1, 4096, 0);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn reading_past_the_end_is_a_short_transfer() {
        let Some(p) = scratch("short", 1 << 20) else { return };
        for engine in [IoEngine::IoUring, IoEngine::Libaio, IoEngine::Psync] {
            let t = open(&opts(p.to_str().unwrap(), engine)).unwrap();
            let mut q = t.open_queue(QueueParams { depth: 1, buf_size: 4096, batch: 0 }).unwrap();
            let past = t.geometry().blocks; // first block after the end
            assert_eq!(q.submit(&[Io { op: Op::Read, lba: past, blocks: 1, buf: 0, tag: 7 }]).unwrap(), 1);
            let mut d = [IoDone::default()];
            assert_eq!(q.wait(&mut d, 1).unwrap(), 1);
            assert_eq!(d[0], IoDone { tag: 7, status: IoStatus::Short { done: 0 } }, "{engine:?}");
        }
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn only_a_buffered_file_with_invalidate_asks_to_hear_of_each_pass() {
        let Some(p) = scratch("passes", 1 << 20) else { return };
        let o = opts(p.to_str().unwrap(), IoEngine::Psync);
        let wants = |o: &KernelOptions| open(o).unwrap().wants_passes();
        assert!(!wants(&o), "O_DIRECT: nothing to drop");
        assert!(!wants(&KernelOptions { buffered: true, invalidate: false, ..o.clone() }));
        assert!(wants(&KernelOptions { buffered: true, invalidate: true, ..o.clone() }));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn refuses_char_devices_and_empty_files() {
        let e = open(&opts("/dev/null", IoEngine::IoUring)).err().unwrap().to_string();
        assert!(e.contains("character device"), "{e}");
        let Some(p) = scratch("empty", 0) else { return };
        let e = open(&opts(p.to_str().unwrap(), IoEngine::Psync)).err().unwrap().to_string();
        assert!(e.contains("truncate -s"), "{e}");
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn an_io_larger_than_its_buffer_is_refused() {
        let Some(p) = scratch("big", 1 << 20) else { return };
        for engine in [IoEngine::IoUring, IoEngine::Libaio, IoEngine::Psync] {
            let t = open(&opts(p.to_str().unwrap(), engine)).unwrap();
            let mut q = t.open_queue(QueueParams { depth: 1, buf_size: 4096, batch: 0 }).unwrap();
            let blocks = (2 * 4096 / t.geometry().lba_size) as _;
            let e = q.submit(&[Io { op: Op::Read, lba: 0, blocks, buf: 0, tag: 0 }]).unwrap_err();
            assert!(e.to_string().contains("does not fit"), "{e}");
            assert_eq!(q.in_flight(), 0);
        }
        std::fs::remove_file(p).unwrap();
    }
}
