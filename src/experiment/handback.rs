//! Giving the machine back however a run ends: a watcher process.
//!
//! `compare` and `sweep` change the machine for some rows: the controller
//! moves to vfio-pci, a block device gets another I/O scheduler (as the fio
//! drop-in's `ioscheduler=` does). Their
//! guards put each change back when the row or the run ends, after an
//! error and after a Ctrl-C. A second Ctrl-C (which exits at once, so that a
//! stuck run can always be ended), SIGKILL or a crash runs no guard; so a
//! device session starts a watcher first: this binary again, as the hidden
//! command `hand-back-watch`, in its own process group and ignoring the
//! terminal's signals, which reads its standard input, a pipe whose write
//! end only the run holds.
//!
//! The run writes each change to the pipe as one line before making it, and
//! another line once it is undone. When the pipe ends (the run's process
//! is gone, whichever way it went), the watcher waits on the run's pidfd
//! until every thread of it has exited, so the kernel has closed everything
//! the run held (its VFIO device and group: vfio-pci resets the controller
//! as they close), then undoes what is still open,
//! newest first, and says so on stderr:
//!
//! * a controller moved to vfio-pci goes back to the driver it had, as
//!   `nvme-bypass unbind` gives it back, if its state file says it is still
//!   ours to give back (nothing is done when the run gave it back itself);
//! * a scheduler is set back to the one it replaced.
//!
//! The lines are tab-separated: `vfio BDF`, `vfio-done BDF`,
//! `scheduler FILE OLD`, `scheduler-done FILE`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One change the run makes and the watcher may have to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The controller at this PCI address moved to vfio-pci.
    Vfio(String),
    /// A block device's scheduler file, and the scheduler it had.
    Scheduler { file: PathBuf, old: String },
}

/// A line of the pipe: a change made, or one undone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Made(Change),
    Undone(Change),
}

impl Change {
    fn line(&self, done: bool) -> String {
        let d = if done { "-done" } else { "" };
        match self {
            Change::Vfio(bdf) => format!("vfio{d}\t{bdf}\n"),
            Change::Scheduler { file, old } if !done => format!("scheduler\t{}\t{old}\n", file.display()),
            Change::Scheduler { file, .. } => format!("scheduler-done\t{}\n", file.display()),
        }
    }

    /// True when `other` names the same thing (a scheduler by its file).
    fn same(&self, other: &Change) -> bool {
        match (self, other) {
            (Change::Vfio(a), Change::Vfio(b)) => a == b,
            (Change::Scheduler { file: a, .. }, Change::Scheduler { file: b, .. }) => a == b,
            _ => false,
        }
    }
}

fn parse(line: &str) -> Option<Line> {
    let f: Vec<&str> = line.trim_end_matches('\n').split('\t').collect();
    match f.as_slice() {
        ["vfio", bdf] => Some(Line::Made(Change::Vfio(bdf.to_string()))),
        ["vfio-done", bdf] => Some(Line::Undone(Change::Vfio(bdf.to_string()))),
        ["scheduler", file, old] => Some(Line::Made(Change::Scheduler { file: file.into(), old: old.to_string() })),
        ["scheduler-done", file] => Some(Line::Undone(Change::Scheduler { file: file.into(), old: String::new() })),
        _ => None,
    }
}

/// The changes left open after `lines`, oldest first.
fn still_open(lines: impl IntoIterator<Item = Line>) -> Vec<Change> {
    let mut open: Vec<Change> = vec![];
    for l in lines {
        match l {
            // Made again while open: the first line holds what to go back to.
            Line::Made(c) => {
                if !open.iter().any(|o| o.same(&c)) {
                    open.push(c);
                }
            }
            Line::Undone(c) => open.retain(|o| !o.same(&c)),
        }
    }
    open
}

/// The write end of the watcher's pipe, once started.
static PIPE: Mutex<Option<std::process::ChildStdin>> = Mutex::new(None);

/// Start the watcher, once per process; returns when it is ready (its
/// start-up done, so that it runs nothing during a measured row). A
/// watcher that cannot start is reported, and the run goes on with its
/// guards alone.
pub fn start() {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if pipe.is_some() {
        return;
    }
    match spawn() {
        Ok(p) => *pipe = Some(p),
        Err(e) => eprintln!(
            "nvme-bypass: warning: could not start the process that gives back what this run changes (a controller moved to vfio-pci, \
             an I/O scheduler) if the run is killed: {e}; if it is, `nvme-bypass unbind BDF` gives a controller back"
        ),
    }
}

fn spawn() -> std::io::Result<std::process::ChildStdin> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    // This very binary: by its path, so that it is named nvme-bypass in ps;
    // through /proc/self/exe when that file was replaced or deleted since.
    let exe = std::env::current_exe().ok().filter(|p| p.exists()).unwrap_or_else(|| "/proc/self/exe".into());
    let mut child = Command::new(exe)
        .args(["hand-back-watch", "--parent", &std::process::id().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // Its own process group: `kill -9 %1`, `kill -9 -PGID` and
        // `timeout -k` kill the run's whole group, and the watcher is to
        // outlive them. (A kill of the whole cgroup, as systemd's stop,
        // still takes it too.)
        .process_group(0)
        .spawn()?;
    let mut ready = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped")).read_line(&mut ready)?;
    if ready.trim() != "ready" {
        return Err(std::io::Error::other("it ended before it was ready"));
    }
    Ok(child.stdin.take().expect("piped"))
}

fn send(c: &Change, done: bool) {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pipe.as_mut() {
        if let Err(e) = p.write_all(c.line(done).as_bytes()) {
            eprintln!("nvme-bypass: warning: the process that gives the machine back if this run is killed is gone ({e})");
            *pipe = None;
        }
    }
}

/// Tell the watcher of `c` before making it.
pub fn making(c: &Change) {
    send(c, false)
}

/// Tell the watcher that `c` has been undone.
pub fn undone(c: &Change) {
    send(c, true)
}

/// The selected scheduler in the text of a `queue/scheduler` file
/// (`mq-deadline kyber [none]` -> `none`); None when nothing is selected
/// (a file of only `none`: a disk whose scheduler cannot be changed).
pub fn selected_scheduler(text: &str) -> Option<&str> {
    text.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
}

/// Switch the I/O scheduler in `file` (a disk's `queue/scheduler`) from
/// `old` to `new`, the watcher told before the write (and that it is
/// undone if the write fails): compare's and sweep's rows and the fio
/// drop-in's `ioscheduler=` switch through here.
pub fn switch_scheduler(file: &Path, old: &str, new: &str) -> std::io::Result<()> {
    let change = Change::Scheduler { file: file.to_path_buf(), old: old.to_string() };
    making(&change);
    std::fs::write(file, new).inspect_err(|_| undone(&change))
}

/// Put scheduler `old` back in `file`, the watcher told once it is.
pub fn put_back_scheduler(file: &Path, old: &str) -> std::io::Result<()> {
    std::fs::write(file, old)?;
    undone(&Change::Scheduler { file: file.to_path_buf(), old: old.to_string() });
    Ok(())
}

/// Wait until process `parent` has ended, every thread of it, so that the
/// kernel has closed its files (the VFIO device among them): through its
/// pidfd, opened before the run could end; on a kernel without pidfds
/// (before 5.3), until /proc shows it a zombie or gone.
fn wait_ended(parent: u32, pidfd: Option<&std::os::fd::OwnedFd>) {
    use std::os::fd::AsFd;
    if let Some(fd) = pidfd {
        while !matches!(crate::sys::poll_readable(fd.as_fd(), -1), Ok(true) | Err(_)) {}
        return;
    }
    let ended = || match std::fs::read_to_string(format!("/proc/{parent}/stat")) {
        // The state follows the command name in parentheses.
        Ok(s) => s.rsplit_once(')').map(|(_, rest)| rest.trim_start()).is_some_and(|r| r.starts_with('Z') || r.starts_with('X')),
        Err(_) => true,
    };
    while !ended() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The watcher (`nvme-bypass hand-back-watch --parent PID`): see the
/// module's documentation. Returns the exit status: 0, or 1 when something
/// could not be given back.
pub fn watch(parent: u32) -> i32 {
    // Signals meant for the run (a closed terminal, a signal to whatever
    // group this ends up in) pass this process by: it outlives the run to do
    // its work. SIGTTOU too: it writes to the terminal from its own group.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGTTOU] {
        let _ = crate::sys::ignore_signal(sig);
    }
    // Opened before "ready": the run cannot have ended yet (it waits for
    // the line), so the pidfd is the run's. ESRCH: it has ended already.
    let pidfd = match crate::sys::pidfd_open(parent) {
        Ok(fd) => Some(fd),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return 0,
        Err(_) => None,
    };
    let mut out = std::io::stdout();
    if writeln!(out, "ready").and_then(|_| out.flush()).is_err() {
        return 1;
    }
    let lines: Vec<Line> = std::io::stdin().lock().lines().map_while(Result::ok).filter_map(|l| parse(&l)).collect();
    let open = still_open(lines);
    if open.is_empty() {
        return 0;
    }
    wait_ended(parent, pidfd.as_ref());
    let mut err = std::io::stderr();
    let mut rc = 0;
    let mut said = false;
    for c in open.iter().rev() {
        let r = undo(c);
        if !said && !matches!(r, Ok(ref a) if a.is_empty()) {
            let _ = writeln!(err, "nvme-bypass: the run (pid {parent}) ended before it gave back what it changed; giving it back:");
            said = true;
        }
        match r {
            Ok(actions) => {
                for a in actions {
                    let _ = writeln!(err, "nvme-bypass: {a}");
                }
            }
            Err(e) => {
                let _ = writeln!(err, "nvme-bypass: error: {e}");
                rc = 1;
            }
        }
    }
    rc
}

/// Undo `c`, returning what was done (nothing when it was already undone).
fn undo(c: &Change) -> Result<Vec<String>, String> {
    match c {
        Change::Vfio(bdf) => {
            use nvme_vfio::bind;
            let host = nvme_vfio::Host::system();
            let b = nvme_vfio::Bdf::parse(bdf).map_err(|e| e.to_string())?;
            if !bind::state_path(&host, &b).exists() {
                return Ok(vec![]);
            }
            bind::restore(&host, &b, std::time::Duration::from_secs(30))
                .map_err(|e| format!("could not give {bdf} back to its driver: {e}; run `nvme-bypass unbind {bdf}`"))
        }
        Change::Scheduler { file, old } => {
            let cur = std::fs::read_to_string(file).unwrap_or_default();
            if cur.split_whitespace().any(|w| w == format!("[{old}]")) {
                return Ok(vec![]);
            }
            std::fs::write(file, old)
                .map(|_| vec![format!("set the I/O scheduler back to {old} in {}", file.display())])
                .map_err(|e| format!("could not set the I/O scheduler back to {old} in {}: {e}", file.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(f: &str, old: &str) -> Change {
        Change::Scheduler { file: f.into(), old: old.into() }
    }

    #[test]
    fn every_change_reads_back_as_written() {
        for c in [Change::Vfio("0000:00:03.0".into()), sched("/sys/block/nvme0n1/queue/scheduler", "none")] {
            assert_eq!(parse(&c.line(false)), Some(Line::Made(c.clone())));
            match parse(&c.line(true)) {
                Some(Line::Undone(u)) => assert!(u.same(&c)),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(parse("something else\n"), None);
    }

    #[test]
    fn only_what_is_not_undone_is_left_open_newest_last() {
        let v = Change::Vfio("0000:00:03.0".into());
        let s = sched("/sys/block/nvme0n1/queue/scheduler", "none");
        let lines = |ls: &[(bool, &Change)]| ls.iter().map(|(done, c)| parse(&c.line(*done)).unwrap()).collect::<Vec<_>>();
        assert_eq!(still_open(lines(&[(false, &s), (true, &s), (false, &v)])), vec![v.clone()]);
        assert_eq!(still_open(lines(&[(false, &v), (false, &s)])), vec![v.clone(), s.clone()]);
        assert_eq!(still_open(lines(&[(false, &v), (true, &v), (false, &v), (true, &v)])), vec![]);
        // The same file set twice: what it had before the first goes back.
        let again = sched("/sys/block/nvme0n1/queue/scheduler", "mq-deadline");
        assert_eq!(still_open(lines(&[(false, &s), (false, &again)])), vec![s.clone()]);
    }
}
