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
    /// Percentile -> value, keys formatted as fio does ("99.900000").
    pub percentile: std::collections::BTreeMap<String, u64>,
}

impl LatSummary {
    /// Summarize a histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatSummary::default();
        }
        LatSummary {
            min: h.min(),
            max: h.max(),
            mean: h.mean(),
            stddev: h.stdev(),
            n: h.len(),
            percentile: PERCENTILES.iter().map(|p| (format!("{p:.6}"), h.value_at_quantile(p / 100.0))).collect(),
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
    /// Now, for the whole process.
    pub fn process() -> Self {
        Self::rusage(libc::RUSAGE_SELF)
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
    /// Sum.
    pub fn total(&self) -> u64 {
        self.user_ns + self.sys_ns
    }
}
