//! Tier 2: tests on a real NVMe device. Each is `#[ignore]`d, so a plain
//! `cargo test` reports them ignored (never passed); run them with a device
//! named:
//!
//!   NVB_TEST_DEVICE=/dev/nvme0n1  cargo test --release --test real_device -- --ignored --nocapture
//!   NVB_TEST_DEVICE=/dev/ng0n1    ...   (passthru)
//!   NVB_TEST_DEVICE=0000:01:00.0  ...   (vfio; the controller must be bound with `nvme-bypass bind`)
//!
//! They only read, unless NVB_TEST_ALLOW_WRITE=1 also says the device holds
//! nothing anyone needs (then they write and verify a 64 MiB region at the
//! start of namespace 1). scripts/test.sh's tier 2 runs them with
//! `--ignored` only when a device is named, skips (by name, saying so) the
//! ones whose other conditions are not met, and says when it skips them all.
//! Run without their conditions, they fail saying what is missing.

use std::process::Command;

fn device() -> String {
    match std::env::var("NVB_TEST_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!("no real NVMe device named: set NVB_TEST_DEVICE=/dev/nvmeXnY, /dev/ngXnY or a PCI address (a spare device), or run without --ignored"),
    }
}

fn backend_for(dev: &str) -> &'static str {
    if dev.contains("/ng") {
        "passthru"
    } else if dev.starts_with("/dev/") {
        "block"
    } else {
        "vfio"
    }
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(args).output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

#[test]
#[ignore = "needs NVB_TEST_DEVICE=<device> (a spare NVMe device: /dev/nvmeXnY, /dev/ngXnY or a PCI address)"]
fn random_reads_on_the_named_device() {
    let dev = device();
    let b = backend_for(&dev);
    let (code, out, err) = run(&["bench", "--backend", b, "--device", &dev, "--rw", "randread", "--iodepth", "32", "--runtime", "3", "--output-format", "json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let read = &j["jobs"][0]["read"];
    assert_eq!(j["nvme_bypass"]["errors"], 0, "{:?}", j["nvme_bypass"]["first_error"]);
    // IOPS is the I/Os over the measured time, and every I/O was one.
    let (ios, ms) = (read["total_ios"].as_u64().unwrap(), read["runtime"].as_u64().unwrap());
    assert!(ios > 0, "no I/O completed in 3 s");
    let iops = read["iops"].as_f64().unwrap();
    assert!((iops * ms as f64 / 1e3 - ios as f64).abs() <= iops / 1e3 + 1.0, "{iops} IOPS over {ms} ms is not {ios} I/Os");
    assert_eq!(read["lat_ns"]["N"].as_u64(), Some(ios), "one latency per I/O");
    eprintln!("{b} on {dev}: {:.0} IOPS", j["jobs"][0]["read"]["iops"].as_f64().unwrap());
}

#[test]
#[ignore = "needs NVB_TEST_DEVICE=<device> and NVB_TEST_ALLOW_WRITE=1 (overwrites 64 MiB of a spare NVMe device)"]
fn writes_verify_when_allowed() {
    let dev = device();
    assert_eq!(
        std::env::var("NVB_TEST_ALLOW_WRITE").as_deref(),
        Ok("1"),
        "writing needs NVB_TEST_ALLOW_WRITE=1 (the test overwrites 64 MiB at the start of {dev}); without it skip this test (--skip writes_verify_when_allowed)"
    );
    let b = backend_for(&dev);
    for rw in ["randwrite", "randrw"] {
        let (code, _, err) = run(&["bench", "--backend", b, "--device", &dev, "--rw", rw, "--verify", "--allow-write", "--size", "64M", "--iodepth", "16", "--runtime", "3"]);
        assert_eq!(code, 0, "{rw}: {err}");
    }
}

#[test]
#[ignore = "needs NVB_TEST_DEVICE=<bdf> (a spare NVMe controller bound to vfio-pci)"]
fn identify_through_our_driver() {
    let dev = device();
    assert_eq!(
        backend_for(&dev),
        "vfio",
        "identify through our driver needs a PCI address bound to vfio-pci (NVB_TEST_DEVICE=0000:01:00.0), not {dev}; skip this test (--skip identify_through_our_driver)"
    );
    let (code, out, err) = run(&["info", "--backend", "vfio", "--device", &dev]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mn ") && out.contains("nsze"), "{out}");
}
