//! The queue-pair driver against the in-process simulated controller:
//! bring-up, identify, queues, data integrity, and the controller's answers
//! to malformed commands. No hardware needed.

use nvme_driver::{Controller, ControllerConfig, DataPtr, Error, QueuePair, SubmitError};
use nvme_hal::{DmaRegion, RegisterWindow};
use nvme_sim::{DataMode, SimConfig, SimController, SimRegisters};
use nvme_spec::status::{command_specific as cs, generic as gs};
use nvme_spec::regs::Csts;
use nvme_spec::{QueueEntries, Sqe, StatusCodeType};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn entries(n: u32) -> QueueEntries {
    QueueEntries::new(n).unwrap()
}

fn quiet(cfg: SimConfig) -> SimConfig {
    // Park soon when idle: many tests run side by side on two cores.
    SimConfig { idle_spins: 2000, ..cfg }
}

fn bring_up(cfg: SimConfig, io_queues: u16) -> (SimController, Controller<SimRegisters>) {
    let sim = SimController::start(quiet(cfg)).unwrap();
    let ctrl = Controller::new(
        sim.registers(),
        sim.allocator(),
        ControllerConfig { io_queues, admin_timeout: Duration::from_secs(5), ..Default::default() },
    )
    .unwrap();
    (sim, ctrl)
}

/// Run one command to completion on an I/O queue and return its status.
fn run(qp: &mut QueuePair<SimRegisters>, sqe: Sqe, data: Option<DataPtr>) -> nvme_spec::Status {
    qp.submit(sqe, data, 7).unwrap();
    qp.ring();
    let start = Instant::now();
    loop {
        let mut st = None;
        qp.poll(1, |c| st = Some(c.status()));
        if let Some(s) = st {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "command timed out");
        std::hint::spin_loop();
    }
}

fn wait_all(qp: &mut QueuePair<SimRegisters>, mut n: usize) {
    let start = Instant::now();
    while n > 0 {
        n -= qp.poll(64, |c| assert!(c.ok(), "{}", c.status()));
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn bring_up_identify_and_queue_creation() {
    let (sim, mut ctrl) = bring_up(SimConfig::default(), 4);
    assert!(ctrl.status().rdy());
    assert_eq!(ctrl.version().to_string(), "1.4.0");
    let id = ctrl.identify().clone();
    assert_eq!(id.sn, "NVBSIM0001");
    assert_eq!(id.mn, "nvme-bypass simulated controller");
    assert_eq!(id.nn, 1);
    assert_eq!(ctrl.max_transfer(), 512 << 10, "MDTS 7 with 4 KiB pages");
    assert_eq!(ctrl.io_queues_granted(), 4);
    let ns = ctrl.identify_namespace(1).unwrap();
    assert_eq!(ns.lba_size(), 512);
    assert_eq!(ns.nsze, 1 << 17);
    assert_eq!(ctrl.active_namespaces().unwrap(), vec![1]);
    let q1 = ctrl.create_io_queue_pair(64).unwrap();
    let q2 = ctrl.create_io_queue_pair(1024).unwrap();
    assert_eq!((q1.qid(), q2.qid()), (1, 2));
    assert_eq!(q1.depth(), 63);
    ctrl.delete_io_queue_pair(q1).unwrap();
    let q1b = ctrl.create_io_queue_pair(16).unwrap();
    assert_eq!(q1b.qid(), 1, "a deleted queue id is reused");
    ctrl.delete_io_queue_pair(q1b).unwrap();
    ctrl.delete_io_queue_pair(q2).unwrap();
    let regs = sim.registers();
    ctrl.shutdown().unwrap();
    let csts = regs.read32(nvme_spec::regs::offset::CSTS);
    assert_eq!(csts & 1, 0, "controller disabled after shutdown");
}

/// Linux's NVME_QUIRK_MEDIUM_PRIO_SQ: with `medium_prio_sq` every Create
/// I/O SQ the driver sends (a re-creation after a reset too) carries QPRIO
/// = 10b in CDW11 bits 2:1; without it, 00b.
#[test]
fn submission_queues_are_created_with_medium_priority_when_the_quirk_asks() {
    use nvme_driver::{AdminEvent, AdminObserver};
    use nvme_spec::AdminOpcode;
    for medium in [true, false] {
        let sim = SimController::start(quiet(SimConfig::default())).unwrap();
        let sent = Arc::new(std::sync::Mutex::new(vec![]));
        let seen = sent.clone();
        let observer = AdminObserver(Arc::new(move |e: AdminEvent<'_>| {
            if let AdminEvent::Posted { sqe, .. } = e {
                if sqe.opcode() == AdminOpcode::CreateIoSq as u8 {
                    seen.lock().unwrap().push(sqe.cdw11);
                }
            }
        }));
        let cfg = ControllerConfig {
            admin_timeout: Duration::from_secs(5),
            medium_prio_sq: medium,
            admin_observer: Some(observer),
            ..Default::default()
        };
        let mut ctrl = Controller::new(sim.registers(), sim.allocator(), cfg).unwrap();
        let qp = ctrl.create_io_queue_pair(16).unwrap();
        ctrl.reset(Duration::from_secs(5)).unwrap();
        let (qp, _) = ctrl.recreate_io_queue_pair(qp, Duration::from_secs(5)).unwrap();
        let cdw11 = sent.lock().unwrap().clone();
        let want = if medium { 0b10 } else { 0b00 };
        assert_eq!(cdw11.len(), 2, "created, and created again after the reset");
        for c in cdw11 {
            assert_eq!(((c >> 1) & 0b11, c & 1, c >> 16), (want, 1, 1), "QPRIO, PC, CQID in CDW11 {c:#x}");
        }
        ctrl.delete_io_queue_pair(qp).unwrap();
        ctrl.shutdown().unwrap();
    }
}

#[test]
fn inactive_and_invalid_namespaces() {
    let (_sim, mut ctrl) = bring_up(SimConfig { inactive_namespaces: 2, ..Default::default() }, 1);
    assert_eq!(ctrl.identify().nn, 3);
    assert!(matches!(ctrl.identify_namespace(2), Err(Error::InactiveNamespace { nsid: 2, .. })));
    assert!(matches!(ctrl.identify_namespace(9), Err(Error::InactiveNamespace { nsid: 9, .. })));
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    let st = run(&mut qp, nvme_spec::cmd::ReadWrite::read(2, 0, 1).build(), Some(DataPtr::of(&buf)));
    assert_eq!((st.sct, st.sc), (StatusCodeType::GENERIC, gs::INVALID_NAMESPACE_OR_FORMAT));
}

fn stamp(buf: &DmaRegion, lba: u64, blocks: u32, lba_size: usize, seed: u64) {
    for b in 0..blocks as usize {
        let mut block = vec![0u8; lba_size];
        for (i, chunk) in block.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&(seed ^ (lba + b as u64) << 20 ^ i as u64).to_le_bytes());
        }
        buf.copy_from(b * lba_size, &block);
    }
}

fn check(buf: &DmaRegion, lba: u64, blocks: u32, lba_size: usize, seed: u64) {
    let copy = buf.sub(0, blocks as usize * lba_size);
    let expect = {
        let tmp = nvme_hal::HostMemory::plain().map(copy.len()).unwrap();
        stamp(&tmp, lba, blocks, lba_size, seed);
        let mut v = vec![0u8; copy.len()];
        tmp.copy_to(0, &mut v);
        v
    };
    let mut got = vec![0u8; copy.len()];
    copy.copy_to(0, &mut got);
    assert!(got == expect, "data mismatch at lba {lba}");
}

#[test]
fn read_after_write_with_prp_lists_512_and_4k_lbas() {
    for lba_size in [512u32, 4096] {
        let cfg = SimConfig::default().with_namespace(64 << 20, lba_size);
        let (_sim, mut ctrl) = bring_up(cfg, 1);
        let mut qp = ctrl.create_io_queue_pair(32).unwrap();
        let mem = ctrl.allocator().clone();
        let ls = lba_size as usize;
        // 1 block, 8 KiB, 128 KiB (PRP list), MDTS-sized 512 KiB, and an unaligned buffer.
        for (bytes, offset_in_buf) in [(ls, 0usize), (8192, 0), (128 << 10, 0), (512 << 10, 0), (8192, 512)] {
            let blocks = (bytes / ls) as u32;
            let buf = mem.alloc(bytes + 4096, 4096).unwrap();
            let data = buf.sub(offset_in_buf, bytes);
            let lba = 1000 / (ls as u64 / 512) + blocks as u64;
            stamp(&data, lba, blocks, ls, 42);
            let st = run(&mut qp, nvme_spec::cmd::ReadWrite::write(1, lba, blocks).build(), Some(DataPtr::of(&data)));
            assert!(st.is_success(), "{st}");
            data.fill(0, bytes, 0);
            let st = run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, lba, blocks).build(), Some(DataPtr::of(&data)));
            assert!(st.is_success(), "{st}");
            check(&data, lba, blocks, ls, 42);
        }
        // Above MDTS: refused before it reaches the controller.
        let big = mem.alloc(1 << 20, 4096).unwrap();
        let e = qp.read(1, 0, (1 << 20) / lba_size, DataPtr::of(&big), 0).unwrap_err();
        assert!(matches!(e, SubmitError::TooLarge { len: 1048576, max: 524288 }));
        // Write Zeroes then read back zeroes.
        let buf = mem.alloc(4096, 4096).unwrap();
        stamp(&buf, 5, 4096 / lba_size, ls, 1);
        assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::write(1, 5, 4096 / lba_size).build(), Some(DataPtr::of(&buf))).is_success());
        assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::write_zeroes(1, 5, 4096 / lba_size).build(), None).is_success());
        assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, 5, 4096 / lba_size).build(), Some(DataPtr::of(&buf))).is_success());
        assert_eq!(buf.read64(0), 0);
        assert!(run(&mut qp, nvme_spec::cmd::flush(1), None).is_success());
        ctrl.delete_io_queue_pair(qp).unwrap();
    }
}

#[test]
fn a_queue_for_small_transfers_keeps_prp_lists_for_them_only() {
    // MDTS 10: 4 MiB transfers, three list pages per command; a queue for
    // 128 KiB commands needs one, and takes nothing longer.
    let cfg = SimConfig { mdts: 10, ..SimConfig::default().with_namespace(64 << 20, 512) };
    let (_sim, mut ctrl) = bring_up(cfg, 2);
    assert_eq!(ctrl.max_transfer(), 4 << 20);
    let mem = ctrl.allocator().clone();
    let big = ctrl.create_io_queue_pair(32).unwrap();
    let mut small = ctrl.create_io_queue_pair_for(32, 128 << 10).unwrap();
    assert_eq!(big.max_transfer(), 4 << 20);
    assert_eq!(small.max_transfer(), 128 << 10);
    // An unaligned 128 KiB transfer spans 33 pages: a list of 32 entries.
    let buf = mem.alloc((128 << 10) + 4096, 4096).unwrap();
    let data = buf.sub(512, 128 << 10);
    stamp(&data, 7, 256, 512, 3);
    assert!(run(&mut small, nvme_spec::cmd::ReadWrite::write(1, 7, 256).build(), Some(DataPtr::of(&data))).is_success());
    data.fill(0, 128 << 10, 0);
    assert!(run(&mut small, nvme_spec::cmd::ReadWrite::read(1, 7, 256).build(), Some(DataPtr::of(&data))).is_success());
    check(&data, 7, 256, 512, 3);
    let more = mem.alloc(256 << 10, 4096).unwrap();
    let e = small.read(1, 0, 512, DataPtr::of(&more), 0).unwrap_err();
    assert!(matches!(e, SubmitError::TooLarge { len: 262144, max: 131072 }), "{e:?}");
    ctrl.delete_io_queue_pair(small).unwrap();
    ctrl.delete_io_queue_pair(big).unwrap();
}

#[test]
fn out_of_range_lba_is_a_decoded_error() {
    let (_sim, mut ctrl) = bring_up(SimConfig::default().with_namespace(1 << 20, 512), 1);
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    let st = run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, 2047, 2).build(), Some(DataPtr::of(&buf)));
    assert_eq!(st.sct, StatusCodeType::GENERIC);
    assert_eq!(st.sc, gs::LBA_OUT_OF_RANGE);
    assert!(st.dnr);
    assert_eq!(st.name(), "LBA OUT OF RANGE");
    // The last block itself is fine.
    assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, 2047, 1).build(), Some(DataPtr::of(&buf))).is_success());
}

#[test]
fn simulator_rejects_malformed_commands_with_the_right_status() {
    let (_sim, mut ctrl) = bring_up(SimConfig::default(), 2);
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(8192, 4096).unwrap();
    // Invalid opcode on the I/O queue.
    let mut bad = Sqe::default();
    bad.cdw0.set_opc(0x7f);
    bad.nsid = 1;
    let st = run(&mut qp, bad, None);
    assert_eq!((st.sct, st.sc, st.dnr), (StatusCodeType::GENERIC, gs::INVALID_OPCODE, true));
    // SGL requested (PSDT != 0): the controller supports none -> Invalid Field.
    let mut sgl = nvme_spec::cmd::ReadWrite::read(1, 0, 1).build();
    sgl.cdw0.set_psdt(1);
    assert_eq!(run(&mut qp, sgl, Some(DataPtr::of(&buf))).sc, gs::INVALID_FIELD);
    // PRP2 with an offset for a two-page transfer: Invalid PRP Offset.
    let mut off = nvme_spec::cmd::ReadWrite::read(1, 0, 16).build();
    off.prp1 = buf.iova();
    off.prp2 = buf.iova() + 4096 + 8;
    qp.submit(off, None, 1).unwrap();
    qp.ring();
    let mut got = None;
    while got.is_none() {
        qp.poll(1, |c| got = Some(c.status()));
    }
    assert_eq!(got.unwrap().sc, gs::INVALID_PRP_OFFSET);
    // A data pointer the controller cannot reach: Data Transfer Error.
    let mut wild = nvme_spec::cmd::ReadWrite::read(1, 0, 1).build();
    wild.prp1 = 0x1000;
    qp.submit(wild, None, 1).unwrap();
    qp.ring();
    let mut got = None;
    while got.is_none() {
        qp.poll(1, |c| got = Some(c.status()));
    }
    assert_eq!(got.unwrap().sc, gs::DATA_TRANSFER_ERROR);

    // Admin: creating a queue with id 0, an existing id, or beyond the grant.
    let mem = ctrl.allocator().alloc(4096, 4096).unwrap();
    for (qid, expect) in [(0u16, cs::INVALID_QUEUE_IDENTIFIER), (1, cs::INVALID_QUEUE_IDENTIFIER), (3, cs::INVALID_QUEUE_IDENTIFIER)] {
        let e = ctrl.admin_command(nvme_spec::cmd::CreateIoCq::new(qid, entries(8), mem.iova()).build(), None).unwrap_err();
        match e {
            Error::Command { status, .. } => assert_eq!((status.sct, status.sc), (StatusCodeType::COMMAND_SPECIFIC, expect)),
            e => panic!("{e}"),
        }
    }
    // Queue size 1 (QSIZE 0) and above MQES: Invalid Queue Size.
    // (No QueueEntries describes one entry: QSIZE 0 is written by hand.)
    let mut one = nvme_spec::cmd::CreateIoCq::new(2, entries(2), mem.iova()).build();
    one.cdw10 &= 0xffff;
    for (what, sqe) in [("QSIZE 0", one), ("4096 entries", nvme_spec::cmd::CreateIoCq::new(2, entries(4096), mem.iova()).build())] {
        let e = ctrl.admin_command(sqe, None).unwrap_err();
        assert!(matches!(e, Error::Command { status, .. } if status.sc == cs::INVALID_QUEUE_SIZE), "{what}");
    }
    // An SQ naming a CQ that does not exist.
    let e = ctrl.admin_command(nvme_spec::cmd::CreateIoSq::new(2, entries(8), mem.iova(), 2).build(), None).unwrap_err();
    assert!(matches!(e, Error::Command { status, .. } if status.sc == cs::COMPLETION_QUEUE_INVALID));
    // Deleting a CQ that still has its SQ: Invalid Queue Deletion.
    let e = ctrl.admin_command(nvme_spec::cmd::delete_io_cq(1), None).unwrap_err();
    assert!(matches!(e, Error::Command { status, .. } if status.sc == cs::INVALID_QUEUE_DELETION));
    // Number of Queues after queues exist: Command Sequence Error.
    let e = ctrl.admin_command(nvme_spec::cmd::set_number_of_queues(4, 4), None).unwrap_err();
    assert!(matches!(e, Error::Command { status, .. } if status.sc == gs::COMMAND_SEQUENCE_ERROR));
    // Unknown admin opcode; unknown log page; unknown CNS.
    let mut unk = Sqe::default();
    unk.cdw0.set_opc(0x3f);
    assert!(matches!(ctrl.admin_command(unk, None), Err(Error::Command { status, .. }) if status.sc == gs::INVALID_OPCODE));
    let lp = nvme_spec::cmd::get_log_page(0x70, 0, 512, 0);
    assert!(matches!(ctrl.admin_command(lp, Some(DataPtr::of(&mem))), Err(Error::Command { status, .. }) if status.sc == cs::INVALID_LOG_PAGE));
    let mut id = nvme_spec::cmd::Identify::controller();
    id.cdw10 = 0x55;
    assert!(matches!(ctrl.admin_command(id, Some(DataPtr::of(&mem))), Err(Error::Command { status, .. }) if status.sc == gs::INVALID_FIELD));
    // A SMART log read works.
    assert!(ctrl.admin_command(nvme_spec::cmd::get_log_page(2, u32::MAX, 512, 0), Some(DataPtr::of(&mem))).is_ok());
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn cid_exhaustion_and_reuse_on_a_live_queue() {
    let (_sim, mut ctrl) = bring_up(SimConfig { data: DataMode::Null, ..Default::default() }, 1);
    let mut qp = ctrl.create_io_queue_pair(4).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    for i in 0..3 {
        qp.read(1, i, 1, DataPtr::of(&buf), i).unwrap();
    }
    assert!(matches!(qp.read(1, 0, 1, DataPtr::of(&buf), 9), Err(SubmitError::QueueFull { outstanding: 3 })));
    qp.ring();
    let mut tags = vec![];
    while tags.len() < 3 {
        qp.poll(4, |c| tags.push(c.tag));
    }
    tags.sort();
    assert_eq!(tags, vec![0, 1, 2]);
    // Many laps around a 4-entry ring.
    for lap in 0..1000u64 {
        for i in 0..3 {
            qp.read(1, i, 1, DataPtr::of(&buf), lap * 3 + i).unwrap();
        }
        qp.ring();
        wait_all(&mut qp, 3);
    }
    assert_eq!(qp.stats().completed, 3003);
    assert_eq!(qp.stats().invalid_cid, 0);
}

#[test]
fn many_queue_pairs_on_threads() {
    let (_sim, mut ctrl) = bring_up(SimConfig::default().with_namespace(16 << 20, 512), 2);
    let qps: Vec<_> = (0..2).map(|_| ctrl.create_io_queue_pair(64).unwrap()).collect();
    let mem = ctrl.allocator().clone();
    let handles: Vec<_> = qps
        .into_iter()
        .enumerate()
        .map(|(t, mut qp)| {
            let mem = mem.clone();
            std::thread::spawn(move || {
                let buf = mem.alloc(4096, 4096).unwrap();
                for i in 0..200u64 {
                    let lba = (t as u64 * 10_000) + i * 8;
                    stamp(&buf, lba, 8, 512, t as u64);
                    assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::write(1, lba, 8).build(), Some(DataPtr::of(&buf))).is_success());
                    buf.fill(0, 4096, 0xff);
                    assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, lba, 8).build(), Some(DataPtr::of(&buf))).is_success());
                    check(&buf, lba, 8, 512, t as u64);
                }
                qp
            })
        })
        .collect();
    for h in handles {
        let qp = h.join().unwrap();
        ctrl.delete_io_queue_pair(qp).unwrap();
    }
}

#[test]
fn doorbell_stride_2() {
    // MMIO doorbells only, so each one lands in its register: a polling
    // controller with shadow doorbells may never need one.
    let sim = SimController::start(quiet(SimConfig { dstrd: 2, ..Default::default() })).unwrap();
    let cfg = ControllerConfig { shadow_doorbells: false, ..Default::default() };
    let mut ctrl = Controller::new(sim.registers(), sim.allocator(), cfg).unwrap();
    assert_eq!(ctrl.cap().dstrd(), 2);
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    assert_eq!(qp.sq().doorbell_offset(), 0x1020);
    assert_eq!(qp.cq().doorbell_offset(), 0x1030);
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    // Enough commands that the batched completion doorbell is rung too
    // (every 8 completions, with the head not yet wrapped back to 0).
    for _ in 0..12 {
        assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, 0, 1).build(), Some(DataPtr::of(&buf))).is_success());
    }
    let regs: Arc<SimRegisters> = sim.registers();
    assert_ne!(regs.read32(0x1020), 0, "SQ1 tail doorbell at 0x1020");
    assert_ne!(regs.read32(0x1030), 0, "CQ1 head doorbell at 0x1030");
    assert_eq!(regs.read32(0x1008), 0, "nothing at the DSTRD=0 offsets");
}

#[test]
fn dropping_the_controller_shuts_it_down() {
    let sim = SimController::start(quiet(SimConfig::default())).unwrap();
    let regs = sim.registers();
    {
        let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
        let _qp = ctrl.create_io_queue_pair(8).unwrap();
        // dropped without shutdown: an error path
    }
    assert_eq!(regs.read32(nvme_spec::regs::offset::CSTS) & 1, 0, "not ready: handed back reset");
    // And it can be brought up again.
    let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
    ctrl.shutdown().unwrap();
}

#[test]
fn synchronous_simulator_is_deterministic() {
    // The controller runs inside register accesses: the same run gives the
    // same completions in the same order, every time.
    let run_once = || {
        let sim = SimController::start(SimConfig { threaded: false, ..Default::default() }).unwrap();
        let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
        let mut qp = ctrl.create_io_queue_pair(4).unwrap();
        let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
        let mut order = vec![];
        for round in 0..50u64 {
            for i in 0..3 {
                qp.read(1, round * 3 + i, 1, DataPtr::of(&buf), round * 3 + i).unwrap();
            }
            // The doorbell write runs the controller: completions are there at once.
            qp.ring();
            let n = qp.poll(8, |c| order.push((c.tag, c.cid)));
            assert_eq!(n, 3, "synchronous controller completes at the doorbell");
        }
        // Explicit stepping.
        sim.set_auto_step(false);
        qp.read(1, 0, 1, DataPtr::of(&buf), 999).unwrap();
        qp.ring();
        assert_eq!(qp.poll(8, |_| {}), 0, "nothing before the controller steps");
        assert_eq!(sim.step(), 1);
        assert_eq!(qp.poll(8, |c| order.push((c.tag, c.cid))), 1);
        sim.set_auto_step(true);
        ctrl.delete_io_queue_pair(qp).unwrap();
        ctrl.shutdown().unwrap();
        order
    };
    let a = run_once();
    assert_eq!(a.len(), 151);
    assert_eq!(a, run_once());
}

#[test]
fn fast_path_entries_equal_the_builder() {
    // QueuePair::read/write assemble the entry directly; it must be the same
    // entry ReadWrite::build describes (CID and PRPs aside).
    let sim = SimController::start(SimConfig { threaded: false, ..Default::default() }).unwrap();
    let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(8192, 4096).unwrap();
    sim.set_auto_step(false);
    for (write, slba, blocks) in [(false, 7u64, 1u32), (true, 1 << 33, 16), (false, 0, 8)] {
        let slot = qp.sq().tail();
        let data = DataPtr { iova: buf.iova(), len: blocks as usize * 512 };
        let cid = if write { qp.write(1, slba, blocks, data, 0).unwrap() } else { qp.read(1, slba, blocks, data, 0).unwrap() };
        let posted = qp.sq().entry(slot);
        let mut want = if write { nvme_spec::cmd::ReadWrite::write(1, slba, blocks) } else { nvme_spec::cmd::ReadWrite::read(1, slba, blocks) }.build();
        want.set_cid(cid);
        want.prp1 = buf.iova();
        want.prp2 = if blocks * 512 > 4096 { buf.iova() + 4096 } else { 0 };
        assert_eq!(posted, want);
    }
    sim.set_auto_step(true); // so teardown's admin commands complete at once
}

#[test]
fn batch_entries_equal_the_one_by_one_entries() {
    // submit_batch and submit_each (whose loop writes the common entry
    // itself) post, for each command, exactly the entry read/write/flush
    // post (CID included: all take CIDs from the same free stack), with
    // streaming entry stores (the default) or cached ones.
    use nvme_driver::IoCmd;
    use nvme_spec::NvmOpcode;
    let cmds = |buf: &DmaRegion| {
        let b = buf.iova();
        vec![
            IoCmd { op: NvmOpcode::Read, slba: 7, blocks: 1, data: DataPtr { iova: b, len: 512 }, tag: 10 },
            IoCmd { op: NvmOpcode::Write, slba: 1 << 33, blocks: 16, data: DataPtr { iova: b, len: 8192 }, tag: 11 },
            IoCmd { op: NvmOpcode::Flush, slba: 0, blocks: 0, data: DataPtr { iova: 0, len: 0 }, tag: 12 },
            IoCmd { op: NvmOpcode::Read, slba: 99, blocks: 8, data: DataPtr { iova: b + 512, len: 4096 }, tag: 13 },
            IoCmd { op: NvmOpcode::Read, slba: 5, blocks: 64, data: DataPtr { iova: b, len: 32768 }, tag: 14 },
        ]
    };
    // How the commands are posted: one by one, submit_batch, submit_each.
    #[derive(Clone, Copy, PartialEq)]
    enum Way {
        OneByOne,
        Batch,
        Each,
    }
    let entries = |way: Way, streaming_sq: bool| {
        let sim = SimController::start(SimConfig { threaded: false, ..Default::default() }).unwrap();
        let cfg = ControllerConfig { streaming_sq, ..Default::default() };
        let mut ctrl = Controller::new(sim.registers(), sim.allocator(), cfg).unwrap();
        let mut qp = ctrl.create_io_queue_pair(8).unwrap();
        let buf = ctrl.allocator().alloc(65536, 4096).unwrap();
        sim.set_auto_step(false);
        let cmds = cmds(&buf);
        if way == Way::Batch {
            assert_eq!(qp.submit_batch(1, cmds.iter().copied()).unwrap(), cmds.len());
        } else if way == Way::Each {
            assert_eq!(qp.submit_each(1, &cmds, |c| *c).unwrap(), cmds.len());
        } else {
            for c in &cmds {
                match c.op {
                    NvmOpcode::Read => qp.read(1, c.slba, c.blocks, c.data, c.tag),
                    NvmOpcode::Write => qp.write(1, c.slba, c.blocks, c.data, c.tag),
                    _ => qp.flush(1, c.tag),
                }
                .unwrap();
            }
        }
        let out: Vec<Sqe> = (0..cmds.len() as u16).map(|slot| qp.sq().entry(slot)).collect();
        let tags: Vec<(u16, u64)> = qp.outstanding_commands().collect();
        sim.set_auto_step(true); // so teardown's admin commands complete
        (out, tags)
    };
    let (a, ta) = entries(Way::OneByOne, true);
    let (b, tb) = entries(Way::Batch, true);
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    let (c, tc) = entries(Way::Batch, false);
    assert_eq!((c, tc), (b.clone(), tb.clone()));
    // submit_each walks its run of CIDs from the deepest: other CIDs (and
    // so, for the command of a PRP list, another list page), the same
    // entries and tags otherwise.
    let tag = |t: &[(u16, u64)], cid| t.iter().find(|p| p.0 == cid).map(|p| p.1);
    for streaming_sq in [true, false] {
        let (e, te) = entries(Way::Each, streaming_sq);
        assert_eq!(e.len(), b.len());
        for (i, (x, y)) in e.iter().zip(&b).enumerate() {
            assert_eq!(tag(&te, x.cid()), tag(&tb, y.cid()), "entry {i}'s tag");
            let mut x = *x;
            x.set_cid(y.cid());
            if i == 4 {
                assert_ne!(x.prp2, 0, "a list");
                x.prp2 = y.prp2;
            }
            assert_eq!(x, *y, "entry {i}");
        }
    }
    assert_eq!(b[2].opcode(), NvmOpcode::Flush as u8);
    assert_eq!((b[2].prp1, b[2].prp2, b[2].cdw10, b[2].cdw12), (0, 0, 0, 0));
}

#[test]
fn batch_stops_at_a_full_queue_and_at_a_bad_command() {
    use nvme_driver::IoCmd;
    use nvme_spec::NvmOpcode;
    let sim = SimController::start(SimConfig { threaded: false, ..Default::default() }).unwrap();
    let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
    let mut qp = ctrl.create_io_queue_pair(4).unwrap(); // 3 commands in flight at most
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    sim.set_auto_step(false);
    let read = |tag| IoCmd { op: NvmOpcode::Read, slba: tag, blocks: 1, data: DataPtr { iova: buf.iova(), len: 512 }, tag };
    // Full queue: 3 of 5 posted, no error.
    assert_eq!(qp.submit_batch(1, (0..5).map(read)).unwrap(), 3);
    assert_eq!(qp.submit_batch(1, (0..1).map(read)).unwrap(), 0);
    qp.ring();
    sim.step();
    assert_eq!(qp.poll(8, |c| assert!(c.ok())), 3);
    // A transfer above MDTS ends the batch with its error; the one before
    // it stays posted and the bad one's CID stays free.
    let max = qp.max_transfer();
    let big = IoCmd { data: DataPtr { iova: buf.iova(), len: max + 4096 }, blocks: ((max + 4096) / 512) as u32, ..read(9) };
    let e = qp.submit_batch(1, (0..3).map(|i| if i == 1 { big } else { read(i) })).unwrap_err();
    assert!(matches!(e, SubmitError::TooLarge { .. }), "{e:?}");
    assert_eq!(qp.outstanding(), 1);
    // A buffer PRPs cannot describe (not dword aligned) likewise.
    let odd = IoCmd { data: DataPtr { iova: buf.iova() + 2, len: 512 }, ..read(8) };
    assert!(matches!(qp.submit_batch(1, [odd]).unwrap_err(), SubmitError::Prp(_)));
    assert_eq!(qp.outstanding(), 1);
    qp.ring();
    sim.step();
    let mut tags = vec![];
    assert_eq!(qp.poll(8, |c| tags.push(c.tag)), 1);
    assert_eq!(tags, vec![0]);
    // All three CIDs are free again.
    assert_eq!(qp.submit_batch(1, (0..3).map(read)).unwrap(), 3);
    sim.set_auto_step(true); // so teardown's admin commands complete
}

/// `submit_each` (the backends' path: a slice, its CIDs taken as one run)
/// stops where `submit_batch` does: at a full queue, and at a command it
/// cannot describe, whose CID goes back while the ones before it stay.
#[test]
fn submit_each_stops_at_a_full_queue_and_at_a_bad_command() {
    use nvme_driver::IoCmd;
    use nvme_spec::NvmOpcode;
    let sim = SimController::start(SimConfig { threaded: false, ..Default::default() }).unwrap();
    let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
    let mut qp = ctrl.create_io_queue_pair(4).unwrap(); // 3 commands in flight at most
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    sim.set_auto_step(false);
    let read = |tag: &u64| IoCmd { op: NvmOpcode::Read, slba: *tag, blocks: 1, data: DataPtr { iova: buf.iova(), len: 512 }, tag: *tag };
    assert_eq!(qp.submit_each(1, &[0, 1, 2, 3, 4], read).unwrap(), 3);
    assert_eq!(qp.submit_each(1, &[5], read).unwrap(), 0);
    qp.ring();
    sim.step();
    let mut tags = vec![];
    assert_eq!(qp.poll(8, |c| tags.push(c.tag)), 3);
    tags.sort();
    assert_eq!(tags, vec![0, 1, 2]);
    // The second of three cannot be described (not dword aligned).
    let odd = |tag: &u64| if *tag == 11 { IoCmd { data: DataPtr { iova: buf.iova() + 2, len: 512 }, ..read(tag) } } else { read(tag) };
    assert!(matches!(qp.submit_each(1, &[10, 11, 12], odd).unwrap_err(), SubmitError::Prp(_)));
    assert_eq!(qp.outstanding(), 1);
    qp.ring();
    sim.step();
    let mut tags = vec![];
    assert_eq!(qp.poll(8, |c| tags.push(c.tag)), 1);
    assert_eq!(tags, vec![10]);
    // All three CIDs are free again.
    assert_eq!(qp.submit_each(1, &[20, 21, 22], read).unwrap(), 3);
    sim.set_auto_step(true); // so teardown's admin commands complete
}

#[test]
fn shadow_doorbells_spare_mmio_writes_and_keep_data_intact() {
    for shadow in [true, false] {
        let sim = SimController::start(quiet(SimConfig::default().with_namespace(16 << 20, 512))).unwrap();
        let mut ctrl = Controller::new(
            sim.registers(),
            sim.allocator(),
            ControllerConfig { shadow_doorbells: shadow, ..Default::default() },
        )
        .unwrap();
        assert_eq!(ctrl.shadow_doorbells(), shadow);
        let mut qp = ctrl.create_io_queue_pair(64).unwrap();
        let buf = ctrl.allocator().alloc(32 * 4096, 4096).unwrap();
        for round in 0..200u64 {
            for i in 0..32u64 {
                let lba = (round * 32 + i) % 4000 * 8;
                let b = buf.sub(i as usize * 4096, 4096);
                stamp(&b, lba, 8, 512, round);
                qp.write(1, lba, 8, DataPtr::of(&b), i).unwrap();
            }
            qp.ring();
            wait_all(&mut qp, 32);
            for i in 0..32u64 {
                let lba = (round * 32 + i) % 4000 * 8;
                qp.read(1, lba, 8, DataPtr::of(&buf.sub(i as usize * 4096, 4096)), i).unwrap();
            }
            qp.ring();
            wait_all(&mut qp, 32);
            for i in 0..32u64 {
                let lba = (round * 32 + i) % 4000 * 8;
                check(&buf.sub(i as usize * 4096, 4096), lba, 8, 512, round);
            }
        }
        let st = qp.stats();
        let rung = st.sq_doorbells + st.cq_doorbells;
        if shadow {
            assert!(st.mmio_doorbells < rung, "shadow doorbells should spare MMIO writes: {st:?}");
            // Each submission doorbell after the first carries the completion
            // head too (QueuePair::ring), under the same fence.
            assert!(st.cq_doorbells >= st.sq_doorbells - 1, "{st:?}");
        } else {
            assert_eq!(st.mmio_doorbells, rung);
            // Without shadows the completion doorbell is its own MMIO write:
            // once per (CQ entries - SQ entries) completions, not per ring.
            assert!(st.cq_doorbells <= st.completed / 64 + 1, "{st:?}");
        }
        // Delete and re-create the same queue id: its shadow slots start from zero again.
        ctrl.delete_io_queue_pair(qp).unwrap();
        let mut qp = ctrl.create_io_queue_pair(8).unwrap();
        assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, 0, 1).build(), Some(DataPtr::of(&buf.sub(0, 4096)))).is_success());
        ctrl.delete_io_queue_pair(qp).unwrap();
        ctrl.shutdown().unwrap();
    }
}

#[test]
fn shadow_doorbells_reach_every_queue_past_the_first_page_at_any_stride() {
    // With Doorbell Buffer Config on, the controller reads every I/O
    // queue's tail from, and writes its EventIdx into, the queue's slot at
    // its doorbell offset (QEMU does the same): slots past the first page
    // must be host memory the queue rings, at the controller's stride. Each
    // case has queues whose slots lie past 4 KiB: qid 512 at DSTRD 0, qid 32
    // at DSTRD 4, qid 2 at DSTRD 8.
    for (dstrd, queues) in [(0u8, 520u16), (4, 40), (8, 4)] {
        let sim = SimController::start(quiet(SimConfig { dstrd, max_io_queues: queues, ..Default::default() })).unwrap();
        let cfg = ControllerConfig { io_queues: queues, admin_timeout: Duration::from_secs(5), ..Default::default() };
        let mut ctrl = Controller::new(sim.registers(), sim.allocator(), cfg).unwrap();
        assert!(ctrl.shadow_doorbells());
        assert_eq!(ctrl.io_queues_granted(), queues);
        let mut qps: Vec<_> = (0..queues).map(|_| ctrl.create_io_queue_pair(4).unwrap()).collect();
        let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
        for qp in &mut qps {
            let qid = qp.qid();
            for lba in [qid as u64, qid as u64 + 1000] {
                qp.read(1, lba, 1, DataPtr::of(&buf), lba).unwrap();
                qp.ring();
                let start = Instant::now();
                while qp.poll(1, |c| assert!(c.ok(), "{}", c.status())) == 0 {
                    assert!(
                        start.elapsed() < Duration::from_secs(5),
                        "DSTRD {dstrd}: a read on queue {qid} never completed: its doorbell did not reach the controller ({} shadow slots unreachable)",
                        sim.stats().dma_faults.load(std::sync::atomic::Ordering::Relaxed)
                    );
                    std::hint::spin_loop();
                }
            }
        }
        assert_eq!(sim.stats().dma_faults.load(std::sync::atomic::Ordering::Relaxed), 0, "DSTRD {dstrd}: shadow slots outside host memory");
        for qp in qps {
            ctrl.delete_io_queue_pair(qp).unwrap();
        }
        ctrl.shutdown().unwrap();
    }
}

#[test]
fn plain_pass_completions_equal_the_general_path() {
    // The simulator takes untraced, unfaulted null-data passes through its
    // one loop with the trace and fault hooks compiled out
    // (Device::take_entries::<true>), whose runs of successful Reads and
    // Writes hold both queues (Device::plain_run) and stop at anything
    // else. Every completion entry it posts, errors included, must be what
    // the loop with its hooks (on when a trace listener is set) posts: same status, CID, SQ head and SQ id, in
    // the same order, across queue wraps and phase flips; in a shallow
    // queue, and in a deep one with long batches and long runs of plain
    // entries between the others.
    let run_once = |traced: bool, depth: u16, batch: usize, copies: usize| {
        let events: Option<nvme_sim::EventHook> = traced.then(|| Arc::new(|_: &nvme_sim::SimEvent| {}) as _);
        let cfg = SimConfig { threaded: false, data: DataMode::Null, events, ..Default::default() };
        let sim = SimController::start(cfg).unwrap();
        let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
        let mut qp = ctrl.create_io_queue_pair(depth.into()).unwrap();
        let buf = ctrl.allocator().alloc(8192, 4096).unwrap();
        let blocks = 1u64 << 17;
        let rw = |write: bool, nsid: u32, slba: u64, n: u32| {
            let mut e = if write { nvme_spec::cmd::ReadWrite::write(nsid, slba, n) } else { nvme_spec::cmd::ReadWrite::read(nsid, slba, n) }.build();
            e.prp1 = buf.iova();
            e.prp2 = if n > 8 { buf.iova() + 4096 } else { 0 };
            e
        };
        let mut cmds = vec![
            rw(false, 1, 0, 1),
            rw(true, 1, blocks - 8, 8),
            rw(false, 0, 0, 1),          // namespace 0
            rw(false, 2, 0, 1),          // no such namespace
            rw(false, 1, blocks - 1, 2), // past the end
            rw(false, 1, u64::MAX, 1),   // SLBA + NLB overflows
            rw(true, 1, 0, 2048),        // 1 MiB: beyond MDTS
            rw(false, 1, 0, 16),
        ];
        let mut fused = rw(false, 1, 0, 1);
        fused.cdw0.set_fuse(1);
        let mut sgl = rw(false, 1, 0, 1);
        sgl.cdw0.set_psdt(1);
        let mut odd = rw(false, 1, 0, 1);
        odd.prp1 += 2;
        let mut flush = Sqe::default();
        flush.cdw0.set_opc(0);
        flush.nsid = 1;
        let mut unknown = Sqe::default();
        unknown.cdw0.set_opc(0x7f);
        unknown.nsid = 1;
        cmds.extend([fused, sgl, odd, flush, unknown, rw(true, 1, 9, 1), rw(false, 1, 3, 4)]);
        // More copies: runs of plain entries (up to 17 long) between the
        // others.
        let plain_run: Vec<Sqe> = (0..20).map(|i| rw(i % 2 == 0, 1, i, 1)).collect();
        let mut all = vec![];
        for c in 0..copies {
            all.extend(plain_run.iter().take(3 + 7 * c).copied());
            all.extend(cmds.iter().copied());
        }
        let cmds = all;
        let mut seen = vec![];
        // Batches of up to `batch` (< the queue's depth) so each doorbell
        // mixes plain and other entries; 5 rounds wrap both rings several times.
        for round in 0..5 {
            for chunk in cmds.chunks(batch) {
                let slot0 = qp.cq().head() as usize;
                for (i, e) in chunk.iter().enumerate() {
                    qp.submit(*e, None, (round * 100 + i) as u64).unwrap();
                }
                qp.ring();
                let mut got = 0;
                qp.poll(depth as usize, |c| {
                    seen.push((c.tag, c.cid, c.raw_status.into_bits() & !1, c.dw0));
                    got += 1;
                });
                assert_eq!(got, chunk.len(), "synchronous controller completes at the doorbell");
                // The entries as the controller wrote them (SQ head and id).
                for k in 0..got {
                    let slot = (slot0 + k) % depth as usize;
                    seen.push((u64::MAX, 0, 0, qp.cq().entry(slot as u16).to_dwords()[2]));
                }
            }
        }
        ctrl.delete_io_queue_pair(qp).unwrap();
        ctrl.shutdown().unwrap();
        seen
    };
    for (depth, batch, copies) in [(8, 7, 1), (64, 63, 3), (64, 40, 3)] {
        let plain = run_once(false, depth, batch, copies);
        let general = run_once(true, depth, batch, copies);
        let cmds = (0..copies).map(|c| 3 + 7 * c + 15).sum::<usize>();
        assert_eq!(plain.len(), 2 * 5 * cmds, "depth {depth}");
        assert_eq!(plain, general, "depth {depth}, batches of {batch}");
        assert!(plain.iter().any(|s| s.2 != 0) && plain.iter().any(|s| s.0 != u64::MAX && s.2 == 0), "both outcomes exercised");
    }
}

#[test]
fn a_parked_controller_is_woken_by_the_first_new_entry() {
    // While it busy-polls, the simulator publishes an EventIdx the host's
    // tail cannot pass (no MMIO doorbell writes); before it parks it sets
    // EventIdx to its head and looks once more. Without that, a command
    // sent to a parked controller would wait out its park (here up to
    // 300 ms, the park doubling from 20 us while idle).
    use std::sync::atomic::Ordering::Relaxed;
    let cfg = SimConfig { idle_spins: 100, max_park: Duration::from_millis(300), data: DataMode::Null, ..Default::default() };
    let (sim, mut ctrl) = bring_up(cfg, 1);
    assert!(ctrl.shadow_doorbells());
    let mut qp = ctrl.create_io_queue_pair(16).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    let mut mmio_busy = 0;
    for round in 0..40u64 {
        // Busy: the next batch right after the last completion finds the
        // controller polling, and needs no MMIO write.
        for i in 0..8 {
            qp.read(1, i, 1, DataPtr::of(&buf), i).unwrap();
        }
        qp.ring();
        wait_all(&mut qp, 8);
        let before = qp.stats().mmio_doorbells;
        qp.read(1, round, 1, DataPtr::of(&buf), 0).unwrap();
        qp.ring();
        mmio_busy += (qp.stats().mmio_doorbells - before) as usize;
        wait_all(&mut qp, 1);
    }
    // (A lap over the ring can cross a stale EventIdx now and then.)
    assert!(mmio_busy <= 10, "{mmio_busy} MMIO writes for 40 batches sent to a polling controller");
    for round in 0..4u64 {
        // Idle until the controller has parked 15 times (the 15th park,
        // now under way, is 300 ms long: 20 us doubled 14 times, capped),
        // then one command: not woken, it would wait out most of the 300 ms.
        let parks = sim.stats().parks.load(Relaxed);
        let t = Instant::now();
        while sim.stats().parks.load(Relaxed) < parks + 15 {
            assert!(t.elapsed() < Duration::from_secs(10), "controller never parked");
            std::thread::sleep(Duration::from_millis(1));
        }
        let t = Instant::now();
        assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, round, 1).build(), Some(DataPtr::of(&buf))).is_success());
        // 200 ms: a margin a loaded machine keeps, still short of the park.
        assert!(t.elapsed() < Duration::from_millis(200), "round {round}: a parked controller took {:?} to answer", t.elapsed());
    }
    ctrl.delete_io_queue_pair(qp).unwrap();
}

/// Queues the simulator saw created: (qid, is CQ, entries).
type Created = Arc<std::sync::Mutex<Vec<(u16, bool, u32)>>>;

/// A hook recording the queues the simulator creates.
fn queue_events() -> (nvme_sim::EventHook, Created) {
    let seen = Arc::new(std::sync::Mutex::new(vec![]));
    let s2 = seen.clone();
    let hook: nvme_sim::EventHook = Arc::new(move |e: &nvme_sim::SimEvent| {
        if let nvme_sim::SimEvent::Queue { qid, cq, created: true, entries } = e {
            s2.lock().unwrap().push((*qid, *cq, *entries));
        }
    });
    (hook, seen)
}

#[test]
fn cap_mqes_ffffh_gives_queues_that_fit_their_rings() {
    // CAP.MQES = FFFFh: 65536-entry queues allowed. Asking for 40001
    // entries (--iodepth 40000) used to wrap (65536 as u16 = 0) into a
    // Create I/O CQ of QSIZE FFFFh over a one-page ring and a panic.
    let (hook, seen) = queue_events();
    let (_sim, mut ctrl) = bring_up(SimConfig { max_queue_entries: 65536, events: Some(hook), ..Default::default() }, 2);
    assert_eq!(ctrl.max_queue_entries().get(), 65536);
    assert_eq!(ctrl.max_io_queue_entries().get(), 4096, "12-bit command identifier tags");
    assert_eq!(ctrl.max_io_queue_depth(), 4095);
    let mut qp = ctrl.create_io_queue_pair(40001).expect("a queue, clamped");
    assert_eq!(qp.depth(), 4095);
    assert_eq!(*seen.lock().unwrap(), vec![(1, true, 8192), (1, false, 4096)], "CQ twice the SQ, both within CAP.MQES");
    // Every CID works: fill the queue, complete it all, twice.
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    for _ in 0..2 {
        for t in 0..4095u64 {
            qp.read(1, t % 64, 1, DataPtr { iova: buf.iova(), len: 512 }, t).unwrap();
        }
        assert!(matches!(qp.read(1, 0, 1, DataPtr::of(&buf), 0), Err(SubmitError::QueueFull { .. })));
        qp.ring();
        wait_all(&mut qp, 4095);
    }
    ctrl.delete_io_queue_pair(qp).unwrap();
    // The largest request there is: still clamped.
    let qp = ctrl.create_io_queue_pair(u32::MAX).unwrap();
    assert_eq!(qp.depth(), 4095);
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn the_smallest_queues_and_a_cap_mqes_below_the_minimum() {
    // MQES = 1: two-entry queues, one command in flight; the completion
    // queue cannot be doubled past CAP.MQES.
    let (hook, seen) = queue_events();
    let (_sim, mut ctrl) = bring_up(SimConfig { max_queue_entries: 2, events: Some(hook), ..Default::default() }, 1);
    let mut qp = ctrl.create_io_queue_pair(64).unwrap();
    assert_eq!((qp.depth(), ctrl.max_io_queue_depth()), (1, 1));
    assert_eq!(*seen.lock().unwrap(), vec![(1, true, 2), (1, false, 2)]);
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    for i in 0..5 {
        assert!(run(&mut qp, nvme_spec::cmd::ReadWrite::read(1, i, 1).build(), Some(DataPtr::of(&buf))).is_success());
    }
    ctrl.delete_io_queue_pair(qp).unwrap();
    drop(ctrl);

    // MQES = 0 (one-entry queues) is below the specification's minimum:
    // refused at bring-up, saying so, rather than a panic when a queue is made.
    let sim = SimController::start(quiet(SimConfig { max_queue_entries: 1, ..Default::default() })).unwrap();
    let e = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).err().expect("refused");
    assert!(e.to_string().contains("CAP.MQES is 0"), "{e}");
}

#[test]
fn a_controller_granting_more_queues_than_asked_is_held_to_what_was_asked() {
    // QEMU answers Number of Queues with every queue it has. The host
    // provided doorbells (BAR0 mapping), vectors and shadow slots for what
    // it asked: more queue ids than that must not be used.
    let (_sim, mut ctrl) = bring_up(SimConfig { grants_every_queue: true, max_io_queues: 8, ..Default::default() }, 2);
    assert_eq!(ctrl.io_queues_granted(), 2);
    let a = ctrl.create_io_queue_pair(8).unwrap();
    let b = ctrl.create_io_queue_pair(8).unwrap();
    assert!(matches!(ctrl.create_io_queue_pair(8), Err(Error::NoQueues { granted: 2 })));
    ctrl.delete_io_queue_pair(a).unwrap();
    ctrl.delete_io_queue_pair(b).unwrap();
}

#[test]
fn a_controller_found_enabling_is_let_become_ready_before_it_is_reset() {
    // The previous owner set CC.EN = 1 and left; the controller takes 300 ms
    // to become ready. Clearing CC.EN before CSTS.RDY = 1 has undefined
    // results (NVMe 1.4c §3.1.5); this controller then reports fatal status.
    use nvme_spec::regs::{offset, Aqa, Cc};
    let sim = SimController::start(quiet(SimConfig { ready_delay: Duration::from_millis(300), ..Default::default() })).unwrap();
    let regs = sim.registers();
    let (asq, acq) = (sim.allocator().alloc(4096, 4096).unwrap(), sim.allocator().alloc(4096, 4096).unwrap());
    regs.write32(offset::AQA, Aqa::new().with_asqs(7).with_acqs(7).into_bits());
    regs.write64(offset::ASQ, asq.iova());
    regs.write64(offset::ACQ, acq.iova());
    regs.write32(offset::CC, Cc::new().with_iosqes(6).with_iocqes(4).with_en(true).into_bits());
    assert_eq!(regs.read32(offset::CSTS) & 1, 0, "still enabling");
    let t = Instant::now();
    let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).expect("taken over");
    assert!(t.elapsed() >= Duration::from_millis(250), "waited for CSTS.RDY = 1 first: {:?}", t.elapsed());
    assert!(!ctrl.status().cfs());
    assert_eq!(sim.stats().resets.load(std::sync::atomic::Ordering::Relaxed), 1, "one clean reset");
    assert_eq!(ctrl.identify().sn, "NVBSIM0001");
    ctrl.create_io_queue_pair(8).map(|q| ctrl.delete_io_queue_pair(q)).unwrap().unwrap();
}

#[test]
fn the_nvme_2_ready_timeout_crto_is_used_when_cap_crms_reports_it() {
    // CAP.TO says 500 ms, CRTO.CRWMT 4 s; the controller needs 1.5 s.
    let cfg = SimConfig {
        timeout_500ms: 1,
        ready_timeouts_500ms: Some((8, 1)),
        ready_delay: Duration::from_millis(1500),
        ..Default::default()
    };
    let sim = SimController::start(quiet(cfg)).unwrap();
    let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default());
    let ctrl = ctrl.unwrap_or_else(|e| panic!("waited CRTO.CRWMT, not CAP.TO: {e}"));
    assert!(ctrl.cap().ready_with_media_timeout_reported());
    drop(ctrl);
    // A CRWMT below CAP.TO (seen on real devices) does not shorten the wait.
    let cfg = SimConfig {
        timeout_500ms: 4,
        ready_timeouts_500ms: Some((1, 1)),
        ready_delay: Duration::from_millis(1000),
        ..Default::default()
    };
    let sim = SimController::start(quiet(cfg)).unwrap();
    Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).expect("the larger of CAP.TO and CRWMT");
}

#[test]
fn an_enable_that_times_out_does_not_leave_the_controller_enabled_over_freed_memory() {
    use nvme_spec::regs::offset;
    // Never ready within CAP.TO (500 ms).
    let sim = SimController::start(quiet(SimConfig { timeout_500ms: 1, ready_delay: Duration::from_secs(3600), ..Default::default() })).unwrap();
    let regs = sim.registers();
    let e = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).err().expect("times out");
    assert!(e.to_string().contains("set CSTS.RDY after CC.EN=1"), "{e}");
    let (en, asq, acq) = (regs.read32(offset::CC) & 1, regs.read64(offset::ASQ), regs.read64(offset::ACQ));
    let mapped = |iova| sim.memory().snapshot().translate(iova, 64).is_some();
    // Either the controller was reset, or the admin queue it knows stays
    // mapped: never CC.EN = 1 over memory the next allocation may get.
    assert!(en == 0 || (mapped(asq) && mapped(acq)), "CC.EN = {en}, admin queue mapped: {} {}", mapped(asq), mapped(acq));
    assert!(!Csts::from_bits(regs.read32(offset::CSTS)).cfs(), "CC.EN was not cleared while CSTS.RDY = 0");
}

#[test]
fn every_allocation_of_the_bring_up_failing_leaves_no_controller_enabled_over_freed_memory() {
    use nvme_hal::{DmaAllocator, DmaError};
    use nvme_spec::regs::offset;
    use std::sync::atomic::{AtomicUsize, Ordering};
    /// The simulator's allocator, failing its `fail_at`th allocation.
    struct FailingAt {
        inner: Arc<dyn DmaAllocator>,
        count: AtomicUsize,
        fail_at: usize,
    }
    impl DmaAllocator for FailingAt {
        fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError> {
            if self.count.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
                return Err(DmaError::Exhausted { asked: len, left: 0, hint: "injected by the test" });
            }
            self.inner.alloc(len, align)
        }
    }
    // Bring-up allocates the admin queues, the Identify page and the shadow
    // doorbell buffers; whichever fails, the error comes back and the
    // controller is not left enabled over memory that went back to the
    // allocator.
    for fail_at in 1..=5 {
        let sim = SimController::start(quiet(SimConfig::default())).unwrap();
        let regs = sim.registers();
        let mem = Arc::new(FailingAt { inner: sim.allocator(), count: AtomicUsize::new(0), fail_at });
        let e = Controller::new(sim.registers(), mem, ControllerConfig::default()).err().expect("an allocation fails");
        assert!(matches!(e, Error::Dma(_)), "allocation {fail_at}: {e}");
        let (en, asq, acq) = (regs.read32(offset::CC) & 1, regs.read64(offset::ASQ), regs.read64(offset::ACQ));
        let mapped = |iova| sim.memory().snapshot().translate(iova, 64).is_some();
        assert!(en == 0 || (mapped(asq) && mapped(acq)), "allocation {fail_at}: CC.EN = 1 over a freed admin queue");
    }
}

#[test]
fn shutdown_waits_as_long_as_rtd3e_says() {
    use nvme_spec::regs::offset;
    // The controller needs 6 s to shut down and says so (RTD3E 20 s); CAP.TO is 2 s.
    let cfg = SimConfig { timeout_500ms: 4, rtd3e_us: 20_000_000, shutdown_time: Duration::from_secs(6), ..Default::default() };
    let (sim, ctrl) = bring_up(cfg, 1);
    assert_eq!(ctrl.shutdown_timeout(), Duration::from_secs(20));
    let regs = sim.registers();
    let t = Instant::now();
    ctrl.shutdown().expect("shut down within RTD3E");
    assert!(t.elapsed() >= Duration::from_secs(6));
    let csts = Csts::from_bits(regs.read32(offset::CSTS));
    assert!(!csts.rdy() && !csts.cfs(), "reset after a complete shutdown: {csts:?}");
}

#[test]
fn a_shutdown_that_does_not_complete_is_reported_and_the_controller_is_not_reset_under_it() {
    use nvme_spec::regs::{offset, shst, Cc};
    // Never completes; no RTD3E: Linux's default of 5 s.
    let (sim, ctrl) = bring_up(SimConfig { shutdown_time: Duration::MAX, ..Default::default() }, 1);
    assert_eq!(ctrl.shutdown_timeout(), Duration::from_secs(5));
    let regs = sim.registers();
    let asq = regs.read64(offset::ASQ);
    let e = ctrl.shutdown().expect_err("timed out");
    let msg = e.to_string();
    assert!(msg.contains("did not finish its shutdown") && msg.contains("5000 ms") && msg.contains("RTD3E"), "{msg}");
    let cc = Cc::from_bits(regs.read32(offset::CC));
    assert!(cc.en(), "CC.EN not forced off in the middle of a shutdown");
    assert_eq!(Csts::from_bits(regs.read32(offset::CSTS)).shst(), shst::OCCURRING);
    assert!(sim.memory().snapshot().translate(asq, 64).is_some(), "the controller's admin queue stays mapped");
    // RTD3E is clamped to 5..=60 s.
    let (_s, c) = bring_up(SimConfig { rtd3e_us: 1_000, ..Default::default() }, 1);
    assert_eq!(c.shutdown_timeout(), Duration::from_secs(5));
    let (_s, c) = bring_up(SimConfig { rtd3e_us: 3_600_000_000, ..Default::default() }, 1);
    assert_eq!(c.shutdown_timeout(), Duration::from_secs(60));
}
