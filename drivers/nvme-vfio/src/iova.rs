//! Our own I/O virtual address space: which bus addresses the device may be
//! handed, first-fit over the ranges the IOMMU accepts.
//!
//! IOVAs are chosen here, not taken from the virtual address of the memory:
//! a driver that confuses the two fails at once (the device faults) instead
//! of working by accident, and the addresses stay small and aligned so the
//! IOMMU can use 2 MiB pages.

use std::collections::BTreeMap;

/// Where our IOVAs start (64 GiB): far from 0 (a zero PRP entry is a
/// classic bug) and below the 39-bit address width of the smallest
/// common IOMMUs (Intel VT-d with 3-level tables, QEMU's intel-iommu default).
pub const IOVA_BASE: u64 = 0x10_0000_0000;

/// End (exclusive) assumed when the kernel does not report valid IOVA
/// ranges (kernels before 5.4): 2^39.
pub const DEFAULT_IOVA_END: u64 = 1 << 39;

/// A set of free IOVA ranges.
#[derive(Clone, Debug)]
pub struct IovaSpace {
    /// start -> end (exclusive) of each free range, never adjacent or overlapping.
    free: BTreeMap<u64, u64>,
    /// Bytes of unused space left after every allocation (so an overrun by
    /// the device hits an unmapped address and faults, instead of silently
    /// reaching the next allocation).
    guard: u64,
}

impl IovaSpace {
    /// The usable space: `ranges` (inclusive `(start, end)` pairs, as the
    /// kernel's VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE reports them) cut to
    /// `[base, end)`.
    pub fn new(ranges: &[(u64, u64)], base: u64, end: u64, guard: u64) -> Self {
        let mut cut: Vec<(u64, u64)> = ranges
            .iter()
            .map(|&(s, e_incl)| (s.max(base), e_incl.saturating_add(1).min(end)))
            .filter(|(s, e)| s < e)
            .collect();
        cut.sort_unstable();
        let mut free = BTreeMap::new();
        let mut cur: Option<(u64, u64)> = None;
        for (s, e) in cut {
            match cur {
                // Overlapping or touching ranges become one.
                Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
                Some((cs, ce)) => {
                    free.insert(cs, ce);
                    cur = Some((s, e));
                }
                None => cur = Some((s, e)),
            }
        }
        if let Some((cs, ce)) = cur {
            free.insert(cs, ce);
        }
        IovaSpace { free, guard }
    }

    /// Bytes still free.
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).sum()
    }

    /// The free ranges, for diagnostics and tests.
    pub fn free_ranges(&self) -> Vec<(u64, u64)> {
        self.free.iter().map(|(s, e)| (*s, *e)).collect()
    }

    /// Reserve `len` bytes at an address that is a multiple of `align` (a
    /// power of two), plus the guard gap after them. Returns the start, or
    /// `None` when no free range is large enough.
    pub fn alloc(&mut self, len: u64, align: u64) -> Option<u64> {
        assert!(align.is_power_of_two() && len > 0);
        let need = len.checked_add(self.guard)?;
        let (start, end, at) = self.free.iter().find_map(|(&s, &e)| {
            let at = s.checked_next_multiple_of(align)?;
            (at.checked_add(need)? <= e).then_some((s, e, at))
        })?;
        self.free.remove(&start);
        if start < at {
            self.free.insert(start, at);
        }
        if at + need < end {
            self.free.insert(at + need, end);
        }
        Some(at)
    }

    /// Give back what [`alloc`](Self::alloc) returned for `len` bytes.
    pub fn release(&mut self, start: u64, len: u64) {
        self.release_raw(start, len + self.guard);
    }

    fn release_raw(&mut self, start: u64, len: u64) {
        let mut s = start;
        let mut e = start + len;
        // Merge with the range before and the one after, if they touch.
        if let Some((&ps, &pe)) = self.free.range(..=s).next_back() {
            assert!(pe <= s, "IOVA range {s:#x}+{len:#x} released twice (overlaps free {ps:#x}..{pe:#x})");
            if pe == s {
                self.free.remove(&ps);
                s = ps;
            }
        }
        if let Some((&ns, &ne)) = self.free.range(s..).next() {
            assert!(ns >= e, "IOVA range {start:#x}+{len:#x} released twice (overlaps free {ns:#x}..{ne:#x})");
            if ns == e {
                self.free.remove(&ns);
                e = ne;
            }
        }
        self.free.insert(s, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB2: u64 = 2 << 20;

    #[test]
    fn aligned_disjoint_and_reused() {
        let mut s = IovaSpace::new(&[(0, u64::MAX)], IOVA_BASE, DEFAULT_IOVA_END, MIB2);
        let total = s.free_bytes();
        let mut got = vec![];
        for (i, len) in [4096u64, MIB2, 3 * MIB2 + 4096, 8192, MIB2].into_iter().enumerate() {
            let a = s.alloc(len, MIB2).unwrap();
            assert_eq!(a % MIB2, 0, "allocation {i} at {a:#x} is 2 MiB aligned");
            assert!(a >= IOVA_BASE);
            got.push((a, len));
        }
        for (i, &(a, la)) in got.iter().enumerate() {
            for &(b, lb) in &got[i + 1..] {
                assert!(
                    a + la + MIB2 <= b || b + lb + MIB2 <= a,
                    "{a:#x}+{la:#x} and {b:#x}+{lb:#x} overlap or share a guard gap"
                );
            }
        }
        for &(a, l) in got.iter().rev() {
            s.release(a, l);
        }
        assert_eq!(s.free_bytes(), total, "everything coalesces back");
        assert_eq!(s.free_ranges().len(), 1);
        assert_eq!(s.alloc(4096, 4096), Some(IOVA_BASE), "freed space is reused first-fit");
    }

    #[test]
    fn respects_the_valid_ranges() {
        // Intel VT-d reports the interrupt window 0xfee00000-0xfeefffff as a hole.
        let ranges = [(0, 0xfedf_ffff), (0xfef0_0000, 0x7f_ffff_ffff)];
        let mut s = IovaSpace::new(&ranges, 0xfe00_0000, u64::MAX, 0);
        let a = s.alloc(0xe0_0000, MIB2).unwrap();
        assert_eq!(a, 0xfe00_0000, "fills the first range up to the hole");
        let b = s.alloc(MIB2, MIB2).unwrap();
        assert_eq!(b, 0xff00_0000, "skips the hole, next 2 MiB boundary after 0xfef00000");
        let end = s.free_ranges().last().unwrap().1;
        assert_eq!(end, 0x80_0000_0000, "inclusive end of the last range");
        // Nothing fits that is larger than the space.
        assert_eq!(s.alloc(1 << 40, MIB2), None);
    }

    #[test]
    fn empty_when_ranges_are_below_base() {
        let mut s = IovaSpace::new(&[(0, 0xffff_ffff)], IOVA_BASE, DEFAULT_IOVA_END, 0);
        assert_eq!(s.free_bytes(), 0);
        assert_eq!(s.alloc(4096, 4096), None);
    }

    #[test]
    #[should_panic(expected = "released twice")]
    fn double_release_is_caught() {
        let mut s = IovaSpace::new(&[(0, u64::MAX)], IOVA_BASE, DEFAULT_IOVA_END, 0);
        let a = s.alloc(8192, 4096).unwrap();
        s.release(a, 8192);
        s.release(a, 8192);
    }
}
