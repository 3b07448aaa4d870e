//! Shadow doorbells (Doorbell Buffer Config, NVMe 1.4c admin command 7Ch,
//! advertised by OACS bit 8).
//!
//! Writing a doorbell register is an MMIO write. On an emulated or
//! para-virtualized controller every MMIO write traps to the hypervisor,
//! which is slow. With Doorbell Buffer Config the host also keeps each
//! doorbell value in a page of ordinary memory (the *shadow doorbell
//! buffer*), which the controller reads, and the controller tells the host,
//! in a second page (the *EventIdx buffer*), how far it has looked. The host
//! writes the real register only when the controller may have stopped
//! looking: the EventIdx rule below, the same one virtio uses.
//!
//! Both buffers have the doorbell registers' layout from offset 0: the slot
//! of queue `y` is `(2y + is_cq) * (4 << CAP.DSTRD)` bytes in, so they span
//! every queue the host may create at the controller's stride
//! ([`buffer_len`]), past the first page when there are many queues or a
//! large stride. The controller uses the slots of every I/O queue; the admin
//! queue keeps its MMIO doorbells, as Linux does.

use nvme_hal::{DmaRegion, DmaWord};

/// True when moving a doorbell from `old` to `new` crosses `event_idx`, the
/// value the controller asked to be woken at: then an MMIO write is needed.
/// (Linux `nvme_dbbuf_need_event`; all arithmetic modulo 2^16.)
#[inline]
pub fn need_event(event_idx: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event_idx).wrapping_sub(1) < new.wrapping_sub(old)
}

/// Bytes each of the two buffers needs for the admin queue and I/O queues
/// 1 to `io_queues` at doorbell stride `4 << dstrd`: two slots per queue,
/// rounded up to whole pages of `page_size`, as Linux sizes them
/// (`nvme_dbbuf_size`: queues x 8 x stride). `None` if it does not fit a
/// `usize`.
pub fn buffer_len(io_queues: u16, dstrd: u8, page_size: usize) -> Option<usize> {
    (io_queues as usize + 1).checked_mul(2)?.checked_mul(4usize.checked_shl(dstrd as u32)?)?.checked_next_multiple_of(page_size)
}

/// One queue's slots in the shadow doorbell and EventIdx buffers.
#[derive(Clone, Debug)]
pub struct ShadowSlot {
    db: DmaWord,
    ei: DmaWord,
}

impl ShadowSlot {
    /// The slot at byte `offset` (the doorbell's offset minus 1000h) of the
    /// two buffers. Panics if it is not inside both, or not 4-byte aligned:
    /// checked here, once, not on each doorbell.
    pub fn new(dbs: &DmaRegion, eis: &DmaRegion, offset: usize) -> Self {
        ShadowSlot { db: dbs.word(offset), ei: eis.word(offset) }
    }

    /// Reset the slot to 0 in both buffers (before a queue with this id is
    /// created: a stale tail would make the controller fetch garbage).
    pub fn clear(&self) {
        self.db.store(0);
        self.ei.store(0);
    }

    /// Publish `new` in the shadow slot; true when the MMIO doorbell must be
    /// written too.
    #[inline]
    pub fn update(&self, new: u16, old: u16) -> bool {
        self.store(new);
        // The shadow store must be visible before we read EventIdx, or we
        // could miss a controller that just went to sleep (store-load
        // ordering needs a full fence; Linux: mb()).
        nvme_hal::barrier::full();
        self.crossed(new, old)
    }

    /// [`ShadowSlot::update`] of two slots (a queue pair's SQ tail and CQ
    /// head) with one full fence between the two stores and the two
    /// EventIdx loads: the fence waits for the stores to leave this core,
    /// and both slots share a cache line (offsets 8y and 8y + 4), so
    /// publishing both costs what publishing one does. True for each slot
    /// whose MMIO doorbell must be written too.
    #[inline]
    pub fn update_pair(a: (&Self, u16, u16), b: (&Self, u16, u16)) -> (bool, bool) {
        a.0.store(a.1);
        b.0.store(b.1);
        nvme_hal::barrier::full();
        (a.0.crossed(a.1, a.2), b.0.crossed(b.1, b.2))
    }

    /// Store `new` in the shadow slot (Release: for an SQ tail, the queue
    /// entries before the new value).
    #[inline(always)]
    fn store(&self, new: u16) {
        self.db.store_release(new as u32);
    }

    /// Does moving the doorbell from `old` to `new` cross the controller's
    /// EventIdx? (Only after a full fence behind the shadow store.)
    #[inline(always)]
    fn crossed(&self, new: u16, old: u16) -> bool {
        let event_idx = self.ei.load_acquire() as u16;
        need_event(event_idx, new, old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_idx_rule() {
        // Controller saw up to 5 and asks to be woken after it: moving 5 -> 8 crosses it.
        assert!(need_event(5, 8, 5));
        // Controller is still busy at 3 < old 5: no MMIO needed for 5 -> 8.
        assert!(!need_event(3, 8, 5));
        // EventIdx exactly at new - 1: needed.
        assert!(need_event(7, 8, 5));
        // Wrap-around of the u16 counters.
        assert!(need_event(0xfffe, 2, 0xfffe));
        assert!(!need_event(0xfffc, 2, 0xfffe));
        // No movement never needs a write.
        assert!(!need_event(3, 5, 5));
    }

    #[test]
    fn buffers_span_every_queue_at_the_stride() {
        // Linux: queues x 8 x stride bytes; whole pages.
        assert_eq!(buffer_len(1, 0, 4096), Some(4096));
        assert_eq!(buffer_len(511, 0, 4096), Some(4096), "512 queues x 8 bytes fill one page");
        assert_eq!(buffer_len(512, 0, 4096), Some(8192), "qid 512's slots start at 4 KiB");
        assert_eq!(buffer_len(64, 4, 4096), Some(12288), "65 queues x 128 bytes");
        assert_eq!(buffer_len(3, 8, 4096), Some(8192), "qid 2 at DSTRD 8 is 4 KiB in");
        assert_eq!(buffer_len(u16::MAX - 1, 15, 4096), Some(65535 * 2 * (4 << 15)));
        // The last queue's CQ slot always fits.
        for (q, d) in [(1u16, 0u8), (512, 0), (40, 4), (4, 8), (1000, 3)] {
            let end = nvme_spec::regs::cq_head_doorbell(q, d) - nvme_spec::regs::offset::DOORBELL_BASE + 4;
            assert!(end <= buffer_len(q, d, 4096).unwrap(), "{q} queues at DSTRD {d}");
        }
    }
}
