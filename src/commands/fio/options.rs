//! fio's options: a table of every option name this drop-in knows, each
//! either applied as fio defines it, accepted because it changes no figure
//! (bookkeeping), or refused by name with whether ignoring it would change
//! the result. One parser for the command line's `--key=value`,
//! `--key value` and bare booleans, and for job files' `key=value` lines.

use crate::cli::parse::parse_cpu_list;
use crate::engine::workload::{Distribution, Rw};
use crate::error::Error;
use std::time::Duration;

/// How an option is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Applied as fio defines it; takes a value.
    Value,
    /// Applied as fio defines it; a boolean (bare `--key` means 1).
    Bool,
    /// Accepted and ignored: it changes no figure (bookkeeping, or what
    /// nvme-bypass always does). Bare or with a value.
    Ignored(&'static str),
    /// Refused: ignoring it would change the result.
    Refused(&'static str),
    /// Refused: ignoring it would not change the figures, but what it asks
    /// for (a log file, a trigger...) would silently not happen.
    RefusedNoEffect(&'static str),
}

/// Every fio option this drop-in knows (fio's names; aliases after).
pub const TABLE: &[(&str, Kind)] = &[
    ("name", Kind::Value),
    ("filename", Kind::Value),
    ("directory", Kind::Value),
    ("ioengine", Kind::Value),
    ("rw", Kind::Value),
    ("bs", Kind::Value),
    ("iodepth", Kind::Value),
    ("rwmixread", Kind::Value),
    ("rwmixwrite", Kind::Value),
    ("size", Kind::Value),
    ("io_size", Kind::Value),
    ("offset", Kind::Value),
    ("runtime", Kind::Value),
    ("time_based", Kind::Bool),
    ("ramp_time", Kind::Value),
    ("numjobs", Kind::Value),
    ("loops", Kind::Value),
    ("number_ios", Kind::Value),
    ("startdelay", Kind::Value),
    ("direct", Kind::Bool),
    ("buffered", Kind::Bool),
    ("sync", Kind::Value),
    ("fadvise_hint", Kind::Value),
    ("group_reporting", Kind::Bool),
    ("gtod_reduce", Kind::Bool),
    ("iodepth_batch_submit", Kind::Value),
    ("iodepth_batch_complete_min", Kind::Value),
    ("iodepth_batch_complete_max", Kind::Value),
    ("hipri", Kind::Bool),
    ("fixedbufs", Kind::Bool),
    ("userspace_reap", Kind::Bool),
    ("registerfiles", Kind::Bool),
    ("sqthread_poll", Kind::Bool),
    ("sqthread_poll_cpu", Kind::Value),
    ("cmd_type", Kind::Value),
    ("cpus_allowed", Kind::Value),
    ("cpus_allowed_policy", Kind::Value),
    ("verify", Kind::Value),
    ("thread", Kind::Bool),
    ("randseed", Kind::Value),
    ("stonewall", Kind::Bool),
    ("new_group", Kind::Bool),
    ("continue_on_error", Kind::Value),
    ("allow_mounted_write", Kind::Bool),
    ("kb_base", Kind::Value),
    ("nsid", Kind::Value),
    ("randrepeat", Kind::Ignored("offsets are always from a fixed seed (--randseed), so every run repeats")),
    ("norandommap", Kind::Bool),
    ("description", Kind::Ignored("a comment")),
    ("invalidate", Kind::Bool),
    ("eta", Kind::Ignored("progress display")),
    ("eta-newline", Kind::Ignored("progress display")),
    ("clocksource", Kind::Ignored("nvme-bypass times with its own clock (the TSC calibrated against CLOCK_MONOTONIC, whose reading gives IOPS and bandwidth); fio's choice changes only fio's own cost of reading time")),
    ("iodepth_low", Kind::Value),
    ("bwavgtime", Kind::Value),
    ("iopsavgtime", Kind::Value),
    ("stats", Kind::Bool),
    ("clat_percentiles", Kind::Bool),
    ("lat_percentiles", Kind::Bool),
    ("slat_percentiles", Kind::Bool),
    ("percentile_list", Kind::Value),
    ("disable_slat", Kind::Bool),
    ("disable_clat", Kind::Bool),
    ("disable_lat", Kind::Bool),
    ("exitall", Kind::Bool),
    ("exit_what", Kind::Value),
    ("unified_rw_reporting", Kind::Refused("would merge reads and writes into one 'mixed' line; nvme-bypass reports them apart")),
    ("bssplit", Kind::Refused("mixed block sizes are not supported; one bs per job")),
    ("bsrange", Kind::Value),
    ("blocksize_range", Kind::Refused("mixed block sizes are not supported; one bs per job")),
    ("random_distribution", Kind::Value),
    ("rate", Kind::Value),
    ("rate_iops", Kind::Value),
    ("rate_process", Kind::Value),
    ("rate_min", Kind::Refused("no minimum rate is enforced: the job would not stop when below it")),
    ("rate_iops_min", Kind::Refused("no minimum rate is enforced: the job would not stop when below it")),
    ("thinktime", Kind::Value),
    ("thinktime_spin", Kind::Value),
    ("thinktime_blocks", Kind::Value),
    ("thinktime_blocks_type", Kind::Value),
    ("thinktime_iotime", Kind::Value),
    ("rate_ignore_thinktime", Kind::Bool),
    ("fsync", Kind::Value),
    ("fdatasync", Kind::Value),
    ("end_fsync", Kind::Bool),
    ("fsync_on_close", Kind::Refused("no fsync when a file is closed; end_fsync=1 flushes once at the job's end")),
    ("sync_file_range", Kind::Refused("no sync_file_range every N writes; fsync=N flushes instead")),
    ("zonemode", Kind::Refused("zoned devices are not supported")),
    ("nrfiles", Kind::Refused("one file per job (or one per filename)")),
    ("openfiles", Kind::Refused("one file per job (or one per filename)")),
    ("file_service_type", Kind::Refused("several files are served round robin by slot")),
    ("rw_sequencer", Kind::Refused("sequential patterns advance one block at a time")),
    ("zero_buffers", Kind::Refused("write buffers hold verify stamps, or random content filled once, into which scramble_buffers=1 stores each write's offset and time")),
    ("refill_buffers", Kind::Refused("write buffers are filled once, never refilled; scramble_buffers=1 stores each write's offset and time into them")),
    ("buffer_compress_percentage", Kind::Refused("write buffers are not compressible on request")),
    ("dedupe_percentage", Kind::Refused("write buffers are not dedupable on request; given at all, even at 0, it makes fio refill every write buffer as refill_buffers=1 does, which nvme-bypass does not")),
    ("fallocate", Kind::Value),
    ("create_on_open", Kind::Refused("files are laid out before the job starts")),
    ("unlink", Kind::Refused("files are kept after the job")),
    ("do_verify", Kind::Refused("verify always checks what it wrote")),
    ("verify_only", Kind::Refused("use a read pattern with verify= to check existing stamps")),
    ("verify_backlog", Kind::Refused("verify is done block by block as it goes")),
    ("ioscheduler", Kind::Value),
    ("nice", Kind::Refused("the job's priority is not changed")),
    ("prio", Kind::Refused("the job's I/O priority is not changed")),
    ("prioclass", Kind::Refused("the job's I/O priority is not changed")),
    ("cpumask", Kind::Refused("use cpus_allowed")),
    ("numa_cpu_nodes", Kind::Refused("use cpus_allowed")),
    ("numa_mem_policy", Kind::Refused("memory placement is not changed")),
    ("iomem", Kind::Refused("I/O buffers are page-aligned anonymous memory")),
    ("mem", Kind::Refused("I/O buffers are page-aligned anonymous memory")),
    ("iomem_align", Kind::Refused("I/O buffers are page-aligned")),
    ("flow", Kind::Refused("no flow control between jobs")),
    ("trim_percentage", Kind::Refused("no trims")),
    ("write_bw_log", Kind::Value),
    ("write_iops_log", Kind::Value),
    ("log_avg_msec", Kind::Value),
    ("write_lat_log", Kind::Value),
    ("per_job_logs", Kind::Bool),
    ("write_hist_log", Kind::RefusedNoEffect("no histogram log is written")),
    ("exec_prerun", Kind::RefusedNoEffect("no command would be run before the job")),
    ("exec_postrun", Kind::RefusedNoEffect("no command would be run after the job")),
    ("trigger", Kind::RefusedNoEffect("no triggers")),
    ("offset_increment", Kind::Refused("the clones of a job are not given regions offset from each other")),
    ("random_generator", Kind::Refused("random offsets come from nvme-bypass's own generator")),
    ("percentage_random", Kind::Refused("a job is wholly random or wholly sequential")),
    ("fill_device", Kind::Refused("a job's region is its size")),
    ("significant_figures", Kind::RefusedNoEffect("figures are printed with fio's default 4 significant figures")),
    ("log_offset", Kind::RefusedNoEffect("log entries carry no offset")),
    ("allrandrepeat", Kind::Ignored("every random draw is from a fixed seed, so every run repeats")),
    ("scramble_buffers", Kind::Bool),
    ("overwrite", Kind::Refused("a write job's new file is allocated, not written first")),
    ("create_serialize", Kind::RefusedNoEffect("files are laid out one after another before the jobs")),
    ("disk_util", Kind::RefusedNoEffect("the disk statistics are always gathered and printed")),
    ("exitall_on_error", Kind::Refused("a failed I/O does not end the other jobs")),
    ("verify_fatal", Kind::Refused("a mismatch is counted and the job goes on")),
    ("serialize_overlap", Kind::Refused("overlapping I/Os go out together, unless verify holds them")),
    ("file_append", Kind::Refused("I/O starts at offset, not at the file's end")),
    ("pre_read", Kind::Refused("files are not read into the page cache first")),
    ("error_dump", Kind::RefusedNoEffect("errors are not dumped")),
    ("write_barrier", Kind::Refused("no barrier writes")),
    ("atomic", Kind::Refused("no atomic (O_ATOMIC) writes")),
];

/// Options refused above, at the value that is fio's own default: given
/// so, they change nothing in fio either, and are taken (and listed in the
/// JSON's job options, as fio lists what was given). A job file written
/// out in full runs unchanged.
const AT_FIOS_DEFAULT: &[(&str, &[&str])] = &[
    ("unified_rw_reporting", &["none", "0"]),
    ("rate_min", &["0"]),
    ("rate_iops_min", &["0"]),
    ("fsync_on_close", &["0"]),
    ("zonemode", &["none"]),
    ("nrfiles", &["1"]),
    ("file_service_type", &["roundrobin"]),
    ("rw_sequencer", &["sequential"]),
    ("zero_buffers", &["0"]),
    ("refill_buffers", &["0"]),
    // Given at all, fio's buffer_compress_percentage turns its scramble off
    // (TD_F_COMPRESS): taken at 0, it does so here too (JobOpts::scrambles).
    // dedupe_percentage, even at 0, turns fio's refill_buffers on: refused.
    ("buffer_compress_percentage", &["0"]),
    ("create_on_open", &["0"]),
    ("unlink", &["0"]),
    ("do_verify", &["1"]),
    ("verify_only", &["0"]),
    ("verify_backlog", &["0"]),
    ("nice", &["0"]),
    ("trim_percentage", &["0"]),
    ("offset_increment", &["0"]),
    ("random_generator", &["tausworthe"]),
    ("percentage_random", &["100"]),
    ("fill_device", &["0"]),
    ("significant_figures", &["4"]),
    ("log_offset", &["0"]),
    ("overwrite", &["0"]),
    ("create_serialize", &["1"]),
    ("disk_util", &["1"]),
    ("exitall_on_error", &["0"]),
    ("verify_fatal", &["0"]),
    ("serialize_overlap", &["0"]),
    ("file_append", &["0"]),
    ("pre_read", &["0"]),
    ("error_dump", &["0"]),
    ("write_barrier", &["0"]),
    ("atomic", &["0"]),
];

/// fio's aliases, and the names we map onto another.
pub const ALIASES: &[(&str, &str)] = &[
    ("readwrite", "rw"),
    ("blocksize", "bs"),
    ("iodepth_batch", "iodepth_batch_submit"),
    ("iodepth_batch_complete", "iodepth_batch_complete_min"),
    ("io_limit", "io_size"),
    ("timeout", "runtime"),
    ("cpus-allowed", "cpus_allowed"),
];

/// Look an option up: its fio name and how it is handled, or a usage error
/// naming it.
pub fn lookup(key: &str) -> Result<(&'static str, Kind), Error> {
    let canon = ALIASES.iter().find(|(a, _)| *a == key).map(|(_, c)| *c).unwrap_or(key);
    match TABLE.iter().find(|(n, _)| *n == canon) {
        Some(&(n, k)) => Ok((n, k)),
        None => match nearest(key) {
            // A typo of a known option: say which, as fio does ("Did you mean").
            // (fio has options nvme-bypass does not know, such as `ba`
            // beside `bs`: the suggestion does not say there is none.)
            // A suggestion that is itself refused says so, rather than
            // sending the user to a second refusal.
            Some(near) => {
                let refused = match lookup(near) {
                    Ok((_, Kind::Refused(why) | Kind::RefusedNoEffect(why))) => format!(", which nvme-bypass refuses too ({why})"),
                    _ => String::new(),
                };
                Err(Error::usage(format!(
                    "fio option '{key}' is not one nvme-bypass knows: did you mean {near}{refused}? (if not, it cannot tell whether ignoring it would change the result: refused; remove it)"
                )))
            }
            None => Err(Error::usage(format!(
                "fio option '{key}' is not one nvme-bypass knows, so it cannot tell whether ignoring it would change the result: refused; remove it (docs/fio.md lists what is supported)"
            ))),
        },
    }
}

/// The known option (or alias) closest to `key`, within two edits (a
/// typo), if there is one.
fn nearest(key: &str) -> Option<&'static str> {
    let names = TABLE.iter().map(|(n, _)| *n).chain(ALIASES.iter().map(|(a, _)| *a));
    names.map(|n| (edits(key, n), n)).filter(|&(d, _)| d <= 2 && d < key.len()).min_by_key(|&(d, _)| d).map(|(_, n)| n)
}

/// Levenshtein distance, an adjacent swap counting one (optimal string
/// alignment), on bytes.
fn edits(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for j in 0..=b.len() {
        d[0][j] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = (a[i - 1] != b[j - 1]) as usize;
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// One job's settings, with fio's defaults.
#[derive(Clone, Debug)]
pub struct JobOpts {
    pub name: String,
    pub filename: Option<String>,
    pub directory: Option<String>,
    pub ioengine: String,
    pub rw: Rw,
    pub bs: u64,
    pub iodepth: usize,
    /// The iodepth the job gave, which fio's report shows even where a
    /// synchronous engine runs at depth 1 (0: as `iodepth`).
    pub iodepth_shown: usize,
    pub rwmixread: u8,
    pub size: Option<u64>,
    /// fio's `size=N%` (1 to 99): each file's region, from offset, is N%
    /// of the file's (or device's) size, in whole blocks (`size=100%` and
    /// `0%` are no size, as in fio).
    pub size_percent: Option<u64>,
    pub io_size: Option<u64>,
    /// fio's `offset=N%` (0 to 100): the region starts N% into the file or
    /// device, rounded up to a whole bs (resolved once its size is known).
    pub offset_percent: Option<u64>,
    pub offset: u64,
    pub runtime: Option<Duration>,
    pub time_based: bool,
    pub ramp: Duration,
    /// fio's `rate_iops` (and `rate`, in bytes per second), per direction
    /// as given (read, write): `N` is both, `N,M` each, `,M` writes only.
    pub rate: Option<Rate>,
    /// fio's `thinktime`, `thinktime_spin`, `thinktime_blocks` and
    /// `thinktime_blocks_type` (complete: true).
    pub thinktime: Duration,
    /// fio's `fsync=N` / `fdatasync=N` (0: none), and `end_fsync`.
    pub fsync: u64,
    pub end_fsync: bool,
    pub thinktime_spin: Duration,
    pub thinktime_blocks: u64,
    pub thinktime_on_complete: bool,
    /// fio's `startdelay`: the job starts this long after the run did.
    pub startdelay: Duration,
    pub numjobs: usize,
    pub loops: u64,
    /// fio's `number_ios`: at most this many I/Os per loop (0, fio's
    /// default, and a time_based job: no limit).
    pub number_ios: u64,
    pub direct: bool,
    /// fio's `invalidate` (default 1): drop the file's page cache before
    /// the job, so a buffered job reads the device, not memory.
    pub invalidate: bool,
    /// fio's `sync`: the flag a writing job's files are opened with on the
    /// block path (0, `O_SYNC` or `O_DSYNC`).
    pub sync_open: i32,
    /// fio's `fadvise_hint` (default 1): the advice for the block path's
    /// files, `None` for `0`; `Some(None)` for `1`, which picks by the
    /// pattern (random or sequential).
    pub fadvise_hint: Option<Option<i32>>,
    pub group_reporting: bool,
    pub gtod_reduce: bool,
    pub batch: usize,
    /// fio's `per_job_logs` (default 1): a log file per thread
    /// (`PREFIX_bw.N.log`); 0: one file per kind, every thread's entries
    /// appended to it (`PREFIX_bw.log`).
    pub per_job_logs: bool,
    /// fio's `iodepth_low` as given (0: fio's default, iodepth).
    pub iodepth_low: usize,
    pub batch_complete_min: Option<usize>,
    pub batch_complete_max: Option<usize>,
    pub hipri: bool,
    pub fixedbufs: bool,
    pub registerfiles: bool,
    pub sqthread_poll: bool,
    pub sqthread_poll_cpu: Option<u32>,
    pub cmd_type: String,
    pub cpus: Vec<usize>,
    pub verify: bool,
    /// fio's `scramble_buffers` (default 1): see [`JobOpts::scrambles`].
    pub scramble_buffers: bool,
    pub thread: bool,
    pub seed: u64,
    /// fio's `norandommap`: random offsets drawn on their own (blocks may
    /// repeat) instead of every block once per pass.
    pub norandommap: bool,
    /// fio's `random_distribution`: how random offsets spread.
    pub distribution: Distribution,
    /// fio's `disable_slat`: no submission latency measured or shown.
    pub disable_slat: bool,
    /// fio's `disable_clat`: no completion latency shown (its line, its
    /// percentiles, the latency distribution, the clat log).
    pub disable_clat: bool,
    /// fio's `disable_lat`: no total latency shown (its line, its
    /// percentiles, the lat log).
    pub disable_lat: bool,
    /// fio's `ioscheduler`: the I/O scheduler the disks under the job's
    /// files are switched to.
    pub ioscheduler: Option<String>,
    /// fio's `percentile_list`, `slat_percentiles`, `clat_percentiles`
    /// and `lat_percentiles`.
    pub percentiles: Percentiles,
    /// fio's libaio `userspace_reap`: read completions from the AIO ring
    /// without io_getevents.
    pub userspace_reap: bool,
    /// fio's `write_bw_log` / `write_iops_log`: the logs' file prefix
    /// (empty: the job's name, as a bare key gives in fio).
    pub bw_log: Option<String>,
    pub iops_log: Option<String>,
    /// fio's `write_lat_log`: PREFIX_lat, _clat and _slat logs.
    pub lat_log: Option<String>,
    /// fio's `log_avg_msec`: each log entry averages this many ms (0, fio's
    /// default, is an entry per I/O: refused with a log).
    pub log_avg_msec: u64,
    pub stonewall: bool,
    /// fio's `exitall`: when this job ends, the others of its reporting
    /// group (`exit_what=group`, the default) or of its stonewall
    /// (`exit_what=stonewall`) are ended too.
    pub exitall: bool,
    /// `exit_what=stonewall` rather than `group`.
    pub exit_stonewall: bool,
    /// fio's `new_group`: a new reporting group, started with the others
    /// (only `stonewall` waits).
    pub new_group: bool,
    pub continue_on_error: bool,
    pub allow_mounted_write: bool,
    pub nsid: u32,
    /// Options given, as fio's "job options" lists them.
    pub given: Vec<(String, String)>,
}

impl Default for JobOpts {
    fn default() -> Self {
        JobOpts {
            name: String::new(),
            filename: None,
            directory: None,
            ioengine: "psync".into(),
            rw: Rw::Read,
            bs: 4096,
            iodepth: 1,
            iodepth_shown: 0,
            rwmixread: 50,
            size: None,
            size_percent: None,
            io_size: None,
            offset_percent: None,
            offset: 0,
            runtime: None,
            time_based: false,
            ramp: Duration::ZERO,
            startdelay: Duration::ZERO,
            thinktime: Duration::ZERO,
            fsync: 0,
            end_fsync: false,
            thinktime_spin: Duration::ZERO,
            thinktime_blocks: 1,
            thinktime_on_complete: true,
            rate: None,
            numjobs: 1,
            loops: 1,
            number_ios: 0,
            direct: false,
            invalidate: true,
            sync_open: 0,
            fadvise_hint: Some(None),
            group_reporting: false,
            gtod_reduce: false,
            iodepth_low: 0,
            per_job_logs: true,
            exitall: false,
            exit_stonewall: false,
            batch: 1,
            batch_complete_min: None,
            batch_complete_max: None,
            hipri: false,
            fixedbufs: false,
            registerfiles: false,
            sqthread_poll: false,
            sqthread_poll_cpu: None,
            cmd_type: "nvme".into(),
            cpus: vec![],
            verify: false,
            scramble_buffers: true,
            thread: false,
            seed: 1,
            norandommap: false,
            distribution: Distribution::Uniform,
            disable_slat: false,
            disable_clat: false,
            disable_lat: false,
            ioscheduler: None,
            percentiles: Percentiles::default(),
            userspace_reap: false,
            bw_log: None,
            iops_log: None,
            lat_log: None,
            log_avg_msec: 0,
            stonewall: false,
            new_group: false,
            continue_on_error: false,
            allow_mounted_write: false,
            nsid: 1,
            given: vec![],
        }
    }
}

/// fio's sizes: a number with an optional k/m/g/t/p suffix, as fio's
/// default kb_base=1024 reads them (parse.c `__get_mult_bytes`, its
/// "opposite units" for old scripts): "k", "K" and "KB" are 1024, and the
/// IEC "KiB" is 1000 (likewise m, g, t, p).
pub fn fio_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.ends_with('%') {
        return Err(format!("'{s}': sizes as a percentage of the device are not supported; give bytes (e.g. 4G)"));
    }
    // fio's str_to_decimal takes hexadecimal after 0x (bs=0x1000), a
    // suffix after it as after decimal digits.
    let (t, radix) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (t, 10),
    };
    let i = t.find(|c: char| !c.is_digit(radix)).unwrap_or(t.len());
    let (num, suf) = t.split_at(i);
    let n: u64 = u64::from_str_radix(num, radix).map_err(|_| format!("'{s}' is not a size; write e.g. 4k, 8M, 4G"))?;
    let m: u64 = match suf.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "t" | "tb" => 1 << 40,
        "p" | "pb" => 1 << 50,
        "kib" => 1000,
        "mib" => 1_000_000,
        "gib" => 1_000_000_000,
        "tib" => 1_000_000_000_000,
        "pib" => 1_000_000_000_000_000,
        _ => return Err(format!("'{s}' has an unknown size suffix; use k, m, g, t or p")),
    };
    n.checked_mul(m).ok_or_else(|| format!("'{s}' is too large"))
}

/// fio's `random_distribution` (options.c `str_random_distribution_cb`,
/// `parse_zoned_distribution`): `random`; `zipf[:theta[:center]]`,
/// `pareto[:h[:center]]`, `normal[:dev[:center]]` with fio's defaults
/// (1.1, 0.2, 0) and ranges; `zoned:` and `zoned_abs:` with
/// `access%/size` pairs separated by `:`, one list for every direction or
/// `reads,writes[,trims]`, the access percents adding up to 100 (a pair
/// without a size shares what the others leave).
pub fn random_distribution(s: &str) -> Result<Distribution, String> {
    let t = s.trim();
    let (kind, rest) = t.split_once(':').unwrap_or((t, ""));
    let skewed = |default: f64| -> Result<(f64, Option<f64>), String> {
        let mut parts = rest.split(':');
        let num = |x: &str| x.trim().parse::<f64>().map_err(|_| format!("'{t}': '{x}' is not a number"));
        // As fio's get_opt_postfix: a ':' with nothing after it is an
        // error, not the default.
        let val = match parts.next().filter(|_| t.contains(':')) {
            Some(x) if x.trim().is_empty() => return Err(format!("'{t}': give a number after '{kind}:', or leave out the ':' for fio's default")),
            Some(x) => num(x)?,
            None => default,
        };
        let center = match parts.next() {
            Some(x) => Some(num(x)?).filter(|c| *c != -1.0),
            None => None,
        };
        if center.is_some_and(|c| !(0.0..=1.0).contains(&c)) {
            return Err(format!("'{t}': the center must be from 0 to 1 (a share of the region)"));
        }
        Ok((val, center))
    };
    Ok(match kind {
        "random" => Distribution::Uniform,
        "zipf" => {
            let (theta, center) = skewed(1.1)?;
            // fio takes any theta but 1: 0 draws uniformly through the same
            // formula, and so does ours.
            if theta == 1.0 || !theta.is_finite() {
                return Err(format!("'{t}': zipf's theta must be a number other than 1 (fio's default is 1.1)"));
            }
            Distribution::Zipf { theta, center }
        }
        "pareto" => {
            let (h, center) = skewed(0.2)?;
            if !(h > 0.0 && h < 1.0) {
                return Err(format!("'{t}': pareto's h must be between 0 and 1, both excluded (fio's default is 0.2)"));
            }
            Distribution::Pareto { h, center }
        }
        "normal" => {
            let (dev, center) = skewed(0.0)?;
            if !(0.0..100.0).contains(&dev) {
                return Err(format!("'{t}': normal's deviation is a percent of the region, from 0 to under 100"));
            }
            Distribution::Normal { dev, center }
        }
        "zoned" | "zoned_abs" => {
            let absolute = kind == "zoned_abs";
            // fio 3.33 cuts the value at a ',' before reading it, so a
            // list per direction fails to parse there: refused here too.
            if rest.contains(',') {
                return Err(format!("'{t}': fio 3.33 cannot read zones per direction (it stops at the ','); give one list for reads and writes"));
            }
            let list = zone_list(t, rest, absolute)?;
            if list.is_empty() {
                return Err(format!("'{t}': give the zones as access%/size pairs, e.g. {kind}:60/10:30/20:10/70"));
            }
            Distribution::Zoned { zones: [list.clone(), list], absolute }
        }
        _ => return Err(format!("'{t}': use random, zipf[:theta], pareto[:h], normal[:dev], zoned:... or zoned_abs:...")),
    })
}

/// One direction's `access%/size` pairs of a zoned distribution, as fio's
/// `split_parse_ddir` and `zone_split_ddir` read them.
fn zone_list(whole: &str, s: &str, absolute: bool) -> Result<Vec<(u32, u64)>, String> {
    const MISSING: u64 = u64::MAX;
    let mut pairs = vec![];
    for pair in s.split(':') {
        if pair.trim().is_empty() {
            break;
        }
        let (access, size) = pair.split_once('/').unwrap_or((pair, ""));
        let access: u32 = access.trim().parse().map_err(|_| format!("'{whole}': '{access}' is not an access percent"))?;
        let size = match (size.trim(), absolute) {
            ("", true) => 0,
            ("", false) => MISSING,
            (x, true) => match fio_size(x).map_err(|e| format!("'{whole}': {e}"))? {
                // fio's str_to_decimal reads into a signed 64-bit number.
                b if b > i64::MAX as u64 => return Err(format!("'{whole}': '{x}' is too large a size")),
                b => b,
            },
            (x, false) => match x.parse::<u64>().map_err(|_| format!("'{whole}': '{x}' is not a size percent"))? {
                0 => MISSING,
                p => p.min(100),
            },
        };
        pairs.push((access, size));
    }
    if pairs.is_empty() {
        return Ok(pairs);
    }
    let access: u32 = pairs.iter().map(|p| p.0).sum();
    let sizes: u64 = if absolute { 0 } else { pairs.iter().filter(|p| p.1 != MISSING).map(|p| p.1).sum() };
    if access > 100 || sizes > 100 {
        return Err(format!("'{whole}': the percentages add up to more than 100"));
    }
    if access < 100 {
        return Err(format!("'{whole}': the access percentages add up to {access}, not 100"));
    }
    let missing = pairs.iter().filter(|p| p.1 == MISSING).count() as u64;
    for p in pairs.iter_mut().filter(|p| p.1 == MISSING) {
        p.1 = if missing == 1 && sizes == 0 { 100 } else { (100 - sizes) / missing };
    }
    Ok(pairs)
}

/// fio's `size=N%` and `offset=N%` (parse.c: the whole number before a
/// `%`, 0 to 100):
/// Some(N) for a percentage, None for a size in bytes. A fraction is
/// refused: fio reads `12.5%` as 12 bytes.
pub fn size_percent(s: &str) -> Result<Option<u64>, String> {
    let Some(num) = s.trim().strip_suffix('%') else { return Ok(None) };
    match num.trim().parse::<u64>() {
        Ok(p) if p <= 100 => Ok(Some(p)),
        Ok(_) => Err(format!("'{s}': more than 100% of the file is not one fio can use (fio 3.33 reads it as a size in bytes: a size= that large fails to be laid out, leaving the file empty); give at most 100%")),
        Err(_) => Err(format!("'{s}': fio reads a percentage as a whole number from 0 to 100 (it would read '{s}' as {} bytes); write e.g. 50%", num.trim().split('.').next().unwrap_or("0"))),
    }
}

/// fio's times, read as fio 3.33 reads a time option given in seconds
/// (parse.c: `str_to_decimal` with `is_seconds`, then `get_mult_time`):
/// the leading whole number (`strtoll`; base 16 when the text holds "0x"),
/// times the unit that follows the digits: `us`/`usec`, `ms`/`msec`, or
/// exactly `s`, `m`, `h` or `d` (any case); no unit is seconds, and any
/// other letters are microseconds. A fraction is not read: the number ends
/// at the '.', and what follows it is not a unit either, so `ramp_time=0.5`
/// is no ramp at all and `runtime=1.5` (or `1.5s`) is one second, as in
/// fio. fio's arithmetic form, `(...)`, is refused.
pub fn fio_time(s: &str) -> Result<Duration, String> {
    fio_time_unit(s, true)
}

/// [`fio_time`] for an option whose number without a unit is seconds
/// (`seconds`, fio's `is_seconds`: runtime, ramp_time, startdelay) or
/// microseconds (thinktime, thinktime_spin).
pub fn fio_time_unit(s: &str, seconds: bool) -> Result<Duration, String> {
    let t = s.trim();
    let err = || format!("'{s}' is not a time; write e.g. 10, 10s, 500ms, 2m");
    if t.starts_with('(') {
        return Err(format!("'{s}': fio's arithmetic expressions are not supported; write a whole number and a unit"));
    }
    // strtoll: an optional sign, then digits of the base.
    let hex = t.contains("0x") || t.contains("0X");
    let mut rest = t;
    let negative = rest.starts_with('-');
    rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if hex {
        rest = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")).filter(|r| r.starts_with(|c: char| c.is_ascii_hexdigit())).unwrap_or(rest);
    }
    let radix = if hex { 16 } else { 10 };
    let n = rest.find(|c: char| !c.is_digit(radix)).unwrap_or(rest.len());
    if n == 0 {
        return Err(err());
    }
    let val = u64::from_str_radix(&rest[..n], radix).map_err(|_| format!("'{s}' is too long a time"))?;
    if negative && val != 0 {
        return Err(format!("'{s}' is a negative time"));
    }
    // get_mult_time: the unit starts where the decimal digits and signs end.
    let unit = t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '+' || c == '-').to_ascii_lowercase();
    let us: u64 = if !unit.starts_with(|c: char| c.is_ascii_alphabetic()) {
        if seconds { 1_000_000 } else { 1 }
    } else if unit.starts_with("us") {
        1
    } else if unit.starts_with("ms") {
        1_000
    } else {
        match unit.as_str() {
            "s" => 1_000_000,
            "m" => 60_000_000,
            "h" => 3_600_000_000,
            "d" => 86_400_000_000,
            _ => 1,
        }
    };
    val.checked_mul(us).map(Duration::from_micros).ok_or_else(|| format!("'{s}' is too long a time"))
}

/// Where fio's reading of a time differs from what the text seems to say,
/// a sentence saying how fio reads it and what to write instead; None
/// when the two agree. fio 3.33 reads only the whole number before a '.',
/// and any unit other than us, ms, s, m, h or d as microseconds, without
/// a word: `runtime=0.5` is no runtime and `runtime=5min` is 5 us.
/// nvme-bypass reads times as fio does, so that a job runs as it did
/// under fio, and says so when it is probably not what was meant.
pub fn fio_time_note(s: &str) -> Option<String> {
    let t = s.trim();
    let read = fio_time(t).ok()?;
    let shown = if read.is_zero() {
        "0 (none)".to_string()
    } else if read.subsec_nanos() == 0 {
        format!("{} s", read.as_secs())
    } else {
        format!("{} us", read.as_micros())
    };
    let digits = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    if num.contains('.') {
        // What the text seems to mean, in a unit fio reads whole.
        let secs_per = match unit.to_ascii_lowercase().as_str() {
            "" | "s" => Some(1.0),
            "m" => Some(60.0),
            "h" => Some(3600.0),
            "d" => Some(86400.0),
            "ms" | "msec" => Some(0.001),
            _ => None,
        };
        let hint = match (num.parse::<f64>(), secs_per) {
            (Ok(x), Some(k)) => {
                let us = (x * k * 1e6).round() as u64;
                if us % 1000 == 0 { format!("write {}ms", us / 1000) } else { format!("write {us}us") }
            }
            _ => "write a whole number with a unit, e.g. 500ms".to_string(),
        };
        return Some(format!("fio reads only the whole number before the '.', so this is {shown}; {hint}"));
    }
    let u = unit.to_ascii_lowercase();
    let known = u.is_empty() || u.starts_with("us") || u.starts_with("ms") || ["s", "m", "h", "d"].contains(&u.as_str());
    if !known && !t.contains("0x") && !t.contains("0X") {
        return Some(format!(
            "'{unit}' is not one of fio's time units (us, ms, s, m, h, d), so fio reads it as microseconds: {shown}; write e.g. {num}s or {num}m"
        ));
    }
    None
}

/// fio's latency percentile options: which latencies get percentiles, at
/// which points, shown with how many decimals.
#[derive(Clone, Debug, PartialEq)]
pub struct Percentiles {
    /// `percentile_list` as given, in its order.
    pub list: Vec<f64>,
    /// Decimals shown: the most any value of the list was written with
    /// (fio's `percentile_precision`, set as parse.c reads the list).
    pub precision: usize,
    /// `slat_percentiles` (fio's default 0).
    pub slat: bool,
    /// `clat_percentiles` (fio's default 1).
    pub clat: bool,
    /// `lat_percentiles` (fio's default 0).
    pub lat: bool,
}

/// fio's `rate` or `rate_iops` as given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// `rate` (bytes per second) rather than `rate_iops`.
    pub bytes: bool,
    /// Per second, for reads and for writes (None: no limit).
    pub per_s: [Option<u64>; 2],
}

impl Rate {
    /// I/Os per second for a job of `bs` whose reads and writes are as
    /// given; Err when the job mixes reads and writes (fio rates each
    /// direction on its own, whatever rwmixread says).
    pub fn iops(&self, reads: bool, writes: bool, bs: u64) -> Result<Option<f64>, String> {
        let per_s = match (reads, writes, self.per_s) {
            (true, true, _) => return Err("with reads and writes mixed fio paces each direction to its own rate, whatever rwmixread says (rate_iops=500 gives 500 reads and 500 writes a second); that is not supported: rate a read or a write job".into()),
            (true, false, [r, _]) => r,
            (_, _, [_, w]) => w,
        };
        Ok(per_s.map(|n| if self.bytes { n as f64 / bs.max(1) as f64 } else { n as f64 }))
    }
}

/// fio's `FIO_IO_U_LIST_MAX_LEN`: the most percentiles a list may hold.
pub const MAX_PERCENTILES: usize = 20;

impl Default for Percentiles {
    fn default() -> Self {
        let (list, precision) = Percentiles::parse_list("1:5:10:20:30:40:50:60:70:80:90:95:99:99.5:99.9:99.95:99.99").expect("fio's default list");
        Percentiles { list, precision, slat: false, clat: true, lat: false }
    }
}

impl Percentiles {
    /// fio's reading of a `percentile_list` (parse.c, FIO_OPT_FLOAT_LIST):
    /// numbers separated by ':', each from 0 to 100, at most 20; the
    /// precision is the most digits after a '.' in any of them.
    pub fn parse_list(s: &str) -> Result<(Vec<f64>, usize), String> {
        let mut list = vec![];
        let mut precision = 0;
        for part in s.split(':') {
            if list.len() == MAX_PERCENTILES {
                return Err(format!("'{s}' holds more than {MAX_PERCENTILES} percentiles, fio's limit"));
            }
            let t = part.trim();
            let x: f64 = t.parse().ok().filter(|x: &f64| x.is_finite()).ok_or_else(|| format!("'{part}' is not a number; write the percentiles as e.g. 50:99:99.9"))?;
            if !(0.0..=100.0).contains(&x) {
                return Err(format!("{t} is out of fio's range for a percentile, 0 to 100"));
            }
            if let Some((_, frac)) = t.split_once('.') {
                precision = precision.max(frac.bytes().take_while(u8::is_ascii_digit).count());
            }
            list.push(x);
        }
        Ok((list, precision))
    }

    /// The percentiles reported, as fio's `calc_clat_percentiles` takes
    /// them: the list up to its first 0, in ascending order.
    pub fn reported(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.list.iter().copied().take_while(|&x| x != 0.0).collect();
        v.sort_by(f64::total_cmp);
        v
    }
}

fn boolean(key: &str, v: Option<&str>) -> Result<bool, Error> {
    match v.map(str::trim) {
        None | Some("1") | Some("true") | Some("on") | Some("yes") => Ok(true),
        Some("0") | Some("false") | Some("off") | Some("no") => Ok(false),
        Some(x) => Err(Error::usage(format!("{key}={x}: fio booleans are 0 or 1"))),
    }
}

/// A percentage, 0 to 100, refused outside that as fio refuses it.
fn percent(key: &str, v: &str) -> Result<u8, Error> {
    match num::<u8>(key, v) {
        Ok(p) if p <= 100 => Ok(p),
        _ => Err(Error::usage(format!("{key}={v}: a percentage from 0 to 100"))),
    }
}

fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, Error> {
    v.trim().parse().map_err(|_| Error::usage(format!("{key}={v}: expected a whole number")))
}

impl JobOpts {
    /// The job's `description=` (a comment fio prints under the job's
    /// line and in the JSON's `desc`).
    pub fn description(&self) -> Option<&str> {
        self.given.iter().find(|(k, _)| k == "description").map(|(_, d)| d.as_str())
    }

    /// Whether the job's writes are scrambled as fio 3.33 scrambles them
    /// (init.c `init_flags`, io_u.c `get_io_u`): `scramble_buffers`, on by
    /// default, unless `buffer_compress_percentage` is given (at any value,
    /// 0 included, its callback sets fio's `TD_F_COMPRESS`, which skips the
    /// scramble). fio's other exceptions are refused here (`zero_buffers=1`,
    /// `refill_buffers=1`, `buffer_pattern`, `dedupe_percentage`), and
    /// `verify` never scrambles (the engine: `JobSpec::scramble`).
    pub fn scrambles(&self) -> bool {
        self.scramble_buffers && !self.given.iter().any(|(k, _)| k == "buffer_compress_percentage")
    }

    /// Apply one option as fio would. `v` is None for a bare key.
    pub fn set(&mut self, key: &str, v: Option<&str>) -> Result<(), Error> {
        let (name, kind) = lookup(key)?;
        let need = || v.ok_or_else(|| Error::usage(format!("fio option '{name}' needs a value ({name}=...)")));
        let bad = |e: String| Error::usage(format!("{name}: {e}"));
        let at_default = || {
            let given = v.map(str::trim);
            AT_FIOS_DEFAULT.iter().any(|(n, vals)| *n == name && given.is_some_and(|g| vals.contains(&g)))
        };
        if matches!(kind, Kind::Refused(_) | Kind::RefusedNoEffect(_)) && at_default() {
            self.given.retain(|(k, _)| k != name);
            self.given.push((name.into(), v.unwrap_or("").into()));
            return Ok(());
        }
        match kind {
            Kind::Refused(why) => {
                return Err(Error::usage(format!(
                    "fio option '{name}' is not supported, and ignoring it would change the result ({why}); remove it to run without it"
                )))
            }
            Kind::RefusedNoEffect(why) => {
                return Err(Error::usage(format!(
                    "fio option '{name}' is not supported ({why}); ignoring it would not change the figures, but it would silently not happen: remove it"
                )))
            }
            Kind::Ignored(_) => {
                self.given.push((name.into(), v.unwrap_or("").into()));
                return Ok(());
            }
            _ => {}
        }
        // An empty value: fio refuses it ("option bs requires an argument")
        // rather than take the default.
        let named = matches!(name, "name" | "filename" | "directory" | "description" | "write_bw_log" | "write_iops_log" | "write_lat_log");
        if kind == Kind::Value && (!named || name == "name") && v.is_some_and(|x| x.trim().is_empty()) {
            return Err(Error::usage(format!("fio option '{name}' needs a value ({name}=...); fio refuses an empty one too")));
        }
        // fio's arithmetic in parentheses (`bs=(2*2048)`) exists only in a
        // fio built with it; the fio 3.33 beside these tests refuses it
        // ("failed parsing"), and so does this, saying what to write.
        if let Some(x) = v.map(str::trim).filter(|x| x.starts_with('(') && !named) {
            return Err(Error::usage(format!("{name}={x}: fio's arithmetic in parentheses is not supported (a fio built without it refuses it too); write the number it comes to")));
        }
        self.given.retain(|(k, _)| k != name);
        self.given.push((name.into(), v.unwrap_or("").into()));
        match name {
            "name" => self.name = need()?.to_string(),
            "filename" => self.filename = Some(need()?.to_string()),
            "directory" => self.directory = Some(need()?.to_string()),
            "ioengine" => self.ioengine = need()?.to_string(),
            "rw" => {
                let s = need()?;
                // fio's "randread:8" (every 8th offset) is not supported.
                self.rw = match s.trim() {
                    "read" => Rw::Read,
                    "write" => Rw::Write,
                    "randread" => Rw::Randread,
                    "randwrite" => Rw::Randwrite,
                    "randrw" => Rw::Randrw,
                    "rw" | "readwrite" => Rw::Rw,
                    other => {
                        return Err(Error::usage(format!(
                            "rw={other} is not supported (trim, randtrim, trimwrite and ':N' offsets change the workload); use read, write, randread, randwrite, rw or randrw"
                        )))
                    }
                }
            }
            "bsrange" => {
                // fio's bsrange=MIN-MAX[,MIN-MAX]: one size when each range
                // is a single size (bsrange=4k-4k, as fio's examples write).
                let s = need()?;
                let mut sizes = vec![];
                for r in s.split(',') {
                    let (lo, hi) = r.split_once('-').ok_or_else(|| bad(format!("'{r}' is not MIN-MAX")))?;
                    sizes.push((fio_size(lo).map_err(bad)?, fio_size(hi).map_err(bad)?));
                }
                match sizes.as_slice() {
                    [(lo, hi), rest @ ..] if lo == hi && rest.iter().all(|x| x == &(*lo, *lo)) => self.bs = *lo,
                    _ => {
                        return Err(Error::usage(format!(
                            "bsrange={s}: block sizes drawn from a range are not supported, and ignoring it would change the result (one bs per job); give bs= (a range of one size, such as 4k-4k, is that bs)"
                        )))
                    }
                }
            }
            "bs" => {
                // fio's bs=READ,WRITE[,TRIM]: an empty field is the default
                // (4k); without a comma one value is every direction's.
                let s = need()?;
                let parts: Vec<u64> = s.split(',').map(|p| if p.trim().is_empty() { Ok(4096) } else { fio_size(p) }).collect::<Result<_, _>>().map_err(bad)?;
                match parts.as_slice() {
                    [b] => self.bs = *b,
                    [r, w, ..] if r == w => self.bs = *r,
                    [r, w, ..] => {
                        return Err(Error::usage(format!(
                            "bs={s}: reads of {r} bytes and writes of {w}{}: different read and write block sizes are not supported; give one bs",
                            if s.split(',').any(|p| p.trim().is_empty()) { " (fio reads an empty field as its default, 4k)" } else { "" }
                        )))
                    }
                    [] => unreachable!("split gives at least one field"),
                }
            }
            "iodepth" => self.iodepth = num(name, need()?)?,
            "rwmixread" => self.rwmixread = percent(name, need()?)?,
            "rwmixwrite" => self.rwmixread = 100 - percent(name, need()?)?,
            // 0 is fio's default: the file's or the device's size.
            "size" => {
                let s = need()?;
                (self.size, self.size_percent) = match size_percent(s).map_err(bad)? {
                    Some(p) => (None, Some(p).filter(|p| (1..100).contains(p))),
                    None => (Some(fio_size(s).map_err(bad)?).filter(|&b| b > 0), None),
                };
            }
            "io_size" => self.io_size = Some(fio_size(need()?).map_err(bad)?).filter(|&b| b > 0),
            "offset" => {
                let s = need()?;
                (self.offset, self.offset_percent) = match size_percent(s).map_err(bad)? {
                    Some(p) => (0, Some(p).filter(|&p| p > 0)),
                    None => (fio_size(s).map_err(bad)?, None),
                };
            }
            "runtime" => self.runtime = Some(fio_time(need()?).map_err(bad)?).filter(|d| !d.is_zero()),
            "time_based" => self.time_based = boolean(name, v)?,
            "ioscheduler" => self.ioscheduler = Some(need()?.trim().to_string()),
            "slat_percentiles" => self.percentiles.slat = boolean(name, v)?,
            "clat_percentiles" => self.percentiles.clat = boolean(name, v)?,
            "lat_percentiles" => self.percentiles.lat = boolean(name, v)?,
            "percentile_list" => (self.percentiles.list, self.percentiles.precision) = Percentiles::parse_list(need()?).map_err(bad)?,
            "ramp_time" => self.ramp = fio_time(need()?).map_err(bad)?,
            "rate_iops" | "rate" => {
                let v = need()?;
                let mut parts = v.split(',').map(|x| {
                    let x = x.trim();
                    if x.is_empty() {
                        Ok(None)
                    } else {
                        fio_size(x).map(|n| Some(n).filter(|&n| n > 0)).map_err(&bad)
                    }
                });
                let read = parts.next().transpose()?.flatten();
                let write = match parts.next() {
                    Some(w) => w?,
                    None => read,
                };
                if parts.next().transpose()?.flatten().is_some() {
                    return Err(Error::usage(format!("{name}={v}: a trim rate is not supported (no trims); give reads and writes only")));
                }
                self.rate = Some(Rate { bytes: name == "rate", per_s: [read, write] }).filter(|r| r.per_s != [None, None]);
            }
            "rate_process" => {
                let v = need()?;
                if v != "linear" {
                    return Err(Error::usage(format!(
                        "rate_process={v} is not supported: I/Os are issued at even intervals (fio's default, rate_process=linear); a {v} process would space them otherwise and change the latencies"
                    )));
                }
            }
            "startdelay" => {
                let v = need()?;
                // fio's startdelay=a-b: a random delay in that range.
                if v.trim_start_matches('-').contains('-') {
                    return Err(Error::usage(format!(
                        "startdelay={v}: a random delay within a range is not supported (the job would start at a time drawn at random); give one time, such as startdelay={}",
                        v.split('-').next().unwrap_or("1")
                    )));
                }
                self.startdelay = fio_time(v).map_err(bad)?
            }
            "numjobs" => self.numjobs = num(name, need()?)?,
            "loops" => self.loops = num(name, need()?)?,
            "number_ios" => self.number_ios = fio_size(need()?).map_err(bad)?,
            "direct" => self.direct = boolean(name, v)?,
            "invalidate" => self.invalidate = boolean(name, v)?,
            // fio's default: a write job's file allocated, a read job's
            // written (lay_out). The other modes are refused.
            "fallocate" => match need()?.trim() {
                "native" => {}
                x => return Err(Error::usage(format!("fallocate={x} is not supported: files are laid out as fio's default fallocate=native lays them out (a job that only writes gets its blocks allocated, any other its file written); drop fallocate= or give native"))),
            },
            "fadvise_hint" => {
                self.fadvise_hint = match need()?.trim() {
                    "0" => None,
                    "1" => Some(None),
                    "random" => Some(Some(libc::POSIX_FADV_RANDOM)),
                    "sequential" => Some(Some(libc::POSIX_FADV_SEQUENTIAL)),
                    x => return Err(Error::usage(format!("fadvise_hint={x}: use 0 (no hint), 1 (fio's default: random or sequential as the job is), random or sequential"))),
                }
            }
            // fio's values, matched as fio matches them (whole, case kept).
            "sync" => {
                self.sync_open = match need()?.trim() {
                    "none" | "0" => 0,
                    "sync" | "1" => libc::O_SYNC,
                    "dsync" => libc::O_DSYNC,
                    x => return Err(Error::usage(format!("sync={x}: use none or 0 (fio's default), sync or 1 (O_SYNC opens) or dsync (O_DSYNC opens)"))),
                }
            }
            "buffered" => self.direct = !boolean(name, v)?,
            "group_reporting" => self.group_reporting = boolean(name, v)?,
            "gtod_reduce" => self.gtod_reduce = boolean(name, v)?,
            "iodepth_batch_submit" => self.batch = num(name, need()?)?,
            "iodepth_low" => self.iodepth_low = num(name, need()?)?,
            "per_job_logs" => self.per_job_logs = boolean(name, v)?,
            // fio's bandwidth and IOPS samples (bw_min ... iops_samples)
            // are taken every 500 ms, its default; so are ours.
            "bwavgtime" | "iopsavgtime" => {
                let ms: u64 = num(name, need()?)?;
                if ms != 500 {
                    return Err(Error::usage(format!(
                        "{name}={ms} is not supported: the bandwidth and IOPS samples (their min, max, mean, deviation and count) are taken every 500 ms, fio's default; another interval would change them: remove it, or give 500"
                    )));
                }
            }
            "stats" => {
                if !boolean(name, v)? {
                    return Err(Error::usage("stats=0 is not supported: fio would then report no latency, bandwidth or IOPS figures for the job, and nvme-bypass always takes them: remove it"));
                }
            }
            "iodepth_batch_complete_min" => self.batch_complete_min = Some(num(name, need()?)?),
            "iodepth_batch_complete_max" => self.batch_complete_max = Some(num(name, need()?)?),
            "hipri" => self.hipri = boolean(name, v)?,
            "fixedbufs" => self.fixedbufs = boolean(name, v)?,
            "userspace_reap" => self.userspace_reap = boolean(name, v)?,
            "write_bw_log" => self.bw_log = Some(v.unwrap_or("").trim().to_string()),
            "write_iops_log" => self.iops_log = Some(v.unwrap_or("").trim().to_string()),
            "write_lat_log" => self.lat_log = Some(v.unwrap_or("").trim().to_string()),
            "log_avg_msec" => self.log_avg_msec = num::<u32>(name, need()?)?.into(),
            "registerfiles" => self.registerfiles = boolean(name, v)?,
            "sqthread_poll" => self.sqthread_poll = boolean(name, v)?,
            "sqthread_poll_cpu" => self.sqthread_poll_cpu = Some(num(name, need()?)?),
            "cmd_type" => self.cmd_type = need()?.to_string(),
            "cpus_allowed" => self.cpus = parse_cpu_list(need()?).map_err(bad)?,
            "cpus_allowed_policy" => match need()?.trim() {
                "split" | "shared" => {}
                x => return Err(Error::usage(format!("cpus_allowed_policy={x}: use split or shared"))),
            },
            "verify" => {
                self.verify = match need()?.trim() {
                    "0" | "none" => false,
                    "crc32c" | "crc32c-intel" | "crc32" | "crc16" | "crc7" | "crc64" | "md5" | "sha1" | "sha256" | "sha512" | "sha3-224" | "sha3-256"
                    | "sha3-384" | "sha3-512" | "xxhash" | "meta" | "1" => true,
                    x => return Err(Error::usage(format!("verify={x} is not supported; use a checksum such as crc32c (nvme-bypass stamps every block with LBA, seed and CRC-32C)"))),
                }
            }
            "scramble_buffers" => self.scramble_buffers = boolean(name, v)?,
            "thread" => self.thread = boolean(name, v)?,
            "randseed" => self.seed = num(name, need()?)?,
            "norandommap" => self.norandommap = boolean(name, v)?,
            // fio's fsync and fdatasync are counted apart; both flush here.
            "fsync" | "fdatasync" => {
                let n: u64 = num(name, need()?)?;
                if n > 0 && self.fsync > 0 && n != self.fsync {
                    return Err(Error::usage(format!(
                        "{name}={n} with a different fsync or fdatasync ({}): fio would sync on both counts; both are the path's flush here, so give one",
                        self.fsync
                    )));
                }
                if n > 0 {
                    self.fsync = n;
                }
            }
            "end_fsync" => self.end_fsync = boolean(name, v)?,
            // fio's thinktime options are in microseconds without a unit.
            "thinktime" => self.thinktime = fio_time_unit(need()?, false).map_err(bad)?,
            "thinktime_spin" => self.thinktime_spin = fio_time_unit(need()?, false).map_err(bad)?,
            "thinktime_blocks" => {
                // 0 runs in fio: its check (count >= last + 0) then holds
                // after every I/O it queues, issued or completed.
                self.thinktime_blocks = num(name, need()?)?;
            }
            "thinktime_blocks_type" => {
                self.thinktime_on_complete = match need()?.trim() {
                    "complete" => true,
                    "issue" => false,
                    x => return Err(Error::usage(format!("thinktime_blocks_type={x}: use complete (fio's default: count completed I/Os) or issue (count issued ones)"))),
                }
            }
            "thinktime_iotime" => {
                if !fio_time(need()?).map_err(bad)?.is_zero() {
                    return Err(Error::usage(
                        "thinktime_iotime is not supported: the job would stall every so many seconds of I/O, not every thinktime_blocks I/Os; remove it (and stall by I/O count with thinktime_blocks)",
                    ));
                }
            }
            "rate_ignore_thinktime" => {
                if boolean(name, v)? {
                    return Err(Error::usage("rate_ignore_thinktime=1 is not supported: the rate would leave out the time spent thinking; remove it (the rate then counts the think time, fio's default)"));
                }
            }
            "random_distribution" => self.distribution = random_distribution(need()?).map_err(bad)?,
            "disable_slat" => self.disable_slat = boolean(name, v)?,
            "disable_clat" => self.disable_clat = boolean(name, v)?,
            "disable_lat" => self.disable_lat = boolean(name, v)?,
            "stonewall" => self.stonewall = boolean(name, v)?,
            "exitall" => self.exitall = boolean(name, v)?,
            "exit_what" => {
                self.exit_stonewall = match need()?.trim() {
                    "group" => false,
                    "stonewall" => true,
                    other => {
                        return Err(Error::usage(format!(
                            "exit_what={other} is not supported: give group (the jobs of the reporting group end with the first that does) or stonewall (those running beside it up to the next stonewall)"
                        )))
                    }
                }
            }
            "new_group" => self.new_group = boolean(name, v)?,
            "continue_on_error" => {
                self.continue_on_error = match need()?.trim() {
                    "none" | "0" => false,
                    "all" | "1" | "io" | "read" | "write" => true,
                    x => return Err(Error::usage(format!("continue_on_error={x}: use none, io or all"))),
                }
            }
            "allow_mounted_write" => self.allow_mounted_write = boolean(name, v)?,
            "kb_base" => {
                if need()?.trim() != "1024" {
                    return Err(Error::usage("kb_base=1000 is not supported (it would change what k, m and g mean); sizes here use fio's default 1024"));
                }
            }
            "nsid" => {
                let v = need()?;
                self.nsid = crate::commands::args::parse_nsid(v).map_err(|e| Error::usage(format!("nsid={v}: {e}")))?;
            }
            _ => unreachable!("{name} is in the table"),
        }
        Ok(())
    }

    /// The reap batch: fio's iodepth_batch_complete_min/_max. Equal (N):
    /// reap exactly N at a time. Unset, or min 0 or 1: reap between one and
    /// [`Self::reap_max`] ([`crate::engine::JobSpec::reap_max`]). min > 1
    /// with a different max is refused (the engine reaps a fixed count).
    pub fn batch_complete(&self) -> Result<usize, Error> {
        match (self.batch_complete_min.unwrap_or(1), self.batch_complete_max) {
            (min, _) if min <= 1 => Ok(0),
            (min, Some(max)) if max > min => Err(Error::usage(format!(
                "iodepth_batch_complete_min={min} with _max={max}: nvme-bypass reaps either 1 to _max at a time (min 0 or 1; fio's default _max is 1) or exactly N at a time (min = max = N); set min to 1, or set both to the same N"
            ))),
            // A _max under _min (fio's default 1 included) is raised to it,
            // as fio's fixup_options raises it: exactly min at a time.
            (min, _) => Ok(min),
        }
    }
}

impl JobOpts {
    /// The iodepth fio's report shows: the job's, even where psync runs
    /// at depth 1.
    pub fn iodepth_reported(&self) -> usize {
        self.iodepth_shown.max(self.iodepth)
    }

    /// Does the job ask for any log (bandwidth, IOPS, latency)?
    pub fn logs(&self) -> bool {
        self.bw_log.is_some() || self.iops_log.is_some() || self.lat_log.is_some()
    }

    /// At most this many completions per reap: fio's
    /// `iodepth_batch_complete_max`, raised to `_min` and to 1 as fio's
    /// `fixup_options` and `td_io_getevents` raise it (so fio's default
    /// reaps one at a time, and its queue stays full).
    pub fn reap_max(&self) -> usize {
        self.batch_complete_max.unwrap_or(0).max(self.batch_complete_min.unwrap_or(1)).max(1)
    }
}

/// Is `key` a boolean (so a bare `--key` does not take the next argument)?
pub fn is_bool(key: &str) -> bool {
    matches!(lookup(key), Ok((_, Kind::Bool | Kind::Ignored(_))))
}

/// Split fio's filename at unescaped ':' (`0000\:01\:00.0` keeps its colons).
pub fn split_filenames(s: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                out.last_mut().unwrap().push(':');
                chars.next();
            }
            ':' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out.retain(|f| !f.is_empty());
    out
}

/// A filename in the form SPDK's fio plugin takes (`trtype=PCIe
/// traddr=0000.01.00.0 ns=1`: a transport ID, the PCI address written with
/// dots because fio splits file names at `:`): the PCI address with its
/// colons, and the namespace when `ns=` is given. None for any other name.
pub fn spdk_trid(s: &str) -> Result<Option<(String, Option<u32>)>, String> {
    if !s.split_whitespace().any(|kv| kv.to_ascii_lowercase().starts_with("traddr=")) {
        return Ok(None);
    }
    let (mut addr, mut ns) = (None, None);
    for kv in s.split_whitespace() {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("'{kv}' in '{s}' is not key=value, as SPDK's transport IDs are written"))?;
        match k.to_ascii_lowercase().as_str() {
            "trtype" if v.eq_ignore_ascii_case("pcie") => {}
            "trtype" => return Err(format!("trtype={v}: nvme-bypass drives PCIe controllers only (NVMe over fabrics is not one of its paths); give trtype=PCIe")),
            "traddr" => {
                // 0000.01.00.0 or 01.00.0 (no domain), or with colons.
                let parts: Vec<&str> = v.split(['.', ':']).collect();
                let hex = |p: &str, n: usize| p.len() <= n && !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit());
                addr = Some(match parts[..] {
                    [d, b, dev, f] if hex(d, 4) && hex(b, 2) && hex(dev, 2) && hex(f, 1) => format!("{d:0>4}:{b:0>2}:{dev:0>2}.{f}"),
                    [b, dev, f] if hex(b, 2) && hex(dev, 2) && hex(f, 1) => format!("0000:{b:0>2}:{dev:0>2}.{f}"),
                    _ => return Err(format!("traddr={v} is not a PCI address; write it as SPDK does, e.g. traddr=0000.01.00.0")),
                }.to_ascii_lowercase());
            }
            "ns" => ns = Some(v.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| format!("ns={v} is not a namespace ID (1 or more)"))?),
            _ => return Err(format!("'{k}' in '{s}' is not a key nvme-bypass knows in a PCIe transport ID (trtype, traddr, ns); remove it")),
        }
    }
    Ok(Some((addr.expect("traddr= found above"), ns)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spdks_transport_ids_name_a_pci_address() {
        assert_eq!(spdk_trid("trtype=PCIe traddr=0000.01.00.0 ns=2"), Ok(Some(("0000:01:00.0".into(), Some(2)))));
        assert_eq!(spdk_trid("traddr=04.00.0"), Ok(Some(("0000:04:00.0".into(), None))));
        assert_eq!(spdk_trid("trtype=pcie traddr=0000.AF.00.1"), Ok(Some(("0000:af:00.1".into(), None))));
        assert_eq!(spdk_trid("0000:01:00.0"), Ok(None), "a plain address is not a transport ID");
        assert!(spdk_trid("trtype=TCP traddr=10.0.0.1").unwrap_err().contains("PCIe controllers only"));
        assert!(spdk_trid("traddr=0000.01.00").unwrap_err().contains("not a PCI address"));
        assert!(spdk_trid("traddr=0000.01.00.0 ns=0").unwrap_err().contains("ns=0"));
        assert!(spdk_trid("traddr=0000.01.00.0 subnqn=x").unwrap_err().contains("'subnqn'"));
    }

    #[test]
    fn sync_and_fadvise_hint_as_fio_reads_them() {
        let with = |k: &str, v: &str| {
            let mut o = JobOpts::default();
            o.set(k, Some(v)).map(|_| o)
        };
        assert_eq!(JobOpts::default().sync_open, 0);
        assert_eq!(JobOpts::default().fadvise_hint, Some(None), "fio's default 1: by the pattern");
        for (v, flag) in [("0", 0), ("none", 0), ("1", libc::O_SYNC), ("sync", libc::O_SYNC), ("dsync", libc::O_DSYNC)] {
            assert_eq!(with("sync", v).unwrap().sync_open, flag, "sync={v}");
        }
        for (v, hint) in [("0", None), ("1", Some(None)), ("random", Some(Some(libc::POSIX_FADV_RANDOM))), ("sequential", Some(Some(libc::POSIX_FADV_SEQUENTIAL)))] {
            assert_eq!(with("fadvise_hint", v).unwrap().fadvise_hint, hint, "fadvise_hint={v}");
        }
        assert!(with("sync", "Sync").is_err(), "matched whole, case kept, as fio matches it");
        assert!(with("fadvise_hint", "2").is_err());
        assert!(with("fallocate", "native").is_ok());
        assert!(with("fallocate", "posix").is_err());
    }

    #[test]
    fn refused_options_at_fios_own_default_are_taken() {
        let with = |k: &str, v: Option<&str>| {
            let mut o = JobOpts::default();
            o.set(k, v).map(|_| o)
        };
        for (k, v) in AT_FIOS_DEFAULT.iter().flat_map(|(k, vs)| vs.iter().map(move |v| (*k, *v))) {
            assert!(matches!(lookup(k), Ok((_, Kind::Refused(_) | Kind::RefusedNoEffect(_)))), "{k} is refused at other values");
            let o = with(k, Some(v)).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
            assert!(o.given.contains(&(k.to_string(), v.to_string())), "{k}={v} listed as given");
        }
        for (k, v) in [("unlink", Some("1")), ("nrfiles", Some("2")), ("do_verify", Some("0")), ("unified_rw_reporting", Some("mixed")), ("unlink", None)] {
            assert!(with(k, v).is_err(), "{k}={v:?} still refused");
        }
    }

    #[test]
    fn write_buffers_are_scrambled_as_fios_by_default() {
        let with = |kv: &[(&str, Option<&str>)]| {
            let mut o = JobOpts::default();
            for (k, v) in kv {
                o.set(k, *v).unwrap_or_else(|e| panic!("{k}={v:?}: {e}"));
            }
            o.scrambles()
        };
        assert!(with(&[]), "fio's default scramble_buffers=1");
        assert!(with(&[("scramble_buffers", Some("1"))]) && with(&[("scramble_buffers", None)]));
        assert!(!with(&[("scramble_buffers", Some("0"))]));
        // fio's default values of the other buffer options leave it on...
        assert!(with(&[("zero_buffers", Some("0")), ("refill_buffers", Some("0"))]));
        // ...but buffer_compress_percentage, given at all, sets fio's
        // TD_F_COMPRESS, which skips the scramble.
        assert!(!with(&[("buffer_compress_percentage", Some("0"))]));
        // dedupe_percentage, even 0, turns fio's refill_buffers on.
        let mut o = JobOpts::default();
        let e = o.set("dedupe_percentage", Some("0")).unwrap_err().to_string();
        assert!(e.contains("refill_buffers=1"), "{e}");
        assert!(JobOpts::default().set("scramble_buffers", Some("2")).is_err());
    }

    #[test]
    fn random_distributions_as_fio_reads_them() {
        use Distribution::*;
        assert_eq!(random_distribution("random"), Ok(Uniform));
        assert_eq!(random_distribution("zipf"), Ok(Zipf { theta: 1.1, center: None }));
        assert_eq!(random_distribution("zipf:0"), Ok(Zipf { theta: 0.0, center: None }));
        assert_eq!(random_distribution("zipf:1.2:0.5"), Ok(Zipf { theta: 1.2, center: Some(0.5) }));
        assert_eq!(random_distribution("pareto"), Ok(Pareto { h: 0.2, center: None }));
        assert_eq!(random_distribution("normal:10"), Ok(Normal { dev: 10.0, center: None }));
        // One list for every direction; a pair without a size shares what
        // the others leave (zone_split_ddir).
        let z = random_distribution("zoned:60/10:30/20:10").unwrap();
        assert_eq!(z, Zoned { zones: [vec![(60, 10), (30, 20), (10, 70)], vec![(60, 10), (30, 20), (10, 70)]], absolute: false });
        let z = random_distribution("zoned_abs:50/1g:50/2g").unwrap();
        assert_eq!(z, Zoned { zones: [vec![(50, 1 << 30), (50, 2 << 30)], vec![(50, 1 << 30), (50, 2 << 30)]], absolute: true });
        assert!(random_distribution("zoned:90/10:10/90,100/20").unwrap_err().contains("per direction"));
        assert!(random_distribution("zoned_abs:50/4096:50/18446744073709547520").unwrap_err().contains("too large"));
        for (bad, why) in [
            ("zipf:1", "other than 1"),
            ("zipf:", "give a number after 'zipf:'"),
            ("pareto:", "give a number after 'pareto:'"),
            ("pareto:1.5", "between 0 and 1"),
            ("normal:100", "under 100"),
            ("zipf:1.2:2", "center must be from 0 to 1"),
            ("zoned:50/10:40/20", "add up to 90, not 100"),
            ("zoned:60/70:40/40", "more than 100"),
            ("zoned:", "access%/size pairs"),
            ("zoned:x/10", "not an access percent"),
            ("gauss", "use random, zipf"),
        ] {
            let e = random_distribution(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn sizes_and_times_as_fio_reads_them() {
        assert_eq!(fio_size("4k"), Ok(4096));
        assert_eq!(fio_size("0x1000"), Ok(4096), "hexadecimal, as fio's str_to_decimal");
        assert_eq!(fio_size("0x10k"), Ok(16 << 10));
        assert!(fio_size("0x").is_err() && fio_size("0xg").is_err());
        assert_eq!(fio_size("4K"), Ok(4096));
        assert_eq!(fio_size("4KB"), Ok(4096));
        // fio's default kb_base=1024 reads the IEC units as powers of 1000.
        assert_eq!(fio_size("4KiB"), Ok(4000));
        assert_eq!(fio_size("1MiB"), Ok(1_000_000));
        assert_eq!(fio_size("4G"), Ok(4 << 30));
        assert_eq!(fio_size("8M"), Ok(8 << 20));
        assert_eq!(fio_size("512"), Ok(512));
        assert!(fio_size("50%").unwrap_err().contains("percentage"));
        // size= takes a percentage of the file (whole numbers, 0 to 100).
        assert_eq!(size_percent("50%"), Ok(Some(50)));
        assert_eq!(size_percent("4k"), Ok(None));
        assert!(size_percent("150%").unwrap_err().contains("at most 100%"));
        assert!(size_percent("12.5%").unwrap_err().contains("as 12 bytes"), "{:?}", size_percent("12.5%"));
        let mut j = JobOpts::default();
        j.set("size", Some("25%")).unwrap();
        assert_eq!((j.size, j.size_percent), (None, Some(25)));
        j.set("size", Some("100%")).unwrap();
        assert_eq!((j.size, j.size_percent), (None, None), "100% is the whole file, as no size");
        j.set("size", Some("25%")).unwrap();
        j.set("size", Some("8M")).unwrap();
        assert_eq!((j.size, j.size_percent), (Some(8 << 20), None), "the last one given wins");
        j.set("offset", Some("50%")).unwrap();
        assert_eq!((j.offset, j.offset_percent), (0, Some(50)));
        j.set("offset", Some("1M")).unwrap();
        assert_eq!((j.offset, j.offset_percent), (1 << 20, None));
        assert!(fio_size("4x").is_err());
        assert_eq!(fio_time("10"), Ok(Duration::from_secs(10)));
        assert_eq!(fio_time("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(fio_time("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(fio_time("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(fio_time("1d"), Ok(Duration::from_secs(86400)));
        assert_eq!(fio_time("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(fio_time("3MSEC"), Ok(Duration::from_millis(3)));
        assert_eq!(fio_time("1h"), Ok(Duration::from_secs(3600)));
        // fio reads no fraction: the number ends at the '.', and the unit
        // is looked for there too. The test bed's seed jobs say
        // ramp_time=0.5, which fio 3.33 runs as no ramp at all.
        assert_eq!(fio_time("0.5"), Ok(Duration::ZERO));
        assert_eq!(fio_time("1.5"), Ok(Duration::from_secs(1)));
        assert_eq!(fio_time("1.5s"), Ok(Duration::from_secs(1)));
        assert_eq!(fio_time("0.5ms"), Ok(Duration::ZERO));
        // Only the exact one-letter units are s, m, h and d: other letters
        // leave fio's multiplier at one microsecond.
        assert_eq!(fio_time("10sec"), Ok(Duration::from_micros(10)));
        assert_eq!(fio_time("2min"), Ok(Duration::from_micros(2)));
        assert_eq!(fio_time("0x10"), Ok(Duration::from_micros(16)));
        assert!(fio_time("").is_err());
        assert!(fio_time("s").is_err());
        assert!(fio_time("-1").is_err());
        assert!(fio_time("(1+1)").is_err());
        assert!(fio_time("99999999999999999999").is_err());
        // Said aloud where fio's reading is probably not what was meant.
        assert_eq!(fio_time_note("10"), None);
        assert_eq!(fio_time_note("500ms"), None);
        assert_eq!(fio_time_note("2m"), None);
        assert_eq!(fio_time_note("0.5").unwrap(), "fio reads only the whole number before the '.', so this is 0 (none); write 500ms");
        assert!(fio_time_note("1.5s").unwrap().contains("this is 1 s; write 1500ms"));
        assert!(fio_time_note("0.25m").unwrap().ends_with("write 15000ms"));
        assert_eq!(
            fio_time_note("5min").unwrap(),
            "'min' is not one of fio's time units (us, ms, s, m, h, d), so fio reads it as microseconds: 5 us; write e.g. 5s or 5m"
        );
        assert!(fio_time_note("10sec").unwrap().contains("10 us"));
    }

    #[test]
    fn options_apply_as_fio_defines_them() {
        let mut j = JobOpts::default();
        for (k, v) in [("readwrite", Some("randrw")), ("rwmixread", Some("75")), ("bs", Some("4k")), ("iodepth", Some("64")), ("size", Some("4G")), ("direct", Some("1")), ("gtod_reduce", Some("1")), ("randrepeat", Some("1")), ("thread", None), ("iodepth_batch_submit", Some("8")), ("iodepth_batch_complete_min", Some("8")), ("iodepth_batch_complete_max", Some("8")), ("cpus_allowed", Some("0-1")), ("verify", Some("crc32c")), ("runtime", Some("2m"))] {
            j.set(k, v).unwrap();
        }
        assert_eq!((j.rw, j.rwmixread, j.bs, j.iodepth, j.size, j.direct, j.gtod_reduce, j.thread), (Rw::Randrw, 75, 4096, 64, Some(4 << 30), true, true, true));
        assert_eq!((j.batch, j.batch_complete().unwrap(), j.cpus.clone(), j.verify, j.runtime), (8, 8, vec![0, 1], true, Some(Duration::from_secs(120))));
        j.set("iodepth_batch_complete_max", Some("16")).unwrap();
        assert!(j.batch_complete().unwrap_err().to_string().contains("set both to the same N"));
        // A _max under _min, or none (fio's default 1), is raised to it, as
        // fio's fixup_options raises it: exactly _min at a time.
        j.set("iodepth_batch_complete_max", Some("4")).unwrap();
        assert_eq!((j.batch_complete().unwrap(), j.reap_max()), (8, 8));
        let mut k = JobOpts::default();
        k.set("iodepth_batch_complete", Some("4")).unwrap();
        assert_eq!((k.batch_complete().unwrap(), k.reap_max()), (4, 4));
        j.set("iodepth_batch_complete_min", Some("1")).unwrap();
        assert_eq!(j.batch_complete().unwrap(), 0);
    }

    #[test]
    fn unsupported_options_are_refused_by_name_saying_what_ignoring_would_do() {
        let mut j = JobOpts::default();
        let e = j.set("rate_min", Some("1000")).unwrap_err().to_string();
        assert!(e.contains("'rate_min'") && e.contains("would change the result"), "{e}");
        // At fio's defaults, which are what nvme-bypass does: accepted.
        for (k, v) in [("bwavgtime", "500"), ("iopsavgtime", "500"), ("stats", "1"), ("clocksource", "cpu"), ("iodepth_low", "8")] {
            j.set(k, Some(v)).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        for (k, v, says) in [("bwavgtime", "1000", "taken every 500 ms"), ("iopsavgtime", "250", "taken every 500 ms"), ("stats", "0", "stats=0 is not supported")] {
            let e = j.set(k, Some(v)).unwrap_err().to_string();
            assert!(e.contains(says), "{k}={v}: {e}");
        }
        let e = j.set("write_hist_log", Some("x")).unwrap_err().to_string();
        assert!(e.contains("'write_hist_log'") && e.contains("would not change the figures"), "{e}");
        let e = j.set("no_such_option", Some("1")).unwrap_err().to_string();
        assert!(e.contains("'no_such_option'") && e.contains("refused"), "{e}");
        let typo = |k: &str| lookup(k).err().unwrap().to_string();
        assert!(typo("iodepht").contains("did you mean iodepth?"), "{}", typo("iodepht"));
        assert!(typo("runtim").contains("did you mean runtime?"));
        // A near option that is refused as well is named as refused.
        assert!(typo("flwo").contains("did you mean flow, which nvme-bypass refuses too (no flow control between jobs)?"), "{}", typo("flwo"));
        assert!(typo("bogus").contains("is not one nvme-bypass knows"), "{}", typo("bogus"));
        assert!(j.set("bs", Some("4k,8k")).is_err());
        assert!(j.set("bs", Some(",8k")).is_err(), "reads 4k, writes 8k");
        assert!(j.set("bs", Some("8k,")).is_err(), "reads 8k, writes 4k");
        j.set("bs", Some("8k,8k")).unwrap();
        assert_eq!(j.bs, 8192);
        // An empty value is refused, as fio refuses it (not the default).
        assert!(j.set("bs", Some("")).unwrap_err().to_string().contains("needs a value"));
        assert_eq!(j.bs, 8192);
        // A range of one size is that size; a real range is refused.
        j.set("bsrange", Some("4k-4k")).unwrap();
        assert_eq!(j.bs, 4096);
        assert!(j.set("bsrange", Some("4k-8k")).unwrap_err().to_string().contains("would change the result"));
        // Report options, as fio's.
        j.set("disable_lat", Some("1")).unwrap();
        j.set("disable_clat", None).unwrap();
        assert!(j.disable_lat && j.disable_clat);
        assert!(j.set("rw", Some("randtrim")).is_err());
        assert!(j.set("kb_base", Some("1000")).is_err());
        let e = j.set("bs", Some("(2*2048)")).unwrap_err().to_string();
        assert!(e.contains("bs=(2*2048): fio's arithmetic in parentheses is not supported") && e.contains("write the number"), "{e}");
    }

    #[test]
    fn percentile_lists_as_fio_reads_them() {
        let d = Percentiles::default();
        assert_eq!((d.list.len(), d.precision, d.slat, d.clat, d.lat), (17, 2, false, true, false), "fio's defaults");
        // The precision is the most decimals any value was written with.
        assert_eq!(Percentiles::parse_list("99.9:50:99.999").unwrap(), (vec![99.9, 50.0, 99.999], 3));
        assert_eq!(Percentiles::parse_list("50:99").unwrap(), (vec![50.0, 99.0], 0));
        // Reported in ascending order, up to the first 0 (fio's list ends there).
        let p = Percentiles { list: vec![99.9, 50.0, 0.0, 10.0], ..d.clone() };
        assert_eq!(p.reported(), vec![50.0, 99.9]);
        for (bad, says) in [("101", "out of fio's range"), ("-1", "out of fio's range"), ("50:x", "'x' is not a number"), ("", "is not a number"), ("nan", "is not a number")] {
            let e = Percentiles::parse_list(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = vec!["1"; MAX_PERCENTILES + 1].join(":");
        assert!(Percentiles::parse_list(&long).unwrap_err().contains("more than 20"));
        assert_eq!(Percentiles::parse_list(&vec!["1"; MAX_PERCENTILES].join(":")).unwrap().0.len(), MAX_PERCENTILES);
        let mut j = JobOpts::default();
        j.set("percentile_list", Some("99:99.9")).unwrap();
        j.set("lat_percentiles", None).unwrap();
        j.set("clat_percentiles", Some("0")).unwrap();
        j.set("slat_percentiles", Some("1")).unwrap();
        assert_eq!(j.percentiles, Percentiles { list: vec![99.0, 99.9], precision: 1, slat: true, clat: false, lat: true });
        let e = j.set("percentile_list", Some("99:200")).unwrap_err().to_string();
        assert!(e.starts_with("percentile_list: 200 is out of fio's range"), "{e}");
    }

    #[test]
    fn filenames_split_at_unescaped_colons() {
        assert_eq!(split_filenames("/dev/nvme0n1:/dev/nvme1n1"), vec!["/dev/nvme0n1", "/dev/nvme1n1"]);
        assert_eq!(split_filenames(r"0000\:01\:00.0"), vec!["0000:01:00.0"]);
        assert_eq!(split_filenames(r"0000\:01\:00.0:0000\:02\:00.0"), vec!["0000:01:00.0", "0000:02:00.0"]);
        assert_eq!(split_filenames("test"), vec!["test"]);
    }
}
