//! Submission and completion queue mechanics: rings in DMA memory, the
//! tail/head indices each side owns, the phase tag, and doorbells.
//! (NVMe 1.4c §4.1 "Submission Queue & Completion Queue Definition",
//! §4.6 completion entries, §3.1.24-25 doorbells.)
//!
//! Names follow the kernel's `drivers/nvme/host/pci.c`: `sq_tail`,
//! `last_sq_tail`, `cq_head`, `cq_phase` (the phase we expect next: it
//! starts at 1 over a zeroed queue and flips each time `cq_head` wraps).
//!
//! This file is the only code that touches ring slots and these indices:
//! the queue pair (`qpair.rs`) hands it entries to post and takes the
//! completions it reaps, so the benchmark, `trace` and the tests below all
//! run the same loops.

use crate::doorbell::ShadowSlot;
use nvme_hal::{CqRing, DmaRegion, RegisterWindow, RingCursor, RingEntry, SqRing};
use nvme_spec::cqe::{Cqe, CQE_SIZE};
use nvme_spec::sqe::{Sqe, SQE_SIZE};

// The rings' entry sizes are the specification's (NVMe 1.4c §4.2, §4.6).
const _: () = assert!(1 << 6 == SQE_SIZE && 1 << 4 == CQE_SIZE);

/// The host side of a submission queue: the host owns the tail, the
/// controller owns the head (and reports it in every completion).
pub struct SubmissionQueue {
    ring: SqRing,
    entries: u16,
    sq_tail: u16,
    /// Tail value last written to the doorbell; entries between it and
    /// `sq_tail` are posted but not yet visible to the controller.
    last_sq_tail: u16,
    /// Controller's head as last reported in a completion's SQ Head field.
    sq_head: u16,
    doorbell: usize,
    shadow: Option<ShadowSlot>,
}

impl SubmissionQueue {
    /// A queue of `entries` slots in `mem` (zeroed, >= entries * 64 bytes)
    /// whose tail doorbell is at register offset `doorbell`.
    pub fn new(mem: DmaRegion, entries: u16, doorbell: usize) -> Self {
        assert!(entries >= 2);
        let ring = SqRing::new(mem, entries as usize);
        SubmissionQueue { ring, entries, sq_tail: 0, last_sq_tail: 0, sq_head: 0, doorbell, shadow: None }
    }
    /// Use a shadow doorbell slot from now on.
    pub fn set_shadow(&mut self, s: Option<ShadowSlot>) {
        self.shadow = s;
    }
    /// Slots in the ring.
    pub fn entries(&self) -> u16 {
        self.entries
    }
    /// Current tail (next slot the host writes).
    pub fn tail(&self) -> u16 {
        self.sq_tail
    }
    /// Head as last reported by the controller.
    pub fn head(&self) -> u16 {
        self.sq_head
    }
    /// The ring's memory (for tracing and for the controller side of tests).
    pub fn memory(&self) -> &DmaRegion {
        self.ring.region()
    }
    /// Register offset of the tail doorbell.
    pub fn doorbell_offset(&self) -> usize {
        self.doorbell
    }
    /// The entry in `slot` as it was posted (tracing, tests).
    pub fn entry(&self, slot: u16) -> Sqe {
        Sqe::from_dwords(self.ring.read_dwords16(slot as usize))
    }
    /// True when one more entry would make the tail catch up with the head
    /// (a ring of N slots holds at most N-1 entries).
    #[inline]
    pub fn is_full(&self) -> bool {
        let next = self.sq_tail + 1;
        (if next == self.entries { 0 } else { next }) == self.sq_head
    }
    /// Write `sqe` into the tail slot and advance the tail: a batch of one.
    /// The controller does not see it until [`ring_doorbell`](Self::ring_doorbell).
    /// Returns the slot used. The caller checks [`is_full`](Self::is_full).
    #[inline]
    pub fn post(&mut self, sqe: &Sqe) -> u16 {
        debug_assert!(!self.is_full());
        let slot = self.sq_tail;
        let mut entry = Some(sqe.to_qwords());
        self.post_batch::<false>(1, || entry.take());
        slot
    }
    /// Post up to `max` entries, each the next one `entry()` yields (an SQE
    /// as eight qwords, [`Sqe::to_qwords`]), from the tail on; stop early at
    /// the first `None`. Returns how many were posted. No doorbell: ring it
    /// once for the batch. The caller knows `max` slots are free (the queue
    /// pair: a free CID implies a free slot). The tail stays in a register
    /// for the pass and is stored once.
    ///
    /// `STREAMING` (a constant of each copy of the loop, so neither copy
    /// pays for the other): write the entries with non-temporal stores
    /// (x86 MOVNTI), which write the line without first taking it back from
    /// the controller that last read it, and fence them once at the end.
    #[inline(always)]
    pub fn post_batch<const STREAMING: bool>(&mut self, max: usize, mut entry: impl FnMut() -> Option<[u64; 8]>) -> usize {
        // Counted down: one value live in the loop, not a count and its bound.
        let mut left = max;
        self.post_each::<STREAMING>(|| {
            if left == 0 {
                return None;
            }
            let e = entry()?;
            left -= 1;
            Some(e)
        });
        max - left
    }
    /// [`post_batch`](Self::post_batch) with no bound of its own: post
    /// each entry `entry()` yields until it yields `None`, which it must do
    /// before the free slots run out (the queue pair's commands are bounded
    /// by its free CIDs, and it counts them itself: the loop keeps no count).
    #[inline(always)]
    pub fn post_each<const STREAMING: bool>(&mut self, mut entry: impl FnMut() -> Option<[u64; 8]>) {
        self.post_with::<STREAMING, ()>(|tail| {
            while let Some(e) = entry() {
                tail.push(e);
            }
        });
    }
    /// A batch the caller writes itself: `pass(tail)` pushes each entry
    /// ([`SqTail::push`]), no more than the free slots (the caller's bound,
    /// as for [`post_each`](Self::post_each)); then the tail is stored once
    /// (streaming stores fenced). Returns how many entries were pushed,
    /// from how far the tail moved (the loop keeps no count), and what
    /// `pass` returned.
    #[inline(always)]
    pub fn post_with<const STREAMING: bool, R>(&mut self, pass: impl FnOnce(&mut SqTail<'_, STREAMING>) -> R) -> (usize, R) {
        let start = self.sq_tail;
        // The tail as a cursor: always inside the ring, so the stores check nothing.
        let mut tail = SqTail { cursor: self.ring.view().cursor(start as usize) };
        let r = pass(&mut tail);
        let end = tail.cursor.index() as u16;
        if STREAMING && end != start {
            // Streaming stores are weakly ordered (the Release fence of
            // ring_doorbell does not order them): the entries must be
            // visible before the doorbell (any later store) says they exist.
            nvme_hal::stream_fence();
        }
        self.sq_tail = end;
        // Fewer than `entries` were pushed: the distance is unambiguous.
        let posted = if end >= start { end - start } else { end + self.entries - start };
        (posted as usize, r)
    }
    /// True when posted entries wait for a doorbell write.
    #[inline]
    pub fn needs_doorbell(&self) -> bool {
        self.sq_tail != self.last_sq_tail
    }
    /// Tell the controller about every entry posted since the last doorbell:
    /// one write for the whole batch. Returns true when it was an MMIO write
    /// (always, unless a shadow doorbell made it unnecessary).
    #[inline]
    pub fn ring_doorbell<R: RegisterWindow + ?Sized>(&mut self, regs: &R) -> bool {
        // Do not reorder the entry stores after the doorbell store: the
        // controller may fetch the entries as soon as it sees the new tail.
        nvme_hal::barrier::before_doorbell();
        let mmio = match &self.shadow {
            Some(s) => s.update(self.sq_tail, self.last_sq_tail),
            None => true,
        };
        if mmio {
            regs.write32(self.doorbell, self.sq_tail as u32);
        }
        self.last_sq_tail = self.sq_tail;
        mmio
    }
    /// [`SubmissionQueue::ring_doorbell`], and with shadow doorbells on
    /// both queues [`CompletionQueue::ring_doorbell`] too: the two shadow
    /// stores share one full fence (see [`ShadowSlot::update_pair`]).
    /// Without them only the submission doorbell is written (each MMIO
    /// write costs the same alone). Returns whether the submission doorbell
    /// was an MMIO write, and for the completion doorbell None when it was
    /// left alone, else whether it was an MMIO write.
    #[inline(never)] // once per batch; keeps QueuePair::ring small enough to inline
    pub fn ring_doorbell_with<R: RegisterWindow + ?Sized>(&mut self, cq: &mut CompletionQueue, regs: &R) -> (bool, Option<bool>) {
        let (Some(s), Some(c)) = (&self.shadow, &cq.shadow) else {
            return (self.ring_doorbell(regs), None);
        };
        // Entry stores, and our loads of consumed completions, before the
        // doorbell stores (as in the two ring_doorbell).
        nvme_hal::barrier::before_doorbell();
        let (sq_mmio, cq_mmio) =
            ShadowSlot::update_pair((s, self.sq_tail, self.last_sq_tail), (c, cq.cq_head, cq.last_cq_head));
        if sq_mmio {
            regs.write32(self.doorbell, self.sq_tail as u32);
        }
        if cq_mmio {
            regs.write32(cq.doorbell, cq.cq_head as u32);
        }
        self.last_sq_tail = self.sq_tail;
        cq.last_cq_head = cq.cq_head;
        (sq_mmio, Some(cq_mmio))
    }
    /// Record the controller's head from a completion's SQ Head field. A
    /// head outside the ring is the controller's error and is not taken
    /// (`is_full` would never see the ring full again).
    #[inline(always)]
    pub fn update_head(&mut self, head: u16) {
        if head < self.entries {
            self.sq_head = head;
        }
    }
}

/// The tail of a submission queue during a [`SubmissionQueue::post_with`]
/// batch: a cursor always inside the ring, so its stores check nothing.
/// `STREAMING`: the entries are written with streaming stores (see
/// [`SubmissionQueue::post_batch`]), a constant of each copy of the loop.
pub struct SqTail<'a, const STREAMING: bool> {
    cursor: RingCursor<'a, 6>,
}

impl<const STREAMING: bool> SqTail<'_, STREAMING> {
    /// Write `e` (an SQE as eight qwords, [`Sqe::to_qwords`]) at the tail
    /// and advance it. The caller knows the slot is free.
    #[inline(always)]
    pub fn push(&mut self, e: [u64; 8]) {
        if STREAMING {
            self.cursor.entry().write64_stream(e);
        } else {
            self.cursor.entry().write64(e);
        }
        self.cursor.advance();
    }
}

/// The phase tag where the controller puts it: bit 16 of dword 3.
const PHASE_BIT: u32 = 1 << 16;

/// The host side of a completion queue: the controller owns the tail (it
/// writes entries), the host owns the head.
pub struct CompletionQueue {
    ring: CqRing,
    entries: u16,
    cq_head: u16,
    /// The phase tag a *new* entry carries. 1 on the first lap over a zeroed
    /// queue; flipped each time the head wraps to slot 0.
    cq_phase: bool,
    /// Head value last written to the doorbell.
    last_cq_head: u16,
    doorbell: usize,
    shadow: Option<ShadowSlot>,
}

/// A new completion entry, as [`CompletionQueue::reap`] hands it out: its
/// status/phase dword is loaded, the others are loaded when asked for (and
/// so after it), so the hot path reads only the dwords it uses. Not a
/// reference into the ring: the entry's place in it.
#[derive(Clone, Copy)]
pub struct NewCqe<'a> {
    entry: RingEntry<'a, 4>,
    dw3: u32,
}

impl NewCqe<'_> {
    /// Dword 0: the command specific result.
    #[inline(always)]
    pub fn dw0(&self) -> u32 {
        self.entry.read_dw::<0>()
    }
    /// Dword 2: SQ Identifier (bits 31:16) and SQ Head Pointer (15:0).
    #[inline(always)]
    pub fn dw2(&self) -> u32 {
        self.entry.read_dw::<2>()
    }
    /// Dword 3, loaded first: status and phase (31:16), CID (15:0).
    #[inline(always)]
    pub fn dw3(&self) -> u32 {
        self.dw3
    }
    /// The SQ Identifier (dword 2, bits 31:16) alone.
    #[inline(always)]
    pub fn sq_id(&self) -> u16 {
        self.entry.read_w::<5>()
    }
    /// The whole entry, decoded.
    pub fn cqe(&self) -> Cqe {
        let [dw0, dw1, dw2] = self.entry.read_dw012();
        Cqe::from_dwords([dw0, dw1, dw2, self.dw3])
    }
}

impl CompletionQueue {
    /// A queue of `entries` slots in `mem` (zeroed, >= entries * 16 bytes)
    /// whose head doorbell is at register offset `doorbell`.
    pub fn new(mem: DmaRegion, entries: u16, doorbell: usize) -> Self {
        assert!(entries >= 2);
        let ring = CqRing::new(mem, entries as usize);
        CompletionQueue { ring, entries, cq_head: 0, cq_phase: true, last_cq_head: 0, doorbell, shadow: None }
    }
    /// Use a shadow doorbell slot from now on.
    pub fn set_shadow(&mut self, s: Option<ShadowSlot>) {
        self.shadow = s;
    }
    /// Slots in the ring.
    pub fn entries(&self) -> u16 {
        self.entries
    }
    /// Current head (next slot the host reads).
    pub fn head(&self) -> u16 {
        self.cq_head
    }
    /// The phase tag the next new entry will carry.
    pub fn phase(&self) -> bool {
        self.cq_phase
    }
    /// The ring's memory.
    pub fn memory(&self) -> &DmaRegion {
        self.ring.region()
    }
    /// Register offset of the head doorbell.
    pub fn doorbell_offset(&self) -> usize {
        self.doorbell
    }
    /// The entry in `slot`, new or not, without taking it (tests).
    pub fn entry(&self, slot: u16) -> Cqe {
        let [dw0, dw1, dw2] = self.ring.read_dw012(slot as usize);
        Cqe::from_dwords([dw0, dw1, dw2, self.ring.load_dw3_acquire(slot as usize)])
    }
    /// Is there a new entry at the head? Only the dword holding the phase
    /// tag is loaded (Acquire), so a stale entry costs one load.
    #[inline]
    pub fn cqe_pending(&self) -> bool {
        is_new(self.ring.load_dw3_acquire(self.cq_head as usize), self.cq_phase as u32 * PHASE_BIT)
    }
    /// Are `n` new entries waiting from the head on? Only the last of them
    /// is looked at (one Acquire load): the controller posts entries in
    /// slot order, so the last being new means the ones before it are,
    /// and a reap that finds one of them not yet visible simply takes
    /// fewer. `n` of 0 or 1 is [`cqe_pending`](Self::cqe_pending); more
    /// than the ring holds is never ready.
    #[inline]
    pub fn ready(&self, n: usize) -> bool {
        let entries = self.entries as usize;
        if n <= 1 {
            return self.cqe_pending();
        }
        if n > entries {
            return false;
        }
        let mut slot = self.cq_head as usize + n - 1;
        let mut phase = self.cq_phase as u32 * PHASE_BIT;
        if slot >= entries {
            slot -= entries;
            phase ^= PHASE_BIT;
        }
        is_new(self.ring.load_dw3_acquire(slot), phase)
    }
    /// Start loading the entry at the head, so that the miss (the line comes
    /// from the controller's side) overlaps other work. A hint only.
    #[inline]
    pub fn prefetch_head(&self) {
        self.ring.view().prefetch_read(self.cq_head as usize);
    }
    /// Take the entry at the head if it is new, and advance the head:
    /// [`reap`](Self::reap) of at most one.
    #[inline]
    pub fn pop(&mut self) -> Option<Cqe> {
        let mut got = None;
        self.reap(1, |_, e| {
            got = Some(e.cqe());
            true
        });
        got
    }
    /// Take the new entries from the head on, in order, until the first
    /// that is not new or until `max` were taken: `f(n, entry)` for each,
    /// `n` counting those taken so far (so `n < max`). `f` returns false for
    /// an entry it refuses (a completion that is not ours): the head moves
    /// past it, but it does not count toward `max`. Returns the count. The
    /// head and the expected phase stay in registers for the pass and are
    /// stored once. No doorbell: ring it once for the pass.
    #[inline(always)]
    pub fn reap(&mut self, max: usize, mut f: impl FnMut(usize, NewCqe<'_>) -> bool) -> usize {
        // The head as a cursor: always inside the ring, so the loads check nothing.
        let mut head = self.ring.view().cursor(self.cq_head as usize);
        let mut phase = self.cq_phase as u32 * PHASE_BIT;
        let mut n = 0;
        while n < max {
            // The dword holding the phase tag first (Acquire): the
            // controller writes it last. NewCqe loads the rest after it.
            let entry = head.entry();
            let dw3 = entry.load_dw3_acquire();
            if !is_new(dw3, phase) {
                break;
            }
            nvme_hal::barrier::after_phase();
            phase = advance_cq_head(&mut head, phase);
            if f(n, NewCqe { entry, dw3 }) {
                n += 1;
            }
        }
        self.cq_head = head.index() as u16;
        self.cq_phase = phase != 0;
        n
    }
    /// [`reap`](Self::reap) into a slice: the new entries from the head
    /// on fill `out` in order, `f(slot, entry)` for each, until the first
    /// that is not new or until every slot is filled. `f` returns false for
    /// an entry it refuses (the head moves past it, the slot stays for the
    /// next one). Returns how many slots were filled (a prefix of `out`).
    /// The loop walks the slots by address, its end the slice's: no count
    /// and no index beside the head.
    #[inline(always)]
    pub fn reap_into<T>(&mut self, out: &mut [T], mut f: impl FnMut(&mut T, NewCqe<'_>) -> bool) -> usize {
        let mut head = self.ring.view().cursor(self.cq_head as usize);
        let mut phase = self.cq_phase as u32 * PHASE_BIT;
        let len = out.len();
        let mut slots = out.iter_mut();
        // The slot taken from `slots` but left empty (0 or 1).
        let mut empty = 0;
        'fill: for o in slots.by_ref() {
            loop {
                // As in reap: the phase dword first, the rest after it.
                let entry = head.entry();
                let dw3 = entry.load_dw3_acquire();
                if !is_new(dw3, phase) {
                    empty = 1;
                    break 'fill;
                }
                nvme_hal::barrier::after_phase();
                phase = advance_cq_head(&mut head, phase);
                if f(&mut *o, NewCqe { entry, dw3 }) {
                    break;
                }
            }
        }
        self.cq_head = head.index() as u16;
        self.cq_phase = phase != 0;
        len - slots.len() - empty
    }
    /// The SQ Head Pointer (dword 2, bits 15:0) of the entry just before
    /// the head: the last one taken, still ours until the completion
    /// doorbell gives its slot back.
    #[inline]
    pub fn last_sq_head(&self) -> u16 {
        let last = if self.cq_head == 0 { self.entries - 1 } else { self.cq_head - 1 };
        self.ring.view().read_dw::<2>(last as usize) as u16
    }
    /// True when consumed entries have not been reported to the controller.
    #[inline]
    pub fn needs_doorbell(&self) -> bool {
        self.cq_head != self.last_cq_head
    }
    /// Consumed entries not yet reported to the controller.
    #[inline]
    pub fn unreported(&self) -> u16 {
        if self.cq_head >= self.last_cq_head {
            self.cq_head - self.last_cq_head
        } else {
            self.cq_head + self.entries - self.last_cq_head
        }
    }
    /// Tell the controller the slots up to the head may be reused: one
    /// write per completion pass, not per entry. Returns true when it was an
    /// MMIO write.
    #[inline]
    pub fn ring_doorbell<R: RegisterWindow + ?Sized>(&mut self, regs: &R) -> bool {
        // Our loads of the consumed entries must complete before the
        // controller may overwrite those slots.
        nvme_hal::barrier::before_doorbell();
        let mmio = match &self.shadow {
            Some(s) => s.update(self.cq_head, self.last_cq_head),
            None => true,
        };
        if mmio {
            regs.write32(self.doorbell, self.cq_head as u32);
        }
        self.last_cq_head = self.cq_head;
        mmio
    }
}

/// Is an entry whose dword 3 is `dw3` new, when the phase expected is
/// `phase` (0 or [`PHASE_BIT`])?
#[inline(always)]
fn is_new(dw3: u32, phase: u32) -> bool {
    (dw3 ^ phase) & PHASE_BIT == 0
}

/// Move `head` to the next slot and return the phase expected there (as a
/// dword-3 bit): wrapping to slot 0 flips it.
#[inline(always)]
fn advance_cq_head(head: &mut RingCursor<'_, 4>, phase: u32) -> u32 {
    if head.advance() {
        phase ^ PHASE_BIT
    } else {
        phase
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use nvme_hal::{HostMemory, MemRegisters};
    use nvme_spec::CqeStatus;

    /// A fake controller that posts completions into the CQ memory the way
    /// hardware does: dwords 0-2, then the phase/status dword, flipping its
    /// phase each time its tail wraps.
    struct FakeDevice {
        tail: u16,
        phase: bool,
    }
    impl FakeDevice {
        fn post(&mut self, mem: &DmaRegion, entries: u16, cid: u16) {
            let off = self.tail as usize * CQE_SIZE;
            mem.write_dwords3(off, [cid as u32, 0, 1 << 16]);
            let st = CqeStatus::new().with_p(self.phase);
            mem.store32_release(off + 12, cid as u32 | (st.into_bits() as u32) << 16);
            self.tail += 1;
            if self.tail == entries {
                self.tail = 0;
                self.phase = !self.phase;
            }
        }
    }

    fn phase_wrap(entries: u16, laps: usize) {
        let mem = HostMemory::plain().map(entries as usize * CQE_SIZE).unwrap();
        let regs = MemRegisters::new(0x2000);
        let mut cq = CompletionQueue::new(mem.clone(), entries, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        assert!(cq.phase(), "phase starts at 1 over a zeroed queue");
        let mut expected_phase = true;
        let mut cid = 0u16;
        for i in 0..laps * entries as usize {
            assert!(!cq.cqe_pending(), "nothing new before the device posts");
            assert!(cq.pop().is_none());
            dev.post(&mem, entries, cid);
            assert!(cq.cqe_pending());
            let head_before = cq.head();
            let c = cq.pop().expect("new entry");
            assert_eq!(c.cid, cid);
            assert_eq!(c.phase(), expected_phase, "entry {i} carries the lap's phase");
            if head_before == entries - 1 {
                assert_eq!(cq.head(), 0, "head wraps");
                expected_phase = !expected_phase;
                assert_eq!(cq.phase(), expected_phase, "phase flips exactly at the wrap");
            } else {
                assert_eq!(cq.phase(), expected_phase, "no flip mid-lap");
            }
            cq.ring_doorbell(&regs);
            assert_eq!(regs.read32(0x1004), cq.head() as u32);
            cid = cid.wrapping_add(1);
        }
    }

    #[test]
    fn phase_wrap_size_2() {
        phase_wrap(2, 1000);
    }
    #[test]
    fn phase_wrap_size_3() {
        phase_wrap(3, 1000);
    }
    #[test]
    fn phase_wrap_size_1024() {
        phase_wrap(1024, 20);
    }

    #[test]
    fn ready_looks_at_the_nth_entry_across_the_wrap() {
        // A 4-entry ring: the device posts 3, the host takes 2 (head at
        // slot 2), the device posts 2 more (slots 3 and 0, the second in
        // the next lap's phase).
        let entries = 4u16;
        let mem = HostMemory::plain().map(entries as usize * CQE_SIZE).unwrap();
        let mut cq = CompletionQueue::new(mem.clone(), entries, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        assert!(!cq.ready(1) && !cq.ready(2));
        for cid in 0..3 {
            dev.post(&mem, entries, cid);
        }
        assert!(cq.ready(3) && !cq.ready(4) && !cq.ready(5));
        assert_eq!(cq.reap(2, |_, _| true), 2);
        assert!(cq.ready(1) && !cq.ready(2));
        dev.post(&mem, entries, 3);
        assert!(cq.ready(2) && !cq.ready(3), "slot 0 still holds the first lap's entry");
        dev.post(&mem, entries, 4);
        assert!(cq.ready(3));
        assert_eq!(cq.reap(8, |_, _| true), 3);
        assert!(!cq.ready(1));
    }

    #[test]
    fn batched_completions_one_doorbell() {
        let mem = HostMemory::plain().map(4096).unwrap();
        let regs = MemRegisters::new(0x2000);
        let mut cq = CompletionQueue::new(mem.clone(), 8, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        for c in 0..5 {
            dev.post(&mem, 8, c);
        }
        let got: Vec<u16> = std::iter::from_fn(|| cq.pop()).map(|c| c.cid).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(cq.needs_doorbell());
        cq.ring_doorbell(&regs);
        assert!(!cq.needs_doorbell());
        assert_eq!(regs.read32(0x1004), 5);
    }

    #[test]
    fn an_sq_head_outside_the_ring_is_not_taken() {
        let mem = HostMemory::plain().map(8 * SQE_SIZE).unwrap();
        let mut sq = SubmissionQueue::new(mem, 8, 0x1008);
        sq.update_head(7);
        assert_eq!(sq.head(), 7);
        for bad in [8, 9, 0xffff] {
            sq.update_head(bad);
            assert_eq!(sq.head(), 7, "head {bad} is outside a ring of 8");
        }
    }

    #[test]
    fn sq_tail_wraps_and_batches_doorbells() {
        for entries in [2u16, 3, 1024] {
            let mem = HostMemory::plain().map(entries as usize * SQE_SIZE).unwrap();
            let regs = MemRegisters::new(0x2000);
            let mut sq = SubmissionQueue::new(mem.clone(), entries, 0x1008);
            for lap in 0..5u32 {
                // fill to N-1, ring once, "device" consumes all
                let mut posted = 0;
                while !sq.is_full() {
                    let mut s = Sqe::default();
                    s.set_cid(posted);
                    let slot = sq.post(&s);
                    let back = sq.entry(slot);
                    assert_eq!(back.cid(), posted);
                    posted += 1;
                }
                assert_eq!(posted, entries - 1, "a ring of N holds N-1 (lap {lap})");
                assert!(sq.needs_doorbell());
                sq.ring_doorbell(&regs);
                assert_eq!(regs.read32(0x1008), sq.tail() as u32);
                sq.update_head(sq.tail());
                assert!(!sq.is_full());
            }
        }
    }

    /// Registers that count their writes (to see "one doorbell per batch").
    struct CountingRegs {
        regs: MemRegisters,
        writes: std::sync::atomic::AtomicUsize,
    }
    impl RegisterWindow for CountingRegs {
        fn read32(&self, offset: usize) -> u32 {
            self.regs.read32(offset)
        }
        fn write32(&self, offset: usize, value: u32) {
            self.writes.fetch_add(1, Ordering::Relaxed);
            self.regs.write32(offset, value)
        }
        fn len(&self) -> usize {
            self.regs.len()
        }
    }
    fn counting_regs() -> CountingRegs {
        CountingRegs { regs: MemRegisters::new(0x2000), writes: 0.into() }
    }

    fn entry_with_cid(cid: u16) -> [u64; 8] {
        let mut s = Sqe::default();
        s.set_cid(cid);
        s.to_qwords()
    }

    fn post_batch_wraps_with_one_doorbell<const STREAMING: bool>() {
        let mem = HostMemory::plain().map(8 * SQE_SIZE).unwrap();
        let regs = counting_regs();
        let mut sq = SubmissionQueue::new(mem.clone(), 8, 0x1008);
        // Move the tail to slot 5, as if the controller had consumed 5.
        assert_eq!(sq.post_batch::<STREAMING>(5, || Some(entry_with_cid(99))), 5);
        sq.ring_doorbell(&regs);
        sq.update_head(5);
        let before = regs.writes.load(Ordering::Relaxed);
        // Seven entries from slot 5: 5, 6, 7, then wrap to 0, 1, 2, 3.
        let mut cid = 0;
        let posted = sq.post_batch::<STREAMING>(7, || {
            cid += 1;
            Some(entry_with_cid(cid))
        });
        assert_eq!(posted, 7);
        assert_eq!(sq.tail(), 4, "the tail wrapped");
        assert!(sq.is_full(), "7 entries fill a ring of 8");
        for (i, slot) in [5, 6, 7, 0, 1, 2, 3].into_iter().enumerate() {
            let back = Sqe::from_dwords(mem.read_dwords16(slot * SQE_SIZE));
            assert_eq!(back.cid(), i as u16 + 1, "slot {slot}");
        }
        assert_eq!(regs.writes.load(Ordering::Relaxed), before, "posting writes no register");
        assert!(sq.needs_doorbell());
        assert!(sq.ring_doorbell(&regs));
        assert_eq!(regs.writes.load(Ordering::Relaxed), before + 1, "one doorbell for the batch");
        assert_eq!(regs.read32(0x1008), 4);
        assert!(!sq.needs_doorbell());
    }

    #[test]
    fn post_batch_posts_many_then_one_doorbell_across_the_wrap() {
        post_batch_wraps_with_one_doorbell::<false>();
        post_batch_wraps_with_one_doorbell::<true>();
    }

    #[test]
    fn post_batch_stops_at_max_or_at_the_first_none() {
        let mem = HostMemory::plain().map(8 * SQE_SIZE).unwrap();
        let mut sq = SubmissionQueue::new(mem, 8, 0x1008);
        assert_eq!(sq.post_batch::<false>(3, || Some(entry_with_cid(1))), 3, "bounded by max");
        let mut left = 2;
        let n = sq.post_batch::<false>(4, || (left > 0).then(|| { left -= 1; entry_with_cid(2) }));
        assert_eq!(n, 2, "ends at the first None");
        assert_eq!(sq.tail(), 5);
        assert_eq!(sq.post_batch::<false>(0, || unreachable!()), 0);
        assert_eq!(sq.post(&Sqe::default()), 5, "post is a batch of one at the tail");
        assert_eq!(sq.tail(), 6);
    }

    fn cids_of(cq: &mut CompletionQueue, max: usize) -> Vec<u16> {
        let mut got = Vec::new();
        let n = cq.reap(max, |i, e| {
            assert_eq!(i, got.len());
            got.push(e.dw3() as u16);
            true
        });
        assert_eq!(n, got.len());
        got
    }

    #[test]
    fn reap_is_bounded_by_max_and_resumes_where_it_stopped() {
        let mem = HostMemory::plain().map(8 * CQE_SIZE).unwrap();
        let mut cq = CompletionQueue::new(mem.clone(), 8, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        for c in 0..5 {
            dev.post(&mem, 8, c);
        }
        assert_eq!(cids_of(&mut cq, 3), vec![0, 1, 2]);
        assert_eq!(cq.head(), 3);
        assert!(cq.cqe_pending());
        assert_eq!(cids_of(&mut cq, 10), vec![3, 4]);
        assert_eq!(cq.head(), 5);
        assert_eq!(cids_of(&mut cq, 10), Vec::<u16>::new());
        assert_eq!(cids_of(&mut cq, 0), Vec::<u16>::new());
    }

    #[test]
    fn reap_flips_the_phase_at_the_wrap() {
        let mem = HostMemory::plain().map(4 * CQE_SIZE).unwrap();
        let mut cq = CompletionQueue::new(mem.clone(), 4, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        for c in 0..3 {
            dev.post(&mem, 4, c);
        }
        assert_eq!(cids_of(&mut cq, 8), vec![0, 1, 2]);
        // Slot 3 with phase 1, then slots 0-2 with phase 0: one pass across the wrap.
        for c in 3..7 {
            dev.post(&mem, 4, c);
        }
        let mut phases = Vec::new();
        cq.reap(8, |_, e| {
            phases.push(e.cqe().phase());
            true
        });
        assert_eq!(phases, vec![true, false, false, false]);
        assert_eq!(cq.head(), 3);
        assert!(!cq.phase(), "the expected phase flipped once");
        assert!(!cq.cqe_pending(), "slot 3 still holds phase 1 from the last lap");
    }

    #[test]
    fn reap_stops_at_the_first_entry_that_is_not_new() {
        let mem = HostMemory::plain().map(8 * CQE_SIZE).unwrap();
        let mut cq = CompletionQueue::new(mem.clone(), 8, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        dev.post(&mem, 8, 0);
        dev.post(&mem, 8, 1);
        // A new-looking entry past an old one (slot 2 still has phase 0).
        dev.tail = 3;
        dev.post(&mem, 8, 3);
        assert_eq!(cids_of(&mut cq, 8), vec![0, 1]);
        assert_eq!(cq.head(), 2);
        assert!(cq.phase());
    }

    #[test]
    fn refused_entries_are_consumed_but_not_counted() {
        let mem = HostMemory::plain().map(8 * CQE_SIZE).unwrap();
        let mut cq = CompletionQueue::new(mem.clone(), 8, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        for c in 0..4 {
            dev.post(&mem, 8, c);
        }
        let mut taken = Vec::new();
        let n = cq.reap(2, |i, e| {
            let cid = e.dw3() as u16;
            if cid % 2 == 1 {
                return false;
            }
            assert_eq!(i, taken.len());
            taken.push(cid);
            true
        });
        assert_eq!((n, taken), (2, vec![0, 2]));
        assert_eq!(cq.head(), 3, "the refused entry at slot 1 is behind the head");
        assert_eq!(cq.pop().map(|c| c.cid), Some(3));
        assert_eq!(cq.pop().map(|c| c.cid), None);
    }

    #[test]
    fn reap_into_fills_a_prefix_and_a_refused_entry_keeps_no_slot() {
        let mem = HostMemory::plain().map(4 * CQE_SIZE).unwrap();
        let mut cq = CompletionQueue::new(mem.clone(), 4, 0x1004);
        let mut dev = FakeDevice { tail: 0, phase: true };
        for c in 0..3 {
            dev.post(&mem, 4, c);
        }
        // Slot by slot across the wrap, the odd CIDs refused.
        let mut out = [0u16; 8];
        let fill = |o: &mut u16, e: NewCqe<'_>| {
            let cid = e.dw3() as u16;
            *o = cid + 100;
            cid % 2 == 0
        };
        assert_eq!(cq.reap_into(&mut out[..1], fill), 1, "bounded by the slice");
        assert_eq!(cq.head(), 1);
        assert_eq!(cq.reap_into(&mut out[1..], fill), 1, "ends at the first entry that is not new");
        assert_eq!(out[..3], [100, 102, 0], "the refused CID 1 was overwritten by CID 2 in its slot");
        assert_eq!(cq.head(), 3);
        for c in 3..6 {
            dev.post(&mem, 4, c);
        }
        let mut out = [0u16; 8];
        assert_eq!(cq.reap_into(&mut out, fill), 1, "CID 4 at slot 0 of the next lap");
        assert_eq!((out[0], cq.head(), cq.phase()), (104, 2, false));
        assert_eq!(cq.reap_into(&mut out, |_, _| true), 0, "nothing new");
        assert_eq!(cq.reap_into(&mut [0u16; 0], |_, _| unreachable!()), 0);
    }
}
