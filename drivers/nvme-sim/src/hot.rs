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

/// Whether two controllers' step memory (`SimController::hot_memory` of
/// each) shares a cache line: `Err` names the first piece that does not
/// own its 128-byte blocks, or the first pair of pieces, one of each, that
/// share one.
pub fn check_no_shared_block(a: &[HotMemory], b: &[HotMemory]) -> Result<(), String> {
    if let Some(h) = a.iter().chain(b).find(|h| !h.owns_its_lines()) {
        return Err(format!("{} ({:#x?}) shares a 128-byte block with what lies around it ({:#x?})", h.what, h.written, h.within));
    }
    for x in a {
        for y in b {
            let (p, q) = (x.blocks(), y.blocks());
            if !(p.end <= q.start || q.end <= p.start) {
                return Err(format!("{} of one controller and {} of the other share a 128-byte block", x.what, y.what));
            }
        }
    }
    Ok(())
}
