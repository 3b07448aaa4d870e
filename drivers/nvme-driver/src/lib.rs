//! # nvme-driver: a userspace NVMe queue-pair driver
//!
//! Start with [`Controller::new`] (bring-up as NVMe 1.4c §7.6.1 orders it),
//! then [`Controller::create_io_queue_pair`] once per thread, then
//! [`QueuePair::read`]/[`QueuePair::write`] + [`QueuePair::ring`] +
//! [`QueuePair::poll`] in a loop. The same code runs on any
//! [`nvme_hal::RegisterWindow`] and [`nvme_hal::DmaAllocator`]: VFIO's BAR0
//! and IOMMU-mapped memory, or the in-process simulated controller.
//!
//! Layers, bottom up (each file is short enough to read in one sitting):
//! * [`queue`]: one ring each for submissions and completions, phase tag, doorbells;
//! * [`prp`]: describing a data buffer with PRP entries and lists;
//! * [`cid`]: command identifiers and what each outstanding one stands for;
//! * [`qpair`]: a queue pair, the hot path;
//! * [`controller`]: bring-up, admin commands, queue creation, shutdown;
//!   its `recovery` part: Abort, controller reset, re-creating queues.

#![forbid(unsafe_code)]

pub mod cid;
pub mod controller;
pub mod doorbell;
mod error;
pub mod prp;
pub mod qpair;
pub mod queue;

pub use controller::{AdminEvent, AdminObserver, Controller, ControllerConfig, HOST_MEMORY_MAX, PAGE_SIZE};
pub use controller::recovery::AbortOutcome;
pub use error::{Error, SubmitError, TimeoutAction};
pub use qpair::{Completion, DataPtr, IoCmd, QueuePair, QueueStats, Reaped};
