//! The benchmark's clock: the TSC where it is invariant (constant_tsc and
//! nonstop_tsc), calibrated against CLOCK_MONOTONIC, else clock_gettime.
//! Reading the TSC costs about 20-30 cycles; `clock_gettime` through the
//! vDSO about 190 instructions: at tens of nanoseconds per I/O that matters.

use std::time::{Duration, Instant};

/// A calibrated tick source.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    tsc: bool,
    /// Nanoseconds per tick in 32.32 fixed point.
    mult: u64,
}

/// Monotonic nanoseconds from a process-wide origin (CLOCK_MONOTONIC,
/// which is what `Instant` reads on Linux).
#[inline]
pub fn mono_ns() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
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

impl Clock {
    /// Pick and calibrate the clock (about 20 ms). `NVB_CLOCK=monotonic`
    /// forces clock_gettime.
    pub fn calibrate() -> Clock {
        let forced = std::env::var("NVB_CLOCK").map(|v| v == "monotonic").unwrap_or(false);
        if !forced && tsc_is_invariant() {
            let (t0, m0) = (nvme_hal::rdtsc(), mono_ns());
            std::thread::sleep(Duration::from_millis(20));
            let (t1, m1) = (nvme_hal::rdtsc(), mono_ns());
            let ticks = t1.wrapping_sub(t0);
            if ticks > 0 && m1 > m0 {
                let ns_per_tick = (m1 - m0) as f64 / ticks as f64;
                // A TSC slower than 100 MHz or faster than 10 GHz is not a TSC we trust.
                if (0.1..=10.0).contains(&ns_per_tick) {
                    return Clock { tsc: true, mult: (ns_per_tick * (1u64 << 32) as f64) as u64 };
                }
            }
        }
        Clock { tsc: false, mult: 1 << 32 }
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

    /// Which source is used, for the report.
    pub fn source(&self) -> &'static str {
        if self.tsc {
            "tsc (invariant, calibrated against CLOCK_MONOTONIC)"
        } else {
            "clock_gettime(CLOCK_MONOTONIC)"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_agrees_with_monotonic() {
        let c = Clock::calibrate();
        let (t0, i0) = (c.now(), Instant::now());
        std::thread::sleep(Duration::from_millis(30));
        let (t1, i1) = (c.now(), Instant::now());
        let ns = c.to_ns(t1 - t0) as i64;
        let real = (i1 - i0).as_nanos() as i64;
        assert!((ns - real).abs() < real / 10, "clock {ns} ns vs monotonic {real} ns ({})", c.source());
        assert!(c.ticks(Duration::from_millis(1)) > 0);
    }
}
