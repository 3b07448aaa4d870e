//! The register window abstraction.

use std::sync::atomic::{AtomicU32, Ordering};

/// A controller's register window: BAR0 of a PCI NVMe function, or the
/// simulated controller's registers. Offsets are bytes from the start of the
/// window (see `nvme_spec::regs::offset`).
///
/// Implementations must make every access a single, exactly sized access
/// that is neither merged, split further, nor elided (volatile for MMIO,
/// atomic for the simulator), and must keep them in program order.
/// A 64-bit register is accessed as two 32-bit halves, low first, which the
/// NVMe PCIe transport allows (NVMe 1.4c §3.1) and which every controller
/// accepts, including ones that reject 8-byte MMIO.
pub trait RegisterWindow: Send + Sync {
    /// Read the 32-bit register at `offset`.
    fn read32(&self, offset: usize) -> u32;
    /// Write the 32-bit register at `offset`.
    fn write32(&self, offset: usize, value: u32);
    /// Size of the window in bytes.
    fn len(&self) -> usize;
    /// True for an empty window (never, for a usable controller).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Read a 64-bit register as two halves, low first.
    fn read64(&self, offset: usize) -> u64 {
        let lo = self.read32(offset) as u64;
        let hi = self.read32(offset + 4) as u64;
        lo | hi << 32
    }
    /// Write a 64-bit register as two halves, low first.
    fn write64(&self, offset: usize, value: u64) {
        self.write32(offset, value as u32);
        self.write32(offset + 4, (value >> 32) as u32);
    }
}

impl<T: RegisterWindow + ?Sized> RegisterWindow for std::sync::Arc<T> {
    #[inline]
    fn read32(&self, offset: usize) -> u32 {
        (**self).read32(offset)
    }
    #[inline]
    fn write32(&self, offset: usize, value: u32) {
        (**self).write32(offset, value)
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    #[inline]
    fn read64(&self, offset: usize) -> u64 {
        (**self).read64(offset)
    }
    #[inline]
    fn write64(&self, offset: usize, value: u64) {
        (**self).write64(offset, value)
    }
}

/// A register window in ordinary memory, made of atomics: what a fake
/// device in a unit test, or the simulated controller, exposes. Writes are
/// `Release` and reads `Acquire`, so a doorbell write publishes the queue
/// entries written before it, as a real doorbell does for the device.
pub struct MemRegisters {
    words: Box<[AtomicU32]>,
}

impl MemRegisters {
    /// A zeroed window of `len` bytes (rounded up to whole dwords).
    pub fn new(len: usize) -> Self {
        MemRegisters { words: (0..len.div_ceil(4)).map(|_| AtomicU32::new(0)).collect() }
    }
    /// The atomic behind the register at `offset`, for the device side.
    #[inline]
    pub fn word(&self, offset: usize) -> &AtomicU32 {
        &self.words[offset / 4]
    }
}

impl RegisterWindow for MemRegisters {
    #[inline]
    fn read32(&self, offset: usize) -> u32 {
        debug_assert_eq!(offset % 4, 0, "unaligned register read");
        self.words[offset / 4].load(Ordering::Acquire)
    }
    #[inline]
    fn write32(&self, offset: usize, value: u32) {
        debug_assert_eq!(offset % 4, 0, "unaligned register write");
        self.words[offset / 4].store(value, Ordering::Release)
    }
    fn len(&self) -> usize {
        self.words.len() * 4
    }
}
