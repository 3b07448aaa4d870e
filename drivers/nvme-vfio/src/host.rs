//! Where the kernel's sysfs, procfs and device files are, and small readers
//! for them. Everything takes a [`Host`], whose root is `/` on a real
//! machine and a temporary directory holding a fake tree in unit tests.

use crate::Bdf;
use std::io;
use std::path::{Path, PathBuf};

/// PCI class code of an NVM Express I/O controller: mass storage (01h),
/// non-volatile memory (08h), NVM Express programming interface (02h).
pub const NVME_CLASS: u32 = 0x010802;

/// The machine as seen through its file systems.
#[derive(Clone, Debug)]
pub struct Host {
    /// Prefix of every absolute path (`/` normally).
    pub root: PathBuf,
    /// Effective user id (root is 0): binding writes to sysfs.
    pub euid: u32,
}

impl Host {
    /// This machine.
    pub fn system() -> Host {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        Host { root: PathBuf::from("/"), euid }
    }

    /// A fake machine under `root` (tests), with the given user id.
    pub fn at(root: impl Into<PathBuf>, euid: u32) -> Host {
        Host { root: root.into(), euid }
    }

    /// `path` (absolute, as on a real machine) under this host's root.
    pub fn path(&self, path: impl AsRef<Path>) -> PathBuf {
        let p = path.as_ref();
        self.root.join(p.strip_prefix("/").unwrap_or(p))
    }

    /// `/sys/bus/pci/devices/BDF`.
    pub fn pci_device(&self, bdf: &Bdf) -> PathBuf {
        self.path(format!("/sys/bus/pci/devices/{bdf}"))
    }

    /// The name of the driver bound to `bdf`, `None` when unbound.
    pub fn driver_of(&self, bdf: &Bdf) -> Option<String> {
        link_name(&self.pci_device(bdf).join("driver"))
    }

    /// The device's IOMMU group, `None` without an IOMMU.
    pub fn iommu_group(&self, bdf: &Bdf) -> Option<u32> {
        link_name(&self.pci_device(bdf).join("iommu_group"))?.parse().ok()
    }

    /// The PCI functions in IOMMU group `group` (sorted).
    pub fn group_members(&self, group: u32) -> io::Result<Vec<String>> {
        let mut v = list_dir(&self.path(format!("/sys/kernel/iommu_groups/{group}/devices")))?;
        v.sort();
        Ok(v)
    }

    /// The device's PCI class code (24 bits).
    pub fn pci_class(&self, bdf: &Bdf) -> io::Result<u32> {
        let s = read_trimmed(&self.pci_device(bdf).join("class"))?;
        u32::from_str_radix(s.trim_start_matches("0x"), 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("PCI class '{s}' is not hex")))
    }

    /// `/dev/vfio/GROUP`.
    pub fn vfio_group_dev(&self, group: u32) -> PathBuf {
        self.path(format!("/dev/vfio/{group}"))
    }
}

/// The last component of the target of symlink `p`, `None` if it is not a symlink.
pub fn link_name(p: &Path) -> Option<String> {
    let t = std::fs::read_link(p).ok()?;
    Some(t.file_name()?.to_string_lossy().into_owned())
}

/// A small file's content without surrounding white space.
pub fn read_trimmed(p: &Path) -> io::Result<String> {
    Ok(std::fs::read_to_string(p)?.trim().to_string())
}

/// The names in a directory (empty if it does not exist).
pub fn list_dir(p: &Path) -> io::Result<Vec<String>> {
    match std::fs::read_dir(p) {
        Ok(rd) => rd.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned())).collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(e),
    }
}
