//! Human-readable decoding of registers and commands, for traces and for
//! people learning the protocol. Each line names the fields as the
//! specification does (NVMe 1.4c §3.1 for registers, §4.2 and the command
//! sections for entries).

use crate::opcode::{AdminOpcode, NvmOpcode};
use crate::regs::{offset, Aqa, Cap, Cc, Csts, Vs};
use crate::sqe::Sqe;

/// Name of the register at `off` (doorbells named SQyTDBL / CQyHDBL).
pub fn register_name(off: usize, dstrd: u8) -> String {
    match off {
        offset::CAP => "CAP".into(),
        o if o == offset::CAP + 4 => "CAP(hi)".into(),
        offset::VS => "VS".into(),
        offset::INTMS => "INTMS".into(),
        offset::INTMC => "INTMC".into(),
        offset::CC => "CC".into(),
        offset::CSTS => "CSTS".into(),
        offset::NSSR => "NSSR".into(),
        offset::AQA => "AQA".into(),
        offset::ASQ => "ASQ".into(),
        o if o == offset::ASQ + 4 => "ASQ(hi)".into(),
        offset::ACQ => "ACQ".into(),
        o if o == offset::ACQ + 4 => "ACQ(hi)".into(),
        o if o >= offset::DOORBELL_BASE => {
            let i = (o - offset::DOORBELL_BASE) / (4usize << dstrd);
            if i % 2 == 0 {
                format!("SQ{}TDBL", i / 2)
            } else {
                format!("CQ{}HDBL", i / 2)
            }
        }
        o => format!("reg@{o:#x}"),
    }
}

/// Decoded fields of a 32-bit register value.
pub fn register_fields(off: usize, v: u32, dstrd: u8) -> String {
    match off {
        offset::VS => format!("NVMe {}", Vs::from_bits(v)),
        offset::CC => {
            let c = Cc::from_bits(v);
            format!(
                "EN={} CSS={} MPS={} ({} B pages) AMS={} SHN={:02b} IOSQES={} ({} B) IOCQES={} ({} B)",
                c.en() as u8,
                c.css(),
                c.mps(),
                4096u32 << c.mps(),
                c.ams(),
                c.shn(),
                c.iosqes(),
                1u32 << c.iosqes(),
                c.iocqes(),
                1u32 << c.iocqes()
            )
        }
        offset::CSTS => {
            let c = Csts::from_bits(v);
            format!("RDY={} CFS={} SHST={:02b}", c.rdy() as u8, c.cfs() as u8, c.shst())
        }
        offset::AQA => {
            let a = Aqa::from_bits(v);
            format!("ASQS={} ACQS={} (admin queues of {} and {} entries)", a.asqs(), a.acqs(), a.asqs() + 1, a.acqs() + 1)
        }
        o if o >= offset::DOORBELL_BASE => {
            let i = (o - offset::DOORBELL_BASE) / (4usize << dstrd);
            if i % 2 == 0 {
                format!("new SQ tail {v}: entries up to slot {v} are the controller's to fetch")
            } else {
                format!("new CQ head {v}: completion slots before {v} may be reused")
            }
        }
        _ => String::new(),
    }
}

/// Decoded fields of CAP.
pub fn cap_fields(v: u64) -> String {
    let c = Cap::from_bits(v);
    format!(
        "MQES={} ({} entries) CQR={} AMS={:#x} TO={} ({} ms) DSTRD={} (doorbells {} B apart) NSSRS={} CSS={:#x} MPSMIN={} ({} B) MPSMAX={} ({} B) CMBS={}",
        c.mqes(),
        c.max_queue_entries(),
        c.cqr() as u8,
        c.ams(),
        c.to(),
        c.timeout_ms(),
        c.dstrd(),
        c.doorbell_stride(),
        c.nssrs() as u8,
        c.css(),
        c.mpsmin(),
        c.min_page_size(),
        c.mpsmax(),
        c.max_page_size(),
        c.cmbs() as u8
    )
}

/// Name of an opcode in the admin or NVM command set.
pub fn opcode_name(opc: u8, admin: bool) -> String {
    if admin {
        AdminOpcode::from_u8(opc).map(|o| o.name().to_string()).unwrap_or(format!("admin opcode {opc:#04x}"))
    } else {
        NvmOpcode::from_u8(opc).map(|o| o.name().to_string()).unwrap_or(format!("I/O opcode {opc:#04x}"))
    }
}

/// A submission entry, field by field (command-specific dwords decoded).
pub fn sqe_fields(s: &Sqe, admin: bool) -> Vec<(String, String)> {
    let opc = s.opcode();
    let mut f: Vec<(String, String)> = vec![
        ("opcode".into(), format!("{opc:#04x} {}", opcode_name(opc, admin))),
        ("cid".into(), s.cid().to_string()),
        ("psdt".into(), s.cdw0.psdt().to_string()),
        ("nsid".into(), format!("{:#x}", s.nsid)),
        ("prp1".into(), format!("{:#x}", s.prp1)),
        ("prp2".into(), format!("{:#x}", s.prp2)),
    ];
    let mut push = |k: &str, v: String| f.push((k.into(), v));
    if admin {
        match AdminOpcode::from_u8(opc) {
            Some(AdminOpcode::Identify) => push("cns", format!("{:#04x}", s.cdw10 & 0xff)),
            Some(AdminOpcode::CreateIoCq) => {
                push("qid", (s.cdw10 & 0xffff).to_string());
                push("qsize", format!("{} ({} entries)", s.cdw10 >> 16, (s.cdw10 >> 16) + 1));
                push("pc", (s.cdw11 & 1).to_string());
                push("ien", ((s.cdw11 >> 1) & 1).to_string());
                push("iv", (s.cdw11 >> 16).to_string());
            }
            Some(AdminOpcode::CreateIoSq) => {
                push("qid", (s.cdw10 & 0xffff).to_string());
                push("qsize", format!("{} ({} entries)", s.cdw10 >> 16, (s.cdw10 >> 16) + 1));
                push("pc", (s.cdw11 & 1).to_string());
                push("qprio", ((s.cdw11 >> 1) & 3).to_string());
                push("cqid", (s.cdw11 >> 16).to_string());
            }
            Some(AdminOpcode::DeleteIoSq | AdminOpcode::DeleteIoCq) => push("qid", (s.cdw10 & 0xffff).to_string()),
            Some(AdminOpcode::SetFeatures | AdminOpcode::GetFeatures) => {
                push("fid", format!("{:#04x}", s.cdw10 & 0xff));
                push("cdw11", format!("{:#x}", s.cdw11));
            }
            Some(AdminOpcode::GetLogPage) => {
                push("lid", format!("{:#04x}", s.cdw10 & 0xff));
                push("numd", (((s.cdw10 >> 16) | (s.cdw11 & 0xffff) << 16) + 1).to_string());
            }
            Some(AdminOpcode::Abort) => {
                push("sqid", (s.cdw10 & 0xffff).to_string());
                push("cid", (s.cdw10 >> 16).to_string());
            }
            _ => {}
        }
    } else {
        match NvmOpcode::from_u8(opc) {
            Some(NvmOpcode::Read | NvmOpcode::Write | NvmOpcode::WriteZeroes) => {
                push("slba", (s.cdw10 as u64 | (s.cdw11 as u64) << 32).to_string());
                push("nlb", format!("{} ({} blocks)", s.cdw12 & 0xffff, (s.cdw12 & 0xffff) + 1));
                push("fua", ((s.cdw12 >> 30) & 1).to_string());
            }
            Some(NvmOpcode::DatasetManagement) => {
                push("nr", format!("{} ranges", (s.cdw10 & 0xff) + 1));
                push("ad", ((s.cdw11 >> 2) & 1).to_string());
            }
            _ => {}
        }
    }
    f
}

/// A submission entry on one line.
pub fn sqe_line(s: &Sqe, admin: bool) -> String {
    sqe_fields(s, admin).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// 64 bytes as four lines of hex.
pub fn hex64(b: &[u8; 64]) -> Vec<String> {
    b.chunks(16)
        .enumerate()
        .map(|(i, c)| format!("{:02x}: {}", i * 16, c.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd;

    #[test]
    fn names_and_fields() {
        assert_eq!(register_name(0x14, 0), "CC");
        assert_eq!(register_name(0x1008, 0), "SQ1TDBL");
        assert_eq!(register_name(0x100c, 0), "CQ1HDBL");
        assert_eq!(register_name(0x1030, 2), "CQ1HDBL");
        assert!(register_fields(0x14, 0x0046_0001, 0).starts_with("EN=1 CSS=0 MPS=0"));
        assert!(cap_fields(0x0040_0820_0f01_07ff).contains("MQES=2047 (2048 entries)"));
        let s = cmd::ReadWrite::read(1, 8, 4).build();
        let l = sqe_line(&s, false);
        assert!(l.contains("opcode=0x02 Read") && l.contains("slba=8") && l.contains("nlb=3 (4 blocks)"), "{l}");
        let c = cmd::CreateIoCq::new(1, crate::QueueEntries::new(4).unwrap(), 0x1000).build();
        assert!(sqe_line(&c, true).contains("qsize=3 (4 entries)"));
        assert_eq!(hex64(&s.to_bytes()).len(), 4);
    }
}
