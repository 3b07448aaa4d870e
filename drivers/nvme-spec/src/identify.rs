//! Identify Controller (CNS 01h) and Identify Namespace (CNS 00h) data,
//! parsed from the 4096-byte page the controller writes.
//! NVMe 1.4c §5.15.2.1, Figure 247 (controller) and §5.15.2.2, Figure 249
//! (namespace). Byte offsets are given next to each field.

/// Size of an Identify data page.
pub const IDENTIFY_SIZE: usize = 4096;

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
/// ASCII field, space padded on the right (as the spec requires); trailing
/// spaces and NULs are trimmed, non-printable bytes become '.'.
fn ascii(b: &[u8], o: usize, len: usize) -> String {
    let s: String = b[o..o + len]
        .iter()
        .map(|&c| if (0x20..0x7f).contains(&c) { c as char } else if c == 0 { ' ' } else { '.' })
        .collect();
    s.trim_end().to_string()
}
fn put_ascii(b: &mut [u8], o: usize, len: usize, s: &str) {
    let bytes = s.as_bytes();
    for i in 0..len {
        b[o + i] = *bytes.get(i).unwrap_or(&b' ');
    }
}

/// OACS bits (Optional Admin Command Support), Identify Controller bytes 257:256.
pub mod oacs {
    pub const SECURITY: u16 = 1 << 0;
    pub const FORMAT_NVM: u16 = 1 << 1;
    pub const FIRMWARE: u16 = 1 << 2;
    pub const NS_MANAGEMENT: u16 = 1 << 3;
    pub const SELF_TEST: u16 = 1 << 4;
    pub const DIRECTIVES: u16 = 1 << 5;
    pub const NVME_MI: u16 = 1 << 6;
    pub const VIRTUALIZATION: u16 = 1 << 7;
    /// Doorbell Buffer Config (shadow doorbells) supported.
    pub const DOORBELL_BUFFER_CONFIG: u16 = 1 << 8;
    pub const GET_LBA_STATUS: u16 = 1 << 9;
}

/// Controller Type (CNTRLTYPE), Identify Controller byte 111. NVMe 1.4c
/// Figure 247: 0 is "not reported" (controllers before 1.4), so it is an
/// I/O controller as far as a host can tell.
pub mod cntrltype {
    pub const NOT_REPORTED: u8 = 0;
    /// An I/O controller: namespaces, I/O queues.
    pub const IO: u8 = 1;
    /// A Discovery controller (NVMe over Fabrics): no I/O queues.
    pub const DISCOVERY: u8 = 2;
    /// An Administrative controller: no I/O queues.
    pub const ADMINISTRATIVE: u8 = 3;
}

/// ONCS bits (Optional NVM Command Support), Identify Controller bytes 521:520.
pub mod oncs {
    pub const COMPARE: u16 = 1 << 0;
    pub const WRITE_UNCORRECTABLE: u16 = 1 << 1;
    pub const DATASET_MANAGEMENT: u16 = 1 << 2;
    pub const WRITE_ZEROES: u16 = 1 << 3;
    pub const SAVE_SELECT: u16 = 1 << 4;
    pub const RESERVATIONS: u16 = 1 << 5;
    pub const TIMESTAMP: u16 = 1 << 6;
    pub const VERIFY: u16 = 1 << 7;
}

/// A number as C's `%#x` prints it, as nvme-cli prints most Identify
/// fields: `0x1b36`, but `0` for zero (no `0x` prefix).
fn c_hex(v: impl Into<u64>) -> String {
    match v.into() {
        0 => "0".into(),
        v => format!("{v:#x}"),
    }
}

/// Identify Controller data structure. NVMe 1.4c §5.15.2.1, Figure 247.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IdentifyController {
    /// PCI Vendor ID (bytes 1:0).
    pub vid: u16,
    /// PCI Subsystem Vendor ID (3:2).
    pub ssvid: u16,
    /// Serial Number, ASCII (23:4).
    pub sn: String,
    /// Model Number, ASCII (63:24).
    pub mn: String,
    /// Firmware Revision, ASCII (71:64).
    pub fr: String,
    /// Recommended Arbitration Burst (72).
    pub rab: u8,
    /// IEEE OUI Identifier (75:73), as the 24-bit number nvme-cli prints.
    pub ieee: u32,
    /// Controller Multi-Path I/O and Namespace Sharing Capabilities (76).
    pub cmic: u8,
    /// Maximum Data Transfer Size (77): `2^MDTS` units of CAP.MPSMIN; 0 = no limit.
    pub mdts: u8,
    /// Controller ID (79:78).
    pub cntlid: u16,
    /// Version (83:80), same layout as the VS register.
    pub ver: u32,
    /// RTD3 Resume Latency, microseconds (87:84).
    pub rtd3r: u32,
    /// RTD3 Entry Latency, microseconds (91:88).
    pub rtd3e: u32,
    /// Optional Asynchronous Events Supported (95:92).
    pub oaes: u32,
    /// Controller Attributes (99:96).
    pub ctratt: u32,
    /// Controller Type (111): 1 I/O, 2 discovery, 3 administrative.
    pub cntrltype: u8,
    /// Command Retry Delay Times 1-3 (139:134), 100 ms units: the delay a
    /// completion's CRD field 1-3 asks for once the host enabled ACRE.
    pub crdt: [u16; 3],
    /// Optional Admin Command Support (257:256), see [`oacs`].
    pub oacs: u16,
    /// Abort Command Limit, 0's based (258).
    pub acl: u8,
    /// Asynchronous Event Request Limit, 0's based (259).
    pub aerl: u8,
    /// Firmware Updates (260).
    pub frmw: u8,
    /// Log Page Attributes (261).
    pub lpa: u8,
    /// Error Log Page Entries, 0's based (262).
    pub elpe: u8,
    /// Number of Power States Support, 0's based (263).
    pub npss: u8,
    /// Warning Composite Temperature Threshold, kelvin (267:266).
    pub wctemp: u16,
    /// Critical Composite Temperature Threshold, kelvin (269:268).
    pub cctemp: u16,
    /// Maximum Time for Firmware Activation (271:270), 100 ms units: how
    /// long the controller may pause processing (CSTS.PP) while it
    /// activates firmware without a reset (0: not reported).
    pub mtfa: u16,
    /// Host Memory Buffer Preferred Size (275:272), 4 KiB units: the
    /// host memory a controller without its own DRAM asks for (0: none).
    pub hmpre: u32,
    /// Host Memory Buffer Minimum Size (279:276), 4 KiB units.
    pub hmmin: u32,
    /// Host Memory Buffer Minimum Descriptor Entry Size (335:332), 4 KiB
    /// units (0: no minimum).
    pub hmminds: u32,
    /// Host Memory Maximum Descriptors Entries (337:336) (0: no limit).
    pub hmmaxd: u16,
    /// Submission Queue Entry Size (512): bits 3:0 required, 7:4 maximum, log2 bytes.
    pub sqes: u8,
    /// Completion Queue Entry Size (513), same encoding.
    pub cqes: u8,
    /// Maximum Outstanding Commands (515:514).
    pub maxcmd: u16,
    /// Number of Namespaces: the largest valid NSID (519:516).
    pub nn: u32,
    /// Optional NVM Command Support (521:520), see [`oncs`].
    pub oncs: u16,
    /// Fused Operation Support (523:522).
    pub fuses: u16,
    /// Format NVM Attributes (524).
    pub fna: u8,
    /// Volatile Write Cache (525): bit 0 present.
    pub vwc: u8,
    /// Atomic Write Unit Normal, 0's based blocks (527:526).
    pub awun: u16,
    /// Atomic Write Unit Power Fail (529:528).
    pub awupf: u16,
    /// SGL Support (539:536); bits 1:0 nonzero when SGLs are supported.
    pub sgls: u32,
    /// NVM Subsystem NVMe Qualified Name (1023:768).
    pub subnqn: String,
}

impl IdentifyController {
    /// Parse the 4096-byte Identify Controller page.
    pub fn parse(b: &[u8; IDENTIFY_SIZE]) -> Self {
        IdentifyController {
            vid: le16(b, 0),
            ssvid: le16(b, 2),
            sn: ascii(b, 4, 20),
            mn: ascii(b, 24, 40),
            fr: ascii(b, 64, 8),
            rab: b[72],
            ieee: b[73] as u32 | (b[74] as u32) << 8 | (b[75] as u32) << 16,
            cmic: b[76],
            mdts: b[77],
            cntlid: le16(b, 78),
            ver: le32(b, 80),
            rtd3r: le32(b, 84),
            rtd3e: le32(b, 88),
            oaes: le32(b, 92),
            ctratt: le32(b, 96),
            cntrltype: b[111],
            crdt: [le16(b, 134), le16(b, 136), le16(b, 138)],
            oacs: le16(b, 256),
            acl: b[258],
            aerl: b[259],
            frmw: b[260],
            lpa: b[261],
            elpe: b[262],
            npss: b[263],
            wctemp: le16(b, 266),
            cctemp: le16(b, 268),
            mtfa: le16(b, 270),
            hmpre: le32(b, 272),
            hmmin: le32(b, 276),
            hmminds: le32(b, 332),
            hmmaxd: le16(b, 336),
            sqes: b[512],
            cqes: b[513],
            maxcmd: le16(b, 514),
            nn: le32(b, 516),
            oncs: le16(b, 520),
            fuses: le16(b, 522),
            fna: b[524],
            vwc: b[525],
            awun: le16(b, 526),
            awupf: le16(b, 528),
            sgls: le32(b, 536),
            subnqn: ascii(b, 768, 256).trim_end_matches('\0').to_string(),
        }
    }

    /// Serialize back into a page (used by the simulated controller).
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        b[0..2].copy_from_slice(&self.vid.to_le_bytes());
        b[2..4].copy_from_slice(&self.ssvid.to_le_bytes());
        put_ascii(&mut b[..], 4, 20, &self.sn);
        put_ascii(&mut b[..], 24, 40, &self.mn);
        put_ascii(&mut b[..], 64, 8, &self.fr);
        b[72] = self.rab;
        b[73..76].copy_from_slice(&self.ieee.to_le_bytes()[..3]);
        b[76] = self.cmic;
        b[77] = self.mdts;
        b[78..80].copy_from_slice(&self.cntlid.to_le_bytes());
        b[80..84].copy_from_slice(&self.ver.to_le_bytes());
        b[84..88].copy_from_slice(&self.rtd3r.to_le_bytes());
        b[88..92].copy_from_slice(&self.rtd3e.to_le_bytes());
        b[92..96].copy_from_slice(&self.oaes.to_le_bytes());
        b[96..100].copy_from_slice(&self.ctratt.to_le_bytes());
        b[111] = self.cntrltype;
        for (i, t) in self.crdt.iter().enumerate() {
            b[134 + 2 * i..136 + 2 * i].copy_from_slice(&t.to_le_bytes());
        }
        b[256..258].copy_from_slice(&self.oacs.to_le_bytes());
        b[258] = self.acl;
        b[259] = self.aerl;
        b[260] = self.frmw;
        b[261] = self.lpa;
        b[262] = self.elpe;
        b[263] = self.npss;
        b[266..268].copy_from_slice(&self.wctemp.to_le_bytes());
        b[268..270].copy_from_slice(&self.cctemp.to_le_bytes());
        b[270..272].copy_from_slice(&self.mtfa.to_le_bytes());
        b[272..276].copy_from_slice(&self.hmpre.to_le_bytes());
        b[276..280].copy_from_slice(&self.hmmin.to_le_bytes());
        b[332..336].copy_from_slice(&self.hmminds.to_le_bytes());
        b[336..338].copy_from_slice(&self.hmmaxd.to_le_bytes());
        b[512] = self.sqes;
        b[513] = self.cqes;
        b[514..516].copy_from_slice(&self.maxcmd.to_le_bytes());
        b[516..520].copy_from_slice(&self.nn.to_le_bytes());
        b[520..522].copy_from_slice(&self.oncs.to_le_bytes());
        b[522..524].copy_from_slice(&self.fuses.to_le_bytes());
        b[524] = self.fna;
        b[525] = self.vwc;
        b[526..528].copy_from_slice(&self.awun.to_le_bytes());
        b[528..530].copy_from_slice(&self.awupf.to_le_bytes());
        b[536..540].copy_from_slice(&self.sgls.to_le_bytes());
        let nqn = self.subnqn.as_bytes();
        let n = nqn.len().min(256);
        b[768..768 + n].copy_from_slice(&nqn[..n]);
        b
    }

    /// Maximum data transfer size in bytes given the controller's minimum
    /// page size, or `None` when MDTS is 0 (no limit reported).
    /// A value too large for `usize` (a device reporting nonsense: found by
    /// fuzzing) is `usize::MAX`, i.e. no limit; callers cap it anyway.
    pub fn max_transfer_bytes(&self, min_page_size: usize) -> Option<usize> {
        (self.mdts != 0).then(|| {
            min_page_size
                .checked_shl(self.mdts as u32)
                .filter(|v| v >> self.mdts == min_page_size)
                .unwrap_or(usize::MAX)
        })
    }
    /// True when Doorbell Buffer Config is supported (OACS bit 8).
    pub fn supports_shadow_doorbells(&self) -> bool {
        self.oacs & oacs::DOORBELL_BUFFER_CONFIG != 0
    }
    /// Why this controller cannot carry I/O queues, when its Controller
    /// Type says it is not an I/O controller (a Discovery or an
    /// Administrative controller); None for an I/O controller or one that
    /// does not report its type.
    pub fn not_an_io_controller(&self) -> Option<String> {
        let kind = match self.cntrltype {
            cntrltype::NOT_REPORTED | cntrltype::IO => return None,
            cntrltype::DISCOVERY => "a Discovery controller",
            cntrltype::ADMINISTRATIVE => "an Administrative controller",
            _ => "of a controller type the specification reserves",
        };
        Some(format!("Identify Controller CNTRLTYPE is {} ({kind}): it has no I/O queues", self.cntrltype))
    }
    /// Whether queue entries of `sqe_log2` and `cqe_log2` bytes (log2, as
    /// CC.IOSQES and CC.IOCQES take them) lie in the ranges SQES and CQES
    /// report (bits 3:0 the required size, 7:4 the largest). A field of 0
    /// reports nothing and accepts any size, as before NVMe 1.0 fixed it.
    pub fn entry_sizes_fit(&self, sqe_log2: u8, cqe_log2: u8) -> Result<(), String> {
        let fits = |v: u8, r: u8| r == 0 || ((r & 0xf) <= v && v <= (r >> 4).max(r & 0xf));
        if fits(sqe_log2, self.sqes) && fits(cqe_log2, self.cqes) {
            return Ok(());
        }
        Err(format!(
            "the controller takes submission entries of {}..={} bytes and completion entries of {}..={} bytes \
             (Identify Controller SQES {:#04x}, CQES {:#04x}); the NVM command set's are {} and {} bytes",
            1u32 << (self.sqes & 0xf),
            1u32 << (self.sqes >> 4).max(self.sqes & 0xf),
            1u32 << (self.cqes & 0xf),
            1u32 << (self.cqes >> 4).max(self.cqes & 0xf),
            self.sqes,
            self.cqes,
            1u32 << sqe_log2,
            1u32 << cqe_log2
        ))
    }
    /// True when Write Zeroes is supported (ONCS bit 3).
    pub fn supports_write_zeroes(&self) -> bool {
        self.oncs & oncs::WRITE_ZEROES != 0
    }
    /// True when Dataset Management is supported (ONCS bit 2).
    pub fn supports_dsm(&self) -> bool {
        self.oncs & oncs::DATASET_MANAGEMENT != 0
    }

    /// The fields as nvme-cli's `id-ctrl` names and formats them, in order.
    pub fn nvme_cli_fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("vid", c_hex(self.vid)),
            ("ssvid", c_hex(self.ssvid)),
            ("sn", self.sn.clone()),
            ("mn", self.mn.clone()),
            ("fr", self.fr.clone()),
            ("rab", self.rab.to_string()),
            ("ieee", format!("{:06x}", self.ieee)),
            ("cmic", self.cmic.to_string()),
            ("mdts", self.mdts.to_string()),
            ("cntlid", c_hex(self.cntlid)),
            ("ver", c_hex(self.ver)),
            ("rtd3r", c_hex(self.rtd3r)),
            ("rtd3e", c_hex(self.rtd3e)),
            ("oaes", c_hex(self.oaes)),
            ("ctratt", c_hex(self.ctratt)),
            ("cntrltype", self.cntrltype.to_string()),
            ("crdt1", self.crdt[0].to_string()),
            ("crdt2", self.crdt[1].to_string()),
            ("crdt3", self.crdt[2].to_string()),
            ("oacs", c_hex(self.oacs)),
            ("acl", self.acl.to_string()),
            ("aerl", self.aerl.to_string()),
            ("frmw", c_hex(self.frmw)),
            ("lpa", c_hex(self.lpa)),
            ("elpe", self.elpe.to_string()),
            ("npss", self.npss.to_string()),
            ("wctemp", self.wctemp.to_string()),
            ("cctemp", self.cctemp.to_string()),
            ("mtfa", self.mtfa.to_string()),
            ("hmpre", self.hmpre.to_string()),
            ("hmmin", self.hmmin.to_string()),
            ("hmminds", self.hmminds.to_string()),
            ("hmmaxd", self.hmmaxd.to_string()),
            ("sqes", c_hex(self.sqes)),
            ("cqes", c_hex(self.cqes)),
            ("maxcmd", self.maxcmd.to_string()),
            ("nn", self.nn.to_string()),
            ("oncs", c_hex(self.oncs)),
            ("fuses", c_hex(self.fuses)),
            ("fna", c_hex(self.fna)),
            ("vwc", c_hex(self.vwc)),
            ("awun", self.awun.to_string()),
            ("awupf", self.awupf.to_string()),
            ("sgls", c_hex(self.sgls)),
            ("subnqn", self.subnqn.clone()),
        ]
    }
}

/// Identify Namespace's 64 LBA Format descriptors (indexed as a slice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbaFormats(pub [LbaFormat; 64]);

impl Default for LbaFormats {
    fn default() -> Self {
        LbaFormats([LbaFormat::default(); 64])
    }
}

impl std::ops::Deref for LbaFormats {
    type Target = [LbaFormat];
    fn deref(&self) -> &[LbaFormat] {
        &self.0
    }
}

impl std::ops::DerefMut for LbaFormats {
    fn deref_mut(&mut self) -> &mut [LbaFormat] {
        &mut self.0
    }
}

impl serde::Serialize for LbaFormats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.as_slice().serialize(s)
    }
}

/// One LBA Format descriptor. NVMe 1.4c §5.15.2.2, Figure 250.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LbaFormat {
    /// Metadata Size in bytes per block.
    pub ms: u16,
    /// LBA Data Size as a power of two (9 = 512 B, 12 = 4 KiB); 0 = unsupported.
    pub lbads: u8,
    /// Relative Performance (0 best .. 3 degraded).
    pub rp: u8,
}

impl LbaFormat {
    fn parse(d: u32) -> Self {
        LbaFormat { ms: d as u16, lbads: (d >> 16) as u8, rp: ((d >> 24) & 3) as u8 }
    }
    fn to_u32(self) -> u32 {
        self.ms as u32 | (self.lbads as u32) << 16 | ((self.rp & 3) as u32) << 24
    }
    /// Block size in bytes (0 when LBADS is 0, or too large to be a block
    /// size: the spec requires at least 9, and 2^32 bytes is no block).
    pub fn block_size(&self) -> u32 {
        if self.lbads == 0 {
            0
        } else {
            1u32.checked_shl(self.lbads as u32).unwrap_or(0)
        }
    }
}

/// Identify Namespace data structure. NVMe 1.4c §5.15.2.2, Figure 249.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IdentifyNamespace {
    /// Namespace Size in logical blocks (7:0).
    pub nsze: u64,
    /// Namespace Capacity in logical blocks (15:8).
    pub ncap: u64,
    /// Namespace Utilization in logical blocks (23:16).
    pub nuse: u64,
    /// Namespace Features (24).
    pub nsfeat: u8,
    /// Number of LBA Formats, 0's based (25).
    pub nlbaf: u8,
    /// Formatted LBA Size (26): bits 3:0 index of the LBA format in use.
    pub flbas: u8,
    /// Metadata Capabilities (27).
    pub mc: u8,
    /// End-to-end Data Protection Capabilities (28).
    pub dpc: u8,
    /// End-to-end Data Protection Type Settings (29).
    pub dps: u8,
    /// Namespace Multi-path I/O and Namespace Sharing Capabilities (30).
    pub nmic: u8,
    /// Reservation Capabilities (31).
    pub rescap: u8,
    /// Format Progress Indicator (32).
    pub fpi: u8,
    /// Deallocate Logical Block Features (33).
    pub dlfeat: u8,
    /// Namespace Atomic Write Unit Normal (35:34).
    pub nawun: u16,
    /// Namespace Atomic Write Unit Power Fail (37:36).
    pub nawupf: u16,
    /// Namespace Optimal I/O Boundary (47:46), blocks.
    pub noiob: u16,
    /// Namespace Attributes (99): bit 0 write protected.
    pub nsattr: u8,
    /// NVM Capacity in bytes, low 64 bits of the 128-bit field (63:48).
    pub nvmcap: u64,
    /// Namespace Globally Unique Identifier (119:104).
    pub nguid: [u8; 16],
    /// IEEE Extended Unique Identifier (127:120).
    pub eui64: [u8; 8],
    /// LBA Format 0..63 (383:128), `nlbaf + 1` of them valid. NVMe 1.4c
    /// has 16 (191:128) and reserves the rest; NVMe Base 2.0c's NVM
    /// Command Set allows 64.
    pub lbaf: LbaFormats,
}

impl IdentifyNamespace {
    /// Parse the 4096-byte Identify Namespace page.
    pub fn parse(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let mut lbaf = LbaFormats::default();
        for (i, f) in lbaf.iter_mut().enumerate() {
            *f = LbaFormat::parse(le32(b, 128 + 4 * i));
        }
        IdentifyNamespace {
            nsze: le64(b, 0),
            ncap: le64(b, 8),
            nuse: le64(b, 16),
            nsfeat: b[24],
            nlbaf: b[25],
            flbas: b[26],
            mc: b[27],
            dpc: b[28],
            dps: b[29],
            nmic: b[30],
            rescap: b[31],
            fpi: b[32],
            dlfeat: b[33],
            nawun: le16(b, 34),
            nawupf: le16(b, 36),
            noiob: le16(b, 46),
            nsattr: b[99],
            nvmcap: le64(b, 48),
            nguid: b[104..120].try_into().unwrap(),
            eui64: b[120..128].try_into().unwrap(),
            lbaf,
        }
    }

    /// Serialize back into a page (used by the simulated controller).
    pub fn to_bytes(&self) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        b[0..8].copy_from_slice(&self.nsze.to_le_bytes());
        b[8..16].copy_from_slice(&self.ncap.to_le_bytes());
        b[16..24].copy_from_slice(&self.nuse.to_le_bytes());
        b[24] = self.nsfeat;
        b[25] = self.nlbaf;
        b[26] = self.flbas;
        b[27] = self.mc;
        b[28] = self.dpc;
        b[29] = self.dps;
        b[30] = self.nmic;
        b[31] = self.rescap;
        b[32] = self.fpi;
        b[33] = self.dlfeat;
        b[34..36].copy_from_slice(&self.nawun.to_le_bytes());
        b[36..38].copy_from_slice(&self.nawupf.to_le_bytes());
        b[46..48].copy_from_slice(&self.noiob.to_le_bytes());
        b[48..56].copy_from_slice(&self.nvmcap.to_le_bytes());
        b[99] = self.nsattr;
        b[104..120].copy_from_slice(&self.nguid);
        b[120..128].copy_from_slice(&self.eui64);
        for (i, f) in self.lbaf.iter().enumerate() {
            b[128 + 4 * i..132 + 4 * i].copy_from_slice(&f.to_u32().to_le_bytes());
        }
        b
    }

    /// True when the namespace is write protected (NSATTR bit 0: by
    /// Namespace Write Protection or by the vendor): writes fail with
    /// Namespace Is Write Protected, and Linux makes its disk read-only.
    pub fn write_protected(&self) -> bool {
        self.nsattr & 1 != 0
    }

    /// Index of the LBA format in use: FLBAS bits 3:0, and with more than
    /// 16 formats (NLBAF, 0's based, 16 or more) bits 6:5 as the index's
    /// bits 5:4 (NVMe 2.0 NVM Command Set; before 2.0 bits 6:5 are
    /// reserved; Linux's `nvme_lbaf_index`).
    pub fn format_index(&self) -> usize {
        let low = (self.flbas & 0xf) as usize;
        if self.nlbaf >= 16 {
            low | ((self.flbas & 0x60) as usize) >> 1
        } else {
            low
        }
    }
    /// The LBA format in use.
    pub fn current_format(&self) -> LbaFormat {
        self.lbaf[self.format_index()]
    }
    /// Logical block size in bytes of the format in use.
    pub fn lba_size(&self) -> u32 {
        self.current_format().block_size()
    }
    /// Namespace size in bytes (saturating: a nonsensical NSZE must not panic).
    pub fn size_bytes(&self) -> u64 {
        self.nsze.saturating_mul(self.lba_size() as u64)
    }
    /// True for an inactive namespace (the controller returns a zeroed page).
    pub fn is_inactive(&self) -> bool {
        self.nsze == 0
    }
    /// FLBAS bit 4: metadata travels at the end of each block's data (an
    /// extended LBA, QEMU's `mset=1`) rather than in a separate buffer.
    pub fn metadata_extended(&self) -> bool {
        self.flbas & 0x10 != 0
    }
    /// End-to-end protection information type in use (DPS bits 2:0): 0 none,
    /// 1..3 Type 1..3.
    pub fn pi_type(&self) -> u8 {
        self.dps & 7
    }
    /// DPS bit 3: the protection information is the first eight bytes of
    /// the metadata (else the last eight).
    pub fn pi_first(&self) -> bool {
        self.dps & 8 != 0
    }
    /// The valid LBA formats (`nlbaf + 1` of them, at most 64) with their index.
    pub fn formats(&self) -> impl Iterator<Item = (usize, LbaFormat)> + '_ {
        self.lbaf.iter().copied().enumerate().take(self.nlbaf.min(63) as usize + 1)
    }

    /// The fields as nvme-cli's `id-ns` names and formats them, in order.
    pub fn nvme_cli_fields(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = vec![
            ("nsze".into(), c_hex(self.nsze)),
            ("ncap".into(), c_hex(self.ncap)),
            ("nuse".into(), c_hex(self.nuse)),
            ("nsfeat".into(), c_hex(self.nsfeat)),
            ("nlbaf".into(), self.nlbaf.to_string()),
            ("flbas".into(), c_hex(self.flbas)),
            ("mc".into(), c_hex(self.mc)),
            ("dpc".into(), c_hex(self.dpc)),
            ("dps".into(), c_hex(self.dps)),
            ("nmic".into(), c_hex(self.nmic)),
            ("rescap".into(), c_hex(self.rescap)),
            ("fpi".into(), c_hex(self.fpi)),
            ("dlfeat".into(), self.dlfeat.to_string()),
            ("nawun".into(), self.nawun.to_string()),
            ("nawupf".into(), self.nawupf.to_string()),
            ("noiob".into(), self.noiob.to_string()),
            ("nvmcap".into(), self.nvmcap.to_string()),
            ("nsattr".into(), self.nsattr.to_string()),
            ("nguid".into(), self.nguid.iter().map(|b| format!("{b:02x}")).collect()),
            ("eui64".into(), self.eui64.iter().map(|b| format!("{b:02x}")).collect()),
        ];
        for (i, f) in self.formats() {
            let inuse = if i == self.format_index() { " (in use)" } else { "" };
            // nvme-cli prints rp with C's %#x: "0" for zero, "0x2" otherwise.
            let rp = if f.rp == 0 { "0".to_string() } else { c_hex(f.rp) };
            v.push((format!("lbaf {i:2}"), format!("ms:{:<3} lbads:{:<2} rp:{rp}{inuse}", f.ms, f.lbads)));
        }
        v
    }
}

/// Command Set Identifiers (CSI) of a namespace. NVMe Base 2.0c, Identify
/// CNS 03h descriptor type 04h; the values are those of CC.CSS's command sets.
pub mod csi {
    /// NVM Command Set: reads and writes anywhere in the namespace.
    pub const NVM: u8 = 0x00;
    /// Key Value Command Set.
    pub const KEY_VALUE: u8 = 0x01;
    /// Zoned Namespace Command Set: writes only at a zone's write pointer.
    pub const ZONED: u8 = 0x02;
}

/// The Namespace Identification Descriptor list (Identify CNS 03h).
/// NVMe 1.4c §5.15.2.3: descriptors of NIDT (byte 0), NIDL (byte 1), two
/// reserved bytes and NIDL bytes of identifier, until an NIDT of 0. Types:
/// 01h EUI-64 (8 bytes), 02h NGUID (16), 03h UUID (16); NVMe Base 2.0c adds
/// 04h Command Set Identifier (1 byte).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NsDescriptors {
    pub eui64: Option<[u8; 8]>,
    pub nguid: Option<[u8; 16]>,
    pub uuid: Option<[u8; 16]>,
    /// The namespace's I/O command set, see [`csi`]; `None` when the
    /// controller does not report it (before NVMe 2.0: the NVM command set).
    pub csi: Option<u8>,
}

impl NsDescriptors {
    /// Parse the 4096-byte page; a descriptor running past the page, or one
    /// whose length does not fit its type, ends the list (a device's word is
    /// checked, never trusted).
    pub fn parse(b: &[u8; IDENTIFY_SIZE]) -> Self {
        let mut d = NsDescriptors::default();
        let mut o = 0;
        while o + 4 <= IDENTIFY_SIZE {
            let (nidt, nidl) = (b[o], b[o + 1] as usize);
            if nidt == 0 || o + 4 + nidl > IDENTIFY_SIZE {
                break;
            }
            let id = &b[o + 4..o + 4 + nidl];
            match (nidt, nidl) {
                (1, 8) => d.eui64 = Some(id.try_into().unwrap()),
                (2, 16) => d.nguid = Some(id.try_into().unwrap()),
                (3, 16) => d.uuid = Some(id.try_into().unwrap()),
                (4, 1) => d.csi = Some(id[0]),
                (1..=4, _) => break,
                _ => {} // a type this code does not know: skip it
            }
            o += 4 + nidl;
        }
        d
    }

    /// The command set in use, with the NVM command set for a controller
    /// that does not say.
    pub fn command_set(&self) -> u8 {
        self.csi.unwrap_or(csi::NVM)
    }

    /// Name of a command set identifier.
    pub fn command_set_name(csi: u8) -> &'static str {
        match csi {
            csi::NVM => "NVM",
            csi::KEY_VALUE => "Key Value",
            csi::ZONED => "Zoned Namespace",
            _ => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_fields_print_as_c_percent_hash_x() {
        assert_eq!(c_hex(0u16), "0");
        assert_eq!(c_hex(0x1b36u16), "0x1b36");
        assert_eq!(c_hex(0x10400u32), "0x10400");
    }

    /// A controller page written byte by byte at the offsets of Figure 247,
    /// independently of `to_bytes`.
    fn controller_fixture() -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        b[0] = 0x36;
        b[1] = 0x1b; // VID 1b36 (Red Hat / QEMU)
        b[2] = 0xf4;
        b[3] = 0x1a; // SSVID 1af4
        b[4..24].copy_from_slice(b"deadbeef            ");
        b[24..64].copy_from_slice(b"QEMU NVMe Ctrl                          ");
        b[64..72].copy_from_slice(b"10.0.2  ");
        b[72] = 6; // RAB
        b[73] = 0x00;
        b[74] = 0x54;
        b[75] = 0x52; // IEEE OUI 525400
        b[76] = 2; // CMIC
        b[77] = 7; // MDTS
        b[78] = 0;
        b[79] = 0; // CNTLID
        b[80..84].copy_from_slice(&0x0001_0400u32.to_le_bytes());
        b[111] = 1;
        b[256] = 0x2a;
        b[257] = 0x01; // OACS 0x12a: bit 8 doorbell buffer config
        b[258] = 3;
        b[259] = 3;
        b[512] = 0x66;
        b[513] = 0x44;
        b[516] = 0;
        b[517] = 1; // NN 256
        b[520] = 0x5f;
        b[521] = 0x01; // ONCS 0x15f
        b[525] = 7;
        b[536] = 0x01; // SGLS
        b[768..768 + 22].copy_from_slice(b"nqn.2019-08.org.qemu:x");
        b
    }

    #[test]
    fn parse_controller_fixture() {
        let c = IdentifyController::parse(&controller_fixture());
        assert_eq!(c.vid, 0x1b36);
        assert_eq!(c.ssvid, 0x1af4);
        assert_eq!(c.sn, "deadbeef");
        assert_eq!(c.mn, "QEMU NVMe Ctrl");
        assert_eq!(c.fr, "10.0.2");
        assert_eq!(c.rab, 6);
        assert_eq!(c.ieee, 0x525400);
        assert_eq!(c.cmic, 2);
        assert_eq!(c.mdts, 7);
        assert_eq!(c.ver, 0x10400);
        assert_eq!(c.oacs, 0x12a);
        assert!(c.supports_shadow_doorbells());
        assert_eq!(c.sqes, 0x66);
        assert_eq!(c.cqes, 0x44);
        assert_eq!(c.nn, 256);
        assert_eq!(c.oncs, 0x15f);
        assert!(c.supports_write_zeroes());
        assert!(c.supports_dsm());
        assert_eq!(c.sgls, 1);
        assert_eq!(c.subnqn, "nqn.2019-08.org.qemu:x");
        assert_eq!(c.max_transfer_bytes(4096), Some(512 * 1024));
        // And back: serializing the parsed value gives the same page.
        assert_eq!(*c.to_bytes(), *controller_fixture());
        let fields = c.nvme_cli_fields();
        assert_eq!(fields[0], ("vid", "0x1b36".to_string()));
        assert!(fields.iter().any(|(k, v)| *k == "ieee" && v == "525400"));
    }

    fn namespace_fixture(lbads_in_use: u8) -> Box<[u8; IDENTIFY_SIZE]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        let nsze: u64 = if lbads_in_use == 12 { 262_144 } else { 2_097_152 };
        b[0..8].copy_from_slice(&nsze.to_le_bytes());
        b[8..16].copy_from_slice(&nsze.to_le_bytes());
        b[16..24].copy_from_slice(&nsze.to_le_bytes());
        b[25] = 7; // NLBAF: 8 formats
        // QEMU's format list: 512 B, 512+8, 512+16, 512+64, 4K, 4K+8, 4K+16, 4K+64
        let formats: [(u16, u8); 8] = [(0, 9), (8, 9), (16, 9), (64, 9), (0, 12), (8, 12), (16, 12), (64, 12)];
        for (i, (ms, lbads)) in formats.iter().enumerate() {
            let d = *ms as u32 | (*lbads as u32) << 16;
            b[128 + 4 * i..132 + 4 * i].copy_from_slice(&d.to_le_bytes());
        }
        b[26] = if lbads_in_use == 12 { 4 } else { 0 }; // FLBAS
        b[120..128].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        b
    }

    #[test]
    fn parse_namespace_fixture_512() {
        let n = IdentifyNamespace::parse(&namespace_fixture(9));
        assert_eq!(n.nsze, 2_097_152);
        assert_eq!(n.ncap, n.nsze);
        assert_eq!(n.nlbaf, 7);
        assert_eq!(n.format_index(), 0);
        assert_eq!(n.lba_size(), 512);
        assert_eq!(n.size_bytes(), 1 << 30);
        assert_eq!(n.lbaf[3], LbaFormat { ms: 64, lbads: 9, rp: 0 });
        assert_eq!(n.eui64, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(!n.is_inactive());
        assert_eq!(*n.to_bytes(), *namespace_fixture(9));
    }

    #[test]
    fn controller_type_and_entry_sizes_are_checked_as_the_specification_encodes_them() {
        let mut c = IdentifyController { cntrltype: cntrltype::IO, sqes: 0x66, cqes: 0x44, ..Default::default() };
        assert!(c.not_an_io_controller().is_none());
        assert!(c.entry_sizes_fit(6, 4).is_ok());
        c.cntrltype = cntrltype::NOT_REPORTED;
        assert!(c.not_an_io_controller().is_none(), "before NVMe 1.4 the type is not reported");
        c.cntrltype = cntrltype::DISCOVERY;
        assert!(c.not_an_io_controller().unwrap().contains("Discovery"));
        c.cntrltype = cntrltype::ADMINISTRATIVE;
        assert!(c.not_an_io_controller().unwrap().contains("Administrative"));
        // A range that includes ours (64..=128 byte entries), and fields of 0.
        c.sqes = 0x76;
        assert!(c.entry_sizes_fit(6, 4).is_ok());
        c.sqes = 0;
        c.cqes = 0;
        assert!(c.entry_sizes_fit(6, 4).is_ok());
        // A controller that requires 128-byte submission entries.
        c.sqes = 0x77;
        c.cqes = 0x44;
        let why = c.entry_sizes_fit(6, 4).unwrap_err();
        assert!(why.contains("128..=128") && why.contains("SQES 0x77"), "{why}");
        // Largest below the required: read as the required size alone.
        c.sqes = 0x06;
        c.cqes = 0x05;
        assert!(c.entry_sizes_fit(6, 4).is_err());
    }

    #[test]
    fn nvme_2_0_format_index_above_15() {
        // 20 formats (NLBAF 19), format 18 in use: FLBAS bits 3:0 = 2 and
        // bits 6:5 = 01b (index bits 5:4).
        let mut b = namespace_fixture(9);
        b[25] = 19;
        let d = 8u32 | 12 << 16; // 4 KiB + 8 bytes of metadata
        b[128 + 4 * 18..132 + 4 * 18].copy_from_slice(&d.to_le_bytes());
        b[26] = 0x20 | 2;
        let n = IdentifyNamespace::parse(&b);
        assert_eq!(n.format_index(), 18);
        assert_eq!(n.current_format(), LbaFormat { ms: 8, lbads: 12, rp: 0 });
        assert_eq!(n.lba_size(), 4096);
        assert_eq!(n.formats().count(), 20);
        assert_eq!(*n.to_bytes(), *b);
        // With 16 formats or fewer bits 6:5 are reserved: not read.
        b[25] = 7;
        assert_eq!(IdentifyNamespace::parse(&b).format_index(), 2);
    }

    #[test]
    fn parse_namespace_fixture_4k() {
        let n = IdentifyNamespace::parse(&namespace_fixture(12));
        assert_eq!(n.format_index(), 4);
        assert_eq!(n.lba_size(), 4096);
        assert_eq!(n.size_bytes(), 1 << 30);
        let f = n.nvme_cli_fields();
        assert!(f.iter().any(|(k, v)| k == "lbaf  4" && v.contains("lbads:12") && v.contains("in use")));
    }

    #[test]
    fn nonsense_from_a_device_does_not_overflow() {
        // Found by tests/fuzz (identify target): MDTS 0xff shifted a usize
        // past its width; LBADS >= 32 would do the same to a u32.
        let c = IdentifyController { mdts: 0xff, ..Default::default() };
        assert_eq!(c.max_transfer_bytes(4096), Some(usize::MAX));
        assert_eq!(IdentifyController { mdts: 5, ..Default::default() }.max_transfer_bytes(4096), Some(128 << 10));
        assert_eq!(LbaFormat { ms: 0, lbads: 40, rp: 0 }.block_size(), 0);
        let mut ns = IdentifyNamespace { nsze: u64::MAX, ..Default::default() };
        ns.lbaf[0] = LbaFormat { ms: 0, lbads: 12, rp: 0 };
        assert_eq!(ns.size_bytes(), u64::MAX);
    }

    #[test]
    fn lbaf_lines_as_nvme_cli_prints_them() {
        let mut n = IdentifyNamespace::parse(&namespace_fixture(9));
        n.lbaf[1].rp = 2;
        let f = n.nvme_cli_fields();
        let lbaf: Vec<_> = f.iter().filter(|(k, _)| k.starts_with("lbaf")).collect();
        assert_eq!(lbaf.len(), 8);
        assert_eq!((lbaf[0].0.as_str(), lbaf[0].1.as_str()), ("lbaf  0", "ms:0   lbads:9  rp:0 (in use)"));
        assert_eq!(lbaf[1].1, "ms:8   lbads:9  rp:0x2");
        assert_eq!(lbaf[7].1, "ms:64  lbads:12 rp:0");
    }

    #[test]
    fn metadata_and_protection_settings() {
        let mut n = IdentifyNamespace::parse(&namespace_fixture(9));
        assert!(!n.metadata_extended() && n.pi_type() == 0);
        n.flbas = 0x11; // format 1 (512+8), extended
        n.dps = 0x9; // Type 1, in the first eight bytes
        assert_eq!(n.current_format().ms, 8);
        assert!(n.metadata_extended());
        assert_eq!(n.pi_type(), 1);
        assert!(n.pi_first());
        assert_eq!(n.formats().count(), 8);
    }

    #[test]
    fn namespace_descriptors() {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        // EUI-64, NGUID, UUID, CSI as QEMU lists them
        let mut o = 0;
        for (t, l) in [(1u8, 8usize), (2, 16), (3, 16), (4, 1)] {
            b[o] = t;
            b[o + 1] = l as u8;
            for i in 0..l {
                b[o + 4 + i] = t * 16 + i as u8;
            }
            o += 4 + l;
        }
        b[o - 1] = csi::ZONED;
        let d = NsDescriptors::parse(&b);
        assert_eq!(d.eui64, Some([16, 17, 18, 19, 20, 21, 22, 23]));
        assert_eq!(d.nguid.unwrap()[0], 32);
        assert_eq!(d.uuid.unwrap()[15], 48 + 15);
        assert_eq!(d.csi, Some(csi::ZONED));
        assert_eq!(NsDescriptors::command_set_name(d.command_set()), "Zoned Namespace");
        // No descriptors: the NVM command set.
        assert_eq!(NsDescriptors::parse(&[0u8; IDENTIFY_SIZE]).command_set(), csi::NVM);
        // A length that does not fit its type, or runs past the page, ends the list.
        let mut bad = Box::new([0u8; IDENTIFY_SIZE]);
        bad[0] = 4;
        bad[1] = 200;
        assert_eq!(NsDescriptors::parse(&bad).csi, None);
        // A type this code does not know is skipped.
        let mut skip = Box::new([0u8; IDENTIFY_SIZE]);
        skip[0] = 7;
        skip[1] = 255;
        skip[259] = 4;
        skip[260] = 1;
        skip[263] = csi::KEY_VALUE;
        assert_eq!(NsDescriptors::parse(&skip).csi, Some(csi::KEY_VALUE));
    }

    #[test]
    fn zeroed_page_is_inactive_namespace() {
        let n = IdentifyNamespace::parse(&[0u8; IDENTIFY_SIZE]);
        assert!(n.is_inactive());
        assert_eq!(n.lba_size(), 0);
    }
}
