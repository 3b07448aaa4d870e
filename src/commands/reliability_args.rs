//! Options for when things go wrong: the I/O timeout and retry limit the
//! engine's watchdog works with (`engine::Reliability`), and the simulated
//! controller's fault injection (`--sim-fault`), which the reliability
//! tests (tests/reliability.rs, docs/reliability.md) drive through the CLI.

use crate::error::Error;
use crate::cli::parse::{parse_duration, parse_sim_faults, SimFault};
use crate::backend::userspace::sim::SimFaults;
use std::time::Duration;

/// `--io-timeout`, `--retries`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReliabilityArgs {
    /// An I/O outstanding this long is aborted (NVMe Abort); still outstanding as long again, the controller is reset and the queue re-created (sim, vfio; the kernel paths' driver has its own, nvme_core.io_timeout).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub io_timeout: Duration,
    /// Resubmit an I/O that failed with Do Not Retry clear, was aborted after a timeout, or was lost in a controller reset, up to this many times.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
}

impl ReliabilityArgs {
    /// Check the values; the engine's settings (`JobSpec::reliability`).
    pub fn apply(&self) -> Result<crate::engine::Reliability, Error> {
        if self.io_timeout < Duration::from_millis(10) || self.io_timeout > Duration::from_secs(3600) {
            return Err(Error::usage(format!(
                "--io-timeout {:?} is out of range: give 10ms to 1h (the Linux nvme driver uses 30s)",
                self.io_timeout
            )));
        }
        if self.retries > 100 {
            return Err(Error::usage(format!("--retries {} is too many: give 0 to 100 (the Linux nvme driver uses 5)", self.retries)));
        }
        Ok(crate::engine::Reliability { io_timeout: self.io_timeout, retries: self.retries })
    }
}

/// clap value parser for `--sim-fault`.
pub fn sim_fault_arg(s: &str) -> Result<Vec<SimFault>, String> {
    parse_sim_faults(s)
}

/// The faults of every `--sim-fault` given, in order (a later value wins).
pub fn sim_faults(faults: &[Vec<SimFault>]) -> SimFaults {
    let mut f = SimFaults::default();
    for fault in faults.iter().flatten() {
        match *fault {
            SimFault::DropEvery(n) => f.drop_every = n,
            SimFault::DelayUs(n) => f.delay_us = n,
            SimFault::StatusEvery(n) => {
                f.status_every = n;
                // Internal Error unless a status= says otherwise.
                if f.status_sc == 0 && f.status_sct == 0 {
                    f.status_sc = nvme_spec::status::generic::INTERNAL_ERROR as u32;
                }
            }
            SimFault::Status { sct, sc } => {
                f.status_sct = sct as u32;
                f.status_sc = sc as u32;
            }
            SimFault::Dnr(d) => f.status_dnr = d,
            SimFault::FatalAfter(n) => f.fatal_after = n,
            SimFault::HangAfter(n) => f.hang_after = n,
            SimFault::StallEvery(n) => f.stall_every = n,
            SimFault::RefuseAbort(on) => f.refuse_abort = on,
            SimFault::CorruptCidEvery(n) => f.corrupt_cid_every = n,
            SimFault::BadSqidEvery(n) => f.bad_sqid_every = n,
            SimFault::CorruptDataEvery(n) => f.corrupt_data_every = n,
            SimFault::Pause { after, ms } => (f.pause_after, f.pause_ms) = (after, ms),
        }
    }
    f
}
