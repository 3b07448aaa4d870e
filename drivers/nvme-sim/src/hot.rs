//! What a synchronous controller's step writes, and whether it owns the
//! cache lines it writes (see `SimController::hot_memory`).

use std::ops::Range;

/// Memory a synchronous controller's step writes, on the thread that rings
/// its doorbells (see [`crate::SimController::hot_memory`]).
#[derive(Clone, Debug)]
pub struct HotMemory {
    /// What it is.
    pub what: &'static str,
    /// The bytes written, as addresses.
    pub written: Range<usize>,
    /// The object or allocation they lie in.
    pub within: Range<usize>,
}

impl HotMemory {
    /// The whole of `r`.
    pub(crate) fn of<T: ?Sized>(what: &'static str, r: &T) -> Self {
        let a = r as *const T as *const u8 as usize;
        let range = a..a + std::mem::size_of_val(r);
        HotMemory { what, written: range.clone(), within: range }
    }

    /// The 128-byte blocks (pairs of cache lines) the written bytes touch,
    /// as block numbers.
    pub fn blocks(&self) -> Range<usize> {
        self.written.start / 128..self.written.end.div_ceil(128)
    }

    /// Every 128-byte block the written bytes touch lies inside `within`,
    /// so no other object (of another controller, say) shares a line with
    /// them, wherever the allocator put its neighbours.
    pub fn owns_its_lines(&self) -> bool {
        let b = self.blocks();
        self.written.is_empty() || (b.start * 128 >= self.within.start && b.end * 128 <= self.within.end)
    }
}
