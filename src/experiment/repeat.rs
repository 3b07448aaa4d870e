//! A repeated comparison: the run order of its rounds, its noise control,
//! and each row's figures as the median of its runs with their range.
//!
//! Every round runs every row once, starting at a different row (round r
//! starts r rows further on, wrapping), so no row always runs first or
//! right after the same neighbour. With more than one round the baseline
//! runs a second time in every round as the noise control, placed half a
//! round from it: the noise control's figure over the baseline's median
//! shows how far one configuration moves between runs, and a row's ratio
//! whose range overlaps that is within noise (`measure::spread::verdict`).

use crate::measure::spread::{verdict, Spread, Verdict};
use crate::report::RunSummary;
use serde::Serialize;

/// What the noise control's label adds to the baseline's.
pub const NOISE_CONTROL_SUFFIX: &str = " (noise control)";

/// The row order of each of `repeat` rounds over `rows` rows (indices):
/// round r starts at row r (mod rows) and wraps.
pub fn rotated_order(rows: usize, repeat: usize) -> Vec<Vec<usize>> {
    if rows == 0 {
        return vec![vec![]; repeat];
    }
    (0..repeat).map(|r| (0..rows).map(|i| (r + i) % rows).collect()).collect()
}

/// Where the noise control goes among `rows` rows, the baseline being row
/// `baseline`: half a round after it, so that in the rotation it never
/// runs right before or after the baseline when there are two other rows or more.
pub fn noise_control_index(rows: usize, baseline: usize) -> usize {
    (baseline + rows.div_ceil(2)).min(rows)
}

/// The figures one run gives the table: the measured ones, then the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RunFigures {
    /// I/Os per second (measured).
    pub iops_measured: f64,
    /// Bytes per second (measured).
    pub bw_bytes_measured: f64,
    /// Latency percentiles of all I/Os, ns (measured).
    pub lat_p50_ns_measured: f64,
    /// 99th percentile.
    pub lat_p99_ns_measured: f64,
    /// 99.9th percentile.
    pub lat_p999_ns_measured: f64,
    /// System-wide user CPU per I/O, ns (measured).
    pub user_ns_per_io_measured: Option<f64>,
    /// System-wide kernel CPU per I/O (system + irq + softirq), ns (measured).
    pub kernel_ns_per_io_measured: Option<f64>,
    /// System-wide busy CPU per I/O, ns (measured).
    pub cpu_ns_per_io_measured: Option<f64>,
    /// What the benchmark threads spent per I/O in polls that found
    /// nothing, ns (measured): raw less useful thread CPU.
    pub empty_poll_ns_per_io_measured: f64,
    /// Cores busy on average (measured).
    pub cores_busy_measured: Option<f64>,
    /// IOPS per busy core (measured).
    pub iops_per_busy_core_measured: Option<f64>,
    /// The system ceiling (modelled): 1 s / (system-wide busy CPU per I/O
    /// less the threads' empty-poll CPU per I/O), what one core would do
    /// with a device that never makes the poller wait.
    pub system_ceiling_iops_modelled: Option<f64>,
}

impl RunFigures {
    /// The figures of one run.
    pub fn of(s: &RunSummary) -> Self {
        let y = s.system.as_ref();
        RunFigures {
            iops_measured: s.iops,
            bw_bytes_measured: s.bw_bytes,
            lat_p50_ns_measured: s.lat_ns.p(50.0) as f64,
            lat_p99_ns_measured: s.lat_ns.p(99.0) as f64,
            lat_p999_ns_measured: s.lat_ns.p(99.9) as f64,
            user_ns_per_io_measured: y.map(|y| y.user_ns_per_io),
            kernel_ns_per_io_measured: y.map(|y| y.kernel_ns_per_io),
            cpu_ns_per_io_measured: y.map(|y| y.busy_ns_per_io),
            empty_poll_ns_per_io_measured: s.cpu.empty_poll_ns_per_io(),
            cores_busy_measured: y.map(|y| y.cores_busy),
            iops_per_busy_core_measured: y.map(|y| y.iops_per_busy_core),
            system_ceiling_iops_modelled: s.system_ceiling_iops_modelled(),
        }
    }
}

/// Each figure of a row over its runs: median, min, max, n.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RowFigures {
    /// See [`RunFigures`] for each.
    pub iops_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub bw_bytes_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub lat_p50_ns_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub lat_p99_ns_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub lat_p999_ns_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub user_ns_per_io_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub kernel_ns_per_io_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub cpu_ns_per_io_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub empty_poll_ns_per_io_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub cores_busy_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub iops_per_busy_core_measured: Option<Spread>,
    #[allow(missing_docs)]
    pub system_ceiling_iops_modelled: Option<Spread>,
}

impl RowFigures {
    /// The spread of every figure over `runs` (runs that failed left out).
    pub fn of(runs: &[RunFigures]) -> Self {
        let s = |f: fn(&RunFigures) -> Option<f64>| Spread::of(&runs.iter().filter_map(f).collect::<Vec<f64>>());
        RowFigures {
            iops_measured: s(|r| Some(r.iops_measured)),
            bw_bytes_measured: s(|r| Some(r.bw_bytes_measured)),
            lat_p50_ns_measured: s(|r| Some(r.lat_p50_ns_measured)),
            lat_p99_ns_measured: s(|r| Some(r.lat_p99_ns_measured)),
            lat_p999_ns_measured: s(|r| Some(r.lat_p999_ns_measured)),
            user_ns_per_io_measured: s(|r| r.user_ns_per_io_measured),
            kernel_ns_per_io_measured: s(|r| r.kernel_ns_per_io_measured),
            cpu_ns_per_io_measured: s(|r| r.cpu_ns_per_io_measured),
            empty_poll_ns_per_io_measured: s(|r| Some(r.empty_poll_ns_per_io_measured)),
            cores_busy_measured: s(|r| r.cores_busy_measured),
            iops_per_busy_core_measured: s(|r| r.iops_per_busy_core_measured),
            system_ceiling_iops_modelled: s(|r| r.system_ceiling_iops_modelled),
        }
    }
}

/// How a row's ratio against the baseline reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading {
    /// Above the noise control's range.
    Higher,
    /// Below the noise control's range.
    Lower,
    /// Overlapping the noise control's range: no difference shown.
    WithinNoise,
    /// One run per row: no range and no noise control to judge by.
    NotRepeated,
    /// No noise control figure (it failed, or there is no baseline).
    Unjudged,
}

impl Reading {
    /// In the table and the headline.
    pub fn words(self) -> &'static str {
        match self {
            Reading::Higher => "higher",
            Reading::Lower => "lower",
            Reading::WithinNoise => "within noise",
            Reading::NotRepeated => "not repeated",
            Reading::Unjudged => "unjudged",
        }
    }
}

impl From<Verdict> for Reading {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Higher => Reading::Higher,
            Verdict::Lower => Reading::Lower,
            Verdict::WithinNoise => Reading::WithinNoise,
        }
    }
}

/// A row's figure against the baseline: every run's figure over the
/// baseline's median, and how that reads next to the noise control's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratio {
    /// The ratio's median and range.
    pub spread: Spread,
    /// Higher, lower or within noise.
    pub reading: Reading,
}

/// `row` over the median of `baseline`, read against `noise` (the noise
/// control over the same median); `repeated` false: "not repeated".
pub fn ratio(row: Option<Spread>, baseline: Option<Spread>, noise: Option<Spread>, repeated: bool) -> Option<Ratio> {
    let b = baseline.filter(|b| b.median > 0.0)?;
    let spread = row?.scaled(b.median);
    let reading = if !repeated {
        Reading::NotRepeated
    } else {
        match noise {
            Some(n) => verdict(&spread, &n.scaled(b.median)).into(),
            None => Reading::Unjudged,
        }
    };
    Some(Ratio { spread, reading })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_starts_at_another_row_and_runs_each_once() {
        let o = rotated_order(4, 3);
        assert_eq!(o, vec![vec![0, 1, 2, 3], vec![1, 2, 3, 0], vec![2, 3, 0, 1]]);
        // More rounds than rows: the rotation wraps.
        let o = rotated_order(2, 3);
        assert_eq!(o, vec![vec![0, 1], vec![1, 0], vec![0, 1]]);
        for round in rotated_order(5, 5) {
            let mut r = round.clone();
            r.sort();
            assert_eq!(r, vec![0, 1, 2, 3, 4]);
        }
        let firsts: Vec<usize> = rotated_order(5, 5).iter().map(|r| r[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 3, 4], "the baseline (row 0) runs first in one round only");
        assert_eq!(rotated_order(0, 2), vec![Vec::<usize>::new(), vec![]]);
    }

    #[test]
    fn the_noise_control_runs_half_a_round_from_the_baseline() {
        // Rows block, libaio, passthru, vfio: the control goes before passthru.
        assert_eq!(noise_control_index(4, 0), 2);
        assert_eq!(noise_control_index(5, 0), 3);
        assert_eq!(noise_control_index(1, 0), 1);
        // Never next to the baseline in any rotation when there are 2+ other rows.
        for n in 3..8 {
            let at = noise_control_index(n, 0);
            let len = n + 1;
            let gap = at.min(len - at);
            assert!(gap >= 2, "{n} rows: control at {at}");
        }
    }

    fn sp(min: f64, median: f64, max: f64) -> Spread {
        Spread { median, min, max, n: 3 }
    }

    #[test]
    fn ratios_are_read_against_the_noise_control() {
        let base = sp(95.0, 100.0, 105.0);
        let noise = sp(93.0, 98.0, 106.0);
        // Clearly higher: 1.5x-1.7x against a noise range of 0.93-1.06.
        let r = ratio(Some(sp(150.0, 160.0, 170.0)), Some(base), Some(noise), true).unwrap();
        assert_eq!(r.reading, Reading::Higher);
        assert_eq!((r.spread.min, r.spread.median, r.spread.max), (1.5, 1.6, 1.7));
        // 1.05-1.2: its range reaches into the noise: within noise, not a gain.
        let r = ratio(Some(sp(105.0, 110.0, 120.0)), Some(base), Some(noise), true).unwrap();
        assert_eq!(r.reading, Reading::WithinNoise);
        let r = ratio(Some(sp(50.0, 60.0, 70.0)), Some(base), Some(noise), true).unwrap();
        assert_eq!(r.reading, Reading::Lower);
        // The baseline against its own control.
        assert_eq!(ratio(Some(base), Some(base), Some(noise), true).unwrap().reading, Reading::WithinNoise);
        // One run: a ratio, no verdict.
        let one = Spread { median: 100.0, min: 100.0, max: 100.0, n: 1 };
        let r = ratio(Some(Spread { median: 300.0, min: 300.0, max: 300.0, n: 1 }), Some(one), None, false).unwrap();
        assert_eq!((r.spread.median, r.reading), (3.0, Reading::NotRepeated));
        assert_eq!(r.reading.words(), "not repeated");
        // No noise control figure.
        assert_eq!(ratio(Some(base), Some(base), None, true).unwrap().reading, Reading::Unjudged);
        // No baseline: no ratio.
        assert!(ratio(Some(base), None, Some(noise), true).is_none());
    }

    #[test]
    fn row_figures_leave_failed_and_missing_figures_out() {
        let a = RunFigures { iops_measured: 100.0, iops_per_busy_core_measured: Some(50.0), ..Default::default() };
        let b = RunFigures { iops_measured: 300.0, iops_per_busy_core_measured: None, ..Default::default() };
        let c = RunFigures { iops_measured: 200.0, iops_per_busy_core_measured: Some(70.0), ..Default::default() };
        let f = RowFigures::of(&[a, b, c]);
        assert_eq!(f.iops_measured, Some(Spread { median: 200.0, min: 100.0, max: 300.0, n: 3 }));
        assert_eq!(f.iops_per_busy_core_measured, Some(Spread { median: 60.0, min: 50.0, max: 70.0, n: 2 }));
        assert_eq!(f.system_ceiling_iops_modelled, None);
        assert_eq!(RowFigures::of(&[]).iops_measured, None);
    }
}
