//! `nvme-bypass bench` end to end on the simulated controller: every --rw
//! mode with --verify ends with 0 mismatches, the JSON is fio-shaped, and bad
//! input is refused with a clear message and a non-zero exit.

use std::process::Command;

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run nvme-bypass");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--output-format", "json", "--no-c2c"]);
    let (code, out, err) = bench(&a);
    assert_eq!(code, 0, "bench {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}"))
}

#[test]
fn every_rw_mode_verifies_with_zero_mismatches() {
    for rw in ["read", "write", "randread", "randwrite", "randrw", "rw"] {
        for lba in ["512", "4096"] {
            let j = json(&[
                "--backend", "sim", "--rw", rw, "--bs", "8k", "--iodepth", "8", "--ios", "3000", "--verify",
                "--rwmixread", "75", "--sim-size", "16M", "--sim-lba-size", lba,
            ]);
            let nb = &j["nvme_bypass"];
            assert_eq!(nb["mismatches"], 0, "{rw}/{lba}: {:?}", nb["first_mismatch"]);
            assert!(nb["verified_blocks"].as_u64().unwrap() > 0, "{rw}/{lba}: nothing verified");
            assert_eq!(nb["errors"], 0, "{rw}/{lba}");
            let ios = j["jobs"][0]["read"]["total_ios"].as_u64().unwrap() + j["jobs"][0]["write"]["total_ios"].as_u64().unwrap();
            assert_eq!(ios, 3000, "{rw}: --ios 3000 per thread");
        }
    }
}

#[test]
fn two_threads_each_verify_their_own_slice() {
    let j = json(&["--backend", "sim", "--rw", "randrw", "--iodepth", "4", "--numjobs", "2", "--ios", "2000", "--verify", "--sim-size", "8M"]);
    assert_eq!(j["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(j["nvme_bypass"]["mismatches"], 0);
    assert_eq!(j["nvme_bypass"]["threads"], 2);
}

#[test]
fn json_is_fio_shaped_with_cpu_figures() {
    // Over 1 s: /proc/stat's ticks need that long for the system-wide
    // figures and the system ceiling built on them (shorter: null).
    let j = json(&["--backend", "sim", "--sim-data", "null", "--rw", "randread", "--iodepth", "16", "--runtime", "1100ms"]);
    let job = &j["jobs"][0];
    for k in ["jobname", "job options", "read", "write", "trim", "usr_cpu", "sys_cpu", "job_runtime"] {
        assert!(!job[k].is_null(), "jobs[0].{k} missing");
    }
    // fio's clocks: `elapsed` whole seconds since the job started, rounded
    // up (1100 ms: 2); `job_start` at or before the report's time less the
    // runtime; the runtime option as fio's parser reads it back.
    assert!(job["elapsed"].as_u64().unwrap() >= 2, "{}", job["elapsed"]);
    assert!(job["job_start"].as_u64().unwrap() + 1100 <= j["timestamp_ms"].as_u64().unwrap());
    assert_eq!(job["job options"]["runtime"], "1100ms");
    let r = &job["read"];
    assert!(r["iops"].as_f64().unwrap() > 0.0);
    for k in ["bw", "bw_bytes", "io_bytes", "runtime", "total_ios"] {
        assert!(r[k].is_number(), "read.{k}");
    }
    for p in ["50.000000", "99.000000", "99.900000", "99.990000"] {
        assert!(r["clat_ns"]["percentile"][p].is_number(), "percentile {p}");
    }
    // As fio by default: percentiles of the completion latency, not of lat.
    assert!(r["lat_ns"]["percentile"].is_null() && r["lat_ns"]["mean"].is_number());
    let nb = &j["nvme_bypass"];
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    // IOPS is the I/Os over the measured time (CLOCK_MONOTONIC).
    let ios = r["total_ios"].as_u64().unwrap() as f64;
    let secs = nb["elapsed_ns"].as_u64().unwrap() as f64 / 1e9;
    assert!(close(nb["iops"].as_f64().unwrap() * secs, ios), "{} IOPS x {secs} s is not {ios} I/Os", nb["iops"]);
    // One thread: useful CPU is raw times the share of the loop's time not
    // in empty polls, and the ceiling is 1 s over it.
    let cpu = &nb["cpu"];
    let raw = cpu["cpu_ns_per_io"].as_f64().unwrap();
    let useful = cpu["useful_cpu_ns_per_io"].as_f64().unwrap();
    let pct = cpu["empty_poll_pct"].as_f64().unwrap();
    assert!(close(useful, raw * (1.0 - pct / 100.0)), "useful {useful} is not raw {raw} x (1 - {pct}%)");
    assert!(close(cpu["thread_ceiling_iops_modelled"].as_f64().unwrap(), 1e9 / useful), "{cpu}");
    assert!(cpu["empty_polls"].as_u64().unwrap() <= cpu["polls"].as_u64().unwrap());
    // System-wide: IOPS per busy core is 1 s over busy CPU per I/O, and the
    // modelled ceiling (busy less the threads' empty polls) is at or above it.
    let sys = &nb["system"];
    let busy = sys["busy_ns_per_io"].as_f64().unwrap();
    assert!(busy >= raw * (1.0 - 1e-9), "busy time is never below the threads' own clock: {busy} < {raw}");
    assert!(close(sys["iops_per_busy_core"].as_f64().unwrap(), 1e9 / busy), "{sys}");
    assert!(1e9 / (busy - (raw - useful)) >= sys["iops_per_busy_core"].as_f64().unwrap());
    assert_eq!(sys["interval_ns"], nb["elapsed_ns"], "one thread: /proc/stat over its own interval");
    // The run says which clocksource and irq-time accounting it had.
    assert!(nb["clock"].as_str().is_some_and(|c| c.contains("CLOCK_MONOTONIC")), "{}", nb["clock"]);
    assert!(nb.get("clocksource").is_some() && nb.get("irq_time_accounting").is_some(), "{nb}");
    assert_eq!(nb["interrupt_driven"], false, "the simulator is polled");
    // The simulator's figures are labelled simulated, never emulated.
    assert_eq!((&j["nvme_bypass"]["simulated"], &j["nvme_bypass"]["emulated"]), (&serde_json::json!(true), &serde_json::json!(false)));
    // The ceilings are models and say so: the thread ceiling is 1 s over
    // useful thread CPU, the system ceiling at or above the measured IOPS
    // per busy core; no figure keeps the unlabelled name.
    let nb = &j["nvme_bypass"];
    let thread = nb["thread_ceiling_iops_modelled"].as_f64().unwrap();
    assert!((thread - 1e9 / useful).abs() <= 1e-6 * thread, "{thread} against 1 s / {useful}");
    assert_eq!(cpu["thread_ceiling_iops_modelled"].as_f64(), Some(thread));
    assert!(cpu.get("ceiling_iops_per_core").is_none());
    assert!(j["jobs"][0]["nvme_bypass"]["cpu_accounting"].get("ceiling_iops_per_core").is_none());
    if let Some(measured) = nb["system"]["iops_per_busy_core"].as_f64() {
        assert!(nb["system_ceiling_iops_modelled"].as_f64().unwrap() >= measured * (1.0 - 1e-9));
    }
    // Too short for /proc/stat: no system ceiling, in JSON or text.
    let j = json(&["--backend", "sim", "--sim-data", "null", "--ios", "2000"]);
    assert!(j["nvme_bypass"]["system_ceiling_iops_modelled"].is_null(), "{}", j["nvme_bypass"]);
    let (_, out, _) = bench(&["--backend", "sim", "--sim-data", "null", "--ios", "2000", "--no-c2c"]);
    assert!(out.contains("system-wide  : not shown") && !out.contains("system ceiling"), "{out}");
    // fio's direction line: the total in binary units over whole msec.
    let line = out.lines().find(|l| l.starts_with("  read: IOPS=")).unwrap_or_default();
    assert!(line.contains("(8000KiB/") && line.ends_with("msec)"), "{line}");
}

/// --wait-fast-c2c gives up after --wait-timeout with its own exit status
/// (3) and runs nothing, when the state it waits for never comes.
#[test]
fn waiting_for_a_fast_state_that_never_comes_runs_nothing() {
    let start = std::time::Instant::now();
    let (code, out, err) = bench(&[
        "--backend", "sim", "--sim-data", "null", "--runtime", "1", "--wait-fast-c2c", "0.001", "--wait-timeout", "200ms",
    ]);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        // One CPU: no simulator CPU of its own to measure against.
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("two CPUs"), "{err}");
        return;
    }
    assert_eq!(code, 3, "stderr: {err}");
    assert!(err.contains("never at or under 0.001 ns") && err.contains("nothing was run"), "{err}");
    assert!(out.is_empty(), "a run that was not started printed a report: {out}");
    // The 1 s run was never started; the margin is one a loaded machine keeps.
    assert!(start.elapsed() < std::time::Duration::from_secs(60), "the wait did not stop at its timeout");
}

#[test]
fn bad_input_is_refused_clearly() {
    let cases: &[(&[&str], &str)] = &[
        (&["--bs", "1000"], "not a multiple of the 512-byte logical block of the namespace"),
        (&["--bs", "0"], "moves nothing"),
        (&["--bs", "1m"], "exceeds the largest transfer"),
        (&["--iodepth", "0"], "--iodepth must be at least 1"),
        (&["--iodepth", "5000"], "largest queue"),
        (&["--size", "2g"], "beyond the namespace"),
        (&["--offset", "1g"], "beyond the namespace"),
        (&["--offset", "100"], "not a multiple"),
        (&["--nsid", "2"], "namespace 2 is not active"),
        (&["--nsid", "0"], "namespaces are numbered from 1"),
        (&["--sim-data", "null", "--verify"], "--sim-data null moves no data"),
        (&["--sim-size", "65g"], "could not allocate"),
        (&["--sim-lba-size", "1024"], "use 512 or 4096"),
        // An MDTS the driver would cap without a word (from 52 up, every I/O failed).
        (&["--sim-mdts", "14"], "'--sim-mdts <SIM_MDTS>': MDTS 14 is more than our driver can use"),
        (&["--sim-mdts", "60"], "use 1 to 13"),
        (&["--sim-mqes", "0"], "'--sim-mqes <SIM_MQES>': 0 is out of range; use 1 (2-entry queues"),
        (&["--backend", "block", "--device", "/dev/nvme0n1", "--rw", "randwrite"], "--allow-write"),
        (&["--backend", "vfio"], "needs --device"),
        (&["--verify-only", "--verify", "--rw", "randwrite"], "read pattern"),
        (&["--rwmixread", "101", "--rw", "randrw"], "percentage"),
        (&["--wait-fast-c2c", "30"], "--wait-fast-c2c needs"),
        // One controller named twice is not two devices.
        (&["--backend", "vfio", "--device", "01:00.0", "--device", "0000:01:00.0"], "--device 0000:01:00.0 is given twice (01:00.0 and 0000:01:00.0 are both 0000:01:00.0)"),
        (&["--backend", "block", "--device", "/dev/nvme9n1", "--device", "/dev/nvme9n1"], "--device /dev/nvme9n1 is given twice"),
    ];
    for (args, want) in cases {
        let mut a = args.to_vec();
        a.extend(["--runtime", "1"]);
        // The simulator's own option, refused on the other backends.
        if !a.windows(2).any(|w| w[0] == "--backend" && w[1] != "sim") {
            a.push("--no-c2c");
        }
        let (code, _, err) = bench(&a);
        assert_eq!(code, 2, "{args:?} should exit 2, stderr: {err}");
        assert!(err.contains(want), "{args:?}: expected '{want}' in: {err}");
    }
    // A simulator CPU that does not exist is refused up front (it used to
    // run unpinned at a few hundred IOPS, and hang when measuring the
    // core-to-core latency against it).
    let (code, _, err) = bench(&["--sim-cpu", "1000", "--runtime", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("CPU 1000 does not exist"), "{err}");
    let (code, _, err) = bench(&["--backend", "nosuch"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid value 'nosuch'"), "{err}");
}

/// An option of another backend is refused, naming the backend it belongs
/// to, never ignored: on bench (every backend's options) and info (the
/// simulator's).
#[test]
fn options_of_another_backend_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["--backend", "block", "--device", "/dev/nvme0n1", "--sim-mdts", "5"], "--sim-mdts has no effect on --backend block: it is an option of --backend sim; drop it, or pick --backend sim"),
        (&["--backend", "passthru", "--device", "/dev/ng0n1", "--sim-size", "1G"], "--sim-size has no effect on --backend passthru"),
        (&["--backend", "vfio", "--device", "0000:01:00.0", "--sim-data", "null"], "--sim-data has no effect on --backend vfio"),
        (&["--backend", "vfio", "--device", "0000:01:00.0", "--no-c2c"], "--no-c2c has no effect on --backend vfio: it is an option of --backend sim"),
        (&["--backend", "block", "--device", "/dev/nvme0n1", "--wait-fast-c2c", "100"], "--wait-fast-c2c has no effect on --backend block"),
        (&["--interrupts"], "--interrupts has no effect on --backend sim: it is an option of --backend vfio; drop it, or pick --backend vfio"),
        (&["--backend", "block", "--device", "/dev/nvme0n1", "--no-shadow-doorbells"], "--no-shadow-doorbells has no effect on --backend block: it is an option of --backend vfio and --backend sim"),
        (&["--backend", "passthru", "--device", "/dev/ng0n1", "--cached-sq-stores"], "--cached-sq-stores has no effect on --backend passthru"),
        (&["--backend", "vfio", "--device", "0000:01:00.0", "--ioengine", "libaio"], "--ioengine has no effect on --backend vfio: it is an option of --backend block"),
        (&["--ioengine", "io_uring"], "--ioengine has no effect on --backend sim"),
        (&["--backend", "passthru", "--device", "/dev/ng0n1", "--buffered"], "--buffered has no effect on --backend passthru"),
        (&["--fixedbufs"], "--fixedbufs has no effect on --backend sim: it is an option of --backend block and --backend passthru"),
        (&["--backend", "vfio", "--device", "0000:01:00.0", "--hipri"], "--hipri has no effect on --backend vfio"),
        (&["--sqthread-poll", "--sqthread-poll-cpu", "1"], "--sqthread-poll has no effect on --backend sim"),
        (&["--register-ring"], "--register-ring has no effect on --backend sim"),
        (&["--wait-timeout", "5s"], "--wait-timeout bounds the wait of --wait-fast-c2c"),
        (&["--backend", "block", "--device", "/dev/nvme0n1", "--io-timeout", "5s"], "--io-timeout has no effect on --backend block: it is an option of --backend sim and --backend vfio"),
    ];
    for (args, want) in cases {
        let mut a = args.to_vec();
        a.extend(["--runtime", "1"]);
        let (code, out, err) = bench(&a);
        assert_eq!(code, 2, "{args:?} should exit 2, stderr: {err}");
        assert!(err.contains(want), "{args:?}: expected '{want}' in: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    // The same option at its default value is still refused: it was given.
    let (code, _, err) = bench(&["--backend", "vfio", "--device", "0000:01:00.0", "--sim-mdts", "7"]);
    assert_eq!(code, 2);
    assert!(err.contains("--sim-mdts has no effect on --backend vfio"), "{err}");
    // info: the simulator's options on another backend.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .args(["info", "--backend", "passthru", "--device", "/dev/nvme0", "--sim-lba-size", "4096"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--sim-lba-size has no effect on --backend passthru: it is an option of --backend sim"), "{err}");
}

/// A region too small for one I/O is refused in the words of the option
/// that made it: --size when given, else --sim-size (the simulator's
/// namespace) or the namespace from --offset; never a --size the user did
/// not give.
#[test]
fn region_refusals_name_the_options_given() {
    let cases: &[(&[&str], &str)] = &[
        (&["--sim-size", "1000"], "--sim-size 1000 from --offset 0 holds no whole --bs 4096 I/O; use --sim-size 4096 or more"),
        (&["--sim-size", "1000", "--bs", "512"], "--sim-size 1000 is not a whole number of 512-byte blocks (--sim-lba-size); use a multiple of 512, such as 512 or 1024"),
        (&["--sim-size", "1k"], "--sim-size 1024 from --offset 0 holds no whole --bs 4096 I/O; use --sim-size 4096 or more, or a smaller --bs"),
        (&["--sim-size", "8k", "--offset", "4k", "--bs", "8k"], "use --sim-size 12288 or more"),
        (&["--sim-size", "100", "--bs", "512"], "--sim-size 100 from --offset 0 holds no whole --bs 512 I/O; use --sim-size 512 or more"),
        (&["--size", "2k"], "--size 2048 holds no whole --bs 4096 I/O; use a larger --size or a smaller --bs"),
        (&["--size", "0"], "--size 0 holds no I/O; give a --size of at least --bs 4096 (up to 1073741824 bytes from this --offset), or leave --size out"),
        (&["--offset", "1g"], "--offset 1073741824 is beyond the namespace (1073741824 bytes = 2097152 blocks of 512); use an --offset below 1073741824"),
        (&["--sim-size", "64k", "--verify", "--numjobs", "32"], "the namespace (65536 bytes = 128 blocks of 512) from --offset 0 holds no whole --bs 4096 I/O for each of --numjobs 32"),
    ];
    for (args, want) in cases {
        let mut a = args.to_vec();
        a.extend(["--ios", "10", "--no-c2c"]);
        let (code, out, err) = bench(&a);
        assert_eq!(code, 2, "{args:?} should exit 2, stderr: {err}");
        assert!(err.contains(want), "{args:?}: expected '{want}' in: {err}");
        assert!(out.is_empty(), "{args:?}: a refused run printed a report: {out}");
        if !args.contains(&"--size") {
            assert!(!err.contains("--size "), "{args:?}: names a --size the user did not give: {err}");
        }
    }
}

#[test]
fn two_pinned_threads_have_their_own_queue_pairs_and_the_aggregate_adds_up() {
    let j = json(&["--backend", "sim", "--sim-data", "null", "--numjobs", "2", "--cpus", "0,1", "--iodepth", "8", "--runtime", "500ms"]);
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let q0 = jobs[0]["nvme_bypass"]["queue"].as_str().unwrap();
    let q1 = jobs[1]["nvme_bypass"]["queue"].as_str().unwrap();
    assert!(q0.contains("qid") && q1.contains("qid") && q0 != q1, "{q0} / {q1}");
    assert_eq!(jobs[0]["nvme_bypass"]["cpu"], 0);
    assert_eq!(jobs[1]["nvme_bypass"]["cpu"], 1);
    let ios: u64 = jobs.iter().map(|x| x["read"]["total_ios"].as_u64().unwrap()).sum();
    assert_eq!(ios, j["nvme_bypass"]["read"]["ios"].as_u64().unwrap());
    // The aggregate IOPS is all I/Os over the longest thread's measured
    // time, exactly; each thread's over its own. (Not the sum of the
    // threads' IOPS: on a loaded machine one thread can end well after the
    // other.)
    let nb = &j["nvme_bypass"];
    let elapsed = nb["elapsed_ns"].as_u64().unwrap();
    let agg = nb["iops"].as_f64().unwrap();
    assert!((agg * elapsed as f64 / 1e9 - ios as f64).abs() <= 1e-6 * ios as f64, "{agg} IOPS x {elapsed} ns is not {ios} I/Os");
    let longest_ms = jobs.iter().map(|x| x["job_runtime"].as_u64().unwrap()).max().unwrap();
    assert_eq!(longest_ms, elapsed / 1_000_000, "the run's time is its longest thread's");
    for x in jobs {
        let (n, ms, iops) = (x["read"]["total_ios"].as_u64().unwrap() as f64, x["job_runtime"].as_u64().unwrap() as f64, x["read"]["iops"].as_f64().unwrap());
        assert!(iops * ms / 1e3 <= n * (1.0 + 1e-9) && n <= iops * (ms + 1.0) / 1e3 * (1.0 + 1e-9), "{iops} IOPS over {ms} ms is not {n} I/Os");
    }
    // /proc/stat covers the union of the two intervals: at least the longest.
    assert!(nb["system"]["interval_ns"].as_u64().unwrap() >= elapsed, "{}", nb["system"]);
}

#[test]
fn one_thread_drives_two_devices() {
    let j = json(&["--backend", "sim", "--device", "sim", "--device", "sim", "--sim-data", "null", "--iodepth", "8", "--runtime", "300ms"]);
    let q = j["jobs"][0]["nvme_bypass"]["queue"].as_str().unwrap();
    assert!(q.contains("device 0:") && q.contains("device 1:"), "{q}");
    assert_eq!(j["jobs"].as_array().unwrap().len(), 1, "one thread");
    assert!(j["nvme_bypass"]["iops"].as_f64().unwrap() > 0.0);
    let (code, _, err) = bench(&["--backend", "sim", "--device", "sim", "--device", "sim", "--verify", "--runtime", "1", "--no-c2c"]);
    assert_eq!(code, 2);
    assert!(err.contains("--verify with several --device"), "{err}");
}

/// Without --verify the engine takes its plain path (one pass down the free
/// slots, completions reaped in a batch); every mode still runs exactly
/// --ios I/Os and counts io_bytes = ios x bs, with the controller on its own
/// thread and with --sim-sync (stepped on the job's thread).
#[test]
fn the_plain_path_counts_every_io_and_byte_in_every_mode() {
    for sync in [false, true] {
        for rw in ["read", "write", "randread", "randwrite", "randrw", "rw"] {
            let mut args = vec!["--backend", "sim", "--sim-data", "null", "--rw", rw, "--bs", "8k", "--iodepth", "16", "--ios", "3001", "--rwmixread", "60"];
            if sync {
                args.push("--sim-sync");
            }
            let j = json(&args);
            let (r, w) = (&j["jobs"][0]["read"], &j["jobs"][0]["write"]);
            let (ri, wi) = (r["total_ios"].as_u64().unwrap(), w["total_ios"].as_u64().unwrap());
            assert_eq!(ri + wi, 3001, "{rw} sync={sync}: --ios 3001");
            assert_eq!(r["io_bytes"].as_u64().unwrap(), ri * 8192, "{rw} sync={sync}");
            assert_eq!(w["io_bytes"].as_u64().unwrap(), wi * 8192, "{rw} sync={sync}");
            match rw {
                "read" | "randread" => assert_eq!(wi, 0, "{rw}"),
                "write" | "randwrite" => assert_eq!(ri, 0, "{rw}"),
                _ => assert!(ri > 1000 && wi > 600, "{rw}: a 60/40 mix, got {ri}/{wi}"),
            }
            assert_eq!(j["nvme_bypass"]["errors"], 0);
            let note = j["nvme_bypass"]["simulated_note"].as_str().unwrap();
            assert_eq!(note.contains("--sim-sync"), sync, "{note}");
        }
    }
}

/// --verify never runs two I/Os on one unit at once; on a region of a few
/// units most draws collide, and an I/O that cannot be placed yet waits
/// for a completion instead of being dropped: --ios still runs exactly N.
#[test]
fn verify_on_a_tiny_region_still_runs_every_io() {
    for rw in ["randrw", "randwrite", "rw"] {
        let j = json(&["--backend", "sim", "--rw", rw, "--bs", "4k", "--iodepth", "16", "--ios", "3000", "--verify", "--sim-size", "64K"]);
        let ios = j["jobs"][0]["read"]["total_ios"].as_u64().unwrap() + j["jobs"][0]["write"]["total_ios"].as_u64().unwrap();
        assert_eq!(ios, 3000, "{rw}: --ios 3000 on 16 units");
        assert_eq!(j["nvme_bypass"]["mismatches"], 0, "{rw}");
    }
}

/// Two jobs on the synchronous simulator each step a controller of their
/// own (no lock or queue state shared on the hot path), and each verifies
/// its own slice with no mismatch.
#[test]
fn synchronous_jobs_each_step_their_own_controller() {
    let (code, out, err) = bench(&["--backend", "sim", "--sim-sync", "--numjobs", "2", "--rw", "randrw", "--verify", "--iodepth", "8", "--size", "8M", "--runtime", "300ms"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 simulated controllers, one per job"), "{out}");
    assert!(out.contains(" 0 mismatches"), "{out}");
}

/// `info --output-format json` names Identify fields as nvme-cli's `id-ctrl
/// -o json` and `id-ns -o json` do, so scripts written for those read it.
#[test]
fn info_json_uses_nvme_cli_s_names() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(["info", "--output-format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &j["id_ctrl"];
    assert!(c["crdt1"].is_number() && c["crdt3"].is_number() && c.get("crdt").is_none(), "{c}");
    for n in [&j["id_ns"], &j["namespaces"][0]["id_ns"]] {
        assert_eq!(n["lbafs"].as_array().unwrap().len() as u64, n["nlbaf"].as_u64().unwrap() + 1, "{n}");
        assert!(n["lbafs"][0]["ds"].is_number() && n.get("lbaf").is_none(), "{n}");
        assert!(n["nguid"].as_str().is_some_and(|s| s.len() == 32) && n["eui64"].as_str().is_some_and(|s| s.len() == 16), "{n}");
    }
    // Text: zero in hex prints as C's %#x does, "0".
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).arg("info").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l == "vid       : 0"), "{text}");
}
