//! `nvme-bypass sweep` end to end on the simulator (no hardware, no root):
//! a small grid on both simulator paths, each point run twice, writes
//! sweep.json with every point and every run (median, min, max of each
//! figure, named measured or modelled) and four SVG charts, each a complete
//! SVG with one measured line per path, a legend naming the paths and a key
//! saying what is measured and what modelled (the polled paths' dashed
//! modelled ceiling); bad input is refused with a message saying what to do.

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

/// Stroke widths the charts draw with: measured lines, modelled (dashed)
/// lines, min-max bars and their caps.
const MEASURED_W: &str = "2";
const MODELLED_W: &str = "3";
const BAR_W: &str = "1";

/// The data lines of a chart: `<polyline>`s drawn in a colour (axes, ticks
/// and the key's line samples are black); returns (stroke colour, stroke
/// width, number of points) of each.
fn data_lines(svg: &str) -> Vec<(String, String, usize)> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|e| {
            let e = &e[..e.find("/>")?];
            let stroke = attr(e, "stroke")?;
            let width = attr(e, "stroke-width").unwrap_or("1");
            (stroke != "#000000").then(|| (stroke.to_string(), width.to_string(), attr(e, "points").unwrap_or("").split_whitespace().count()))
        })
        .collect()
}

/// The lines of one width: (colour, points).
fn lines_of(lines: &[(String, String, usize)], width: &str) -> Vec<(String, usize)> {
    lines.iter().filter(|l| l.1 == width).map(|l| (l.0.clone(), l.2)).collect()
}

/// A complete SVG naming both simulator paths in its legend, saying
/// SIMULATED, with one measured line per path per panel of
/// `points_per_line` points, each path its own colour; returns it.
fn check_svg(dir: &Path, file: &str, panels: usize, points_per_line: usize) -> String {
    let svg = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(svg.trim_start().starts_with("<svg"), "{file} does not start with <svg");
    assert!(svg.trim_end().ends_with("</svg>"), "{file} does not end with </svg>");
    assert_eq!(svg.matches("<svg").count(), 1, "{file}: one <svg> element");
    let t = texts(&svg);
    for path in ["sim", "sim-null"] {
        assert!(t.iter().any(|x| x == path), "{file}: no legend entry {path:?} in {t:?}");
    }
    assert!(t.iter().any(|x| x.contains("SIMULATED")), "{file}: the title does not say SIMULATED: {t:?}");
    assert!(!t.iter().any(|x| x.contains("EMULATED")), "{file}: simulator figures are not emulated: {t:?}");
    assert!(t.iter().any(|x| x.starts_with("measured") && x.contains("median of 2 runs")), "{file}: no key saying measured, median of 2 runs: {t:?}");
    let measured = lines_of(&data_lines(&svg), MEASURED_W);
    assert_eq!(measured.len(), 2 * panels, "{file}: want one measured line per path per panel ({panels} panels), got {measured:?}");
    let colours: BTreeSet<&str> = measured.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(colours.len(), 2, "{file}: want one colour per path, got {measured:?}");
    for (c, n) in &measured {
        assert_eq!(*n, points_per_line, "{file}: line {c} has {n} points");
    }
    svg
}

#[test]
fn sweep_on_the_simulator_writes_json_and_charts() {
    let dir = TempDir::new("sweep");
    let out = dir.0.to_str().unwrap();
    // Points of 1.1 s: the modelled ceiling needs /proc/stat over 1 s.
    let (code, stdout, stderr) = nvb(&[
        "sweep", "--paths", "sim,sim-null", "--iodepth", "1,4,16", "--bs", "4k,16k", "--numjobs", "1", "--runtime", "1100ms",
        "--ramp-time", "50ms", "--sim-size", "64M", "--repeat", "2", "--out", out,
    ]);
    assert_eq!(code, 0, "sweep failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("SIMULATED") && !stdout.contains("EMULATED"), "the table does not say SIMULATED (only):\n{stdout}");
    assert!(stdout.contains("IOPS/core"), "no table on stdout:\n{stdout}");
    assert!(stdout.contains("measured: median of 2 runs") && stdout.contains("modelled"), "the table does not say measured and modelled:\n{stdout}");
    assert!(stdout.contains("min-max"), "no min-max lines with --repeat 2:\n{stdout}");
    assert!(stderr.contains("round 2/2"), "progress does not count rounds:\n{stderr}");

    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.0.join("sweep.json")).expect("sweep.json")).expect("sweep.json is JSON");
    assert!(j["simulated"].as_str().is_some_and(|e| e.contains("simulat")), "simulated: {}", j["simulated"]);
    assert!(j["emulated"].is_null(), "emulated: {}", j["emulated"]);
    assert_eq!(j["paths"], serde_json::json!(["sim", "sim-null"]));
    assert_eq!(j["polled_paths"], serde_json::json!(["sim", "sim-null"]));
    assert_eq!(j["repeat"], 2);
    let points = j["points"].as_array().expect("points");
    // iodepth 1,4,16 at 4k; bs 16k at QD 16; the centre (4k, QD 16) once: 4 settings per path.
    assert_eq!(points.len(), 8, "{points:#?}");
    let mut seqs = vec![];
    for path in ["sim", "sim-null"] {
        let mine: Vec<&serde_json::Value> = points.iter().filter(|p| p["path"] == path).collect();
        assert_eq!(mine.len(), 4, "{path}");
        for p in mine {
            assert!(p["error"].is_null(), "{path}: {}", p["error"]);
            assert_eq!((p["simulated"].as_bool(), p["emulated"].as_bool(), p["polled"].as_bool()), (Some(true), Some(false), Some(true)), "{path}: {p}");
            // Every figure's name says measured or modelled.
            for k in p.as_object().unwrap().keys() {
                let figure = ["iops", "lat_", "cpu_ns", "mib_", "ceiling", "cores"].iter().any(|w| k.contains(w));
                assert!(!figure || k.starts_with("measured_") || k.starts_with("modelled_"), "{path}: field {k} says neither measured nor modelled");
            }
            assert!(p["modelled_ceiling_iops_per_core"]["median"].as_f64().is_some_and(|v| v > 0.0), "{path}: {p}");
            // Each figure: median within its range over both runs.
            for k in ["measured_iops", "measured_mib_per_s", "measured_lat_p99_ns", "measured_iops_per_busy_core", "modelled_ceiling_iops_per_core"] {
                let s = &p[k];
                let (med, lo, hi) = (s["median"].as_f64().unwrap(), s["min"].as_f64().unwrap(), s["max"].as_f64().unwrap());
                assert!(lo <= med && med <= hi && lo > 0.0, "{path} {k}: {s}");
                assert_eq!(s["n"], 2, "{path} {k}: {s}");
            }
            // Every run is kept, one per round, each with its own figures and summary.
            let runs = p["runs"].as_array().expect("runs");
            assert_eq!(runs.len(), 2, "{path}: {runs:#?}");
            let rounds: BTreeSet<u64> = runs.iter().map(|r| r["round"].as_u64().unwrap()).collect();
            assert_eq!(rounds, BTreeSet::from([0, 1]), "{path}");
            for r in runs {
                assert!(r["error"].is_null(), "{path}: {}", r["error"]);
                assert!(r["measured_iops"].as_f64().unwrap() > 0.0, "{path}: {r}");
                let (p50, p99, p999) = (r["measured_lat_p50_ns"].as_u64().unwrap(), r["measured_lat_p99_ns"].as_u64().unwrap(), r["measured_lat_p999_ns"].as_u64().unwrap());
                assert!(0 < p50 && p50 <= p99 && p99 <= p999, "{path}: percentiles {p50} {p99} {p999}");
                assert!(r["measured_cpu_ns_per_io"].as_f64().unwrap() >= r["modelled_useful_cpu_ns_per_io"].as_f64().unwrap());
                assert!(r["summary"]["cpu"]["cpu_ns_per_io"].is_number(), "the whole run summary is kept");
                // One thread: useful CPU is raw times the share of the loop's
                // time not in empty polls, exactly (to rounding).
                let c = &r["summary"]["cpu"];
                let (raw, useful, pct) = (c["cpu_ns_per_io"].as_f64().unwrap(), c["useful_cpu_ns_per_io"].as_f64().unwrap(), c["empty_poll_pct"].as_f64().unwrap());
                assert!((useful - raw * (1.0 - pct / 100.0)).abs() <= 1e-9 * raw.max(1.0), "{path}: useful {useful}, raw {raw}, {pct}% empty");
                seqs.push((r["seq"].as_u64().unwrap(), r["round"].as_u64().unwrap(), path, p["iodepth"].as_u64().unwrap(), p["bs"].as_u64().unwrap()));
            }
        }
    }
    // Rotated order: 16 runs numbered once each; each round begins a path
    // with a different setting.
    seqs.sort();
    assert_eq!(seqs.iter().map(|s| s.0).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
    let first = |round: u64| seqs.iter().find(|s| s.1 == round && s.2 == "sim").map(|s| (s.3, s.4)).unwrap();
    assert_ne!(first(0), first(1), "round 2 starts sim where round 1 did: {seqs:?}");
    // With two CPUs the simulator has one of its own, and the sweep says
    // whether the two were separate cores.
    if std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) >= 2 {
        assert!(j["core_share"]["share"].as_f64().is_some_and(f64::is_finite), "core_share: {}", j["core_share"]);
        assert!(stdout.contains("simulator CPUs:"), "the table does not say which cores:\n{stdout}");
    }
    let centre = points.iter().find(|p| p["path"] == "sim" && p["bs"] == 4096 && p["iodepth"] == 16).unwrap();
    assert_eq!(centre["sweeps"], serde_json::json!(["iodepth", "bs", "numjobs"]));

    // IOPS per core: per path a measured line, and (both simulator paths
    // poll) a dashed modelled ceiling in the same colour.
    let ipc = check_svg(&dir.0, "iops_per_core_vs_qd.svg", 1, 3);
    let lines = data_lines(&ipc);
    for (colour, _) in lines_of(&lines, MEASURED_W) {
        let dashes = lines_of(&lines, MODELLED_W).iter().filter(|(c, _)| *c == colour).count();
        assert!(dashes >= 3, "iops_per_core_vs_qd.svg: path {colour} has no dashed modelled line ({dashes} dashes): {lines:?}");
    }
    let t = texts(&ipc);
    assert!(t.iter().any(|x| x.starts_with("modelled ceiling")), "no key for the modelled ceiling: {t:?}");
    assert!(t.iter().any(|x| x.starts_with("measured IOPS per busy core")), "no key for the measured line: {t:?}");

    let lat = check_svg(&dir.0, "latency_percentiles.svg", 3, 3);
    for p in ["p50", "p99", "p99.9"] {
        assert!(texts(&lat).iter().any(|t| t.starts_with(p) && t.ends_with("measured")), "latency chart has no {p} panel");
    }
    let tp = check_svg(&dir.0, "throughput_vs_bs.svg", 1, 2);
    assert!(texts(&tp).iter().any(|t| t == "16 KiB"), "throughput chart has no 16 KiB label");

    // The latency-throughput curve: per path a point per queue depth, each
    // labelled with it, and min-max bars (two timed runs never agree exactly).
    let curve = check_svg(&dir.0, "latency_vs_iops.svg", 1, 3);
    let t = texts(&curve);
    for qd in ["QD 1", "QD 4", "QD 16"] {
        assert_eq!(t.iter().filter(|x| *x == qd).count(), 2, "latency_vs_iops.svg: want {qd} once per path: {t:?}");
    }
    assert!(!lines_of(&data_lines(&curve), BAR_W).is_empty(), "latency_vs_iops.svg has no min-max bars");
    assert!(t.iter().any(|x| x.starts_with("IOPS, measured")), "latency_vs_iops.svg: x axis does not say measured IOPS: {t:?}");
    assert!(dir.0.join("table.txt").exists());
    assert_eq!(j["charts"], serde_json::json!(["iops_per_core_vs_qd.svg", "latency_percentiles.svg", "throughput_vs_bs.svg", "latency_vs_iops.svg"]));
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
    let (code, _, err) = nvb(&["sweep", "--paths", "sim", "--repeat", "0", "--out", "/nonexistent/never"]);
    assert_eq!(code, 2);
    assert!(err.contains("--repeat 0") && err.contains("e.g. --repeat 3"), "{err}");
    // Every point is checked before the first runs: a block size the
    // simulator cannot do (above its MDTS, 512 KiB), a queue deeper than
    // its queues, a region too small, a size that is not whole blocks.
    let dir = TempDir::new("sweep-refused");
    let out = dir.0.to_str().unwrap();
    for (extra, want) in [
        (&["--bs", "4k,1m"][..], "sim cannot run the point bs=1m iodepth=1 numjobs=1: --bs 1048576 exceeds the largest transfer this path allows"),
        (&["--bs", "4k,1000"][..], "--bs 1000 (of --bs 4k,1000) is not a whole number of 512-byte blocks"),
        (&["--iodepth", "1,4096"][..], "sim: --iodepth 4096 is more than one queue holds here"),
        (&["--sim-size", "8k", "--bs", "4k,16k"][..], "holds no whole --bs 16384 I/O; use a smaller --offset or --bs (or a larger --sim-size)"),
        (&["--sim-size", "1000"][..], "--sim-size 1000 is not a whole number"),
    ] {
        let mut args = vec!["sweep", "--paths", "sim,sim-null", "--iodepth", "1", "--numjobs", "1", "--runtime", "100ms", "--ramp-time", "0", "--out", out];
        args.extend_from_slice(extra);
        let (code, stdout, err) = nvb(&args);
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: expected '{want}' in: {err}");
        assert!(!err.contains("[1/"), "{extra:?}: a point ran before the refusal: {err}");
        assert!(stdout.is_empty() && !dir.0.join("sweep.json").exists(), "{extra:?}: results written");
    }
    // Options of paths not swept are refused, not ignored.
    let (code, _, err) = nvb(&["sweep", "--nsid", "2", "--out", "/nonexistent/never"]);
    assert_eq!(code, 2);
    assert!(err.contains("--nsid has no effect on --paths sim,sim-null"), "{err}");
    let (code, _, err) = nvb(&["sweep", "--device", "/dev/nvme9n9", "--paths", "block", "--sim-size", "1G", "--out", "/nonexistent/never"]);
    assert_eq!(code, 2);
    assert!(err.contains("--sim-size has no effect on --paths block: it is an option of the simulator paths"), "{err}");
    // An earlier sweep's results are not written over.
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sweep-kept-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("sweep.json"), "{}").unwrap();
    let (code, _, err) = nvb(&["sweep", "--paths", "sim", "--out", d.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds an earlier sweep's results"), "{err}");
    assert_eq!(std::fs::read_to_string(d.join("sweep.json")).unwrap(), "{}");
    let _ = std::fs::remove_dir_all(d);
}

/// As bench warns when the simulator's polling threads share a CPU, so does
/// sweep: once for each numjobs whose placement shares one, however many
/// points and rounds run at it, and not for the others.
#[test]
fn sweep_warns_once_when_the_simulators_pollers_share_a_cpu() {
    if std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) < 2 {
        eprintln!("skipped: the simulator's controller needs a CPU of its own (--sim-cpu 1)");
        return;
    }
    let dir = TempDir::new("sweep-sharing");
    let out = dir.0.to_str().unwrap();
    // Jobs on CPU 0, the controller on CPU 1: one job has its CPU, two share it.
    let (code, stdout, stderr) = nvb(&[
        "sweep", "--paths", "sim-null", "--iodepth", "1", "--bs", "4k", "--numjobs", "1,2", "--cpus", "0", "--sim-cpu", "1",
        "--runtime", "100ms", "--ramp-time", "0", "--sim-size", "64M", "--repeat", "2", "--out", out,
    ]);
    assert_eq!(code, 0, "sweep failed:\n{stdout}\n{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning:") && l.contains("polling threads")).collect();
    assert_eq!(warnings.len(), 1, "one warning for the run, not one per point or round:\n{stderr}");
    assert!(warnings[0].contains("numjobs=2") && warnings[0].contains("2 of them on CPU 0"), "{}", warnings[0]);
    assert!(stderr.contains("[4/4]"), "every point ran in both rounds:\n{stderr}");
}
