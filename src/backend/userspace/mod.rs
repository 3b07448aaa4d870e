//! The userspace driver as a backend: [`nvme_driver`] queue pairs on any
//! register window and DMA allocator. The `sim` and `vfio` backends are this
//! type over the simulated controller and over a VFIO device.

pub mod sim;
pub mod vfio;

use crate::backend::{BackendError, Geometry, Io, IoDone, IoQueue, IoStatus, Op, QueueCounters, QueueParams, Recovery, Scramble, Target};
use nvme_driver::{Controller, DataPtr, IoCmd, QueuePair};
use nvme_spec::NvmOpcode;
use nvme_hal::{DmaRegion, RegisterWindow};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SUBSYSTEM_RESET: &str = "subsystem reset";

/// The run's fact for CSTS.NSSRO having read 1 (`occurred`), found at
/// bring-up or, `during_run`, by a reset while the run had the controller.
fn subsystem_reset_fact(occurred: bool, during_run: bool) -> Option<(String, String)> {
    let when = if during_run {
        "at a reset during the run: an NVM subsystem reset had reset this controller while this driver had it"
    } else {
        "at bring-up: an NVM subsystem reset had reset this controller since it was last brought up"
    };
    occurred.then(|| (SUBSYSTEM_RESET.into(), format!("CSTS.NSSRO read 1 {when}; cleared, as Linux's driver clears it")))
}

/// Where a queue's interrupt arrives: a function giving the eventfd of an
/// MSI-X vector (VFIO), or none (polled).
pub type IrqSource = Arc<dyn Fn(u16) -> std::io::Result<std::os::fd::OwnedFd> + Send + Sync>;

/// A controller brought up by our driver, one namespace of it, shared by
/// the benchmark threads only to create and delete their queue pairs.
pub struct UserspaceTarget<R: RegisterWindow + 'static> {
    name: String,
    ctrl: Arc<Mutex<Option<Controller<R>>>>,
    geometry: Geometry,
    /// Most commands one of our I/O queue pairs holds on this controller.
    max_depth: usize,
    /// Why no more: the controller's CAP.MQES, or our command identifiers.
    depth_limit: String,
    facts: Vec<(String, String)>,
    /// Interrupt-driven completions: each queue's eventfd comes from here.
    irqs: Option<IrqSource>,
    /// Why the namespace takes no writes (Identify Namespace NSATTR).
    write_protected: Option<String>,
}

impl<R: RegisterWindow + 'static> UserspaceTarget<R> {
    /// Completions wake the waiting thread through MSI-X (the controller was
    /// configured with `ControllerConfig::interrupts`).
    pub fn with_interrupts(mut self, irqs: IrqSource) -> Self {
        self.irqs = Some(irqs);
        self.facts.push(("completions".into(), "interrupt driven: MSI-X vector qid, the thread sleeps on its eventfd when idle; with --cpus the vector is steered to its thread's CPU".into()));
        self
    }

    /// One more fact for the report's list.
    pub fn add_fact(&mut self, key: &str, value: &str) {
        self.facts.push((key.into(), value.into()));
    }

    /// Wrap a brought-up controller; `nsid` must be active.
    pub fn new(name: &str, mut ctrl: Controller<R>, nsid: u32) -> Result<Self, BackendError> {
        let ns = crate::backend::namespace::usable(&mut ctrl, nsid)?;
        let geometry = Geometry { nsid, lba_size: ns.lba_size(), blocks: ns.nsze, max_transfer: ctrl.max_transfer() };
        // Identify data is the device's word: refuse what would break the
        // arithmetic later (block sizes are 512 B..64 KiB in practice).
        let lba = ns.lba_size();
        if !(512..=65536).contains(&lba) || ns.nsze.checked_mul(lba as u64).is_none() {
            return Err(BackendError::Unsupported(format!(
                "namespace {nsid} reports {} blocks of {lba} bytes (LBADS {}), which this tool cannot use; check the namespace's format with `nvme-bypass info`",
                ns.nsze,
                ns.current_format().lbads
            )));
        }
        let id = ctrl.identify();
        let mut facts = vec![
            ("model".into(), id.mn.clone()),
            ("serial".into(), id.sn.clone()),
            ("firmware".into(), id.fr.clone()),
            ("nvme version".into(), ctrl.version().to_string()),
            ("max transfer".into(), format!("{} KiB (MDTS {})", ctrl.max_transfer() >> 10, id.mdts)),
            ("queue pairs granted".into(), ctrl.io_queues_granted().to_string()),
        ];
        if id.hmpre > 0 || id.hmmin > 0 {
            // A DRAM-less SSD keeps its mapping tables in host memory when
            // given some; both this driver and Linux's give up to 128 MiB
            // (nvme_setup_host_mem, max_host_mem_size_mb).
            let asked = format!("the controller asks for {} MiB (HMPRE; at least {} MiB, HMMIN)", (id.hmpre as u64 * 4096) >> 20, (id.hmmin as u64 * 4096) >> 20);
            let got = match (ctrl.host_memory(), ctrl.host_memory_refused()) {
                (Some(bytes), _) => format!("{asked} and has {} MiB, as Linux's driver gives it (up to 128 MiB; --host-memory-max-mb)", bytes >> 20),
                (None, why) => format!(
                    "{asked} and has none: {}; Linux's driver gives up to 128 MiB (--host-memory-max-mb sets ours), so a DRAM-less SSD can be slower here than on the kernel paths for reasons of its own, not the driver's",
                    why.unwrap_or("not given")
                ),
            };
            facts.push(("host memory buffer".into(), got));
        }
        facts.extend(subsystem_reset_fact(ctrl.subsystem_reset_occurred(), false));
        let (mqes, max_depth) = (ctrl.max_queue_entries(), ctrl.max_io_queue_depth());
        let depth_limit = if ctrl.max_io_queue_entries() < mqes {
            format!(
                "the controller takes queues of up to {mqes} (CAP.MQES {}), but this driver's queues stop at {} (a command identifier names its command in 12 bits)",
                mqes.zeros_based(),
                ctrl.max_io_queue_entries()
            )
        } else {
            format!("the controller's largest queue is {mqes} (CAP.MQES {}) and a ring of N entries holds N - 1 commands", mqes.zeros_based())
        };
        Ok(UserspaceTarget {
            name: name.into(),
            ctrl: Arc::new(Mutex::new(Some(ctrl))),
            geometry,
            max_depth,
            depth_limit,
            irqs: None,
            facts,
            write_protected: ns.write_protected().then(|| format!("namespace {nsid} is write protected (Identify Namespace NSATTR bit 0)")),
        })
    }

    /// Shut the controller down now (NVMe 1.4c §7.6.2) and say how it went;
    /// queues still open find it gone. Dropping the target does the same and
    /// prints a warning if it failed.
    pub fn shutdown(&self) -> Result<(), BackendError> {
        let ctrl = self.ctrl.lock().unwrap_or_else(|p| p.into_inner()).take();
        match ctrl {
            Some(c) => c.shutdown().map_err(Into::into),
            None => Ok(()),
        }
    }

    /// Run `f` with the controller (admin commands, identify).
    pub fn with_controller<T>(&self, f: impl FnOnce(&mut Controller<R>) -> T) -> Option<T> {
        self.ctrl.lock().unwrap().as_mut().map(f)
    }
}

impl<R: RegisterWindow + 'static> Target for UserspaceTarget<R> {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn geometry(&self) -> Geometry {
        self.geometry
    }
    fn polled(&self) -> bool {
        self.irqs.is_none()
    }
    fn write_protected(&self) -> Option<String> {
        self.write_protected.clone()
    }
    fn describe(&self) -> Vec<(String, String)> {
        let mut facts = self.facts.clone();
        // One found by a reset during the run (the flag stays set).
        let at_bring_up = facts.iter().any(|(k, _)| k == SUBSYSTEM_RESET);
        if !at_bring_up {
            facts.extend(subsystem_reset_fact(self.with_controller(|c| c.subsystem_reset_occurred()) == Some(true), true));
        }
        facts
    }
    fn open_queue(&self, p: QueueParams) -> Result<Box<dyn IoQueue>, BackendError> {
        // Refused before any command reaches the controller.
        if p.depth == 0 {
            return Err(BackendError::Invalid("--iodepth must be at least 1".into()));
        }
        if p.depth > self.max_depth {
            return Err(BackendError::Invalid(format!(
                "--iodepth {} is more than one queue holds here: {}; use --iodepth {} or less",
                p.depth, self.depth_limit, self.max_depth
            )));
        }
        let mut guard = self.ctrl.lock().unwrap();
        let ctrl = guard.as_mut().ok_or_else(|| BackendError::Invalid("controller already shut down".into()))?;
        // A ring of N entries holds N-1 commands; max_depth + 1 fits a u32.
        let entries = p.depth as u32 + 1;
        if p.buf_size > self.geometry.max_transfer {
            return Err(BackendError::Invalid(format!(
                "--bs {} is above the controller's maximum transfer of {} bytes (MDTS); use --bs {} or less",
                p.buf_size, self.geometry.max_transfer, self.geometry.max_transfer
            )));
        }
        // PRP lists for this job's block size, not the controller's MDTS.
        let qp = ctrl.create_io_queue_pair_for(entries, p.buf_size)?;
        let generation = ctrl.generation();
        let stride = p.buf_size.next_multiple_of(4096);
        // The buffers belong to the queue pair in the controller's books: it
        // keeps them as long as it may write into them, whatever this handle does.
        let bufs = match stride.checked_mul(p.depth).ok_or(BackendError::Invalid(format!(
            "--bs {} x --iodepth {} does not fit the address space; use smaller values",
            p.buf_size, p.depth
        ))) {
            Ok(len) => ctrl.alloc_queue_buffer(&qp, len).map_err(BackendError::from),
            Err(e) => Err(e),
        };
        let irq = match (&self.irqs, &bufs) {
            (Some(f), Ok(_)) => f(qp.qid()).map(Some).map_err(|e| {
                BackendError::os(format!("the interrupt eventfd of queue {}", qp.qid()), "use polled completions (drop --interrupts)", e)
            }),
            _ => Ok(None),
        };
        let (bufs, irq) = match (bufs, irq) {
            (Ok(b), Ok(i)) => (b, i),
            (Err(e), _) | (_, Err(e)) => {
                // Give the queue back before reporting why it cannot be used.
                return Err(match ctrl.delete_io_queue_pair(qp) {
                    Ok(()) => e,
                    Err(delete) => BackendError::QueueSetup { source: Box::new(e), delete },
                });
            }
        };
        Ok(Box::new(UserspaceQueue {
            irq,
            qp: Some(qp),
            ctrl: self.ctrl.clone(),
            bufs,
            stride,
            nsid: self.geometry.nsid,
            lba_size: self.geometry.lba_size,
            blocks: self.geometry.blocks,
            batch: p.batch,
            depth: p.depth,
            generation,
            retired: QueueCounters::default(),
        }))
    }
}

impl<R: RegisterWindow + 'static> Drop for UserspaceTarget<R> {
    fn drop(&mut self) {
        // A shutdown that failed (one that did not complete within RTD3E,
        // say) is the user's to know: the device was not handed back reset.
        if let Err(e) = self.shutdown() {
            eprintln!("nvme-bypass: warning: {}: shutting the controller down: {e}", self.name);
        }
    }
}

/// One thread's queue pair and its buffers.
pub struct UserspaceQueue<R: RegisterWindow + 'static> {
    /// The eventfd of this queue's MSI-X vector, when interrupt driven.
    irq: Option<std::os::fd::OwnedFd>,
    qp: Option<QueuePair<R>>,
    ctrl: Arc<Mutex<Option<Controller<R>>>>,
    bufs: DmaRegion,
    stride: usize,
    nsid: u32,
    lba_size: u32,
    /// The namespace's size in blocks when the run started.
    blocks: u64,
    batch: usize,
    depth: usize,
    /// The controller's reset count when this queue pair was created.
    generation: u64,
    /// Counters of the queue pairs this one replaced (recovery).
    retired: QueueCounters,
}

impl<R: RegisterWindow + 'static> UserspaceQueue<R> {
    #[inline]
    fn qp(&mut self) -> &mut QueuePair<R> {
        self.qp.as_mut().expect("queue pair present until drop")
    }
}

impl<R: RegisterWindow + 'static> UserspaceQueue<R> {
    /// Post `ios` as one batch and ring the doorbell once; returns how many
    /// were posted (fewer when the queue filled up).
    #[inline(always)]
    fn post(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        let (nsid, lba_size, stride, base) = (self.nsid, self.lba_size as usize, self.stride, self.bufs.iova());
        let qp = self.qp.as_mut().expect("queue pair");
        let posted = qp.submit_each(nsid, ios, |io| {
            let op = match io.op {
                Op::Read => NvmOpcode::Read,
                Op::Write => NvmOpcode::Write,
                Op::Flush => NvmOpcode::Flush,
            };
            let data = DataPtr { iova: base + (io.buf as usize * stride) as u64, len: io.blocks as usize * lba_size };
            IoCmd { op, slba: io.lba, blocks: io.blocks, data, tag: io.tag }
        });
        qp.ring();
        Ok(posted?)
    }

    /// Delete the queue pair on the controller (if it is still up), so the
    /// controller forgets it. If that fails, the controller keeps the
    /// queue's memory and buffers in quarantine (never reused while it may
    /// still write into them) and the error says so.
    fn delete(&mut self) -> Result<(), BackendError> {
        let Some(qp) = self.qp.take() else { return Ok(()) };
        let mut guard = self.ctrl.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(ctrl) => ctrl.delete_io_queue_pair(qp).map_err(BackendError::from),
            None => Ok(()),
        }
    }
}

impl<R: RegisterWindow + 'static> Drop for UserspaceQueue<R> {
    fn drop(&mut self) {
        // Closed without close() (an error path): Drop cannot return the
        // error, so it is said here.
        if let Err(e) = self.delete() {
            eprintln!("nvme-bypass: warning: {e}");
        }
    }
}

impl<R: RegisterWindow + 'static> IoQueue for UserspaceQueue<R> {
    fn retry_delays(&self) -> [Duration; 3] {
        self.ctrl.lock().unwrap().as_ref().map_or([Duration::ZERO; 3], |c| c.retry_delays())
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn close(mut self: Box<Self>) -> Result<(), BackendError> {
        self.delete()
    }

    #[inline]
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        // --batch N: ring the doorbell every N commands; 0: once per call.
        let batch = if self.batch == 0 { ios.len().max(1) } else { self.batch };
        let (mut n, mut rest) = (0, ios);
        loop {
            let (chunk, more) = rest.split_at(batch.min(rest.len()));
            let posted = self.post(chunk)?;
            n += posted;
            if posted < chunk.len() || more.is_empty() {
                return Ok(n); // done, or the queue is full
            }
            rest = more;
        }
    }

    /// Interrupt driven: reap; if nothing is there, sleep on the queue's
    /// eventfd (at most 100 ms at a time, so the watchdog and Ctrl-C still
    /// run), then reap again. Polled: spin.
    fn wait(&mut self, out: &mut [IoDone], min: usize) -> Result<usize, BackendError> {
        let mut n = 0;
        while n < min {
            n += self.poll(&mut out[n..])?;
            if n >= min {
                break;
            }
            let Some(fd) = self.irq.as_ref() else { continue };
            // Before sleeping, tell the controller which entries were
            // consumed, as Linux's nvme_irq does after every pass: one
            // that signals a vector again only once its queue's head moves
            // (the head doorbell otherwise waits for a batch of entries)
            // would never wake us.
            if let Some(qp) = self.qp.as_mut() {
                qp.ring_cq();
            }
            use std::os::fd::AsFd;
            crate::measure::marker::wait();
            let ready = crate::sys::poll_readable(fd.as_fd(), 100);
            if let Ok(true) = ready {
                let _ = crate::sys::read_eventfd(fd.as_fd());
                // (a wait that timed out is left open: the next replaces
                // it, and the pass it ended is the loop's own to count)
                crate::measure::marker::woke();
            }
            let ready = ready.map_err(|e| BackendError::os("wait for the queue's interrupt (poll)", "", e))?;
            if !ready {
                return Ok(n); // timed out: let the caller look at the clock
            }
        }
        Ok(n)
    }

    fn prefetch_completions(&self) {
        if let Some(qp) = self.qp.as_ref() {
            qp.prefetch_completions();
        }
    }

    #[inline]
    fn ready(&self, n: usize) -> Option<bool> {
        Some(self.qp.as_ref().is_some_and(|q| q.completions_ready(n)))
    }

    #[inline]
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError> {
        let n = self.qp().poll_into(out, |o, c| {
            if c.ok() {
                o.tag = c.tag;
                o.status = IoStatus::Ok;
            } else {
                *o = failed(c);
            }
        });
        Ok(n)
    }

    fn buf_write(&mut self, buf: u32, off: usize, data: &[u8]) {
        self.bufs.copy_from(buf as usize * self.stride + off, data);
    }

    fn buf_read(&self, buf: u32, off: usize, out: &mut [u8]) {
        self.bufs.copy_to(buf as usize * self.stride + off, out);
    }

    fn buf_scramble(&mut self, buf: u32, len: usize, s: Scramble) {
        assert!(len <= self.stride);
        s.to_region(&self.bufs, buf as usize * self.stride, len);
    }

    fn counters(&self) -> QueueCounters {
        let s = self.qp.as_ref().map(|q| q.stats()).unwrap_or_default();
        let r = &self.retired;
        QueueCounters {
            sq_doorbells: r.sq_doorbells + s.sq_doorbells,
            cq_doorbells: r.cq_doorbells + s.cq_doorbells,
            mmio_writes: r.mmio_writes + s.mmio_doorbells,
            syscalls: 0,
            rejected_completions: r.rejected_completions + s.rejected(),
        }
    }

    fn describe(&self) -> String {
        match &self.qp {
            Some(q) => format!("I/O queue pair qid {} ({} entries{})", q.qid(), q.depth() + 1, if self.irq.is_some() { ", MSI-X vector " .to_string() + &q.qid().to_string() } else { String::new() }),
            None => "no queue".into(),
        }
    }

    fn in_flight(&self) -> usize {
        self.qp.as_ref().map(|q| q.outstanding()).unwrap_or(0)
    }

    fn processing_paused(&self) -> Option<Duration> {
        self.ctrl.lock().unwrap().as_ref().and_then(|c| c.processing_paused())
    }

    fn check_health(&mut self, timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        let ctrl = self.ctrl.clone();
        let mut guard = ctrl.lock().unwrap();
        let ctrl = guard.as_mut().ok_or_else(|| BackendError::Invalid("controller already shut down".into()))?;
        if ctrl.is_failed() {
            return Err(BackendError::Failed("the controller was given up after a failed recovery on another queue".into()));
        }
        if ctrl.generation() != self.generation {
            let note = "the controller was reset by another thread's recovery: queue re-created".to_string();
            return self.recreate(ctrl, timeout, Recovery { note, ..Default::default() }).map(Some);
        }
        match ctrl.check_health() {
            Ok(()) => Ok(None),
            Err(nvme_driver::Error::Fatal { .. }) => {
                ctrl.reset(timeout)?;
                let note = "controller fatal status (CSTS.CFS=1): controller reset, queue re-created".to_string();
                self.recreate(ctrl, timeout, Recovery { reset: true, note, ..Default::default() }).map(Some)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn abort(&mut self, tags: &[u64], timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        let qp = self.qp.as_ref().expect("queue pair");
        let qid = qp.qid();
        let cids: Vec<u16> = qp.outstanding_commands().filter(|(_, t)| tags.contains(t)).map(|(c, _)| c).collect();
        let mut guard = self.ctrl.lock().unwrap();
        let ctrl = guard.as_mut().ok_or_else(|| BackendError::Invalid("controller already shut down".into()))?;
        let mut r = Recovery::default();
        let mut refused = None;
        for cid in cids {
            r.aborts_sent += 1;
            match ctrl.abort(qid, cid, timeout) {
                Ok(nvme_driver::AbortOutcome::Aborted) => r.aborted += 1,
                Ok(nvme_driver::AbortOutcome::NotAborted) => {}
                // Answered with an error (Abort Command Limit Exceeded, or
                // a command the controller cannot find): the controller is
                // alive, the command not aborted. As Linux's abort_endio,
                // no reset for it: a second timeout of the command resets.
                Err(nvme_driver::Error::Command { status, .. }) => {
                    refused.get_or_insert(status.to_string());
                }
                // An Abort not answered resets the controller (the driver
                // does it for any admin timeout); if that reset failed, the
                // controller is given up: the run cannot go on.
                Err(e) if ctrl.is_failed() => return Err(e.into()),
                Err(e) => {
                    r.escalate = true;
                    r.reset = ctrl.generation() != self.generation;
                    r.note = format!("Abort of CID {cid:#x} on queue {qid} not answered ({e})");
                    break;
                }
            }
        }
        if r.note.is_empty() {
            r.note = format!("Abort sent for {} command(s) on queue {qid}, {} aborted", r.aborts_sent, r.aborted);
            if let Some(status) = refused {
                r.note.push_str(&format!(" (the controller answered an Abort with {status}: the command is reset only if it times out again)"));
            }
        }
        Ok(Some(r))
    }

    fn holds_any(&self, tags: &[u64]) -> bool {
        self.qp.as_ref().is_some_and(|qp| qp.outstanding_commands().any(|(_, t)| tags.contains(&t)))
    }

    fn reset(&mut self, _stuck: &[u64], timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        let ctrl = self.ctrl.clone();
        let mut guard = ctrl.lock().unwrap();
        let ctrl = guard.as_mut().ok_or_else(|| BackendError::Invalid("controller already shut down".into()))?;
        let mut r = Recovery::default();
        // Another thread may have reset it since: then only re-create.
        if ctrl.generation() == self.generation {
            ctrl.reset(timeout)?;
            r.reset = true;
        }
        r.note = if r.reset { "controller reset, queue re-created" } else { "queue re-created after the controller's reset" }.into();
        self.recreate(ctrl, timeout, r).map(Some)
    }
}

impl<R: RegisterWindow + 'static> UserspaceQueue<R> {
    /// After a reset (by this queue, another, or an admin command that
    /// timed out): the namespace is as the run found it (a reset may
    /// activate new firmware, and a format may have run meanwhile), as
    /// Linux revalidates its namespaces after a reset: still active, the
    /// same block size, no fewer blocks, no metadata. Otherwise the
    /// controller is given up, so that every thread stops, not only this
    /// one. Each queue looks as it re-creates itself: one Identify each.
    fn namespace_unchanged(&self, ctrl: &mut Controller<R>, timeout: Duration) -> Result<(), BackendError> {
        let why = match ctrl.identify_namespace_within(self.nsid, timeout) {
            Ok(ns) => {
                if let Some(why) = crate::backend::namespace::unusable(self.nsid, &ns, nvme_spec::identify::csi::NVM) {
                    Some(why)
                } else if ns.lba_size() != self.lba_size || ns.nsze < self.blocks {
                    Some(format!(
                        "namespace {} has {} blocks of {} bytes, {} of {} when the run started",
                        self.nsid,
                        ns.nsze,
                        ns.lba_size(),
                        self.blocks,
                        self.lba_size
                    ))
                } else {
                    None
                }
            }
            Err(e @ nvme_driver::Error::InactiveNamespace { .. }) => Some(e.to_string()),
            Err(e) => return Err(e.into()),
        };
        match why {
            None => Ok(()),
            Some(why) => {
                ctrl.give_up();
                Err(BackendError::Failed(format!(
                    "after the controller's reset {why}: the run's I/Os no longer fit it, so the controller was given up; look at what changed it (nvme-bypass info), then start again"
                )))
            }
        }
    }

    /// Replace the queue pair by a new one on the same queue id and memory
    /// (recovery); its outstanding tags go into `r.abandoned`.
    fn recreate(&mut self, ctrl: &mut Controller<R>, timeout: Duration, mut r: Recovery) -> Result<Recovery, BackendError> {
        if ctrl.generation() != self.generation {
            self.namespace_unchanged(ctrl, timeout)?;
        }
        let old = self.qp.take().expect("queue pair");
        let s = old.stats();
        self.retired.sq_doorbells += s.sq_doorbells;
        self.retired.cq_doorbells += s.cq_doorbells;
        self.retired.mmio_writes += s.mmio_doorbells;
        self.retired.rejected_completions += s.rejected();
        let (qp, abandoned) = ctrl.recreate_io_queue_pair(old, timeout)?;
        self.qp = Some(qp);
        self.generation = ctrl.generation();
        r.recreated = true;
        r.abandoned = abandoned;
        Ok(r)
    }
}

/// The completion of a command that failed, decoded (off the hot path).
#[cold]
#[inline(never)]
fn failed(c: nvme_driver::Reaped<'_>) -> IoDone {
    IoDone { tag: c.tag, status: IoStatus::Nvme(c.status()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{QueueParams, Target};
    use nvme_driver::ControllerConfig;
    use nvme_hal::{DmaAllocator, DmaError};
    use nvme_sim::{SimConfig, SimController};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    /// The simulator's allocator, counting the bytes whose last handle is
    /// still alive: memory the allocator could not hand out again.
    struct Counting {
        inner: Arc<dyn DmaAllocator>,
        live: Arc<AtomicUsize>,
    }
    struct Held(Arc<AtomicUsize>, usize);
    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_sub(self.1, Ordering::SeqCst);
        }
    }
    impl DmaAllocator for Counting {
        fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError> {
            let r = self.inner.alloc(len, align)?;
            self.live.fetch_add(r.len(), Ordering::SeqCst);
            let held = Held(self.live.clone(), r.len());
            Ok(r.with_guard(held))
        }
    }

    #[test]
    fn buffers_of_a_queue_whose_deletion_failed_are_not_freed_until_the_controller_stops() {
        // A read is in flight on a controller that stops answering admin
        // commands and ignores CC.EN = 0: Delete SQ times out, the reset
        // that follows cannot stop it, so it may still write the read's
        // data into the queue's buffer. Neither the buffer nor the queue's
        // rings may go back to the allocator (which would hand them to the
        // next allocation) until the controller has stopped.
        let sim = SimController::start(SimConfig { idle_spins: 2000, timeout_500ms: 1, ..SimConfig::default() }).unwrap();
        let live = Arc::new(AtomicUsize::new(0));
        let mem = Arc::new(Counting { inner: sim.allocator(), live: live.clone() });
        let cfg = ControllerConfig { admin_timeout: Duration::from_millis(300), ..Default::default() };
        let ctrl = Controller::new(sim.registers(), mem, cfg).unwrap();
        let target = UserspaceTarget::new("sim", ctrl, 1).unwrap();
        let mut q = target.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        let before = live.load(Ordering::SeqCst);
        sim.faults().hang.store(true, Ordering::Relaxed);
        sim.faults().ignore_disable.store(true, Ordering::Relaxed);
        let io = Io { op: Op::Read, lba: 0, blocks: 8, buf: 0, tag: 1 };
        assert_eq!(q.submit(&[io]).unwrap(), 1);
        let t = Instant::now();
        drop(q);
        // Bounded by the admin and ready timeouts (hanging would be for
        // ever; the margin is one a loaded machine keeps).
        assert!(t.elapsed() < Duration::from_secs(60), "bounded by the admin and ready timeouts");
        assert_eq!(live.load(Ordering::SeqCst), before, "memory of the queue whose deletion failed was released");
        // The controller stops at shutdown once it heeds CC.EN = 0 again
        // (CSTS.RDY = 0): only then does the memory go, all of it.
        sim.faults().ignore_disable.store(false, Ordering::Relaxed);
        drop(target);
        assert_eq!(live.load(Ordering::SeqCst), 0, "memory kept after the controller stopped");
    }

    #[test]
    fn the_host_memory_buffer_a_controller_asks_for_is_said_given_or_not() {
        let sim = SimController::start(SimConfig { idle_spins: 2000, host_memory_buffer_pages: 16384, ..SimConfig::default() }).unwrap();
        let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
        let target = UserspaceTarget::new("sim", ctrl, 1).unwrap();
        let d = target.describe();
        let (_, why) = d.iter().find(|(k, _)| k == "host memory buffer").expect("said");
        assert!(why.contains("asks for 64 MiB") && why.contains("has 64 MiB"), "{why}");
        // A minimum above the driver's limit: none, and why.
        let sim = SimController::start(SimConfig { idle_spins: 2000, host_memory_buffer_pages: 16384, ..SimConfig::default() }).unwrap();
        let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig { host_memory_max: 16 << 20, ..Default::default() }).unwrap();
        let d = UserspaceTarget::new("sim", ctrl, 1).unwrap().describe();
        let (_, why) = d.iter().find(|(k, _)| k == "host memory buffer").expect("said");
        assert!(why.contains("has none: it needs at least 32 MiB (HMMIN, or HMMINDS in one descriptor), above this driver's limit of 16 MiB"), "{why}");
        // A controller that asks for none: nothing said.
        let sim = SimController::start(SimConfig { idle_spins: 2000, ..SimConfig::default() }).unwrap();
        let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
        assert!(UserspaceTarget::new("sim", ctrl, 1).unwrap().describe().iter().all(|(k, _)| k != "host memory buffer"));
    }

    #[test]
    fn a_reset_that_finds_the_namespace_smaller_fails_the_run_saying_so() {
        let sim = SimController::start(SimConfig { idle_spins: 2000, ..SimConfig::default() }).unwrap();
        let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig { io_queues: 2, ..Default::default() }).unwrap();
        let target = UserspaceTarget::new("sim", ctrl, 1).unwrap();
        let blocks = target.geometry().blocks;
        let mut q = target.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        let mut other = target.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        // Unchanged: the reset recovers, the queue is re-created.
        let r = q.reset(&[], Duration::from_secs(1)).unwrap().unwrap();
        assert!(r.reset && r.recreated, "{}", r.note);
        // Found smaller after the next one: the run cannot go on.
        sim.faults().ns1_blocks_at_enable.store(blocks / 2, Ordering::Relaxed);
        let e = q.reset(&[], Duration::from_secs(1)).err().expect("refused").to_string();
        assert!(e.contains(&format!("namespace 1 has {} blocks of 512 bytes, {blocks} of 512 when the run started", blocks / 2)), "{e}");
        // Every thread stops, not only the one that found it: the
        // controller is given up.
        let e = other.check_health(Duration::from_secs(1)).err().expect("given up").to_string();
        assert!(e.contains("given up"), "{e}");
    }

    #[test]
    fn a_failed_queue_deletion_is_reported_by_close() {
        let sim = SimController::start(SimConfig { idle_spins: 2000, ..SimConfig::default() }).unwrap();
        let cfg = ControllerConfig { io_queues: 2, admin_timeout: Duration::from_millis(300), ..Default::default() };
        let ctrl = Controller::new(sim.registers(), sim.allocator(), cfg).unwrap();
        let target = UserspaceTarget::new("sim", ctrl, 1).unwrap();
        let q = target.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        // The controller refuses the deletion (SQ 1 was deleted behind the
        // driver's back: Invalid Queue Identifier) and keeps CQ 1.
        target.with_controller(|c| c.admin_command(nvme_spec::cmd::delete_io_sq(1), None)).unwrap().unwrap();
        let e = q.close().unwrap_err().to_string();
        assert!(e.contains("deleting I/O queue pair 1 failed") && e.contains("reset"), "{e}");
        assert!(target.with_controller(|c| c.quarantined_bytes()).unwrap() > 0);
        // A healthy queue closes quietly.
        let q = target.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        assert_eq!(q.describe(), "I/O queue pair qid 2 (5 entries)", "qid 1 is still the controller's");
        q.close().unwrap();
        // A reset makes the controller forget the queue: quarantine over,
        // and its id is free again.
        target.with_controller(|c| c.reset(Duration::from_secs(5))).unwrap().unwrap();
        assert_eq!(target.with_controller(|c| c.quarantined_bytes()), Some(0));
        let q = target.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        assert_eq!(q.describe(), "I/O queue pair qid 1 (5 entries)");
        q.close().unwrap();
    }

    #[test]
    fn a_shutdown_that_times_out_reaches_the_user() {
        let sim = SimController::start(SimConfig { shutdown_time: Duration::MAX, idle_spins: 2000, ..Default::default() }).unwrap();
        let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default()).unwrap();
        let target = UserspaceTarget::new("sim", ctrl, 1).unwrap();
        let e = target.shutdown().expect_err("reported, not swallowed");
        assert!(e.to_string().contains("did not finish its shutdown"), "{e}");
        assert!(target.open_queue(QueueParams { depth: 1, buf_size: 4096, batch: 0 }).is_err(), "the controller is gone");
        drop(target);
    }

    /// A subsystem reset is said whether bring-up or a reset during the run
    /// found it, and not at all when none did.
    #[test]
    fn a_subsystem_reset_is_a_fact_of_the_run_when_and_as_found() {
        assert_eq!(subsystem_reset_fact(false, false), None);
        assert_eq!(subsystem_reset_fact(false, true), None);
        let (k, v) = subsystem_reset_fact(true, false).unwrap();
        assert_eq!(k, SUBSYSTEM_RESET);
        assert!(v.contains("at bring-up"), "{v}");
        assert!(subsystem_reset_fact(true, true).unwrap().1.contains("during the run"));
    }
}
