//! `nvme-bypass sweep` end to end on the simulator (no hardware, no root):
//! a small grid on both simulator paths writes sweep.json with every point
//! and three SVG charts, each a complete SVG with one line per path and a
//! legend naming the paths; bad input is refused with a message saying what
//! to do.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn nvb(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(args).output().expect("run nvme-bypass");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("nvb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The value of `attr="..."` in one SVG element.
fn attr<'a>(element: &'a str, attr: &str) -> Option<&'a str> {
    let key = format!(" {attr}=\"");
    let start = element.find(&key)? + key.len();
    Some(&element[start..start + element[start..].find('"')?])
}

/// The text content of every `<text>` element.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text").skip(1).filter_map(|t| Some(t[t.find('>')? + 1..t.find("</text>")?].trim().to_string())).collect()
}

/// The data lines of a chart: `<polyline>`s drawn in a colour (axes and
/// ticks are black); returns (stroke colour, number of points) of each.
fn data_lines(svg: &str) -> Vec<(String, usize)> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|e| {
            let e = &e[..e.find("/>")?];
            let stroke = attr(e, "stroke")?;
            (stroke != "#000000").then(|| (stroke.to_string(), attr(e, "points").unwrap_or("").split_whitespace().count()))
        })
        .collect()
}

fn check_svg(dir: &Path, file: &str, panels: usize, points_per_line: usize) -> String {
    let svg = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(svg.trim_start().starts_with("<svg"), "{file} does not start with <svg");
    assert!(svg.trim_end().ends_with("</svg>"), "{file} does not end with </svg>");
    let t = texts(&svg);
    for path in ["sim", "sim-null"] {
        assert!(t.iter().any(|x| x == path), "{file}: no legend entry {path:?} in {t:?}");
    }
    assert!(t.iter().any(|x| x.contains("EMULATED")), "{file}: the title does not say EMULATED: {t:?}");
    let lines = data_lines(&svg);
    assert_eq!(lines.len(), 2 * panels, "{file}: want one line per path per panel ({panels} panels), got {lines:?}");
    let colours: BTreeSet<&str> = lines.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(colours.len(), 2, "{file}: want one colour per path, got {lines:?}");
    for (c, n) in &lines {
        assert_eq!(*n, points_per_line, "{file}: line {c} has {n} points");
    }
    svg
}

#[test]
fn sweep_on_the_simulator_writes_json_and_charts() {
    let dir = TempDir::new("sweep");
    let out = dir.0.to_str().unwrap();
    let (code, stdout, stderr) = nvb(&[
        "sweep", "--paths", "sim,sim-null", "--iodepth", "1,8", "--bs", "4k,16k", "--numjobs", "1", "--runtime", "300ms",
        "--ramp-time", "100ms", "--sim-size", "64M", "--out", out,
    ]);
    assert_eq!(code, 0, "sweep failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("EMULATED"), "the table does not say EMULATED:\n{stdout}");
    assert!(stdout.contains("IOPS/core"), "no table on stdout:\n{stdout}");

    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.0.join("sweep.json")).expect("sweep.json")).expect("sweep.json is JSON");
    assert!(j["emulated"].as_str().is_some_and(|e| e.contains("simulat")), "emulated: {}", j["emulated"]);
    assert_eq!(j["paths"], serde_json::json!(["sim", "sim-null"]));
    let points = j["points"].as_array().expect("points");
    // iodepth 1,8 at 4k; bs 16k at QD 8; the centre (4k, QD 8) once: 3 settings per path.
    assert_eq!(points.len(), 6, "{points:#?}");
    for path in ["sim", "sim-null"] {
        let mine: Vec<&serde_json::Value> = points.iter().filter(|p| p["path"] == path).collect();
        assert_eq!(mine.len(), 3, "{path}");
        for p in mine {
            assert!(p["error"].is_null(), "{path}: {}", p["error"]);
            assert!(p["iops"].as_f64().unwrap() > 0.0, "{path}: {p}");
            assert!(p["mib_per_s"].as_f64().unwrap() > 0.0);
            assert_eq!(p["emulated"], true);
            let (p50, p99, p999) = (p["lat_p50_ns"].as_u64().unwrap(), p["lat_p99_ns"].as_u64().unwrap(), p["lat_p999_ns"].as_u64().unwrap());
            assert!(0 < p50 && p50 <= p99 && p99 <= p999, "{path}: percentiles {p50} {p99} {p999}");
            // One thread: useful CPU is raw times the share of the loop's
            // time not in empty polls, exactly (to rounding).
            let c = &p["summary"]["cpu"];
            let (raw, useful, pct) = (c["cpu_ns_per_io"].as_f64().unwrap(), c["useful_cpu_ns_per_io"].as_f64().unwrap(), c["empty_poll_pct"].as_f64().unwrap());
            assert_eq!(p["summary"]["threads"], 1);
            assert!((useful - raw * (1.0 - pct / 100.0)).abs() <= 1e-9 * raw.max(1.0), "{path}: useful {useful}, raw {raw}, {pct}% empty");
            assert_eq!(p["useful_cpu_ns_per_io"].as_f64(), Some(useful), "{path}: the point's figure is its summary's");
            assert!(p["summary"]["cpu"]["cpu_ns_per_io"].is_number(), "the whole run summary is kept");
        }
    }
    // With two CPUs the simulator has one of its own, and the sweep says
    // whether the two were separate cores.
    if std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) >= 2 {
        assert!(j["core_share"]["share"].as_f64().is_some_and(f64::is_finite), "core_share: {}", j["core_share"]);
        assert!(stdout.contains("simulator CPUs:"), "the table does not say which cores:\n{stdout}");
    }
    let centre = points.iter().find(|p| p["path"] == "sim" && p["bs"] == 4096 && p["iodepth"] == 8).unwrap();
    assert_eq!(centre["sweeps"], serde_json::json!(["iodepth", "bs", "numjobs"]));

    check_svg(&dir.0, "iops_per_core_vs_qd.svg", 1, 2);
    let lat = check_svg(&dir.0, "latency_percentiles.svg", 3, 2);
    for p in ["p50", "p99", "p99.9"] {
        assert!(texts(&lat).iter().any(|t| t.starts_with(p)), "latency chart has no {p} panel");
    }
    let tp = check_svg(&dir.0, "throughput_vs_bs.svg", 1, 2);
    assert!(texts(&tp).iter().any(|t| t == "16 KiB"), "throughput chart has no 16 KiB label");
    assert!(dir.0.join("table.txt").exists());
}

#[test]
fn sweep_refuses_bad_input_with_what_to_do() {
    let (code, _, err) = nvb(&["sweep", "--paths", "block", "--out", "/nonexistent/never"]);
    assert_eq!(code, 2);
    assert!(err.contains("needs --device") && err.contains("--paths sim,sim-null"), "{err}");
    let (code, _, err) = nvb(&["sweep", "--paths", "sim,warp", "--out", "/nonexistent/never"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown path 'warp'"), "{err}");
    let (code, _, err) = nvb(&["sweep", "--paths", "sim", "--iodepth", "0", "--out", "/nonexistent/never"]);
    assert_eq!(code, 2);
    assert!(err.contains("--iodepth 0"), "{err}");
}
