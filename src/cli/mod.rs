//! Command line: options named as fio names them, subcommands as nvme-cli
//! and SPDK's tools would lead a user to expect. Parsing and dispatch only:
//! each subcommand lives in [`crate::commands`].

pub mod parse;

use crate::commands;
use crate::error::chain;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "nvme-bypass", version, about = "Measure how much of an NVMe I/O's CPU cost is the kernel's: block layer vs io_uring passthrough vs a userspace VFIO driver", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one workload on one path and report IOPS, bandwidth, latency percentiles and CPU per I/O
    /// (failed I/Os apart, as errors), with the clock, the kernel's clocksource and whether it accounts interrupt time.
    Bench(commands::bench::BenchArgs),
    /// The main job: the same workload through block, passthru and vfio side by side: IOPS per busy core and CPU per I/O of each (measured), then its modelled ceiling; --repeat N for medians, ranges and a noise control.
    Compare(crate::commands::compare::CompareArgs),
    /// Grid over iodepth, block size and threads for each path: sweep.json and SVG charts (IOPS per core measured and modelled, latency, throughput, latency vs IOPS); --repeat N for medians with min-max ranges.
    Sweep(crate::commands::sweep::SweepArgs),
    /// A drop-in for fio: your fio command line or job file, unchanged, with `fio` replaced by `nvme-bypass fio`
    /// (engines io_uring/libaio/psync, io_uring_cmd, nvme-bypass-vfio, nvme-bypass-sim); fio's normal or JSON output, then our CPU per I/O.
    Fio(commands::fio::FioArgs),
    /// Print Identify Controller and Identify Namespace data, as nvme-cli's id-ctrl/id-ns name the fields.
    Info(commands::info::InfoArgs),
    /// Move a controller from the kernel's nvme driver to vfio-pci (refuses when it is in use).
    Bind(crate::commands::bind::BindArgs),
    /// Give a controller back to the driver it had before `bind`.
    Unbind(crate::commands::bind::BindArgs),
    /// Tell the story of NVMe queues: every register access, submission entry, doorbell and completion of a short run.
    Trace(crate::commands::trace::TraceArgs),
    /// The driver's own work per I/O on the synchronous simulator, repeatable (for callgrind).
    DriverCost(crate::commands::driver_cost::CostArgs),
    /// Exact instruction counts of the emulated test bed beside a comparison: per I/O, by kernel layer, with events (count.json and a chart).
    CountReport(crate::commands::count_report::CountReportArgs),
    /// Sleep inside a counting window of the test bed's instruction counter (its idle background).
    Idle(commands::idle::IdleArgs),
    /// Run a command inside a counting window of the test bed's instruction counter (fio beside us, counted alike).
    Window(commands::idle::WindowArgs),
    /// Started by compare and sweep on a device: gives the controller and schedulers back if the run is killed.
    #[command(hide = true)]
    HandBackWatch {
        /// The run's process id.
        #[arg(long)]
        parent: u32,
    },
}

pub fn main() -> i32 {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which options the user gave (not defaults): the commands refuse those
    // that have no effect on the path they run.
    let given = matches.subcommand().map(|(_, m)| given_options(m)).unwrap_or_default();
    match &mut cli.cmd {
        Command::Bench(a) => a.given = given,
        Command::Info(a) => a.given = given,
        Command::Sweep(a) => a.given = given,
        _ => {}
    }
    if let Command::HandBackWatch { parent } = cli.cmd {
        return crate::experiment::handback::watch(parent);
    }
    let stop = crate::engine::Stop::new();
    install_signal_handlers(&stop);
    // Under the test bed's instruction counter: name the kernel's poll
    // loop to it before any window opens (crate::measure::marker).
    crate::measure::marker::base();
    let r = match cli.cmd {
        Command::Bench(a) => commands::bench::bench(&a, &stop),
        Command::Compare(a) => crate::commands::compare::compare(&a, &stop),
        Command::Sweep(a) => crate::commands::sweep::sweep(&a, &stop),
        Command::Fio(a) => commands::fio::fio(&a.args, &stop),
        Command::Info(a) => commands::info::info(&a),
        Command::Bind(a) => crate::commands::bind::bind(&a),
        Command::Unbind(a) => crate::commands::bind::unbind(&a),
        Command::Trace(a) => crate::commands::trace::trace(&a),
        Command::DriverCost(a) => crate::commands::driver_cost::driver_cost(&a, &stop),
        Command::CountReport(a) => crate::commands::count_report::count_report(&a),
        Command::Idle(a) => commands::idle::idle(&a),
        Command::Window(a) => commands::idle::window(&a),
        Command::HandBackWatch { .. } => unreachable!("dispatched above"),
    };
    match r {
        Ok(code) => code,
        // The reader went away (`| head`): quietly, with the status of a
        // process SIGPIPE ended (128 + 13), as fio and other tools end;
        // the run was already wound down (devices handed back) on the way.
        Err(crate::error::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => 141,
        Err(e) => {
            eprintln!("nvme-bypass: error: {}", chain(&e));
            e.exit_code()
        }
    }
}

/// The ids of the options given on the command line, as opposed to their
/// defaults.
pub fn given_options(m: &clap::ArgMatches) -> Vec<String> {
    m.ids().filter(|id| m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)).map(|id| id.to_string()).collect()
}

/// Ctrl-C / SIGTERM request `stop`: the runs stop submitting and drain.
/// Another one at least half a second later ends the process at once (exit 1;
/// VFIO's release of the device then resets it, and `compare`'s and
/// `sweep`'s watcher gives back what they changed: experiment::handback);
/// one sooner is the same
/// request again: `timeout` sends its signal to the process and to its
/// process group, two copies at once.
fn install_signal_handlers(stop: &crate::engine::Stop) {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = crate::sys::on_stop_signal(sig, stop.signal_slot(), stop.flag(), 500_000_000);
    }
}
