//! Core-to-core latency: how long a cache line takes to move between two
//! CPUs. Every figure of the simulator depends on it (the driver and the
//! simulated controller talk through shared cache lines), and on these
//! machines it changes 3-4x when the hypervisor moves the vCPUs, so the
//! simulator benchmark measures it just before and after each run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

#[repr(align(128))]
struct Line(AtomicU64);

/// One-way cache-line transfer latency between `a` and `b` in nanoseconds
/// (half a ping-pong round trip, median of 5 batches of `rounds`), or `None`
/// when the threads cannot be pinned (e.g. only one CPU).
pub fn measure(a: usize, b: usize, rounds: u64) -> Option<f64> {
    if a == b {
        return None;
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let barrier = Arc::new(Barrier::new(2));
    // Each side says whether it got its CPU; after the barrier both know,
    // and neither spins for a partner that is not there.
    let pinned_a = Arc::new(AtomicBool::new(false));
    let pinned_b = Arc::new(AtomicBool::new(false));
    let (l2, b2, pa2, pb2) = (line.clone(), barrier.clone(), pinned_a.clone(), pinned_b.clone());
    let total = rounds * 5;
    let pong = std::thread::spawn(move || {
        pb2.store(nvme_hal::pin_current_thread(b).is_ok(), Ordering::SeqCst);
        b2.wait();
        if !(pa2.load(Ordering::SeqCst) && pb2.load(Ordering::SeqCst)) {
            return false;
        }
        for i in 0..total {
            while l2.0.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            l2.0.store(2 * i + 2, Ordering::Release);
        }
        true
    });
    pinned_a.store(nvme_hal::pin_current_thread(a).is_ok(), Ordering::SeqCst);
    barrier.wait();
    if !(pinned_a.load(Ordering::SeqCst) && pinned_b.load(Ordering::SeqCst)) {
        let _ = pong.join();
        let _ = unpin_current_thread();
        return None;
    }
    let mut samples = vec![];
    let mut i = 0;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..rounds {
            line.0.store(2 * i + 1, Ordering::Release);
            while line.0.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
            i += 1;
        }
        samples.push(start.elapsed().as_nanos() as f64 / rounds as f64 / 2.0);
    }
    let ok = pong.join().unwrap_or(false);
    // Let the caller's thread run anywhere again.
    let _ = unpin_current_thread();
    samples.sort_by(|x, y| x.partial_cmp(y).unwrap());
    ok.then(|| samples[2])
}

/// Probe the core-to-core latency between CPUs `a` and `b` with short
/// measurements (a few ms each) until one is at most `ns`: Some(true)
/// then, Some(false) when none was within `timeout`, None when it cannot
/// be measured (the threads could not be pinned to those CPUs).
pub fn wait_until_at_most(a: usize, b: usize, ns: f64, timeout: std::time::Duration) -> Option<bool> {
    let start = Instant::now();
    loop {
        let v = measure(a, b, 2_000)?;
        if v <= ns {
            return Some(true);
        }
        if start.elapsed() >= timeout {
            return Some(false);
        }
    }
}

/// Allow the calling thread on every CPU again.
pub fn unpin_current_thread() -> std::io::Result<()> {
    nvme_hal::unpin_current_thread(online_cpus())
}

/// Number of online CPUs.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU that cannot be had ends the measurement at once on both
    /// sides (it used to leave one side spinning for its partner forever).
    #[test]
    fn an_unpinnable_cpu_gives_no_figure_and_no_hang() {
        assert_eq!(measure(0, 100_000, 100), None);
        assert_eq!(measure(100_000, 0, 100), None);
        assert_eq!(wait_until_at_most(0, 100_000, 1e9, std::time::Duration::from_secs(1)), None);
    }
}
