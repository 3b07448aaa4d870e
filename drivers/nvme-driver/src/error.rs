//! The driver's errors: one enum for the controller and its commands, and
//! the cheap one the hot path returns when a command cannot be submitted.
//! A leaf below the controller and the queue pair, which both return them.

use crate::prp::PrpError;
use nvme_spec::{Cqe, Status};

/// What the driver did about an admin command that did not complete in
/// time. Its command identifier cannot be reused while the controller may
/// still complete it (the next command would take that completion for its
/// own), and only a reset makes the controller forget a command: so, as
/// Linux's `nvme_timeout` does for the admin queue, the controller is
/// disabled and initialised again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutAction {
    /// The controller was reset and initialised again (NVMe 1.4c §7.3.2,
    /// §7.6.1): every I/O queue pair made before is gone (re-create them);
    /// [`Controller::generation`](crate::Controller::generation) counts it.
    ControllerReset,
    /// It timed out during a controller reset, which fails with it
    /// ([`Error::ResetFailed`] follows).
    DuringReset,
    /// It timed out while the controller was being brought up, which fails
    /// with it: the controller was given up and disabled (CC.EN = 0), as
    /// Linux's probe gives a controller up; `stopped`: it was seen to stop
    /// (CSTS.RDY = 0), so it forgot the command.
    DuringBringUp { stopped: bool },
}

impl std::fmt::Display for TimeoutAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeoutAction::ControllerReset => f.write_str(
                "; the controller was reset to get the command back, as Linux does for an admin command: its I/O queue pairs are gone (re-create them)",
            ),
            TimeoutAction::DuringReset => f.write_str(" (during a controller reset)"),
            TimeoutAction::DuringBringUp { stopped: true } => f.write_str(
                " while the controller was brought up, which fails with it: the controller was disabled (CC.EN = 0), as Linux's probe gives up; one still starting (firmware loading) may answer in time on another attempt",
            ),
            TimeoutAction::DuringBringUp { stopped: false } => f.write_str(
                " while the controller was brought up, which fails with it; the controller did not stop after CC.EN = 0, so the memory it was given stays allocated: reset the function (its sysfs `reset` file) or power-cycle it",
            ),
        }
    }
}

/// Errors of the driver, each saying what happened and, where there is one,
/// what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CSTS wait ran out of time.
    #[error("controller did not {what} within {timeout_ms} ms (its ready timeout: CAP.TO, or CRTO.CRWMT when CAP.CRMS reports it); CSTS={csts:#x}. The device may be hung: reset it (rebind to nvme, or power-cycle)")]
    Timeout { what: &'static str, timeout_ms: u64, csts: u32 },
    /// At bring-up or at a controller reset the controller did not clear
    /// CSTS.RDY after CC.EN = 0, and the function-level reset tried next
    /// did not help (after a reset, [`Error::ResetFailed`] holds it).
    #[error("controller did not clear CSTS.RDY within {timeout_ms} ms after CC.EN=0 (CSTS={csts:#x}), and the function-level reset tried next, as Linux tries it at probe and at every reset, did not help: {why}. Power-cycle the device")]
    FunctionResetFailed { timeout_ms: u64, csts: u32, why: String },
    /// A normal shutdown did not report complete (CSTS.SHST = 10b) in time.
    #[error("controller did not finish its shutdown (CSTS.SHST=10b) within {timeout_ms} ms (its RTD3E of {rtd3e_us} us, clamped to 5-60 s as Linux does); CSTS={csts:#x}. It was left enabled, not reset in the middle of its shutdown, and its memory stays mapped until this process ends; give it time, then let the kernel's nvme driver take it over (`nvme-bypass unbind`) or power-cycle it")]
    ShutdownTimeout { timeout_ms: u64, rtd3e_us: u32, csts: u32 },
    /// CSTS.CFS was set.
    #[error("controller reported fatal status (CSTS.CFS=1) during {during}; it needs a controller reset")]
    Fatal { during: &'static str },
    /// Registers read all ones: the device is gone or not responding.
    #[error("controller registers read as all ones: the device was removed or stopped responding")]
    Gone,
    /// A command completed with an error status.
    #[error("{opcode} failed: {status} [{cqe}]")]
    Command { opcode: &'static str, status: Status, cqe: Cqe },
    /// An admin command did not complete in time, and what was done about it.
    #[error("{opcode} did not complete within {timeout_ms} ms{action}")]
    CommandTimeout { opcode: &'static str, timeout_ms: u64, action: TimeoutAction },
    /// An admin command did not complete in time, and the controller reset
    /// that followed failed (the source, [`Error::ResetFailed`]): the
    /// controller is given up (and left disabled if it stops).
    #[error("{opcode} did not complete within {timeout_ms} ms, so the controller was reset: {source}")]
    CommandTimeoutResetFailed {
        opcode: &'static str,
        timeout_ms: u64,
        #[source]
        source: Box<Error>,
    },
    /// A namespace that is not active.
    #[error("namespace {nsid} is not active on this controller (it has {nn} namespace ids); pick one listed by `nvme-bypass info`")]
    InactiveNamespace { nsid: u32, nn: u32 },
    /// All granted I/O queues are in use.
    #[error("all {granted} I/O queue pairs the controller granted are in use; use fewer threads")]
    NoQueues { granted: u16 },
    /// Set Features Number of Queues was refused at bring-up: the
    /// controller has no I/O queues (Linux's driver then keeps only the
    /// admin queue too, "Could not set queue count").
    #[error("the controller refused Set Features Number of Queues ({status}), so it has no I/O queues: a controller that does this is usually degraded. Identify still answers (`nvme-bypass info`); give it back to the kernel (`nvme-bypass unbind`), read `nvme smart-log` and `nvme error-log`, then reset or power-cycle it")]
    QueueCountRefused { status: String },
    /// Deleting an I/O queue pair failed: the controller may still use its memory.
    #[error("deleting I/O queue pair {qid} failed: {source}. The controller may still write into its queues and data buffers, so that memory stays allocated (never reused) until the controller is reset or shut down; if this repeats, reset the device (`nvme-bypass unbind`, or power-cycle it)")]
    QueueDeletion {
        qid: u16,
        #[source]
        source: Box<Error>,
    },
    /// The controller lacks something we need.
    #[error("unsupported controller: {0}")]
    Unsupported(String),
    /// A bad argument.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Submitting failed.
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// DMA memory could not be had.
    #[error(transparent)]
    Dma(#[from] nvme_hal::DmaError),
    /// A controller reset did not bring the controller back.
    #[error("controller reset failed: {source}. {}", if *disabled {
        "The controller was given up and left disabled, so the kernel's nvme driver can take it over (`nvme-bypass unbind`); if that fails too, power-cycle it"
    } else {
        "The controller was given up but did not stop (CSTS.RDY stayed set), so its memory stays allocated; unbind it (`nvme-bypass unbind`) and, if the kernel's driver cannot reset it either, power-cycle it"
    })]
    ResetFailed {
        #[source]
        source: Box<Error>,
        /// Whether it was seen to stop (CC.EN = 0, CSTS.RDY = 0) after all.
        disabled: bool,
    },
    /// The controller was given up after an earlier failure: nothing more is sent to it.
    #[error("the controller was given up after an earlier failure; nothing more is sent to it (see the first error)")]
    GivenUp,
}

/// Why a command could not be submitted. Cheap to return on the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// No free CID or submission slot: poll for completions first.
    #[error("queue full: {outstanding} commands outstanding")]
    QueueFull { outstanding: usize },
    /// The transfer is longer than the controller's maximum (MDTS).
    #[error("transfer of {len} bytes exceeds the controller's maximum of {max} bytes (MDTS); use a smaller --bs")]
    TooLarge { len: usize, max: usize },
    /// The buffer cannot be described with PRPs.
    #[error(transparent)]
    Prp(#[from] PrpError),
}
