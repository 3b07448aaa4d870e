//! What the controller reports doing, for `nvme-bypass trace`: a leaf the
//! configuration (its hook) and the controller (which emits) both name.

use nvme_spec::{Cqe, Sqe};

/// What the controller did, for `nvme-bypass trace`.
#[derive(Clone, Debug)]
pub enum SimEvent {
    /// CC.EN went 0 -> 1 and the controller is ready.
    Enabled { asq: u64, acq: u64, admin_entries: u16 },
    /// CC.EN went 1 -> 0: reset.
    Reset,
    /// Shutdown processing completed (CSTS.SHST = 10b).
    ShutdownComplete,
    /// The controller read a new tail doorbell value.
    DoorbellSeen { qid: u16, tail: u16, shadow: bool },
    /// The controller fetched a submission entry.
    Fetch { qid: u16, slot: u16, sqe: Sqe },
    /// The controller posted a completion entry.
    Complete { cqid: u16, slot: u16, cqe: Cqe },
    /// A PRP list was walked.
    PrpList { list_iova: u64, entries: Vec<u64> },
    /// A queue was created or deleted (entries: 2..=65536).
    Queue { qid: u16, cq: bool, created: bool, entries: u32 },
}
