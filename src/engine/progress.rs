//! fio's status line: once a second, elapsed time, IOPS, bandwidth and ETA,
//! on one line of the terminal. Silent unless stderr is a terminal and the
//! output format is for people.

use crate::engine::job::{JobSpec, Progress};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Print the status line every second until every worker has finished.
pub fn status_loop(spec: &JobSpec, progress: &[Progress], finished: &AtomicUsize) {
    let start = Instant::now();
    let total = spec.runtime.map(|r| r + spec.ramp);
    let (mut last_ios, mut last_bytes, mut last_t) = (0u64, 0u64, start);
    let mut printed = false;
    while finished.load(Ordering::Acquire) < progress.len() {
        std::thread::sleep(Duration::from_millis(100));
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
            progress.len() - finished.load(Ordering::Relaxed),
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
