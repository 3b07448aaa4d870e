//! The benchmark's clock: the TSC where it is invariant (constant_tsc and
//! nonstop_tsc) and the kernel has not ruled it out, calibrated against
//! CLOCK_MONOTONIC, else clock_gettime. Reading the TSC costs about 20-30
//! cycles; `clock_gettime` through the vDSO about 190 instructions: at tens
//! of nanoseconds per I/O that matters. The TSC times latencies and empty
//! polls; the measured interval itself is timed with CLOCK_MONOTONIC
//! ([`mono_ns`]), so a calibration error never scales IOPS or bandwidth.

use crate::measure::spread::Spread;
use std::time::Duration;

/// A calibrated tick source.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    tsc: bool,
    /// Nanoseconds per tick in 32.32 fixed point.
    mult: u64,
    /// Why clock_gettime is used (None: the TSC is).
    fallback: Option<Fallback>,
}

/// Why the clock is clock_gettime rather than the TSC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fallback {
    /// `NVB_CLOCK=monotonic`.
    Forced,
    /// Not x86_64, or /proc/cpuinfo lacks constant_tsc or nonstop_tsc.
    NotInvariant,
    /// The kernel lists clocksources and `tsc` is not among them: its
    /// clocksource watchdog found the TSC unstable.
    KernelRejected,
    /// The calibration gave a rate no TSC has.
    Calibration,
}

/// CLOCK_MONOTONIC in nanoseconds (what `Instant` reads on Linux), the
/// same origin for every thread, so intervals of different threads can be
/// compared and joined. Read straight, one `clock_gettime` and one
/// multiply-add: `Instant::elapsed` from an origin added std's timespec
/// wrapper, a timespec subtraction and a 128-bit product, about 120
/// instructions a reading in all where the TSC is not used (the test bed's
/// emulated CPU).
#[inline]
pub fn mono_ns() -> u64 {
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC)
}

fn tsc_is_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else { return false };
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

const CLOCKSOURCE_DIR: &str = "/sys/devices/system/clocksource/clocksource0";

/// The kernel's current clocksource (`tsc`, `kvm-clock`, `hpet`, ...), what
/// CLOCK_MONOTONIC itself is read from; None when sysfs does not say.
pub fn kernel_clocksource() -> Option<String> {
    let s = std::fs::read_to_string(format!("{CLOCKSOURCE_DIR}/current_clocksource")).ok()?;
    Some(s.trim().to_string()).filter(|s| !s.is_empty())
}

/// False when the kernel lists its usable clocksources and `tsc` is not
/// one of them (the clocksource watchdog marked it unstable and removed
/// it); true when it is listed or sysfs does not say.
fn kernel_allows_tsc() -> bool {
    match std::fs::read_to_string(format!("{CLOCKSOURCE_DIR}/available_clocksource")) {
        Ok(s) => s.split_whitespace().any(|w| w == "tsc"),
        Err(_) => true,
    }
}

/// One bracketed reading: the TSC read between two CLOCK_MONOTONIC reads.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pair {
    tsc: u64,
    /// Midpoint of the two monotonic reads, ns.
    mono: u64,
    /// Their distance, ns: how uncertain `mono` is as the TSC read's time.
    width: u64,
}

/// Of the bracketed readings (monotonic, tsc, monotonic), the one with the
/// narrowest bracket: the one least disturbed by an interrupt or preemption.
fn narrowest(reads: impl IntoIterator<Item = (u64, u64, u64)>) -> Option<Pair> {
    reads
        .into_iter()
        .filter(|&(m0, _, m1)| m1 >= m0)
        .map(|(m0, tsc, m1)| Pair { tsc, mono: m0 + (m1 - m0) / 2, width: m1 - m0 })
        .min_by_key(|p| p.width)
}

/// Bracketed readings taken now, the narrowest kept.
fn best_pair() -> Option<Pair> {
    narrowest((0..32).map(|_| {
        let m0 = mono_ns();
        let t = nvme_hal::rdtsc();
        (m0, t, mono_ns())
    }))
}

/// Nanoseconds per tick: the median over the consecutive intervals between
/// `pairs` (one interval disturbed beyond its bracket is outvoted). None
/// when no interval is usable.
fn ns_per_tick(pairs: &[Pair]) -> Option<f64> {
    let slopes: Vec<f64> = pairs
        .windows(2)
        .filter(|w| w[1].tsc > w[0].tsc && w[1].mono > w[0].mono)
        .map(|w| (w[1].mono - w[0].mono) as f64 / (w[1].tsc - w[0].tsc) as f64)
        .collect();
    Spread::of(&slopes).map(|s| s.median)
}

/// Calibration intervals and their length (about 30 ms in all).
const INTERVALS: usize = 3;
const INTERVAL: Duration = Duration::from_millis(10);

impl Clock {
    /// Pick and calibrate the clock (about 30 ms). `NVB_CLOCK=monotonic`
    /// forces clock_gettime.
    pub fn calibrate() -> Clock {
        let mono = |why| Clock { tsc: false, mult: 1 << 32, fallback: Some(why) };
        if std::env::var("NVB_CLOCK").map(|v| v == "monotonic").unwrap_or(false) {
            return mono(Fallback::Forced);
        }
        if !tsc_is_invariant() {
            return mono(Fallback::NotInvariant);
        }
        if !kernel_allows_tsc() {
            return mono(Fallback::KernelRejected);
        }
        let mut pairs = Vec::with_capacity(INTERVALS + 1);
        for i in 0..=INTERVALS {
            if i > 0 {
                std::thread::sleep(INTERVAL);
            }
            pairs.extend(best_pair());
        }
        match ns_per_tick(&pairs) {
            // A TSC slower than 100 MHz or faster than 10 GHz is not a TSC we trust.
            Some(ns) if (0.1..=10.0).contains(&ns) => Clock { tsc: true, mult: (ns * (1u64 << 32) as f64) as u64, fallback: None },
            _ => mono(Fallback::Calibration),
        }
    }

    /// Ticks now.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        if self.tsc {
            nvme_hal::rdtsc()
        } else {
            mono_ns()
        }
    }

    /// Convert a tick difference to nanoseconds.
    #[inline(always)]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        ((ticks as u128 * self.mult as u128) >> 32) as u64
    }

    /// Ticks in a duration.
    pub fn ticks(&self, d: Duration) -> u64 {
        ((d.as_nanos() << 32) / self.mult as u128) as u64
    }

    /// Which source is used, and why, for the report (the kernel's own
    /// clocksource is reported beside it: [`kernel_clocksource`]).
    pub fn source(&self) -> &'static str {
        match self.fallback {
            None => "tsc (invariant, calibrated against CLOCK_MONOTONIC: median of 3 intervals of 10 ms, each end the narrowest of 32 bracketed reads); measured intervals timed with CLOCK_MONOTONIC",
            Some(Fallback::Forced) => "clock_gettime(CLOCK_MONOTONIC) (NVB_CLOCK=monotonic)",
            Some(Fallback::NotInvariant) => "clock_gettime(CLOCK_MONOTONIC) (the TSC is not invariant: /proc/cpuinfo lacks constant_tsc or nonstop_tsc)",
            Some(Fallback::KernelRejected) => "clock_gettime(CLOCK_MONOTONIC) (the kernel found the TSC unstable: tsc is not in available_clocksource)",
            Some(Fallback::Calibration) => "clock_gettime(CLOCK_MONOTONIC) (the TSC's calibration against CLOCK_MONOTONIC failed)",
        }
    }
}

/// The clocksource line of a report: the kernel's clocksource, and what it
/// means for the figures when it is not the TSC.
pub fn describe_clocksource(cs: Option<&str>) -> String {
    match cs {
        Some("tsc") => "tsc (CLOCK_MONOTONIC reads the TSC)".into(),
        Some(other) => format!("{other}, not tsc: CLOCK_MONOTONIC, which times the measured interval and calibrates the TSC, follows {other}"),
        None => "unknown (no /sys/devices/system/clocksource/clocksource0/current_clocksource)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrowest_bracket_is_kept() {
        let reads = [(100, 5000, 180), (300, 7000, 310), (500, 9000, 900)];
        assert_eq!(narrowest(reads), Some(Pair { tsc: 7000, mono: 305, width: 10 }));
        // A bracket that runs backwards is no reading.
        assert_eq!(narrowest([(10, 1, 5)]), None);
        assert_eq!(narrowest([]), None);
    }

    #[test]
    fn the_rate_is_the_median_interval_so_one_bad_interval_is_outvoted() {
        let p = |tsc, mono| Pair { tsc, mono, width: 0 };
        // 3 GHz: 1/3 ns per tick, over three intervals of 30M ticks, the
        // second stretched (the end read delayed past its bracket).
        let pairs = [p(0, 0), p(30_000_000, 10_000_000), p(60_000_000, 25_000_000), p(90_000_000, 35_000_000)];
        assert_eq!(ns_per_tick(&pairs), Some(10_000_000.0 / 30_000_000.0));
        assert_eq!(ns_per_tick(&pairs[..1]), None, "one pair is no interval");
        assert_eq!(ns_per_tick(&[p(5, 5), p(5, 10)]), None, "no ticks between them");
    }

    #[test]
    fn conversions_are_exact_in_fixed_point() {
        // 0.5 ns per tick (2 GHz): exact in 32.32.
        let c = Clock { tsc: true, mult: 1 << 31, fallback: None };
        assert_eq!(c.to_ns(2_000_000_000), 1_000_000_000);
        assert_eq!(c.ticks(Duration::from_secs(1)), 2_000_000_000);
        let m = Clock { tsc: false, mult: 1 << 32, fallback: Some(Fallback::Forced) };
        assert_eq!(m.to_ns(123_456_789), 123_456_789);
        assert_eq!(m.ticks(Duration::from_nanos(42)), 42);
        assert!(m.source().contains("NVB_CLOCK"));
    }

    #[test]
    fn the_calibrated_clock_is_sane() {
        // No timing bound (the machine may be loaded): the calibrated rate
        // is one a TSC can have, and the clock moves forward.
        let c = Clock::calibrate();
        let ns_per_tick = c.mult as f64 / (1u64 << 32) as f64;
        assert!((0.1..=10.0).contains(&ns_per_tick), "{ns_per_tick} ns per tick ({})", c.source());
        let t0 = c.now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.to_ns(c.now() - t0) > 0);
        assert!(c.ticks(Duration::from_millis(1)) > 0);
    }

    #[test]
    fn a_clocksource_other_than_tsc_is_said() {
        assert!(describe_clocksource(Some("kvm-clock")).starts_with("kvm-clock, not tsc"));
        assert!(describe_clocksource(Some("tsc")).starts_with("tsc"));
        assert!(describe_clocksource(None).starts_with("unknown"));
    }
}
