//! One thread's work: `worker` runs the job's phases (prefill, the measured
//! main phase, read-back) on the thread's own queue, each with the one
//! loop of this file: keep the queue full, reap, check on the watchdog,
//! until the phase's source runs out (or the runtime ends, or a stop is
//! requested), then drain.
//!
//! The loop is generic over whether it verifies (`const VERIFY`; a job
//! that flushes, fio's fsync, runs that general loop too); the
//! common case, the workload's I/Os with nothing to verify and nothing to
//! retry, is the same loop with the verifier's hooks compiled out and the
//! free slots taken from the workload in one run per pass.

use crate::backend::{BackendError, Geometry, Io, IoDone, IoQueue, Op, QueueCounters, Scramble};
use crate::engine::job::{DirResult, IoDepths, JobSpec, LatEntry, Progress, ThinkSpec, ThreadResult};
use crate::engine::slots::{fill_one, op_name, SlotIo, Slots};
use crate::engine::verify::Verifier;
use crate::engine::watchdog::{failed_io, Failed, Watchdog};
use crate::engine::workload::{Rng, Workload};
use crate::measure::clock::{mono_ns, Clock};
use crate::measure::marker;
use crate::measure::stats::{CpuTime, LatencyGroups, Rusage, SystemCpu};
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;

/// Everything one worker needs.
pub(crate) struct Ctx<'a> {
    pub spec: &'a JobSpec,
    pub clock: Clock,
    pub geo: Geometry,
    pub progress: &'a Progress,
    /// The path finds completions by polling: spin. Otherwise (interrupts)
    /// block in the path's wait when there is nothing else to do, as fio does.
    pub polled: bool,
    /// Called when the main phase starts another pass over the region
    /// (`Target::new_pass`); `None` when the path does nothing then
    /// (`Target::wants_passes`), so the hot loop does not count passes.
    pub new_pass: Option<&'a (dyn Fn() + Sync)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PhaseKind {
    Prefill,
    Main,
    ReadBack,
}

/// Run the job's phases on `q` as thread `thread`.
pub(crate) fn worker(ctx: &Ctx, q: &mut dyn IoQueue, thread: usize) -> Result<ThreadResult, BackendError> {
    let spec = ctx.spec;
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
    let start_unit = if spec.verify.is_some() || !spec.spread_threads { 0 } else { units / spec.numjobs as u64 * thread as u64 };
    let mut wl = Workload::new(spec.rw, first_lba, blocks, units, spec.rwmixread, spec.seed.wrapping_add(thread as u64), start_unit);
    if spec.random_map && spec.rw.random() {
        wl = wl.with_random_map(spec.seed.wrapping_add(thread as u64));
    }
    if spec.rw.random() {
        wl = wl.with_distribution(&spec.distribution, spec.bs as u64, spec.seed.wrapping_add(thread as u64), spec.files).map_err(BackendError::Invalid)?;
    }
    let mut verifier = spec.verify.map(|v| Verifier::new(v, units, spec.bs, lba_size, q.depth()));
    // Without verification, write buffers hold a fixed non-zero pattern
    // (written once, as fio fills its buffers once), so compressing
    // devices see real data; unless scrambling is off, each write then
    // scrambles its own buffer (`Phase::scramble`), as fio's
    // scramble_buffers does, so no two written blocks are alike. A
    // verifying job writes its stamps, unique already, and is never
    // scrambled (fio does not scramble under verify either).
    let scramble = spec.scramble && verifier.is_none() && spec.rw.writes();
    if verifier.is_none() && spec.rw.writes() {
        let mut pattern = vec![0u8; spec.bs];
        let mut rng = Rng::new(0xF10 + thread as u64);
        for c in pattern.chunks_mut(8) {
            c.copy_from_slice(&rng.next_u64().to_le_bytes()[..c.len()]);
        }
        for b in 0..q.depth() as u32 {
            q.buf_write(b, 0, &pattern);
        }
    }
    let mut res = ThreadResult { thread, tid: crate::sys::gettid(), queue: q.describe(), ..Default::default() };

    if let Some(v) = verifier.as_mut() {
        if !v.only() && spec.rw.reads() {
            // Prefill: write every unit once (generation 1) so every read can be checked.
            let mut next_unit = 0u64;
            let src = |_: &mut Workload| -> Option<(Op, u64)> {
                (next_unit < units).then(|| {
                    next_unit += 1;
                    (Op::Write, next_unit - 1)
                })
            };
            run_phase::<true, false, _>(ctx, q, &mut wl, Some(v), &mut res, PhaseKind::Prefill, &mut Source::List(src))?;
        }
    }
    let left = spec.ios.or(if spec.runtime.is_none() { Some(units) } else { None }).unwrap_or(u64::MAX);
    // A job of a size (or of --ios) with a ramp runs through the ramp over
    // its region, then does all of its I/Os counted, as fio's keep_running
    // does: the count starts when the ramp ends (Phase::submit).
    let ramping = !spec.ramp.is_zero() && left != u64::MAX;
    let mut main = if ramping { Source::<NoList>::Workload { left: u64::MAX, after_ramp: Some(left) } } else { Source::Workload { left, after_ramp: None } };
    // The general loop (VERIFY) also for a job that flushes (fsync,
    // end_fsync): its completions are not all of the pattern's one
    // operation, which the other loop takes them to be. Scrambling is a
    // copy of the loop of its own (SCRAMBLE), out of line, so a job that
    // does not scramble (every read-only one) runs the loop it ran before,
    // with no work added (`scripts/callgrind-driver.sh`'s 4 KiB reads:
    // 144.8 instructions per I/O before and after).
    match verifier.as_mut() {
        Some(v) => run_phase::<true, false, _>(ctx, q, &mut wl, Some(v), &mut res, PhaseKind::Main, &mut main)?,
        None if scramble => run_scrambled(ctx, q, &mut wl, &mut res, &mut main)?,
        None if spec.flushes() => run_phase::<true, false, _>(ctx, q, &mut wl, None, &mut res, PhaseKind::Main, &mut main)?,
        None => run_phase::<false, false, _>(ctx, q, &mut wl, None, &mut res, PhaseKind::Main, &mut main)?,
    }
    if let Some(v) = verifier.as_mut() {
        if spec.rw.writes() && !spec.stop.requested() {
            // Read back everything this run wrote and check its last generation.
            let written = v.written();
            let mut i = 0usize;
            let src = |_: &mut Workload| -> Option<(Op, u64)> {
                let u = *written.get(i)?;
                i += 1;
                Some((Op::Read, u))
            };
            let (ios0, t0) = (res.verify_ios, mono_ns());
            run_phase::<true, false, _>(ctx, q, &mut wl, Some(v), &mut res, PhaseKind::ReadBack, &mut Source::List(src))?;
            res.readback_ios = res.verify_ios - ios0;
            res.readback_ns = mono_ns() - t0;
        }
    }
    // Under the test bed's instruction counter (markers on), thread 0 polls
    // its drained queue a fixed number of times in a window of its own: the
    // instructions of a poll that finds nothing, which the report multiplies
    // by the measured window's empty polls (docs/methodology.md,
    // "Instructions per I/O on the emulated test bed").
    if thread == 0 && !spec.stop.requested() {
        if let Some(id) = marker::window() {
            calibrate_empty_polls(ctx, q, &mut wl, &mut res, marker::CALIBRATION_BASE + id)?;
        }
    }
    res.interrupted = spec.stop.requested();
    Ok(res)
}

/// The main phase of a job whose writes are scrambled (and that does not
/// verify): the general loop if it flushes, else the common one. Out of
/// line, so that `worker`, into which the other loops are inlined, is the
/// same function as without it.
#[inline(never)]
fn run_scrambled(ctx: &Ctx, q: &mut dyn IoQueue, wl: &mut Workload, res: &mut ThreadResult, main: &mut Source<NoList>) -> Result<(), BackendError> {
    if ctx.spec.flushes() {
        run_phase::<true, true, _>(ctx, q, wl, None, res, PhaseKind::Main, main)
    } else {
        run_phase::<false, true, _>(ctx, q, wl, None, res, PhaseKind::Main, main)
    }
}

/// [`marker::CALIBRATION_POLLS`] passes of the loop that find nothing,
/// marked as counting window `window`: the same pass as the measured
/// phase's empty ones (clock read, nothing to submit, a poll or a look at
/// the completion queue), on a drained queue.
fn calibrate_empty_polls(ctx: &Ctx, q: &mut dyn IoQueue, wl: &mut Workload, res: &mut ThreadResult, window: u64) -> Result<(), BackendError> {
    let mut p = Phase::new(ctx, q, PhaseKind::ReadBack, 1);
    // As in a full queue's empty pass: no slot to fill; and a polled path
    // believes I/Os are in flight (so a fixed-batch pass looks for a
    // batch), which an interrupt-driven one must not (it would wait).
    p.stopping = true;
    if ctx.polled {
        p.in_flight = ctx.spec.batch_complete.max(1);
    }
    if ctx.polled && ctx.spec.batch_complete > 1 && p.can_look {
        // A fixed-batch polled run's empty polls are the spin's looks.
        let want = ctx.spec.batch_complete;
        marker::start(window);
        p.spin(q, want, marker::CALIBRATION_POLLS);
        marker::stop(window);
        return Ok(());
    }
    let mut none = Source::<NoList>::Workload { left: 0, after_ramp: None };
    marker::start(window);
    for _ in 0..marker::CALIBRATION_POLLS {
        marker::pass();
        let t = ctx.clock.now();
        q.prefetch_completions();
        p.begin_pass(q, t);
        let submitted = p.submit::<false, false, NoList>(q, wl, &mut none, None, t)?;
        p.reap::<false>(q, wl, None, res, submitted, t)?;
        std::hint::black_box(p.finished());
    }
    marker::stop(window);
    Ok(())
}

/// The index of `d`, an element of `run`, from their addresses.
#[inline(always)]
fn index_in<T>(run: &[T], d: &T) -> usize {
    (d as *const T as usize - run.as_ptr() as usize) / std::mem::size_of::<T>().max(1)
}

/// `Phase::complete`'s `OP` when the phase's I/Os are of more than one
/// operation (otherwise it is that operation, as `Op as u8`).
const MIXED: u8 = u8::MAX;

/// A spinning fixed-batch reap looks at the clock once every this many
/// looks at the completion queue.
const SPIN_CLOCK: u64 = 256;

/// Where a phase's I/Os come from.
enum Source<F> {
    /// The job's workload, `left` more I/Os (u64::MAX: until the runtime
    /// ends), or during a ramp, `after_ramp` more once it is over.
    Workload { left: u64, after_ramp: Option<u64> },
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
            Source::Workload { left: 0, .. } => None,
            Source::Workload { left, .. } => {
                *left -= 1;
                Some(wl.next())
            }
            Source::List(f) => f(wl),
        }
    }

    /// The workload has given its last I/O (a list cannot tell).
    fn exhausted(&self) -> bool {
        matches!(self, Source::Workload { left: 0, after_ramp: None })
    }
}

/// The workload's next I/Os for every free slot at once (`left` more at
/// most), in the order the loop would take them one by one (down the
/// free-slot stack). Returns true when the workload ran out. A function of
/// its own so its few values stay in registers.
#[inline(never)]
fn take_run(slots: &mut Slots, ios: &mut Vec<Io>, wl: &mut Workload, left: &mut u64, t: u64) -> bool {
    let Slots { free, io } = slots;
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
    // The operation a constant of each copy of the loop (no register for it).
    match w.single_random_op() {
        Some(Op::Read) => ios.extend(slots.map(|slot| fill_one(io, slot, Op::Read, w.random_unit(), t, &w, blocks))),
        Some(Op::Write) => ios.extend(slots.map(|slot| fill_one(io, slot, Op::Write, w.random_unit(), t, &w, blocks))),
        Some(op) => ios.extend(slots.map(|slot| fill_one(io, slot, op, w.random_unit(), t, &w, blocks))),
        None => ios.extend(slots.map(|slot| {
            let (op, unit) = w.next();
            fill_one(io, slot, op, unit, t, &w, blocks)
        })),
    }
    *wl = w;
    k < n
}

/// One completion pass's measured I/Os, counted in locals and added to the
/// results once: I/Os per direction (each the count its runs recorded),
/// flushes, and each direction's latencies grouped by submit timestamp. (Bytes are I/Os x
/// bs, filled in at the end of the phase.) Failed I/Os are counted apart,
/// as fio does: not in the I/Os, the bytes or the latencies.
#[derive(Default, Clone, Copy)]
struct PassTally {
    flushes: u64,
    read_errors: u64,
    write_errors: u64,
    lat_r: LatencyGroups,
    lat_w: LatencyGroups,
}

impl PassTally {
    /// Count a completed `op` submitted at `submit_ts`.
    #[inline(always)]
    fn add(&mut self, op: Op, submit_ts: u64, m: &mut Measured, lat: &impl Fn(u64) -> u64) {
        // Reads first: one compare for the most common operation.
        if op == Op::Read {
            self.lat_r.add(&mut m.read.lat, submit_ts, lat);
        } else if op == Op::Write {
            self.lat_w.add(&mut m.write.lat, submit_ts, lat);
        } else {
            self.flushes += 1;
            m.flushed(lat(submit_ts));
        }
    }

    /// Count a failed `op` (one that will not be retried).
    #[cold]
    fn fail(&mut self, op: Op) {
        match op {
            Op::Read => self.read_errors += 1,
            Op::Write => self.write_errors += 1,
            // A failed flush is in the thread's errors; flushes have no
            // direction of their own.
            Op::Flush => {}
        }
    }

    /// Record the pending groups and add the counts to the results;
    /// returns the pass's writes and flushes (for the progress counters).
    fn finish(mut self, m: &mut Measured, lat: &impl Fn(u64) -> u64) -> (u64, u64) {
        self.lat_r.flush(&mut m.read.lat, lat);
        self.lat_w.flush(&mut m.write.lat, lat);
        m.read.ios += self.lat_r.recorded();
        m.write.ios += self.lat_w.recorded();
        m.flushes += self.flushes;
        m.read.errors += self.read_errors;
        m.write.errors += self.write_errors;
        (self.lat_w.recorded(), self.flushes)
    }
}

/// What the main phase measures, from the end of the ramp.
struct Measured {
    /// Counting (the main phase, ramp over).
    on: bool,
    cpu0: CpuTime,
    cpu_ns0: u64,
    ru0: Rusage,
    counters0: QueueCounters,
    /// CLOCK_MONOTONIC at the start, ns.
    mono0: u64,
    /// The sampler's counters at the start (a log's first interval).
    progress0: crate::engine::progress::Reading,
    /// fio's latency log (`write_lat_log`): each direction's latencies so
    /// far, taken every `log_ns` by the periodic check; the next is due
    /// at `next_log` (CLOCK_MONOTONIC ns; u64::MAX: no log).
    lat_log: Vec<LatEntry>,
    next_log: u64,
    log_ns: u64,
    /// System-wide CPU at the start (the main phase, counting).
    sys0: Option<SystemCpu>,
    /// The counting window marked open (thread 0, `NVB_MARKERS` set).
    window: Option<u64>,
    polls: u64,
    empty: u64,
    empty_ticks: u64,
    waits: u64,
    read: DirResult,
    write: DirResult,
    flushes: u64,
    /// fio's sync statistics: the flushes' latencies, and whether the one
    /// in flight counts (end_fsync's does not).
    sync_lat: Histogram<u64>,
    sync_counts: bool,
    /// Reads and writes in flight when the ramp ended.
    ramp_in_flight: [u64; 2],
    depths: IoDepths,
}

impl Measured {
    /// A latency log entry when one is due (see `lat_log`): each
    /// direction's (count, sum in ns) of lat, clat and slat so far, read
    /// from the histograms (their mean times their count), so the I/O
    /// path itself does nothing for the log.
    /// Taken by this thread, the logs' intervals stay aligned to its start
    /// however late another thread would wake (a loaded machine).
    #[cold]
    fn log_latencies(&mut self, progress: &Progress) {
        let now = mono_ns();
        if now < self.next_log {
            return;
        }
        self.push_latencies(now, progress, false);
        self.next_log += self.log_ns * ((now - self.next_log) / self.log_ns + 1);
    }

    /// A log entry at `now` (also the last, partial interval's at the end,
    /// as fio's finalize_logs writes it for the latency logs).
    fn push_latencies(&mut self, now: u64, progress: &Progress, partial: bool) {
        let of = |h: Option<&hdrhistogram::Histogram<u64>>| h.map_or((0, 0.0), |h| (h.len(), h.mean() * h.len() as f64));
        let dir = |d: &DirResult| [of(Some(&d.lat)), of(d.clat.as_ref()), of(d.slat.as_ref())];
        self.lat_log.push(LatEntry { end: now, dirs: [dir(&self.read), dir(&self.write)], progress: progress.read(now), partial });
    }

    fn new(q: &dyn IoQueue, on: bool, main: bool, thread: usize, spec: &JobSpec, progress: &Progress) -> Self {
        let split = spec.split_lat;
        // The latency histograms' pages are faulted in first (each is a
        // few hundred KiB of zeroed memory the kernel maps on first touch),
        // as fio sets its buffers up before its I/O starts: the interval's
        // page faults (fio's `minf`) and counted instructions are the I/O
        // loop's.
        let (mut read, mut write) = (DirResult::default(), DirResult::default());
        for d in [&mut read, &mut write] {
            d.lat.reset();
            if split {
                for h in [&mut d.slat, &mut d.clat] {
                    let mut x = crate::measure::stats::new_histogram();
                    x.reset();
                    *h = Some(x);
                }
            }
        }
        // Thread 0's measured interval is the plugin's counting window.
        let window = if main && on && thread == 0 { marker::window() } else { None };
        if let Some(id) = window {
            marker::start(id);
        }
        Measured {
            on,
            cpu0: CpuTime::thread(),
            cpu_ns0: CpuTime::thread_total_ns(),
            ru0: Rusage::thread(),
            counters0: q.counters(),
            sys0: if main && on { SystemCpu::now() } else { None },
            mono0: mono_ns(),
            progress0: progress.read(mono_ns()),
            lat_log: vec![],
            next_log: match spec.log_ns {
                Some(l) if l > 0 && main && on => mono_ns() + l,
                _ => u64::MAX,
            },
            log_ns: spec.log_ns.unwrap_or(0),
            window,
            polls: 0,
            empty: 0,
            empty_ticks: 0,
            waits: 0,
            read,
            write,
            flushes: 0,
            sync_lat: crate::measure::stats::new_histogram(),
            sync_counts: true,
            ramp_in_flight: [0; 2],
            depths: IoDepths::default(),
        }
    }

    /// A flush completed, `ns` after its submission.
    #[cold]
    #[inline(never)]
    fn flushed(&mut self, ns: u64) {
        if self.sync_counts {
            self.sync_lat.saturating_record(ns);
        }
    }

    /// Into the thread's results, at the end of the main phase.
    fn finish(mut self, q: &dyn IoQueue, clock: Clock, bs: u64, syncs: bool, res: &mut ThreadResult, progress: &Progress) {
        let mono1 = mono_ns();
        if self.next_log != u64::MAX {
            self.push_latencies(mono1, progress, true);
        }
        if let Some(id) = self.window {
            marker::stop(id);
        }
        if self.sys0.is_some() {
            res.system_start = self.sys0;
            res.system_end = SystemCpu::now();
        }
        // The interval from CLOCK_MONOTONIC, not the calibrated TSC: IOPS
        // and bandwidth carry no calibration error.
        res.start_mono_ns = self.mono0;
        res.progress0 = self.progress0;
        res.lat_log = self.lat_log;
        res.end_mono_ns = mono1;
        res.elapsed_ns = mono1 - self.mono0;
        res.cpu_time = CpuTime::thread().since(&self.cpu0);
        res.cpu_ns = CpuTime::thread_total_ns() - self.cpu_ns0;
        res.rusage = Rusage::thread().since(&self.ru0);
        res.polls = self.polls;
        res.empty_polls = self.empty;
        res.empty_poll_ns = clock.to_ns(self.empty_ticks);
        res.waits = self.waits;
        let (c, c0) = (q.counters(), self.counters0);
        res.counters = QueueCounters {
            sq_doorbells: c.sq_doorbells - c0.sq_doorbells,
            cq_doorbells: c.cq_doorbells - c0.cq_doorbells,
            mmio_writes: c.mmio_writes - c0.mmio_writes,
            syscalls: c.syscalls - c0.syscalls,
            rejected_completions: c.rejected_completions - c0.rejected_completions,
        };
        let (mut read, mut write) = (self.read, self.write);
        read.bytes = read.ios * bs;
        write.bytes = write.ios * bs;
        res.read = read;
        res.write = write;
        res.flushes = self.flushes;
        res.sync_lat = syncs.then_some(self.sync_lat);
        res.ramp_in_flight = self.ramp_in_flight;
        res.depths = self.depths;
    }
}

/// The state of one phase's loop.
struct Phase<'c> {
    ctx: &'c Ctx<'c>,
    kind: PhaseKind,
    slots: Slots,
    /// The pass's commands.
    ios: Vec<Io>,
    /// I/Os taken from the source that did not run yet (the path did not
    /// accept them, or a verify run could not place them): they go first.
    retry: Vec<(Op, u64)>,
    /// The pass's completions.
    done: Vec<IoDone>,
    in_flight: usize,
    /// Take no more I/Os (runtime over, a stop requested, an error).
    stopping: bool,
    /// I/Os issued in the main phase since its last pass over the region
    /// began (`Ctx::new_pass`).
    pass_issued: u64,
    /// The source has no more (what is in `retry` is still to run).
    ran_out: bool,
    wd: Watchdog,
    /// End of the ramp, and of the runtime (clock values).
    ramp_end: u64,
    end: u64,
    m: Measured,
    /// All I/Os the phase completed.
    total_ios: u64,
    /// Start of the previous pass if it found nothing to do: its time, up
    /// to this pass's timestamp, is empty-poll time (one clock read per
    /// pass; the clock costs 20-30 ns on some virtual machines).
    empty_since: Option<u64>,
    /// The path answers `ready` from a completion queue in our memory.
    can_look: bool,
    /// This thread's index.
    thread: usize,
    /// fio's issue time of each slot's I/O ([`JobSpec::split_lat`]).
    issue_ts: Vec<u64>,
    /// The path does its I/O inside `submit` (no submission latency).
    sync: bool,
    /// fio's `rate_iops` (the main phase only).
    rate: Option<Rate>,
    /// fio's `thinktime` (the main phase only).
    think: Option<Think>,
    /// fio's `fsync`/`fdatasync` and `end_fsync` (the main phase only).
    fsync: Option<Fsync>,
    end_sync: bool,
    /// `rate`, `think`, `sync` or `end_sync` is set: one test per pass
    /// for all.
    paced: bool,
    /// For `think`: the pass's I/Os issued (retries left out), and before
    /// its reap the phase's completions and whether the queue was full.
    think_issued: u64,
    think_before: (u64, bool),
}

/// fio's `rate_iops` with its default `rate_process=linear`: I/O k (from
/// 0) is due k / `iops` s after `start`; one not yet due is not issued,
/// and a thread with nothing in flight sleeps until the next is due.
/// (fio first waits for every I/O in flight to complete, then sleeps: an
/// I/O due while others are in flight goes late there, on time here.)
struct Rate {
    start: u64,
    ticks_per_s: f64,
    iops: f64,
    /// I/Os issued since `start`.
    issued: u64,
}

impl Rate {
    /// How many more I/Os are due at `t`.
    fn due(&self, t: u64) -> u64 {
        let due = (t.saturating_sub(self.start) as f64 * self.iops / self.ticks_per_s) as u64 + 1;
        due.saturating_sub(self.issued)
    }

    /// Ticks from `t` until the next I/O is due.
    fn until_next(&self, t: u64) -> u64 {
        let at = self.start + (self.issued as f64 * self.ticks_per_s / self.iops) as u64;
        at.saturating_sub(t)
    }
}

/// fio's `thinktime` in a phase. fio checks after each I/O it queues
/// (and the completions it reaped with it) whether `blocks` more were
/// issued, or completed, since the count it noted at the last stall; the
/// count goes on during the stall's wait for the I/Os in flight, so with
/// `thinktime_blocks_type=complete` those completions count towards the
/// next stall, as in fio.
struct Think {
    spec: ThinkSpec,
    /// I/Os issued (or completed) since the last stall's note.
    count: u64,
    /// A stall is due, `count` noted when it fell due: no I/O is issued
    /// until it is done.
    due: Option<u64>,
}

impl Think {
    /// How many more I/Os may be issued before the next stall.
    fn allowance(&self) -> u64 {
        match (self.due, self.spec.on_complete) {
            (Some(_), _) => 0,
            // fio checks after queueing: one more I/O goes out first.
            (None, true) if self.count >= self.spec.blocks => 1,
            (None, true) => u64::MAX,
            (None, false) => self.spec.blocks - self.count,
        }
    }

    /// A pass issued `issued` I/Os and reaped `completed`. fio checks
    /// after queueing an I/O, having reaped only if the queue was full or
    /// the I/O was synchronous (`reaped_first`); completions reaped
    /// besides count from the next check. A pass that issued none into a
    /// queue with room (the end's drain) brings no stall.
    fn counted(&mut self, issued: u64, completed: u64, reaped_first: bool) {
        let check = issued > 0 || reaped_first;
        let (issued, completed) = if self.spec.on_complete { (0, completed) } else { (issued, 0) };
        self.count += issued;
        if reaped_first {
            self.count += completed;
        }
        if self.due.is_none() && check && self.count >= self.spec.blocks {
            self.due = Some(self.count);
        }
        if !reaped_first {
            self.count += completed;
        }
    }

    /// The stall is done: count from the note taken when it fell due.
    fn stalled(&mut self) {
        self.count -= self.due.take().unwrap_or(0);
    }
}

/// fio's `fsync=N` in a phase: writes issued since the last flush, and
/// where the next flush stands.
struct Fsync {
    every: u64,
    writes: u64,
    state: SyncState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SyncState {
    /// Counting writes.
    Counting,
    /// `every` writes issued: a flush before the next I/O, once nothing
    /// is in flight.
    Due,
    /// The flush is in flight.
    Flushing,
    /// The flush is done: one I/O goes out, and unless it is a write,
    /// another flush follows it, as fio's `get_rw_ddir` syncs before each
    /// I/O while its count of writes is a multiple of N.
    Flushed,
}

/// Keep the queue full with I/Os from `next` until it has no more (or the
/// runtime ends, or a stop is requested), then drain. `VERIFY`: the
/// general loop, whose completions may be of any operation; `verifier`
/// (Some only with it) has its hooks run. `SCRAMBLE`: each write's buffer
/// is scrambled before it goes out ([`Phase::scramble`]).
fn run_phase<const VERIFY: bool, const SCRAMBLE: bool, F: FnMut(&mut Workload) -> Option<(Op, u64)>>(
    ctx: &Ctx,
    q: &mut dyn IoQueue,
    wl: &mut Workload,
    mut verifier: Option<&mut Verifier>,
    res: &mut ThreadResult,
    kind: PhaseKind,
    next: &mut Source<F>,
) -> Result<(), BackendError> {
    debug_assert!(VERIFY || verifier.is_none());
    let mut p = Phase::new(ctx, q, kind, res.thread);
    loop {
        marker::pass();
        let t = ctx.clock.now();
        q.prefetch_completions();
        p.begin_pass(q, t);
        let submitted = p.submit::<VERIFY, SCRAMBLE, F>(q, wl, next, verifier.as_deref_mut(), t)?;
        if let (PhaseKind::Main, Some(new_pass)) = (kind, ctx.new_pass) {
            // A pass over the region is as many I/Os as it has units.
            p.pass_issued += submitted as u64;
            if p.pass_issued >= wl.units {
                p.pass_issued %= wl.units.max(1);
                new_pass();
            }
        }
        if p.paced {
            p.before_reap();
        }
        p.reap::<VERIFY>(q, wl, verifier.as_deref_mut(), res, submitted, t)?;
        if p.paced {
            p.pace(t);
        }
        if t >= p.wd.next_check {
            p.check(q, wl, verifier.as_deref_mut(), res, t)?;
        }
        if p.finished() {
            debug_assert_eq!(q.in_flight(), 0, "the path still holds I/Os the loop thinks are done");
            break;
        }
    }
    p.finish(q, res);
    Ok(())
}

impl<'c> Phase<'c> {
    fn new(ctx: &'c Ctx<'c>, q: &dyn IoQueue, kind: PhaseKind, thread: usize) -> Self {
        let spec = ctx.spec;
        let clock = ctx.clock;
        // The queue's depth: --iodepth, or that times the devices when one
        // thread drives several (backend::multi).
        let depth = q.depth();
        let main = kind == PhaseKind::Main;
        let mut wd = Watchdog::new(depth, clock, clock.now(), spec.reliability, spec.stop.clone()).with_retry_delays(q.retry_delays());
        // The logs' entries are taken by the periodic check: often enough
        // that each lands within a fiftieth of its interval (5 ms of fio's
        // 250), as near its time as fio's helper thread takes them, but
        // not more often than every millisecond or a tenth of the interval
        // (a check every few microseconds would cost the loop I/Os).
        if let Some(l) = spec.log_ns.filter(|&l| l > 0 && main) {
            let every = (l / 50).max((l / 10).min(1_000_000));
            wd.check_at_least_every(clock.ticks(std::time::Duration::from_nanos(every)).max(1));
        }
        // Every thread samples system-wide CPU (/proc/stat) around its
        // measured interval; the report joins the intervals. The runtime
        // counts from after that reading (and the ramp's end from after
        // the ramp's: end_ramp), so the measured interval is never shorter
        // than the runtime asked for, as fio's is not.
        let m = Measured::new(q, main && spec.ramp.is_zero(), main, thread, spec, ctx.progress);
        let start = clock.now();
        let ramp_end = start + if main { clock.ticks(spec.ramp) } else { 0 };
        let end = spec.runtime.filter(|_| main).map(|r| ramp_end + clock.ticks(r)).unwrap_or(u64::MAX);
        Phase {
            ctx,
            kind,
            slots: Slots::new(depth),
            ios: Vec::with_capacity(depth),
            retry: Vec::with_capacity(depth),
            done: vec![IoDone::default(); depth],
            in_flight: 0,
            stopping: false,
            pass_issued: 0,
            ran_out: false,
            wd,
            ramp_end,
            end,
            m,
            total_ios: 0,
            empty_since: None,
            can_look: q.ready(1).is_some(),
            thread,
            issue_ts: if spec.split_lat { vec![0; depth] } else { vec![] },
            sync: q.synchronous(),
            // From now, after the measurement's start (Measured::new reads
            // /proc/stat and the CPU times): no I/O falls due before it.
            rate: spec.rate_iops.filter(|&r| r > 0.0 && main).map(|iops| Rate { start: clock.now(), ticks_per_s: clock.ticks(std::time::Duration::from_secs(1)).max(1) as f64, iops, issued: 0 }),
            think: spec.think.filter(|_| main).map(|spec| Think { spec, count: 0, due: None }),
            fsync: (main && spec.sync_every > 0 && spec.rw.writes()).then_some(Fsync { every: spec.sync_every, writes: 0, state: SyncState::Counting }),
            end_sync: main && spec.end_sync && spec.rw.writes(),
            paced: main && (spec.think.is_some() || spec.rate_iops.is_some_and(|r| r > 0.0) || spec.flushes()),
            think_issued: 0,
            think_before: (0, false),
        }
    }

    /// Ramp over: start counting from here, noting the reads and writes
    /// still in flight (the slots not on the free stack).
    #[cold]
    fn end_ramp(&mut self, q: &dyn IoQueue) {
        self.m = Measured::new(q, true, true, self.thread, self.ctx.spec, self.ctx.progress);
        if let Some(r) = self.ctx.spec.runtime {
            self.end = self.ctx.clock.now() + self.ctx.clock.ticks(r);
        }
        let mut free = vec![false; self.slots.io.len()];
        for &s in &self.slots.free {
            free[s as usize] = true;
        }
        for (io, _) in self.slots.io.iter().zip(&free).filter(|(_, f)| !**f) {
            match io.op {
                Op::Read => self.m.ramp_in_flight[0] += 1,
                Op::Write => self.m.ramp_in_flight[1] += 1,
                Op::Flush => {}
            }
        }
        debug_assert_eq!(self.slots.io.len() - self.slots.free.len(), self.in_flight, "slots off the free stack are the I/Os in flight");
    }

    /// Start of a pass at `t`: account the previous empty pass, end the
    /// ramp, notice the end of the runtime or a stop.
    #[inline(always)]
    fn begin_pass(&mut self, q: &dyn IoQueue, t: u64) {
        if let Some(e) = self.empty_since.take() {
            self.m.empty_ticks += t.wrapping_sub(e);
        }
        if self.kind == PhaseKind::Main && !self.m.on && t >= self.ramp_end {
            self.end_ramp(q);
            // fio's reset_all_stats: the rate counts from the ramp's end
            // (after the measurement's start, as above).
            if let Some(r) = &mut self.rate {
                (r.start, r.issued) = (self.ctx.clock.now(), 0);
            }
            // The thinktime count too (fio's reset_all_stats zeroes the I/O
            // counts but not the count of the last stall: see docs/fio.md).
            if let Some(th) = &mut self.think {
                (th.count, th.due) = (0, None);
            }
        }
        if t >= self.end || self.ctx.spec.stop.requested() {
            self.stopping = true;
        }
    }

    /// Submit side of a pass: fill every free slot, I/Os waiting for a
    /// retry first, then those the path did not accept last time, then the
    /// source's; scramble the new writes' buffers (`SCRAMBLE`); submit
    /// them. Returns how many the path accepted.
    #[inline(always)]
    fn submit<const VERIFY: bool, const SCRAMBLE: bool, F: FnMut(&mut Workload) -> Option<(Op, u64)>>(
        &mut self,
        q: &mut dyn IoQueue,
        wl: &mut Workload,
        next: &mut Source<F>,
        mut verifier: Option<&mut Verifier>,
        t: u64,
    ) -> Result<usize, BackendError> {
        self.ios.clear();
        if let Source::Workload { left, after_ramp: after @ Some(_) } = &mut *next {
            if self.m.on {
                *left = after.take().unwrap_or(0);
            }
        }
        let blocks = wl.blocks;
        let resubmitted = if self.wd.pending.is_empty() { 0 } else { self.wd.resubmit(&mut self.ios, &self.slots, wl, blocks, t) };
        // New I/Os due now (rate_iops, thinktime), or no limit.
        let mut due = if self.paced { self.paced_submit(t, wl, next.exhausted()) } else { u64::MAX };
        // Paced, every I/O takes a turn, one put back before (refused by
        // the path or by the verifier: it was not issued) as a new one, else
        // thinktime's stall would come one I/O late.
        while !self.stopping && due > 0 {
            let Some(&slot) = self.slots.free.last() else { break };
            let (op, drawn) = match self.retry.pop() {
                Some(x) => x,
                None if self.ran_out => break,
                None => {
                    if let (false, Source::Workload { left, .. }) = (VERIFY, &mut *next) {
                        // Nothing to retry, nothing to verify: the workload
                        // fills every free slot in one run. (Most passes of
                        // a polled run find no free slot.)
                        if due == u64::MAX {
                            self.ran_out = take_run(&mut self.slots, &mut self.ios, wl, left, t);
                        } else {
                            let (mut cap, was) = ((*left).min(due), *left);
                            let asked = cap;
                            take_run(&mut self.slots, &mut self.ios, wl, &mut cap, t);
                            *left = was - (asked - cap);
                            self.ran_out = *left == 0;
                        }
                        break;
                    }
                    match next.next(wl) {
                        Some(x) => x,
                        None => {
                            self.ran_out = true;
                            break;
                        }
                    }
                }
            };
            due -= (due != u64::MAX) as u64;
            if let (true, Some(v)) = (VERIFY, verifier.as_deref_mut()) {
                if !v.on_submit(q, wl, slot, op, drawn) {
                    // Try again after some completions (it counts as taken
                    // from the source already: --ios counts what ran).
                    self.retry.push((op, drawn));
                    break;
                }
            }
            self.slots.free.pop();
            self.ios.push(fill_one(&mut self.slots.io, slot, op, drawn, t, wl, blocks));
        }
        if SCRAMBLE && self.ios.len() > resubmitted {
            self.scramble(q, resubmitted, t);
        }
        let submitted = if self.ios.is_empty() { 0 } else { q.submit(&self.ios)? };
        if self.ctx.spec.split_lat && submitted > 0 {
            self.issued(q, submitted, t)?;
        }
        self.wd.not_accepted(&self.ios[..resubmitted], submitted);
        // Whatever did not fit goes back (the queue was fuller than we knew)
        // and is submitted again first next time.
        for io in self.ios[submitted.max(resubmitted)..].iter().rev() {
            let unit = self.slots.io[io.buf as usize].unit;
            self.slots.free.push(io.buf);
            self.retry.push((io.op, unit));
            if let Some(v) = verifier.as_deref_mut() {
                v.release(unit);
            }
        }
        self.in_flight += submitted;
        if self.paced {
            let new = &self.ios[resubmitted.min(submitted)..submitted];
            let writes = new.iter().filter(|io| io.op == Op::Write).count() as u64;
            self.issued_paced(submitted.saturating_sub(resubmitted) as u64, writes);
        }
        if self.m.on && submitted > 0 {
            self.m.depths.submitted(submitted, self.in_flight, self.ctx.spec.batch);
        }
        Ok(submitted)
    }

    /// fio's scramble of the pass's new writes (those from `from` on; a
    /// write the watchdog sends again keeps its content), issued at `t`:
    /// each one's buffer gets its byte offset and the time in every
    /// 512-byte sector ([`Scramble`]), a few stores a sector, as fio's
    /// `small_content_scramble` does to each write it issues. A write not
    /// accepted by the path is scrambled again when it goes out later.
    #[inline(never)]
    fn scramble(&self, q: &mut dyn IoQueue, from: usize, t: u64) {
        let (lba_size, len) = (self.ctx.geo.lba_size as u64, self.ctx.spec.bs);
        // The pass's time, once (a division).
        let at = Scramble::new(0, self.ctx.clock.to_ns(t));
        for io in &self.ios[from..] {
            if io.op == Op::Write {
                q.buf_scramble(io.buf, len, Scramble { offset: io.lba * lba_size, ..at });
            }
        }
    }

    /// fio's issue time of the pass's `n` submitted I/Os: after the
    /// system call or doorbell that handed them over (the pass's start on
    /// a synchronous path, which has no submission latency); the time
    /// from the pass's start to it is their `slat`.
    #[inline(never)]
    fn issued(&mut self, q: &mut dyn IoQueue, n: usize, t: u64) -> Result<(), BackendError> {
        let ti = if self.sync {
            t
        } else {
            q.submit_now()?;
            self.ctx.clock.now()
        };
        let (mut reads, mut writes) = (0, 0);
        for io in &self.ios[..n] {
            self.issue_ts[io.buf as usize] = ti;
            match io.op {
                Op::Read => reads += 1,
                Op::Write => writes += 1,
                Op::Flush => {}
            }
        }
        if self.m.on && !self.sync {
            let slat = self.ctx.clock.to_ns(ti.wrapping_sub(t)).max(1);
            for (d, k) in [(&mut self.m.read, reads), (&mut self.m.write, writes)] {
                if let (Some(h), true) = (d.slat.as_mut(), k > 0) {
                    h.saturating_record_n(slat, k);
                }
            }
        }
        Ok(())
    }

    /// fio's `clat` of the pass's `n` completions, reaped at `tc`: from
    /// each I/O's issue time (failed ones, retried or counted as errors,
    /// have none, as they have no `lat`).
    #[inline(never)]
    fn completed_at(&mut self, n: usize, tc: u64) {
        let clock = self.ctx.clock;
        for d in &self.done[..n] {
            if !d.status.is_ok() {
                continue;
            }
            let slot = d.tag as usize;
            let dir = match self.slots.io[slot].op {
                Op::Read => &mut self.m.read,
                Op::Write => &mut self.m.write,
                Op::Flush => continue,
            };
            if let Some(h) = dir.clat.as_mut() {
                h.saturating_record(clock.to_ns(tc.wrapping_sub(self.issue_ts[slot])).max(1));
            }
        }
    }

    /// Reap side of a pass: take the completions (an interrupt-driven path
    /// with nothing to submit waits in the kernel for one instead of
    /// spinning), free their slots, verify, and count them.
    #[inline(always)]
    fn reap<const VERIFY: bool>(
        &mut self,
        q: &mut dyn IoQueue,
        wl: &Workload,
        verifier: Option<&mut Verifier>,
        res: &mut ThreadResult,
        submitted: usize,
        t: u64,
    ) -> Result<(), BackendError> {
        let batch = self.ctx.spec.batch_complete;
        let n = if batch > 1 {
            self.reap_batch(q, batch)?
        } else {
            // fio's reaping (`reap_max` > 0): at most that many, and with
            // the queue full an interrupt-driven path goes straight to the
            // wait for at least one, even right after submitting (fio's
            // wait_for_completions: one io_getevents for libaio). Ours (0):
            // whatever is ready, waiting only when nothing was to submit.
            let fio = self.ctx.spec.reap_max;
            let max = if fio > 0 { fio.min(self.done.len()) } else { self.done.len() };
            let stop = self.ctx.spec.stop.requested();
            if fio > 0 && self.in_flight == self.done.len() && !self.ctx.polled && !stop {
                self.m.waits += 1;
                q.wait(&mut self.done[..max], 1)?
            } else {
                let mut n = q.poll(&mut self.done[..max])?;
                if n == 0 && submitted == 0 && self.in_flight > 0 && !self.ctx.polled && !stop {
                    n = q.wait(&mut self.done[..max], 1)?;
                    self.m.waits += 1;
                }
                n
            }
        };
        self.m.polls += 1;
        if n > 0 {
            let clock = self.ctx.clock;
            let tc = clock.now();
            // I/Os submitted in one batch share a submit timestamp and, reaped
            // in one pass, a latency: record each batch's once, whatever the order.
            let lat = |s: u64| clock.to_ns(tc.wrapping_sub(s)).max(1);
            // A pattern of one operation (read, randread...: every I/O of
            // the phase is one): the tally's direction is decided once per
            // pass, not looked up per completion.
            let one = if VERIFY { None } else { wl.single_op() };
            let tally = match (self.m.on, one) {
                (true, Some(Op::Read)) => self.complete::<VERIFY, true, { Op::Read as u8 }>(q, wl, verifier, res, n, &lat),
                (true, Some(Op::Write)) => self.complete::<VERIFY, true, { Op::Write as u8 }>(q, wl, verifier, res, n, &lat),
                (true, _) => self.complete::<VERIFY, true, MIXED>(q, wl, verifier, res, n, &lat),
                (false, _) => self.complete::<VERIFY, false, MIXED>(q, wl, verifier, res, n, &lat),
            };
            let (writes, flushes) = tally.finish(&mut self.m, &lat);
            if self.ctx.spec.split_lat && self.m.on {
                self.completed_at(n, tc);
            }
            if self.m.on {
                self.m.depths.completed(n);
            }
            self.in_flight -= n;
            self.total_ios += n as u64;
            // The sampler's counters (fio's bandwidth and IOPS samples, per
            // direction): a read-only pass stores two.
            let (progress, bs) = (self.ctx.progress, self.ctx.spec.bs as u64);
            progress.ios.store(progress.ios.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
            progress.bytes.store(progress.bytes.load(Ordering::Relaxed) + (n as u64 - flushes) * bs, Ordering::Relaxed);
            if writes | flushes != 0 {
                progress.writes.store(progress.writes.load(Ordering::Relaxed) + writes, Ordering::Relaxed);
                progress.flushes.store(progress.flushes.load(Ordering::Relaxed) + flushes, Ordering::Relaxed);
            }
        } else if submitted == 0 && !(batch > 1 && self.ctx.polled) {
            // Nothing submitted, nothing completed: an empty poll. Its time
            // is the spinning a faster device would not need. (A polled
            // fixed-batch reap counted its spin's looks itself.)
            self.m.empty += 1;
            self.empty_since = Some(t);
            marker::empty();
        }
        Ok(())
    }

    /// Fixed-batch reaping (`--batch-complete N`): exactly N completions
    /// (fewer only when fewer are in flight, while draining), or none. A
    /// polled path whose completion queue we can see looks first and takes
    /// nothing until N are ready, so each pass either does a whole batch's
    /// work or is an empty poll (or, with interrupts, it waits for them); a
    /// kernel path waits in the kernel for the rest (IOPOLL: the kernel
    /// polls until N are found).
    #[inline(always)]
    fn reap_batch(&mut self, q: &mut dyn IoQueue, batch: usize) -> Result<usize, BackendError> {
        let want = batch.min(self.in_flight);
        if want == 0 {
            return Ok(0);
        }
        if self.ctx.polled && self.can_look {
            return if self.spin(q, want, u64::MAX) { q.poll(&mut self.done[..want]) } else { Ok(0) };
        }
        if q.ready(want) == Some(true) || self.ctx.spec.stop.requested() {
            return q.poll(&mut self.done[..want]);
        }
        // One wait for the whole batch (it takes what is there first): a
        // non-blocking look before it would make a pass's system calls and
        // reaps depend on how many had arrived.
        self.m.waits += 1;
        q.wait(&mut self.done[..want], want)
    }

    /// Spin on the completion queue until `want` completions are ready
    /// (true), at most `limit` looks, looking at the clock every
    /// [`SPIN_CLOCK`] looks for the runtime's end, the watchdog's next
    /// check or a stop (false). Every look that finds the batch not ready
    /// is an empty poll, and the same few instructions each time, so the
    /// counting boot's calibration (K looks) prices them exactly; the time
    /// from the end of the first look that missed to the last look is
    /// empty-poll time.
    #[inline(never)]
    fn spin(&mut self, q: &dyn IoQueue, want: usize, limit: u64) -> bool {
        // Each look is a pass of its own for the counting plugin: the one
        // that finds the batch is not an empty poll. A batch already there
        // at the first look costs no clock reading.
        marker::pass();
        if q.ready(want) == Some(true) {
            return true;
        }
        marker::empty();
        let clock = self.ctx.clock;
        let t0 = clock.now();
        let mut looks = 1u64;
        let ready = loop {
            if looks >= limit {
                break false;
            }
            if looks % SPIN_CLOCK == 0 {
                let t = clock.now();
                if t >= self.wd.next_check || t >= self.end || self.ctx.spec.stop.requested() {
                    break false;
                }
            }
            std::hint::spin_loop();
            marker::pass();
            if q.ready(want) == Some(true) {
                break true;
            }
            marker::empty();
            looks += 1;
        };
        self.m.polls += looks;
        self.m.empty += looks;
        self.m.empty_ticks += clock.now().wrapping_sub(t0);
        ready
    }

    /// The pass's `n` completions, in order: the verifier sees each
    /// (`VERIFY`), its slot is freed, and it is counted (`MEASURING`). They
    /// are taken in runs up to the next failure, whose slots go back to the
    /// free stack at once; a failed one goes to the watchdog (retried, or
    /// counted as an error of its direction, and finished like the others).
    /// `OP`: the operation of every I/O of the phase (`Op as u8`), so none
    /// is looked up, or [`MIXED`].
    #[inline(always)]
    fn complete<const VERIFY: bool, const MEASURING: bool, const OP: u8>(
        &mut self,
        q: &mut dyn IoQueue,
        wl: &Workload,
        mut verifier: Option<&mut Verifier>,
        res: &mut ThreadResult,
        n: usize,
        lat: &impl Fn(u64) -> u64,
    ) -> PassTally {
        // The tally as a local, kept in registers.
        let mut tally = PassTally::default();
        let Phase { slots, done, wd, m, stopping, ctx, .. } = self;
        let done = &done[..n];
        let mut i = 0;
        while i < done.len() {
            let run = &done[i..];
            // The run ends at the first failure (k), found from its place:
            // no count beside the walk.
            let mut k = run.len();
            for d in run {
                if !d.status.is_ok() {
                    k = index_in(run, d);
                    break;
                }
                let SlotIo { submit_ts, unit, op } = slots.io[d.tag as usize];
                debug_assert!(OP == MIXED || op as u8 == OP, "an I/O of another operation in a one-operation phase");
                let op = if OP == Op::Read as u8 {
                    Op::Read
                } else if OP == Op::Write as u8 {
                    Op::Write
                } else {
                    op
                };
                if let (true, Some(v)) = (VERIFY, verifier.as_deref_mut()) {
                    v.on_complete(q, d.tag as u32, op, unit, true, wl, res);
                }
                if MEASURING {
                    tally.add(op, submit_ts, m, lat);
                }
            }
            slots.free.extend(run[..k].iter().map(|d| d.tag as u32));
            i += k;
            let Some(d) = done.get(i) else { break };
            i += 1;
            let slot = d.tag as usize;
            let SlotIo { unit, op, .. } = slots.io[slot];
            match failed_io(wd, res, slots, wl, slot, &d.status, wl.blocks) {
                Failed::Retried => continue,
                Failed::Counted => *stopping |= !ctx.spec.continue_on_error,
            }
            if let (true, Some(v)) = (VERIFY, verifier.as_deref_mut()) {
                v.on_complete(q, slot as u32, op, unit, false, wl, res);
            }
            slots.free.push(slot as u32);
            if MEASURING {
                tally.fail(op);
            }
        }
        tally
    }

    /// The watchdog's periodic check: I/Os it gave up on are retried, or
    /// fail.
    #[cold]
    fn check(&mut self, q: &mut dyn IoQueue, wl: &Workload, mut verifier: Option<&mut Verifier>, res: &mut ThreadResult, t: u64) -> Result<(), BackendError> {
        if self.m.next_log != u64::MAX && self.m.on {
            self.m.log_latencies(self.ctx.progress);
        }
        let blocks = wl.blocks;
        for (slot, why) in self.wd.check(t, q, &self.slots, wl, &mut res.recovery)? {
            self.in_flight -= 1;
            let s = slot as usize;
            if self.wd.take_retry(s, &self.slots) {
                res.recovery.retries += 1;
                self.wd.retry_now(slot);
                continue;
            }
            // Out of retries (or stopping): a failed I/O.
            res.errors += 1;
            if self.m.on {
                match self.slots.io[s].op {
                    Op::Read => self.m.read.errors += 1,
                    Op::Write => self.m.write.errors += 1,
                    Op::Flush => {}
                }
            }
            if res.first_error.is_none() {
                res.first_error = Some(format!(
                    "{} of {blocks} blocks at LBA {} never completed ({why}), after {} retries",
                    op_name(self.slots.io[s].op),
                    wl.lba_of(self.slots.io[s].unit),
                    self.wd.retries_used(s, &self.slots)
                ));
            }
            if !self.ctx.spec.continue_on_error {
                self.stopping = true;
            }
            if let Some(v) = verifier.as_deref_mut() {
                v.release(self.slots.io[s].unit);
            }
            self.slots.free.push(slot);
        }
        Ok(())
    }

    /// rate_iops and thinktime: how many new I/Os may be issued at `t`.
    #[cold]
    fn allowance(&self, t: u64) -> u64 {
        let sync = match &self.fsync {
            Some(s) if s.state == SyncState::Counting => s.every - s.writes,
            Some(s) if s.state == SyncState::Flushed => 1,
            Some(_) => 0,
            None => u64::MAX,
        };
        let end = if self.end_sync && self.done_issuing() { 0 } else { u64::MAX };
        self.rate.as_ref().map_or(u64::MAX, |r| r.due(t)).min(self.think.as_ref().map_or(u64::MAX, Think::allowance)).min(sync).min(end)
    }

    /// rate_iops, thinktime, fsync: how many new I/Os may be issued at
    /// `t`; a flush due goes out first, alone (nothing else goes out until
    /// it is done).
    #[cold]
    #[inline(never)]
    fn paced_submit(&mut self, t: u64, wl: &Workload, exhausted: bool) -> u64 {
        // The source gave its last I/O: so the loop knows, though a flush
        // due keeps it from asking the source again.
        self.ran_out |= exhausted;
        let due = self.allowance(t);
        if due == 0 && !self.slots.free.is_empty() && self.flush_now(exhausted) {
            let slot = self.slots.free.pop().expect("a free slot");
            self.ios.push(fill_one(&mut self.slots.io, slot, Op::Flush, 0, t, wl, wl.blocks));
        }
        due
    }

    /// fsync/fdatasync and end_fsync: is a flush to go out now? (One is
    /// due, nothing is in flight, and, but for end_fsync, more I/Os are to
    /// follow it, as fio syncs only before its next I/O.)
    #[cold]
    fn flush_now(&mut self, exhausted: bool) -> bool {
        if self.in_flight > 0 || !self.retry.is_empty() || self.ctx.spec.stop.requested() {
            return false;
        }
        let more = !self.stopping && !self.ran_out && !exhausted;
        if let Some(s) = self.fsync.as_mut().filter(|s| s.state == SyncState::Due && more) {
            s.state = SyncState::Flushing;
            self.m.sync_counts = true;
            return true;
        }
        if self.end_sync && self.done_issuing() {
            self.end_sync = false;
            self.m.sync_counts = false;
            return true;
        }
        false
    }

    /// rate_iops, thinktime and fsync: `n` new I/Os were issued, `writes`
    /// of them writes.
    #[cold]
    fn issued_paced(&mut self, n: u64, writes: u64) {
        if let Some(r) = &mut self.rate {
            r.issued += n;
        }
        self.think_issued = n;
        if let Some(s) = self.fsync.as_mut().filter(|s| n > 0 && matches!(s.state, SyncState::Counting | SyncState::Flushed)) {
            // fio's count of writes is still a multiple of N after a
            // flush: the next I/O, unless a write, brings another.
            let again = s.state == SyncState::Flushed && writes == 0;
            s.writes += writes;
            s.state = if again || s.writes >= s.every { SyncState::Due } else { SyncState::Counting };
        }
    }

    /// thinktime: note what its check after the reap needs.
    #[cold]
    fn before_reap(&mut self) {
        self.think_before = (self.total_ios, self.slots.free.is_empty());
    }

    /// After the reap: rate_iops's sleep, thinktime's count and stall.
    #[cold]
    fn pace(&mut self, t: u64) {
        let idle = self.in_flight == 0;
        if let Some(s) = self.fsync.as_mut().filter(|s| s.state == SyncState::Flushing && idle) {
            (s.state, s.writes) = (SyncState::Flushed, 0);
        }
        if self.rate.is_some() {
            self.pace_rate(t);
        }
        let (done_before, full) = self.think_before;
        let (issued, done, sync) = (self.think_issued, self.total_ios - done_before, self.sync);
        if let Some(th) = &mut self.think {
            th.counted(issued, done, full || sync);
            if th.due.is_some() {
                self.think();
            }
        }
    }

    /// rate_iops: with nothing in flight and the next I/O not yet due,
    /// sleep until it is (at most 50 ms at a time, so a stop or the
    /// runtime's end is seen). That pass waited for the rate, not for the
    /// path: it is not an empty poll.
    fn pace_rate(&mut self, t: u64) {
        let Some(r) = &self.rate else { return };
        if self.in_flight > 0 || self.stopping || self.ran_out && self.retry.is_empty() || !self.ios.is_empty() {
            return;
        }
        let wait = self.ctx.clock.to_ns(r.until_next(t).min(self.end.saturating_sub(t)));
        if wait == 0 {
            return;
        }
        if self.empty_since.take().is_some() {
            self.m.empty -= 1;
        }
        std::thread::sleep(std::time::Duration::from_nanos(wait.min(50_000_000)));
    }

    /// thinktime: once the I/Os in flight are done (fio's `io_u_quiesce`),
    /// spin for thinktime_spin, then sleep for the rest of thinktime (at
    /// most a second at a time, as fio's usec_sleep, so a stop is seen;
    /// the last 100 us are spun instead), and count again. That pass
    /// waited for the think time, not for the path: it is not an empty
    /// poll.
    #[cold]
    fn think(&mut self) {
        if self.in_flight > 0 || self.stopping {
            return;
        }
        let Some(th) = &mut self.think else { return };
        th.stalled();
        let clock = self.ctx.clock;
        let start = clock.now();
        // As fio's usec_spin and usec_sleep, the stall is not cut short by
        // the runtime's end (only a stop ends it).
        let spin_end = start.saturating_add(clock.ticks(th.spec.spin));
        while clock.now() < spin_end {
            std::hint::spin_loop();
        }
        // Sleep to within SLACK of the end, then spin the rest, as fio's
        // usec_sleep spins what is under the sleep's overshoot (a sleep
        // wakes some 50-80 us late here): the stall lasts what was asked.
        const SLACK_NS: u64 = 100_000;
        let end = start.saturating_add(clock.ticks(th.spec.time.max(th.spec.spin)));
        loop {
            let now = clock.now();
            if now >= end || self.ctx.spec.stop.requested() {
                break;
            }
            match clock.to_ns(end - now) {
                left if left > SLACK_NS => std::thread::sleep(std::time::Duration::from_nanos((left - SLACK_NS).min(1_000_000_000))),
                _ => std::hint::spin_loop(),
            }
        }
        if self.empty_since.take().is_some() {
            self.m.empty -= 1;
        }
    }

    /// Nothing more to submit and nothing in flight.
    #[inline(always)]
    fn finished(&self) -> bool {
        (self.stopping || self.ran_out && self.retry.is_empty())
            && self.in_flight == 0
            && self.wd.pending.is_empty()
            && !(self.end_sync && !self.ctx.spec.stop.requested())
    }

    /// No more I/Os of the source to issue (the runtime is over, a stop
    /// was asked for, or the source ran out).
    fn done_issuing(&self) -> bool {
        self.stopping || self.ran_out && self.retry.is_empty()
    }

    /// Into the thread's results: the measured figures of the main phase,
    /// the I/O count of the others.
    fn finish(self, q: &dyn IoQueue, res: &mut ThreadResult) {
        if self.kind == PhaseKind::Main {
            self.m.finish(q, self.ctx.clock, self.ctx.spec.bs as u64, self.fsync.is_some(), res, self.ctx.progress);
        } else {
            res.verify_ios += self.total_ios;
        }
    }
}
