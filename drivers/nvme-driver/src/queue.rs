//! Submission and completion queue mechanics: rings in DMA memory, the
//! tail/head indices each side owns, the phase tag, and doorbells.
//! (NVMe 1.4c §4.1 "Submission Queue & Completion Queue Definition",
//! §4.6 completion entries, §3.1.24-25 doorbells.)
//!
//! Names follow the kernel's `drivers/nvme/host/pci.c`: `sq_tail`,
//! `last_sq_tail`, `cq_head`, `cq_phase` (the phase we expect next: it
//! starts at 1 over a zeroed queue and flips each time `cq_head` wraps).

use crate::doorbell::ShadowSlot;
use nvme_hal::{CqRing, DmaRegion, RegisterWindow, SqRing};
use nvme_spec::cqe::{Cqe, CQE_SIZE};
use nvme_spec::sqe::{Sqe, SQE_SIZE};
use std::sync::atomic::{fence, Ordering};

// The rings' entry sizes are the specification's (NVMe 1.4c §4.2, §4.6).
const _: () = assert!(1 << 6 == SQE_SIZE && 1 << 4 == CQE_SIZE);

/// The host side of a submission queue: the host owns the tail, the
/// controller owns the head (and reports it in every completion).
pub struct SubmissionQueue {
    pub(crate) ring: SqRing,
    entries: u16,
    pub(crate) sq_tail: u16,
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
    /// True when one more entry would make the tail catch up with the head
    /// (a ring of N slots holds at most N-1 entries).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.next(self.sq_tail) == self.sq_head
    }
    #[inline]
    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.entries {
            0
        } else {
            i + 1
        }
    }
    /// Write `sqe` into the tail slot and advance the tail. The controller
    /// does not see it until [`ring_doorbell`](Self::ring_doorbell).
    /// Returns the slot used. The caller checks [`is_full`](Self::is_full).
    #[inline]
    pub fn post(&mut self, sqe: &Sqe) -> u16 {
        debug_assert!(!self.is_full());
        let slot = self.sq_tail;
        self.ring.write64(slot as usize, sqe.to_qwords());
        self.sq_tail = self.next(slot);
        slot
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
        fence(Ordering::Release);
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
        fence(Ordering::Release);
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

/// The host side of a completion queue: the controller owns the tail (it
/// writes entries), the host owns the head.
pub struct CompletionQueue {
    pub(crate) ring: CqRing,
    entries: u16,
    pub(crate) cq_head: u16,
    /// The phase tag a *new* entry carries. 1 on the first lap over a zeroed
    /// queue; flipped each time the head wraps to slot 0.
    pub(crate) cq_phase: bool,
    /// Head value last written to the doorbell.
    last_cq_head: u16,
    doorbell: usize,
    shadow: Option<ShadowSlot>,
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
    /// Is there a new entry at the head? Only the dword holding the phase
    /// tag is loaded (Acquire), so a stale entry costs one load.
    #[inline]
    pub fn cqe_pending(&self) -> bool {
        let dw3 = self.ring.load_dw3_acquire(self.cq_head as usize);
        (dw3 >> 16) & 1 == self.cq_phase as u32
    }
    /// Take the entry at the head if it is new, and advance the head.
    #[inline]
    pub fn pop(&mut self) -> Option<Cqe> {
        let head = self.cq_head as usize;
        // Load the phase/status dword first (Acquire), and only then the rest
        // of the entry: the controller writes the phase last.
        let dw3 = self.ring.load_dw3_acquire(head);
        if (dw3 >> 16) & 1 != self.cq_phase as u32 {
            return None;
        }
        let [dw0, dw1, dw2] = self.ring.read_dw012(head);
        self.advance_cq_head();
        Some(Cqe::from_dwords([dw0, dw1, dw2, dw3]))
    }
    /// Move the head one slot; wrapping to slot 0 flips the expected phase.
    #[inline]
    pub fn advance_cq_head(&mut self) {
        self.cq_head += 1;
        if self.cq_head == self.entries {
            self.cq_head = 0;
            self.cq_phase = !self.cq_phase;
        }
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
        fence(Ordering::Release);
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

#[cfg(test)]
mod tests {
    use super::*;
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
                    let back = Sqe::from_dwords(mem.read_dwords16(slot as usize * SQE_SIZE));
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
}
