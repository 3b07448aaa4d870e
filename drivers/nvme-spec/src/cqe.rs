//! The 16-byte Completion Queue Entry. NVMe 1.4c §4.6.

// The status half of Dword 3 is defined beside its decoding, which needs
// nothing else from this file: imports point from here to there only.
pub use crate::status::CqeStatus;
use crate::status::Status;

/// A Completion Queue Entry. NVMe 1.4c §4.6.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// Dword 0: command specific result (e.g. Set Features Number of Queues
    /// returns the queues allocated here).
    pub dw0: u32,
    /// Dword 1: command specific (reserved for most commands).
    pub dw1: u32,
    /// SQ Head Pointer: how much of the submission queue the controller has
    /// consumed, so how far the host may reclaim SQ slots.
    pub sq_head: u16,
    /// SQ Identifier: which submission queue the command came from (one CQ
    /// may serve several SQs).
    pub sq_id: u16,
    /// Command Identifier of the completed command.
    pub cid: u16,
    /// Phase tag and status.
    pub status: CqeStatus,
}

const _: () = assert!(std::mem::size_of::<Cqe>() == 16);
const _: () = assert!(std::mem::offset_of!(Cqe, sq_head) == 8);
const _: () = assert!(std::mem::offset_of!(Cqe, cid) == 12);
const _: () = assert!(std::mem::offset_of!(Cqe, status) == 14);

/// Size of a completion entry in bytes (CC.IOCQES = 4).
pub const CQE_SIZE: usize = 16;
/// log2 of [`CQE_SIZE`], the value for CC.IOCQES.
pub const CQE_SIZE_LOG2: u8 = 4;

impl Cqe {
    /// The phase tag.
    #[inline]
    pub fn phase(&self) -> bool {
        self.status.p()
    }
    /// Decoded status (without the phase tag).
    #[inline]
    pub fn decoded_status(&self) -> Status {
        Status::from_cqe_status(self.status)
    }
    /// Dword 3 as the controller writes it: CID in bits 15:0, status+phase above.
    #[inline]
    pub fn dw3(&self) -> u32 {
        self.cid as u32 | (self.status.into_bits() as u32) << 16
    }
    /// The entry as its four dwords.
    pub fn to_dwords(&self) -> [u32; 4] {
        [self.dw0, self.dw1, self.sq_head as u32 | (self.sq_id as u32) << 16, self.dw3()]
    }
    /// Build an entry from four dwords.
    pub fn from_dwords(d: [u32; 4]) -> Self {
        Cqe {
            dw0: d[0],
            dw1: d[1],
            sq_head: d[2] as u16,
            sq_id: (d[2] >> 16) as u16,
            cid: d[3] as u16,
            status: CqeStatus::from_bits((d[3] >> 16) as u16),
        }
    }
    /// The 16 wire bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (i, d) in self.to_dwords().iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&d.to_le_bytes());
        }
        out
    }
    /// Parse 16 wire bytes.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        let d = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Self::from_dwords([d(0), d(4), d(8), d(12)])
    }
}

/// One line per completion in the style of SPDK's `spdk_nvme_print_completion`:
/// `NAME (sct/sc) qid:Q cid:C cdw0:X sqhd:H p:P m:M dnr:D`.
impl std::fmt::Display for Cqe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.decoded_status();
        write!(
            f,
            "{} ({:02x}/{:02x}) qid:{} cid:{} cdw0:{:x} sqhd:{:04x} p:{} m:{} dnr:{}",
            s.name(),
            s.sct.0,
            s.sc,
            self.sq_id,
            self.cid,
            self.dw0,
            self.sq_head,
            self.status.p() as u8,
            s.more as u8,
            s.dnr as u8
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_bit_positions() {
        // P=1, SC=0x80, SCT=0 (LBA Out of Range), DNR=1.
        let st = CqeStatus::new().with_p(true).with_sc(0x80).with_sct(0).with_dnr(true);
        assert_eq!(st.into_bits(), 0x8000 | 0x80 << 1 | 1);
        let st = CqeStatus::from_bits(0b0110_0010_0000_0011); // m=1, crd=2, sct=1, sc=1, p=1
        assert!(st.p());
        assert_eq!(st.sc(), 1);
        assert_eq!(st.sct(), 1);
        assert_eq!(st.crd(), 2);
        assert!(st.m());
        assert!(!st.dnr());
    }

    #[test]
    fn bytes_round_trip_and_print() {
        let c = Cqe {
            dw0: 0x1f001f,
            dw1: 0,
            sq_head: 0x12,
            sq_id: 1,
            cid: 7,
            status: CqeStatus::new().with_p(true).with_sc(0x80).with_dnr(true),
        };
        let b = c.to_bytes();
        assert_eq!(Cqe::from_bytes(&b), c);
        assert_eq!(u16::from_le_bytes([b[12], b[13]]), 7);
        assert_eq!(
            c.to_string(),
            "LBA OUT OF RANGE (00/80) qid:1 cid:7 cdw0:1f001f sqhd:0012 p:1 m:0 dnr:1"
        );
    }
}
