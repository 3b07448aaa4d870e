//! `nvme-bypass driver-cost`: the driver's own work per I/O, made
//! repeatable. The simulated controller runs synchronously (no thread) and is
//! stepped explicitly between the host's submit and complete passes, so the
//! host side executes exactly the same instructions every run. Under
//! valgrind's callgrind, with collection toggled on the two host functions
//! below, that gives instructions per I/O for submit + complete including
//! the latency record: a figure that holds on any machine
//! (scripts/callgrind-driver.sh checks it against the recorded value).
//!
//! Without valgrind it also times the same loop, which on these machines
//! shows the cost without any cross-core traffic (the controller runs on
//! the same core, between the host's passes).

use crate::backend::userspace::sim::{SimOptions, SimTarget};
use crate::backend::{Io, IoDone, IoQueue, Op, QueueParams, Target};
use crate::error::{exit, Error};
use crate::measure::clock::Clock;
use crate::measure::stats::{new_histogram, LatencyGroups};
use hdrhistogram::Histogram;

/// Options of `driver-cost`.
#[derive(clap::Args, Debug, Clone)]
pub struct CostArgs {
    /// I/Os to run.
    #[arg(long, default_value_t = 200_000)]
    pub ios: u64,
    /// I/Os in flight (one submission batch and one completion pass each round).
    #[arg(long, default_value_t = 64)]
    pub iodepth: usize,
    /// Block size.
    #[arg(long, default_value = "4k", value_parser = crate::cli::parse::parse_size)]
    pub bs: u64,
}

/// Host side, part 1: post one batch of reads and ring the doorbell once;
/// one timestamp for the whole batch.
#[inline(never)]
pub fn host_submit_batch(q: &mut dyn IoQueue, ios: &mut [Io], lbas: &[u64], next: &mut usize, ts: &mut [u64], clock: &Clock) -> usize {
    let t = clock.now();
    for (io, ts) in ios.iter_mut().zip(ts) {
        io.lba = lbas[*next & (lbas.len() - 1)];
        *next += 1;
        *ts = t;
    }
    q.submit(ios).expect("submit")
}

/// Host side, part 2: reap the completions, one timestamp for the pass,
/// and record each I/O's latency in the histogram.
#[inline(never)]
pub fn host_complete_pass(q: &mut dyn IoQueue, done: &mut [IoDone], ts: &[u64], clock: &Clock, hist: &mut Histogram<u64>) -> usize {
    let n = q.poll(done).expect("poll");
    if n > 0 {
        let t = clock.now();
        // I/Os submitted in one batch carry one timestamp and complete in one
        // pass with another: record each batch's latency once.
        let mut run = LatencyGroups::default();
        for d in &done[..n] {
            run.add(hist, ts[d.tag as usize], |s| clock.to_ns(t.wrapping_sub(s)).max(1));
        }
        run.flush(hist, |s| clock.to_ns(t.wrapping_sub(s)).max(1));
    }
    n
}

/// Run the measurement.
pub fn driver_cost(a: &CostArgs, stop: &crate::engine::Stop) -> Result<i32, Error> {
    if a.bs == 0 || a.bs % 512 != 0 || a.bs > 1 << 20 {
        return Err(Error::usage(format!("--bs {} is not a multiple of the simulator's 512-byte block from 512 to 1M; use e.g. --bs 4k", a.bs)));
    }
    if a.ios == 0 || a.iodepth == 0 || a.iodepth > 1024 {
        return Err(Error::usage("--ios must be at least 1 and --iodepth 1 to 1024 (the I/Os run in whole rounds of --iodepth)"));
    }
    // Null data, the controller synchronous (stepped below) and so no shadow doorbells.
    let o = SimOptions { null: true, threaded: false, shadow_doorbells: false, ..SimOptions::default() };
    let target = SimTarget::open(&o)?;
    let lba = target.geometry().lba_size as u64;
    let blocks = (a.bs / lba) as u32;
    let mut q = target.open_queue(QueueParams { depth: a.iodepth, buf_size: a.bs as usize, batch: 0 })?;
    target.sim.set_auto_step(false);
    let clock = Clock::calibrate();
    let mut ios: Vec<Io> = (0..a.iodepth).map(|i| Io { op: Op::Read, lba: 0, blocks, buf: i as u32, tag: i as u64 }).collect();
    // Precomputed pseudo-random offsets (a power of two of them).
    let mut rng = crate::engine::workload::Rng::new(7);
    let units = (1u64 << 30) / a.bs;
    let lbas: Vec<u64> = (0..4096).map(|_| rng.below(units) * blocks as u64).collect();
    let mut done = vec![IoDone::default(); a.iodepth];
    let mut ts = vec![0u64; a.iodepth];
    let mut hist = new_histogram();
    let mut next = 0usize;
    let rounds = a.ios.div_ceil(a.iodepth as u64);
    let cpu0 = crate::measure::stats::CpuTime::thread_total_ns();
    let (mut host_ticks, mut total) = (0u64, 0u64);
    for _ in 0..rounds {
        // Ctrl-C ends the count (outside the functions callgrind counts).
        if stop.requested() {
            break;
        }
        let t0 = clock.now();
        let s = host_submit_batch(&mut *q, &mut ios, &lbas, &mut next, &mut ts, &clock);
        let t1 = clock.now();
        target.sim.step(); // the controller: fetch, execute, complete (not counted)
        let t2 = clock.now();
        let mut c = 0;
        while c < s {
            c += host_complete_pass(&mut *q, &mut done[c..], &ts, &clock, &mut hist);
        }
        let t3 = clock.now();
        host_ticks += (t1 - t0) + (t3 - t2);
        total += c as u64;
    }
    let cpu = crate::measure::stats::CpuTime::thread_total_ns() - cpu0;
    // Teardown's admin commands (Delete I/O SQ/CQ) need a stepping
    // controller: without this they waited out the admin timeout (~37 s).
    target.sim.set_auto_step(true);
    drop(q);
    let host_ns = clock.to_ns(host_ticks) as f64 / total as f64;
    let c = q_counters_note();
    let v = serde_json::json!({
        "ios": total,
        "iodepth": a.iodepth,
        "bs": a.bs,
        "host_ns_per_io": host_ns,
        "all_cpu_ns_per_io": cpu as f64 / total as f64,
        "clock": clock.source(),
        "note": c,
        "emulated": "synchronous simulated controller on the same core: the host's own cost, no cross-core traffic",
    });
    println!("{}", serde_json::to_string_pretty(&v).unwrap());
    Ok(exit::OK)
}

fn q_counters_note() -> &'static str {
    "host_ns_per_io: time in host_submit_batch + host_complete_pass per I/O (includes 2 clock reads per round and the histogram record); count instructions with scripts/callgrind-driver.sh"
}
