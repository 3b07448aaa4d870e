//! What to do next: the access pattern (fio's `--rw`), the read/write mix,
//! and the offsets, drawn from a fast deterministic generator.

use crate::backend::Op;

/// Access pattern, named as fio names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    Randread,
    /// Random writes.
    Randwrite,
    /// Random mixed reads and writes (`--rwmixread` percent reads).
    Randrw,
    /// Sequential mixed reads and writes.
    Rw,
}

impl Rw {
    /// Does the pattern write?
    pub fn writes(self) -> bool {
        !matches!(self, Rw::Read | Rw::Randread)
    }
    /// Does the pattern read?
    pub fn reads(self) -> bool {
        !matches!(self, Rw::Write | Rw::Randwrite)
    }
    /// Random offsets?
    pub fn random(self) -> bool {
        matches!(self, Rw::Randread | Rw::Randwrite | Rw::Randrw)
    }
    /// fio's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::Randread => "randread",
            Rw::Randwrite => "randwrite",
            Rw::Randrw => "randrw",
            Rw::Rw => "rw",
        }
    }
}

/// wyrand: a small, fast, statistically good 64-bit generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = (self.0 as u128).wrapping_mul((self.0 ^ 0xe703_7ed1_a0b4_28db) as u128);
        (t >> 64) as u64 ^ t as u64
    }
    /// Uniform in `0..n` (Lemire's multiply-shift, n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// fio's random map, without a map: random units that cover every unit
/// once per pass, as fio's default (no `norandommap`) does. A counter
/// runs through 0..2^k (the smallest power of two not below the unit
/// count) and is put through a bijection of k-bit numbers drawn from the
/// seed (xor with a key, multiply by odd numbers, xor-shift: each step
/// one-to-one); values past the last unit are skipped, so each pass
/// yields every unit exactly once, about two tries per unit at most on
/// average, with no memory per unit.
#[derive(Clone, Copy, Debug)]
pub struct RandomOrder {
    i: u64,
    mask: u64,
    shift: u32,
    key: u64,
    m1: u64,
    m2: u64,
}

impl RandomOrder {
    /// The order of `units` units drawn from `seed`.
    pub fn new(units: u64, seed: u64) -> Self {
        let bits = 64 - (units.max(2) - 1).leading_zeros();
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let mut r = Rng::new(seed ^ 0x7261_6e64_6d61_70);
        RandomOrder { i: 0, mask, shift: (bits / 2).max(1), key: r.next_u64() & mask, m1: r.next_u64() | 1, m2: r.next_u64() | 1 }
    }

    #[inline]
    fn permute(&self, x: u64) -> u64 {
        let mut x = ((x ^ self.key).wrapping_mul(self.m1)) & self.mask;
        x ^= x >> self.shift;
        x = x.wrapping_mul(self.m2) & self.mask;
        x ^ (x >> self.shift)
    }

    /// The next unit below `units`.
    #[inline]
    pub fn next(&mut self, units: u64) -> u64 {
        loop {
            let u = self.permute(self.i);
            self.i = (self.i + 1) & self.mask;
            if u < units {
                return u;
            }
        }
    }
}

/// The offsets and operations of one thread.
#[derive(Clone, Debug)]
pub struct Workload {
    rw: Rw,
    /// First LBA of the region.
    first_lba: u64,
    /// Blocks per I/O.
    pub blocks: u32,
    /// I/O units in the region.
    pub units: u64,
    rwmixread: u8,
    next_unit: u64,
    rng: Rng,
    /// Random units from fio's random map (each once per pass), or None:
    /// drawn independently, as `norandommap`.
    order: Option<RandomOrder>,
}

impl Workload {
    /// A workload over `units` units of `blocks` blocks starting at
    /// `first_lba`. Sequential patterns start at `start_unit` (threads
    /// spread out).
    pub fn new(rw: Rw, first_lba: u64, blocks: u32, units: u64, rwmixread: u8, seed: u64, start_unit: u64) -> Self {
        assert!(units > 0 && blocks > 0);
        Workload { rw, first_lba, blocks, units, rwmixread, next_unit: start_unit % units, rng: Rng::new(seed), order: None }
    }

    /// Random units as fio's random map gives them: every unit once per
    /// pass (fio's default; `norandommap` is the workload without this).
    pub fn with_random_map(mut self, seed: u64) -> Self {
        self.order = Some(RandomOrder::new(self.units, seed));
        self
    }

    /// LBA of unit `u`.
    #[inline]
    pub fn lba_of(&self, unit: u64) -> u64 {
        self.first_lba + unit * self.blocks as u64
    }

    #[inline]
    fn op(&mut self) -> Op {
        match self.rw {
            Rw::Read | Rw::Randread => Op::Read,
            Rw::Write | Rw::Randwrite => Op::Write,
            Rw::Randrw | Rw::Rw => {
                if self.rng.below(100) < self.rwmixread as u64 {
                    Op::Read
                } else {
                    Op::Write
                }
            }
        }
    }

    /// The next operation and unit.
    #[inline]
    pub fn next(&mut self) -> (Op, u64) {
        let op = self.op();
        let unit = if self.rw.random() {
            self.mapped_or_random_unit()
        } else {
            let u = self.next_unit;
            self.next_unit = if u + 1 == self.units { 0 } else { u + 1 };
            u
        };
        (op, unit)
    }

    /// For patterns of one operation at random units (randread,
    /// randwrite): that operation. The submit loop then draws units with
    /// [`Workload::random_unit`] and decides the pattern once per pass
    /// instead of once per I/O. The draws are the same as `next`'s.
    #[inline]
    pub fn single_random_op(&self) -> Option<Op> {
        match self.rw {
            Rw::Randread | Rw::Randwrite if self.order.is_none() => self.single_op(),
            _ => None,
        }
    }

    /// For patterns of one operation (read, write, randread, randwrite):
    /// that operation, which every I/O `next` draws has.
    #[inline]
    pub fn single_op(&self) -> Option<Op> {
        match self.rw {
            Rw::Read | Rw::Randread => Some(Op::Read),
            Rw::Write | Rw::Randwrite => Some(Op::Write),
            _ => None,
        }
    }

    /// A random unit drawn without a map (what `next` draws for a random
    /// pattern when there is no random map; `single_random_op` is None
    /// with one, so the submit loop then takes `next`).
    #[inline(always)]
    pub fn random_unit(&mut self) -> u64 {
        self.rng.below(self.units)
    }

    /// A random unit: the random map's next, or one drawn without a map.
    #[inline]
    fn mapped_or_random_unit(&mut self) -> u64 {
        match &mut self.order {
            Some(o) => o.next(self.units),
            None => self.random_unit(),
        }
    }

    /// Another unit for the same operation (when the first is busy).
    #[inline]
    pub fn another_unit(&mut self) -> u64 {
        if self.rw.random() {
            self.mapped_or_random_unit()
        } else {
            self.next().1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_wraps_and_random_stays_in_range() {
        let mut w = Workload::new(Rw::Read, 100, 8, 4, 100, 1, 2);
        let units: Vec<u64> = (0..6).map(|_| w.next().1).collect();
        assert_eq!(units, vec![2, 3, 0, 1, 2, 3]);
        assert_eq!(w.lba_of(3), 124);
        let mut r = Workload::new(Rw::Randread, 0, 1, 1000, 100, 7, 0);
        for _ in 0..10_000 {
            assert!(r.next().1 < 1000);
        }
    }

    #[test]
    fn single_random_op_draws_what_next_draws() {
        for rw in [Rw::Randread, Rw::Randwrite, Rw::Read, Rw::Randrw] {
            let mut a = Workload::new(rw, 0, 8, 1000, 70, 5, 0);
            let mut b = a.clone();
            for _ in 0..1000 {
                let want = a.next();
                let got = match b.single_random_op() {
                    Some(op) => (op, b.random_unit()),
                    None => b.next(),
                };
                assert_eq!(got, want, "{rw:?}");
            }
        }
        assert_eq!(Workload::new(Rw::Randwrite, 0, 1, 10, 100, 1, 0).single_random_op(), Some(Op::Write));
        assert_eq!(Workload::new(Rw::Randrw, 0, 1, 10, 100, 1, 0).single_random_op(), None);
        assert_eq!(Workload::new(Rw::Read, 0, 1, 10, 100, 1, 0).single_random_op(), None);
    }

    #[test]
    fn the_random_map_covers_every_unit_once_per_pass() {
        for units in [1u64, 2, 3, 7, 8, 9, 1000, 4096, 5000, 65_537] {
            for seed in [1u64, 2, 99] {
                let mut w = Workload::new(Rw::Randread, 0, 1, units, 100, seed, 0).with_random_map(seed);
                for pass in 0..2 {
                    let mut seen = vec![false; units as usize];
                    for _ in 0..units {
                        let u = w.next().1 as usize;
                        assert!(!seen[u], "units {units} seed {seed} pass {pass}: {u} twice");
                        seen[u] = true;
                    }
                }
            }
        }
        // Not in order: a shuffle, not a sweep.
        let mut w = Workload::new(Rw::Randwrite, 0, 8, 1 << 16, 100, 5, 0).with_random_map(5);
        let first: Vec<u64> = (0..64).map(|_| w.next().1).collect();
        assert!(first.windows(2).filter(|p| p[1] == p[0] + 1).count() < 4, "{first:?}");
        // Without the map, draws repeat (as fio's norandommap).
        let mut w = Workload::new(Rw::Randread, 0, 1, 1000, 100, 5, 0);
        let mut seen = std::collections::HashSet::new();
        assert!((0..1000).any(|_| !seen.insert(w.next().1)));
    }

    #[test]
    fn mix_is_close_to_rwmixread() {
        let mut w = Workload::new(Rw::Randrw, 0, 1, 1 << 20, 75, 3, 0);
        let reads = (0..100_000).filter(|_| w.next().0 == Op::Read).count();
        assert!((74_000..76_000).contains(&reads), "{reads}");
        let mut w = Workload::new(Rw::Randwrite, 0, 1, 10, 75, 3, 0);
        assert!((0..100).all(|_| w.next().0 == Op::Write));
    }
}
