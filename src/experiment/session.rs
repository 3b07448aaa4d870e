//! What `compare` and `sweep` do around a device: check that it can be
//! used (root, the controller on nvme), move the controller to vfio-pci for
//! the vfio rows and give it back afterwards (also after an error or
//! Ctrl-C: the binding guard restores on drop; when the process is killed,
//! the watcher of [`handback`] does), set a row's I/O scheduler and put the
//! old one back, and run one row.

use crate::error::Error;
use crate::engine::{self, JobSpec, ThreadResult};
use crate::experiment::handback::{self, Change};
use crate::experiment::plan::Variant;
use crate::measure::clock::Clock;
use crate::measure::topology::{self, Topology};
use crate::report::RunSummary;
use nvme_vfio::bind::{self, BindOptions, VfioBinding};
use nvme_vfio::{Bdf, Host};
use std::path::{Path, PathBuf};

/// Note of every simulator figure.
pub const SIM_NOTE: &str = "in-process simulated controller: figures are the driver's cost against a model, not a device";

/// The device line of a report: "device: BDF (controller nvme0, block
/// /dev/nvme0n1, generic /dev/ng0n1), namespace 1".
pub fn device_line(t: &Topology) -> String {
    format!(
        "device: {} (controller {}, block {}, generic {}), namespace {}",
        t.bdf.as_deref().unwrap_or("?"),
        t.controller.as_deref().unwrap_or("?"),
        t.block.as_ref().map(|p| p.display().to_string()).unwrap_or("-".into()),
        t.generic.as_ref().map(|p| p.display().to_string()).unwrap_or("-".into()),
        t.nsid
    )
}

/// A device a comparison runs on, and its binding while the vfio rows run.
pub struct Session {
    /// The device's names and its driver when the session began.
    pub topology: Topology,
    device: String,
    binding: Option<VfioBinding>,
    bind_error: Option<String>,
}

impl Session {
    /// Check that `device` can be compared on: root (`who` is what needs
    /// it, `otherwise` what to do without), and the controller on nvme.
    pub fn open(device: &str, nsid: u32, who: &str, otherwise: &str) -> Result<Self, Error> {
        if crate::sys::geteuid() != 0 {
            return Err(Error::usage(format!("{who} needs root: it opens /dev/nvme*, /dev/ng* and moves the controller to vfio-pci; run it with sudo{otherwise}")));
        }
        let t = topology::resolve(device, nsid)?;
        if t.driver.as_deref() != Some("nvme") {
            return Err(Error::usage(format!(
                "controller {} is bound to {}, not nvme: give it back first with `nvme-bypass unbind {}`",
                t.bdf.as_deref().unwrap_or("?"),
                t.driver.as_deref().unwrap_or("no driver"),
                t.bdf.as_deref().unwrap_or("BDF")
            )));
        }
        // Before anything is changed, and before any row is measured.
        handback::start();
        Ok(Session { topology: t, device: device.to_string(), binding: None, bind_error: None })
    }

    /// Have the controller on vfio-pci for a vfio row: moved at the first
    /// call; a move that failed is not tried again (the error comes back).
    pub fn bind_vfio(&mut self) -> Result<(), String> {
        if self.binding.is_none() && self.bind_error.is_none() {
            match bind_guard(self.topology.bdf.as_deref().unwrap_or("")) {
                Ok(b) => {
                    self.binding = Some(b);
                    settle();
                }
                Err(e) => self.bind_error = Some(crate::error::chain(&e)),
            }
        }
        self.bind_error.clone().map_or(Ok(()), Err)
    }

    /// Give the controller back to its driver now if it was moved (a
    /// kernel row runs after a vfio row when the rounds of a repeated
    /// comparison rotate), and wait for the namespace's device files. A
    /// later vfio row moves it again.
    pub fn release_vfio(&mut self) -> Result<(), String> {
        if let Some(b) = self.binding.take() {
            release_guard(b).map_err(|e| crate::error::chain(&e))?;
            // The namespace's block and generic devices appear shortly after
            // the controller's character device that restore waits for.
            let start = std::time::Instant::now();
            for p in self.topology.block.iter().chain(self.topology.generic.iter()) {
                while !p.exists() && start.elapsed() < std::time::Duration::from_secs(10) {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            self.say_if_renamed(self.now().as_ref());
            settle();
        }
        Ok(())
    }

    /// True while the controller is on vfio-pci for the vfio rows.
    pub fn on_vfio(&self) -> bool {
        self.binding.is_some()
    }

    /// Give the controller back to its driver if it was moved, and return
    /// that driver as it is now.
    pub fn finish(mut self) -> Option<String> {
        let released = self.binding.take().map(|b| {
            if let Err(e) = release_guard(b) {
                eprintln!("nvme-bypass: warning: {}", crate::error::chain(&e));
            }
        });
        let now = self.now();
        if released.is_some() {
            self.say_if_renamed(now.as_ref());
        }
        now.and_then(|x| x.driver)
    }

    /// The device's names and driver as they are now.
    fn now(&self) -> Option<Topology> {
        topology::resolve(self.topology.bdf.as_deref().unwrap_or(&self.device), self.topology.nsid).ok()
    }

    /// After the controller came back from vfio-pci: a warning when the
    /// kernel named it anew (`now`), which it does when something still
    /// held the old names open as it left.
    fn say_if_renamed(&self, now: Option<&Topology>) {
        if let Some(n) = now.filter(|n| n.controller.is_some() && n.controller != self.topology.controller) {
            eprintln!(
                "nvme-bypass: warning: the controller came back as {}, not {}: something still held {} open when it moved to vfio-pci, so the kernel gave it a new name; its namespace is {} now",
                n.controller.as_deref().unwrap_or("?"),
                self.topology.controller.as_deref().unwrap_or("?"),
                self.topology.block.as_ref().map(|b| b.display().to_string()).unwrap_or("its namespace".into()),
                n.block.as_ref().map(|b| b.display().to_string()).unwrap_or("not found".into())
            );
        }
    }
}

/// After the controller moved, wait (at most 10 s) until the machine is
/// quiet: the driver's probe or removal, the namespace scan and udev run
/// on after the move returns, and /proc/stat would count their work in the
/// next row's system-wide CPU. Quiet: under a fifth of a core busy over
/// 300 ms.
fn settle() {
    use crate::measure::stats::SystemCpu;
    use std::time::{Duration, Instant};
    let start = Instant::now();
    let window = Duration::from_millis(300);
    while start.elapsed() < Duration::from_secs(10) {
        let Some(a) = SystemCpu::now() else { return };
        let t = Instant::now();
        std::thread::sleep(window);
        let Some(b) = SystemCpu::now() else { return };
        if (b.since(&a).busy_ns() as f64) < 0.2 * t.elapsed().as_nanos() as f64 {
            break;
        }
    }
    eprintln!("nvme-bypass: waited {:.1} s for the machine to be quiet after moving the controller", start.elapsed().as_secs_f64());
}

/// Move `bdf` to vfio-pci, printing what was done to stderr. The returned
/// guard gives the controller back when dropped (also on unwinding);
/// [`release_guard`] does it with a report.
fn bind_guard(bdf: &str) -> Result<VfioBinding, Error> {
    let bdf = Bdf::parse(bdf)?;
    let change = Change::Vfio(bdf.to_string());
    handback::making(&change);
    // A failed move is left open for the watcher: to_vfio puts back what it
    // did, but if that fails too the state file stays, and the watcher
    // tries again (it does nothing where there is no state file).
    let binding = bind::to_vfio(&Host::system(), &bdf, &BindOptions::default())?;
    for line in &binding.actions {
        eprintln!("nvme-bypass: {line}");
    }
    Ok(binding)
}

/// Give back what [`bind_guard`] moved, printing what was done to stderr.
fn release_guard(b: VfioBinding) -> Result<(), Error> {
    let change = Change::Vfio(b.bdf.to_string());
    for line in b.restore()? {
        eprintln!("nvme-bypass: {line}");
    }
    handback::undone(&change);
    Ok(())
}

/// Sets a block device's scheduler and puts the old one back on drop.
struct SchedulerGuard {
    file: PathBuf,
    old: String,
}

impl SchedulerGuard {
    fn set(block: &Path, sched: &str) -> Result<Self, Error> {
        let name = block.file_name().and_then(|n| n.to_str()).unwrap_or("");
        Self::set_file(PathBuf::from(format!("/sys/block/{name}/queue/scheduler")), name, sched)
    }

    /// [`set`](Self::set) on disk `name`'s `queue/scheduler` file.
    fn set_file(file: PathBuf, name: &str, sched: &str) -> Result<Self, Error> {
        let cur = std::fs::read_to_string(&file).map_err(|e| Error::io(format!("read {}", file.display()), e))?;
        let Some(old) = handback::selected_scheduler(&cur).map(str::to_string) else {
            return Err(Error::usage(format!(
                "the row needs scheduler {sched}, but {name}'s cannot be changed ({}: \"{}\"); leave out the scheduler rows (a --paths list without sched)",
                file.display(),
                cur.trim()
            )));
        };
        handback::switch_scheduler(&file, &old, sched).map_err(|e| Error::io(format!("set scheduler {sched} in {}", file.display()), e))?;
        let guard = SchedulerGuard { file, old };
        // Read back, as fio's set_ioscheduler does: a row labelled with a
        // scheduler must have run under it (the guard puts the old one back).
        let now = std::fs::read_to_string(&guard.file).map_err(|e| Error::io(format!("read {} back", guard.file.display()), e))?;
        if handback::selected_scheduler(&now) != Some(sched) {
            return Err(Error::usage(format!(
                "{name} did not take scheduler {sched}: {} reads \"{}\" after the write (its schedulers: {}); load its module (modprobe {sched}) or leave out the scheduler rows (a --paths list without sched)",
                guard.file.display(),
                now.trim(),
                cur.trim()
            )));
        }
        Ok(guard)
    }
}

impl Drop for SchedulerGuard {
    fn drop(&mut self) {
        if let Err(e) = handback::put_back_scheduler(&self.file, &self.old) {
            eprintln!("nvme-bypass: warning: could not restore scheduler {} in {}: {e}", self.old, self.file.display());
        }
    }
}

fn drop_caches() {
    // sync, then drop the clean page cache so buffered reads start cold.
    let _ = std::process::Command::new("sync").status();
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
}

/// Run one row: set its scheduler, open its path (a queue pair per job),
/// run `spec`, summarize (emulation carried from `t`).
pub fn run_variant(v: &Variant, t: &Topology, spec: &JobSpec, clock: Clock, status: bool) -> Result<(RunSummary, Vec<ThreadResult>), Error> {
    let _sched = match (&v.scheduler, &t.block) {
        (Some(s), Some(b)) => Some(SchedulerGuard::set(b, s)?),
        _ => None,
    };
    if v.spec.kernel().is_some_and(|k| k.buffered) {
        drop_caches();
    }
    let target = v.spec.open(spec.numjobs as u16)?;
    let geo = target.geometry();
    let mut spec = spec.clone();
    if !spec.size_given {
        spec.size = geo.bytes().saturating_sub(spec.offset);
    }
    engine::validate(&spec, &geo)?;
    let threads = engine::run(&*target, &spec, clock, status)?;
    let mut s = RunSummary::new(v.label.clone(), target.describe(), &threads, clock.source());
    s.interrupt_driven = Some(!target.polled());
    s.emulated = t.emulated.is_some();
    s.emulated_note = t.emulated.clone();
    Ok((s, threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scheduler row runs under its scheduler or not at all: a write the
    /// kernel does not take (here a plain file, which keeps what is written
    /// without the brackets of a selection) is refused, and the old
    /// scheduler is put back.
    #[test]
    fn a_scheduler_the_disk_does_not_take_is_refused_and_the_old_one_put_back() {
        let f = std::env::temp_dir().join(format!("nvb-session-scheduler-{}", std::process::id()));
        std::fs::write(&f, "[none] mq-deadline\n").unwrap();
        let e = SchedulerGuard::set_file(f.clone(), "nvme0n1", "mq-deadline").err().expect("refused").to_string();
        assert!(e.contains("nvme0n1 did not take scheduler mq-deadline") && e.contains("without sched"), "{e}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "none", "the old one put back");
        // Nothing selected: a disk whose scheduler cannot be changed.
        std::fs::write(&f, "none\n").unwrap();
        let e = SchedulerGuard::set_file(f.clone(), "nvme0n1", "mq-deadline").err().expect("refused").to_string();
        assert!(e.contains("cannot be changed"), "{e}");
        std::fs::remove_file(&f).unwrap();
    }
}
