//! `nvme-bypass fio`: a drop-in for fio. The user's fio command line or job
//! file runs unchanged with `fio` replaced by `nvme-bypass fio`: fio's
//! option names, sizes and times, its engines mapped onto our paths, its
//! file layout, and its normal output line for line where the figure
//! exists, then our own figures (CPU per I/O, doorbells) marked as ours.
//! Options we do not support are refused by name (docs/fio.md).
//!
//! Engines: `io_uring`, `libaio`, `psync` on /dev/nvmeXnY or a regular file
//! = the block path; `io_uring_cmd` (cmd_type=nvme) on /dev/ngXnY =
//! passthru; `nvme-bypass-vfio` (filename a PCI address, colons escaped as
//! fio wants: `0000\:01\:00.0`, or SPDK's transport ID) = our userspace driver; `nvme-bypass-sim` =
//! the simulated controller. Several files (`a:b`) drive several devices
//! from every thread. Jobs run at the same time, each on threads of its
//! own, up to a `stonewall`, whose job starts when they have all ended; a
//! `stonewall` or a `new_group` starts a reporting group, as in fio.

pub mod diskutil;
pub mod jobfile;
pub mod options;
pub mod output;
pub mod sched;
pub mod terse;

use crate::backend::kernel::{AioReap, IoEngine, KernelOptions};
use crate::backend::path::PathSpec;
use crate::backend::userspace::vfio::VfioOptions;
use crate::backend::Target;
use crate::commands::args::{sim_options, sim_placement, DriverArgs, SimArgs, SimData};
use crate::engine::{self, JobSpec, Stop, ThreadResult, VerifySpec};
use crate::error::{exit, Error};
use crate::measure::clock::Clock;
use crate::measure::stats::percentile_values;
use crate::report::RunSummary;
use options::JobOpts;
use output::Block;
use std::io::Write;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};

/// fio's command line, passed through untouched.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct FioArgs {
    /// fio's options (--key=value, --key value, bare booleans such as --thread) and job files, as fio takes them; see docs/fio.md.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// One job, checked and ready to run.
struct Planned {
    opts: JobOpts,
    /// Reporting group (a `stonewall` or `new_group` starts the next).
    group: usize,
    /// Jobs of one wave run at the same time; a `stonewall` waits for the
    /// wave before it (a `new_group` does not).
    wave: usize,
    paths: Vec<PathSpec>,
    /// Regular files to lay out first: (path, bytes).
    layout: Vec<(PathBuf, u64)>,
    /// The job's CPUs and the simulator's.
    cpus: Vec<usize>,
    /// What the figures are (measured, and on what).
    context: String,
    batch_complete: usize,
    /// fio's JSON "global options" (inherited) and "job options" (the
    /// job's own, its name included), as written.
    global_options: serde_json::Map<String, serde_json::Value>,
    job_options: serde_json::Map<String, serde_json::Value>,
    /// Each block-path file's start (fio's `file_offset`) when
    /// `offset=N%` gives several files each its own; empty: `opts.offset`
    /// for every file (or, on a path sized when opened, N% of each).
    starts: Vec<u64>,
}

const ENGINES: &str = "io_uring, libaio, psync, sync (block path), io_uring_cmd (passthru, cmd_type=nvme), nvme-bypass-vfio (our userspace driver), nvme-bypass-sim (simulated controller)";

/// Where a block device is mounted (itself or a partition of it), if it is.
fn mounted_at(dev: &Path) -> Option<String> {
    let dev = std::fs::canonicalize(dev).ok()?;
    let name = dev.file_name()?.to_str()?.to_string();
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    for l in mounts.lines() {
        let mut f = l.split_whitespace();
        let (Some(src), Some(at)) = (f.next(), f.next()) else { continue };
        let Ok(src) = std::fs::canonicalize(src) else { continue };
        let Some(sn) = src.file_name().and_then(|n| n.to_str()) else { continue };
        let part = sn.strip_prefix(name.as_str()).map(|r| r.trim_start_matches('p')).is_some_and(|r| r.is_empty() || r.chars().all(|c| c.is_ascii_digit()));
        if src.parent() == dev.parent() && part {
            return Some(at.to_string());
        }
    }
    None
}

/// The block path's engines, under fio's names (io_uring, libaio, psync,
/// sync): IoEngine's own, so a new one is known here too.
fn block_engines() -> impl Iterator<Item = IoEngine> {
    use clap::ValueEnum;
    IoEngine::value_variants().iter().copied()
}

/// The block path's engine fio calls `name`, if it is one.
fn block_engine(name: &str) -> Option<IoEngine> {
    block_engines().find(|e| e.name() == name)
}

/// The block of a buffered job's regular files (`KernelOptions::granule`):
/// the largest power of two dividing its bs and offset, at most 4 KiB; 0
/// (the file's O_DIRECT alignment) for a direct job or one that verifies,
/// whose stamps fill whole blocks of the file's own size.
fn buffered_granule(o: &JobOpts) -> u32 {
    if o.direct || o.verify {
        0
    } else {
        1 << (o.bs | o.offset).trailing_zeros().min(12)
    }
}

/// A job's bs and offset against the block size of I/O to a regular file
/// (or to the directory a missing one will be laid out in), checked before
/// anything is laid out or opened.
fn file_blocks_fit(o: &JobOpts, at: &Path, md: &std::fs::Metadata) -> Result<(), Error> {
    // Buffered without verify: any bs and offset, within a command's
    // blocks of the granule (checked before anything is laid out).
    let g = u64::from(buffered_granule(o));
    if g > 0 {
        let max = nvme_spec::cmd::MAX_BLOCKS_PER_COMMAND as u64 * g;
        if o.bs > max {
            return Err(Error::usage(format!(
                "job {}: bs={} with offset={} is read and written in {g}-byte blocks (the largest power of two dividing both), and one I/O is at most 65536 of them ({max} bytes); give a bs with a larger power-of-two factor (a multiple of 4096)",
                o.name, o.bs, o.offset
            )));
        }
        return Ok(());
    }
    let (blk, from) = crate::backend::kernel::block::file_block_size(at, md);
    let blk = u64::from(blk);
    let what = if md.is_dir() { format!("files in {}", at.display()) } else { at.display().to_string() };
    if o.bs == 0 || o.bs % blk != 0 {
        return Err(Error::usage(format!(
            "job {}: bs={} is not a multiple of {blk} bytes, the block size of I/O to {what} ({from}); use bs={} or another multiple of {blk}",
            o.name, o.bs, blk.max(4096)
        )));
    }
    if o.offset % blk != 0 {
        return Err(Error::usage(format!("job {}: offset={} is not a multiple of {blk} bytes, the block size of I/O to {what} ({from})", o.name, o.offset)));
    }
    Ok(())
}

/// Check one job and decide its path(s), as fio's engine and filename say.
/// `earlier`: the files earlier jobs lay out (path, bytes), which this
/// job finds in place as fio's later jobs find them.
fn plan(mut o: JobOpts, group: usize, readonly: bool, earlier: &[(PathBuf, u64)]) -> Result<Planned, Error> {
    if o.numjobs == 0 || o.iodepth == 0 {
        return Err(Error::usage(format!("job {}: numjobs and iodepth must be at least 1", o.name)));
    }
    // fio's limit (FIO_MAX_JOBS): more would take long to start and stop.
    if o.numjobs > 4096 {
        return Err(Error::usage(format!("job {}: numjobs={} is more than fio's 4096 (FIO_MAX_JOBS); use fewer", o.name, o.numjobs)));
    }
    // zoned_abs zones past a region of a known size: refused before any
    // file is laid out (one of a device's size is checked once it is open).
    // With several files, each holds its share of size= and the zones.
    if let (Some(size), true) = (o.size, o.rw.random()) {
        let files = o.filename.as_deref().map_or(1, |f| options::split_filenames(f).len().max(1)) as u64;
        o.distribution.check(size / files / o.bs.max(1), o.bs).map_err(|e| Error::usage(format!("job {}: {e}", o.name)))?;
    }
    // fio's fixup_options: a latency not recorded has no percentiles.
    if o.disable_slat {
        o.percentiles.slat = false;
    }
    if o.disable_clat {
        o.percentiles.clat = false;
    }
    if o.disable_lat {
        o.percentiles.lat = false;
    }
    // fio runs a synchronous engine at depth 1 whatever iodepth says, and
    // says so.
    if matches!(o.ioengine.as_str(), "psync" | "sync") && o.iodepth > 1 {
        eprintln!("note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1");
        o.iodepth_shown = o.iodepth;
        o.iodepth = 1;
    }
    // offset=N%: N% into each file's own size, rounded up to a whole bs
    // (fio's get_start_offset). A block-path file or device: its size now,
    // before any layout (a file not there yet starts at 0, as in fio); the
    // other paths' when they are opened (run_one). One file: the job's
    // offset; several: each its own (`starts`).
    let mut starts = vec![];
    if let Some(pct) = o.offset_percent.filter(|_| block_engine(&o.ioengine).is_some()) {
        let files = o.filename.as_deref().map(options::split_filenames).unwrap_or_else(|| vec![format!("{}.0.0", o.name)]);
        for f in files.iter().map(|f| in_directory(o.directory.as_deref(), f)) {
            let have = match std::fs::File::open(&f) {
                Ok(mut file) => std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(|e| Error::io(format!("job {}: cannot find the size of {f}", o.name), e))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
                Err(e) => return Err(Error::io(format!("job {}: cannot open {f}", o.name), e)),
            };
            starts.push(offset_of(pct, have, o.bs));
        }
        if let [one] = starts[..] {
            (o.offset, starts) = (one, vec![]);
        }
        o.offset_percent = None;
    }
    // fio's fixup_options: time_based without a runtime is dropped, with
    // its warning, and the job runs its size; a job that only writes,
    // runs for its time and verifies never reaches its read-back, which
    // fio says and skips.
    if o.time_based && o.runtime.is_none() {
        eprintln!("nvme-bypass: warning: job {}: time_based requires a runtime (fio: \"time_based requires a runtime/timeout setting\"): it runs its size once, as fio's does", o.name);
        o.time_based = false;
    }
    if o.verify && o.time_based && o.rw.writes() && !o.rw.reads() {
        eprintln!("nvme-bypass: warning: job {}: verify: the read-back will never start, because the writes use all of the runtime (fio: \"verification read phase will never start because write phase uses all of runtime\"); the job writes only, as fio's does", o.name);
        o.verify = false;
    }
    let o = o;
    let job = &o.name;
    if readonly && o.rw.writes() {
        return Err(Error::usage(format!("job {job}: rw={} writes, and --readonly was given", o.rw.as_str())));
    }
    if let Some(size) = o.size.filter(|&s| s < o.bs) {
        return Err(Error::usage(format!("job {job}: size={size} is smaller than one block (bs={}): give a size of at least one block", o.bs)));
    }
    // fio drops a job whose directory= is not a directory (it makes the
    // directories of a filename=, not this one): a typo in a mount point
    // must not land the job on the root filesystem.
    if let Some(d) = o.directory.as_deref().filter(|d| !Path::new(d).is_dir()) {
        return Err(Error::usage(format!("job {job}: directory={d} is not a directory (fio drops the job too); create it, or fix the path")));
    }
    // Times read as fio reads them, said aloud where that is probably not
    // what was meant (runtime=0.5 is no runtime in fio, runtime=5min 5 us).
    let note = |key: &str| o.given.iter().find(|(k, _)| k == key).and_then(|(_, v)| options::fio_time_note(v).map(|n| format!("{key}={v}: {n}")));
    for n in ["runtime", "ramp_time", "startdelay"].into_iter().filter_map(note) {
        eprintln!("nvme-bypass: warning: job {job}: {n}");
    }
    // fio's iodepth_low (its default, and any value over iodepth, is
    // iodepth): below it, fio lets the queue drain to it before filling
    // it again; the engine fills a slot as soon as it is free.
    if o.iodepth_low > 0 && o.iodepth_low < o.iodepth {
        return Err(Error::usage(format!(
            "job {job}: iodepth_low={} is not supported: fio would let the queue drain to {} before filling it again, and nvme-bypass fills it as soon as an I/O completes, so the queue depths and the figures would differ; remove it, or give iodepth_low={} (fio's default)",
            o.iodepth_low, o.iodepth_low, o.iodepth
        )));
    }
    if let Some(r) = &o.rate {
        r.iops(o.rw.reads(), o.rw.writes(), o.bs).map_err(|e| Error::usage(format!("job {job}: {}: {e}", if r.bytes { "rate" } else { "rate_iops" })))?;
    }
    if o.time_based && o.number_ios > 0 {
        eprintln!("nvme-bypass: warning: job {job}: number_ios={} does not end a time_based job (fio ignores it there too): it runs for its runtime", o.number_ios);
    }
    let batch_complete = o.batch_complete()?;
    // fio's default log_avg_msec=0 logs every I/O: a file entry per I/O
    // inside the measured loop, which nvme-bypass does not write.
    if o.logs() && o.log_avg_msec == 0 {
        return Err(Error::usage(format!(
            "job {job}: write_bw_log, write_iops_log and write_lat_log are written averaged only: add log_avg_msec=N (ms per entry, e.g. 500); fio's default, an entry per I/O, would put a log write on every I/O of the measured loop"
        )));
    }
    // The logs are written after the job: a directory they cannot go in
    // is said now, before anything runs, not after the run's figures.
    for p in [&o.bw_log, &o.iops_log, &o.lat_log].into_iter().flatten() {
        let prefix = if p.is_empty() { job.as_str() } else { p.as_str() };
        let dir = Path::new(prefix).parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !crate::sys::writable_dir(dir) {
            return Err(Error::usage(format!("job {job}: the log prefix {prefix} is in {}, which is not a directory this process can write; give a prefix in one that is", dir.display())));
        }
    }
    // cpus_allowed against the CPUs this process may run on, before
    // anything is laid out or opened (fio refuses a CPU it cannot use).
    let allowed = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        let l = s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim().to_string();
        crate::cli::parse::parse_cpu_list(&l).ok().map(|v| (l, v))
    });
    if let Some((list, ok)) = allowed {
        if let Some(bad) = o.cpus.iter().find(|c| !ok.contains(c)) {
            return Err(Error::usage(format!("job {job}: cpus_allowed names CPU {bad}, which this process may not run on (it may run on {list}); use CPUs from that list")));
        }
    }
    let files: Vec<String> = o.filename.as_deref().map(options::split_filenames).unwrap_or_default();
    let with_dir = |f: &str| in_directory(o.directory.as_deref(), f);
    let kernel = |device: String, engine: IoEngine, passthru: bool| KernelOptions {
        device,
        nsid: o.nsid,
        ioengine: engine,
        fixedbufs: o.fixedbufs,
        registerfiles: o.registerfiles,
        hipri: o.hipri,
        sqthread_poll: o.sqthread_poll,
        sqthread_poll_cpu: o.sqthread_poll_cpu,
        buffered: !passthru && !o.direct,
        // fio's invalidate=1: the page cache dropped at each pass too
        // (Target::new_pass), not only before the job.
        invalidate: o.invalidate,
        // fio's sync=: the block path's files opened O_SYNC/O_DSYNC, as
        // fio opens them (passthru's commands are not touched by it).
        sync_open: if passthru { 0 } else { o.sync_open },
        // fio's fadvise_hint (td_io_open_file): by default RANDOM for a
        // random job and SEQUENTIAL for another, so a buffered random job
        // reads without readahead, as fio's does.
        // fio's buffered I/O to a file takes any bs and offset (the etcd
        // check's bs=2300): blocks of the largest power of two dividing
        // both (at most 4 KiB, so that bs stays within a command's
        // blocks); verify stamps whole blocks of the file's own size.
        granule: if passthru { 0 } else { buffered_granule(&o) },
        fadvise: match o.fadvise_hint {
            _ if passthru => None,
            None => None,
            Some(Some(advice)) => Some(advice),
            Some(None) => Some(if o.rw.random() { libc::POSIX_FADV_RANDOM } else { libc::POSIX_FADV_SEQUENTIAL }),
        },
        // fio's io_uring engines' ring flags (libaio and psync have no ring).
        fio_ring: engine == IoEngine::IoUring,
        // fio opens a read job's file O_RDONLY (a read-only file serves it).
        read_only: !passthru && !o.rw.writes(),
        // fio's libaio reads the ring in user memory only for a reap that
        // may take none: userspace_reap=1 with iodepth_batch_complete_min=0.
        aio_reap: if o.userspace_reap && o.batch_complete_min == Some(0) { AioReap::Spin } else { AioReap::Getevents },
        ..Default::default()
    };
    let nfiles = files.len().max(1) as u64;
    let mut layout = vec![];
    let mut cpus = o.cpus.clone();
    let mut context = String::new();
    // A regular file of `have` bytes (0: not there yet): bs and offset
    // checked against the block size of I/O at `at` (the file, or the
    // directory it will be made in), and laid out to offset + size if it
    // is shorter.
    let regular_file = |layout: &mut Vec<(PathBuf, u64)>, f: &Path, start: u64, have: u64, at: &Path, md: &std::fs::Metadata| -> Result<(), Error> {
        file_blocks_fit(&o, at, md)?;
        // Without size= a file is used from offset to its end: an offset
        // past the end leaves nothing (fio refuses it, the file
        // untouched); one at the end leaves nothing too, which fio
        // refuses for one file and, among several, ignores that file.
        if o.size.is_none() && have > 0 && (start > have || start == have && nfiles == 1) {
            return Err(Error::usage(format!(
                "job {job}: offset={start} is {} the end of {} ({have} bytes) and no size= is given; give a smaller offset, or size= to extend the file",
                if start > have { "past" } else { "at" },
                f.display()
            )));
        }
        // Several files share size= (fio divides it between them).
        let need = start + o.size.unwrap_or(0) / nfiles;
        if have < need {
            // fio: "refusing extend of file due to read-only".
            if readonly {
                return Err(Error::usage(format!(
                    "job {job}: {} would be laid out to {need} bytes (it has {have}), and --readonly was given; drop --readonly, or give a size that fits the file",
                    f.display()
                )));
            }
            layout.push((f.to_path_buf(), need));
        }
        Ok(())
    };
    // sync= is an open flag: the block path's kernel turns each write into
    // a FUA write (or a write and a flush). A command sent past the block
    // layer carries no such flag (fio's io_uring_cmd ignores sync=), so its
    // writes would not be what the job asks for.
    if o.sync_open != 0 && o.rw.writes() && block_engine(&o.ioengine).is_none() {
        return Err(Error::usage(format!(
            "job {job}: sync= opens the file O_SYNC/O_DSYNC, which only the block path's engines (io_uring, libaio, psync, sync) act on; with ioengine={} the writes would go out without it (fio's io_uring_cmd ignores it too): use fdatasync=1 for a flush after every write, or a block path engine",
            o.ioengine
        )));
    }
    let paths: Vec<PathSpec> = match (block_engine(&o.ioengine), o.ioengine.as_str()) {
        (Some(engine), _) => {
            let files = if files.is_empty() {
                if o.numjobs > 1 {
                    return Err(Error::usage(format!(
                        "job {job}: without filename= fio gives each of the {} clones a file of its own; nvme-bypass drives one file from every thread: give filename=",
                        o.numjobs
                    )));
                }
                // fio's default file name: jobname.jobnum.filenum.
                vec![format!("{job}.0.0")]
            } else {
                files
            };
            let mut v = vec![];
            for (i, f) in files.iter().map(|f| with_dir(f)).enumerate() {
                let start = starts.get(i).copied().unwrap_or(o.offset);
                match std::fs::metadata(&f) {
                    Ok(md) if md.file_type().is_block_device() => {
                        if o.rw.writes() && !o.allow_mounted_write {
                            if let Some(at) = mounted_at(Path::new(&f)) {
                                return Err(Error::usage(format!(
                                    "job {job}: {f} holds a filesystem mounted at {at} and rw={} writes to it, which would destroy it; unmount it, or add allow_mounted_write=1 as fio wants",
                                    o.rw.as_str()
                                )));
                            }
                        }
                        context = crate::measure::topology::emulation_of(&f).map(|n| format!("measured, emulated: {n}")).unwrap_or("measured on the device as it is (not emulated, not simulated)".into());
                    }
                    Ok(md) if md.file_type().is_char_device() => {
                        return Err(Error::usage(format!("job {job}: {f} is a character device; for /dev/ngXnY use ioengine=io_uring_cmd with cmd_type=nvme")));
                    }
                    Ok(md) if md.is_file() => {
                        regular_file(&mut layout, Path::new(&f), start, md.len(), Path::new(&f), &md)?;
                        context = "measured on a regular file of the host's filesystem (not emulated, not simulated)".into();
                    }
                    Ok(_) => return Err(Error::usage(format!("job {job}: {f} is neither a device nor a regular file"))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        // An earlier job lays it out (fio's later jobs find
                        // it there), or this one does: then size= says how big.
                        let made = earlier.iter().filter(|(p, _)| p == Path::new(&f)).map(|(_, b)| *b).max();
                        if made.is_none() && o.size.is_none() {
                            return Err(Error::usage(match o.size_percent {
                                Some(pct) => format!("job {job}: {f} does not exist, and size={pct}% is a share of its size: give size= in bytes so it can be laid out (fio cannot size it either)"),
                                None => format!("job {job}: {f} does not exist; give size= so it can be laid out (fio needs it too)"),
                            }));
                        }
                        // Checked before anything is laid out: the nearest
                        // directory that exists (fio makes the missing ones).
                        let dir = Path::new(&f).ancestors().skip(1).map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d }).find(|d| d.is_dir()).unwrap_or(Path::new("."));
                        let md = std::fs::metadata(dir).map_err(|e| Error::io(format!("job {job}: cannot stat {}", dir.display()), e))?;
                        regular_file(&mut layout, Path::new(&f), start, made.unwrap_or(0), dir, &md)?;
                        context = "measured on a regular file of the host's filesystem (not emulated, not simulated)".into();
                    }
                    Err(e) => return Err(Error::io(format!("job {job}: cannot stat {f}"), e)),
                }
                v.push(PathSpec::Block(kernel(f, engine, false)));
            }
            v
        }
        (None, "io_uring_cmd") => {
            if o.cmd_type != "nvme" {
                return Err(Error::usage(format!("job {job}: cmd_type={} is not supported; io_uring_cmd here is NVMe passthrough (cmd_type=nvme)", o.cmd_type)));
            }
            if files.is_empty() {
                return Err(Error::usage(format!("job {job}: ioengine=io_uring_cmd needs filename=/dev/ngXnY")));
            }
            context = crate::measure::topology::emulation_of(&files[0]).map(|n| format!("measured, emulated: {n}")).unwrap_or("measured on the device as it is (not emulated, not simulated)".into());
            files.into_iter().map(|f| PathSpec::Passthru(kernel(f, IoEngine::IoUring, true))).collect()
        }
        (None, "nvme-bypass-vfio") => {
            if files.is_empty() {
                return Err(Error::usage(format!(r"job {job}: ioengine=nvme-bypass-vfio needs filename= a PCI address bound to vfio-pci, colons escaped (filename=0000\:01\:00.0), or as SPDK's fio plugin names it (filename=trtype=PCIe traddr=0000.01.00.0 ns=1)")));
            }
            // SPDK's fio plugin names a controller by its transport ID
            // (`trtype=PCIe traddr=0000.01.00.0 ns=1`): taken as well.
            let mut v = vec![];
            for f in files {
                v.push(match options::spdk_trid(&f).map_err(|e| Error::usage(format!("job {job}: filename: {e}")))? {
                    Some((bdf, ns)) => VfioOptions::new(bdf, ns.unwrap_or(o.nsid)),
                    None => VfioOptions::new(f, o.nsid),
                });
            }
            context = crate::measure::topology::emulation_of(&v[0].bdf).map(|n| format!("measured, emulated: {n}")).unwrap_or("measured on the device as it is (not emulated, not simulated)".into());
            v.into_iter().map(PathSpec::Vfio).collect()
        }
        (None, "nvme-bypass-sim") => {
            let mut sim = SimArgs {
                sim_data: SimData::Ram,
                // Whole 512-byte blocks, as the simulator's namespace is.
                sim_size: (o.offset + o.size.unwrap_or(0)).max(1 << 30).next_multiple_of(512),
                sim_lba_size: 512,
                sim_cpu: None,
                sim_mdts: 7,
                sim_mqes: 2047,
                sim_sync: false,
                sim_fault: vec![],
            };
            let (c, sim_cpu) = sim_placement(o.numjobs, (!o.cpus.is_empty()).then_some(&o.cpus[..]), None, !sim.sim_sync);
            // A job file has no --sim-cpu or --sim-sync: the advice is in
            // its own options.
            let advice = match sim_cpu {
                Some(s) if c.contains(&s) => format!("give each its own CPU: fewer numjobs, or a cpus_allowed= list without CPU {s}, where the simulated controller runs"),
                Some(s) => format!("give each its own CPU: fewer numjobs, or a cpus_allowed= list of one CPU per job (not CPU {s}, where the simulated controller runs)"),
                None => "give each its own CPU: fewer numjobs, or a cpus_allowed= list of one CPU per job".to_string(),
            };
            if let Some(w) = crate::commands::args::sim_sharing_advised(o.numjobs, &c, sim_cpu, &advice) {
                eprintln!("nvme-bypass fio: warning: job {}: {w}", o.name);
            }
            cpus = c;
            sim.sim_cpu = sim_cpu;
            context = format!("measured, simulated: {}", crate::experiment::session::SIM_NOTE);
            vec![PathSpec::Sim(sim_options(&sim, &DriverArgs::default(), 1, sim_cpu)?)]
        }
        // fio's vsync/pvsync: the same I/O as psync, by other system
        // calls (readv/writev, preadv/pwritev): their system calls per I/O
        // would not be fio's.
        (None, "vsync" | "pvsync" | "pvsync2") => {
            return Err(Error::usage(format!(
                "job {job}: ioengine={} is not supported: ioengine=psync does the same I/O, one pread/pwrite per I/O, and is what nvme-bypass runs for a synchronous job (its system calls per I/O would differ from {}'s); use ioengine=psync",
                o.ioengine, o.ioengine
            )))
        }
        (None, other) => return Err(Error::usage(format!("job {job}: ioengine={other} is not supported; use one of {ENGINES}"))),
    };
    if paths.len() > 1 && o.verify {
        return Err(Error::usage(format!("job {job}: verify with several files is not supported (a block's expected content would depend on which device served it); verify each on its own")));
    }
    // A read job verifying data fio wrote with its own verify= finds fio's
    // header in every block, not our stamps: said before it runs, not as a
    // mismatch in every block after it.
    if o.verify && !o.rw.writes() {
        for ps in &paths {
            let PathSpec::Block(k) = ps else { continue };
            if let Some(kind) = fio_verify_header_at(&k.device, o.offset) {
                let v = o.given.iter().rev().find(|(k, _)| k == "verify").map_or("crc32c", |(_, v)| v.as_str());
                return Err(Error::usage(format!(
                    "job {job}: verify={v}: {} holds fio's own verify header at offset {} (magic 0xacca, verify type {kind}), written by fio with verify=; nvme-bypass checks the stamps of its own verify= writes, not fio's header format: verify this data with fio itself, or write it with a verify= write job of nvme-bypass fio first",
                    k.device, o.offset
                )));
            }
        }
    }
    Ok(Planned { opts: o, group, wave: 0, paths, layout, cpus, context, batch_complete, global_options: Default::default(), job_options: Default::default(), starts })
}

/// fio's verify header (its verify type) at `offset` of a file or device,
/// if it holds one; None when it cannot be read.
fn fio_verify_header_at(path: &str, offset: u64) -> Option<u16> {
    let f = std::fs::File::open(path).ok()?;
    let mut b = [0u8; 4];
    f.read_exact_at(&mut b, offset).ok()?;
    crate::engine::verify::fio_header(&b)
}

/// A message of the paths and the engine, which name `bench`'s options,
/// in fio's words: `--iodepth 1` -> `iodepth=1`, `--backend block` ->
/// `ioengine=io_uring, libaio or psync`.
fn in_fio_words(msg: &str) -> String {
    let mut m = msg.replace("--backend block", "ioengine=io_uring, libaio or psync").replace("--backend passthru", "ioengine=io_uring_cmd").replace("--backend vfio", "ioengine=nvme-bypass-vfio");
    for (ours, fio) in [
        ("batch-complete", "iodepth_batch_complete_min/_max"),
        ("batch", "iodepth_batch_submit"),
        ("iodepth", "iodepth"),
        ("numjobs", "numjobs"),
        ("ioengine", "ioengine"),
        ("bs", "bs"),
        ("size", "size"),
        ("offset", "offset"),
        ("verify", "verify"),
        ("hipri", "hipri"),
        ("fixedbufs", "fixedbufs"),
        ("registerfiles", "registerfiles"),
        ("sqthread-poll-cpu", "sqthread_poll_cpu"),
        ("sqthread-poll", "sqthread_poll"),
        ("rwmixread", "rwmixread"),
        ("buffered", "direct=0"),
        ("allow-write", "a write pattern"),
        ("cpus", "cpus_allowed"),
    ] {
        let pat = format!("--{ours}");
        let mut out = String::new();
        let mut rest = m.as_str();
        while let Some(i) = rest.find(&pat) {
            out.push_str(&rest[..i]);
            out.push_str(fio);
            rest = &rest[i + pat.len()..];
            // "--iodepth 4" and "--iodepth (4)" -> "iodepth=4"; "--numjobs
            // for" -> "numjobs for"; a bare "--verify" -> "verify=", as fio
            // users write it.
            let paren = rest.strip_prefix(" (").and_then(|r| r.split_once(')')).filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            let value = rest.strip_prefix(' ').filter(|r| r.starts_with(|c: char| c.is_ascii_digit()) || block_engines().any(|e| r.starts_with(e.name())));
            if let Some((n, after)) = paren {
                out.push('=');
                out.push_str(n);
                rest = after;
            } else if let Some(v) = value {
                out.push('=');
                rest = v;
            } else if ours == "verify" && !rest.starts_with(|c: char| c.is_alphanumeric() || c == '-' || c == '_') {
                out.push('=');
            }
        }
        out.push_str(rest);
        m = out;
    }
    m
}

/// Lay a regular file out to `size` bytes as fio does: write it (never
/// over what is there: only past its end), so reads hit real blocks.
/// A signal stops it with what was written kept: `Ok(false)`, the run then
/// ends as after any signal (no job starts, exit 128).
fn lay_out(path: &Path, size: u64, allocate_only: bool, stop: &Stop) -> Result<bool, Error> {
    // fio makes the directories a file name leads through.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("cannot create the directory {}", dir.display()), e))?;
    }
    let f = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path).map_err(|e| Error::io(format!("cannot create {}", path.display()), e))?;
    let mut at = f.metadata().map_err(|e| Error::io(format!("stat {}", path.display()), e))?.len();
    // A job that only writes gets its blocks allocated, not written, as
    // fio's extend_file lays such a job's file out (fallocate, no data):
    // its writes then land in unwritten extents, as fio's do. Where the
    // filesystem cannot allocate, the file is written as for a read job.
    if allocate_only && at < size && crate::sys::fallocate(&f, at, size - at).is_ok() {
        f.sync_all().map_err(|e| Error::io(format!("fsync {}", path.display()), e))?;
        return Ok(true);
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ at;
    while at < size {
        if stop.requested() {
            // What was written stays (a later run lays out the rest).
            let _ = f.sync_all();
            eprintln!("nvme-bypass fio: laying out {} stopped at {} of {} MiB; the next run lays out the rest", path.display(), at >> 20, size >> 20);
            return Ok(false);
        }
        for c in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
        }
        let n = (size - at).min(buf.len() as u64) as usize;
        f.write_all_at(&buf[..n], at).map_err(|e| Error::io(format!("laying out {}", path.display()), e))?;
        at += n as u64;
    }
    f.sync_all().map_err(|e| Error::io(format!("fsync {}", path.display()), e))?;
    Ok(true)
}

/// fio's start offset for `offset=N%` of a file or device of `bytes`
/// (get_start_offset): N% of it, rounded up to a whole `bs`.
fn offset_of(pct: u64, bytes: u64, bs: u64) -> u64 {
    (bytes * pct / 100).next_multiple_of(bs.max(1))
}

/// The job's offset as given: `N%` or bytes.
fn offset_given(o: &JobOpts) -> String {
    o.given.iter().rev().find(|(k, _)| k == "offset").map_or_else(|| o.offset.to_string(), |(_, v)| v.clone())
}

/// fio's region for `size=N%` of a file or device of `bytes` from
/// `offset` (setup_files): N% of it, within what follows the offset.
fn share_of(pct: u64, bytes: u64, offset: u64) -> u64 {
    (bytes * pct / 100).min(bytes.saturating_sub(offset))
}

/// A job's file name in its `directory`, as fio joins them.
fn in_directory(directory: Option<&str>, f: &str) -> String {
    // fio's add_file puts every name under directory=, an absolute one
    // too (directory=/d filename=/x is /d/x): a write job must not land on
    // a file fio would not touch.
    match directory {
        Some(d) => format!("{}/{}", d.trim_end_matches('/'), f.trim_start_matches('/')),
        None => f.to_string(),
    }
}

/// What one job's run gave.
struct Ran {
    plan_idx: usize,
    threads: Vec<ThreadResult>,
    summary: RunSummary,
    spec: JobSpec,
    /// When the job started, ms since the epoch (fio's `job_start`).
    started_ms: u64,
}

fn run_one(p: &Planned, clock: Clock, stop: &Stop, schedulers: &sched::Schedulers, genesis: std::time::Instant) -> Result<(Vec<ThreadResult>, RunSummary, JobSpec), Error> {
    let o = &p.opts;
    // fio's startdelay: the job is not set up until that long after the
    // run started (run_threads; a job after a stonewall may find it
    // passed). Ctrl-C ends the wait.
    while let Some(left) = o.startdelay.checked_sub(genesis.elapsed()).filter(|d| !d.is_zero() && !stop.requested()) {
        std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
    }
    if stop.requested() {
        return Err(Error::usage("stopped before it started (startdelay)"));
    }
    // fio's ioscheduler=: the disk under each block-path file switched
    // first (passthru, our driver and the simulator have none, as fio
    // skips character devices).
    if let Some(name) = &o.ioscheduler {
        for ps in &p.paths {
            if let PathSpec::Block(k) = ps {
                if let Some(why) = schedulers.switch(Path::new(&k.device), name).map_err(Error::usage)? {
                    eprintln!("nvme-bypass fio: warning: job {}: {why}", o.name);
                }
            }
        }
    }
    // fio's invalidate=1 (its default): the job's files leave the page
    // cache first, so a buffered job measures the device, not memory.
    if o.invalidate {
        for ps in &p.paths {
            if let PathSpec::Block(k) = ps {
                let dropped = std::fs::File::open(&k.device).and_then(|f| crate::sys::drop_page_cache(&f));
                if let Err(e) = dropped {
                    eprintln!("nvme-bypass: warning: job {}: could not drop {}'s page cache (invalidate=1): {e}", o.name, k.device);
                }
            }
        }
    }
    let queues = o.numjobs.min(u16::MAX as usize) as u16;
    let target: Box<dyn Target> = if p.paths.len() > 1 {
        let mut ts = vec![];
        for s in &p.paths {
            ts.push(s.open(queues)?);
        }
        // As fio (filesetup.c, setup_files): each file from its own start
        // (offset=N%: N% of it, resolved when planned for block-path
        // files), size= divided between the files; without it, each file
        // from its start to its own end. Whole blocks of bs only; iodepth
        // shared.
        let multi = crate::backend::multi::MultiTarget::new(ts)?;
        let n = p.paths.len() as u64;
        let name = |i: usize| p.paths[i].kernel().map_or_else(|| multi.device_name(i), |k| k.device.clone());
        let starts: Vec<u64> = match (&p.starts[..], o.offset_percent) {
            ([], Some(pct)) => (0..p.paths.len()).map(|i| offset_of(pct, multi.device_bytes(i), o.bs)).collect(),
            ([], None) => vec![o.offset; p.paths.len()],
            (given, _) => given.to_vec(),
        };
        let mut files = vec![];
        for (i, &start) in starts.iter().enumerate() {
            let bytes = match o.size {
                Some(size) if size / n < o.bs => {
                    return Err(Error::usage(format!(
                        "{n} files share size={size} ({} bytes each, less than one bs={}): give a larger size, or fewer files",
                        size / n,
                        o.bs
                    )));
                }
                Some(size) => size / n,
                None => {
                    let end = multi.device_bytes(i);
                    if start > end {
                        return Err(Error::usage(format!(
                            "offset={start} is past the end of {} ({end} bytes), one of the {n} files, and no size= is given; give a smaller offset, or size=",
                            name(i)
                        )));
                    }
                    // size=N%: N% of each file's own size, from its start,
                    // within the file (fio's setup_files).
                    o.size_percent.map_or(end - start, |pct| share_of(pct, end, start))
                }
            };
            files.push(bytes / o.bs * o.bs);
        }
        // fio ignores a file with nothing left past offset ("fio: file X
        // may be ignored") and runs on the others.
        if files.iter().all(|b| *b == 0) {
            return Err(Error::usage(format!(
                "offset={} leaves less than one bs={} in each of the {n} files and no size= is given; give a smaller offset, or size=",
                offset_given(o),
                o.bs
            )));
        }
        for (i, _) in files.iter().enumerate().filter(|(_, b)| **b == 0) {
            eprintln!("nvme-bypass fio: file {} may be ignored: offset={} leaves less than one bs={} of it (fio ignores it too)", name(i), starts[i], o.bs);
        }
        // fio draws a skewed distribution over each file's own blocks;
        // here that needs files of one size (size= shares them out so).
        if o.rw.random() && o.distribution != engine::workload::Distribution::Uniform && files.iter().any(|b| *b != files[0]) {
            let sizes: Vec<String> = files.iter().map(|b| b.to_string()).collect();
            return Err(Error::usage(format!(
                "random_distribution over {n} files of different sizes ({} bytes) is not supported (fio draws it over each file's own blocks); give size= to share one size between them, or run a job per file",
                sizes.join(", ")
            )));
        }
        Box::new(multi.interleaved(&starts, &files, o.bs)?)
    } else {
        p.paths[0].open(queues)?
    };
    let geo = target.geometry();
    // offset=N% not known before the path is opened (passthru, our
    // driver, the simulator): N% of the namespace. (A block-path file has
    // it resolved when planned; several files their own, above: the
    // engine's region of their units starts at 0.)
    let offset = match o.offset_percent {
        _ if p.paths.len() > 1 => 0,
        Some(pct) => {
            let offset = offset_of(pct, geo.bytes(), o.bs);
            if offset >= geo.bytes() {
                return Err(Error::usage(format!("offset={pct}% of {} ({} bytes) leaves nothing of it: give a smaller share", target.name(), geo.bytes())));
            }
            offset
        }
        None => o.offset,
    };
    // The engine's region: one file's, or all the files' interleaved.
    let size = if p.paths.len() > 1 {
        geo.bytes()
    } else {
        match (o.size, o.size_percent) {
            (Some(size), _) => size,
            // size=N%: N% of the file or device, from offset, within it,
            // in whole blocks (fio's setup_files).
            (None, Some(pct)) => {
                let end = geo.bytes();
                let size = share_of(pct, end, offset) / o.bs * o.bs;
                if size == 0 {
                    return Err(Error::usage(format!(
                        "size={pct}% of {} ({end} bytes) from offset={} is less than one bs={}: give a larger share, a smaller offset, or size= in bytes",
                        target.name(),
                        offset,
                        o.bs
                    )));
                }
                size
            }
            (None, None) => geo.bytes().saturating_sub(offset),
        }
    };
    // An io_size under one block is one I/O, as fio does it; number_ios
    // ends a loop sooner (fio's exceeds_number_ios, which a time_based
    // job never asks).
    let io = o.io_size.unwrap_or(size);
    let per_loop = (io / o.bs.max(1)).max((io > 0) as u64).min(if o.number_ios > 0 { o.number_ios } else { u64::MAX });
    let ios = if o.time_based { None } else { Some(per_loop * o.loops.max(1)) };
    let spec = JobSpec {
        rw: o.rw,
        bs: o.bs as usize,
        iodepth: o.iodepth,
        rwmixread: o.rwmixread,
        offset,
        size,
        size_given: o.size.is_some() || o.size_percent.is_some(),
        runtime: o.runtime,
        ios,
        ramp: o.ramp,
        verify: o.verify.then_some(VerifySpec { seed: 0x6e76_6d65, only: !o.rw.writes() }),
        scramble: o.scrambles(),
        random_map: !o.norandommap,
        distribution: o.distribution.clone(),
        files: p.paths.len() as u64,
        // fio's clones each start at the job's offset (offset_increment=0).
        spread_threads: false,
        batch: o.batch,
        batch_complete: p.batch_complete,
        reap_max: o.reap_max(),
        split_lat: !o.gtod_reduce,
        rate_iops: o.rate.and_then(|r| r.iops(o.rw.reads(), o.rw.writes(), o.bs).ok().flatten()),
        sync_every: if o.rw.writes() { o.fsync } else { 0 },
        end_sync: o.end_fsync && o.rw.writes(),
        // thinktime_blocks=0 stalls after every I/O queued, as issue-counted 1.
        think: (!o.thinktime.is_zero()).then_some(engine::ThinkSpec {
            time: o.thinktime,
            spin: o.thinktime_spin,
            blocks: o.thinktime_blocks.max(1),
            on_complete: o.thinktime_on_complete && o.thinktime_blocks > 0,
        }),
        log_ns: (o.log_avg_msec > 0 && o.logs()).then_some(o.log_avg_msec * 1_000_000),
        numjobs: o.numjobs,
        cpus: p.cpus.clone(),
        continue_on_error: o.continue_on_error,
        seed: o.seed,
        reliability: Default::default(),
        stop: stop.clone(),
    };
    engine::validate(&spec, &geo)?;
    let mut threads = engine::run(&*target, &spec, clock, false)?;
    // disable_slat, _clat, _lat: fio records no such latency, and shows
    // none (no line, no percentiles; without clat no latency distribution
    // either, as fio's io_u_mark_latency marks clat). The engine's one
    // histogram per latency costs too little per I/O to be worth not
    // taking, so it is dropped here instead of not taken.
    for d in threads.iter_mut().flat_map(|t| [&mut t.read, &mut t.write]) {
        if o.disable_slat {
            d.slat = None;
        }
        if o.disable_clat && d.clat.is_some() {
            d.clat = Some(crate::measure::stats::new_histogram());
        }
        if o.disable_lat {
            d.lat = crate::measure::stats::new_histogram();
        }
    }
    // fio's total_ios, and its IOPS, count the I/Os submitted after the
    // ramp (backend.c, td_io_queue; the ramp's end zeroes the count with
    // reset_all_stats): those in flight when it ended complete within the
    // measured interval but are not counted.
    for t in &mut threads {
        t.read.ios = t.read.ios.saturating_sub(t.ramp_in_flight[0]);
        t.write.ios = t.write.ios.saturating_sub(t.ramp_in_flight[1]);
    }
    let mut summary = RunSummary::new(target.name(), target.describe(), &threads, clock.source());
    summary.interrupt_driven = Some(!target.polled());
    Ok((threads, summary, spec))
}

/// fio 3.33's order of a job entry's keys (its `show_thread_status_json`);
/// those fio does not have (`job_start`, fio 3.35 on) go after them.
const JOB_ORDER: [&str; 27] = [
    "jobname", "groupid", "error", "eta", "elapsed", "job options", "read", "write", "trim", "sync", "job_runtime", "usr_cpu", "sys_cpu", "ctx", "majf", "minf",
    "iodepth_level", "iodepth_submit", "iodepth_complete", "latency_ns", "latency_us", "latency_ms", "latency_depth", "latency_target", "latency_percentile",
    "latency_window", "desc",
];

/// An object's keys in `order`, the others after them as they were (ours,
/// `nvme_bypass`, last of all).
fn in_order(j: &mut serde_json::Value, order: &[&str]) {
    let Some(m) = j.as_object_mut() else { return };
    let mut old = std::mem::take(m);
    let ours = old.remove("nvme_bypass");
    for &k in order {
        if let Some(v) = old.remove(k) {
            m.insert(k.to_string(), v);
        }
    }
    m.extend(old);
    if let Some(v) = ours {
        m.insert("nvme_bypass".into(), v);
    }
}

/// fio's grouping of threads into report entries (stat.c
/// `__show_run_stats`): the threads in order, each as (group_reporting,
/// reporting group). A thread starts an entry unless it has
/// group_reporting and the thread before it is of its group: then it is
/// added into that thread's entry, whatever that thread's
/// group_reporting (fio adds a group_reporting job into a plain one just
/// before it). The entries, as lists of thread indexes.
fn fio_entries(tds: &[(bool, usize)]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = vec![];
    for (i, &(group_reporting, group)) in tds.iter().enumerate() {
        match out.last_mut() {
            Some(e) if group_reporting && tds[i - 1].1 == group => e.push(i),
            _ => out.push(vec![i]),
        }
    }
    out
}

/// One of fio's report entries ([`fio_entries`]): one block of the text,
/// one entry of the JSON.
struct Entry {
    /// The jobs it holds threads of: (index in `ran`, how many threads),
    /// in order; the first names it.
    jobs: Vec<(usize, usize)>,
    threads: Vec<ThreadResult>,
    summary: RunSummary,
    /// What the figures are, each job's said once.
    context: String,
    /// The verify read-backs of its jobs that only write ([`output::read_back`]).
    read_back: Option<(u64, u64, u64)>,
}

impl Entry {
    /// The entry of threads `tds` (index in `ran`, thread of that job).
    fn of(tds: Vec<(usize, usize)>, ran: &[Ran], plans: &[Planned]) -> Entry {
        let mut jobs: Vec<(usize, usize)> = vec![];
        for &(i, _) in &tds {
            match jobs.last_mut() {
                Some((j, n)) if *j == i => *n += 1,
                _ => jobs.push((i, 1)),
            }
        }
        let threads: Vec<ThreadResult> = tds.iter().map(|&(i, k)| ran[i].threads[k].clone()).collect();
        let first = &ran[jobs[0].0];
        let distinct = |f: &dyn Fn(usize) -> String, sep: &str| {
            let mut v: Vec<String> = vec![];
            for &(i, _) in &jobs {
                let x = f(i);
                if !v.contains(&x) {
                    v.push(x);
                }
            }
            v.join(sep)
        };
        let mut summary = match jobs[..] {
            // A whole job keeps its own summary (its target described).
            [(i, n)] if n == ran[i].threads.len() => ran[i].summary.clone(),
            [_] => RunSummary::new(first.summary.backend.clone(), vec![], &threads, &first.summary.clock),
            _ => {
                let mut s = RunSummary::new(distinct(&|i| ran[i].summary.backend.clone(), ", "), first.summary.target.clone(), &threads, &first.summary.clock);
                s.emulated = jobs.iter().any(|&(i, _)| ran[i].summary.emulated);
                s.simulated = jobs.iter().any(|&(i, _)| ran[i].summary.simulated);
                s.interrupt_driven = first.summary.interrupt_driven;
                s
            }
        };
        // The machine's busy time is shared by whatever ran alongside (the
        // other clones and jobs of the wave): per I/O of all of them.
        let all: Vec<&ThreadResult> = ran.iter().flat_map(|r| r.threads.iter()).collect();
        summary.system = crate::report::summary::system_shared(&threads, &all);
        let mut at = 0;
        let read_back = output::sum_read_backs(jobs.iter().map(|&(i, n)| {
            at += n;
            output::read_back(&threads[at - n..at], plans[ran[i].plan_idx].opts.bs)
        }));
        let context = distinct(&|i| plans[ran[i].plan_idx].context.clone(), "; ");
        Entry { jobs, threads, summary, context, read_back }
    }
}

/// fio's json+ `bins`: every latency recorded (ns, as a string key, the
/// histogram's value: 3 significant digits) with its count of I/Os.
fn bins(h: &hdrhistogram::Histogram<u64>) -> serde_json::Value {
    h.iter_recorded().map(|v| (v.value_iterated_to().to_string(), serde_json::Value::from(v.count_at_value()))).collect::<serde_json::Map<_, _>>().into()
}

/// `nvme-bypass fio ARGS...`.
pub fn fio(args: &[String], stop: &Stop) -> Result<i32, Error> {
    if args.is_empty() {
        eprintln!("{HELP}");
        return Ok(exit::USAGE);
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{HELP}");
        return Ok(exit::OK);
    }
    if args.iter().any(|a| a == "--version") {
        println!("nvme-bypass-{} (fio drop-in)", env!("CARGO_PKG_VERSION"));
        return Ok(exit::OK);
    }
    let genesis = std::time::Instant::now();
    let (run, defs) = jobfile::parse_command_line(args, &|k| std::env::var(k).ok())?;
    if run.showcmd {
        // fio's --showcmd: the jobs as one command line; nothing runs.
        println!("{}", jobfile::as_command_line(&defs));
        return Ok(exit::OK);
    }
    let mut plans = vec![];
    let (mut group, mut wave) = (0, 0);
    for (i, d) in defs.iter().enumerate() {
        let mut o = JobOpts { name: d.name.clone(), ..Default::default() };
        for (n, (k, v)) in d.opts.iter().enumerate() {
            // A [global] name= names no job: the section's name wins over
            // it, as fio names a job when it copies the globals (a job's
            // own name= still renames it).
            if n < d.inherited && k == "name" {
                continue;
            }
            o.set(k, v.as_deref()).map_err(|e| Error::usage(format!("job {}: {e}", d.name)))?;
        }
        if i > 0 && (o.stonewall || o.new_group) {
            group += 1;
        }
        if i > 0 && o.stonewall {
            wave += 1;
        }
        let earlier: Vec<(PathBuf, u64)> = plans.iter().flat_map(|p: &Planned| p.layout.iter().cloned()).collect();
        let mut p = plan(o, group, run.readonly, &earlier)?;
        p.wave = wave;
        // fio lists the options given with a value (a bare `stonewall` or
        // `norandommap` is not listed).
        // Under fio's own names (an alias, `readwrite=`, listed as `rw`),
        // the last value given winning, as fio lists them.
        let canonical = |k: &str| options::lookup(k).map(|(n, _)| n.to_string()).unwrap_or_else(|_| k.to_string());
        let as_json = |o: &[jobfile::Opt]| o.iter().filter_map(|(k, v)| Some((canonical(k), serde_json::Value::from(v.clone()?)))).collect::<serde_json::Map<_, _>>();
        p.global_options = as_json(&d.opts[..d.inherited]);
        p.job_options = as_json(&d.opts[d.inherited..]);
        plans.push(p);
    }
    // fio's verify_per_group_options: a group_reporting job shares the
    // lat_percentiles of the jobs before it in its reporting group (fio
    // fails to set it up otherwise).
    for (i, b) in plans.iter().enumerate().filter(|(_, b)| b.opts.group_reporting) {
        if let Some(a) = plans[..i].iter().find(|a| a.group == b.group && a.opts.percentiles.lat != b.opts.percentiles.lat) {
            return Err(Error::usage(format!(
                "job {}: lat_percentiles={} differs from lat_percentiles={} of job {} in its reporting group, which fio refuses (\"lat_percentiles in job: {} differs from group\"): give both jobs the same, or start a new group (stonewall or new_group)",
                b.opts.name, b.opts.percentiles.lat as u8, a.opts.percentiles.lat as u8, a.opts.name, b.opts.name
            )));
        }
    }
    // One process opens a controller with our driver once: two jobs of a
    // group (which run at the same time) cannot both own it.
    let vfio = |p: &Planned| -> Vec<String> {
        p.paths.iter().filter_map(|ps| if let PathSpec::Vfio(v) = ps { Some(v.bdf.clone()) } else { None }).collect()
    };
    for (i, a) in plans.iter().enumerate() {
        let mine = vfio(a);
        let clash = plans[i + 1..].iter().filter(|b| b.wave == a.wave).find_map(|b| Some((b, vfio(b).into_iter().find(|d| mine.contains(d))?)));
        if let Some((b, bdf)) = clash {
            return Err(Error::usage(format!(
                "jobs {} and {} run at the same time (no stonewall between them) on controller {bdf} with our driver, which one process opens once: make them one job with numjobs=2 (each thread gets its own queue pair), or put stonewall in the second",
                a.opts.name, b.opts.name
            )));
        }
    }
    let normal = run.output_format.iter().any(|f| f == "normal");
    let json = run.output_format.iter().any(|f| f == "json" || f == "json+");
    let terse = run.output_format.iter().any(|f| f == "terse");
    if run.parse_only {
        // fio checks the options and prints nothing.
        return Ok(exit::OK);
    }
    let mut out: Box<dyn Write> = match &run.output {
        Some(f) => Box::new(std::fs::File::create(f).map_err(|e| Error::io(format!("cannot create --output {f}"), e))?),
        None => Box::new(std::io::stdout()),
    };
    let w = |out: &mut Box<dyn Write>, s: &str| out.write_all(s.as_bytes()).map_err(|e| Error::io("writing the output", e));
    if normal {
        let mut head = String::new();
        for p in &plans {
            head.push_str(&output::header_line(&p.opts, p.group));
            if p.opts.numjobs > 1 {
                head.push_str("...\n");
            }
        }
        head.push_str(&format!("nvme-bypass-{} (fio drop-in)\n", env!("CARGO_PKG_VERSION")));
        let n: usize = plans.iter().map(|p| p.opts.numjobs).sum();
        let threads = plans.iter().any(|p| p.opts.thread);
        head.push_str(&format!("Starting {n} {}\n", match (threads, n) {
            (true, 1) => "thread",
            (true, _) => "threads",
            (false, 1) => "process",
            (false, _) => "processes",
        }));
        w(&mut out, &head)?;
        out.flush().ok();
    }
    // Files are laid out before the disks are watched, so that the disk
    // under a file made here is found and its counters cover the jobs only.
    'layout: for p in &plans {
        // One line per job, as fio's: its files and their total size.
        if normal && !p.layout.is_empty() {
            let (n, total) = (p.layout.len(), p.layout.iter().map(|(_, b)| b).sum::<u64>());
            let line = if n == 1 { format!("{}: Laying out IO file (1 file / {}MiB)\n", p.opts.name, total >> 20) } else { format!("{}: Laying out IO files ({n} files / total {}MiB)\n", p.opts.name, total >> 20) };
            w(&mut out, &line)?;
            out.flush().ok();
        }
        for (f, size) in &p.layout {
            if stop.requested() {
                break 'layout;
            }
            if !lay_out(f, *size, !p.opts.rw.reads(), stop)? {
                break 'layout;
            }
        }
    }
    let clock = Clock::calibrate();
    // fio's disk_util: the block devices under the jobs' files, over the run.
    let devices: Vec<String> = plans.iter().flat_map(|p| p.paths.iter()).filter_map(|ps| match ps {
        PathSpec::Block(k) | PathSpec::Passthru(k) => Some(k.device.clone()),
        _ => None,
    }).collect();
    let disks = diskutil::watch(&devices);
    // Switched by ioscheduler=, put back when the run ends (on return,
    // error or unwinding alike).
    let schedulers = sched::Schedulers::default();
    let run_start = std::time::Instant::now();
    let mut ran: Vec<Ran> = vec![];
    // A job that cannot run (its file cannot be opened, the device
    // refuses it) is said and left out; the others, and later groups, run
    // and are reported, as fio goes on, which then exits 1.
    let mut job_errors: Vec<Error> = vec![];
    // The jobs up to a stonewall run at the same time, each on threads of
    // its own, as fio runs them; a stonewall's job starts when all of them
    // have ended (a new_group only starts a reporting group).
    let mut first = 0;
    while first < plans.len() && !stop.requested() {
        let g = plans[first].wave;
        let end = plans[first..].iter().position(|p| p.wave != g).map_or(plans.len(), |k| first + k);
        let members = &plans[first..end];
        let started_ms = crate::report::unix_ms();
        // fio's exitall: each reporting group of the wave shares a stop
        // that a job with exitall requests when it ends (exit_what=group),
        // or every group's (exit_what=stonewall); Ctrl-C is relayed to them.
        let exits = members.len() > 1 && members.iter().any(|p| p.opts.exitall);
        let group_stops: std::collections::BTreeMap<usize, Stop> = members.iter().map(|p| (p.group, if exits { Stop::new() } else { stop.clone() })).collect();
        let results: Vec<_> = if members.len() == 1 {
            vec![run_one(&members[0], clock, stop, &schedulers, run_start)]
        } else {
            let (group_stops, over) = (&group_stops, std::sync::atomic::AtomicBool::new(false));
            std::thread::scope(|s| {
                let schedulers = &schedulers;
                if exits {
                    s.spawn(|| {
                        while !over.load(std::sync::atomic::Ordering::Relaxed) {
                            if stop.requested() {
                                group_stops.values().for_each(Stop::request);
                            }
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                    });
                }
                let hs: Vec<_> = members
                    .iter()
                    .map(|p| {
                        s.spawn(move || {
                            let r = run_one(p, clock, &group_stops[&p.group], schedulers, run_start);
                            if p.opts.exitall {
                                match p.opts.exit_stonewall {
                                    false => group_stops[&p.group].request(),
                                    true => group_stops.values().for_each(Stop::request),
                                }
                            }
                            r
                        })
                    })
                    .collect();
                let r = hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::usage("a job's thread panicked")))).collect();
                over.store(true, std::sync::atomic::Ordering::Relaxed);
                r
            })
        };
        for (k, r) in results.into_iter().enumerate() {
            let p = &plans[first + k];
            let (threads, mut summary, spec) = match r {
                Ok(x) => x,
                // Stopped by a signal before it ran (startdelay): listed
                // below among the jobs not run, as a later group's are.
                Err(_) if stop.requested() => continue,
                // Ended by another job's exitall before it started.
                Err(_) if group_stops[&p.group].requested() && p.opts.startdelay > std::time::Duration::ZERO => {
                    eprintln!("nvme-bypass fio: job {} did not start: its group ended first (exitall) while it waited for startdelay", p.opts.name);
                    continue;
                }
                Err(e) => {
                    job_errors.push(Error::usage(format!("job {}: {}", p.opts.name, in_fio_words(&crate::error::chain(&e)))));
                    continue;
                }
            };
            summary.emulated = p.context.starts_with("measured, emulated");
            summary.simulated = p.context.starts_with("measured, simulated");
            // fio numbers threads across every job, in order, from 1.
            let number = 1 + plans[..first + k].iter().map(|q| q.opts.numjobs).sum::<usize>();
            output::write_logs(&p.opts, &threads, number);
            ran.push(Ran { plan_idx: first + k, threads, summary, spec, started_ms });
        }
        first = end;
    }
    let disk_util = diskutil::finish(&disks, run_start.elapsed().as_millis() as u64);
    // No job ran: the error is the run's (refused as bad input, exit 2).
    if ran.is_empty() && !job_errors.is_empty() && !stop.requested() {
        return Err(job_errors.remove(0));
    }
    // As fio: a signal ends the jobs running (their figures cover the time
    // run), no later group starts, the line below says so, and the exit
    // status is 128.
    let signalled = stop.requested();
    if signalled {
        let sig = stop.signal().unwrap_or(libc::SIGINT);
        let mut note = format!("\nnvme-bypass fio: terminating on signal {sig}\n");
        let skipped: Vec<&str> = plans.iter().enumerate().filter(|(i, _)| !ran.iter().any(|r| r.plan_idx == *i)).map(|(_, p)| p.opts.name.as_str()).collect();
        if !skipped.is_empty() {
            note.push_str(&format!("nvme-bypass fio: not run: {}\n", skipped.join(", ")));
        }
        w(&mut out, &note)?;
        if run.output.is_some() {
            eprint!("{note}");
        }
    }
    // Each group's aggregate bandwidth per direction (fio's `rs->agg`), the
    // base of a job's `per=` and `bw_agg`.
    let group_aggs: Vec<[f64; 2]> = (0..=group)
        .map(|g| {
            let per: Vec<[(u64, u64); 2]> = ran
                .iter()
                .filter(|r| plans[r.plan_idx].group == g)
                .map(|r| [0, 1].map(|pick| output::dir_bytes_ms(&r.threads, &r.summary, plans[r.plan_idx].opts.bs, pick)))
                .collect();
            output::group_agg(&per)
        })
        .collect();
    // fio buffers each format's report and writes them in its order of
    // formats (terse, json, json+, normal): with both, the JSON comes first.
    let mut normal_text = String::new();
    let mut failed = false;
    // fio's entries: each thread on its own, or, under group_reporting,
    // added into the entry before it (a job's clones, and the jobs after
    // it in its reporting group).
    let tds: Vec<(usize, usize)> = ran.iter().enumerate().flat_map(|(i, r)| (0..r.threads.len()).map(move |k| (i, k))).collect();
    let kinds: Vec<(bool, usize)> = tds.iter().map(|&(i, _)| (plans[ran[i].plan_idx].opts.group_reporting, plans[ran[i].plan_idx].group)).collect();
    let entries: Vec<Entry> = fio_entries(&kinds).into_iter().map(|e| Entry::of(e.iter().map(|&n| tds[n]).collect(), &ran, &plans)).collect();
    if normal {
        // Each entry's block, then each group's status.
        let blocks: Vec<Block> = entries
            .iter()
            .map(|e| {
                let p = &plans[ran[e.jobs[0].0].plan_idx];
                let last = &plans[ran[e.jobs[e.jobs.len() - 1].0].plan_idx];
                Block {
                    opts: &p.opts,
                    group: p.group,
                    threads: &e.threads,
                    summary: &e.summary,
                    started: (ran[e.jobs[0].0].started_ms / 1000) as i64,
                    context: &e.context,
                    read_back: e.read_back,
                    depth: last.opts.iodepth_reported(),
                    percentiles: &last.opts.percentiles,
                }
            })
            .collect();
        let mut text = String::from("\n");
        // One block after another, as fio prints them (no blank line).
        for b in &blocks {
            text.push_str(&output::job_block(b, group_aggs[b.group]));
        }
        // Every group's line, one whose jobs did not run (a stop before
        // it) with no figures under it, as fio's show_run_stats prints
        // groups 0 to the last.
        for g in 0..=group {
            let gb: Vec<Block> = blocks.iter().filter(|b| b.group == g).map(|b| Block { ..*b }).collect();
            text.push_str(&output::group_block(g, &gb));
        }
        if !disk_util.is_empty() {
            text.push_str("\nDisk stats (read/write):\n");
            for d in &disk_util {
                let n = |k: &str| d[k].as_u64().unwrap_or(0);
                text.push_str(&format!(
                    "  {}: ios={}/{}, merge={}/{}, ticks={}/{}, in_queue={}, util={:.2}%\n",
                    d["name"].as_str().unwrap_or("?"), n("read_ios"), n("write_ios"), n("read_merges"), n("write_merges"), n("read_ticks"), n("write_ticks"), n("in_queue"), d["util"].as_f64().unwrap_or(0.0)
                ));
            }
        }
        normal_text = text;
    }
    // The terse lines are made from the JSON's entries (fio's terse and
    // JSON outputs share its figures too), so the JSON is built for either.
    let mut terse_text = String::new();
    let mut json_text = String::new();
    if json || terse {
        let mut all: Option<serde_json::Value> = None;
        let plus = run.output_format.iter().any(|f| f == "json+");
        let elapsed_s = genesis.elapsed().as_millis().div_ceil(1000).max(1) as u64;
        for e in &entries {
            let r = &ran[e.jobs[0].0];
            let p = &plans[r.plan_idx];
            let last = &plans[ran[e.jobs[e.jobs.len() - 1].0].plan_idx];
            // One JSON entry per fio entry: a thread, or the threads fio
            // adds into one under group_reporting.
            let merged = [if e.threads.len() > 1 { ThreadResult::merged(&e.threads) } else { e.threads[0].clone() }];
            let threads: &[ThreadResult] = &merged;
            // (`elapsed` is set below, from the command's own start)
            let mut v = crate::report::fio_json(&e.summary, &r.spec, threads, r.started_ms, r.started_ms);
            let fio_version = v["fio version"].as_str().unwrap_or("nvme-bypass").to_string();
            if let Some(jobs) = v["jobs"].as_array_mut() {
                for (j, t) in jobs.iter_mut().zip(threads) {
                    // fio's latency_ns / _us / _ms: percent of I/Os per bucket.
                    let mut all = crate::measure::stats::new_histogram();
                    all.add(t.read.clat_or_lat()).expect("same bounds");
                    all.add(t.write.clat_or_lat()).expect("same bounds");
                    let b = output::lat_buckets(&all);
                    let under_usec = if p.opts.gtod_reduce { 0.0 } else { output::under_usec_share(&all) };
                    for (key, base, n) in [("latency_ns", 0usize, 10usize), ("latency_us", 10, 10), ("latency_ms", 20, 12)] {
                        j[key] = (0..n).map(|i| (output::bucket_label(base == 20, i), serde_json::Value::from(b[base + i]))).collect::<serde_json::Map<_, _>>().into();
                    }
                    if !p.opts.gtod_reduce {
                        // fio's percentiles (add_ddir_lat_json): in slat_ns,
                        // clat_ns and lat_ns as the last job's options ask,
                        // for a direction with samples; json+ adds each
                        // one's latency bins, latency (ns) -> I/Os. The one
                        // latency, when not measured apart, is in clat_ns.
                        let pc = &last.opts.percentiles;
                        let list = pc.reported();
                        for (dir, d) in [("read", &t.read), ("write", &t.write)] {
                            for key in ["slat_ns", "clat_ns", "lat_ns"] {
                                if let Some(o) = j[dir][key].as_object_mut() {
                                    o.shift_remove("percentile");
                                }
                            }
                            for (name, h) in output::percentile_sets(d, pc) {
                                let key = if d.clat.is_none() { "clat_ns".to_string() } else { format!("{name}_ns") };
                                j[dir][&key]["percentile"] = percentile_values(h, &list)
                                    .into_iter()
                                    .map(|(p, v)| (format!("{p:.6}"), serde_json::Value::from(v)))
                                    .collect::<serde_json::Map<_, _>>()
                                    .into();
                                if plus {
                                    j[dir][&key]["bins"] = bins(h);
                                }
                            }
                        }
                    }
                    if p.opts.gtod_reduce {
                        // fio records no latency under gtod_reduce: its
                        // latency stats are empty (no percentiles) and its
                        // latency buckets all 0, as the text leaves the
                        // lines out.
                        for dir in ["read", "write", "trim"] {
                            for k in ["clat_ns", "lat_ns"] {
                                j[dir][k] = serde_json::json!({"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0});
                            }
                        }
                        for key in ["latency_ns", "latency_us", "latency_ms"] {
                            if let Some(m) = j[key].as_object_mut() {
                                m.values_mut().for_each(|v| *v = 0.0.into());
                            }
                        }
                    }
                    // Several jobs in one entry: each direction's runtime
                    // is the longest of those that did it, and its rates
                    // over that, as fio's (the merged thread has the
                    // longest of all).
                    if e.jobs.len() > 1 {
                        for (dir, pick) in [("read", 0), ("write", 1)] {
                            let d = &mut j[dir];
                            let (ios, bytes) = (d["total_ios"].as_u64().unwrap_or(0), d["io_bytes"].as_u64().unwrap_or(0));
                            if ios > 0 {
                                let ms = output::dir_runtime_ms(&e.threads, pick).max(1);
                                d["runtime"] = ms.into();
                                d["iops"] = (ios as f64 * 1000.0 / ms as f64).into();
                                d["bw_bytes"] = (bytes * 1000 / ms).into();
                                d["bw"] = (bytes * 1000 / ms / 1024).into();
                            }
                        }
                    }
                    // A write job's verify phase, as fio reports it: the
                    // read direction (no latency recorded for it), beside
                    // the reads of another job of the entry if there are.
                    if let Some((ios, bytes, ms)) = e.read_back {
                        let r = &mut j["read"];
                        let own = |k: &str| r[k].as_u64().unwrap_or(0);
                        let (ios, bytes, ms) = (ios + own("total_ios"), bytes + own("io_bytes"), ms.max(own("runtime")));
                        r["io_bytes"] = bytes.into();
                        r["io_kbytes"] = (bytes / 1024).into();
                        r["total_ios"] = ios.into();
                        r["runtime"] = ms.into();
                        r["iops"] = (ios as f64 * 1000.0 / ms as f64).into();
                        r["bw_bytes"] = (bytes * 1000 / ms).into();
                        r["bw"] = (bytes * 1000 / ms / 1024).into();
                    }
                    if e.threads.len() > 1 {
                        // fio's total_run_time of an entry: its threads' added.
                        j["job_runtime"] = e.threads.iter().map(|t| t.elapsed_ns / 1_000_000).sum::<u64>().into();
                    }
                    j["latency_depth"] = last.opts.iodepth_reported().into();
                    // `bw_agg` against the group's aggregate, as the text's `per=`.
                    for (dir, pick) in [("read", 0), ("write", 1)] {
                        if j[dir]["bw_samples"].as_u64().unwrap_or(0) > 0 {
                            j[dir]["bw_agg"] = crate::report::fio_json::percent_of_agg(j[dir]["bw_mean"].as_f64().unwrap_or(0.0), group_aggs[p.group][pick]).into();
                        }
                    }
                    j["jobname"] = p.opts.name.clone().into();
                    // fio's `elapsed`: whole seconds since it started
                    // (ramp and layout included), rounded up.
                    j["elapsed"] = elapsed_s.into();
                    j["groupid"] = p.group.into();
                    // fio lists the options the job was given, as given
                    // (its name too), apart from the inherited globals; an
                    // entry of several jobs lists its last job's, as fio's.
                    j["job options"] = last.job_options.clone().into();
                    // fio's `desc`, after latency_window, when given.
                    if let Some(d) = p.opts.description().filter(|d| !d.is_empty()) {
                        j["desc"] = d.into();
                    }
                    j["nvme_bypass"]["figures"] = e.context.clone().into();
                    in_order(j, &JOB_ORDER);
                    if terse {
                        let terse_list = last.opts.percentiles.reported();
                        let description = p.opts.description();
                        terse_text.push_str(&terse::line(&terse::Line {
                            job: j,
                            version: run.terse_version.unwrap_or(3),
                            fio_version: &fio_version,
                            under_usec,
                            group_agg: group_aggs[p.group],
                            disk_util: &disk_util,
                            percentiles: if p.opts.gtod_reduce || !(last.opts.percentiles.clat || last.opts.percentiles.lat) { &[] } else { &terse_list },
                            lat_percentiles: last.opts.percentiles.lat,
                            description,
                        }));
                    }
                }
            }
            // fio's "global options": the [global] section's and the
            // command line's before the first --name; absent without any.
            if let Some(o) = v.as_object_mut() {
                o.remove("global options");
            }
            match &mut all {
                None => {
                    if !p.global_options.is_empty() {
                        v["global options"] = p.global_options.clone().into();
                    }
                    // Ours at the top: the first job's figures.
                    v["nvme_bypass"] = r.summary.to_json();
                    all = Some(v)
                }
                Some(a) => {
                    let more = v["jobs"].as_array().cloned().unwrap_or_default();
                    if let Some(jobs) = a["jobs"].as_array_mut() {
                        jobs.extend(more);
                    }
                }
            }
        }
        if let Some(mut a) = all.filter(|_| json) {
            if !disk_util.is_empty() {
                a["disk_util"] = disk_util.clone().into();
            }
            in_order(&mut a, &["fio version", "timestamp", "timestamp_ms", "time", "global options", "jobs", "disk_util"]);
            json_text = format!("{}\n", crate::report::fio_layout::to_string(&a));
        }
    }
    w(&mut out, &terse_text)?;
    w(&mut out, &json_text)?;
    w(&mut out, &normal_text)?;
    out.flush().ok();
    for r in &ran {
        if let Some(x) = engine::recovery_summary(&r.threads) {
            eprintln!("nvme-bypass: {x}");
        }
        if r.summary.errors > 0 || r.summary.mismatches > 0 {
            failed = true;
            if r.summary.mismatches > 0 {
                eprintln!("nvme-bypass: verify found {} mismatching blocks; first: {}", r.summary.mismatches, in_fio_words(r.summary.first_mismatch.as_deref().unwrap_or("?")));
            }
            if r.summary.errors > 0 {
                eprintln!("nvme-bypass: {} I/Os failed; first: {}", r.summary.errors, r.summary.first_error.as_deref().unwrap_or("?"));
            }
        }
    }
    for e in &job_errors {
        eprintln!("nvme-bypass fio: error: {e} (not run; the other jobs' figures are above)");
    }
    Ok(if signalled {
        exit::SIGNALLED
    } else if failed || !job_errors.is_empty() {
        exit::RUN_FAILED
    } else {
        exit::OK
    })
}

const HELP: &str = "nvme-bypass fio: run fio command lines and job files unchanged, with `fio` replaced by `nvme-bypass fio`.

usage: nvme-bypass fio [--output=FILE] [--output-format=normal|terse|json|json+[,...]] [--minimal] [--terse-version=2..5] [--append-terse] [--section=NAME] [--parse-only] [--readonly]
                       [--name=JOB --key=value ...]... [JOBFILE]...

Options are fio's (--key=value, --key value, bare booleans). Engines:
  ioengine=io_uring|libaio|psync   block path (/dev/nvmeXnY or a regular file, laid out first if needed)
  ioengine=io_uring_cmd            NVMe passthrough on /dev/ngXnY (cmd_type=nvme)
  ioengine=nvme-bypass-vfio        our userspace driver; filename=0000\\:01\\:00.0 or 'trtype=PCIe traddr=0000.01.00.0 ns=1' (a vfio-pci bound controller)
  ioengine=nvme-bypass-sim         our driver on the in-process simulated controller
Options that are not supported are refused by name, saying whether ignoring them would change the result.
Jobs run at the same time up to a stonewall, which waits for them; stonewall and new_group start a reporting group. See docs/fio.md.";

#[cfg(test)]
mod tests {
    use super::*;

    /// The check that keeps a write job off a mounted filesystem finds
    /// this machine's mounted block devices (read only: nothing is opened).
    #[test]
    fn messages_of_the_paths_read_in_fios_words() {
        assert_eq!(
            in_fio_words("--ioengine psync does one I/O at a time per thread, so --iodepth 4 cannot be honoured: use --iodepth 1, and --numjobs for parallel I/O"),
            "ioengine=psync does one I/O at a time per thread, so iodepth=4 cannot be honoured: use iodepth=1, and numjobs for parallel I/O"
        );
        assert_eq!(in_fio_words("a regular file: use --backend block for files"), "a regular file: use ioengine=io_uring, libaio or psync for files");
        assert_eq!(in_fio_words("--batch-complete 8 is more than --iodepth 4"), "iodepth_batch_complete_min/_max=8 is more than iodepth=4");
        // verify in fio's spelling, never the bench flag's.
        assert_eq!(
            in_fio_words("--verify needs at least --iodepth (8) distinct I/O units per thread, --size gives 4; use a larger --size"),
            "verify= needs at least iodepth=8 distinct I/O units per thread, size gives 4; use a larger size"
        );
        assert_eq!(in_fio_words("LBA 0: no verify stamp (block never written with --verify)"), "LBA 0: no verify stamp (block never written with verify=)");
        assert_eq!(in_fio_words("--sqthread-poll-cpu needs --sqthread-poll"), "sqthread_poll_cpu needs sqthread_poll");
    }

    #[test]
    fn threads_are_added_into_entries_as_fios_group_reporting_adds_them() {
        // (group_reporting, group) of each thread, in order.
        let (gr, plain) = (true, false);
        // Two jobs of one group, each of two clones, with group_reporting: one entry.
        assert_eq!(fio_entries(&[(gr, 0), (gr, 0), (gr, 0), (gr, 0)]), [vec![0, 1, 2, 3]]);
        // Without it: one per thread.
        assert_eq!(fio_entries(&[(plain, 0), (plain, 0), (plain, 0)]), [vec![0], vec![1], vec![2]]);
        // A new group starts a new entry.
        assert_eq!(fio_entries(&[(gr, 0), (gr, 0), (gr, 1), (gr, 1)]), [vec![0, 1], vec![2, 3]]);
        // A plain job after a group_reporting one is its own; a
        // group_reporting job after a plain one of its group is added into
        // it, as fio's loop adds it ("a: (groupid=0, jobs=3)" for jobs a
        // plain, b and c with group_reporting).
        assert_eq!(fio_entries(&[(gr, 0), (plain, 0), (plain, 0)]), [vec![0], vec![1], vec![2]]);
        assert_eq!(fio_entries(&[(plain, 0), (gr, 0), (gr, 0)]), [vec![0, 1, 2]]);
        assert!(fio_entries(&[]).is_empty());
    }

    #[test]
    fn mounted_block_devices_are_found() {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let found = mounts.lines().filter_map(|l| {
            let mut f = l.split_whitespace();
            let (src, at) = (f.next()?, f.next()?);
            std::fs::metadata(src).ok().filter(|m| m.file_type().is_block_device()).map(|_| (src.to_string(), at.to_string()))
        });
        let mut any = false;
        for (src, at) in found {
            let seen = mounted_at(Path::new(&src));
            assert!(seen.is_some(), "{src} is mounted at {at}, not found");
            any = true;
        }
        if !any {
            eprintln!("skipped: no block device is mounted here");
        }
        assert_eq!(mounted_at(Path::new("/nonexistent/dev")), None);
    }

    #[test]
    fn a_write_job_on_a_mounted_device_is_refused_before_anything_opens() {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let Some(dev) = mounts.lines().filter_map(|l| l.split_whitespace().next()).find(|s| std::fs::metadata(s).is_ok_and(|m| m.file_type().is_block_device())) else {
            eprintln!("skipped: no block device is mounted here");
            return;
        };
        let mut o = JobOpts { name: "w".into(), ..Default::default() };
        for (k, v) in [("filename", dev), ("rw", "randwrite"), ("ioengine", "libaio")] {
            o.set(k, Some(v)).unwrap();
        }
        // plan() only stats the device; the run would open it.
        let e = plan(o, 0, false, &[]).err().expect("refused").to_string();
        assert!(e.contains("mounted at") && e.contains("allow_mounted_write=1"), "{e}");
    }
}
