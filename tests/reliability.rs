//! Reliability end to end, through the command line (docs/reliability.md
//! has the table these tests stand behind):
//! * every fault the simulated controller can inject (`--sim-fault`) and
//!   what the run does about it: recovered (exit 0, counted on stderr) or a
//!   clean failure (exit 1, saying what happened and what to do);
//! * silent data corruption is caught by --verify (exit 1, the block named);
//! * Ctrl-C / SIGTERM end a run promptly, even on a hung device;
//! * bad input is refused before anything touches a device (exit 2), with a
//!   message that says what to do (more cases in tests/bench_sim.rs and in
//!   the unit tests the table names).

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nvme-bypass");

struct Run {
    code: i32,
    out: String,
    err: String,
    took: Duration,
}

fn run_cmd(args: &[&str]) -> Run {
    let t = Instant::now();
    let o: Output = Command::new(BIN).args(args).stdin(Stdio::null()).output().expect("run nvme-bypass");
    Run {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into(),
        err: String::from_utf8_lossy(&o.stderr).into(),
        took: t.elapsed(),
    }
}

/// `args` with `defaults` (option, value) in front, less those `args` gives.
fn with_defaults<'a>(defaults: &[(&'a str, &'a str)], args: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![];
    for (k, v) in defaults {
        if !args.contains(k) {
            a.extend([*k, *v]);
        }
    }
    a.extend_from_slice(args);
    a
}

/// `bench --backend sim` with a small verified random mixed workload, a
/// short I/O timeout and the given extra arguments (which win).
fn sim_bench(extra: &[&str]) -> Run {
    let defaults = [
        ("--backend", "sim"),
        ("--rw", "randrw"),
        ("--iodepth", "8"),
        ("--ios", "2000"),
        ("--sim-size", "8M"),
        ("--io-timeout", "200ms"),
        ("--output-format", "json"),
    ];
    let mut a = vec!["bench", "--verify", "--no-c2c"];
    a.extend(with_defaults(&defaults, extra));
    run_cmd(&a)
}

fn json(r: &Run) -> serde_json::Value {
    serde_json::from_str(&r.out).unwrap_or_else(|e| panic!("bad JSON ({e}): {}\nstderr: {}", r.out, r.err))
}

/// The counters of the stderr line "recovery: N I/O timeouts, N Aborts sent
/// (N aborted), N controller resets, N queues re-created, N retries".
#[derive(Debug, Default, PartialEq)]
struct Recovery {
    timeouts: u64,
    aborts: u64,
    aborted: u64,
    resets: u64,
    requeues: u64,
    retries: u64,
}

fn recovery(err: &str) -> Recovery {
    let Some(line) = err.lines().find(|l| l.starts_with("nvme-bypass: recovery: ")) else { return Recovery::default() };
    let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    assert_eq!(n.len(), 6, "{line}");
    Recovery { timeouts: n[0], aborts: n[1], aborted: n[2], resets: n[3], requeues: n[4], retries: n[5] }
}

fn clean_run(r: &Run, what: &str) -> serde_json::Value {
    assert_eq!(r.code, 0, "{what}: exit {}, stderr: {}", r.code, r.err);
    let j = json(r);
    let nb = &j["nvme_bypass"];
    assert_eq!(nb["errors"], 0, "{what}: {:?}", nb["first_error"]);
    assert_eq!(nb["mismatches"], 0, "{what}: {:?}", nb["first_mismatch"]);
    assert!(nb["verified_blocks"].as_u64().unwrap() > 0, "{what}: nothing verified");
    j
}

// ------------------------------------------------------------------ faults

#[test]
fn lost_completions_time_out_abort_fails_the_controller_is_reset_and_the_run_recovers() {
    let r = sim_bench(&["--sim-fault", "drop-every=600"]);
    clean_run(&r, "drop-every");
    let c = recovery(&r.err);
    assert!(c.timeouts >= 1 && c.aborts >= 1, "{c:?}\n{}", r.err);
    assert_eq!(c.aborted, 0, "the controller lost them: nothing to abort");
    assert!(c.resets >= 1 && c.requeues >= c.resets, "{c:?}");
    assert!(c.retries >= c.resets, "{c:?}");
    assert!(r.err.contains("Abort did not bring it back: controller reset, queue re-created"), "{}", r.err);
}

#[test]
fn a_stalled_command_is_aborted_and_retried_without_a_reset() {
    // An --io-timeout a loaded machine keeps for the Abort's own answer
    // (at 200 ms a starved simulator thread can miss it: then a reset).
    let r = sim_bench(&["--sim-fault", "stall-every=700", "--io-timeout", "2s"]);
    clean_run(&r, "stall-every");
    let c = recovery(&r.err);
    assert!(c.aborted >= 1 && c.aborted == c.aborts, "{c:?}\n{}", r.err);
    assert_eq!(c.resets, 0, "{c:?}");
    assert!(c.retries >= c.aborted, "{c:?}");
}

#[test]
fn an_abort_answered_with_an_error_resets_only_when_the_command_times_out_again() {
    // Lost completions, and every Abort refused (Abort Command Limit
    // Exceeded): the controller answered, so no reset at once, as Linux's
    // abort_endio; the command's second timeout resets, and the run
    // recovers.
    let r = sim_bench(&["--sim-fault", "drop-every=600,refuse-abort=1"]);
    clean_run(&r, "refuse-abort");
    let c = recovery(&r.err);
    assert!(c.timeouts >= 1 && c.aborts >= 1 && c.aborted == 0, "{c:?}\n{}", r.err);
    assert!(c.resets >= 1, "the second timeout resets: {c:?}");
    assert!(r.err.contains("answered an Abort with ABORT COMMAND LIMIT EXCEEDED"), "{}", r.err);
    assert!(!r.err.contains("not answered"), "an answered Abort is not 'not answered': {}", r.err);
}

#[test]
fn a_controller_that_pauses_processing_is_waited_for_not_aborted() {
    // After 500 I/O commands the controller pauses for 1 s (CSTS.PP = 1, a
    // firmware activation without a reset), five times --io-timeout: the
    // overdue I/Os wait for it (it reports no MTFA: up to the admin
    // timeout, as Linux's nvme_fw_act_work), with no Abort and no reset,
    // and complete when it resumes.
    let r = sim_bench(&["--sim-fault", "pause=500:1000"]);
    clean_run(&r, "pause");
    let c = recovery(&r.err);
    assert_eq!((c.timeouts, c.aborts, c.resets), (0, 0, 0), "{}", r.err);
    assert!(r.err.contains("the controller paused processing (CSTS.PP = 1"), "{}", r.err);
}

#[test]
fn errors_with_dnr_clear_are_retried_and_the_run_succeeds() {
    // No timeout is expected: an --io-timeout no scheduling delay reaches.
    let r = sim_bench(&["--sim-fault", "status-every=97,status=0:0x06", "--io-timeout", "20s"]);
    clean_run(&r, "status-every dnr=0");
    let c = recovery(&r.err);
    assert!(c.retries >= 20, "{c:?}");
    assert_eq!((c.timeouts, c.resets), (0, 0));
}

#[test]
fn errors_with_dnr_set_are_not_retried_and_fail_the_run() {
    let r = sim_bench(&["--sim-fault", "status-every=97,status=2:0x81,dnr=1"]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert_eq!(recovery(&r.err).retries, 0, "{}", r.err);
    assert!(r.err.contains("UNRECOVERED READ ERROR") && r.err.contains("dnr"), "{}", r.err);
    assert!(!r.err.contains("retries)"), "{}", r.err);
    assert!(json(&r)["nvme_bypass"]["errors"].as_u64().unwrap() >= 1);
}

#[test]
fn failed_ios_are_errors_of_their_direction_not_ios_as_in_fio() {
    // Every 97th command fails for good; --continue-on-error runs on.
    let r = run_cmd(&[
        "bench", "--backend", "sim", "--no-c2c", "--rw", "randread", "--ios", "2000", "--iodepth", "8", "--sim-size", "8M",
        "--sim-fault", "status-every=97,status=2:0x81,dnr=1", "--continue-on-error", "--output-format", "json",
    ]);
    assert_eq!(r.code, 1, "failed I/Os fail the run: {}", r.err);
    let j = json(&r);
    let (nb, job) = (&j["nvme_bypass"], &j["jobs"][0]);
    let (ios, errors) = (nb["read"]["ios"].as_u64().unwrap(), nb["read"]["errors"].as_u64().unwrap());
    assert!(errors >= 2000 / 97 && errors <= 2000 / 97 + 1, "{errors} errors: {nb}");
    assert_eq!(ios + errors, 2000, "every I/O either completed or failed, none in both");
    assert_eq!(nb["read"]["lat_ns"]["N"].as_u64(), Some(ios), "latency of the successful I/Os only");
    assert_eq!(nb["read"]["bytes"].as_u64(), Some(ios * 4096));
    assert_eq!(nb["errors"].as_u64(), Some(errors));
    // fio's keys: the successful I/Os per direction, the failed ones in the
    // job's total_err (printed, as fio does, with continue_on_error).
    assert_eq!((job["read"]["total_ios"].as_u64(), job["total_err"].as_u64()), (Some(ios), Some(errors)));
    // And the text report says them apart.
    let r = run_cmd(&[
        "bench", "--backend", "sim", "--no-c2c", "--rw", "randread", "--ios", "2000", "--iodepth", "8", "--sim-size", "8M",
        "--sim-fault", "status-every=97,status=2:0x81,dnr=1", "--continue-on-error",
    ]);
    assert!(r.out.contains(&format!(", errors={errors} (failed I/Os, not in IOPS, BW or latency)")), "{}", r.out);
}

#[test]
fn retries_are_bounded() {
    // Every command fails with DNR clear: each I/O is tried 1 + --retries times.
    let r = sim_bench(&["--sim-fault", "status-every=1", "--retries", "2", "--ios", "10"]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("INTERNAL DEVICE ERROR") && r.err.contains("(after 2 retries)"), "{}", r.err);
    let c = recovery(&r.err);
    assert_eq!(c.retries % 2, 0, "two per failed I/O: {c:?}");
    assert!(c.retries >= 2);
    let r = sim_bench(&["--sim-fault", "status-every=1", "--retries", "0", "--ios", "10"]);
    assert_eq!(r.code, 1);
    assert_eq!(recovery(&r.err).retries, 0, "{}", r.err);
}

#[test]
fn controller_fatal_status_is_detected_and_recovered_by_a_reset() {
    // No timeout is expected: an --io-timeout no scheduling delay reaches.
    let r = sim_bench(&["--sim-fault", "fatal-after=1500", "--io-timeout", "20s"]);
    clean_run(&r, "fatal-after");
    let c = recovery(&r.err);
    assert_eq!(c.resets, 1, "{c:?}\n{}", r.err);
    assert!(r.err.contains("controller fatal status (CSTS.CFS=1): controller reset, queue re-created"), "{}", r.err);
    assert_eq!(c.timeouts, 0, "detected by the health check, before any timeout: {c:?}");
}

#[test]
fn a_reset_by_one_thread_is_recovered_by_every_thread() {
    let r = sim_bench(&["--numjobs", "2", "--sim-fault", "fatal-after=1500", "--sim-size", "16M", "--io-timeout", "20s"]);
    clean_run(&r, "fatal-after, two threads");
    let c = recovery(&r.err);
    assert_eq!(c.resets, 1, "one reset: {c:?}\n{}", r.err);
    assert_eq!(c.requeues, 2, "both queues re-created: {c:?}\n{}", r.err);
}

#[test]
fn a_hung_controller_fails_the_run_cleanly_and_promptly() {
    let r = sim_bench(&["--sim-fault", "hang-after=1000"]);
    assert_eq!(r.code, 1, "exit 1: I/O was done, the device failed; stderr: {}", r.err);
    // Bounded by the timeouts (a margin a loaded machine keeps; hanging
    // would be for ever).
    assert!(r.took < Duration::from_secs(60), "bounded by the timeouts: {:?}", r.took);
    for want in ["outstanding for more than 200 ms (--io-timeout)", "controller reset failed", "given up and left disabled", "unbind", "--io-timeout"] {
        assert!(r.err.contains(want), "'{want}' missing from: {}", r.err);
    }
}

#[test]
fn completions_with_an_unknown_cid_or_sq_id_are_rejected_and_recovered() {
    for fault in ["corrupt-cid-every=500", "bad-sqid-every=500"] {
        let r = sim_bench(&["--sim-fault", fault]);
        let j = clean_run(&r, fault);
        let rejected = j["nvme_bypass"]["rejected_completions"].as_u64().unwrap_or(0);
        let c = recovery(&r.err);
        // Each rejected completion leaves its command outstanding: it times
        // out and is recovered (rejections in the prefill are not in the figures).
        assert!(c.timeouts >= 1 && c.resets >= 1, "{fault}: {c:?}\n{}", r.err);
        assert!(rejected >= 1, "{fault}: rejected completions counted: {}", j["nvme_bypass"]);
    }
}

#[test]
fn slow_completions_within_the_timeout_are_fine_beyond_it_they_are_aborted() {
    let r = sim_bench(&["--sim-fault", "delay-us=2000", "--ios", "40", "--iodepth", "1", "--rw", "randread", "--sim-size", "64k", "--io-timeout", "5s"]);
    clean_run(&r, "delay below the timeout");
    assert_eq!(recovery(&r.err), Recovery::default(), "{}", r.err);
    // 1.5 s per command against a 1 s timeout: each times out, the Abort
    // finds it already completed ("not aborted"), no reset. The timeout is
    // 2/3 of the delay so both margins (timed out before the command
    // completes; the Abort answered within its own 1 s) are 0.5 s, which a
    // loaded machine keeps. (No --verify: its prefill would take 1.5 s per
    // block too.)
    let r = run_cmd(&[
        "bench", "--backend", "sim", "--no-c2c", "--sim-fault", "delay-us=1500000", "--ios", "2", "--iodepth", "1", "--rw", "randread",
        "--io-timeout", "1s", "--sim-size", "1M",
    ]);
    assert_eq!(r.code, 0, "delay beyond the timeout: {}", r.err);
    assert!(r.took < Duration::from_secs(60), "{:?}", r.took);
    let c = recovery(&r.err);
    assert!(c.timeouts >= 1 && c.aborts >= 1, "{c:?}\n{}", r.err);
    assert_eq!((c.aborted, c.resets), (0, 0), "{c:?}\n{}", r.err);
}

// ---------------------------------------------------------- data integrity

#[test]
fn a_corrupted_block_is_detected_by_verify() {
    let r = sim_bench(&["--sim-fault", "corrupt-data-every=300"]);
    assert_eq!(r.code, 1, "{}", r.err);
    let j = json(&r);
    assert!(j["nvme_bypass"]["mismatches"].as_u64().unwrap() >= 1);
    assert_eq!(j["nvme_bypass"]["errors"], 0, "the device reported success");
    assert!(r.err.contains("verify found") && r.err.contains("corrupt: crc32c"), "{}", r.err);
}

// ------------------------------------------------------------ interruption

fn interrupt_after(args: &[&str], after: Duration, signals: &[i32]) -> Run {
    let child = Command::new(BIN).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(after);
    let t = Instant::now();
    for &sig in signals {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        // A repeat sooner than half a second is the same request (as
        // `timeout` sends its signal twice): a second one comes later.
        std::thread::sleep(Duration::from_millis(if signals.len() > 1 { 700 } else { 50 }));
    }
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into(),
        err: String::from_utf8_lossy(&o.stderr).into(),
        took: t.elapsed(),
    }
}

#[test]
fn sigint_and_sigterm_stop_a_run_promptly_with_its_figures() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let args = ["bench", "--backend", "sim", "--rw", "randrw", "--verify", "--iodepth", "16", "--runtime", "60", "--sim-size", "8M", "--no-c2c"];
        let r = interrupt_after(&args, Duration::from_millis(1500), &[sig]);
        assert_eq!(r.code, 0, "signal {sig}: {}", r.err);
        // Well before the 60 s --runtime (the margin a loaded machine keeps).
        assert!(r.took < Duration::from_secs(30), "signal {sig}: took {:?}", r.took);
        assert!(r.out.contains("interrupted  : stopped by a signal"), "{}", r.out);
        assert!(r.out.contains(" 0 mismatches"), "{}", r.out);
    }
}

#[test]
fn an_interrupt_on_a_hung_device_ends_within_the_capped_timeout() {
    // --io-timeout 30 s, but after the signal outstanding I/Os get 2 s.
    let args = ["bench", "--backend", "sim", "--rw", "randread", "--iodepth", "8", "--runtime", "60", "--sim-size", "8M", "--no-c2c", "--sim-fault", "hang-after=200"];
    let r = interrupt_after(&args, Duration::from_millis(1500), &[libc::SIGINT]);
    assert_eq!(r.code, 1, "{}", r.err);
    // Well before the 30 s --io-timeout (the margin a loaded machine keeps).
    assert!(r.took < Duration::from_secs(20), "took {:?}", r.took);
    assert!(r.err.contains("the I/O timeout after an interrupt") && r.err.contains("controller reset failed"), "{}", r.err);
    // A second signal (0.7 s after the first) does not wait: the process
    // ends before the 2 s timeout runs out and the reset is tried (said,
    // not timed).
    let r = interrupt_after(&args, Duration::from_millis(1500), &[libc::SIGINT, libc::SIGINT]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(!r.err.contains("controller reset failed") && !r.out.contains("interrupted  :"), "waited for the timeout: {}", r.err);
    // The same signal twice at once (`timeout` signals the process and its
    // group) is one request: the run stops as after one.
    let child = Command::new(BIN).args(["bench", "--backend", "sim", "--rw", "randread", "--iodepth", "8", "--runtime", "60", "--sim-size", "8M", "--no-c2c"]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    for _ in 0..2 {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    }
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("interrupted  : stopped by a signal"), "{out}");
}

/// `compare` and `sweep` start a watcher (`hand-back-watch`) before they
/// change the machine: killed (a second Ctrl-C, SIGKILL), the run gives
/// nothing back itself, and the watcher does once the run's process has
/// ended. A stand-in process plays the run here, and a plain file the
/// scheduler (the controller's hand-back is the test bed's
/// `interrupt.sh`, step compare-killed).
#[test]
fn what_a_killed_run_changed_is_given_back_by_its_watcher() {
    use std::io::{BufRead, BufReader, Write};
    let dir = std::env::temp_dir().join(format!("nvb-handback-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("scheduler");
    for given_back_by_the_run in [false, true] {
        std::fs::write(&file, "[mq-deadline] none\n").unwrap();
        let mut run = Command::new("sleep").arg("60").spawn().unwrap();
        let mut w = Command::new(BIN)
            .args(["hand-back-watch", "--parent", &run.id().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(w.stdout.take().unwrap()).read_line(&mut ready).unwrap();
        assert_eq!(ready, "ready\n");
        // The terminal's Ctrl-C and `timeout`'s SIGTERM reach it too.
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
            assert_eq!(unsafe { libc::kill(w.id() as i32, sig) }, 0);
        }
        let mut pipe = w.stdin.take().unwrap();
        write!(pipe, "scheduler\t{}\tnone\n", file.display()).unwrap();
        if given_back_by_the_run {
            std::fs::write(&file, "[none] mq-deadline\n").unwrap();
            write!(pipe, "scheduler-done\t{}\n", file.display()).unwrap();
        }
        // The pipe ends as the run's process ends ...
        drop(pipe);
        if given_back_by_the_run {
            // ... and with nothing left to give back the watcher just ends.
            let o = w.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0));
            assert_eq!(String::from_utf8_lossy(&o.stderr), "");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "[none] mq-deadline\n");
            run.kill().unwrap();
            run.wait().unwrap();
            continue;
        }
        // ... but the watcher waits until the kernel has closed what the
        // process held (the VFIO device, for a controller).
        std::thread::sleep(Duration::from_millis(300));
        assert!(w.try_wait().unwrap().is_none(), "the watcher ended while the run's process was alive");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "[mq-deadline] none\n");
        run.kill().unwrap();
        run.wait().unwrap();
        let o = w.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "none");
        assert!(err.contains("ended before it gave back what it changed") && err.contains("set the I/O scheduler back to none"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// --------------------------------------------------------------- bad input

/// Each case must exit 2 and say `want`.
fn refused(args: &[&str], want: &str) {
    let r = run_cmd(args);
    assert_eq!(r.code, 2, "{args:?} should exit 2; stderr: {}", r.err);
    assert!(r.err.contains(want), "{args:?}: expected '{want}' in: {}", r.err);
}

#[test]
fn bad_options_are_refused_before_any_io() {
    let b = |extra: &[&str]| -> Vec<String> {
        let mut v = vec!["bench".to_string(), "--no-c2c".to_string()];
        v.extend(with_defaults(&[("--backend", "sim"), ("--runtime", "1")], extra).iter().map(|s| s.to_string()));
        v
    };
    let cases: &[(&[&str], &str)] = &[
        (&["--io-timeout", "1ms"], "--io-timeout"),
        (&["--retries", "1000"], "--retries 1000 is too many"),
        (&["--sim-fault", "explode=1"], "unknown fault 'explode'"),
        (&["--sim-fault", "drop-every=0"], "injects nothing"),
        (&["--sim-fault", "status=0:0"], "0:0 is success"),
        (&["--cpus", "0-99999999999"], "no machine has that many"),
        (&["--runtime", "99999999999999999999"], "too long a duration"),
        (&["--numjobs", "0"], "--numjobs must be at least 1"),
        (&["--bs", "4k", "--size", "2k"], "holds no whole --bs"),
        (&["--device", "/dev/nvme0n1"], "--device is not used by --backend sim"),
        (&["--verify-only", "--rw", "randread"], "--verify-only needs --verify"),
        (&["--runtime", "0"], "--runtime 0 measures nothing"),
        (&["--ios", "0"], "--ios 0 measures nothing"),
    ];
    for (extra, want) in cases {
        let args = b(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, want);
    }
    refused(&["bench", "--backend", "block", "--device", "/dev/null", "--sim-fault", "hang-after=1"], "--sim-fault has no effect on --backend block: it is an option of --backend sim");
    // The other commands' figures and stories: a block size the simulator
    // cannot do, and a story too long to read or of the wrong controller.
    refused(&["driver-cost", "--bs", "0"], "--bs 0 is not a multiple");
    refused(&["driver-cost", "--bs", "1000"], "--bs 1000 is not a multiple");
    refused(&["driver-cost", "--ios", "0"], "--ios must be at least 1");
    refused(&["trace", "--commands", "100000000"], "--commands must be 1..=10000");
    refused(&["trace", "--device", "0000:01:00.0"], "add --backend vfio");
}

#[test]
fn bad_device_addresses_are_refused_with_what_to_do() {
    // A malformed PCI address, through every command that takes one.
    refused(&["bench", "--backend", "vfio", "--device", "00:01"], "0000:01:00.0");
    refused(&["info", "--backend", "vfio", "--device", "0000:01:00.9"], "is not a PCI address");
    refused(&["bind", "1:2:3"], "is not a PCI address");
    // info on every backend it lists: block identifies through the block
    // device, as passthru through the generic one (it said "not available").
    refused(&["info", "--backend", "block"], "--backend block needs --device (e.g. --device /dev/nvme0n1)");
    refused(&["info", "--backend", "block", "--device", "/dev/null"], "use /dev/nvmeX, /dev/nvmeXnY or /dev/ngXnY");
    refused(&["info", "--backend", "block", "--device", "/dev/nvme99n9"], "ls /dev/nvme* /dev/ng*");
    // A well-formed address with no device behind it.
    refused(&["bench", "--backend", "vfio", "--device", "0000:ff:1f.7"], "there is no PCI device 0000:ff:1f.7");
    refused(&["bind", "0000:ff:1f.7"], "lspci");
    // Kernel paths: a missing device node, and the wrong kind of file.
    refused(&["bench", "--backend", "passthru", "--device", "/dev/ng99n9"], "ls /dev/nvme* /dev/ng*");
    refused(&["bench", "--backend", "passthru", "--device", "/dev/null"], "io_uring_cmd needs the generic char device");
}

/// A PCI function of this machine that is not an NVMe controller, if any.
fn non_nvme_function() -> Option<(String, Option<String>)> {
    let mut v: Vec<_> = std::fs::read_dir("/sys/bus/pci/devices").ok()?.flatten().collect();
    v.sort_by_key(|e| e.file_name());
    v.into_iter().find_map(|e| {
        let class = std::fs::read_to_string(e.path().join("class")).ok()?;
        (class.trim() != "0x010802").then(|| {
            let drv = std::fs::read_link(e.path().join("driver")).ok().and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
            (e.file_name().to_string_lossy().into_owned(), drv)
        })
    })
}

#[test]
fn a_function_that_is_not_an_nvme_controller_is_refused() {
    let Some((bdf, _driver)) = non_nvme_function() else {
        eprintln!("skipped: no PCI functions visible in /sys/bus/pci/devices");
        return;
    };
    // bind checks the class before it writes anything to sysfs; every
    // command that takes --device says the same before anything about the
    // function's driver (which sent the user to bind it, and bind to unbind
    // it). Also written the short way (01:00.0).
    let class = std::fs::read_to_string(format!("/sys/bus/pci/devices/{bdf}/class")).unwrap();
    let want = format!("{bdf} is not an NVMe controller (class {};", class.trim());
    let short = bdf.strip_prefix("0000:").unwrap_or(&bdf).to_string();
    for args in [
        vec!["bind", &bdf],
        vec!["bench", "--backend", "vfio", "--device", &bdf],
        vec!["bench", "--backend", "vfio", "--device", &short],
        vec!["info", "--backend", "vfio", "--device", &bdf],
        vec!["compare", "--device", &bdf, "--runtime", "1"],
        vec!["sweep", "--device", &bdf, "--out", "/nonexistent/nvb-sweep"],
        vec!["trace", "--backend", "vfio", "--device", &bdf],
    ] {
        let r = run_cmd(&args);
        assert_eq!(r.code, 2, "{args:?} should exit 2; stderr: {}", r.err);
        assert!(r.err.contains(&want), "{args:?}: expected '{want}' in: {}", r.err);
        assert!(!r.err.contains("nvme-bypass bind") && !r.err.contains("nvme-bypass unbind"), "{args:?}: circular advice: {}", r.err);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Run the binary as `nobody` (with a memlock limit), through util-linux's
/// setpriv and prlimit; None (with the reason printed) when that cannot be.
fn as_nobody(memlock: Option<&str>, args: &[&str]) -> Option<Run> {
    if !is_root() {
        eprintln!("skipped: not root, cannot switch to nobody");
        return None;
    }
    let have = |t: &str| Command::new(t).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !have("setpriv") || !have("prlimit") {
        eprintln!("skipped: setpriv/prlimit (util-linux) not installed");
        return None;
    }
    // The limit is set while still root (nobody could not raise it), then
    // setpriv drops to nobody with no capabilities (CAP_IPC_LOCK would
    // exempt it from the limit).
    let lim = format!("--memlock={}", memlock.unwrap_or(""));
    let mut a = vec![];
    if memlock.is_some() {
        a.extend(["prlimit", lim.as_str(), "--"]);
    }
    a.extend(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--", BIN]);
    a.extend_from_slice(args);
    let t = Instant::now();
    let o = Command::new(a[0]).args(&a[1..]).stdin(Stdio::null()).output().unwrap();
    let r = Run {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into(),
        err: String::from_utf8_lossy(&o.stderr).into(),
        took: t.elapsed(),
    };
    if r.err.contains("Permission denied") && r.err.contains("nvme-bypass") && r.code == 126 {
        eprintln!("skipped: nobody cannot execute {BIN}");
        return None;
    }
    Some(r)
}

#[test]
fn without_root_access_is_refused_saying_so() {
    // bind writes to /sys: it needs root, and says so before touching anything.
    if let Some(r) = as_nobody(None, &["bind", "0000:ff:1f.7"]) {
        assert_eq!(r.code, 2, "{}", r.err);
        assert!(r.err.contains("needs root") || r.err.contains("there is no PCI device"), "{}", r.err);
    }
    // A device file only root may open (like /dev/ng*, crw------- root).
    let dir = std::env::temp_dir().join(format!("nvb-rel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("disk.img");
    std::fs::write(&f, vec![0u8; 1 << 20]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    if let Some(r) = as_nobody(None, &["bench", "--backend", "block", "--device", f.to_str().unwrap(), "--buffered", "--ios", "1"]) {
        assert_eq!(r.code, 2, "{}", r.err);
        assert!(r.err.contains("cannot open") && r.err.contains("Permission denied"), "{}", r.err);
        assert!(r.err.contains("permissions"), "says what to check: {}", r.err);
    }
    // A generic NVMe device node, /dev/ng*, is root-only (crw------- root):
    // a stand-in node (/dev/null's numbers) named like one, mode 0600.
    let ng = dir.join("ng0n1");
    if Command::new("mknod").arg(&ng).args(["c", "1", "3"]).status().is_ok_and(|s| s.success()) {
        std::fs::set_permissions(&ng, std::fs::Permissions::from_mode(0o600)).unwrap();
        if let Some(r) = as_nobody(None, &["bench", "--backend", "passthru", "--device", ng.to_str().unwrap(), "--ios", "1"]) {
            assert_eq!(r.code, 2, "{}", r.err);
            assert!(r.err.contains("/dev/ng* devices are root-only by default") && r.err.contains("udev rule"), "{}", r.err);
        }
    } else {
        eprintln!("skipped the /dev/ng* case: mknod failed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_memlock_limit_too_low_for_pinned_buffers_is_refused_saying_how_to_raise_it() {
    let dir = std::env::temp_dir().join(format!("nvb-memlock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("disk.img");
    std::fs::write(&f, vec![0u8; 8 << 20]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
    // Registered (fixed) buffers are pinned and charged to RLIMIT_MEMLOCK:
    // 32 x 128 KiB against a 64 KiB limit.
    let args = ["bench", "--backend", "block", "--device", f.to_str().unwrap(), "--buffered", "--fixedbufs", "--iodepth", "32", "--bs", "128k", "--ios", "1"];
    if let Some(r) = as_nobody(Some("65536"), &args) {
        assert_eq!(r.code, 2, "{}\n{}", r.err, r.out);
        assert!(r.err.contains("RLIMIT_MEMLOCK") && r.err.contains("ulimit -l"), "{}", r.err);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_iodepth_no_queue_of_the_controller_holds_is_refused_naming_cap_mqes() {
    // A controller with CAP.MQES = FFFFh (QEMU's mqes=65535): 40000 used to
    // wrap the queue sizes and panic with the controller's lock held.
    let base = ["bench", "--no-c2c", "--backend", "sim", "--sim-data", "null", "--sim-size", "64M", "--ios", "20000"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { base.iter().chain(extra).copied().collect() };
    refused(&with(&["--sim-mqes", "65535", "--iodepth", "40000"]), "CAP.MQES 65535");
    refused(&with(&["--sim-mqes", "65535", "--iodepth", "40000"]), "use --iodepth 4095 or less");
    refused(&with(&["--sim-mqes", "15", "--iodepth", "16"]), "CAP.MQES 15) and a ring of N entries holds N - 1 commands; use --iodepth 15 or less");
    // The largest usable depth runs.
    let r = run_cmd(&with(&["--sim-mqes", "65535", "--iodepth", "4095"]));
    assert_eq!(r.code, 0, "{}", r.err);
    let r = run_cmd(&with(&["--sim-mqes", "1", "--iodepth", "1"]));
    assert_eq!(r.code, 0, "{}", r.err);
}
