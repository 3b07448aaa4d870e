//! The 64-byte Submission Queue Entry. NVMe 1.4c §4.2 ("Submission Queue
//! Entry - Command Format"), common format for admin and NVM commands.

use bitfield_struct::bitfield;

/// Command Dword 0: opcode, fused operation, PRP/SGL selector and command
/// identifier. NVMe 1.4c §4.2, "Command Dword 0".
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Cdw0 {
    /// Opcode (admin or NVM command set, see `opcode`).
    pub opc: u8,
    /// Fused Operation (0 = normal).
    #[bits(2)]
    pub fuse: u8,
    #[bits(4)]
    __: u8,
    /// PRP or SGL for Data Transfer: 0 = PRPs (all this project uses).
    #[bits(2)]
    pub psdt: u8,
    /// Command Identifier: unique among the commands outstanding on this SQ;
    /// it comes back in the completion entry.
    pub cid: u16,
}

/// A Submission Queue Entry. NVMe 1.4c §4.2, the common command format.
///
/// `#[repr(C)]` with naturally aligned fields, so no `packed` is needed and
/// the layout is exactly the wire layout on a little-endian host.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sqe {
    /// Command Dword 0 (opcode, cid).
    pub cdw0: Cdw0,
    /// Namespace Identifier (0 when the command does not use one,
    /// 0xFFFF_FFFF for "all namespaces").
    pub nsid: u32,
    /// Command Dword 2 (command specific).
    pub cdw2: u32,
    /// Command Dword 3 (command specific).
    pub cdw3: u32,
    /// Metadata Pointer.
    pub mptr: u64,
    /// Data Pointer: PRP Entry 1, the first page of the data, may carry a
    /// dword-aligned offset.
    pub prp1: u64,
    /// Data Pointer: PRP Entry 2, the second page, or the address of a PRP
    /// list when the transfer spans more than two pages (NVMe 1.4c §4.3).
    pub prp2: u64,
    /// Command Dword 10 (command specific).
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
}

const _: () = assert!(std::mem::size_of::<Sqe>() == 64);
const _: () = assert!(std::mem::size_of::<Cdw0>() == 4);
const _: () = assert!(std::mem::offset_of!(Sqe, nsid) == 4);
const _: () = assert!(std::mem::offset_of!(Sqe, mptr) == 16);
const _: () = assert!(std::mem::offset_of!(Sqe, prp1) == 24);
const _: () = assert!(std::mem::offset_of!(Sqe, prp2) == 32);
const _: () = assert!(std::mem::offset_of!(Sqe, cdw10) == 40);
const _: () = assert!(std::mem::offset_of!(Sqe, cdw15) == 60);

/// Size of a submission entry in bytes (CC.IOSQES = 6).
pub const SQE_SIZE: usize = 64;
/// log2 of [`SQE_SIZE`], the value for CC.IOSQES.
pub const SQE_SIZE_LOG2: u8 = 6;

impl Sqe {
    /// Opcode byte.
    #[inline]
    pub fn opcode(&self) -> u8 {
        self.cdw0.opc()
    }
    /// Command identifier.
    #[inline]
    pub fn cid(&self) -> u16 {
        self.cdw0.cid()
    }
    /// Set the command identifier.
    #[inline]
    pub fn set_cid(&mut self, cid: u16) {
        self.cdw0.set_cid(cid);
    }
    /// The entry as the 16 little-endian dwords the controller fetches.
    pub fn to_dwords(&self) -> [u32; 16] {
        [
            self.cdw0.into_bits(),
            self.nsid,
            self.cdw2,
            self.cdw3,
            self.mptr as u32,
            (self.mptr >> 32) as u32,
            self.prp1 as u32,
            (self.prp1 >> 32) as u32,
            self.prp2 as u32,
            (self.prp2 >> 32) as u32,
            self.cdw10,
            self.cdw11,
            self.cdw12,
            self.cdw13,
            self.cdw14,
            self.cdw15,
        ]
    }
    /// The entry as 8 little-endian qwords (for wide stores into the queue).
    #[inline]
    pub fn to_qwords(&self) -> [u64; 8] {
        let q = |lo: u32, hi: u32| lo as u64 | (hi as u64) << 32;
        [
            q(self.cdw0.into_bits(), self.nsid),
            q(self.cdw2, self.cdw3),
            self.mptr,
            self.prp1,
            self.prp2,
            q(self.cdw10, self.cdw11),
            q(self.cdw12, self.cdw13),
            q(self.cdw14, self.cdw15),
        ]
    }
    /// Build an entry from its 16 dwords.
    #[inline]
    pub fn from_dwords(d: [u32; 16]) -> Self {
        let q = |lo: u32, hi: u32| lo as u64 | (hi as u64) << 32;
        Sqe {
            cdw0: Cdw0::from_bits(d[0]),
            nsid: d[1],
            cdw2: d[2],
            cdw3: d[3],
            mptr: q(d[4], d[5]),
            prp1: q(d[6], d[7]),
            prp2: q(d[8], d[9]),
            cdw10: d[10],
            cdw11: d[11],
            cdw12: d[12],
            cdw13: d[13],
            cdw14: d[14],
            cdw15: d[15],
        }
    }
    /// The 64 wire bytes (little-endian).
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        for (i, d) in self.to_dwords().iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&d.to_le_bytes());
        }
        out
    }
    /// Parse 64 wire bytes.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let mut d = [0u32; 16];
        for (i, dw) in d.iter_mut().enumerate() {
            *dw = u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        }
        Self::from_dwords(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdw0_bit_positions() {
        let c = Cdw0::new().with_opc(0x02).with_fuse(0).with_psdt(0).with_cid(0xBEEF);
        assert_eq!(c.into_bits(), 0xBEEF_0002);
        let c = Cdw0::from_bits(0x0000_C000 | 0x0300);
        assert_eq!(c.psdt(), 3);
        assert_eq!(c.fuse(), 3);
    }

    #[test]
    fn bytes_round_trip() {
        let mut s = Sqe {
            nsid: 1,
            prp1: 0x1122_3344_5566_7000,
            prp2: 0xAABB_CCDD_0000_1000,
            cdw10: 10,
            cdw15: 15,
            ..Default::default()
        };
        s.cdw0.set_opc(0x01);
        s.set_cid(42);
        let b = s.to_bytes();
        assert_eq!(b[0], 0x01);
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 42);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), s.prp1);
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), 10);
        assert_eq!(Sqe::from_bytes(&b), s);
        let q = s.to_qwords();
        for (i, w) in q.iter().enumerate() {
            assert_eq!(u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap()), *w);
        }
    }
}
