//! Command identifiers: a free list of CIDs and what each outstanding one
//! stands for. O(1) allocate and release, no allocation after creation.
//! A completion whose CID is not outstanding is rejected, as the kernel's
//! `nvme_handle_cqe` does ("invalid id completed").
//!
//! Layout: one array of 16-byte slots, indexed by CID. Slot `i` holds CID
//! `i`'s state (tag, busy) and, in what would be padding, entry `i` of the
//! LIFO stack of free CIDs (`slots[..top].free`). One array means one base
//! address and one length for the hot loops to keep in registers, and one
//! bounds check covers both uses. Its length is a power of two (CIDs past
//! the capacity are never handed out), so an index masked with `len - 1`
//! is in bounds without a check: the hot loops mask the free-stack top and
//! the CIDs taken from the stack. A completion's CID is range-checked as
//! the kernel's `nvme_handle_cqe` does, by the array's own bounds check:
//! slots past the capacity are never busy, so their CIDs are rejected.

/// Per-command state kept while the command is outstanding, plus one entry
/// of the free-CID stack.
#[derive(Clone, Copy, Debug, Default)]
pub struct CidSlot {
    /// The caller's tag, handed back with the completion.
    pub tag: u64,
    /// Outstanding right now.
    pub busy: bool,
    /// Free-stack entry `i` (meaningful for `i < top`): a free CID.
    free: u16,
}

/// A fixed set of CIDs `0..n` with a LIFO free list (recently used CIDs are
/// reused first, so their slot state stays in cache). A fixed-size array
/// with an explicit top: no capacity checks or growth on the hot path.
pub struct CidTable {
    /// A power of two of them, at least `cap`.
    slots: Box<[CidSlot]>,
    /// CIDs `0..cap` exist.
    cap: usize,
    /// Number of free CIDs: `slots[..top].free`.
    top: usize,
}

/// A [`CidTable`] borrowed for one pass of a hot loop (see
/// [`CidTable::batch`]); the top is written back when it is dropped.
pub struct CidBatch<'a> {
    top: usize,
    table_top: &'a mut usize,
    slots: &'a mut [CidSlot],
}

impl CidBatch<'_> {
    /// The CID the next [`pop`](Self::pop) returns, if any is free.
    #[inline(always)]
    pub fn peek(&self) -> Option<u16> {
        self.top.checked_sub(1).map(|t| self.slot(t).free)
    }
    /// Slot `i`, masked into the power-of-two array: never out of bounds.
    #[inline(always)]
    fn slot(&self, i: usize) -> &CidSlot {
        &self.slots[i & (self.slots.len() - 1)]
    }
    #[inline(always)]
    fn slot_mut(&mut self, i: usize) -> &mut CidSlot {
        let mask = self.slots.len() - 1;
        &mut self.slots[i & mask]
    }
    /// Take the next free CID for a command carrying `tag`. Only for a
    /// caller that clamped its batch to [`CidTable::free`] (so one is free):
    /// with none free it would hand out a CID that is in use (a logic error,
    /// not memory unsafety), hence crate-private and checked in debug builds.
    #[inline(always)]
    pub(crate) fn pop(&mut self, tag: u64) -> u16 {
        debug_assert!(self.top > 0, "no free CID");
        self.top = self.top.wrapping_sub(1);
        let cid = self.slot(self.top).free;
        let s = self.slot_mut(cid as usize);
        debug_assert!(!s.busy);
        s.busy = true;
        s.tag = tag;
        cid
    }
    /// Give a CID back after its completion; returns its tag, or `None` when
    /// the CID is out of range or not outstanding (a protocol error).
    #[inline(always)]
    pub fn release(&mut self, cid: u16) -> Option<u64> {
        // Range check: slots past the capacity exist but are never handed
        // out, so they are never busy and fail the check below.
        let s = self.slots.get_mut(cid as usize)?;
        if !s.busy {
            return None;
        }
        s.busy = false;
        let tag = s.tag;
        // A busy CID exists, so top < cap and the stack has room for it.
        let top = self.top;
        self.slot_mut(top).free = cid;
        self.top += 1;
        Some(tag)
    }
}

impl Drop for CidBatch<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.table_top = self.top;
    }
}

impl CidTable {
    /// CIDs `0..n`, all free (CID 0 is handed out first).
    pub fn new(n: u16) -> Self {
        let len = (n as usize).next_power_of_two();
        let slots = (0..len).map(|i| CidSlot { tag: 0, busy: false, free: (n as usize).saturating_sub(1 + i) as u16 }).collect();
        CidTable { slots, cap: n as usize, top: n as usize }
    }
    /// Total number of CIDs.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Number outstanding.
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.cap - self.top
    }
    /// True when no CID is free.
    #[inline]
    pub fn is_exhausted(&self) -> bool {
        self.top == 0
    }
    /// Take a free CID for a command carrying `tag`.
    #[inline]
    pub fn alloc(&mut self, tag: u64) -> Option<u16> {
        let mut b = self.batch();
        b.peek()?;
        Some(b.pop(tag))
    }
    /// Give a CID back after its completion; returns its tag, or `None` when
    /// the CID is out of range or not outstanding (a protocol error).
    #[inline]
    pub fn release(&mut self, cid: u16) -> Option<u64> {
        self.batch().release(cid)
    }
    /// Number of free CIDs.
    #[inline]
    pub fn free(&self) -> usize {
        self.top
    }
    /// The table borrowed for one pass of a hot loop: the top and the
    /// array's address and length become plain values the compiler keeps in
    /// registers (stores into the rings or the caller's buffers would
    /// otherwise make it reload them from the table).
    #[inline(always)]
    pub fn batch(&mut self) -> CidBatch<'_> {
        CidBatch { top: self.top, table_top: &mut self.top, slots: &mut self.slots }
    }
    /// Undo an `alloc` whose command was never posted.
    #[inline]
    pub fn cancel(&mut self, cid: u16) {
        let _ = self.release(cid);
    }
    /// Is `cid` outstanding?
    pub fn is_busy(&self, cid: u16) -> bool {
        self.slots[..self.cap].get(cid as usize).is_some_and(|s| s.busy)
    }
    /// The tag of an outstanding CID.
    pub fn tag(&self, cid: u16) -> Option<u64> {
        self.slots[..self.cap].get(cid as usize).filter(|s| s.busy).map(|s| s.tag)
    }
    /// Outstanding CIDs (for timeout handling and teardown).
    pub fn busy_cids(&self) -> impl Iterator<Item = u16> + '_ {
        self.slots[..self.cap].iter().enumerate().filter(|(_, s)| s.busy).map(|(i, _)| i as u16)
    }
}

// Free-stack entries live in the slot's padding: still 16 bytes.
const _: () = assert!(std::mem::size_of::<CidSlot>() == 16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhaustion_and_reuse() {
        let mut t = CidTable::new(4);
        let cids: Vec<u16> = (0..4).map(|i| t.alloc(100 + i).unwrap()).collect();
        assert_eq!(cids, vec![0, 1, 2, 3]);
        assert!(t.is_exhausted());
        assert_eq!(t.alloc(9), None, "no fifth CID");
        assert_eq!(t.outstanding(), 4);
        assert_eq!(t.release(2), Some(102));
        assert_eq!(t.release(2), None, "double completion is rejected");
        assert_eq!(t.release(77), None, "unknown CID is rejected");
        assert_eq!(t.alloc(200), Some(2), "freed CID is reused");
        assert_eq!(t.tag(2), Some(200));
        for c in [0, 1, 2, 3] {
            assert!(t.release(c).is_some());
        }
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.busy_cids().count(), 0);
    }

    #[test]
    fn capacity_not_a_power_of_two() {
        // 5 CIDs in an array of 8: CIDs 5..8 exist in memory but are never
        // handed out, and a completion naming one is rejected.
        let mut t = CidTable::new(5);
        let mut got: Vec<u16> = (0..5).map(|i| t.alloc(i).unwrap()).collect();
        assert_eq!(t.alloc(9), None);
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        for bad in [5u16, 6, 7, 8, 0xffff] {
            assert_eq!(t.release(bad), None, "CID {bad} is out of range");
        }
        assert_eq!(t.release(3), Some(3));
        let mut b = t.batch();
        assert_eq!(b.peek(), Some(3));
        assert_eq!(b.pop(42), 3);
        assert_eq!(b.peek(), None);
        drop(b);
        assert_eq!(t.tag(3), Some(42));
        assert_eq!(t.outstanding(), 5);
        assert_eq!(t.busy_cids().count(), 5);
    }

    proptest::proptest! {
        #[test]
        fn never_two_outstanding_with_one_cid(ops in proptest::collection::vec(proptest::bool::ANY, 1..500)) {
            let mut t = CidTable::new(7);
            let mut live: Vec<u16> = vec![];
            for (i, alloc) in ops.into_iter().enumerate() {
                if alloc {
                    if let Some(c) = t.alloc(i as u64) {
                        proptest::prop_assert!(!live.contains(&c));
                        live.push(c);
                    } else {
                        proptest::prop_assert_eq!(live.len(), 7);
                    }
                } else if let Some(c) = live.pop() {
                    proptest::prop_assert!(t.release(c).is_some());
                }
                proptest::prop_assert_eq!(t.outstanding(), live.len());
            }
        }
    }
}
