//! Controller registers ("properties") of a PCIe NVMe controller, in BAR0.
//!
//! NVMe 1.4c §3.1 "Register Definition".
//! All registers are little-endian; 64-bit registers may be accessed as two
//! 32-bit halves, low half first.

use crate::entries::QueueEntries;
use bitfield_struct::bitfield;

/// Byte offsets of the controller registers in BAR0. NVMe 1.4c §3.1.
pub mod offset {
    /// Controller Capabilities, 64 bit, read only. NVMe 1.4c §3.1.1.
    pub const CAP: usize = 0x00;
    /// Version, 32 bit. NVMe 1.4c §3.1.2.
    pub const VS: usize = 0x08;
    /// Interrupt Mask Set (pin/MSI only; not used with MSI-X). NVMe 1.4c §3.1.3.
    pub const INTMS: usize = 0x0C;
    /// Interrupt Mask Clear. NVMe 1.4c §3.1.4.
    pub const INTMC: usize = 0x10;
    /// Controller Configuration. NVMe 1.4c §3.1.5.
    pub const CC: usize = 0x14;
    /// Controller Status. NVMe 1.4c §3.1.6.
    pub const CSTS: usize = 0x1C;
    /// NVM Subsystem Reset (optional). NVMe 1.4c §3.1.7.
    pub const NSSR: usize = 0x20;
    /// Admin Queue Attributes (queue sizes). NVMe 1.4c §3.1.8.
    pub const AQA: usize = 0x24;
    /// Admin Submission Queue base address, 64 bit. NVMe 1.4c §3.1.9.
    pub const ASQ: usize = 0x28;
    /// Admin Completion Queue base address, 64 bit. NVMe 1.4c §3.1.10.
    pub const ACQ: usize = 0x30;
    /// Controller Memory Buffer Location. NVMe 1.4c §3.1.11.
    pub const CMBLOC: usize = 0x38;
    /// Controller Memory Buffer Size. NVMe 1.4c §3.1.12.
    pub const CMBSZ: usize = 0x3C;
    /// Controller Ready Timeouts, 32 bit, read only (new in NVMe 2.0:
    /// NVMe Base 2.0c, property CRTO). Meaningful only when
    /// CAP.CRMS reports it; reads as zero on 1.4 controllers.
    pub const CRTO: usize = 0x68;
    /// First doorbell (Submission Queue 0 Tail). NVMe 1.4c §3.1.24.
    pub const DOORBELL_BASE: usize = 0x1000;
}

/// Byte offset of a queue's doorbell register in BAR0.
///
/// NVMe 1.4c §3.1.24 (SQyTDBL) and §3.1.25 (CQyHDBL):
/// `0x1000 + (2*qid + is_cq) * (4 << CAP.DSTRD)`. This is the one place the
/// formula lives; everything else calls it.
#[inline]
pub const fn doorbell_offset(qid: u16, is_cq: bool, dstrd: u8) -> usize {
    offset::DOORBELL_BASE + (2 * qid as usize + is_cq as usize) * (4usize << dstrd)
}

/// Offset of Submission Queue `qid`'s Tail Doorbell. NVMe 1.4c §3.1.24.
#[inline]
pub const fn sq_tail_doorbell(qid: u16, dstrd: u8) -> usize {
    doorbell_offset(qid, false, dstrd)
}

/// Offset of Completion Queue `qid`'s Head Doorbell. NVMe 1.4c §3.1.25.
#[inline]
pub const fn cq_head_doorbell(qid: u16, dstrd: u8) -> usize {
    doorbell_offset(qid, true, dstrd)
}

/// Controller Capabilities (CAP), offset 0h. NVMe 1.4c §3.1.1.
#[bitfield(u64)]
#[derive(PartialEq, Eq)]
pub struct Cap {
    /// Maximum Queue Entries Supported, 0's based (so 2047 means 2048 entries).
    pub mqes: u16,
    /// Contiguous Queues Required: I/O queues must be physically contiguous.
    pub cqr: bool,
    /// Arbitration Mechanism Supported (bit 0 weighted round robin, bit 1 vendor).
    #[bits(2)]
    pub ams: u8,
    #[bits(5)]
    __: u8,
    /// Timeout: worst case time to wait for CSTS.RDY to change, in 500 ms units.
    pub to: u8,
    /// Doorbell Stride: doorbells are `4 << DSTRD` bytes apart.
    #[bits(4)]
    pub dstrd: u8,
    /// NVM Subsystem Reset Supported.
    pub nssrs: bool,
    /// Command Sets Supported (bit 0 NVM command set, bit 7 admin only).
    pub css: u8,
    /// Boot Partition Support.
    pub bps: bool,
    #[bits(2)]
    __: u8,
    /// Memory Page Size Minimum: `2 ^ (12 + MPSMIN)` bytes.
    #[bits(4)]
    pub mpsmin: u8,
    /// Memory Page Size Maximum: `2 ^ (12 + MPSMAX)` bytes.
    #[bits(4)]
    pub mpsmax: u8,
    /// Persistent Memory Region Supported.
    pub pmrs: bool,
    /// Controller Memory Buffer Supported.
    pub cmbs: bool,
    /// NVM Subsystem Shutdown Supported (NVMe Base 2.0c; reserved in 1.4c).
    pub nsss: bool,
    /// Controller Ready Modes Supported (NVMe Base 2.0c; reserved in
    /// 1.4c): bit 0 (CAP bit 59) Controller Ready With Media Support, bit 1
    /// (CAP bit 60) Controller Ready Independent of Media Support. Either
    /// set means the CRTO register holds the ready timeouts.
    #[bits(2)]
    pub crms: u8,
    #[bits(3)]
    __: u8,
}

impl Cap {
    /// Largest queue the controller accepts, in entries (MQES is 0's based):
    /// 1..=65536, for printing. See [`Cap::max_entries`] for sizing queues.
    pub fn max_queue_entries(&self) -> u32 {
        self.mqes() as u32 + 1
    }
    /// Largest queue the controller accepts, as a size that cannot wrap;
    /// `None` when MQES is 0 (one entry), below the 2 entries (MQES = 1) the
    /// specification requires at least.
    pub fn max_entries(&self) -> Option<QueueEntries> {
        QueueEntries::from_zeros_based(self.mqes())
    }
    /// CAP.CRMS.CRWMS: CRTO.CRWMT is the time to wait for CSTS.RDY after
    /// CC.EN = 1 with CC.CRIME = 0 (NVMe Base 2.0c).
    pub fn ready_with_media_timeout_reported(&self) -> bool {
        self.crms() & 1 != 0
    }
    /// CAP.TO in milliseconds (500 ms units). A TO of 0 is treated as 500 ms.
    pub fn timeout_ms(&self) -> u64 {
        (self.to().max(1) as u64) * 500
    }
    /// Smallest memory page size in bytes.
    pub fn min_page_size(&self) -> usize {
        1usize << (12 + self.mpsmin())
    }
    /// Largest memory page size in bytes.
    pub fn max_page_size(&self) -> usize {
        1usize << (12 + self.mpsmax())
    }
    /// Distance between two doorbells in bytes.
    pub fn doorbell_stride(&self) -> usize {
        4usize << self.dstrd()
    }
    /// True when the NVM command set is supported (CSS bit 0).
    pub fn supports_nvm_command_set(&self) -> bool {
        self.css() & 1 != 0
    }
    /// True when the controller supports I/O command sets besides NVM
    /// (NVMe 2.0 CSS bit 6: Identify CNS 03h and the CSI are then
    /// defined whatever VS says; Linux's `nvme_multi_css`).
    pub fn supports_io_command_sets(&self) -> bool {
        self.css() & (1 << 6) != 0
    }
}

/// Controller Ready Timeouts (CRTO), offset 68h, NVMe Base 2.0c (not in
/// 1.4c). Both in 500 ms units, like CAP.TO, but 16 bits wide: CAP.TO's 8
/// bits stop at 127.5 s, which large drives need more than to become ready.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Crto {
    /// Controller Ready With Media Timeout: worst case from CC.EN = 1 (with
    /// CC.CRIME = 0) to CSTS.RDY = 1, in 500 ms units.
    pub crwmt: u16,
    /// Controller Ready Independent of Media Timeout (with CC.CRIME = 1).
    pub crimt: u16,
}

impl Crto {
    /// CRWMT in milliseconds.
    pub fn ready_with_media_ms(&self) -> u64 {
        self.crwmt() as u64 * 500
    }
}

/// Version (VS), offset 8h. NVMe 1.4c §3.1.2.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Vs {
    /// Tertiary version number.
    pub ter: u8,
    /// Minor version number.
    pub mnr: u8,
    /// Major version number.
    pub mjr: u16,
}

impl Vs {
    /// True when this is version `mjr.mnr` or later: what a command or
    /// field needs to be defined (Identify CNS 02h from 1.1, CNS 03h from
    /// 1.3), as Linux compares `ctrl->vs` with `NVME_VS(mjr, mnr, 0)`.
    pub fn at_least(&self, mjr: u16, mnr: u8) -> bool {
        (self.mjr(), self.mnr()) >= (mjr, mnr)
    }
}

impl std::fmt::Display for Vs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.mjr(), self.mnr(), self.ter())
    }
}

/// Shutdown Notification values of CC.SHN. NVMe 1.4c §3.1.5.
pub mod shn {
    /// No notification; no effect.
    pub const NONE: u8 = 0b00;
    /// Normal shutdown notification.
    pub const NORMAL: u8 = 0b01;
    /// Abrupt shutdown notification.
    pub const ABRUPT: u8 = 0b10;
}

/// Shutdown Status values of CSTS.SHST. NVMe 1.4c §3.1.6.
pub mod shst {
    /// Normal operation (no shutdown has been requested).
    pub const NORMAL: u8 = 0b00;
    /// Shutdown processing occurring.
    pub const OCCURRING: u8 = 0b01;
    /// Shutdown processing complete.
    pub const COMPLETE: u8 = 0b10;
}

/// Controller Configuration (CC), offset 14h. NVMe 1.4c §3.1.5.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Cc {
    /// Enable: 0 -> 1 starts the controller, 1 -> 0 resets it.
    pub en: bool,
    #[bits(3)]
    __: u8,
    /// I/O Command Set Selected (0 = NVM command set).
    #[bits(3)]
    pub css: u8,
    /// Memory Page Size: `2 ^ (12 + MPS)` bytes, within CAP.MPSMIN..=MPSMAX.
    #[bits(4)]
    pub mps: u8,
    /// Arbitration Mechanism Selected (0 = round robin).
    #[bits(3)]
    pub ams: u8,
    /// Shutdown Notification, see [`shn`].
    #[bits(2)]
    pub shn: u8,
    /// I/O Submission Queue Entry Size, log2 bytes (6 = 64 bytes).
    #[bits(4)]
    pub iosqes: u8,
    /// I/O Completion Queue Entry Size, log2 bytes (4 = 16 bytes).
    #[bits(4)]
    pub iocqes: u8,
    __: u8,
}

/// Controller Status (CSTS), offset 1Ch. NVMe 1.4c §3.1.6.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Csts {
    /// Ready: the controller processes commands (follows CC.EN, with delay).
    pub rdy: bool,
    /// Controller Fatal Status: a fatal error occurred; only a reset helps.
    pub cfs: bool,
    /// Shutdown Status, see [`shst`].
    #[bits(2)]
    pub shst: u8,
    /// NVM Subsystem Reset Occurred.
    pub nssro: bool,
    /// Processing Paused.
    pub pp: bool,
    #[bits(26)]
    __: u32,
}

/// Admin Queue Attributes (AQA), offset 24h. NVMe 1.4c §3.1.8.
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct Aqa {
    /// Admin Submission Queue Size, 0's based.
    #[bits(12)]
    pub asqs: u16,
    #[bits(4)]
    __: u8,
    /// Admin Completion Queue Size, 0's based.
    #[bits(12)]
    pub acqs: u16,
    #[bits(4)]
    __: u8,
}

/// Largest admin queue a controller must accept: AQA fields are 12 bits, 0's based.
pub const MAX_ADMIN_QUEUE_ENTRIES: u32 = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_offsets_match_section_3_1() {
        assert_eq!(offset::CAP, 0x00);
        assert_eq!(offset::VS, 0x08);
        assert_eq!(offset::INTMS, 0x0C);
        assert_eq!(offset::INTMC, 0x10);
        assert_eq!(offset::CC, 0x14);
        assert_eq!(offset::CSTS, 0x1C);
        assert_eq!(offset::NSSR, 0x20);
        assert_eq!(offset::AQA, 0x24);
        assert_eq!(offset::ASQ, 0x28);
        assert_eq!(offset::ACQ, 0x30);
        assert_eq!(offset::DOORBELL_BASE, 0x1000);
    }

    #[test]
    fn doorbells_with_dstrd_0() {
        // 4-byte stride: SQ0 1000h, CQ0 1004h, SQ1 1008h, CQ1 100Ch.
        assert_eq!(sq_tail_doorbell(0, 0), 0x1000);
        assert_eq!(cq_head_doorbell(0, 0), 0x1004);
        assert_eq!(sq_tail_doorbell(1, 0), 0x1008);
        assert_eq!(cq_head_doorbell(1, 0), 0x100C);
        assert_eq!(sq_tail_doorbell(65535, 0), 0x1000 + 2 * 65535 * 4);
    }

    #[test]
    fn doorbells_with_dstrd_2() {
        // 16-byte stride: SQ0 1000h, CQ0 1010h, SQ1 1020h, CQ1 1030h.
        assert_eq!(sq_tail_doorbell(0, 2), 0x1000);
        assert_eq!(cq_head_doorbell(0, 2), 0x1010);
        assert_eq!(sq_tail_doorbell(1, 2), 0x1020);
        assert_eq!(cq_head_doorbell(1, 2), 0x1030);
        assert_eq!(cq_head_doorbell(7, 2), 0x1000 + 15 * 16);
    }

    #[test]
    fn qemu_cap_decodes() {
        // CAP read from QEMU 10's emulated controller (see shared/TESTBED.md).
        let cap = Cap::from_bits(0x0040_0820_0f01_07ff);
        assert_eq!(cap.mqes(), 2047);
        assert_eq!(cap.max_queue_entries(), 2048);
        assert!(cap.cqr());
        assert_eq!(cap.ams(), 0);
        assert_eq!(cap.to(), 15);
        assert_eq!(cap.timeout_ms(), 7500);
        assert_eq!(cap.dstrd(), 0);
        assert!(!cap.nssrs());
        assert!(cap.supports_nvm_command_set());
        assert_eq!(cap.min_page_size(), 4096);
        assert_eq!(cap.max_page_size(), 65536);
        assert!(!cap.cmbs());
        assert_eq!(cap.crms(), 0);
        assert!(!cap.ready_with_media_timeout_reported());
        assert_eq!(cap.max_entries().unwrap().get(), 2048);
    }

    #[test]
    fn cap_mqes_extremes_and_crms() {
        assert_eq!(Cap::new().with_mqes(0xffff).max_entries().unwrap().get(), 65536);
        assert_eq!(Cap::new().with_mqes(0).max_entries(), None, "MQES = 0 is below the minimum");
        // CRMS is CAP bits 60:59 (NVMe Base 2.0c), NSSS bit 58.
        assert!(Cap::from_bits(1 << 59).ready_with_media_timeout_reported());
        assert_eq!(Cap::from_bits(1 << 60).crms(), 2);
        assert!(Cap::from_bits(1 << 58).nsss());
        let crto = Crto::from_bits(0x0003_0014);
        assert_eq!((crto.crwmt(), crto.crimt(), crto.ready_with_media_ms()), (20, 3, 10_000));
        assert_eq!(offset::CRTO, 0x68);
    }

    #[test]
    fn cc_bit_positions() {
        let cc = Cc::new()
            .with_en(true)
            .with_css(0)
            .with_mps(0)
            .with_ams(0)
            .with_shn(shn::NORMAL)
            .with_iosqes(6)
            .with_iocqes(4);
        assert_eq!(cc.into_bits(), 0x0046_4001);
        let cc = Cc::from_bits(1 << 7 | 1 << 11);
        assert_eq!(cc.mps(), 1);
        assert_eq!(cc.ams(), 1);
    }

    #[test]
    fn csts_and_aqa_and_vs() {
        let csts = Csts::from_bits(0b1011);
        assert!(csts.rdy());
        assert!(csts.cfs());
        assert_eq!(csts.shst(), shst::COMPLETE);
        let aqa = Aqa::new().with_asqs(31).with_acqs(63);
        assert_eq!(aqa.into_bits(), 63 << 16 | 31);
        let vs = Vs::from_bits(0x0001_0400);
        assert_eq!(vs.to_string(), "1.4.0");
    }
}
