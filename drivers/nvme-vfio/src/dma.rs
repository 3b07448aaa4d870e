//! DMA memory for a VFIO device: host memory (2 MiB hugepages where the
//! kernel has them, ordinary locked pages otherwise), mapped through the
//! IOMMU at bus addresses of our own choosing, unmapped when the last
//! handle to it drops.
//!
//! Queue setup asks for many small regions (admin queues, one SQ and CQ per
//! thread, PRP list pages, data buffers). Each IOMMU mapping costs an ioctl,
//! a pinning pass and one of the container's limited mapping slots
//! (`dma_entry_limit`, 65535 by default), so small requests are carved out
//! of a pooled 2 MiB chunk: one mapping serves a whole queue pair. Requests
//! of 1 MiB or more get a mapping of their own.
//!
//! Every mapping's IOVA is congruent to its virtual address modulo 2 MiB,
//! so any alignment up to 2 MiB holds in both address spaces at once, and a
//! hugepage is mapped at a 2 MiB-aligned IOVA (the IOMMU can use a 2 MiB
//! page for it). The memory is reached only through [`DmaRegion`]'s
//! volatile and copy operations: no Rust reference ever points into it.

use crate::iova::IovaSpace;
use nvme_hal::{DmaAllocator, DmaError, DmaRegion, HostMemory};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Size of a pooled chunk and of an x86-64 huge page.
pub const CHUNK_SIZE: usize = 2 << 20;

/// Requests of this size or more get a mapping of their own.
pub const SMALL_MAX: usize = CHUNK_SIZE / 2;

/// Sub-allocations start on their own 4 KiB page (a PRP entry's unit).
const SUB_ALIGN: usize = 4096;

/// Why the IOMMU refused to map or unmap (the VFIO container's error, or a
/// fake's in tests).
pub type IommuError = Box<dyn std::error::Error + Send + Sync>;

/// The IOMMU side of a DMA mapping: VFIO_IOMMU_MAP_DMA / UNMAP_DMA on a
/// container, or a fake in tests.
pub trait Iommu: Send + Sync {
    /// Make `[vaddr, vaddr + len)` reachable by the device at `iova`, for reads and writes.
    ///
    /// # Safety
    /// Until [`unmap_dma`](Self::unmap_dma) succeeds for the same range, the
    /// memory must stay mapped in this process and be accessed only through
    /// raw pointers (volatile, atomic, or copies): the device may read and
    /// write it at any time.
    unsafe fn map_dma(&self, iova: u64, len: usize, vaddr: *mut u8) -> Result<(), IommuError>;
    /// Remove the mapping made at `iova` for `len` bytes.
    fn unmap_dma(&self, iova: u64, len: usize) -> Result<(), IommuError>;
}

/// How the allocator should get its memory and addresses.
#[derive(Clone, Debug)]
pub struct DmaConfig {
    /// Try 2 MiB hugepages first (falls back to ordinary locked pages).
    pub hugepages: bool,
    /// The IOMMU's smallest page (lowest bit of `iova_pgsizes`).
    pub iommu_page: usize,
}

impl Default for DmaConfig {
    fn default() -> Self {
        DmaConfig { hugepages: true, iommu_page: 4096 }
    }
}

/// What kind of memory backs the allocations so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DmaStats {
    /// Mappings made of 2 MiB hugepages.
    pub hugepage_mappings: u64,
    /// Mappings made of ordinary 4 KiB pages.
    pub small_page_mappings: u64,
    /// IOMMU mappings alive now.
    pub live_mappings: u64,
    /// Bytes mapped now.
    pub live_bytes: u64,
    /// Why hugepages were not used, if they were not.
    pub fallback_reason: Option<String>,
    /// Lowest IOVA handed out so far.
    pub lowest_iova: Option<u64>,
}

impl DmaStats {
    /// One line for reports: "2 MiB hugepages" or "ordinary 4 KiB pages ... (why)".
    pub fn describe(&self) -> String {
        let kind = match (self.hugepage_mappings, self.small_page_mappings) {
            (0, 0) => "none allocated yet".to_string(),
            (_, 0) => "2 MiB hugepages, locked".to_string(),
            (0, _) => "ordinary 4 KiB pages, locked".to_string(),
            (h, s) => format!("mixed: {h} hugepage mappings, {s} of ordinary 4 KiB pages"),
        };
        let why = self.fallback_reason.as_deref().map(|r| format!(" (no hugepages: {r})")).unwrap_or_default();
        format!("{kind}{why}; {} IOMMU mappings, {} KiB", self.live_mappings, self.live_bytes >> 10)
    }
}

/// What the chunks and the allocator share (no chunk handles, so no cycle).
struct Shared {
    iommu: Arc<dyn Iommu>,
    space: Mutex<IovaSpace>,
    stats: Mutex<DmaStats>,
    cfg: DmaConfig,
    /// Hugepages still worth trying (cleared at the first failure).
    try_huge: std::sync::atomic::AtomicBool,
    unmap_failures: AtomicU64,
}

/// One IOMMU mapping of host memory. Dropped with the last handle into it:
/// unmaps it from the IOMMU, gives the IOVA range back, then (through
/// `host`) the memory itself goes.
struct Mapping {
    /// The host memory, addressed by its IOVA.
    region: DmaRegion,
    /// Start and length of the IOVA range reserved for it.
    reserved: (u64, u64),
    shared: Arc<Shared>,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let s = &self.shared;
        // Unmap before the memory can go back to the system: the device
        // must never reach memory the process no longer owns.
        if let Err(e) = s.iommu.unmap_dma(self.region.iova(), self.region.len()) {
            // Not expected: the IOMMU handle (the open VFIO device) lives as
            // long as this mapping. Drop cannot fail, so say it and count it.
            // The device can still reach this memory at these addresses: keep
            // both (the memory stays allocated, the IOVA range reserved), so
            // neither is handed to anything else; the kernel drops the
            // mapping when the device is closed.
            s.unmap_failures.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "nvme-vfio: warning: IOMMU unmap of IOVA {:#x}+{:#x} failed: {e}; the memory and its bus addresses stay reserved until the device is closed",
                self.region.iova(),
                self.region.len()
            );
            std::mem::forget(self.region.clone());
            return;
        }
        s.space.lock().unwrap().release(self.reserved.0, self.reserved.1);
        let mut st = s.stats.lock().unwrap();
        st.live_mappings -= 1;
        st.live_bytes -= self.region.len() as u64;
    }
}

/// The pooled chunk small requests come from.
#[derive(Default)]
struct Pool {
    chunk: Option<Arc<Mapping>>,
    used: usize,
}

/// DMA memory for one VFIO container: implements [`DmaAllocator`] for the driver.
pub struct VfioDma {
    shared: Arc<Shared>,
    pool: Mutex<Pool>,
}

impl VfioDma {
    /// An allocator mapping through `iommu`, with IOVAs from `space`.
    pub fn new(iommu: Arc<dyn Iommu>, space: IovaSpace, cfg: DmaConfig) -> VfioDma {
        let try_huge = std::sync::atomic::AtomicBool::new(cfg.hugepages);
        let stats =
            DmaStats { fallback_reason: (!cfg.hugepages).then(|| "not requested".to_string()), ..Default::default() };
        VfioDma {
            shared: Arc::new(Shared {
                iommu,
                space: Mutex::new(space),
                stats: Mutex::new(stats),
                cfg,
                try_huge,
                unmap_failures: AtomicU64::new(0),
            }),
            pool: Mutex::new(Pool::default()),
        }
    }

    /// What backs the memory so far.
    pub fn stats(&self) -> DmaStats {
        self.shared.stats.lock().unwrap().clone()
    }

    /// IOMMU unmaps that failed (normally 0).
    pub fn unmap_failures(&self) -> u64 {
        self.shared.unmap_failures.load(Ordering::Relaxed)
    }

    /// Host memory of at least `len` bytes: hugepages while they last, then
    /// ordinary locked pages. A request of more than one hugepage that finds
    /// too few (a controller's Host Memory Buffer) takes ordinary pages for
    /// itself only: the queues and buffers after it still get hugepages.
    fn host_memory(&self, len: usize) -> Result<(DmaRegion, bool), DmaError> {
        let s = &self.shared;
        if s.try_huge.load(Ordering::Relaxed) {
            match (HostMemory { hugepages: true, lock: true }).map(len) {
                Ok(r) => return Ok((r, true)),
                Err(_) if len > CHUNK_SIZE => {}
                Err(e) => {
                    s.try_huge.store(false, Ordering::Relaxed);
                    s.stats.lock().unwrap().fallback_reason =
                        Some(format!("{e}; using ordinary locked pages (nvme-bypass bind reserves hugepages)"));
                }
            }
        }
        let page = s.cfg.iommu_page.max(4096);
        let r = (HostMemory { hugepages: false, lock: true }).map(len.next_multiple_of(page))?;
        Ok((r, false))
    }

    /// A new IOMMU mapping of at least `len` bytes.
    fn map_new(&self, len: usize) -> Result<Arc<Mapping>, DmaError> {
        let s = &self.shared;
        let (host, huge) = self.host_memory(len)?;
        let va = host.as_ptr() as u64;
        let page = s.cfg.iommu_page.max(4096) as u64;
        if !va.is_multiple_of(page) {
            return Err(DmaError::Map {
                len: host.len(),
                iova: 0,
                msg: format!("memory at {va:#x} is not aligned to the IOMMU's {page}-byte page"),
            });
        }
        // IOVA congruent to the virtual address modulo 2 MiB (see the module doc).
        let va_off = va % CHUNK_SIZE as u64;
        let reserve = (va_off + host.len() as u64).next_multiple_of(CHUNK_SIZE as u64);
        let base = {
            let mut space = s.space.lock().unwrap();
            let left = space.free_bytes();
            space.alloc(reserve, CHUNK_SIZE as u64).ok_or(DmaError::Exhausted {
                asked: reserve as usize,
                left: left as usize,
                hint: "the IOMMU's address space for this device is used up; use fewer or smaller queues/buffers",
            })?
        };
        let iova = base + va_off;
        // SAFETY: `host` is a fresh private mapping owned by the Mapping
        // built below, which unmaps it from the IOMMU in its Drop before the
        // memory can be released; the memory is only ever accessed through
        // DmaRegion's raw-pointer operations.
        let mapped = unsafe { s.iommu.map_dma(iova, host.len(), host.as_ptr()) };
        if let Err(source) = mapped {
            s.space.lock().unwrap().release(base, reserve);
            return Err(DmaError::IommuMap { len: host.len(), iova, source });
        }
        {
            let mut st = s.stats.lock().unwrap();
            if huge {
                st.hugepage_mappings += 1;
            } else {
                st.small_page_mappings += 1;
            }
            st.live_mappings += 1;
            st.live_bytes += host.len() as u64;
            st.lowest_iova = Some(st.lowest_iova.map_or(iova, |l| l.min(iova)));
        }
        Ok(Arc::new(Mapping { region: host.with_iova(iova), reserved: (base, reserve), shared: s.clone() }))
    }

    /// `len` bytes of `m` from `offset`, as a handle that keeps `m` mapped.
    fn handle(m: &Arc<Mapping>, offset: usize, len: usize) -> DmaRegion {
        m.region.sub(offset, len).with_guard(m.clone())
    }
}

/// The first offset at or after `from` where `va + offset` is a multiple of `align`.
fn aligned_offset(va: u64, from: usize, align: usize) -> usize {
    let a = align as u64;
    ((va + from as u64).next_multiple_of(a) - va) as usize
}

impl DmaAllocator for VfioDma {
    fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError> {
        assert!(
            align.is_power_of_two() && align <= CHUNK_SIZE,
            "DMA alignment {align} is not a power of two up to 2 MiB"
        );
        let too_big = || DmaError::Exhausted {
            asked: len,
            left: self.shared.space.lock().unwrap().free_bytes() as usize,
            hint: "the request does not fit the address space; use fewer or smaller queues/buffers",
        };
        let len = len.max(1).checked_next_multiple_of(SUB_ALIGN).ok_or_else(too_big)?;
        let align = align.max(SUB_ALIGN);
        if len >= SMALL_MAX {
            // A mapping of its own; over-allocate when the memory's own
            // alignment (4 KiB for ordinary pages) may fall short.
            let m = self.map_new(len.checked_add(if align > SUB_ALIGN { align } else { 0 }).ok_or_else(too_big)?)?;
            let off = aligned_offset(m.region.as_ptr() as u64, 0, align);
            return Ok(Self::handle(&m, off, m.region.len() - off));
        }
        let mut pool = self.pool.lock().unwrap();
        // Only the pool holds the chunk: every handle into it has dropped,
        // so its space can be handed out again (zeroed below).
        if pool.chunk.as_ref().is_some_and(|c| Arc::strong_count(c) == 1) {
            pool.used = 0;
        }
        let fits = |p: &Pool| {
            p.chunk.as_ref().is_some_and(|c| {
                let off = aligned_offset(c.region.as_ptr() as u64, p.used, align);
                off + len <= c.region.len()
            })
        };
        if !fits(&pool) {
            // The old chunk stays mapped until its last handle drops.
            pool.chunk = Some(self.map_new(CHUNK_SIZE)?);
            pool.used = 0;
        }
        let chunk = pool.chunk.clone().expect("a chunk was just ensured");
        let off = aligned_offset(chunk.region.as_ptr() as u64, pool.used, align);
        pool.used = off + len;
        drop(pool);
        let r = Self::handle(&chunk, off, len);
        // The space may have been used before; the contract is zeroed memory.
        r.fill(0, len, 0);
        Ok(r)
    }
}

impl std::fmt::Debug for VfioDma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VfioDma {{ {} }}", self.stats().describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iova::{DEFAULT_IOVA_END, IOVA_BASE};

    /// An IOMMU that records its mappings.
    #[derive(Default)]
    struct FakeIommu {
        maps: Mutex<Vec<(u64, usize, u64)>>,
        unmapped: Mutex<Vec<(u64, usize)>>,
        /// Make every unmap fail (the mapping stays).
        fail_unmap: std::sync::atomic::AtomicBool,
    }

    impl Iommu for FakeIommu {
        unsafe fn map_dma(&self, iova: u64, len: usize, vaddr: *mut u8) -> Result<(), IommuError> {
            let mut m = self.maps.lock().unwrap();
            for &(i, l, _) in m.iter() {
                assert!(
                    iova + len as u64 <= i || i + l as u64 <= iova,
                    "IOVA {iova:#x}+{len:#x} overlaps a live mapping"
                );
            }
            m.push((iova, len, vaddr as u64));
            Ok(())
        }
        fn unmap_dma(&self, iova: u64, len: usize) -> Result<(), IommuError> {
            if self.fail_unmap.load(Ordering::Relaxed) {
                return Err("injected failure".into());
            }
            let mut m = self.maps.lock().unwrap();
            let i = m.iter().position(|&(i, l, _)| i == iova && l == len).ok_or("no such mapping")?;
            m.remove(i);
            self.unmapped.lock().unwrap().push((iova, len));
            Ok(())
        }
    }

    fn dma(hugepages: bool) -> (Arc<FakeIommu>, VfioDma) {
        let iommu = Arc::new(FakeIommu::default());
        let space = IovaSpace::new(&[(0, u64::MAX)], IOVA_BASE, DEFAULT_IOVA_END, CHUNK_SIZE as u64);
        let d = VfioDma::new(iommu.clone(), space, DmaConfig { hugepages, iommu_page: 4096 });
        (iommu, d)
    }

    #[test]
    fn small_requests_share_one_mapping() {
        let (iommu, d) = dma(false);
        let regions: Vec<DmaRegion> = [2048usize, 512, 4096, 33 * 64, 33 * 16, 32 * 4096, 32 * 4096]
            .iter()
            .map(|&l| d.alloc(l, 4096).unwrap())
            .collect();
        assert_eq!(iommu.maps.lock().unwrap().len(), 1, "one 2 MiB chunk serves them all");
        for (i, r) in regions.iter().enumerate() {
            assert_eq!(r.iova() % 4096, 0);
            assert_eq!(r.as_ptr() as u64 % 4096, 0);
            assert_ne!(r.iova(), r.as_ptr() as u64, "IOVA is not the virtual address");
            assert!(r.iova() >= IOVA_BASE);
            for s in &regions[i + 1..] {
                assert!(
                    r.iova() + r.len() as u64 <= s.iova() || s.iova() + s.len() as u64 <= r.iova(),
                    "{r:?} overlaps {s:?}"
                );
            }
        }
        let st = d.stats();
        assert_eq!((st.small_page_mappings, st.hugepage_mappings, st.live_mappings), (1, 0, 1));
        assert!(st.describe().contains("ordinary 4 KiB pages"), "{}", st.describe());
    }

    #[test]
    fn iova_and_va_agree_modulo_2mib_so_alignment_holds_in_both() {
        let (_iommu, d) = dma(false);
        let _a = d.alloc(4096, 4096).unwrap();
        let b = d.alloc(8192, 64 << 10).unwrap();
        assert_eq!(b.iova() % (64 << 10), 0);
        assert_eq!(b.as_ptr() as u64 % (64 << 10), 0);
        let big = d.alloc(3 << 20, 2 << 20).unwrap();
        assert_eq!(big.iova() % (2 << 20), 0);
        assert_eq!(big.as_ptr() as u64 % (2 << 20), 0);
        assert!(big.len() >= 3 << 20);
    }

    #[test]
    fn memory_is_zeroed_and_reused_after_release() {
        let (iommu, d) = dma(false);
        let a = d.alloc(4096, 4096).unwrap();
        let iova = a.iova();
        a.fill(0, 4096, 0xab);
        drop(a);
        let b = d.alloc(4096, 4096).unwrap();
        assert_eq!(b.iova(), iova, "the chunk's space is handed out again once free");
        assert_eq!(b.read64(0), 0, "zeroed again");
        assert_eq!(iommu.maps.lock().unwrap().len(), 1);
    }

    #[test]
    fn mapping_is_removed_with_the_last_handle() {
        let (iommu, d) = dma(false);
        let big = d.alloc(4 << 20, 4096).unwrap();
        let sub = big.sub(4096, 4096);
        assert_eq!(iommu.maps.lock().unwrap().len(), 1);
        drop(big);
        assert!(iommu.unmapped.lock().unwrap().is_empty(), "a sub-handle keeps it mapped");
        sub.write32(0, 5);
        drop(sub);
        assert_eq!(iommu.unmapped.lock().unwrap().len(), 1);
        assert_eq!(d.stats().live_mappings, 0);
        assert_eq!(d.unmap_failures(), 0);
    }

    #[test]
    fn a_full_chunk_is_replaced_and_the_old_one_lives_on() {
        let (iommu, d) = dma(false);
        let keep: Vec<DmaRegion> = (0..3).map(|_| d.alloc(768 << 10, 4096).unwrap()).collect();
        assert_eq!(iommu.maps.lock().unwrap().len(), 2, "768 KiB x 3 needs a second chunk");
        drop(keep);
        assert_eq!(
            iommu.maps.lock().unwrap().len(),
            1,
            "the retired chunk went with its last handle; the pool keeps the current one"
        );
    }

    #[test]
    fn a_failed_unmap_keeps_the_bus_addresses_from_reuse() {
        // The device can still reach a mapping the IOMMU did not remove:
        // its IOVA range must never be handed to new memory.
        let (iommu, d) = dma(false);
        let a = d.alloc(4 << 20, 4096).unwrap();
        let (iova, len) = (a.iova(), a.len());
        iommu.fail_unmap.store(true, Ordering::Relaxed);
        drop(a);
        assert_eq!(d.unmap_failures(), 1);
        iommu.fail_unmap.store(false, Ordering::Relaxed);
        // (The fake IOMMU panics on a mapping that overlaps a live one.)
        let b = d.alloc(4 << 20, 4096).unwrap();
        assert!(b.iova() >= iova + len as u64 || b.iova() + (b.len() as u64) <= iova, "{b:?} reuses {iova:#x}+{len:#x}");
        assert_eq!(iommu.maps.lock().unwrap().len(), 2, "the old mapping is still there, the new one beside it");
    }

    #[test]
    fn sizes_past_the_address_space_are_errors() {
        let (iommu, d) = dma(false);
        for len in [usize::MAX, usize::MAX - 4096, usize::MAX - (2 << 20)] {
            for align in [4096, 2 << 20] {
                // Refused (no address space, or no such memory), never wrapped
                // around to a small mapping.
                let e = d.alloc(len, align).unwrap_err();
                assert!(matches!(e, DmaError::Exhausted { .. } | DmaError::Alloc { .. }), "{len:#x}/{align:#x}: {e}");
            }
        }
        assert!(iommu.maps.lock().unwrap().is_empty(), "nothing mapped");
    }

    #[test]
    fn a_large_request_without_hugepages_leaves_them_on_for_the_rest() {
        // Without 32 hugepages reserved, a 64 MiB request (a Host Memory
        // Buffer's size class) falls back to
        // ordinary pages for itself, and hugepages stay on for the small
        // queues and buffers after it.
        if std::fs::read_to_string("/proc/sys/vm/nr_hugepages").map_or(true, |n| n.trim().parse::<u64>().unwrap_or(0) >= 32) {
            eprintln!("skipped: 32 or more hugepages reserved here (or unknown)");
            return;
        }
        let (_iommu, d) = dma(true);
        let _big = d.alloc(64 << 20, 4096).unwrap();
        assert!(d.stats().fallback_reason.is_none(), "{:?}", d.stats());
        assert!(d.shared.try_huge.load(Ordering::Relaxed));
    }

    #[test]
    fn hugepages_or_a_stated_fallback() {
        let (_iommu, d) = dma(true);
        let r = d.alloc(4096, 4096).unwrap();
        let st = d.stats();
        if st.hugepage_mappings == 1 {
            assert_eq!(r.as_ptr() as u64 % (2 << 20), 0);
            assert_eq!(r.iova() % (2 << 20), 0, "a hugepage sits at a 2 MiB-aligned IOVA");
        } else {
            // No hugepages reserved on this machine: the fallback says why.
            assert!(st.fallback_reason.as_deref().is_some_and(|r| r.contains("hugepage")), "{st:?}");
            assert!(st.describe().contains("no hugepages"), "{}", st.describe());
        }
    }
}
