//! Repeated figures: the median of N runs with its min-max range, and the
//! rule that says whether a ratio is a gain or within the noise.
//!
//! A timed figure on a shared machine is only as good as its spread, so
//! every repeated figure is reported as `median [min-max] (n=N)`. A ratio
//! against the baseline is "within noise" when its range overlaps the range
//! of the noise control: the baseline itself, run again in the same
//! rotation and divided by the baseline's median.

use serde::Serialize;

/// Median and range of one figure over its repetitions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Repetitions it summarises.
    pub n: usize,
}

impl Spread {
    /// The spread of `values` (NaNs are ignored); None when none is left.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { median, min: v[0], max: v[n - 1], n })
    }

    /// Every value divided by `by` (a ratio against a baseline's median).
    pub fn scaled(&self, by: f64) -> Spread {
        Spread { median: self.median / by, min: self.min / by, max: self.max / by, n: self.n }
    }

    /// The range as a fraction of the median: (max - min) / median.
    pub fn relative_range(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / self.median
        }
    }

    /// True when the two ranges share a value.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// How a ratio against the baseline reads next to the noise control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Its range lies above the noise control's range.
    Higher,
    /// Its range lies below the noise control's range.
    Lower,
    /// Its range overlaps the noise control's: not a difference.
    WithinNoise,
}

/// Judge `ratio` (a row's figure over the baseline's median) against
/// `noise` (the noise control's figure over the same median).
pub fn verdict(ratio: &Spread, noise: &Spread) -> Verdict {
    if ratio.overlaps(noise) {
        Verdict::WithinNoise
    } else if ratio.min > noise.max {
        Verdict::Higher
    } else {
        Verdict::Lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[f64::NAN]).is_none());
        assert!((Spread::of(&[90.0, 100.0, 110.0]).unwrap().relative_range() - 0.2).abs() < 1e-12);
    }

    #[test]
    fn verdicts() {
        let noise = Spread { median: 1.0, min: 0.9, max: 1.1, n: 3 };
        let up = Spread { median: 1.5, min: 1.2, max: 1.6, n: 3 };
        let edge = Spread { median: 1.3, min: 1.1, max: 1.4, n: 3 };
        let down = Spread { median: 0.5, min: 0.4, max: 0.6, n: 3 };
        assert_eq!(verdict(&up, &noise), Verdict::Higher);
        assert_eq!(verdict(&edge, &noise), Verdict::WithinNoise);
        assert_eq!(verdict(&down, &noise), Verdict::Lower);
        assert_eq!(up.scaled(2.0).median, 0.75);
    }
}
