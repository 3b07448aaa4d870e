//! Marker instructions that open and close a counting window for the test
//! bed's QEMU plugin (`scripts/testbed/insn-count`), which counts the
//! guest's instructions (user and kernel, every vCPU) and MMIO accesses
//! exactly between them.
//!
//! A marker is a 7-byte NOP no compiler emits: `nopl 0x4e564253(%rax)`
//! (`0f 1f 80 53 42 56 4e`, "SBVN") starts a window, the same with `45`
//! (`...45 42 56 4e`) stops it. `rax` carries the window's id, `rdi` the
//! runtime address of [`start`] (or [`stop`]), so the host can relocate
//! the position-independent binary's symbols; at the start `rsi` and `rdx`
//! carry where the process's vDSO is and its length, whose code (the
//! clock's) is outside the binary. On a real CPU, or under QEMU
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
//! An interrupt-driven queue waits in the kernel instead: [`wait`]
//! (`...57 42 56 4e`, "WBVN") runs before the system calls that sleep on
//! the queue's eventfd and [`woke`] (`...52 42 56 4e`, "RBVN") after them.
//! The plugin adds each wait, from one to the other on the same timeline,
//! to the window's waits: the system calls, the sleep, the interrupt that
//! ends it and the wake-up. How many a row needs follows how fast the
//! device completes beside the CPU, as its empty polls do.
//!
//! The kernel's IOPOLL loop polls inside one system call until a batch is
//! found, where no marker of ours can run. So, before its first window, a
//! process with markers on names four kinds of kernel address to the
//! plugin, one [`kernel_address`] marker (`...4b 42 56 4e`, "KBVN") each,
//! read from `/proc/kallsyms` (as root, which the test bed's guest is):
//! where a poll starts (`nvme_poll`, which the block layer calls over and
//! over until a completion is found), where a poll has found one (the
//! driver completes what a poll found through `nvme_pci_complete_batch`,
//! or one by one through `nvme_pci_complete_rq`, before the next poll
//! starts; `nvme_poll`'s own reap is inlined and has no address to
//! watch), where the system call returns (`syscall_exit_to_user_mode`) and
//! where interrupts come in (`asm_sysvec_*`, `asm_common_interrupt`). The
//! plugin then times each poll from one start to the next and adds those
//! that found nothing, without an interrupt in them, to the kernel's empty
//! polls.
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
    {
        let (vdso, vdso_len) = vdso();
        // SAFETY: the bytes are one NOP instruction (`nopl disp32(%rax)`,
        // an address that is computed, never accessed); it reads rax, rdi,
        // rsi and rdx and changes no register, memory or flag.
        unsafe {
            core::arch::asm!(
                ".byte 0x0f, 0x1f, 0x80, 0x53, 0x42, 0x56, 0x4e",
                in("rax") id,
                in("rdi") start as fn(u64) as usize,
                in("rsi") vdso,
                in("rdx") vdso_len,
                options(nomem, nostack, preserves_flags),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = id;
}

/// This process's vDSO (start, length), the `[vdso]` line of
/// `/proc/self/maps`, read once; (0, 0) when it is not there. The START
/// marker hands it to the plugin: the vDSO's code is the clock's
/// (`clock_gettime` and friends), outside the binary's symbols.
fn vdso() -> (u64, u64) {
    static VDSO: OnceLock<(u64, u64)> = OnceLock::new();
    *VDSO.get_or_init(|| std::fs::read_to_string("/proc/self/maps").ok().and_then(|m| vdso_in_maps(&m)).unwrap_or((0, 0)))
}

/// The `[vdso]` mapping of a `/proc/PID/maps` text: (start, length).
fn vdso_in_maps(maps: &str) -> Option<(u64, u64)> {
    let line = maps.lines().find(|l| l.split_whitespace().nth(5) == Some("[vdso]"))?;
    let (a, b) = line.split_whitespace().next()?.split_once('-')?;
    let (a, b) = (u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?);
    (b > a).then_some((a, b - a))
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

/// The thread is about to wait for its queue's interrupt (see the
/// module's documentation).
#[inline(always)]
pub fn wait() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `pass`: one NOP that changes nothing.
    unsafe {
        core::arch::asm!(".byte 0x0f, 0x1f, 0x80, 0x57, 0x42, 0x56, 0x4e", options(nomem, nostack, preserves_flags));
    }
}

/// The wait for the interrupt is over (see the module's documentation).
#[inline(always)]
pub fn woke() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `pass`: one NOP that changes nothing.
    unsafe {
        core::arch::asm!(".byte 0x0f, 0x1f, 0x80, 0x52, 0x42, 0x56, 0x4e", options(nomem, nostack, preserves_flags));
    }
}

/// Watch kernel address `addr` as `kind` (see the module's documentation).
#[inline(never)]
fn kernel_address(kind: KernelAddress, addr: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `start`: one NOP that reads rax and rdi, changes nothing.
    unsafe {
        core::arch::asm!(
            ".byte 0x0f, 0x1f, 0x80, 0x4b, 0x42, 0x56, 0x4e",
            in("rax") kind as u64,
            in("rdi") addr,
            options(nomem, nostack, preserves_flags),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (kind, addr);
}

/// The kinds of kernel address [`kernel_address`] names (the plugin's
/// `K_POLL`...`K_IRQ`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum KernelAddress {
    /// A poll of the IOPOLL loop starts.
    Poll = 1,
    /// The poll found completions.
    Found = 2,
    /// A system call returns to user mode.
    Exit = 3,
    /// An interrupt comes in.
    Interrupt = 4,
}

/// The kind of kernel symbol `name` (of module `module`, None: built in)
/// is, for [`kernel_address`].
pub fn kernel_address_kind(name: &str, module: Option<&str>) -> Option<KernelAddress> {
    match (name, module) {
        ("nvme_poll", Some("[nvme]")) => Some(KernelAddress::Poll),
        ("nvme_pci_complete_batch" | "nvme_pci_complete_rq", Some("[nvme]")) => Some(KernelAddress::Found),
        ("syscall_exit_to_user_mode", None) => Some(KernelAddress::Exit),
        ("asm_common_interrupt", None) => Some(KernelAddress::Interrupt),
        (n, None) if n.starts_with("asm_sysvec_") => Some(KernelAddress::Interrupt),
        _ => None,
    }
}

/// The kernel addresses to name, from `/proc/kallsyms`'s text (a module's
/// symbol line ends in `[module]`); none when the addresses are hidden
/// (zeros: not root).
pub fn kernel_addresses(kallsyms: &str) -> Vec<(KernelAddress, u64)> {
    let mut out = vec![];
    for line in kallsyms.lines() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(_), Some(name), module, None) = (f.next(), f.next(), f.next(), f.next(), f.next()) else { continue };
        let (Some(kind), Ok(addr)) = (kernel_address_kind(name, module), u64::from_str_radix(addr, 16)) else { continue };
        if addr != 0 {
            out.push((kind, addr));
        }
    }
    out
}

/// Name the kernel's poll loop to the plugin (see the module's
/// documentation). Without the symbols, nothing is named and the report
/// falls back to its model of the kernel's polls.
fn announce_kernel_polls() {
    let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else { return };
    for (kind, addr) in kernel_addresses(&text) {
        kernel_address(kind, addr);
    }
}

/// `NVB_MARKERS`, read once: the first window's id, or None (no markers).
/// With markers on, the first call also names the kernel's poll loop to
/// the plugin, before any window opens.
pub fn base() -> Option<u64> {
    static BASE: OnceLock<Option<u64>> = OnceLock::new();
    *BASE.get_or_init(|| {
        let v = std::env::var("NVB_MARKERS").ok()?;
        match v.trim().parse() {
            Ok(n) => {
                announce_kernel_polls();
                Some(n)
            }
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
        super::kernel_address(super::KernelAddress::Poll, 0xffff_ffff_8100_0000);
    }

    #[test]
    fn the_vdso_from_the_maps() {
        let maps = "\
7f477110c000-7f4771200000 r-xp 00000000 00:1a 12                         /run/nvb-bin/nvme-bypass
7ffc2d5f0000-7ffc2d5f4000 r--p 00000000 00:00 0                          [vvar]
7ffc2d5f4000-7ffc2d5f6000 r-xp 00000000 00:00 0                          [vdso]
";
        assert_eq!(super::vdso_in_maps(maps), Some((0x7ffc2d5f4000, 0x2000)));
        assert_eq!(super::vdso_in_maps("7ffc2d5f0000-7ffc2d5f4000 r--p 00000000 00:00 0 [vvar]\n"), None);
        #[cfg(target_os = "linux")]
        assert!(super::vdso().1 > 0, "this process has a vDSO");
    }

    #[test]
    fn kernel_addresses_from_kallsyms() {
        let text = "\
ffffffffc0100000 t nvme_poll\t[nvme]
ffffffffc0100400 t nvme_poll_cq\t[nvme]
ffffffffc0100800 t nvme_pci_complete_batch\t[nvme]
ffffffffc0100900 t nvme_pci_complete_rq\t[nvme]
ffffffff83099400 t io_complete_rw_iopoll
ffffffff894e6770 T syscall_exit_to_user_mode
ffffffff89601200 T asm_sysvec_apic_timer_interrupt
ffffffff89601000 T asm_common_interrupt
ffffffff89601300 T asm_exc_page_fault
ffffffff88e9ac90 T io_do_iopoll
ffffffffc0200000 t nvme_poll\t[other]
0000000000000000 t nvme_poll\t[nvme]
";
        use super::KernelAddress::*;
        assert_eq!(
            super::kernel_addresses(text),
            vec![(Poll, 0xffffffffc0100000), (Found, 0xffffffffc0100800), (Found, 0xffffffffc0100900), (Exit, 0xffffffff894e6770), (Interrupt, 0xffffffff89601200), (Interrupt, 0xffffffff89601000)]
        );
    }
}
