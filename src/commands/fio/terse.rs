//! fio's terse output (`--minimal`, `--output-format=terse`): one line of
//! `;`-separated fields per reported entry, as fio 3.33's
//! `show_thread_status_terse_all` writes it (versions 2 to 5, 3 by
//! default). The figures are those of the entry's JSON object, which
//! fio's terse and JSON outputs also share (its `thread_stat`), so each is
//! measured once and the two outputs cannot disagree; only the number
//! formats are the terse line's own (`%llu`, `%f`, `%3.2f%%`).

use crate::report::fio_json::DEPTH_KEYS;
use serde_json::Value;

/// fio's `FIO_IO_U_LIST_MAX_LEN`: the percentile fields per direction,
/// those past the list printed as `0%=0`.
const PERCENTILE_FIELDS: usize = 20;

/// The terse versions fio 3.33 writes (`--terse-version`).
pub const VERSIONS: std::ops::RangeInclusive<u8> = 2..=5;

/// What a terse line is made of beside the entry's JSON object.
pub struct Line<'a> {
    /// The entry's object of fio's JSON `jobs` array (our `fio_json` and the
    /// adjustments mod.rs makes to it).
    pub job: &'a Value,
    /// `--terse-version`.
    pub version: u8,
    /// The JSON's `fio version`, so that both outputs name the same program.
    pub fio_version: &'a str,
    /// The share in percent of the I/Os under 1 usec, which fio's terse
    /// line adds to the first usec bucket (its `stat_calc_lat_nu`), taken
    /// without the 0.01% floor of each bucket.
    pub under_usec: f64,
    /// The group's aggregate bandwidth per direction (read, write), bytes/s
    /// (fio's `rs->agg`), the base of the bandwidth's share.
    pub group_agg: [f64; 2],
    /// The JSON's `disk_util` entries: fio appends them to every line
    /// (version 3 and later).
    pub disk_util: &'a [Value],
    /// The percentiles fio prints for each direction (its `percentile_list`,
    /// ascending), each 0 for a direction without I/O, and `0%=0` in the
    /// fields past them; empty when the job reports none (gtod_reduce, or
    /// neither `clat_percentiles` nor `lat_percentiles`).
    pub percentiles: &'a [f64],
    /// Whether they are of the total latency (`lat_percentiles`, which fio's
    /// terse line takes over clat's).
    pub lat_percentiles: bool,
    /// The job's `description=`, which fio appends last.
    pub description: Option<&'a str>,
}

/// `u64` of a JSON field, 0 when absent.
fn int(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| v.as_f64().map_or(0, |f| f as u64))
}

fn float(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// fio's `calc_lat` fields of a latency (ns in the JSON): min, max, mean,
/// stdev in usec, all 0 without samples.
fn latency(o: &mut String, l: &Value) {
    if int(&l["N"]) == 0 {
        o.push_str(";0;0;0.000000;0.000000");
    } else {
        o.push_str(&format!(";{};{};{:.6};{:.6}", int(&l["min"]) / 1000, int(&l["max"]) / 1000, float(&l["mean"]) / 1000.0, float(&l["stddev"]) / 1000.0));
    }
}

/// One direction's fields (fio's `show_ddir_status_terse`).
fn direction(o: &mut String, d: &Value, l: &Line, agg: f64) {
    let version = l.version;
    let (bytes, ios, runtime) = (int(&d["io_bytes"]), int(&d["total_ios"]), int(&d["runtime"]));
    let (bw, iops) = if runtime > 0 { (1000 * bytes / runtime / 1024, 1000 * ios / runtime) } else { (0, 0) };
    o.push_str(&format!(";{};{bw};{iops};{runtime}", bytes >> 10));
    latency(o, &d["slat_ns"]);
    latency(o, &d["clat_ns"]);
    // fio's percentiles are of lat with lat_percentiles, else of clat;
    // where the JSON has them (the one latency, when not measured apart,
    // is in clat_ns).
    let tables = if l.lat_percentiles { [&d["lat_ns"]["percentile"], &d["clat_ns"]["percentile"]] } else { [&d["clat_ns"]["percentile"], &Value::Null] };
    let table = tables.into_iter().find(|p| p.is_object()).unwrap_or(&Value::Null);
    for i in 0..PERCENTILE_FIELDS {
        match l.percentiles.get(i) {
            Some(p) => o.push_str(&format!(";{p:.6}%={}", int(&table[format!("{p:.6}")]) / 1000)),
            None => o.push_str(";0%=0"),
        }
    }
    latency(o, &d["lat_ns"]);
    let samples = int(&d["bw_samples"]);
    if samples > 0 {
        // fio: the mean's share of the group's aggregate (KiB/s, whole),
        // at most 100%, 100% when the group moved nothing.
        let kib = (agg as u64 / 1024) as f64;
        let mean = float(&d["bw_mean"]);
        let share = if kib > 0.0 { (mean * 100.0 / kib).min(100.0) } else { 100.0 };
        o.push_str(&format!(";{};{};{share:.6}%;{mean:.6};{:.6}", int(&d["bw_min"]), int(&d["bw_max"]), float(&d["bw_dev"])));
    } else {
        o.push_str(";0;0;0.000000%;0.000000;0.000000");
    }
    if version == 5 {
        o.push_str(&format!(";{samples}"));
        if int(&d["iops_samples"]) > 0 {
            o.push_str(&format!(
                ";{};{};{:.6};{:.6};{}",
                int(&d["iops_min"]),
                int(&d["iops_max"]),
                float(&d["iops_mean"]),
                float(&d["iops_stddev"]),
                int(&d["iops_samples"])
            ));
        } else {
            o.push_str(";0;0;0.000000;0.000000;0");
        }
    }
}

/// The entry's terse line, newline included.
pub fn line(l: &Line) -> String {
    let j = l.job;
    let (name, group, error) = (j["jobname"].as_str().unwrap_or(""), int(&j["groupid"]), int(&j["error"]));
    let mut o = if l.version == 2 { format!("2;{name};{group};{error}") } else { format!("{};{};{name};{group};{error}", l.version, l.fio_version) };
    direction(&mut o, &j["read"], l, l.group_agg[0]);
    direction(&mut o, &j["write"], l, l.group_agg[1]);
    if l.version != 3 {
        direction(&mut o, &j["trim"], l, 0.0);
    }
    o.push_str(&format!(";{:.6}%;{:.6}%;{};{};{}", float(&j["usr_cpu"]), float(&j["sys_cpu"]), int(&j["ctx"]), int(&j["majf"]), int(&j["minf"])));
    for k in DEPTH_KEYS {
        o.push_str(&format!(";{:3.1}%", float(&j["iodepth_level"][k])));
    }
    let usec = ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"];
    for (i, k) in usec.iter().enumerate() {
        let under = if i == 0 { l.under_usec } else { 0.0 };
        o.push_str(&format!(";{:3.2}%", float(&j["latency_us"][k]) + under));
    }
    for k in ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000"] {
        o.push_str(&format!(";{:3.2}%", float(&j["latency_ms"][k])));
    }
    if l.version >= 3 {
        for d in l.disk_util {
            o.push_str(&format!(
                ";{};{};{};{};{};{};{};{};{:3.2}%",
                d["name"].as_str().unwrap_or("?"),
                int(&d["read_ios"]),
                int(&d["write_ios"]),
                int(&d["read_merges"]),
                int(&d["write_merges"]),
                int(&d["read_ticks"]),
                int(&d["write_ticks"]),
                int(&d["in_queue"]),
                float(&d["util"])
            ));
        }
    }
    // fio's failed I/Os, with continue_on_error only (as its JSON's).
    if j.get("total_err").is_some() {
        o.push_str(&format!(";{};{}", int(&j["total_err"]), int(&j["first_error"])));
    }
    if let Some(d) = l.description.filter(|d| !d.is_empty()) {
        if l.version == 2 {
            o.push('\n');
        }
        o.push_str(&format!(";{d}"));
    }
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::PERCENTILES;

    fn job() -> Value {
        let dir = serde_json::json!({
            "io_bytes": 8192, "total_ios": 2, "runtime": 4,
            "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
            "clat_ns": {"min": 1500, "max": 2500, "mean": 2000.0, "stddev": 707.1, "N": 2,
                        "percentile": PERCENTILES.iter().map(|p| (format!("{p:.6}"), Value::from(2048))).collect::<serde_json::Map<_, _>>()},
            "lat_ns": {"min": 1600, "max": 2600, "mean": 2100.0, "stddev": 707.1, "N": 2},
            "bw_samples": 0, "iops_samples": 0,
        });
        serde_json::json!({"jobname": "t", "groupid": 0, "error": 0, "read": dir, "write": {}, "trim": {},
            "usr_cpu": 1.5, "sys_cpu": 20.0, "ctx": 7, "majf": 0, "minf": 3,
            "iodepth_level": {"1": 100.0}, "latency_us": {"2": 100.0}, "latency_ms": {}})
    }

    #[test]
    fn fields_as_fio_3_33_prints_them() {
        let j = job();
        let du = [serde_json::json!({"name": "vda", "read_ios": 2, "write_ios": 0, "read_merges": 0, "write_merges": 0, "read_ticks": 1, "write_ticks": 0, "in_queue": 1, "util": 25.126})];
        let l = Line { job: &j, version: 3, fio_version: "fio-3.33", under_usec: 0.0, group_agg: [2048.0, 0.0], disk_util: &du, percentiles: &PERCENTILES, lat_percentiles: false, description: None };
        let s = line(&l);
        // fio 3.33's own line for one job on one disk has 130 fields.
        assert_eq!(s.trim_end().split(';').count(), 130, "{s}");
        assert!(s.starts_with("3;fio-3.33;t;0;0;8;2000;500;4;0;0;0.000000;0.000000;1;2;2.000000;0.707100;1.000000%=2;5.000000%=2;"), "{s}");
        assert!(s.contains(";99.990000%=2;0%=0;0%=0;0%=0;1;2;2.100000;0.707100;0;0;0.000000%;0.000000;0.000000;0;0;0;0;"), "{s}");
        assert!(s.contains(";1.500000%;20.000000%;7;0;3;100.0%;0.0%;"), "{s}");
        assert!(s.ends_with(";vda;2;0;0;0;1;0;1;25.13%\n"), "{s}");
        // Versions 4 and 5 add trim (5: the samples and IOPS fields too);
        // 2 has no version string and no disks.
        let count = |v: u8| line(&Line { version: v, ..l }).trim_end().split(';').count();
        assert_eq!(count(4), 130 + 41);
        assert_eq!(count(5), 130 + 41 + 3 * 6);
        assert_eq!(count(2), 130 + 41 - 1 - 9);
        // A direction without I/O: fio's percentiles, each 0; under
        // gtod_reduce none (`0%=0`).
        assert!(s.contains(";0;0;0;0;0;0;0.000000;0.000000;0;0;0.000000;0.000000;1.000000%=0;"), "{s}");
        assert!(!line(&Line { percentiles: &[], ..l }).contains("1.000000%"));
        // lat_percentiles: the total latency's, and a list of its own.
        let mut j2 = job();
        j2["read"]["lat_ns"]["percentile"] = serde_json::json!({"50.000000": 4096, "99.900000": 8192});
        let s = line(&Line { job: &j2, percentiles: &[50.0, 99.9], lat_percentiles: true, ..l });
        assert!(s.contains(";50.000000%=4;99.900000%=8;0%=0;"), "{s}");
        let d = line(&Line { description: Some("about"), ..l });
        assert!(d.ends_with(";25.13%;about\n"), "{d}");
    }
}
