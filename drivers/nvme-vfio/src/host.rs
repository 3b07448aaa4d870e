//! Where the kernel's sysfs, procfs and device files are, and small readers
//! for them. Everything takes a [`Host`], whose root is `/` on a real
//! machine and a temporary directory holding a fake tree in unit tests.

use crate::Bdf;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// PCI class code of an NVM Express I/O controller: mass storage (01h),
/// non-volatile memory (08h), NVM Express programming interface (02h).
pub const NVME_CLASS: u32 = 0x010802;

/// Opens a block device node `O_RDONLY | O_EXCL`, the device number sysfs
/// gives for it (`major:minor`) when known: see [`open_block_exclusive`].
pub type OpenExclusive = fn(node: &Path, devnum: Option<&str>) -> io::Result<File>;

/// Writes a value to a sysfs attribute: see [`write_attr`].
pub type WriteAttr = fn(attr: &Path, value: &str) -> io::Result<()>;

/// The machine as seen through its file systems.
#[derive(Clone, Debug)]
pub struct Host {
    /// Prefix of every absolute path (`/` normally).
    pub root: PathBuf,
    /// Effective user id (root is 0): binding writes to sysfs.
    pub euid: u32,
    /// How a block device is claimed: [`open_block_exclusive`] on a real
    /// machine; a fake tree's plain files cannot refuse with EBUSY, so its
    /// tests put their own here.
    pub open_exclusive: OpenExclusive,
    /// How sysfs attributes are written ([`write_attr`]); a fake tree's
    /// tests put a small model of the kernel's PCI core here.
    pub write_attr: WriteAttr,
}

impl Host {
    /// This machine.
    pub fn system() -> Host {
        Host { root: PathBuf::from("/"), euid: process_euid(), open_exclusive: open_block_exclusive, write_attr }
    }

    /// A fake machine under `root` (tests), with the given user id. Device
    /// nodes there are plain files: they are opened, not checked to be
    /// block devices ([`open_tree_exclusive`]).
    pub fn at(root: impl Into<PathBuf>, euid: u32) -> Host {
        Host { root: root.into(), euid, open_exclusive: open_tree_exclusive, write_attr }
    }

    /// Whether this is the machine itself (root `/`), not a fake tree.
    pub fn is_system(&self) -> bool {
        self.root == Path::new("/")
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

    /// The device's PCI vendor and device ids.
    pub fn pci_ids(&self, bdf: &Bdf) -> io::Result<(u16, u16)> {
        let id = |f: &str| -> io::Result<u16> {
            let s = read_trimmed(&self.pci_device(bdf).join(f))?;
            u16::from_str_radix(s.trim_start_matches("0x"), 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("PCI {f} id '{s}' is not hex")))
        };
        Ok((id("vendor")?, id("device")?))
    }

    /// `/dev/vfio/GROUP`.
    pub fn vfio_group_dev(&self, group: u32) -> PathBuf {
        self.path(format!("/dev/vfio/{group}"))
    }
}

/// This process's effective user id.
pub fn process_euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `major:minor` of a device number, as sysfs's `dev` files spell it
/// (the glibc `gnu_dev_major` / `gnu_dev_minor` encoding).
pub fn devnum_string(rdev: u64) -> String {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    format!("{major}:{minor}")
}

/// Claim block device `node` the way the kernel offers it to programs:
/// `open(O_RDONLY | O_EXCL)`. The kernel refuses with EBUSY while a file
/// system, md, device-mapper, bcache, ZFS, swap or another program's
/// exclusive open holds the device, or (for a whole disk) one of its
/// partitions; while the file stays open, none of them can claim it.
/// `node` must be a block device, with device number `devnum` when given
/// (a stale /dev, or a regular file someone created at /dev/nvme0n1,
/// would otherwise pass the check without claiming anything).
pub fn open_block_exclusive(node: &Path, devnum: Option<&str>) -> io::Result<File> {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(node)?;
    let m = f.metadata()?;
    if !m.file_type().is_block_device() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a block device node (it may be a file left where the device was)", node.display()),
        ));
    }
    let got = devnum_string(m.rdev());
    if let Some(want) = devnum.filter(|w| *w != got) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is block device {got}, but sysfs says the disk is {want}: /dev is out of date", node.display()),
        ));
    }
    Ok(f)
}

/// [`OpenExclusive`] for a fake tree: opens the plain file that stands
/// for the device node (`O_EXCL` is ignored for regular files).
pub fn open_tree_exclusive(node: &Path, _devnum: Option<&str>) -> io::Result<File> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(node)
}

/// Write `value` to the sysfs attribute `attr` (one write, as the kernel
/// expects: `echo value > attr`).
pub fn write_attr(attr: &Path, value: &str) -> io::Result<()> {
    std::fs::OpenOptions::new().write(true).truncate(true).open(attr).and_then(|mut f| f.write_all(value.as_bytes()))
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
