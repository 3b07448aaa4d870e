//! fio's `ioscheduler=`: the I/O scheduler of the disk under each of a
//! job's files is switched before the job runs, checked as fio's
//! `set_ioscheduler` checks it (written, read back, `[name]` selected).
//! fio leaves the disks switched; here each disk's own scheduler is put
//! back when the run ends, also after Ctrl-C, and by the hand-back watcher
//! (`crate::experiment::handback`) when the run is killed.

use super::diskutil::disk_dir;
use crate::experiment::handback;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The schedulers switched in a run, each disk's first one kept to be put
/// back when this is dropped.
#[derive(Default)]
pub struct Schedulers {
    saved: Mutex<Vec<(PathBuf, String)>>,
}

pub use handback::selected_scheduler as selected;

impl Schedulers {
    /// Switch the disk under `path` (a block device, or the disk a regular
    /// file is on) to scheduler `name`. Ok(Some(why)) when it is left as it
    /// is, as fio leaves it (no disk found, no scheduler to change);
    /// Err when the kernel refuses the name.
    pub fn switch(&self, path: &Path, name: &str) -> Result<Option<String>, String> {
        let Some(dir) = disk_dir(path) else {
            return Ok(Some(format!("the disk under {} could not be found, so its I/O scheduler is left as it is (fio skips it too)", path.display())));
        };
        let disk = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let file = dir.join("queue/scheduler");
        self.switch_file(&file, &disk, name)
    }

    /// [`switch`](Self::switch) on a disk's `queue/scheduler` file.
    pub fn switch_file(&self, file: &Path, disk: &str, name: &str) -> Result<Option<String>, String> {
        let before = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Some(format!("{disk} has no I/O scheduler to switch ({} does not exist; fio: \"os or kernel doesn't support IO scheduler switching\")", file.display())))
            }
            Err(e) => return Err(format!("ioscheduler={name}: cannot read {}: {e}", file.display())),
        };
        let Some(old) = selected(&before).map(str::to_string) else {
            return Ok(Some(format!("{disk}'s I/O scheduler cannot be changed ({}: \"{}\"; fio: \"io scheduler is not tunable\")", file.display(), before.trim())));
        };
        if old == name {
            return Ok(None);
        }
        let refused = |why: String| format!("ioscheduler={name}: {disk} did not take it ({why}); its schedulers are: {} (run as root, or give one of them)", before.trim());
        // A run killed before it puts the scheduler back leaves that to
        // the watcher (experiment::handback), told before the write.
        handback::start();
        handback::switch_scheduler(file, &old, name).map_err(|e| refused(e.to_string()))?;
        let after = std::fs::read_to_string(file).map_err(|e| refused(format!("cannot read {} back: {e}", file.display())))?;
        if selected(&after) != Some(name) {
            return Err(refused(format!("{} reads \"{}\" after the write", file.display(), after.trim())));
        }
        let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        if !saved.iter().any(|(f, _)| f == file) {
            saved.push((file.to_path_buf(), old.clone()));
        }
        eprintln!("nvme-bypass fio: {disk}: I/O scheduler {old} -> {name} (ioscheduler=); {old} is put back when the run ends");
        Ok(None)
    }
}

impl Drop for Schedulers {
    fn drop(&mut self) {
        let saved = std::mem::take(self.saved.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (file, old) in saved.into_iter().rev() {
            match handback::put_back_scheduler(&file, &old) {
                Ok(()) => eprintln!("nvme-bypass fio: I/O scheduler {old} put back in {}", file.display()),
                Err(e) => eprintln!("nvme-bypass fio: warning: could not put I/O scheduler {old} back in {}: {e}; write it there by hand", file.display()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selected_scheduler_as_sysfs_writes_it() {
        assert_eq!(selected("mq-deadline kyber [none]\n"), Some("none"));
        assert_eq!(selected("[mq-deadline] none"), Some("mq-deadline"));
        assert_eq!(selected("none\n"), None, "a disk whose scheduler cannot be changed");
    }

    #[test]
    fn a_disk_without_a_scheduler_to_change_is_left_as_it_is() {
        let dir = std::env::temp_dir().join(format!("nvb-sched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = Schedulers::default();
        let note = s.switch_file(&dir.join("missing"), "vdz", "none").unwrap().unwrap();
        assert!(note.contains("no I/O scheduler to switch"), "{note}");
        let f = dir.join("scheduler");
        std::fs::write(&f, "none\n").unwrap();
        let note = s.switch_file(&f, "vdz", "mq-deadline").unwrap().unwrap();
        assert!(note.contains("cannot be changed"), "{note}");
        // Already selected: nothing written, nothing to put back.
        std::fs::write(&f, "mq-deadline [none]\n").unwrap();
        assert_eq!(s.switch_file(&f, "vdz", "none"), Ok(None));
        // A plain file takes the write but does not select it: refused, as
        // fio's read-back refuses it ("unable to set io scheduler").
        let e = s.switch_file(&f, "vdz", "kyber").unwrap_err();
        assert!(e.contains("ioscheduler=kyber: vdz did not take it") && e.contains("its schedulers are: mq-deadline [none]"), "{e}");
        assert!(s.saved.lock().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }
}
