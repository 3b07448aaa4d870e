//! A hostile controller: a scripted NVMe device whose every choice comes
//! from its input (a [`Scenario`], built by `arbitrary` from fuzz bytes),
//! and the run that drives the real driver against it.
//!
//! The device implements the driver's two HAL traits, so the driver runs
//! its own code paths unchanged: [`nvme_hal::RegisterWindow`] (CAP, VS,
//! CSTS over time, CC, AQA/ASQ/ACQ, doorbells) and, through
//! [`ArenaMemory`], [`nvme_hal::DmaAllocator`]. The script decides the
//! register values, the Identify pages, and for every command fetched
//! whether, when and how it completes (CID, SQ id, SQ head, phase, status,
//! DNR/M/CRD), plus completions for commands never sent, repeated
//! completions and EventIdx values.
//!
//! The device is honest about one thing: memory. It accesses only what
//! the protocol lets it (queue rings it was given, the PRPs of commands it
//! holds), and checks every such address against the allocations the
//! driver made and has not freed, and against the data buffers the driver
//! has handed back to its caller. So a panic here is the driver's fault:
//! memory handed out, freed or returned too early, a completion accepted
//! for a command not outstanding, an unbounded wait, an untyped error (or
//! a panic or overflow inside the driver itself).
//!
//! Shared by the fuzz target `hostile` (tests/fuzz) and the regression
//! tests in tests/hostile.rs.

#![allow(dead_code)]

use arbitrary::Arbitrary;
use nvme_driver::{Controller, ControllerConfig, DataPtr, Error, QueuePair};
use nvme_hal::{DmaAllocator, DmaError, DmaRegion, HostMemory, RegisterWindow};
use nvme_spec::identify::IDENTIFY_SIZE;
use nvme_spec::regs::offset;
use nvme_spec::{Cqe, Sqe};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Every timeout the driver is given (admin commands, CSTS waits, shutdown):
/// short, so that a device that never answers costs little.
pub const TIMEOUT: Duration = Duration::from_millis(1);
/// The bound on one driver call, wall clock: every wait inside is bounded
/// by TIMEOUT, and a call makes a bounded number of them.
const CALL_LIMIT: Duration = Duration::from_secs(5);
/// The bound on register reads in one driver call.
const READ_LIMIT: u64 = 2_000_000;

/// What the device does and answers, chosen by the input.
#[derive(Arbitrary, Debug, Clone)]
pub struct Scenario {
    pub cap: CapScript,
    pub vs: u32,
    pub crto: u32,
    pub host: HostScript,
    pub ident: IdentScript,
    pub ns: NsScript,
    /// Set Features Number of Queues' completion DW0 (NSQA/NCQA).
    pub queues_allocated: u32,
    /// The device's decisions, taken in order as it needs them.
    pub acts: Vec<Act>,
}

/// Controller Capabilities.
#[derive(Arbitrary, Debug, Clone)]
pub struct CapScript {
    pub mqes: u16,
    pub to: u8,
    pub dstrd: u8,
    pub css: u8,
    pub mpsmin: u8,
    pub crms: u8,
}

impl CapScript {
    fn bits(&self) -> u64 {
        self.mqes as u64
            | (self.to as u64) << 24
            | ((self.dstrd & 0xf) as u64) << 32
            | (self.css as u64) << 37
            | ((self.mpsmin & 0xf) as u64) << 48
            | ((self.crms & 3) as u64) << 59
    }
    fn stride(&self) -> usize {
        4 << (self.dstrd & 0xf)
    }
}

/// What the host (the driver's caller) asks for.
#[derive(Arbitrary, Debug, Clone)]
pub struct HostScript {
    pub admin_entries: u8,
    pub io_queues: u8,
    pub shadow: bool,
    pub batch_cq: bool,
    pub streaming: bool,
    pub queue_entries: u8,
    pub ios: u8,
    pub blocks: u8,
    pub offset: u16,
    pub abort: bool,
    pub reset: bool,
    pub delete: bool,
    pub second_queue: bool,
}

/// Identify Controller fields.
#[derive(Arbitrary, Debug, Clone)]
pub struct IdentScript {
    pub mdts: u8,
    pub nn: u32,
    pub sqes: u8,
    pub cqes: u8,
    pub oacs: u16,
    pub rtd3e: u32,
    /// Raw bytes over the page (offset mod 4096, value), a few at most.
    pub patches: Vec<(u16, u8)>,
}

/// Identify Namespace fields.
#[derive(Arbitrary, Debug, Clone)]
pub struct NsScript {
    pub nsze: u64,
    pub ncap: u64,
    pub nlbaf: u8,
    pub flbas: u8,
    pub lbaf: [u32; 4],
}

/// One decision of the device, taken in order: at a command's fetch an
/// [`Act::Fate`], at a CSTS change an [`Act::Transition`], the others
/// taking effect on the way. When the act at the front is of the other
/// kind (or none is left), the decision is the default one (complete now,
/// successfully; make the change at once) and the act waits for its turn.
#[derive(Arbitrary, Debug, Clone)]
pub enum Act {
    Fate(Fate),
    Transition(Transition),
    /// A completion for a command never sent (or sent and done): posted
    /// on completion queue `cq` (an index among the live ones).
    Stray { cq: u8, cid: u16, sqid: u16, sqhd: u16, status: u16, phase_ok: bool },
    /// The last completion posted, once more.
    Repeat,
    /// Write `value` into the EventIdx slot `slot` (an index among the
    /// live I/O queues' slots).
    EventIdx { slot: u8, value: u16 },
    /// CSTS.CFS = 1 from now on (until a reset).
    Fatal,
    /// Every register reads all ones from now on (surprise removal).
    Gone,
    /// CSTS.RDY drops to 0 while enabled: the controller stopped by itself
    /// (and forgot every queue and command).
    Stop,
    /// CSTS.SHST takes this value (mod 4) unasked; the controller stops
    /// processing while it is not 0.
    Shst(u8),
}

/// What becomes of a command.
#[derive(Arbitrary, Debug, Clone)]
pub enum Fate {
    Now(How),
    /// After this many device steps.
    Later(u8, How),
    Never,
}

/// How a completion is posted.
#[derive(Arbitrary, Debug, Clone, Default)]
pub struct How {
    /// Status field bits 15:1 (SC, SCT, CRD, M, DNR); None: success.
    pub status: Option<u16>,
    /// XORed into the CID.
    pub cid_xor: u16,
    pub sqid: Option<u16>,
    pub sqhd: Option<u16>,
    pub wrong_phase: bool,
    pub dw0: Option<u32>,
}

/// A CSTS change after a CC write (RDY after EN, SHST after SHN).
#[derive(Arbitrary, Debug, Clone)]
pub struct Transition {
    /// CSTS reads before it happens.
    pub reads: u8,
    pub outcome: Outcome,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Never,
    Fatal,
}

// ---------------------------------------------------------------------------
// DMA memory: an arena per thread, handed out by bump allocation at IOVAs of
// its own, each allocation registered until the driver's last handle drops.

const ARENA: usize = 96 << 20;
const IOVA_BASE: u64 = 1 << 40;

thread_local! {
    static ARENA_REGION: DmaRegion = HostMemory::plain().map(ARENA).expect("map the fuzz arena");
}

#[derive(Default)]
struct Table {
    next: usize,
    /// (iova, the region as the device sees it), sorted by iova.
    live: Vec<(u64, DmaRegion)>,
}

/// The allocator the driver is given: every region is zeroed, and
/// registered (so the device can reach it) until its last handle drops.
pub struct ArenaMemory {
    table: Arc<Mutex<Table>>,
    arena: DmaRegion,
}

struct Registration {
    table: Weak<Mutex<Table>>,
    iova: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(t) = self.table.upgrade() {
            t.lock().unwrap().live.retain(|(i, _)| *i != self.iova);
        }
    }
}

impl ArenaMemory {
    fn new() -> Self {
        ArenaMemory { table: Arc::default(), arena: ARENA_REGION.with(|a| a.clone()) }
    }
    /// The live region holding `[iova, iova + len)`, and the offset in it.
    fn translate(&self, iova: u64, len: usize) -> Option<(DmaRegion, usize)> {
        let t = self.table.lock().unwrap();
        let i = t.live.partition_point(|(b, _)| *b <= iova);
        let (base, r) = t.live.get(i.checked_sub(1)?)?;
        let off = (iova - base) as usize;
        (off.checked_add(len)? <= r.len()).then(|| (r.clone(), off))
    }
}

impl DmaAllocator for ArenaMemory {
    fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError> {
        assert!(align.is_power_of_two() && align <= 4096);
        let mut t = self.table.lock().unwrap();
        let size = len.max(1).next_multiple_of(4096);
        let left = ARENA - t.next;
        // A page of gap after each: an overrun is outside every allocation.
        if size + 4096 > left {
            return Err(DmaError::Exhausted { asked: len, left, hint: "the fuzz arena is full" });
        }
        let at = t.next;
        t.next += size + 4096;
        let iova = IOVA_BASE + at as u64;
        let r = self.arena.sub(at, size).with_iova(iova);
        r.fill(0, size, 0);
        let i = t.live.partition_point(|(b, _)| *b < iova);
        t.live.insert(i, (iova, r.clone()));
        Ok(r.with_guard(Registration { table: Arc::downgrade(&self.table), iova }))
    }
}

// ---------------------------------------------------------------------------
// The device.

struct Sq {
    base: u64,
    size: u16,
    head: u16,
    tail: u16,
    cqid: u16,
}

struct Cq {
    base: u64,
    size: u16,
    tail: u16,
    phase: bool,
    head: u16,
    /// Entries posted that the host has not reported consumed.
    unconsumed: u16,
}

/// A command the device has fetched and not completed.
struct Held {
    sqid: u16,
    sqe: Sqe,
    /// Its data: (iova, len) pieces from its PRPs.
    data: Vec<(u64, usize)>,
    /// Device-to-host (a read, an Identify).
    to_host: bool,
}

struct Post {
    due: u64,
    cqid: u16,
    cqe: Cqe,
    wrong_phase: bool,
    /// The held command it completes (by SQ id and CID), if any.
    finishes: Option<(u16, u16)>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Enable,
    Disable,
    Shutdown,
}

struct State {
    cap: u64,
    stride: usize,
    vs: u32,
    crto: u32,
    ident: Box<[u8; IDENTIFY_SIZE]>,
    ns: Box<[u8; IDENTIFY_SIZE]>,
    lba_shift: Option<u32>,
    nn: u32,
    queues_allocated: u32,
    acts: VecDeque<Act>,
    cc: u32,
    aqa: u32,
    asq: u64,
    acq: u64,
    rdy: bool,
    cfs: bool,
    shst: u8,
    gone: bool,
    transition: Option<(Kind, u8, Outcome)>,
    sqs: BTreeMap<u16, Sq>,
    cqs: BTreeMap<u16, Cq>,
    held: Vec<Held>,
    posts: Vec<Post>,
    shadow: Option<(u64, u64)>,
    last: Option<(u16, Cqe)>,
    step: u64,
    reads: u64,
    /// Data buffers the driver has handed back to its caller.
    returned: Vec<(u64, usize)>,
    mem: Arc<ArenaMemory>,
}

/// The scripted controller: its register window is what the driver gets.
pub struct Hostile {
    st: Mutex<State>,
    mem: Arc<ArenaMemory>,
}

fn violation(what: String) -> ! {
    panic!("hostile device: {what}")
}

impl Hostile {
    fn new(s: &Scenario, mem: Arc<ArenaMemory>) -> Self {
        let mut ident = Box::new([0u8; IDENTIFY_SIZE]);
        ident[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
        ident[4..24].copy_from_slice(b"HOSTILE             ");
        ident[24..64].copy_from_slice(b"scripted controller                     ");
        ident[77] = s.ident.mdts;
        ident[88..92].copy_from_slice(&s.ident.rtd3e.to_le_bytes());
        ident[256..258].copy_from_slice(&s.ident.oacs.to_le_bytes());
        ident[512] = s.ident.sqes;
        ident[513] = s.ident.cqes;
        ident[516..520].copy_from_slice(&s.ident.nn.to_le_bytes());
        for &(at, v) in s.ident.patches.iter().take(8) {
            ident[at as usize % IDENTIFY_SIZE] = v;
        }
        let mut ns = Box::new([0u8; IDENTIFY_SIZE]);
        ns[0..8].copy_from_slice(&s.ns.nsze.to_le_bytes());
        ns[8..16].copy_from_slice(&s.ns.ncap.to_le_bytes());
        ns[16..24].copy_from_slice(&s.ns.ncap.to_le_bytes());
        ns[25] = s.ns.nlbaf;
        ns[26] = s.ns.flbas;
        for (i, f) in s.ns.lbaf.iter().enumerate() {
            ns[128 + 4 * i..132 + 4 * i].copy_from_slice(&f.to_le_bytes());
        }
        let fmt = (s.ns.flbas & 0xf) as usize;
        let lbads = if fmt < 4 { (s.ns.lbaf[fmt] >> 16) as u8 } else { 0 };
        Hostile {
            st: Mutex::new(State {
                cap: s.cap.bits(),
                stride: s.cap.stride(),
                vs: s.vs,
                crto: s.crto,
                ident,
                ns,
                lba_shift: (1..32).contains(&lbads).then_some(lbads as u32),
                nn: s.ident.nn,
                queues_allocated: s.queues_allocated,
                acts: s.acts.iter().cloned().collect(),
                cc: 0,
                aqa: 0,
                asq: 0,
                acq: 0,
                rdy: false,
                cfs: false,
                shst: 0,
                gone: false,
                transition: None,
                sqs: BTreeMap::new(),
                cqs: BTreeMap::new(),
                held: vec![],
                posts: vec![],
                shadow: None,
                last: None,
                step: 0,
                reads: 0,
                returned: vec![],
                mem: mem.clone(),
            }),
            mem,
        }
    }

    /// Register reads so far.
    fn reads(&self) -> u64 {
        self.st.lock().unwrap().reads
    }

    /// One device step (the host's poll loop calls it between polls).
    pub fn step(&self) {
        let mut st = self.st.lock().unwrap();
        self.step_locked(&mut st);
    }

    /// A data buffer the driver handed back to its caller: the device must
    /// not hold a command that reads or writes it, now or later.
    fn returned(&self, iova: u64, len: usize, how: &str) {
        let mut st = self.st.lock().unwrap();
        if let Some(h) = st.held.iter().find(|h| overlaps(&h.data, iova, len)) {
            violation(format!(
                "{how} handed buffer {iova:#x}+{len:#x} back while the device still holds command CID {:#x} on SQ {} that transfers into it",
                h.sqe.cid(),
                h.sqid
            ));
        }
        st.returned.push((iova, len));
    }

    /// At the end: whatever the device still holds (queues, commands) must
    /// still be mapped, since nobody saw it stop.
    fn finish(&self) {
        let mut st = self.st.lock().unwrap();
        self.check_memory(&mut st, "after the driver was dropped");
    }

    fn check(&self, st: &State, iova: u64, len: usize, what: &str) -> (DmaRegion, usize) {
        match self.mem.translate(iova, len) {
            Some(r) => {
                if st.returned.iter().any(|&(b, l)| iova < b + l as u64 && b < iova + len as u64) {
                    violation(format!("{what} at {iova:#x}+{len:#x} is a buffer already handed back to the caller"));
                }
                r
            }
            None => violation(format!("{what} at {iova:#x}+{len:#x} is outside every live allocation of the driver")),
        }
    }

    /// Every memory the device may still access is allocated and not
    /// handed back.
    fn check_memory(&self, st: &mut State, when: &str) {
        if st.gone {
            return;
        }
        for (qid, q) in &st.sqs {
            self.check(st, q.base, q.size as usize * 64, &format!("SQ {qid}'s ring ({when})"));
        }
        for (qid, q) in &st.cqs {
            self.check(st, q.base, q.size as usize * 16, &format!("CQ {qid}'s ring ({when})"));
        }
        for h in &st.held {
            for &(a, l) in &h.data {
                self.check(st, a, l, &format!("data of held command {:#x} on SQ {} ({when})", h.sqe.cid(), h.sqid));
            }
        }
        if let Some((d, e)) = st.shadow {
            let len = (2 * (st.sqs.keys().max().copied().unwrap_or(0) as usize + 1)) * st.stride;
            self.check(st, d, len, &format!("shadow doorbell buffer ({when})"));
            self.check(st, e, len, &format!("EventIdx buffer ({when})"));
        }
    }

    /// The fate of a fetched command: side effects on the way are applied;
    /// a transition waiting at the front is left for its CC write, and
    /// the command completes now, successfully.
    fn next_fate(st: &mut State) -> Fate {
        while let Some(a) = st.acts.front() {
            match a {
                Act::Transition(_) => break,
                Act::Fate(_) => {
                    let Some(Act::Fate(f)) = st.acts.pop_front() else { unreachable!() };
                    return f;
                }
                _ => {
                    let a = st.acts.pop_front().unwrap();
                    Self::side_effect(st, a);
                }
            }
        }
        Fate::Now(How::default())
    }

    /// How a CSTS change goes: as [`next_fate`](Self::next_fate), with a
    /// fate at the front left for its command and the change made at once.
    fn next_transition(st: &mut State) -> Transition {
        while let Some(a) = st.acts.front() {
            match a {
                Act::Fate(_) => break,
                Act::Transition(_) => {
                    let Some(Act::Transition(t)) = st.acts.pop_front() else { unreachable!() };
                    return t;
                }
                _ => {
                    let a = st.acts.pop_front().unwrap();
                    Self::side_effect(st, a);
                }
            }
        }
        Transition { reads: 0, outcome: Outcome::Done }
    }

    fn side_effect(st: &mut State, a: Act) {
        match a {
            Act::Stray { cq, cid, sqid, sqhd, status, phase_ok } => {
                let ids: Vec<u16> = st.cqs.keys().copied().collect();
                if ids.is_empty() {
                    return;
                }
                let cqid = ids[cq as usize % ids.len()];
                let cqe = Cqe::from_dwords([0, 0, sqhd as u32 | (sqid as u32) << 16, cid as u32 | ((status & !1) as u32) << 16]);
                let due = st.step;
                st.posts.push(Post { due, cqid, cqe, wrong_phase: !phase_ok, finishes: None });
            }
            Act::Repeat => {
                if let Some((cqid, cqe)) = st.last {
                    let due = st.step;
                    st.posts.push(Post { due, cqid, cqe, wrong_phase: false, finishes: None });
                }
            }
            Act::EventIdx { slot, value } => {
                let Some((_, eis)) = st.shadow else { return };
                let qids: Vec<u16> = st.sqs.keys().copied().filter(|&q| q > 0).collect();
                if qids.is_empty() {
                    return;
                }
                let q = qids[(slot as usize / 2) % qids.len()] as usize;
                let off = (2 * q + slot as usize % 2) * st.stride;
                // The controller's own page: it writes there by design.
                if let Some((r, o)) = st.mem.translate(eis + off as u64, 4) {
                    r.write32(o, value as u32);
                }
            }
            Act::Fatal => st.cfs = true,
            Act::Gone => st.gone = true,
            Act::Stop => {
                Self::forget(st);
                st.transition = None;
            }
            Act::Shst(v) => st.shst = v & 3,
            Act::Fate(_) | Act::Transition(_) => {}
        }
    }
}

fn overlaps(data: &[(u64, usize)], iova: u64, len: usize) -> bool {
    data.iter().any(|&(a, l)| a < iova + len as u64 && iova < a + l as u64)
}

impl Hostile {
    fn start_transition(st: &mut State, kind: Kind) {
        let t = Self::next_transition(st);
        st.transition = Some((kind, t.reads, t.outcome));
        if t.reads == 0 {
            Self::advance_transition(st);
        }
    }

    /// One CSTS read passed: the transition under way moves on.
    fn advance_transition(st: &mut State) {
        let Some((kind, left, outcome)) = st.transition else { return };
        if left > 0 {
            st.transition = Some((kind, left - 1, outcome));
            return;
        }
        match outcome {
            Outcome::Never => return,
            Outcome::Fatal => st.cfs = true,
            Outcome::Done => match kind {
                Kind::Enable => st.rdy = true,
                Kind::Disable => Self::forget(st),
                Kind::Shutdown => st.shst = 2,
            },
        }
        st.transition = None;
    }

    /// Stopped (CSTS.RDY = 0 after CC.EN = 0): every queue and command gone.
    fn forget(st: &mut State) {
        st.rdy = false;
        st.cfs = false;
        st.shst = 0;
        st.sqs.clear();
        st.cqs.clear();
        st.held.clear();
        st.posts.clear();
        st.shadow = None;
        st.last = None;
    }

    fn write_cc(&self, st: &mut State, v: u32) {
        let old = st.cc;
        st.cc = v;
        let (was, now) = (old & 1 == 1, v & 1 == 1);
        if !was && now {
            // Admin queues from AQA/ASQ/ACQ.
            let asqs = (st.aqa & 0xfff) as u16 + 1;
            let acqs = ((st.aqa >> 16) & 0xfff) as u16 + 1;
            st.sqs.insert(0, Sq { base: st.asq, size: asqs, head: 0, tail: 0, cqid: 0 });
            st.cqs.insert(0, Cq { base: st.acq, size: acqs, tail: 0, phase: true, head: 0, unconsumed: 0 });
            self.check_memory(st, "at CC.EN=1");
            Self::start_transition(st, Kind::Enable);
        } else if was && !now {
            if matches!(st.transition, Some((Kind::Enable, ..))) || !st.rdy {
                // Never became ready: nothing started, nothing to stop.
                st.transition = None;
                Self::forget(st);
            } else {
                Self::start_transition(st, Kind::Disable);
            }
        } else if now && (old >> 14) & 3 == 0 && (v >> 14) & 3 != 0 {
            st.shst = 1;
            Self::start_transition(st, Kind::Shutdown);
        }
    }

    fn doorbell(&self, st: &mut State, off: usize, v: u32) {
        if off % st.stride != 0 {
            return;
        }
        let idx = off / st.stride;
        let qid = (idx / 2) as u16;
        if idx % 2 == 0 {
            let Some(q) = st.sqs.get_mut(&qid) else { return };
            if v >= q.size as u32 {
                violation(format!("SQ {qid} tail doorbell written with {v}, past its {} entries", q.size));
            }
            q.tail = v as u16;
        } else {
            Self::cq_head(st, qid, v);
        }
    }

    fn cq_head(st: &mut State, qid: u16, v: u32) {
        let Some(q) = st.cqs.get_mut(&qid) else { return };
        if v >= q.size as u32 {
            violation(format!("CQ {qid} head doorbell written with {v}, past its {} entries", q.size));
        }
        let consumed = ((v + q.size as u32 - q.head as u32) % q.size as u32) as u16;
        if consumed > q.unconsumed {
            violation(format!(
                "CQ {qid} head moved from {} to {v}: {consumed} entries consumed, only {} posted",
                q.head, q.unconsumed
            ));
        }
        q.unconsumed -= consumed;
        q.head = v as u16;
    }

    /// Processing commands: not failed, gone, not ready, disabling, or
    /// shutting down.
    fn running(st: &State) -> bool {
        !st.gone && !st.cfs && st.rdy && st.cc & 1 == 1 && st.shst == 0
    }

    fn step_locked(&self, st: &mut State) {
        st.step += 1;
        if st.gone {
            return;
        }
        // Shadow doorbells: the host's values, read from its buffer.
        if let Some((dbs, _)) = st.shadow {
            let qids: Vec<u16> = st.sqs.keys().copied().filter(|&q| q > 0).collect();
            for q in qids {
                for is_cq in [false, true] {
                    let off = (2 * q as usize + is_cq as usize) * st.stride;
                    let (r, o) = self.check(st, dbs + off as u64, 4, "shadow doorbell slot");
                    let v = r.read32(o);
                    if is_cq {
                        if st.cqs.contains_key(&q) && v != st.cqs[&q].head as u32 {
                            Self::cq_head(st, q, v);
                        }
                    } else if let Some(sq) = st.sqs.get_mut(&q) {
                        if v >= sq.size as u32 {
                            violation(format!("SQ {q} shadow tail {v}, past its {} entries", sq.size));
                        }
                        sq.tail = v as u16;
                    }
                }
            }
        }
        if !Self::running(st) {
            self.check_memory(st, "while stopped or failed");
            return;
        }
        // Fetch: every SQ, admin first.
        let qids: Vec<u16> = st.sqs.keys().copied().collect();
        for qid in qids {
            while Self::running(st) {
                let Some(q) = st.sqs.get_mut(&qid) else { break };
                if q.head == q.tail {
                    break;
                }
                let at = q.base + q.head as u64 * 64;
                q.head = (q.head + 1) % q.size;
                let (r, o) = self.check(st, at, 64, &format!("SQ {qid} entry"));
                let sqe = Sqe::from_dwords(r.read_dwords16(o));
                self.execute(st, qid, sqe);
            }
        }
        // Post what is due, in order, where there is room.
        if !Self::running(st) {
            return self.check_memory(st, "while stopped or failed");
        }
        let mut i = 0;
        while i < st.posts.len() {
            if st.posts[i].due > st.step {
                i += 1;
                continue;
            }
            let p = st.posts.remove(i);
            let Some(cq) = st.cqs.get(&p.cqid) else { continue };
            if (cq.tail + 1) % cq.size == cq.head {
                st.posts.insert(i, p);
                i += 1;
                continue;
            }
            self.post(st, p);
        }
        self.check_memory(st, "during a step");
    }

    fn post(&self, st: &mut State, p: Post) {
        // The data moves before the completion says it has.
        let mut done = vec![];
        if let Some(f) = p.finishes {
            done.push(f);
        }
        let (sqid, cid) = (p.cqe.sq_id, p.cqe.cid);
        if st.sqs.get(&sqid).is_some_and(|s| s.cqid == p.cqid) {
            done.push((sqid, cid));
        }
        let ok = p.cqe.decoded_status().is_success();
        for (s, c) in done {
            if let Some(i) = st.held.iter().position(|h| h.sqid == s && h.sqe.cid() == c) {
                let h = st.held.remove(i);
                if ok {
                    self.transfer(st, &h);
                }
            }
        }
        let cq = st.cqs.get_mut(&p.cqid).unwrap();
        let phase = cq.phase != p.wrong_phase;
        let mut cqe = p.cqe;
        let dws = cqe.to_dwords();
        let dw3 = (dws[3] & !(1 << 16)) | (phase as u32) << 16;
        let at = cq.base + cq.tail as u64 * 16;
        cq.tail += 1;
        if cq.tail == cq.size {
            cq.tail = 0;
            cq.phase = !cq.phase;
        }
        cq.unconsumed += 1;
        let (r, o) = self.check(st, at, 16, &format!("CQ {} entry", p.cqid));
        r.write_dwords3(o, [dws[0], dws[1], dws[2]]);
        r.store32_release(o + 12, dw3);
        cqe = Cqe::from_dwords([dws[0], dws[1], dws[2], dw3]);
        st.last = Some((p.cqid, cqe));
    }

    /// Move a completed command's data.
    fn transfer(&self, st: &State, h: &Held) {
        let page: Option<&[u8; IDENTIFY_SIZE]> = match (h.sqid, h.sqe.opcode()) {
            (0, 0x06) => Some(match h.sqe.cdw10 & 0xff {
                0 => &st.ns,
                1 => &st.ident,
                _ => &st.ident,
            }),
            _ => None,
        };
        let mut done = 0usize;
        for &(a, l) in &h.data {
            let (r, o) = self.check(st, a, l, "data");
            if h.to_host {
                match page {
                    Some(p) => r.copy_from(o, &p[done.min(IDENTIFY_SIZE)..(done + l).min(IDENTIFY_SIZE)]),
                    None => r.fill(o, l, h.sqe.cid() as u8),
                }
            } else {
                let mut b = vec![0u8; l.min(1 << 16)];
                r.copy_to(o, &mut b);
            }
            done += l;
        }
    }

    /// The data pieces `len` bytes at PRP1/PRP2 describe (the list walked
    /// in memory, each list page checked).
    fn prps(&self, st: &State, sqe: &Sqe, len: usize) -> Vec<(u64, usize)> {
        const PAGE: u64 = 4096;
        let mut out = vec![];
        if len == 0 {
            return out;
        }
        let first = ((PAGE - sqe.prp1 % PAGE) as usize).min(len);
        out.push((sqe.prp1, first));
        let mut left = len - first;
        if left == 0 {
            return out;
        }
        if left <= PAGE as usize {
            out.push((sqe.prp2, left));
            return out;
        }
        let mut list = sqe.prp2;
        let mut n = 0;
        while left > 0 {
            n += 1;
            if n > 1 << 16 {
                violation("PRP list longer than any transfer".into());
            }
            let last_in_page = list % PAGE == PAGE - 8;
            let (r, o) = self.check(st, list, 8, "PRP list entry");
            let e = r.read64(o);
            if last_in_page && left > PAGE as usize {
                list = e;
                continue;
            }
            let l = left.min(PAGE as usize);
            out.push((e, l));
            left -= l;
            list += 8;
        }
        out
    }

    /// A fetched command: decide its fate, act on it.
    fn execute(&self, st: &mut State, sqid: u16, sqe: Sqe) {
        let fate = Self::next_fate(st);
        if std::env::var_os("NVB_HOSTILE_TRACE").is_some() {
            eprintln!("hostile: SQ {sqid} opcode {:#04x} CID {:#06x}: {fate:?}", sqe.opcode(), sqe.cid());
        }
        if !Self::running(st) || !st.sqs.contains_key(&sqid) {
            // A side effect on the way stopped the device: the command is lost.
            return;
        }
        let (len, to_host) = if sqid == 0 {
            match sqe.opcode() {
                0x06 => (IDENTIFY_SIZE, true),
                _ => (0, false),
            }
        } else {
            let nlb = (sqe.cdw12 & 0xffff) as usize + 1;
            let bytes = st.lba_shift.map(|s| nlb << s).unwrap_or(0);
            match sqe.opcode() {
                0x02 => (bytes, true),
                0x01 => (bytes, false),
                _ => (0, false),
            }
        };
        let data = self.prps(st, &sqe, len);
        for &(a, l) in &data {
            self.check(st, a, l, &format!("data of command {:#x} (opcode {:#x}) on SQ {sqid}", sqe.cid(), sqe.opcode()));
        }
        let cqid = st.sqs[&sqid].cqid;
        st.held.push(Held { sqid, sqe, data, to_host });
        let (delay, how) = match fate {
            Fate::Now(h) => (0, h),
            Fate::Later(n, h) => (n as u64, h),
            Fate::Never => return,
        };
        let status = how.status.map(|s| s & !1).unwrap_or(0);
        let ok = status & 0x7ffe == 0 && !how.wrong_phase && how.cid_xor == 0 && how.sqid.is_none();
        let mut dw0 = how.dw0.unwrap_or(0);
        // Admin commands take effect when they succeed.
        if sqid == 0 && status & 0x7ffe == 0 {
            self.admin_effect(st, &sqe, &mut dw0, how.dw0.is_some());
        }
        let _ = ok;
        let sqhd = how.sqhd.unwrap_or_else(|| st.sqs.get(&sqid).map(|q| q.head).unwrap_or(0));
        let cqe = Cqe::from_dwords([
            dw0,
            0,
            sqhd as u32 | (how.sqid.unwrap_or(sqid) as u32) << 16,
            (sqe.cid() ^ how.cid_xor) as u32 | (status as u32) << 16,
        ]);
        let due = st.step + delay;
        st.posts.push(Post { due, cqid, cqe, wrong_phase: how.wrong_phase, finishes: Some((sqid, sqe.cid())) });
    }

    fn admin_effect(&self, st: &mut State, sqe: &Sqe, dw0: &mut u32, dw0_scripted: bool) {
        match sqe.opcode() {
            0x05 => {
                let qid = sqe.cdw10 as u16;
                let size = (sqe.cdw10 >> 16) as u16;
                if qid != 0 && size != 0 {
                    st.cqs.insert(qid, Cq { base: sqe.prp1, size: size.saturating_add(1), tail: 0, phase: true, head: 0, unconsumed: 0 });
                    self.check_memory(st, "at Create I/O CQ");
                }
            }
            0x01 => {
                let qid = sqe.cdw10 as u16;
                let size = (sqe.cdw10 >> 16) as u16;
                let cqid = (sqe.cdw11 >> 16) as u16;
                if qid != 0 && size != 0 && st.cqs.contains_key(&cqid) {
                    st.sqs.insert(qid, Sq { base: sqe.prp1, size: size.saturating_add(1), head: 0, tail: 0, cqid });
                    self.check_memory(st, "at Create I/O SQ");
                }
            }
            0x00 => {
                let qid = sqe.cdw10 as u16;
                if qid != 0 && st.sqs.remove(&qid).is_some() {
                    // Its commands are aborted and forgotten.
                    st.held.retain(|h| h.sqid != qid);
                    st.posts.retain(|p| p.finishes.is_none_or(|(s, _)| s != qid));
                }
            }
            0x04 => {
                let qid = sqe.cdw10 as u16;
                if qid != 0 && !st.sqs.values().any(|s| s.cqid == qid) {
                    st.cqs.remove(&qid);
                    st.posts.retain(|p| p.cqid != qid);
                }
            }
            0x09 if sqe.cdw10 & 0xff == 0x07 && !dw0_scripted => *dw0 = st.queues_allocated,
            0x7c => st.shadow = Some((sqe.prp1, sqe.prp2)),
            0x08 => {
                // Abort: the target completes as aborted, unless DW0 bit 0 says not.
                let (sqid, cid) = (sqe.cdw10 as u16, (sqe.cdw10 >> 16) as u16);
                if *dw0 & 1 == 0 {
                    if let Some(i) = st.held.iter().position(|h| h.sqid == sqid && h.sqe.cid() == cid) {
                        let h = st.held.remove(i);
                        if let Some(q) = st.sqs.get(&sqid) {
                            let cqe = Cqe::from_dwords([0, 0, q.head as u32 | (sqid as u32) << 16, cid as u32 | 0x07 << 17]);
                            let due = st.step;
                            st.posts.push(Post { due, cqid: q.cqid, cqe, wrong_phase: false, finishes: None });
                        }
                        let _ = h;
                    }
                }
            }
            _ => {}
        }
    }
}

impl RegisterWindow for Hostile {
    fn read32(&self, off: usize) -> u32 {
        let mut st = self.st.lock().unwrap();
        st.reads += 1;
        if st.gone {
            return u32::MAX;
        }
        let v = match off {
            offset::CAP => st.cap as u32,
            0x04 => (st.cap >> 32) as u32,
            offset::VS => st.vs,
            offset::CC => st.cc,
            offset::CSTS => {
                Self::advance_transition(&mut st);
                self.step_locked(&mut st);
                if st.gone {
                    return u32::MAX;
                }
                st.rdy as u32 | (st.cfs as u32) << 1 | (st.shst as u32) << 2
            }
            offset::AQA => st.aqa,
            offset::ASQ => st.asq as u32,
            0x2c => (st.asq >> 32) as u32,
            offset::ACQ => st.acq as u32,
            0x34 => (st.acq >> 32) as u32,
            offset::CRTO => st.crto,
            _ => 0,
        };
        v
    }

    fn write32(&self, off: usize, v: u32) {
        let mut st = self.st.lock().unwrap();
        if st.gone {
            return;
        }
        match off {
            offset::CC => self.write_cc(&mut st, v),
            offset::AQA => st.aqa = v,
            offset::ASQ => st.asq = (st.asq & !0xffff_ffff) | v as u64,
            0x2c => st.asq = (st.asq & 0xffff_ffff) | (v as u64) << 32,
            offset::ACQ => st.acq = (st.acq & !0xffff_ffff) | v as u64,
            0x34 => st.acq = (st.acq & 0xffff_ffff) | (v as u64) << 32,
            o if o >= offset::DOORBELL_BASE => self.doorbell(&mut st, o - offset::DOORBELL_BASE, v),
            _ => {}
        }
        self.step_locked(&mut st);
    }

    fn len(&self) -> usize {
        offset::DOORBELL_BASE + 2 * 65536 * self.st.lock().unwrap().stride
    }
}

// ---------------------------------------------------------------------------
// The host: bring-up, Identify, I/O queues, a batch of reads and writes,
// Abort, reset, deletion and shutdown, each checked.

/// Run one driver call, checking it is bounded in time and register reads.
fn bounded<T>(dev: &Hostile, what: &str, f: impl FnOnce() -> T) -> T {
    let (t0, r0) = (Instant::now(), dev.reads());
    let v = f();
    let (dt, dr) = (t0.elapsed(), dev.reads() - r0);
    assert!(dt < CALL_LIMIT, "{what} took {dt:?}: a wait not bounded by its timeout");
    assert!(dr < READ_LIMIT, "{what} read registers {dr} times: a wait not bounded");
    v
}

/// Every error the caller sees is typed, and a command's is decoded from
/// its completion; its message renders.
fn check_error(e: &Error) -> String {
    if let Error::Command { status, cqe, .. } = e {
        assert_eq!(*status, cqe.decoded_status(), "a command error whose status is not its completion's");
        assert!(!status.is_success(), "a command error with a successful status");
    }
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let t = s.to_string();
        assert!(!t.is_empty());
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
        src = s.source();
    }
    assert!(!msg.is_empty());
    msg
}

struct Io {
    outstanding: HashMap<u64, (u64, usize)>,
    next_tag: u64,
    report: Report,
}

/// How far a run went: for tests that a scenario reaches what it means to.
#[derive(Debug, Default)]
pub struct Report {
    /// Bring-up succeeded.
    pub up: bool,
    /// Completions the caller got.
    pub completed: usize,
    /// Tags handed back as abandoned by a re-created queue pair.
    pub abandoned: usize,
    /// Every error a driver call returned, rendered.
    pub errors: Vec<String>,
}

impl Io {
    fn done(&mut self, dev: &Hostile, tag: u64, how: &str) {
        let Some((iova, len)) = self.outstanding.remove(&tag) else {
            panic!("{how} handed back tag {tag}, which is not outstanding (never submitted, or handed back before)");
        };
        dev.returned(iova, len, how);
    }
}

/// Submit a batch of reads and writes on `qp`, ring, and poll (stepping the
/// device) until all are back or the polls run out.
fn batch(dev: &Hostile, ctrl: &mut Controller<Hostile>, qp: &mut QueuePair<Hostile>, s: &Scenario, lba: u32, io: &mut Io) {
    let blocks = 1 + s.host.blocks as u32 % 8;
    let Some(len) = (lba as usize).checked_mul(blocks as usize).filter(|&l| l <= qp.max_transfer() && l <= 1 << 20) else {
        return;
    };
    let off = s.host.offset as usize % 4096;
    for i in 0..(s.host.ios % 24) as u32 {
        let Ok(buf) = ctrl.alloc_queue_buffer(qp, off + len) else { return };
        let data = DataPtr { iova: buf.iova() + off as u64, len };
        drop(buf);
        let tag = io.next_tag;
        io.next_tag += 1;
        let slba = i as u64 * blocks as u64;
        let r = if (s.host.blocks >> 3 ^ i as u8) & 1 == 0 { qp.read(1, slba, blocks, data, tag) } else { qp.write(1, slba, blocks, data, tag) };
        match r {
            Ok(_) => {
                io.outstanding.insert(tag, (data.iova, data.len));
            }
            Err(e) => {
                let _ = e.to_string();
                break;
            }
        }
    }
    qp.ring();
    poll(dev, qp, io, 64);
}

fn poll(dev: &Hostile, qp: &mut QueuePair<Hostile>, io: &mut Io, rounds: usize) {
    for _ in 0..rounds {
        dev.step();
        let mut got = vec![];
        qp.poll(64, |c| got.push(c));
        for c in got {
            let _ = c.status().to_string();
            io.done(dev, c.tag, "a completion");
            io.report.completed += 1;
        }
        if io.outstanding.is_empty() {
            break;
        }
    }
}

/// The whole run for one scenario. Panics on a broken property.
pub fn run(s: &Scenario) -> Report {
    let mem = Arc::new(ArenaMemory::new());
    let dev = Arc::new(Hostile::new(s, mem.clone()));
    let mut io = Io { outstanding: HashMap::new(), next_tag: 1, report: Report::default() };
    run_with(&dev, mem, s, &mut io);
    dev.finish();
    io.report
}

fn run_with(dev: &Arc<Hostile>, mem: Arc<ArenaMemory>, s: &Scenario, io: &mut Io) {
    let cfg = ControllerConfig {
        admin_queue_entries: 2 + (s.host.admin_entries % 31) as u16,
        io_queues: 1 + (s.host.io_queues % 2) as u16,
        admin_timeout: TIMEOUT,
        ready_timeout: Some(TIMEOUT),
        shutdown_timeout: Some(TIMEOUT),
        default_max_transfer: 1 << 20,
        shadow_doorbells: s.host.shadow,
        batch_cq_doorbells: s.host.batch_cq,
        interrupts: false,
        streaming_sq: s.host.streaming,
        // No model's quirk: a hostile controller's resets stay fast.
        ready_check_delay: Duration::ZERO,
        init_delay: Duration::ZERO,
        medium_prio_sq: false,
        // A hostile HMPRE/HMMIN is given at most 1 MiB of the arena: the
        // Host Memory Buffer path runs without starving the queues.
        host_memory_max: 1 << 20,
        admin_observer: None,
    };
    macro_rules! failed {
        ($e:expr) => {
            io.report.errors.push(check_error(&$e))
        };
    }
    let ctrl = bounded(dev, "bring-up", || Controller::new(dev.clone(), mem, cfg));
    let mut ctrl = match ctrl {
        Ok(c) => c,
        Err(e) => return failed!(e),
    };
    io.report.up = true;
    let lba = match bounded(dev, "Identify Namespace", || ctrl.identify_namespace(1)) {
        Ok(ns) => ns.lba_size(),
        Err(e) => {
            failed!(e);
            0
        }
    };
    if let Err(e) = bounded(dev, "Identify active namespaces", || ctrl.active_namespaces()) {
        failed!(e);
    }
    let entries = 2 + s.host.queue_entries as u32 % 40;
    let mut qp = match bounded(dev, "create I/O queue pair", || ctrl.create_io_queue_pair(entries)) {
        Ok(q) => q,
        Err(e) => {
            failed!(e);
            return finish(dev, ctrl, io);
        }
    };
    let second = if s.host.second_queue {
        match bounded(dev, "second queue pair", || ctrl.create_io_queue_pair(entries)) {
            Ok(q) => Some(q),
            Err(e) => {
                failed!(e);
                None
            }
        }
    } else {
        None
    };
    if lba != 0 {
        batch(dev, &mut ctrl, &mut qp, s, lba, io);
    }
    if s.host.abort {
        let first = qp.outstanding_commands().next();
        if let Some((cid, _)) = first {
            let qid = qp.qid();
            if let Err(e) = bounded(dev, "Abort", || ctrl.abort(qid, cid, TIMEOUT)) {
                failed!(e);
            }
            poll(dev, &mut qp, io, 16);
        }
    }
    if s.host.reset || !io.outstanding.is_empty() {
        if let Err(e) = bounded(dev, "reset", || ctrl.reset(TIMEOUT)) {
            failed!(e);
        }
        match bounded(dev, "re-create I/O queue pair", || ctrl.recreate_io_queue_pair(qp, TIMEOUT)) {
            Ok((q, abandoned)) => {
                for t in abandoned {
                    io.done(dev, t, "re-creating the queue pair");
                    io.report.abandoned += 1;
                }
                qp = q;
                if lba != 0 {
                    batch(dev, &mut ctrl, &mut qp, s, lba, io);
                }
            }
            Err(e) => {
                failed!(e);
                drop(second);
                return finish(dev, ctrl, io);
            }
        }
    }
    if let Some(q) = second {
        if let Err(e) = bounded(dev, "delete second queue pair", || ctrl.delete_io_queue_pair(q)) {
            failed!(e);
        }
    }
    if s.host.delete {
        if let Err(e) = bounded(dev, "delete I/O queue pair", || ctrl.delete_io_queue_pair(qp)) {
            failed!(e);
        }
    } else {
        drop(qp);
    }
    finish(dev, ctrl, io)
}

fn finish(dev: &Hostile, ctrl: Controller<Hostile>, io: &mut Io) {
    if let Err(e) = bounded(dev, "shutdown", || ctrl.shutdown()) {
        io.report.errors.push(check_error(&e));
    }
}
