//! nvme-bypass: how much of an NVMe I/O's CPU cost is the kernel's?
//!
//! One namespace, three paths (the kernel block layer, io_uring NVMe
//! passthrough, our own userspace driver over VFIO), the same workload, one
//! trait ([`backend::Target`]), side by side. The simulated controller is a
//! fourth path that needs no hardware.

mod backend;
mod bind;
mod c2c;
mod cli;
mod clock;
mod compare;
mod cost;
mod engine;
mod parse;
mod progress;
mod reliability;
mod report;
mod stats;
mod sweep;
mod sys;
mod topology;
mod trace;
mod verify;
mod workload;

fn main() {
    std::process::exit(cli::main());
}
