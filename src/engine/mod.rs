//! The benchmark engine: one thread per job, each with its own queue, that
//! keeps the queue full, timestamps every batch, records every I/O's
//! latency, verifies data when asked, and accounts for its CPU time,
//! separating the polls that found nothing from useful work.
//!
//! `job` says what to run and holds what was measured; this file starts
//! the threads and collects their results; `phase` is each thread's loop,
//! `watchdog` its timeouts and retries, `verify` its data checks.

pub mod job;
pub(crate) mod phase;
pub mod progress;
pub(crate) mod slots;
pub mod verify;
pub mod watchdog;
pub mod workload;

#[cfg(test)]
mod tests;

pub use job::{DirResult, JobSpec, Progress, RecoveryCounters, Reliability, Stop, ThinkSpec, ThreadResult, VerifySpec};
pub use watchdog::recovery_summary;

use crate::backend::{BackendError, Geometry, QueueParams, Target};
use crate::engine::phase::{worker, Ctx};
use crate::measure::clock::Clock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

/// Run `spec` on `target` with `numjobs` threads. Returns one result per thread.
pub fn run(target: &dyn Target, spec: &JobSpec, clock: Clock, status_line: bool) -> Result<Vec<ThreadResult>, BackendError> {
    let progress: Vec<Progress> = (0..spec.numjobs).map(|_| Progress::default()).collect();
    let progress = &progress[..];
    let finished = progress::Finished::default();
    let geo = target.geometry();
    let polled = target.polled();
    validate(spec, &geo)?;
    if let Some(why) = target.write_protected().filter(|_| spec.rw.writes()) {
        return Err(BackendError::Unsupported(format!("{why}: a job that writes cannot run; run a read pattern (--rw read or randread), or lift the protection (nvme set-feature --feature-id 0x84, Namespace Write Protection)")));
    }
    let new_pass = || target.new_pass();
    let new_pass: Option<&(dyn Fn() + Sync)> = target.wants_passes().then_some(&new_pass);
    let params = QueueParams { depth: spec.iodepth, buf_size: spec.bs, batch: spec.batch };
    // Each thread opens its own queue (a queue pair, or an io_uring ring:
    // rings set up with SINGLE_ISSUER or a registered fd belong to the
    // thread that made them), then all start together.
    let barrier = Barrier::new(spec.numjobs);
    let open_failed = AtomicBool::new(false);
    let results: Vec<Result<ThreadResult, BackendError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.numjobs)
            .map(|i| {
                let barrier = &barrier;
                let finished = &finished;
                let open_failed = &open_failed;
                let ctx = Ctx { spec, clock, geo, progress: &progress[i], polled, new_pass };
                std::thread::Builder::new()
                    .name(format!("nvb-job{i}"))
                    .spawn_scoped(s, move || {
                        let cpu = (!spec.cpus.is_empty()).then(|| spec.cpus[i % spec.cpus.len()]);
                        let opened = match cpu.map(nvme_hal::pin_current_thread) {
                            Some(Err(e)) => Err(BackendError::os(
                                format!("pin thread {i} to CPU {}", cpu.unwrap_or(0)),
                                "check --cpus against the CPUs this machine has",
                                e,
                            )),
                            _ => target.open_queue(params),
                        };
                        if opened.is_err() {
                            open_failed.store(true, Ordering::Release);
                        }
                        // Counted as finished however the thread ends, a
                        // panic included: the sampler waits for every one.
                        let done = progress::FinishOnDrop(finished);
                        barrier.wait();
                        let mut q = opened?;
                        if open_failed.load(Ordering::Acquire) {
                            // Another thread could not open its queue: nobody runs.
                            return Err(BackendError::Invalid("another thread could not open its queue".into()));
                        }
                        let r = worker(&ctx, &mut *q, i);
                        drop(done);
                        // Delete the queue pair on this thread, before the target goes;
                        // a failure to is the run's error (the device misbehaved).
                        let closed = q.close();
                        let r = r.and_then(|r| closed.map(|()| r));
                        r.map(|mut r| {
                            r.cpu = cpu;
                            r
                        })
                    })
                    .expect("spawn worker")
            })
            .collect();
        let readings = progress::sample_loop(spec, progress, &finished, status_line);
        handles
            .into_iter()
            .zip(readings)
            .map(|(h, r)| {
                h.join().expect("worker panicked").map(|mut t| {
                    t.samples = progress::samples_within(&r, t.start_mono_ns, t.end_mono_ns);
                    if spec.log_ns.is_some_and(|l| l > 0) {
                        // The thread's own entries, from the start of the
                        // measured interval, as fio's first entry covers
                        // the job's first interval; no last, partial one
                        // (fio writes none for these).
                        let mut from = vec![t.progress0];
                        from.extend(t.lat_log.iter().filter(|e| !e.partial).map(|e| e.progress));
                        t.log = progress::samples_within(&from, t.start_mono_ns, t.end_mono_ns);
                    }
                    t
                })
            })
            .collect()
    });
    // Report the first real error, not the "another thread" ones it caused.
    if let Some(i) = results.iter().position(|r| matches!(r, Err(e) if !e.to_string().starts_with("another thread"))) {
        return Err(results.into_iter().nth(i).unwrap().unwrap_err());
    }
    results.into_iter().collect()
}

/// Check the job against the namespace before touching it.
pub fn validate(spec: &JobSpec, geo: &Geometry) -> Result<(), BackendError> {
    let lba = geo.lba_size as usize;
    if spec.bs == 0 {
        return Err(BackendError::Invalid(format!("--bs 0 moves nothing: give at least one {lba}-byte block")));
    }
    if spec.bs % lba != 0 {
        return Err(BackendError::Invalid(format!(
            "--bs {} is not a multiple of the {lba}-byte logical block of the namespace (or, for a file, the filesystem's O_DIRECT alignment); use a multiple such as {}",
            spec.bs,
            lba.max(4096)
        )));
    }
    if spec.bs > geo.max_transfer {
        return Err(BackendError::Invalid(format!(
            "--bs {} exceeds the largest transfer this path allows ({} bytes: a controller's MDTS, or the kernel's limit for the device or file); splitting would measure two I/Os as one, so use --bs {} or less",
            spec.bs, geo.max_transfer, geo.max_transfer
        )));
    }
    if spec.bs / lba > nvme_spec::cmd::MAX_BLOCKS_PER_COMMAND as usize {
        return Err(BackendError::Invalid(format!("--bs {} is more than 65536 blocks", spec.bs)));
    }
    if spec.iodepth == 0 {
        return Err(BackendError::Invalid("--iodepth must be at least 1".into()));
    }
    if spec.batch_complete > spec.iodepth {
        return Err(BackendError::Invalid(format!(
            "--batch-complete {} is more than --iodepth {}: a reap waits for that many completions, and no more can be in flight; use at most {}",
            spec.batch_complete, spec.iodepth, spec.iodepth
        )));
    }
    if spec.iodepth > 65535 {
        return Err(BackendError::Invalid(format!("--iodepth {} is above 65535, the most any NVMe queue holds", spec.iodepth)));
    }
    if spec.offset % lba as u64 != 0 {
        return Err(BackendError::Invalid(format!("--offset {} is not a multiple of the {lba}-byte block", spec.offset)));
    }
    let cap = geo.bytes();
    let namespace = format!("the namespace ({cap} bytes = {} blocks of {lba})", geo.blocks);
    if spec.offset >= cap {
        return Err(BackendError::Invalid(format!("--offset {} is beyond {namespace}; use an --offset below {cap}", spec.offset)));
    }
    if spec.size_given && spec.size == 0 {
        return Err(BackendError::Invalid(format!(
            "--size 0 holds no I/O; give a --size of at least --bs {} (up to {} bytes from this --offset), or leave --size out for the rest of the namespace",
            spec.bs,
            cap - spec.offset
        )));
    }
    if spec.size_given && spec.offset + spec.size > cap {
        return Err(BackendError::Invalid(format!(
            "--offset {} + --size {} is beyond {namespace}; use a --size of {} to {} bytes from this --offset",
            spec.offset,
            spec.size,
            (spec.bs as u64).min(cap - spec.offset),
            cap - spec.offset
        )));
    }
    // What the region is, in the words of the options that made it.
    let region = if spec.size_given {
        format!("--size {}", spec.size)
    } else {
        format!("{namespace} from --offset {}", spec.offset)
    };
    let fix = if spec.size_given { "use a larger --size or a smaller --bs" } else { "use a smaller --offset or --bs" };
    let units = spec.size / spec.bs as u64;
    let per_thread = if spec.verify.is_some() { units / spec.numjobs as u64 } else { units };
    if per_thread == 0 {
        let per = if spec.verify.is_some() && spec.numjobs > 1 { format!(" for each of --numjobs {} (--verify gives each its own slice)", spec.numjobs) } else { String::new() };
        return Err(BackendError::Invalid(format!("{region} holds no whole --bs {} I/O{per}; {fix}", spec.bs)));
    }
    if spec.rw.random() {
        spec.distribution.check(per_thread / spec.files.max(1), spec.bs as u64).map_err(BackendError::Invalid)?;
    }
    if spec.verify.is_some() && per_thread < spec.iodepth as u64 && spec.rw.random() {
        return Err(BackendError::Invalid(format!(
            "--verify needs at least --iodepth ({}) distinct I/O units per thread, {region} gives {per_thread}; {fix}, or a smaller --iodepth",
            spec.iodepth
        )));
    }
    if spec.rwmixread > 100 {
        return Err(BackendError::Invalid("--rwmixread is a percentage, 0..=100".into()));
    }
    if spec.numjobs == 0 {
        return Err(BackendError::Invalid("--numjobs must be at least 1".into()));
    }
    Ok(())
}
