//! nvme-bypass: how much of an NVMe I/O's CPU cost is the kernel's?
//!
//! One namespace, three paths (the kernel block layer, io_uring NVMe
//! passthrough, our own userspace driver over VFIO), the same workload, one
//! trait ([`backend::Target`]), side by side. The simulated controller is a
//! fourth path that needs no hardware.
//!
//! The modules, from the top down (imports point down only):
//! - [`cli`]: parse the command line, dispatch, print errors;
//! - [`commands`]: one file per subcommand (bench, info, compare, sweep,
//!   trace, driver-cost, bind);
//! - [`experiment`]: the plan of paths and variants a comparison runs, and
//!   the device session around it (checks, binding, scheduler);
//! - [`engine`]: the benchmark loop on every thread, the workload, data
//!   verification, the watchdog;
//! - [`report`]: text in fio's layout and fio-shaped JSON;
//! - [`measure`]: clock, statistics, CPU accounting, core-to-core latency,
//!   device topology;
//! - [`backend`]: the `Target`/`IoQueue` trait and its implementations over
//!   our driver (`userspace`) and the kernel (`kernel`);
//! - [`error`] and [`sys`]: leaves.

pub mod backend;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod error;
pub mod experiment;
pub mod measure;
pub mod report;
pub mod sys;
