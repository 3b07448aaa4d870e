//! fio's status line: once a second, elapsed time, IOPS, bandwidth and ETA,
//! on one line of the terminal. Silent unless stderr is a terminal and the
//! output format is for people.

pub use crate::engine::job::Reading;
use crate::engine::job::{JobSpec, Progress};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// fio's bandwidth / IOPS sampling interval (`log_avg_msec`'s default).
pub const SAMPLE_NS: u64 = 500_000_000;

/// How many workers have finished, with a wake-up for whoever waits on it
/// (the sampler), so that the sampler sleeps until its next reading rather
/// than in short naps: a wake-up every 20 ms was work of its own beside the
/// I/O being measured, 50 timer expiries, system calls and context switches
/// a second, which the test bed's instruction counts saw grow with each
/// row's duration.
#[derive(Default)]
pub struct Finished {
    n: Mutex<usize>,
    cv: Condvar,
}

impl Finished {
    fn lock(&self) -> MutexGuard<'_, usize> {
        self.n.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// One more worker has finished.
    pub fn one(&self) {
        *self.lock() += 1;
        self.cv.notify_all();
    }
    /// Workers finished so far.
    pub fn count(&self) -> usize {
        *self.lock()
    }
    /// Wait until `all` workers have finished (true) or `timeout` passed.
    pub fn wait(&self, all: usize, timeout: Duration) -> bool {
        let g = self.lock();
        let (g, _) = self.cv.wait_timeout_while(g, timeout, |n| *n < all).unwrap_or_else(|e| e.into_inner());
        *g >= all
    }
}

/// A worker counted as finished when this drops: when it returns, fails or
/// panics.
pub struct FinishOnDrop<'a>(pub &'a Finished);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.one();
    }
}

/// Every thread's progress counters read every [`SAMPLE_NS`] until every
/// worker has finished, per thread. The workers only store their
/// counters, as they did for the status line: the reading costs them
/// nothing.
pub fn sample_loop(spec: &JobSpec, progress: &[Progress], finished: &Finished, status_line: bool) -> Vec<Vec<Reading>> {
    let read = |out: &mut Vec<Vec<Reading>>| {
        let t = crate::measure::clock::mono_ns();
        for (o, p) in out.iter_mut().zip(progress) {
            o.push(p.read(t));
        }
    };
    let mut out = vec![vec![]; progress.len()];
    read(&mut out);
    let period = SAMPLE_NS;
    let mut next = crate::measure::clock::mono_ns() + period;
    std::thread::scope(|s| {
        if status_line {
            s.spawn(|| status_loop(spec, progress, finished));
        }
        while finished.count() < progress.len() {
            let now = crate::measure::clock::mono_ns();
            if now >= next {
                read(&mut out);
                next += period * ((now - next) / period + 1);
            } else if finished.wait(progress.len(), Duration::from_nanos(next - now)) {
                break;
            }
        }
    });
    out
}

/// The intervals between consecutive readings of one thread's counters
/// (`sample_loop`'s, or the thread's own log entries) inside [start, end]
/// (its measured interval), those wholly inside it, as samples.
pub fn samples_within(readings: &[Reading], start: u64, end: u64) -> Vec<crate::engine::job::Sample> {
    let inside: Vec<&Reading> = readings.iter().filter(|r| r.t >= start && r.t <= end).collect();
    inside
        .windows(2)
        .map(|w| crate::engine::job::Sample {
            end: w[1].t,
            ns: w[1].t - w[0].t,
            ios: w[1].ios - w[0].ios,
            bytes: w[1].bytes - w[0].bytes,
            writes: w[1].writes - w[0].writes,
            flushes: w[1].flushes - w[0].flushes,
        })
        .collect()
}

/// Print the status line every second until every worker has finished.
pub fn status_loop(spec: &JobSpec, progress: &[Progress], finished: &Finished) {
    let start = Instant::now();
    let total = spec.runtime.map(|r| r + spec.ramp);
    let (mut last_ios, mut last_bytes, mut last_t) = (0u64, 0u64, start);
    let mut printed = false;
    while !finished.wait(progress.len(), Duration::from_millis(100)) {
        if last_t.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let now = Instant::now();
        let ios: u64 = progress.iter().map(|p| p.ios.load(Ordering::Relaxed)).sum();
        let bytes: u64 = progress.iter().map(|p| p.bytes.load(Ordering::Relaxed)).sum();
        let dt = (now - last_t).as_secs_f64();
        let iops = (ios - last_ios) as f64 / dt;
        let mibs = (bytes - last_bytes) as f64 / dt / (1 << 20) as f64;
        let el = start.elapsed().as_secs();
        let eta = total.map(|t| t.as_secs().saturating_sub(el)).map(|s| format!("{:02}m:{:02}s", s / 60, s % 60));
        eprint!(
            "\rJobs: {} [{}] [{:.1}MiB/s][{:.0} IOPS][elapsed {:02}m:{:02}s][eta {}]   ",
            progress.len() - finished.count(),
            spec.rw.as_str(),
            mibs,
            iops,
            el / 60,
            el % 60,
            eta.unwrap_or_else(|| "--".into())
        );
        let _ = std::io::stderr().flush();
        printed = true;
        (last_ios, last_bytes, last_t) = (ios, bytes, now);
    }
    if printed {
        eprint!("\r{:100}\r", "");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that panics is still counted as finished, so the sampler
    /// does not wait for it forever (the run then reports the panic).
    #[test]
    fn a_worker_that_panics_is_counted_as_finished() {
        let f = Finished::default();
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                let _done = FinishOnDrop(&f);
                panic!("a worker's bug");
            });
            assert!(f.wait(1, Duration::from_secs(10)), "the panicking worker was not counted");
            assert!(h.join().is_err());
        });
    }

    #[test]
    fn the_sampler_wakes_when_the_last_worker_finishes() {
        let f = Finished::default();
        assert!(!f.wait(1, Duration::from_millis(1)));
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                f.one();
            });
            // Woken by the worker, long before the timeout.
            let t = Instant::now();
            assert!(f.wait(1, Duration::from_secs(60)));
            assert!(t.elapsed() < Duration::from_secs(30));
        });
        assert_eq!(f.count(), 1);
    }

    #[test]
    fn samples_are_the_intervals_inside_the_measured_one() {
        let r = [(0, 0, 0, 0), (500, 10, 40, 2), (1000, 30, 120, 5), (1500, 60, 240, 15), (2000, 70, 280, 16)]
            .map(|(t, ios, bytes, writes)| Reading { t, ios, bytes, writes, flushes: 0 });
        let s = samples_within(&r, 400, 1600);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!((s[0].ns, s[0].ios, s[0].bytes, s[0].dir_ios(false), s[0].dir_ios(true)), (500, 20, 80, 17, 3));
        assert_eq!((s[1].ns, s[1].ios, s[1].bytes, s[1].dir_ios(false), s[1].dir_ios(true)), (500, 30, 120, 20, 10));
        assert!(samples_within(&r, 100, 900).is_empty(), "no whole interval inside");
    }
}
