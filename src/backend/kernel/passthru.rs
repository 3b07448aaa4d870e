//! The `passthru` backend: NVMe commands sent through io_uring to the
//! namespace's generic char device (/dev/ngXnY), skipping the block layer
//! (bio, request merging, the I/O scheduler) but not the nvme driver: the
//! kernel still allocates a request, builds PRPs, rings the doorbell and
//! takes the interrupt (or polls, with --hipri).
//!
//! Mechanics, as fio's `io_uring_cmd` engine and t/io_uring -u do them:
//! the ring is created with 128-byte SQEs and 32-byte CQEs
//! (IORING_SETUP_SQE128 | CQE32); each I/O is one IORING_OP_URING_CMD entry
//! with `cmd_op = NVME_URING_CMD_IO` and a `struct nvme_uring_cmd` in the
//! SQE's 80-byte command area, holding the Read/Write built by the same
//! `nvme_spec::cmd::ReadWrite` builder the userspace driver uses. The
//! completion's `res` is 0, a positive NVMe status, or a negative errno;
//! the big CQE's extra 16 bytes carry the command's result dwords.

use super::nvme_ioctl::{self, NvmeUringCmd, PassthruResult, NVME_URING_CMD_IO};
use super::uring::{self, Codec, FileRef, Ring, RingConfig, UringQueue};
use super::{
    file_name, open_rw, parse_controller_name, parse_generic_name, parse_namespace_name, read_sys_u64, require_poll_queues, stat_device,
    Buffers, FileKind, KernelOptions,
};
use crate::backend::namespace::NamespaceInfo;
use crate::backend::{BackendError, Geometry, Io, IoQueue, IoStatus, Op, QueueParams, Target};
use io_uring::{cqueue, opcode, squeue, types};
use nvme_spec::cmd::{self, Identify, ReadWrite};
use nvme_spec::identify::{csi, IdentifyController, IdentifyNamespace, NsDescriptors, IDENTIFY_SIZE};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What passthrough needs from io_uring, for messages.
const NEED: &str = "NVMe passthrough over io_uring needs Linux 5.19 or newer (6.1+ for --fixedbufs)";

/// A namespace opened for passthrough: its generic char device, shared by
/// every thread's ring.
pub struct PassthruTarget {
    file: Arc<File>,
    opts: KernelOptions,
    geometry: Geometry,
    facts: Vec<(String, String)>,
}

/// Check that this kernel can do io_uring passthrough at all: a ring with
/// SQE128|CQE32, and IORING_OP_URING_CMD in the probe.
pub fn probe() -> Result<(), BackendError> {
    let ring =
        Ring::<squeue::Entry128, cqueue::Entry32>::new(RingConfig { entries: 2, ..Default::default() }, "passthrough ring (SQE128|CQE32)")?;
    ring.require_ops(&[(uring::OP_URING_CMD, "IORING_OP_URING_CMD")], NEED)
}

/// Why `path` is not a generic char device, and which one to use instead.
fn not_generic(path: &str, kind: FileKind, name: &str) -> BackendError {
    let (what, suggestion) = match (kind, parse_namespace_name(name), parse_controller_name(name)) {
        (FileKind::Block, Some((c, n)), _) => {
            ("a block device".to_string(), format!("use --device /dev/ng{c}n{n} (the same namespace), or keep {path} with --backend block"))
        }
        (FileKind::Block, None, _) => ("a block device".into(), "use the namespace's /dev/ngXnY, or keep it with --backend block".into()),
        (FileKind::Char, _, Some(c)) => (
            format!("the controller's char device (nvme{c})"),
            format!("I/O goes to a namespace: use --device /dev/ng{c}n1 (ls /dev/ng{c}n*)"),
        ),
        (FileKind::Regular, ..) => ("a regular file".into(), "use --backend block for files".into()),
        _ => ("not an NVMe generic device".into(), "ls /dev/ng* lists them".into()),
    };
    BackendError::Invalid(format!("io_uring_cmd needs the generic char device /dev/ngXnY; {path} is {what}: {suggestion}"))
}

/// Read Identify Controller and Identify Namespace `nsid` through the
/// admin passthrough ioctl.
fn identify_pages(file: &File, nsid: u32) -> Result<(IdentifyController, IdentifyNamespace), nvme_ioctl::PassthruError> {
    let ctrl = IdentifyController::parse(&*identify_page(file, &Identify::controller())?);
    let ns = IdentifyNamespace::parse(&*identify_page(file, &Identify::namespace(nsid))?);
    Ok((ctrl, ns))
}

/// One Identify page through the admin passthrough ioctl.
fn identify_page(file: &File, sqe: &nvme_spec::Sqe) -> Result<Box<[u8; IDENTIFY_SIZE]>, nvme_ioctl::PassthruError> {
    let mut page = Box::new([0u8; IDENTIFY_SIZE]);
    nvme_ioctl::admin_cmd_in(file.as_fd(), sqe, &mut page[..])?;
    Ok(page)
}

/// The command set of namespace `nsid` (Identify CNS 03h); NVM when the
/// controller does not report one or refuses the command (before NVMe 1.3).
fn command_set(file: &File, nsid: u32) -> u8 {
    identify_page(file, &Identify::ns_descriptors(nsid)).map(|p| NsDescriptors::parse(&p).command_set()).unwrap_or(csi::NVM)
}

/// The active namespace IDs (Identify CNS 02h).
fn active_namespaces(file: &File) -> Result<Vec<u32>, nvme_ioctl::PassthruError> {
    let page = identify_page(file, &Identify::active_namespaces(0))?;
    Ok(page.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).take_while(|&n| n != 0).collect())
}

/// Largest transfer the kernel accepts for one passthrough command: the
/// queue's hardware limit, and the segment limit (our buffers are
/// virtually contiguous, physically page by page).
fn max_transfer(queue: &Path) -> Option<usize> {
    let hw = read_sys_u64(queue.join("max_hw_sectors_kb"))? as usize * 1024;
    let segs = read_sys_u64(queue.join("max_segments")).map(|s| s as usize * 4096).unwrap_or(usize::MAX);
    Some(hw.min(segs))
}

/// Open the generic char device for passthrough.
pub fn open(o: &KernelOptions) -> Result<Box<dyn Target>, BackendError> {
    o.check(true)?;
    let (kind, _) = stat_device(&o.device)?;
    let name = file_name(&o.device);
    let (c, n) = match (kind, parse_generic_name(&name)) {
        (FileKind::Char, Some(cn)) => cn,
        _ => return Err(not_generic(&o.device, kind, &name)),
    };
    probe()?;
    let file = open_rw(&o.device, kind, 0, true)?;
    let nsid = nvme_ioctl::namespace_id(file.as_fd()).map_err(|e| {
        BackendError::os(format!("NVME_IOCTL_ID on {}", o.device), "is it an NVMe namespace's generic device (/dev/ngXnY)?", e)
    })?;
    if o.nsid != 1 && o.nsid != nsid {
        return Err(BackendError::Invalid(format!(
            "--nsid {} does not match {} (namespace {nsid}); the kernel refuses commands for another namespace on it: drop --nsid or use /dev/ng{c}n{}",
            o.nsid, o.device, o.nsid
        )));
    }
    // The block device of the same namespace holds the queue limits in sysfs.
    let sys = PathBuf::from(format!("/sys/block/nvme{c}n{n}"));
    let queue = sys.join("queue");
    let mut facts = vec![("device".to_string(), format!("{} (generic char device of nvme{c}n{n}, namespace {nsid})", o.device))];

    let (lba_size, blocks) = match identify_pages(&file, nsid) {
        Ok((ctrl, ns)) => {
            if ns.is_inactive() {
                return Err(BackendError::Invalid(format!("namespace {nsid} is not active (Identify Namespace is all zero)")));
            }
            if let Some(why) = crate::backend::namespace::unusable(nsid, &ns, command_set(&file, nsid)) {
                return Err(BackendError::Unsupported(why));
            }
            facts.push(("model".into(), ctrl.mn.clone()));
            facts.push(("serial".into(), ctrl.sn.clone()));
            facts.push(("firmware".into(), ctrl.fr.clone()));
            (ns.lba_size(), ns.nsze)
        }
        Err(e) => {
            // Identify needs CAP_SYS_ADMIN; sysfs has the same geometry.
            let Some(lba) = read_sys_u64(queue.join("logical_block_size")) else {
                return Err(BackendError::NoGeometry { nsid, sysfs: queue, source: e });
            };
            let lba = lba as u32;
            let sectors = read_sys_u64(sys.join("size")).unwrap_or(0);
            facts.push(("geometry".into(), format!("from sysfs (Identify Namespace failed: {e})")));
            (lba, sectors * 512 / lba as u64)
        }
    };
    if blocks == 0 {
        return Err(BackendError::Invalid(format!("namespace {nsid} on {} has no blocks", o.device)));
    }
    let max = max_transfer(&queue).unwrap_or(128 << 10);
    let geometry = Geometry { nsid, lba_size, blocks, max_transfer: max };
    facts.push(("namespace".into(), format!("{blocks} blocks of {lba_size} bytes = {} bytes", blocks * lba_size as u64)));
    facts.push(("max transfer".into(), format!("{} KiB (max_hw_sectors_kb, max_segments)", max >> 10)));
    facts.push(("kernel path".into(), "io_uring IORING_OP_URING_CMD (NVME_URING_CMD_IO), SQE128/CQE32 rings".into()));
    facts.push(("io_uring".into(), o.uring_desc()));
    if o.hipri {
        facts.push(("poll queues".into(), require_poll_queues(Some(&queue), &o.device)?));
    }
    facts.push(("kernel".into(), uring::kernel_release()));
    Ok(Box::new(PassthruTarget { file: Arc::new(file), opts: o.clone(), geometry, facts }))
}

/// Identify Controller and namespaces through the kernel (for `info`):
/// `device` is /dev/ngXnY or /dev/nvmeXnY (that namespace), or the
/// controller's /dev/nvmeX (every active namespace, or only `nsid`).
/// Needs CAP_SYS_ADMIN.
pub fn identify(device: &str, nsid: Option<u32>) -> Result<(IdentifyController, Vec<NamespaceInfo>), BackendError> {
    let (kind, _) = stat_device(device)?;
    let name = file_name(device);
    let file = std::fs::OpenOptions::new().read(true).open(device).map_err(|e| {
        let hint = if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
            "NVMe devices are root-only by default: run as root"
        } else {
            ""
        };
        BackendError::os(format!("cannot open {device}"), hint, e)
    })?;
    let admin_err = |what: String| {
        move |e| match e {
            nvme_ioctl::PassthruError::Os(e) => BackendError::os(
                format!("{what} through NVME_IOCTL_ADMIN_CMD on {device}"),
                "admin commands need CAP_SYS_ADMIN: run as root",
                e,
            ),
            source @ nvme_ioctl::PassthruError::Nvme(_) => BackendError::Admin { what, device: device.to_string(), source },
        }
    };
    let nsids = match (kind, parse_controller_name(&name)) {
        (FileKind::Char, Some(_)) => match nsid {
            Some(n) => vec![n],
            None => active_namespaces(&file).map_err(admin_err("Identify (active namespace list)".into()))?,
        },
        (FileKind::Char | FileKind::Block, None) => vec![nvme_ioctl::namespace_id(file.as_fd())
            .map_err(|e| BackendError::os(format!("NVME_IOCTL_ID on {device}"), "use /dev/nvmeX, /dev/nvmeXnY or /dev/ngXnY", e))?],
        _ => return Err(BackendError::Invalid(format!("{device} is not an NVMe device; use /dev/nvmeX, /dev/nvmeXnY or /dev/ngXnY"))),
    };
    let ctrl = IdentifyController::parse(&*identify_page(&file, &Identify::controller()).map_err(admin_err("Identify Controller".into()))?);
    let mut namespaces = vec![];
    for n in nsids {
        let ns = IdentifyNamespace::parse(&*identify_page(&file, &Identify::namespace(n)).map_err(admin_err(format!("Identify (namespace {n})")))?);
        if ns.is_inactive() {
            return Err(BackendError::Invalid(format!("namespace {n} is not active on {device} (Identify Namespace is all zero); `nvme-bypass info --device {device}` without --nsid lists the active ones")));
        }
        let descriptors = NsDescriptors { csi: Some(command_set(&file, n)), ..Default::default() };
        namespaces.push(NamespaceInfo::new(n, ns, &descriptors));
    }
    Ok((ctrl, namespaces))
}

impl Target for PassthruTarget {
    fn name(&self) -> String {
        "passthru".into()
    }
    fn geometry(&self) -> Geometry {
        self.geometry
    }
    fn polled(&self) -> bool {
        self.opts.hipri || self.opts.sqthread_poll
    }
    fn describe(&self) -> Vec<(String, String)> {
        self.facts.clone()
    }
    fn open_queue(&self, p: QueueParams) -> Result<Box<dyn IoQueue>, BackendError> {
        if p.buf_size > self.geometry.max_transfer {
            return Err(BackendError::Invalid(format!(
                "--bs {} is above the largest passthrough transfer of {} ({} bytes); use --bs {} or less",
                p.buf_size, self.opts.device, self.geometry.max_transfer, self.geometry.max_transfer
            )));
        }
        let o = &self.opts;
        let cfg = RingConfig::for_options(o, p.depth);
        let ring = Ring::<squeue::Entry128, cqueue::Entry32>::new(cfg, "passthrough ring (SQE128|CQE32)")?;
        let fd = if o.registerfiles {
            ring.register_file(self.file.as_raw_fd())?;
            FileRef::Fixed
        } else {
            FileRef::Fd(self.file.as_raw_fd())
        };
        let codec = PassthruCodec { fd, nsid: self.geometry.nsid, fixedbufs: o.fixedbufs };
        let bufs = Buffers::new(p.depth, p.buf_size)?;
        Ok(Box::new(UringQueue::new(ring, codec, bufs, o.fixedbufs, self.geometry.lba_size, p.batch, self.file.clone())?))
    }
}

/// Read/Write/Flush as IORING_OP_URING_CMD entries.
struct PassthruCodec {
    fd: FileRef,
    nsid: u32,
    fixedbufs: bool,
}

impl Codec for PassthruCodec {
    type Sqe = squeue::Entry128;
    type Cqe = cqueue::Entry32;

    #[inline]
    fn encode(&self, io: &Io, slot: u32, addr: u64, len: u32) -> squeue::Entry128 {
        let (sqe, addr) = match io.op {
            Op::Read => (ReadWrite::read(self.nsid, io.lba, io.blocks).build(), addr),
            Op::Write => (ReadWrite::write(self.nsid, io.lba, io.blocks).build(), addr),
            Op::Flush => (cmd::flush(self.nsid), 0),
        };
        let c = NvmeUringCmd::from_sqe(&sqe, addr, len).to_cmd80();
        let mut e = match self.fd {
            FileRef::Fd(fd) => opcode::UringCmd80::new(types::Fd(fd), NVME_URING_CMD_IO),
            FileRef::Fixed => opcode::UringCmd80::new(types::Fixed(0), NVME_URING_CMD_IO),
        }
        .cmd(c);
        if self.fixedbufs && len > 0 {
            // IORING_URING_CMD_FIXED: the kernel uses the registered buffer's
            // pinned pages instead of mapping `addr` per I/O.
            e = e.buf_index(Some(io.buf as u16));
        }
        e.build().user_data(slot as u64)
    }

    #[inline]
    fn user_data(c: &cqueue::Entry32) -> u64 {
        c.user_data()
    }

    #[inline]
    fn status(c: &cqueue::Entry32, _asked: u32) -> IoStatus {
        match PassthruResult::decode(c.result()) {
            PassthruResult::Ok => IoStatus::Ok,
            PassthruResult::Nvme(s) => IoStatus::Nvme(s),
            PassthruResult::Errno(e) => IoStatus::Errno(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::kernel::IoEngine;

    fn opts(device: &str) -> KernelOptions {
        KernelOptions { device: device.into(), nsid: 1, ioengine: IoEngine::IoUring, ..Default::default() }
    }

    fn err(o: KernelOptions) -> String {
        open(&o).err().expect("open must fail").to_string()
    }

    #[test]
    fn refuses_what_is_not_a_generic_device() {
        let f = std::env::temp_dir().join(format!("nvb-passthru-{}", std::process::id()));
        std::fs::write(&f, [0u8; 4096]).unwrap();
        let e = err(opts(f.to_str().unwrap()));
        std::fs::remove_file(&f).unwrap();
        assert!(e.contains("io_uring_cmd needs the generic char device /dev/ngXnY"), "{e}");
        assert!(e.contains("regular file"), "{e}");
        let e = err(opts("/dev/null"));
        assert!(e.contains("io_uring_cmd needs the generic char device /dev/ngXnY"), "{e}");
        let e = err(opts("/dev/nvme-bypass-no-such-device"));
        assert!(e.contains("ls /dev/nvme*"), "{e}");
    }

    #[test]
    fn block_device_names_its_generic_twin() {
        let e = not_generic("/dev/nvme0n1", FileKind::Block, "nvme0n1").to_string();
        assert_eq!(
            e,
            "io_uring_cmd needs the generic char device /dev/ngXnY; /dev/nvme0n1 is a block device: use --device /dev/ng0n1 (the same namespace), or keep /dev/nvme0n1 with --backend block"
        );
        let e = not_generic("/dev/nvme2", FileKind::Char, "nvme2").to_string();
        assert!(e.contains("/dev/ng2n1"), "{e}");
    }

    #[test]
    fn option_errors_come_first() {
        let e = err(KernelOptions { buffered: true, ..opts("/dev/ng0n1") });
        assert!(e.contains("--buffered"), "{e}");
    }

    #[test]
    fn kernel_probe_reports_clearly() {
        // On a kernel with passthrough support this passes; elsewhere the
        // error must name what is missing.
        match probe() {
            Ok(()) => {}
            Err(e) => {
                let m = e.to_string();
                assert!(m.contains("io_uring") && (m.contains("5.19") || m.contains("disabled") || m.contains("not available")), "{m}");
            }
        }
    }

    #[test]
    fn encodes_a_uring_cmd() {
        let c = PassthruCodec { fd: FileRef::Fd(7), nsid: 1, fixedbufs: true };
        let io = Io { op: Op::Read, lba: 5, blocks: 8, buf: 3, tag: 99 };
        let e = c.encode(&io, 2, 0x1000, 4096);
        let d = format!("{e:?}");
        assert!(d.contains("user_data: 2"), "{d}");
        // The status of completions is decoded as the kernel encodes it.
        assert_eq!(PassthruResult::decode(0), PassthruResult::Ok);
    }
}
