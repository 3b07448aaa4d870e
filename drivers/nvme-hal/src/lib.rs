//! # nvme-hal: registers and DMA memory, the only place with raw pointers
//!
//! A userspace NVMe driver talks to its controller through two kinds of
//! memory, and both are shared with a party the Rust compiler knows nothing
//! about:
//!
//! * the **register window** (BAR0 on a PCI device): reads and writes have
//!   side effects, so they must be volatile, exactly sized, and never merged
//!   or elided ([`RegisterWindow`]);
//! * **DMA memory** the controller reads (submission entries, PRP lists,
//!   write data) and writes (completion entries, read data) on its own
//!   schedule ([`DmaRegion`]).
//!
//! Handing out `&T` or `&mut T` into either would be undefined behaviour:
//! the compiler may assume the bytes do not change behind a shared reference.
//! So this crate exposes *copies in and out* (register reads and writes
//! are volatile; every DMA memory access is an aligned atomic one, Relaxed
//! for values and payloads, Acquire/Release for the words used to
//! synchronise, so no two threads can race on it) and nothing else. It is the pattern of libvfn's `support/mmio.h`
//! and ixy.rs's `get_reg32`/`set_reg32`, and it is where every `unsafe`
//! block of the driver stack lives, each with its `// SAFETY:` argument.

#![deny(clippy::undocumented_unsafe_blocks)]

// NVMe registers and queue entries are little-endian. Stores of entries
// convert (`to_le`), but register reads and completion-entry loads take the
// host's order as it is: on a big-endian host CAP, CSTS and every CQE field
// would decode wrongly, so such a build is refused rather than run.
#[cfg(target_endian = "big")]
compile_error!("nvme-hal reads NVMe registers and completion entries without byte swaps: it supports little-endian hosts only");

pub mod barrier;
mod dma;
mod os;
mod regs;

pub use dma::{stream_fence, CqRing, DmaAllocator, DmaError, DmaRegion, DmaRing, DmaWord, HostMemory, RingCursor, RingEntry, RingView, SqRing};
pub use os::{current_thread_cpu, pin_current_thread, rdtsc, unpin_current_thread};
pub use regs::{MemRegisters, RegisterWindow};
