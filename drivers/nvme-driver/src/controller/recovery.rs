//! When the controller misbehaves: the health check (CSTS.CFS), Abort
//! (NVMe 1.4c §5.1), controller reset and re-initialisation (§7.3.2 and
//! §7.6.1), and re-creating I/O queues after it. The order a caller follows
//! is the Linux driver's (`nvme_timeout`): a command overdue past its
//! timeout is aborted; if that does not bring its completion within another
//! timeout, the controller is reset and the queues re-created (one that
//! does not stop at CC.EN = 0 first gets a function-level reset, when the
//! caller gave one, as Linux's `nvme_pci_configure_admin_queue` gives it);
//! if the reset fails, the controller is given up and left disabled for the
//! next owner (or, if it does not even stop, left with all its memory).

use super::{
    admin_queue_pair, clear_subsystem_reset_occurred, disable, disable_timeout, enable_timeout, enable_with_admin_queue, Controller,
    LiveQueue, RDY_AFTER_DISABLE,
};
use crate::qpair::QueuePair;
use crate::Error;
use nvme_hal::RegisterWindow;
use nvme_spec::cmd;
use nvme_spec::identify::IdentifyController;
use std::time::Duration;

/// What an Abort achieved. NVMe 1.4c §5.1: bit 0 of completion dword 0 is
/// 0 when the command was aborted, 1 when it was not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortOutcome {
    /// Aborted: its completion, status Command Abort Requested, follows on
    /// its own queue.
    Aborted,
    /// Not aborted: it already completed, or the controller could not find
    /// it (a lost command: only a reset gets it back).
    NotAborted,
}

impl<R: RegisterWindow + ?Sized> Controller<R> {
    /// Controller resets so far. A queue pair made before the latest reset
    /// is dead: re-create it with [`recreate_io_queue_pair`](Self::recreate_io_queue_pair).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// True once the controller has been given up (a reset failed): it
    /// gets no more admin commands, only the register writes that hand it back.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// Give the controller up on the caller's word (it is not what the
    /// caller's work was set up for, e.g. its namespace changed across a
    /// reset): no more admin commands, every queue's owner told by
    /// [`is_failed`](Self::is_failed), and CC.EN = 0 so that it stops
    /// using its queues; as after a failed reset, only a controller seen to
    /// stop lets its memory go back.
    pub fn give_up(&mut self) {
        if !self.failed {
            self.fail_and_disable();
        }
    }

    /// Mark the controller given up and leave it disabled if that is
    /// defined now (not while it is still enabling); whether it was seen to
    /// stop. Only a controller seen to stop lets its memory go back; else
    /// it stays with `live` and quarantine, and is kept for good at the
    /// shutdown.
    pub(super) fn fail_and_disable(&mut self) -> bool {
        self.failed = true;
        let disabled = disable(&*self.regs, Duration::ZERO, self.disable_timeout(), self.cfg.ready_check_delay).is_ok();
        if disabled {
            self.controller_forgot_everything();
        }
        disabled
    }

    /// One read of CSTS: an error if the controller reports fatal status
    /// (CSTS.CFS, which asks the host for a reset) or reads all ones (gone).
    pub fn check_health(&self) -> Result<(), Error> {
        let csts = self.status();
        if csts.into_bits() == u32::MAX {
            return Err(Error::Gone);
        }
        if csts.cfs() {
            return Err(Error::Fatal { during: "I/O" });
        }
        Ok(())
    }

    /// Whether the controller has paused processing (CSTS.PP = 1: it is
    /// activating firmware without a reset, NVMe 1.4c §5.11), and if so
    /// how long it may stay paused: MTFA, or, when the controller reports
    /// none, the admin timeout (both as Linux's `nvme_fw_act_work`). A
    /// command overdue meanwhile is not lost: a host that aborts it or
    /// resets the controller then only interrupts the activation. One
    /// CSTS read.
    pub fn processing_paused(&self) -> Option<Duration> {
        let csts = self.status();
        if !csts.pp() || csts.into_bits() == u32::MAX {
            return None;
        }
        Some(match self.ident.mtfa {
            0 => self.cfg.admin_timeout,
            n => Duration::from_millis(n as u64 * 100),
        })
    }

    /// Ask the controller to abort command `cid` of submission queue
    /// `sqid` (Abort, NVMe 1.4c §5.1), waiting at most `timeout` for the
    /// Abort's own completion. Aborting is best effort: the command may
    /// complete normally anyway.
    pub fn abort(&mut self, sqid: u16, cid: u16, timeout: Duration) -> Result<AbortOutcome, Error> {
        let cqe = self.admin_command_within(cmd::abort(sqid, cid), None, timeout)?;
        Ok(if cqe.dw0 & 1 == 0 { AbortOutcome::Aborted } else { AbortOutcome::NotAborted })
    }

    /// Controller-level reset and re-initialisation: CC.EN = 0 (the
    /// controller drops every command and forgets every I/O queue and the
    /// shadow doorbell configuration, NVMe 1.4c §7.3.2), then bring-up
    /// steps 2-4 and 6-7 again on the same admin queue memory. Identify data
    /// is kept. Every queue pair made before is dead afterwards: its owner
    /// re-creates it ([`recreate_io_queue_pair`](Self::recreate_io_queue_pair))
    /// or drops it. Admin commands wait at most `timeout` each.
    ///
    /// A controller that does not clear CSTS.RDY after CC.EN = 0 is given
    /// the function-level reset of [`new_with_function_reset`](Self::new_with_function_reset),
    /// if it was brought up with one, and the reset goes on from there.
    /// If the controller does not come back (without a function reset, or
    /// with one that failed or did not make it stop, which
    /// [`Error::FunctionResetFailed`] then says), it is given up, left
    /// disabled (CC.EN = 0) if it stops, and [`Error::ResetFailed`] says
    /// why and whether it stopped.
    pub fn reset(&mut self, timeout: Duration) -> Result<(), Error> {
        if self.failed {
            return Err(Error::GivenUp);
        }
        self.resetting = true;
        let r = self.reset_inner(timeout);
        self.resetting = false;
        if let Err(e) = r {
            // The reset's own error is the one to report.
            let disabled = self.fail_and_disable();
            return Err(Error::ResetFailed { source: Box::new(e), disabled });
        }
        Ok(())
    }

    pub(super) fn enable_timeout(&self) -> Duration {
        enable_timeout(&*self.regs, self.cap, &self.cfg)
    }

    pub(super) fn disable_timeout(&self) -> Duration {
        disable_timeout(self.cap, &self.cfg)
    }

    fn reset_inner(&mut self, timeout: Duration) -> Result<(), Error> {
        // Step 1: CC.EN = 0 and wait for CSTS.RDY to follow (CAP.TO; a
        // controller still enabling is let finish first; one that does not
        // clear it gets the function-level reset, if there is one). Once it
        // has, the controller no longer owns any I/O queue memory (which
        // stays with `live` until re-created or deleted) and quarantine
        // ends; until then it may (queue memory stays on_device, quarantine
        // stays shut). CSTS.NSSRO is cleared first, as at bring-up: a 1
        // now says an NVM subsystem reset happened while the driver had it.
        self.generation += 1;
        self.subsystem_reset |= clear_subsystem_reset_occurred(&*self.regs, self.cap, self.vs);
        match disable(&*self.regs, self.enable_timeout(), self.disable_timeout(), self.cfg.ready_check_delay) {
            Err(Error::Timeout { what: RDY_AFTER_DISABLE, timeout_ms, csts }) if self.function_reset.is_some() => {
                self.function_level_reset(timeout_ms, csts)?;
            }
            r => r?,
        }
        self.controller_forgot_everything();

        // Steps 2-4: the admin queue anew on the same memory, its completion
        // ring zeroed so that no old phase tag passes for a new entry.
        let (asq, acq) = self.admin.memory();
        let entries = self.admin_entries;
        self.admin.abandon_outstanding();
        acq.fill(0, acq.len(), 0);
        self.admin = admin_queue_pair(self.regs.clone(), self.cap, asq.clone(), acq.clone(), entries)?;
        enable_with_admin_queue(&*self.regs, entries, &asq, &acq, self.enable_timeout())?;

        // Step 5 again: Identify Controller, as Linux's nvme_init_identify
        // after every reset: a reset may have activated new firmware. The
        // same controller (serial and model) is required, and transfers
        // no smaller than before: the I/O queues' PRP lists and the
        // caller's I/Os were sized by the old MDTS. What else it reports
        // (firmware revision, CRDT, HMPRE, OACS) is taken as it is now.
        self.reidentify(timeout)?;

        // Step 6: Number of Queues again (the reset forgot it); as many as before.
        // Refused (as at bring-up): no I/O queues, an error only if there
        // were some before.
        let granted = self.set_queue_count(timeout)?;
        if granted < self.io_queues_granted {
            return Err(Error::Unsupported(format!(
                "after the reset the controller grants {granted} I/O queue pairs, {} before{}",
                self.io_queues_granted,
                match &self.queues_refused {
                    Some(status) => format!(" (it refused Set Features Number of Queues: {status})"),
                    None => String::new(),
                }
            )));
        }

        // ACRE again (the reset cleared the feature), and the Host Memory
        // Buffer given back (MR = 1: the same memory, as the controller
        // left it).
        self.enable_retry_delays(timeout)?;
        self.enable_host_memory(timeout)?;

        // Step 7: shadow doorbells again, on the same buffers, zeroed. Queue
        // threads may still store into their (dead) slots meanwhile: the
        // fill's stores are atomic 4-byte words, like theirs, so that is no
        // data race, and each slot is cleared again before its queue is
        // re-created (shadow_slots).
        if let Some((dbs, eis)) = self.shadow.clone() {
            dbs.fill(0, dbs.len(), 0);
            eis.fill(0, eis.len(), 0);
            match self.admin_command_within(cmd::doorbell_buffer_config(dbs.iova(), eis.iova()), None, timeout) {
                Ok(_) => {}
                // Refused this time: the queues created from now on ring
                // MMIO doorbells (shadow_slots gives them none), as at
                // bring-up. Their dead slots keep their buffers alive.
                Err(Error::Command { status, .. }) => {
                    self.shadow = None;
                    self.shadow_refused = Some(status.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The bigger hammer of Linux's `nvme_pci_configure_admin_queue`, which
    /// it takes at every controller reset: the controller did not clear
    /// CSTS.RDY within `timeout_ms` after CC.EN = 0 (CSTS was `csts`), so
    /// its function is reset (`function_reset`, Linux's `pcie_reset_flr`),
    /// then CC.EN = 0 once more, whose wait must now see CSTS.RDY = 0. A
    /// function-level reset stops the function's DMA and resets the
    /// controller (PCIe 4.0 §6.6.2; a Controller Level Reset, NVMe 1.4c
    /// §7.3.2), so once it is done the controller has forgotten every queue
    /// and command, whatever CSTS reads next. An error, the reset's or the
    /// second wait's, says that the function reset was tried.
    fn function_level_reset(&mut self, timeout_ms: u64, csts: u32) -> Result<(), Error> {
        let failed = |why: String| Error::FunctionResetFailed { timeout_ms, csts, why };
        let function_reset = self.function_reset.as_mut().expect("reset_inner checked it");
        function_reset().map_err(failed)?;
        self.controller_forgot_everything();
        match disable(&*self.regs, self.enable_timeout(), self.disable_timeout(), self.cfg.ready_check_delay) {
            Err(Error::Timeout { what: RDY_AFTER_DISABLE, csts, .. }) => {
                Err(failed(format!("after it the controller still did not clear CSTS.RDY (CSTS={csts:#x})")))
            }
            r => r,
        }
    }

    /// Identify Controller after a reset: see `reset_inner`'s step 5.
    fn reidentify(&mut self, timeout: Duration) -> Result<(), Error> {
        let id = IdentifyController::parse(&*self.identify_page_within(cmd::Identify::controller(), timeout)?);
        if (id.sn.as_str(), id.mn.as_str()) != (self.ident.sn.as_str(), self.ident.mn.as_str()) {
            return Err(Error::Unsupported(format!(
                "after the reset the controller reports model {:?} serial {:?}, not {:?} {:?} as before: it is another controller, and what this run knew of the first does not hold",
                id.mn, id.sn, self.ident.mn, self.ident.sn
            )));
        }
        let mdts = id.max_transfer_bytes(self.cap.min_page_size()).unwrap_or(self.cfg.default_max_transfer);
        if mdts < self.max_transfer {
            return Err(Error::Unsupported(format!(
                "after the reset the controller takes at most {} KiB per command (MDTS {}), {} KiB before (new firmware?): the queues and I/Os of this run were sized for the old limit; start the run again",
                mdts >> 10,
                id.mdts,
                self.max_transfer >> 10
            )));
        }
        self.ident = id;
        Ok(())
    }

    /// Make `old` work again with the same queue id and memory: after a
    /// reset (the controller forgot the queue), or to replace a queue whose
    /// commands are stuck (it is deleted first, NVMe 1.4c §5.6). Returns the
    /// new queue pair and the tags of the commands `old` still had
    /// outstanding: they will never complete (resubmit or fail them).
    ///
    /// A deletion that times out resets the controller (as any admin
    /// timeout does), which forgets the queue: it is then created again.
    /// On failure `old` is gone: if its deletion failed and the controller
    /// was not seen to stop, its memory (and its data buffers) go into
    /// quarantine, as in [`delete_io_queue_pair`](Self::delete_io_queue_pair);
    /// if only the creation failed, see `create_on_device`.
    pub fn recreate_io_queue_pair(&mut self, old: QueuePair<R>, timeout: Duration) -> Result<(QueuePair<R>, Vec<u64>), Error> {
        let idx = self.live_index(&old)?;
        let mut old = old;
        let abandoned = old.abandon_outstanding();
        drop(old);
        let q: LiveQueue = self.live[idx].clone();
        if q.on_device {
            let deleted = self
                .admin_command_within(cmd::delete_io_sq(q.qid), None, timeout)
                .and_then(|_| self.admin_command_within(cmd::delete_io_cq(q.qid), None, timeout));
            if let Err(e) = deleted {
                if self.live[idx].on_device {
                    // Not seen to stop: the controller may still use the
                    // queue, so its memory goes into quarantine.
                    self.live.remove(idx);
                    self.quarantine(Some(q.qid), q.memory());
                    return Err(Error::QueueDeletion { qid: q.qid, source: Box::new(e) });
                }
                // The deletion timed out and the reset that followed stopped
                // the controller, which forgot the queue all the same: go on
                // and create it again, unless the reset failed.
                if self.failed {
                    self.live.remove(idx);
                    self.qids_in_use[q.qid as usize] = false;
                    return Err(e);
                }
            }
            self.live[idx].on_device = false;
        }
        // A zeroed ring: the new queue expects phase 1 from its first entry.
        q.cq.fill(0, q.cq.len(), 0);
        match self.create_on_device(&q, timeout) {
            Ok(qp) => {
                self.live[idx].on_device = true;
                Ok((qp, abandoned))
            }
            Err(e) => {
                // The owner's handle is gone: the queue's record goes too,
                // and its id unless quarantine holds it.
                self.live.remove(idx);
                if !self.quarantine.iter().any(|x| x.qid == Some(q.qid)) {
                    self.qids_in_use[q.qid as usize] = false;
                }
                Err(e)
            }
        }
    }
}
