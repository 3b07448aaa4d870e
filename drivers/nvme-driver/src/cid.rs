//! Command identifiers: a free list of command slots and what each
//! outstanding command stands for. O(1) allocate and release, no
//! allocation after creation. A completion whose CID is not outstanding is
//! rejected, as the kernel's `nvme_handle_cqe` does ("invalid id completed").
//!
//! A CID is a slot and a generation, as in Linux since 5.15 (`nvme_cid`,
//! `nvme_genctr_mask`): the low 12 bits name the slot (the *tag*, so at
//! most 4096 slots), the high 4 bits count the slot's uses. A slot's
//! generation moves on each time its command is done (completed, cancelled
//! or abandoned), so the next command in that slot carries another CID,
//! and a completion that arrives late for the slot's previous command (one
//! given up on, or a controller posting a completion twice) no longer
//! matches: it is rejected and counted as stale (`QueueStats::stale_cid`)
//! instead of being taken as the new command's. Sixteen generations, as in
//! Linux: a completion sixteen uses late would pass, which is why a command
//! is given up on only together with its queue (deletion) or the whole
//! controller (reset), after which no completion for it can come.
//!
//! Layout: per slot, one entry per tag (4096) in each of two arrays: the
//! command's tag (8 bytes) and `expect` (4 bytes: the CID in use, or above
//! 16 bits the next one); a tag scales into either in the address (no
//! shift). Right after them, in the same allocation, the
//! LIFO stack of free slots (`free[..top]`), each entry the CID its next
//! command gets, so taking one is one load (2-byte entries: the index
//! scales in the address, no shift). One allocation means one
//! base address for the hot loops to keep in a register, and every index
//! they use (the free-stack top, a slot taken from the stack, a
//! completion's tag) is below 4096 by construction: no bounds check. Slots
//! past the capacity are never handed out. A completion's CID is then
//! checked whole against `expect` in one compare: the slot must be busy
//! with exactly that generation; a free slot, or one past the capacity,
//! never matches.

/// Bits of a CID that name its slot (the tag); the 4 above them are the
/// slot's generation.
pub const CID_TAG_BITS: u32 = 12;
/// Mask of the tag in a CID.
pub const CID_TAG_MASK: u16 = (1 << CID_TAG_BITS) - 1;
/// Most slots a table uses: every tag but the last (4095 commands, a
/// 4096-entry queue), so no CID is FFFFh.
pub const MAX_CIDS: usize = CID_TAG_MASK as usize;
/// Slots in every table: one per tag. Slots past a table's capacity are
/// never handed out; having all 4096 makes every tag a valid index.
const SLOTS: usize = 1 << CID_TAG_BITS;
/// One generation, in CID bits.
const GENERATION: u32 = 1 << CID_TAG_BITS;
/// In `CidState::expect`: values from this up are a free slot's (the next
/// CID in the low 16 bits); below it, the outstanding command's CID.
const FREE: u32 = 1 << 16;
/// `CidState::expect` of a slot past the capacity: never busy, never a CID.
const NEVER: u32 = u32::MAX;

/// The slot a CID names (its low 12 bits).
#[inline(always)]
pub fn cid_tag(cid: u16) -> usize {
    (cid & CID_TAG_MASK) as usize
}

/// The slots' state kept while their commands are outstanding: one entry
/// per tag (4096) in each array, so any CID's tag indexes them without a
/// bounds check, and scales to its entry in the address (8 and 4 bytes).
pub(crate) struct CidState {
    /// The caller's tag of the slot's command, handed back with the completion.
    tag: [u64; SLOTS],
    /// The slot's CID (generation and slot index): the outstanding
    /// command's (below `FREE`), or, at `FREE` and above, the next
    /// command's in the low 16 bits. One compare in `release` checks busy,
    /// slot and generation at once.
    expect: [u32; SLOTS],
}

impl CidState {
    /// Mark slot `cid` busy with a command carrying `tag` (a CID of
    /// [`CidBatch::top_run`]).
    #[inline(always)]
    pub(crate) fn assign(&mut self, cid: u16, tag: u64) {
        let t = cid_tag(cid);
        debug_assert!(self.expect[t] >= FREE && self.expect[t] != NEVER && self.expect[t] as u16 == cid);
        self.expect[t] = cid as u32;
        self.tag[t] = tag;
    }
    /// See [`CidBatch::is_stale`].
    fn is_stale(&self, cid: u16) -> bool {
        let e = self.expect[cid_tag(cid)];
        // Past the capacity a slot never gets a CID (NEVER). Otherwise expect's
        // low 16 bits are this slot's CID, in use or next.
        e != NEVER && (e as u16 ^ cid) & !CID_TAG_MASK != 0
    }
}

/// The slots and the free stack, one allocation.
struct CidSlots {
    /// The slots' state, one entry per tag.
    state: CidState,
    /// Free-stack entry `i` (meaningful for `i < top`): a free slot, as
    /// the CID its next command gets (its `expect`'s low 16 bits).
    free: [u16; SLOTS],
}

/// A fixed set of command slots `0..n` with a LIFO free list (recently
/// used slots are reused first, so their state stays in cache). A
/// fixed-size array with an explicit top: no capacity checks or growth on
/// the hot path.
pub struct CidTable {
    /// The slots, one per tag, and the free stack.
    slots: Box<CidSlots>,
    /// Slots `0..cap` exist.
    cap: usize,
    /// Number of free slots: `free[..top]`.
    top: usize,
}

/// A [`CidTable`] borrowed for one pass of a hot loop (see
/// [`CidTable::batch`]); the top is written back when it is dropped.
pub struct CidBatch<'a> {
    top: usize,
    table_top: &'a mut usize,
    slots: &'a mut CidSlots,
}

impl CidBatch<'_> {
    /// The CID the next [`pop`](Self::pop) returns, if any is free.
    #[inline(always)]
    pub fn peek(&self) -> Option<u16> {
        self.top.checked_sub(1).map(|t| *self.free_ref(t))
    }
    /// Free-stack entry `i`, masked into the power-of-two array: never out of bounds.
    #[inline(always)]
    fn free_ref(&self, i: usize) -> &u16 {
        &self.slots.free[i % SLOTS]
    }
    #[inline(always)]
    fn free_mut(&mut self, i: usize) -> &mut u16 {
        &mut self.slots.free[i % SLOTS]
    }
    /// Take the next free slot for a command carrying `tag`; returns the
    /// command's CID. Only for a caller that clamped its batch to
    /// [`CidTable::free`] (so one is free): with none free it would hand out
    /// a CID that is in use (a logic error, not memory unsafety), hence
    /// crate-private and checked in debug builds.
    #[inline(always)]
    pub(crate) fn pop(&mut self, tag: u64) -> u16 {
        debug_assert!(self.top > 0, "no free CID");
        self.top = self.top.wrapping_sub(1);
        let cid = *self.free_ref(self.top);
        self.slots.state.assign(cid, tag);
        cid
    }
    /// The `k` CIDs [`pop`](Self::pop) would hand out next, for a caller
    /// that walks them itself (in either order): the stack's top `k`
    /// entries, and the slots to [`assign`](Self::assign) them in. One bounds check here, none per command. Nothing is taken
    /// until [`take`](Self::take). `k` is at most [`CidTable::free`].
    #[inline(always)]
    pub(crate) fn top_run(&mut self, k: usize) -> (&[u16], &mut CidState) {
        let CidSlots { state, free } = &mut *self.slots;
        (&free[self.top - k..self.top], state)
    }
    /// The first `k` CIDs of a [`top_run`](Self::top_run) of `n`, each
    /// assigned, leave the free stack; the run's other `n - k`, never
    /// assigned, stay on it (moved down into the entries the taken ones
    /// leave: the run's first CIDs are the deepest of the stack).
    #[inline(always)]
    pub(crate) fn take(&mut self, n: usize, k: usize) {
        debug_assert!(k <= n && n <= self.top);
        if k < n {
            let base = self.top - n;
            self.slots.free.copy_within(base + k..self.top, base);
        }
        self.top -= k;
    }
    /// Give a CID back after its completion; returns its tag, or `None` when
    /// the CID is not outstanding: out of range, not busy, or of another
    /// generation of its slot (a protocol error).
    #[inline(always)]
    pub fn release(&mut self, cid: u16) -> Option<u64> {
        let i = cid_tag(cid);
        let s = &mut self.slots.state;
        // Busy with exactly this CID: slot, generation and all.
        if s.expect[i] != cid as u32 {
            return None;
        }
        // Free, and the slot's next command gets the next generation (a
        // carry out of the 4 generation bits lands above FREE: the low 16
        // bits wrap, as the generation should).
        let next = cid as u32 + (FREE + GENERATION);
        s.expect[i] = next;
        let tag = s.tag[i];
        // A busy slot exists, so top < cap and the stack has room for it.
        let top = self.top;
        *self.free_mut(top) = next as u16;
        self.top += 1;
        Some(tag)
    }
    /// Would [`release`](Self::release) reject `cid` as *stale*: it names a
    /// slot that exists, with a generation other than the one in use or
    /// next (a late or repeated completion of an earlier command there)?
    /// Otherwise a rejected CID is simply unknown.
    pub fn is_stale(&self, cid: u16) -> bool {
        self.slots.state.is_stale(cid)
    }
}

impl Drop for CidBatch<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        *self.table_top = self.top;
    }
}

impl CidTable {
    /// Slots `0..n`, all free, each at generation 0 (so the first CIDs
    /// handed out are 0, 1, 2...). `n` is at most [`MAX_CIDS`] (4095): a
    /// queue pair is at most 4096 entries.
    ///
    /// # Panics
    /// When `n` exceeds [`MAX_CIDS`]: the caller's sizes were not checked
    /// (`QueuePair::new` checks them).
    pub fn new(n: u16) -> Self {
        assert!(n as usize <= MAX_CIDS, "{n} command slots: at most {MAX_CIDS} fit a 12-bit tag");
        let mut slots = Box::new(CidSlots { state: CidState { tag: [0; SLOTS], expect: [NEVER; SLOTS] }, free: [0; SLOTS] });
        for i in 0..SLOTS {
            if i < n as usize {
                slots.state.expect[i] = FREE | i as u32;
            }
            slots.free[i] = (n as usize).saturating_sub(1 + i) as u16;
        }
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
    /// Is `cid` outstanding (its slot busy with exactly this generation)?
    pub fn is_busy(&self, cid: u16) -> bool {
        self.tag(cid).is_some()
    }
    /// The tag of an outstanding CID.
    pub fn tag(&self, cid: u16) -> Option<u64> {
        let (t, s) = (cid_tag(cid), &self.slots.state);
        (t < self.cap && s.expect[t] == cid as u32).then(|| s.tag[t])
    }
    /// Outstanding CIDs (for timeout handling and teardown).
    pub fn busy_cids(&self) -> impl Iterator<Item = u16> + '_ {
        self.slots.state.expect[..self.cap].iter().filter(|&&e| e < FREE).map(|&e| e as u16)
    }
    /// Would `cid` be rejected as stale? See [`CidBatch::is_stale`].
    pub fn is_stale(&self, cid: u16) -> bool {
        cid_tag(cid) < self.cap && self.slots.state.is_stale(cid)
    }
}

// A tag scales to its entry in each array in the address (x86 scales 8 and 4).
const _: () = assert!(std::mem::size_of::<[u64; SLOTS]>() == 8 * SLOTS && std::mem::size_of::<[u32; SLOTS]>() == 4 * SLOTS);

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
        assert_eq!(t.alloc(200), Some(0x1002), "the freed slot is reused, in its next generation");
        assert_eq!(t.tag(0x1002), Some(200));
        assert_eq!(t.tag(2), None, "the slot's previous CID is not outstanding");
        for c in [0, 1, 0x1002, 3] {
            assert!(t.release(c).is_some());
        }
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.busy_cids().count(), 0);
    }

    #[test]
    fn capacity_not_a_power_of_two() {
        // 5 slots in use of the 4096: slots 5.. exist in memory but are
        // never handed out, and a completion naming one is rejected.
        let mut t = CidTable::new(5);
        let mut got: Vec<u16> = (0..5).map(|i| t.alloc(i).unwrap()).collect();
        assert_eq!(t.alloc(9), None);
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        for bad in [5u16, 6, 7, 8, 0xffff, 0x0803, 0x1005] {
            assert_eq!(t.release(bad), None, "CID {bad:#x} is out of range");
            assert!(!t.is_stale(bad), "CID {bad:#x} is unknown, not stale");
        }
        assert_eq!(t.release(3), Some(3));
        let mut b = t.batch();
        assert_eq!(b.peek(), Some(0x1003));
        assert_eq!(b.pop(42), 0x1003);
        assert_eq!(b.peek(), None);
        drop(b);
        assert_eq!(t.tag(0x1003), Some(42));
        assert_eq!(t.outstanding(), 5);
        assert_eq!(t.busy_cids().count(), 5);
    }

    #[test]
    fn a_late_completion_of_a_slots_previous_command_is_stale() {
        let mut t = CidTable::new(4);
        let first = t.alloc(1).unwrap();
        assert_eq!(first, 0);
        // The command is given up on (its queue deleted, say), and the
        // slot goes to the next command: another CID.
        assert_eq!(t.release(first), Some(1));
        let second = t.alloc(2).unwrap();
        assert_eq!((cid_tag(second), second >> CID_TAG_BITS), (0, 1), "same slot, generation 1");
        // The first command's completion arrives now: not the second's.
        assert!(t.is_stale(first));
        assert_eq!(t.release(first), None);
        assert_eq!(t.tag(second), Some(2), "the second command is still outstanding");
        assert_eq!(t.release(second), Some(2));
        assert!(t.is_stale(second), "a repeated completion of it is stale too");
        assert!(!t.is_stale(0x2000), "slot 0's next CID is not stale, only not outstanding");
        assert!(!t.is_stale(0x1004) && !t.is_stale(0x0fff), "a slot past the capacity is unknown");
    }

    #[test]
    fn generations_wrap_after_sixteen_uses() {
        let mut t = CidTable::new(1);
        let cids: Vec<u16> = (0..17u64).map(|i| {
            let c = t.alloc(i).unwrap();
            assert_eq!(t.release(c), Some(i));
            c
        }).collect();
        assert_eq!(&cids[..4], &[0x0000, 0x1000, 0x2000, 0x3000]);
        assert_eq!(cids[15], 0xf000);
        assert_eq!(cids[16], 0x0000, "4 bits of generation, as Linux's");
        let full = CidTable::new(MAX_CIDS as u16);
        assert_eq!((full.slots.state.tag.len(), full.slots.state.expect.len()), (4096, 4096));
        assert!(full.busy_cids().next().is_none());
    }

    proptest::proptest! {
        #[test]
        fn never_two_outstanding_with_one_cid(ops in proptest::collection::vec(proptest::bool::ANY, 1..500)) {
            let mut t = CidTable::new(7);
            let mut live: Vec<u16> = vec![];
            for (i, alloc) in ops.into_iter().enumerate() {
                if alloc {
                    if let Some(c) = t.alloc(i as u64) {
                        proptest::prop_assert!(!live.iter().any(|&l| cid_tag(l) == cid_tag(c)), "one slot, two commands");
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
