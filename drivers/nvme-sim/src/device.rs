//! The controller thread: register state machine (enable, disable,
//! shutdown), doorbell polling, command fetch, execution and completion.

use crate::memory::{IovaMap, SimMemory};
use crate::regs::{InlineController, SimRegisters};
use crate::config::{DataMode, NamespaceConfig, SimConfig, SimError};
use crate::event::SimEvent;
use nvme_hal::{CqRing, DmaRegion, DmaWord, SqRing};
use nvme_spec::cmd::DsmRange;
use nvme_spec::identify::{IdentifyController, IdentifyNamespace, LbaFormat, IDENTIFY_SIZE};
use nvme_spec::opcode::{cns, feature, log_page, AdminOpcode, NvmOpcode};
use nvme_spec::regs::{offset, shn, shst, Aqa, Cap, Cc, Crto, Csts, Vs};
use nvme_spec::status::{command_specific as cs, generic as gs, Status};
use nvme_spec::{Cqe, CqeStatus, Sqe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Controller-side counters, readable while the controller runs.
///
/// Aligned to 128 bytes (two cache lines, as `nvme_driver::QueuePair`): a
/// synchronous controller (`SimConfig::threaded` false) updates them at
/// every step on the thread that rings its doorbell, and several such
/// controllers (one per benchmark job) are created one after another on one
/// thread, so without it two jobs' counters could share a line.
#[derive(Default, Debug)]
#[repr(align(128))]
pub struct SimStats {
    /// Submission entries fetched.
    pub fetched: AtomicU64,
    /// Completion entries posted.
    pub completed: AtomicU64,
    /// Completions with an error status.
    pub errors: AtomicU64,
    /// Doorbell writes with a value beyond the queue size (ignored).
    pub invalid_doorbell_writes: AtomicU64,
    /// Times the thread parked for lack of work.
    pub parks: AtomicU64,
    /// Controller resets (CC.EN 1 -> 0).
    pub resets: AtomicU64,
    /// Shadow doorbell or EventIdx slots (Doorbell Buffer Config) at bus
    /// addresses no DMA memory answers: an IOMMU fault on hardware. The
    /// queue's doorbell then never moves (its commands are never fetched).
    pub dma_faults: AtomicU64,
    /// Host Memory Buffer the host gave (Set Features 0Dh, EHM = 1), in
    /// 4 KiB pages: 0 while none is enabled.
    pub host_memory_pages: AtomicU64,
    /// Times a Host Memory Buffer was enabled with MR = 1 (the same buffer
    /// given back after a reset).
    pub host_memory_returned: AtomicU64,
}

/// Fault injection switches, set by tests while the controller runs.
/// "Every Nth" counts I/O commands (NVM command set) fetched since start;
/// the admin queue is faulted only by `hang`, `fatal`, `admin_delay_us`
/// and `replay_admin`.
#[derive(Default, Debug)]
pub struct Faults {
    /// Drop (never post) the completion of every Nth I/O command (0 = off).
    pub drop_every: AtomicU32,
    /// Delay every I/O completion by this many microseconds (0 = off).
    pub delay_us: AtomicU32,
    /// Complete every Nth I/O command with `status_sc`/`status_sct` (0 = off).
    pub status_every: AtomicU32,
    /// Status code for `status_every`.
    pub status_sc: AtomicU32,
    /// Status code type for `status_every`.
    pub status_sct: AtomicU32,
    /// Set DNR on injected statuses.
    pub status_dnr: AtomicBool,
    /// Set CSTS.CFS at the next step and stop processing until the host
    /// resets the controller (CC.EN 1 -> 0). Cleared when it trips, so a
    /// reset recovers, as it does a real controller.
    pub fatal: AtomicBool,
    /// Stop fetching commands (a hung controller) until cleared. Register
    /// handshakes (reset, shutdown) still work; admin commands do not.
    pub hang: AtomicBool,
    /// Post the completion of every Nth I/O command with a CID that was
    /// never submitted: the command's CID + 4000h (0 = off).
    pub corrupt_cid_every: AtomicU32,
    /// Post the completion of every Nth I/O command naming another
    /// submission queue (SQ id + 1), with an SQ Head that is not this
    /// queue's (half a ring away), as a completion meant for that other
    /// queue would carry (0 = off).
    pub bad_sqid_every: AtomicU32,
    /// Before the completion of every Nth I/O command, post the completion
    /// this queue received last once more: a stale duplicate, naming a CID
    /// the host has since given to another command (0 = off).
    pub replay_every: AtomicU32,
    /// Before the next admin completion, post the previous admin completion
    /// once more (a stale duplicate); cleared when it trips.
    pub replay_admin: AtomicBool,
    /// Post the next admin command's completion this many microseconds
    /// late (later admin commands go on meanwhile); a reset drops it if it
    /// is not posted yet. Cleared when it trips (0 = off).
    pub admin_delay_us: AtomicU32,
    /// Execute every Nth I/O command but hold its completion until an Abort
    /// names it (then it completes with "Command Abort Requested") or a
    /// reset drops it: a command the device sits on (0 = off).
    pub stall_every: AtomicU32,
    /// After this many more I/O commands, set `fatal` (the command that
    /// trips it is lost) (0 = off; counts down).
    pub fatal_after: AtomicU32,
    /// After this many more I/O commands, set `hang` (the command that
    /// trips it is lost) (0 = off; counts down).
    pub hang_after: AtomicU32,
    /// Flip one bit in the data returned by every Nth I/O command that is a
    /// Read (RAM data mode): silent corruption, for --verify (0 = off).
    pub corrupt_data_every: AtomicU32,
    /// Do not act on CC.EN = 0 while set: CSTS.RDY stays 1 and the queues
    /// stay live (a controller that does not reset). The reset happens when
    /// it is cleared.
    pub ignore_disable: AtomicBool,
    /// Answer Doorbell Buffer Config with Invalid Field in Command while
    /// set (a controller that advertises it and refuses it).
    pub refuse_dbbc: AtomicBool,
    /// Answer Set Features Number of Queues with Internal Error while set
    /// (a degraded controller, as Linux's nvme_set_queue_count expects).
    pub refuse_queue_count: AtomicBool,
    /// Answer every Abort with Abort Command Limit Exceeded while set (a
    /// controller whose Abort limit is taken, or that cannot find the
    /// command).
    pub refuse_abort: AtomicBool,
    /// After this many more I/O commands, pause processing for `pause_ms`
    /// milliseconds, as a controller activating firmware without a reset
    /// does (NVMe 1.4c §5.11, Commit Action 011b): CSTS.PP = 1 and no
    /// command fetched, admin or I/O, after the current pass; then
    /// CSTS.PP = 0 and on as before (0 = off; counts down).
    pub pause_after: AtomicU32,
    /// How long a pause (`pause_after`) lasts, in milliseconds.
    pub pause_ms: AtomicU32,
    /// At the next enable (CC.EN = 1), report this MDTS, plus one (0 =
    /// off): a controller whose firmware, activated by the reset, takes
    /// other transfers. Cleared when it takes effect.
    pub mdts_at_enable: AtomicU32,
    /// At the next enable, report namespace 1 as this many blocks (NSZE,
    /// NCAP, NUSE; 0 = off), as after a format or a resize done meanwhile.
    /// Identify only: the data kept is not resized. Cleared when it takes
    /// effect.
    pub ns1_blocks_at_enable: AtomicU64,
}

/// A completion held back by `Faults::stall_every`.
struct Held {
    cqid: u16,
    cqe: Cqe,
}

/// An admin completion held back by `Faults::admin_delay_us` until `due`.
struct Late {
    due: Instant,
    cqe: Cqe,
}

impl Faults {
    /// Hung or about to report fatal status: fetch nothing more.
    fn halted(&self) -> bool {
        self.hang.load(Ordering::Relaxed) || self.fatal.load(Ordering::Relaxed)
    }

    /// Any fault that acts on I/O commands armed (or the device halted)?
    fn io_armed(&self) -> bool {
        let on = |n: &AtomicU32| n.load(Ordering::Relaxed) != 0;
        self.halted()
            || on(&self.drop_every)
            || on(&self.delay_us)
            || on(&self.status_every)
            || on(&self.corrupt_cid_every)
            || on(&self.bad_sqid_every)
            || on(&self.replay_every)
            || on(&self.stall_every)
            || on(&self.fatal_after)
            || on(&self.hang_after)
            || on(&self.pause_after)
            || on(&self.corrupt_data_every)
    }

    /// "Every Nth": true when `count` is a multiple of `n` (never for n = 0).
    fn every(n: &AtomicU32, count: u32) -> bool {
        count.checked_rem(n.load(Ordering::Relaxed)) == Some(0)
    }

    /// Count down `n`: true when it reaches zero now.
    fn trips(n: &AtomicU32) -> bool {
        n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1)).is_ok_and(|v| v == 1)
    }
}

/// Aligned to 128 bytes, as [`Cq`] and [`Device`]: the head moves at every
/// fetch, on the stepping thread (see [`SimStats`]).
#[repr(align(128))]
struct Sq {
    ring: SqRing,
    /// Entries, 2..=65536 (QSIZE + 1: a u16 would wrap at CAP.MQES = FFFFh).
    size: u32,
    head: u16,
    cqid: u16,
    db: usize,
    /// Where the host's tail is read: see [`Slot`].
    slot: Slot,
}

/// Aligned to 128 bytes: the tail and phase move at every completion, on
/// the stepping thread (see [`SimStats`]).
#[repr(align(128))]
struct Cq {
    ring: CqRing,
    /// Entries, 2..=65536.
    size: u32,
    tail: u16,
    phase: bool,
    db: usize,
    /// Where the host's head is read: see [`Slot`].
    slot: Slot,
    sq_count: u16,
    /// The completion posted last, for `Faults::replay_every`.
    last: Option<Cqe>,
    /// The host's head doorbell as last read. The host only moves it
    /// forward, so a stale value can only make the queue look fuller than it
    /// is: it is read again only when the queue looks full (a real
    /// controller likewise does not fetch the head for every completion).
    head_seen: u32,
}

/// The slot after `i` in a ring of `size` entries (slots are 0..=65535,
/// sizes up to 65536).
#[inline(always)]
fn next_slot(i: u16, size: u32) -> u16 {
    if i as u32 + 1 == size {
        0
    } else {
        i + 1
    }
}

impl Sq {
    /// The entry at the head (not consumed).
    #[inline(always)]
    fn entry(&self) -> Sqe {
        Sqe::from_dwords(self.ring.read_dwords16(self.head as usize))
    }
}

impl Cq {
    /// Write `cqe` at the tail with the current phase and advance the tail
    /// (flipping the phase at the wrap). Returns the entry as written and
    /// its slot.
    #[inline(always)]
    fn push(&mut self, mut cqe: Cqe) -> (Cqe, u16) {
        cqe.status.set_p(self.phase);
        let [d0, d1, d2, d3] = cqe.to_dwords();
        let ring = self.ring.view();
        ring.write_dw012(self.tail as usize, [d0, d1, d2]);
        // The phase/status dword last, with Release: the host's Acquire load
        // of it makes the rest of the entry (and any read data) visible.
        ring.store_dw3_release(self.tail as usize, d3);
        let slot = self.tail;
        self.tail = next_slot(self.tail, self.size);
        self.phase ^= self.tail == 0;
        (cqe, slot)
    }

    /// Is this queue without room for a completion that moves its tail to
    /// `next`? The host's head is read again only when the queue looks full
    /// by the value last read (see `Cq::head_seen`).
    #[inline(always)]
    fn full(&mut self, next: u16, regs: &SimRegisters) -> bool {
        if next as u32 != self.head_seen {
            return false;
        }
        if let Some(head) = self.slot.doorbell(regs, self.db).0 {
            self.head_seen = head;
        }
        next as u32 == self.head_seen
    }
}

/// Where the controller reads one queue's doorbell value from, and writes
/// its EventIdx to. As QEMU's hw/nvme does (`nvme_dbbuf_config`,
/// `nvme_init_sq`, `nvme_init_cq`), once Doorbell Buffer Config is on, every
/// I/O queue's slot is found at the buffers' base addresses plus the
/// queue's doorbell offset (`(2y + is_cq) * (4 << CAP.DSTRD)`), however far
/// past the first page that is: nothing in the command bounds the buffers,
/// and the host is to size them for every queue it uses.
enum Slot {
    /// The MMIO doorbell register (the admin queue; any queue without
    /// Doorbell Buffer Config).
    Mmio,
    /// The shadow doorbell slot and the EventIdx slot.
    Shadow { db: DmaWord, ei: DmaWord },
    /// The slot's bus address is not DMA memory (an IOMMU fault): the value
    /// cannot be read, so the doorbell never moves.
    Unreachable,
}

impl Slot {
    /// The value the host has published for doorbell `db` (MMIO register
    /// or shadow slot), `None` when it cannot be read, and whether it came
    /// from the shadow buffer.
    #[inline(always)]
    fn doorbell(&self, regs: &SimRegisters, db: usize) -> (Option<u32>, bool) {
        match self {
            Slot::Mmio => (Some(regs.dev_load(db)), false),
            Slot::Shadow { db, .. } => (Some(db.load_acquire()), true),
            Slot::Unreachable => (None, true),
        }
    }
    /// Publish EventIdx `v` (nothing without a shadow slot).
    #[inline(always)]
    fn set_event_idx(&self, v: u32) {
        if let Slot::Shadow { ei, .. } = self {
            ei.store_release(v);
        }
    }
    /// The shadow doorbell slot, if there is one.
    fn shadow_db(&self) -> Option<&DmaWord> {
        match self {
            Slot::Shadow { db, .. } => Some(db),
            _ => None,
        }
    }
}

/// Shadow doorbell buffers (Doorbell Buffer Config): their bus addresses.
struct Shadow {
    dbs: u64,
    eis: u64,
}

enum State {
    Disabled,
    Enabling(Instant),
    Ready,
    /// CC.SHN seen at this instant; CSTS.SHST reads 01b until `shutdown_time` passes.
    ShuttingDown(Instant),
    ShutDown,
    Fatal,
}

/// Aligned to 128 bytes: a synchronous controller lives in an
/// `Arc<Mutex<Device>>` whose count, lock and fields (`last_cc`, `posted`,
/// `io_count`...) the stepping thread writes at every step (see
/// [`SimStats`]).
#[repr(align(128))]
pub(crate) struct Device {
    cfg: SimConfig,
    regs: Arc<SimRegisters>,
    mem: Arc<SimMemory>,
    map: IovaMap,
    stats: Arc<SimStats>,
    faults: Arc<Faults>,
    state: State,
    last_cc: u32,
    page_size: usize,
    /// MDTS in bytes (u64::MAX: no limit).
    max_transfer: u64,
    sqs: Vec<Option<Sq>>,
    cqs: Vec<Option<Cq>>,
    active: Vec<u16>,
    namespaces: Vec<Vec<u8>>,
    granted: Option<u16>,
    /// Advanced Command Retry Enable, set by the host (Host Behavior Support).
    acre: bool,
    aers: Vec<u16>,
    shadow: Option<Shadow>,
    io_count: u32,
    /// Completions held back by fault injection, and whether the command
    /// being executed is to be held.
    held: Vec<Held>,
    hold_this: bool,
    /// Admin completions posted late (`Faults::admin_delay_us`).
    late: Vec<Late>,
    /// Processing paused (CSTS.PP = 1) until then (`Faults::pause_ms`).
    paused_until: Option<Instant>,
    posted: u64,
    /// True while the controller thread busy-polls: then it sees every
    /// shadow doorbell update without being told, and its EventIdx says so
    /// (see `update_eventidx`); it arms EventIdx before it parks
    /// (`arm_eventidx`). False in synchronous mode, where the controller
    /// runs only inside register writes and must always ask for the next.
    polling: bool,
    ident_ctrl: Box<[u8; IDENTIFY_SIZE]>,
    ident_ns: Vec<Box<[u8; IDENTIFY_SIZE]>>,
    scratch: Vec<u8>,
}

impl InlineController for Device {
    fn step(&mut self) -> usize {
        Device::step(self)
    }
    fn hot_memory(&self) -> Vec<crate::hot::HotMemory> {
        vec![crate::hot::HotMemory::of("submission queue states", &self.sqs[..]), crate::hot::HotMemory::of("completion queue states", &self.cqs[..])]
    }
}

fn err(sc: u8) -> Status {
    Status::generic(sc).with_dnr()
}
fn cs_err(sc: u8) -> Status {
    Status::command_specific(sc).with_dnr()
}

type Outcome = Result<u32, Status>;

/// The active namespace `nsid` names (I/O commands).
#[inline(always)]
fn active_ns(cfg: &SimConfig, nsid: u32) -> Result<NamespaceConfig, Status> {
    let nn = cfg.namespaces.len() as u32 + cfg.inactive_namespaces;
    if nsid == 0 || nsid > nn {
        return Err(err(gs::INVALID_NAMESPACE_OR_FORMAT));
    }
    match cfg.namespaces.get(nsid as usize - 1) {
        Some(ns) if ns.blocks != 0 => Ok(*ns),
        _ => Err(err(gs::INVALID_NAMESPACE_OR_FORMAT)), // inactive
    }
}

/// The starting LBA and block count of a Read, Write or Write Zeroes,
/// checked against the namespace's size.
#[inline(always)]
fn lba_range(sqe: &Sqe, ns: NamespaceConfig) -> Result<(u64, u64), Status> {
    let slba = sqe.cdw10 as u64 | (sqe.cdw11 as u64) << 32;
    let nlb = (sqe.cdw12 & 0xffff) as u64 + 1;
    if slba.checked_add(nlb).is_none_or(|end| end > ns.blocks) {
        return Err(err(gs::LBA_OUT_OF_RANGE));
    }
    Ok((slba, nlb))
}

/// Every check of a Read or Write before its data moves, in the order
/// [`Device::nvm_execute`] words them: fused, namespace, LBA range, MDTS
/// (`max_transfer` bytes), and with null data the data pointer. Returns
/// the starting LBA and the length in bytes.
#[inline(always)]
fn check_rw(cfg: &SimConfig, max_transfer: u64, sqe: &Sqe) -> Result<(u64, usize), Status> {
    if sqe.cdw0.fuse() != 0 {
        return Err(err(gs::INVALID_FIELD));
    }
    let ns = active_ns(cfg, sqe.nsid)?;
    let (slba, nlb) = lba_range(sqe, ns)?;
    let len = nlb * ns.lba_size as u64;
    if len > max_transfer {
        return Err(err(gs::INVALID_FIELD));
    }
    if cfg.data == DataMode::Null {
        // No data moves: only the cheap checks of the data pointer.
        if sqe.cdw0.psdt() != 0 {
            return Err(err(gs::INVALID_FIELD));
        }
        if sqe.prp1 & 3 != 0 {
            return Err(err(gs::INVALID_PRP_OFFSET));
        }
    }
    Ok((slba, len as usize))
}

/// Largest RAM-backed namespace (memory is committed only when written).
const MAX_RAM_NAMESPACE: u64 = 64 << 30;

impl Device {
    pub(crate) fn new(
        cfg: SimConfig,
        regs: Arc<SimRegisters>,
        mem: Arc<SimMemory>,
        stats: Arc<SimStats>,
        faults: Arc<Faults>,
    ) -> Result<Self, SimError> {
        let cap = Cap::new()
            .with_mqes((cfg.max_queue_entries - 1) as u16)
            .with_cqr(true)
            .with_to(cfg.timeout_500ms)
            .with_dstrd(cfg.dstrd)
            // NVM, and I/O command sets (bit 6, NVMe 2.0 and 1.4's ZNS
            // addition) when a namespace is of another command set
            // (zoned), as such a controller reports.
            .with_css(if cfg.version >= (1, 4) && cfg.namespace_formats.iter().any(|f| f.csi != nvme_spec::identify::csi::NVM) { 0x41 } else { 1 })
            .with_mpsmin(0)
            .with_mpsmax(4)
            .with_crms(if cfg.ready_timeouts_500ms.is_some() { 0b11 } else { 0 });
        regs.dev_store64(offset::CAP, cap.into_bits());
        if let Some((crwmt, crimt)) = cfg.ready_timeouts_500ms {
            regs.dev_store(offset::CRTO, Crto::new().with_crwmt(crwmt).with_crimt(crimt).into_bits());
        }
        regs.dev_store(offset::VS, Vs::new().with_mjr(cfg.version.0).with_mnr(cfg.version.1).into_bits());

        let mut namespaces = vec![];
        for n in &cfg.namespaces {
            let bytes = n.blocks * n.lba_size as u64;
            if cfg.data == DataMode::Ram {
                // Asked first with a fallible reservation, which the
                // kernel refuses as it would the zeroed one below (more
                // than the machine can ever commit): an error to report,
                // where the zeroed allocation would abort the process.
                let mut probe: Vec<u8> = Vec::new();
                if bytes > MAX_RAM_NAMESPACE || probe.try_reserve_exact(bytes as usize).is_err() {
                    return Err(SimError::Memory(bytes));
                }
                drop(probe);
                // Zeroed allocation: the kernel maps zero pages lazily, so an
                // untouched namespace costs no memory.
                namespaces.push(vec![0u8; bytes as usize]);
            } else {
                namespaces.push(Vec::new());
            }
        }
        let ic = IdentifyController {
            // Not a PCI device: no vendor to claim.
            vid: 0,
            ssvid: 0,
            sn: cfg.serial.clone(),
            mn: cfg.model.clone(),
            fr: cfg.firmware.clone(),
            rab: 6,
            ieee: 0x525400,
            mdts: cfg.mdts,
            ver: Vs::new().with_mjr(cfg.version.0).with_mnr(cfg.version.1).into_bits(),
            rtd3e: cfg.rtd3e_us,
            cntrltype: cfg.controller_type,
            crdt: cfg.retry_delays_100ms,
            mtfa: cfg.firmware_activation_100ms,
            hmpre: cfg.host_memory_buffer_pages,
            hmmin: cfg.host_memory_min_pages(),
            oacs: if cfg.shadow_doorbells { nvme_spec::identify::oacs::DOORBELL_BUFFER_CONFIG } else { 0 },
            acl: 3,
            aerl: 3,
            elpe: 0,
            sqes: cfg.entry_sizes.0,
            cqes: cfg.entry_sizes.1,
            maxcmd: 0,
            nn: cfg.namespaces.len() as u32 + cfg.inactive_namespaces,
            oncs: nvme_spec::identify::oncs::DATASET_MANAGEMENT | nvme_spec::identify::oncs::WRITE_ZEROES,
            vwc: 0,
            subnqn: format!("nqn.2024-01.io.nvme-bypass:sim:{}", cfg.serial),
            ..Default::default()
        };
        let ident_ns = cfg
            .namespaces
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if n.blocks == 0 {
                    return Box::new([0u8; IDENTIFY_SIZE]); // inactive
                }
                let f = cfg.namespace_formats.get(i).copied().unwrap_or_default();
                let lbads = if n.lba_size == 4096 { 12 } else { 9 };
                let mut lbaf = nvme_spec::identify::LbaFormats::default();
                lbaf[0] = LbaFormat { ms: 0, lbads: 9, rp: 0 };
                lbaf[1] = LbaFormat { ms: 0, lbads: 12, rp: 0 };
                // A format with metadata is a third one, in use.
                let (nlbaf, index) = if f.ms != 0 {
                    lbaf[2] = LbaFormat { ms: f.ms, lbads, rp: 0 };
                    (2, 2)
                } else {
                    (1, (lbads == 12) as u8)
                };
                IdentifyNamespace {
                    nsze: n.blocks,
                    ncap: n.blocks,
                    nuse: n.blocks,
                    nlbaf,
                    flbas: index | (f.extended as u8) << 4,
                    mc: if f.ms != 0 { 3 } else { 0 }, // both metadata layouts
                    dpc: if f.pi != 0 { 0x1f } else { 0 },
                    dps: f.pi & 7,
                    dlfeat: 1, // deallocated blocks read as zeroes
                    nsattr: f.write_protected as u8,
                    lbaf,
                    ..Default::default()
                }
                .to_bytes()
            })
            .collect();
        let nq = cfg.max_io_queues as usize + 1;
        Ok(Device {
            regs,
            mem,
            map: IovaMap::default(),
            stats,
            faults,
            state: State::Disabled,
            last_cc: 0,
            page_size: 4096,
            max_transfer: if cfg.mdts == 0 { u64::MAX } else { 4096 << cfg.mdts },
            sqs: (0..nq).map(|_| None).collect(),
            cqs: (0..nq).map(|_| None).collect(),
            active: vec![],
            namespaces,
            granted: None,
            acre: false,
            aers: vec![],
            shadow: None,
            io_count: 0,
            held: vec![],
            hold_this: false,
            late: vec![],
            paused_until: None,
            posted: 0,
            polling: false,
            ident_ctrl: ic.to_bytes(),
            ident_ns,
            scratch: vec![0; 2 << 20],
            cfg,
        })
    }

    fn emit(&self, ev: impl FnOnce() -> SimEvent) {
        if let Some(h) = &self.cfg.events {
            h(&ev());
        }
    }

    fn csts(&self) -> Csts {
        Csts::from_bits(self.regs.dev_load(offset::CSTS))
    }
    fn set_csts(&self, c: Csts) {
        self.regs.dev_store(offset::CSTS, c.into_bits());
    }

    /// One pass of the controller: react to register changes, then fetch
    /// and execute what the submission queues hold. Returns the work done.
    pub(crate) fn step(&mut self) -> usize {
        self.step_burst(usize::MAX)
    }

    /// One pass, taking at most `burst` commands from each queue (fairness
    /// between queues when threads share the controller).
    fn step_burst(&mut self, burst: usize) -> usize {
        let mut work = self.check_registers();
        if !self.late.is_empty() && matches!(self.state, State::Ready) {
            work += self.post_late();
        }
        if matches!(self.state, State::Ready) {
            // Load first: a locked swap on every pass would cost more than the pass.
            if self.faults.fatal.load(Ordering::Relaxed) && self.faults.fatal.swap(false, Ordering::Relaxed) {
                self.set_csts(self.csts().with_cfs(true));
                self.state = State::Fatal;
                return work + 1;
            }
            if self.paused_until.is_some() && self.paused() {
                return work;
            }
            if !self.faults.hang.load(Ordering::Relaxed) {
                let mut i = 0;
                while i < self.active.len() {
                    let qid = self.active[i];
                    work += self.process_sq(qid, burst);
                    i += 1;
                }
            }
        }
        work
    }

    /// Memory the host allocated before ringing is visible now (the
    /// doorbell load synchronised with its store): refresh the IOVA map if
    /// it changed, like an IOTLB refill.
    #[inline]
    fn refresh_map(&mut self) {
        if self.mem.generation() != self.map.generation() {
            self.map = self.mem.snapshot();
        }
    }

    /// `Faults::pause_after` tripped: pause (CSTS.PP = 1) for `pause_ms`.
    #[cold]
    fn start_pause(&mut self) {
        let ms = self.faults.pause_ms.load(Ordering::Relaxed);
        self.paused_until = Some(Instant::now() + Duration::from_millis(ms as u64));
        self.set_csts(self.csts().with_pp(true));
    }

    /// A pause going on: end it when its time is up (CSTS.PP = 0). True
    /// while paused.
    #[cold]
    fn paused(&mut self) -> bool {
        match self.paused_until {
            Some(until) if Instant::now() < until => true,
            Some(_) => {
                self.paused_until = None;
                self.set_csts(self.csts().with_pp(false));
                false
            }
            None => false,
        }
    }

    pub(crate) fn run(mut self, stop: &AtomicBool) {
        self.polling = true;
        let mut idle: u32 = 0;
        let mut park = Duration::from_micros(20);
        while !stop.load(Ordering::Relaxed) {
            let work = self.step_burst(64);
            if work > 0 {
                idle = 0;
                park = Duration::from_micros(20);
            } else {
                idle += 1;
                if idle < self.cfg.idle_spins {
                    std::hint::spin_loop();
                } else if idle < self.cfg.idle_spins + 64 {
                    std::thread::yield_now();
                } else {
                    // `sleeping` before EventIdx and the last look (both
                    // behind arm_eventidx's fence): a host that sees the
                    // armed EventIdx writes the MMIO doorbell and then sees
                    // `sleeping`, so it unparks us (SimRegisters::wake).
                    self.regs.sleeping.store(true, Ordering::SeqCst);
                    if self.arm_eventidx() {
                        self.regs.sleeping.store(false, Ordering::SeqCst);
                        self.polling = true; // work arrived as we armed: stay up
                        idle = 0;
                        continue;
                    }
                    self.stats.parks.fetch_add(1, Ordering::Relaxed);
                    std::thread::park_timeout(park);
                    self.regs.sleeping.store(false, Ordering::SeqCst);
                    self.polling = true;
                    park = (park * 2).min(self.cfg.max_park);
                    idle = self.cfg.idle_spins;
                }
            }
        }
    }

    /// React to CC changes: enable, disable (reset), shutdown.
    fn check_registers(&mut self) -> usize {
        let cc_bits = self.regs.dev_load(offset::CC);
        let changed = cc_bits != self.last_cc;
        let cc = Cc::from_bits(cc_bits);
        let last = Cc::from_bits(self.last_cc);
        if changed && last.en() && !cc.en() && self.faults.ignore_disable.load(Ordering::Relaxed) {
            return 0; // seen again, and acted on, once the fault is cleared
        }
        self.last_cc = cc_bits;
        if changed && last.en() && !cc.en() {
            if matches!(self.state, State::Enabling(_)) {
                // CC.EN 1 -> 0 while CSTS.RDY is still 0: undefined results
                // (NVMe 1.4c §3.1.5). This controller fails: fatal status,
                // until the host resets it from there (EN 1 -> 0 once more).
                self.reset();
                self.set_csts(Csts::new().with_cfs(true));
                self.state = State::Fatal;
                return 1;
            }
            self.reset();
            return 1;
        }
        match self.state {
            State::Disabled if cc.en() => {
                if self.cfg.ready_delay.is_zero() {
                    self.enable(cc);
                } else {
                    self.state = State::Enabling(Instant::now());
                }
                1
            }
            State::Enabling(t) => {
                if !cc.en() {
                    self.state = State::Disabled;
                } else if t.elapsed() >= self.cfg.ready_delay {
                    self.enable(cc);
                }
                1
            }
            State::Ready if cc.shn() != shn::NONE => {
                if self.cfg.shutdown_time.is_zero() {
                    self.shutdown_complete();
                } else {
                    self.set_csts(self.csts().with_shst(shst::OCCURRING));
                    self.state = State::ShuttingDown(Instant::now());
                }
                1
            }
            State::ShuttingDown(t) => {
                if t.elapsed() >= self.cfg.shutdown_time {
                    self.shutdown_complete();
                    return 1;
                }
                0
            }
            State::ShutDown if cc.shn() == shn::NONE && changed => {
                // Leaving shutdown without a reset is not allowed; stay put.
                0
            }
            _ => 0,
        }
    }

    /// Shutdown processing done: CSTS.SHST = 10b.
    fn shutdown_complete(&mut self) {
        self.set_csts(self.csts().with_shst(shst::COMPLETE));
        self.state = State::ShutDown;
        self.emit(|| SimEvent::ShutdownComplete);
    }

    fn enable(&mut self, cc: Cc) {
        let aqa = Aqa::from_bits(self.regs.dev_load(offset::AQA));
        let asq = self.regs.dev_load64(offset::ASQ);
        let acq = self.regs.dev_load64(offset::ACQ);
        let (asqs, acqs) = (aqa.asqs() as u32 + 1, aqa.acqs() as u32 + 1);
        self.map = self.mem.snapshot();
        let page = 4096usize << cc.mps();
        let valid = cc.css() == 0
            && cc.mps() <= 4
            && cc.ams() == 0
            && asqs >= 2
            && acqs >= 2
            && asq % page as u64 == 0
            && acq % page as u64 == 0;
        let sq_mem = self.map.translate(asq, asqs as usize * 64).map(|(r, o)| r.sub(o, asqs as usize * 64));
        let cq_mem = self.map.translate(acq, acqs as usize * 16).map(|(r, o)| r.sub(o, acqs as usize * 16));
        match (valid, sq_mem, cq_mem) {
            (true, Some(sq_mem), Some(cq_mem)) => {
                self.page_size = page;
                let mdts = self.faults.mdts_at_enable.swap(0, Ordering::Relaxed);
                if mdts > 0 {
                    let mdts = (mdts - 1) as u8;
                    self.ident_ctrl[77] = mdts;
                    self.max_transfer = if mdts == 0 { u64::MAX } else { 4096 << mdts };
                }
                let blocks = self.faults.ns1_blocks_at_enable.swap(0, Ordering::Relaxed);
                if let (true, Some(ns)) = (blocks > 0, self.ident_ns.first_mut()) {
                    for at in [0, 8, 16] {
                        ns[at..at + 8].copy_from_slice(&blocks.to_le_bytes());
                    }
                }
                let d = self.cfg.dstrd;
                self.cqs[0] = Some(Cq {
                    ring: CqRing::new(cq_mem, acqs as usize),
                    size: acqs,
                    tail: 0,
                    phase: true,
                    db: nvme_spec::regs::cq_head_doorbell(0, d),
                    slot: Slot::Mmio,
                    sq_count: 1,
                    last: None,
                    head_seen: 0,
                });
                self.sqs[0] = Some(Sq {
                    ring: SqRing::new(sq_mem, asqs as usize),
                    size: asqs,
                    head: 0,
                    cqid: 0,
                    db: nvme_spec::regs::sq_tail_doorbell(0, d),
                    slot: Slot::Mmio,
                });
                self.active = vec![0];
                self.set_csts(Csts::new().with_rdy(true));
                self.state = State::Ready;
                self.emit(|| SimEvent::Enabled { asq, acq, admin_entries: asqs as u16 });
            }
            _ => {
                // An invalid configuration: report a fatal controller status
                // rather than leave the host waiting for RDY.
                self.set_csts(Csts::new().with_cfs(true));
                self.state = State::Fatal;
            }
        }
    }

    fn reset(&mut self) {
        for q in self.sqs.iter_mut() {
            *q = None;
        }
        for q in self.cqs.iter_mut() {
            *q = None;
        }
        self.active.clear();
        self.granted = None;
        self.acre = false;
        self.aers.clear();
        self.held.clear();
        self.late.clear();
        // A reset ends a pause (CSTS is cleared below) and disables the
        // Host Memory Buffer (the feature goes back to its default).
        self.paused_until = None;
        self.stats.host_memory_pages.store(0, Ordering::Relaxed);
        self.shadow = None;
        // Doorbells read as zero after a reset.
        let end = nvme_spec::regs::cq_head_doorbell(self.cfg.max_io_queues, self.cfg.dstrd);
        let mut off = offset::DOORBELL_BASE;
        while off <= end {
            self.regs.dev_store(off, 0);
            off += 4;
        }
        self.set_csts(Csts::new());
        self.state = State::Disabled;
        self.stats.resets.fetch_add(1, Ordering::Relaxed);
        self.emit(|| SimEvent::Reset);
    }

    /// Where an I/O queue with doorbell `db` finds its doorbell value: the
    /// MMIO register, or, once Doorbell Buffer Config is active, its slots
    /// in the two buffers, which have the doorbells' layout from offset 0
    /// (the admin queue always uses MMIO, as Linux and QEMU do). A slot at
    /// an address that is not DMA memory is counted as a fault.
    fn slot_for(&self, db: usize) -> Slot {
        let Some(s) = &self.shadow else { return Slot::Mmio };
        let off = (db - offset::DOORBELL_BASE) as u64;
        let word = |base: u64| {
            let at = base.checked_add(off)?;
            self.map.translate(at, 4).filter(|_| at % 4 == 0).map(|(r, o)| r.word(o))
        };
        match (word(s.dbs), word(s.eis)) {
            (Some(db), Some(ei)) => Slot::Shadow { db, ei },
            _ => {
                self.stats.dma_faults.fetch_add(1, Ordering::Relaxed);
                Slot::Unreachable
            }
        }
    }

    /// True when a pass over an I/O queue needs none of the per-command
    /// hooks: no trace listener, no data to move, no fault armed. Then
    /// [`Device::take_entries`] runs with those hooks compiled out.
    fn plain_pass(&self) -> bool {
        self.cfg.events.is_none() && self.cfg.data == DataMode::Null && !self.faults.io_armed()
    }

    /// Fetch and execute up to `burst` commands of submission queue `qid`.
    fn process_sq(&mut self, qid: u16, burst: usize) -> usize {
        let Some(sq) = self.sqs[qid as usize].as_ref() else { return 0 };
        let (Some(tail), shadow) = sq.slot.doorbell(&self.regs, sq.db) else { return 0 };
        if tail >= sq.size {
            self.stats.invalid_doorbell_writes.fetch_add(1, Ordering::Relaxed);
            return 0;
        }
        let tail = tail as u16;
        if tail == sq.head {
            return 0;
        }
        self.refresh_map();
        self.emit(|| SimEvent::DoorbellSeen { qid, tail, shadow });
        // On a benchmark this pass is the controller's whole cost per I/O:
        // it must stay cheap for the driver, not the model, to pace the
        // pair. A plain pass is the same loop without the hooks.
        let n = if qid != 0 && self.plain_pass() {
            self.take_entries::<true>(qid, tail, burst)
        } else {
            self.take_entries::<false>(qid, tail, burst)
        };
        if n > 0 {
            self.update_eventidx(qid);
            // This thread is the counters' only writer: a load and a store,
            // not a locked read-modify-write per pass.
            let add = |c: &AtomicU64, k: u64| c.store(c.load(Ordering::Relaxed) + k, Ordering::Relaxed);
            add(&self.stats.fetched, n as u64);
            add(&self.stats.completed, std::mem::take(&mut self.posted));
        }
        n
    }

    /// Take up to `burst` entries of submission queue `qid` (doorbell value
    /// `tail`); `PLAIN` (see [`Device::plain_pass`]) leaves out the trace
    /// and fault hooks. Returns the entries taken.
    #[inline(never)]
    fn take_entries<const PLAIN: bool>(&mut self, qid: u16, tail: u16, burst: usize) -> usize {
        // Ask for every entry of the pass at once: the host's streaming
        // stores left them in memory, and fetched one by one each would cost
        // a full memory latency (a device, likewise, fetches many at once).
        if let Some(sq) = self.sqs[qid as usize].as_ref() {
            let pending = (tail as usize + sq.size as usize - sq.head as usize) % sq.size as usize;
            let view = sq.ring.view();
            let mut i = sq.head;
            for _ in 0..pending.min(burst) {
                view.prefetch_read(i as usize);
                i = next_slot(i, sq.size);
            }
        }
        let mut n = 0;
        while n < burst {
            if PLAIN {
                n += self.plain_run(qid, tail, burst - n);
                if n == burst {
                    break;
                }
            }
            if !self.fetch_one::<PLAIN>(qid, tail) {
                break;
            }
            n += 1;
        }
        n
    }

    /// In a plain pass, the common case of [`Device::fetch_one`]: a run of
    /// Read and Write entries that succeed, taken with both queues held
    /// rather than looked up per entry, through the same steps
    /// ([`Sq::entry`], [`check_rw`], [`Cq::push`]). It stops at a full
    /// completion queue, at a halt, and at any entry that is not such a
    /// command, which `fetch_one` then takes (and words the error of).
    /// Returns the entries taken.
    #[inline(always)]
    fn plain_run(&mut self, qid: u16, tail: u16, burst: usize) -> usize {
        let Device { sqs, cqs, cfg, regs, faults, max_transfer, io_count, posted, .. } = self;
        let Some(sq) = sqs[qid as usize].as_mut() else { return 0 };
        let Some(cq) = cqs[sq.cqid as usize].as_mut() else { return 0 };
        let mut n = 0;
        while n < burst && sq.head != tail && !faults.halted() && !cq.full(next_slot(cq.tail, cq.size), regs) {
            let sqe = sq.entry();
            let op = sqe.opcode();
            if (op != NvmOpcode::Read as u8 && op != NvmOpcode::Write as u8) || check_rw(cfg, *max_transfer, &sqe).is_err() {
                break;
            }
            sq.head = next_slot(sq.head, sq.size);
            let status = CqeStatus::new(); // success
            cq.push(Cqe { dw0: 0, dw1: 0, sq_head: sq.head, sq_id: qid, cid: sqe.cid(), status });
            n += 1;
        }
        *io_count = io_count.wrapping_add(n as u32);
        *posted += n as u64;
        n
    }

    /// Fetch, execute and complete the next entry of submission queue `qid`
    /// (doorbell value `tail`), with every trace and fault hook unless
    /// `PLAIN`. False when there is none to take (queue empty, device
    /// halted, or completion queue full).
    #[inline(always)]
    fn fetch_one<const PLAIN: bool>(&mut self, qid: u16, tail: u16) -> bool {
        if self.faults.halted() {
            // Hung, or a fault tripped by the last command (or set by
            // another thread) stops the device now. (Checked after the
            // doorbell load: a fault set before the doorbell write is seen.)
            return false;
        }
        let Some(sq) = self.sqs[qid as usize].as_mut() else { return false };
        if sq.head == tail {
            return false;
        }
        let cqid = sq.cqid;
        let Some(cq) = self.cqs[cqid as usize].as_mut() else { return false };
        if cq.full(next_slot(cq.tail, cq.size), &self.regs) {
            return false; // leave the entry unfetched
        }
        let slot = sq.head;
        let sqe = sq.entry();
        sq.head = next_slot(sq.head, sq.size);
        let (mut sq_head, sq_size) = (sq.head, sq.size);
        if !PLAIN {
            self.emit(|| SimEvent::Fetch { qid, slot, sqe });
        }
        let outcome = if qid == 0 { self.admin(&sqe) } else { self.nvm::<PLAIN>(&sqe) };
        let (status, dw0) = match outcome {
            Some(Ok(dw0)) => (CqeStatus::new(), dw0), // success: all status bits 0
            Some(Err(s)) => (s.to_cqe_status(false), 0),
            None => return true, // no completion now (AER held, or dropped by fault injection)
        };
        let mut cid = sqe.cid();
        let mut sq_id = qid;
        if !PLAIN && qid != 0 {
            if Faults::every(&self.faults.corrupt_cid_every, self.io_count) {
                cid = cid.wrapping_add(0x4000);
            }
            if Faults::every(&self.faults.bad_sqid_every, self.io_count) {
                // Another queue's completion carries that queue's head, not ours.
                sq_head = ((sq_head as u32 + sq_size / 2) % sq_size) as u16;
                sq_id = qid + 1;
            }
        }
        let cqe = Cqe { dw0, dw1: 0, sq_head, sq_id, cid, status };
        if !PLAIN && self.hold_back(qid, cqid, cqe) {
            return true;
        }
        self.post::<PLAIN>(cqid, cqe);
        true
    }

    /// The fault hooks between executing a command and posting its
    /// completion: hold it (`stall_every`), post a stale one before it
    /// (`replay_*`), or post it late (`admin_delay_us`). True when it is
    /// not to be posted now.
    fn hold_back(&mut self, qid: u16, cqid: u16, cqe: Cqe) -> bool {
        if std::mem::take(&mut self.hold_this) {
            self.held.push(Held { cqid, cqe });
            return true;
        }
        let replay = if qid == 0 {
            self.faults.replay_admin.load(Ordering::Relaxed) && self.faults.replay_admin.swap(false, Ordering::Relaxed)
        } else {
            Faults::every(&self.faults.replay_every, self.io_count)
        };
        if replay {
            self.replay_last(cqid);
        }
        let delay = if qid == 0 && self.faults.admin_delay_us.load(Ordering::Relaxed) != 0 {
            self.faults.admin_delay_us.swap(0, Ordering::Relaxed)
        } else {
            0
        };
        if delay != 0 {
            self.late.push(Late { due: Instant::now() + Duration::from_micros(delay as u64), cqe });
            return true;
        }
        false
    }

    /// Post the completion `cqid` received last once more (`Faults::replay_*`),
    /// if the queue has room for it and the one that follows.
    fn replay_last(&mut self, cqid: u16) {
        let Some(cq) = self.cqs[cqid as usize].as_mut() else { return };
        let Some(last) = cq.last else { return };
        let (first, second) = (next_slot(cq.tail, cq.size), next_slot(next_slot(cq.tail, cq.size), cq.size));
        if cq.full(first, &self.regs)
            || cq.full(second, &self.regs)
        {
            return;
        }
        self.post::<false>(cqid, last);
    }

    /// Post the admin completions held by `Faults::admin_delay_us` that are
    /// due, while the admin completion queue has room. Returns how many.
    fn post_late(&mut self) -> usize {
        let now = Instant::now();
        let mut n = 0;
        while let Some(i) = self.late.iter().position(|l| l.due <= now) {
            let Some(cq) = self.cqs[0].as_mut() else { break };
            if cq.full(next_slot(cq.tail, cq.size), &self.regs) {
                break;
            }
            let l = self.late.remove(i);
            self.post::<false>(0, l.cqe);
            n += 1;
        }
        n
    }

    /// With shadow doorbells, tell the host when it must also write the MMIO
    /// doorbell (EventIdx): when its tail moves past the value we publish.
    /// Busy-polling, we need no MMIO write, so we publish the slot just
    /// behind our head, which the host's tail cannot pass (its queue would
    /// be full first). Otherwise (synchronous mode) our head: the next new
    /// entry needs one. Busy-polling, the completion queue's EventIdx is
    /// our tail, which the host's head cannot pass either (we read its head
    /// when our queue looks full, unasked); it shares the SQ's line.
    fn update_eventidx(&self, qid: u16) {
        if qid == 0 {
            return;
        }
        if let (Some(_), Some(sq)) = (&self.shadow, self.sqs[qid as usize].as_ref()) {
            let ei = if !self.polling {
                sq.head as u32
            } else if sq.head == 0 {
                sq.size - 1
            } else {
                sq.head as u32 - 1
            };
            sq.slot.set_event_idx(ei);
            if let (true, Some(cq)) = (self.polling, self.cqs[sq.cqid as usize].as_ref()) {
                cq.slot.set_event_idx(cq.tail as u32);
            }
        }
    }

    /// Before parking: set every I/O queue's EventIdx to our SQ head, so
    /// the host's next new entry comes with an MMIO write (which unparks
    /// us), and its CQ's to the host's current head, so that a host
    /// freeing a full completion queue writes one too; then look at the
    /// shadow doorbells once more. True when there is work we could do now
    /// (do not park): a new, valid tail, with room to complete it. The full
    /// fence between our EventIdx stores and the doorbell loads pairs with
    /// the host's between its doorbell store and EventIdx load: one of the
    /// two sides sees the other.
    fn arm_eventidx(&mut self) -> bool {
        self.polling = false;
        if self.shadow.is_none() {
            return false;
        }
        let io = |q: &&u16| **q != 0;
        for &qid in self.active.iter().filter(io) {
            let Some(sq) = self.sqs[qid as usize].as_ref() else { continue };
            sq.slot.set_event_idx(sq.head as u32);
            if let Some(cq) = self.cqs[sq.cqid as usize].as_ref() {
                if let Some(db) = cq.slot.shadow_db() {
                    cq.slot.set_event_idx(db.load_acquire());
                }
            }
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        self.active.iter().filter(io).any(|&qid| {
            let Some(sq) = self.sqs[qid as usize].as_ref() else { return false };
            let Some(cq) = self.cqs[sq.cqid as usize].as_ref() else { return false };
            let (Some(tail), Some(cq_head)) = (sq.slot.shadow_db(), cq.slot.shadow_db()) else { return false };
            let (tail, cq_head) = (tail.load_acquire(), cq_head.load_acquire());
            tail < sq.size && tail != sq.head as u32 && next_slot(cq.tail, cq.size) as u32 != cq_head
        })
    }

    /// Post `cqe` to completion queue `cqid`. `PLAIN`: no trace listener
    /// and no replay fault, so the entry need not be kept for a replay.
    #[inline(always)]
    fn post<const PLAIN: bool>(&mut self, cqid: u16, cqe: Cqe) {
        let Some(cq) = self.cqs[cqid as usize].as_mut() else { return };
        let (cqe, slot) = cq.push(cqe);
        if !PLAIN {
            cq.last = Some(cqe);
        }
        if cqe.status.sc() != 0 || cqe.status.sct() != 0 {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.posted += 1;
        if !PLAIN {
            self.emit(|| SimEvent::Complete { cqid, slot, cqe });
        }
    }

    // ---------------------------------------------------------------- PRPs

    /// Walk the PRPs of a command moving `len` bytes and call `f(region,
    /// offset, length, position)` for each piece. NVMe 1.4c §4.3.
    fn walk_prps(
        &self,
        sqe: &Sqe,
        len: usize,
        mut f: impl FnMut(&DmaRegion, usize, usize, usize),
    ) -> Result<(), Status> {
        if sqe.cdw0.psdt() != 0 {
            return Err(err(gs::INVALID_FIELD)); // SGLs not supported (SGLS = 0)
        }
        let ps = self.page_size;
        let prp1 = sqe.prp1;
        if prp1 & 3 != 0 {
            return Err(err(gs::INVALID_PRP_OFFSET));
        }
        let first = (ps - (prp1 as usize & (ps - 1))).min(len);
        let mut piece = |iova: u64, n: usize, pos: usize| -> Result<(), Status> {
            let (r, o) = self.map.translate(iova, n).ok_or(err(gs::DATA_TRANSFER_ERROR))?;
            f(r, o, n, pos);
            Ok(())
        };
        piece(prp1, first, 0)?;
        let mut done = first;
        if done == len {
            return Ok(());
        }
        let left = len - done;
        if left <= ps {
            if sqe.prp2 & (ps as u64 - 1) != 0 {
                return Err(err(gs::INVALID_PRP_OFFSET));
            }
            return piece(sqe.prp2, left, done);
        }
        // PRP2 points to a list; it may start inside a page (qword aligned).
        let mut list = sqe.prp2;
        if list & 7 != 0 {
            return Err(err(gs::INVALID_PRP_OFFSET));
        }
        let mut listed = vec![];
        let trace = self.cfg.events.is_some();
        while done < len {
            let (lr, lo) = self.map.translate(list, 8).ok_or(err(gs::DATA_TRANSFER_ERROR))?;
            let entry = lr.read64(lo);
            let left = len - done;
            let last_in_page = (list as usize + 8) % ps == 0;
            if last_in_page && left > ps {
                // The last entry of a list page chains to the next list page.
                if entry & 7 != 0 {
                    return Err(err(gs::INVALID_PRP_OFFSET));
                }
                list = entry;
                continue;
            }
            if entry & (ps as u64 - 1) != 0 {
                return Err(err(gs::INVALID_PRP_OFFSET));
            }
            if trace {
                listed.push(entry);
            }
            let n = left.min(ps);
            piece(entry, n, done)?;
            done += n;
            list += 8;
        }
        if trace {
            self.emit(|| SimEvent::PrpList { list_iova: sqe.prp2, entries: listed });
        }
        Ok(())
    }

    /// Copy `data` to the host buffer the command's PRPs describe.
    fn to_host(&self, sqe: &Sqe, data: &[u8]) -> Result<(), Status> {
        self.walk_prps(sqe, data.len(), |r, o, n, pos| r.copy_from(o, &data[pos..pos + n]))
    }

    // --------------------------------------------------------------- admin

    fn admin(&mut self, sqe: &Sqe) -> Option<Outcome> {
        let Some(op) = AdminOpcode::from_u8(sqe.opcode()) else {
            return Some(Err(err(gs::INVALID_OPCODE)));
        };
        if sqe.cdw0.fuse() != 0 {
            return Some(Err(err(gs::INVALID_FIELD)));
        }
        Some(match op {
            AdminOpcode::Identify => self.identify(sqe),
            AdminOpcode::CreateIoCq => self.create_cq(sqe),
            AdminOpcode::CreateIoSq => self.create_sq(sqe),
            AdminOpcode::DeleteIoSq => self.delete_sq(sqe),
            AdminOpcode::DeleteIoCq => self.delete_cq(sqe),
            AdminOpcode::SetFeatures => self.set_features(sqe),
            AdminOpcode::GetFeatures => self.get_features(sqe),
            AdminOpcode::GetLogPage => self.get_log_page(sqe),
            // Commands are executed in order as they are fetched, so the
            // target of an Abort has completed or is not fetched yet: report
            // "not aborted" (DW0 bit 0 = 1), as QEMU does; unless fault
            // injection holds its completion.
            AdminOpcode::Abort if self.faults.refuse_abort.load(Ordering::Relaxed) => Err(cs_err(cs::ABORT_COMMAND_LIMIT_EXCEEDED)),
            AdminOpcode::Abort => Ok(self.abort_held(sqe)),
            AdminOpcode::AsyncEventRequest => {
                if self.aers.len() > 3 {
                    Err(cs_err(cs::ASYNC_EVENT_REQUEST_LIMIT_EXCEEDED))
                } else {
                    self.aers.push(sqe.cid());
                    return None; // completes when an event occurs (never, here)
                }
            }
            AdminOpcode::KeepAlive => Ok(0),
            AdminOpcode::DoorbellBufferConfig => self.doorbell_buffer_config(sqe),
            AdminOpcode::FormatNvm => Err(err(gs::INVALID_OPCODE)),
        })
    }

    fn identify(&mut self, sqe: &Sqe) -> Outcome {
        let cns = (sqe.cdw10 & 0xff) as u8;
        // NVMe 1.0's CNS is one bit (0 namespace, 1 controller).
        let cns = if self.cfg.version < (1, 1) { cns & 1 } else { cns };
        let nn = self.cfg.namespaces.len() as u32 + self.cfg.inactive_namespaces;
        let page: Box<[u8; IDENTIFY_SIZE]> = match cns {
            cns::CONTROLLER => self.ident_ctrl.clone(),
            cns::NAMESPACE => {
                if sqe.nsid == 0 || (sqe.nsid > nn && sqe.nsid != u32::MAX) {
                    return Err(err(gs::INVALID_NAMESPACE_OR_FORMAT));
                }
                match self.ident_ns.get(sqe.nsid as usize - 1) {
                    Some(p) => p.clone(),
                    None => Box::new([0; IDENTIFY_SIZE]), // inactive: zeroes
                }
            }
            cns::ACTIVE_NAMESPACES => {
                let mut p = Box::new([0u8; IDENTIFY_SIZE]);
                let active = |i: &u32| self.cfg.namespaces[*i as usize - 1].blocks != 0;
                let ids = (1..=self.cfg.namespaces.len() as u32).filter(|&i| i > sqe.nsid).filter(active);
                for (k, id) in ids.take(1024).enumerate() {
                    p[k * 4..k * 4 + 4].copy_from_slice(&id.to_le_bytes());
                }
                p
            }
            cns::NS_DESCRIPTORS => {
                if sqe.nsid == 0 || sqe.nsid > nn || self.cfg.ns_descriptors_fail {
                    return Err(err(gs::INVALID_NAMESPACE_OR_FORMAT));
                }
                // One descriptor: the Command Set Identifier (NIDT 04h).
                let mut p = Box::new([0u8; IDENTIFY_SIZE]);
                let i = sqe.nsid as usize - 1;
                if self.cfg.namespaces.get(i).is_some_and(|n| n.blocks != 0) {
                    p[0] = 4;
                    p[1] = 1;
                    p[4] = self.cfg.namespace_formats.get(i).map_or(0, |f| f.csi);
                }
                p
            }
            _ => return Err(err(gs::INVALID_FIELD)),
        };
        self.to_host(sqe, &page[..])?;
        Ok(0)
    }

    fn queue_limit(&self) -> u16 {
        self.granted.unwrap_or(self.cfg.max_io_queues)
    }

    fn queue_base(&self, sqe: &Sqe, bytes: usize) -> Result<DmaRegion, Status> {
        if sqe.prp1 & (self.page_size as u64 - 1) != 0 {
            return Err(err(gs::INVALID_PRP_OFFSET));
        }
        let (r, o) = self.map.translate(sqe.prp1, bytes).ok_or(err(gs::DATA_TRANSFER_ERROR))?;
        Ok(r.sub(o, bytes))
    }

    /// QSIZE (0's based, CDW10 bits 31:16) as entries: 2..=CAP.MQES + 1,
    /// up to 65536 (kept in a u32: QSIZE FFFFh is 65536 entries, not 0).
    fn check_qsize(&self, qsize0: u32) -> Result<u32, Status> {
        let entries = qsize0 + 1;
        if qsize0 == 0 || entries > self.cfg.max_queue_entries {
            return Err(cs_err(cs::INVALID_QUEUE_SIZE));
        }
        Ok(entries)
    }

    /// Create I/O Completion Queue, NVMe 1.4c §5.3.
    fn create_cq(&mut self, sqe: &Sqe) -> Outcome {
        let qid = (sqe.cdw10 & 0xffff) as u16;
        if qid == 0 || qid > self.queue_limit() || self.cqs[qid as usize].is_some() {
            return Err(cs_err(cs::INVALID_QUEUE_IDENTIFIER));
        }
        let entries = self.check_qsize(sqe.cdw10 >> 16)?;
        if sqe.cdw11 & 1 == 0 {
            return Err(err(gs::INVALID_FIELD)); // CAP.CQR: queues must be contiguous
        }
        let ien = sqe.cdw11 & 2 != 0;
        if ien && (sqe.cdw11 >> 16) > 64 {
            return Err(cs_err(cs::INVALID_INTERRUPT_VECTOR));
        }
        let mem = self.queue_base(sqe, entries as usize * 16)?;
        mem.fill(0, entries as usize * 16, 0); // hardware does not, but stale phases would confuse teaching traces
        let db = nvme_spec::regs::cq_head_doorbell(qid, self.cfg.dstrd);
        let slot = self.slot_for(db);
        self.cqs[qid as usize] = Some(Cq {
            ring: CqRing::new(mem, entries as usize),
            size: entries,
            tail: 0,
            phase: true,
            db,
            slot,
            sq_count: 0,
            last: None,
            head_seen: 0,
        });
        self.emit(|| SimEvent::Queue { qid, cq: true, created: true, entries });
        Ok(0)
    }

    /// Create I/O Submission Queue, NVMe 1.4c §5.4.
    fn create_sq(&mut self, sqe: &Sqe) -> Outcome {
        let qid = (sqe.cdw10 & 0xffff) as u16;
        if qid == 0 || qid > self.queue_limit() || self.sqs[qid as usize].is_some() {
            return Err(cs_err(cs::INVALID_QUEUE_IDENTIFIER));
        }
        let entries = self.check_qsize(sqe.cdw10 >> 16)?;
        if sqe.cdw11 & 1 == 0 {
            return Err(err(gs::INVALID_FIELD));
        }
        let cqid = (sqe.cdw11 >> 16) as u16;
        if cqid == 0 || cqid as usize >= self.cqs.len() || self.cqs[cqid as usize].is_none() {
            return Err(cs_err(cs::COMPLETION_QUEUE_INVALID));
        }
        let mem = self.queue_base(sqe, entries as usize * 64)?;
        self.cqs[cqid as usize].as_mut().unwrap().sq_count += 1;
        let db = nvme_spec::regs::sq_tail_doorbell(qid, self.cfg.dstrd);
        self.regs.dev_store(db, 0);
        let slot = self.slot_for(db);
        self.sqs[qid as usize] = Some(Sq { ring: SqRing::new(mem, entries as usize), size: entries, head: 0, cqid, db, slot });
        self.active.push(qid);
        self.emit(|| SimEvent::Queue { qid, cq: false, created: true, entries });
        Ok(0)
    }

    /// Delete I/O Submission Queue, NVMe 1.4c §5.6: commands not yet
    /// fetched complete with "Command Aborted due to SQ Deletion".
    fn delete_sq(&mut self, sqe: &Sqe) -> Outcome {
        let qid = (sqe.cdw10 & 0xffff) as u16;
        if qid == 0 || qid as usize >= self.sqs.len() || self.sqs[qid as usize].is_none() {
            return Err(cs_err(cs::INVALID_QUEUE_IDENTIFIER));
        }
        let sq = self.sqs[qid as usize].take().unwrap();
        let tail = sq.slot.doorbell(&self.regs, sq.db).0.unwrap_or(sq.head as u32);
        let mut head = sq.head;
        while tail < sq.size && head as u32 != tail {
            let e = Sqe::from_dwords(sq.ring.read_dwords16(head as usize));
            head = next_slot(head, sq.size);
            let st = Status::generic(gs::ABORTED_SQ_DELETION).to_cqe_status(false);
            self.post::<false>(sq.cqid, Cqe { dw0: 0, dw1: 0, sq_head: head, sq_id: qid, cid: e.cid(), status: st });
        }
        if let Some(cq) = self.cqs[sq.cqid as usize].as_mut() {
            cq.sq_count -= 1;
        }
        self.held.retain(|h| h.cqe.sq_id != qid);
        self.active.retain(|&q| q != qid);
        self.emit(|| SimEvent::Queue { qid, cq: false, created: false, entries: sq.size });
        Ok(0)
    }

    /// Delete I/O Completion Queue, NVMe 1.4c §5.5.
    fn delete_cq(&mut self, sqe: &Sqe) -> Outcome {
        let qid = (sqe.cdw10 & 0xffff) as u16;
        if qid == 0 || qid as usize >= self.cqs.len() || self.cqs[qid as usize].is_none() {
            return Err(cs_err(cs::INVALID_QUEUE_IDENTIFIER));
        }
        if self.cqs[qid as usize].as_ref().unwrap().sq_count > 0 {
            return Err(cs_err(cs::INVALID_QUEUE_DELETION));
        }
        let cq = self.cqs[qid as usize].take().unwrap();
        self.emit(|| SimEvent::Queue { qid, cq: true, created: false, entries: cq.size });
        Ok(0)
    }

    fn any_io_queue(&self) -> bool {
        self.cqs.iter().skip(1).any(|q| q.is_some())
    }

    fn set_features(&mut self, sqe: &Sqe) -> Outcome {
        match (sqe.cdw10 & 0xff) as u8 {
            feature::NUMBER_OF_QUEUES => {
                if self.faults.refuse_queue_count.load(Ordering::Relaxed) {
                    return Err(err(gs::INTERNAL_ERROR));
                }
                if self.any_io_queue() {
                    return Err(err(gs::COMMAND_SEQUENCE_ERROR));
                }
                let (nsqr, ncqr) = (sqe.cdw11 & 0xffff, sqe.cdw11 >> 16);
                if nsqr == 0xffff || ncqr == 0xffff {
                    return Err(err(gs::INVALID_FIELD));
                }
                let max = self.cfg.max_io_queues as u32;
                if self.cfg.grants_every_queue {
                    self.granted = Some(max as u16);
                    return Ok((max - 1) | (max - 1) << 16);
                }
                let g = (nsqr + 1).min(ncqr + 1).min(max);
                self.granted = Some(g as u16);
                Ok((max.min(nsqr + 1) - 1) | (max.min(ncqr + 1) - 1) << 16)
            }
            feature::HOST_BEHAVIOR_SUPPORT if self.cfg.version >= (1, 4) => {
                let mut b = [0u8; 1];
                self.walk_prps(sqe, nvme_spec::cmd::HOST_BEHAVIOR_SIZE, |r, o, n, pos| {
                    if pos == 0 && n > 0 {
                        r.copy_to(o, &mut b);
                    }
                })?;
                self.acre = b[0] & 1 != 0;
                Ok(0)
            }
            feature::HOST_MEMORY_BUFFER if self.cfg.host_memory_buffer_pages > 0 => self.set_host_memory(sqe),
            feature::ARBITRATION
            | feature::POWER_MANAGEMENT
            | feature::VOLATILE_WRITE_CACHE
            | feature::INTERRUPT_COALESCING
            | feature::INTERRUPT_VECTOR_CONFIG
            | feature::ASYNC_EVENT_CONFIG => Ok(0),
            _ => Err(err(gs::INVALID_FIELD)),
        }
    }

    /// Set Features Host Memory Buffer (NVMe 1.4c §5.21.1.13): check what
    /// a controller would before using the memory (the descriptor list and
    /// every chunk in mapped memory, page aligned, their pages adding up to
    /// HSIZE, at least HMMIN), and remember the size. Enabling one while one
    /// is enabled is a Command Sequence Error, as the spec has it.
    fn set_host_memory(&mut self, sqe: &Sqe) -> Outcome {
        let pages = self.stats.clone();
        let pages = &pages.host_memory_pages;
        if sqe.cdw11 & 1 == 0 {
            pages.store(0, Ordering::Relaxed);
            return Ok(0);
        }
        if pages.load(Ordering::Relaxed) != 0 {
            return Err(err(gs::COMMAND_SEQUENCE_ERROR));
        }
        self.refresh_map();
        let (hsize, list, entries) = (sqe.cdw12 as u64, sqe.cdw13 as u64 | (sqe.cdw14 as u64) << 32, sqe.cdw15 as usize);
        let page = self.page_size as u64;
        if entries == 0 || list % 16 != 0 || hsize < self.cfg.host_memory_min_pages() as u64 {
            return Err(err(gs::INVALID_FIELD));
        }
        let Some((r, off)) = self.map.translate(list, entries * 16) else {
            self.stats.dma_faults.fetch_add(1, Ordering::Relaxed);
            return Err(err(gs::DATA_TRANSFER_ERROR));
        };
        let mut total = 0u64;
        for i in 0..entries {
            let mut b = [0u8; 16];
            r.copy_to(off + i * 16, &mut b);
            let d = nvme_spec::cmd::HostMemoryDescriptor::from_bytes(&b);
            if d.addr % page != 0 || d.pages == 0 {
                return Err(err(gs::INVALID_FIELD));
            }
            if self.map.translate(d.addr, d.pages as usize * page as usize).is_none() {
                self.stats.dma_faults.fetch_add(1, Ordering::Relaxed);
                return Err(err(gs::DATA_TRANSFER_ERROR));
            }
            total += d.pages as u64;
        }
        if total != hsize {
            return Err(err(gs::INVALID_FIELD));
        }
        if sqe.cdw11 & 2 != 0 {
            self.stats.host_memory_returned.fetch_add(1, Ordering::Relaxed);
        }
        pages.store(hsize * page / 4096, Ordering::Relaxed);
        Ok(0)
    }

    fn get_features(&mut self, sqe: &Sqe) -> Outcome {
        match (sqe.cdw10 & 0xff) as u8 {
            feature::NUMBER_OF_QUEUES => {
                let g = self.granted.unwrap_or(self.cfg.max_io_queues) as u32 - 1;
                Ok(g | g << 16)
            }
            feature::ARBITRATION
            | feature::POWER_MANAGEMENT
            | feature::VOLATILE_WRITE_CACHE
            | feature::INTERRUPT_COALESCING
            | feature::ASYNC_EVENT_CONFIG => Ok(0),
            _ => Err(err(gs::INVALID_FIELD)),
        }
    }

    fn get_log_page(&mut self, sqe: &Sqe) -> Outcome {
        let lid = (sqe.cdw10 & 0xff) as u8;
        let numd = ((sqe.cdw10 >> 16) | (sqe.cdw11 & 0xffff) << 16) as usize + 1;
        let len = numd * 4;
        let size = match lid {
            log_page::ERROR_INFO => 64,
            log_page::SMART_HEALTH => 512,
            log_page::FIRMWARE_SLOT => 512,
            _ => return Err(cs_err(cs::INVALID_LOG_PAGE)),
        };
        let mut page = vec![0u8; len.max(size)];
        if lid == log_page::FIRMWARE_SLOT {
            page[0] = 1; // active slot 1
            let fr = self.cfg.firmware.as_bytes();
            for i in 0..8 {
                page[8 + i] = *fr.get(i).unwrap_or(&b' ');
            }
        }
        if len > 2 * self.page_size && sqe.prp2 == 0 {
            return Err(err(gs::INVALID_FIELD));
        }
        self.to_host(sqe, &page[..len])?;
        Ok(0)
    }

    /// Doorbell Buffer Config: from now on the host writes doorbell values
    /// into the shadow buffer (PRP1) and rings MMIO only when our EventIdx
    /// (PRP2) says we may be asleep past it.
    fn doorbell_buffer_config(&mut self, sqe: &Sqe) -> Outcome {
        if !self.cfg.shadow_doorbells {
            return Err(err(gs::INVALID_OPCODE));
        }
        if self.faults.refuse_dbbc.load(Ordering::Relaxed) {
            return Err(err(gs::INVALID_FIELD));
        }
        let ps = self.page_size as u64;
        if sqe.prp1 & (ps - 1) != 0 || sqe.prp2 & (ps - 1) != 0 || sqe.prp1 == 0 || sqe.prp2 == 0 {
            return Err(err(gs::INVALID_FIELD));
        }
        // Only the base addresses are kept: each queue's slots are found at
        // its doorbell offset from them, when the queue is created (or now,
        // for the queues that exist), as QEMU does.
        if self.map.translate(sqe.prp1, 4).is_none() || self.map.translate(sqe.prp2, 4).is_none() {
            return Err(err(gs::DATA_TRANSFER_ERROR));
        }
        self.shadow = Some(Shadow { dbs: sqe.prp1, eis: sqe.prp2 });
        // Existing I/O queues move to their slots, which start at the
        // values their doorbells have now (QEMU writes them there too).
        for qid in 1..self.sqs.len() {
            if let Some(db) = self.sqs[qid].as_ref().map(|q| q.db) {
                let slot = self.slot_for(db);
                if let Slot::Shadow { db: word, .. } = &slot {
                    word.store_release(self.regs.dev_load(db));
                }
                self.sqs[qid].as_mut().unwrap().slot = slot;
            }
            if let Some(db) = self.cqs[qid].as_ref().map(|q| q.db) {
                let slot = self.slot_for(db);
                if let Slot::Shadow { db: word, .. } = &slot {
                    word.store_release(self.regs.dev_load(db));
                }
                self.cqs[qid].as_mut().unwrap().slot = slot;
            }
        }
        Ok(0)
    }

    // ----------------------------------------------------------------- NVM

    /// Abort (NVMe 1.4c §5.1) of a completion held by fault injection:
    /// post it as "Command Abort Requested" and report it aborted (DW0 = 0).
    fn abort_held(&mut self, sqe: &Sqe) -> u32 {
        let (sqid, cid) = ((sqe.cdw10 & 0xffff) as u16, (sqe.cdw10 >> 16) as u16);
        let Some(i) = self.held.iter().position(|h| h.cqe.sq_id == sqid && h.cqe.cid == cid) else { return 1 };
        let Held { cqid, mut cqe } = self.held.remove(i);
        cqe.status = Status::generic(gs::ABORTED_BY_REQUEST).to_cqe_status(false);
        // The submission queue's head as it is now, not as it was at fetch.
        if let Some(sq) = self.sqs.get(sqid as usize).and_then(|q| q.as_ref()) {
            cqe.sq_head = sq.head;
        }
        self.post::<false>(cqid, cqe);
        0
    }

    /// An I/O command, with the fault hooks around it unless `PLAIN`.
    #[inline(always)]
    fn nvm<const PLAIN: bool>(&mut self, sqe: &Sqe) -> Option<Outcome> {
        self.io_count = self.io_count.wrapping_add(1);
        if PLAIN {
            return Some(self.nvm_execute(sqe));
        }
        let drop_every = self.faults.drop_every.load(Ordering::Relaxed);
        if drop_every != 0 && self.io_count % drop_every == 0 {
            return None;
        }
        if Faults::trips(&self.faults.hang_after) {
            self.faults.hang.store(true, Ordering::Relaxed);
            return None;
        }
        if Faults::trips(&self.faults.fatal_after) {
            self.faults.fatal.store(true, Ordering::Relaxed);
            return None;
        }
        if Faults::trips(&self.faults.pause_after) {
            self.start_pause();
        }
        self.hold_this = Faults::every(&self.faults.stall_every, self.io_count);
        let delay = self.faults.delay_us.load(Ordering::Relaxed);
        if delay != 0 {
            std::thread::sleep(Duration::from_micros(delay as u64));
        }
        let inject = self.faults.status_every.load(Ordering::Relaxed);
        let outcome = self.nvm_execute(sqe);
        if Faults::every(&self.faults.corrupt_data_every, self.io_count) && outcome.is_ok() && sqe.opcode() == NvmOpcode::Read as u8 {
            self.flip_first_bit(sqe);
        }
        if inject != 0 && self.io_count % inject == 0 {
            let mut s = Status::new(
                nvme_spec::StatusCodeType(self.faults.status_sct.load(Ordering::Relaxed) as u8),
                self.faults.status_sc.load(Ordering::Relaxed) as u8,
            );
            s.dnr = self.faults.status_dnr.load(Ordering::Relaxed);
            // With ACRE on and a delay reported, the first one asked for.
            if self.acre && self.cfg.retry_delays_100ms[0] != 0 {
                s.crd = 1;
            }
            return Some(Err(s));
        }
        Some(outcome)
    }

    /// Corrupt one byte a Read delivered to the host: the 65th of the
    /// buffer when the first page holds it (past a --verify stamp's header,
    /// so its CRC catches it), else the first.
    fn flip_first_bit(&self, sqe: &Sqe) {
        if self.cfg.data != DataMode::Ram {
            return;
        }
        let room = self.page_size as u64 - (sqe.prp1 & (self.page_size as u64 - 1));
        let at = if room > 64 { sqe.prp1 + 64 } else { sqe.prp1 };
        if let Some((r, o)) = self.map.translate(at, 1) {
            let mut b = [0u8];
            r.copy_to(o, &mut b);
            b[0] ^= 1;
            r.copy_from(o, &b);
        }
    }

    #[inline(always)]
    fn nvm_execute(&mut self, sqe: &Sqe) -> Outcome {
        let Some(op) = NvmOpcode::from_u8(sqe.opcode()) else {
            return Err(err(gs::INVALID_OPCODE));
        };
        if sqe.cdw0.fuse() != 0 {
            return Err(err(gs::INVALID_FIELD));
        }
        if op == NvmOpcode::Flush && sqe.nsid == u32::MAX {
            return Ok(0);
        }
        let nsid = sqe.nsid;
        let ns = active_ns(&self.cfg, nsid)?;
        match op {
            NvmOpcode::Flush => Ok(0),
            NvmOpcode::WriteZeroes => {
                let (slba, nlb) = lba_range(sqe, ns)?;
                if self.cfg.data == DataMode::Ram {
                    let b = ns.lba_size as usize;
                    let store = &mut self.namespaces[nsid as usize - 1];
                    store[slba as usize * b..(slba + nlb) as usize * b].fill(0);
                }
                Ok(0)
            }
            NvmOpcode::Read | NvmOpcode::Write => {
                let (slba, len) = check_rw(&self.cfg, self.max_transfer, sqe)?;
                if self.cfg.data == DataMode::Null {
                    return Ok(0);
                }
                let base = slba as usize * ns.lba_size as usize;
                let mut store = std::mem::take(&mut self.namespaces[nsid as usize - 1]);
                let r = if op == NvmOpcode::Read {
                    let src = &store[base..base + len];
                    self.walk_prps(sqe, len, |r, o, n, pos| r.copy_from(o, &src[pos..pos + n]))
                } else {
                    let dst = &mut store[base..base + len];
                    // Stage through scratch so a PRP error leaves the namespace untouched.
                    let scratch = &mut self.scratch;
                    if scratch.len() < len {
                        scratch.resize(len, 0);
                    }
                    let mut staged = std::mem::take(scratch);
                    let r = self.walk_prps(sqe, len, |r, o, n, pos| r.copy_to(o, &mut staged[pos..pos + n]));
                    if r.is_ok() {
                        dst.copy_from_slice(&staged[..len]);
                    }
                    self.scratch = staged;
                    r
                };
                self.namespaces[nsid as usize - 1] = store;
                r.map(|_| 0)
            }
            NvmOpcode::DatasetManagement => {
                let nr = (sqe.cdw10 & 0xff) as usize + 1;
                let mut raw = vec![0u8; nr * 16];
                let mut tmp = std::mem::take(&mut raw);
                self.walk_prps(sqe, nr * 16, |r, o, n, pos| r.copy_to(o, &mut tmp[pos..pos + n]))?;
                let ranges: Vec<DsmRange> =
                    tmp.chunks_exact(16).map(|c| DsmRange::from_bytes(c.try_into().unwrap())).collect();
                for r in &ranges {
                    if r.slba.checked_add(r.blocks as u64).is_none_or(|e| e > ns.blocks) {
                        return Err(err(gs::LBA_OUT_OF_RANGE));
                    }
                }
                let deallocate = sqe.cdw11 & 4 != 0;
                if deallocate && self.cfg.data == DataMode::Ram {
                    let b = ns.lba_size as usize;
                    let store = &mut self.namespaces[nsid as usize - 1];
                    for r in &ranges {
                        store[r.slba as usize * b..(r.slba as usize + r.blocks as usize) * b].fill(0);
                    }
                }
                Ok(0)
            }
            _ => Err(err(gs::INVALID_OPCODE)),
        }
    }
}
