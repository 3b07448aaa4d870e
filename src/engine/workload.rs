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

/// fio's `random_distribution`: how a random pattern's units spread over
/// the region. Any but `Uniform` draws each unit on its own (fio turns
/// its random map off for them: `norandommap`).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Distribution {
    /// Every unit equally likely (fio's `random`, its default).
    #[default]
    Uniform,
    /// Zipf with exponent `theta` (fio's `zipf`, default 1.1).
    Zipf { theta: f64, center: Option<f64> },
    /// Pareto with power `h` (fio's `pareto`, default 0.2).
    Pareto { h: f64, center: Option<f64> },
    /// Normal, `dev` its deviation in percent of the region (fio's
    /// `normal`, default 0: the mean of twelve uniform draws).
    Normal { dev: f64, center: Option<f64> },
    /// fio's `zoned` (sizes in percent of the region) and `zoned_abs`
    /// (sizes in bytes): for reads and for writes, (access percent, size)
    /// pairs in the region's order; an empty list is uniform.
    Zoned { zones: [Vec<(u32, u64)>; 2], absolute: bool },
}

impl Distribution {
    /// Does it fit a region of `units` units of `bs` bytes? (zoned_abs
    /// zones must end within it, as fio's "zoned_abs sizes exceed file
    /// size".)
    pub fn check(&self, units: u64, bs: u64) -> Result<(), String> {
        match self {
            Distribution::Zoned { absolute: true, .. } => Sampler::new(self, units, bs, &mut Rng::new(0)).map(|_| ()),
            _ => Ok(()),
        }
    }
}

/// fio's hash of a drawn rank (`__hash_u64`): the hot units of a skewed
/// distribution are scattered over the region, not packed at its start.
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// fio computes Zipf's normalising sum over at most this many ranks.
const ZIPF_MAX_GEN: u64 = 10_000_000;

/// A thread's draws from a skewed [`Distribution`] over `n` units, set up
/// once (fio's `zipf_init`, `pareto_init`, `gauss_init` and
/// `td_zone_gen_index`), each draw as fio's `*_next` makes it.
#[derive(Clone, Debug)]
enum Sampler {
    Zipf { n: u64, zetan: f64, half_pow: f64, alpha: f64, eta: f64, off: u64 },
    Pareto { n: u64, pow: f64, off: u64 },
    Normal { n: u64, stddev: u64, off: u64 },
    /// For reads and writes, 100 (first unit, units) entries, one per
    /// access percent; empty: uniform.
    Zoned([Box<[(u64, u64)]>; 2]),
}

impl Sampler {
    /// The sampler of `dist` over `units` units of `unit_bytes`, or None
    /// for the uniform one; an error when zoned_abs zones overrun the region.
    fn new(dist: &Distribution, units: u64, unit_bytes: u64, rng: &mut Rng) -> Result<Option<Sampler>, String> {
        let n = units.max(1);
        let off_of = |center: Option<f64>, rng: &mut Rng| match center {
            Some(c) => (n as f64 * c) as u64,
            None => rng.next_u64() >> 32,
        };
        Ok(Some(match dist {
            Distribution::Uniform => return Ok(None),
            Distribution::Zipf { theta, center } => {
                let zetan: f64 = (1..=n.min(ZIPF_MAX_GEN)).map(|i| (1.0 / i as f64).powf(*theta)).sum();
                let zeta2 = 1.0 + 0.5f64.powf(*theta);
                let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
                Sampler::Zipf { n, zetan, half_pow: 0.5f64.powf(*theta), alpha: 1.0 / (1.0 - theta), eta, off: off_of(*center, rng) }
            }
            Distribution::Pareto { h, center } => Sampler::Pareto { n, pow: h.ln() / (1.0 - h).ln(), off: off_of(*center, rng) },
            Distribution::Normal { dev, center } => {
                let stddev = if *dev == 0.0 { 0 } else { ((n as f64 * dev / 100.0).ceil() as u64).min(n / 2) };
                let off = center.map_or(0, |c| (n as f64 * (c - 0.5)) as i64 as u64);
                Sampler::Normal { n, stddev, off }
            }
            Distribution::Zoned { zones, absolute } => {
                let mut index: [Box<[(u64, u64)]>; 2] = [Box::new([]), Box::new([])];
                for (d, list) in zones.iter().enumerate() {
                    if list.is_empty() {
                        continue;
                    }
                    let mut entries = Vec::with_capacity(100);
                    let (mut prev, mut prev_bytes) = (0u64, 0u64);
                    for &(access, size) in list {
                        let (first, end) = if *absolute {
                            let end_bytes = prev_bytes.saturating_add(size);
                            let (first, end) = (prev_bytes / unit_bytes, end_bytes / unit_bytes);
                            if end > n {
                                return Err(format!(
                                    "random_distribution=zoned_abs: the zones end at byte {} but the region holds {} bytes: make the zones' sizes add up to at most the region's size (or give a larger size=)",
                                    end_bytes,
                                    n * unit_bytes
                                ));
                            }
                            (first, end)
                        } else {
                            (prev * n / 100, prev * n / 100 + n * size / 100)
                        };
                        entries.extend(std::iter::repeat_n((first, end - first), access as usize));
                        prev += size;
                        prev_bytes = prev_bytes.saturating_add(size);
                    }
                    entries.resize(100, *entries.last().unwrap_or(&(0, n)));
                    index[d] = entries.into_boxed_slice();
                }
                Sampler::Zoned(index)
            }
        }))
    }

    /// A uniform number in [0, 1] (fio's `__rand / FRAND32_MAX`).
    #[inline]
    fn unit_interval(rng: &mut Rng) -> f64 {
        (rng.next_u64() >> 11) as f64 / ((1u64 << 53) - 1) as f64
    }

    /// The next unit for `op`.
    fn draw(&self, rng: &mut Rng, op: Op) -> u64 {
        let hashed = |rank: u64, off: u64, n: u64| rank.wrapping_mul(GOLDEN_RATIO_64).wrapping_add(off) % n;
        match self {
            Sampler::Zipf { n, zetan, half_pow, alpha, eta, off } => {
                let u = Self::unit_interval(rng);
                let z = u * zetan;
                let rank = if z < 1.0 {
                    0
                } else if z < 1.0 + half_pow {
                    1
                } else {
                    ((*n as f64) * (eta * u - eta + 1.0).powf(*alpha)) as u64
                };
                hashed(rank, *off, *n)
            }
            Sampler::Pareto { n, pow, off } => hashed(((*n - 1) as f64 * Self::unit_interval(rng).powf(*pow)) as u64, *off, *n),
            Sampler::Normal { n, stddev, off } => {
                const ITERS: u64 = 12;
                let mut sum = (0..ITERS).map(|_| rng.below(n + 1)).sum::<u64>().div_ceil(ITERS);
                if *stddev > 0 {
                    let mut dev = rng.below(*stddev) as i64 - (*stddev / 2) as i64;
                    while dev != 0 && !(0..*n as i64).contains(&(sum as i64 + dev)) {
                        dev /= 2;
                    }
                    sum = (sum as i64 + dev) as u64;
                }
                hashed(sum, *off, *n)
            }
            Sampler::Zoned(index) => {
                let table = &index[(op == Op::Write) as usize];
                if table.is_empty() {
                    return u64::MAX;
                }
                let (first, len) = table[rng.below(100) as usize];
                first + rng.below(len.max(1))
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
    /// The next sequential unit of reads and of writes: each direction
    /// keeps its own position, as fio's `last_pos[ddir]` (a sequential mix
    /// reads 0, 1, 2... and writes 0, 1, 2... beside it).
    next_unit: [u64; 2],
    rng: Rng,
    /// Random units: from fio's random map (each once per pass), a skewed
    /// distribution, or drawn independently, as `norandommap`.
    order: Draw,
}

/// How a random pattern draws its units.
#[derive(Clone, Debug)]
enum Draw {
    /// Uniformly, each on its own (fio's `norandommap`).
    Uniform,
    /// From fio's random map: every unit once per pass.
    Map(RandomOrder),
    /// From a skewed distribution (fio's `random_distribution`), drawn
    /// over each of `files` interleaved files of one size in turn, as fio
    /// draws from each file's own distribution and takes the files round
    /// robin: unit `u` of the region is unit `u / files` of file
    /// `u % files`.
    Skewed { sampler: Box<Sampler>, files: u64, turn: u64 },
}

impl Workload {
    /// A workload over `units` units of `blocks` blocks starting at
    /// `first_lba`. Sequential patterns start at `start_unit` (threads
    /// spread out), both directions of a sequential mix there.
    pub fn new(rw: Rw, first_lba: u64, blocks: u32, units: u64, rwmixread: u8, seed: u64, start_unit: u64) -> Self {
        assert!(units > 0 && blocks > 0);
        Workload { rw, first_lba, blocks, units, rwmixread, next_unit: [start_unit % units; 2], rng: Rng::new(seed), order: Draw::Uniform }
    }

    /// Random units as fio's random map gives them: every unit once per
    /// pass (fio's default; `norandommap` is the workload without this).
    pub fn with_random_map(mut self, seed: u64) -> Self {
        self.order = Draw::Map(RandomOrder::new(self.units, seed));
        self
    }

    /// Random units drawn from `dist` (fio's `random_distribution`), each
    /// on its own; the uniform one leaves the workload as it is. `bs` is
    /// the bytes of a unit; the region interleaves `files` files of one
    /// size (1: one file), each with the distribution over its own units,
    /// as fio's. An error when the distribution does not fit a file
    /// (zoned_abs).
    pub fn with_distribution(mut self, dist: &Distribution, bs: u64, seed: u64, files: u64) -> Result<Self, String> {
        let files = files.max(1);
        let mut rng = Rng::new(seed ^ 0x6469_7374);
        if let Some(sampler) = Sampler::new(dist, self.units / files, bs, &mut rng)? {
            if self.units % files != 0 {
                return Err(format!("random_distribution over {files} files needs files of one size (the region's {} units do not divide between them)", self.units));
            }
            self.order = Draw::Skewed { sampler: Box::new(sampler), files, turn: 0 };
        }
        Ok(self)
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
            self.mapped_or_random_unit(op)
        } else {
            let pos = &mut self.next_unit[(op == Op::Write) as usize];
            let u = *pos;
            *pos = if u + 1 == self.units { 0 } else { u + 1 };
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
            Rw::Randread | Rw::Randwrite if matches!(self.order, Draw::Uniform) => self.single_op(),
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

    /// A random unit for `op`: the random map's next, a skewed
    /// distribution's, or one drawn uniformly without a map.
    #[inline]
    fn mapped_or_random_unit(&mut self, op: Op) -> u64 {
        match &mut self.order {
            Draw::Map(o) => o.next(self.units),
            Draw::Skewed { sampler, files, turn } => {
                let file = *turn;
                *turn = (file + 1) % *files;
                match sampler.draw(&mut self.rng, op) {
                    u64::MAX => self.rng.below(self.units / *files) * *files + file,
                    u => u * *files + file,
                }
            }
            Draw::Uniform => self.random_unit(),
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
    fn a_sequential_mix_keeps_a_position_per_direction_as_fio() {
        // fio's rw=rw: reads go 0, 1, 2... and writes 0, 1, 2... each from
        // the start, every direction wrapping at the region's end.
        let mut w = Workload::new(Rw::Rw, 0, 8, 16, 50, 3, 0);
        let (mut reads, mut writes) = (vec![], vec![]);
        for _ in 0..48 {
            match w.next() {
                (Op::Read, u) => reads.push(u),
                (_, u) => writes.push(u),
            }
        }
        assert!(reads.len() > 8 && writes.len() > 8, "{} reads, {} writes", reads.len(), writes.len());
        assert!(reads.iter().enumerate().all(|(i, &u)| u == i as u64 % 16), "{reads:?}");
        assert!(writes.iter().enumerate().all(|(i, &u)| u == i as u64 % 16), "{writes:?}");
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

    /// Distinct units and the hottest 1% and 10% units' share of 20,480
    /// random reads of 16,384 units.
    fn skew(dist: &Distribution, rw: Rw, seed: u64) -> (usize, f64, f64, Vec<u64>) {
        let mut w = Workload::new(rw, 0, 8, 16_384, 50, seed, 0).with_random_map(seed).with_distribution(dist, 4096, seed, 1).unwrap();
        assert!(w.single_random_op().is_none(), "a skewed draw is not the uniform fast path");
        let units: Vec<u64> = (0..20_480).map(|_| w.next().1).collect();
        let mut hits = std::collections::HashMap::<u64, u64>::new();
        for &u in &units {
            assert!(u < 16_384);
            *hits.entry(u).or_default() += 1;
        }
        let mut top: Vec<u64> = hits.values().copied().collect();
        top.sort_unstable_by(|a, b| b.cmp(a));
        let share = |k: usize| top.iter().take(k).sum::<u64>() as f64 / units.len() as f64;
        (hits.len(), share(164), share(1638), units)
    }

    /// The same job under fio 3.33 (`--filename` of 64 MiB, `--bs 4k`,
    /// `--io_size 80M`, `--rw randread`, offsets from `--write_iolog`)
    /// gave these distinct blocks and hottest shares; the draws here
    /// follow fio's formulas (lib/zipf.c, lib/gauss.c, zone-dist.c), so
    /// the figures agree within a few percent.
    #[test]
    fn skewed_distributions_hit_units_as_fios() {
        use Distribution::*;
        for (dist, fio_distinct, fio_top1, fio_top10) in [
            (Zipf { theta: 1.2, center: None }, 2701, 0.795, 0.948),
            (Zipf { theta: 0.8, center: None }, 7612, 0.324, 0.637),
            (Pareto { h: 0.3, center: None }, 8469, 0.260, 0.570),
            (Normal { dev: 5.0, center: None }, 5763, 0.082, 0.535),
            (Normal { dev: 0.0, center: None }, 5701, 0.081, 0.539),
            (Uniform, 16_384, 0.016, 0.160),
        ] {
            for seed in [1, 7] {
                let (distinct, top1, top10, _) = skew(&dist, Rw::Randread, seed);
                let near = |a: f64, b: f64| (a - b).abs() <= 0.03 * b.max(0.05);
                assert!(near(distinct as f64, fio_distinct as f64), "{dist:?}: {distinct} distinct, fio {fio_distinct}");
                assert!(near(top1, fio_top1) && near(top10, fio_top10), "{dist:?}: {top1:.3} {top10:.3}, fio {fio_top1} {fio_top10}");
            }
        }
    }

    #[test]
    fn zones_take_their_share_per_direction() {
        // 60% of reads to the first 10%, 30% to the next 20%, 10% to the
        // rest (fio 3.33 gave 0.57, 0.31, 0.12); writes all to the last half.
        let dist = Distribution::Zoned { zones: [vec![(60, 10), (30, 20), (10, 70)], vec![(100, 50), (0, 50)]], absolute: false };
        let mut w = Workload::new(Rw::Randrw, 0, 8, 16_384, 50, 3, 0).with_distribution(&dist, 4096, 3, 1).unwrap();
        let (mut reads, mut zone) = (0u64, [0u64; 3]);
        for _ in 0..40_000 {
            match w.next() {
                (Op::Read, u) => {
                    reads += 1;
                    zone[if u < 1638 { 0 } else if u < 4915 { 1 } else { 2 }] += 1;
                }
                (_, u) => assert!(u < 8192, "a write at {u}, beyond its zone"),
            }
        }
        let share = |z: u64| z as f64 / reads as f64;
        assert!((share(zone[0]) - 0.6).abs() < 0.02 && (share(zone[1]) - 0.3).abs() < 0.02, "{zone:?}");
        // zoned_abs: 50% to the first 4 MiB, 50% to the next 60 MiB; a
        // zone past the region is refused, as fio refuses it.
        let abs = Distribution::Zoned { zones: [vec![(50, 4 << 20), (50, 60 << 20)], vec![]], absolute: true };
        let mut w = Workload::new(Rw::Randread, 0, 8, 16_384, 100, 3, 0).with_distribution(&abs, 4096, 3, 1).unwrap();
        let first = (0..10_000).filter(|_| w.next().1 < 1024).count();
        assert!((4_800..5_200).contains(&first), "{first}");
        let over = Distribution::Zoned { zones: [vec![(50, 4 << 20), (50, 61 << 20)], vec![]], absolute: true };
        assert!(over.check(16_384, 4096).unwrap_err().contains("the zones end at byte 68157440 but the region holds 67108864 bytes"));
        // A direction without zones is uniform.
        let (distinct, ..) = skew(&abs, Rw::Randwrite, 1);
        assert!(distinct > 11_000, "{distinct}");
    }

    /// Over several files, each file has the distribution over its own
    /// units and the files take turns, as fio's per-file draws: zoned_abs
    /// zones sit at the start of every file (fio 3.33, two files of
    /// 32 MiB, zoned_abs:50/2m:50/30m: 25% of reads in each file's first
    /// 2 MiB; ours 25%).
    #[test]
    fn several_files_each_draw_their_own_distribution_in_turn() {
        let abs = Distribution::Zoned { zones: [vec![(50, 2 << 20), (50, 30 << 20)], vec![]], absolute: true };
        // 2 files of 8,192 units: unit u is unit u / 2 of file u % 2.
        let mut w = Workload::new(Rw::Randread, 0, 8, 16_384, 100, 3, 0).with_distribution(&abs, 4096, 3, 2).unwrap();
        let mut hits = [[0u32; 2]; 2];
        for i in 0..10_000 {
            let u = w.next().1;
            assert_eq!(u % 2, i % 2, "the files take turns");
            hits[(u % 2) as usize][(u / 2 >= 512) as usize] += 1;
        }
        for file in hits {
            assert_eq!(file[0] + file[1], 5_000);
            assert!((2_350..2_650).contains(&file[0]), "{hits:?}: half of each file's reads in its first 2 MiB");
        }
        // The zones must fit each file: 2 MiB + 31 MiB does not fit 32 MiB.
        let over = Distribution::Zoned { zones: [vec![(50, 2 << 20), (50, 31 << 20)], vec![]], absolute: true };
        assert!(Workload::new(Rw::Randread, 0, 8, 16_384, 100, 3, 0).with_distribution(&over, 4096, 3, 2).is_err());
        // A skewed draw per file: each file's hot unit is hit in turn.
        let zipf = Distribution::Zipf { theta: 1.2, center: Some(0.0) };
        let mut w = Workload::new(Rw::Randread, 0, 8, 16_384, 100, 3, 0).with_distribution(&zipf, 4096, 3, 2).unwrap();
        let hot = (0..10_000).map(|_| w.next().1).filter(|&u| u / 2 == 0).count();
        assert!(hot > 2_000, "rank 0 of each file: {hot}");
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
