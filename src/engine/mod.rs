//! The benchmark engine: one thread per job, each with its own queue, that
//! keeps the queue full, timestamps every batch, records every I/O's
//! latency, verifies data when asked, and accounts for its CPU time,
//! separating the polls that found nothing from useful work.

pub mod progress;
pub mod verify;
pub mod workload;

use crate::backend::{BackendError, Geometry, Io, IoDone, IoQueue, IoStatus, Op, QueueCounters, QueueParams, Target};
use crate::measure::clock::Clock;
use crate::measure::stats::LatencyRun;
use crate::measure::stats::{new_histogram, CpuTime};
use crate::engine::verify::{check_block, stamp_block};
use crate::engine::workload::{Rw, Workload};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Set by Ctrl-C / SIGTERM (see `main`): every worker stops submitting,
/// drains what is in flight, and the device is handed back.
pub static STOP: std::sync::LazyLock<Arc<AtomicBool>> = std::sync::LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Data verification settings.
#[derive(Clone, Copy, Debug)]
pub struct VerifySpec {
    /// Seed stamped into every block.
    pub seed: u64,
    /// Only check what is there (written by an earlier run or another path
    /// with the same seed); no prefill, any generation accepted.
    pub only: bool,
}

/// One benchmark job, as fio's options describe it.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// Access pattern.
    pub rw: Rw,
    /// Bytes per I/O.
    pub bs: usize,
    /// I/Os in flight per thread.
    pub iodepth: usize,
    /// Percent reads for mixed patterns.
    pub rwmixread: u8,
    /// First byte of the region.
    pub offset: u64,
    /// Bytes in the region (all threads share it, unless verifying).
    pub size: u64,
    /// Measured time (time based), or None.
    pub runtime: Option<Duration>,
    /// I/Os per thread, or None.
    pub ios: Option<u64>,
    /// Warm-up before measuring.
    pub ramp: Duration,
    /// Verification.
    pub verify: Option<VerifySpec>,
    /// I/Os per submission (doorbell / system call); 0 = all that fit.
    pub batch: usize,
    /// Threads.
    pub numjobs: usize,
    /// CPUs to pin threads to, round robin (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Keep going after an I/O error.
    pub continue_on_error: bool,
    /// Random seed of the offset generator.
    pub seed: u64,
}

/// Per-direction results.
#[derive(Clone, Debug)]
pub struct DirResult {
    /// I/Os completed.
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Completion latency (submit to reap), ns.
    pub lat: Histogram<u64>,
}

impl Default for DirResult {
    fn default() -> Self {
        DirResult { ios: 0, bytes: 0, lat: new_histogram() }
    }
}

impl DirResult {
    /// Merge another thread's results.
    pub fn add(&mut self, o: &DirResult) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.lat.add(&o.lat).expect("same histogram bounds");
    }
}

/// What one thread measured.
#[derive(Clone, Debug, Default)]
pub struct ThreadResult {
    /// Thread index.
    pub thread: usize,
    /// CPU it was pinned to.
    pub cpu: Option<usize>,
    /// Reads.
    pub read: DirResult,
    /// Writes.
    pub write: DirResult,
    /// Flushes.
    pub flushes: u64,
    /// Measured wall time, ns.
    pub elapsed_ns: u64,
    /// Thread CPU time over the measured interval (getrusage user/sys).
    pub cpu_time: CpuTime,
    /// Thread CPU time over the measured interval (CLOCK_THREAD_CPUTIME_ID), ns.
    pub cpu_ns: u64,
    /// Loop iterations.
    pub polls: u64,
    /// Iterations that neither submitted nor completed anything.
    pub empty_polls: u64,
    /// Wall time spent in those iterations, ns.
    pub empty_poll_ns: u64,
    /// Times the thread blocked in the path's wait (interrupt-driven paths).
    pub waits: u64,
    /// The thread's own queue (IoQueue::describe).
    pub queue: String,
    /// Blocks verified.
    pub verified_blocks: u64,
    /// Blocks that failed verification.
    pub mismatches: u64,
    /// The first mismatch, described.
    pub first_mismatch: Option<String>,
    /// I/Os that failed.
    pub errors: u64,
    /// The first error, described.
    pub first_error: Option<String>,
    /// Queue counters over the measured interval.
    pub counters: QueueCounters,
    /// Verification prefill / read-back I/Os (not in the figures).
    pub verify_ios: u64,
    /// Stopped early by a signal.
    pub interrupted: bool,
    /// System-wide CPU over this thread's measured interval (thread 0 only).
    pub system_cpu: Option<crate::measure::stats::SystemCpu>,
    /// Timeouts, Aborts, resets and retries (all phases).
    pub recovery: RecoveryCounters,
}

impl ThreadResult {
    /// All I/Os of the measured interval.
    pub fn ios(&self) -> u64 {
        self.read.ios + self.write.ios + self.flushes
    }
}

/// Live counters a progress line reads once a second.
#[derive(Default)]
#[repr(align(128))]
pub struct Progress {
    /// I/Os completed so far (all phases).
    pub ios: AtomicU64,
    /// Bytes moved so far.
    pub bytes: AtomicU64,
}

/// Everything one worker needs.
struct Ctx<'a> {
    spec: &'a JobSpec,
    clock: Clock,
    geo: Geometry,
    progress: &'a Progress,
    /// The path finds completions by polling: spin. Otherwise (interrupts)
    /// block in the path's wait when there is nothing else to do, as fio does.
    polled: bool,
}

/// Per-slot bookkeeping: one slot per in-flight I/O and registered buffer.
struct Slots {
    /// Free slots, a stack.
    free: Vec<u32>,
    /// What each slot's I/O is (one bounds check and one cache line per I/O).
    io: Vec<SlotIo>,
    /// Verify: the generation a slot's write stamps.
    generation: Vec<u64>,
}

/// The I/O a slot holds.
#[derive(Clone, Copy)]
struct SlotIo {
    submit_ts: u64,
    unit: u64,
    op: Op,
}

impl SlotIo {
    /// The path's request for this I/O in `slot` (its buffer and tag).
    #[inline(always)]
    fn io(&self, slot: u32, wl: &Workload, blocks: u32) -> Io {
        Io { op: self.op, lba: wl.lba_of(self.unit), blocks, buf: slot, tag: slot as u64 }
    }
}

impl Slots {
    fn new(depth: usize) -> Self {
        Slots {
            free: (0..depth as u32).rev().collect(),
            io: vec![SlotIo { submit_ts: 0, unit: 0, op: Op::Read }; depth],
            generation: vec![0; depth],
        }
    }
}

/// Verification state of one thread.
struct Verifier {
    seed: u64,
    only: bool,
    /// Generation last written per unit (0 = never written by this run).
    gens: Vec<u64>,
    /// Units with an I/O in flight (no two I/Os on one unit at once).
    busy: Vec<bool>,
    scratch: Vec<u8>,
    lba_size: usize,
}

enum Phase {
    Prefill,
    Main,
    ReadBack,
}

/// Run `spec` on `target` with `numjobs` threads. Returns one result per thread.
pub fn run(target: &dyn Target, spec: &JobSpec, clock: Clock, status_line: bool) -> Result<Vec<ThreadResult>, BackendError> {
    let progress: Vec<Progress> = (0..spec.numjobs).map(|_| Progress::default()).collect();
    let progress = &progress[..];
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let geo = target.geometry();
    let polled = target.polled();
    validate(spec, &geo)?;
    let params = QueueParams { depth: spec.iodepth, buf_size: spec.bs, batch: spec.batch };
    // Each thread opens its own queue (a queue pair, or an io_uring ring:
    // rings set up with SINGLE_ISSUER or a registered fd belong to the
    // thread that made them), then all start together.
    let barrier = Barrier::new(spec.numjobs);
    let open_failed = AtomicBool::new(false);
    let results: Vec<Result<ThreadResult, BackendError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.numjobs)
            .map(|i| {
                let barrier = &barrier;
                let finished = &finished;
                let open_failed = &open_failed;
                let ctx = Ctx { spec, clock, geo, progress: &progress[i], polled };
                std::thread::Builder::new()
                    .name(format!("nvb-job{i}"))
                    .spawn_scoped(s, move || {
                        let cpu = (!spec.cpus.is_empty()).then(|| spec.cpus[i % spec.cpus.len()]);
                        let opened = match cpu.map(nvme_hal::pin_current_thread) {
                            Some(Err(e)) => Err(BackendError::os(
                                format!("pin thread {i} to CPU {}", cpu.unwrap_or(0)),
                                "check --cpus against the CPUs this machine has",
                                e,
                            )),
                            _ => target.open_queue(params),
                        };
                        if opened.is_err() {
                            open_failed.store(true, Ordering::Release);
                        }
                        barrier.wait();
                        let mut q = match opened {
                            Ok(q) => q,
                            Err(e) => {
                                finished.fetch_add(1, Ordering::Release);
                                return Err(e);
                            }
                        };
                        if open_failed.load(Ordering::Acquire) {
                            // Another thread could not open its queue: nobody runs.
                            finished.fetch_add(1, Ordering::Release);
                            return Err(BackendError::Invalid("another thread could not open its queue".into()));
                        }
                        let r = worker(&ctx, &mut *q, i);
                        finished.fetch_add(1, Ordering::Release);
                        // Delete the queue pair on this thread, before the target goes;
                        // a failure to is the run's error (the device misbehaved).
                        let closed = q.close();
                        let r = r.and_then(|r| closed.map(|()| r));
                        r.map(|mut r| {
                            r.cpu = cpu;
                            r
                        })
                    })
                    .expect("spawn worker")
            })
            .collect();
        if status_line {
            crate::engine::progress::status_loop(spec, progress, &finished);
        }
        handles.into_iter().map(|h| h.join().expect("worker panicked")).collect()
    });
    // Report the first real error, not the "another thread" ones it caused.
    if let Some(i) = results.iter().position(|r| matches!(r, Err(e) if !e.to_string().starts_with("another thread"))) {
        return Err(results.into_iter().nth(i).unwrap().unwrap_err());
    }
    results.into_iter().collect()
}

/// Check the job against the namespace before touching it.
pub fn validate(spec: &JobSpec, geo: &Geometry) -> Result<(), BackendError> {
    let lba = geo.lba_size as usize;
    if spec.bs == 0 || spec.bs % lba != 0 {
        return Err(BackendError::Invalid(format!(
            "--bs {} is not a multiple of the namespace's {lba}-byte logical block; use a multiple such as {}",
            spec.bs,
            lba.max(4096)
        )));
    }
    if spec.bs > geo.max_transfer {
        return Err(BackendError::Invalid(format!(
            "--bs {} exceeds the largest transfer this path allows ({} bytes, from the controller's MDTS); splitting would measure two I/Os as one, so use --bs {} or less",
            spec.bs, geo.max_transfer, geo.max_transfer
        )));
    }
    if spec.bs / lba > nvme_spec::cmd::MAX_BLOCKS_PER_COMMAND as usize {
        return Err(BackendError::Invalid(format!("--bs {} is more than 65536 blocks", spec.bs)));
    }
    if spec.iodepth == 0 {
        return Err(BackendError::Invalid("--iodepth must be at least 1".into()));
    }
    if spec.iodepth > 65535 {
        return Err(BackendError::Invalid(format!("--iodepth {} is above 65535, the most any NVMe queue holds", spec.iodepth)));
    }
    if spec.offset % lba as u64 != 0 {
        return Err(BackendError::Invalid(format!("--offset {} is not a multiple of the {lba}-byte block", spec.offset)));
    }
    let cap = geo.bytes();
    if spec.offset >= cap || spec.size == 0 || spec.offset + spec.size > cap {
        return Err(BackendError::Invalid(format!(
            "--offset {} + --size {} is beyond the namespace ({} bytes = {} blocks of {lba}); use a smaller --size or --offset",
            spec.offset, spec.size, cap, geo.blocks
        )));
    }
    let units = spec.size / spec.bs as u64;
    let per_thread = if spec.verify.is_some() { units / spec.numjobs as u64 } else { units };
    if per_thread == 0 {
        return Err(BackendError::Invalid(format!(
            "--size {} holds no whole --bs {} I/O per thread; use a larger --size",
            spec.size, spec.bs
        )));
    }
    if spec.verify.is_some() && per_thread < spec.iodepth as u64 && spec.rw.random() {
        return Err(BackendError::Invalid(format!(
            "--verify needs at least --iodepth ({}) distinct I/O units per thread, --size gives {per_thread}; use a larger --size",
            spec.iodepth
        )));
    }
    if spec.rwmixread > 100 {
        return Err(BackendError::Invalid("--rwmixread is a percentage, 0..=100".into()));
    }
    if spec.numjobs == 0 {
        return Err(BackendError::Invalid("--numjobs must be at least 1".into()));
    }
    Ok(())
}

fn worker(ctx: &Ctx, q: &mut dyn IoQueue, thread: usize) -> Result<ThreadResult, BackendError> {
    let spec = ctx.spec;
    let stop: &AtomicBool = &STOP;
    let lba_size = ctx.geo.lba_size as usize;
    let blocks = (spec.bs / lba_size) as u32;
    let first_lba = spec.offset / lba_size as u64;
    let units_total = spec.size / spec.bs as u64;
    // Verifying threads own disjoint slices so generations are exact.
    let (first_lba, units) = if spec.verify.is_some() {
        let per = units_total / spec.numjobs as u64;
        (first_lba + thread as u64 * per * blocks as u64, per)
    } else {
        (first_lba, units_total)
    };
    let start_unit = if spec.verify.is_some() { 0 } else { units / spec.numjobs as u64 * thread as u64 };
    let mut wl = Workload::new(spec.rw, first_lba, blocks, units, spec.rwmixread, spec.seed.wrapping_add(thread as u64), start_unit);
    let mut verifier = spec.verify.map(|v| Verifier {
        seed: v.seed,
        only: v.only,
        gens: vec![0; units as usize],
        busy: vec![false; units as usize],
        scratch: vec![0; spec.bs],
        lba_size,
    });
    // Without verification, write buffers hold a fixed non-zero pattern
    // (written once, as fio does), so compressing devices see real data.
    if verifier.is_none() && spec.rw.writes() {
        let mut pattern = vec![0u8; spec.bs];
        let mut rng = crate::engine::workload::Rng::new(0xF10 + thread as u64);
        for c in pattern.chunks_mut(8) {
            c.copy_from_slice(&rng.next_u64().to_le_bytes()[..c.len()]);
        }
        for b in 0..q.depth() as u32 {
            q.buf_write(b, 0, &pattern);
        }
    }
    let mut res = ThreadResult { thread, queue: q.describe(), ..Default::default() };

    if let Some(v) = verifier.as_mut() {
        if !v.only && spec.rw.reads() {
            // Prefill: write every unit once (generation 1) so every read can be checked.
            let mut next_unit = 0u64;
            let src = |_: &mut Workload| -> Option<(Op, u64)> {
                (next_unit < units).then(|| {
                    next_unit += 1;
                    (Op::Write, next_unit - 1)
                })
            };
            run_phase(ctx, q, &mut wl, Some(v), &mut res, Phase::Prefill, &mut Source::List(src))?;
        }
    }
    let left = spec.ios.or(if spec.runtime.is_none() { Some(units) } else { None }).unwrap_or(u64::MAX);
    run_phase(ctx, q, &mut wl, verifier.as_mut(), &mut res, Phase::Main, &mut Source::<NoList>::Workload { left })?;
    if let Some(v) = verifier.as_mut() {
        if spec.rw.writes() && !stop.load(Ordering::Relaxed) {
            // Read back everything this run wrote and check its last generation.
            let written: Vec<u64> = (0..units).filter(|&u| v.gens[u as usize] > 0).collect();
            let mut i = 0usize;
            let src = |_: &mut Workload| -> Option<(Op, u64)> {
                let u = *written.get(i)?;
                i += 1;
                Some((Op::Read, u))
            };
            run_phase(ctx, q, &mut wl, Some(v), &mut res, Phase::ReadBack, &mut Source::List(src))?;
        }
    }
    res.interrupted = stop.load(Ordering::Relaxed);
    Ok(res)
}

/// Where a phase's I/Os come from.
enum Source<F> {
    /// The job's workload, `left` more I/Os (u64::MAX: until the runtime ends).
    Workload { left: u64 },
    /// A list of the phase's own (prefill, read-back).
    List(F),
}

/// The type of a [`Source::Workload`]'s unused list.
type NoList = fn(&mut Workload) -> Option<(Op, u64)>;

impl<F: FnMut(&mut Workload) -> Option<(Op, u64)>> Source<F> {
    /// The next I/O, or None when the source has no more.
    #[inline]
    fn next(&mut self, wl: &mut Workload) -> Option<(Op, u64)> {
        match self {
            Source::Workload { left: 0 } => None,
            Source::Workload { left } => {
                *left -= 1;
                Some(wl.next())
            }
            Source::List(f) => f(wl),
        }
    }
}

/// Keep the queue full with I/Os from `next` until it has no more (or the
/// runtime ends, or a stop is requested), then drain.
fn run_phase<F: FnMut(&mut Workload) -> Option<(Op, u64)>>(
    ctx: &Ctx,
    q: &mut dyn IoQueue,
    wl: &mut Workload,
    mut verifier: Option<&mut Verifier>,
    res: &mut ThreadResult,
    phase: Phase,
    next: &mut Source<F>,
) -> Result<(), BackendError> {
    let spec = ctx.spec;
    let stop: &AtomicBool = &STOP;
    let clock = ctx.clock;
    // The queue's depth: --iodepth, or that times the devices when one
    // thread drives several (backend::multi).
    let depth = q.depth();
    let bs = spec.bs as u64;
    let blocks = wl.blocks;
    let main = matches!(phase, Phase::Main);
    let mut slots = Slots::new(depth);
    let mut ios: Vec<Io> = Vec::with_capacity(depth);
    let mut retry: Vec<(Op, u64)> = Vec::with_capacity(depth);
    let mut done = vec![IoDone::default(); depth];
    let mut in_flight = 0usize;
    // Stopping: take no more I/Os (runtime over, a stop requested, an
    // error). Ran out: the source has no more, but I/Os the path did not
    // accept, or a verify run could not place yet, are still to run.
    let mut stopping = false;
    let mut ran_out = false;
    let mut wd = Watchdog::new(depth, clock, clock.now());

    let start = clock.now();
    let ramp_end = start + if main { clock.ticks(spec.ramp) } else { 0 };
    let end = spec.runtime.filter(|_| main).map(|r| ramp_end + clock.ticks(r)).unwrap_or(u64::MAX);
    let mut measuring = main && spec.ramp.is_zero();
    let mut measure_start = start;
    let mut cpu0 = CpuTime::thread();
    let mut cpu_ns0 = CpuTime::thread_total_ns();
    let mut counters0 = q.counters();
    // Thread 0 samples system-wide CPU (/proc/stat) around the measured interval.
    let sample_system = main && res.thread == 0;
    let mut sys0 = if sample_system && measuring { crate::measure::stats::SystemCpu::now() } else { None };
    let (mut polls, mut empty, mut empty_ticks, mut waits) = (0u64, 0u64, 0u64, 0u64);
    let mut read = DirResult::default();
    let mut write = DirResult::default();
    let mut flushes = 0u64;
    let mut total_ios = 0u64;

    // Start of the previous loop pass if it found nothing to do: its time,
    // up to this pass's timestamp, is empty-poll time (one clock read per
    // pass; the clock costs 20-30 ns on some virtual machines).
    let mut empty_since: Option<u64> = None;
    loop {
        let t = clock.now();
        q.prefetch_completions();
        if let Some(e) = empty_since.take() {
            empty_ticks += t.wrapping_sub(e);
        }
        if main && !measuring && t >= ramp_end {
            // Ramp over: start counting from here.
            measuring = true;
            measure_start = t;
            cpu0 = CpuTime::thread();
            cpu_ns0 = CpuTime::thread_total_ns();
            counters0 = q.counters();
            if sample_system {
                sys0 = crate::measure::stats::SystemCpu::now();
            }
            read = DirResult::default();
            write = DirResult::default();
            flushes = 0;
            polls = 0;
            empty = 0;
            empty_ticks = 0;
            waits = 0;
        }
        if t >= end || stop.load(Ordering::Relaxed) {
            stopping = true;
        }

        // Submit: fill every free slot.
        ios.clear();
        let resubmitted = if wd.pending.is_empty() { 0 } else { wd.resubmit(&mut ios, &slots, wl, blocks, t) };
        if let (false, false, false, true, None, Source::Workload { left }) = (stopping, ran_out, slots.free.is_empty(), retry.is_empty(), &verifier, &mut *next) {
            // The common case: the workload's I/Os, nothing to retry, nothing
            // to verify. (Most passes of a polled run find no free slot.)
            ran_out = fill_plain(&mut slots, &mut ios, wl, left, t);
        }
        while !stopping {
            let Some(&slot) = slots.free.last() else { break };
            // I/Os the path did not accept last time go first, so no unit
            // the workload chose is skipped and --ios counts what ran.
            let Some((op, mut unit)) = retry.pop().or_else(|| if ran_out { None } else { next.next(wl) }) else {
                ran_out = true;
                break;
            };
            let drawn = unit;
            if let Some(v) = verifier.as_deref_mut() {
                // Never two I/Os on one unit at once: the expected content
                // of a read must not depend on completion order.
                let mut tries = 0;
                while v.busy[unit as usize] {
                    unit = wl.another_unit();
                    tries += 1;
                    if tries > 64 {
                        break;
                    }
                }
                if v.busy[unit as usize] {
                    // Try again after some completions (it counts as taken
                    // from the source already: --ios counts what ran).
                    retry.push((op, drawn));
                    break;
                }
                v.busy[unit as usize] = true;
                if op == Op::Write {
                    let g = v.gens[unit as usize] + 1;
                    slots.generation[slot as usize] = g;
                    let lba0 = wl.lba_of(unit);
                    for (i, blk) in v.scratch.chunks_mut(v.lba_size).enumerate() {
                        stamp_block(blk, lba0 + i as u64, v.seed, g);
                    }
                    q.buf_write(slot, 0, &v.scratch);
                }
            }
            slots.free.pop();
            ios.push(fill_one(&mut slots.io, slot, op, unit, t, wl, blocks));
        }
        let submitted = if ios.is_empty() { 0 } else { q.submit(&ios)? };
        wd.not_accepted(&ios[..resubmitted], submitted);
        // Whatever did not fit goes back (the queue was fuller than we knew)
        // and is submitted again first next time.
        for io in ios[submitted.max(resubmitted)..].iter().rev() {
            slots.free.push(io.buf);
            retry.push((io.op, slots.io[io.buf as usize].unit));
            if let Some(v) = verifier.as_deref_mut() {
                v.busy[slots.io[io.buf as usize].unit as usize] = false;
            }
        }
        in_flight += submitted;

        // Reap. An interrupt-driven path with nothing to submit waits in
        // the kernel for a completion instead of spinning.
        let mut n = q.poll(&mut done)?;
        if n == 0 && submitted == 0 && in_flight > 0 && !ctx.polled && !stopping_now(stop) {
            n = q.wait(&mut done, 1)?;
            waits += 1;
        }
        polls += 1;
        if n > 0 {
            let tc = clock.now();
            // I/Os submitted in one batch share a submit timestamp and, reaped
            // in one pass, a latency: record each run of them once.
            let mut tally = PassTally::default();
            let lat = |s: u64| clock.to_ns(tc.wrapping_sub(s)).max(1);
            let first = if measuring && verifier.is_none() { reap_plain(&mut slots, &done[..n], &mut tally, [&mut read, &mut write], &lat) } else { 0 };
            for d in &done[first..n] {
                let slot = d.tag as usize;
                let SlotIo { submit_ts, unit, op } = slots.io[slot];
                let ok = d.status.is_ok();
                if !ok {
                    match failed_io(&mut wd, res, &slots, wl, slot, &d.status, blocks) {
                        Failed::Retried => continue,
                        Failed::Counted => stopping |= !spec.continue_on_error,
                    }
                }
                if let Some(v) = verifier.as_deref_mut() {
                    v.busy[unit as usize] = false;
                    if ok {
                        match op {
                            Op::Write => v.gens[unit as usize] = slots.generation[slot],
                            Op::Read => verify_read(q, v, slot as u32, wl.lba_of(unit), unit, res),
                            Op::Flush => {}
                        }
                    }
                }
                slots.free.push(slot as u32);
                if measuring {
                    tally.add(op, submit_ts, [&mut read, &mut write], &lat);
                }
            }
            tally.finish([&mut read, &mut write], &mut flushes, &lat);
            in_flight -= n;
            total_ios += n as u64;
            ctx.progress.ios.store(ctx.progress.ios.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
            ctx.progress.bytes.store(ctx.progress.bytes.load(Ordering::Relaxed) + n as u64 * bs, Ordering::Relaxed);
        } else if submitted == 0 {
            // Nothing submitted, nothing completed: an empty poll. Its time
            // is the spinning a faster device would not need.
            empty += 1;
            empty_since = Some(t);
        }
        if t >= wd.next_check {
            for (slot, why) in wd.check(t, q, &slots, wl, &mut res.recovery)? {
                in_flight -= 1;
                let s = slot as usize;
                if wd.take_retry(s, &slots) {
                    res.recovery.retries += 1;
                    wd.pending.push(slot);
                    continue;
                }
                // Out of retries (or stopping): a failed I/O.
                res.errors += 1;
                if res.first_error.is_none() {
                    res.first_error = Some(format!(
                        "{} of {blocks} blocks at LBA {} never completed ({why}), after {} retries",
                        op_name(slots.io[s].op),
                        wl.lba_of(slots.io[s].unit),
                        wd.retries_used(s, &slots)
                    ));
                }
                if !spec.continue_on_error {
                    stopping = true;
                }
                if let Some(v) = verifier.as_deref_mut() {
                    v.busy[slots.io[s].unit as usize] = false;
                }
                slots.free.push(slot);
            }
        }
        if (stopping || ran_out && retry.is_empty()) && in_flight == 0 && wd.pending.is_empty() {
            debug_assert_eq!(q.in_flight(), 0, "the path still holds I/Os the loop thinks are done");
            break;
        }
    }

    if main {
        let t_end = clock.now();
        if let (Some(a), Some(b)) = (sys0, crate::measure::stats::SystemCpu::now()) {
            res.system_cpu = Some(b.since(&a));
        }
        res.elapsed_ns = clock.to_ns(t_end - measure_start);
        res.cpu_time = CpuTime::thread().since(&cpu0);
        res.cpu_ns = CpuTime::thread_total_ns() - cpu_ns0;
        res.polls = polls;
        res.empty_polls = empty;
        res.empty_poll_ns = clock.to_ns(empty_ticks);
        res.waits = waits;
        let c = q.counters();
        res.counters = QueueCounters {
            sq_doorbells: c.sq_doorbells - counters0.sq_doorbells,
            cq_doorbells: c.cq_doorbells - counters0.cq_doorbells,
            mmio_writes: c.mmio_writes - counters0.mmio_writes,
            syscalls: c.syscalls - counters0.syscalls,
            rejected_completions: c.rejected_completions - counters0.rejected_completions,
        };
        read.bytes = read.ios * bs;
        write.bytes = write.ios * bs;
        res.read = read;
        res.write = write;
        res.flushes = flushes;
    } else {
        res.verify_ios += total_ios;
    }
    Ok(())
}

/// Fill every free slot with the workload's next I/Os (`left` more at
/// most), in one pass down the free-slot stack (the order of the general
/// loop in `run_phase`), for the common case: nothing to retry, nothing to
/// verify. Returns true when the workload ran out. A function of its own so
/// its few values stay in registers.
#[inline(never)]
fn fill_plain(slots: &mut Slots, ios: &mut Vec<Io>, wl: &mut Workload, left: &mut u64, t: u64) -> bool {
    let Slots { free, io, .. } = slots;
    let n = free.len();
    let k = (n as u64).min(*left) as usize;
    *left -= k as u64;
    let blocks = wl.blocks;
    // The generator as a local (kept in registers), and an exact-size
    // iterator: `extend` reserves once, no check per I/O.
    let mut w = wl.clone();
    let io = io.as_mut_slice();
    let slots = free.drain(n - k..).rev();
    // randread and randwrite (the benchmarks' patterns): the pattern is
    // decided here once, not per I/O.
    match w.single_random_op() {
        Some(op) => ios.extend(slots.map(|slot| fill_one(io, slot, op, w.random_unit(), t, &w, blocks))),
        None => ios.extend(slots.map(|slot| {
            let (op, unit) = w.next();
            fill_one(io, slot, op, unit, t, &w, blocks)
        })),
    }
    *wl = w;
    k < n
}

/// Record I/O `op` on `unit` in `slot` and return its command.
#[inline(always)]
fn fill_one(io: &mut [SlotIo], slot: u32, op: Op, unit: u64, t: u64, wl: &Workload, blocks: u32) -> Io {
    let s = SlotIo { submit_ts: t, unit, op };
    io[slot as usize] = s;
    s.io(slot, wl, blocks)
}

/// One completion pass's measured I/Os, counted in locals and added to the
/// results once: I/Os per direction, flushes, and each direction's run of
/// equal latencies. (Bytes are I/Os x bs, filled in at the end of the phase.)
#[derive(Default, Clone, Copy)]
struct PassTally {
    reads: u64,
    writes: u64,
    flushes: u64,
    run_r: LatencyRun,
    run_w: LatencyRun,
}

impl PassTally {
    /// Count a completed `op` submitted at `submit_ts` (`dirs`: read, write).
    #[inline(always)]
    fn add(&mut self, op: Op, submit_ts: u64, dirs: [&mut DirResult; 2], lat: &impl Fn(u64) -> u64) {
        let [read, write] = dirs;
        match op {
            Op::Read => {
                self.reads += 1;
                self.run_r.add(&mut read.lat, submit_ts, lat);
            }
            Op::Write => {
                self.writes += 1;
                self.run_w.add(&mut write.lat, submit_ts, lat);
            }
            Op::Flush => self.flushes += 1,
        }
    }

    /// Record the pending runs and add the counts to the results.
    fn finish(mut self, dirs: [&mut DirResult; 2], flushes: &mut u64, lat: &impl Fn(u64) -> u64) {
        let [read, write] = dirs;
        self.run_r.flush(&mut read.lat, lat);
        self.run_w.flush(&mut write.lat, lat);
        read.ios += self.reads;
        write.ios += self.writes;
        *flushes += self.flushes;
    }
}

/// The completions of the common case (measuring, nothing to verify): free
/// each slot and count it in `tally`, up to the first failed I/O. Returns
/// how many it took.
#[inline(never)]
fn reap_plain(slots: &mut Slots, done: &[IoDone], tally: &mut PassTally, dirs: [&mut DirResult; 2], lat: &impl Fn(u64) -> u64) -> usize {
    let [read, write] = dirs;
    // The tally as a local, kept in registers.
    let mut t = *tally;
    let mut n = done.len();
    for (i, d) in done.iter().enumerate() {
        if !d.status.is_ok() {
            n = i; // the general loop takes it from here
            break;
        }
        let SlotIo { submit_ts, op, .. } = slots.io[d.tag as usize];
        t.add(op, submit_ts, [&mut *read, &mut *write], lat);
    }
    // The free-slot stack gets them at once.
    slots.free.extend(done[..n].iter().map(|d| d.tag as u32));
    *tally = t;
    n
}

/// What became of a failed I/O.
enum Failed {
    /// Resubmitted (the watchdog holds it); nothing else to do.
    Retried,
    /// Counted as an error (the first one's message kept).
    Counted,
}

/// A completion with an error status: retry it if its status allows and it
/// has retries left, else count it. Out of the completion loop's way.
#[cold]
#[inline(never)]
fn failed_io(wd: &mut Watchdog, res: &mut ThreadResult, slots: &Slots, wl: &Workload, slot: usize, status: &IoStatus, blocks: u32) -> Failed {
    if wd.retry_failed(slot, status, slots) {
        res.recovery.retries += 1;
        return Failed::Retried;
    }
    res.errors += 1;
    if res.first_error.is_none() {
        res.first_error = Some(format!(
            "{} of {} blocks at LBA {} failed: {}{}",
            op_name(slots.io[slot].op),
            blocks,
            wl.lba_of(slots.io[slot].unit),
            status,
            match wd.retries_used(slot, slots) {
                0 => String::new(),
                n => format!(" (after {n} retries)"),
            }
        ));
    }
    Failed::Counted
}

/// True once a stop was requested (no more blocking waits then).
#[inline]
fn stopping_now(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed)
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Read => "read",
        Op::Write => "write",
        Op::Flush => "flush",
    }
}

fn verify_read(q: &mut dyn IoQueue, v: &mut Verifier, slot: u32, lba0: u64, unit: u64, res: &mut ThreadResult) {
    q.buf_read(slot, 0, &mut v.scratch);
    let expected = if v.only { None } else { Some(v.gens[unit as usize]) };
    for (i, blk) in v.scratch.chunks(v.lba_size).enumerate() {
        let lba = lba0 + i as u64;
        // A unit never written by this run (and no prefill): nothing to expect.
        if expected == Some(0) {
            continue;
        }
        res.verified_blocks += 1;
        if let Err(m) = check_block(blk, lba, v.seed, expected) {
            res.mismatches += 1;
            if res.first_mismatch.is_none() {
                res.first_mismatch = Some(format!("LBA {lba}: {m}"));
            }
        }
    }
}

// ------------------------------------------------------------ reliability
//
// The watchdog: I/O timeouts and bounded retries, the slow path of
// `run_phase`. It costs the hot loop one comparison per pass (`t >=
// next_check`) and nothing per I/O: which I/Os are in flight, since when,
// and whether they were aborted or retried is worked out from per-slot
// timestamps only when a check is due (every `check_every`, at most 100 ms).
//
// A check asks the path about the controller (fatal status, a reset by
// another thread), then looks for I/Os outstanding longer than
// `--io-timeout`: those are aborted (NVMe Abort); if an aborted I/O is still
// outstanding a timeout later, or the Abort itself goes unanswered, the
// controller is reset and the queue re-created (the Linux driver's order,
// `nvme_timeout`). I/Os lost in a reset, and I/Os that failed with DNR clear
// (or were aborted by us), are resubmitted up to `--retries` times; then
// they count as failed. If the reset fails the run fails, and dropping the
// target hands the controller back disabled. After Ctrl-C / SIGTERM the
// timeout is at most `STOP_TIMEOUT`, and nothing is retried.

/// I/O timeout and retry settings (`--io-timeout`, `--retries`), for every
/// run of the process.
#[derive(Clone, Copy, Debug)]
pub struct Reliability {
    /// An I/O outstanding this long is overdue: Abort, then, as long again
    /// later, a controller reset.
    pub io_timeout: Duration,
    /// Resubmissions of one I/O that failed with DNR clear, was aborted, or
    /// was lost in a controller reset.
    pub retries: u32,
}

impl Default for Reliability {
    fn default() -> Self {
        // The Linux nvme driver's defaults are 30 s (nvme_core.io_timeout)
        // and 5 retries (nvme_core.max_retries).
        Reliability { io_timeout: Duration::from_secs(30), retries: 3 }
    }
}

static RELIABILITY: std::sync::OnceLock<Reliability> = std::sync::OnceLock::new();

/// Set the timeout and retry settings (once, before the first run).
pub fn set_reliability(r: Reliability) {
    let _ = RELIABILITY.set(r);
}

/// The timeout and retry settings in force.
pub fn reliability() -> Reliability {
    RELIABILITY.get().copied().unwrap_or_default()
}

/// After Ctrl-C / SIGTERM, outstanding I/Os get at most this long before
/// the watchdog aborts them and resets: an interrupted run ends promptly
/// even on a hung device.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

/// Recovery counters of one thread (summed for the report by [`recovery_summary`]).
#[derive(Clone, Debug, Default)]
pub struct RecoveryCounters {
    /// I/Os found outstanding past the I/O timeout.
    pub timeouts: u64,
    /// Abort commands sent.
    pub aborts: u64,
    /// Of those, commands the controller aborted.
    pub aborted: u64,
    /// Controller resets this thread did.
    pub resets: u64,
    /// Queue pairs re-created (after any thread's reset, or when stuck).
    pub requeues: u64,
    /// I/Os resubmitted (DNR clear, aborted, lost in a reset).
    pub retries: u64,
    /// What happened, in order (the first few).
    pub log: Vec<String>,
}

impl RecoveryCounters {
    fn note(&mut self, s: String) {
        if self.log.len() < 8 {
            self.log.push(s);
        }
    }
    fn add(&mut self, r: &crate::backend::Recovery) {
        self.aborts += r.aborts_sent;
        self.aborted += r.aborted;
        self.resets += r.reset as u64;
        self.requeues += r.recreated as u64;
    }
    /// True when nothing happened.
    pub fn is_empty(&self) -> bool {
        self.timeouts + self.aborts + self.resets + self.requeues + self.retries == 0
    }
}

/// One line for stderr when any thread had to recover; None otherwise.
pub fn recovery_summary(threads: &[ThreadResult]) -> Option<String> {
    let mut t = RecoveryCounters::default();
    for r in threads {
        let c = &r.recovery;
        t.timeouts += c.timeouts;
        t.aborts += c.aborts;
        t.aborted += c.aborted;
        t.resets += c.resets;
        t.requeues += c.requeues;
        t.retries += c.retries;
        for l in &c.log {
            t.note(format!("thread {}: {l}", r.thread));
        }
    }
    if t.is_empty() {
        return None;
    }
    let mut s = format!(
        "recovery: {} I/O timeouts, {} Aborts sent ({} aborted), {} controller resets, {} queues re-created, {} retries",
        t.timeouts, t.aborts, t.aborted, t.resets, t.requeues, t.retries
    );
    for l in &t.log {
        s.push_str("\n  ");
        s.push_str(l);
    }
    Some(s)
}

/// Per-thread watchdog state; see the section comment.
struct Watchdog {
    timeout: u64,
    timeout_dur: Duration,
    check_every: u64,
    /// Clock value of the next check.
    next_check: u64,
    max_retries: u32,
    /// Per slot: clock value of the latest resubmission (a slot's I/O was
    /// issued at max(submit_ts, reissued)).
    reissued: Vec<u64>,
    /// Per slot: when we sent an Abort for its current I/O (counts only if
    /// after its issue).
    aborted_at: Vec<u64>,
    /// Per slot: retries used, and the submit_ts of the I/O they belong to.
    tries: Vec<(u64, u32)>,
    /// Slots whose I/O waits to be resubmitted.
    pending: Vec<u32>,
    /// Said once that the path's own driver handles timeouts.
    warned: bool,
    clock: Clock,
}

impl Watchdog {
    fn new(depth: usize, clock: Clock, now: u64) -> Self {
        let r = reliability();
        let timeout = clock.ticks(r.io_timeout).max(1);
        let check_every = clock.ticks((r.io_timeout / 4).clamp(Duration::from_millis(1), Duration::from_millis(100))).max(1);
        Watchdog {
            timeout,
            timeout_dur: r.io_timeout,
            check_every,
            next_check: now + check_every,
            max_retries: r.retries,
            reissued: vec![0; depth],
            aborted_at: vec![0; depth],
            tries: vec![(0, 0); depth],
            pending: Vec::with_capacity(depth),
            warned: false,
            clock,
        }
    }

    fn issued(&self, slot: usize, slots: &Slots) -> u64 {
        slots.io[slot].submit_ts.max(self.reissued[slot])
    }

    fn aborted(&self, slot: usize, slots: &Slots) -> bool {
        self.aborted_at[slot] != 0 && self.aborted_at[slot] >= self.issued(slot, slots)
    }

    /// May the I/O of `slot` be resubmitted? Counts the try if so.
    fn take_retry(&mut self, slot: usize, slots: &Slots) -> bool {
        if STOP.load(Ordering::Relaxed) {
            return false;
        }
        let ts = slots.io[slot].submit_ts;
        let (of, used) = self.tries[slot];
        let used = if of == ts { used } else { 0 };
        if used >= self.max_retries {
            return false;
        }
        self.tries[slot] = (ts, used + 1);
        true
    }

    fn retries_used(&self, slot: usize, slots: &Slots) -> u32 {
        let (of, used) = self.tries[slot];
        if of == slots.io[slot].submit_ts {
            used
        } else {
            0
        }
    }

    /// A completion with an error: resubmit it (true) when its status says
    /// a retry may succeed (DNR clear, or aborted by us after a timeout)
    /// and it has retries left.
    fn retry_failed(&mut self, slot: usize, status: &IoStatus, slots: &Slots) -> bool {
        let retryable = match status {
            IoStatus::Nvme(s) => !s.dnr || self.aborted(slot, slots),
            // The kernel already retried what it could (nvme_core.max_retries).
            IoStatus::Errno(_) | IoStatus::Short { .. } | IoStatus::Ok => false,
        };
        if retryable && self.take_retry(slot, slots) {
            self.pending.push(slot as u32);
            true
        } else {
            false
        }
    }

    /// Put the I/Os waiting for a retry at the front of `ios` (issued now).
    fn resubmit(&mut self, ios: &mut Vec<Io>, slots: &Slots, wl: &Workload, blocks: u32, t: u64) -> usize {
        let n = self.pending.len();
        for slot in self.pending.drain(..) {
            let s = slot as usize;
            self.reissued[s] = t;
            ios.push(slots.io[s].io(slot, wl, blocks));
        }
        n
    }

    /// Resubmitted I/Os the path did not accept wait for the next pass.
    fn not_accepted(&mut self, resubmitted: &[Io], accepted: usize) {
        for io in resubmitted.iter().skip(accepted) {
            self.pending.push(io.buf);
        }
    }

    /// The periodic check. Returns the slots whose I/Os will never complete
    /// (lost in a reset), each with the reason, for the caller to resubmit
    /// or fail; errors end the run.
    fn check(
        &mut self,
        t: u64,
        q: &mut dyn IoQueue,
        slots: &Slots,
        wl: &Workload,
        rc: &mut RecoveryCounters,
    ) -> Result<Vec<(u32, String)>, BackendError> {
        self.next_check = t + self.check_every;
        let stopped = STOP.load(Ordering::Relaxed);
        let (timeout, timeout_dur) = if stopped {
            (self.timeout.min(self.clock.ticks(STOP_TIMEOUT)), self.timeout_dur.min(STOP_TIMEOUT))
        } else {
            (self.timeout, self.timeout_dur)
        };
        let mut lost = vec![];
        let fail = |what: &str, e: BackendError| BackendError::unrecovered(what, e);

        // 1. The controller itself: fatal status, or a reset by another thread.
        match q.check_health(timeout_dur) {
            Ok(Some(r)) => {
                rc.add(&r);
                rc.note(r.note.clone());
                lost.extend(r.abandoned.iter().map(|&tag| (tag as u32, r.note.clone())));
            }
            Ok(None) => {}
            Err(e) => return Err(fail("the controller failed", e)),
        }

        // 2. Overdue I/Os: in flight (not free, not waiting for a retry, not
        //    just lost) and issued more than a timeout ago.
        let mut idle = vec![false; slots.io.len()];
        for &s in slots.free.iter().chain(self.pending.iter()) {
            idle[s as usize] = true;
        }
        for (s, _) in &lost {
            idle[*s as usize] = true;
        }
        let overdue: Vec<usize> =
            (0..idle.len()).filter(|&s| !idle[s] && t.saturating_sub(self.issued(s, slots)) > timeout).collect();
        if overdue.is_empty() {
            return Ok(lost);
        }
        let (aborted, fresh): (Vec<usize>, Vec<usize>) = overdue.iter().partition(|&&s| self.aborted(s, slots));
        let what = |s: usize| {
            format!(
                "{} at LBA {} outstanding for more than {} ms ({})",
                op_name(slots.io[s].op),
                wl.lba_of(slots.io[s].unit),
                timeout_dur.as_millis(),
                if stopped { "the I/O timeout after an interrupt" } else { "--io-timeout" }
            )
        };
        let mut reset_now = aborted.iter().any(|&s| t.saturating_sub(self.aborted_at[s]) > timeout);
        if !fresh.is_empty() {
            rc.timeouts += fresh.len() as u64;
            let tags: Vec<u64> = fresh.iter().map(|&s| s as u64).collect();
            match q.abort(&tags, timeout_dur) {
                Ok(Some(r)) => {
                    rc.add(&r);
                    rc.note(format!("{}: {}", what(fresh[0]), r.note));
                    let now = self.clock.now().max(1);
                    for &s in &fresh {
                        self.aborted_at[s] = now;
                    }
                    reset_now |= r.escalate;
                }
                Ok(None) => {
                    if !self.warned {
                        self.warned = true;
                        eprintln!(
                            "nvme-bypass: warning: {}; this path's kernel driver times out, aborts and retries its own commands (nvme_core.io_timeout): waiting for it",
                            what(fresh[0])
                        );
                    }
                    return Ok(lost);
                }
                Err(e) => return Err(fail(&format!("Abort of an overdue I/O ({}) failed", what(fresh[0])), e)),
            }
        }
        if reset_now {
            let first = aborted.first().or(fresh.first()).copied().unwrap_or(0);
            match q.reset(timeout_dur) {
                Ok(Some(r)) => {
                    rc.add(&r);
                    rc.note(format!("{}: Abort did not bring it back: {}", what(first), r.note));
                    lost.extend(r.abandoned.iter().map(|&tag| (tag as u32, r.note.clone())));
                }
                Ok(None) => {}
                Err(e) => return Err(fail(&format!("{}, and Abort did not bring it back", what(first)), e)),
            }
        }
        Ok(lost)
    }
}
