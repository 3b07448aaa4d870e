//! What `bind` changed, kept between `bind` and `unbind` (often separate
//! processes) in `/run/nvme-bypass/BDF.json`: the controller's driver and
//! `driver_override` before, and the hugepage pool `bind` raised.
//!
//! Root writes this file, so the directory must be one nobody else can
//! redirect: every directory on the way (`/`, `/run`) belongs to root and
//! is not writable by others unless sticky (in a sticky directory only an
//! entry's owner may rename or remove it), and `nvme-bypass` itself belongs
//! to us with mode 0700. Anything else is refused, never worked around:
//! no fallback to a world-writable directory such as /var/tmp, no symbolic
//! link followed, the file written to a fresh name (`O_EXCL|O_NOFOLLOW`)
//! and renamed into place.

use super::error::BindError;
use crate::host::{list_dir, process_euid, Host};
use crate::Bdf;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The directory of the state files, as on a real machine.
pub const STATE_DIR: &str = "/run/nvme-bypass";

/// The hugepage pool before and after `bind` raised it
/// (`/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HugepageRaise {
    /// nr_hugepages before.
    pub before: u64,
    /// What `bind` set it to.
    pub set: u64,
}

/// What `bind` changed and `unbind` puts back.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SavedState {
    /// The driver before `bind` (`None`: it had none).
    pub driver: Option<String>,
    /// `driver_override` before `bind` (`None`: not set, "(null)").
    pub driver_override: Option<String>,
    /// The hugepage pool, when `bind` raised it.
    pub hugepages: Option<HugepageRaise>,
}

/// Where the state file of `bdf` lives.
pub fn state_path(host: &Host, bdf: &Bdf) -> PathBuf {
    host.path(format!("{STATE_DIR}/{bdf}.json"))
}

fn unsafe_dir(path: &Path, why: String, fix: &str) -> BindError {
    BindError::UnsafeStateDir { path: path.to_path_buf(), why, fix: fix.to_string() }
}

/// `p` is a real directory (not a link) that only root (or we) can change
/// entries of: owned by root or us, and not writable by others unless sticky.
fn check_ancestor(p: &Path, me: u32) -> Result<(), BindError> {
    let m = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(unsafe_dir(p, "it does not exist".into(), "mount a tmpfs there (`mount -t tmpfs -o mode=0755 tmpfs /run`)"))
        }
        Err(e) => return Err(unsafe_dir(p, format!("it cannot be examined: {e}"), "check it with `ls -ld`")),
    };
    if m.file_type().is_symlink() {
        return Err(unsafe_dir(p, "it is a symbolic link".into(), "make it a directory of its own"));
    }
    if !m.is_dir() {
        return Err(unsafe_dir(p, "it is not a directory".into(), "make it a directory"));
    }
    if m.uid() != 0 && m.uid() != me {
        return Err(unsafe_dir(p, format!("it belongs to uid {}, not root", m.uid()), "`chown root:root` it"));
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(unsafe_dir(
            p,
            format!("other users may write to it (mode {mode:04o}) and it is not sticky"),
            "`chmod go-w` it (or `chmod +t` it)",
        ));
    }
    Ok(())
}

/// The state directory, checked (see the module text); created (0700) when
/// `create`, else `None` when it does not exist.
fn state_dir(host: &Host, create: bool) -> Result<Option<PathBuf>, BindError> {
    let me = process_euid();
    let dir = host.path(STATE_DIR);
    check_ancestor(&host.path("/"), me)?;
    check_ancestor(dir.parent().expect("the state directory has a parent"), me)?;
    if create {
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(BindError::Io { what: "create", path: dir, source: e }),
        }
    }
    let m = match std::fs::symlink_metadata(&dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
        Err(e) => return Err(BindError::Io { what: "examine", path: dir, source: e }),
    };
    let fix = "remove it (`rm -r /run/nvme-bypass`; no controller may be bound by nvme-bypass then, or give it back by hand) and run this again";
    if m.file_type().is_symlink() {
        let to = std::fs::read_link(&dir).map(|t| t.display().to_string()).unwrap_or_default();
        return Err(unsafe_dir(&dir, format!("it is a symbolic link (to {to})"), fix));
    }
    if !m.is_dir() {
        return Err(unsafe_dir(&dir, "it is not a directory".into(), fix));
    }
    if m.uid() != me {
        return Err(unsafe_dir(&dir, format!("it belongs to uid {}, not to us (uid {me})", m.uid()), fix));
    }
    if m.mode() & 0o077 != 0 {
        return Err(unsafe_dir(&dir, format!("its mode is {:04o}, not 0700", m.mode() & 0o7777), "`chmod 0700` it"));
    }
    Ok(Some(dir))
}

/// A driver name as sysfs spells them (a state file must not steer a
/// sysfs write anywhere else, e.g. `../../..`).
fn valid_driver(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s != "."
        && s != ".."
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

/// Write the state of `bdf` (replacing what was there).
pub fn save_state(host: &Host, bdf: &Bdf, st: &SavedState) -> Result<PathBuf, BindError> {
    let dir = state_dir(host, true)?.expect("created");
    let p = dir.join(format!("{bdf}.json"));
    let tmp = dir.join(format!("{bdf}.json.new"));
    let mut v = serde_json::json!({ "bdf": bdf.to_string(), "driver": st.driver, "tool": "nvme-bypass bind" });
    if let Some(o) = &st.driver_override {
        v["driver_override"] = o.as_str().into();
    }
    if let Some(h) = &st.hugepages {
        v["nr_hugepages_before"] = h.before.into();
        v["nr_hugepages_set"] = h.set.into();
    }
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(BindError::Io { what: "remove", path: tmp, source: e }),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(format!("{v}\n").as_bytes())?;
            f.sync_all()
        })
        .map_err(|source| BindError::Io { what: "write", path: tmp.clone(), source })?;
    // rename() replaces the name, never what a link there points to.
    std::fs::rename(&tmp, &p).map_err(|source| BindError::Io { what: "rename into place", path: p.clone(), source })?;
    Ok(p)
}

/// The saved state of `bdf`, `None` when there is none.
pub fn load_state(host: &Host, bdf: &Bdf) -> Result<Option<SavedState>, BindError> {
    let Some(dir) = state_dir(host, false)? else { return Ok(None) };
    let p = dir.join(format!("{bdf}.json"));
    let mut text = String::new();
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&p) {
        Ok(mut f) => {
            let m = f.metadata().map_err(|source| BindError::Io { what: "examine", path: p.clone(), source })?;
            if !m.is_file() || m.uid() != process_euid() {
                return Err(BindError::InvalidState {
                    path: p,
                    why: format!("it is not a regular file of ours (uid {})", m.uid()),
                });
            }
            f.read_to_string(&mut text).map_err(|source| BindError::Io { what: "read", path: p.clone(), source })?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(BindError::InvalidState { path: p, why: "it is a symbolic link".into() })
        }
        Err(source) => return Err(BindError::Io { what: "read", path: p, source }),
    }
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| BindError::InvalidState { path: p.clone(), why: format!("it is not JSON: {e}") })?;
    let name = |key: &str| -> Result<Option<String>, BindError> {
        match v.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) if valid_driver(s) => Ok(Some(s.clone())),
            Some(other) => {
                Err(BindError::InvalidState { path: p.clone(), why: format!("{key} {other} is not a driver name") })
            }
        }
    };
    let driver = name("driver")?;
    let driver_override = name("driver_override")?;
    let hugepages = match (v.get("nr_hugepages_before"), v.get("nr_hugepages_set")) {
        (Some(b), Some(s)) => match (b.as_u64(), s.as_u64()) {
            (Some(before), Some(set)) => Some(HugepageRaise { before, set }),
            _ => return Err(BindError::InvalidState { path: p, why: "nr_hugepages_* are not numbers".into() }),
        },
        _ => None,
    };
    Ok(Some(SavedState { driver, driver_override, hugepages }))
}

/// Remove the state file of `bdf`; whether there was one.
pub fn remove_state(host: &Host, bdf: &Bdf) -> Result<bool, BindError> {
    let Some(dir) = state_dir(host, false)? else { return Ok(false) };
    let p = dir.join(format!("{bdf}.json"));
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(BindError::Io { what: "remove", path: p, source }),
    }
}

/// The other controllers that have a state file (still bound by us).
pub fn other_bound(host: &Host, bdf: &Bdf) -> Result<Vec<Bdf>, BindError> {
    let Some(dir) = state_dir(host, false)? else { return Ok(vec![]) };
    let mut v: Vec<Bdf> = list_dir(&dir)
        .map_err(|source| BindError::Io { what: "list", path: dir.clone(), source })?
        .iter()
        .filter_map(|n| Bdf::parse(n.strip_suffix(".json")?).ok())
        .filter(|b| b != bdf)
        .collect();
    v.sort_by_key(|b| b.to_string());
    Ok(v)
}
