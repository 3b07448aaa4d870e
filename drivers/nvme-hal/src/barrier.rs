//! Memory barriers between this CPU and a device that reads and writes
//! host memory by DMA, in the three places a queue needs one. Rust's
//! fences order memory between threads (x86-64: every one but SeqCst is a
//! compiler barrier; aarch64: `dmb ish`, the inner shareable domain), which
//! is what the simulated controller, a thread, needs. A PCIe device sits in
//! the outer shareable domain, so on aarch64 these add the barriers Linux
//! uses there (`arch/arm64/include/asm/barrier.h`): `dmb oshst`/`dmb oshld`
//! for dma_wmb/dma_rmb and `dsb sy` for mb. On x86-64 they compile to
//! what they did before: nothing but a compiler barrier, and MFENCE for the
//! full one. Other architectures get Rust's fences only, which order the
//! simulator's thread but not a device: [`DEVICE_BARRIERS`] is false there.

use std::sync::atomic::{fence, Ordering};

/// True where these barriers also order against a device (x86-64,
/// aarch64); elsewhere a real controller must not be driven.
pub const DEVICE_BARRIERS: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// Before a doorbell (an MMIO write or a shadow doorbell store): every
/// earlier store to DMA memory (submission entries, PRP lists) and load
/// of it (consumed completions, whose slots the controller may refill)
/// is done first. Linux: the barrier in `writel`, `dma_wmb()`.
#[inline(always)]
pub fn before_doorbell() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction: no operands, touches no register or
    // memory (the asm is not `nomem`, so it is also a compiler barrier).
    unsafe {
        std::arch::asm!("dmb osh", options(nostack, preserves_flags))
    }
    fence(Ordering::Release)
}

/// After a completion's phase tag was seen new: the loads of the rest of
/// the entry happen after it, not before (the controller writes the phase
/// last). Linux: `dma_rmb()` in `nvme_cqe_pending`'s callers.
#[inline(always)]
pub fn after_phase() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as in before_doorbell.
    unsafe {
        std::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    }
    fence(Ordering::Acquire)
}

/// A store to DMA memory (a shadow doorbell) is visible before a later
/// load of DMA memory (the EventIdx beside it): store-load order, the one
/// x86 does not give for free. Linux: `mb()` in
/// `nvme_dbbuf_update_and_check_event`.
#[inline(always)]
pub fn full() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as in before_doorbell.
    unsafe {
        std::arch::asm!("dsb sy", options(nostack, preserves_flags))
    }
    fence(Ordering::SeqCst)
}
