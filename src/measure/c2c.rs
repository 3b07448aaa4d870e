//! Core-to-core latency: how long a cache line takes to move between two
//! CPUs. Every figure of the simulator depends on it (the driver and the
//! simulated controller talk through shared cache lines), and on these
//! machines it changes 3-4x when the hypervisor moves the vCPUs, so the
//! simulator benchmark measures it just before and after each run.
//!
//! Core share: whether the two CPUs are separate cores at all, or the two
//! hardware threads of one core (which on our machine is exactly when the
//! core-to-core latency is lowest); measured right after each run.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use crate::measure::spread::Spread;
use std::time::Instant;

#[repr(align(128))]
struct Line(AtomicU64);

/// Pin this thread to CPU `a` and start `partner` on a thread pinned to CPU
/// `b`. Each side says whether it got its CPU; after a barrier both know,
/// and neither spins for a partner that is not there: `None` (the partner
/// not run, this thread unpinned again) unless both pins took.
fn pinned_pair<T: Send + 'static>(
    a: usize,
    b: usize,
    partner: impl FnOnce() -> T + Send + 'static,
) -> Option<std::thread::JoinHandle<Option<T>>> {
    let barrier = Arc::new(Barrier::new(2));
    let pinned_a = Arc::new(AtomicBool::new(false));
    let pinned_b = Arc::new(AtomicBool::new(false));
    let (b2, pa2, pb2) = (barrier.clone(), pinned_a.clone(), pinned_b.clone());
    let handle = std::thread::spawn(move || {
        pb2.store(nvme_hal::pin_current_thread(b).is_ok(), Ordering::SeqCst);
        b2.wait();
        (pa2.load(Ordering::SeqCst) && pb2.load(Ordering::SeqCst)).then(partner)
    });
    pinned_a.store(nvme_hal::pin_current_thread(a).is_ok(), Ordering::SeqCst);
    barrier.wait();
    if !(pinned_a.load(Ordering::SeqCst) && pinned_b.load(Ordering::SeqCst)) {
        let _ = handle.join();
        let _ = unpin_current_thread();
        return None;
    }
    Some(handle)
}

/// One-way cache-line transfer latency between `a` and `b` in nanoseconds
/// (half a ping-pong round trip, median of 5 batches of `rounds`), or `None`
/// when the threads cannot be pinned (e.g. only one CPU).
pub fn measure(a: usize, b: usize, rounds: u64) -> Option<f64> {
    if a == b {
        return None;
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let l2 = line.clone();
    let total = rounds * 5;
    let pong = pinned_pair(a, b, move || {
        for i in 0..total {
            while l2.0.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            l2.0.store(2 * i + 2, Ordering::Release);
        }
    })?;
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
    let ok = matches!(pong.join(), Ok(Some(())));
    // Let the caller's thread run anywhere again.
    let _ = unpin_current_thread();
    samples.sort_by(|x, y| x.partial_cmp(y).unwrap());
    ok.then(|| samples[2])
}

/// Probe the core-to-core latency between CPUs `a` and `b` with short
/// measurements (about a ms each, 5 ms apart) until one is at most `ns`: Some(true)
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
        // Leave both CPUs idle between probes. A hypervisor may place two
        // busy vCPUs differently from two mostly idle ones, and a waiter
        // that keeps both busy would change the state it waits for.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Whether CPUs `a` and `b` are separate cores: how much multiply work `a`
/// gets done in `window` while `b` does the same, over how much while `b`
/// only spins on `pause` (which leaves the core's execution units to its
/// other hardware thread), as the median of five such pairs. About 1.0:
/// separate cores. Clearly under 1 (0.46-0.49 measured on our Xeon VM):
/// two hardware threads of one core, which a virtual machine's CPU topology need not
/// show; then a "per-core" figure measured with the driver on `a` and the
/// simulated controller on `b` is for a core shared between the two.
/// `None` when the threads cannot be pinned to those CPUs.
pub fn core_share(a: usize, b: usize, window: std::time::Duration) -> Option<CoreShare> {
    if a == b {
        return None;
    }
    const PAIRS: usize = 5;
    // What `b` does: 0 spin on `pause`, 1 multiply, 2 stop. It never
    // blocks: a vCPU that halts may come back on another core, and the
    // placement is what we measure.
    const PAUSE: u8 = 0;
    const MULTIPLY: u8 = 1;
    const STOP: u8 = 2;
    let mode = Arc::new(AtomicU8::new(PAUSE));
    let m2 = mode.clone();
    let helper = pinned_pair(a, b, move || {
        let mut x = CHAIN_SEED;
        loop {
            match m2.load(Ordering::Relaxed) {
                PAUSE => std::hint::spin_loop(),
                MULTIPLY => x = chain(x),
                _ => break,
            }
        }
        std::hint::black_box(x);
    })?;
    // Busy settling, not sleeping, for the same reason as above.
    let settle = std::time::Duration::from_micros(500);
    let mut counts = vec![];
    // Warm up: the first window after pinning runs slow on some machines.
    chains_in(window);
    for _ in 0..PAIRS {
        mode.store(PAUSE, Ordering::SeqCst);
        chains_in(settle);
        let alone = chains_in(window);
        mode.store(MULTIPLY, Ordering::SeqCst);
        chains_in(settle);
        let together = chains_in(window);
        counts.push((alone, together));
    }
    mode.store(STOP, Ordering::SeqCst);
    let _ = helper.join();
    // The placement can still change meanwhile: a quick core-to-core
    // probe right after tells.
    // (measure unpins this thread when it is done.)
    let after = measure(a, b, 2_000);
    let (share, solo_muls_per_ns) = share_of(&counts, window)?;
    Some(CoreShare { share, solo_muls_per_ns, core_to_core_after_ns: after })
}

/// From (chains alone, chains together) per pair of windows: the median
/// speed ratio (together over alone) and the median solo speed in
/// multiply-adds per ns. None without pairs.
fn share_of(counts: &[(u64, u64)], window: std::time::Duration) -> Option<(f64, f64)> {
    let ratios: Vec<f64> = counts.iter().map(|&(alone, together)| together as f64 / alone.max(1) as f64).collect();
    let solo: Vec<f64> = counts.iter().map(|&(alone, _)| alone as f64 * CHAIN_MULS as f64 / window.as_nanos() as f64).collect();
    Some((Spread::of(&ratios)?.median, Spread::of(&solo)?.median))
}

/// What `core_share` measured.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CoreShare {
    /// Speed on `a` with `b` multiplying over speed with `b` pausing (median).
    pub share: f64,
    /// Multiply-adds per ns on `a` with `b` pausing (median): the core's own
    /// speed. It drops, at the same share, when something outside this
    /// machine (another virtual machine on the core's other hardware
    /// thread) competes for the core; compare it between runs.
    pub solo_muls_per_ns: f64,
    /// Core-to-core latency probed right after this measurement: if it
    /// differs from the one before, the placement changed meanwhile.
    pub core_to_core_after_ns: Option<f64>,
}

const CHAIN_MULS: u64 = 256;
/// Any eight distinct starting values for `chain`'s streams.
const CHAIN_SEED: [u64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// One line for reports: the share, what it means, the solo speed.
pub fn describe_share(c: CoreShare) -> String {
    let what = if c.share < SHARED_CORE_BELOW {
        "the driver's and the simulator's CPUs share one physical core (hardware threads): per-core figures are for a shared core"
    } else {
        "separate cores"
    };
    let c2c = c.core_to_core_after_ns.map(|v| format!("{v:.0} ns")).unwrap_or("n/a".into());
    format!(
        "{:.2} (driver CPU's multiply speed with the simulator's CPU multiplying over only pausing, after the run): {what}; driver CPU alone {:.2} multiply-adds per ns; core-to-core {c2c} right after",
        c.share, c.solo_muls_per_ns
    )
}

/// Below this `core_share`, the two CPUs are taken to share a core.
pub const SHARED_CORE_BELOW: f64 = 0.85;

/// 256 multiply-adds in eight independent streams: enough to keep the
/// multiplier busy every cycle, so another hardware thread of the same core
/// doing the same gets about half of it (a single dependent stream would
/// leave room for both and hide the sharing).
fn chain(mut x: [u64; 8]) -> [u64; 8] {
    for _ in 0..32 {
        for v in x.iter_mut() {
            *v = v.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
        }
    }
    std::hint::black_box(x)
}

/// How many `chain`s this thread runs in `window`.
fn chains_in(window: std::time::Duration) -> u64 {
    let start = Instant::now();
    let (mut n, mut x) = (0u64, CHAIN_SEED);
    while start.elapsed() < window {
        x = chain(x);
        n += 1;
    }
    std::hint::black_box(x);
    n
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
        assert_eq!(core_share(0, 100_000, std::time::Duration::from_millis(1)), None);
        assert_eq!(core_share(100_000, 0, std::time::Duration::from_millis(1)), None);
    }

    /// The share is the median of the pairs' speed ratios, the solo speed
    /// the median of the windows alone; an empty window counts as one chain.
    #[test]
    fn core_share_is_the_median_speed_ratio() {
        let w = std::time::Duration::from_micros(256);
        // Ratios 0.5, 1.0, 0.25, 0.9, 0.5 -> median 0.5; solo 100, 80, 400,
        // 1000, 200 chains of 256 in 256 us -> median 200 per 1000 ns.
        let counts = [(100, 50), (80, 80), (400, 100), (1000, 900), (200, 100)];
        assert_eq!(share_of(&counts, w), Some((0.5, 0.2)));
        assert_eq!(share_of(&[(0, 3)], w), Some((3.0, 0.0)));
        assert_eq!(share_of(&[], w), None);
    }

    /// On two CPUs it measures (the value depends on the machine and on
    /// what else runs, so it is not bounded here: only that it is a figure
    /// and the report's verdict follows the threshold).
    #[test]
    fn core_share_measures_on_two_cpus() {
        if online_cpus() < 2 {
            eprintln!("skipped: core_share needs two CPUs");
            return;
        }
        let c = core_share(0, 1, std::time::Duration::from_millis(10)).expect("CPUs 0 and 1 can be pinned");
        assert!(c.share.is_finite() && c.solo_muls_per_ns.is_finite(), "{c:?}");
        assert_eq!(describe_share(c).contains("share one physical core"), c.share < SHARED_CORE_BELOW, "{c:?}");
    }
}
