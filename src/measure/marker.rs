//! Marker instructions that open and close a counting window for the test
//! bed's QEMU plugin (`scripts/testbed/insn-count`), which counts the
//! guest's instructions (user and kernel, every vCPU) and MMIO accesses
//! exactly between them.
//!
//! A marker is a 7-byte NOP no compiler emits: `nopl 0x4e564253(%rax)`
//! (`0f 1f 80 53 42 56 4e`, "SBVN") starts a window, the same with `45`
//! (`...45 42 56 4e`) stops it. `rax` carries the window's id, `rdi` the
//! runtime address of [`start`] (or [`stop`]), so the host can relocate
//! the position-independent binary's symbols. On a real CPU, or under QEMU
//! without the plugin, they do nothing. Off x86-64 they are empty.
//!
//! Inside a window, two more markers price the polls that find nothing
//! exactly, where they happen: [`pass`] (`...50 42 56 4e`, "PBVN") at
//! the top of every pass of the engine's loop and [`empty`] (`...5a 42 56
//! 4e`, "ZBVN") in a pass that found nothing. The plugin adds each pass
//! that ran `empty`, from its `pass` to the next, to the window's empty
//! passes (user and kernel instructions). They take no operands: one
//! instruction each, always executed (a branch on whether markers are on
//! would cost more than the NOP).
//!
//! The engine marks its measured interval (thread 0's, from the end of the
//! ramp to the drain) only when `NVB_MARKERS` is set to a number N: `bench`
//! marks window N; `compare` marks row i (0-based, in run order) as window
//! N + i. `nvme-bypass idle` marks a sleep (idle background).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Open window `id`.
#[inline(never)]
pub fn start(id: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the bytes are one NOP instruction (`nopl disp32(%rax)`, an
    // address that is computed, never accessed); it reads rax and rdi and
    // changes no register, memory or flag.
    unsafe {
        core::arch::asm!(
            ".byte 0x0f, 0x1f, 0x80, 0x53, 0x42, 0x56, 0x4e",
            in("rax") id,
            in("rdi") start as fn(u64) as usize,
            options(nomem, nostack, preserves_flags),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = id;
}

/// Close window `id`.
#[inline(never)]
pub fn stop(id: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `start`: one NOP that reads rax and rdi, changes nothing.
    unsafe {
        core::arch::asm!(
            ".byte 0x0f, 0x1f, 0x80, 0x45, 0x42, 0x56, 0x4e",
            in("rax") id,
            in("rdi") stop as fn(u64) as usize,
            options(nomem, nostack, preserves_flags),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = id;
}

/// A pass of the engine's loop starts (see the module's documentation).
#[inline(always)]
pub fn pass() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: one NOP instruction (`nopl disp32(%rax)`, an address that is
    // computed, never accessed); it changes no register, memory or flag.
    unsafe {
        core::arch::asm!(".byte 0x0f, 0x1f, 0x80, 0x50, 0x42, 0x56, 0x4e", options(nomem, nostack, preserves_flags));
    }
}

/// The pass found nothing: an empty poll (see the module's documentation).
#[inline(always)]
pub fn empty() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `pass`: one NOP that changes nothing.
    unsafe {
        core::arch::asm!(".byte 0x0f, 0x1f, 0x80, 0x5a, 0x42, 0x56, 0x4e", options(nomem, nostack, preserves_flags));
    }
}

/// `NVB_MARKERS`, read once: the first window's id, or None (no markers).
pub fn base() -> Option<u64> {
    static BASE: OnceLock<Option<u64>> = OnceLock::new();
    *BASE.get_or_init(|| {
        let v = std::env::var("NVB_MARKERS").ok()?;
        match v.trim().parse() {
            Ok(n) => Some(n),
            Err(_) => {
                eprintln!("nvme-bypass: NVB_MARKERS={v:?} is not a window number: no markers");
                None
            }
        }
    })
}

/// The empty-poll calibration of window `N` is window `CALIBRATION_BASE + N`
/// (the engine polls its drained queue [`CALIBRATION_POLLS`] times in it).
pub const CALIBRATION_BASE: u64 = 10000;

/// Polls of one empty-poll calibration window.
pub const CALIBRATION_POLLS: u64 = 10000;

static OFFSET: AtomicU64 = AtomicU64::new(0);

/// The next measured runs are window `NVB_MARKERS + offset` (compare: the row).
pub fn set_offset(offset: u64) {
    OFFSET.store(offset, Ordering::Relaxed);
}

/// The id the engine marks its measured interval with, if markers are on.
pub fn window() -> Option<u64> {
    base().map(|b| b.wrapping_add(OFFSET.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    /// The markers are NOPs on the host CPU too.
    #[test]
    fn markers_do_nothing() {
        super::start(7);
        super::pass();
        super::empty();
        super::stop(7);
    }
}
