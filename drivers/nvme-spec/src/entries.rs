//! Queue sizes. The specification stores every queue size 0's based
//! (entries - 1): CAP.MQES (NVMe 1.4c §3.1.1), AQA.ASQS/ACQS (§3.1.8) and
//! QSIZE of Create I/O Completion/Submission Queue (§5.3, §5.4, CDW10 bits
//! 31:16). A 16-bit 0's based field describes 1..=65536 entries, one more
//! than a `u16` holds, so a size kept in a `u16` wraps (65536 becomes 0, and
//! 0 - 1 becomes QSIZE FFFFh). [`QueueEntries`] holds the 1-based count in a
//! type that cannot wrap, and [`QueueEntries::zeros_based`] is the one place
//! the wire encoding is made.

use std::fmt;

/// A queue's size in entries, 1-based, 2..=65536: a queue of N entries
/// holds at most N - 1 commands (§4.1), so fewer than 2 is no queue, and the
/// 16-bit 0's based fields cannot describe more than 65536.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueEntries(u32);

impl QueueEntries {
    /// The smallest queue: two entries, one command.
    pub const MIN: QueueEntries = QueueEntries(2);
    /// The largest queue a 16-bit 0's based field describes.
    pub const MAX: QueueEntries = QueueEntries(65536);

    /// `n` entries, if `n` is in 2..=65536.
    pub const fn new(n: u32) -> Option<Self> {
        if n >= Self::MIN.0 && n <= Self::MAX.0 {
            Some(QueueEntries(n))
        } else {
            None
        }
    }
    /// The size a 0's based field `v` describes (`v + 1` entries); `None`
    /// for 0, a one-entry queue, which cannot hold a command.
    pub const fn from_zeros_based(v: u16) -> Option<Self> {
        Self::new(v as u32 + 1)
    }
    /// `n` clamped into `min..=max` (with `min` itself at least 2).
    pub fn clamped(n: u64, min: QueueEntries, max: QueueEntries) -> Self {
        QueueEntries(n.clamp(min.0 as u64, max.0.max(min.0) as u64) as u32)
    }
    /// The number of entries.
    pub const fn get(self) -> u32 {
        self.0
    }
    /// The number of entries, as an index bound.
    pub const fn as_usize(self) -> usize {
        self.0 as usize
    }
    /// Commands the queue holds at most: entries - 1 (a full ring would look
    /// empty, §4.1).
    pub const fn capacity(self) -> u32 {
        self.0 - 1
    }
    /// The 0's based encoding (entries - 1) for MQES, ASQS/ACQS and QSIZE.
    pub const fn zeros_based(self) -> u16 {
        // 2..=65536 entries: 1..=65535, always a u16.
        (self.0 - 1) as u16
    }
    /// The smaller of two sizes.
    pub fn min(self, other: QueueEntries) -> Self {
        Ord::min(self, other)
    }
}

impl fmt::Display for QueueEntries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} entries", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_16_bit_range_round_trips() {
        for v in 1..=u16::MAX {
            let e = QueueEntries::from_zeros_based(v).unwrap();
            assert_eq!(e.get(), v as u32 + 1);
            assert_eq!(e.zeros_based(), v);
        }
        assert_eq!(QueueEntries::from_zeros_based(0), None, "MQES = 0 (one entry) is below the minimum of 2");
        assert_eq!(QueueEntries::from_zeros_based(0xffff), Some(QueueEntries::MAX));
        assert_eq!(QueueEntries::MAX.zeros_based(), 0xffff, "65536 entries is QSIZE FFFFh, not 0");
    }

    #[test]
    fn out_of_range_and_clamping() {
        assert_eq!(QueueEntries::new(1), None);
        assert_eq!(QueueEntries::new(65537), None);
        let max = QueueEntries::new(4096).unwrap();
        assert_eq!(QueueEntries::clamped(40001, QueueEntries::MIN, max).get(), 4096);
        assert_eq!(QueueEntries::clamped(0, QueueEntries::MIN, max).get(), 2);
        assert_eq!(QueueEntries::clamped(u64::MAX, QueueEntries::MIN, QueueEntries::MAX).get(), 65536);
        assert_eq!(QueueEntries::new(8).unwrap().capacity(), 7);
    }
}
