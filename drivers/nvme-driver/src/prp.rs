//! Physical Region Page entries and lists. NVMe 1.4c §4.3.
//!
//! A command names its data with two 64-bit pointers:
//! * PRP1: the first byte; it may carry an offset into its page (dword aligned);
//! * PRP2: unused when the data fits the first page; the second page when it
//!   fits two; otherwise the address of a **PRP list**: a page of 8-byte
//!   entries, one per further page (no offsets), whose last entry points to
//!   the next list page when one page of entries is not enough.
//!
//! [`build_prps`] computes both pointers and fills the list pages through a
//! [`PrpListSink`], so it can be tested with fake addresses and no DMA.

/// Where list entries go: the per-command list pages.
pub trait PrpListSink {
    /// Number of list pages available.
    fn pages(&self) -> usize;
    /// Bus address of list page `page`.
    fn page_iova(&self, page: usize) -> u64;
    /// Write entry `index` of list page `page`.
    fn write_entry(&mut self, page: usize, index: usize, value: u64);
}

/// Why a buffer cannot be described with PRPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrpError {
    /// PRP1 must be dword aligned (bits 1:0 clear). NVMe 1.4c §4.3.
    #[error("data address {0:#x} is not 4-byte aligned, as a PRP entry requires")]
    Misaligned(u64),
    /// Zero-length transfer.
    #[error("zero-length data transfer")]
    Empty,
    /// More pages than the list pages can describe.
    #[error("{len} bytes need {needed} PRP list pages, only {have} available (transfer above MDTS?)")]
    TooLong { len: usize, needed: usize, have: usize },
}

/// Number of list pages needed for `entries` list entries with `per_page`
/// entries per page (the last entry of a full page chains to the next).
pub const fn list_pages_for(entries: usize, per_page: usize) -> usize {
    if entries <= 1 {
        return if entries == 0 { 0 } else { 1 };
    }
    let mut pages = 1;
    let mut cap = per_page;
    while cap < entries {
        pages += 1;
        cap += per_page - 1;
    }
    pages
}

/// Number of memory pages a transfer of `len` bytes at `addr` touches.
#[inline]
pub const fn pages_spanned(addr: u64, len: usize, page_size: usize) -> usize {
    let off = (addr as usize) & (page_size - 1);
    (off + len).div_ceil(page_size)
}

/// Largest transfer (bytes) whose list fits `list_pages` pages, for page-aligned data.
pub const fn max_bytes_for_list_pages(list_pages: usize, page_size: usize) -> usize {
    let per_page = page_size / 8;
    let entries = if list_pages == 0 { 0 } else { list_pages * (per_page - 1) + 1 };
    (entries + 1) * page_size
}

/// Compute PRP1/PRP2 for `len` bytes at bus address `addr`, writing list
/// entries into `sink` when more than two pages are touched.
#[inline(always)]
pub fn build_prps<S: PrpListSink + ?Sized>(
    addr: u64,
    len: usize,
    page_size: usize,
    sink: &mut S,
) -> Result<(u64, u64), PrpError> {
    // The common case (4 KiB I/O in a page-aligned buffer): one page, no PRP2.
    let in_first_page = page_size - (addr as usize & (page_size - 1));
    if len != 0 && len <= in_first_page && addr & 3 == 0 {
        return Ok((addr, 0));
    }
    build_prps_slow(addr, len, page_size, sink)
}

#[cold]
#[inline(never)]
fn build_prps_slow<S: PrpListSink + ?Sized>(
    addr: u64,
    len: usize,
    page_size: usize,
    sink: &mut S,
) -> Result<(u64, u64), PrpError> {
    debug_assert!(page_size.is_power_of_two());
    if len == 0 {
        return Err(PrpError::Empty);
    }
    if addr & 3 != 0 {
        return Err(PrpError::Misaligned(addr));
    }
    let mask = page_size as u64 - 1;
    let first_len = page_size - (addr & mask) as usize;
    if len <= first_len {
        return Ok((addr, 0));
    }
    let second = (addr & !mask) + page_size as u64;
    let rest = len - first_len;
    if rest <= page_size {
        return Ok((addr, second));
    }
    // A list: one entry per page after the first.
    let entries = rest.div_ceil(page_size);
    let per_page = page_size / 8;
    let needed = list_pages_for(entries, per_page);
    if needed > sink.pages() {
        return Err(PrpError::TooLong { len, needed, have: sink.pages() });
    }
    let mut page = 0;
    let mut index = 0;
    for i in 0..entries {
        // Last slot of a list page, with entries still to come: chain.
        if index == per_page - 1 && i != entries - 1 {
            sink.write_entry(page, index, sink.page_iova(page + 1));
            page += 1;
            index = 0;
        }
        sink.write_entry(page, index, second + (i * page_size) as u64);
        index += 1;
    }
    Ok((addr, sink.page_iova(0)))
}

/// A [`PrpListSink`] over contiguous list pages in DMA memory.
pub struct DmaPrpList<'a> {
    /// The list pages (page aligned, `pages * page_size` bytes).
    pub mem: &'a nvme_hal::DmaRegion,
    /// Offset of the first list page inside `mem`.
    pub offset: usize,
    /// Number of list pages.
    pub pages: usize,
    /// Memory page size.
    pub page_size: usize,
}

impl PrpListSink for DmaPrpList<'_> {
    #[inline]
    fn pages(&self) -> usize {
        self.pages
    }
    #[inline]
    fn page_iova(&self, page: usize) -> u64 {
        self.mem.iova() + (self.offset + page * self.page_size) as u64
    }
    #[inline]
    fn write_entry(&mut self, page: usize, index: usize, value: u64) {
        self.mem.write64(self.offset + page * self.page_size + index * 8, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// List pages in a Vec, at fake bus addresses.
    struct FakeList {
        base: u64,
        page_size: usize,
        pages: Vec<Vec<u64>>,
    }
    impl FakeList {
        fn new(pages: usize, page_size: usize) -> Self {
            FakeList { base: 0xF000_0000, page_size, pages: vec![vec![0; page_size / 8]; pages] }
        }
    }
    impl PrpListSink for FakeList {
        fn pages(&self) -> usize {
            self.pages.len()
        }
        fn page_iova(&self, page: usize) -> u64 {
            self.base + (page * self.page_size) as u64
        }
        fn write_entry(&mut self, page: usize, index: usize, value: u64) {
            self.pages[page][index] = value;
        }
    }

    /// Walk PRP1/PRP2/lists the way a controller does and return the
    /// (address, length) segments described.
    fn walk(prp1: u64, prp2: u64, len: usize, ps: usize, list: &FakeList) -> Vec<(u64, usize)> {
        let mut segs = vec![];
        let first = (ps - (prp1 as usize & (ps - 1))).min(len);
        segs.push((prp1, first));
        let mut left = len - first;
        if left == 0 {
            return segs;
        }
        if left <= ps {
            assert_eq!(prp2 as usize % ps, 0, "PRP2 must be page aligned");
            segs.push((prp2, left));
            return segs;
        }
        let mut page = ((prp2 - list.base) as usize) / ps;
        let mut idx = 0;
        while left > 0 {
            let per = ps / 8;
            let e = list.pages[page][idx];
            if idx == per - 1 && left > ps {
                page = ((e - list.base) as usize) / ps;
                idx = 0;
                continue;
            }
            assert_eq!(e as usize % ps, 0, "list entries carry no offset");
            let n = left.min(ps);
            segs.push((e, n));
            left -= n;
            idx += 1;
        }
        segs
    }

    fn check(addr: u64, len: usize, ps: usize, list_pages: usize) -> (u64, u64, Vec<(u64, usize)>) {
        let mut l = FakeList::new(list_pages, ps);
        let (p1, p2) = build_prps(addr, len, ps, &mut l).unwrap();
        let segs = walk(p1, p2, len, ps, &l);
        // Segments are contiguous and cover exactly [addr, addr+len).
        let mut at = addr;
        for (a, n) in &segs {
            assert_eq!(*a, at);
            at += *n as u64;
        }
        assert_eq!(at, addr + len as u64);
        (p1, p2, segs)
    }

    #[test]
    fn one_sector_512() {
        let (p1, p2, s) = check(0x10_0000, 512, 4096, 1);
        assert_eq!((p1, p2, s.len()), (0x10_0000, 0, 1));
    }

    #[test]
    fn one_page_4k() {
        let (p1, p2, _) = check(0x10_0000, 4096, 4096, 1);
        assert_eq!((p1, p2), (0x10_0000, 0));
    }

    #[test]
    fn two_pages_8k_uses_prp2_directly() {
        let (p1, p2, _) = check(0x10_0000, 8192, 4096, 1);
        assert_eq!((p1, p2), (0x10_0000, 0x10_1000));
    }

    #[test]
    fn list_for_128k() {
        let (p1, p2, s) = check(0x10_0000, 128 << 10, 4096, 1);
        assert_eq!(p1, 0x10_0000);
        assert_eq!(p2, 0xF000_0000, "PRP2 points at the list");
        assert_eq!(s.len(), 32);
    }

    #[test]
    fn mdts_sized_512k_and_2m_with_chaining() {
        // QEMU's MDTS=7 with 4 KiB pages: 512 KiB = 128 pages, 127 list entries.
        let (_, _, s) = check(0x10_0000, 512 << 10, 4096, 1);
        assert_eq!(s.len(), 128);
        // 4 MiB: 1023 list entries need a chained second list page.
        assert_eq!(list_pages_for(1023, 512), 2);
        assert_eq!(list_pages_for(1024, 512), 3);
        let (_, _, s) = check(0x4000_0000, 4 << 20, 4096, 2);
        assert_eq!(s.len(), 1024);
        let mut l = FakeList::new(1, 4096);
        assert!(matches!(build_prps(0x4000_0000, 4 << 20, 4096, &mut l), Err(PrpError::TooLong { .. })));
    }

    #[test]
    fn unaligned_buffers() {
        // 4 KiB starting 512 bytes into a page touches two pages.
        let (p1, p2, s) = check(0x10_0200, 4096, 4096, 1);
        assert_eq!((p1, p2), (0x10_0200, 0x10_1000));
        assert_eq!(s, vec![(0x10_0200, 3584), (0x10_1000, 512)]);
        // 8 KiB unaligned touches three pages: a list of two.
        let (_, p2, s) = check(0x10_0200, 8192, 4096, 1);
        assert_eq!(p2, 0xF000_0000);
        assert_eq!(s.len(), 3);
        // A 512-byte sector at the end of a page.
        let (_, p2, _) = check(0x10_0E00, 512, 4096, 1);
        assert_eq!(p2, 0);
        // Non-dword-aligned addresses are rejected.
        let mut l = FakeList::new(1, 4096);
        assert_eq!(build_prps(0x10_0001, 512, 4096, &mut l), Err(PrpError::Misaligned(0x10_0001)));
        assert_eq!(build_prps(0x10_0000, 0, 4096, &mut l), Err(PrpError::Empty));
    }

    #[test]
    fn page_size_64k() {
        let (_, p2, s) = check(0x100_0000, 256 << 10, 65536, 1);
        assert_eq!(p2, 0xF000_0000);
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn helper_math() {
        assert_eq!(pages_spanned(0, 4096, 4096), 1);
        assert_eq!(pages_spanned(512, 4096, 4096), 2);
        assert_eq!(list_pages_for(0, 512), 0);
        assert_eq!(list_pages_for(512, 512), 1);
        assert_eq!(list_pages_for(513, 512), 2);
        assert_eq!(max_bytes_for_list_pages(1, 4096), 513 * 4096);
    }

    proptest::proptest! {
        #[test]
        fn any_buffer_is_described_exactly(page in 0u64..1_000_000, off in 0usize..1024, len in 1usize..(3 << 20)) {
            let addr = page * 4096 + (off as u64) * 4;
            let addr = addr - addr % 4;
            let off_in = (addr % 4096) as usize;
            let entries = (off_in + len).div_ceil(4096).saturating_sub(1);
            let pages = list_pages_for(entries, 512).max(1);
            check(addr, len, 4096, pages);
        }
    }
}
