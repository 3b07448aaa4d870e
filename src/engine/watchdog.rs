//! The watchdog: I/O timeouts and bounded retries, the slow path of the
//! phase loop (`phase.rs`). It costs the hot loop one comparison per pass (`t >=
//! next_check`) and nothing per I/O: which I/Os are in flight, since when,
//! and whether they were aborted or retried is worked out from per-slot
//! timestamps only when a check is due (every `check_every`, at most 100 ms).
//!
//! A check asks the path about the controller (fatal status, a reset by
//! another thread), then looks for I/Os outstanding longer than
//! `--io-timeout`: those are aborted (NVMe Abort); if an aborted I/O is still
//! outstanding a timeout later, or the Abort itself goes unanswered, the
//! controller is reset and the queue re-created (the Linux driver's order,
//! `nvme_timeout`). I/Os lost in a reset, and I/Os that failed with DNR clear
//! (or were aborted by us), are resubmitted up to `--retries` times; then
//! they count as failed. If the reset fails the run fails, and dropping the
//! target hands the controller back disabled. After Ctrl-C / SIGTERM the
//! timeout is at most `STOP_TIMEOUT`, and nothing is retried.

use crate::backend::{BackendError, Io, IoQueue, IoStatus};
use crate::engine::job::{RecoveryCounters, Reliability, Stop, ThreadResult};
use crate::engine::slots::{op_name, Slots};
use crate::engine::workload::Workload;
use crate::measure::clock::Clock;
use std::time::Duration;

/// After Ctrl-C / SIGTERM, outstanding I/Os get at most this long before
/// the watchdog aborts them and resets: an interrupted run ends promptly
/// even on a hung device.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

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

/// Per-thread watchdog state; see the module comment.
pub(crate) struct Watchdog {
    timeout: u64,
    timeout_dur: Duration,
    check_every: u64,
    /// Clock value of the next check.
    pub next_check: u64,
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
    pub pending: Vec<u32>,
    /// Per slot: clock value before which its pending resubmission waits
    /// (a completion's Command Retry Delay; 0: at once).
    not_before: Vec<u64>,
    /// The waits CRD 1, 2 and 3 ask for, in clock ticks (the path's
    /// [`IoQueue::retry_delays`](crate::backend::IoQueue::retry_delays)).
    retry_delays: [u64; 3],
    /// Said once that the path's own driver handles timeouts.
    warned: bool,
    /// Clock value when the controller was first seen paused (CSTS.PP),
    /// while it stays paused.
    paused_since: Option<u64>,
    /// Clock value when a pause ended: I/Os count as issued no earlier,
    /// since the controller did nothing with them before.
    resumed_at: u64,
    clock: Clock,
    stop: Stop,
}

impl Watchdog {
    pub fn new(depth: usize, clock: Clock, now: u64, r: Reliability, stop: Stop) -> Self {
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
            not_before: vec![0; depth],
            retry_delays: [0; 3],
            warned: false,
            paused_since: None,
            resumed_at: 0,
            clock,
            stop,
        }
    }

    /// The waits a completion's CRD 1-3 asks for before its retry.
    pub fn with_retry_delays(mut self, delays: [Duration; 3]) -> Self {
        self.retry_delays = delays.map(|d| if d.is_zero() { 0 } else { self.clock.ticks(d).max(1) });
        self
    }

    fn issued(&self, slot: usize, slots: &Slots) -> u64 {
        slots.io[slot].submit_ts.max(self.reissued[slot])
    }

    fn aborted(&self, slot: usize, slots: &Slots) -> bool {
        self.aborted_at[slot] != 0 && self.aborted_at[slot] >= self.issued(slot, slots)
    }

    /// May the I/O of `slot` be resubmitted? Counts the try if so.
    pub fn take_retry(&mut self, slot: usize, slots: &Slots) -> bool {
        if self.stop.requested() {
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

    pub fn retries_used(&self, slot: usize, slots: &Slots) -> u32 {
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
    pub fn retry_failed(&mut self, slot: usize, status: &IoStatus, slots: &Slots) -> bool {
        let retryable = match status {
            IoStatus::Nvme(s) => !s.dnr || self.aborted(slot, slots),
            // The kernel already retried what it could (nvme_core.max_retries).
            IoStatus::Errno(_) | IoStatus::Short { .. } | IoStatus::Ok => false,
        };
        if retryable && self.take_retry(slot, slots) {
            // The wait the controller asked for (CRD), counted from now.
            let crd = match status {
                IoStatus::Nvme(s) => s.crd as usize,
                _ => 0,
            };
            self.not_before[slot] = match crd {
                1..=3 if self.retry_delays[crd - 1] > 0 => self.clock.now() + self.retry_delays[crd - 1],
                _ => 0,
            };
            self.pending.push(slot as u32);
            true
        } else {
            false
        }
    }

    /// Put the I/Os waiting for a retry at the front of `ios` (issued
    /// now), those whose Command Retry Delay has passed; the others stay
    /// pending.
    pub fn resubmit(&mut self, ios: &mut Vec<Io>, slots: &Slots, wl: &Workload, blocks: u32, t: u64) -> usize {
        let mut n = 0;
        let (reissued, not_before) = (&mut self.reissued, &self.not_before);
        self.pending.retain(|&slot| {
            let s = slot as usize;
            if not_before[s] > t {
                return true;
            }
            reissued[s] = t;
            ios.push(slots.io[s].io(slot, wl, blocks));
            n += 1;
            false
        });
        n
    }

    /// Resubmit the I/O of `slot` at the next pass (a timed-out I/O whose
    /// retry is taken).
    pub fn retry_now(&mut self, slot: u32) {
        self.not_before[slot as usize] = 0;
        self.pending.push(slot);
    }

    /// Resubmitted I/Os the path did not accept wait for the next pass.
    pub fn not_accepted(&mut self, resubmitted: &[Io], accepted: usize) {
        for io in resubmitted.iter().skip(accepted) {
            self.not_before[io.buf as usize] = 0;
            self.pending.push(io.buf);
        }
    }

    /// Check at least every `ticks` (a latency log's entries are taken by
    /// the periodic check).
    pub fn check_at_least_every(&mut self, ticks: u64) {
        if ticks < self.check_every {
            // (the first check was due one old interval from the start)
            self.next_check = self.next_check - self.check_every + ticks;
            self.check_every = ticks;
        }
    }

    /// The periodic check. Returns the slots whose I/Os will never complete
    /// (lost in a reset), each with the reason, for the caller to resubmit
    /// or fail; errors end the run.
    pub fn check(
        &mut self,
        t: u64,
        q: &mut dyn IoQueue,
        slots: &Slots,
        wl: &Workload,
        rc: &mut RecoveryCounters,
    ) -> Result<Vec<(u32, String)>, BackendError> {
        self.next_check = t + self.check_every;
        let stopped = self.stop.requested();
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
            (0..idle.len()).filter(|&s| !idle[s] && t.saturating_sub(self.issued(s, slots).max(self.resumed_at)) > timeout).collect();
        if overdue.is_empty() {
            // Nothing waits on a pause (any more): the next one counts anew.
            self.paused_since = None;
            return Ok(lost);
        }
        // A controller that has paused processing (CSTS.PP: activating
        // firmware without a reset) completes nothing until it resumes: its
        // overdue I/Os wait as long as the pause may last (MTFA) before
        // they are aborted, as Linux's nvme_fw_act_work holds the queues,
        // and count as issued when it resumes. A longer pause is handled
        // as any overdue I/O (Linux resets then too).
        match (q.processing_paused(), self.paused_since) {
            (Some(max), _) => {
                // An interrupted run waits no longer than its stop timeout.
                let max = if stopped { max.min(timeout_dur) } else { max };
                let since = *self.paused_since.get_or_insert(t);
                if since == t {
                    rc.note(format!(
                        "the controller paused processing (CSTS.PP = 1, a firmware activation) with I/Os outstanding: they wait up to {} ms (its MTFA; the admin timeout when it reports none) before Abort",
                        max.as_millis()
                    ));
                }
                if t.saturating_sub(since) <= self.clock.ticks(max) {
                    return Ok(lost);
                }
            }
            // Resumed: every I/O counts as issued now, so none is overdue.
            (None, Some(_)) => {
                self.paused_since = None;
                self.resumed_at = t;
                return Ok(lost);
            }
            (None, None) => {}
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
        // The I/Os a reset would be for: aborted at an earlier check and
        // still not back a timeout later (and, below, those whose Abort
        // went unanswered).
        let mut stuck: Vec<u64> = aborted.iter().filter(|&&s| t.saturating_sub(self.aborted_at[s]) > timeout).map(|&s| s as u64).collect();
        let mut reset_now = !stuck.is_empty();
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
                    if r.escalate {
                        reset_now = true;
                        stuck.extend(&tags);
                    }
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
            match q.reset(&stuck, timeout_dur) {
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

/// What became of a failed I/O.
pub(crate) enum Failed {
    /// Resubmitted (the watchdog holds it); nothing else to do.
    Retried,
    /// Counted as an error (the first one's message kept).
    Counted,
}

/// A completion with an error status: retry it if its status allows and it
/// has retries left, else count it. Out of the completion loop's way.
#[cold]
#[inline(never)]
pub(crate) fn failed_io(wd: &mut Watchdog, res: &mut ThreadResult, slots: &Slots, wl: &Workload, slot: usize, status: &IoStatus, blocks: u32) -> Failed {
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
