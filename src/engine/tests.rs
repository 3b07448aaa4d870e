//! The engine against a fake queue (in the manner of SPDK's
//! `nvme_qpair_ut`): each I/O submitted completes on the next poll, with
//! the faults a test asks for. No device, no threads, no timing.

use crate::backend::{BackendError, Geometry, Io, IoDone, IoQueue, IoStatus, Op, QueueCounters};
use crate::engine::job::{JobSpec, Progress, Reliability, Stop, ThinkSpec, ThreadResult, VerifySpec};
use crate::engine::phase::{worker, Ctx};
use crate::engine::workload::{Distribution, Rw};
use crate::measure::clock::Clock;
use nvme_spec::status::{Status, StatusCodeType};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

const LBA: usize = 512;

/// A queue whose I/Os complete on the next poll, over an in-memory namespace.
#[derive(Default)]
struct FakeQueue {
    depth: usize,
    bufs: Vec<Vec<u8>>,
    /// Written blocks by LBA.
    disk: HashMap<u64, Vec<u8>>,
    /// Submitted, not yet completed.
    outstanding: VecDeque<Io>,
    /// Most I/Os ever outstanding.
    most_outstanding: usize,
    /// Accept at most this many I/Os per submit (0: all that fit).
    accept_at_most: usize,
    /// Complete at most this many per poll (0: all).
    complete_at_most: usize,
    /// Fail the first `fail_first` I/Os with an NVMe error, DNR as given.
    fail_first: u64,
    dnr: bool,
    /// Command Retry Delay of those failures, and the waits the path
    /// reports for CRD 1-3.
    crd: u8,
    delays: [Duration; 3],
    /// When each I/O was submitted (the retries' waits).
    submitted_at: Vec<std::time::Instant>,
    /// Complete reads of this LBA with one byte flipped.
    corrupt_lba: Option<u64>,
    /// Request `stop` after this many completions.
    stop_after: Option<(u64, Stop)>,
    completed: u64,
    /// I/Os completed per op (reads, writes), failed ones included.
    ops: [u64; 2],
    /// Every submitted I/O's LBA and block count (reads and writes).
    lbas: Vec<(u64, u32)>,
    /// Answer `ready` from the outstanding count (a completion queue in
    /// our memory), rather than "cannot tell".
    can_look: bool,
    /// Completions taken by each poll that took any.
    reaps: Vec<usize>,
    /// With `can_look`: each batch is ready only after this many looks
    /// found it not ready (`looks_left` counts down, then starts again).
    looks_per_batch: u32,
    looks_left: std::cell::Cell<u32>,
}

impl FakeQueue {
    fn new(depth: usize, bs: usize) -> Self {
        FakeQueue { depth, bufs: vec![vec![0; bs]; depth], ..Default::default() }
    }
}

impl IoQueue for FakeQueue {
    fn depth(&self) -> usize {
        self.depth
    }
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        let room = self.depth - self.outstanding.len();
        let mut n = ios.len().min(room);
        if self.accept_at_most > 0 {
            n = n.min(self.accept_at_most);
        }
        for io in &ios[..n] {
            assert!((io.buf as usize) < self.depth);
            assert!(!self.outstanding.iter().any(|o| o.tag == io.tag), "tag {} submitted twice", io.tag);
            self.lbas.push((io.lba, io.blocks));
            self.submitted_at.push(std::time::Instant::now());
            self.outstanding.push_back(*io);
        }
        self.most_outstanding = self.most_outstanding.max(self.outstanding.len());
        Ok(n)
    }
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError> {
        let mut n = self.outstanding.len().min(out.len());
        if self.complete_at_most > 0 {
            n = n.min(self.complete_at_most);
        }
        if n > 0 {
            self.reaps.push(n);
        }
        for d in out.iter_mut().take(n) {
            let io = self.outstanding.pop_front().unwrap();
            self.completed += 1;
            let failed = self.completed <= self.fail_first;
            let buf = &mut self.bufs[io.buf as usize];
            match io.op {
                Op::Read => {
                    self.ops[0] += 1;
                    for (i, blk) in buf.chunks_mut(LBA).enumerate() {
                        let lba = io.lba + i as u64;
                        match self.disk.get(&lba) {
                            Some(b) => blk.copy_from_slice(b),
                            None => blk.fill(0),
                        }
                        if self.corrupt_lba == Some(lba) {
                            blk[100] ^= 1;
                        }
                    }
                }
                Op::Write => {
                    self.ops[1] += 1;
                    if !failed {
                        for (i, blk) in buf.chunks(LBA).enumerate() {
                            self.disk.insert(io.lba + i as u64, blk.to_vec());
                        }
                    }
                }
                Op::Flush => {}
            }
            let status = if failed { IoStatus::Nvme(Status { sct: StatusCodeType::GENERIC, sc: 6, crd: self.crd, more: false, dnr: self.dnr }) } else { IoStatus::Ok };
            *d = IoDone { tag: io.tag, status };
            if let Some((after, stop)) = &self.stop_after {
                if self.completed >= *after {
                    stop.request();
                }
            }
        }
        Ok(n)
    }
    fn ready(&self, n: usize) -> Option<bool> {
        if !self.can_look {
            return None;
        }
        if self.looks_left.get() > 0 {
            self.looks_left.set(self.looks_left.get() - 1);
            return Some(false);
        }
        self.looks_left.set(self.looks_per_batch);
        Some(self.outstanding.len() >= n)
    }
    fn buf_write(&mut self, buf: u32, off: usize, data: &[u8]) {
        self.bufs[buf as usize][off..off + data.len()].copy_from_slice(data);
    }
    fn buf_read(&self, buf: u32, off: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.bufs[buf as usize][off..off + out.len()]);
    }
    fn counters(&self) -> QueueCounters {
        QueueCounters::default()
    }
    fn retry_delays(&self) -> [Duration; 3] {
        self.delays
    }
    fn in_flight(&self) -> usize {
        self.outstanding.len()
    }
}

fn clock() -> Clock {
    static CLOCK: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();
    *CLOCK.get_or_init(Clock::calibrate)
}

/// A job of `ios` I/Os of 4 KiB over 1 MiB at queue depth 8.
fn spec(rw: Rw, ios: u64) -> JobSpec {
    JobSpec {
        rw,
        bs: 4096,
        iodepth: 8,
        rwmixread: 50,
        offset: 0,
        size: 1 << 20,
        size_given: true,
        runtime: None,
        ios: Some(ios),
        ramp: Duration::ZERO,
        verify: None,
        scramble: true,
        batch: 0,
        batch_complete: 0,
        reap_max: 0,
        split_lat: false,
        rate_iops: None,
        think: None,
        sync_every: 0,
        end_sync: false,
        log_ns: None,
        numjobs: 1,
        cpus: vec![],
        continue_on_error: false,
        seed: 1,
        random_map: false, distribution: Default::default(), files: 1, spread_threads: true,
        reliability: Reliability::default(),
        stop: Stop::new(),
    }
}

/// Run `spec` on `q` as thread 0.
fn run(spec: &JobSpec, q: &mut FakeQueue) -> ThreadResult {
    let geo = Geometry { nsid: 1, lba_size: LBA as u32, blocks: 1 << 20, max_transfer: 1 << 20 };
    crate::engine::validate(spec, &geo).unwrap();
    let progress = Progress::default();
    let ctx = Ctx { spec, clock: clock(), geo, progress: &progress, polled: true, new_pass: None };
    let r = worker(&ctx, q, 0).unwrap();
    assert_eq!(q.outstanding.len(), 0, "the run ended with I/Os outstanding");
    r
}

#[test]
fn a_run_of_n_ios_counts_exactly_n_with_their_bytes() {
    for (rw, reads, writes) in [(Rw::Randread, 1000, 0), (Rw::Randwrite, 0, 1000), (Rw::Read, 1000, 0), (Rw::Write, 0, 1000)] {
        let s = spec(rw, 1000);
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        let r = run(&s, &mut q);
        assert_eq!((r.read.ios, r.write.ios), (reads, writes), "{rw:?}");
        assert_eq!((r.read.bytes, r.write.bytes), (reads * 4096, writes * 4096), "{rw:?}");
        assert_eq!(r.read.lat.len() + r.write.lat.len(), 1000, "{rw:?}: one latency per I/O");
        assert_eq!(q.completed, 1000);
        assert_eq!((r.errors, r.mismatches), (0, 0));
        assert!(q.lbas.iter().all(|&(lba, blocks)| blocks == 8 && lba % 8 == 0 && lba + 8 <= 2048), "{rw:?}: every I/O inside the region");
    }
}

#[test]
fn the_queue_depth_is_never_exceeded_and_is_reached() {
    let s = spec(Rw::Randread, 500);
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    // Completions trickle in: the loop refills as slots free up.
    q.complete_at_most = 3;
    let r = run(&s, &mut q);
    assert_eq!(r.read.ios, 500);
    assert_eq!(q.most_outstanding, 8);
}

#[test]
fn ios_the_path_does_not_accept_are_submitted_again_and_counted_once() {
    for rw in [Rw::Randread, Rw::Randrw] {
        let mut s = spec(rw, 300);
        s.verify = Some(VerifySpec { seed: 3, only: false });
        for verify in [false, true] {
            let s = JobSpec { verify: if verify { s.verify } else { None }, ..s.clone() };
            let mut q = FakeQueue::new(s.iodepth, s.bs);
            q.accept_at_most = 3;
            let r = run(&s, &mut q);
            assert_eq!(r.read.ios + r.write.ios, 300, "{rw:?} verify={verify}");
            assert_eq!(r.mismatches, 0);
        }
    }
}

#[test]
fn a_failed_io_with_dnr_clear_is_retried_and_succeeds() {
    let s = spec(Rw::Randread, 100);
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    q.fail_first = 2;
    let r = run(&s, &mut q);
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    assert_eq!(r.recovery.retries, 2);
    assert_eq!(r.read.ios, 100, "the retries complete the I/Os, counted once");
    assert_eq!(q.completed, 102);
}

#[test]
fn a_retry_waits_the_delay_its_completion_asks_for() {
    // CRD 2 names the path's second delay: 50 ms here. The two failed
    // I/Os are submitted again no sooner; the run waits for them.
    let s = spec(Rw::Randread, 20);
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    q.fail_first = 2;
    q.crd = 2;
    q.delays = [Duration::from_secs(9), Duration::from_millis(50), Duration::ZERO];
    let r = run(&s, &mut q);
    assert_eq!((r.errors, r.recovery.retries, r.read.ios), (0, 2, 20), "{:?}", r.first_error);
    let first = q.submitted_at[0];
    let last = *q.submitted_at.last().unwrap();
    assert!(last - first >= Duration::from_millis(50), "the retries went out after {:?}", last - first);
    // CRD 0 (or a path with no delays): at once, as before.
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    q.fail_first = 2;
    q.delays = [Duration::from_secs(9); 3];
    let r = run(&s, &mut q);
    assert_eq!((r.errors, r.recovery.retries), (0, 2));
    assert!(*q.submitted_at.last().unwrap() - q.submitted_at[0] < Duration::from_secs(9));
}

#[test]
fn a_failed_io_with_dnr_set_is_not_retried_and_ends_the_run() {
    let s = spec(Rw::Randread, 100);
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    q.fail_first = 1;
    q.dnr = true;
    let r = run(&s, &mut q);
    assert_eq!((r.errors, r.recovery.retries), (1, 0));
    assert!(r.first_error.as_deref().unwrap().starts_with("read of 8 blocks at LBA"), "{:?}", r.first_error);
    assert!(r.read.ios < 100, "stopped at the error, drained what was in flight");
    // The failed one is an error of its direction, not a completed I/O.
    assert_eq!(r.read.errors, 1);
    assert_eq!(r.read.ios + r.read.errors, q.completed);
    assert_eq!(r.read.lat.len(), r.read.ios);
}

#[test]
fn failed_ios_are_counted_apart_not_in_ios_bytes_or_latency() {
    // As fio: 10 of 100 fail (DNR set, no retry), the run goes on.
    for (rw, dir) in [(Rw::Randread, 0), (Rw::Randwrite, 1)] {
        let mut s = spec(rw, 100);
        s.continue_on_error = true;
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        q.fail_first = 10;
        q.dnr = true;
        let r = run(&s, &mut q);
        let (d, other) = if dir == 0 { (&r.read, &r.write) } else { (&r.write, &r.read) };
        assert_eq!((d.ios, d.errors, r.errors), (90, 10, 10), "{rw:?}");
        assert_eq!(d.bytes, 90 * 4096, "{rw:?}");
        assert_eq!(d.lat.len(), 90, "{rw:?}: one latency per successful I/O");
        assert_eq!((other.ios, other.errors), (0, 0), "{rw:?}");
        // And in the summary: IOPS from the 90, the 10 beside them.
        let sum = crate::report::RunSummary::new("fake".into(), vec![], std::slice::from_ref(&r), "test");
        let ds = if dir == 0 { &sum.read } else { &sum.write };
        assert_eq!((ds.ios, ds.errors, ds.lat_ns.n), (90, 10, 90));
        assert_eq!(ds.iops, 90.0 / (r.elapsed_ns.max(1) as f64 / 1e9));
        assert_eq!(sum.errors, 10);
    }
}

#[test]
fn errors_past_the_retry_limit_are_counted_and_the_run_goes_on_when_asked() {
    let mut s = spec(Rw::Randread, 50);
    s.continue_on_error = true;
    s.reliability = Reliability { io_timeout: Duration::from_secs(30), retries: 1 };
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    q.fail_first = 1000; // every I/O fails
    let r = run(&s, &mut q);
    assert_eq!(r.errors, 50, "each of the 50 failed after its one retry");
    assert_eq!(r.recovery.retries, 50);
    assert_eq!(q.completed, 100);
    assert_eq!((r.read.ios, r.read.errors, r.read.bytes, r.read.lat.len()), (0, 50, 0, 0), "no I/O succeeded");
    assert!(r.first_error.as_deref().unwrap().ends_with("(after 1 retries)"), "{:?}", r.first_error);
}

/// With verify, an I/O to a unit with an I/O in flight waits for it
/// rather than going elsewhere: a skewed pattern at depth 32 writes and
/// reads back exactly the units it does at depth 1 (fio's read-back count
/// does not move with the depth either).
#[test]
fn verify_holds_an_io_to_a_busy_unit_and_keeps_the_skew() {
    let io_set = |depth: usize| {
        let mut s = spec(Rw::Randwrite, 400);
        s.iodepth = depth;
        s.distribution = Distribution::Zipf { theta: 1.2, center: None };
        s.verify = Some(VerifySpec { seed: 5, only: false });
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        q.complete_at_most = 3;
        let r = run(&s, &mut q);
        assert_eq!((r.mismatches, r.errors), (0, 0), "depth {depth}: {:?}", r.first_mismatch);
        assert_eq!(r.write.ios, 400, "depth {depth}");
        let mut lbas = q.lbas.clone();
        lbas.sort_unstable();
        (lbas, r.verify_ios)
    };
    let (one, read_back) = io_set(1);
    assert!(read_back < 200, "a skewed pattern rewrites its hot units: {read_back} of 400 units read back");
    assert_eq!(io_set(32), (one, read_back));
}

#[test]
fn verify_passes_on_good_data_and_catches_a_corrupted_block() {
    let mut s = spec(Rw::Randrw, 400);
    s.size = 64 * 4096;
    s.verify = Some(VerifySpec { seed: 9, only: false });
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    let r = run(&s, &mut q);
    assert_eq!((r.mismatches, r.errors), (0, 0), "{:?}", r.first_mismatch);
    assert!(r.verified_blocks > 0);
    // Prefill (64 units) and read-back (every unit written) are not in the figures.
    assert_eq!(r.read.ios + r.write.ios, 400);
    assert!(r.verify_ios >= 64);

    let mut q = FakeQueue::new(s.iodepth, s.bs);
    q.corrupt_lba = Some(8 * 5 + 3);
    let r = run(&s, &mut q);
    assert!(r.mismatches > 0);
    assert!(r.first_mismatch.as_deref().unwrap().starts_with("LBA 43: "), "{:?}", r.first_mismatch);
}

#[test]
fn a_stop_ends_the_run_and_drains_what_is_in_flight() {
    let mut s = spec(Rw::Randread, 0);
    s.ios = None;
    s.runtime = Some(Duration::from_secs(3600));
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    q.stop_after = Some((1000, s.stop.clone()));
    let r = run(&s, &mut q);
    assert!(r.interrupted);
    // Stopped within a pass of the request: what was in flight, no more.
    assert!((1000..=1000 + 8).contains(&r.read.ios), "{}", r.read.ios);
    assert_eq!(q.completed, r.read.ios);
}

#[test]
fn rwmixread_proportions_hold() {
    for mix in [0u8, 30, 70, 100] {
        let mut s = spec(Rw::Randrw, 10_000);
        s.rwmixread = mix;
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        let r = run(&s, &mut q);
        assert_eq!(r.read.ios + r.write.ios, 10_000);
        let pct = r.read.ios as f64 / 100.0;
        assert!((pct - mix as f64).abs() < 3.0, "rwmixread {mix}: {pct}% reads");
        assert_eq!(q.ops, [r.read.ios, r.write.ios]);
    }
}

#[test]
fn a_fixed_completion_batch_reaps_exactly_that_many_every_time() {
    for can_look in [true, false] {
        let s = JobSpec { batch_complete: 4, ..spec(Rw::Randread, 1000) };
        let mut q = FakeQueue { can_look, ..FakeQueue::new(s.iodepth, s.bs) };
        let r = run(&s, &mut q);
        assert_eq!(r.read.ios, 1000);
        assert!(q.reaps.iter().all(|&n| n == 4), "can_look {can_look}: reaps of {:?}", q.reaps.iter().filter(|&&n| n != 4).collect::<Vec<_>>());
        assert_eq!(q.reaps.len(), 250);
    }
    let s = JobSpec { batch_complete: 9, ..spec(Rw::Randread, 10) };
    let geo = Geometry { nsid: 1, lba_size: LBA as u32, blocks: 1 << 20, max_transfer: 1 << 20 };
    let e = crate::engine::validate(&s, &geo).unwrap_err().to_string();
    assert!(e.contains("--batch-complete 9 is more than --iodepth 8"), "{e}");
}

#[test]
fn fios_reaping_takes_at_most_its_max_so_the_queue_stays_full() {
    // fio's defaults (iodepth_batch_submit = iodepth_batch_complete_max =
    // 1): reap one, submit one; every submission after the first fill is
    // made at the full depth, as fio's `IO depths` shows it.
    let s = JobSpec { batch: 1, reap_max: 1, ..spec(Rw::Randread, 1000) };
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    let r = run(&s, &mut q);
    assert_eq!(r.read.ios, 1000);
    assert!(q.reaps.iter().all(|&n| n == 1), "reaps of {:?}", q.reaps.iter().filter(|&&n| n != 1).collect::<Vec<_>>());
    // The first fill: depths 1..=8 (slots 1, 2-3, 4-7, 8-15); then 992 at 8.
    assert_eq!(r.depths.level, [1, 2, 4, 993, 0, 0, 0]);
    // A larger max takes what is ready, up to it.
    let s = JobSpec { batch: 1, reap_max: 3, ..spec(Rw::Randread, 1000) };
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    assert_eq!(run(&s, &mut q).read.ios, 1000);
    assert!(q.reaps.iter().all(|&n| n <= 3) && q.reaps.contains(&3));
    // Ours (0): whatever is ready, here all 8.
    let s = JobSpec { batch: 1, ..spec(Rw::Randread, 1000) };
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    assert_eq!(run(&s, &mut q).read.ios, 1000);
    assert!(q.reaps.iter().all(|&n| n == 8));
}

#[test]
fn a_polled_fixed_batch_spins_and_counts_every_look_that_found_it_not_ready() {
    // looks_left starts at 4: the phase first asks once whether it can look.
    let s = JobSpec { batch_complete: 4, ..spec(Rw::Randread, 1000) };
    let mut q = FakeQueue { can_look: true, looks_per_batch: 3, looks_left: 4.into(), ..FakeQueue::new(s.iodepth, s.bs) };
    let r = run(&s, &mut q);
    assert_eq!(r.read.ios, 1000);
    assert!(q.reaps.iter().all(|&n| n == 4));
    // 250 batches, each found not ready 3 times first.
    assert_eq!(r.empty_polls, 750);
}

#[test]
fn the_ios_in_flight_when_the_ramp_ends_are_noted_and_counted_once() {
    // fio counts an I/O when it submits it, after the ramp; we count
    // completions within the measured interval, and note the I/Os in
    // flight when the ramp ended so `nvme-bypass fio` can give fio's count.
    for (ramp, rw) in [(Duration::from_millis(20), Rw::Randrw), (Duration::from_millis(20), Rw::Randread), (Duration::ZERO, Rw::Randrw)] {
        let mut s = spec(rw, 0);
        s.ios = None;
        s.runtime = Some(Duration::from_millis(40));
        s.ramp = ramp;
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        // Completions trickle in, so a pass starts with I/Os in flight.
        q.complete_at_most = 3;
        let r = run(&s, &mut q);
        let [reads, writes] = r.ramp_in_flight;
        if ramp.is_zero() {
            assert_eq!((reads, writes), (0, 0), "no ramp: nothing was in flight when counting began");
            assert_eq!(q.completed, r.read.ios + r.write.ios, "no ramp: every I/O is counted");
            continue;
        }
        assert!((1..=8).contains(&(reads + writes)), "{rw:?}: {reads} + {writes} in flight at the ramp's end, at queue depth 8");
        if rw == Rw::Randread {
            assert_eq!(writes, 0);
        }
        // Their completions are within the measured interval, and counted
        // there once; the ramp's own are not.
        assert!(r.read.ios >= reads && r.write.ios >= writes);
        assert!(q.completed > r.read.ios + r.write.ios, "{rw:?}: the ramp's completions are not counted");
        assert_eq!(r.read.bytes + r.write.bytes, (r.read.ios + r.write.ios) * 4096);
    }
}

#[test]
fn a_write_protected_namespace_refuses_a_job_that_writes_before_any_io() {
    use nvme_sim::{NamespaceFormat, SimConfig, SimController};
    let ns = NamespaceFormat { write_protected: true, ..Default::default() };
    let sim = SimController::start(SimConfig { idle_spins: 2000, namespace_formats: vec![ns], ..SimConfig::default() }).unwrap();
    let ctrl = nvme_driver::Controller::new(sim.registers(), sim.allocator(), Default::default()).unwrap();
    let target = crate::backend::userspace::UserspaceTarget::new("sim", ctrl, 1).unwrap();
    let fetched = || sim.stats().fetched.load(std::sync::atomic::Ordering::Relaxed);
    let before = fetched();
    let e = crate::engine::run(&target, &spec(Rw::Randwrite, 100), clock(), false).err().expect("refused").to_string();
    assert!(e.contains("namespace 1 is write protected") && e.contains("randread"), "{e}");
    assert_eq!(fetched(), before, "refused before any command, queue creation included");
    // Reads run.
    assert!(crate::engine::run(&target, &spec(Rw::Randread, 100), clock(), false).is_ok());
}

#[test]
fn a_job_of_a_size_with_a_ramp_does_all_of_its_ios_after_the_ramp() {
    // As fio's keep_running: the ramp's I/Os go over the region and are
    // not counted; then all 100 are, whatever the ramp did.
    let s = JobSpec { ramp: Duration::from_millis(30), ..spec(Rw::Randread, 100) };
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    let r = run(&s, &mut q);
    assert_eq!(r.read.ios, 100, "the I/Os after the ramp");
    assert!(q.completed > 100, "the ramp's I/Os besides: {}", q.completed);
}

#[test]
fn each_pass_over_the_region_is_announced_to_the_path() {
    // 1 MiB of 4 KiB units: 256 I/Os a pass; 768 I/Os make three.
    let s = spec(Rw::Randread, 768);
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    let geo = Geometry { nsid: 1, lba_size: LBA as u32, blocks: 1 << 20, max_transfer: 1 << 20 };
    let progress = Progress::default();
    let passes = std::sync::atomic::AtomicU32::new(0);
    let new_pass = || {
        passes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let ctx = Ctx { spec: &s, clock: clock(), geo, progress: &progress, polled: true, new_pass: Some(&new_pass) };
    let r = worker(&ctx, &mut q, 0).unwrap();
    assert_eq!(r.read.ios, 768);
    assert_eq!(passes.load(std::sync::atomic::Ordering::Relaxed), 3);
}

/// 100 random writes paced by `pacing` (rate or think time), verifying
/// or not: at least `at_least` long, all done, and the waits not counted
/// as empty polls.
fn paced_run(pacing: JobSpec, verify: bool, at_least: Duration, what: &str) {
    let mut s = pacing;
    if verify {
        s.verify = Some(VerifySpec { seed: 7, only: false });
    }
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    let t0 = std::time::Instant::now();
    let r = run(&s, &mut q);
    assert_eq!(r.write.ios, 100);
    assert!(t0.elapsed() >= at_least, "{what} verify {verify}: {:?}", t0.elapsed());
    assert!(r.empty_polls < 20, "{what} verify {verify}: {} empty polls", r.empty_polls);
}

#[test]
fn rate_iops_spaces_the_ios_and_its_waits_are_not_empty_polls() {
    // 2000 a second: I/O k due k/2000 s in, so 100 I/Os take at least
    // 99 intervals of 0.5 ms. The sleeps between them are no empty polls.
    for verify in [false, true] {
        paced_run(JobSpec { rate_iops: Some(2000.0), ..spec(Rw::Randwrite, 100) }, verify, Duration::from_micros(49_500), "rate");
    }
}

#[test]
fn thinktime_stalls_every_so_many_ios_and_its_waits_are_not_empty_polls() {
    // Every 10 issued I/Os: drain, then 2 ms of think time (the first
    // 0.5 ms spun). 100 I/Os stall 10 times: at least 20 ms. Counting
    // completions, as fio only those reaped before its check, and none
    // in the end's drain: at least 5 stalls of the 10.
    for (on_complete, verify) in [(false, false), (true, false), (false, true)] {
        let think = ThinkSpec { time: Duration::from_millis(2), spin: Duration::from_micros(500), blocks: 10, on_complete };
        let want = if on_complete { Duration::from_millis(10) } else { Duration::from_millis(20) };
        paced_run(JobSpec { think: Some(think), ..spec(Rw::Randwrite, 100) }, verify, want, if on_complete { "think, complete" } else { "think, issue" });
    }
}

#[test]
fn fsync_flushes_after_every_n_writes_before_the_next_io_and_end_fsync_once_more() {
    // fio's fsync=10 on 100 writes: a flush after writes 10, 20, ... 90
    // (none after the last: no I/O follows it), each alone in the queue;
    // end_fsync one more, not among the counted syncs.
    for (end, verify) in [(false, false), (true, false), (true, true)] {
        let mut s = JobSpec { sync_every: 10, end_sync: end, ..spec(Rw::Randwrite, 100) };
        if verify {
            s.verify = Some(VerifySpec { seed: 7, only: false });
        }
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        let r = run(&s, &mut q);
        assert_eq!(r.write.ios, 100, "end {end} verify {verify}");
        assert_eq!(r.sync_lat.as_ref().map(|h| h.len()), Some(9), "end {end} verify {verify}");
        assert_eq!(r.flushes, 9 + end as u64, "end {end} verify {verify}");
        assert_eq!(r.write.lat.len(), 100, "flushes are not in the writes' latencies");
    }
    // A job that does not write does not flush (fio's should_fsync).
    let r = run(&JobSpec { sync_every: 10, end_sync: true, ..spec(Rw::Randread, 100) }, &mut FakeQueue::new(4, 4096));
    assert_eq!((r.flushes, r.sync_lat.is_none()), (0, true));
}

#[test]
fn a_sequential_jobs_threads_start_spread_or_all_at_the_start_as_fios_clones() {
    // Two threads of a sequential read over 256 units: spread (bench),
    // thread 1 starts half-way; as fio's clones (offset_increment=0), at 0.
    let geo = Geometry { nsid: 1, lba_size: LBA as u32, blocks: 1 << 20, max_transfer: 1 << 20 };
    for (spread, first) in [(true, 128 * 8), (false, 0)] {
        let s = JobSpec { numjobs: 2, spread_threads: spread, ..spec(Rw::Read, 16) };
        crate::engine::validate(&s, &geo).unwrap();
        let progress = Progress::default();
        let ctx = Ctx { spec: &s, clock: clock(), geo, progress: &progress, polled: true, new_pass: None };
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        worker(&ctx, &mut q, 1).unwrap();
        assert_eq!(q.lbas[0].0, first, "spread_threads {spread}: thread 1's first I/O");
    }
}

/// The namespace's 512-byte sectors as the fake queue holds them.
fn sectors(q: &FakeQueue) -> Vec<(u64, Vec<u8>)> {
    let mut v: Vec<_> = q.disk.iter().map(|(&lba, b)| (lba, b.clone())).collect();
    v.sort();
    v
}

#[test]
fn writes_are_scrambled_as_fios_unless_off_or_verifying() {
    let word = |b: &[u8], at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap());
    // A sequential write of the whole 1 MiB region (256 writes of 4 KiB),
    // in the fast loop and in the general one (a job that flushes).
    for s in [spec(Rw::Write, 256), JobSpec { sync_every: 10, ..spec(Rw::Write, 256) }] {
        let mut q = FakeQueue::new(s.iodepth, s.bs);
        run(&s, &mut q);
        let secs = sectors(&q);
        assert_eq!(secs.len(), 2048);
        let distinct: std::collections::HashSet<&Vec<u8>> = secs.iter().map(|(_, b)| b).collect();
        assert_eq!(distinct.len(), 2048, "every sector differs (sync_every {})", s.sync_every);
        // fio's small_content_scramble: the sector's byte offset at the
        // start of one of its first eight 64-byte lines (the same in every
        // sector of a write), the time (s, ns) at bytes 48..64.
        for w in secs.chunks(8) {
            let (lba0, first) = (&w[0].0, &w[0].1);
            let (sec, nsec) = (word(first, 48), word(first, 56));
            assert!(nsec < 1_000_000_000 && (sec, nsec) != (0, 0));
            let line = (((nsec ^ (lba0 * LBA as u64)) & 7) * 64) as usize;
            for (lba, b) in w {
                assert_eq!(word(b, line), lba * LBA as u64, "LBA {lba}: its offset at byte {line}");
                assert_eq!((word(b, 48), word(b, 56)), (sec, nsec), "LBA {lba}: the write's time");
            }
        }
    }
    // scramble_buffers=0: every block is the thread's one pattern.
    let s = JobSpec { scramble: false, ..spec(Rw::Write, 256) };
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    run(&s, &mut q);
    let blocks: std::collections::HashSet<Vec<u8>> = sectors(&q).chunks(8).map(|w| w.iter().flat_map(|(_, b)| b.clone()).collect()).collect();
    assert_eq!(blocks.len(), 1, "unscrambled, every 4 KiB block alike");
    // Verifying: the stamps are written as they are, and check.
    let mut s = spec(Rw::Randwrite, 300);
    s.verify = Some(VerifySpec { seed: 9, only: false });
    let mut q = FakeQueue::new(s.iodepth, s.bs);
    let r = run(&s, &mut q);
    assert_eq!((r.mismatches, r.errors), (0, 0));
    assert!(r.verified_blocks > 0);
    for (lba, b) in sectors(&q) {
        assert_eq!(crate::engine::verify::check_block(&b, lba, 9, None), Ok(()), "LBA {lba}: a stamp, not scrambled");
    }
}

#[test]
fn a_paths_own_scramble_stores_what_the_default_copies() {
    // DmaRegion's words (the kernel paths' and our driver's buffers) and
    // the default's copies through buf_write give the same bytes.
    let s = crate::backend::Scramble::new(3 * 4096, 5_123_456_789);
    assert_eq!((s.sec, s.nsec), (5, 123_456_789));
    let mut q = FakeQueue::new(2, 4096);
    q.buf_scramble(1, 4096, s);
    let mut want = vec![0u8; 4096];
    s.to_slice(&mut want);
    assert_eq!(q.bufs[1], want);
    assert!(q.bufs[0].iter().all(|&b| b == 0), "only its own buffer");
    let mem = nvme_hal::HostMemory::plain().map(8192).unwrap();
    s.to_region(&mem, 4096, 4096);
    let mut got = vec![0u8; 4096];
    mem.copy_to(4096, &mut got);
    assert_eq!(got, want);
    // Only the three words of each sector change: 24 bytes of 512.
    assert!(want.iter().filter(|&&b| b != 0).count() <= 8 * 24);
}
