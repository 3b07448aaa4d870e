//! One run summed up: per direction, latency, CPU per I/O, the run's
//! context. Every report (text, JSON, compare and sweep tables) reads this.

use crate::engine::{DirResult, ThreadResult};
use crate::measure::cpu::{self, ThreadCpu};
pub use crate::measure::cpu::{CpuSummary, SystemSummary};
use crate::measure::stats::{new_histogram, LatSummary, SystemCpu};
use serde::Serialize;


/// Per-direction summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DirSummary {
    /// I/Os.
    pub ios: u64,
    /// Bytes.
    pub bytes: u64,
    /// I/Os per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Latency, ns.
    pub lat_ns: LatSummary,
    /// I/Os that failed: not in the I/Os, IOPS, bandwidth or latency above
    /// (as in fio).
    pub errors: u64,
    /// fio's submission latency, when measured apart (`DirResult::slat`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slat_ns: Option<LatSummary>,
    /// fio's completion latency, when measured apart (`DirResult::clat`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clat_ns: Option<LatSummary>,
}

impl DirSummary {
    fn of(d: &DirResult, elapsed_ns: u64) -> Self {
        let secs = elapsed_ns.max(1) as f64 / 1e9;
        DirSummary {
            ios: d.ios,
            bytes: d.bytes,
            iops: d.ios as f64 / secs,
            bw_bytes: d.bytes as f64 / secs,
            lat_ns: LatSummary::of(&d.lat),
            errors: d.errors,
            slat_ns: d.slat.as_ref().map(LatSummary::of),
            clat_ns: d.clat.as_ref().map(LatSummary::of),
        }
    }
}

/// System-wide CPU over the union of the threads' measured intervals: from
/// the /proc/stat reading of the thread that started first to that of the
/// thread that ended last, with the union's length in ns. (Threads start
/// and end apart: a reading around one thread's interval would miss work
/// the others did outside it, and be divided by another thread's time.)
pub fn system_over_union(threads: &[ThreadResult]) -> Option<(SystemCpu, u64)> {
    let first = threads.iter().filter(|t| t.system_start.is_some()).min_by_key(|t| t.start_mono_ns)?;
    let last = threads.iter().filter(|t| t.system_end.is_some()).max_by_key(|t| t.end_mono_ns)?;
    Some((last.system_end?.since(&first.system_start?), last.end_mono_ns.saturating_sub(first.start_mono_ns)))
}

/// System-wide CPU for `own`, shared with every thread in `all` that ran
/// during `own`'s interval (the other jobs and clones of a fio wave; `own`'s
/// threads are among them): over the union of all their intervals, per I/O
/// of all of them, as [`system_over_union`] and [`SystemSummary::of`] take
/// one run's threads. The machine's busy time is theirs together, so it is
/// not divided by `own`'s I/Os alone, and every job of a wave shows the same
/// figure. A thread that ran for part of the interval counts whole.
pub fn system_shared(own: &[ThreadResult], all: &[&ThreadResult]) -> Option<SystemSummary> {
    let start = own.iter().map(|t| t.start_mono_ns).min()?;
    let end = own.iter().map(|t| t.end_mono_ns).max()?;
    let alongside: Vec<ThreadResult> = all.iter().filter(|t| t.start_mono_ns < end && t.end_mono_ns > start).map(|&t| t.clone()).collect();
    let (c, span) = system_over_union(&alongside)?;
    let cpu: Vec<ThreadCpu> = alongside.iter().map(thread_cpu).collect();
    Some(SystemSummary::of(c, &cpu, span))
}

/// One run of one path, summarized.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// Path name.
    pub backend: String,
    /// True when the device is emulated (QEMU's NVMe model).
    pub emulated: bool,
    /// Why it is emulated, in words.
    pub emulated_note: Option<String>,
    /// True when the controller is our in-process simulator (its figures
    /// are labelled SIMULATED, never EMULATED).
    pub simulated: bool,
    /// What the simulator was, in words.
    pub simulated_note: Option<String>,
    /// Facts about the target.
    pub target: Vec<(String, String)>,
    /// Threads.
    pub threads: usize,
    /// Measured wall time, ns (longest thread; CLOCK_MONOTONIC).
    pub elapsed_ns: u64,
    /// Reads.
    pub read: DirSummary,
    /// Writes.
    pub write: DirSummary,
    /// All I/Os per second.
    pub iops: f64,
    /// All bytes per second.
    pub bw_bytes: f64,
    /// Latency of all I/Os, ns.
    pub lat_ns: LatSummary,
    /// CPU accounting of the benchmark threads.
    pub cpu: CpuSummary,
    /// Doorbell / syscall counters per I/O.
    pub sq_doorbells_per_io: f64,
    /// Completion doorbells per I/O.
    pub cq_doorbells_per_io: f64,
    /// MMIO writes per I/O.
    pub mmio_writes_per_io: f64,
    /// System calls per I/O.
    pub syscalls_per_io: f64,
    /// Completions rejected as protocol errors.
    pub rejected_completions: u64,
    /// Blocks verified / mismatched.
    pub verified_blocks: u64,
    /// Mismatches.
    pub mismatches: u64,
    /// The first mismatch.
    pub first_mismatch: Option<String>,
    /// Failed I/Os.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Stopped by a signal.
    pub interrupted: bool,
    /// Clock used for latencies.
    pub clock: String,
    /// The kernel's clocksource (what CLOCK_MONOTONIC reads), when sysfs says.
    pub clocksource: Option<String>,
    /// Whether the kernel accounts interrupt time exactly
    /// (CONFIG_IRQ_TIME_ACCOUNTING): true, false, or null when unknown.
    /// Without it, the system-wide kernel CPU of an interrupt-driven path is
    /// a lower bound.
    pub irq_time_accounting: Option<bool>,
    /// How `irq_time_accounting` was decided.
    pub irq_time_accounting_how: String,
    /// True when the path waits for interrupts (not polled); None when the
    /// caller did not say.
    pub interrupt_driven: Option<bool>,
    /// Core-to-core cache line latency before / after the run (simulator), ns.
    pub core_to_core_ns: Option<(Option<f64>, Option<f64>)>,
    /// Right after the run (simulator): the driver's CPU's multiply speed
    /// while the simulator's CPU multiplies too, over its speed while that
    /// CPU only pauses (`c2c::core_share`); clearly under 1 means the two
    /// share a core.
    pub core_share: Option<crate::measure::c2c::CoreShare>,
    /// System-wide CPU over the measured interval (/proc/stat deltas), so
    /// interrupt and softirq completion work on other cores counts.
    pub system: Option<SystemSummary>,
}

impl RunSummary {
    /// Summarize thread results.
    pub fn new(backend: String, target: Vec<(String, String)>, threads: &[ThreadResult], clock: &str) -> Self {
        let per_thread: Vec<ThreadCpu> = threads.iter().map(thread_cpu).collect();
        let elapsed_ns = threads.iter().map(|t| t.elapsed_ns).max().unwrap_or(0);
        let mut read = DirResult::default();
        let mut write = DirResult::default();
        for t in threads {
            read.add(&t.read);
            write.add(&t.write);
        }
        let mut lat = new_histogram();
        lat.add(&read.lat).unwrap();
        lat.add(&write.lat).unwrap();
        let ios: u64 = threads.iter().map(|t| t.ios()).sum();
        let per = |x: u64| if ios == 0 { 0.0 } else { x as f64 / ios as f64 };
        let secs = elapsed_ns.max(1) as f64 / 1e9;
        let irq = crate::measure::irqtime::detect();
        RunSummary {
            backend,
            emulated: false,
            emulated_note: None,
            simulated: false,
            simulated_note: None,
            target,
            threads: threads.len(),
            elapsed_ns,
            iops: ios as f64 / secs,
            bw_bytes: (read.bytes + write.bytes) as f64 / secs,
            read: DirSummary::of(&read, elapsed_ns),
            write: DirSummary::of(&write, elapsed_ns),
            lat_ns: LatSummary::of(&lat),
            cpu: CpuSummary::of(&per_thread),
            sq_doorbells_per_io: per(threads.iter().map(|t| t.counters.sq_doorbells).sum()),
            cq_doorbells_per_io: per(threads.iter().map(|t| t.counters.cq_doorbells).sum()),
            mmio_writes_per_io: per(threads.iter().map(|t| t.counters.mmio_writes).sum()),
            syscalls_per_io: per(threads.iter().map(|t| t.counters.syscalls).sum()),
            rejected_completions: threads.iter().map(|t| t.counters.rejected_completions).sum(),
            verified_blocks: threads.iter().map(|t| t.verified_blocks).sum(),
            mismatches: threads.iter().map(|t| t.mismatches).sum(),
            first_mismatch: threads.iter().find_map(|t| t.first_mismatch.clone()),
            errors: threads.iter().map(|t| t.errors).sum(),
            first_error: threads.iter().find_map(|t| t.first_error.clone()),
            interrupted: threads.iter().any(|t| t.interrupted),
            clock: clock.into(),
            clocksource: crate::measure::clock::kernel_clocksource(),
            irq_time_accounting: irq.on,
            irq_time_accounting_how: irq.how,
            interrupt_driven: None,
            core_to_core_ns: None,
            core_share: None,
            system: system_over_union(threads).map(|(c, span)| SystemSummary::of(c, &per_thread, span)),
        }
    }

    /// True when the system-wide kernel CPU is known to be a lower bound:
    /// an interrupt-driven path on a kernel that does not account interrupt
    /// time (its interrupts between timer ticks are not seen).
    pub fn kernel_cpu_lower_bound(&self) -> bool {
        self.interrupt_driven == Some(true) && self.irq_time_accounting == Some(false)
    }

    /// The system ceiling (modelled): 1 s / (system-wide busy CPU per I/O
    /// less the benchmark threads' empty-poll CPU per I/O), what one core
    /// would do with a device that never makes the poller wait. compare's
    /// and sweep's ceiling; None without system-wide figures.
    pub fn useful_ceiling_iops(&self) -> Option<f64> {
        cpu::useful_ceiling(&self.cpu, self.system.as_ref())
    }

    /// The system ceiling (modelled); see [`Self::useful_ceiling_iops`].
    pub fn system_ceiling_iops_modelled(&self) -> Option<f64> {
        self.useful_ceiling_iops()
    }

    /// The thread ceiling (modelled): 1 s / the benchmark threads' own
    /// useful CPU per I/O (their clocks only: kernel work on other cores,
    /// interrupts and softirqs, is not in it). None when that cost is 0.
    pub fn thread_ceiling_iops_modelled(&self) -> Option<f64> {
        cpu::iops_per_core_at(self.cpu.useful_cpu_ns_per_io)
    }

    /// The JSON of this summary, with each modelled figure named so: the
    /// CPU accounting's ceiling is `thread_ceiling_iops_modelled`, and
    /// `system_ceiling_iops_modelled` sits beside the system-wide figures.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(c) = v.get_mut("cpu") {
            name_thread_ceiling(c);
        }
        if let Some(o) = v.as_object_mut() {
            o.insert("thread_ceiling_iops_modelled".into(), serde_json::json!(self.thread_ceiling_iops_modelled()));
            o.insert("system_ceiling_iops_modelled".into(), serde_json::json!(self.system_ceiling_iops_modelled()));
        }
        v
    }
}

/// Serialize an optional summary as [`RunSummary::to_json`] does (for
/// `#[serde(serialize_with)]` on reports that hold one).
pub fn serialize_opt<S: serde::Serializer>(s: &Option<RunSummary>, ser: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize as _;
    s.as_ref().map(RunSummary::to_json).serialize(ser)
}

/// In a serialized [`CpuSummary`], name its ceiling for what it is: the
/// thread ceiling (modelled).
pub fn name_thread_ceiling(cpu: &mut serde_json::Value) {
    if let Some(o) = cpu.as_object_mut() {
        if let Some(x) = o.remove("ceiling_iops_per_core") {
            o.insert("thread_ceiling_iops_modelled".into(), x);
        }
    }
}

/// What the CPU accounting needs of one thread's results.
fn thread_cpu(t: &ThreadResult) -> ThreadCpu {
    ThreadCpu {
        ios: t.ios(),
        elapsed_ns: t.elapsed_ns,
        user_ns: t.cpu_time.user_ns,
        sys_ns: t.cpu_time.sys_ns,
        cpu_ns: t.cpu_ns,
        polls: t.polls,
        empty_polls: t.empty_polls,
        empty_poll_ns: t.empty_poll_ns,
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    fn stat(busy_ns: u64) -> SystemCpu {
        SystemCpu { user_ns: busy_ns, ..Default::default() }
    }

    fn thread(i: usize, start: u64, end: u64, sys: Option<(u64, u64)>) -> ThreadResult {
        let mut t = ThreadResult { thread: i, start_mono_ns: start, end_mono_ns: end, elapsed_ns: end - start, ..Default::default() };
        t.read.ios = 1000;
        t.cpu_ns = 1;
        if let Some((a, b)) = sys {
            t.system_start = Some(stat(a));
            t.system_end = Some(stat(b));
        }
        t
    }

    #[test]
    fn proc_stat_covers_the_union_of_the_threads_intervals() {
        // Thread 0 runs 1.0-2.0 s, thread 1 starts later and ends later
        // (1.2-2.5 s); thread 2 lies inside both. Busy time is read from the
        // earliest start (thread 0's reading) to the latest end (thread 1's),
        // over the union, 1.5 s, not thread 0's 1 s.
        const S: u64 = 1_000_000_000;
        let ts = [
            thread(0, S, 2 * S, Some((10 * S, 11 * S))),
            thread(1, S + S / 5, 2 * S + S / 2, Some((10 * S + 1, 12 * S))),
            thread(2, S + S / 2, 2 * S, Some((10 * S + 2, 11 * S + 3))),
        ];
        let (c, span) = system_over_union(&ts).unwrap();
        assert_eq!((c.busy_ns(), span), (2 * S, S + S / 2));
        let s = RunSummary::new("t".into(), vec![], &ts, "test");
        let y = s.system.unwrap();
        assert_eq!(y.interval_ns, S + S / 2);
        assert_eq!(y.busy_ns_per_io, 2e9 / 3000.0);
        assert_eq!(y.cores_busy, 2.0 / 1.5, "busy over the union, not over one thread's interval");
        // The threads' order does not matter.
        let rev: Vec<ThreadResult> = ts.iter().rev().cloned().collect();
        assert_eq!(system_over_union(&rev).map(|(c, s)| (c.busy_ns(), s)), Some((2 * S, S + S / 2)));
        // No readings (e.g. /proc/stat unreadable): no system-wide figures.
        assert!(system_over_union(&[thread(0, 0, S, None)]).is_none());
        assert!(RunSummary::new("t".into(), vec![], &[thread(0, 0, S, None)], "test").system.is_none());
    }

    #[test]
    fn kernel_cpu_is_a_lower_bound_only_for_interrupts_without_irq_time_accounting() {
        let mut s = RunSummary::new("t".into(), vec![], &[thread(0, 0, 1, None)], "test");
        for (irq, intr, lower) in [
            (Some(false), Some(true), true),
            (Some(true), Some(true), false),
            (Some(false), Some(false), false),
            (None, Some(true), false),
            (Some(false), None, false),
        ] {
            s.irq_time_accounting = irq;
            s.interrupt_driven = intr;
            assert_eq!(s.kernel_cpu_lower_bound(), lower, "{irq:?} {intr:?}");
        }
    }
}
