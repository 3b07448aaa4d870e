//! fio's `disk_util`: the block devices under the jobs' files, with their
//! kernel statistics (`/sys/block/DEV/stat`) over the run. fio reports a
//! block device itself, or the disk under a regular file; a character
//! device (`/dev/ngXnY`) and our userspace paths have no block device, and
//! then, as in fio, there is no entry.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One device's counters at one moment (`/sys/block/DEV/stat`, see the
/// kernel's Documentation/block/stat.rst).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiskStat {
    read_ios: u64,
    read_merges: u64,
    read_ticks: u64,
    write_ios: u64,
    write_merges: u64,
    write_ticks: u64,
    io_ticks: u64,
    in_queue: u64,
}

impl DiskStat {
    /// Parse the fields of a `stat` file.
    pub fn parse(s: &str) -> Option<DiskStat> {
        let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().ok()).collect::<Option<_>>()?;
        if f.len() < 11 {
            return None;
        }
        Some(DiskStat { read_ios: f[0], read_merges: f[1], read_ticks: f[3], write_ios: f[4], write_merges: f[5], write_ticks: f[7], io_ticks: f[9], in_queue: f[10] })
    }
}

/// A device being watched: its name and where its counters are.
#[derive(Clone, Debug)]
pub struct Watched {
    name: String,
    stat: PathBuf,
    before: DiskStat,
}

/// The sysfs directory of the disk holding `path` (a block device, or the
/// disk under a regular file; a partition gives its disk, as fio's
/// `disk_util` names the disk).
pub fn disk_dir(path: &Path) -> Option<PathBuf> {
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() {
        m.rdev()
    } else if m.file_type().is_file() {
        m.dev()
    } else {
        return None;
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let dir = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    if dir.join("partition").exists() {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir)
    }
}

/// Start watching the disks under `paths` (each disk once).
pub fn watch(paths: &[String]) -> Vec<Watched> {
    let mut out: Vec<Watched> = vec![];
    for p in paths {
        let Some(dir) = disk_dir(Path::new(p)) else { continue };
        let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else { continue };
        if out.iter().any(|w| w.name == name) {
            continue;
        }
        let stat = dir.join("stat");
        let Some(before) = std::fs::read_to_string(&stat).ok().and_then(|s| DiskStat::parse(&s)) else { continue };
        out.push(Watched { name, stat, before });
    }
    out
}

/// One `disk_util` entry from two readings `elapsed_ms` apart, in fio's
/// keys; `util` is the share of the time the device had I/O in flight.
pub fn entry(name: &str, a: &DiskStat, b: &DiskStat, elapsed_ms: u64) -> serde_json::Value {
    let d = |x: u64, y: u64| y.saturating_sub(x);
    let busy = d(a.io_ticks, b.io_ticks);
    serde_json::json!({
        "name": name,
        "read_ios": d(a.read_ios, b.read_ios),
        "write_ios": d(a.write_ios, b.write_ios),
        "read_merges": d(a.read_merges, b.read_merges),
        "write_merges": d(a.write_merges, b.write_merges),
        "read_ticks": d(a.read_ticks, b.read_ticks),
        "write_ticks": d(a.write_ticks, b.write_ticks),
        "in_queue": d(a.in_queue, b.in_queue),
        "util": if elapsed_ms > 0 { (100.0 * busy as f64 / elapsed_ms as f64).min(100.0) } else { 0.0 },
    })
}

/// The `disk_util` array: every watched disk, from its first reading to now.
pub fn finish(watched: &[Watched], elapsed_ms: u64) -> Vec<serde_json::Value> {
    watched
        .iter()
        .filter_map(|w| {
            let now = std::fs::read_to_string(&w.stat).ok().and_then(|s| DiskStat::parse(&s))?;
            Some(entry(&w.name, &w.before, &now, elapsed_ms))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_the_difference_of_two_readings_in_fios_keys() {
        let a = DiskStat::parse("100 1 800 50 20 2 160 30 0 400 80 0 0 0 0 0 0").unwrap();
        let b = DiskStat::parse("1100 3 8800 550 520 4 4160 330 1 900 980 0 0 0 0 0 0").unwrap();
        let e = entry("nvme0n1", &a, &b, 1000);
        assert_eq!(e["name"], "nvme0n1");
        assert_eq!((e["read_ios"].as_u64(), e["write_ios"].as_u64()), (Some(1000), Some(500)));
        assert_eq!((e["read_merges"].as_u64(), e["write_merges"].as_u64()), (Some(2), Some(2)));
        assert_eq!((e["read_ticks"].as_u64(), e["write_ticks"].as_u64(), e["in_queue"].as_u64()), (Some(500), Some(300), Some(900)));
        assert_eq!(e["util"].as_f64(), Some(50.0));
        assert_eq!(DiskStat::parse("1 2 3"), None, "a short stat file is not a reading");
    }

    #[test]
    fn a_character_device_or_a_missing_file_has_no_disk() {
        assert!(watch(&["/dev/null".into(), "/nonexistent/file".into()]).is_empty());
    }
}
