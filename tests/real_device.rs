//! Tier 2: tests on a real NVMe device, run only when one is named.
//!
//!   NVB_TEST_DEVICE=/dev/nvme0n1  cargo test --release --test real_device -- --nocapture
//!   NVB_TEST_DEVICE=/dev/ng0n1    ...   (passthru)
//!   NVB_TEST_DEVICE=0000:01:00.0  ...   (vfio; the controller must be bound with `nvme-bypass bind`)
//!
//! They only read, unless NVB_TEST_ALLOW_WRITE=1 also says the device holds
//! nothing anyone needs (then they write and verify a 64 MiB region at the
//! start of namespace 1). Without a device each test says why it skips.

use std::process::Command;

fn device() -> Option<String> {
    match std::env::var("NVB_TEST_DEVICE") {
        Ok(d) if !d.is_empty() => Some(d),
        _ => {
            eprintln!("skipped: no real NVMe device named; set NVB_TEST_DEVICE=/dev/nvmeXnY, /dev/ngXnY or a PCI address to run");
            None
        }
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
fn random_reads_on_the_named_device() {
    let Some(dev) = device() else { return };
    let b = backend_for(&dev);
    let (code, out, err) = run(&["bench", "--backend", b, "--device", &dev, "--rw", "randread", "--iodepth", "32", "--runtime", "3", "--output-format", "json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(j["jobs"][0]["read"]["iops"].as_f64().unwrap() > 0.0);
    eprintln!("{b} on {dev}: {:.0} IOPS", j["jobs"][0]["read"]["iops"].as_f64().unwrap());
}

#[test]
fn writes_verify_when_allowed() {
    let Some(dev) = device() else { return };
    if std::env::var("NVB_TEST_ALLOW_WRITE").as_deref() != Ok("1") {
        eprintln!("skipped: writing needs NVB_TEST_ALLOW_WRITE=1 (the test overwrites 64 MiB at the start of {dev})");
        return;
    }
    let b = backend_for(&dev);
    for rw in ["randwrite", "randrw"] {
        let (code, _, err) = run(&["bench", "--backend", b, "--device", &dev, "--rw", rw, "--verify", "--allow-write", "--size", "64M", "--iodepth", "16", "--runtime", "3"]);
        assert_eq!(code, 0, "{rw}: {err}");
    }
}

#[test]
fn identify_through_our_driver() {
    let Some(dev) = device() else { return };
    if backend_for(&dev) != "vfio" {
        eprintln!("skipped: identify through our driver needs a PCI address bound to vfio-pci (NVB_TEST_DEVICE=0000:01:00.0)");
        return;
    }
    let (code, out, err) = run(&["info", "--backend", "vfio", "--device", &dev]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mn ") && out.contains("nsze"), "{out}");
}
