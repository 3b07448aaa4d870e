//! What a run is asked to do and what it measured: the job (fio's options,
//! plus the watchdog's settings and the stop handle), and the per-thread
//! results the report reads.

use crate::measure::stats::{new_histogram, CpuTime};
use crate::engine::workload::{Distribution, Rw};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Data verification settings.
#[derive(Clone, Copy, Debug)]
pub struct VerifySpec {
    /// Seed stamped into every block.
    pub seed: u64,
    /// Only check what is there (written by an earlier run or another path
    /// with the same seed); no prefill, any generation accepted.
    pub only: bool,
}

/// I/O timeout and retry settings (`--io-timeout`, `--retries`).
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

/// A request to stop, shared between whoever asks (the Ctrl-C / SIGTERM
/// handlers, a test) and the runs that obey it: every worker stops
/// submitting, drains what is in flight, and the device is handed back.
/// Clones share one flag; the default is a flag nobody else holds.
/// The signal that asked, if one did, is kept beside the flag.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<AtomicBool>, Arc<AtomicUsize>);

impl Stop {
    /// A fresh handle, not requested.
    pub fn new() -> Self {
        Stop::default()
    }
    /// Ask every run holding a clone to stop.
    pub fn request(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    /// True once a stop was requested.
    #[inline]
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// The flag itself, for signal handlers (`signal_hook::flag`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
    /// Where a signal handler writes its signal's number
    /// (`signal_hook::flag::register_usize`).
    pub fn signal_slot(&self) -> Arc<AtomicUsize> {
        self.1.clone()
    }
    /// The signal that requested the stop, if a signal did.
    pub fn signal(&self) -> Option<i32> {
        Some(self.1.load(Ordering::Relaxed) as i32).filter(|&s| s != 0)
    }
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
    /// The user gave the region's size (`--size`); otherwise it is the
    /// namespace from `offset` on, and a refusal must not name `--size`.
    pub size_given: bool,
    /// Measured time (time based), or None.
    pub runtime: Option<Duration>,
    /// I/Os per thread, or None.
    pub ios: Option<u64>,
    /// Warm-up before measuring.
    pub ramp: Duration,
    /// Verification.
    pub verify: Option<VerifySpec>,
    /// fio's `scramble_buffers` (fio's default, on): every write's buffer
    /// is scrambled just before it goes out, its offset and issue time
    /// stored in each 512-byte sector ([`crate::backend::Scramble`]), so
    /// no two blocks written are alike. Off, every write carries the
    /// thread's fixed pattern. A verifying job's stamps are unique already
    /// and are never scrambled, as fio does not scramble under `verify`.
    pub scramble: bool,
    /// I/Os per submission (doorbell / system call); 0 = all that fit.
    pub batch: usize,
    /// Completions per reap: 0 or 1 reaps whatever is there; N > 1 reaps
    /// only when N are ready, exactly N at a time (fio's
    /// `iodepth_batch_complete_min` = `_max` = N). With `batch` N too, every
    /// pass of the loop does the same work, whatever the device's speed.
    pub batch_complete: usize,
    /// At most this many completions per reap, as fio takes them
    /// (`nvme-bypass fio`: `iodepth_batch_complete_max`, at least 1; fio's
    /// default is 1, so its queue stays full: reap one, submit one), and an
    /// interrupt-driven path waits for one whenever the queue is full.
    /// 0 (`bench`, the sweeps): whatever is ready, and a wait only when a
    /// pass had nothing to submit.
    pub reap_max: usize,
    /// Measure fio's `slat` and `clat` apart (`nvme-bypass fio` without
    /// `gtod_reduce`): one clock read after each submission, a stamp per
    /// I/O and a histogram record per completion more. Off: one latency,
    /// submission to reap (fio's `lat`).
    pub split_lat: bool,
    /// fio's `rate_iops` (its `rate_process=linear`): the main phase's
    /// I/O k is issued no sooner than k / rate_iops s after the phase (or
    /// the ramp's end) started; None: as fast as the path takes them.
    pub rate_iops: Option<f64>,
    /// fio's `fsync`/`fdatasync`: after every this many writes, and before
    /// the next I/O, the main phase waits for the I/Os in flight and
    /// flushes (the path's Flush: fdatasync on the block path, an NVMe
    /// Flush on passthru and our driver); 0: never.
    pub sync_every: u64,
    /// fio's `end_fsync`: a flush when the main phase's I/Os are done,
    /// within its runtime but not among its counted syncs.
    pub end_sync: bool,
    /// fio's `thinktime`: the main phase stalls after every so many I/Os;
    /// None: it never does.
    pub think: Option<ThinkSpec>,
    /// Progress read every this many ns for fio's bandwidth and IOPS logs
    /// (`log_avg_msec`), besides the 500 ms samples; None: no logs.
    pub log_ns: Option<u64>,
    /// Threads.
    pub numjobs: usize,
    /// CPUs to pin threads to, round robin (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Keep going after an I/O error.
    pub continue_on_error: bool,
    /// Random seed of the offset generator.
    pub seed: u64,
    /// Random offsets from fio's random map: every block once per pass
    /// (`nvme-bypass fio` without `norandommap`). Off (`bench`, the
    /// sweeps): each offset drawn on its own, as fio's `norandommap`.
    pub random_map: bool,
    /// How random offsets spread (fio's `random_distribution`); any but
    /// the uniform one draws each on its own, whatever `random_map` says.
    pub distribution: Distribution,
    /// The region interleaves this many files of one size (fio's several
    /// filenames; 1: one file or device): a skewed distribution is drawn
    /// over each file's own units, as fio draws it per file.
    pub files: u64,
    /// A sequential job's threads start spread over the region (thread k
    /// at k/numjobs of it: `bench`, the sweeps), or all at its start, as
    /// fio's clones do (`offset_increment=0`; the fio drop-in).
    pub spread_threads: bool,
    /// The watchdog's I/O timeout and retry limit.
    pub reliability: Reliability,
    /// Stop early when this is requested (Ctrl-C).
    pub stop: Stop,
}

impl JobSpec {
    /// The main phase flushes (`sync_every` or `end_sync` on a pattern
    /// that writes): a read-only job has nothing to flush.
    pub fn flushes(&self) -> bool {
        self.rw.writes() && (self.sync_every > 0 || self.end_sync)
    }
}

/// fio's `thinktime`: after every `blocks` I/Os issued, or completed
/// (`on_complete`, fio's default `thinktime_blocks_type=complete`), wait
/// for every I/O in flight, spin for `spin`, then sleep for the rest of
/// `time` (backend.c `handle_thinktime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinkSpec {
    pub time: Duration,
    pub spin: Duration,
    pub blocks: u64,
    pub on_complete: bool,
}

/// Per-direction results of the measured interval. As in fio, an I/O that
/// failed (after its retries) is not in `ios`, `bytes` or `lat`: it is
/// counted in `errors` only.
#[derive(Clone, Debug)]
pub struct DirResult {
    /// I/Os completed successfully.
    pub ios: u64,
    /// Bytes moved by them.
    pub bytes: u64,
    /// Their completion latency (submit to reap), ns.
    pub lat: Histogram<u64>,
    /// I/Os that failed (an error status or no completion, retries spent).
    pub errors: u64,
    /// fio's submission and completion latencies, when measured apart
    /// ([`JobSpec::split_lat`]): `slat` from the pass's start to the end of
    /// the submission's system call or doorbell (none on a synchronous
    /// path), `clat` from there to the reap; `lat` is their sum.
    pub slat: Option<Histogram<u64>>,
    /// See `slat`.
    pub clat: Option<Histogram<u64>>,
}

impl Default for DirResult {
    fn default() -> Self {
        DirResult { ios: 0, bytes: 0, lat: new_histogram(), errors: 0, slat: None, clat: None }
    }
}

impl DirResult {
    /// fio's completion latency: `clat` when measured apart, else the one
    /// latency (submission to reap), which then stands for it.
    pub fn clat_or_lat(&self) -> &Histogram<u64> {
        self.clat.as_ref().unwrap_or(&self.lat)
    }

    /// Merge another thread's results.
    pub fn add(&mut self, o: &DirResult) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.errors += o.errors;
        self.lat.add(&o.lat).expect("same histogram bounds");
        for (a, b) in [(&mut self.slat, &o.slat), (&mut self.clat, &o.clat)] {
            match (a.as_mut(), b) {
                (Some(a), Some(b)) => a.add(b).expect("same histogram bounds"),
                (None, Some(b)) => *a = Some(b.clone()),
                _ => {}
            }
        }
    }
}

/// What one thread measured.
#[derive(Clone, Debug, Default)]
pub struct ThreadResult {
    /// Thread index.
    pub thread: usize,
    /// The thread's id (gettid), fio's `pid=` of a job run as a thread.
    pub tid: u32,
    /// CPU it was pinned to.
    pub cpu: Option<usize>,
    /// Reads.
    pub read: DirResult,
    /// Writes.
    pub write: DirResult,
    /// Flushes.
    pub flushes: u64,
    /// The latencies of the main phase's flushes (fio's `sync` statistics),
    /// when the job flushes every so many writes ([`JobSpec::sync_every`]).
    pub sync_lat: Option<Histogram<u64>>,
    /// Measured wall time, ns.
    pub elapsed_ns: u64,
    /// I/Os in flight when the ramp ended (reads, writes): their
    /// completions are in `read` and `write`, as the device did them within
    /// the measured interval. fio counts an I/O (`total_ios`, and so IOPS)
    /// when it submits it, after the ramp only, so `nvme-bypass fio` takes
    /// these out of its counts; its bytes and latencies keep them, as fio's
    /// do.
    pub ramp_in_flight: [u64; 2],
    /// Thread CPU time over the measured interval (getrusage user/sys).
    pub cpu_time: CpuTime,
    /// Thread CPU time over the measured interval (CLOCK_THREAD_CPUTIME_ID), ns.
    pub cpu_ns: u64,
    /// The thread's context switches and page faults over the measured
    /// interval (fio's `ctx`, `majf`, `minf`).
    pub rusage: crate::measure::stats::Rusage,
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
    /// I/Os that failed, all phases (prefill and read-back included); the
    /// measured interval's are also in `read.errors` / `write.errors`.
    pub errors: u64,
    /// The first error, described.
    pub first_error: Option<String>,
    /// Queue counters over the measured interval.
    pub counters: crate::backend::QueueCounters,
    /// Verification prefill / read-back I/Os (not in the figures).
    pub verify_ios: u64,
    /// Of those, the read-back's: the reads after the main phase that
    /// check what it wrote (fio's verify phase), and how long it took, ns.
    pub readback_ios: u64,
    /// Wall time of the read-back, ns.
    pub readback_ns: u64,
    /// Stopped early by a signal.
    pub interrupted: bool,
    /// Start and end of the measured interval, CLOCK_MONOTONIC ns from
    /// the process's origin (`clock::mono_ns`): `elapsed_ns` is their
    /// difference, and the run's interval is the union of its threads'.
    pub start_mono_ns: u64,
    /// End of the measured interval (see `start_mono_ns`).
    pub end_mono_ns: u64,
    /// System-wide CPU (/proc/stat) read at the start and at the end of
    /// this thread's measured interval; the report takes the earliest start
    /// and the latest end over the threads.
    pub system_start: Option<crate::measure::stats::SystemCpu>,
    /// System-wide CPU read at the end (see `system_start`).
    pub system_end: Option<crate::measure::stats::SystemCpu>,
    /// Timeouts, Aborts, resets and retries (all phases).
    pub recovery: RecoveryCounters,
    /// fio's I/O depth distributions over the measured interval.
    pub depths: IoDepths,
    /// The I/Os and bytes this thread completed in each 500 ms interval
    /// that lies wholly inside its measured interval, read from its
    /// [`Progress`] counters by the reporting thread (fio's bandwidth and
    /// IOPS samples, `log_avg_msec`'s default).
    pub samples: Vec<Sample>,
    /// The same, over [`JobSpec::log_ns`] intervals when it is set (fio's
    /// `log_avg_msec`: the bandwidth and IOPS logs' entries), from the
    /// counters in [`lat_log`](Self::lat_log); else empty.
    pub log: Vec<Sample>,
    /// The sampler's counters at the start of the measured interval.
    pub progress0: Reading,
    /// fio's logs: the latencies and counters so far every
    /// [`JobSpec::log_ns`] (empty without it).
    pub lat_log: Vec<LatEntry>,
    /// A group_reporting entry's clones' own samples, one list per clone
    /// ([`ThreadResult::merged`]; empty for one thread): fio sums their
    /// statistics, not their intervals.
    pub clone_samples: Vec<Vec<Sample>>,
}

/// fio's I/O depth distributions (`IO depths`, `submit`, `complete`;
/// JSON `iodepth_level`, `iodepth_submit`, `iodepth_complete`), counted as
/// fio counts them: per submission (a system call or doorbell: a chunk of
/// at most `iodepth_batch_submit` I/Os), its I/Os in the slot of the
/// queue's depth with them in flight (`level`) and one in the slot of how
/// many it submitted (`submit`); per reap that took completions, one in the
/// slot of how many (`complete`). Counted per submission, not per I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IoDepths {
    /// Depth slots 1, 2, 4, 8, 16, 32, >=64: I/Os submitted at that depth.
    pub level: [u64; 7],
    /// Batch slots 0, 4, 8, 16, 32, 64, >=64 (each the largest batch it
    /// holds, fio's keys): submission calls.
    pub submit: [u64; 7],
    /// The same slots: reaps.
    pub complete: [u64; 7],
}

impl IoDepths {
    /// fio's slot of a queue depth (1, 2-3, 4-7, ..., 32-63, >=64).
    #[inline(always)]
    pub fn depth_slot(depth: usize) -> usize {
        ((usize::BITS - 1 - (depth | 1).leading_zeros()) as usize).min(6)
    }

    /// fio's slot of a batch size (0, 1-4, 5-8, 9-16, 17-32, 33-64, >64).
    #[inline(always)]
    pub fn batch_slot(n: usize) -> usize {
        if n == 0 {
            0
        } else {
            ((usize::BITS - (n - 1).leading_zeros()) as usize).saturating_sub(1).clamp(1, 6)
        }
    }

    /// `n` I/Os submitted in chunks of at most `batch` (0: all in one),
    /// leaving `depth` in flight: each chunk a submission of its own, at
    /// the depth it reached, as the backends make them.
    #[inline(always)]
    pub fn submitted(&mut self, n: usize, depth: usize, batch: usize) {
        let b = if batch == 0 { n } else { batch.min(n) };
        let (mut at, mut left) = (depth - n, n);
        while left > 0 {
            let c = left.min(b);
            at += c;
            self.level[Self::depth_slot(at)] += c as u64;
            self.submit[Self::batch_slot(c)] += 1;
            left -= c;
        }
    }

    /// A reap that took `n` completions.
    #[inline(always)]
    pub fn completed(&mut self, n: usize) {
        self.complete[Self::batch_slot(n)] += 1;
    }

    /// Another thread's, added (group_reporting).
    pub fn add(&mut self, o: &IoDepths) {
        for (a, b) in [(&mut self.level, &o.level), (&mut self.submit, &o.submit), (&mut self.complete, &o.complete)] {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
    }

    /// fio's `stat_calc_dist`: each slot as a percentage of the map's
    /// total, at least 0.1 for a slot with any; all 0 when empty.
    pub fn percentages(map: &[u64; 7]) -> [f64; 7] {
        let total: u64 = map.iter().sum();
        map.map(|x| if total == 0 { 0.0 } else { (100.0 * x as f64 / total as f64).max(if x > 0 { 0.1 } else { 0.0 }) })
    }
}

/// One log entry (see `ThreadResult::lat_log`), taken by the I/O thread
/// itself every `log_avg_msec` from its start: at `end` (CLOCK_MONOTONIC
/// ns), per direction (read, write), the (count, sum in ns) of lat, clat
/// and slat so far in the measured interval, and the thread's completion
/// counters (the bandwidth and IOPS logs' entries). `partial`: the last
/// interval's, at the end, shorter than the others.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatEntry {
    pub end: u64,
    pub dirs: [[(u64, f64); 3]; 2],
    pub progress: Reading,
    pub partial: bool,
}

/// One interval's completions (see `ThreadResult::samples`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    /// End of the interval, CLOCK_MONOTONIC ns (`clock::mono_ns`).
    pub end: u64,
    /// Length of the interval, ns.
    pub ns: u64,
    /// I/Os completed in it (reads, writes and flushes).
    pub ios: u64,
    /// Bytes moved in it.
    pub bytes: u64,
    /// Of `ios`, the writes.
    pub writes: u64,
    /// Of `ios`, the flushes (no bytes).
    pub flushes: u64,
}

impl Sample {
    /// The interval's I/Os in one direction (`write` false: reads).
    pub fn dir_ios(&self, write: bool) -> u64 {
        if write {
            self.writes
        } else {
            self.ios - self.writes - self.flushes
        }
    }
}

impl ThreadResult {
    /// All I/Os of the measured interval.
    pub fn ios(&self) -> u64 {
        self.read.ios + self.write.ios + self.flushes
    }

    /// The threads of one job as one, for fio's `group_reporting`: I/Os,
    /// bytes, latencies, errors and verify counts summed; the interval is
    /// the longest thread's; each clone's 500 ms samples kept apart
    /// (`clone_samples`: fio's group statistics sum the clones'); CPU time the mean per thread, so that CPU
    /// over the interval reads as fio's group `usr_cpu` (summed CPU time
    /// over summed run time). The identity (thread, CPU, queue) is the
    /// first thread's.
    pub fn merged(threads: &[ThreadResult]) -> ThreadResult {
        let Some((first, rest)) = threads.split_first() else { return ThreadResult::default() };
        let mut m = first.clone();
        for t in rest {
            m.read.add(&t.read);
            m.write.add(&t.write);
            m.flushes += t.flushes;
            match (m.sync_lat.as_mut(), t.sync_lat.as_ref()) {
                (Some(a), Some(b)) => a.add(b).expect("same histogram bounds"),
                (None, Some(b)) => m.sync_lat = Some(b.clone()),
                _ => {}
            }
            m.elapsed_ns = m.elapsed_ns.max(t.elapsed_ns);
            m.ramp_in_flight[0] += t.ramp_in_flight[0];
            m.ramp_in_flight[1] += t.ramp_in_flight[1];
            m.cpu_time.user_ns += t.cpu_time.user_ns;
            m.cpu_time.sys_ns += t.cpu_time.sys_ns;
            m.cpu_ns += t.cpu_ns;
            m.rusage.add(&t.rusage);
            m.verified_blocks += t.verified_blocks;
            m.verify_ios += t.verify_ios;
            m.readback_ios += t.readback_ios;
            m.readback_ns = m.readback_ns.max(t.readback_ns);
            m.mismatches += t.mismatches;
            m.errors += t.errors;
            m.first_mismatch = m.first_mismatch.take().or_else(|| t.first_mismatch.clone());
            m.first_error = m.first_error.take().or_else(|| t.first_error.clone());
            m.interrupted |= t.interrupted;
            m.depths.add(&t.depths);
            m.start_mono_ns = m.start_mono_ns.min(t.start_mono_ns);
            m.end_mono_ns = m.end_mono_ns.max(t.end_mono_ns);
        }
        if threads.len() > 1 {
            m.clone_samples = threads.iter().map(|t| t.samples.clone()).collect();
            m.samples = vec![];
        }
        let n = threads.len() as u64;
        m.cpu_time.user_ns /= n;
        m.cpu_time.sys_ns /= n;
        m.cpu_ns /= n;
        m
    }
}

/// Recovery counters of one thread (summed for the report by
/// `watchdog::recovery_summary`).
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
    pub(crate) fn note(&mut self, s: String) {
        if self.log.len() < 8 {
            self.log.push(s);
        }
    }
    pub(crate) fn add(&mut self, r: &crate::backend::Recovery) {
        self.aborts += r.aborts_sent;
        self.aborted += r.aborted;
        self.resets += r.reset as u64;
        self.requeues += r.recreated as u64;
    }
    /// True when nothing happened (a pause waited out is noted, not counted).
    pub fn is_empty(&self) -> bool {
        self.timeouts + self.aborts + self.resets + self.requeues + self.retries == 0 && self.log.is_empty()
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
    /// Of `ios`, the writes counted in the measured interval (a pass that
    /// does not measure counts none: its I/Os are in `ios` alone).
    pub writes: AtomicU64,
    /// Of `ios`, the flushes counted in the measured interval.
    pub flushes: AtomicU64,
}

/// One reading of a thread's progress counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// CLOCK_MONOTONIC ns from `clock::mono_ns`'s origin.
    pub t: u64,
    pub ios: u64,
    pub bytes: u64,
    pub writes: u64,
    pub flushes: u64,
}

impl Progress {
    /// The counters now, stamped `t` (CLOCK_MONOTONIC ns).
    pub fn read(&self, t: u64) -> Reading {
        let l = |c: &AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        Reading { t, ios: l(&self.ios), bytes: l(&self.bytes), writes: l(&self.writes), flushes: l(&self.flushes) }
    }
}

#[cfg(test)]
mod tests {
    use super::IoDepths;

    #[test]
    fn depth_and_batch_slots_are_fios() {
        // io_u_mark_depth: 1, 2-3, 4-7, 8-15, 16-31, 32-63, >=64.
        let d: Vec<usize> = [0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 1000].iter().map(|&x| IoDepths::depth_slot(x)).collect();
        assert_eq!(d, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]);
        // __io_u_mark_map: 0, 1-4, 5-8, 9-16, 17-32, 33-64, >64.
        let b: Vec<usize> = [0, 1, 2, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 1000].iter().map(|&x| IoDepths::batch_slot(x)).collect();
        assert_eq!(b, [0, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]);
    }

    #[test]
    fn submissions_are_counted_per_chunk_at_the_depth_each_reached() {
        let mut d = IoDepths::default();
        // 64 I/Os one per system call (fio's default batch) from empty:
        // depths 1..=64, each its own submission of one.
        d.submitted(64, 64, 1);
        assert_eq!(d.level, [1, 2, 4, 8, 16, 32, 1]);
        assert_eq!(d.submit, [0, 64, 0, 0, 0, 0, 0]);
        // 8 more in one call (batch 0: all at once), depth 56 -> 64.
        let mut d = IoDepths::default();
        d.submitted(8, 64, 0);
        assert_eq!((d.level[6], d.submit[2]), (8, 1));
        // 20 in chunks of 8, depth 0 -> 20: 8 at 8, 8 at 16, 4 at 20.
        let mut d = IoDepths::default();
        d.submitted(20, 20, 8);
        assert_eq!(d.level, [0, 0, 0, 8, 12, 0, 0]);
        assert_eq!(d.submit, [0, 1, 2, 0, 0, 0, 0]);
        d.completed(3);
        d.completed(64);
        assert_eq!(d.complete, [0, 1, 0, 0, 0, 1, 0]);
        // fio's stat_calc_dist: a slot with any is at least 0.1%.
        let p = IoDepths::percentages(&[1, 0, 0, 0, 0, 0, 9999]);
        assert_eq!((p[0], p[6]), (0.1, 99.99));
        assert_eq!(IoDepths::percentages(&[0; 7]), [0.0; 7]);
    }
}
