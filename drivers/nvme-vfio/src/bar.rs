//! BAR0, the controller's registers, as a bounds-checked volatile
//! [`RegisterWindow`]: the only way this crate touches device registers.

use nvme_hal::RegisterWindow;
use std::ptr::NonNull;
use std::sync::Arc;

/// A memory-mapped PCI BAR: a private pointer and length, with 32-bit
/// volatile reads and writes checked against the length (ixy.rs's
/// `get_reg32`/`set_reg32`). The mapping is undone on drop; `_keep` keeps
/// what the mapping belongs to (the VFIO device) open until then.
pub struct Bar {
    ptr: NonNull<u8>,
    len: usize,
    /// Unmap on drop (false when the memory is not ours to unmap: tests).
    unmap: bool,
    _keep: Arc<dyn Send + Sync>,
}

// SAFETY: a Bar is a pointer to device registers; every access is a single
// volatile load or store, which any thread may perform (the driver
// serialises what needs serialising: a doorbell belongs to one queue).
unsafe impl Send for Bar {}
// SAFETY: as for Send; no method hands out references to the mapping.
unsafe impl Sync for Bar {}

impl Bar {
    /// Wrap a mapping of `len` bytes at `ptr`, unmapped (munmap) on drop.
    ///
    /// # Safety
    /// `ptr` must be the start of a `MAP_SHARED` mapping of `len` bytes of
    /// device registers that nothing else unmaps, and that stays valid as
    /// long as `keep` lives; no Rust references into it may exist.
    pub(crate) unsafe fn from_mapping(ptr: NonNull<u8>, len: usize, keep: Arc<dyn Send + Sync>) -> Bar {
        Bar { ptr, len, unmap: true, _keep: keep }
    }

    /// A `Bar` over ordinary memory, for tests of code that takes a `Bar`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes, 4-byte
    /// aligned, for as long as `keep` lives, and not accessed through
    /// references meanwhile. It is not unmapped on drop.
    pub unsafe fn over_memory(ptr: NonNull<u8>, len: usize, keep: Arc<dyn Send + Sync>) -> Bar {
        Bar { ptr, len, unmap: false, _keep: keep }
    }

    /// The register at `offset` as a raw pointer, after the bounds and
    /// alignment check. Out-of-bounds register access is a driver bug
    /// (a wrong doorbell computation), so it panics rather than touch
    /// whatever lies beyond the BAR.
    #[inline(always)]
    fn reg(&self, offset: usize) -> *mut u32 {
        assert!(
            offset.is_multiple_of(4) && offset < self.len && self.len - offset >= 4,
            "register access at {offset:#x} is outside BAR0 ({:#x} bytes) or unaligned",
            self.len
        );
        self.ptr.as_ptr().wrapping_add(offset).cast::<u32>()
    }
}

impl RegisterWindow for Bar {
    #[inline]
    fn read32(&self, offset: usize) -> u32 {
        let p = self.reg(offset);
        // SAFETY: `reg` checked that the 4 bytes lie inside the mapping and
        // are aligned; the mapping is live while `self` is; a volatile load
        // is one exactly sized MMIO read, never merged or elided.
        unsafe { p.read_volatile() }
    }

    #[inline]
    fn write32(&self, offset: usize, value: u32) {
        let p = self.reg(offset);
        // SAFETY: as for read32; a volatile store is one MMIO write, issued
        // in program order with respect to other volatile accesses.
        unsafe { p.write_volatile(value) }
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if self.unmap {
            // SAFETY: ptr/len are the mapping created for this Bar, unmapped
            // only here; no references into it exist.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        }
    }
}

impl std::fmt::Debug for Bar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bar {{ len: {:#x} }}", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvme_hal::HostMemory;

    fn bar(len: usize) -> Bar {
        let mem = HostMemory::plain().map(len).unwrap();
        let ptr = NonNull::new(mem.as_ptr()).unwrap();
        // SAFETY: the mapping is kept alive by `keep` (the region) and only
        // accessed through the Bar.
        unsafe { Bar::over_memory(ptr, len, Arc::new(mem)) }
    }

    #[test]
    fn volatile_round_trip_and_64_bit_halves() {
        let b = bar(0x4000);
        b.write32(0x14, 0x0046_0001);
        assert_eq!(b.read32(0x14), 0x0046_0001);
        b.write64(0x28, 0x1234_5678_9abc_def0);
        assert_eq!(b.read32(0x28), 0x9abc_def0, "low half first, at the lower address");
        assert_eq!(b.read64(0x28), 0x1234_5678_9abc_def0);
        b.write32(0x3ffc, 7);
        assert_eq!(b.read32(0x3ffc), 7);
        assert_eq!(RegisterWindow::len(&b), 0x4000);
    }

    #[test]
    #[should_panic(expected = "outside BAR0")]
    fn past_the_end_panics() {
        bar(0x4000).read32(0x4000);
    }

    #[test]
    #[should_panic(expected = "outside BAR0")]
    fn straddling_the_end_panics() {
        bar(0x4000).write32(0x3ffe, 0);
    }

    #[test]
    #[should_panic(expected = "unaligned")]
    fn unaligned_panics() {
        bar(0x4000).read32(0x13);
    }
}
