//! What an I/O costs in CPU: the one place the figures of
//! docs/methodology.md ("CPU accounting") are computed. Plain arithmetic on
//! what the engine counted (thread clocks, empty polls, /proc/stat deltas);
//! no I/O, so every rule is tested below with made-up numbers.
//!
//! Three views: the benchmark threads' own CPU per I/O (raw), the share of
//! it not spent in empty polls (useful), and the whole machine's busy time
//! from /proc/stat, never taken below the threads' own clocks. The headline,
//! the per-core ceiling at the useful cost, combines the last two.

use crate::measure::stats::SystemCpu;
use serde::Serialize;

/// What one benchmark thread counted over its measured interval: the input
/// of every figure here.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThreadCpu {
    /// I/Os completed.
    pub ios: u64,
    /// Measured wall time, ns.
    pub elapsed_ns: u64,
    /// User-mode CPU time (getrusage), ns.
    pub user_ns: u64,
    /// Kernel-mode CPU time (getrusage), ns.
    pub sys_ns: u64,
    /// CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
    pub cpu_ns: u64,
    /// Loop iterations.
    pub polls: u64,
    /// Iterations that found nothing to submit or reap.
    pub empty_polls: u64,
    /// Wall time spent in those, ns.
    pub empty_poll_ns: u64,
}

impl ThreadCpu {
    /// Share of the loop's wall time spent in empty polls, 0 to 1.
    pub fn empty_share(&self) -> f64 {
        (self.empty_poll_ns as f64 / self.elapsed_ns.max(1) as f64).min(1.0)
    }

    /// CPU time spent on useful work, ns. Empty polls are timed in wall
    /// time and the thread's CPU time excludes moments it was preempted, so
    /// scale rather than subtract: the useful share of the CPU time is the
    /// share of the loop's wall time not spent in empty polls (exact for a
    /// thread that is never preempted, and still sound when the machine is
    /// busy).
    pub fn useful_ns(&self) -> f64 {
        self.cpu_ns as f64 * (1.0 - self.empty_share())
    }
}

/// `x / ios`, 0 when there were no I/Os.
fn per_io(x: f64, ios: u64) -> f64 {
    if ios == 0 { 0.0 } else { x / ios as f64 }
}

/// I/Os per second one fully used core does at `ns_per_io` of CPU per I/O
/// (None when the cost is not positive).
pub fn iops_per_core_at(ns_per_io: f64) -> Option<f64> {
    (ns_per_io > 0.0).then(|| 1e9 / ns_per_io)
}

/// fio's `usr_cpu` and `sys_cpu`, percent of `wall_ns`: the threads' own
/// clock (`cpu_ns`, CLOCK_THREAD_CPUTIME over the measured interval) split
/// in getrusage's user and system shares. getrusage's two times alone
/// apportion runtime by ticks and span more than the measured interval, so
/// over a short run they reached 300-900% of one thread. The clock's own
/// reads bracket the interval, so over a run of microseconds it too can
/// pass the wall time: a thread is at most 100% busy, and `wall_ns` (the
/// threads' wall times summed) caps it.
pub fn usr_sys_pct(user_ns: u64, sys_ns: u64, cpu_ns: u64, wall_ns: u64) -> (f64, f64) {
    let user_share = if user_ns + sys_ns == 0 { 1.0 } else { user_ns as f64 / (user_ns + sys_ns) as f64 };
    let wall = wall_ns.max(1);
    let pct = 100.0 * cpu_ns.min(wall) as f64 / wall as f64;
    (pct * user_share, pct * (1.0 - user_share))
}

/// CPU accounting of one thread or of all of them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuSummary {
    /// User-mode CPU time, ns.
    pub user_ns: u64,
    /// Kernel-mode CPU time, ns.
    pub sys_ns: u64,
    /// Thread CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
    pub cpu_ns: u64,
    /// User CPU per I/O, ns: `cpu_ns` in getrusage's user share (getrusage
    /// apportions a thread's runtime between user and system by ticks, in
    /// microseconds, so over a short run its two times alone can exceed the
    /// thread's own clock; split this way, user + kernel is the total).
    pub user_ns_per_io: f64,
    /// Kernel CPU per I/O, ns: `cpu_ns` in getrusage's system share.
    pub sys_ns_per_io: f64,
    /// All CPU per I/O (raw: includes empty polls), ns.
    pub cpu_ns_per_io: f64,
    /// CPU per I/O spent on useful work: raw CPU times the share of the
    /// loop's time not spent in polls that found nothing. The cost a faster
    /// device would leave, and so the per-core ceiling of the path.
    pub useful_cpu_ns_per_io: f64,
    /// Loop iterations.
    pub polls: u64,
    /// Iterations that found nothing to submit or reap.
    pub empty_polls: u64,
    /// Time in those, ns.
    pub empty_poll_ns: u64,
    /// Share of the loop's wall time spent in empty polls, percent.
    pub empty_poll_pct: f64,
    /// I/Os per second one fully used core would do at the useful cost.
    pub ceiling_iops_per_core: f64,
}

impl CpuSummary {
    /// The benchmark threads' own CPU per I/O, raw and useful.
    pub fn of(ts: &[ThreadCpu]) -> Self {
        let ios: u64 = ts.iter().map(|t| t.ios).sum();
        let user_ns: u64 = ts.iter().map(|t| t.user_ns).sum();
        let sys_ns: u64 = ts.iter().map(|t| t.sys_ns).sum();
        let cpu_ns: u64 = ts.iter().map(|t| t.cpu_ns).sum();
        let empty_poll_ns: u64 = ts.iter().map(|t| t.empty_poll_ns).sum();
        let wall: u64 = ts.iter().map(|t| t.elapsed_ns).sum();
        let useful = per_io(ts.iter().map(ThreadCpu::useful_ns).sum(), ios);
        let user_share = if user_ns + sys_ns == 0 { 1.0 } else { user_ns as f64 / (user_ns + sys_ns) as f64 };
        CpuSummary {
            user_ns,
            sys_ns,
            cpu_ns,
            user_ns_per_io: per_io(cpu_ns as f64 * user_share, ios),
            sys_ns_per_io: per_io(cpu_ns as f64 * (1.0 - user_share), ios),
            cpu_ns_per_io: per_io(cpu_ns as f64, ios),
            useful_cpu_ns_per_io: useful,
            polls: ts.iter().map(|t| t.polls).sum(),
            empty_polls: ts.iter().map(|t| t.empty_polls).sum(),
            empty_poll_ns,
            empty_poll_pct: if wall == 0 { 0.0 } else { (100.0 * empty_poll_ns as f64 / wall as f64).min(100.0) },
            ceiling_iops_per_core: iops_per_core_at(useful).unwrap_or(0.0),
        }
    }

    /// CPU per I/O the threads spent in empty polls (raw less useful), ns.
    pub fn empty_poll_ns_per_io(&self) -> f64 {
        self.cpu_ns_per_io - self.useful_cpu_ns_per_io
    }
}

/// System-wide CPU accounting of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SystemSummary {
    /// The raw deltas.
    pub cpu: SystemCpu,
    /// Wall time they cover, ns: the union of the threads' measured
    /// intervals.
    pub interval_ns: u64,
    /// True when /proc/stat showed less busy time than the benchmark
    /// threads' own CPU clocks, and the busy figures use the latter (scaled
    /// user/kernel split): tick-based accounting missed short busy bursts.
    pub busy_from_threads: bool,
    /// Cores busy on average: (user + system + irq + softirq) / wall time.
    pub cores_busy: f64,
    /// All busy CPU per I/O, ns.
    pub busy_ns_per_io: f64,
    /// User-mode CPU per I/O, ns.
    pub user_ns_per_io: f64,
    /// Kernel-mode CPU per I/O (system + irq + softirq), ns.
    pub kernel_ns_per_io: f64,
    /// Of which hard interrupts, ns per I/O.
    pub irq_ns_per_io: f64,
    /// Of which soft interrupts, ns per I/O.
    pub softirq_ns_per_io: f64,
    /// I/Os per second per busy core.
    pub iops_per_busy_core: f64,
}

impl SystemSummary {
    /// /proc/stat counts CPU time in ticks (USER_HZ, 10 ms): over less than
    /// 100 ticks per CPU its figures are off by more than a few percent
    /// (3 "cores busy" on a 2-CPU machine over 3 ms). None when the
    /// interval is long enough; else why the figures are not shown.
    pub fn too_short(&self) -> Option<String> {
        let need_ns = 100 * 1_000_000_000 / crate::measure::stats::user_hz();
        (self.interval_ns < need_ns).then(|| {
            format!(
                "not shown: /proc/stat counts in {} ms ticks, and the measured {:.0} ms is under the {} ms it needs; run longer",
                1000 / crate::measure::stats::user_hz(),
                self.interval_ns as f64 / 1e6,
                need_ns / 1_000_000
            )
        })
    }
}

impl SystemSummary {
    /// The machine's busy time over `elapsed_ns` of wall time, from the
    /// /proc/stat deltas `c` reconciled with the threads' own clocks.
    ///
    /// /proc/stat is sampled at timer ticks on most kernels (tick-based
    /// accounting, no IRQ time accounting): a CPU that wakes briefly for
    /// each interrupt and idles in between can look idle. The benchmark
    /// threads' own clocks are exact, so busy time is never taken below
    /// them: the larger of the two, with the user/kernel split scaled to
    /// match (or, when /proc/stat saw no busy tick at all, the threads' own
    /// user time and the rest as kernel).
    pub fn of(c: SystemCpu, ts: &[ThreadCpu], elapsed_ns: u64) -> Self {
        let ios: u64 = ts.iter().map(|t| t.ios).sum();
        // Each clock summed over the threads, then the larger of the sums.
        let rusage: u64 = ts.iter().map(|t| t.user_ns + t.sys_ns).sum();
        let clock: u64 = ts.iter().map(|t| t.cpu_ns).sum();
        let threads_cpu = rusage.max(clock);
        let stat_busy = c.busy_ns();
        let busy = stat_busy.max(threads_cpu);
        let (user, kernel) = if stat_busy > 0 {
            let scale = busy as f64 / stat_busy as f64;
            (c.user_ns as f64 * scale, c.kernel_ns() as f64 * scale)
        } else {
            let thread_user: u64 = ts.iter().map(|t| t.user_ns).sum();
            (thread_user as f64, (busy - thread_user.min(busy)) as f64)
        };
        let cores_busy = busy as f64 / elapsed_ns.max(1) as f64;
        let iops = ios as f64 / (elapsed_ns.max(1) as f64 / 1e9);
        SystemSummary {
            cpu: c,
            interval_ns: elapsed_ns,
            busy_from_threads: busy > stat_busy,
            cores_busy,
            busy_ns_per_io: per_io(busy as f64, ios),
            user_ns_per_io: per_io(user, ios),
            kernel_ns_per_io: per_io(kernel, ios),
            irq_ns_per_io: per_io(c.irq_ns as f64, ios),
            softirq_ns_per_io: per_io(c.softirq_ns as f64, ios),
            iops_per_busy_core: if cores_busy > 0.0 { iops / cores_busy } else { 0.0 },
        }
    }
}

/// The headline: the per-core ceiling at the useful cost, 1 s / (system-wide
/// busy CPU per I/O less what the benchmark threads spent in empty polls,
/// i.e. raw minus useful thread CPU). None without system-wide figures,
/// or with figures too short to show ([`SystemSummary::too_short`]): a
/// model is no better than what it is built from.
pub fn useful_ceiling(threads: &CpuSummary, system: Option<&SystemSummary>) -> Option<f64> {
    system.filter(|y| y.too_short().is_none()).and_then(|y| iops_per_core_at(y.busy_ns_per_io - threads.empty_poll_ns_per_io()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usr_and_sys_percent_split_the_thread_clock_and_stay_under_100() {
        // getrusage: 3 ms user, 1 ms system over a 1 ms run; the clock 0.8 ms.
        let (u, s) = usr_sys_pct(3_000_000, 1_000_000, 800_000, 1_000_000);
        assert!((u - 60.0).abs() < 1e-9 && (s - 20.0).abs() < 1e-9, "{u} {s}");
        // The clock past the wall time (microseconds of run): 100%.
        let (u, s) = usr_sys_pct(0, 5_000, 12_000, 10_000);
        assert!((u + s - 100.0).abs() < 1e-9 && u == 0.0, "{u} {s}");
        // No rusage ticks at all: user.
        assert_eq!(usr_sys_pct(0, 0, 500, 1000), (50.0, 0.0));
    }

    const S: u64 = 1_000_000_000;

    fn thread(ios: u64, elapsed_ns: u64, cpu_ns: u64, empty_poll_ns: u64) -> ThreadCpu {
        ThreadCpu { ios, elapsed_ns, user_ns: cpu_ns * 3 / 4, sys_ns: cpu_ns / 4, cpu_ns, polls: ios * 2, empty_polls: ios, empty_poll_ns }
    }

    #[test]
    fn user_and_kernel_per_io_split_the_threads_own_clock() {
        // Over a short run getrusage's ticks gave more user time than the
        // thread's clock ran (20.7 us against 17.5 us per I/O, a 3 ms fio
        // job): the split takes its shares, the clock its total.
        let t = ThreadCpu { ios: 10, elapsed_ns: 1000, user_ns: 300, sys_ns: 100, cpu_ns: 200, ..Default::default() };
        let c = CpuSummary::of(&[t]);
        assert_eq!((c.user_ns_per_io, c.sys_ns_per_io, c.cpu_ns_per_io), (15.0, 5.0, 20.0));
        let none = ThreadCpu { user_ns: 0, sys_ns: 0, ..t };
        assert_eq!(CpuSummary::of(&[none]).user_ns_per_io, 20.0);
    }

    fn stat(user: u64, system: u64, irq: u64, softirq: u64) -> SystemCpu {
        SystemCpu { user_ns: user, system_ns: system, irq_ns: irq, softirq_ns: softirq, idle_ns: 0, steal_ns: 0 }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn useful_is_raw_less_the_empty_poll_share_exactly() {
        // A poller on a whole core for 1 s, 40% of its wall time in empty polls.
        let t = thread(1_000_000, S, S, 400_000_000);
        let c = CpuSummary::of(&[t]);
        assert_eq!(c.cpu_ns_per_io, 1000.0);
        assert!(close(c.useful_cpu_ns_per_io, 600.0), "{}", c.useful_cpu_ns_per_io);
        assert!(close(c.empty_poll_ns_per_io(), 400.0));
        assert!(close(c.cpu_ns_per_io - c.useful_cpu_ns_per_io, c.empty_poll_ns_per_io()));
        assert!(close(c.empty_poll_pct, 40.0));
        assert!(close(c.ceiling_iops_per_core, 1e9 / 600.0));
        // Preempted for half the wall time: CPU time halves, the share stays.
        let t = thread(1_000_000, S, S / 2, 400_000_000);
        assert!(close(CpuSummary::of(&[t]).useful_cpu_ns_per_io, 300.0));
        // No empty polls: useful is raw.
        let c = CpuSummary::of(&[thread(1000, S, 5_000_000, 0)]);
        assert_eq!(c.useful_cpu_ns_per_io, c.cpu_ns_per_io);
    }

    #[test]
    fn empty_polls_never_count_for_more_than_all_the_time() {
        // Timed in wall time from the pass's clock read, empty polls can sum
        // past the measured interval by a pass; useful stays at 0, not below.
        let c = CpuSummary::of(&[thread(10, 1000, 1000, 1500)]);
        assert_eq!(c.useful_cpu_ns_per_io, 0.0);
        assert_eq!(c.empty_poll_pct, 100.0);
        assert_eq!(c.ceiling_iops_per_core, 0.0, "no ceiling from a zero cost");
    }

    #[test]
    fn several_threads_each_scaled_by_their_own_share() {
        // One idle poller (90% empty) and one busy thread (no empty polls):
        // the useful share is taken per thread, not from the pooled times.
        let a = thread(100_000, S, S, 900_000_000);
        let b = thread(300_000, S, S, 0);
        let c = CpuSummary::of(&[a, b]);
        assert_eq!(c.cpu_ns_per_io, 2e9 / 400_000.0);
        assert!(close(c.useful_cpu_ns_per_io, (0.1e9 + 1e9) / 400_000.0));
        assert!(close(c.empty_poll_pct, 45.0));
        assert_eq!(c.polls, 800_000);
        assert_eq!(c.empty_polls, 400_000);
    }

    #[test]
    fn no_ios_or_no_threads_give_zeros_not_nan() {
        for ts in [&[][..], &[ThreadCpu::default()][..], &[thread(0, S, S, S / 2)][..]] {
            let c = CpuSummary::of(ts);
            for x in [c.cpu_ns_per_io, c.useful_cpu_ns_per_io, c.user_ns_per_io, c.sys_ns_per_io, c.empty_poll_pct, c.ceiling_iops_per_core] {
                assert!(x.is_finite(), "{c:?}");
            }
            assert_eq!(c.cpu_ns_per_io, 0.0);
            let y = SystemSummary::of(stat(S, S, 0, 0), ts, 0);
            assert_eq!(y.busy_ns_per_io, 0.0);
            assert!(y.cores_busy.is_finite() && y.iops_per_busy_core.is_finite(), "{y:?}");
        }
    }

    #[test]
    fn busy_time_is_user_system_irq_softirq_when_ticks_see_more_than_the_threads() {
        // 2 s of ticks over 1 s of wall time, threads' clocks 1 s: ticks win.
        let y = SystemSummary::of(stat(500_000_000, 1_000_000_000, 100_000_000, 400_000_000), &[thread(1_000_000, S, S, 0)], S);
        assert!(!y.busy_from_threads);
        assert_eq!(y.busy_ns_per_io, 2000.0);
        assert_eq!(y.cores_busy, 2.0);
        assert_eq!(y.user_ns_per_io, 500.0);
        assert_eq!(y.kernel_ns_per_io, 1500.0);
        assert_eq!(y.irq_ns_per_io, 100.0);
        assert_eq!(y.softirq_ns_per_io, 400.0);
        assert_eq!(y.iops_per_busy_core, 500_000.0);
        assert_eq!(y.iops_per_busy_core, 1e9 / y.busy_ns_per_io, "IOPS per busy core is 1 s over busy CPU per I/O");
    }

    #[test]
    fn busy_time_is_never_below_the_threads_clocks() {
        // Ticks missed most of an interrupt-driven thread: 0.5 s seen, 1 s
        // on the thread's clock. Busy is 1 s, user/kernel scaled by 2.
        let y = SystemSummary::of(stat(100_000_000, 300_000_000, 0, 100_000_000), &[thread(1_000_000, S, S, 0)], S);
        assert!(y.busy_from_threads);
        assert_eq!(y.busy_ns_per_io, 1000.0);
        assert_eq!(y.cores_busy, 1.0);
        assert!(close(y.user_ns_per_io, 200.0) && close(y.kernel_ns_per_io, 800.0), "{y:?}");
        assert!(close(y.user_ns_per_io + y.kernel_ns_per_io, y.busy_ns_per_io));
        // The raw interrupt figures are /proc/stat's, not scaled.
        assert_eq!(y.softirq_ns_per_io, 100.0);
        // Equal: not taken from the threads.
        assert!(!SystemSummary::of(stat(S, 0, 0, 0), &[thread(10, S, S, 0)], S).busy_from_threads);
    }

    #[test]
    fn the_floor_is_the_larger_thread_clock_summed_over_threads() {
        // getrusage (user + sys) above the thread clock: it is the floor.
        let t = ThreadCpu { ios: 1000, elapsed_ns: S, user_ns: 600_000_000, sys_ns: 600_000_000, cpu_ns: S, ..Default::default() };
        let y = SystemSummary::of(stat(0, 10_000_000, 0, 0), &[t], S);
        assert_eq!(y.busy_ns_per_io, 1_200_000.0);
        // Two threads: each clock summed first, then the larger sum; the
        // floor is not the sum of per-thread maxima.
        let a = ThreadCpu { ios: 1000, elapsed_ns: S, user_ns: 600_000_000, sys_ns: 0, cpu_ns: 400_000_000, ..Default::default() };
        let b = ThreadCpu { ios: 1000, elapsed_ns: S, user_ns: 100_000_000, sys_ns: 0, cpu_ns: 500_000_000, ..Default::default() };
        let y = SystemSummary::of(stat(0, 1, 0, 0), &[a, b], S);
        assert_eq!(y.busy_ns_per_io, 900_000_000.0 / 2000.0, "{y:?}");
    }

    #[test]
    fn zero_ticks_split_busy_time_by_the_threads_own_user_time() {
        // A short run between two ticks: /proc/stat saw nothing.
        let t = ThreadCpu { ios: 1000, elapsed_ns: 5_000_000, user_ns: 1_000_000, sys_ns: 2_000_000, cpu_ns: 3_500_000, ..Default::default() };
        let y = SystemSummary::of(stat(0, 0, 0, 0), &[t], 5_000_000);
        assert!(y.busy_from_threads);
        assert_eq!(y.busy_ns_per_io, 3500.0);
        assert_eq!(y.user_ns_per_io, 1000.0);
        assert_eq!(y.kernel_ns_per_io, 2500.0, "the rest of the busy time is kernel");
        assert_eq!(y.cores_busy, 0.7);
        // Nothing at all: no busy time, no IOPS per busy core, no ceiling.
        let y = SystemSummary::of(stat(0, 0, 0, 0), &[ThreadCpu { ios: 10, elapsed_ns: S, ..Default::default() }], S);
        assert!(!y.busy_from_threads);
        assert_eq!((y.busy_ns_per_io, y.cores_busy, y.iops_per_busy_core), (0.0, 0.0, 0.0));
        assert_eq!(useful_ceiling(&CpuSummary::default(), Some(&y)), None);
    }

    #[test]
    fn the_ceiling_is_at_or_above_iops_per_busy_core() {
        // A poller: 1 core busy for 1 s, 1M I/Os, 30% of the loop in empty polls.
        let ts = [thread(1_000_000, S, S, 300_000_000)];
        let c = CpuSummary::of(&ts);
        let y = SystemSummary::of(stat(700_000_000, 300_000_000, 0, 0), &ts, S);
        let ceiling = useful_ceiling(&c, Some(&y)).unwrap();
        assert!(close(ceiling, 1e9 / 700.0), "{ceiling}");
        assert!(ceiling >= y.iops_per_busy_core);
        // Without empty polls the two agree.
        let ts = [thread(1_000_000, S, S, 0)];
        let c = CpuSummary::of(&ts);
        let y = SystemSummary::of(stat(700_000_000, 300_000_000, 0, 0), &ts, S);
        assert!(close(useful_ceiling(&c, Some(&y)).unwrap(), y.iops_per_busy_core));
        // Interrupt-driven: kernel work on other cores counts; the threads'
        // empty polls (10% of 800 ns per I/O) come off the machine's busy time.
        let ts = [thread(500_000, S, 400_000_000, 100_000_000)];
        let c = CpuSummary::of(&ts);
        let y = SystemSummary::of(stat(200_000_000, 600_000_000, 100_000_000, 100_000_000), &ts, S);
        assert!(close(useful_ceiling(&c, Some(&y)).unwrap(), 1e9 / (2000.0 - 80.0)));
        assert!(useful_ceiling(&c, Some(&y)).unwrap() >= y.iops_per_busy_core);
        // No system-wide figures: no ceiling.
        assert_eq!(useful_ceiling(&c, None), None);
    }

    proptest::proptest! {
        /// For any counts of one thread and any /proc/stat deltas: useful is
        /// raw x (1 - empty share) to rounding; busy time is never below
        /// either thread clock; IOPS per busy core is 1 s over busy CPU per
        /// I/O; the modelled ceiling is at or above the measured IOPS per
        /// busy core.
        #[test]
        fn the_figures_keep_their_relations(
            ios in 1u64..10_000_000, elapsed in 1_000u64..10_000_000_000, cpu_pm in 0u64..=1000, empty_pm in 0u64..=1200,
            user_pm in 0u64..=1000, stat in proptest::array::uniform4(0u64..4_000_000_000),
        ) {
            let cpu_ns = elapsed / 1000 * cpu_pm;
            let user_ns = cpu_ns / 1000 * user_pm;
            let t = ThreadCpu { ios, elapsed_ns: elapsed, user_ns, sys_ns: cpu_ns - user_ns, cpu_ns, polls: 0, empty_polls: 0, empty_poll_ns: elapsed / 1000 * empty_pm };
            let c = CpuSummary::of(&[t]);
            let share = (t.empty_poll_ns as f64 / elapsed as f64).min(1.0);
            proptest::prop_assert!(close(c.useful_cpu_ns_per_io, c.cpu_ns_per_io * (1.0 - share)), "{c:?}");
            proptest::prop_assert!(close(c.empty_poll_pct, 100.0 * share));
            let y = SystemSummary::of(stat_of(stat), &[t], elapsed);
            let busy = y.busy_ns_per_io * ios as f64;
            proptest::prop_assert!(busy >= (cpu_ns.max(t.user_ns + t.sys_ns) as f64) * (1.0 - 1e-12), "{y:?}");
            proptest::prop_assert!(close(y.user_ns_per_io + y.kernel_ns_per_io, y.busy_ns_per_io), "{y:?}");
            if y.busy_ns_per_io > 0.0 {
                proptest::prop_assert!(close(y.iops_per_busy_core, 1e9 / y.busy_ns_per_io), "{y:?}");
                if let Some(ceiling) = useful_ceiling(&c, Some(&y)) {
                    proptest::prop_assert!(ceiling >= y.iops_per_busy_core * (1.0 - 1e-12), "{ceiling} < {}", y.iops_per_busy_core);
                }
            }
        }
    }

    fn stat_of([user, system, irq, softirq]: [u64; 4]) -> SystemCpu {
        stat(user, system, irq, softirq)
    }
}
