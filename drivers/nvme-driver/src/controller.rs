//! Controller bring-up, admin commands, I/O queue creation and shutdown,
//! in the order NVMe 1.4c §7.6.1 ("Initialization") and §7.6.2
//! ("Shutdown") prescribe. What to do when the controller misbehaves
//! (Abort, reset, re-creating queues) is in [`recovery`].

pub mod recovery;

use crate::prp::{list_pages_for, pages_spanned};
use crate::qpair::{DataPtr, QueuePair, QueuePairParts, MAX_CQ_ENTRIES, MAX_SQ_ENTRIES};
use crate::Error;
use nvme_hal::{DmaAllocator, DmaRegion, RegisterWindow};
use nvme_spec::cmd;
use nvme_spec::identify::{IdentifyController, IdentifyNamespace, IDENTIFY_SIZE};
use nvme_spec::regs::{offset, shn, shst, Aqa, Cap, Cc, Csts, Vs};
use nvme_spec::{AdminOpcode, Cqe, QueueEntries, Sqe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Choices made at bring-up.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Entries in the admin queues (clamped to 2..=4096, what AQA holds).
    pub admin_queue_entries: u16,
    /// How many I/O queue pairs to ask for (Set Features Number of Queues).
    pub io_queues: u16,
    /// Timeout for one admin command. The default is 10 s, below Linux's
    /// 60 (`nvme_admin_timeout`): this driver sends only commands a
    /// controller answers in milliseconds (Identify, queue creation and
    /// deletion, features, logs; never Format, Sanitize or a firmware
    /// commit), and a wait the user cannot interrupt should not be a minute.
    pub admin_timeout: Duration,
    /// Override of the controller's ready timeouts for enable/disable
    /// waits (None: CAP.TO, or for enabling CRTO.CRWMT when CAP.CRMS
    /// reports it and it is longer).
    pub ready_timeout: Option<Duration>,
    /// Override of the normal shutdown's wait for CSTS.SHST (None: RTD3E
    /// clamped to 5-60 s, see [`Controller::shutdown_timeout`]).
    pub shutdown_timeout: Option<Duration>,
    /// Cap on the transfer size when the controller reports no MDTS.
    pub default_max_transfer: usize,
    /// Use shadow doorbells (Doorbell Buffer Config) when the controller
    /// supports them (OACS bit 8).
    pub shadow_doorbells: bool,
    /// Give each I/O completion queue twice the submission queue's entries
    /// and ring its doorbell once per that many completions instead of once
    /// per completion pass (see QueuePairParts::cq_entries).
    pub batch_cq_doorbells: bool,
    /// Create I/O completion queues with interrupts enabled, queue `qid` on
    /// MSI-X vector `qid` (vector 0 is the admin queue's). The host still
    /// reads completions from the queue; the interrupt only wakes it.
    pub interrupts: bool,
    /// Write I/O submission entries with streaming (non-temporal) stores, as
    /// SPDK does (see QueuePairParts::streaming_sq); false: cached stores.
    pub streaming_sq: bool,
    /// Time to let pass after CC.EN = 0, at a reset and at the hand-back,
    /// before CSTS.RDY is read: controllers that misbehave when it is read
    /// at once need it ([`ready_check_delay`]). Zero for the others.
    pub ready_check_delay: Duration,
    /// Time to let pass before the first register access: controllers not
    /// ready right after the function reset vfio-pci does when the device
    /// is opened need it ([`init_delay`]). Zero for the others.
    pub init_delay: Duration,
    /// Create I/O submission queues with medium priority (QPRIO 10b)
    /// rather than 00b: controllers whose firmware misbehaves otherwise
    /// need it ([`medium_prio_sq`]). False for the others.
    pub medium_prio_sq: bool,
    /// The most host memory a controller that asks for a Host Memory
    /// Buffer (Identify HMPRE, a DRAM-less SSD) is given: 128 MiB, Linux's
    /// `max_host_mem_size_mb`. Zero gives none.
    pub host_memory_max: usize,
    /// Told of every admin command the host posts and every completion it
    /// reaps, bring-up's included: `nvme-bypass trace` prints the host's
    /// side of the admin queue with it. None for a run.
    pub admin_observer: Option<AdminObserver>,
}

/// What the host did on the admin queue (see
/// [`ControllerConfig::admin_observer`]).
#[derive(Clone, Copy, Debug)]
pub enum AdminEvent<'a> {
    /// `sqe` written to admin SQ slot `slot`; the tail moved to `tail`
    /// (the doorbell write follows).
    Posted { slot: u16, tail: u16, sqe: &'a Sqe },
    /// `cqe` read from admin CQ slot `slot` (the head doorbell write
    /// follows); `ours` is false for a completion whose CID is not
    /// outstanding, which is dropped.
    Reaped { slot: u16, cqe: &'a Cqe, ours: bool },
}

/// A callback for [`AdminEvent`]s.
#[derive(Clone)]
pub struct AdminObserver(pub Arc<dyn Fn(AdminEvent<'_>) + Send + Sync>);

impl std::fmt::Debug for AdminObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminObserver")
    }
}

/// The most host memory a Host Memory Buffer is given by default: 128 MiB,
/// Linux's `max_host_mem_size_mb` default.
pub const HOST_MEMORY_MAX: usize = 128 << 20;

/// The wait some controllers need after the function reset vfio-pci does
/// when the device is opened, before the host's first register access, by
/// PCI vendor and device id: those SPDK marks `NVME_QUIRK_DELAY_BEFORE_INIT`
/// ("not ready after VFIO reset": Intel DC P3500/P3600/P3700 and
/// P4500/P4600), 2 s as SPDK waits; zero for every other controller.
pub fn init_delay(vendor: u16, device: u16) -> Duration {
    const DELAY_BEFORE_INIT: [(u16, u16); 3] = [(0x8086, 0x0953), (0x8086, 0x0a53), (0x8086, 0x0a54)];
    if DELAY_BEFORE_INIT.contains(&(vendor, device)) {
        Duration::from_secs(2)
    } else {
        Duration::ZERO
    }
}

/// The wait some controllers need between CC.EN = 0 and the first read of
/// CSTS.RDY, by PCI vendor and device id: those Linux's `nvme_id_table`
/// marks `NVME_QUIRK_DELAY_BEFORE_CHK_RDY` (HGST adapters, Samsung
/// PM1725/PM1725a, Memblaze Pblaze4, Seagate Nytro), 2.3 s as its
/// `NVME_QUIRK_DELAY_AMOUNT`; zero for every other controller. Linux's
/// `nvme_disable_ctrl` waits after every CC.EN = 0 it writes, the one at
/// probe for a controller handed over enabled included; so does
/// [`Controller`] (bring-up, a reset, the hand-back). A controller found
/// disabled costs no wait.
pub fn ready_check_delay(vendor: u16, device: u16) -> Duration {
    const DELAY_BEFORE_CHK_RDY: [(u16, u16); 6] =
        [(0x1c58, 0x0003), (0x1c58, 0x0023), (0x1c5f, 0x0540), (0x144d, 0xa821), (0x144d, 0xa822), (0x1bb1, 0x0100)];
    if DELAY_BEFORE_CHK_RDY.contains(&(vendor, device)) {
        Duration::from_millis(2300)
    } else {
        Duration::ZERO
    }
}

/// Whether a controller's I/O submission queues are created with medium
/// priority (QPRIO 10b) instead of the 00b every other controller's get,
/// by PCI vendor and device id: those Linux's `nvme_id_table` marks
/// `NVME_QUIRK_MEDIUM_PRIO_SQ` (Intel 600P/P3100). Its `adapter_alloc_sq`
/// says why: "Some drives have a bug that auto-enables WRRU if MEDIUM
/// isn't set. Since URGENT priority is zeroes, it makes all queues
/// URGENT." (Under the round robin this driver selects, CC.AMS = 000b,
/// QPRIO is otherwise ignored.)
pub fn medium_prio_sq(vendor: u16, device: u16) -> bool {
    const MEDIUM_PRIO_SQ: [(u16, u16); 1] = [(0x8086, 0xf1a5)];
    MEDIUM_PRIO_SQ.contains(&(vendor, device))
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            admin_queue_entries: 32,
            io_queues: 1,
            admin_timeout: Duration::from_secs(10),
            ready_timeout: None,
            shutdown_timeout: None,
            default_max_transfer: 1 << 20,
            shadow_doorbells: true,
            batch_cq_doorbells: true,
            interrupts: false,
            streaming_sq: true,
            ready_check_delay: Duration::ZERO,
            init_delay: Duration::ZERO,
            medium_prio_sq: false,
            host_memory_max: HOST_MEMORY_MAX,
            admin_observer: None,
        }
    }
}

/// Host memory page size this driver uses (CC.MPS = 0). Every controller
/// supports it (MPSMIN is 4 KiB on all known devices) and it matches the
/// host's and the IOMMU's smallest page.
pub const PAGE_SIZE: usize = 4096;

/// A controller brought up by this driver: admin queue live, identified,
/// I/O queues allocated. Dropping it shuts the controller down.
pub struct Controller<R: RegisterWindow + ?Sized> {
    regs: Arc<R>,
    mem: Arc<dyn DmaAllocator>,
    cap: Cap,
    vs: Vs,
    /// CAP.MQES + 1, checked at bring-up to be at least 2.
    mqes_entries: QueueEntries,
    admin: QueuePair<R>,
    admin_entries: QueueEntries,
    /// The data page of Identify commands; taken away (quarantined) when a
    /// command using it may still be running, and made anew on next use.
    scratch: Option<DmaRegion>,
    ident: IdentifyController,
    max_transfer: usize,
    io_queues_granted: u16,
    qids_in_use: Vec<bool>,
    /// Memory of live I/O queues (rings, PRP list pages, data buffers), kept
    /// mapped until the controller forgets the queue (deletion or reset),
    /// whatever the queue-pair owner does.
    live: Vec<LiveQueue>,
    /// DMA memory the controller may still read or write although nothing
    /// of ours uses it any more: a queue whose deletion failed (its rings,
    /// PRP lists and data buffers), a queue whose creation may still be
    /// running, the data page of a timed-out admin command. Never returned
    /// to the allocator before the controller is known to have forgotten
    /// it: released once CSTS.RDY reads 0 after CC.EN=0 (a reset, or the
    /// shutdown); kept until the process ends if that never happens.
    quarantine: Vec<Quarantined>,
    /// Times the controller was seen to stop (CSTS.RDY = 0 after CC.EN = 0):
    /// a command sent before this count moved on no longer runs.
    stops: u64,
    cfg: ControllerConfig,
    shut_down: bool,
    /// Shadow doorbell and EventIdx pages, when Doorbell Buffer Config is on.
    shadow: Option<(DmaRegion, DmaRegion)>,
    /// The status a controller that advertises Doorbell Buffer Config
    /// answered it with, when it refused it (its doorbells are then MMIO).
    shadow_refused: Option<String>,
    /// The status Set Features Number of Queues was refused with: the
    /// controller then has an admin queue only.
    queues_refused: Option<String>,
    /// Advanced Command Retry Enable is on: a completion's CRD asks for a
    /// wait of Identify's CRDT before the command is retried.
    acre: bool,
    /// Controller resets so far (queue pairs made before a reset are dead).
    generation: u64,
    /// Given up after a failed recovery: no more admin commands, only the
    /// register writes that hand the controller back.
    failed: bool,
    /// A reset is in progress: an admin timeout now fails the reset
    /// instead of starting another.
    resetting: bool,
    /// Inside [`Controller::new`]: a command that times out fails the
    /// bring-up and disables the controller instead of resetting it (as
    /// Linux's probe gives up), since bring-up would fail with it either
    /// way, and a reset would check the controller's identity against one
    /// not yet read.
    bringing_up: bool,
    /// The Host Memory Buffer given to the controller, kept for its
    /// lifetime (given back after a reset with MR = 1).
    host_memory: Option<HostMemory>,
    /// Why a controller that asks for a Host Memory Buffer has none.
    host_memory_refused: Option<String>,
    /// The function-level reset [`Controller::new_with_function_reset`]
    /// was given, kept for a reset whose CC.EN = 0 the controller does not
    /// act on (see `function_level_reset`); None from [`Controller::new`].
    function_reset: Option<FunctionReset>,
    /// CSTS.NSSRO read 1 (and was cleared) at bring-up or at a reset since:
    /// an NVM subsystem reset had happened (see
    /// [`subsystem_reset_occurred`](Self::subsystem_reset_occurred)).
    subsystem_reset: bool,
}

/// A function-level reset of the controller's PCI function (vfio-pci's
/// VFIO_DEVICE_RESET): Ok once done, else why not. Send and Sync, as the
/// [`Controller`] that keeps it is.
type FunctionReset = Box<dyn FnMut() -> Result<(), String> + Send + Sync>;

/// A Host Memory Buffer: one chunk (IOVA-contiguous through the IOMMU,
/// so one descriptor where Linux, without one, gathers many) and the
/// descriptor list that names it.
struct HostMemory {
    chunk: DmaRegion,
    list: DmaRegion,
    /// Its size in memory pages (HSIZE; the chunk may be longer).
    pages: u32,
    /// The controller has had it: a later enable returns it (MR = 1).
    given: bool,
}

/// An I/O queue pair the host created: its memory, and what it takes to
/// create it again after a controller reset.
#[derive(Clone)]
struct LiveQueue {
    qid: u16,
    sq: DmaRegion,
    cq: DmaRegion,
    prp_lists: Option<DmaRegion>,
    /// Data buffers made for this queue's commands
    /// ([`Controller::alloc_queue_buffer`]).
    buffers: Vec<DmaRegion>,
    list_pages_per_cmd: usize,
    /// Largest command the queue takes (its PRP lists' size).
    max_transfer: usize,
    entries: QueueEntries,
    /// Completion ring entries (up to twice `entries`: see QueuePairParts::cq_entries).
    cq_entries: QueueEntries,
    /// The controller knows this queue (false after a reset, until re-created).
    on_device: bool,
}

impl LiveQueue {
    /// Every region the controller may access for this queue.
    fn memory(&self) -> Vec<DmaRegion> {
        let mut m = vec![self.sq.clone(), self.cq.clone()];
        m.extend(self.prp_lists.iter().cloned());
        m.extend(self.buffers.iter().cloned());
        m
    }
}

/// Memory in quarantine (see `Controller::quarantine`), and the queue id the
/// controller may still hold with it.
struct Quarantined {
    qid: Option<u16>,
    memory: Vec<DmaRegion>,
}

/// True when the command behind `e` certainly no longer runs on the
/// controller: it completed (with an error status), or it was never sent.
/// Anything else (no completion in time, a controller gone or in fatal
/// status, an error this list does not know) may leave it running.
fn settled(e: &Error) -> bool {
    matches!(e, Error::Command { .. } | Error::Submit(_) | Error::GivenUp | Error::Invalid(_) | Error::Dma(_))
}

/// NVMe 1.4c §7.6.1 steps 2-4: admin queue sizes in AQA, base addresses in
/// ASQ/ACQ; CC (NVM command set, 4 KiB pages, round robin, 64/16-byte
/// entries), then CC.EN = 1; wait for CSTS.RDY = 1 (bounded by CAP.TO);
/// CSTS.CFS instead means the controller failed to start.
fn enable_with_admin_queue<R: RegisterWindow + ?Sized>(
    regs: &R,
    entries: QueueEntries,
    asq: &DmaRegion,
    acq: &DmaRegion,
    ready_timeout: Duration,
) -> Result<(), Error> {
    // Admin queue sizes are 12-bit fields: `entries` is at most 4096 (see ADMIN_MAX).
    let size = entries.min(ADMIN_MAX).zeros_based();
    regs.write32(offset::AQA, Aqa::new().with_asqs(size).with_acqs(size).into_bits());
    regs.write64(offset::ASQ, asq.iova());
    regs.write64(offset::ACQ, acq.iova());
    let cc = Cc::new()
        .with_css(0)
        .with_mps((PAGE_SIZE.trailing_zeros() - 12) as u8)
        .with_ams(0)
        .with_shn(shn::NONE)
        .with_iosqes(nvme_spec::sqe::SQE_SIZE_LOG2)
        .with_iocqes(nvme_spec::cqe::CQE_SIZE_LOG2);
    regs.write32(offset::CC, cc.into_bits());
    regs.write32(offset::CC, cc.with_en(true).into_bits());
    let csts = wait_until(regs, ready_timeout, "set CSTS.RDY after CC.EN=1", |s| s.rdy() || s.cfs())?;
    if csts.cfs() {
        return Err(Error::Fatal { during: "enable" });
    }
    Ok(())
}

/// Largest admin queue: AQA.ASQS and ACQS are 12 bits, 0's based (NVMe 1.4c §3.1.8).
const ADMIN_MAX: QueueEntries = match QueueEntries::new(nvme_spec::regs::MAX_ADMIN_QUEUE_ENTRIES) {
    Some(e) => e,
    None => unreachable!(),
};

/// The admin queue pair over `asq`/`acq`, in its initial state (tail 0,
/// expecting phase 1): admin doorbells are always MMIO.
fn admin_queue_pair<R: RegisterWindow + ?Sized>(
    regs: Arc<R>,
    cap: Cap,
    asq: DmaRegion,
    acq: DmaRegion,
    entries: QueueEntries,
) -> Result<QueuePair<R>, Error> {
    QueuePair::new(QueuePairParts {
        regs,
        qid: 0,
        sq_mem: asq,
        cq_mem: acq,
        entries,
        cq_entries: entries,
        dstrd: cap.dstrd(),
        prp_lists: None,
        list_pages_per_cmd: 0,
        page_size: PAGE_SIZE,
        max_transfer: 2 * PAGE_SIZE,
        shadow: None,
        streaming_sq: false,
    })
}

/// How long CSTS.RDY may take to become 1 after CC.EN = 1 (CC.CRIME = 0):
/// CAP.TO, or, when CAP.CRMS.CRWMS says the NVMe 2.0 CRTO register holds
/// it, CRTO.CRWMT, whose 16 bits reach past CAP.TO's 127.5 s. As Linux
/// (`nvme_enable_ctrl`), the larger of the two: some controllers report a
/// CRWMT below CAP.TO.
fn enable_timeout<R: RegisterWindow + ?Sized>(regs: &R, cap: Cap, cfg: &ControllerConfig) -> Duration {
    if let Some(t) = cfg.ready_timeout {
        return t;
    }
    let mut ms = cap.timeout_ms();
    if cap.ready_with_media_timeout_reported() {
        ms = ms.max(nvme_spec::regs::Crto::from_bits(regs.read32(offset::CRTO)).ready_with_media_ms());
    }
    Duration::from_millis(ms)
}

/// How long CSTS.RDY may take to become 0 after CC.EN = 0: CAP.TO.
fn disable_timeout(cap: Cap, cfg: &ControllerConfig) -> Duration {
    cfg.ready_timeout.unwrap_or(Duration::from_millis(cap.timeout_ms()))
}

/// What the wait after CC.EN = 0 waits for (its [`Error::Timeout`]'s `what`).
const RDY_AFTER_DISABLE: &str = "clear CSTS.RDY after CC.EN=0";

/// Controller reset by CC.EN = 0, then wait for CSTS.RDY = 0 (within
/// `disable_timeout`): NVMe 1.4c §3.1.5, §7.3.2. A controller found still
/// enabling (CC.EN = 1, CSTS.RDY = 0) is first let finish, for at most
/// `enable_wait`: clearing CC.EN before CSTS.RDY is 1 "has undefined
/// results" (§3.1.5, CC.EN), and SPDK waits the same way
/// (`nvme_ctrlr_process_init`), unless the controller reports fatal
/// status, which asks for this reset. An error means the controller was
/// not reset: it may still use the memory it was given (its admin queue),
/// so the caller keeps that memory mapped.
fn disable<R: RegisterWindow + ?Sized>(regs: &R, enable_wait: Duration, disable_timeout: Duration, settle: Duration) -> Result<(), Error> {
    let cc = Cc::from_bits(regs.read32(offset::CC));
    let csts = Csts::from_bits(regs.read32(offset::CSTS));
    if csts.into_bits() == u32::MAX {
        return Err(Error::Gone);
    }
    if cc.en() && !csts.rdy() && !csts.cfs() {
        wait_until(regs, enable_wait, "finish enabling (CSTS.RDY=1) so that it can be reset (CC.EN=0)", |s| s.rdy() || s.cfs())?;
    }
    if cc.en() {
        regs.write32(offset::CC, cc.with_shn(shn::NONE).with_en(false).into_bits());
        if !settle.is_zero() {
            std::thread::sleep(settle);
        }
    }
    wait_until(regs, disable_timeout, RDY_AFTER_DISABLE, |s| !s.rdy())?;
    if cc.en() || csts.rdy() {
        // A controller that was just reset is given a moment before CC.EN
        // = 1 follows: SPDK waits 100 us here (`nvme_ctrlr_process_init`,
        // "some NVMe SSDs miss CC.EN getting set to 1 if it is too soon
        // after CSTS.RDY is reported as 0"), and a missed enable would
        // cost the whole CAP.TO wait and fail.
        std::thread::sleep(EN_AFTER_RDY_0);
    }
    Ok(())
}

/// Clear CSTS.NSSRO (NVM Subsystem Reset Occurred, write 1 to clear) if
/// it reads 1, before the controller is reset, as Linux's
/// `nvme_pci_configure_admin_queue` does at probe and at every reset: a 1
/// read afterwards then means an NVM subsystem reset since (NVMe 1.4c
/// §3.1.6, §7.3.1), not one from before. Only on a controller that
/// supports NVM subsystem reset (CAP.NSSRS, from NVMe 1.1, as Linux
/// checks VS): for another the bit means nothing, and CSTS is not written.
/// Whether it read 1. A device that reads all ones is left to [`disable`]
/// to report gone.
fn clear_subsystem_reset_occurred<R: RegisterWindow + ?Sized>(regs: &R, cap: Cap, vs: Vs) -> bool {
    if !cap.nssrs() || !vs.at_least(1, 1) {
        return false;
    }
    let csts = Csts::from_bits(regs.read32(offset::CSTS));
    if !csts.nssro() || csts.into_bits() == u32::MAX {
        return false;
    }
    regs.write32(offset::CSTS, Csts::new().with_nssro(true).into_bits());
    true
}

/// The pause between CSTS.RDY reading 0 after a reset and the next CC.EN =
/// 1 ([`disable`]).
pub(crate) const EN_AFTER_RDY_0: Duration = Duration::from_micros(100);

/// Keep `regions` mapped until the process ends: a controller that was
/// not seen to stop may still read or write them, and freed memory can be
/// handed to the next allocation. (When the process ends, VFIO resets the
/// function before its mappings go.) The end of quarantine for a controller
/// that never stops: one that would not finish enabling, shutting down or
/// resetting.
fn keep_mapped(regions: impl IntoIterator<Item = DmaRegion>) {
    for r in regions {
        std::mem::forget(r);
    }
}

fn wait_until<R: RegisterWindow + ?Sized>(
    regs: &R,
    timeout: Duration,
    what: &'static str,
    done: impl Fn(Csts) -> bool,
) -> Result<Csts, Error> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let csts = Csts::from_bits(regs.read32(offset::CSTS));
        // All ones first: a device that is gone reads RDY, CFS and SHST
        // set, which would pass for ready or for fatal status (Linux's
        // `nvme_wait_ready` checks it first too).
        if csts.into_bits() == u32::MAX {
            return Err(Error::Gone);
        }
        if done(csts) {
            return Ok(csts);
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout { what, timeout_ms: timeout.as_millis() as u64, csts: csts.into_bits() });
        }
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl<R: RegisterWindow + ?Sized> Controller<R> {
    /// [`new`](Self::new), with the escalation of Linux's
    /// `nvme_pci_configure_admin_queue`: a controller that does not clear
    /// CSTS.RDY after CC.EN = 0 at bring-up (firmware stuck since an
    /// unclean hand-over) is given the bigger hammer, a function-level
    /// reset by `function_reset` (vfio-pci's VFIO_DEVICE_RESET, which saves
    /// and restores the configuration space around it), and brought up
    /// once more. Nothing was given to the controller before that wait, so
    /// no memory is at stake. The controller keeps `function_reset` for
    /// its [`reset`](Self::reset)s, which escalate the same way, as Linux's
    /// runs at every controller reset, not only at probe.
    pub fn new_with_function_reset(
        regs: Arc<R>,
        mem: Arc<dyn DmaAllocator>,
        cfg: ControllerConfig,
        mut function_reset: impl FnMut() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        let mut c = match Self::new(regs.clone(), mem.clone(), cfg.clone()) {
            Err(Error::Timeout { what: RDY_AFTER_DISABLE, timeout_ms, csts }) => {
                let failed = |why: String| Error::FunctionResetFailed { timeout_ms, csts, why };
                function_reset().map_err(failed)?;
                match Self::new(regs, mem, cfg) {
                    Err(Error::Timeout { what: RDY_AFTER_DISABLE, csts, .. }) => {
                        return Err(failed(format!("after it the controller still did not clear CSTS.RDY (CSTS={csts:#x})")));
                    }
                    r => r?,
                }
            }
            r => r?,
        };
        c.function_reset = Some(Box::new(function_reset));
        Ok(c)
    }

    /// Reset and initialize the controller behind `regs`, using `mem` for
    /// queues and buffers: NVMe 1.4c §7.6.1 steps 1-7, then Identify
    /// Controller and Set Features Number of Queues.
    pub fn new(regs: Arc<R>, mem: Arc<dyn DmaAllocator>, cfg: ControllerConfig) -> Result<Self, Error> {
        if !cfg.init_delay.is_zero() {
            std::thread::sleep(cfg.init_delay);
        }
        // Step 0: what the controller can do.
        let cap = Cap::from_bits(regs.read64(offset::CAP));
        let vs = Vs::from_bits(regs.read32(offset::VS));
        if cap.into_bits() == u64::MAX {
            return Err(Error::Gone);
        }
        if !cap.supports_nvm_command_set() {
            return Err(Error::Unsupported("controller does not support the NVM command set (CAP.CSS bit 0)".into()));
        }
        let Some(mqes_entries) = cap.max_entries() else {
            return Err(Error::Unsupported(
                "CAP.MQES is 0 (one-entry queues), below the minimum of 1 (2 entries) the specification allows: the controller reports nonsense; update its firmware or use another".into(),
            ));
        };
        if cap.min_page_size() > PAGE_SIZE {
            return Err(Error::Unsupported(format!(
                "controller's smallest page ({} bytes, CAP.MPSMIN) is larger than the host page of {PAGE_SIZE}",
                cap.min_page_size()
            )));
        }
        let (enable_to, disable_to) = (enable_timeout(&*regs, cap, &cfg), disable_timeout(cap, &cfg));

        // Step 1: reset. CSTS.NSSRO cleared first (where it is defined),
        // so that a later NVM subsystem reset can be told apart. Clear
        // CC.EN and wait for CSTS.RDY to follow; a controller the previous
        // owner left enabling is let finish first, and a quirky model is
        // given its settle time before CSTS is read.
        let subsystem_reset = clear_subsystem_reset_occurred(&*regs, cap, vs);
        disable(&*regs, enable_to, disable_to, cfg.ready_check_delay)?;

        // Steps 2-4: admin queues (AQA, ASQ, ACQ), CC, CC.EN = 1, then wait
        // for CSTS.RDY = 1 (bounded by the enable timeout); CFS means it failed.
        let aq = QueueEntries::clamped(cfg.admin_queue_entries as u64, QueueEntries::MIN, ADMIN_MAX);
        let asq = mem.alloc(aq.as_usize() * 64, PAGE_SIZE)?;
        let acq = mem.alloc(aq.as_usize() * 16, PAGE_SIZE)?;
        let admin = admin_queue_pair(regs.clone(), cap, asq.clone(), acq.clone(), aq)?;
        // Allocated before CC.EN = 1: a failure after it would free the
        // admin queue under an enabled controller.
        let scratch = Some(mem.alloc(IDENTIFY_SIZE, PAGE_SIZE)?);
        if let Err(e) = enable_with_admin_queue(&*regs, aq, &asq, &acq, enable_to) {
            // The controller knows the admin queue's addresses. Reset it if
            // that is defined now (ready after all, or fatal); else it is
            // still enabling and keeps them: keep the memory too.
            if disable(&*regs, Duration::ZERO, disable_to, cfg.ready_check_delay).is_err() {
                keep_mapped([asq, acq]);
            }
            return Err(e);
        }
        let mut c = Controller {
            regs,
            mem,
            cap,
            vs,
            mqes_entries,
            admin,
            admin_entries: aq,
            scratch,
            ident: IdentifyController::default(),
            max_transfer: 0,
            io_queues_granted: 0,
            qids_in_use: vec![],
            live: vec![],
            cfg,
            shut_down: false,
            shadow: None,
            shadow_refused: None,
            queues_refused: None,
            acre: false,
            generation: 0,
            failed: false,
            quarantine: vec![],
            stops: 0,
            resetting: false,
            bringing_up: true,
            host_memory: None,
            host_memory_refused: None,
            function_reset: None,
            subsystem_reset,
        };

        // Step 5: Identify Controller: MDTS bounds every transfer. A
        // Discovery or Administrative controller has no I/O queues, and CC
        // was set to the NVM command set's entry sizes, which the
        // controller must take (NVMe 1.4c §7.6.1 step 3: within SQES and
        // CQES). Returning drops `c`, which shuts the controller down.
        c.ident = c.identify_controller()?;
        if let Some(why) = c.ident.not_an_io_controller() {
            return Err(Error::Unsupported(format!("{why}: name an NVMe I/O controller (an SSD's)")));
        }
        if let Err(why) = c.ident.entry_sizes_fit(nvme_spec::sqe::SQE_SIZE_LOG2, nvme_spec::cqe::CQE_SIZE_LOG2) {
            return Err(Error::Unsupported(format!("{why}: this driver cannot queue commands to it")));
        }
        let mdts = c.ident.max_transfer_bytes(cap.min_page_size()).unwrap_or(c.cfg.default_max_transfer);
        c.max_transfer = mdts.min(nvme_spec::cmd::MAX_BLOCKS_PER_COMMAND as usize * 512).max(PAGE_SIZE);

        // Step 6: Set Features - Number of Queues, once, before any I/O queue.
        c.io_queues_granted = c.set_queue_count(c.cfg.admin_timeout)?;
        c.qids_in_use = vec![false; c.io_queues_granted as usize + 1];
        c.qids_in_use[0] = true;
        c.enable_retry_delays(c.cfg.admin_timeout)?;
        c.enable_host_memory(c.cfg.admin_timeout)?;

        // Step 7 (optional): shadow doorbells, before any I/O queue exists so
        // every queue starts with zeroed slots.
        if c.cfg.shadow_doorbells && c.ident.supports_shadow_doorbells() && c.io_queues_granted > 0 {
            match c.enable_shadow_doorbells() {
                Ok(()) => {}
                // The controller answered no: shadow doorbells are an
                // optimisation, so go on with MMIO doorbells, as Linux's
                // nvme_dbbuf_set does ("unable to set dbbuf"). A timeout or
                // a failed controller is no answer and stays an error.
                Err(Error::Command { status, .. }) => c.shadow_refused = Some(status.to_string()),
                Err(e) => return Err(e),
            }
        }
        c.bringing_up = false;
        Ok(c)
    }

    /// Set Features Number of Queues for the I/O queue pairs the
    /// configuration asks for; the pairs granted. A controller may allocate
    /// more than asked for (QEMU's allocates all it has): only those asked
    /// for are used, as Linux does, since doorbells, interrupt vectors and
    /// shadow doorbell slots were provided for that many. A degraded
    /// controller may refuse the command: as Linux's nvme_set_queue_count
    /// does, that leaves the admin queue (Identify and the logs that may
    /// explain it still work) and no I/O queues, and the status is kept to
    /// say why when one is asked for.
    fn set_queue_count(&mut self, timeout: Duration) -> Result<u16, Error> {
        let want = self.cfg.io_queues.max(1);
        match self.admin_command_within(cmd::set_number_of_queues(want, want), None, timeout) {
            Ok(cqe) => {
                let (nsq, ncq) = cmd::number_of_queues_allocated(cqe.dw0);
                Ok(nsq.min(ncq).min(want as u32) as u16)
            }
            Err(Error::Command { status, .. }) => {
                self.queues_refused = Some(status.to_string());
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// Advanced Command Retry Enable (Set Features Host Behavior Support),
    /// when the controller reports a Command Retry Delay Time, as Linux's
    /// nvme_configure_acre: a command it cannot serve yet (Namespace Not
    /// Ready after a reset, an ANA transition) then completes with CRD
    /// naming how long to wait before the retry ([`retry_delays`](Self::retry_delays)),
    /// rather than failing every immediate retry. A refusal leaves it off
    /// (retries go at once, as without it); other errors are errors.
    fn enable_retry_delays(&mut self, timeout: Duration) -> Result<(), Error> {
        self.acre = false;
        if self.ident.crdt[0] == 0 {
            return Ok(());
        }
        let sent = self.with_scratch_page(
            cmd::HOST_BEHAVIOR_SIZE,
            |page| page.copy_from(0, &[1]), // ACRE
            |ctrl, data| ctrl.admin_command_within(cmd::set_host_behavior_support(), Some(data), timeout),
            |_| (),
        );
        match sent {
            Ok(()) => self.acre = true,
            Err(Error::Command { .. }) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The waits a completion's Command Retry Delay (CRD 1, 2, 3) asks for
    /// before its command is retried: Identify's CRDT1-3 in 100 ms units
    /// when ACRE is on, else none (the controller then reports CRD 0).
    pub fn retry_delays(&self) -> [Duration; 3] {
        if !self.acre {
            return [Duration::ZERO; 3];
        }
        self.ident.crdt.map(|t| Duration::from_millis(t as u64 * 100))
    }

    /// Host Memory Buffer (Set Features 0Dh), when the controller asks for
    /// one (Identify HMPRE: an SSD without DRAM of its own keeps its
    /// mapping tables there, and is slower without): as much as it prefers
    /// up to `host_memory_max`, at least HMMIN, as Linux's
    /// `nvme_setup_host_mem`; after a reset the same memory is given back
    /// (MR = 1). A refusal, or a minimum above the limit, leaves the
    /// controller without one ([`host_memory_refused`](Self::host_memory_refused));
    /// other errors are errors. The memory stays with the controller until
    /// it is seen to stop, as its queues' does.
    fn enable_host_memory(&mut self, timeout: Duration) -> Result<(), Error> {
        let (preferred, min) = (self.ident.hmpre as usize * 4096, self.ident.hmmin as usize * 4096);
        if preferred == 0 && min == 0 {
            // Asks for none (after a reset, new firmware may not): a buffer
            // it had is not its any more.
            self.drop_host_memory(false);
            return Ok(());
        }
        if self.host_memory.is_none() {
            let max = self.cfg.host_memory_max;
            let min_chunk = self.ident.hmminds as usize * 4096;
            if max == 0 {
                self.host_memory_refused = Some("this driver was configured to give none".into());
                return Ok(());
            }
            if min > max || min_chunk > max {
                self.host_memory_refused = Some(format!(
                    "it needs at least {} MiB (HMMIN, or HMMINDS in one descriptor), above this driver's limit of {} MiB",
                    min.max(min_chunk) >> 20,
                    max >> 20
                ));
                return Ok(());
            }
            // As much as it prefers up to the limit; memory that cannot be
            // had is asked for again at half the size, down to the
            // minimum, and then the controller goes without, as Linux's
            // nvme_alloc_host_mem ("failed to allocate host memory buffer").
            let floor = min.max(min_chunk).max(PAGE_SIZE);
            let mut size = preferred.min(max).max(floor).next_multiple_of(PAGE_SIZE);
            let refused = |size: usize, e: nvme_hal::DmaError| format!("{} MiB of DMA memory could not be had ({e})", size >> 20);
            let list = match self.mem.alloc(PAGE_SIZE, PAGE_SIZE) {
                Ok(l) => l,
                Err(e) => {
                    self.host_memory_refused = Some(refused(size, e));
                    return Ok(());
                }
            };
            let chunk = loop {
                match self.mem.alloc(size, PAGE_SIZE) {
                    Ok(c) => break c,
                    Err(e) if size <= floor => {
                        self.host_memory_refused = Some(refused(size, e));
                        return Ok(());
                    }
                    Err(_) => size = (size / 2).max(floor).next_multiple_of(PAGE_SIZE),
                }
            };
            let pages = (size / PAGE_SIZE) as u32;
            let desc = cmd::HostMemoryDescriptor { addr: chunk.iova(), pages };
            list.fill(0, PAGE_SIZE, 0);
            list.copy_from(0, &desc.to_bytes());
            self.host_memory = Some(HostMemory { chunk, list, pages, given: false });
        }
        let h = self.host_memory.as_ref().expect("made above");
        let sqe = cmd::set_host_memory_buffer(true, h.given, h.pages, h.list.iova(), 1);
        let stops = self.stops;
        match self.admin_command_within(sqe, None, timeout) {
            Ok(_) => {
                self.host_memory.as_mut().expect("kept").given = true;
                self.host_memory_refused = None;
                Ok(())
            }
            // Refused: the controller goes without, and the memory is not
            // its (unless it had it before a reset, when it stays until the
            // controller is seen to stop).
            Err(Error::Command { status, .. }) => {
                self.host_memory_refused = Some(format!("it refused Set Features Host Memory Buffer ({status})"));
                self.drop_host_memory(false);
                Ok(())
            }
            Err(e) => {
                // A command that may still run may still give the
                // controller the memory, for as long as it runs.
                let may_run = self.may_still_run(&e, stops);
                self.drop_host_memory(may_run);
                Err(e)
            }
        }
    }

    /// The controller goes without its Host Memory Buffer. Memory it has
    /// had, or that a command still running (`may_run`) may give it, is
    /// not its owner's to reuse until the controller is seen to stop: it
    /// goes into quarantine; memory it never had is freed.
    fn drop_host_memory(&mut self, may_run: bool) {
        if let Some(h) = self.host_memory.take() {
            if h.given || may_run {
                self.quarantine(None, vec![h.chunk, h.list]);
            }
        }
    }

    /// The Host Memory Buffer given to the controller, in bytes (None:
    /// it asked for none, or has none: see [`host_memory_refused`](Self::host_memory_refused)).
    pub fn host_memory(&self) -> Option<usize> {
        self.host_memory.as_ref().filter(|h| h.given).map(|h| h.pages as usize * PAGE_SIZE)
    }

    /// Why a controller that asks for a Host Memory Buffer has none.
    pub fn host_memory_refused(&self) -> Option<&str> {
        self.host_memory_refused.as_deref()
    }

    /// Doorbell Buffer Config: a buffer of shadow doorbells and one of
    /// EventIdx values, zeroed, each with a slot for every granted queue at
    /// the controller's doorbell stride (contiguous, page aligned, past one
    /// page when there are many queues or a large stride): the controller
    /// uses the slots of every I/O queue it creates, wherever they fall.
    fn enable_shadow_doorbells(&mut self) -> Result<(), Error> {
        let len = crate::doorbell::buffer_len(self.io_queues_granted, self.cap.dstrd(), PAGE_SIZE).ok_or_else(|| {
            Error::Unsupported(format!(
                "shadow doorbells for {} queues at doorbell stride {} bytes do not fit the address space; run without shadow doorbells",
                self.io_queues_granted,
                self.cap.doorbell_stride()
            ))
        })?;
        let dbs = self.mem.alloc(len, PAGE_SIZE)?;
        let eis = self.mem.alloc(len, PAGE_SIZE)?;
        dbs.fill(0, len, 0);
        eis.fill(0, len, 0);
        let stops = self.stops;
        if let Err(e) = self.admin_command(cmd::doorbell_buffer_config(dbs.iova(), eis.iova()), None) {
            // A command that may still run may still give the controller
            // both buffers, which it would then read and write for as long
            // as it runs: they stay allocated until it is seen to stop.
            if self.may_still_run(&e, stops) {
                self.quarantine(None, vec![dbs, eis]);
            }
            return Err(e);
        }
        self.shadow = Some((dbs, eis));
        Ok(())
    }

    /// True when I/O queues use shadow doorbells.
    pub fn shadow_doorbells(&self) -> bool {
        self.shadow.is_some()
    }

    /// The status the controller refused Doorbell Buffer Config with, when
    /// it advertises the command but answered it with an error (at bring-up
    /// or at a reset): its doorbells are then MMIO writes.
    pub fn shadow_doorbells_refused(&self) -> Option<&str> {
        self.shadow_refused.as_deref()
    }

    /// The shadow slots of I/O queue `qid`, zeroed, if shadow doorbells are
    /// on (the buffers hold every granted queue's slots).
    fn shadow_slots(&self, qid: u16) -> Option<(crate::doorbell::ShadowSlot, crate::doorbell::ShadowSlot)> {
        let (dbs, eis) = self.shadow.as_ref()?;
        let d = self.cap.dstrd();
        let sq_off = nvme_spec::regs::sq_tail_doorbell(qid, d) - offset::DOORBELL_BASE;
        let cq_off = nvme_spec::regs::cq_head_doorbell(qid, d) - offset::DOORBELL_BASE;
        let sq = crate::doorbell::ShadowSlot::new(dbs, eis, sq_off);
        let cq = crate::doorbell::ShadowSlot::new(dbs, eis, cq_off);
        sq.clear();
        cq.clear();
        Some((sq, cq))
    }

    /// How long a normal shutdown may take: RTD3 Entry Latency (Identify
    /// Controller RTD3E, microseconds: the time the controller says it
    /// needs to get ready for power off) clamped to 5..=60 s, as Linux's
    /// `nvme_init_ctrl_finish` sets `shutdown_timeout` (5 s when RTD3E is
    /// not reported). CAP.TO bounds CSTS.RDY changes, not shutdown.
    /// [`ControllerConfig::shutdown_timeout`] overrides it.
    pub fn shutdown_timeout(&self) -> Duration {
        if let Some(t) = self.cfg.shutdown_timeout {
            return t;
        }
        Duration::from_micros(self.ident.rtd3e as u64).clamp(Duration::from_secs(5), Duration::from_secs(60))
    }

    /// Controller Capabilities as read at bring-up.
    pub fn cap(&self) -> Cap {
        self.cap
    }
    /// Version register.
    pub fn version(&self) -> Vs {
        self.vs
    }
    /// Identify Controller data.
    pub fn identify(&self) -> &IdentifyController {
        &self.ident
    }
    /// Largest transfer in bytes (from MDTS).
    pub fn max_transfer(&self) -> usize {
        self.max_transfer
    }
    /// I/O queue pairs the controller granted.
    pub fn io_queues_granted(&self) -> u16 {
        self.io_queues_granted
    }
    /// Largest I/O queue the controller accepts, in entries (CAP.MQES + 1).
    pub fn max_queue_entries(&self) -> QueueEntries {
        self.mqes_entries
    }
    /// Largest I/O submission queue this driver creates on this controller:
    /// CAP.MQES + 1, at most [`MAX_SQ_ENTRIES`].
    pub fn max_io_queue_entries(&self) -> QueueEntries {
        self.mqes_entries.min(MAX_SQ_ENTRIES)
    }
    /// Most commands an I/O queue pair of this controller can have in
    /// flight: [`max_io_queue_entries`](Self::max_io_queue_entries) - 1.
    pub fn max_io_queue_depth(&self) -> usize {
        self.max_io_queue_entries().capacity() as usize
    }
    /// The register window.
    pub fn regs(&self) -> &Arc<R> {
        &self.regs
    }
    /// The DMA allocator.
    pub fn allocator(&self) -> &Arc<dyn DmaAllocator> {
        &self.mem
    }
    /// The admin queue pair (read-only, for tracing).
    pub fn admin_queue(&self) -> &QueuePair<R> {
        &self.admin
    }
    /// True when CSTS.NSSRO read 1 at bring-up or at a reset since (it is
    /// cleared each time, as Linux does): an NVM subsystem reset (NSSR
    /// written, e.g. by `nvme subsystem-reset`, or one taken by another
    /// controller of the subsystem) had reset this controller, before
    /// bring-up or, at a reset, while this driver had it. Always false for
    /// a controller without NVM subsystem reset (CAP.NSSRS).
    pub fn subsystem_reset_occurred(&self) -> bool {
        self.subsystem_reset
    }
    /// Controller Status now.
    pub fn status(&self) -> Csts {
        Csts::from_bits(self.regs.read32(offset::CSTS))
    }

    /// Submit one admin command and wait for its completion. A failed
    /// status comes back as [`Error::Command`] with the decoded status.
    /// A command that does not complete in time resets the controller (see
    /// [`TimeoutAction`](crate::TimeoutAction)). After any other error, or a
    /// timeout whose reset failed, the command may still run: `data`'s
    /// memory must then be kept until the controller has been reset or shut
    /// down, as the controller's own data pages are.
    pub fn admin_command(&mut self, sqe: Sqe, data: Option<DataPtr>) -> Result<Cqe, Error> {
        self.admin_command_within(sqe, data, self.cfg.admin_timeout)
    }

    /// [`admin_command`](Self::admin_command), waiting at most `timeout`.
    pub fn admin_command_within(&mut self, sqe: Sqe, data: Option<DataPtr>, timeout: Duration) -> Result<Cqe, Error> {
        if self.failed {
            return Err(Error::GivenUp);
        }
        let opcode = AdminOpcode::from_u8(sqe.opcode()).map(|o| o.name()).unwrap_or("admin command");
        let slot = self.admin.sq().tail();
        let cid = self.admin.submit(sqe, data, sqe.opcode() as u64)?;
        if let Some(o) = &self.cfg.admin_observer {
            (o.0)(AdminEvent::Posted { slot, tail: self.admin.sq().tail(), sqe: &self.admin.sq().entry(slot) });
        }
        self.admin.ring();
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let head = self.admin.cq().head();
            let reaped = self.admin.reap_raw();
            if let (Some((cqe, tag)), Some(o)) = (&reaped, &self.cfg.admin_observer) {
                (o.0)(AdminEvent::Reaped { slot: head, cqe, ours: tag.is_some() });
            }
            self.admin.ring_cq();
            if let Some((cqe, tag)) = reaped {
                if tag.is_none() || cqe.cid != cid {
                    // A stray completion (e.g. of an abandoned command): keep waiting for ours.
                    continue;
                }
                let status = cqe.decoded_status();
                if !status.is_success() {
                    return Err(Error::Command { opcode, status, cqe });
                }
                return Ok(cqe);
            }
            spins += 1;
            // Look at CSTS and the clock every 1024 spins, and at every
            // turn once sleeping: 1024 sleeps could overrun the timeout many
            // times on a loaded machine.
            if spins.is_multiple_of(1024) || spins > 4096 {
                let csts = self.status();
                if csts.into_bits() == u32::MAX {
                    return Err(Error::Gone);
                }
                if csts.cfs() {
                    return Err(Error::Fatal { during: opcode });
                }
                if start.elapsed() > timeout {
                    return Err(self.admin_timed_out(opcode, timeout));
                }
            }
            if spins < 4096 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// An admin command did not complete within `timeout`. Its CID must not
    /// go to another command while the controller may still complete it, and
    /// only a reset makes the controller forget it: reset now (Linux's
    /// `nvme_timeout` disables and resets the controller for a timed-out
    /// admin command). Returns the error for the caller: the timeout, with
    /// the controller reset (I/O queue pairs gone), or with the reset that
    /// failed (the controller given up, and left disabled if it stops).
    #[cold]
    fn admin_timed_out(&mut self, opcode: &'static str, timeout: Duration) -> Error {
        let timeout_ms = timeout.as_millis() as u64;
        if self.resetting {
            // The reset that issued this command fails, and says so.
            return Error::CommandTimeout { opcode, timeout_ms, action: crate::TimeoutAction::DuringReset };
        }
        if self.bringing_up {
            // Bring-up fails with it: the controller is given up and
            // disabled, which makes it forget the command if it stops.
            let stopped = self.fail_and_disable();
            return Error::CommandTimeout { opcode, timeout_ms, action: crate::TimeoutAction::DuringBringUp { stopped } };
        }
        match self.reset(timeout) {
            Ok(()) => Error::CommandTimeout { opcode, timeout_ms, action: crate::TimeoutAction::ControllerReset },
            Err(e) => Error::CommandTimeoutResetFailed { opcode, timeout_ms, source: Box::new(e) },
        }
    }

    fn identify_page(&mut self, sqe: Sqe) -> Result<Box<[u8; IDENTIFY_SIZE]>, Error> {
        let timeout = self.cfg.admin_timeout;
        self.identify_page_within(sqe, timeout)
    }

    /// [`identify_page`](Self::identify_page) waiting at most `timeout`.
    pub(crate) fn identify_page_within(&mut self, sqe: Sqe, timeout: Duration) -> Result<Box<[u8; IDENTIFY_SIZE]>, Error> {
        self.with_scratch_page(IDENTIFY_SIZE, |_| {}, |ctrl, data| ctrl.admin_command_within(sqe, Some(data), timeout), |page| {
            let mut out = Box::new([0u8; IDENTIFY_SIZE]);
            page.copy_to(0, &mut out[..]);
            out
        })
    }

    /// One admin command whose data is the first `len` bytes of the
    /// scratch page: zeroed, then `fill`ed with what the host sends;
    /// `send` issues the command; `read` takes what the controller wrote.
    /// The page goes back for the next command, unless this one may still
    /// run (a timeout the controller was not seen to stop after): then the
    /// controller may yet read or write it, so it goes into quarantine and
    /// the next command gets a new page, whose data nothing else touches.
    fn with_scratch_page<T>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&DmaRegion),
        send: impl FnOnce(&mut Self, DataPtr) -> Result<Cqe, Error>,
        read: impl FnOnce(&DmaRegion) -> T,
    ) -> Result<T, Error> {
        let page = match self.scratch.take() {
            Some(s) => s,
            None => self.mem.alloc(IDENTIFY_SIZE, PAGE_SIZE)?,
        };
        page.fill(0, len, 0);
        fill(&page);
        let stops = self.stops;
        let data = DataPtr { iova: page.iova(), len };
        if let Err(e) = send(self, data) {
            if self.may_still_run(&e, stops) {
                self.quarantine(None, vec![page]);
            } else {
                self.scratch = Some(page);
            }
            return Err(e);
        }
        let out = read(&page);
        self.scratch = Some(page);
        Ok(out)
    }

    /// Identify Controller (CNS 01h).
    pub fn identify_controller(&mut self) -> Result<IdentifyController, Error> {
        Ok(IdentifyController::parse(&*self.identify_page(cmd::Identify::controller())?))
    }

    /// Identify Namespace (CNS 00h); an inactive NSID is an error that says so.
    pub fn identify_namespace(&mut self, nsid: u32) -> Result<IdentifyNamespace, Error> {
        let timeout = self.cfg.admin_timeout;
        self.identify_namespace_within(nsid, timeout)
    }

    /// [`identify_namespace`](Self::identify_namespace), waiting at most `timeout`.
    pub fn identify_namespace_within(&mut self, nsid: u32, timeout: Duration) -> Result<IdentifyNamespace, Error> {
        if nsid == 0 || nsid > self.ident.nn {
            return Err(Error::InactiveNamespace { nsid, nn: self.ident.nn });
        }
        let ns = IdentifyNamespace::parse(&*self.identify_page_within(cmd::Identify::namespace(nsid), timeout)?);
        if ns.is_inactive() {
            return Err(Error::InactiveNamespace { nsid, nn: self.ident.nn });
        }
        Ok(ns)
    }

    /// Active namespace IDs (Identify CNS 02h, a page of 1024 at a time).
    /// CNS 02h is defined from
    /// NVMe 1.1: an older controller's namespaces are each identified in
    /// turn, 1 to NN, those with a size being active, as Linux's
    /// `nvme_scan_ns_sequential` does; at most the first 1024 (as many as
    /// one CNS 02h page lists: an NN of billions, from a controller that
    /// reports nonsense, would take hours).
    pub fn active_namespaces(&mut self) -> Result<Vec<u32>, Error> {
        if !self.vs.at_least(1, 1) {
            let mut active = vec![];
            for nsid in 1..=self.ident.nn.min(1024) {
                match self.identify_namespace(nsid) {
                    Ok(_) => active.push(nsid),
                    Err(Error::InactiveNamespace { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(active);
        }
        // One page lists up to 1024 IDs above the NSID given: a full page
        // asks for the next, from its last ID, as Linux's
        // `nvme_scan_ns_list` does. A page that does not move past the
        // last ID (a controller that ignores the NSID) ends the list, and
        // so does NN: no more pages than NN's IDs fill, and no more than
        // 1024 (a million namespaces).
        let mut active: Vec<u32> = vec![];
        let pages = self.ident.nn.div_ceil(1024).clamp(1, 1024);
        for _ in 0..pages {
            let after = active.last().copied().unwrap_or(0);
            let page = self.identify_page(cmd::Identify::active_namespaces(after))?;
            let ids: Vec<u32> = page.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).take_while(|&n| n != 0).collect();
            let full = ids.len() == 1024;
            let before = active.len();
            active.extend(ids.into_iter().skip_while(|&n| n <= after));
            if !full || active.len() == before || active.last() >= Some(&self.ident.nn) {
                break;
            }
        }
        Ok(active)
    }

    /// Namespace Identification Descriptors (Identify CNS 03h): among them
    /// the namespace's command set. CNS 03h is defined from NVMe 1.3 (or
    /// with NVMe 2.0's I/O command sets): an older controller is not asked,
    /// as Linux's `nvme_identify_ns_descs` does not ask it (it may answer
    /// with another page, read as descriptors); its namespaces are NVM. A
    /// controller that answers Invalid Field gives an empty list too, and
    /// so does one that supports the NVM command set only (CAP.CSS bit 6
    /// clear) whatever error it answers: its namespaces' command set is
    /// known, and some such controllers fail the command (Linux's
    /// `NVME_QUIRK_NO_NS_DESC_LIST`: Silicon Motion SM2263, Lexar).
    pub fn identify_ns_descriptors(&mut self, nsid: u32) -> Result<nvme_spec::identify::NsDescriptors, Error> {
        if !self.vs.at_least(1, 3) && !self.cap.supports_io_command_sets() {
            return Ok(Default::default());
        }
        match self.identify_page(cmd::Identify::ns_descriptors(nsid)) {
            Ok(page) => Ok(nvme_spec::identify::NsDescriptors::parse(&page)),
            Err(Error::Command { status, .. })
                if !self.cap.supports_io_command_sets()
                    || (status.sct == nvme_spec::StatusCodeType::GENERIC && status.sc == nvme_spec::status::generic::INVALID_FIELD) =>
            {
                Ok(Default::default())
            }
            Err(e) => Err(e),
        }
    }

    /// Create an I/O completion queue and submission queue of `entries`
    /// entries each (clamped to 2..=[`max_io_queue_entries`](Self::max_io_queue_entries))
    /// on the lowest free queue id, polled, or with interrupts on vector
    /// `qid` when configured. NVMe 1.4c §5.3 and §5.4: the CQ first, since
    /// the SQ names it. Its commands may move up to the controller's
    /// largest transfer ([`max_transfer`](Self::max_transfer)).
    pub fn create_io_queue_pair(&mut self, entries: u32) -> Result<QueuePair<R>, Error> {
        self.create_io_queue_pair_for(entries, self.max_transfer)
    }

    /// [`create_io_queue_pair`](Self::create_io_queue_pair) for commands
    /// of at most `max_transfer` bytes (capped at the controller's): the
    /// PRP list pages kept for each command are sized for that, not for
    /// MDTS, which at 4 MiB needs 3 pages per command and at this driver's
    /// 32 MiB cap 17 (Linux, too, sizes its lists per request). A longer
    /// command on the queue is refused as too large.
    pub fn create_io_queue_pair_for(&mut self, entries: u32, max_transfer: usize) -> Result<QueuePair<R>, Error> {
        let max_transfer = max_transfer.clamp(PAGE_SIZE, self.max_transfer);
        let Some(qid) = self.qids_in_use.iter().position(|u| !u) else {
            if let Some(status) = &self.queues_refused {
                return Err(Error::QueueCountRefused { status: status.clone() });
            }
            return Err(Error::NoQueues { granted: self.io_queues_granted });
        };
        // qids_in_use has io_queues_granted + 1 (at most 65535) entries.
        let qid = qid as u16;
        let entries = QueueEntries::clamped(entries as u64, QueueEntries::MIN, self.max_io_queue_entries());
        // A completion ring twice the submission ring lets the completion
        // doorbell be rung once per `entries` completions instead of once
        // per pass (QueuePairParts::cq_entries); 16 bytes per entry is cheap.
        // Never more than CAP.MQES allows, never less than the SQ.
        let cq_entries = if self.cfg.batch_cq_doorbells {
            QueueEntries::clamped(2 * entries.get() as u64, entries, self.mqes_entries.min(MAX_CQ_ENTRIES))
        } else {
            entries
        };
        let sq_mem = self.mem.alloc(entries.as_usize() * 64, PAGE_SIZE)?;
        let cq_mem = self.mem.alloc(cq_entries.as_usize() * 16, PAGE_SIZE)?;
        // PRP list pages: enough per command for a max-size unaligned transfer.
        let list_entries = pages_spanned(4, max_transfer, PAGE_SIZE) - 1;
        let list_pages_per_cmd = if list_entries > 1 { list_pages_for(list_entries, PAGE_SIZE / 8) } else { 0 };
        let prp_lists = if list_pages_per_cmd > 0 {
            Some(self.mem.alloc(entries.capacity() as usize * list_pages_per_cmd * PAGE_SIZE, PAGE_SIZE)?)
        } else {
            None
        };

        let q = LiveQueue {
            qid,
            sq: sq_mem,
            cq: cq_mem,
            prp_lists,
            buffers: vec![],
            list_pages_per_cmd,
            max_transfer,
            entries,
            cq_entries,
            on_device: false,
        };
        let qp = self.create_on_device(&q, self.cfg.admin_timeout)?;
        self.qids_in_use[qid as usize] = true;
        self.live.push(LiveQueue { on_device: true, ..q });
        Ok(qp)
    }

    /// Create I/O CQ then SQ for `q` on the controller and return the host
    /// side, in its initial state. The host side is assembled first: parts
    /// that do not fit are an error before any command is sent. On failure
    /// no half of it is left behind: a CQ created before a refused SQ is
    /// deleted again (a timeout's reset deletes it too); and when that
    /// cleanup fails, or a Create command may still be running (no
    /// completion, and the controller not seen to stop since), the queue's
    /// memory and id go into quarantine, since the controller may yet use
    /// them. The error returned is the creation's.
    fn create_on_device(&mut self, q: &LiveQueue, timeout: Duration) -> Result<QueuePair<R>, Error> {
        let qid = q.qid;
        // Zero the queue's shadow slots before the controller learns of it.
        let shadow = self.shadow_slots(qid);
        let qp = QueuePair::new(QueuePairParts {
            regs: self.regs.clone(),
            qid,
            sq_mem: q.sq.clone(),
            cq_mem: q.cq.clone(),
            entries: q.entries,
            cq_entries: q.cq_entries,
            dstrd: self.cap.dstrd(),
            prp_lists: q.prp_lists.clone(),
            list_pages_per_cmd: q.list_pages_per_cmd,
            page_size: PAGE_SIZE,
            max_transfer: q.max_transfer,
            shadow,
            streaming_sq: self.cfg.streaming_sq,
        })?;
        let mut create_cq = cmd::CreateIoCq::new(qid, q.cq_entries, q.cq.iova());
        if self.cfg.interrupts {
            create_cq = create_cq.interrupt_vector(qid);
        }
        let stops = self.stops;
        if let Err(e) = self.admin_command_within(create_cq.build(), None, timeout) {
            if self.may_still_run(&e, stops) {
                self.quarantine(Some(qid), q.memory());
            }
            return Err(e);
        }
        let mut create_sq = cmd::CreateIoSq::new(qid, q.entries, q.sq.iova(), qid);
        if self.cfg.medium_prio_sq {
            create_sq = create_sq.priority(cmd::qprio::MEDIUM);
        }
        if let Err(e) = self.admin_command_within(create_sq.build(), None, timeout) {
            // A controller seen to stop since (a timeout's reset) has no CQ
            // left to delete; after a refusal, the CQ is deleted again (and
            // if that times out, its reset deletes it).
            let mut cleaned = self.stops != stops;
            if !cleaned && settled(&e) {
                let deleted = self.admin_command_within(cmd::delete_io_cq(qid), None, timeout).is_ok();
                cleaned = deleted || self.stops != stops;
            }
            if !cleaned {
                self.quarantine(Some(qid), q.memory());
            }
            return Err(e);
        }
        Ok(qp)
    }

    /// Delete an I/O queue pair: the SQ first (the controller completes or
    /// aborts what is still in it before it answers), then its CQ. NVMe 1.4c
    /// §5.6 and §5.5. A queue the controller no longer knows (after a
    /// reset) needs no command: only the host side goes.
    ///
    /// If a deletion fails, the controller may still fetch from the queue
    /// and write completions and read data into its memory: the queue's
    /// rings, PRP lists and data buffers go into quarantine (kept, never
    /// reused) until the controller is reset or shut down, and the error
    /// says so. A deletion that times out resets the controller, as any
    /// admin timeout does: once that reset has seen it stop, the queue is
    /// forgotten and goes as a deleted one would, and the timeout is the
    /// error. A controller given up on gets no command; its queues stay in
    /// quarantine unless it was seen to stop (CSTS.RDY = 0).
    pub fn delete_io_queue_pair(&mut self, qp: QueuePair<R>) -> Result<(), Error> {
        let idx = self.live_index(&qp)?;
        let qid = qp.qid();
        drop(qp);
        let mut result = Ok(());
        if self.live[idx].on_device {
            // Given up: no command (it would not be answered).
            let given_up = self.failed;
            let deleted = if given_up {
                Err(Error::GivenUp)
            } else {
                self.admin_command(cmd::delete_io_sq(qid), None).and_then(|_| self.admin_command(cmd::delete_io_cq(qid), None))
            };
            if let Err(e) = deleted {
                if self.live[idx].on_device {
                    // Not seen to stop: it may still use the queue.
                    let q = self.live.remove(idx);
                    self.quarantine(Some(qid), q.memory());
                    return if given_up { Ok(()) } else { Err(Error::QueueDeletion { qid, source: Box::new(e) }) };
                }
                // The reset that followed a timeout stopped the controller:
                // it forgot the queue, whose memory can go; the caller still
                // learns of the timeout and the reset.
                result = Err(e);
            }
        }
        self.qids_in_use[qid as usize] = false;
        self.live.remove(idx);
        result
    }

    /// `len` bytes of zeroed DMA memory for the data of `qp`'s commands,
    /// owned with the queue: the controller keeps the memory until the
    /// queue is deleted (or, if the deletion fails, until the controller
    /// forgets the queue), whatever happens to the handle returned. Data
    /// buffers made otherwise must be kept by their owner just as long.
    pub fn alloc_queue_buffer(&mut self, qp: &QueuePair<R>, len: usize) -> Result<DmaRegion, Error> {
        let idx = self.live_index(qp)?;
        let buf = self.mem.alloc(len, PAGE_SIZE)?;
        self.live[idx].buffers.push(buf.clone());
        Ok(buf)
    }

    /// Put `memory` (and queue id `qid`, if the controller may still hold
    /// it) into quarantine: see `Controller::quarantine`.
    fn quarantine(&mut self, qid: Option<u16>, memory: Vec<DmaRegion>) {
        if let Some(q) = qid {
            self.qids_in_use[q as usize] = true;
        }
        self.quarantine.push(Quarantined { qid, memory });
    }

    /// The controller was seen to stop (CSTS.RDY = 0 after CC.EN = 0,
    /// NVMe 1.4c §7.3.2): it forgot every I/O queue and command, so the
    /// memory in quarantine can go back, and its queue ids are free.
    fn controller_forgot_everything(&mut self) {
        self.stops += 1;
        for q in &mut self.live {
            q.on_device = false;
        }
        for q in std::mem::take(&mut self.quarantine) {
            if let Some(qid) = q.qid {
                self.qids_in_use[qid as usize] = self.live.iter().any(|l| l.qid == qid);
            }
        }
    }

    /// After error `e` of a command sent when `self.stops` was `stops`: may
    /// the command still run on the controller? Not if it settled (see
    /// `settled`), nor once the controller was seen to stop since (as the
    /// reset after an admin timeout does).
    fn may_still_run(&self, e: &Error, stops: u64) -> bool {
        !settled(e) && self.stops == stops
    }

    /// Bytes of DMA memory in quarantine now (see `Controller::quarantine`).
    pub fn quarantined_bytes(&self) -> usize {
        self.quarantine.iter().flat_map(|q| q.memory.iter()).map(|m| m.len()).sum()
    }

    /// Where `qp` is in `live`, or an error if it is not ours.
    fn live_index(&self, qp: &QueuePair<R>) -> Result<usize, Error> {
        let qid = qp.qid();
        let (sq_mem, _) = qp.memory();
        self.live
            .iter()
            .position(|q| q.qid == qid && q.sq.iova() == sq_mem.iova())
            .ok_or_else(|| Error::Invalid(format!("queue pair {qid} does not belong to this controller")))
    }

    /// Normal shutdown, NVMe 1.4c §7.6.2: delete what is left of the I/O
    /// queues, write CC.SHN = 01b, wait for CSTS.SHST = 10b (at most
    /// [`shutdown_timeout`](Self::shutdown_timeout)), then clear CC.EN so
    /// the next owner (the kernel's nvme driver) finds a controller in
    /// reset, ready to be initialized. A shutdown that does not complete in
    /// time is [`Error::ShutdownTimeout`]: the controller is then left
    /// enabled rather than reset in the middle of it.
    pub fn shutdown(mut self) -> Result<(), Error> {
        self.shutdown_inner()
    }

    fn shutdown_inner(&mut self) -> Result<(), Error> {
        if self.shut_down {
            return Ok(());
        }
        self.shut_down = true;
        let mut first_err = None;
        // A controller given up on, or in fatal status, gets no more admin
        // commands: the reset below makes it forget its queues all the same.
        let fatal = self.status().cfs();
        let live: Vec<u16> =
            if self.failed || fatal { vec![] } else { self.live.iter().filter(|q| q.on_device).map(|q| q.qid).collect() };
        for qid in live {
            for sqe in [cmd::delete_io_sq(qid), cmd::delete_io_cq(qid)] {
                // A timeout resets the controller (it forgets every queue) or
                // gives it up: then there is nothing left to delete.
                if self.failed || !self.live.iter().any(|q| q.qid == qid && q.on_device) {
                    break;
                }
                if let Err(e) = self.admin_command(sqe, None) {
                    first_err.get_or_insert(e);
                }
            }
        }
        // Shutdown notification, unless the controller is in fatal status
        // (it would not answer, and CFS asks for a reset) or not enabled
        // (a failed reset left it disabled: nothing to shut down).
        let enabled = Cc::from_bits(self.regs.read32(offset::CC)).en() && self.status().rdy();
        let r = if fatal || !enabled {
            Ok(())
        } else {
            let cc = Cc::from_bits(self.regs.read32(offset::CC));
            self.regs.write32(offset::CC, cc.with_shn(shn::NORMAL).into_bits());
            let timeout = self.shutdown_timeout();
            match wait_until(&*self.regs, timeout, "report shutdown complete (CSTS.SHST)", |s| s.shst() == shst::COMPLETE || s.cfs()) {
                Ok(csts) if csts.cfs() => Err(Error::Fatal { during: "shutdown" }),
                Ok(_) => Ok(()),
                Err(Error::Timeout { csts, .. }) => {
                    // Still shutting down (flushing its caches, perhaps):
                    // a reset now could cut that short. Leave it enabled,
                    // with the notification set; not seen to stop, it keeps
                    // all its memory for the rest of the process. The next
                    // owner resets it (Linux, too, leaves CC.EN alone after
                    // a shutdown that timed out).
                    self.keep_devicememory_forever();
                    return Err(Error::ShutdownTimeout {
                        timeout_ms: timeout.as_millis() as u64,
                        rtd3e_us: self.ident.rtd3e,
                        csts,
                    });
                }
                Err(e) => Err(e),
            }
        };
        // A controller given up on may have been left enabling; waiting for
        // it again is pointless.
        let enable_wait = if self.failed { Duration::ZERO } else { self.enable_timeout() };
        let r2 = disable(&*self.regs, enable_wait, self.disable_timeout(), self.cfg.ready_check_delay);
        if r2.is_ok() {
            // The controller is reset: it no longer references any queue
            // memory (nor the shadow doorbell buffers).
            self.controller_forgot_everything();
            self.live.clear();
            self.shadow = None;
        } else {
            // Not seen to stop: it may still write into any memory it was
            // given. Keep all of it allocated (and mapped) for the rest of
            // the process rather than let it be reused.
            self.keep_devicememory_forever();
        }
        if let Err(e) = r.and(r2) {
            first_err.get_or_insert(e);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl<R: RegisterWindow + ?Sized> Controller<R> {
    /// Every region the controller was ever given, kept mapped for the rest
    /// of the process (see [`keep_mapped`]): for a controller that was not
    /// seen to stop, whose quarantine therefore never ends.
    fn keep_devicememory_forever(&mut self) {
        let (asq, acq) = self.admin.memory();
        let mut all = vec![asq, acq];
        all.extend(self.scratch.take());
        all.extend(self.shadow.take().into_iter().flat_map(|(d, e)| [d, e]));
        all.extend(self.host_memory.take().into_iter().flat_map(|h| [h.chunk, h.list]));
        all.extend(self.live.drain(..).flat_map(|q| q.memory()));
        all.extend(self.quarantine.drain(..).flat_map(|q| q.memory));
        keep_mapped(all);
    }
}

impl<R: RegisterWindow + ?Sized> Drop for Controller<R> {
    fn drop(&mut self) {
        // Hand the device back in a usable state even on an error path.
        let _ = self.shutdown_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvme_hal::MemRegisters;

    #[test]
    fn only_the_models_that_need_it_wait_before_bring_up() {
        for (v, d) in [(0x8086, 0x0953), (0x8086, 0x0a53), (0x8086, 0x0a54)] {
            assert_eq!(init_delay(v, d), Duration::from_secs(2), "{v:04x}:{d:04x}");
        }
        for (v, d) in [(0x8086, 0x0a55), (0x1b36, 0x0010), (0x144d, 0xa808)] {
            assert_eq!(init_delay(v, d), Duration::ZERO, "{v:04x}:{d:04x}");
        }
    }

    /// CSTS.NSSRO is cleared (written 1, RW1C) before the reset when the
    /// controller supports NVM subsystem reset (CAP.NSSRS, NVMe 1.1 on);
    /// otherwise, or when it reads 0, CSTS is not written at all.
    #[test]
    fn nssro_is_cleared_only_where_subsystem_reset_is_supported() {
        /// CSTS.NSSRO as a write-1-to-clear bit; every write to CSTS counted.
        struct Rw1c(MemRegisters, std::sync::atomic::AtomicU32);
        impl RegisterWindow for Rw1c {
            fn read32(&self, off: usize) -> u32 {
                self.0.read32(off)
            }
            fn write32(&self, off: usize, v: u32) {
                if off == offset::CSTS {
                    self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.0.write32(off, self.0.read32(off) & !(v & Csts::new().with_nssro(true).into_bits()));
                } else {
                    self.0.write32(off, v);
                }
            }
            fn len(&self) -> usize {
                self.0.len()
            }
        }
        let v = |mjr, mnr| Vs::new().with_mjr(mjr).with_mnr(mnr);
        let nssrs = Cap::new().with_nssrs(true);
        // (CAP, VS, NSSRO before) -> (seen and cleared, NSSRO after, CSTS writes)
        for (cap, vs, before, want) in [
            (nssrs, v(1, 4), true, (true, false, 1)),
            (nssrs, v(1, 1), true, (true, false, 1)),
            (nssrs, v(1, 4), false, (false, false, 0)),
            (Cap::new(), v(1, 4), true, (false, true, 0)),
            (nssrs, v(1, 0), true, (false, true, 0)),
        ] {
            let regs = Rw1c(MemRegisters::new(0x1000), Default::default());
            let csts = Csts::new().with_rdy(true).with_nssro(before);
            regs.0.write32(offset::CSTS, csts.into_bits());
            let seen = clear_subsystem_reset_occurred(&regs, cap, vs);
            let after = Csts::from_bits(regs.read32(offset::CSTS));
            let got = (seen, after.nssro(), regs.1.load(std::sync::atomic::Ordering::Relaxed));
            assert_eq!(got, want, "NSSRS={} VS={vs} NSSRO={before}", cap.nssrs());
            assert!(after.rdy(), "the other bits are left as they were");
        }
        // Gone (all ones): not written, left to `disable` to report.
        let regs = Rw1c(MemRegisters::new(0x1000), Default::default());
        regs.0.write32(offset::CSTS, u32::MAX);
        assert!(!clear_subsystem_reset_occurred(&regs, nssrs, v(1, 4)));
        assert_eq!(regs.1.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[test]
    fn only_the_models_that_need_it_get_medium_priority_submission_queues() {
        assert!(medium_prio_sq(0x8086, 0xf1a5), "Intel 600P/P3100");
        for (v, d) in [(0x8086, 0xf1a6), (0x8086, 0x0953), (0x1b36, 0x0010), (0x144d, 0xa808)] {
            assert!(!medium_prio_sq(v, d), "{v:04x}:{d:04x}");
        }
        assert!(!ControllerConfig::default().medium_prio_sq);
    }

    /// A device that is gone reads all ones, RDY and CFS included: that is
    /// `Gone`, not "ready" nor "fatal status".
    #[test]
    fn all_ones_is_gone_whatever_is_waited_for() {
        let regs = MemRegisters::new(0x1000);
        regs.write32(offset::CSTS, u32::MAX);
        for done in [|s: Csts| s.rdy() || s.cfs(), |s: Csts| s.shst() == 0b10 || s.cfs(), |s: Csts| !s.rdy()] {
            assert!(matches!(wait_until(&regs, Duration::from_millis(50), "test", done), Err(Error::Gone)));
        }
    }

    /// After a reset, CC.EN = 1 may follow CSTS.RDY = 0 no sooner than
    /// [`EN_AFTER_RDY_0`].
    #[test]
    fn a_reset_leaves_a_pause_before_the_next_enable() {
        /// Clears CSTS.RDY the moment CC.EN is cleared.
        struct Resets(MemRegisters);
        impl RegisterWindow for Resets {
            fn read32(&self, off: usize) -> u32 {
                self.0.read32(off)
            }
            fn write32(&self, off: usize, v: u32) {
                self.0.write32(off, v);
                if off == offset::CC && v & 1 == 0 {
                    self.0.write32(offset::CSTS, 0);
                }
            }
            fn len(&self) -> usize {
                self.0.len()
            }
        }
        let regs = Resets(MemRegisters::new(0x1000));
        regs.0.write32(offset::CC, Cc::new().with_en(true).into_bits());
        regs.0.write32(offset::CSTS, Csts::new().with_rdy(true).into_bits());
        let t = Instant::now();
        disable(&regs, Duration::from_millis(50), Duration::from_millis(50), Duration::ZERO).unwrap();
        assert!(t.elapsed() >= EN_AFTER_RDY_0, "{:?}", t.elapsed());
        assert!(!Cc::from_bits(regs.read32(offset::CC)).en());
    }
}
