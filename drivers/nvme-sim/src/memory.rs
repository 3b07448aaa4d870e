//! The simulator's "IOMMU": host memory handed to the driver at bus
//! addresses (IOVAs) of the simulator's choosing, translated back when the
//! controller follows a queue base address or a PRP entry.
//!
//! IOVAs start at 1 TiB so they never equal the virtual address (a driver
//! that confuses the two fails here as it would on VFIO). Freed memory is
//! unregistered when the driver's last handle drops; a later access by the
//! controller to that IOVA fails translation, like an IOMMU fault.

use nvme_hal::{DmaAllocator, DmaError, DmaRegion, HostMemory};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const IOVA_BASE: u64 = 1 << 40;

#[derive(Default)]
struct Table {
    next_iova: u64,
    /// (iova, region as the controller sees it), sorted by iova.
    regions: Vec<(u64, DmaRegion)>,
}

/// DMA memory for a simulated controller.
pub struct SimMemory {
    table: Mutex<Table>,
    generation: AtomicU64,
}

/// Dropped with the driver's last handle to an allocation: unregisters it.
struct Registration {
    mem: Arc<SimMemory>,
    iova: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut t = self.mem.table.lock().unwrap();
        t.regions.retain(|(i, _)| *i != self.iova);
        self.mem.generation.fetch_add(1, Ordering::Release);
    }
}

impl SimMemory {
    /// An empty address space.
    pub fn new() -> Arc<Self> {
        Arc::new(SimMemory {
            table: Mutex::new(Table { next_iova: IOVA_BASE, regions: vec![] }),
            generation: AtomicU64::new(0),
        })
    }

    /// Allocate `len` bytes (page granular) visible to the controller.
    pub fn alloc_arc(self: &Arc<Self>, len: usize) -> Result<DmaRegion, DmaError> {
        let host = HostMemory::plain().map(len)?;
        let mut t = self.table.lock().unwrap();
        let iova = t.next_iova;
        // Leave a guard page of IOVA space between allocations so an overrun
        // is a translation fault, not a silent access to the neighbour.
        t.next_iova += host.len() as u64 + 4096;
        let device_view = host.clone().with_iova(iova);
        t.regions.push((iova, device_view));
        drop(t);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(host.with_iova(iova).with_guard(Registration { mem: self.clone(), iova }))
    }

    /// Changes whenever an allocation comes or goes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A copy of the table for the controller thread.
    pub fn snapshot(&self) -> IovaMap {
        let t = self.table.lock().unwrap();
        IovaMap { regions: t.regions.clone(), generation: self.generation() }
    }

    /// Bytes currently registered.
    pub fn registered_bytes(&self) -> usize {
        self.table.lock().unwrap().regions.iter().map(|(_, r)| r.len()).sum()
    }
}

/// Allocator handle: `Arc<SimMemory>` implements [`DmaAllocator`].
pub struct SimAllocator(pub Arc<SimMemory>);

impl DmaAllocator for SimAllocator {
    fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError> {
        assert!(align.is_power_of_two() && align <= 4096);
        self.0.alloc_arc(len)
    }
}

/// The controller thread's view of the address space.
#[derive(Default)]
pub struct IovaMap {
    regions: Vec<(u64, DmaRegion)>,
    generation: u64,
}

impl IovaMap {
    /// Generation this snapshot was taken at.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// The region containing `[iova, iova+len)` and the offset of `iova` in
    /// it, or `None` (an IOMMU fault on real hardware).
    #[inline]
    pub fn translate(&self, iova: u64, len: usize) -> Option<(&DmaRegion, usize)> {
        let i = self.regions.partition_point(|(base, _)| *base <= iova);
        let (base, r) = self.regions.get(i.checked_sub(1)?)?;
        let off = (iova - base) as usize;
        (off.checked_add(len)? <= r.len()).then_some((r, off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translate_and_unregister() {
        let m = SimMemory::new();
        let a = m.alloc_arc(8192).unwrap();
        let b = m.alloc_arc(4096).unwrap();
        assert!(a.iova() >= IOVA_BASE);
        assert_ne!(a.iova(), a.as_ptr() as u64, "IOVA differs from the virtual address");
        let map = m.snapshot();
        let (r, off) = map.translate(a.iova() + 4100, 8).unwrap();
        assert_eq!(off, 4100);
        a.write32(4100, 0x55aa);
        assert_eq!(r.read32(4100), 0x55aa);
        assert!(map.translate(a.iova() + 8190, 8).is_none(), "straddles the end");
        assert!(map.translate(b.iova() + 4096, 1).is_none(), "guard gap");
        assert!(map.translate(0x1000, 1).is_none());
        let g = m.generation();
        let sub = a.sub(0, 16);
        drop(a);
        assert_eq!(m.generation(), g, "a sub-handle keeps it registered");
        drop(sub);
        assert!(m.generation() > g);
        assert!(m.snapshot().translate(b.iova(), 4096).is_some());
        assert_eq!(m.registered_bytes(), 4096);
    }
}
