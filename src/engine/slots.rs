//! Per-slot bookkeeping of one thread's queue: one slot per in-flight I/O
//! and registered buffer, and what each slot's I/O is.

use crate::backend::{Io, Op};
use crate::engine::workload::Workload;

/// The slots of one queue.
pub(crate) struct Slots {
    /// Free slots, a stack.
    pub free: Vec<u32>,
    /// What each slot's I/O is (one bounds check and one cache line per I/O).
    pub io: Vec<SlotIo>,
}

/// The I/O a slot holds.
#[derive(Clone, Copy)]
pub(crate) struct SlotIo {
    pub submit_ts: u64,
    pub unit: u64,
    pub op: Op,
}

impl SlotIo {
    /// The path's request for this I/O in `slot` (its buffer and tag).
    #[inline(always)]
    pub fn io(&self, slot: u32, wl: &Workload, blocks: u32) -> Io {
        Io { op: self.op, lba: wl.lba_of(self.unit), blocks, buf: slot, tag: slot as u64 }
    }
}

impl Slots {
    pub fn new(depth: usize) -> Self {
        Slots { free: (0..depth as u32).rev().collect(), io: vec![SlotIo { submit_ts: 0, unit: 0, op: Op::Read }; depth] }
    }
}

/// Record I/O `op` on `unit` in `slot` and return its command.
#[inline(always)]
pub(crate) fn fill_one(io: &mut [SlotIo], slot: u32, op: Op, unit: u64, t: u64, wl: &Workload, blocks: u32) -> Io {
    let s = SlotIo { submit_ts: t, unit, op };
    io[slot as usize] = s;
    s.io(slot, wl, blocks)
}

/// The operation's name in messages.
pub(crate) fn op_name(op: Op) -> &'static str {
    match op {
        Op::Read => "read",
        Op::Write => "write",
        Op::Flush => "flush",
    }
}
