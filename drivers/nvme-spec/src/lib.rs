//! # nvme-spec: NVMe wire structures, data only
//!
//! Every type here is pinned to **NVM Express Base Specification, Revision
//! 1.4c** (2021-06-10), cited as `NVMe 1.4c §x.y` or `NVMe 1.4c Figure N`.
//! 1.4c is the revision QEMU's emulated controller reports (VS = 1.4) and the
//! one most deployed SSDs implement; where 2.0 changed a structure used here
//! (Identify Namespace's 64 LBA formats and FLBAS bits 6:5), a comment says
//! so and the 2.0 form is read.
//!
//! This crate does no I/O. It describes bytes: the controller registers
//! ([`regs`]), the 64-byte submission entry ([`sqe`]), the 16-byte completion
//! entry and its status ([`cqe`], [`status`]), queue sizes ([`entries`]), opcodes ([`opcode`]), the
//! command builders ([`cmd`]) and the Identify pages ([`identify`]).
//! The queue-pair driver (`nvme-driver`), the simulated controller
//! (`nvme-sim`) and the io_uring passthrough backend all build on the same
//! types, so a field is defined exactly once.

#![forbid(unsafe_code)]

pub mod cmd;
pub mod cqe;
pub mod describe;
pub mod entries;
pub mod identify;
pub mod opcode;
pub mod regs;
pub mod sqe;
pub mod status;

pub use cqe::{Cqe, CqeStatus};
pub use entries::QueueEntries;
pub use opcode::{AdminOpcode, NvmOpcode};
pub use sqe::{Cdw0, Sqe};
pub use status::{Status, StatusCodeType};
