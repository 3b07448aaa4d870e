//! The driver against a misbehaving controller: every fault the simulator
//! can inject ([`nvme_sim::Faults`]) and what the driver does about it.
//! A command timeout leads to Abort, then controller reset and re-created
//! queues, or a clean failure that leaves the controller disabled for the
//! next owner; fatal status (CSTS.CFS) is detected; completions with an
//! unknown CID or another queue's SQ id are rejected; injected statuses
//! decode with their DNR bit. No hardware needed.

use nvme_driver::{AbortOutcome, Controller, ControllerConfig, DataPtr, Error, QueuePair, TimeoutAction};
use nvme_hal::{DmaRegion, RegisterWindow};
use nvme_sim::{DataMode, SimConfig, SimController, SimRegisters};
use nvme_spec::regs::{offset, Cap, Csts};
use nvme_spec::status::generic as gs;
use nvme_spec::{Status, StatusCodeType};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_millis(300);

fn sim(cfg: SimConfig) -> SimController {
    // Park soon when idle: many tests run side by side on two cores.
    SimController::start(SimConfig { idle_spins: 2000, ..cfg }).unwrap()
}

/// A simulated controller as a previous owner left it: enabled and ready
/// with an admin queue of its own (whose memory is never ours to free).
fn left_enabled(cfg: SimConfig) -> SimController {
    use nvme_spec::regs::{Aqa, Cc};
    let s = sim(cfg);
    let regs = s.registers();
    let (asq, acq) = (s.allocator().alloc(4096, 4096).unwrap(), s.allocator().alloc(4096, 4096).unwrap());
    regs.write32(offset::AQA, Aqa::new().with_asqs(7).with_acqs(7).into_bits());
    regs.write64(offset::ASQ, asq.iova());
    regs.write64(offset::ACQ, acq.iova());
    regs.write32(offset::CC, Cc::new().with_iosqes(6).with_iocqes(4).with_en(true).into_bits());
    let t = Instant::now();
    while regs.read32(offset::CSTS) & 1 == 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "the simulator became ready");
        std::thread::yield_now();
    }
    std::mem::forget((asq, acq));
    s
}

fn bring_up_with(sim: &SimController, io_queues: u16, shadow: bool) -> Controller<SimRegisters> {
    let cfg = ControllerConfig {
        io_queues,
        admin_timeout: Duration::from_secs(5),
        shadow_doorbells: shadow,
        ..Default::default()
    };
    Controller::new(sim.registers(), sim.allocator(), cfg).unwrap()
}

fn bring_up(cfg: SimConfig) -> (SimController, Controller<SimRegisters>) {
    let s = sim(cfg);
    let c = bring_up_with(&s, 2, true);
    (s, c)
}

/// Poll until one completion arrives or `wait` passes.
fn poll_one(qp: &mut QueuePair<SimRegisters>, wait: Duration) -> Option<nvme_driver::Completion> {
    let start = Instant::now();
    loop {
        let mut got = None;
        qp.poll(1, |c| got = Some(c));
        if got.is_some() || start.elapsed() > wait {
            return got;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn read(qp: &mut QueuePair<SimRegisters>, lba: u64, buf: &DmaRegion, tag: u64) -> u16 {
    let cid = qp.read(1, lba, 8, DataPtr { iova: buf.iova(), len: 4096 }, tag).unwrap();
    qp.ring();
    cid
}

fn write_pattern(qp: &mut QueuePair<SimRegisters>, lba: u64, buf: &DmaRegion, byte: u8) {
    buf.fill(0, 4096, byte);
    qp.write(1, lba, 8, DataPtr { iova: buf.iova(), len: 4096 }, 1000).unwrap();
    qp.ring();
    let c = poll_one(qp, Duration::from_secs(5)).expect("write completes");
    assert!(c.status().is_success(), "{}", c.status());
}

fn first_byte(buf: &DmaRegion) -> u8 {
    let mut b = [0u8];
    buf.copy_to(0, &mut b);
    b[0]
}

#[test]
fn a_stalled_command_is_aborted_and_completes_as_aborted() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    sim.faults().stall_every.store(1, Ordering::Relaxed);
    let cid = read(&mut qp, 0, &buf, 7);
    assert!(poll_one(&mut qp, WAIT).is_none(), "the device sits on the command");
    assert_eq!(qp.outstanding_commands().collect::<Vec<_>>(), vec![(cid, 7)]);
    assert_eq!(ctrl.abort(qp.qid(), cid, WAIT).unwrap(), AbortOutcome::Aborted);
    let c = poll_one(&mut qp, WAIT).expect("the aborted command completes");
    assert_eq!((c.tag, c.status().sct, c.status().sc), (7, StatusCodeType::GENERIC, gs::ABORTED_BY_REQUEST));
    assert!(!c.status().dnr, "an aborted command may be retried");
    // Aborting a command that is not outstanding: "not aborted".
    assert_eq!(ctrl.abort(qp.qid(), cid, WAIT).unwrap(), AbortOutcome::NotAborted);
    sim.faults().stall_every.store(0, Ordering::Relaxed);
    read(&mut qp, 0, &buf, 8);
    assert!(poll_one(&mut qp, WAIT).unwrap().status().is_success());
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn a_lost_command_is_not_aborted_then_reset_and_recreated_queues_recover() {
    for shadow in [true, false] {
        let s = sim(SimConfig::default());
        let mut ctrl = bring_up_with(&s, 2, shadow);
        assert_eq!(ctrl.shadow_doorbells(), shadow);
        let mut qp = ctrl.create_io_queue_pair(8).unwrap();
        let mut other = ctrl.create_io_queue_pair(8).unwrap();
        let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
        write_pattern(&mut qp, 64, &buf, 0x5a);

        s.faults().drop_every.store(1, Ordering::Relaxed);
        let cid = read(&mut qp, 64, &buf, 11);
        assert!(poll_one(&mut qp, WAIT).is_none(), "the completion was dropped");
        assert_eq!(ctrl.abort(qp.qid(), cid, WAIT).unwrap(), AbortOutcome::NotAborted, "the controller lost it");
        s.faults().drop_every.store(0, Ordering::Relaxed);

        assert_eq!(ctrl.generation(), 0);
        ctrl.reset(WAIT).unwrap();
        assert_eq!(ctrl.generation(), 1);
        assert_eq!(s.stats().resets.load(Ordering::Relaxed), 1);
        assert_eq!(ctrl.shadow_doorbells(), shadow, "shadow doorbells configured again after the reset");
        let (mut qp, abandoned) = ctrl.recreate_io_queue_pair(qp, WAIT).unwrap();
        assert_eq!(abandoned, vec![11], "the lost command's tag comes back to be resubmitted");
        buf.fill(0, 4096, 0);
        read(&mut qp, 64, &buf, 12);
        let c = poll_one(&mut qp, Duration::from_secs(5)).expect("I/O works after the reset");
        assert!(c.status().is_success() && c.tag == 12, "{}", c.status());
        assert_eq!(first_byte(&buf), 0x5a, "data written before the reset is intact");
        // The other thread's queue died with the reset too: re-created, it works.
        let (mut other2, abandoned) = ctrl.recreate_io_queue_pair(other, WAIT).unwrap();
        assert!(abandoned.is_empty());
        other = other2;
        read(&mut other, 0, &buf, 13);
        assert!(poll_one(&mut other, Duration::from_secs(5)).unwrap().status().is_success());
        other2 = other;
        ctrl.delete_io_queue_pair(other2).unwrap();
        ctrl.delete_io_queue_pair(qp).unwrap();
        ctrl.shutdown().unwrap();
    }
}

#[test]
fn a_refused_doorbell_buffer_config_leaves_mmio_doorbells_at_bring_up_and_at_a_reset() {
    // Refused at bring-up: the controller comes up with MMIO doorbells.
    let s = sim(SimConfig::default());
    s.faults().refuse_dbbc.store(true, Ordering::Relaxed);
    let mut ctrl = bring_up_with(&s, 1, true);
    assert!(!ctrl.shadow_doorbells());
    let why = ctrl.shadow_doorbells_refused().expect("the refusal is reported");
    assert!(why.contains("INVALID FIELD"), "{why}");
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    read(&mut qp, 0, &buf, 1);
    assert!(poll_one(&mut qp, WAIT).unwrap().status().is_success());
    ctrl.delete_io_queue_pair(qp).unwrap();
    ctrl.shutdown().unwrap();

    // Accepted at bring-up, refused after a reset: the re-created queue
    // rings MMIO doorbells and works.
    let s = sim(SimConfig::default());
    let mut ctrl = bring_up_with(&s, 1, true);
    assert!(ctrl.shadow_doorbells() && ctrl.shadow_doorbells_refused().is_none());
    let qp = ctrl.create_io_queue_pair(8).unwrap();
    s.faults().refuse_dbbc.store(true, Ordering::Relaxed);
    ctrl.reset(WAIT).unwrap();
    assert!(!ctrl.shadow_doorbells());
    assert!(ctrl.shadow_doorbells_refused().is_some());
    let (mut qp, _) = ctrl.recreate_io_queue_pair(qp, WAIT).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    for tag in 0..20 {
        read(&mut qp, 0, &buf, tag);
        assert!(poll_one(&mut qp, WAIT).expect("I/O works on MMIO doorbells").status().is_success());
    }
    ctrl.delete_io_queue_pair(qp).unwrap();
    ctrl.shutdown().unwrap();
}

#[test]
fn a_refused_queue_count_keeps_the_admin_queue_and_says_why_no_io_queue_can_be_made() {
    let s = sim(SimConfig::default());
    s.faults().refuse_queue_count.store(true, Ordering::Relaxed);
    let mut ctrl = bring_up_with(&s, 2, true);
    assert_eq!(ctrl.io_queues_granted(), 0);
    assert!(!ctrl.shadow_doorbells(), "no queue, no shadow doorbell buffer");
    // The admin queue still works: Identify answers.
    assert_eq!(ctrl.identify_namespace(1).unwrap().nsze, 1 << 17);
    let e = ctrl.create_io_queue_pair(8).err().expect("no I/O queue without a queue count");
    assert!(matches!(e, Error::QueueCountRefused { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("Number of Queues") && msg.contains("INTERNAL DEVICE ERROR"), "{msg}");
    ctrl.shutdown().unwrap();
}

#[test]
fn a_controller_that_is_not_an_io_controller_or_takes_other_entry_sizes_is_refused_and_left_disabled() {
    for (cfg, says) in [
        (SimConfig { controller_type: 2, ..Default::default() }, "Discovery"),
        (SimConfig { controller_type: 3, ..Default::default() }, "Administrative"),
        (SimConfig { entry_sizes: (0x77, 0x44), ..Default::default() }, "SQES 0x77"),
        (SimConfig { entry_sizes: (0x66, 0x55), ..Default::default() }, "CQES 0x55"),
    ] {
        let s = sim(cfg);
        let cfg = ControllerConfig { admin_timeout: Duration::from_secs(5), ..Default::default() };
        let e = Controller::new(s.registers(), s.allocator(), cfg).err().expect("refused");
        assert!(e.to_string().contains(says), "{e}");
        // Dropping the half-made controller shut it down: not enabled.
        assert_eq!(s.registers().read32(offset::CC) & 1, 0, "{says}: CC.EN cleared");
    }
    // Type 0 (not reported, before NVMe 1.4) is an I/O controller.
    let s = sim(SimConfig { controller_type: 0, ..Default::default() });
    bring_up_with(&s, 1, true).shutdown().unwrap();
}

#[test]
fn the_wait_a_quirky_model_needs_after_cc_en_0_is_kept_at_every_reset_and_costs_nothing_when_found_disabled() {
    use nvme_driver::controller::ready_check_delay;
    assert_eq!(ready_check_delay(0x144d, 0xa822), Duration::from_millis(2300), "Samsung PM1725a");
    assert_eq!(ready_check_delay(0x1b36, 0x0010), Duration::ZERO, "QEMU's controller");
    let delay = Duration::from_millis(1500);
    let cfg = ControllerConfig { ready_check_delay: delay, admin_timeout: Duration::from_secs(5), ..Default::default() };
    // Found disabled (as after a function reset): nothing to wait for.
    let s = sim(SimConfig::default());
    let t = Instant::now();
    let mut ctrl = Controller::new(s.registers(), s.allocator(), cfg.clone()).unwrap();
    assert!(t.elapsed() < delay, "CC.EN was already 0: no wait: {:?}", t.elapsed());
    let t = Instant::now();
    ctrl.reset(Duration::from_secs(5)).unwrap();
    assert!(t.elapsed() >= delay, "a reset waits: {:?}", t.elapsed());
    let t = Instant::now();
    ctrl.shutdown().unwrap();
    assert!(t.elapsed() >= delay, "the hand-back waits: {:?}", t.elapsed());
    // Found enabled (the previous owner left it so, as after a function
    // that could not be reset): bring-up clears CC.EN and waits, as
    // Linux's nvme_disable_ctrl at probe.
    let s = left_enabled(SimConfig::default());
    let t = Instant::now();
    let ctrl = Controller::new(s.registers(), s.allocator(), cfg).unwrap();
    assert!(t.elapsed() >= delay, "bring-up of an enabled controller waits: {:?}", t.elapsed());
    ctrl.shutdown().unwrap();
}

/// The simulator's registers, with NVM subsystem reset supported
/// (CAP.NSSRS) or not, and CSTS.NSSRO, a write-1-to-clear bit, as the
/// test sets it; host writes to CSTS are counted, and whether the first
/// came before the first CC write (the reset).
struct SubsystemReset {
    sim: Arc<SimRegisters>,
    nssrs: bool,
    nssro: std::sync::atomic::AtomicBool,
    csts_writes: AtomicU32,
    cc_written: std::sync::atomic::AtomicBool,
    cleared_before_reset: std::sync::atomic::AtomicBool,
}

impl RegisterWindow for SubsystemReset {
    fn read32(&self, off: usize) -> u32 {
        let v = self.sim.read32(off);
        match off {
            o if o == offset::CAP + 4 && self.nssrs => v | (Cap::new().with_nssrs(true).into_bits() >> 32) as u32,
            offset::CSTS => v | Csts::new().with_nssro(self.nssro.load(Ordering::Relaxed)).into_bits(),
            _ => v,
        }
    }
    fn write32(&self, off: usize, v: u32) {
        match off {
            offset::CSTS => {
                if self.csts_writes.fetch_add(1, Ordering::Relaxed) == 0 && !self.cc_written.load(Ordering::Relaxed) {
                    self.cleared_before_reset.store(true, Ordering::Relaxed);
                }
                if Csts::from_bits(v).nssro() {
                    self.nssro.store(false, Ordering::Relaxed);
                }
            }
            offset::CC => self.cc_written.store(true, Ordering::Relaxed),
            _ => {}
        }
        self.sim.write32(off, v);
    }
    fn len(&self) -> usize {
        self.sim.len()
    }
}

/// CSTS.NSSRO, found set, is cleared before the reset of bring-up and of
/// every later reset, as Linux's `nvme_pci_configure_admin_queue` does, when
/// the controller supports NVM subsystem reset (CAP.NSSRS), and the
/// controller says it saw it; without NSSRS, CSTS is never written.
#[test]
fn nssro_is_cleared_before_each_reset_when_subsystem_reset_is_supported() {
    for nssrs in [true, false] {
        let s = left_enabled(SimConfig::default());
        let regs = Arc::new(SubsystemReset {
            sim: s.registers(),
            nssrs,
            nssro: true.into(),
            csts_writes: AtomicU32::new(0),
            cc_written: false.into(),
            cleared_before_reset: false.into(),
        });
        let cfg = ControllerConfig { admin_timeout: Duration::from_secs(5), ..Default::default() };
        let mut ctrl = Controller::new(regs.clone(), s.allocator(), cfg).unwrap();
        assert_eq!(ctrl.subsystem_reset_occurred(), nssrs, "NSSRS={nssrs}");
        if nssrs {
            assert!(!regs.nssro.load(Ordering::Relaxed), "NSSRO cleared");
            assert_eq!(regs.csts_writes.load(Ordering::Relaxed), 1);
            assert!(regs.cleared_before_reset.load(Ordering::Relaxed), "cleared before CC.EN = 0");
            // Cleared at a reset too; none to clear, no write.
            regs.nssro.store(true, Ordering::Relaxed);
            ctrl.reset(Duration::from_secs(5)).unwrap();
            assert!(!regs.nssro.load(Ordering::Relaxed), "NSSRO cleared at the reset");
            ctrl.reset(Duration::from_secs(5)).unwrap();
            assert_eq!(regs.csts_writes.load(Ordering::Relaxed), 2);
        } else {
            assert!(regs.nssro.load(Ordering::Relaxed), "left alone");
            ctrl.reset(Duration::from_secs(5)).unwrap();
            assert_eq!(regs.csts_writes.load(Ordering::Relaxed), 0, "CSTS never written");
        }
        ctrl.shutdown().unwrap();
    }
}

#[test]
fn retry_delays_are_enabled_when_the_controller_reports_them_and_again_after_a_reset() {
    let ms = Duration::from_millis;
    let s = sim(SimConfig { retry_delays_100ms: [2, 5, 0], ..SimConfig::default() });
    let mut ctrl = bring_up_with(&s, 1, true);
    assert_eq!(ctrl.retry_delays(), [ms(200), ms(500), ms(0)], "ACRE on: CRDT1-3 in 100 ms units");
    ctrl.reset(WAIT).unwrap();
    assert_eq!(ctrl.retry_delays(), [ms(200), ms(500), ms(0)], "on again after the reset");
    // The controller now names a delay in a status it wants retried.
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    s.faults().status_sc.store(gs::INTERNAL_ERROR as u32, Ordering::Relaxed);
    s.faults().status_every.store(1, Ordering::Relaxed);
    read(&mut qp, 0, &buf, 1);
    let c = poll_one(&mut qp, WAIT).unwrap();
    assert_eq!((c.status().sc, c.status().crd, c.status().dnr), (gs::INTERNAL_ERROR, 1, false));
    s.faults().status_every.store(0, Ordering::Relaxed);
    ctrl.delete_io_queue_pair(qp).unwrap();
    ctrl.shutdown().unwrap();
    // No delay reported: not asked, none used.
    let s = sim(SimConfig::default());
    assert_eq!(bring_up_with(&s, 1, true).retry_delays(), [Duration::ZERO; 3]);
    // Refused (a 1.3 controller: no Host Behavior Support): bring-up goes
    // on, retries go at once.
    let s = sim(SimConfig { version: (1, 3), retry_delays_100ms: [2, 0, 0], ..SimConfig::default() });
    assert_eq!(bring_up_with(&s, 1, true).retry_delays(), [Duration::ZERO; 3]);
}

#[test]
fn a_reset_identifies_the_controller_again_and_refuses_a_smaller_transfer_limit() {
    // Firmware activated by the reset that takes larger transfers (MDTS 7
    // to 8): taken, the run's limit (sized at bring-up) kept.
    let s = sim(SimConfig::default());
    let mut ctrl = bring_up_with(&s, 1, true);
    assert_eq!((ctrl.identify().mdts, ctrl.max_transfer()), (7, 512 << 10));
    s.faults().mdts_at_enable.store(8 + 1, Ordering::Relaxed);
    ctrl.reset(WAIT).unwrap();
    assert_eq!((ctrl.identify().mdts, ctrl.max_transfer()), (8, 512 << 10), "Identify read again; the limit in use kept");
    // Smaller (MDTS 5: 128 KiB): the I/Os of the run may not fit; the reset
    // fails saying so, and the controller is given up, left disabled.
    s.faults().mdts_at_enable.store(5 + 1, Ordering::Relaxed);
    let e = ctrl.reset(WAIT).unwrap_err().to_string();
    assert!(e.contains("after the reset the controller takes at most 128 KiB per command (MDTS 5), 512 KiB before"), "{e}");
    assert!(ctrl.is_failed());
    assert_eq!(s.registers().read32(offset::CSTS) & 1, 0, "left disabled (CSTS.RDY = 0)");
}

#[test]
fn a_host_memory_buffer_is_given_kept_over_a_reset_and_returned() {
    // A DRAM-less controller asks for 8 MiB (at least 4): it gets 8, in one
    // descriptor the simulator checks (mapped, page aligned, adding up).
    let s = sim(SimConfig { host_memory_buffer_pages: 2048, ..SimConfig::default() });
    let mut ctrl = bring_up_with(&s, 1, true);
    assert_eq!(ctrl.host_memory(), Some(8 << 20));
    assert_eq!(s.stats().host_memory_pages.load(Ordering::Relaxed), 2048);
    // A reset disables it; the driver gives the same memory back (MR = 1).
    ctrl.reset(WAIT).unwrap();
    assert_eq!(s.stats().host_memory_pages.load(Ordering::Relaxed), 2048);
    assert_eq!(s.stats().host_memory_returned.load(Ordering::Relaxed), 1);
    assert_eq!(s.stats().dma_faults.load(Ordering::Relaxed), 0);
    ctrl.shutdown().unwrap();
    // The limit caps what is given (Linux's max_host_mem_size_mb)...
    let s = sim(SimConfig { host_memory_buffer_pages: 2048, ..SimConfig::default() });
    let cfg = ControllerConfig { host_memory_max: 6 << 20, admin_timeout: Duration::from_secs(5), ..Default::default() };
    let ctrl = Controller::new(s.registers(), s.allocator(), cfg).unwrap();
    assert_eq!(ctrl.host_memory(), Some(6 << 20));
    // ... and a minimum above it leaves the controller without, saying so.
    let s = sim(SimConfig { host_memory_buffer_pages: 2048, ..SimConfig::default() });
    let cfg = ControllerConfig { host_memory_max: 2 << 20, admin_timeout: Duration::from_secs(5), ..Default::default() };
    let ctrl = Controller::new(s.registers(), s.allocator(), cfg).unwrap();
    assert_eq!(ctrl.host_memory(), None);
    assert!(ctrl.host_memory_refused().unwrap().contains("at least 4 MiB"), "{:?}", ctrl.host_memory_refused());
    assert_eq!(s.stats().host_memory_pages.load(Ordering::Relaxed), 0);
    // A limit of zero gives none, and says so.
    let s = sim(SimConfig { host_memory_buffer_pages: 2048, ..SimConfig::default() });
    let cfg = ControllerConfig { host_memory_max: 0, admin_timeout: Duration::from_secs(5), ..Default::default() };
    let ctrl = Controller::new(s.registers(), s.allocator(), cfg).unwrap();
    assert_eq!((ctrl.host_memory(), ctrl.host_memory_refused()), (None, Some("this driver was configured to give none")));
    // A controller that asks for none is given none.
    let s = sim(SimConfig::default());
    assert_eq!(bring_up_with(&s, 1, true).host_memory(), None);
}

#[test]
fn a_pause_in_processing_is_seen_with_the_time_it_may_take_and_ends() {
    // CSTS.PP = 1 after the next I/O command, for 300 ms; the controller
    // says a firmware activation takes at most 1.5 s (MTFA 15).
    let s = sim(SimConfig { firmware_activation_100ms: 15, ..SimConfig::default() });
    let mut ctrl = bring_up_with(&s, 1, true);
    assert_eq!(ctrl.identify().mtfa, 15);
    assert_eq!(ctrl.processing_paused(), None);
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    s.faults().pause_ms.store(300, Ordering::Relaxed);
    s.faults().pause_after.store(1, Ordering::Relaxed);
    read(&mut qp, 0, &buf, 1);
    poll_one(&mut qp, WAIT).unwrap();
    assert_eq!(ctrl.processing_paused(), Some(Duration::from_millis(1500)), "MTFA in 100 ms units");
    // Nothing is fetched while paused; the command completes once it ends.
    let t = std::time::Instant::now();
    read(&mut qp, 0, &buf, 1);
    assert!(poll_one(&mut qp, Duration::from_millis(100)).is_none(), "a command completed while paused");
    poll_one(&mut qp, WAIT).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(250), "{:?}", t.elapsed());
    assert_eq!(ctrl.processing_paused(), None);
    ctrl.delete_io_queue_pair(qp).unwrap();
    ctrl.shutdown().unwrap();
    // No MTFA reported: the admin timeout is the limit, as Linux's.
    let s = sim(SimConfig::default());
    let mut ctrl = bring_up_with(&s, 1, true);
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    s.faults().pause_ms.store(200, Ordering::Relaxed);
    s.faults().pause_after.store(1, Ordering::Relaxed);
    read(&mut qp, 0, &buf, 1);
    poll_one(&mut qp, WAIT).unwrap();
    assert_eq!(ctrl.processing_paused(), Some(Duration::from_secs(5)), "the admin timeout these tests set");
}

#[test]
fn fatal_status_is_detected_admin_commands_fail_fast_and_a_reset_recovers() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    ctrl.check_health().unwrap();
    // Fatal after the 5th I/O command, which is lost with it.
    sim.faults().fatal_after.store(5, Ordering::Relaxed);
    for i in 0..7u64 {
        qp.read(1, i * 8, 8, DataPtr { iova: buf.iova(), len: 4096 }, i).unwrap();
    }
    qp.ring();
    let start = Instant::now();
    while ctrl.check_health().is_ok() {
        assert!(start.elapsed() < Duration::from_secs(2), "CSTS.CFS never seen");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(matches!(ctrl.check_health(), Err(Error::Fatal { .. })));
    assert!(ctrl.status().cfs());
    let mut done = vec![];
    qp.poll(16, |c| done.push(c.tag));
    assert_eq!(done, vec![0, 1, 2, 3], "four completed before the fatal error");
    // An admin command sees CFS at once rather than waiting out its timeout.
    let t = Instant::now();
    assert!(matches!(ctrl.identify_controller(), Err(Error::Fatal { .. })));
    assert!(t.elapsed() < Duration::from_secs(1));

    ctrl.reset(WAIT).unwrap();
    ctrl.check_health().unwrap();
    assert!(!ctrl.status().cfs(), "the reset cleared CSTS.CFS");
    let (mut qp, mut abandoned) = ctrl.recreate_io_queue_pair(qp, WAIT).unwrap();
    abandoned.sort();
    assert_eq!(abandoned, vec![4, 5, 6], "the lost one and those never fetched");
    for t in abandoned {
        qp.read(1, t * 8, 8, DataPtr { iova: buf.iova(), len: 4096 }, t).unwrap();
    }
    qp.ring();
    let mut n = 0;
    let start = Instant::now();
    while n < 3 {
        n += qp.poll(8, |c| assert!(c.status().is_success()));
        assert!(start.elapsed() < Duration::from_secs(5));
    }
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn a_hung_controller_fails_cleanly_and_is_handed_back_disabled() {
    let s = sim(SimConfig::default());
    let regs = s.registers();
    {
        let mut ctrl = bring_up_with(&s, 1, true);
        let mut qp = ctrl.create_io_queue_pair(8).unwrap();
        let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
        s.faults().hang.store(true, Ordering::Relaxed);
        let cid = read(&mut qp, 0, &buf, 1);
        assert!(poll_one(&mut qp, WAIT).is_none());
        // The Abort itself is not answered: bounded by its timeout. An admin
        // command that times out resets the controller; CC.EN works, the
        // admin queue does not answer after it either: the reset fails.
        let t = Instant::now();
        let e = ctrl.abort(qp.qid(), cid, Duration::from_millis(200)).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::CommandTimeoutResetFailed { opcode: "Abort", timeout_ms: 200, .. }), "{msg}");
        assert!(msg.contains("controller reset failed") && msg.contains("did not complete") && msg.contains("unbind"), "{msg}");
        assert!(msg.contains("during a controller reset"), "{msg}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert!(ctrl.is_failed());
        assert!(matches!(ctrl.reset(Duration::from_millis(200)), Err(Error::GivenUp)));
        assert!(matches!(ctrl.identify_controller(), Err(Error::GivenUp)));
        assert_eq!(regs.read32(offset::CC) & 1, 0, "left disabled (CC.EN = 0)");
        // Tearing down costs no admin command (each would wait out a timeout).
        let t = Instant::now();
        ctrl.delete_io_queue_pair(qp).unwrap();
        drop(ctrl);
        assert!(t.elapsed() < Duration::from_secs(1), "teardown took {:?}", t.elapsed());
    }
    assert_eq!(regs.read32(offset::CSTS) & 1, 0, "CSTS.RDY = 0: in reset, ready for the next driver");
    // Once the device behaves, the next owner brings it up as usual.
    s.faults().hang.store(false, Ordering::Relaxed);
    let mut ctrl = bring_up_with(&s, 1, true);
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    read(&mut qp, 0, &buf, 2);
    assert!(poll_one(&mut qp, Duration::from_secs(5)).unwrap().status().is_success());
    ctrl.delete_io_queue_pair(qp).unwrap();
    ctrl.shutdown().unwrap();
}

#[test]
fn hang_after_n_commands_mid_stream() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(16).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    sim.faults().hang_after.store(3, Ordering::Relaxed);
    for i in 0..6u64 {
        qp.read(1, i * 8, 8, DataPtr { iova: buf.iova(), len: 4096 }, i).unwrap();
    }
    qp.ring();
    std::thread::sleep(WAIT);
    let mut done = vec![];
    qp.poll(16, |c| done.push(c.tag));
    assert_eq!(done, vec![0, 1], "two completed, the third was lost and the device stopped");
    assert!(sim.faults().hang.load(Ordering::Relaxed));
    assert_eq!(qp.outstanding(), 4);
}

#[test]
fn completions_with_an_unknown_cid_or_another_queues_sq_id_are_rejected() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();

    sim.faults().corrupt_cid_every.store(1, Ordering::Relaxed);
    let cid = read(&mut qp, 0, &buf, 21);
    assert!(poll_one(&mut qp, WAIT).is_none(), "never delivered");
    // CID + 4000h: the command's slot (the low 12 bits) in another
    // generation, which no command outstanding has: stale.
    assert_eq!((qp.stats().stale_cid, qp.stats().invalid_cid), (1, 0));
    assert_eq!(qp.last_rejected().unwrap().cid, cid.wrapping_add(0x4000));
    sim.faults().corrupt_cid_every.store(0, Ordering::Relaxed);

    sim.faults().bad_sqid_every.store(1, Ordering::Relaxed);
    read(&mut qp, 0, &buf, 22);
    assert!(poll_one(&mut qp, WAIT).is_none(), "never delivered");
    assert_eq!(qp.stats().wrong_sqid, 1);
    assert_eq!(qp.last_rejected().unwrap().sq_id, qp.qid() + 1);
    sim.faults().bad_sqid_every.store(0, Ordering::Relaxed);

    // Their real completions never come: the queue is re-created (deleted
    // first: no reset needed) and both tags come back.
    assert_eq!(qp.outstanding(), 2);
    let (mut qp, mut abandoned) = ctrl.recreate_io_queue_pair(qp, WAIT).unwrap();
    abandoned.sort();
    assert_eq!(abandoned, vec![21, 22]);
    assert_eq!(ctrl.generation(), 0, "no reset");
    read(&mut qp, 0, &buf, 23);
    assert!(poll_one(&mut qp, Duration::from_secs(5)).unwrap().status().is_success());
    assert_eq!(qp.stats().invalid_cid + qp.stats().wrong_sqid, 0, "fresh counters on the new queue");
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn injected_statuses_decode_with_their_dnr_bit() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    let f = sim.faults();
    f.status_sct.store(0, Ordering::Relaxed);
    f.status_sc.store(gs::INTERNAL_ERROR as u32, Ordering::Relaxed);
    f.status_every.store(2, Ordering::Relaxed);
    for (i, dnr) in [(0u64, false), (1, true)] {
        f.status_dnr.store(dnr, Ordering::Relaxed);
        read(&mut qp, 0, &buf, 2 * i);
        assert!(poll_one(&mut qp, WAIT).unwrap().status().is_success(), "odd commands succeed");
        read(&mut qp, 0, &buf, 2 * i + 1);
        let c = poll_one(&mut qp, WAIT).unwrap();
        assert_eq!(c.status(), Status { dnr, ..Status::generic(gs::INTERNAL_ERROR) });
        assert_eq!(c.status().dnr, dnr);
    }
    // A media error: another status code type.
    f.status_sct.store(2, Ordering::Relaxed);
    f.status_sc.store(0x81, Ordering::Relaxed);
    f.status_every.store(1, Ordering::Relaxed);
    read(&mut qp, 0, &buf, 9);
    let c = poll_one(&mut qp, WAIT).unwrap();
    assert_eq!((c.status().sct, c.status().sc), (StatusCodeType::MEDIA, 0x81));
    assert!(c.status().to_string().contains("UNRECOVERED READ ERROR"), "{}", c.status());
    f.status_every.store(0, Ordering::Relaxed);
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn delayed_completions_arrive_late_but_arrive() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    sim.faults().delay_us.store(50_000, Ordering::Relaxed);
    let t = Instant::now();
    read(&mut qp, 0, &buf, 1);
    let c = poll_one(&mut qp, Duration::from_secs(5)).expect("completes");
    assert!(c.status().is_success());
    assert!(t.elapsed() >= Duration::from_millis(50), "{:?}", t.elapsed());
    sim.faults().delay_us.store(0, Ordering::Relaxed);
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn corrupted_read_data_is_delivered_as_is() {
    // Silent corruption is not the driver's to detect: --verify's stamps
    // catch it (tests/reliability.rs). Here: the fault really flips a bit.
    let (sim, mut ctrl) = bring_up(SimConfig { data: DataMode::Ram, ..Default::default() });
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    write_pattern(&mut qp, 8, &buf, 0x40);
    sim.faults().corrupt_data_every.store(1, Ordering::Relaxed);
    buf.fill(0, 4096, 0);
    read(&mut qp, 8, &buf, 2);
    assert!(poll_one(&mut qp, WAIT).unwrap().status().is_success(), "the device says all is well");
    let mut b = [0u8; 65];
    buf.copy_to(0, &mut b);
    assert_eq!(b[64], 0x41, "one bit flipped");
    assert!(b[..64].iter().all(|&x| x == 0x40));
    let mut rest = vec![0u8; 4096 - 65];
    buf.copy_to(65, &mut rest);
    assert!(rest.iter().all(|&b| b == 0x40));
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn the_data_page_of_a_timed_out_identify_is_not_reused() {
    // An Identify that timed out may still run and write its page later,
    // until the controller is seen to stop. The timeout resets the
    // controller: once that reset has seen it stop (CSTS.RDY = 0), the page
    // may serve the next Identify; a controller that does not stop keeps
    // the page (quarantine), and no other command gets it.
    let pages = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let seen = pages.clone();
    let hook: nvme_sim::EventHook = std::sync::Arc::new(move |e: &nvme_sim::SimEvent| {
        if let nvme_sim::SimEvent::Fetch { qid: 0, sqe, .. } = e {
            if sqe.opcode() == nvme_spec::AdminOpcode::Identify as u8 {
                seen.lock().unwrap().push(sqe.prp1);
            }
        }
    });
    let s = sim(SimConfig { events: Some(hook), timeout_500ms: 1, ..Default::default() });
    let cfg = ControllerConfig { admin_timeout: Duration::from_millis(300), ..Default::default() };
    let mut ctrl = Controller::new(s.registers(), s.allocator(), cfg).unwrap();
    // Answered too late: the reset stops the controller (and drops the
    // late completion), so the page is free again.
    s.faults().admin_delay_us.store(1_000_000, Ordering::Relaxed);
    let e = ctrl.identify_controller().unwrap_err();
    assert!(matches!(e, Error::CommandTimeout { opcode: "Identify", action: TimeoutAction::ControllerReset, .. }), "{e}");
    assert_eq!(ctrl.quarantined_bytes(), 0, "kept although the controller was seen to stop");
    assert_eq!(ctrl.identify_controller().unwrap().sn, "NVBSIM0001");
    let pages = pages.lock().unwrap().clone();
    // The reset's own Identify (the timed-out one's page still held by
    // its command meanwhile) has a page of its own.
    assert_eq!(pages.len(), 4, "bring-up's, the timed-out one, the reset's, the next one: {pages:x?}");
    assert_ne!(pages[2], pages[1], "{pages:x?}");
    assert_eq!(pages[3], pages[1], "the page of a command the controller forgot serves again");
    // Hung, and deaf to CC.EN = 0: the reset fails without seeing it stop.
    // The page stays the controller's, and no command follows.
    s.faults().hang.store(true, Ordering::Relaxed);
    s.faults().ignore_disable.store(true, Ordering::Relaxed);
    let e = ctrl.identify_controller().unwrap_err();
    assert!(matches!(e, Error::CommandTimeoutResetFailed { opcode: "Identify", .. }), "{e}");
    assert!(ctrl.quarantined_bytes() >= 4096, "{}", ctrl.quarantined_bytes());
    assert!(matches!(ctrl.identify_controller(), Err(Error::GivenUp)));
    s.faults().ignore_disable.store(false, Ordering::Relaxed);
    s.faults().hang.store(false, Ordering::Relaxed);
}

#[test]
fn an_admin_timeout_during_bring_up_fails_it_and_hands_the_controller_back_usable() {
    // A controller still starting answers its first Identify after the
    // admin timeout. Bring-up fails with the timeout (no reset, whose
    // identity check would compare against an Identify never read), the
    // controller is shut down, and a second bring-up works.
    let s = sim(SimConfig { timeout_500ms: 1, ..Default::default() });
    let cfg = ControllerConfig { admin_timeout: Duration::from_millis(300), ..Default::default() };
    s.faults().admin_delay_us.store(1_000_000, Ordering::Relaxed);
    let e = Controller::new(s.registers(), s.allocator(), cfg.clone()).err().expect("bring-up fails");
    assert!(matches!(e, Error::CommandTimeout { opcode: "Identify", action: TimeoutAction::DuringBringUp { stopped: true }, .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("while the controller was brought up") && text.contains("disabled (CC.EN = 0)") && !text.contains("another controller"), "{text}");
    assert_eq!(s.registers().read32(offset::CC) & 1, 0, "handed back: CC.EN cleared");
    assert_eq!(s.stats().resets.load(Ordering::Relaxed), 1, "found disabled: the one CC.EN = 0 is after the timeout");
    s.faults().admin_delay_us.store(0, Ordering::Relaxed);
    let ctrl = Controller::new(s.registers(), s.allocator(), cfg).expect("a second bring-up");
    assert_eq!(ctrl.identify().sn, "NVBSIM0001");
    ctrl.shutdown().unwrap();
}

/// The simulator's model of a function-level reset: it acts on CC.EN = 0
/// again (`ignore_disable` cleared), so CSTS.RDY clears. Also the count of
/// resets done.
fn function_reset(s: &SimController) -> (impl FnMut() -> Result<(), String> + Send + Sync + 'static, Arc<AtomicU32>) {
    let (faults, resets) = (s.faults().clone(), Arc::new(AtomicU32::new(0)));
    let done = resets.clone();
    let reset = move || {
        done.fetch_add(1, Ordering::Relaxed);
        faults.ignore_disable.store(false, Ordering::Relaxed);
        Ok(())
    };
    (reset, resets)
}

/// A controller handed over enabled that does not clear CSTS.RDY after
/// CC.EN = 0: bring-up gives it a function-level reset and comes up, as
/// Linux's probe does; a reset that does not help is said so.
#[test]
fn a_controller_that_does_not_stop_at_bring_up_gets_a_function_reset() {
    let enabled_and_deaf = || {
        let s = left_enabled(SimConfig { timeout_500ms: 1, ..Default::default() });
        s.faults().ignore_disable.store(true, Ordering::Relaxed);
        s
    };
    // The function reset brings the controller to its reset state (here:
    // the simulator acts on CC.EN = 0 again).
    let s = enabled_and_deaf();
    let (reset, resets) = function_reset(&s);
    let ctrl = Controller::new_with_function_reset(s.registers(), s.allocator(), ControllerConfig::default(), reset)
        .expect("up after the function reset");
    assert_eq!(resets.load(Ordering::Relaxed), 1);
    assert_eq!(ctrl.identify().sn, "NVBSIM0001");
    ctrl.shutdown().unwrap();
    // A function without a reset method: still stuck, said so.
    let s = enabled_and_deaf();
    let e = Controller::new_with_function_reset(s.registers(), s.allocator(), ControllerConfig::default(), || Ok(())).err().expect("still stuck");
    assert!(matches!(e, Error::FunctionResetFailed { .. }), "{e}");
    assert!(e.to_string().contains("still did not clear CSTS.RDY") && e.to_string().contains("Power-cycle"), "{e}");
    s.faults().ignore_disable.store(false, Ordering::Relaxed);
    // A controller that stops needs no function reset.
    let s = sim(SimConfig::default());
    let ctrl = Controller::new_with_function_reset(s.registers(), s.allocator(), ControllerConfig::default(), || panic!("not needed")).unwrap();
    ctrl.shutdown().unwrap();
}

/// A controller that does not clear CSTS.RDY after CC.EN = 0 at a reset
/// (after a timeout or fatal status) gets the function-level reset it was
/// brought up with, as Linux's `nvme_pci_configure_admin_queue` gives it at
/// every reset: the reset goes on, the memory the controller may have used
/// is free at once (the function reset stopped it), and I/O works on the
/// re-created queue.
#[test]
fn a_controller_that_does_not_stop_at_a_reset_gets_a_function_reset() {
    let s = sim(SimConfig { timeout_500ms: 1, ..Default::default() });
    let (reset, resets) = function_reset(&s);
    let cfg = ControllerConfig { io_queues: 2, admin_timeout: Duration::from_secs(5), ..Default::default() };
    let mut ctrl = Controller::new_with_function_reset(s.registers(), s.allocator(), cfg, reset).unwrap();
    assert_eq!(resets.load(Ordering::Relaxed), 0, "not needed at bring-up");
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.alloc_queue_buffer(&qp, 4096).unwrap();
    write_pattern(&mut qp, 64, &buf, 0x5a);
    // Memory in quarantine, which only a controller seen to stop lets go:
    // a queue whose deletion it refused.
    let refused = ctrl.create_io_queue_pair(8).unwrap();
    ctrl.admin_command(nvme_spec::cmd::delete_io_sq(refused.qid()), None).unwrap();
    assert!(matches!(ctrl.delete_io_queue_pair(refused), Err(Error::QueueDeletion { .. })));
    assert!(ctrl.quarantined_bytes() > 0);

    s.faults().ignore_disable.store(true, Ordering::Relaxed);
    ctrl.reset(Duration::from_secs(5)).expect("reset after the function reset");
    assert_eq!(resets.load(Ordering::Relaxed), 1);
    assert_eq!(s.stats().resets.load(Ordering::Relaxed), 1, "the controller was reset once");
    assert_eq!(ctrl.generation(), 1);
    assert!(!ctrl.is_failed());
    assert_eq!(ctrl.quarantined_bytes(), 0, "released: the function reset stopped the controller");
    let (mut qp, abandoned) = ctrl.recreate_io_queue_pair(qp, WAIT).unwrap();
    assert!(abandoned.is_empty());
    buf.fill(0, 4096, 0);
    read(&mut qp, 64, &buf, 12);
    let c = poll_one(&mut qp, Duration::from_secs(5)).expect("the read completes");
    assert!(c.status().is_success(), "{}", c.status());
    assert_eq!(first_byte(&buf), 0x5a);
    let again = ctrl.create_io_queue_pair(8).unwrap();
    assert_eq!(again.qid(), 2, "the refused queue's id is free again");
    ctrl.delete_io_queue_pair(again).unwrap();
    ctrl.delete_io_queue_pair(qp).unwrap();
    ctrl.shutdown().unwrap();
}

/// A reset whose CC.EN = 0 the controller does not act on, with no
/// function reset, or one that fails or leaves CSTS.RDY set: the
/// controller is given up, not seen to stop, and keeps its memory until it
/// stops; the error says whether a function reset was tried.
#[test]
fn a_controller_that_does_not_stop_at_a_reset_without_a_working_function_reset_is_given_up() {
    type Reset = Box<dyn FnMut() -> Result<(), String> + Send + Sync>;
    let cases: [(&str, Option<Reset>); 3] = [
        ("none", None),
        ("fails", Some(Box::new(|| Err("no reset method".to_string())))),
        ("does nothing", Some(Box::new(|| Ok(())))),
    ];
    for (case, reset) in cases {
        let s = sim(SimConfig { timeout_500ms: 1, ..Default::default() });
        let mem = s.memory();
        let cfg = ControllerConfig { admin_timeout: Duration::from_secs(5), ..Default::default() };
        let mut ctrl = match reset {
            None => Controller::new(s.registers(), s.allocator(), cfg),
            Some(r) => Controller::new_with_function_reset(s.registers(), s.allocator(), cfg, r),
        }
        .unwrap();
        let qp = ctrl.create_io_queue_pair(8).unwrap();
        let held = mem.registered_bytes();
        s.faults().ignore_disable.store(true, Ordering::Relaxed);
        let e = ctrl.reset(WAIT).unwrap_err();
        let Error::ResetFailed { source, disabled } = &e else { panic!("{case}: {e}") };
        assert!(!disabled, "{case}: {e}");
        match (case, &**source) {
            ("none", Error::Timeout { .. }) => {}
            ("fails", Error::FunctionResetFailed { why, .. }) => assert_eq!(why, "no reset method", "{case}"),
            ("does nothing", Error::FunctionResetFailed { why, .. }) => assert!(why.contains("still did not clear CSTS.RDY"), "{case}: {why}"),
            _ => panic!("{case}: {e}"),
        }
        assert!(ctrl.is_failed(), "{case}");
        drop(qp);
        assert_eq!(mem.registered_bytes(), held, "{case}: memory of a controller that may still use it was freed");
        // Once it stops (the shutdown sees CSTS.RDY = 0), all of it goes.
        s.faults().ignore_disable.store(false, Ordering::Relaxed);
        ctrl.shutdown().unwrap();
        assert_eq!(mem.registered_bytes(), 0, "{case}");
    }
}

#[test]
fn memory_of_a_controller_that_does_not_stop_is_never_freed() {
    // The controller ignores CC.EN = 0: after the shutdown it may still
    // write into its queues, buffers and admin queue, so none of that may
    // go back to the allocator (to be handed to someone else).
    let s = sim(SimConfig { timeout_500ms: 1, ..Default::default() });
    let regs = s.registers();
    let mem = s.memory();
    let mut ctrl = bring_up_with(&s, 1, true);
    let qp = ctrl.create_io_queue_pair(8).unwrap();
    let held = mem.registered_bytes();
    s.faults().ignore_disable.store(true, Ordering::Relaxed);
    drop(qp);
    let e = ctrl.shutdown().unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert_eq!(regs.read32(offset::CSTS) & 1, 1, "still ready: it did not stop");
    assert_eq!(mem.registered_bytes(), held, "memory of a controller that may still use it was freed");
    s.faults().ignore_disable.store(false, Ordering::Relaxed);
}

#[test]
fn a_queue_whose_deletion_failed_stays_quarantined_until_a_reset() {
    let s = sim(SimConfig::default());
    let cfg = ControllerConfig { io_queues: 2, admin_timeout: Duration::from_millis(300), ..Default::default() };
    let mut ctrl = Controller::new(s.registers(), s.allocator(), cfg).unwrap();
    let qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.alloc_queue_buffer(&qp, 8192).unwrap();
    // The controller refuses the deletion (its SQ 1 was deleted behind the
    // driver's back: Invalid Queue Identifier) and keeps CQ 1.
    ctrl.admin_command(nvme_spec::cmd::delete_io_sq(1), None).unwrap();
    let e = ctrl.delete_io_queue_pair(qp).unwrap_err();
    assert!(matches!(e, Error::QueueDeletion { qid: 1, .. }), "{e}");
    assert!(e.to_string().contains("stays allocated"), "{e}");
    drop(buf);
    // Rings, PRP lists and the buffer are all kept.
    assert!(ctrl.quarantined_bytes() >= 8192 + 8 * 64 + 16 * 16, "{}", ctrl.quarantined_bytes());
    let other = ctrl.create_io_queue_pair(8).unwrap();
    assert_eq!(other.qid(), 2, "qid 1 may still be the controller's");
    ctrl.reset(Duration::from_secs(5)).unwrap();
    assert_eq!(ctrl.quarantined_bytes(), 0, "released once the controller stopped");
    let (other, _) = ctrl.recreate_io_queue_pair(other, Duration::from_secs(5)).unwrap();
    let again = ctrl.create_io_queue_pair(8).unwrap();
    assert_eq!(again.qid(), 1, "free again after the reset");
    ctrl.delete_io_queue_pair(again).unwrap();
    ctrl.delete_io_queue_pair(other).unwrap();
    ctrl.shutdown().unwrap();
}

#[test]
fn a_queue_whose_deletion_timed_out_is_freed_only_once_the_controller_is_seen_to_stop() {
    // A Delete that times out resets the controller. If the reset sees the
    // controller stop, it has forgotten the queue: the memory goes at once
    // and the queue id is free. If it does not stop, the memory is kept
    // until it does.
    let s = sim(SimConfig { timeout_500ms: 1, ..Default::default() });
    let mem = s.memory();
    let cfg = ControllerConfig { io_queues: 2, admin_timeout: Duration::from_millis(300), ..Default::default() };
    let mut ctrl = Controller::new(s.registers(), s.allocator(), cfg).unwrap();
    let before = mem.registered_bytes();
    let qp = ctrl.create_io_queue_pair(8).unwrap();
    drop(ctrl.alloc_queue_buffer(&qp, 8192).unwrap());
    s.faults().admin_delay_us.store(1_000_000, Ordering::Relaxed);
    let e = ctrl.delete_io_queue_pair(qp).unwrap_err();
    assert!(matches!(e, Error::CommandTimeout { action: TimeoutAction::ControllerReset, .. }), "{e}");
    assert_eq!((ctrl.quarantined_bytes(), mem.registered_bytes()), (0, before), "forgotten by the reset, yet kept");
    let qp = ctrl.create_io_queue_pair(8).unwrap();
    assert_eq!(qp.qid(), 1, "free after the reset");
    drop(ctrl.alloc_queue_buffer(&qp, 8192).unwrap());
    let held = mem.registered_bytes();
    // Hung, and deaf to CC.EN = 0: the reset fails without seeing it stop.
    s.faults().hang.store(true, Ordering::Relaxed);
    s.faults().ignore_disable.store(true, Ordering::Relaxed);
    let e = ctrl.delete_io_queue_pair(qp).unwrap_err();
    assert!(matches!(e, Error::QueueDeletion { qid: 1, .. }), "{e}");
    assert!(ctrl.is_failed());
    assert_eq!(mem.registered_bytes(), held, "memory of a queue the controller may still use was freed");
    assert!(ctrl.quarantined_bytes() >= 8192 + 8 * 64 + 16 * 16, "{}", ctrl.quarantined_bytes());
    // Once it stops (the shutdown sees CSTS.RDY = 0), all of it goes.
    s.faults().ignore_disable.store(false, Ordering::Relaxed);
    s.faults().hang.store(false, Ordering::Relaxed);
    ctrl.shutdown().unwrap();
    assert_eq!(mem.registered_bytes(), 0);
}

/// Get Features of `fid`, waiting at most `timeout`: its completion dword 0.
fn get_feature(ctrl: &mut Controller<SimRegisters>, fid: u8, timeout: Duration) -> Result<u32, Error> {
    ctrl.admin_command_within(nvme_spec::cmd::get_features(fid), None, timeout).map(|c| c.dw0)
}

#[test]
fn a_timed_out_admin_command_resets_the_controller_and_its_late_completion_is_never_taken_for_another() {
    use nvme_spec::opcode::feature;
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    write_pattern(&mut qp, 8, &buf, 0x77);
    let queues = get_feature(&mut ctrl, feature::NUMBER_OF_QUEUES, WAIT).unwrap();
    assert_eq!(queues, 1 | 1 << 16, "two queue pairs (0's based)");

    // The controller takes 1.5 s over the next admin command; we wait 0.1 s.
    sim.faults().admin_delay_us.store(1_500_000, Ordering::Relaxed);
    let e = get_feature(&mut ctrl, feature::NUMBER_OF_QUEUES, Duration::from_millis(100)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("Get Features did not complete within 100 ms") && msg.contains("controller was reset"), "{msg}");
    assert_eq!((ctrl.generation(), sim.stats().resets.load(Ordering::Relaxed)), (1, 1), "reset, as Linux does");
    // Had its CID simply been freed, the late completion (due now) would
    // answer the next command, which would take NUMBER_OF_QUEUES' dword 0
    // for its own.
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(get_feature(&mut ctrl, feature::ARBITRATION, WAIT).unwrap(), 0, "its own completion");
    assert_eq!(get_feature(&mut ctrl, feature::NUMBER_OF_QUEUES, WAIT).unwrap(), queues);
    // The I/O queue died with the reset: re-created, it works, data intact.
    let (mut qp, abandoned) = ctrl.recreate_io_queue_pair(qp, WAIT).unwrap();
    assert!(abandoned.is_empty());
    buf.fill(0, 4096, 0);
    read(&mut qp, 8, &buf, 3);
    assert!(poll_one(&mut qp, Duration::from_secs(5)).unwrap().status().is_success());
    assert_eq!(first_byte(&buf), 0x77);
    ctrl.delete_io_queue_pair(qp).unwrap();
    ctrl.shutdown().unwrap();
}

#[test]
fn a_stale_duplicate_admin_completion_is_rejected_by_its_cid_generation() {
    use nvme_spec::opcode::feature;
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    assert_eq!(get_feature(&mut ctrl, feature::NUMBER_OF_QUEUES, WAIT).unwrap(), 1 | 1 << 16);
    // The controller posts that completion again before the next one. Admin
    // commands take turns in one slot: without generations the copy has
    // the next command's CID.
    sim.faults().replay_admin.store(true, Ordering::Relaxed);
    assert_eq!(get_feature(&mut ctrl, feature::ARBITRATION, WAIT).unwrap(), 0, "its own completion, not the copy");
    assert!(!sim.faults().replay_admin.load(Ordering::Relaxed), "the copy was posted");
    let s = ctrl.admin_queue().stats();
    assert_eq!((s.stale_cid, s.invalid_cid), (1, 0), "counted as stale");
    assert_eq!(ctrl.generation(), 0, "no reset needed");
}

#[test]
fn a_stale_duplicate_io_completion_is_rejected_by_its_cid_generation() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    let f = sim.faults();
    // Command A fails (an injected media error) ...
    f.status_sct.store(2, Ordering::Relaxed);
    f.status_sc.store(0x81, Ordering::Relaxed);
    f.status_every.store(1, Ordering::Relaxed);
    let a = read(&mut qp, 0, &buf, 1);
    assert!(!poll_one(&mut qp, WAIT).unwrap().status().is_success());
    f.status_every.store(0, Ordering::Relaxed);
    // ... then B, in A's slot, succeeds, but the controller first posts A's
    // completion once more.
    f.replay_every.store(1, Ordering::Relaxed);
    let b = read(&mut qp, 0, &buf, 2);
    assert_eq!(b & 0xfff, a & 0xfff, "B has A's slot");
    assert_ne!(b, a, "in the next generation");
    let c = poll_one(&mut qp, WAIT).expect("B completes");
    f.replay_every.store(0, Ordering::Relaxed);
    assert_eq!(c.tag, 2);
    assert!(c.status().is_success(), "B's own status, not A's: {}", c.status());
    assert!(poll_one(&mut qp, Duration::from_millis(50)).is_none(), "nothing more");
    assert_eq!((qp.stats().stale_cid, qp.stats().invalid_cid), (1, 0));
    assert_eq!(qp.last_rejected().unwrap().cid, a);
    ctrl.delete_io_queue_pair(qp).unwrap();
}

#[test]
fn the_sq_head_of_a_rejected_completion_is_not_taken() {
    let (sim, mut ctrl) = bring_up(SimConfig::default());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    // A completion naming another queue, with that queue's SQ head (the
    // controller consumed one entry of ours: its true head would be 1).
    sim.faults().bad_sqid_every.store(1, Ordering::Relaxed);
    read(&mut qp, 0, &buf, 1);
    assert!(poll_one(&mut qp, WAIT).is_none());
    sim.faults().bad_sqid_every.store(0, Ordering::Relaxed);
    assert_eq!(qp.stats().wrong_sqid, 1);
    assert_eq!(qp.last_rejected().unwrap().sq_head, 5, "another queue's head");
    assert_eq!(qp.sq().head(), 0, "not taken from a completion that is not ours");
    // A completion that is ours moves it.
    read(&mut qp, 0, &buf, 2);
    assert!(poll_one(&mut qp, WAIT).unwrap().status().is_success());
    assert_eq!(qp.sq().head(), 2);
}
