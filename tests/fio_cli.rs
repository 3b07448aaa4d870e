//! `nvme-bypass fio` as a drop-in for fio, on a regular file (no NVMe
//! device needed): the seed fio command lines run with only `fio`
//! replaced, and their `grep IOPS` lines have fio's shape; files are laid
//! out as fio lays them out and never overwritten by a read job; job files
//! (globals, includes, ${VAR}, stonewall, --section); unsupported options
//! refused by name; JSON output.
//!
//! Files live under Cargo's target directory (a disk filesystem, for
//! O_DIRECT); when O_DIRECT does not work there the tests skip and say so.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fio_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).current_dir(dir).arg("fio").args(args).env("FIO_TEST_BS", "4k").output().expect("run nvme-bypass");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A fresh directory for one test, or None (with a message) when its
/// filesystem has no O_DIRECT.
fn workdir(name: &str) -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fio-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let probe = d.join("probe");
    std::fs::File::create(&probe).unwrap().set_len(1 << 20).unwrap();
    if let Err(e) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&probe) {
        eprintln!("skipped: {} has no O_DIRECT ({e}); run the tests from a checkout on ext4 or xfs", d.display());
        return None;
    }
    std::fs::remove_file(probe).unwrap();
    Some(d)
}

/// Is fio itself installed? If not, says the test is skipped.
fn fio_installed() -> bool {
    let ok = Command::new("fio").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !ok {
        eprintln!("skipped: fio is not installed");
    }
    ok
}

/// A number, optionally with decimals, then one of `units`: the rest.
fn num_unit<'a>(s: &'a str, units: &[&str]) -> Option<&'a str> {
    let d = s.find(|c: char| !c.is_ascii_digit())?;
    if d == 0 {
        return None;
    }
    let mut s = &s[d..];
    if let Some(r) = s.strip_prefix('.') {
        let d = r.find(|c: char| !c.is_ascii_digit())?;
        if d == 0 {
            return None;
        }
        s = &r[d..];
    }
    units.iter().filter_map(|u| s.strip_prefix(u)).next()
}

/// Does `line` have the shape of fio's `read:`/`write:` IOPS line, e.g.
/// `  read: IOPS=391k, BW=1528MiB/s (1602MB/s)(4096MiB/2681msec)`?
fn fio_iops_shape(line: &str) -> bool {
    let (write, rest) = match (line.strip_prefix("  read: IOPS="), line.strip_prefix("  write: IOPS=")) {
        (Some(r), _) => (false, r),
        (_, Some(r)) => (true, r),
        _ => return false,
    };
    let f = || -> Option<()> {
        let r = num_unit(rest, &["k", "M", "G", ""])?.strip_prefix(", BW=")?;
        let r = num_unit(r, &["KiB/s", "MiB/s", "GiB/s", "TiB/s", "B/s"])?.strip_prefix(" (")?;
        let r = num_unit(r, &["kB/s", "MB/s", "GB/s", "TB/s", "B/s"])?.strip_prefix(")(")?;
        let r = num_unit(r, &["KiB", "MiB", "GiB", "TiB", "B"])?.strip_prefix('/')?;
        let r = num_unit(r, &["msec)"])?;
        let r = if write { r.strip_prefix("; 0 zone resets")? } else { r };
        r.is_empty().then_some(())
    };
    f().is_some()
}

#[test]
fn the_shape_check_accepts_real_fio_lines() {
    assert!(fio_iops_shape("  read: IOPS=391k, BW=1528MiB/s (1602MB/s)(4096MiB/2681msec)"));
    assert!(fio_iops_shape("  write: IOPS=130k, BW=509MiB/s (534MB/s)(1365MiB/2681msec); 0 zone resets"));
    assert!(fio_iops_shape("  read: IOPS=3747, BW=14.6MiB/s (15.3MB/s)(14.6MiB/1000msec)"));
    assert!(!fio_iops_shape("  read: IOPS=391k, BW=1.50GiB/s (1.61GB/s)(4096MiB/2.7s)"));
    assert!(!fio_iops_shape("  write: IOPS=130k, BW=509MiB/s (534MB/s)(1365MiB/2681msec)"));
}

/// The seed's three commands, only `fio` replaced (and the size shrunk).
#[test]
fn the_seed_commands_run_unchanged_and_grep_iops_has_fios_shape() {
    let Some(d) = workdir("seed") else { return };
    let host = "testhost";
    for (rw, extra) in [("randrw", &["--rwmixread=75"][..]), ("randread", &[][..]), ("randwrite", &[][..])] {
        let output = format!("--output={host}.{rw}.txt");
        let mut args = vec!["--randrepeat=1", "--ioengine=libaio", "--direct=1", "--gtod_reduce=1", "--name=test", "--filename=test", "--bs=4k", "--iodepth=64", "--size=8M", "--io_size=4M"];
        args.push(if rw == "randrw" { "--readwrite=randrw" } else if rw == "randread" { "--readwrite=randread" } else { "--readwrite=randwrite" });
        args.extend_from_slice(extra);
        args.extend([output.as_str(), "--output-format=normal"]);
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{rw}: {err}");
        assert!(out.is_empty(), "--output takes everything: {out}");
        let text = std::fs::read_to_string(d.join(format!("{host}.{rw}.txt"))).unwrap();
        let iops: Vec<&str> = text.lines().filter(|l| l.contains("IOPS")).collect();
        let want = if rw == "randrw" { 2 } else { 1 };
        assert_eq!(iops.len(), want, "{rw}: {text}");
        for l in &iops {
            assert!(fio_iops_shape(l), "{rw}: not fio's shape: {l:?}");
        }
        assert!(text.starts_with("test: (g=0): rw=") && text.contains("bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, iodepth=64\n"), "{text}");
        assert!(text.contains("test: (groupid=0, jobs=1): err= 0: pid="), "{text}");
        assert!(text.contains("\nRun status group 0 (all jobs):\n"), "{text}");
        assert!(text.contains("  cpu          : usr="), "{text}");
        assert!(text.contains("     issued rwts: total="), "{text}");
        assert!(!text.contains("percentiles"), "gtod_reduce drops the latency block: {text}");
        assert!(text.contains("measured on a regular file"), "ours, labelled: {text}");
        // Laid out by the first command only.
        assert_eq!(text.contains("test: Laying out IO file (1 file / 8MiB)"), rw == "randrw", "{rw}: {text}");
    }
    assert_eq!(std::fs::metadata(d.join("test")).unwrap().len(), 8 << 20);
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn latency_block_without_gtod_reduce_and_a_time_based_run() {
    let Some(d) = workdir("lat") else { return };
    let (code, out, err) = fio_in(&d, &["--name=t", "--filename=f", "--size=8M", "--ioengine=io_uring", "--direct=1", "--rw=randread", "--iodepth=4", "--runtime=300ms", "--time_based", "--numjobs=2", "--group_reporting", "--thread"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Starting 2 threads"), "{out}");
    assert!(out.contains("t: (groupid=0, jobs=2): err= 0"), "{out}");
    // fio's latency lines for an asynchronous engine: slat, clat, lat,
    // then clat's percentiles.
    let at = |p: &str| out.find(p).unwrap_or_else(|| panic!("no {p:?}: {out}"));
    assert!(at("    slat (") < at("    clat (") && at("    clat (") < at("     lat (") && at("     lat (") < at("    clat percentiles ("), "{out}");
    assert!(out.contains("| 99.99th=["), "{out}");
    // A synchronous engine has no submission latency apart: clat and lat.
    let (code, out, err) = fio_in(&d, &["--name=s", "--filename=f", "--size=8M", "--ioengine=psync", "--direct=1", "--rw=randread", "--io_size=256k"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("slat (") && out.contains("    clat (") && out.contains("     lat (") && out.contains("    clat percentiles ("), "{out}");
    // disable_slat: fio's lines without slat.
    let (code, out, err) = fio_in(&d, &["--name=s", "--filename=f", "--size=8M", "--ioengine=io_uring", "--direct=1", "--rw=randread", "--io_size=256k", "--disable_slat=1"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("slat (") && out.contains("    clat (") && out.contains("     lat ("), "{out}");
    // disable_clat: no clat line, no clat percentiles and no latency
    // distribution (fio's marks clat); lat's percentiles when asked for.
    // disable_lat: no lat line, clat's as before. Their JSON entries and
    // latency buckets are fio's empty ones, their log files not written.
    let base = ["--name=s", "--filename=f", "--size=8M", "--ioengine=io_uring", "--direct=1", "--rw=randread", "--io_size=256k", "--output-format=normal,json", "--write_lat_log=l", "--log_avg_msec=1"];
    let run = |extra: &[&str]| {
        let (code, out, err) = fio_in(&d, &[&base[..], extra].concat());
        assert_eq!(code, 0, "{err}");
        // fio's order: the JSON, then the text.
        let json = &out[out.find("{\n").expect("the JSON")..];
        let j: serde_json::Value = serde_json::Deserializer::from_str(json).into_iter().next().expect("the JSON").unwrap_or_else(|e| panic!("{e}: {json}"));
        (out.clone(), j["jobs"][0].clone())
    };
    let empty = serde_json::json!({"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0});
    let logs = |kind: &str| d.join(format!("l_{kind}.1.log")).exists();
    let (out, j) = run(&["--disable_clat=1", "--lat_percentiles=1"]);
    assert!(out.contains("    slat (") && !out.contains("clat (") && out.contains("     lat (") && out.contains("    lat percentiles (") && !out.contains("clat percentiles"), "{out}");
    assert!(!out.contains("  lat (usec)   :") && !out.contains("  lat (nsec)   :") && !out.contains("  lat (msec)   :"), "{out}");
    assert_eq!(j["read"]["clat_ns"], empty);
    assert!(j["read"]["lat_ns"]["N"].as_u64() == Some(64) && j["read"]["lat_ns"]["percentile"].is_object(), "{j}");
    assert!(j["latency_us"].as_object().unwrap().values().all(|v| v.as_f64() == Some(0.0)), "{j}");
    assert!(logs("lat") && logs("slat") && !logs("clat"));
    for k in ["lat", "clat", "slat"] {
        let _ = std::fs::remove_file(d.join(format!("l_{k}.1.log")));
    }
    let (out, j) = run(&["--disable_lat=1", "--lat_percentiles=1"]);
    assert!(out.contains("    slat (") && out.contains("    clat (") && !out.contains("     lat (") && out.contains("    clat percentiles (") && !out.contains("    lat percentiles"), "{out}");
    assert_eq!(j["read"]["lat_ns"], empty);
    assert!(j["read"]["clat_ns"]["N"].as_u64() == Some(64), "{j}");
    assert!(logs("clat") && logs("slat") && !logs("lat"));
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_read_job_never_changes_an_existing_file() {
    let Some(d) = workdir("keep") else { return };
    let f = d.join("data");
    let content: Vec<u8> = (0..(4u32 << 20)).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&f, &content).unwrap();
    let (code, out, err) = fio_in(&d, &["--name=r", "--filename=data", "--ioengine=psync", "--direct=1", "--rw=randread", "--bs=4k"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("Laying out"), "{out}");
    assert!(std::fs::read(&f).unwrap() == content, "a read job changed the file");
    // A file smaller than size= is extended past its end, its data kept.
    let (code, out, err) = fio_in(&d, &["--name=r", "--filename=data", "--ioengine=psync", "--direct=1", "--rw=randread", "--size=8M"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("r: Laying out IO file (1 file / 8MiB)"), "{out}");
    let now = std::fs::read(&f).unwrap();
    assert_eq!(now.len(), 8 << 20);
    assert!(now[..content.len()] == content[..], "laying out overwrote data");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn unsupported_options_are_refused_by_name() {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for (args, want) in [
        (&["--name=x", "--filename=f", "--size=8M", "--rate_min=100"][..], "'rate_min' is not supported, and ignoring it would change the result"),
        (&["--name=x", "--filename=f", "--size=8M", "--write_hist_log=h"][..], "'write_hist_log' is not supported"),
        (&["--name=x", "--filename=f", "--size=8M", "--write_bw_log=bw"][..], "add log_avg_msec=N"),
        (&["--name=x", "--filename=f", "--size=8M", "--write_lat_log=/nonexistent-dir-x/l", "--log_avg_msec=100"][..], "not a directory this process can write"),
        (&["--name=x", "--filename=f", "--size=8M", "--bogus=1"][..], "'bogus' is not one nvme-bypass knows"),
        (&["--name=x", "--filename=f", "--size=8M", "--ioengine=posixaio"][..], "ioengine=posixaio is not supported"),
        (&["--name=x", "--filename=/nonexistent-dir-x/f", "--ioengine=libaio"][..], "give size= so it can be laid out"),
        (&["--name=x", "--filename=f", "--size=8M", "--iodepth_batch_complete_min=4", "--iodepth_batch_complete_max=8"][..], "set both to the same N"),
        (&["--name=x", "--filename=f", "--size=8M", "--output-format=csv,xml"][..], "--output-format=xml is not supported"),
        (&["--name=x", "--filename=f", "--size=8M", "--minimal", "--terse-version=6"][..], "--terse-version=6: fio writes terse versions 2, 3 (its default), 4 and 5"),
        (&["--bs=4k"][..], "no jobs"),
        // Out of range or unusable here: refused before anything is laid out.
        (&["--name=x", "--filename=f", "--size=8M", "--rw=randrw", "--rwmixread=150"][..], "rwmixread=150: a percentage from 0 to 100"),
        (&["--name=x", "--filename=f", "--size=8M", "--cpus_allowed=1023"][..], "cpus_allowed names CPU 1023, which this process may not run on"),
        (&["--name=x", "--filename=f", "--size=8M", "--bs=1000", "--direct=1"][..], "bs=1000 is not a multiple of"),
    ] {
        let (code, _, err) = fio_in(&d, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(!d.join("f").exists(), "a refused job laid its file out");
}

#[test]
fn command_lines_and_job_files_as_fio_reads_them() {
    // Its runs, back to back, would slow the interval-rate tests part way.
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(d) = workdir("cmdline") else { return };
    std::fs::write(d.join("one.fio"), "[job1] ; the job\nfilename=f1 # its file\nsize=2M\nrw=randread\nioengine=psync\n").unwrap();
    // Options after the job file apply to its jobs (fio reads job files
    // after the whole command line); inline comments are not values.
    let (code, out, err) = fio_in(&d, &["one.fio", "--bs=8k", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["global options"]["bs"], "8k", "{out}");
    let r = &v["jobs"][0]["read"];
    assert_eq!(r["io_bytes"].as_u64().unwrap() / r["total_ios"].as_u64().unwrap(), 8192);
    assert!(d.join("f1").exists());
    // --showcmd prints the jobs as a command line and runs nothing, the
    // options in the order fio sorts a section's (filename last, as fio
    // 3.33 prints this job); --eta takes its value as fio's does;
    // --parse-only prints nothing.
    let (code, out, err) = fio_in(&d, &["--showcmd", "--eta", "never", "one.fio"]);
    assert_eq!((code, out.trim()), (0, "fio --name=job1 --size=2M --rw=randread --ioengine=psync --filename=f1"), "{err}");
    let (code, out, _) = fio_in(&d, &["--parse-only", "one.fio"]);
    assert_eq!((code, out.as_str()), (0, ""));
    // --readonly: a file is not extended; an offset past a file's end
    // without size= is refused, the file untouched.
    let (code, _, err) = fio_in(&d, &["--readonly", "--name=r", "--filename=f1", "--size=4M", "--rw=read"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--readonly"), "{err}");
    let (code, _, err) = fio_in(&d, &["--name=r", "--filename=f1", "--rw=read", "--offset=4M"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is past the end of"), "{err}");
    assert_eq!(std::fs::metadata(d.join("f1")).unwrap().len(), 2 << 20, "refused jobs leave the file as it was");
    // A directory= that is not there is refused, not made.
    let (code, _, err) = fio_in(&d, &["--name=x", "--directory=nodir", "--filename=f", "--size=1M"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("directory=nodir is not a directory") && !d.join("nodir").exists(), "{err}");
    // fio's sizes: KiB is 1000 under its default kb_base=1024, so 4KiB is
    // no block size for O_DIRECT; io_size under a block is one I/O.
    let (code, _, err) = fio_in(&d, &["--name=x", "--filename=f1", "--rw=read", "--direct=1", "--bs=4KiB"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bs=4000"), "{err}");
    let (code, out, err) = fio_in(&d, &["--name=x", "--filename=f1", "--rw=read", "--io_size=1k", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap()["jobs"][0]["read"]["total_ios"], 1);
    // A job that cannot run is said; the others' figures are reported
    // and the exit status is fio's 1.
    std::fs::write(d.join("late.fio"), "[global]\nsize=1M\nioengine=nvme-bypass-sim\n[a]\nrw=read\n[b]\nstonewall\nioengine=nvme-bypass-vfio\nfilename=0000\\:ff\\:1f.7\n[c]\nstonewall\nrw=randread\n").unwrap();
    let (code, out, err) = fio_in(&d, &["late.fio"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out.matches("read: IOPS=").count(), 2, "{out}");
    assert!(err.contains("job b:") && err.contains("not run"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn files_as_fio_finds_them_read_only_sized_by_themselves_in_new_directories() {
    let Some(d) = workdir("files") else { return };
    // Directories a file name leads through are made, as fio makes them;
    // a later job without size= finds the file an earlier one laid out.
    let (code, out, err) = fio_in(&d, &["--name=w", "--filename=a/b/data", "--size=4M", "--rw=write", "--ioengine=psync", "--direct=1", "--name=r", "--stonewall", "--filename=a/b/data", "--rw=read", "--ioengine=psync", "--direct=1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("w: Laying out IO file (1 file / 4MiB)"), "{out}");
    assert_eq!(std::fs::metadata(d.join("a/b/data")).unwrap().len(), 4 << 20);
    // directory= holds an absolute file name too, as fio's add_file joins
    // them: /nvb-abs/data under directory=sub is sub/nvb-abs/data.
    std::fs::create_dir_all(d.join("sub")).unwrap();
    let (code, _, err) = fio_in(&d, &["--name=a", "--directory=sub", "--filename=/nvb-abs/data", "--size=1M", "--rw=write", "--io_size=4k"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::metadata(d.join("sub/nvb-abs/data")).unwrap().len(), 1 << 20);
    assert!(!Path::new("/nvb-abs").exists());
    // size=0 is fio's default: the file's own size. A read job opens its
    // file read-only, so a file nobody may write serves it.
    // (Root writes past a mode of 0444; an immutable file it cannot.)
    let f = d.join("a/b/data");
    let mut perm = std::fs::metadata(&f).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(&f, perm).unwrap();
    let immutable = Command::new("chattr").arg("+i").arg(&f).status().is_ok_and(|s| s.success());
    if !immutable {
        eprintln!("note: chattr +i did not work here; a run as root then shows nothing of the read-only open");
    }
    let (code, out, err) = fio_in(&d, &["--name=r", "--filename=a/b/data", "--size=0", "--rw=randread", "--ioengine=io_uring", "--direct=1", "--iodepth=4", "--bs=512"]);
    if immutable {
        let _ = Command::new("chattr").arg("-i").arg(&f).status();
    }
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(4096KiB/"), "the file's own 4 MiB: {out}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_write_jobs_verify_phase_is_its_read_line_and_a_mismatch_is_fios_err_84() {
    let Some(d) = workdir("verify") else { return };
    let job = ["--name=v", "--filename=data", "--size=4M", "--bs=4k", "--ioengine=libaio", "--iodepth=8", "--direct=1"];
    let (code, out, err) = fio_in(&d, &[&job[..], &["--rw=write", "--verify=crc32c"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("err= 0"), "{out}");
    // Sequential writes cover every block once: the verify phase reads
    // all 1024 back, and fio shows it as the job's read direction.
    assert!(out.contains("  read: IOPS=") && out.contains("(4096KiB/"), "{out}");
    assert!(out.contains("issued rwts: total=1024,1024,0,0"), "{out}");
    assert!(out.contains("verify read back 1024 I/Os after the job") && out.contains(" 0 mismatching"), "{out}");
    assert!(out.contains("   READ: bw="), "{out}");
    // Random writes cover every block once, as fio's random map has them;
    // with norandommap blocks repeat, and fewer distinct ones are read back.
    let (code, out, err) = fio_in(&d, &[&job[..], &["--rw=randwrite", "--verify=crc32c"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verify read back 1024 I/Os after the job"), "{out}");
    let (code, out, err) = fio_in(&d, &[&job[..], &["--rw=randwrite", "--verify=crc32c", "--norandommap"]].concat());
    assert_eq!(code, 0, "{err}");
    let back: u64 = out.split("verify read back ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).expect("a read-back line");
    assert!(back < 1024, "norandommap: {back} distinct blocks of 1024 written");
    // One block changed behind its back: a read job verifying the stamps
    // finds it, and the job line says err=84 (EILSEQ) as fio's does.
    let f = d.join("data");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[3 * 4096 + 100] ^= 0xff;
    std::fs::write(&f, &bytes).unwrap();
    let (code, out, err) = fio_in(&d, &[&job[..], &["--rw=read", "--verify=crc32c"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("err=84"), "{out}");
    assert!(err.contains("verify found 1 mismatching blocks"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// `startdelay`: a job set up that long after the run started, as fio's
/// run_threads starts it; a range is refused; a signal during the wait
/// ends the run with the job among those not run.
#[test]
fn startdelay_starts_a_job_later_as_fios() {
    let Some(d) = workdir("startdelay") else { return };
    let t0 = std::time::Instant::now();
    let (code, out, err) = fio_in(&d, &["--name=a", "--filename=data", "--size=8M", "--rw=randread", "--runtime=200ms", "--time_based", "--name=b", "--filename=data", "--rw=randread", "--runtime=200ms", "--time_based", "--startdelay=700ms"]);
    assert_eq!(code, 0, "{err}");
    assert!(t0.elapsed() >= std::time::Duration::from_millis(900), "b started 700 ms in and ran 200 ms: {:?}", t0.elapsed());
    assert!(out.contains("a: (groupid=0") && out.contains("b: (groupid=0"), "{out}");
    let (code, _, err) = fio_in(&d, &["--name=a", "--filename=data", "--size=8M", "--startdelay=1-5"]);
    assert_eq!(code, 2);
    assert!(err.contains("startdelay=1-5: a random delay within a range is not supported") && err.contains("startdelay=1"), "{err}");
    let child = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .current_dir(&d)
        .args(["fio", "--name=a", "--filename=data", "--size=8M", "--rw=randread", "--startdelay=600"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let t1 = std::time::Instant::now();
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(128), "{err}");
    assert!(t1.elapsed() < std::time::Duration::from_secs(60), "the wait ends on the signal, not after 600 s");
    assert!(out.contains("terminating on signal 2") && out.contains("not run: a") && !err.contains("error"), "{out}{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// `exitall`: the first job of a reporting group to end ends the others
/// (`exit_what=group`), or every job running beside it up to the next
/// stonewall (`exit_what=stonewall`); their figures cover what they ran.
/// A time_based job's measured interval is its runtime at least, as
/// fio's (300 ms gives fio's 300-301).
#[test]
fn exitall_ends_the_group_with_its_first_job_as_fios() {
    let Some(d) = workdir("exitall") else { return };
    let job = |short: &[&str], long: &[&str]| {
        let mut a = vec!["--filename=data", "--size=8M", "--rw=randread", "--time_based", "--output-format=json"];
        a.extend(["--name=short", "--runtime=300ms", "--exitall"]);
        a.extend(short);
        a.extend(["--name=long", "--runtime=5", "--filename=data", "--rw=randread", "--time_based"]);
        a.extend(long);
        let (code, out, err) = fio_in(&d, &a);
        assert_eq!(code, 0, "{short:?} {long:?}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let rt = |k: usize| j["jobs"][k]["read"]["runtime"].as_u64().unwrap();
        (rt(0), rt(1))
    };
    // One group: long ends with short.
    let (short, long) = job(&[], &[]);
    assert!(short >= 300, "the runtime asked for, at least: {short}");
    assert!(long < 2500, "ended with short, not after its 5 s: {long}");
    // long in a group of its own: it runs on, unless exit_what=stonewall.
    let t0 = std::time::Instant::now();
    let (_, long) = job(&[], &["--new_group"]);
    assert!(long >= 5000 && t0.elapsed() >= std::time::Duration::from_secs(5), "{long}");
    let (_, long) = job(&["--exit_what=stonewall"], &["--new_group"]);
    assert!(long < 2500, "exit_what=stonewall: {long}");
    let (code, _, err) = fio_in(&d, &["--name=a", "--filename=data", "--size=8M", "--exitall", "--exit_what=all"]);
    assert_eq!(code, 2);
    assert!(err.contains("exit_what=all is not supported"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_signal_ends_the_run_as_fios_does() {
    let Some(d) = workdir("signal") else { return };
    let child = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .current_dir(&d)
        .args(["fio", "--name=a", "--filename=data", "--size=8M", "--rw=randread", "--ioengine=psync", "--runtime=60", "--time_based", "--name=b", "--stonewall", "--filename=data", "--rw=read", "--runtime=60", "--time_based"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Well into job a (laying out 8 MiB takes a fraction of this).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(128), "fio's exit status after a signal: {err}");
    assert!(out.contains("nvme-bypass fio: terminating on signal 2") && out.contains("not run: b"), "{out}");
    assert!(out.contains("a: (groupid=0") && out.contains("read: IOPS="), "the figures of what ran: {out}");
    // Every group's line, the one that did not run with nothing under it.
    assert!(out.contains("Run status group 0 (all jobs):\n   READ:"), "{out}");
    let after = out.split_once("Run status group 1 (all jobs):\n").map(|(_, a)| a).unwrap_or_else(|| panic!("no line for group 1: {out}"));
    assert!(!after.starts_with("   READ") && !after.starts_with("  WRITE"), "group 1 did not run: nothing under its line, as fio: {out}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_signal_while_a_file_is_laid_out_ends_the_run_as_any_signal_and_keeps_what_was_written() {
    use std::io::BufRead;
    let Some(d) = workdir("signal-layout") else { return };
    // 8 GiB: seconds of writing, stopped within a fraction of one.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .current_dir(&d)
        .args(["fio", "--name=a", "--filename=big", "--size=8G", "--rw=randread", "--ioengine=psync", "--runtime=1", "--name=b", "--stonewall", "--filename=data", "--size=1M", "--rw=read"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = String::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        out.push_str(&l);
        out.push('\n');
        if l.contains("Laying out IO file") {
            break;
        }
    }
    assert!(out.contains("a: Laying out IO file (1 file / 8192MiB)"), "{out}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    for l in lines {
        out.push_str(&l.unwrap());
        out.push('\n');
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(128), "the exit status of any signal, as fio's: {err}");
    assert!(out.contains("nvme-bypass fio: terminating on signal 2") && out.contains("not run: a, b"), "{out}");
    assert!(!out.contains("b: Laying out"), "nothing is laid out after the signal: {out}");
    assert!(err.contains("laying out big stopped at") && err.contains("of 8192 MiB; the next run lays out the rest"), "{err}");
    let kept = std::fs::metadata(d.join("big")).unwrap().len();
    assert!(kept > 0 && kept < 8 << 30, "what was written stays: {kept} bytes");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn job_files_with_globals_includes_env_stonewall_and_section() {
    let Some(d) = workdir("jobs") else { return };
    std::fs::write(d.join("common.fio"), "ioengine=libaio\ndirect=1\n").unwrap();
    std::fs::write(
        d.join("two.fio"),
        "; two jobs, one after the other\n[global]\ninclude common.fio\nfilename=${FIO_TEST_FILE}\nsize=8M\nio_size=2M\nbs=${FIO_TEST_BS}\n\n[writer]\nrw=randwrite\niodepth=8\n\n[reader]\nstonewall\nrw=randread\niodepth=4\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .current_dir(&d)
        .args(["fio", "two.fio", "--output-format=normal,json"])
        .env("FIO_TEST_FILE", "shared")
        .env("FIO_TEST_BS", "4k")
        .output()
        .unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{e}");
    assert!(o.contains("writer: (g=0): rw=randwrite") && o.contains("reader: (g=1): rw=randread"), "{o}");
    assert!(o.contains("ioengine=libaio, iodepth=8") && o.contains("ioengine=libaio, iodepth=4"), "{o}");
    assert!(o.contains("Run status group 0 (all jobs):") && o.contains("Run status group 1 (all jobs):"), "{o}");
    // fio writes the JSON report before the text's results.
    let at = o.find("\n{").unwrap();
    assert!(at < o.find("Run status group 0").unwrap(), "{o}");
    let json: serde_json::Value = serde_json::Deserializer::from_str(&o[at..]).into_iter().next().unwrap().unwrap();
    let jobs = json["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!((jobs[0]["jobname"].as_str(), jobs[0]["groupid"].as_u64()), (Some("writer"), Some(0)));
    assert_eq!((jobs[1]["jobname"].as_str(), jobs[1]["groupid"].as_u64()), (Some("reader"), Some(1)));
    assert_eq!(jobs[1]["read"]["io_bytes"].as_u64(), Some(2 << 20));
    // fio's split: [global]'s options under "global options", each job's
    // own under its "job options".
    let opt = |j: &serde_json::Value, k: &str| if j["job options"][k].is_null() { json["global options"][k].clone() } else { j["job options"][k].clone() };
    assert_eq!(opt(&jobs[0], "ioengine"), "libaio");
    assert_eq!(opt(&jobs[0], "filename"), "shared", "the environment variable is substituted");
    assert_eq!(jobs[1]["job options"]["iodepth"], "4");
    assert!(jobs[1]["job options"]["name"].is_null(), "a section's name is not among its options (fio lists only a name= line)");
    assert!(jobs[1]["job options"]["stonewall"].is_null(), "nor a bare option, as fio");
    // A [global] name= names no job (fio names each after its section);
    // a job's own name= renames it, as fio's.
    std::fs::write(d.join("names.fio"), "[global]\nname=foo\nfilename=shared\nsize=1M\nioengine=psync\n[file1]\nrw=read\n[file2]\nname=bar\nrw=read\n").unwrap();
    let (code, out, err) = fio_in(&d, &["names.fio", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let names: Vec<&str> = j["jobs"].as_array().unwrap().iter().map(|x| x["jobname"].as_str().unwrap()).collect();
    assert_eq!(names, ["file1", "bar"], "fio 3.33 names them so");
    assert_eq!(j["global options"]["name"], "foo");
    // --section runs one.
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).current_dir(&d).args(["fio", "--section=reader", "two.fio"]).env("FIO_TEST_FILE", "shared").env("FIO_TEST_BS", "4k").output().unwrap();
    let o = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(o.contains("reader: (g=0)") && !o.contains("writer"), "{o}");
    let _ = std::fs::remove_dir_all(d);
}

/// Two jobs of one group, each 1.5 s of I/O: run together, as fio runs
/// them, the whole takes well under the 3 s they would take one after the
/// other; a stonewall puts the second after the first.
#[test]
fn jobs_of_one_group_run_at_the_same_time() {
    let Some(d) = workdir("group") else { return };
    let args = |sep: &'static [&'static str]| {
        let mut v = vec!["--filename=g", "--size=8M", "--ioengine=psync", "--direct=1", "--runtime=1500ms", "--time_based", "--name=a", "--rw=randread"];
        v.extend_from_slice(&["--name=b", "--rw=randread"]);
        v.extend_from_slice(sep);
        v
    };
    let t = std::time::Instant::now();
    let (code, out, err) = fio_in(&d, &args(&[]));
    let together = t.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("a: (groupid=0, jobs=1)") && out.contains("b: (groupid=0, jobs=1)"), "{out}");
    assert!(!out.contains("one after another"), "{out}");
    assert!(together < std::time::Duration::from_millis(2900), "two 1.5 s jobs of one group took {together:?}: not at the same time");
    let t = std::time::Instant::now();
    let (code, out, err) = fio_in(&d, &args(&["--stonewall"]));
    let apart = t.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("b: (groupid=1, jobs=1)"), "{out}");
    assert!(apart >= std::time::Duration::from_millis(3000), "stonewall: one after the other, 2 x 1.5 s, took {apart:?}");
    let _ = std::fs::remove_dir_all(d);
}

/// `size=N%`: N% of each file's own size from offset, in whole blocks,
/// as fio 3.33's setup_files takes it, and `offset=N%` as its
/// get_start_offset; the I/O counts are fio's for the
/// same jobs on files of the same sizes.
#[test]
fn size_as_a_share_of_each_file_as_fios() {
    let Some(d) = workdir("sizepct") else { return };
    for (f, mib) in [("r", 8u64), ("p", 2), ("q", 3)] {
        std::fs::File::create(d.join(f)).unwrap().set_len(mib << 20).unwrap();
    }
    // (options, fio 3.33's total_ios on these files)
    for (opts, ios) in [
        ("--filename=r --size=25%", 512),
        ("--filename=r --offset=1M --size=50%", 1024),
        ("--filename=r --offset=6M --size=50%", 512),
        ("--filename=r --offset=1M --size=100%", 1792),
        ("--filename=r --size=1%", 20),
        ("--filename=r --bs=3k --size=33%", 901),
        ("--filename=p:q --size=50%", 640),
        ("--filename=p:q --size=100%", 1280),
        // offset=N%: N% into the file, rounded up to a whole bs.
        ("--filename=r --offset=50%", 1024),
        ("--filename=r --offset=30% --bs=3k", 1910),
        ("--filename=r --offset=50% --size=1M", 256),
        // Several files: each from N% of its own size (fio's file_offset).
        ("--filename=p:q --offset=50%", 640),
        ("--filename=p:q --offset=25% --size=50%", 640),
        ("--filename=r:p --offset=50%", 1280),
        ("--filename=p:q --offset=30% --bs=3k", 1193),
        ("--filename=q:p --offset=75% --size=100%", 320),
    ] {
        let args: Vec<&str> = ["--name=t", "--rw=randread", "--output-format=json"].into_iter().chain(opts.split(' ')).collect();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{opts}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{opts}: {e}: {out}"));
        assert_eq!(j["jobs"][0]["read"]["total_ios"], ios, "{opts}");
    }
    for (opts, says) in [
        ("--filename=r --size=150%", "at most 100%"),
        ("--filename=r --size=12.5%", "as 12 bytes"),
        ("--filename=new --size=50%", "does not exist, and size=50% is a share of its size"),
        ("--filename=r --offset=8M --size=50%", "offset"),
        ("--filename=p:q --offset=100%", "offset=100% leaves less than one bs=4096 in each of the 2 files"),
        ("--filename=r --offset=101%", "at most 100%"),
    ] {
        let args: Vec<&str> = ["--name=t", "--rw=randread"].into_iter().chain(opts.split(' ')).collect();
        let (code, _, err) = fio_in(&d, &args);
        assert_eq!(code, 2, "{opts}");
        assert!(err.contains(says), "{opts}: {err}");
    }
    // offset=N% of a path sized when it is opened (the simulator's namespace).
    let (code, _, err) = fio_in(&d, &["--name=t", "--ioengine=nvme-bypass-sim", "--size=16M", "--offset=100%"]);
    assert_eq!(code, 2);
    assert!(err.contains("job t: offset=100% of sim (1073741824 bytes) leaves nothing of it") && !err.contains("job t: job t"), "{err}");
    assert_eq!(file_len(&d.join("r")), 8 << 20, "nothing laid out or cut");
    assert!(!d.join("new").exists());
    // Several files with size=: each laid out to its own start + its
    // share, as fio lays them out (fio 3.33 on these files: p to
    // 2,936,832 bytes, new, not there before, from 0 to 1 MiB).
    for (opts, ios, lens) in [("--filename=p:q --offset=90% --size=2M", 512, [("p", 2_936_832), ("q", 3_883_008)]), ("--filename=r:new --offset=50% --size=2M", 512, [("r", 8 << 20), ("new", 1 << 20)])] {
        let args: Vec<&str> = ["--name=t", "--rw=randread", "--output-format=json"].into_iter().chain(opts.split(' ')).collect();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{opts}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{opts}: {e}: {out}"));
        assert_eq!(j["jobs"][0]["read"]["total_ios"], ios, "{opts}");
        for (f, len) in lens {
            assert_eq!(file_len(&d.join(f)), len, "{opts}: {f}");
        }
    }
    let _ = std::fs::remove_dir_all(d);
}

/// `number_ios`: at most that many I/Os a loop, as fio 3.33 counts them
/// on the same file (its total_ios beside each); a time_based job runs
/// for its runtime, as fio's does, and says so.
#[test]
fn number_ios_ends_a_loop_as_fios() {
    let Some(d) = workdir("nios") else { return };
    std::fs::File::create(d.join("r")).unwrap().set_len(8 << 20).unwrap();
    for (opts, ios) in [
        ("--number_ios=100", 100),
        ("--number_ios=100 --loops=3", 300),
        ("--number_ios=5000", 2048),
        ("--number_ios=100 --io_size=40k", 10),
        ("--number_ios=1k", 1024),
        ("--number_ios=100 --rw=randrw", 100),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=r", "--rw=randread", "--output-format=json"].into_iter().chain(opts.split(' ')).collect();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{opts}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{opts}: {e}: {out}"));
        let r = &j["jobs"][0];
        assert_eq!(r["read"]["total_ios"].as_u64().unwrap() + r["write"]["total_ios"].as_u64().unwrap(), ios, "{opts}");
    }
    let (code, _, err) = fio_in(&d, &["--name=t", "--filename=r", "--rw=randread", "--number_ios=10", "--runtime=100ms", "--time_based"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("number_ios=10 does not end a time_based job (fio ignores it there too)"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// `random_distribution`: skewed offsets as fio draws them (the unit
/// tests of `engine::workload` compare the hit counts with fio's); here
/// the option runs on each path's file, with verification, and its
/// mistakes are refused before anything is laid out.
#[test]
fn random_distribution_runs_and_is_refused_in_fios_terms() {
    let Some(d) = workdir("rdist") else { return };
    std::fs::File::create(d.join("r")).unwrap().set_len(8 << 20).unwrap();
    for opts in [
        "--rw=randread --random_distribution=zipf:1.2",
        "--rw=randrw --random_distribution=zoned:60/10:30/20:10/70 --ioengine=io_uring --iodepth=8",
        "--rw=randwrite --random_distribution=pareto:0.3 --verify=crc32c --ioengine=libaio --iodepth=16",
        "--rw=randread --random_distribution=zoned_abs:50/1m:50/7m --numjobs=2",
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=r", "--io_size=2m", "--output-format=json"].into_iter().chain(opts.split(' ')).collect();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{opts}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{opts}: {e}: {out}"));
        let ios: u64 = j["jobs"].as_array().unwrap().iter().map(|r| r["read"]["total_ios"].as_u64().unwrap() + r["write"]["total_ios"].as_u64().unwrap()).sum();
        assert!(ios >= 512, "{opts}: {ios} I/Os");
    }
    for (opts, want) in [
        ("--random_distribution=zipf:1", "zipf's theta must be a number other than 1"),
        ("--random_distribution=zoned:50/10:40/20", "the access percentages add up to 90, not 100"),
        ("--random_distribution=zoned_abs:50/4m:50/5m", "the zones end at byte 9437184 but the region holds 8388608 bytes"),
        ("--random_distribution=zoned:60/10:40/90,100/100", "fio 3.33 cannot read zones per direction"),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=new", "--size=8m", "--rw=randread"].into_iter().chain(opts.split(' ')).collect();
        let (code, _, err) = fio_in(&d, &args);
        assert_eq!(code, 2, "{opts}: {err}");
        assert!(err.contains(want), "{opts}: {err}");
        assert!(!d.join("new").exists(), "{opts}: a refused job laid its file out");
    }
    // Several files: each draws over its own blocks, so zones fit each
    // file's share, and the files must be of one size.
    std::fs::File::create(d.join("s")).unwrap().set_len(4 << 20).unwrap();
    for (opts, want) in [
        ("--size=8m --random_distribution=zoned_abs:50/1m:50/3m", None),
        ("--size=8m --random_distribution=zoned_abs:50/3m:50/2m", Some("the zones end at byte 5242880 but the region holds 4194304 bytes")),
        ("--random_distribution=zipf", Some("random_distribution over 2 files of different sizes (8388608, 4194304 bytes) is not supported")),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=r:s", "--rw=randread", "--io_size=1m"].into_iter().chain(opts.split(' ')).collect();
        let (code, _, err) = fio_in(&d, &args);
        assert_eq!(code, if want.is_some() { 2 } else { 0 }, "{opts}: {err}");
        assert!(want.is_none_or(|w| err.contains(w)), "{opts}: {err}");
    }
    let _ = std::fs::remove_dir_all(d);
}

/// `thinktime`: the job stalls after every thinktime_blocks I/Os, as
/// fio's handle_thinktime does (checked against fio 3.33: the same number
/// of sleeps, `ctx`, and runtimes within a few ms, docs/fio.md).
#[test]
fn thinktime_stalls_a_job_as_fios() {
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(d) = workdir("think") else { return };
    std::fs::File::create(d.join("r")).unwrap().set_len(8 << 20).unwrap();
    // (options, stalls at least): fio 3.33 slept 10, 25, 9 and 100 times. The
    // first two are fixed by the counts; counting completions at depth 4
    // (the third) depends on which reaps find them, so only half is held.
    for (opts, stalls) in [
        ("--thinktime=1ms --io_size=40k", 10),
        ("--thinktime=500 --thinktime_blocks=4 --thinktime_blocks_type=issue --ioengine=io_uring --iodepth=8 --io_size=400k", 25),
        ("--thinktime=1ms --thinktime_spin=200us --thinktime_blocks=10 --ioengine=libaio --iodepth=4 --io_size=400k", 5),
        // 0 stalls after every I/O queued (fio 3.33: 100 stalls, ctx 200).
        ("--thinktime=500 --thinktime_blocks=0 --ioengine=io_uring --iodepth=8 --io_size=400k", 100),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=r", "--rw=randread", "--output-format=json"].into_iter().chain(opts.split(' ')).collect();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{opts}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{opts}: {e}: {out}"));
        let r = &j["jobs"][0];
        let think_ms = if opts.contains("=500 ") { 0.5 } else { 1.0 } * stalls as f64;
        assert!(r["read"]["runtime"].as_u64().unwrap() as f64 >= think_ms - 1.0, "{opts}: {}", r["read"]);
        assert!(r["ctx"].as_u64().unwrap() >= stalls, "{opts}: ctx {}", r["ctx"]);
    }
    for (opts, want) in [
        ("--thinktime=1ms --thinktime_iotime=1", "thinktime_iotime is not supported"),
        ("--thinktime=1ms --rate_ignore_thinktime=1", "rate_ignore_thinktime=1 is not supported"),
        ("--thinktime=1ms --thinktime_blocks_type=both", "use complete"),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=r", "--rw=randread"].into_iter().chain(opts.split(' ')).collect();
        let (code, _, err) = fio_in(&d, &args);
        assert_eq!(code, 2, "{opts}: {err}");
        assert!(err.contains(want), "{opts}: {err}");
    }
    let _ = std::fs::remove_dir_all(d);
}

/// `fsync`/`fdatasync` and `end_fsync`: a flush after every N writes,
/// before the next I/O, as fio 3.33 counts them (issued rwts' fourth
/// figure, the `sync` block and JSON entry); end_fsync's not counted.
#[test]
fn fsync_flushes_as_fios() {
    let Some(d) = workdir("fsync") else { return };
    std::fs::File::create(d.join("w")).unwrap().set_len(8 << 20).unwrap();
    // (options, syncs): fio 3.33 issued 9, 33, 19 and 0.
    for (opts, syncs) in [
        ("--rw=randwrite --fsync=10 --end_fsync=1", 9),
        ("--rw=write --fdatasync=3 --ioengine=libaio --iodepth=4", 33),
        ("--rw=randwrite --fsync=5 --verify=crc32c --ioengine=io_uring --iodepth=8", 19),
        ("--rw=randwrite --fsync=10 --io_size=40k", 0),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=w", "--io_size=400k", "--direct=1"].into_iter().chain(opts.split(' ')).collect();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{opts}: {err}");
        assert!(out.contains(&format!(",0,{syncs} short=0,0,0,0")), "{opts}: {out}");
        assert_eq!(out.contains("  fsync/fdatasync/sync_file_range:\n    sync ("), syncs > 0, "{opts}: {out}");
        let json: Vec<&str> = args.iter().copied().chain(["--output-format=json"]).collect();
        let (code, out, err) = fio_in(&d, &json);
        assert_eq!(code, 0, "{opts}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{opts}: {e}: {out}"));
        let sync = &j["jobs"][0]["sync"];
        assert_eq!(sync["total_ios"].as_u64(), Some(syncs), "{opts}: {sync}");
        assert_eq!(sync["lat_ns"]["N"].as_u64(), Some(syncs), "{opts}: {sync}");
        assert_eq!(j["jobs"][0]["write"]["total_ios"].as_u64(), Some(if opts.contains("40k") { 10 } else { 100 }), "{opts}");
    }
    let (code, _, err) = fio_in(&d, &["--name=t", "--filename=w", "--rw=write", "--fsync=4", "--fdatasync=8"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("both are the path's flush here, so give one"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// `description=` under the job's line and as the JSON's `desc`; the JSON's
/// job options under fio's own names, the last value winning; bs in the
/// header as fio's num2str writes it; a reader that goes away ends the run
/// quietly with SIGPIPE's status.
#[test]
fn description_job_options_and_header_as_fio_gives_them() {
    let Some(d) = workdir("desc") else { return };
    let args = ["--name=t", "--ioengine=nvme-bypass-sim", "--size=4m", "--readwrite=randwrite", "--rw=randread", "--blocksize=64k", "--description=my job", "--io_size=128k", "--output-format=json,normal"];
    let (code, out, err) = fio_in(&d, &args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\n  Description  : [my job]\n"), "{out}");
    assert!(out.contains("t: (g=0): rw=randread, bs=(R) 64.0KiB-64.0KiB, (W) 64.0KiB-64.0KiB, (T) 64.0KiB-64.0KiB,"), "{out}");
    let j: serde_json::Value = serde_json::Deserializer::from_str(&out[out.find('{').unwrap()..]).into_iter().next().unwrap().unwrap();
    let job = &j["jobs"][0];
    assert_eq!(job["desc"], "my job");
    let opts = job["job options"].as_object().unwrap();
    assert_eq!(opts.get("rw").and_then(|v| v.as_str()), Some("randread"), "{opts:?}");
    assert_eq!(opts.get("bs").and_then(|v| v.as_str()), Some("64k"), "{opts:?}");
    assert!(!opts.contains_key("readwrite") && !opts.contains_key("blocksize"), "{opts:?}");
    // `| head -1`: the pipe closes after the first line.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .current_dir(&d)
        .args(["fio", "--name=t", "--ioengine=nvme-bypass-sim", "--size=4m", "--rw=randread", "--io_size=64k"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(141), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(d);
}

/// etcd's disk check, `fio --rw=write --ioengine=sync --fdatasync=1
/// --directory=... --size=22m --bs=2300`, runs as written: fio's sync
/// engine (read/write at the file position, an lseek only when the I/O
/// starts elsewhere) and buffered I/O to a file in any bs.
#[test]
fn etcds_disk_check_runs_unchanged_with_the_sync_engine_and_any_buffered_bs() {
    let Some(d) = workdir("etcd") else { return };
    std::fs::create_dir_all(d.join("data")).unwrap();
    let syscalls = |args: &[&str]| {
        let mut all = vec!["--name=mytest", "--directory=data", "--bs=2300", "--output-format=json"];
        all.extend_from_slice(args);
        let (code, out, err) = fio_in(&d, &all);
        assert_eq!(code, 0, "{args:?}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        let job = &j["jobs"][0];
        (job["write"]["total_ios"].as_u64().unwrap(), job["sync"]["total_ios"].as_u64().unwrap(), job["nvme_bypass"]["counters"]["syscalls"].as_u64().unwrap())
    };
    // 10 writes of 2300 bytes, fdatasync after each but the last (as fio
    // 3.33: 9 fdatasync calls, strace), one lseek at the start.
    assert_eq!(syscalls(&["--rw=write", "--ioengine=sync", "--fdatasync=1", "--size=23000"]), (10, 9, 1 + 10 + 9));
    assert_eq!(std::fs::metadata(d.join("data/mytest.0.0")).unwrap().len(), 23000);
    // psync: no lseek.
    assert_eq!(syscalls(&["--rw=write", "--ioengine=psync", "--size=23000"]), (10, 0, 10));
    // Random offsets: an lseek before most writes.
    let (ios, _, calls) = syscalls(&["--rw=randwrite", "--ioengine=sync", "--size=230000"]);
    assert!(ios == 100 && calls > 150 && calls <= 200, "{ios} writes, {calls} system calls");
    // O_DIRECT still wants whole blocks.
    let (code, _, err) = fio_in(&d, &["--name=mytest", "--directory=data", "--bs=2300", "--size=23000", "--rw=write", "--direct=1"]);
    assert_eq!(code, 2);
    assert!(err.contains("bs=2300 is not a multiple of"), "{err}");
    // Buffered sizes beyond a command's 65536 blocks of the granule still
    // go when a power of two divides them (bs=128k in 4 KiB blocks); one
    // that none does is refused before anything is laid out.
    let (code, _, err) = fio_in(&d, &["--name=big", "--directory=data", "--bs=128k", "--size=1m", "--rw=read"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = fio_in(&d, &["--name=odd", "--directory=data", "--bs=1000001", "--size=4m", "--rw=read"]);
    assert_eq!(code, 2);
    assert!(err.contains("one I/O is at most 65536 of them") && !d.join("data/odd.0.0").exists(), "{err}");
    // Each thread of the sync engine has its own file position: two
    // clones writing and verifying one file put every block where it goes.
    let (code, out, err) = fio_in(&d, &["--name=two", "--filename=data/two", "--size=4m", "--bs=4k", "--rw=write", "--ioengine=sync", "--numjobs=2", "--verify=crc32c", "--direct=1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.matches("err= 0:").count() == 2 && out.contains(" 0 mismatching"), "{out}");
    let _ = std::fs::remove_dir_all(d);
}

/// `sync=`: the block path's files opened O_SYNC/O_DSYNC, as fio opens
/// them, and refused where the writes would go out without it. A job that
/// only writes has a new file allocated, not written, as fio's extend_file
/// lays it out: the blocks it did not write read as zeros; a read job's
/// file is written.
#[test]
fn sync_opens_and_a_write_jobs_layout_as_fios() {
    let Some(d) = workdir("sync") else { return };
    for (v, access) in [("1", "O_DIRECT | O_SYNC"), ("sync", "O_DIRECT | O_SYNC"), ("dsync", "O_DIRECT | O_DSYNC"), ("none", "O_DIRECT")] {
        let (code, out, err) = fio_in(&d, &["--name=t", "--filename=w", "--size=1m", "--rw=randwrite", "--direct=1", "--ioengine=libaio", "--number_ios=4", "--output-format=json", &format!("--sync={v}")]);
        assert_eq!(code, 0, "{v}: {err}");
        assert!(out.contains(&format!("\"{access}\"")), "sync={v}: {out}");
    }
    // The flag is on the open file itself (/proc/PID/fdinfo, while the job runs).
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
        .current_dir(&d)
        .args(["fio", "--name=t", "--filename=w", "--size=1m", "--rw=randwrite", "--direct=1", "--sync=dsync", "--time_based", "--runtime=3", "--rate_iops=100"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let target = d.join("w").canonicalize().unwrap();
    let mut flags = None;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let fds = std::fs::read_dir(format!("/proc/{}/fd", child.id())).unwrap();
        flags = fds.flatten().find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == target)).and_then(|e| {
            let info = std::fs::read_to_string(format!("/proc/{}/fdinfo/{}", child.id(), e.file_name().to_string_lossy())).ok()?;
            let f = info.lines().find_map(|l| l.strip_prefix("flags:"))?.trim().to_string();
            u32::from_str_radix(&f, 8).ok()
        });
        if flags.is_some() {
            break;
        }
    }
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait().unwrap();
    let flags = flags.expect("the job's file open in /proc");
    assert!(flags & libc::O_DSYNC as u32 != 0 && flags & libc::O_DIRECT as u32 != 0, "flags {flags:o}");
    // Fresh files: 4 writes of 4 KiB into 1 MiB leave 252 blocks unwritten.
    let (code, _, err) = fio_in(&d, &["--name=t", "--filename=z", "--size=1m", "--rw=randwrite", "--direct=1", "--number_ios=4", "--fallocate=native"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = fio_in(&d, &["--name=t", "--filename=r", "--size=1m", "--rw=randread", "--direct=1", "--number_ios=4"]);
    assert_eq!(code, 0, "{err}");
    let zero_blocks = |f: &str| std::fs::read(d.join(f)).unwrap().chunks(4096).filter(|b| b.iter().all(|&x| x == 0)).count();
    assert_eq!(std::fs::metadata(d.join("z")).unwrap().len(), 1 << 20);
    assert_eq!(zero_blocks("z"), 252, "a write job's file is allocated, not written");
    {
        use std::os::unix::fs::MetadataExt;
        let blocks = std::fs::metadata(d.join("z")).unwrap().blocks();
        assert!(blocks * 512 >= 1 << 20, "allocated (fallocate), not a sparse file: {blocks} blocks of 512");
    }
    assert_eq!(zero_blocks("r"), 0, "a read job's file is written");
    for (args, want) in [
        (&["--rw=randwrite", "--sync=2"][..], "sync=2: use none or 0"),
        (&["--rw=randwrite", "--sync=1", "--ioengine=nvme-bypass-sim"][..], "only the block path's engines (io_uring, libaio, psync, sync) act on"),
        (&["--rw=randwrite", "--fallocate=posix"][..], "fallocate=posix is not supported"),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=w", "--size=1m"].into_iter().chain(args.iter().copied()).collect();
        let (code, _, err) = fio_in(&d, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A read job on the simulator takes sync= as fio does: no effect.
    let (code, _, err) = fio_in(&d, &["--name=t", "--ioengine=nvme-bypass-sim", "--size=1m", "--rw=randread", "--sync=1", "--number_ios=4"]);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// fio's default `scramble_buffers=1` (io_u.c `small_content_scramble`):
/// every block a write job writes is its own, its offset and time in each
/// 512-byte sector, so deduplicating storage keeps each block as it keeps
/// fio's (the user's check: 1,024 random 4 KiB writes into a 4 MiB file
/// left one distinct block before). `scramble_buffers=0` writes the one
/// pattern, as does `buffer_compress_percentage=0` (given at all, it turns
/// fio's scramble off); `verify=` writes its stamps, unscrambled, which
/// check.
#[test]
fn every_block_written_is_its_own_as_fios_scramble_buffers_makes_it() {
    let Some(d) = workdir("scramble") else { return };
    let distinct = |f: &str| {
        let data = std::fs::read(d.join(f)).unwrap();
        let blocks: std::collections::HashSet<&[u8]> = data.chunks(4096).collect();
        (data.len() / 4096, blocks.len())
    };
    let base = ["--name=c", "--ioengine=psync", "--size=4m", "--rw=randwrite", "--bs=4k"];
    for (f, extra, want) in [
        ("cov.bin", &[][..], 1024),
        ("on.bin", &["--scramble_buffers=1"][..], 1024),
        ("aio.bin", &["--ioengine=libaio", "--iodepth=16", "--direct=1"][..], 1024),
        ("off.bin", &["--scramble_buffers=0"][..], 1),
        ("compress.bin", &["--buffer_compress_percentage=0"][..], 1),
    ] {
        let file = format!("--filename={f}");
        let args: Vec<&str> = base.iter().copied().chain([file.as_str()]).chain(extra.iter().copied()).collect();
        let (code, _, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(distinct(f), (1024, want), "{extra:?}: blocks in the file, and distinct");
    }
    // In a job file too, and a verifying job's stamps are written as they
    // are: its read-back finds no mismatch.
    std::fs::write(d.join("off.fio"), "[global]\nscramble_buffers=0\nsize=4m\nbs=4k\n[w]\nrw=randwrite\nfilename=job.bin\n").unwrap();
    let (code, _, err) = fio_in(&d, &["off.fio"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(distinct("job.bin"), (1024, 1));
    let (code, out, err) = fio_in(&d, &["--name=v", "--filename=v.bin", "--size=4m", "--rw=randwrite", "--bs=4k", "--verify=crc32c"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verify read back 1024 I/Os after the job") && out.contains(" 0 mismatching"), "{out}");
    assert_eq!(distinct("v.bin"), (1024, 1024));
    let _ = std::fs::remove_dir_all(d);
}

/// `rate_iops` and `rate`: I/Os spaced as fio's rate_process=linear
/// spaces them (I/O k due k / rate s in), per direction as fio reads the
/// values; refused where fio's rate is not ours to follow.
#[test]
fn rate_iops_paces_a_job_as_fios() {
    let Some(d) = workdir("rate") else { return };
    std::fs::File::create(d.join("r")).unwrap().set_len(8 << 20).unwrap();
    // (options, I/Os, at least this many ms: 99 intervals between 100
    // I/Os, less 1 ms for the clock the rate keeps against the one the
    // runtime is read from)
    for (opts, ios, ms) in [
        ("--rw=randread --rate_iops=1000 --io_size=400k", 100, 98),
        ("--rw=randread --rate_iops=1000 --io_size=400k --iodepth=8 --iodepth_low=8 --ioengine=io_uring", 100, 98),
        ("--rw=randwrite --rate_iops=5000,1000 --io_size=400k", 100, 98),
        // rate= in bytes a second: 4 MiB/s of 4 KiB is 1024 I/Os a second.
        ("--rw=randread --rate=4m --io_size=400k", 100, 95),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=r", "--direct=1", "--output-format=json"].into_iter().chain(opts.split(' ')).collect();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{opts}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{opts}: {e}: {out}"));
        let dir = if opts.contains("write") { "write" } else { "read" };
        let r = &j["jobs"][0][dir];
        assert_eq!(r["total_ios"], ios, "{opts}");
        assert!(r["runtime"].as_u64().unwrap() >= ms, "{opts}: {r}");
    }
    for (opts, says) in [
        ("--rw=randrw --rate_iops=100", "with reads and writes mixed fio paces each direction to its own rate"),
        ("--rw=read --rate_iops=100 --rate_process=poisson", "rate_process=poisson is not supported"),
        ("--rw=read --rate_iops=1,2,3", "a trim rate is not supported"),
        ("--rw=read --rate_min=1m", "'rate_min' is not supported"),
        ("--rw=read --ioengine=io_uring --iodepth=8 --iodepth_low=2", "iodepth_low=2 is not supported: fio would let the queue drain to 2"),
    ] {
        let args: Vec<&str> = ["--name=t", "--filename=r"].into_iter().chain(opts.split(' ')).collect();
        let (code, _, err) = fio_in(&d, &args);
        assert_eq!(code, 2, "{opts}");
        assert!(err.contains(says), "{opts}: {err}");
    }
    let _ = std::fs::remove_dir_all(d);
}

/// fio's percentile options: `percentile_list` (its order, precision and
/// limits), `slat_percentiles`, `clat_percentiles` and `lat_percentiles`,
/// in the text, the JSON (json+ bins beside each percentile table) and the
/// terse line, as fio 3.33 applies them.
#[test]
fn percentile_options_as_fio_applies_them() {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let job = ["--name=p", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=4", "--size=16M", "--io_size=1M"];
    let run = |more: &[&str]| {
        let (code, out, err) = fio_in(&d, &[&job[..], more].concat());
        assert_eq!(code, 0, "{err}");
        out
    };
    let out = run(&["--percentile_list=99.9:50", "--lat_percentiles=1", "--clat_percentiles=0", "--output-format=json+"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let r = &j["jobs"][0]["read"];
    let keys = |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert_eq!(keys(&r["lat_ns"]["percentile"]), ["50.000000", "99.900000"], "ascending, as fio sorts the list");
    assert!(r["clat_ns"]["percentile"].is_null() && r["clat_ns"]["bins"].is_null(), "clat_percentiles=0: none for clat: {r}");
    assert!(r["slat_ns"]["percentile"].is_null(), "slat_percentiles is off by default");
    let n: u64 = r["lat_ns"]["bins"].as_object().expect("json+ bins beside lat's percentiles").values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(n, 256);
    assert!(j["jobs"][0]["write"]["lat_ns"]["percentile"].is_null(), "a direction without I/O has none");
    // The text: the blocks in fio's order, the list's precision.
    let out = run(&["--percentile_list=99.9:50", "--slat_percentiles=1", "--lat_percentiles=1"]);
    let heads: Vec<&str> = out.lines().filter(|l| l.contains("percentiles (")).map(|l| l.split(" (").next().unwrap().trim()).collect();
    assert_eq!(heads, ["slat percentiles", "clat percentiles", "lat percentiles"], "{out}");
    assert!(out.contains("     | 50.0th=[") && out.contains("], 99.9th=["), "{out}");
    // The terse line: lat's percentiles (lat_percentiles wins), then 0%=0
    // up to fio's 20 fields.
    let out = run(&["--percentile_list=50:99", "--lat_percentiles=1", "--minimal"]);
    let f: Vec<&str> = out.trim_end().split(';').collect();
    let at = f.iter().position(|x| x.starts_with("50.000000%=")).unwrap_or_else(|| panic!("{out}"));
    assert!(f[at + 1].starts_with("99.000000%=") && f[at + 2..at + 20].iter().all(|x| *x == "0%=0"), "{out}");
    // Refused as fio refuses them, saying why.
    for (bad, says) in [
        ("--percentile_list=50:101", "out of fio's range"),
        ("--percentile_list=50:abc", "'abc' is not a number"),
        ("--percentile_list=1:2:3:4:5:6:7:8:9:10:11:12:13:14:15:16:17:18:19:20:21", "more than 20 percentiles"),
    ] {
        let (code, _, err) = fio_in(&d, &[&job[..], &[bad]].concat());
        assert_eq!(code, 2, "{bad}");
        assert!(err.contains(says), "{bad}: {err}");
    }
    // ioscheduler= on a path without a block device (the simulator): no
    // scheduler to switch, as fio skips a diskless engine.
    let (code, _, err) = fio_in(&d, &[&job[..], &["--ioscheduler=none"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("scheduler"), "{err}");
    // A group_reporting job shares the lat_percentiles of the jobs before
    // it in its group (fio's verify_per_group_options); without
    // group_reporting each keeps its own, as in fio.
    let two = ["--ioengine=nvme-bypass-sim", "--size=16M", "--io_size=64k", "--name=a", "--name=b", "--lat_percentiles=1"];
    let (code, _, err) = fio_in(&d, &[&two[..], &["--group_reporting"]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("lat_percentiles in job: b differs from group"), "{err}");
    let (code, out, err) = fio_in(&d, &two);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("    lat percentiles (").count(), 1, "b's only: {out}");
}

#[test]
fn the_simulator_and_several_files() {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (code, out, err) = fio_in(&d, &["--name=s", "--ioengine=nvme-bypass-sim", "--rw=randrw", "--bs=4k", "--iodepth=4", "--size=16M", "--io_size=1M", "--verify=crc32c"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("measured, simulated:"), "{out}");
    assert_eq!(out.lines().filter(|l| fio_iops_shape(l)).count(), 2, "{out}");
    // A size past the simulator's 1 GiB that is not whole blocks: its
    // namespace is made of whole blocks, not refused as a --sim-size.
    let (code, _, err) = fio_in(&d, &["--name=s", "--ioengine=nvme-bypass-sim", "--rw=randread", "--size=1500000100", "--io_size=64k"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = fio_in(&d, &["--name=s", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=4", "--size=16M", "--io_size=1M", "--output-format=json+"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let bins = j["jobs"][0]["read"]["clat_ns"]["bins"].as_object().expect("json+ bins");
    let n: u64 = bins.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(n, 256, "every I/O in a bin");
    assert!(bins.keys().all(|k| k.parse::<u64>().is_ok()));
    // A direction without I/O has no bins, as it has no percentiles (fio
    // 3.33's json+ of a read job: "write" : {"clat_ns" : {"min" : 0, ...,
    // "N" : 0}}).
    let w = &j["jobs"][0]["write"]["clat_ns"];
    assert!(w["bins"].is_null() && w["percentile"].is_null() && w["N"] == 0, "{w}");
    let job = &j["jobs"][0];
    let share: f64 = ["latency_ns", "latency_us", "latency_ms"].iter().flat_map(|k| job[k].as_object().unwrap().values()).map(|v| v.as_f64().unwrap()).sum();
    assert!((99.0..=101.0).contains(&share), "fio's latency buckets add up to 100%: {share}");
    assert!(job["latency_ms"][">=2000"].is_number());
    let Some(w) = workdir("multi") else { return };
    // As fio: size= divided between the files (fio 3.33: "m: Laying out IO
    // files (2 files / total 8MiB)", two 4 MiB files), iodepth shared by
    // them (at most 4 in flight, not 4 per file), and without io_size every
    // block of every file once: 2 x 1024 I/Os of 4 KiB.
    let (code, out, err) = fio_in(&w, &["--name=m", "--filename=one:two", "--size=8M", "--ioengine=libaio", "--direct=1", "--rw=randread", "--iodepth=4"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.contains("Laying out")).collect::<Vec<_>>(), ["m: Laying out IO files (2 files / total 8MiB)"], "{out}");
    assert_eq!((file_len(&w.join("one")), file_len(&w.join("two"))), (4 << 20, 4 << 20));
    assert!(out.contains("issued rwts: total=2048,0,0,0"), "{out}");
    assert!(out.contains("IO depths    : 1=0.1%, 2=0.1%, 4=99.9%, 8=0.0%"), "{out}");
    // Three files of 1 MiB / 3 each: 85 whole blocks per file, 255 I/Os (fio's count).
    let (code, out, err) = fio_in(&w, &["--name=m", "--filename=a:b:c", "--size=1M", "--ioengine=psync", "--rw=read"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("issued rwts: total=255,0,0,0"), "{out}");
    assert_eq!(file_len(&w.join("c")), 349_525);
    // Files of different sizes without size=: each from offset to its own
    // end, taken in turn until the smaller is done, then the larger alone:
    // (2 MiB - 1 MiB) + (3 MiB - 1 MiB) in 4 KiB I/Os, 768 (fio 3.33's
    // count for the same files), and the read job leaves them as they were.
    for (f, len) in [("p", 2 << 20), ("q", 3 << 20)] {
        std::fs::File::create(w.join(f)).unwrap().set_len(len).unwrap();
    }
    let (code, out, err) = fio_in(&w, &["--name=m", "--filename=p:q", "--offset=1M", "--ioengine=psync", "--direct=1", "--rw=randread"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("issued rwts: total=768,0,0,0"), "{out}");
    assert_eq!((file_len(&w.join("p")), file_len(&w.join("q"))), (2 << 20, 3 << 20));
    // An offset at the end of one of them: that file is ignored, as fio
    // ignores it ("fio: file p may be ignored"), the other read from it on
    // (fio 3.33: 256 I/Os); past the end of one, refused as fio refuses it.
    let (code, out, err) = fio_in(&w, &["--name=m", "--filename=p:q", "--offset=2M", "--ioengine=psync", "--direct=1", "--rw=read"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("file p may be ignored"), "{err}");
    assert!(out.contains("issued rwts: total=256,0,0,0"), "{out}");
    let (code, _, err) = fio_in(&w, &["--name=m", "--filename=p:q", "--offset=2100k", "--ioengine=psync", "--direct=1", "--rw=read"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("offset=2150400 is past the end of p"), "{err}");
    let _ = std::fs::remove_dir_all(w);
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every number masked, with its unit prefix and the padding of a value
/// after `=` (fio's `%5llu`): `IOPS=391k` -> `IOPS=N`, `min=  308` -> `min=N`.
fn mask(line: &str) -> String {
    let mut out = String::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            while out.ends_with(' ') && out.trim_end().ends_with('=') {
                out.pop();
            }
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i < b.len() && b"kKMGTP".contains(&b[i]) {
                i += 1;
            }
            if line[i..].starts_with("iB") {
                i += 2;
            } else if line[i..].starts_with('B') {
                i += 1;
            }
            out.push('N');
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// When fio itself is installed: the seed's randrw run by fio and by us on
/// the same kind of file; every line fio prints is in ours with its
/// numbers masked, but for those we do not have the figure for (fio's
/// version, Disk stats).
#[test]
fn line_for_line_with_fio_when_it_is_installed() {
    if !fio_installed() {
        return;
    }
    let Some(d) = workdir("realfio") else { return };
    let args = |file: &str, out: &str| {
        vec![
            "--randrepeat=1".to_string(), "--ioengine=libaio".into(), "--direct=1".into(), "--gtod_reduce=1".into(), "--name=test".into(),
            format!("--filename={file}"), "--bs=4k".into(), "--iodepth=64".into(), "--size=8M".into(), "--readwrite=randrw".into(),
            "--rwmixread=75".into(), format!("--output={out}"), "--output-format=normal".into(),
            // Long enough for fio's 500 ms bandwidth and IOPS samples.
            "--runtime=1200ms".into(), "--time_based".into(),
        ]
    };
    let st = Command::new("fio").current_dir(&d).args(args("theirs", "fio.txt")).status().unwrap();
    assert!(st.success());
    let st = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).current_dir(&d).arg("fio").args(args("ours", "ours.txt")).status().unwrap();
    assert!(st.success());
    let theirs = std::fs::read_to_string(d.join("fio.txt")).unwrap();
    let ours = std::fs::read_to_string(d.join("ours.txt")).unwrap();
    let ours_masked: Vec<String> = ours.lines().map(mask).collect();
    let mut after_disk_stats = false;
    for l in theirs.lines() {
        after_disk_stats |= l.starts_with("Disk stats");
        let not_ours = l.starts_with("fio-") || after_disk_stats;
        if not_ours || l.is_empty() {
            continue;
        }
        assert!(ours_masked.contains(&mask(l)), "fio prints {l:?}; ours has no such line:\n{ours}");
    }
    // Without gtod_reduce, on io_uring: the same latency lines in the same
    // order (their units follow the figures, so only the labels are compared).
    let args = |file: &str| {
        ["--ioengine=io_uring", "--direct=1", "--name=l", "--bs=4k", "--iodepth=16", "--size=8M", "--rw=randread", "--io_size=4M"].iter().map(|a| a.to_string()).chain([format!("--filename={file}")]).collect::<Vec<_>>()
    };
    let labels = |out: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(out).lines().filter(|l| l.starts_with("    ") && !l.starts_with("     |")).filter_map(|l| l.split_once(" (").map(|(a, _)| a.to_string())).filter(|a| a.ends_with("lat") || a.ends_with("percentiles")).collect()
    };
    let theirs = Command::new("fio").current_dir(&d).args(args("theirs")).output().unwrap();
    let ours = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).current_dir(&d).arg("fio").args(args("ours")).output().unwrap();
    assert!(theirs.status.success() && ours.status.success());
    assert_eq!(labels(&ours.stdout), labels(&theirs.stdout), "ours:\n{}", String::from_utf8_lossy(&ours.stdout));
    // fio's percentile options: the same blocks, each percentile written
    // with the list's precision, in ascending order (three, so the line
    // breaks cannot follow the values' widths).
    let pct = ["--percentile_list=99.95:50:99.5", "--lat_percentiles=1", "--slat_percentiles=1"];
    let points = |out: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(out).lines().filter(|l| l.starts_with("     |")).map(|l| l.split(',').map(|e| e.split("th=").next().unwrap_or("").trim_start_matches([' ', '|']).to_string()).collect::<Vec<_>>().join(" ")).collect()
    };
    let theirs = Command::new("fio").current_dir(&d).args(args("theirs")).args(pct).output().unwrap();
    let ours = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).current_dir(&d).arg("fio").args(args("ours")).args(pct).output().unwrap();
    assert!(theirs.status.success() && ours.status.success());
    assert_eq!(labels(&ours.stdout), labels(&theirs.stdout), "ours:\n{}", String::from_utf8_lossy(&ours.stdout));
    assert_eq!(points(&ours.stdout), points(&theirs.stdout), "ours:\n{}", String::from_utf8_lossy(&ours.stdout));
    assert_eq!(points(&ours.stdout), vec!["50.00 99.50 99.95"; 3]);
    let _ = std::fs::remove_dir_all(d);
}

/// Every key fio 3.x's JSON has that fio's tools (fio-plot, fio2gnuplot's
/// readers) look up is there, with fio's names, and fio's part holds no
/// null (our own figures, under `nvme_bypass`, may).
/// The fields of a terse line (`--minimal`), newline dropped.
fn terse_fields(line: &str) -> Vec<String> {
    line.trim_end().split(';').map(str::to_string).collect()
}

/// `--minimal` prints fio's terse v3 line, one per job: its fixed fields,
/// the bytes moved in KiB (as the JSON's), and as many fields as fio's own
/// line for the same job has (when fio is installed).
#[test]
fn minimal_prints_fios_terse_line() {
    let Some(d) = workdir("terse") else { return };
    let job = |file: &str| ["--name=t", "--size=8M", "--bs=4k", "--rw=randrw", "--iodepth=4", "--ioengine=io_uring", "--direct=1"].iter().map(|a| a.to_string()).chain([format!("--filename={file}")]).collect::<Vec<_>>();
    let args: Vec<String> = ["--output-format=terse,json".to_string()].into_iter().chain(job("ours")).collect();
    let (code, out, err) = fio_in(&d, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{err}");
    // fio's order of formats: the terse line, then the JSON.
    let (line, json) = out.split_once('\n').unwrap();
    let f = terse_fields(line);
    // 121 fields, 9 more per disk under the file (fio's disk_util).
    assert!(f.len() >= 121 && (f.len() - 121) % 9 == 0, "{} fields: {line}", f.len());
    assert_eq!(f[0], "3", "terse version 3, fio's default");
    let (prog, version) = f[1].rsplit_once('-').unwrap();
    assert!(!prog.is_empty() && version.split('.').all(|n| n.parse::<u32>().is_ok()), "program-version: {}", f[1]);
    assert_eq!((f[2].as_str(), f[3].as_str(), f[4].as_str()), ("t", "0", "0"), "name, groupid, error");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let j = &v["jobs"][0];
    // Each direction: io KiB, bw KiB/s, iops, runtime ms, at fields 6 and 47.
    for (at, dir) in [(5, "read"), (46, "write")] {
        let kib: u64 = f[at].parse().unwrap();
        assert_eq!(kib, j[dir]["io_bytes"].as_u64().unwrap() / 1024, "{dir} KiB");
        assert!(f[at + 2].parse::<u64>().unwrap() > 0, "{dir} iops: {line}");
        assert!(f[at + 12].starts_with("1.000000%="), "{dir}'s first percentile: {line}");
    }
    assert_eq!(f[5].parse::<u64>().unwrap() + f[46].parse::<u64>().unwrap(), 8192, "the 8 MiB moved, in KiB");
    // Two jobs: a line each, nothing else.
    let two: Vec<String> = ["--minimal"].iter().map(|a| a.to_string()).chain(job("ours")).chain(["--name=u", "--filename=ours", "--size=4M", "--rw=read", "--ioengine=io_uring"].iter().map(|a| a.to_string())).collect();
    let (code, out, err) = fio_in(&d, &two.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{err}");
    let names: Vec<String> = out.lines().map(|l| terse_fields(l)[2].clone()).collect();
    assert_eq!(names, ["t", "u"], "{out}");
    if !fio_installed() {
        return;
    }
    let theirs = Command::new("fio").current_dir(&d).arg("--minimal").args(job("theirs")).output().unwrap();
    assert!(theirs.status.success(), "{}", String::from_utf8_lossy(&theirs.stderr));
    let theirs = String::from_utf8_lossy(&theirs.stdout).to_string();
    assert_eq!(theirs.lines().count(), 1, "{theirs}");
    assert_eq!(terse_fields(&theirs).len(), f.len(), "fio's line: {theirs}ours: {line}");
    let _ = std::fs::remove_dir_all(d);
}

/// fio reads a time as a whole number and a unit (parse.c's
/// str_to_decimal): `ramp_time=0.9` is no ramp and `runtime=1.9` one
/// second. A drop-in that read the fractions would ramp, and measure, for
/// other intervals than fio does on the same job file; the test bed's
/// seed jobs (ramp_time=0.5) are such a job.
#[test]
fn fractional_times_are_read_as_fio_reads_them() {
    // (How each string is read is pinned by options.rs's unit tests; this
    // runs the job. Its bounds are the measured runtime's, wide enough for
    // a loaded machine: 1.9 s read as 1.9 s would measure 1.9 s.)
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (code, out, err) = fio_in(&d, &["--name=f", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=8", "--size=16M", "--runtime=1.9", "--ramp_time=0.9", "--time_based", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let read = &j["jobs"][0]["read"];
    let runtime = read["runtime"].as_u64().unwrap();
    assert!((900..1600).contains(&runtime), "runtime=1.9 is one second, as fio reads it: measured {runtime} ms");
    assert!(read["total_ios"].as_u64().unwrap() > 0);
    // Run as fio runs it, and said aloud, with what to write instead.
    assert!(err.contains("warning: job f: runtime=1.9: fio reads only the whole number before the '.', so this is 1 s; write 1900ms"), "{err}");
    assert!(err.contains("warning: job f: ramp_time=0.9:") && err.contains("write 900ms"), "{err}");
    // A runtime fio reads as none, with time_based: fio drops time_based
    // and runs the size once; so does this, saying why.
    let (code, out, err) = fio_in(&d, &["--name=z", "--ioengine=nvme-bypass-sim", "--rw=randread", "--size=16M", "--runtime=0.5", "--time_based", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("time_based requires a runtime") && err.contains("runtime=0.5: fio reads only the whole number") && err.contains("write 500ms"), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["jobs"][0]["read"]["total_ios"].as_u64(), Some(4096), "16 MiB once");
    // A write job that runs for its time never reaches its verify read-back,
    // as in fio: it writes only, and says so.
    let (code, out, err) = fio_in(&d, &["--name=v", "--ioengine=nvme-bypass-sim", "--rw=randwrite", "--size=16M", "--runtime=1", "--time_based", "--verify=crc32c", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("verification read phase will never start"), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["jobs"][0]["read"]["total_ios"].as_u64(), Some(0), "no read-back");
    assert!(j["jobs"][0]["write"]["total_ios"].as_u64().unwrap() > 0);
    // A unit fio does not know is microseconds in fio: run so, and said.
    let (code, _, err) = fio_in(&d, &["--name=u", "--ioengine=nvme-bypass-sim", "--rw=randread", "--size=16M", "--runtime=5min", "--time_based", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("runtime=5min: 'min' is not one of fio's time units") && err.contains("5 us"), "{err}");
}

/// fio's total_ios (and IOPS) count the I/Os submitted after the ramp
/// (td_io_queue; reset_all_stats zeroes the count at the ramp's end), while
/// its io_bytes count every completion after it: with a ramp, io_bytes
/// hold the I/Os that were in flight when it ended, one queue at most,
/// beyond total_ios; without one, the two agree.
#[test]
fn total_ios_count_the_ios_submitted_after_the_ramp_as_fios_do() {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for ramp in ["--ramp_time=200ms", "--ramp_time=0"] {
        let (code, out, err) = fio_in(&d, &["--name=r", "--ioengine=nvme-bypass-sim", "--rw=randread", "--bs=4k", "--iodepth=16", "--size=16M", "--runtime=300ms", "--time_based", ramp, "--output-format=json"]);
        assert_eq!(code, 0, "{err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let read = &j["jobs"][0]["read"];
        let (ios, completed) = (read["total_ios"].as_u64().unwrap(), read["io_bytes"].as_u64().unwrap() / 4096);
        let runtime = read["runtime"].as_u64().unwrap() as f64;
        assert!(ios > 0);
        if ramp.ends_with("=0") {
            assert_eq!(completed, ios, "no ramp: every I/O completed was submitted in the interval");
        } else {
            // (None at all when the simulator had drained the queue as the
            // ramp ended: src/engine/tests.rs pins a full one.)
            assert!(completed >= ios && completed - ios <= 16, "{ramp}: {completed} completed, {ios} submitted after the ramp: the difference is what was in flight at its end, one queue at most");
        }
        let iops = read["iops"].as_f64().unwrap();
        assert!((iops - ios as f64 * 1000.0 / runtime).abs() <= iops * 0.01, "{ramp}: iops {iops} is total_ios over the runtime");
    }
}

#[test]
fn group_reporting_gives_one_json_entry_per_job_and_elapsed_counts_the_ramp() {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    // 2 s each: a clone's samples are the sampler's 500 ms intervals that
    // lie wholly inside its measured interval, and on a loaded machine a
    // late sampler can leave a 1 s interval without one.
    let args = ["--name=g", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=4", "--size=16M", "--numjobs=2", "--ramp_time=1", "--runtime=2", "--time_based", "--output-format=json"];
    let run = |extra: &[&str]| -> serde_json::Value {
        let (code, out, err) = fio_in(&d, &[&args[..], extra].concat());
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let apart = run(&[]);
    assert_eq!(apart["jobs"].as_array().unwrap().len(), 2, "one entry per clone without group_reporting, as fio");
    let j = run(&["--group_reporting"]);
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "group_reporting: one entry for the clones, as fio");
    let ios = jobs[0]["read"]["total_ios"].as_u64().unwrap();
    assert!(ios > 0);
    assert_eq!(Some(ios), j["nvme_bypass"]["read"]["ios"].as_u64(), "the entry holds every clone's I/Os");
    // fio sums its clones' sample statistics, counts included: each clone
    // has at least one whole 500 ms interval in its 2 s, so two have at
    // least two (the sums themselves: fio_json's unit test).
    assert!(jobs[0]["read"]["iops_samples"].as_u64().unwrap() >= 2, "group_reporting's samples are its clones' together, as fio's: {}", jobs[0]["read"]);
    assert_eq!(jobs[0]["jobname"], "g");
    // fio's `elapsed` is seconds since it started, the ramp included.
    assert!(jobs[0]["elapsed"].as_u64().unwrap() >= 3, "{}", jobs[0]["elapsed"]);
    // The text prints a block per clone, each with its own pid= (each
    // clone is a thread: its thread id, as fio prints for `thread`).
    // Over 1 s, so that each block shows its system-wide CPU: the
    // machine's, shared by both clones, so per I/O of both (the same in
    // each block), not the machine's over one clone's I/Os (twice it).
    let (code, out, err) = fio_in(&d, &["--name=g", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=4", "--size=16M", "--numjobs=2", "--runtime=1100ms", "--time_based"]);
    assert_eq!(code, 0, "{err}");
    let pids: Vec<&str> = out.lines().filter_map(|l| l.split(" pid=").nth(1)).map(|r| r.split(':').next().unwrap()).collect();
    assert_eq!(pids.len(), 2, "{out}");
    assert_ne!(pids[0], pids[1], "{pids:?}");
    let system: Vec<&str> = out.lines().filter(|l| l.contains("nvme-bypass  : system-wide")).collect();
    assert_eq!(system.len(), 2, "{out}");
    assert_eq!(system[0], system[1], "the clones share the machine: {out}");
}

/// Held by the tests that compare figures of intervals with the run's:
/// they run one at a time, so neither's threads slow the other's part way.
static RATES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A log line as fio 3.33 writes an averaged entry: `ms, value, ddir, 0, 0`.
fn log_entry(line: &str) -> Option<(u64, u64, u64)> {
    let f: Vec<&str> = line.split(", ").collect();
    match f[..] {
        [t, v, d, "0", "0"] if matches!(d, "0" | "1") => Some((t.parse().ok()?, v.parse().ok()?, d.parse().ok()?)),
        _ => None,
    }
}

/// `per_job_logs=0`: one file per kind, every thread's entries appended
/// (a file already there too), as fio's flush_log appends.
#[test]
fn per_job_logs_0_appends_every_thread_to_one_file() {
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(d) = workdir("perjob") else { return };
    let args = ["--name=m", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=8", "--size=16M", "--runtime=600ms", "--time_based", "--numjobs=2", "--write_iops_log=pj", "--log_avg_msec=250", "--per_job_logs=0"];
    let lines = || std::fs::read_to_string(d.join("pj_iops.log")).unwrap().lines().map(|l| log_entry(l).unwrap_or_else(|| panic!("not fio's shape: {l:?}"))).collect::<Vec<_>>();
    let (code, _, err) = fio_in(&d, &args);
    assert_eq!(code, 0, "{err}");
    let names: Vec<String> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.starts_with("pj")).collect();
    assert_eq!(names, ["pj_iops.log"]);
    // Two threads of at least one entry each (a 250 ms interval in 600 ms,
    // two on an unloaded machine).
    let first = lines();
    assert!(first.len() >= 2, "{first:?}");
    let (code, _, err) = fio_in(&d, &args);
    assert_eq!(code, 0, "{err}");
    let again = lines();
    assert!(again.len() >= first.len() + 2 && again[..first.len()] == first[..], "appended: {again:?}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn bandwidth_and_iops_logs_as_fios_averaged_ones() {
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fio-logs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    // Two jobs, the first with two clones: fio numbers threads 1, 2, 3 across
    // the jobs; a bare write_bw_log takes the job's name.
    let (code, out, err) = fio_in(
        &d,
        &[
            "--name=m", "--ioengine=nvme-bypass-sim", "--rw=randrw", "--iodepth=8", "--size=16M", "--runtime=1200ms", "--time_based", "--numjobs=2",
            "--write_bw_log", "--write_iops_log=io", "--log_avg_msec=250", "--output-format=json",
            "--name=r", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=8", "--size=16M", "--runtime=1200ms", "--time_based", "--write_iops_log=io", "--write_lat_log=lt", "--log_avg_msec=250",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["io_iops.1.log", "io_iops.2.log", "io_iops.3.log", "lt_clat.3.log", "lt_lat.3.log", "lt_slat.3.log", "m_bw.1.log", "m_bw.2.log"]);
    for (file, job, dirs) in [("m_bw.1.log", 0, 2), ("io_iops.1.log", 0, 2), ("io_iops.3.log", 2, 1)] {
        let text = std::fs::read_to_string(d.join(file)).unwrap();
        let e: Vec<(u64, u64, u64)> = text.lines().map(|l| log_entry(l).unwrap_or_else(|| panic!("{file}: not fio's shape: {l:?}"))).collect();
        // An entry per 250 ms and direction, from the start (a sampler
        // woken late on a loaded machine takes one longer interval instead
        // of two, as fio's helper thread does: at least 2 of the 4-5).
        assert!((2 * dirs..=5 * dirs).contains(&e.len()), "{file}: {text}");
        // Taken by the I/O thread within 5 ms of its time (more when the
        // machine is loaded).
        assert!((250..=300).contains(&e[0].0), "{file}: the first entry covers the first interval: {text}");
        assert!(e.windows(2).all(|w| w[0].0 <= w[1].0), "{file}: times in order");
        assert_eq!(e.iter().filter(|x| x.2 == 1).count() * dirs, e.len() * (dirs - 1), "{file}: directions");
        // The entries' mean near the thread's own figure (KiB/s or IOPS),
        // each weighted by its interval (from the entry before it): a late
        // sampler's longer interval counts for its length.
        let (key, unit) = if file.contains("bw") { ("bw", 1.0) } else { ("iops", 1.0) };
        let x = &j["jobs"][job]["read"];
        let reads: Vec<&(u64, u64, u64)> = e.iter().filter(|x| x.2 == 0).collect();
        let (mut sum, mut prev) = (0.0, 0);
        for r in &reads {
            sum += r.1 as f64 * (r.0 - prev) as f64;
            prev = r.0;
        }
        let mean = sum / prev.max(1) as f64;
        let want = x[key].as_f64().unwrap() * unit;
        assert!((mean - want).abs() < 0.3 * want, "{file}: entries average {mean}, the job {want}");
    }
    // The latency logs: fio's shape, reads only (each interval's mean:
    // `output::tests::log_lines_are_each_intervals_figures`).
    for file in ["lt_lat.3.log", "lt_clat.3.log", "lt_slat.3.log"] {
        let text = std::fs::read_to_string(d.join(file)).unwrap();
        let e: Vec<(u64, u64, u64)> = text.lines().map(|l| log_entry(l).unwrap_or_else(|| panic!("{file}: not fio's shape: {l:?}"))).collect();
        assert!((3..=5).contains(&e.len()) && e.iter().all(|x| x.2 == 0 && x.1 > 0), "{file}: {text}");
    }
    // When fio is installed, its own log of a like job has the same shape.
    if fio_installed() {
        let f = d.join("data");
        std::fs::File::create(&f).unwrap().set_len(8 << 20).unwrap();
        let st = Command::new("fio")
            .current_dir(&d)
            .args(["--name=fio", &format!("--filename={}", f.display()), "--rw=randrw", "--size=8M", "--runtime=600ms", "--time_based", "--write_bw_log=real", "--log_avg_msec=250", "--output=/dev/null"])
            .status()
            .unwrap();
        assert!(st.success());
        let text = std::fs::read_to_string(d.join("real_bw.1.log")).unwrap();
        assert!(!text.is_empty() && text.lines().all(|l| log_entry(l).is_some()), "fio's own log: {text}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bandwidth_and_iops_samples_per_direction_in_the_text_and_the_json() {
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    // A 75/25 mix, as the seed's randrw job, with gtod_reduce: fio still
    // takes these samples then.
    let (code, out, err) = fio_in(&d, &["--name=m", "--ioengine=nvme-bypass-sim", "--rw=randrw", "--rwmixread=75", "--gtod_reduce=1", "--iodepth=8", "--size=16M", "--runtime=1700ms", "--time_based", "--output-format=json,normal"]);
    assert_eq!(code, 0, "{err}");
    let at = out.find("\n{").unwrap();
    let j: serde_json::Value = serde_json::Deserializer::from_str(&out[at..]).into_iter().next().unwrap().unwrap();
    let text = &out[out.find("m: (groupid=0").unwrap()..];
    for dir in ["read", "write"] {
        let x = &j["jobs"][0][dir];
        let n = x["bw_samples"].as_u64().unwrap();
        // Three 500 ms samples fit in 1.7 s; a sampler woken late on a
        // loaded machine takes one longer interval instead of two, as
        // fio's helper thread does (`__add_samples`).
        assert!((1..=4).contains(&n), "{dir}: 500 ms samples in 1.7 s: {n}");
        assert_eq!(x["iops_samples"].as_u64(), Some(n));
        // The text's lines hold the JSON's figures in fio's layout (KiB/s;
        // MiB/s past 1 GiB/s, min and max truncated; fio's %5.02f pads a
        // small stdev).
        let f = |k: &str| x[k].as_f64().unwrap();
        let (unit, div) = if f("bw_mean") > 1048576.0 { ("MiB", 1024.0) } else { ("KiB", 1.0) };
        let bw = format!(
            "   bw (  {unit}/s): min={:5}, max={:5}, per={:.2}%, avg={:5.2}, stdev={:5.2}, samples={n}",
            (f("bw_min") / div) as u64,
            (f("bw_max") / div) as u64,
            f("bw_agg"),
            f("bw_mean") / div,
            f("bw_dev") / div
        );
        assert!(text.lines().any(|l| l == bw), "{dir}: no line {bw}: {text}");
        let iops = format!("   iops        : min={:5}, max={:5}, avg={:5.2}", x["iops_min"].as_u64().unwrap(), x["iops_max"].as_u64().unwrap(), f("iops_mean"));
        assert!(text.contains(&iops), "{dir}: no {iops}: {text}");
    }
    // gtod_reduce: fio records no latency, so its JSON has none either.
    for dir in ["read", "write"] {
        assert_eq!(j["jobs"][0][dir]["clat_ns"]["N"].as_u64(), Some(0), "{}", j["jobs"][0][dir]["clat_ns"]);
        assert!(j["jobs"][0][dir]["clat_ns"]["percentile"].is_null());
    }
    assert!(j["jobs"][0]["latency_us"].as_object().unwrap().values().all(|v| v.as_f64() == Some(0.0)));
    // Each direction's own I/Os, not a share of both: reads about 3x the
    // writes, and each direction's mean IOPS near its own IOPS.
    let (r, w) = (&j["jobs"][0]["read"], &j["jobs"][0]["write"]);
    let ratio = r["iops_mean"].as_f64().unwrap() / w["iops_mean"].as_f64().unwrap();
    assert!((2.7..3.3).contains(&ratio), "reads over writes {ratio}");
    for x in [r, w] {
        let (mean, iops) = (x["iops_mean"].as_f64().unwrap(), x["iops"].as_f64().unwrap());
        assert!((mean - iops).abs() < 0.25 * iops, "mean sample {mean} against {iops}");
    }
}

#[test]
fn json_has_fios_keys_and_no_null() {
    fn no_null(v: &serde_json::Value, at: &str) {
        match v {
            serde_json::Value::Null => panic!("null at {at}"),
            serde_json::Value::Object(m) => m.iter().filter(|(k, _)| *k != "nvme_bypass").for_each(|(k, x)| no_null(x, &format!("{at}/{k}"))),
            serde_json::Value::Array(a) => a.iter().for_each(|x| no_null(x, &format!("{at}[]"))),
            _ => {}
        }
    }
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (code, out, err) = fio_in(&d, &["--name=k", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=8", "--size=16M", "--runtime=1200ms", "--time_based", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    no_null(&j, "");
    for k in ["fio version", "timestamp", "timestamp_ms", "time", "jobs"] {
        assert!(!j[k].is_null(), "top-level {k}");
    }
    assert!(j["global options"].is_null(), "no global options given, none listed (as fio)");
    assert!(j["disk_util"].is_null(), "the simulator has no block device (fio lists none either)");
    let job = &j["jobs"][0];
    for k in ["jobname", "groupid", "error", "job options", "read", "write", "trim", "job_runtime", "usr_cpu", "sys_cpu", "ctx", "majf", "minf", "iodepth_level", "iodepth_submit", "iodepth_complete", "latency_ns", "latency_us", "latency_ms", "job_start", "latency_depth", "latency_target", "latency_percentile", "latency_window", "sync"] {
        assert!(!job[k].is_null(), "job {k}");
    }
    // slat and clat measured apart, lat their sum (means within 5%).
    let r = &job["read"];
    let (sl, cl, l) = (&r["slat_ns"], &r["clat_ns"], &r["lat_ns"]);
    assert!(sl["N"].as_u64().unwrap() > 0 && cl["percentile"].is_object() && l["percentile"].is_null(), "{r}");
    let mean = |x: &serde_json::Value| x["mean"].as_f64().unwrap();
    assert!((mean(sl) + mean(cl) - mean(l)).abs() < 0.05 * mean(l), "slat {} + clat {} against lat {}", mean(sl), mean(cl), mean(l));
    // The thread's own faults over its measured interval (fio's
    // RUSAGE_THREAD): a handful, not the process's start-up (hundreds).
    assert!(job["minf"].as_u64().unwrap() < 64, "minf of the I/O loop: {}", job["minf"]);
    let keys = |k: &str| job[k].as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(keys("latency_ns"), set(&["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"]));
    assert_eq!(keys("latency_us"), set(&["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"]));
    assert_eq!(keys("latency_ms"), set(&["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000"]));
    assert_eq!(keys("iodepth_level"), set(&["1", "2", "4", "8", "16", "32", ">=64"]));
    // Measured: one submission per I/O (fio's default batch), at depths
    // of at most 8; every map adds up to 100% (each slot with any at least
    // 0.1%, as fio's).
    assert_eq!(job["iodepth_submit"]["4"].as_f64(), Some(100.0), "{}", job["iodepth_submit"]);
    assert!(job["iodepth_level"]["8"].as_f64().unwrap() > 10.0, "{}", job["iodepth_level"]);
    for k in ["16", "32", ">=64"] {
        assert_eq!(job["iodepth_level"][k].as_f64(), Some(0.0), "never deeper than iodepth=8: {}", job["iodepth_level"]);
    }
    for k in ["iodepth_level", "iodepth_submit", "iodepth_complete"] {
        let sum: f64 = job[k].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum();
        assert!((99.0..=101.0).contains(&sum), "{k} sums to {sum}");
    }
    for k in ["iodepth_submit", "iodepth_complete"] {
        assert_eq!(keys(k), set(&["0", "4", "8", "16", "32", "64", ">=64"]));
    }
    for dir in ["read", "write", "trim"] {
        let b = &job[dir];
        for k in ["io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "total_ios", "short_ios", "drop_ios", "slat_ns", "clat_ns", "lat_ns", "bw_min", "bw_max", "bw_agg", "bw_mean", "bw_dev", "bw_samples", "iops_min", "iops_max", "iops_mean", "iops_stddev", "iops_samples"] {
            assert!(b[k].is_number() || b[k].is_object(), "{dir} {k}: {}", b[k]);
        }
        for k in ["min", "max", "mean", "stddev", "N"] {
            assert!(b["slat_ns"][k].is_number(), "{dir} slat_ns {k}");
        }
    }
    let r = &job["read"];
    assert!(r["iops_samples"].as_u64().unwrap() >= 1, "a 500 ms sample in 1.2 s: {r}");
    assert!(r["iops_min"].as_f64().unwrap() <= r["iops_mean"].as_f64().unwrap() && r["iops_mean"].as_f64().unwrap() <= r["iops_max"].as_f64().unwrap() + 1.0);
    assert!(r["bw_mean"].as_f64().unwrap() > 0.0);
    assert_eq!(job["write"]["runtime"], 0, "no writes: runtime 0, as fio");
    assert_eq!(job["write"]["bw_samples"], 0);
}

/// Key paths of a JSON value: "a.b" for objects, "a[]" for array elements.
fn key_paths(v: &serde_json::Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                out.insert(p.clone());
                key_paths(x, &p, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| key_paths(x, &format!("{at}[]"), out)),
        _ => {}
    }
}

/// The same job as fio 3.33 ran for tests/fixtures/fio-3.33-json-keys.txt
/// gives the same key paths, apart from our own section (`nvme_bypass`)
/// and `job_start`, which fio prints from 3.35 on.
#[test]
fn json_key_set_is_fios_for_the_same_job() {
    let Some(d) = workdir("keyset") else { return };
    let f = d.join("f");
    let (code, out, err) = fio_in(&d, &["--name=test", &format!("--filename={}", f.display()), "--size=16M", "--bs=4k", "--rw=randread", "--ioengine=libaio", "--direct=1", "--iodepth=8", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap_or_else(|e| panic!("{e}: {out}"));
    let mut ours = std::collections::BTreeSet::new();
    key_paths(&j, "", &mut ours);
    ours.retain(|p| !p.starts_with("nvme_bypass") && !p.starts_with("jobs[].nvme_bypass") && p != "jobs[].job_start");
    let fixture = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fio-3.33-json-keys.txt")).unwrap();
    let mut fio: std::collections::BTreeSet<String> = fixture.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(String::from).collect();
    if j["disk_util"].is_null() {
        // fio lists the disk under the file; a file on a filesystem with no
        // block device under it (overlay, tmpfs) has none, for fio too.
        eprintln!("note: {} has no block device under it: disk_util not compared", d.display());
        fio.retain(|p| !p.starts_with("disk_util"));
    }
    let missing: Vec<_> = fio.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&fio).collect();
    assert!(missing.is_empty() && extra.is_empty(), "keys fio has and we lack: {missing:?}\nkeys we have and fio lacks: {extra:?}");
    let _ = std::fs::remove_dir_all(d);
}

/// Two jobs of one group on one controller with our driver would both
/// open it: refused before anything runs, saying what to do.
#[test]
fn two_jobs_of_a_group_on_one_vfio_controller_are_refused() {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (code, _, err) = fio_in(&d, &["--ioengine=nvme-bypass-vfio", "--filename=0000\\:01\\:00.0", "--rw=randread", "--name=a", "--name=b", "--parse-only"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("numjobs=2") && err.contains("stonewall"), "{err}");
    let (code, _, err) = fio_in(&d, &["--ioengine=nvme-bypass-vfio", "--filename=0000\\:01\\:00.0", "--rw=randread", "--name=a", "--name=b", "--stonewall", "--parse-only"]);
    assert_eq!(code, 0, "one after the other is fine: {err}");
}

#[test]
fn the_queue_stays_at_iodepth_as_fios_does_at_its_default_batching() {
    // fio's defaults (iodepth_batch_submit = iodepth_batch_complete_max =
    // 1): reap one when the queue is full, submit one. Its IO depths then
    // show every submission at iodepth, and every reap of 1-4.
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (code, out, err) = fio_in(&d, &["--name=q", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=16", "--size=16M", "--io_size=8M", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let job = &j["jobs"][0];
    let pct = |k: &str, slot: &str| job[k][slot].as_f64().unwrap_or_else(|| panic!("{k}/{slot} in {}", job[k]));
    assert!(pct("iodepth_level", "16") >= 99.0, "IO depths: {}", job["iodepth_level"]);
    assert!(pct("iodepth_submit", "4") >= 99.0, "submit: {}", job["iodepth_submit"]);
    assert!(pct("iodepth_complete", "4") >= 99.0, "complete: {}", job["iodepth_complete"]);
    // min = max = 8: eight at a time.
    let (code, out, err) = fio_in(&d, &["--name=q", "--ioengine=nvme-bypass-sim", "--rw=randread", "--iodepth=16", "--size=16M", "--io_size=8M", "--iodepth_batch_complete_min=8", "--iodepth_batch_complete_max=8", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["jobs"][0]["iodepth_complete"]["8"].as_f64(), Some(100.0), "complete: {}", j["jobs"][0]["iodepth_complete"]);
}

#[test]
fn libaio_reaps_with_io_getevents_as_fios_engine_does() {
    // fio's libaio: io_submit per submission, io_getevents per reap (the
    // ring in user memory only with userspace_reap=1 and
    // iodepth_batch_complete_min=0): two system calls per I/O at fio's
    // default batching, one with the ring read in user space.
    let Some(d) = workdir("aio") else { return };
    let syscalls = |extra: &[&str]| -> f64 {
        let args = [&["--name=a", "--filename=f", "--size=8M", "--ioengine=libaio", "--direct=1", "--rw=randread", "--iodepth=8", "--io_size=4M"][..], extra].concat();
        let (code, out, err) = fio_in(&d, &args);
        assert_eq!(code, 0, "{err}");
        let l = out.lines().find(|l| l.contains("syscalls (measured)")).unwrap_or_else(|| panic!("{out}"));
        l.split(", ").find_map(|p| p.strip_suffix(" syscalls (measured)")).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{l}"))
    };
    let fios = syscalls(&[]);
    assert!((1.9..=2.1).contains(&fios), "{fios} system calls per I/O");
    let user = syscalls(&["--userspace_reap=1", "--iodepth_batch_complete_min=0"]);
    assert!(user < 1.5, "{user} system calls per I/O with the ring read in user space");
    let _ = std::fs::remove_dir_all(d);
}

/// When fio itself is installed: the keys of our JSON come in fio's order
/// (top level, job, direction, percentiles), those fio has too, each
/// number an integer where fio's is and a float where fio's is, and the
/// text in fio's layout (`"key" : value`, floats as `%f`), so that a
/// script reading fio's JSON as text reads ours.
#[test]
fn json_keys_in_fios_order_when_it_is_installed() {
    if !fio_installed() {
        return;
    }
    let Some(d) = workdir("order") else { return };
    let args = |file: &str| {
        ["--ioengine=io_uring", "--direct=1", "--name=o", "--rw=randrw", "--bs=4k", "--iodepth=8", "--size=8M", "--io_size=2M", "--output-format=json"].iter().map(|a| a.to_string()).chain([format!("--filename={file}")]).collect::<Vec<_>>()
    };
    let theirs = Command::new("fio").current_dir(&d).args(args("theirs")).output().unwrap();
    let ours = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).current_dir(&d).arg("fio").args(args("ours")).output().unwrap();
    assert!(theirs.status.success() && ours.status.success());
    let parse = |b: &[u8]| -> serde_json::Value { serde_json::from_slice(b).unwrap() };
    fn walk(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
        if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
            let ka: Vec<&String> = a.keys().filter(|k| b.contains_key(*k)).collect();
            let kb: Vec<&String> = b.keys().filter(|k| a.contains_key(*k)).collect();
            assert_eq!(kb, ka, "at {at:?}: ours, then fio's");
            for k in ka {
                walk(&a[k], &b[k], &format!("{at}/{k}"));
            }
        } else if let (Some(a), Some(b)) = (a.as_array(), b.as_array()) {
            if let (Some(a), Some(b)) = (a.first(), b.first()) {
                walk(a, b, &format!("{at}[0]"));
            }
        } else if a.is_number() && b.is_number() {
            assert_eq!(b.is_f64(), a.is_f64(), "at {at:?}: ours {b}, fio's {a}: integer or float as fio's");
        }
    }
    walk(&parse(&theirs.stdout), &parse(&ours.stdout), "");
    // The layout, line by line: the same lines up to the first value that
    // differs in kind, each `"key" : value` with the value as fio prints it.
    let shape = |b: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(b).lines().take(12).map(|l| l.split(" : ").next().unwrap().to_string()).collect()
    };
    assert_eq!(shape(&ours.stdout), shape(&theirs.stdout), "fio's layout");
    let text = String::from_utf8_lossy(&ours.stdout);
    assert!(text.lines().any(|l| l.trim_start().starts_with("\"iops\" : ") && l.ends_with(",") && l.split('.').nth(1).is_some_and(|d| d.len() == 7)), "iops as %f: {text}");
    let _ = std::fs::remove_dir_all(d);
}

/// `nvme-bypass fio -` reads the job file from standard input, as `fio -`
/// does; its includes are found as fio finds them (relative to the
/// working directory).
#[test]
fn a_job_file_on_standard_input() {
    use std::io::Write;
    // Its runs would slow the interval-rate tests part way.
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(d) = workdir("stdin") else { return };
    std::fs::write(d.join("common.fio"), "size=1M\nioengine=psync\n").unwrap();
    let run = |args: &[&str], job: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nvme-bypass"))
            .current_dir(&d)
            .arg("fio")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A command line that is refused ends before it reads its input:
        // the write then meets a closed pipe, which is not the test's error.
        match child.stdin.take().unwrap().write_all(job.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            r => r.unwrap(),
        }
        let o = child.wait_with_output().unwrap();
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, out, err) = run(&["-", "--output-format=json"], "[global]\ninclude common.fio\n[piped]\nfilename=data\nrw=read\n");
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(j["jobs"][0]["jobname"], "piped");
    assert_eq!(j["jobs"][0]["read"]["io_bytes"], 1 << 20, "size=1M from the included file");
    let (code, _, err) = run(&["-", "-"], "[x]\n");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'-'") && err.contains("give it once"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// Data fio wrote with its own verify= carries fio's verify header, a
/// format nvme-bypass does not check: a read job verifying it is refused
/// before it runs, saying so in fio's words (verify=, not a bench flag),
/// instead of a mismatch in every block.
#[test]
fn verifying_data_fio_wrote_with_its_verify_header_is_refused_in_fios_words() {
    // Its runs would slow the interval-rate tests part way.
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(d) = workdir("fioverify") else { return };
    let check = |file: &str| {
        let (code, _, err) = fio_in(&d, &["--name=v", &format!("--filename={file}"), "--size=1M", "--rw=read", "--verify=crc32c"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("verify=crc32c:") && err.contains("fio's own verify header") && err.contains("verify this data with fio itself"), "{err}");
        assert!(!err.contains("--verify"), "fio's spelling: {err}");
    };
    // A block as fio 3.33 writes it under verify=crc32c: magic 0xacca,
    // verify type 5, little-endian.
    let mut data = vec![0u8; 1 << 20];
    for b in data.chunks_mut(4096) {
        b[..4].copy_from_slice(&[0xca, 0xac, 5, 0]);
    }
    std::fs::write(d.join("made"), &data).unwrap();
    check("made");
    if fio_installed() {
        let st = Command::new("fio").current_dir(&d).args(["--name=w", "--filename=byfio", "--size=1M", "--rw=write", "--verify=crc32c", "--output=/dev/null"]).status().unwrap();
        assert!(st.success());
        check("byfio");
    }
    // Data nvme-bypass wrote with verify= verifies, and a block without a
    // stamp is said in fio's words.
    let (code, _, err) = fio_in(&d, &["--name=w", "--filename=ours", "--size=1M", "--rw=write", "--verify=crc32c"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = fio_in(&d, &["--name=r", "--filename=ours", "--size=1M", "--rw=read", "--verify=crc32c"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(d.join("plain"), vec![7u8; 1 << 20]).unwrap();
    let (code, _, err) = fio_in(&d, &["--name=r", "--filename=plain", "--size=1M", "--rw=read", "--verify=crc32c"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("never written with verify=") && !err.contains("--verify"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// fio's keywords in a job file ($ncpus, $pagesize, $mb_memory), with the
/// arithmetic fio has bc do on them, give what fio gives (its --showcmd
/// shows the values, when fio is installed); on the command line fio
/// does not replace them, and the refusal says where they work.
#[test]
fn fios_keywords_and_their_arithmetic_in_a_job_file() {
    // Its runs would slow the interval-rate tests part way.
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fio-keywords-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("k.fio"), "[global]\nioengine=nvme-bypass-sim\nbs=$pagesize\n[k]\nsize=$pagesize*256\niodepth=$ncpus*3/2+1\nrw=read\nio_size=$mb_memory/$mb_memory*1048576\n").unwrap();
    let (code, out, err) = fio_in(&d, &["k.fio", "--output-format=json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let ncpus = std::thread::available_parallelism().map_or(0, |n| n.get() as u64);
    let page: u64 = j["global options"]["bs"].as_str().unwrap().parse().unwrap();
    assert!(page.is_power_of_two() && page >= 4096, "{}", j["global options"]);
    let opts = &j["jobs"][0]["job options"];
    assert_eq!(opts["size"], (page * 256).to_string());
    assert_eq!(opts["io_size"], "1048576");
    if ncpus > 0 {
        // (CPUs configured, as fio counts them; this process may be allowed fewer.)
        assert!(opts["iodepth"].as_str().unwrap().parse::<u64>().unwrap() >= ncpus * 3 / 2 + 1, "{opts}");
    }
    assert_eq!(j["jobs"][0]["read"]["io_bytes"], 1 << 20);
    if fio_installed() {
        let showcmd = |o: &[u8]| -> std::collections::BTreeSet<String> { String::from_utf8_lossy(o).split_whitespace().filter(|a| !a.starts_with("--ioengine")).map(String::from).collect() };
        let theirs = Command::new("fio").current_dir(&d).args(["--showcmd", "k.fio"]).output().unwrap();
        let ours = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).current_dir(&d).args(["fio", "--showcmd", "k.fio"]).output().unwrap();
        assert_eq!(showcmd(&ours.stdout), showcmd(&theirs.stdout), "ours:\n{}", String::from_utf8_lossy(&ours.stdout));
    }
    // What bc cannot compute fio refuses, and so does this, saying why.
    std::fs::write(d.join("bad.fio"), "[b]\nsize=$mb_memory/1000*2k\n").unwrap();
    let (code, _, err) = fio_in(&d, &["bad.fio"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'k' is not a number") && err.contains("write plain numbers"), "{err}");
    let (code, _, err) = fio_in(&d, &["--name=c", "--numjobs=$ncpus"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("fio replaces $ncpus in job files, not on the command line"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// group_reporting over several jobs of one reporting group: fio adds
/// them all into one entry, named after the first, `jobs=N` its threads;
/// one block of text and one JSON entry, each direction's runtime the
/// longest of the jobs that did it; the group's lines over that entry.
#[test]
fn group_reporting_adds_the_jobs_of_a_group_into_one_entry_as_fio_does() {
    // Its runs would slow the interval-rate tests part way.
    let _one = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(d) = workdir("groupjobs") else { return };
    std::fs::write(
        d.join("g.fio"),
        "[global]\ngroup_reporting\nfilename=data\nsize=2M\nioengine=psync\n[a]\nrw=randread\n[b]\nrw=randwrite\nnumjobs=2\n[c]\nnew_group\nrw=read\n",
    )
    .unwrap();
    let (code, out, err) = fio_in(&d, &["g.fio", "--output-format=json,normal"]);
    assert_eq!(code, 0, "{err}");
    let at = out.find("\n{").unwrap();
    let j: serde_json::Value = serde_json::Deserializer::from_str(&out[at..]).into_iter().next().unwrap().unwrap();
    let text = &out[at..];
    let heads: Vec<&str> = text.lines().filter(|l| l.contains(": (groupid=")).map(|l| l.split(": pid=").next().unwrap()).collect();
    assert_eq!(heads, ["a: (groupid=0, jobs=3): err= 0", "c: (groupid=1, jobs=1): err= 0"], "{text}");
    assert_eq!(text.matches("  read: IOPS=").count(), 2, "{text}");
    assert_eq!(text.matches("  write: IOPS=").count(), 1, "{text}");
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "one JSON entry per reporting group");
    let g = &jobs[0];
    assert_eq!((g["jobname"].as_str(), g["groupid"].as_u64()), (Some("a"), Some(0)));
    assert_eq!(g["read"]["io_bytes"], 2 << 20, "a's reads");
    assert_eq!(g["write"]["io_bytes"], 4 << 20, "b's two clones' writes");
    assert_eq!(g["job options"]["numjobs"], "2", "the last job's options, as fio lists them");
    for (dir, pick) in [("read", "   READ"), ("write", "  WRITE")] {
        let ms = g[dir]["runtime"].as_u64().unwrap();
        assert!(ms > 0);
        // The group's line: one entry, so its min and max runtime are the entry's.
        let line = text.lines().find(|l| l.starts_with(pick)).unwrap_or_else(|| panic!("{text}"));
        assert!(line.ends_with(&format!("run={ms}-{ms}msec")), "{dir}: {line} against {ms} ms");
        let iops = g[dir]["iops"].as_f64().unwrap();
        let want = g[dir]["total_ios"].as_f64().unwrap() * 1000.0 / ms as f64;
        assert!((iops - want).abs() <= 0.01 * want, "{dir}: iops {iops} over its own runtime: {want}");
    }
    if fio_installed() {
        let o = Command::new("fio").current_dir(&d).args(["g.fio"]).output().unwrap();
        let theirs = String::from_utf8_lossy(&o.stdout);
        let fio_heads: Vec<&str> = theirs.lines().filter(|l| l.contains(": (groupid=")).map(|l| l.split(": pid=").next().unwrap()).collect();
        assert_eq!(heads, fio_heads, "fio:\n{theirs}");
    }
    let _ = std::fs::remove_dir_all(d);
}

/// fio's vectored synchronous engines are refused, pointing to psync.
#[test]
fn vectored_sync_engines_point_to_psync() {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for engine in ["vsync", "pvsync", "pvsync2"] {
        let (code, _, err) = fio_in(&d, &["--name=s", &format!("--ioengine={engine}"), "--filename=sync-engine-file", "--size=1M", "--rw=read"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&format!("ioengine={engine} is not supported")) && err.contains("use ioengine=psync"), "{err}");
    }
}

/// A synchronous engine runs at depth 1, with fio's note, and the report
/// shows the iodepth the job gave, as fio's does; numjobs stops at fio's
/// 4096.
#[test]
fn psync_shows_the_iodepth_given_and_numjobs_stops_at_fios_limit() {
    let Some(d) = workdir("psync-depth") else { return };
    let (code, out, err) = fio_in(&d, &["--name=p", "--ioengine=psync", "--iodepth=32", "--filename=f", "--size=1M", "--rw=randread"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("queue depth will be capped at 1"), "{err}");
    assert!(out.contains("ioengine=psync, iodepth=32") && out.contains("depth=32"), "{out}");
    assert!(out.contains("IO depths    : 1=100.0%"), "{out}");
    let (code, _, err) = fio_in(&d, &["--name=n", "--ioengine=nvme-bypass-sim", "--numjobs=5000", "--size=1M"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("numjobs=5000 is more than fio's 4096"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// Two simulator jobs pinned to one CPU: the warning that their latencies
/// are the scheduler's gives advice in job-file options (fio has no
/// --sim-cpu or --sim-sync).
#[test]
fn sharing_a_cpu_is_warned_of_in_job_file_words() {
    let Some(d) = workdir("sim-sharing") else { return };
    let (code, _, err) = fio_in(&d, &["--name=t", "--ioengine=nvme-bypass-sim", "--size=1m", "--numjobs=2", "--cpus_allowed=0", "--rw=read"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: job t:") && err.contains("2 of them on CPU 0"), "{err}");
    // The controller is on another CPU: the list needs more CPUs, not one less.
    assert!(err.contains("a cpus_allowed= list of one CPU per job (not CPU ") && !err.contains("--sim"), "{err}");
}
