//! A mirror of the Linux NVMe user API (`include/uapi/linux/nvme_ioctl.h`):
//! the passthrough command structures, their ioctl numbers computed as the
//! kernel's `_IO`/`_IOWR` macros compute them, and the three ioctls this
//! tool makes (namespace id, admin command).
//!
//! The structures are the kernel's wire format: `#[repr(C)]`, naturally
//! aligned (no `packed`), and size/offset-checked at compile time. The NVMe
//! fields themselves come from [`nvme_spec::Sqe`], built by the same
//! command builders the userspace driver uses; [`NvmeUringCmd::from_sqe`]
//! copies them over.

use nvme_spec::Sqe;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The ioctl "type" letter of the NVMe driver.
const NVME_IOCTL_TYPE: u32 = b'N' as u32;

/// `_IOC(dir, type, nr, size)` from `include/uapi/asm-generic/ioctl.h`
/// (x86-64 and arm64 use the generic layout: nr 8 bits, type 8, size 14, dir 2).
const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    const NRSHIFT: u32 = 0;
    const TYPESHIFT: u32 = 8;
    const SIZESHIFT: u32 = 16;
    const DIRSHIFT: u32 = 30;
    assert!(size < 1 << 14);
    dir << DIRSHIFT | ty << TYPESHIFT | nr << NRSHIFT | (size as u32) << SIZESHIFT
}
const IOC_NONE: u32 = 0;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `struct nvme_uring_cmd`: the 72-byte payload of an `IORING_OP_URING_CMD`
/// entry on `/dev/ngXnY` (it lives in the second half of a 128-byte SQE).
/// Linux 5.19+, `include/uapi/linux/nvme_ioctl.h`.
///
/// The kernel builds the NVMe command from it: opcode, flags, nsid, cdw2-3
/// and cdw10-15 are copied into the submission entry; `addr`/`data_len`
/// describe the data buffer in our address space (the kernel maps it, or
/// uses the registered buffer when the SQE carries `IORING_URING_CMD_FIXED`);
/// the command identifier and PRPs are the kernel's business.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NvmeUringCmd {
    /// NVMe opcode (CDW0 bits 7:0).
    pub opcode: u8,
    /// CDW0 bits 15:8 (fused operation, PSDT); the kernel rejects non-zero.
    pub flags: u8,
    /// Reserved.
    pub rsvd1: u16,
    /// Namespace id; must match the namespace of the device file.
    pub nsid: u32,
    /// Command Dword 2.
    pub cdw2: u32,
    /// Command Dword 3.
    pub cdw3: u32,
    /// User address of the metadata buffer (0: none).
    pub metadata: u64,
    /// User address of the data buffer.
    pub addr: u64,
    /// Length of the metadata buffer in bytes.
    pub metadata_len: u32,
    /// Length of the data buffer in bytes.
    pub data_len: u32,
    /// Command Dword 10.
    pub cdw10: u32,
    /// Command Dword 11.
    pub cdw11: u32,
    /// Command Dword 12.
    pub cdw12: u32,
    /// Command Dword 13.
    pub cdw13: u32,
    /// Command Dword 14.
    pub cdw14: u32,
    /// Command Dword 15.
    pub cdw15: u32,
    /// Command timeout in milliseconds (0: the driver's default).
    pub timeout_ms: u32,
    /// Reserved.
    pub rsvd2: u32,
}

const _: () = assert!(std::mem::size_of::<NvmeUringCmd>() == 72);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, nsid) == 4);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, metadata) == 16);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, addr) == 24);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, metadata_len) == 32);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, data_len) == 36);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, cdw10) == 40);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, cdw15) == 60);
const _: () = assert!(std::mem::offset_of!(NvmeUringCmd, timeout_ms) == 64);

/// `NVME_URING_CMD_IO`: `_IOWR('N', 0x80, struct nvme_uring_cmd)`, the
/// `cmd_op` of an I/O command sent through io_uring (0xc0484e80).
pub const NVME_URING_CMD_IO: u32 = ioc(IOC_READ | IOC_WRITE, NVME_IOCTL_TYPE, 0x80, std::mem::size_of::<NvmeUringCmd>());

impl NvmeUringCmd {
    /// The fields of an NVMe command built by `nvme_spec::cmd`, with the
    /// data buffer at user address `addr`, `data_len` bytes long. The CID
    /// and PRPs of `sqe` are ignored (the kernel owns them).
    #[inline]
    pub fn from_sqe(sqe: &Sqe, addr: u64, data_len: u32) -> Self {
        NvmeUringCmd {
            opcode: sqe.opcode(),
            flags: 0,
            rsvd1: 0,
            nsid: sqe.nsid,
            cdw2: sqe.cdw2,
            cdw3: sqe.cdw3,
            metadata: 0,
            addr,
            metadata_len: 0,
            data_len,
            cdw10: sqe.cdw10,
            cdw11: sqe.cdw11,
            cdw12: sqe.cdw12,
            cdw13: sqe.cdw13,
            cdw14: sqe.cdw14,
            cdw15: sqe.cdw15,
            timeout_ms: 0,
            rsvd2: 0,
        }
    }

    /// The 80-byte command area of a 128-byte SQE (`sqe->cmd`), this
    /// structure in its first 72 bytes, the rest zero. Field by field, in
    /// little-endian order, which is the in-memory layout on the hosts the
    /// kernel's NVMe driver runs on.
    #[inline]
    pub fn to_cmd80(self) -> [u8; 80] {
        let mut b = [0u8; 80];
        b[0] = self.opcode;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.rsvd1.to_le_bytes());
        let dwords = [(4, self.nsid), (8, self.cdw2), (12, self.cdw3)];
        for (o, v) in dwords {
            b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        }
        b[16..24].copy_from_slice(&self.metadata.to_le_bytes());
        b[24..32].copy_from_slice(&self.addr.to_le_bytes());
        let rest = [
            self.metadata_len,
            self.data_len,
            self.cdw10,
            self.cdw11,
            self.cdw12,
            self.cdw13,
            self.cdw14,
            self.cdw15,
            self.timeout_ms,
            self.rsvd2,
        ];
        for (i, v) in rest.iter().enumerate() {
            let o = 32 + 4 * i;
            b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

/// `struct nvme_passthru_cmd` (alias `nvme_admin_cmd`): the argument of
/// `NVME_IOCTL_ADMIN_CMD`. The same layout as [`NvmeUringCmd`] except the
/// last dword, where the kernel returns the completion's Dword 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NvmePassthruCmd {
    /// NVMe opcode.
    pub opcode: u8,
    /// CDW0 bits 15:8.
    pub flags: u8,
    /// Reserved.
    pub rsvd1: u16,
    /// Namespace id.
    pub nsid: u32,
    /// Command Dword 2.
    pub cdw2: u32,
    /// Command Dword 3.
    pub cdw3: u32,
    /// User address of the metadata buffer.
    pub metadata: u64,
    /// User address of the data buffer.
    pub addr: u64,
    /// Metadata length in bytes.
    pub metadata_len: u32,
    /// Data length in bytes.
    pub data_len: u32,
    /// Command Dword 10.
    pub cdw10: u32,
    /// Command Dword 11.
    pub cdw11: u32,
    /// Command Dword 12.
    pub cdw12: u32,
    /// Command Dword 13.
    pub cdw13: u32,
    /// Command Dword 14.
    pub cdw14: u32,
    /// Command Dword 15.
    pub cdw15: u32,
    /// Timeout in milliseconds (0: default).
    pub timeout_ms: u32,
    /// Out: the completion's Dword 0.
    pub result: u32,
}

const _: () = assert!(std::mem::size_of::<NvmePassthruCmd>() == 72);
const _: () = assert!(std::mem::offset_of!(NvmePassthruCmd, addr) == 24);
const _: () = assert!(std::mem::offset_of!(NvmePassthruCmd, cdw10) == 40);
const _: () = assert!(std::mem::offset_of!(NvmePassthruCmd, result) == 68);

/// `NVME_IOCTL_ID`: `_IO('N', 0x40)`; returns the namespace id of a namespace device.
pub const NVME_IOCTL_ID: u32 = ioc(IOC_NONE, NVME_IOCTL_TYPE, 0x40, 0);
/// `NVME_IOCTL_ADMIN_CMD`: `_IOWR('N', 0x41, struct nvme_admin_cmd)`.
pub const NVME_IOCTL_ADMIN_CMD: u32 = ioc(IOC_READ | IOC_WRITE, NVME_IOCTL_TYPE, 0x41, std::mem::size_of::<NvmePassthruCmd>());

/// `BLKSSZGET`: `_IO(0x12, 104)`, the logical block size of a block device (int).
pub const BLKSSZGET: u32 = ioc(IOC_NONE, 0x12, 104, 0);
/// `BLKGETSIZE64`: `_IOR(0x12, 114, size_t)`, the size of a block device in bytes (u64).
pub const BLKGETSIZE64: u32 = ioc(IOC_READ, 0x12, 114, std::mem::size_of::<usize>());

/// How the kernel reports the outcome of an NVMe passthrough command (the
/// ioctl's return value, or `cqe->res` of a uring command): 0 is success,
/// a positive value is the NVMe status field without its phase bit
/// (`nvme_req(req)->status`: SC in bits 7:0, SCT 10:8, CRD 12:11, M 13,
/// DNR 14), a negative value is an errno (transport, timeout, permission).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassthruResult {
    /// The command succeeded.
    Ok,
    /// The controller returned an error status.
    Nvme(nvme_spec::Status),
    /// The kernel failed the command: negative errno.
    Errno(i32),
}

impl PassthruResult {
    /// Decode a return value as the kernel's NVMe driver produces it.
    #[inline]
    pub fn decode(res: i32) -> Self {
        match res {
            0 => PassthruResult::Ok,
            r if r > 0 => {
                // The kernel's value is the CQE status field shifted right by
                // one (the phase tag dropped): shift it back to decode it with
                // the same bitfield as a completion entry.
                let field = nvme_spec::CqeStatus::from_bits(((r as u32 & 0x7fff) << 1) as u16);
                PassthruResult::Nvme(nvme_spec::Status::from_cqe_status(field))
            }
            r => PassthruResult::Errno(r),
        }
    }
}

/// `ioctl(fd, NVME_IOCTL_ID)`: the namespace id of an NVMe namespace
/// device (`/dev/nvmeXnY` or `/dev/ngXnY`). Fails with ENOTTY on anything else.
pub fn namespace_id(fd: BorrowedFd<'_>) -> std::io::Result<u32> {
    // SAFETY: NVME_IOCTL_ID takes no argument and only returns a number;
    // the descriptor is valid for the duration of the borrow.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), NVME_IOCTL_ID as _) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as u32)
    }
}

/// Send one admin command with a data-in buffer (`NVME_IOCTL_ADMIN_CMD`).
/// The kernel builds the PRPs for `data`. Needs CAP_SYS_ADMIN.
/// Returns the completion's Dword 0 on success.
pub fn admin_cmd_in(fd: BorrowedFd<'_>, sqe: &Sqe, data: &mut [u8]) -> Result<u32, PassthruError> {
    let mut cmd = NvmePassthruCmd {
        opcode: sqe.opcode(),
        nsid: sqe.nsid,
        cdw2: sqe.cdw2,
        cdw3: sqe.cdw3,
        addr: data.as_mut_ptr() as u64,
        data_len: data.len() as u32,
        cdw10: sqe.cdw10,
        cdw11: sqe.cdw11,
        cdw12: sqe.cdw12,
        cdw13: sqe.cdw13,
        cdw14: sqe.cdw14,
        cdw15: sqe.cdw15,
        ..Default::default()
    };
    // SAFETY: `cmd` is a valid nvme_passthru_cmd the kernel reads and writes
    // (the result field) during the call; `addr`/`data_len` describe `data`,
    // which is exclusively borrowed for the call, so the kernel's DMA into it
    // (finished before the ioctl returns) races with nothing.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut NvmePassthruCmd) };
    if r < 0 {
        return Err(PassthruError::Os(std::io::Error::last_os_error()));
    }
    match PassthruResult::decode(r) {
        PassthruResult::Ok => Ok(cmd.result),
        PassthruResult::Nvme(s) => Err(PassthruError::Nvme(s)),
        PassthruResult::Errno(e) => Err(PassthruError::Os(std::io::Error::from_raw_os_error(-e))),
    }
}

/// Why an admin passthrough command failed.
#[derive(Debug, thiserror::Error)]
pub enum PassthruError {
    /// The kernel refused or failed the ioctl.
    #[error("{0}")]
    Os(#[source] std::io::Error),
    /// The controller completed the command with an error status.
    #[error("NVMe status {0}")]
    Nvme(nvme_spec::Status),
}

/// `ioctl(fd, BLKSSZGET)`: logical block size of a block device.
pub fn block_logical_size(fd: BorrowedFd<'_>) -> std::io::Result<u32> {
    let mut v: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the valid pointer.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), BLKSSZGET as _, &mut v as *mut libc::c_int) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(v as u32)
    }
}

/// `ioctl(fd, BLKGETSIZE64)`: size of a block device in bytes.
pub fn block_size_bytes(fd: BorrowedFd<'_>) -> std::io::Result<u64> {
    let mut v: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the valid pointer.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), BLKGETSIZE64 as _, &mut v as *mut u64) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvme_spec::cmd::ReadWrite;
    use nvme_spec::status::StatusCodeType;

    #[test]
    fn ioctl_numbers_match_the_kernel() {
        // Values from the kernel headers on x86-64 (and every arch using the
        // generic ioctl layout).
        assert_eq!(NVME_URING_CMD_IO, 0xc048_4e80);
        assert_eq!(NVME_IOCTL_ID, 0x4e40);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xc048_4e41);
        assert_eq!(BLKSSZGET, 0x1268);
        assert_eq!(BLKGETSIZE64, 0x8008_1272);
        assert_eq!(libc::BLKSSZGET as u32, BLKSSZGET);
    }

    #[test]
    fn uring_cmd_carries_the_spec_fields() {
        let sqe = ReadWrite::read(3, 0x1_0000_0010, 8).build();
        let c = NvmeUringCmd::from_sqe(&sqe, 0xdead_b000, 4096);
        assert_eq!(c.opcode, 0x02);
        assert_eq!(c.nsid, 3);
        assert_eq!((c.cdw10, c.cdw11, c.cdw12), (0x10, 1, 7));
        assert_eq!((c.addr, c.data_len), (0xdead_b000, 4096));
        let b = c.to_cmd80();
        // Byte image equals the in-memory repr(C) layout.
        assert_eq!(b[0], 0x02);
        assert_eq!(&b[4..8], &3u32.to_le_bytes());
        assert_eq!(&b[24..32], &0xdead_b000u64.to_le_bytes());
        assert_eq!(&b[36..40], &4096u32.to_le_bytes());
        assert_eq!(&b[40..44], &0x10u32.to_le_bytes());
        assert_eq!(&b[44..48], &1u32.to_le_bytes());
        assert_eq!(&b[48..52], &7u32.to_le_bytes());
        assert!(b[72..].iter().all(|&x| x == 0));
        let w = NvmeUringCmd::from_sqe(&ReadWrite::write(1, 0, 1).build(), 0, 512);
        assert_eq!(w.opcode, 0x01);
    }

    #[test]
    fn passthru_result_decoding() {
        assert_eq!(PassthruResult::decode(0), PassthruResult::Ok);
        assert_eq!(PassthruResult::decode(-5), PassthruResult::Errno(-5));
        // LBA Out of Range with DNR, as nvme_req(req)->status holds it: 0x4080.
        match PassthruResult::decode(0x4080) {
            PassthruResult::Nvme(s) => {
                assert_eq!(s.sct, StatusCodeType::GENERIC);
                assert_eq!(s.sc, 0x80);
                assert!(s.dnr);
                assert_eq!(s.name(), "LBA OUT OF RANGE");
            }
            other => panic!("{other:?}"),
        }
        // The host-side "aborted by host" status the kernel synthesises (0x371).
        match PassthruResult::decode(0x371) {
            PassthruResult::Nvme(s) => assert_eq!((s.sct, s.sc), (StatusCodeType::PATH, 0x71)),
            other => panic!("{other:?}"),
        }
    }
}
