//! Why binding or unbinding failed. Below the files that fail (bind.rs and
//! its `state` part), so that they import it and it imports neither.

use super::inuse::{advice, ClaimError, Use};
use crate::{Bdf, BdfError};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Errors of binding and unbinding, each saying what to do next.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The address is malformed.
    #[error(transparent)]
    Bdf(#[from] BdfError),
    /// No such PCI device.
    #[error("there is no PCI device {bdf} ({path} does not exist); `lspci -D -d ::0108` lists the NVMe controllers")]
    NoDevice { bdf: Bdf, path: PathBuf },
    /// The device is not an NVMe controller.
    #[error("{bdf} is not an NVMe controller (class {class:#08x}; an NVMe controller's is 0x010802): check the address with `lspci -D -s {bdf}`; `lspci -D -d ::0108` lists the NVMe controllers")]
    NotNvme { bdf: Bdf, class: u32 },
    /// Not root.
    #[error(
        "moving {bdf} between drivers writes to /sys and needs root (effective uid is {euid}); run it again with sudo"
    )]
    NotRoot { bdf: Bdf, euid: u32 },
    /// No IOMMU group.
    #[error("{bdf} has no IOMMU group, so the IOMMU is off or missing, and VFIO needs one (Debian kernels are built without CONFIG_VFIO_NOIOMMU, so no-IOMMU mode is not an option): enable VT-d / AMD-Vi in the firmware and boot with intel_iommu=on (Intel) or amd_iommu=on (AMD) on the kernel command line; in a QEMU guest add `-device intel-iommu`")]
    NoIommu { bdf: Bdf },
    /// A namespace or partition is in use.
    #[error("{bdf} is in use, refusing to take it away from the kernel: {}. {}, then run this again", join(.uses), advice(.uses))]
    InUse { bdf: Bdf, uses: Vec<Use> },
    /// A disk of the controller has no device node to claim it through.
    #[error("cannot check whether /dev/{dev} is in use: there is no device node for it (/dev/{dev}, /dev/block/{devnum}); run `udevadm settle`, or create it with `mknod /dev/{dev} b {}`, then run this again", .devnum.replace(':', " "))]
    NoDeviceNode { dev: String, devnum: String },
    /// An exclusive open failed other than with EBUSY.
    #[error("cannot claim {path} to check that nothing uses it: {source}; check the device node (`ls -l {path}`, `cat /sys/class/block/*/dev`), then run this again")]
    Claim {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The state directory could be redirected by someone else.
    #[error("refusing to keep the controller's state in {path}: {why}; {fix}. nvme-bypass keeps what `unbind` must put back in /run/nvme-bypass, which only root may change")]
    UnsafeStateDir { path: PathBuf, why: String, fix: String },
    /// The state file is not one we wrote.
    #[error("the state file {path} is not usable: {why}; remove it, then give the controller back by hand if it is still on vfio-pci (`echo nvme > /sys/bus/pci/devices/BDF/driver_override`, unbind, `echo BDF > /sys/bus/pci/drivers_probe`)")]
    InvalidState { path: PathBuf, why: String },
    /// Other devices of the IOMMU group are bound to drivers VFIO cannot share the group with.
    #[error("IOMMU group {group} of {bdf} also holds {}; VFIO hands out whole groups, so every device in it must be bound to vfio-pci (or to no driver). Unbind them (`echo BDF > /sys/bus/pci/devices/BDF/driver/unbind`) or bind them to vfio-pci too, or move the controller to a slot with a group of its own", join(.others))]
    GroupNotViable { bdf: Bdf, group: u32, others: Vec<GroupMember> },
    /// vfio-pci is not loaded.
    #[error("the vfio-pci driver is not loaded ({path} does not exist): run `modprobe vfio-pci` and try again")]
    NoVfioDriver { path: PathBuf },
    /// A process holds the VFIO group open.
    #[error("/dev/vfio/{group} ({bdf}) is still open by {}; unbinding now would block until it is closed: stop it first", .users.join(", "))]
    GroupBusy { bdf: Bdf, group: u32, users: Vec<String> },
    /// The device ended up on the wrong driver.
    #[error("{bdf} is bound to {} after the probe, not {want}{hint}", .got.as_deref().unwrap_or("no driver"))]
    WrongDriver { bdf: Bdf, want: String, got: Option<String>, hint: String },
    /// Something did not appear in time.
    #[error("{what} did not appear within {} s ({path})", .timeout.as_secs())]
    Timeout { what: String, path: PathBuf, timeout: Duration },
    /// A file could not be read or written.
    #[error("could not {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn join<T: fmt::Display>(v: &[T]) -> String {
    v.iter().map(|u| u.to_string()).collect::<Vec<_>>().join("; ")
}

impl From<ClaimError> for BindError {
    fn from(e: ClaimError) -> Self {
        match e {
            ClaimError::NoDeviceNode { dev, devnum } => BindError::NoDeviceNode { dev, devnum },
            ClaimError::Claim { path, source } => BindError::Claim { path, source },
        }
    }
}

/// Another device of the IOMMU group and its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    /// Its PCI address.
    pub bdf: String,
    /// Its driver, `None` if unbound.
    pub driver: Option<String>,
}

impl fmt::Display for GroupMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (bound to {})", self.bdf, self.driver.as_deref().unwrap_or("no driver"))
    }
}
