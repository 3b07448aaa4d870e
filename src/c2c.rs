//! Core-to-core latency: how long a cache line takes to move between two
//! CPUs. Every figure of the simulator depends on it (the driver and the
//! simulated controller talk through shared cache lines), and on these
//! machines it changes 3-4x when the hypervisor moves the vCPUs, so the
//! simulator benchmark measures it just before and after each run.

use std::sync::atomic::{AtomicU64, Ordering};
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
    let (l2, b2) = (line.clone(), barrier.clone());
    let total = rounds * 5;
    let pong = std::thread::spawn(move || {
        if nvme_hal::pin_current_thread(b).is_err() {
            b2.wait();
            return false;
        }
        b2.wait();
        for i in 0..total {
            while l2.0.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            l2.0.store(2 * i + 2, Ordering::Release);
        }
        true
    });
    let pinned = nvme_hal::pin_current_thread(a).is_ok();
    barrier.wait();
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
    let ok = pong.join().unwrap_or(false) && pinned;
    // Let the caller's thread run anywhere again.
    let _ = unpin_current_thread();
    samples.sort_by(|x, y| x.partial_cmp(y).unwrap());
    ok.then(|| samples[2])
}

/// Probe the core-to-core latency between CPUs `a` and `b` with short
/// measurements (a few ms each) until one is at most `ns`; false when none
/// was within `timeout` (or the threads could not be pinned).
pub fn wait_until_at_most(a: usize, b: usize, ns: f64, timeout: std::time::Duration) -> bool {
    let start = Instant::now();
    loop {
        match measure(a, b, 2_000) {
            Some(v) if v <= ns => return true,
            None => return false,
            Some(_) if start.elapsed() >= timeout => return false,
            Some(_) => {}
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
