//! Command identifiers: a free list of CIDs and what each outstanding one
//! stands for. O(1) allocate and release, no allocation after creation.
//! A completion whose CID is not outstanding is rejected, as the kernel's
//! `nvme_handle_cqe` does ("invalid id completed").

/// Per-command state kept while the command is outstanding.
#[derive(Clone, Copy, Debug, Default)]
pub struct CidSlot {
    /// The caller's tag, handed back with the completion.
    pub tag: u64,
    /// Outstanding right now.
    pub busy: bool,
}

/// A fixed set of CIDs `0..n` with a LIFO free list (recently used CIDs are
/// reused first, so their slot state stays in cache). Fixed-size arrays with
/// an explicit top: no capacity checks or growth on the hot path.
pub struct CidTable {
    slots: Box<[CidSlot]>,
    free: Box<[u16]>,
    /// Number of free CIDs: `free[..top]`.
    top: usize,
}

impl CidTable {
    /// CIDs `0..n`, all free.
    pub fn new(n: u16) -> Self {
        CidTable { slots: vec![CidSlot::default(); n as usize].into(), free: (0..n).rev().collect(), top: n as usize }
    }
    /// Total number of CIDs.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
    /// Number outstanding.
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.slots.len() - self.top
    }
    /// True when no CID is free.
    #[inline]
    pub fn is_exhausted(&self) -> bool {
        self.top == 0
    }
    /// Take a free CID for a command carrying `tag`.
    #[inline]
    pub fn alloc(&mut self, tag: u64) -> Option<u16> {
        if self.top == 0 {
            return None;
        }
        self.top -= 1;
        let cid = self.free[self.top];
        let s = &mut self.slots[cid as usize];
        debug_assert!(!s.busy);
        s.busy = true;
        s.tag = tag;
        Some(cid)
    }
    /// Give a CID back after its completion; returns its tag, or `None` when
    /// the CID is out of range or not outstanding (a protocol error).
    #[inline]
    pub fn release(&mut self, cid: u16) -> Option<u64> {
        let s = self.slots.get_mut(cid as usize)?;
        if !s.busy {
            return None;
        }
        s.busy = false;
        // A busy CID exists, so the free stack has room for it.
        self.free[self.top] = cid;
        self.top += 1;
        Some(s.tag)
    }
    /// Undo an `alloc` whose command was never posted.
    #[inline]
    pub fn cancel(&mut self, cid: u16) {
        let _ = self.release(cid);
    }
    /// Is `cid` outstanding?
    pub fn is_busy(&self, cid: u16) -> bool {
        self.slots.get(cid as usize).is_some_and(|s| s.busy)
    }
    /// The tag of an outstanding CID.
    pub fn tag(&self, cid: u16) -> Option<u64> {
        self.slots.get(cid as usize).filter(|s| s.busy).map(|s| s.tag)
    }
    /// Outstanding CIDs (for timeout handling and teardown).
    pub fn busy_cids(&self) -> impl Iterator<Item = u16> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.busy).map(|(i, _)| i as u16)
    }
}

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

    proptest::proptest! {
        #[test]
        fn never_two_outstanding_with_one_cid(ops in proptest::collection::vec(proptest::bool::ANY, 1..500)) {
            let mut t = CidTable::new(8);
            let mut live: Vec<u16> = vec![];
            for (i, alloc) in ops.into_iter().enumerate() {
                if alloc {
                    if let Some(c) = t.alloc(i as u64) {
                        proptest::prop_assert!(!live.contains(&c));
                        live.push(c);
                    } else {
                        proptest::prop_assert_eq!(live.len(), 8);
                    }
                } else if let Some(c) = live.pop() {
                    proptest::prop_assert!(t.release(c).is_some());
                }
                proptest::prop_assert_eq!(t.outstanding(), live.len());
            }
        }
    }
}
