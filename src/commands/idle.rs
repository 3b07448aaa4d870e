//! `nvme-bypass idle`: mark a counting window around a sleep, so the test
//! bed's instruction counter ([`crate::measure::marker`]) measures what
//! the guest executes with no I/O running (timer ticks, kernel threads):
//! the background to subtract from a run's window, per second.

use crate::error::Error;
use crate::measure::marker;
use std::time::{Duration, Instant};

/// Options of idle.
#[derive(clap::Args, Debug, Clone)]
pub struct IdleArgs {
    /// Seconds to sleep inside the window.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// The window's id.
    #[arg(long, default_value_t = 0)]
    pub window: u64,
    /// Spin in user mode instead of sleeping: the background of a busy
    /// vCPU (it takes timer ticks an idle one skips).
    #[arg(long)]
    pub spin: bool,
}

/// START, sleep, STOP; prints the window and its length in seconds.
pub fn idle(a: &IdleArgs) -> Result<i32, Error> {
    let d = Duration::try_from_secs_f64(a.seconds).map_err(|_| {
        Error::Usage(format!(
            "--seconds {}: want a duration in seconds",
            a.seconds
        ))
    })?;
    let t0 = Instant::now();
    marker::start(a.window);
    if a.spin {
        // No system call and no clock read per turn: a loop of plain user
        // instructions, looking at the time every million turns.
        let mut turns = 0u64;
        while t0.elapsed() < d {
            for _ in 0..1_000_000 {
                turns = std::hint::black_box(turns.wrapping_add(1));
            }
        }
    } else {
        std::thread::sleep(d);
    }
    marker::stop(a.window);
    println!(
        "window {} {} {:.6} s",
        a.window,
        if a.spin { "busy" } else { "idle" },
        t0.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// Options of window.
#[derive(clap::Args, Debug, Clone)]
pub struct WindowArgs {
    /// The window's id.
    #[arg(long)]
    pub window: u64,
    /// The command to run inside the window, and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<String>,
}

/// START, run the command to its end, STOP; exits with the command's
/// status. The window holds the command's whole run (its start-up and
/// exit too): two runs of different lengths, differenced, leave the work
/// per I/O (how the test bed counts fio beside us, `tests/testbed/count.sh`).
pub fn window(a: &WindowArgs) -> Result<i32, Error> {
    let (cmd, args) = a.command.split_first().ok_or_else(|| Error::Usage("give the command to run after --".into()))?;
    let mut child = std::process::Command::new(cmd);
    child.args(args);
    marker::start(a.window);
    let status = child.status();
    marker::stop(a.window);
    let status = status.map_err(|e| Error::Usage(format!("cannot run {cmd}: {e}; give a command on the PATH or its path")))?;
    Ok(status.code().unwrap_or(1))
}
