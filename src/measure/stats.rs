//! Measurements: latency histograms, thread CPU time (user/system), and the
//! summaries the reports print.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency histogram in nanoseconds, 3 significant digits, 1 ns .. 100 s.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("histogram bounds")
}

/// Percentiles reported, as fio reports them.
pub const PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

/// The values at percentiles `list` (ascending, each 0 to 100) of `h`,
/// in one walk of its counts: each as `h.value_at_quantile` gives it.
pub fn percentile_values(h: &Histogram<u64>, list: &[f64]) -> Vec<(f64, u64)> {
    debug_assert!(list.is_sorted(), "hdrhistogram stops at a quantile below the one before");
    list.iter().copied().zip(h.value_at_quantiles(list.iter().map(|p| p / 100.0))).collect()
}

/// A latency distribution summary in nanoseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatSummary {
    /// Minimum.
    pub min: u64,
    /// Maximum.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Number of samples.
    #[serde(rename = "N")]
    pub n: u64,
    /// Percentile -> value, keys formatted as fio does ("99.900000"),
    /// written in fio's order (by percentile, not by key).
    #[serde(serialize_with = "by_percentile")]
    pub percentile: std::collections::BTreeMap<String, u64>,
}

/// A percentile map in numeric order, as fio writes it ("5.000000"
/// before "10.000000").
fn by_percentile<S: serde::Serializer>(m: &std::collections::BTreeMap<String, u64>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut e: Vec<(&String, &u64)> = m.iter().collect();
    e.sort_by(|a, b| a.0.parse::<f64>().unwrap_or(0.0).total_cmp(&b.0.parse::<f64>().unwrap_or(0.0)));
    let mut out = s.serialize_map(Some(e.len()))?;
    for (k, v) in e {
        out.serialize_entry(k, v)?;
    }
    out.end()
}

impl LatSummary {
    /// Summarize a histogram.
    ///
    /// The same figures as `h.mean()`, `h.stdev()` and `h.value_at_quantile`
    /// per percentile, to the bit, in two walks of the histogram's counts
    /// instead of twenty: those each walk the whole counts array (about
    /// 27,000 slots at 3 significant digits up to 100 s), which made a
    /// report's summaries cost millions of instructions, more the longer
    /// the run's latencies spread.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatSummary::default();
        }
        // The recorded values as hdrhistogram's mean and stdev weigh them.
        let recorded: Vec<(f64, f64, f64)> = h
            .iter_recorded()
            .map(|v| {
                let m = h.median_equivalent(v.value_iterated_to()) as f64;
                (m, v.count_at_value() as f64, v.count_since_last_iteration() as f64)
            })
            .collect();
        let total = h.len() as f64;
        // The crate's own folds, term for term, so the sums round the same.
        let mean = recorded.iter().fold(0.0_f64, |t, &(m, c, _)| t + m * c / total);
        let dev = recorded.iter().fold(0.0_f64, |t, &(m, _, since)| {
            let d = m - mean;
            t + (d * d) * since
        });
        LatSummary {
            // On the scale of the mean: each recorded value's median
            // equivalent (within half a bucket, 0.05% at 3 digits), so
            // min <= mean <= max and a single I/O reads min = max = avg.
            // (`h.min()`/`h.max()` are the bucket's low and high ends.)
            min: h.median_equivalent(h.min()),
            max: h.median_equivalent(h.max()),
            mean,
            stddev: (dev / total).sqrt(),
            n: h.len(),
            percentile: percentile_values(h, &PERCENTILES).into_iter().map(|(p, v)| (format!("{p:.6}"), v)).collect(),
        }
    }
    /// The value at percentile `p` (one of [`PERCENTILES`]).
    pub fn p(&self, p: f64) -> u64 {
        self.percentile.get(&format!("{p:.6}")).copied().unwrap_or(0)
    }
}

/// CPU time of the calling thread: user and system, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuTime {
    /// User mode.
    pub user_ns: u64,
    /// Kernel mode.
    pub sys_ns: u64,
}

impl CpuTime {
    /// Now, for the calling thread (getrusage(RUSAGE_THREAD)).
    pub fn thread() -> Self {
        Self::rusage(libc::RUSAGE_THREAD)
    }
    fn rusage(who: i32) -> Self {
        let (user_ns, sys_ns) = crate::sys::rusage_ns(who);
        CpuTime { user_ns, sys_ns }
    }
    /// Thread CPU time with nanosecond resolution (CLOCK_THREAD_CPUTIME_ID);
    /// getrusage has only microsecond resolution.
    pub fn thread_total_ns() -> u64 {
        crate::sys::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
    }
    /// Difference.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime { user_ns: self.user_ns.saturating_sub(earlier.user_ns), sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns) }
    }
}

/// Context switches and page faults of the calling thread, as fio's `cpu`
/// line shows them (`ctx`, `majf`, `minf`): fio takes getrusage
/// (RUSAGE_THREAD) when a job's I/O starts and when its ramp ends
/// (`clear_rusage_stat`), and again at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Rusage {
    /// Context switches, voluntary and involuntary.
    pub ctx: u64,
    /// Major page faults.
    pub majf: u64,
    /// Minor page faults.
    pub minf: u64,
}

impl Rusage {
    /// Now, for the calling thread.
    pub fn thread() -> Self {
        let (ctx, majf, minf) = crate::sys::rusage_counts(libc::RUSAGE_THREAD);
        Rusage { ctx, majf, minf }
    }
    /// Difference.
    pub fn since(&self, e: &Rusage) -> Rusage {
        Rusage { ctx: self.ctx.saturating_sub(e.ctx), majf: self.majf.saturating_sub(e.majf), minf: self.minf.saturating_sub(e.minf) }
    }
    /// Sum (fio's group_reporting adds its clones').
    pub fn add(&mut self, o: &Rusage) {
        self.ctx += o.ctx;
        self.majf += o.majf;
        self.minf += o.minf;
    }
}

/// USER_HZ, the ticks per second of /proc/stat's CPU times:
/// sysconf(_SC_CLK_TCK), or 100 (what every Linux architecture has used
/// since 2.6) when sysconf does not say.
pub fn user_hz() -> u64 {
    static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| crate::sys::clk_tck().unwrap_or(100))
}

/// System-wide CPU time from the first line of /proc/stat, in nanoseconds:
/// what every CPU spent, so completion work done in interrupt context on
/// other cores counts too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SystemCpu {
    /// User mode (user + nice).
    pub user_ns: u64,
    /// Kernel mode outside interrupts.
    pub system_ns: u64,
    /// Hard interrupts.
    pub irq_ns: u64,
    /// Soft interrupts (block completion work runs here).
    pub softirq_ns: u64,
    /// Idle (idle + iowait).
    pub idle_ns: u64,
    /// Stolen by the hypervisor.
    pub steal_ns: u64,
}

impl SystemCpu {
    /// Read /proc/stat now (None when it cannot be read).
    pub fn now() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }
    /// Parse the aggregate "cpu" line of /proc/stat (values in USER_HZ
    /// ticks, this system's [`user_hz`]).
    pub fn parse(stat: &str) -> Option<Self> {
        Self::parse_hz(stat, user_hz())
    }
    /// Parse the aggregate "cpu" line of /proc/stat, ticks of 1/`hz` s.
    pub fn parse_hz(stat: &str, hz: u64) -> Option<Self> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 || hz == 0 {
            return None;
        }
        let ns = |t: u64| (t as u128 * 1_000_000_000 / hz as u128) as u64;
        Some(SystemCpu {
            user_ns: ns(v[0] + v[1]),
            system_ns: ns(v[2]),
            idle_ns: ns(v[3] + v[4]),
            irq_ns: ns(v[5]),
            softirq_ns: ns(v[6]),
            steal_ns: ns(v[7]),
        })
    }
    /// Difference.
    pub fn since(&self, e: &SystemCpu) -> SystemCpu {
        SystemCpu {
            user_ns: self.user_ns.saturating_sub(e.user_ns),
            system_ns: self.system_ns.saturating_sub(e.system_ns),
            irq_ns: self.irq_ns.saturating_sub(e.irq_ns),
            softirq_ns: self.softirq_ns.saturating_sub(e.softirq_ns),
            idle_ns: self.idle_ns.saturating_sub(e.idle_ns),
            steal_ns: self.steal_ns.saturating_sub(e.steal_ns),
        }
    }
    /// Busy time: user + system + irq + softirq.
    pub fn busy_ns(&self) -> u64 {
        self.user_ns + self.system_ns + self.irq_ns + self.softirq_ns
    }
    /// Kernel time: system + irq + softirq.
    pub fn kernel_ns(&self) -> u64 {
        self.system_ns + self.irq_ns + self.softirq_ns
    }
}

/// A completion pass's latencies, grouped by submit timestamp and recorded
/// in the histogram once per group.
///
/// The engine stamps each submitted batch once, so a pass holds the I/Os of
/// a few batches, each batch's with one latency. A device may complete them
/// in any order (QEMU's controller posts them as its host I/O finishes):
/// grouping by timestamp, not by consecutive runs, makes the number of
/// histogram updates the number of batches in the pass, whatever the order.
/// The newest group and up to `LatencyGroups::OLDER` others are held at
/// once; one more records the others (a pass that mixes more batches than
/// that records a little more often, never differently).
#[derive(Default, Clone, Copy)]
pub struct LatencyGroups {
    /// The newest group: its timestamp and completions (0: none yet).
    ts: u64,
    count: u64,
    /// Older groups of the pass, `older_n` of them.
    older_ts: [u64; Self::OLDER],
    older_count: [u64; Self::OLDER],
    older_n: usize,
    /// Completions recorded so far (the groups flushed).
    recorded: u64,
}

impl LatencyGroups {
    /// Groups held beside the newest.
    pub const OLDER: usize = 3;

    /// Count one completion submitted at `ts` (`lat` turns a submit
    /// timestamp into nanoseconds, used when groups are recorded).
    #[inline]
    pub fn add(&mut self, hist: &mut Histogram<u64>, ts: u64, lat: impl Fn(u64) -> u64) {
        // In order, the newest group is the only compare. (A group of
        // count 0 with the same timestamp just starts counting.)
        if ts == self.ts {
            self.count += 1;
            return;
        }
        self.add_other(hist, ts, lat);
    }

    /// `add` for a timestamp other than the newest group's: an older group
    /// becomes the newest again, or a new group starts.
    #[inline(never)]
    fn add_other(&mut self, hist: &mut Histogram<u64>, ts: u64, lat: impl Fn(u64) -> u64) {
        if self.count == 0 {
            (self.ts, self.count) = (ts, 1);
            return;
        }
        let n = self.older_n.min(Self::OLDER);
        if let Some(i) = self.older_ts[..n].iter().position(|&t| t == ts) {
            // Swap it with the newest.
            let (t, c) = (self.older_ts[i], self.older_count[i] + 1);
            (self.older_ts[i], self.older_count[i]) = (self.ts, self.count);
            (self.ts, self.count) = (t, c);
            return;
        }
        let n = if n == Self::OLDER { self.flush_older(hist, &lat) } else { n };
        (self.older_ts[n], self.older_count[n]) = (self.ts, self.count);
        self.older_n = n + 1;
        (self.ts, self.count) = (ts, 1);
    }

    /// Record the older groups; returns 0, how many are left.
    fn flush_older(&mut self, hist: &mut Histogram<u64>, lat: impl Fn(u64) -> u64) -> usize {
        let n = self.older_n.min(Self::OLDER);
        for (&ts, &c) in self.older_ts[..n].iter().zip(&self.older_count[..n]) {
            let _ = hist.record_n(lat(ts).min(hist.high()), c);
            self.recorded += c;
        }
        self.older_n = 0;
        0
    }

    /// Record the pending groups.
    #[inline]
    pub fn flush(&mut self, hist: &mut Histogram<u64>, lat: impl Fn(u64) -> u64) {
        if self.older_n > 0 {
            self.flush_older(hist, &lat);
        }
        if self.count > 0 {
            let _ = hist.record_n(lat(self.ts).min(hist.high()), self.count);
            self.recorded += self.count;
            self.count = 0;
        }
    }

    /// Completions recorded by the groups flushed so far: a count of the
    /// completions added, kept per group rather than per completion.
    #[inline]
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Groups pending (what `flush` would record): for tests.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.older_n + usize::from(self.count > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_parses() {
        let s = "cpu  71238 5 7105 143198 522 10 527 439 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
        let c = SystemCpu::parse_hz(s, 100).unwrap();
        assert_eq!(c.user_ns, 71243 * 10_000_000);
        assert_eq!(c.system_ns, 7105 * 10_000_000);
        assert_eq!(c.idle_ns, (143198 + 522) * 10_000_000);
        assert_eq!(c.irq_ns, 10 * 10_000_000);
        assert_eq!(c.softirq_ns, 527 * 10_000_000);
        assert_eq!(c.steal_ns, 439 * 10_000_000);
        let later = SystemCpu { user_ns: c.user_ns + 5, ..c };
        assert_eq!(later.since(&c).busy_ns(), 5);
        assert!(SystemCpu::parse("intr 1\n").is_none());
        assert!(SystemCpu::now().is_some());
        // Ticks are USER_HZ's: at 250 Hz a tick is 4 ms; at 1024 Hz
        // (alpha's) not a whole number of ns, converted without rounding
        // each tick.
        let c = SystemCpu::parse_hz(s, 250).unwrap();
        assert_eq!(c.system_ns, 7105 * 4_000_000);
        let c = SystemCpu::parse_hz(s, 1024).unwrap();
        assert_eq!(c.system_ns, 7105 * 1_000_000_000 / 1024);
        assert!(SystemCpu::parse_hz(s, 0).is_none());
        // The system's own USER_HZ is what parse uses.
        assert_eq!(user_hz(), crate::sys::clk_tck().unwrap());
        assert_eq!(SystemCpu::parse(s), SystemCpu::parse_hz(s, user_hz()));
    }

    #[test]
    fn histogram_summary() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let s = LatSummary::of(&h);
        assert_eq!(s.n, 1000);
        assert!((s.p(50.0) as i64 - 500_000).abs() < 1000);
        assert!((s.p(99.0) as i64 - 990_000).abs() < 1000);
        assert_eq!(s.min, 1000);
    }

    /// One I/O: min, max and the mean are one figure, as fio prints it
    /// (the histogram's bucket ends would read min=12472, max=12479).
    #[test]
    fn a_single_value_reads_min_equal_max() {
        let mut h = new_histogram();
        h.record(12_476).unwrap();
        let s = LatSummary::of(&h);
        assert_eq!((s.min, s.max), (12_476, 12_476));
        assert_eq!(s.mean, 12_476.0);
    }

    proptest::proptest! {
        /// The one-walk summary gives, to the bit, what the histogram's own
        /// mean, stdev and per-quantile calls give.
        #[test]
        fn summary_matches_the_histograms_own_figures(
            values in proptest::collection::vec((1u64..200_000_000_000, 1u64..50), 1..300)
        ) {
            let mut h = new_histogram();
            for (v, n) in values {
                h.saturating_record_n(v, n);
            }
            let s = LatSummary::of(&h);
            proptest::prop_assert_eq!(s.mean.to_bits(), h.mean().to_bits());
            proptest::prop_assert_eq!(s.stddev.to_bits(), h.stdev().to_bits());
            for p in PERCENTILES {
                proptest::prop_assert_eq!(s.p(p), h.value_at_quantile(p / 100.0));
            }
            proptest::prop_assert_eq!(
                (s.min, s.max, s.n),
                (h.median_equivalent(h.min()), h.median_equivalent(h.max()), h.len())
            );
            proptest::prop_assert!(s.min as f64 <= s.mean && s.mean <= s.max as f64, "{} {} {}", s.min, s.mean, s.max);
        }
    }
}

#[cfg(test)]
mod latency_group_tests {
    use super::*;
    use proptest::prelude::*;

    /// The histogram the groups record is the one recording each completion
    /// alone gives.
    fn same_as_one_by_one(ts: &[u64]) {
        let lat = |s: u64| 1000 - s * 10;
        let mut a = new_histogram();
        for &t in ts {
            a.saturating_record(lat(t));
        }
        let mut b = new_histogram();
        let mut g = LatencyGroups::default();
        for &t in ts {
            g.add(&mut b, t, lat);
        }
        g.flush(&mut b, lat);
        assert_eq!(g.recorded(), ts.len() as u64);
        assert_eq!(a.len(), b.len());
        for q in [0.0, 0.25, 0.5, 0.9, 1.0] {
            assert_eq!(a.value_at_quantile(q), b.value_at_quantile(q));
        }
        assert_eq!(a.mean(), b.mean());
        assert_eq!(a.stdev(), b.stdev());
    }

    #[test]
    fn groups_record_the_same_histogram_as_one_by_one() {
        // The second sequence starts at the empty group's own timestamp (0);
        // the third holds more timestamps than there are slots.
        for ts in [&[5u64, 5, 5, 7, 7, 5, 9, 9, 9, 9, 1][..], &[0, 0, 3, 0, 0, 0][..], &[1, 2, 3, 4, 5, 6, 1, 2, 7, 8, 9, 1][..]] {
            same_as_one_by_one(ts);
        }
    }

    #[test]
    fn groups_do_not_follow_the_completion_order() {
        // Two batches' completions interleaved: two groups, as in order.
        let mut h = new_histogram();
        for order in [&[3u64, 3, 3, 3, 8, 8, 8, 8][..], &[3, 8, 3, 8, 8, 3, 8, 3][..]] {
            let mut g = LatencyGroups::default();
            for &t in order {
                g.add(&mut h, t, |s| s);
            }
            assert_eq!(g.pending(), 2);
        }
    }

    proptest! {
        #[test]
        fn any_sequence_records_the_same_histogram(ts in proptest::collection::vec(0u64..12, 0..64)) {
            same_as_one_by_one(&ts);
        }
    }
}
