//! Completion entries as a device writes them (NVMe 1.4c §4.6): any 16
//! bytes decode (status type, code, name, DNR, phase), and a queue pair
//! whose completion queue holds arbitrary bytes never panics, never
//! delivers a completion for a command that is not outstanding (unknown
//! CID, or another queue's SQ id: rejected and counted), never delivers
//! one command twice, and keeps its CID table consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvme_driver::qpair::{DataPtr, QueuePair, QueuePairParts};
use nvme_hal::{HostMemory, MemRegisters};
use nvme_spec::{Cqe, QueueEntries};
use std::sync::Arc;

const ENTRIES: u16 = 8;

fuzz_target!(|data: &[u8]| {
    // 1. One entry, decoded.
    for chunk in data.chunks_exact(16) {
        let cqe = Cqe::from_bytes(chunk.try_into().unwrap());
        let st = cqe.decoded_status();
        let _ = (st.to_string(), st.name(), st.is_success(), cqe.phase(), cqe.to_string());
        assert_eq!(Cqe::from_bytes(&cqe.to_bytes()), cqe);
    }

    // 2. A queue pair (qid 1) with some commands outstanding, and a
    //    completion queue full of the input.
    let Some((&n_cmds, rest)) = data.split_first() else { return };
    let regs = Arc::new(MemRegisters::new(0x2000));
    let mem = HostMemory::plain();
    let sq = mem.map(ENTRIES as usize * 64).unwrap();
    let cq = mem.map(ENTRIES as usize * 16).unwrap();
    let buf = mem.map(4096).unwrap();
    let mut qp = QueuePair::new(QueuePairParts {
        regs,
        qid: 1,
        sq_mem: sq,
        cq_mem: cq.clone(),
        entries: QueueEntries::new(ENTRIES as u32).unwrap(),
        cq_entries: QueueEntries::new(ENTRIES as u32).unwrap(),
        dstrd: 0,
        prp_lists: None,
        list_pages_per_cmd: 0,
        page_size: 4096,
        max_transfer: 8192,
        shadow: None,
        streaming_sq: false,
    })
    .unwrap();
    let n_cmds = n_cmds as usize % ENTRIES as usize;
    for tag in 0..n_cmds as u64 {
        qp.read(1, tag, 1, DataPtr { iova: buf.iova(), len: 512 }, 100 + tag).unwrap();
    }
    qp.ring();
    let mut ring = vec![0u8; ENTRIES as usize * 16];
    let n = rest.len().min(ring.len());
    ring[..n].copy_from_slice(&rest[..n]);
    cq.copy_from(0, &ring);

    let mut seen = vec![];
    for _ in 0..3 {
        qp.poll(ENTRIES as usize * 2, |c| {
            assert!((100..100 + n_cmds as u64).contains(&c.tag), "tag {} was never submitted", c.tag);
            assert!(!seen.contains(&c.tag), "tag {} delivered twice", c.tag);
            seen.push(c.tag);
            let _ = (c.ok(), c.status());
        });
    }
    assert_eq!(qp.outstanding(), n_cmds - seen.len());
    let s = qp.stats();
    assert_eq!(s.completed as usize, seen.len());
    let mut left: Vec<u64> = qp.abandon_outstanding();
    left.extend(&seen);
    left.sort();
    assert_eq!(left, (100..100 + n_cmds as u64).collect::<Vec<_>>());
});
