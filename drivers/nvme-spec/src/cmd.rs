//! Command builders, in the style of tokio-rs/io-uring's `opcode.rs`: the
//! required fields go into `new()`, optional ones are setters, `build()`
//! returns the [`Sqe`]. The command identifier and the data pointer (PRPs)
//! are filled in by the queue that submits the command, because only it
//! knows which CID is free and where the data lives.

use crate::entries::QueueEntries;
use crate::opcode::{cns, feature, AdminOpcode, NvmOpcode};
use crate::sqe::{Cdw0, Sqe};

fn sqe(opc: u8, nsid: u32) -> Sqe {
    Sqe { cdw0: Cdw0::new().with_opc(opc), nsid, ..Default::default() }
}

/// Read or Write of `blocks` logical blocks at `slba`.
/// NVMe 1.4c §6.9 (Read) and §6.15 (Write): SLBA in CDW10-11, the 0's based
/// Number of Logical Blocks in CDW12 bits 15:0, FUA in CDW12 bit 30.
#[derive(Clone, Copy, Debug)]
pub struct ReadWrite {
    opcode: NvmOpcode,
    nsid: u32,
    slba: u64,
    blocks: u32,
    fua: bool,
}

/// Largest number of blocks one Read/Write can carry (NLB is 16 bits, 0's based).
pub const MAX_BLOCKS_PER_COMMAND: u32 = 1 << 16;

impl ReadWrite {
    /// A Read of `blocks` (1..=65536) blocks.
    #[inline]
    pub fn read(nsid: u32, slba: u64, blocks: u32) -> Self {
        ReadWrite { opcode: NvmOpcode::Read, nsid, slba, blocks, fua: false }
    }
    /// A Write of `blocks` (1..=65536) blocks.
    #[inline]
    pub fn write(nsid: u32, slba: u64, blocks: u32) -> Self {
        ReadWrite { opcode: NvmOpcode::Write, nsid, slba, blocks, fua: false }
    }
    /// Write Zeroes of `blocks` blocks (no data transfer). NVMe 1.4c §6.16.
    #[inline]
    pub fn write_zeroes(nsid: u32, slba: u64, blocks: u32) -> Self {
        ReadWrite { opcode: NvmOpcode::WriteZeroes, nsid, slba, blocks, fua: false }
    }
    /// Force Unit Access: complete only once the data is on non-volatile media.
    #[inline]
    pub fn fua(mut self, fua: bool) -> Self {
        self.fua = fua;
        self
    }
    /// The entry, CID and PRPs still zero.
    #[inline]
    pub fn build(self) -> Sqe {
        debug_assert!(self.blocks >= 1 && self.blocks <= MAX_BLOCKS_PER_COMMAND);
        let mut s = sqe(self.opcode as u8, self.nsid);
        s.cdw10 = self.slba as u32;
        s.cdw11 = (self.slba >> 32) as u32;
        s.cdw12 = (self.blocks - 1) | (self.fua as u32) << 30;
        s
    }
}

/// Flush. NVMe 1.4c §6.8: no data, the namespace in NSID.
pub fn flush(nsid: u32) -> Sqe {
    sqe(NvmOpcode::Flush as u8, nsid)
}

/// One 16-byte range of a Dataset Management command. NVMe 1.4c §6.7, "Range Definition".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DsmRange {
    /// Context Attributes.
    pub attributes: u32,
    /// Length in logical blocks.
    pub blocks: u32,
    /// Starting LBA.
    pub slba: u64,
}

impl DsmRange {
    /// The 16 wire bytes of the range.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.attributes.to_le_bytes());
        b[4..8].copy_from_slice(&self.blocks.to_le_bytes());
        b[8..16].copy_from_slice(&self.slba.to_le_bytes());
        b
    }
    /// Parse 16 wire bytes.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        DsmRange {
            attributes: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            blocks: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            slba: u64::from_le_bytes(b[8..16].try_into().unwrap()),
        }
    }
}

/// Dataset Management with `ranges` (1..=256) range entries in the data
/// buffer. NVMe 1.4c §6.7: CDW10 bits 7:0 NR (0's based), CDW11 bit 2
/// Attribute - Deallocate (AD).
pub fn dataset_management(nsid: u32, ranges: u16, deallocate: bool) -> Sqe {
    debug_assert!((1..=256).contains(&ranges));
    let mut s = sqe(NvmOpcode::DatasetManagement as u8, nsid);
    s.cdw10 = (ranges as u32 - 1) & 0xff;
    s.cdw11 = (deallocate as u32) << 2;
    s
}

/// Identify. NVMe 1.4c §5.15: CNS in CDW10 bits 7:0; data is one 4 KiB page.
pub struct Identify;

impl Identify {
    /// Identify Controller (CNS 01h).
    pub fn controller() -> Sqe {
        let mut s = sqe(AdminOpcode::Identify as u8, 0);
        s.cdw10 = cns::CONTROLLER as u32;
        s
    }
    /// Identify Namespace (CNS 00h) for `nsid`.
    pub fn namespace(nsid: u32) -> Sqe {
        let mut s = sqe(AdminOpcode::Identify as u8, nsid);
        s.cdw10 = cns::NAMESPACE as u32;
        s
    }
    /// Active Namespace ID list (CNS 02h): active NSIDs greater than `after`.
    pub fn active_namespaces(after: u32) -> Sqe {
        let mut s = sqe(AdminOpcode::Identify as u8, after);
        s.cdw10 = cns::ACTIVE_NAMESPACES as u32;
        s
    }
    /// Namespace Identification Descriptor list (CNS 03h) for `nsid`.
    pub fn ns_descriptors(nsid: u32) -> Sqe {
        let mut s = sqe(AdminOpcode::Identify as u8, nsid);
        s.cdw10 = cns::NS_DESCRIPTORS as u32;
        s
    }
}

/// Create I/O Completion Queue. NVMe 1.4c §5.3: CDW10 QID (15:0) and QSIZE
/// 0's based (31:16); CDW11 PC (bit 0), IEN (bit 1), IV (31:16); PRP1 = base.
#[derive(Clone, Copy, Debug)]
pub struct CreateIoCq {
    qid: u16,
    entries: QueueEntries,
    base: u64,
    vector: Option<u16>,
}

impl CreateIoCq {
    /// A physically contiguous CQ of `entries` entries at bus address `base`,
    /// interrupts disabled (polled).
    pub fn new(qid: u16, entries: QueueEntries, base: u64) -> Self {
        CreateIoCq { qid, entries, base, vector: None }
    }
    /// Enable interrupts on MSI-X vector `v`.
    pub fn interrupt_vector(mut self, v: u16) -> Self {
        self.vector = Some(v);
        self
    }
    /// The entry.
    pub fn build(self) -> Sqe {
        let mut s = sqe(AdminOpcode::CreateIoCq as u8, 0);
        s.prp1 = self.base;
        s.cdw10 = self.qid as u32 | (self.entries.zeros_based() as u32) << 16;
        s.cdw11 = 1 | match self.vector {
            Some(v) => 1 << 1 | (v as u32) << 16,
            None => 0,
        };
        s
    }
}

/// Queue Priority values of Create I/O Submission Queue's QPRIO (CDW11
/// bits 2:1): the SQ's class under weighted round robin arbitration
/// (CC.AMS = 001b), ignored under round robin. NVMe 1.4c §5.4, Figure 153.
pub mod qprio {
    /// Urgent (00b).
    pub const URGENT: u8 = 0b00;
    /// High (01b).
    pub const HIGH: u8 = 0b01;
    /// Medium (10b).
    pub const MEDIUM: u8 = 0b10;
    /// Low (11b).
    pub const LOW: u8 = 0b11;
}

/// Create I/O Submission Queue. NVMe 1.4c §5.4: CDW10 QID and QSIZE as for
/// the CQ; CDW11 PC (bit 0), QPRIO (2:1), CQID (31:16); PRP1 = base.
#[derive(Clone, Copy, Debug)]
pub struct CreateIoSq {
    qid: u16,
    entries: QueueEntries,
    base: u64,
    cqid: u16,
    priority: u8,
}

impl CreateIoSq {
    /// A physically contiguous SQ of `entries` entries at `base`, whose
    /// completions go to CQ `cqid`, of priority [`qprio::URGENT`] (QPRIO 0).
    pub fn new(qid: u16, entries: QueueEntries, base: u64, cqid: u16) -> Self {
        CreateIoSq { qid, entries, base, cqid, priority: qprio::URGENT }
    }
    /// Queue priority `p`, one of [`qprio`] (two bits; higher ones are dropped).
    pub fn priority(mut self, p: u8) -> Self {
        self.priority = p & 0b11;
        self
    }
    /// The entry.
    pub fn build(self) -> Sqe {
        let mut s = sqe(AdminOpcode::CreateIoSq as u8, 0);
        s.prp1 = self.base;
        s.cdw10 = self.qid as u32 | (self.entries.zeros_based() as u32) << 16;
        s.cdw11 = 1 | (self.priority as u32) << 1 | (self.cqid as u32) << 16;
        s
    }
}

/// Delete I/O Submission Queue `qid`. NVMe 1.4c §5.6.
pub fn delete_io_sq(qid: u16) -> Sqe {
    let mut s = sqe(AdminOpcode::DeleteIoSq as u8, 0);
    s.cdw10 = qid as u32;
    s
}

/// Delete I/O Completion Queue `qid`. NVMe 1.4c §5.5 (its SQs must be deleted first).
pub fn delete_io_cq(qid: u16) -> Sqe {
    let mut s = sqe(AdminOpcode::DeleteIoCq as u8, 0);
    s.cdw10 = qid as u32;
    s
}

/// Set Features. NVMe 1.4c §5.21: FID in CDW10 bits 7:0, value in CDW11.
pub fn set_features(fid: u8, cdw11: u32) -> Sqe {
    let mut s = sqe(AdminOpcode::SetFeatures as u8, 0);
    s.cdw10 = fid as u32;
    s.cdw11 = cdw11;
    s
}

/// Set Features - Host Behavior Support with its 512-byte data structure
/// (PRP1): byte 0 bit 0 is ACRE (Advanced Command Retry Enable).
pub fn set_host_behavior_support() -> Sqe {
    set_features(feature::HOST_BEHAVIOR_SUPPORT, 0)
}

/// Set Features - Host Memory Buffer (NVMe 1.4c §5.21.1.13). `enable`:
/// EHM (CDW11 bit 0); `returned`: MR (bit 1), the same buffer given back
/// after a reset with its contents intact. `pages`: HSIZE, in memory pages
/// (CC.MPS); `list`: the descriptor list's bus address (16-byte aligned),
/// `entries` descriptors of [`HostMemoryDescriptor`]. Disabling sends
/// zeros.
pub fn set_host_memory_buffer(enable: bool, returned: bool, pages: u32, list: u64, entries: u32) -> Sqe {
    let mut s = set_features(feature::HOST_MEMORY_BUFFER, enable as u32 | (returned as u32) << 1);
    if enable {
        s.cdw12 = pages;
        s.cdw13 = list as u32;
        s.cdw14 = (list >> 32) as u32;
        s.cdw15 = entries;
    }
    s
}

/// One entry of a Host Memory Buffer descriptor list (16 bytes): the
/// chunk's bus address (memory-page aligned) and its size in memory pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostMemoryDescriptor {
    /// BADD.
    pub addr: u64,
    /// BSIZE, in memory pages.
    pub pages: u32,
}

impl HostMemoryDescriptor {
    /// Bytes per descriptor.
    pub const SIZE: usize = 16;

    /// The entry as the controller reads it.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..12].copy_from_slice(&self.pages.to_le_bytes());
        b
    }

    /// An entry as the host wrote it.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        HostMemoryDescriptor { addr: u64::from_le_bytes(b[..8].try_into().unwrap()), pages: u32::from_le_bytes(b[8..12].try_into().unwrap()) }
    }
}

/// Size of the Host Behavior Support data structure.
pub const HOST_BEHAVIOR_SIZE: usize = 512;

/// Get Features (current value). FID in CDW10 bits 7:0, SEL (10:8) = 0.
pub fn get_features(fid: u8) -> Sqe {
    let mut s = sqe(AdminOpcode::GetFeatures as u8, 0);
    s.cdw10 = fid as u32;
    s
}

/// Set Features - Number of Queues. NVMe 1.4c §5.21.1.7: NSQR in CDW11
/// bits 15:0 and NCQR in 31:16, both 0's based, not counting the admin queue.
/// The completion's DW0 carries NSQA/NCQA in the same layout.
pub fn set_number_of_queues(sqs: u16, cqs: u16) -> Sqe {
    debug_assert!(sqs >= 1 && cqs >= 1);
    set_features(feature::NUMBER_OF_QUEUES, (sqs as u32 - 1) | (cqs as u32 - 1) << 16)
}

/// Decode the completion DW0 of Number of Queues: (SQs allocated, CQs allocated), 1's based.
pub fn number_of_queues_allocated(dw0: u32) -> (u32, u32) {
    ((dw0 & 0xffff) + 1, (dw0 >> 16) + 1)
}

/// Get Log Page. NVMe 1.4c §5.14: LID in CDW10 bits 7:0, NUMDL (31:16) and
/// NUMDU (CDW11 15:0) the 0's based dword count, offset in CDW12-13.
pub fn get_log_page(lid: u8, nsid: u32, bytes: u32, offset: u64) -> Sqe {
    debug_assert!(bytes >= 4 && bytes % 4 == 0);
    let numd = bytes / 4 - 1;
    let mut s = sqe(AdminOpcode::GetLogPage as u8, nsid);
    s.cdw10 = lid as u32 | (numd & 0xffff) << 16;
    s.cdw11 = numd >> 16;
    s.cdw12 = offset as u32;
    s.cdw13 = (offset >> 32) as u32;
    s
}

/// Abort command `cid` on submission queue `sqid`. NVMe 1.4c §5.1: SQID in
/// CDW10 bits 15:0, CID in 31:16. DW0 bit 0 of the completion is 1 when the
/// command was NOT aborted.
pub fn abort(sqid: u16, cid: u16) -> Sqe {
    let mut s = sqe(AdminOpcode::Abort as u8, 0);
    s.cdw10 = sqid as u32 | (cid as u32) << 16;
    s
}

/// Asynchronous Event Request. NVMe 1.4c §5.2: no fields; completes when an event occurs.
pub fn async_event_request() -> Sqe {
    sqe(AdminOpcode::AsyncEventRequest as u8, 0)
}

/// Doorbell Buffer Config: PRP1 = shadow doorbell buffer, PRP2 = EventIdx
/// buffer, each page aligned and contiguous, with the doorbell registers'
/// layout: a slot for every queue at the doorbell stride, so more than one
/// page when the queues or the stride need it. NVMe 1.4c §5, "Doorbell
/// Buffer Config command".
pub fn doorbell_buffer_config(shadow: u64, eventidx: u64) -> Sqe {
    let mut s = sqe(AdminOpcode::DoorbellBufferConfig as u8, 0);
    s.prp1 = shadow;
    s.prp2 = eventidx;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_fields() {
        let s = ReadWrite::read(1, 0x1_0000_0002, 8).fua(true).build();
        assert_eq!(s.opcode(), 0x02);
        assert_eq!(s.nsid, 1);
        assert_eq!(s.cdw10, 2);
        assert_eq!(s.cdw11, 1);
        assert_eq!(s.cdw12, 7 | 1 << 30);
        let w = ReadWrite::write(1, 0, 1).build();
        assert_eq!(w.opcode(), 0x01);
        assert_eq!(w.cdw12, 0);
        assert_eq!(ReadWrite::write_zeroes(1, 0, 65536).build().cdw12, 0xffff);
    }

    #[test]
    fn queue_creation_fields() {
        let n = |e| QueueEntries::new(e).unwrap();
        let cq = CreateIoCq::new(3, n(1024), 0x10_0000).build();
        assert_eq!(cq.opcode(), 0x05);
        assert_eq!(cq.cdw10, 3 | 1023 << 16);
        assert_eq!(cq.cdw11, 1);
        assert_eq!(cq.prp1, 0x10_0000);
        let cqi = CreateIoCq::new(3, n(2), 0).interrupt_vector(5).build();
        assert_eq!(cqi.cdw11, 1 | 2 | 5 << 16);
        let sq = CreateIoSq::new(3, n(64), 0x20_0000, 3).build();
        assert_eq!(sq.opcode(), 0x01);
        assert_eq!(sq.cdw10, 3 | 63 << 16);
        assert_eq!(sq.cdw11, 1 | 3 << 16);
        // QPRIO in bits 2:1: medium is 10b (Linux's NVME_SQ_PRIO_MEDIUM, 2 << 1).
        let medium = CreateIoSq::new(3, n(64), 0x20_0000, 3).priority(qprio::MEDIUM).build();
        assert_eq!(medium.cdw11, 1 | 0b100 | 3 << 16);
        assert_eq!(CreateIoSq::new(3, n(64), 0, 3).priority(qprio::LOW).build().cdw11, 1 | 0b110 | 3 << 16);
        // 65536 entries (CAP.MQES = FFFFh) is QSIZE FFFFh, 2 entries QSIZE 1.
        assert_eq!(CreateIoSq::new(1, QueueEntries::MAX, 0, 1).build().cdw10, 1 | 0xffff << 16);
        assert_eq!(CreateIoCq::new(1, QueueEntries::MIN, 0).build().cdw10, 1 | 1 << 16);
        assert_eq!(delete_io_sq(3).opcode(), 0x00);
        assert_eq!(delete_io_cq(3).opcode(), 0x04);
    }

    #[test]
    fn admin_fields() {
        assert_eq!(Identify::controller().cdw10, 1);
        assert_eq!(Identify::namespace(7).nsid, 7);
        let d = Identify::ns_descriptors(5);
        assert_eq!((d.opcode(), d.nsid, d.cdw10), (0x06, 5, 3));
        let nq = set_number_of_queues(4, 2);
        assert_eq!(nq.cdw10, 7);
        assert_eq!(nq.cdw11, 3 | 1 << 16);
        assert_eq!(number_of_queues_allocated(0x0003_0007), (8, 4));
        let lp = get_log_page(2, 0xffff_ffff, 512, 0);
        assert_eq!(lp.cdw10, 2 | 127 << 16);
        assert_eq!(abort(1, 9).cdw10, 1 | 9 << 16);
        let d = dataset_management(1, 2, true);
        assert_eq!((d.opcode(), d.cdw10, d.cdw11), (0x09, 1, 4));
        let r = DsmRange { attributes: 0, blocks: 8, slba: 1 << 40 };
        assert_eq!(DsmRange::from_bytes(&r.to_bytes()), r);
    }
}
