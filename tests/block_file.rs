//! The kernel block path end to end, on a regular file (no NVMe device
//! needed): every engine (io_uring, libaio, psync) writes and reads back
//! stamped blocks with --verify and finds 0 mismatches; data written by one
//! engine verifies through the others; the io_uring options work; the
//! passthrough backend refuses what is not /dev/ngXnY, clearly.
//!
//! The file lives under Cargo's target directory (a disk filesystem), not
//! /tmp, which may be tmpfs without O_DIRECT; when O_DIRECT does not work
//! there the tests skip and say so.

use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::Command;

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).arg("bench").args(args).output().expect("run nvme-bypass");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--output-format", "json"]);
    let (code, out, err) = bench(&a);
    assert_eq!(code, 0, "bench {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}"))
}

/// A sparse file of `size` bytes for one test, or None (with a message)
/// when its filesystem has no O_DIRECT.
fn scratch(name: &str, size: u64) -> Option<String> {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}.img", std::process::id()));
    std::fs::File::create(&p).unwrap().set_len(size).unwrap();
    if let Err(e) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&p) {
        eprintln!("skipped: {} has no O_DIRECT ({e}); run the tests from a checkout on ext4 or xfs", p.display());
        let _ = std::fs::remove_file(&p);
        return None;
    }
    Some(p.to_str().unwrap().to_string())
}

/// The file's block size, as the run states it ("N blocks of B bytes").
fn lba_size(j: &serde_json::Value) -> u64 {
    let facts = j["nvme_bypass"]["target"].as_array().or(j["target"].as_array()).expect("the target's facts");
    let cap = facts.iter().find(|f| f[0] == "capacity").and_then(|f| f[1].as_str()).expect("a capacity fact");
    cap.split(" blocks of ").nth(1).and_then(|r| r.split(' ').next()).and_then(|b| b.parse().ok()).expect("N blocks of B bytes")
}

fn check_clean(j: &serde_json::Value, what: &str) -> u64 {
    let nb = &j["nvme_bypass"];
    assert_eq!(nb["mismatches"], 0, "{what}: {:?}", nb["first_mismatch"]);
    assert_eq!(nb["errors"], 0, "{what}: {:?}", nb["first_error"]);
    let v = nb["verified_blocks"].as_u64().unwrap_or(0);
    assert!(v > 0, "{what}: nothing verified");
    v
}

#[test]
fn every_engine_and_pattern_verifies() {
    let Some(f) = scratch("engines", 32 << 20) else { return };
    for engine in ["io_uring", "libaio", "psync"] {
        let depth = if engine == "psync" { "1" } else { "8" };
        for rw in ["randread", "randwrite", "randrw", "rw"] {
            let j = json(&[
                "--backend",
                "block",
                "--device",
                &f,
                "--ioengine",
                engine,
                "--rw",
                rw,
                "--rwmixread",
                "75",
                "--bs",
                "8k",
                "--iodepth",
                depth,
                "--ios",
                "1500",
                "--size",
                "16M",
                "--verify",
                "--allow-write",
            ]);
            check_clean(&j, &format!("{engine}/{rw}"));
            assert_eq!(j["jobs"][0]["jobname"], format!("block/{engine}-0"));
            let sc = j["jobs"][0]["nvme_bypass"]["counters"]["syscalls"].as_u64().unwrap();
            assert!(sc > 0, "{engine}/{rw}: system calls are counted");
        }
    }
    std::fs::remove_file(f).unwrap();
}

#[test]
fn io_uring_options_verify() {
    let Some(f) = scratch("options", 16 << 20) else { return };
    let variants: &[&[&str]] = &[
        &["--fixedbufs"],
        &["--registerfiles", "--batch", "3"],
        &["--fixedbufs", "--registerfiles", "--numjobs", "2"],
        &["--sqthread-poll"],
        &["--buffered"],
    ];
    for extra in variants {
        let mut a = vec![
            "--backend",
            "block",
            "--device",
            &f,
            "--rw",
            "randrw",
            "--iodepth",
            "16",
            "--ios",
            "2000",
            "--size",
            "8M",
            "--verify",
            "--allow-write",
        ];
        a.extend_from_slice(extra);
        check_clean(&json(&a), &format!("io_uring {extra:?}"));
    }
    std::fs::remove_file(f).unwrap();
}

#[test]
fn data_written_by_one_engine_verifies_through_the_others() {
    let Some(f) = scratch("cross", 16 << 20) else { return };
    let seed = "4242";
    let j = json(&[
        "--backend",
        "block",
        "--device",
        &f,
        "--rw",
        "write",
        "--bs",
        "16k",
        "--iodepth",
        "8",
        "--size",
        "8M",
        "--verify",
        "--verify-seed",
        seed,
        "--allow-write",
    ]);
    check_clean(&j, "io_uring write");
    for (engine, depth) in [("libaio", "4"), ("psync", "1"), ("io_uring", "4")] {
        let j = json(&[
            "--backend",
            "block",
            "--device",
            &f,
            "--ioengine",
            engine,
            "--rw",
            "read",
            "--bs",
            "16k",
            "--iodepth",
            depth,
            "--size",
            "8M",
            "--verify",
            "--verify-only",
            "--verify-seed",
            seed,
        ]);
        let v = check_clean(&j, &format!("{engine} verify-only"));
        assert_eq!(v, (8 << 20) / lba_size(&j), "{engine}: every block of the region is checked");
    }
    // Another seed must not verify: the check is real.
    let (code, _, err) = bench(&[
        "--backend",
        "block",
        "--device",
        &f,
        "--rw",
        "read",
        "--size",
        "8M",
        "--iodepth",
        "4",
        "--verify",
        "--verify-only",
        "--verify-seed",
        "7",
    ]);
    assert_eq!(code, 1, "a wrong seed must fail verification: {err}");
    assert!(err.contains("mismatching blocks"), "{err}");
    std::fs::remove_file(f).unwrap();
}

/// The blocks of file `f` (`bs` bytes each), and how many differ.
fn distinct_blocks(f: &str, bs: usize) -> (usize, usize) {
    let data = std::fs::read(f).unwrap();
    let blocks: std::collections::HashSet<&[u8]> = data.chunks(bs).collect();
    (data.len() / bs, blocks.len())
}

#[test]
fn written_blocks_are_scrambled_as_fios_unless_no_scramble() {
    // A sequential write of the whole 4 MiB file, each engine: every 4 KiB
    // block written is its own (fio's default scramble_buffers=1), so
    // deduplicating storage keeps each, as it keeps fio's; with
    // --no-scramble (fio's scramble_buffers=0) they are all one pattern.
    let Some(f) = scratch("scramble", 4 << 20) else { return };
    for (engine, depth) in [("io_uring", "8"), ("libaio", "8"), ("psync", "1")] {
        for (extra, want) in [(None, 1024), (Some("--no-scramble"), 1)] {
            let mut a = vec!["--backend", "block", "--device", &f, "--ioengine", engine, "--rw", "write", "--bs", "4k", "--iodepth", depth, "--ios", "1024", "--size", "4M", "--allow-write"];
            a.extend(extra);
            let j = json(&a);
            assert_eq!(j["jobs"][0]["write"]["total_ios"], 1024, "{engine} {extra:?}");
            assert_eq!(distinct_blocks(&f, 4096), (1024, want), "{engine} {extra:?}: blocks written, and distinct");
        }
    }
    std::fs::remove_file(f).unwrap();
}

#[test]
fn clear_refusals() {
    let Some(f) = scratch("refuse", 1 << 20) else { return };
    let cases: &[(&[&str], &str)] = &[
        (&["--backend", "passthru", "--device", &f], "io_uring_cmd needs the generic char device /dev/ngXnY"),
        (&["--backend", "passthru", "--device", "/dev/null"], "io_uring_cmd needs the generic char device /dev/ngXnY"),
        (&["--backend", "block", "--device", &f, "--rw", "randwrite"], "--allow-write"),
        (&["--backend", "block", "--device", &f, "--ioengine", "libaio", "--fixedbufs"], "--fixedbufs is an io_uring option"),
        (
            &["--backend", "block", "--device", &f, "--ioengine", "psync", "--hipri"],
            "--hipri (polled completions) needs --ioengine io_uring",
        ),
        (&["--backend", "block", "--device", "/dev/null"], "character device"),
        (&["--backend", "block", "--device", &f, "--ioengine", "psync", "--iodepth", "4"], "use --iodepth 1"),
        (&["--backend", "block", "--device", "/nonexistent/nvme9n9"], "truncate -s 1G /nonexistent/nvme9n9"),
        (&["--backend", "block", "--device", &f, "--bs", "1000"], "not a multiple"),
    ];
    for (args, want) in cases {
        let (code, _, err) = bench(args);
        assert_eq!(code, 2, "{args:?} should be refused: {err}");
        assert!(err.contains(want), "{args:?}: expected '{want}' in: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(["info", "--backend", "passthru", "--device", &f]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not an NVMe device"), "{err}");
    std::fs::remove_file(f).unwrap();
}
