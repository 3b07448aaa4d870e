//! What the two kernel paths (passthru, block) share: the options, named as
//! fio's, opening device files with errors that say what to do, sysfs
//! facts about a namespace (block size, transfer limit, poll queues), the
//! I/O buffers, and the per-I/O slot table.
//!
//! Submodules hold the raw kernel interfaces, each with its own `unsafe`:
//! [`uring`] (io_uring rings, counted `io_uring_enter`), [`aio`] (the four
//! native AIO system calls), [`nvme_ioctl`] (the NVMe and block ioctls and
//! the `struct nvme_uring_cmd` mirror), [`sys`] (pread/pwrite/fdatasync).

pub mod aio;
pub mod block;
pub mod nvme_ioctl;
pub mod passthru;
pub mod sys;
pub mod uring;

use super::{BackendError, Scramble};
use nvme_hal::{DmaRegion, HostMemory};
use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Which kernel interface the block path uses, as fio's `--ioengine` names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoEngine {
    /// io_uring (the default).
    #[default]
    #[value(name = "io_uring")]
    IoUring,
    /// Linux native AIO (io_setup / io_submit / io_getevents).
    Libaio,
    /// pread / pwrite, one I/O at a time per thread.
    Psync,
    /// read / write at the file's position, after an lseek when the
    /// position is not where the I/O starts (fio's `sync` engine), one I/O
    /// at a time per thread.
    Sync,
}

impl IoEngine {
    /// The name fio uses.
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::IoUring => "io_uring",
            IoEngine::Libaio => "libaio",
            IoEngine::Psync => "psync",
            IoEngine::Sync => "sync",
        }
    }
}

/// How the libaio queue takes completions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AioReap {
    /// From the AIO ring in user memory, io_getevents only to wait
    /// (`bench`, compare: the fewest system calls).
    #[default]
    Ring,
    /// io_getevents every time, as fio's libaio engine (`nvme-bypass fio`).
    Getevents,
    /// From the ring only, spinning on it to wait: fio's `userspace_reap=1`
    /// with `iodepth_batch_complete_min=0`.
    Spin,
}

/// Kernel-path options (the default: io_uring, O_DIRECT, nothing registered, interrupts).
#[derive(Clone, Debug, Default)]
pub struct KernelOptions {
    /// Device path.
    pub device: String,
    /// Namespace id (passthru puts it in the command; block uses the device's).
    pub nsid: u32,
    /// Block path engine.
    pub ioengine: IoEngine,
    /// Register the buffers with io_uring (fio `fixedbufs`).
    pub fixedbufs: bool,
    /// Register the file with io_uring (fio `registerfiles`).
    pub registerfiles: bool,
    /// Polled completions: IORING_SETUP_IOPOLL (fio `hipri`); needs nvme poll queues.
    pub hipri: bool,
    /// Kernel submission thread: IORING_SETUP_SQPOLL (fio `sqthread_poll`).
    pub sqthread_poll: bool,
    /// CPU for the SQPOLL thread (fio `sqthread_poll_cpu`).
    pub sqthread_poll_cpu: Option<u32>,
    /// Buffered I/O instead of O_DIRECT (block path; fio `--direct=0`).
    pub buffered: bool,
    /// With `buffered`: drop the file's page cache at each pass over the
    /// region (fio's `invalidate=1`; `Target::new_pass`).
    pub invalidate: bool,
    /// Extra open flags of the block path: `O_SYNC` or `O_DSYNC` (fio's
    /// `sync=`), so that each write completes only once it is on stable
    /// media (the kernel sends it with FUA, or follows it with a flush);
    /// 0 for none.
    pub sync_open: i32,
    /// posix_fadvise advice given to the device or file once it is open
    /// (fio's `fadvise_hint`: `POSIX_FADV_RANDOM` for a random job,
    /// `POSIX_FADV_SEQUENTIAL` for a sequential one), or none.
    pub fadvise: Option<i32>,
    /// A regular file read and written through the page cache (`buffered`)
    /// is addressed in blocks of at most this many bytes (a power of two)
    /// rather than of its O_DIRECT alignment, when that is smaller, so
    /// sizes and offsets the alignment does not divide go, as fio's
    /// buffered I/O to a file takes them (`bs=2300`: 4-byte blocks). 0:
    /// the alignment.
    pub granule: u32,
    /// IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN.
    pub defer_taskrun: bool,
    /// The ring as fio's io_uring and io_uring_cmd engines set it up
    /// ([`RingConfig::fio_ring`](uring::RingConfig::fio_ring)): the fio
    /// drop-in's, so that the kernel does the same work for the same job.
    pub fio_ring: bool,
    /// Register the ring fd (IORING_REGISTER_RING_FDS).
    pub register_ring: bool,
    /// How libaio reaps.
    pub aio_reap: AioReap,
    /// Open the device or file read-only: the workload only reads (fio
    /// opens a read job's file O_RDONLY, so a read-only file serves it).
    pub read_only: bool,
}

impl KernelOptions {
    /// Options that only io_uring has, as (flag, set) pairs.
    fn uring_only(&self) -> [(&'static str, bool); 6] {
        [
            ("--fixedbufs", self.fixedbufs),
            ("--registerfiles", self.registerfiles),
            ("--sqthread-poll", self.sqthread_poll),
            ("--sqthread-poll-cpu", self.sqthread_poll_cpu.is_some()),
            ("--defer-taskrun", self.defer_taskrun),
            ("--register-ring", self.register_ring),
        ]
    }

    /// Refuse option combinations that cannot work, before touching anything.
    pub fn check(&self, passthru: bool) -> Result<(), BackendError> {
        if self.sqthread_poll_cpu.is_some() && !self.sqthread_poll {
            return Err(BackendError::Invalid("--sqthread-poll-cpu needs --sqthread-poll".into()));
        }
        if passthru {
            if self.ioengine != IoEngine::IoUring {
                return Err(BackendError::Invalid(format!(
                    "--ioengine {} applies to --backend block; passthrough always uses io_uring (IORING_OP_URING_CMD): drop --ioengine",
                    self.ioengine.name()
                )));
            }
            if self.buffered {
                return Err(BackendError::Invalid(
                    "--buffered applies to --backend block; passthrough commands go to the device, there is no page cache: drop --buffered"
                        .into(),
                ));
            }
            return Ok(());
        }
        if self.ioengine != IoEngine::IoUring {
            if let Some((flag, _)) = self.uring_only().into_iter().find(|(_, set)| *set) {
                return Err(BackendError::Invalid(format!("{flag} is an io_uring option; use --ioengine io_uring or drop {flag}")));
            }
            if self.hipri {
                return Err(BackendError::Invalid(format!(
                    "--hipri (polled completions) needs --ioengine io_uring; {} has no polled mode",
                    self.ioengine.name()
                )));
            }
        }
        if self.buffered && self.hipri {
            return Err(BackendError::Invalid(
                "--hipri polls for O_DIRECT completions; buffered I/O cannot be polled: drop --buffered or --hipri".into(),
            ));
        }
        Ok(())
    }

    /// The io_uring options in effect, for reports ("IOPOLL, fixed buffers").
    pub fn uring_desc(&self) -> String {
        let mut v = vec![];
        if self.hipri {
            v.push("IOPOLL (hipri)".to_string());
        }
        if self.sqthread_poll {
            v.push(match self.sqthread_poll_cpu {
                Some(c) => format!("SQPOLL on CPU {c}"),
                None => "SQPOLL".to_string(),
            });
        }
        if self.fixedbufs {
            v.push("fixed buffers".into());
        }
        if self.registerfiles {
            v.push("registered file".into());
        }
        if self.defer_taskrun {
            v.push("SINGLE_ISSUER + DEFER_TASKRUN".into());
        }
        if self.register_ring {
            v.push("registered ring fd".into());
        }
        if self.fio_ring {
            v.push("fio's ring flags (CQ ring of the depth, COOP_TASKRUN, SINGLE_ISSUER + DEFER_TASKRUN, each where the kernel takes it)".into());
        }
        if v.is_empty() {
            "interrupts, plain buffers and file".into()
        } else {
            v.join(", ")
        }
    }
}

/// What a device path turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A block device (/dev/nvme0n1).
    Block,
    /// A character device (/dev/ng0n1, /dev/nvme0).
    Char,
    /// A regular file (tests).
    Regular,
}

/// A stat of the device path, with errors that say what to do.
pub fn stat_device(path: &str) -> Result<(FileKind, std::fs::Metadata), BackendError> {
    let md = std::fs::metadata(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound if path.starts_with("/dev/") => {
                "list the NVMe devices with `ls /dev/nvme* /dev/ng*` (or `nvme list`)".to_string()
            }
            std::io::ErrorKind::NotFound => format!("to test on a file, create it first: `truncate -s 1G {path}`"),
            _ => String::new(),
        };
        BackendError::os(format!("cannot stat {path}"), hint, e)
    })?;
    let ft = md.file_type();
    let kind = if ft.is_block_device() {
        FileKind::Block
    } else if ft.is_char_device() {
        FileKind::Char
    } else if ft.is_file() {
        FileKind::Regular
    } else {
        return Err(BackendError::Invalid(format!("{path} is neither a device nor a regular file")));
    };
    Ok((kind, md))
}

/// Open `path` read-write (read-only when `write` is false) with `flags`
/// (O_DIRECT...). Errors name the cause and the fix: permissions (ng
/// devices are root-only), O_DIRECT on a filesystem without it, exclusive
/// holders.
pub fn open_rw(path: &str, kind: FileKind, flags: i32, write: bool) -> Result<File, BackendError> {
    std::fs::OpenOptions::new().read(true).write(write).custom_flags(flags).open(path).map_err(|e| {
        let ng = is_generic_name(&file_name(path));
        let hint = match (e.raw_os_error(), kind) {
            (Some(libc::EACCES | libc::EPERM), FileKind::Char) if ng => {
                "/dev/ng* devices are root-only by default (crw------- root root): run as root, or grant access with a udev rule such as KERNEL==\"ng*\", GROUP=\"disk\", MODE=\"0660\"".to_string()
            }
            (Some(libc::EACCES | libc::EPERM), FileKind::Block) => {
                "block devices need root or membership of their group (usually `disk`): run as root".to_string()
            }
            (Some(libc::EACCES | libc::EPERM), _) => "check the file's permissions".to_string(),
            (Some(libc::EINVAL), FileKind::Regular) if flags & libc::O_DIRECT != 0 => {
                "the filesystem holding it does not support O_DIRECT (tmpfs, for one): put the file on ext4 or xfs (e.g. under /var/tmp), or add --buffered".to_string()
            }
            (Some(libc::EBUSY), _) => "the device is held exclusively (mounted, or part of an md/dm device?): unmount or release it first".to_string(),
            (Some(libc::EROFS), _) => "the device is read-only".to_string(),
            (Some(libc::ENXIO | libc::ENODEV), _) => "the device is gone or not ready (controller reset or removed?): check `dmesg`".to_string(),
            _ => String::new(),
        };
        BackendError::os(format!("cannot open {path}"), hint, e)
    })
}

/// Last path component of `path` after resolving symlinks (/dev/disk/by-id/... -> nvme0n1).
pub fn file_name(path: &str) -> String {
    let p = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
    p.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// "ngXnY" -> Some((X, Y)).
pub fn parse_generic_name(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("ng")?;
    let (c, n) = rest.split_once('n')?;
    Some((c.parse().ok()?, n.parse().ok()?))
}

fn is_generic_name(name: &str) -> bool {
    parse_generic_name(name).is_some()
}

/// "nvmeXnY" (not a partition, not a hidden path device "nvmeXcZnY") -> Some((X, Y)).
pub fn parse_namespace_name(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("nvme")?;
    let (c, n) = rest.split_once('n')?;
    Some((c.parse().ok()?, n.parse().ok()?))
}

/// "nvmeX" -> Some(X).
pub fn parse_controller_name(name: &str) -> Option<u32> {
    name.strip_prefix("nvme")?.parse().ok()
}

/// The sysfs directory of a block device (/sys/dev/block/MAJ:MIN resolved);
/// for a partition, its disk's (where `queue/` lives).
pub fn sysfs_block_dir(md: &std::fs::Metadata) -> Option<PathBuf> {
    sysfs_block_dir_of(md.rdev())
}

/// The sysfs directory of block device number `rdev` (see [`sysfs_block_dir`]);
/// for a regular file, pass its `st_dev` to find the device its filesystem is on.
pub fn sysfs_block_dir_of(rdev: u64) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(format!("/sys/dev/block/{}:{}", libc::major(rdev), libc::minor(rdev))).ok()?;
    if dir.join("queue").is_dir() {
        Some(dir)
    } else {
        dir.parent().filter(|p| p.join("queue").is_dir()).map(Path::to_path_buf)
    }
}

/// Read a sysfs attribute, trimmed.
pub fn read_sys(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Read a sysfs attribute as a number.
pub fn read_sys_u64(path: impl AsRef<Path>) -> Option<u64> {
    read_sys(path)?.parse().ok()
}

/// The nvme driver's `poll_queues` module parameter, if the driver is there.
pub fn nvme_poll_queues_param() -> Option<u64> {
    read_sys_u64("/sys/module/nvme/parameters/poll_queues")
}

/// Check that polled I/O (IOPOLL) on the queue at `queue_dir`
/// (/sys/block/nvme0n1/queue) will really be polled: the queue must have
/// poll queues. Without them, depending on the kernel, polled block I/O
/// fails with EOPNOTSUPP (seen on 6.12 and 6.18), polled passthrough fails
/// with EINVAL (what fio users report) or quietly completes by interrupt
/// while the ring spins (seen on 6.12): a failure or a measurement of
/// nothing, so refuse up front. `what` names the path for the message.
pub fn require_poll_queues(queue_dir: Option<&Path>, what: &str) -> Result<String, BackendError> {
    let io_poll = queue_dir.and_then(|d| read_sys(d.join("io_poll")));
    let param = nvme_poll_queues_param();
    // A device of another driver (virtio, SCSI...) has its own poll
    // queues or none; the nvme module's parameter says nothing of it.
    let other = queue_dir.and_then(|d| std::fs::canonicalize(d).ok()).and_then(|d| {
        let disk = d.parent()?.file_name()?.to_string_lossy().into_owned();
        (!disk.starts_with("nvme")).then_some(disk)
    });
    if let (Some(disk), Some(v)) = (&other, io_poll.as_deref()) {
        if v != "1" {
            return Err(BackendError::Unsupported(format!(
                "--hipri needs a device with poll queues, and {what} is on {disk}, which is not an NVMe namespace and polls no queue here (queue/io_poll = {v}); drop --hipri"
            )));
        }
    }
    let fix = "load the nvme driver with poll queues (`modprobe -r nvme && modprobe nvme poll_queues=1`, or `nvme.poll_queues=1` on the kernel command line), or drop --hipri";
    match (io_poll.as_deref(), param) {
        (Some("1"), _) => Ok(format!("yes (queue/io_poll = 1, nvme poll_queues = {})", param.map(|p| p.to_string()).unwrap_or("?".into()))),
        (_, Some(p)) if p > 0 => Ok(format!("nvme poll_queues = {p} (queue/io_poll = {})", io_poll.as_deref().unwrap_or("?"))),
        (Some(v), p) => Err(BackendError::Unsupported(format!(
            "--hipri needs nvme poll queues, and {what} has none ({}/io_poll = {v}, nvme poll_queues = {}); {fix}",
            queue_dir.map(|d| d.display().to_string()).unwrap_or_default(),
            p.map(|p| p.to_string()).unwrap_or("not set".into())
        ))),
        (None, Some(0)) => {
            Err(BackendError::Unsupported(format!("--hipri needs nvme poll queues and the nvme driver has none (poll_queues = 0); {fix}")))
        }
        (None, _) => Ok("unknown (no queue/io_poll or nvme poll_queues in sysfs); trying".into()),
    }
}

/// `iodepth` buffers of `len` bytes each, page aligned (O_DIRECT needs at
/// least logical-block alignment), in one anonymous mapping. The kernel
/// reads and writes them by DMA while an I/O is in flight, so, as with the
/// userspace driver, we touch them only by copies, through [`DmaRegion`].
pub struct Buffers {
    mem: DmaRegion,
    stride: usize,
    len: usize,
    count: usize,
}

impl Buffers {
    /// Map `count` buffers of `len` bytes.
    pub fn new(count: usize, len: usize) -> Result<Self, BackendError> {
        let stride = len.max(1).next_multiple_of(4096);
        let mem = HostMemory::plain().map(stride * count)?;
        Ok(Buffers { mem, stride, len, count })
    }
    /// User address of buffer `i`.
    #[inline]
    pub fn addr(&self, i: u32) -> u64 {
        assert!((i as usize) < self.count, "buffer index {i} out of range (depth {})", self.count);
        self.mem.as_ptr() as u64 + (i as usize * self.stride) as u64
    }
    /// Bytes per buffer.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// Number of buffers.
    pub fn count(&self) -> usize {
        self.count
    }
    /// One iovec per buffer, for io_uring registration.
    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.count as u32).map(|i| libc::iovec { iov_base: self.addr(i) as *mut libc::c_void, iov_len: self.stride }).collect()
    }
    /// Copy `data` into buffer `i` at `off`.
    pub fn write(&self, i: u32, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.stride && (i as usize) < self.count);
        self.mem.copy_from(i as usize * self.stride + off, data);
    }
    /// Copy from buffer `i` at `off` into `out`.
    pub fn read(&self, i: u32, off: usize, out: &mut [u8]) {
        assert!(off + out.len() <= self.stride && (i as usize) < self.count);
        self.mem.copy_to(i as usize * self.stride + off, out);
    }
    /// fio's scramble of buffer `i`'s first `len` bytes for a write.
    pub fn scramble(&self, i: u32, len: usize, s: Scramble) {
        assert!(len <= self.stride && (i as usize) < self.count);
        s.to_region(&self.mem, i as usize * self.stride, len);
    }
}

/// Per-I/O bookkeeping: a slot per I/O in flight, named by the number that
/// travels through the kernel (io_uring user_data, iocb aio_data), holding
/// the caller's tag and the byte count asked for (to detect short transfers).
/// Preallocated: no allocation per I/O.
pub struct Slots {
    free: Vec<u32>,
    tag: Box<[u64]>,
    len: Box<[u32]>,
    busy: Box<[bool]>,
}

impl Slots {
    /// `n` free slots.
    pub fn new(n: usize) -> Self {
        Slots {
            free: (0..n as u32).rev().collect(),
            tag: vec![0; n].into_boxed_slice(),
            len: vec![0; n].into_boxed_slice(),
            busy: vec![false; n].into_boxed_slice(),
        }
    }
    /// Free slots.
    #[inline]
    pub fn available(&self) -> usize {
        self.free.len()
    }
    /// Slots in use (I/Os in flight).
    #[inline]
    pub fn in_use(&self) -> usize {
        self.tag.len() - self.free.len()
    }
    /// Take a slot for an I/O.
    #[inline]
    pub fn take(&mut self, tag: u64, len: u32) -> Option<u32> {
        let s = self.free.pop()?;
        self.tag[s as usize] = tag;
        self.len[s as usize] = len;
        self.busy[s as usize] = true;
        Some(s)
    }
    /// Give back the most recently taken slots that were not submitted after all.
    #[inline]
    pub fn untake(&mut self, slot: u32) {
        self.busy[slot as usize] = false;
        self.free.push(slot);
    }
    /// Complete a slot: (tag, len). None for a number that is not in flight
    /// (a broken kernel or a bug here): the caller counts it as rejected.
    #[inline]
    pub fn complete(&mut self, slot: u64) -> Option<(u64, u32)> {
        let s = usize::try_from(slot).ok().filter(|&s| s < self.busy.len() && self.busy[s])?;
        self.busy[s] = false;
        self.free.push(s as u32);
        Some((self.tag[s], self.len[s]))
    }
}

/// The outcome of a read/write that returns a byte count (io_uring on
/// files and block devices, AIO, pread/pwrite).
#[inline]
pub fn byte_count_status(res: i64, asked: u32) -> super::IoStatus {
    if res < 0 {
        super::IoStatus::Errno(res as i32)
    } else if res as u64 == asked as u64 {
        super::IoStatus::Ok
    } else {
        super::IoStatus::Short { done: res as u32 }
    }
}

/// Check one I/O against the queue's buffers before its address goes to the
/// kernel (which would otherwise read or write past the buffer).
#[inline]
pub fn check_io(io: &super::Io, lba_size: u32, bufs: &Buffers) -> Result<u32, BackendError> {
    if io.op == super::Op::Flush {
        return Ok(0);
    }
    let len = io.blocks as u64 * lba_size as u64;
    if io.blocks == 0 || len > bufs.len() as u64 || io.buf as usize >= bufs.count() {
        return Err(BackendError::Invalid(format!(
            "I/O of {} blocks into buffer {} does not fit the queue's {} buffers of {} bytes",
            io.blocks,
            io.buf,
            bufs.count(),
            bufs.len()
        )));
    }
    Ok(len as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> KernelOptions {
        KernelOptions { device: "/dev/null".into(), nsid: 1, ioengine: IoEngine::IoUring, ..Default::default() }
    }

    #[test]
    fn option_combinations() {
        assert!(opts().check(true).is_ok());
        assert!(opts().check(false).is_ok());
        let e = KernelOptions { ioengine: IoEngine::Libaio, fixedbufs: true, ..opts() }.check(false).unwrap_err();
        assert!(e.to_string().contains("--fixedbufs is an io_uring option"), "{e}");
        let e = KernelOptions { ioengine: IoEngine::Psync, hipri: true, ..opts() }.check(false).unwrap_err();
        assert!(e.to_string().contains("needs --ioengine io_uring"), "{e}");
        let e = KernelOptions { buffered: true, ..opts() }.check(true).unwrap_err();
        assert!(e.to_string().contains("no page cache"), "{e}");
        let e = KernelOptions { ioengine: IoEngine::Libaio, ..opts() }.check(true).unwrap_err();
        assert!(e.to_string().contains("passthrough always uses io_uring"), "{e}");
        let e = KernelOptions { sqthread_poll_cpu: Some(0), ..opts() }.check(false).unwrap_err();
        assert!(e.to_string().contains("needs --sqthread-poll"), "{e}");
        assert!(KernelOptions { buffered: true, hipri: true, ..opts() }.check(false).is_err());
    }

    #[test]
    fn device_names() {
        assert_eq!(parse_generic_name("ng0n1"), Some((0, 1)));
        assert_eq!(parse_generic_name("ng12n3"), Some((12, 3)));
        assert_eq!(parse_generic_name("nvme0n1"), None);
        assert_eq!(parse_namespace_name("nvme0n1"), Some((0, 1)));
        assert_eq!(parse_namespace_name("nvme0n1p1"), None);
        assert_eq!(parse_namespace_name("nvme0c0n1"), None);
        assert_eq!(parse_controller_name("nvme3"), Some(3));
        assert_eq!(parse_controller_name("nvme0n1"), None);
    }

    #[test]
    fn slots_track_tags_and_lengths() {
        let mut s = Slots::new(2);
        let a = s.take(100, 4096).unwrap();
        let b = s.take(200, 512).unwrap();
        assert!(s.take(300, 1).is_none());
        assert_eq!(s.in_use(), 2);
        assert_eq!(s.complete(b as u64), Some((200, 512)));
        assert_eq!(s.complete(b as u64), None, "completing twice is rejected");
        assert_eq!(s.complete(99), None);
        assert_eq!(s.complete(a as u64), Some((100, 4096)));
        assert_eq!(s.available(), 2);
    }

    #[test]
    fn byte_counts() {
        use crate::backend::IoStatus;
        assert_eq!(byte_count_status(4096, 4096), IoStatus::Ok);
        assert_eq!(byte_count_status(512, 4096), IoStatus::Short { done: 512 });
        assert_eq!(byte_count_status(-5, 4096), IoStatus::Errno(-5));
    }

    #[test]
    fn buffers_are_page_aligned_and_copy() {
        let b = Buffers::new(3, 6000).unwrap();
        for i in 0..3 {
            assert_eq!(b.addr(i) % 4096, 0);
        }
        assert_eq!(b.addr(1) - b.addr(0), 8192);
        b.write(2, 10, b"abc");
        let mut out = [0u8; 3];
        b.read(2, 10, &mut out);
        assert_eq!(&out, b"abc");
        assert_eq!(b.iovecs().len(), 3);
    }
}
