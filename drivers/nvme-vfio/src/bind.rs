//! Moving an NVMe controller between the kernel's `nvme` driver and
//! `vfio-pci`, safely.
//!
//! Taking a controller away from the kernel makes every namespace of it
//! vanish at once, with whatever was using it: a mounted file system loses
//! its disk, an LVM volume group a physical volume, the machine its swap.
//! So [`check_bind`] refuses, saying why and what to do, when any namespace
//! of the controller (or a partition of one) is mounted, held by another
//! block device (device-mapper, md), or used as swap; when the controller's
//! IOMMU group holds devices VFIO cannot take along; and when there is no
//! IOMMU at all. Only then does [`to_vfio`] move it:
//!
//! 1. remember the original driver in a small state file
//!    (`/run/nvme-bypass/BDF.json`, or under `/var/tmp` without `/run`);
//! 2. unbind it from that driver;
//! 3. write `vfio-pci` to its `driver_override` and the address to
//!    `/sys/bus/pci/drivers_probe`, so vfio-pci and only vfio-pci takes it;
//! 4. wait for `/dev/vfio/<group>`;
//! 5. reserve 2 MiB hugepages for DMA memory.
//!
//! [`restore`] does the reverse: unbind from vfio-pci (refusing while a
//! process still has the VFIO group open: the kernel would block the unbind
//! until it closes it), clear `driver_override`, reprobe so the original
//! driver takes it, wait for the controller's character device.
//!
//! Every function takes a [`Host`], so the checks run against a fake sysfs
//! and procfs in a temporary directory in the unit tests.

use crate::host::{link_name, list_dir, read_trimmed, Host, NVME_CLASS};
use crate::{Bdf, BdfError};
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The driver VFIO uses for PCI devices.
pub const VFIO_DRIVER: &str = "vfio-pci";

/// Drivers that may stay bound to other devices of the IOMMU group without
/// making it unusable for VFIO (the kernel's `vfio_dev_driver_allowed`
/// list, plus vfio-pci itself; a device with no driver is fine too).
const GROUP_SAFE_DRIVERS: &[&str] = &[VFIO_DRIVER, "pci-stub", "pcieport"];

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
    #[error("{bdf} is not an NVMe controller: its PCI class is {class:#08x}, an NVMe controller's is 0x010802; check the address with `lspci -D -s {bdf}`")]
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
    #[error("{bdf} is in use, refusing to take it away from the kernel: {}. Unmount the file systems, deactivate what holds the devices (`vgchange -an VG`, `mdadm --stop`, `dmsetup remove`), `swapoff` the swap, then run this again", join(.uses))]
    InUse { bdf: Bdf, uses: Vec<Use> },
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

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> BindError + 'a {
    move |source| BindError::Io { what, path: path.to_path_buf(), source }
}

/// One reason a block device of the controller is in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Use {
    /// Mounted (found in /proc/self/mountinfo or /proc/mounts).
    Mounted { dev: String, mountpoint: String },
    /// Held by other block devices (/sys/block/DEV/holders).
    Holders { dev: String, holders: Vec<String> },
    /// Used as swap (/proc/swaps).
    Swap { dev: String },
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Use::Mounted { dev, mountpoint } => write!(f, "/dev/{dev} is mounted on {mountpoint}"),
            Use::Holders { dev, holders } => {
                write!(f, "/dev/{dev} is held by {} (LVM, device-mapper or md)", holders.join(", "))
            }
            Use::Swap { dev } => write!(f, "/dev/{dev} is used as swap"),
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

/// A block device (namespace or partition) of the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDev {
    /// Kernel name, e.g. `nvme0n1`, `nvme0c0n1`, `nvme0n1p2`.
    pub name: String,
    /// `major:minor`, when sysfs has it.
    pub devnum: Option<String>,
    /// Path of its directory in sysfs (holders live there).
    pub sysfs: PathBuf,
}

/// What [`check_bind`] found out.
#[derive(Clone, Debug)]
pub struct Preflight {
    /// The controller.
    pub bdf: Bdf,
    /// Its driver now.
    pub driver: Option<String>,
    /// Its IOMMU group.
    pub group: u32,
    /// Its namespaces and their partitions (all unused).
    pub block_devices: Vec<BlockDev>,
}

/// Checks that need only the device to exist and be an NVMe controller.
fn check_device(host: &Host, bdf: &Bdf) -> Result<(), BindError> {
    let dir = host.pci_device(bdf);
    if !dir.exists() {
        return Err(BindError::NoDevice { bdf: *bdf, path: dir });
    }
    let class = host.pci_class(bdf).map_err(io_err("read the PCI class in", &dir))?;
    if class != NVME_CLASS {
        return Err(BindError::NotNvme { bdf: *bdf, class });
    }
    Ok(())
}

fn check_root(host: &Host, bdf: &Bdf) -> Result<(), BindError> {
    if host.euid != 0 {
        return Err(BindError::NotRoot { bdf: *bdf, euid: host.euid });
    }
    Ok(())
}

/// The IOMMU group of `bdf`, checking that VFIO can use it: every other
/// device in it is bound to vfio-pci, pci-stub, pcieport (bridges) or to
/// no driver. Also used when opening the device, to explain an unviable group.
pub fn check_group(host: &Host, bdf: &Bdf) -> Result<u32, BindError> {
    let group = host.iommu_group(bdf).ok_or(BindError::NoIommu { bdf: *bdf })?;
    let me = bdf.to_string();
    let members = host
        .group_members(group)
        .map_err(io_err("list", &host.path(format!("/sys/kernel/iommu_groups/{group}/devices"))))?;
    let others: Vec<GroupMember> = members
        .into_iter()
        .filter(|m| *m != me)
        .map(|m| {
            let driver = link_name(&host.path(format!("/sys/bus/pci/devices/{m}/driver")));
            GroupMember { bdf: m, driver }
        })
        .filter(|m| m.driver.as_deref().is_some_and(|d| !GROUP_SAFE_DRIVERS.contains(&d)))
        .collect();
    if !others.is_empty() {
        return Err(BindError::GroupNotViable { bdf: *bdf, group, others });
    }
    Ok(group)
}

fn is_ctrl_name(s: &str) -> bool {
    s.strip_prefix("nvme").is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

/// `nvmeXnY` (`with_path = false`) or also `nvmeXcYnZ` (`with_path = true`).
fn is_ns_name(s: &str, with_path: bool) -> bool {
    let Some(rest) = s.strip_prefix("nvme") else { return false };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    let Some((head, ns)) = rest.split_once('n') else { return false };
    if !digits(ns) {
        return false;
    }
    match head.split_once('c') {
        Some((s, c)) => with_path && digits(s) && digits(c),
        None => digits(head),
    }
}

/// The controller's block devices: its namespaces (`nvmeXnY`, or with
/// native multipath the per-path `nvmeXcYnZ` and the subsystem's head
/// `nvmeSnY` when every path of it goes through this controller), and the
/// partitions of each.
pub fn block_devices(host: &Host, bdf: &Bdf) -> Result<Vec<BlockDev>, BindError> {
    let nvme_dir = host.pci_device(bdf).join("nvme");
    let ctrls: Vec<String> =
        list_dir(&nvme_dir).map_err(io_err("list", &nvme_dir))?.into_iter().filter(|c| is_ctrl_name(c)).collect();
    let mut names: Vec<String> = vec![];
    for c in &ctrls {
        let d = nvme_dir.join(c);
        names.extend(list_dir(&d).map_err(io_err("list", &d))?.into_iter().filter(|n| is_ns_name(n, true)));
    }
    // Multipath heads live in the subsystem, not under the controller.
    let subsys_root = host.path("/sys/class/nvme-subsystem");
    for s in list_dir(&subsys_root).map_err(io_err("list", &subsys_root))? {
        let sd = subsys_root.join(&s);
        let entries = list_dir(&sd).map_err(io_err("list", &sd))?;
        if !entries.iter().any(|e| ctrls.contains(e)) {
            continue;
        }
        let all_ctrls_ours = entries.iter().filter(|e| is_ctrl_name(e)).all(|e| ctrls.contains(e));
        for head in entries.iter().filter(|e| is_ns_name(e, false)) {
            let paths = list_dir(&host.path(format!("/sys/block/{head}/multipath"))).unwrap_or_default();
            let only_ours = !paths.is_empty() && paths.iter().all(|p| names.contains(p));
            if all_ctrls_ours || only_ours {
                names.push(head.clone());
            }
        }
    }
    names.sort();
    names.dedup();
    let mut out = vec![];
    for n in names {
        let sysfs = host.path(format!("/sys/block/{n}"));
        let devnum = read_trimmed(&sysfs.join("dev")).ok();
        let mut parts = vec![];
        for p in list_dir(&sysfs).unwrap_or_default() {
            if p.starts_with(&n) && sysfs.join(&p).join("partition").exists() {
                let psys = sysfs.join(&p);
                parts.push(BlockDev { devnum: read_trimmed(&psys.join("dev")).ok(), name: p, sysfs: psys });
            }
        }
        parts.sort_by(|a, b| a.name.cmp(&b.name));
        out.push(BlockDev { name: n, devnum, sysfs });
        out.extend(parts);
    }
    Ok(out)
}

/// Undo the octal escapes (`\040` for a space) of /proc mount tables.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every way `devs` are in use: mounted (by device number in
/// /proc/self/mountinfo, by name in /proc/mounts), held, or swap.
pub fn uses_of(host: &Host, devs: &[BlockDev]) -> Vec<Use> {
    let mut uses = vec![];
    let mountinfo = std::fs::read_to_string(host.path("/proc/self/mountinfo")).unwrap_or_default();
    let mounts = std::fs::read_to_string(host.path("/proc/mounts")).unwrap_or_default();
    let swaps = std::fs::read_to_string(host.path("/proc/swaps")).unwrap_or_default();
    for d in devs {
        let devpath = format!("/dev/{}", d.name);
        let mut mounted: Vec<String> = vec![];
        // mountinfo: id parent major:minor root mountpoint opts ... - fstype source superopts
        for line in mountinfo.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 {
                continue;
            }
            let source = line.split(" - ").nth(1).and_then(|t| t.split_whitespace().nth(1));
            if d.devnum.as_deref() == Some(f[2]) || source == Some(devpath.as_str()) {
                mounted.push(unescape_mount(f[4]));
            }
        }
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 2 && f[0] == devpath {
                mounted.push(unescape_mount(f[1]));
            }
        }
        mounted.sort();
        mounted.dedup();
        for m in mounted {
            uses.push(Use::Mounted { dev: d.name.clone(), mountpoint: m });
        }
        let mut holders = list_dir(&d.sysfs.join("holders")).unwrap_or_default();
        if !holders.is_empty() {
            holders.sort();
            uses.push(Use::Holders { dev: d.name.clone(), holders });
        }
        if swaps.lines().skip(1).any(|l| l.split_whitespace().next() == Some(devpath.as_str())) {
            uses.push(Use::Swap { dev: d.name.clone() });
        }
    }
    uses
}

/// The read-only checks before [`to_vfio`]: the device exists, is an NVMe
/// controller, we are root, there is an IOMMU, the group is usable by VFIO,
/// and no namespace or partition of the controller is in use.
pub fn check_bind(host: &Host, bdf: &Bdf) -> Result<Preflight, BindError> {
    check_device(host, bdf)?;
    check_root(host, bdf)?;
    let group = check_group(host, bdf)?;
    let block_devices = block_devices(host, bdf)?;
    let uses = uses_of(host, &block_devices);
    if !uses.is_empty() {
        return Err(BindError::InUse { bdf: *bdf, uses });
    }
    Ok(Preflight { bdf: *bdf, driver: host.driver_of(bdf), group, block_devices })
}

/// Options of the move.
#[derive(Clone, Debug)]
pub struct BindOptions {
    /// 2 MiB hugepages to have free for DMA memory (0: leave the pool alone).
    pub hugepages: u64,
    /// How long to wait for device files to appear.
    pub timeout: Duration,
}

impl Default for BindOptions {
    fn default() -> Self {
        BindOptions { hugepages: 64, timeout: Duration::from_secs(30) }
    }
}

/// What the original driver was, kept in a small JSON file between `bind`
/// and `unbind` (which may be separate processes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedState {
    /// The driver before `bind` (`None`: it had none).
    pub driver: Option<String>,
}

/// Where the state file of `bdf` lives: /run/nvme-bypass, or
/// /var/tmp/nvme-bypass on systems without /run.
pub fn state_path(host: &Host, bdf: &Bdf) -> PathBuf {
    let run = host.path("/run");
    let dir = if run.is_dir() { run.join("nvme-bypass") } else { host.path("/var/tmp/nvme-bypass") };
    dir.join(format!("{bdf}.json"))
}

fn save_state(host: &Host, bdf: &Bdf, st: &SavedState) -> Result<PathBuf, BindError> {
    let p = state_path(host, bdf);
    let dir = p.parent().expect("state file has a directory");
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let v = serde_json::json!({ "bdf": bdf.to_string(), "driver": st.driver, "tool": "nvme-bypass bind" });
    std::fs::write(&p, format!("{v}\n")).map_err(io_err("write", &p))?;
    Ok(p)
}

/// The saved state of `bdf`, `None` when there is no state file.
pub fn load_state(host: &Host, bdf: &Bdf) -> Result<Option<SavedState>, BindError> {
    let p = state_path(host, bdf);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", &p)(e)),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| io_err("parse", &p)(io::Error::new(io::ErrorKind::InvalidData, e)))?;
    Ok(Some(SavedState { driver: v.get("driver").and_then(|d| d.as_str()).map(str::to_string) }))
}

/// Write `value` to a sysfs attribute.
fn sysfs_write(path: &Path, value: &str) -> Result<(), BindError> {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(io_err("write to", path))
}

fn wait_for(path: &Path, what: &str, timeout: Duration) -> Result<(), BindError> {
    let start = Instant::now();
    while !path.exists() {
        if start.elapsed() > timeout {
            return Err(BindError::Timeout { what: what.into(), path: path.into(), timeout });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A controller moved to vfio-pci. Dropping it gives the controller back
/// (see [`restore`]) unless [`keep`](Self::keep) was called, or it was on
/// vfio-pci already before.
#[must_use = "dropping the binding gives the controller back to its driver at once"]
pub struct VfioBinding {
    host: Host,
    /// The controller.
    pub bdf: Bdf,
    /// Its IOMMU group (`/dev/vfio/<group>`).
    pub group: u32,
    /// The driver it had before (`None`: none).
    pub original_driver: Option<String>,
    /// What was done, one line each, for printing.
    pub actions: Vec<String>,
    /// Free 2 MiB hugepages afterwards (0 also when the kernel has none).
    pub hugepages_free: u64,
    restore_on_drop: bool,
    timeout: Duration,
}

impl VfioBinding {
    /// Leave the controller on vfio-pci when this is dropped (the `bind`
    /// command: `unbind` gives it back later, from the state file).
    pub fn keep(mut self) -> Vec<String> {
        self.restore_on_drop = false;
        std::mem::take(&mut self.actions)
    }

    /// Give the controller back now, reporting what was done. A controller
    /// that was on vfio-pci before [`to_vfio`] stays there.
    pub fn restore(mut self) -> Result<Vec<String>, BindError> {
        if !std::mem::take(&mut self.restore_on_drop) {
            return Ok(vec![format!("left {} on vfio-pci, where it was before", self.bdf)]);
        }
        restore(&self.host, &self.bdf, self.timeout)
    }
}

impl Drop for VfioBinding {
    fn drop(&mut self) {
        if self.restore_on_drop {
            if let Err(e) = restore(&self.host, &self.bdf, self.timeout) {
                eprintln!("nvme-bypass: warning: could not give {} back to its driver: {e}", self.bdf);
            }
        }
    }
}

/// Move `bdf` to vfio-pci after [`check_bind`]'s checks, and set up
/// hugepages. A controller already on vfio-pci stays there (the returned
/// binding then does not restore it on drop).
pub fn to_vfio(host: &Host, bdf: &Bdf, opts: &BindOptions) -> Result<VfioBinding, BindError> {
    let pre = check_bind(host, bdf)?;
    let dev = host.pci_device(bdf);
    let mut actions = vec![];
    let vfio_drv = host.path(format!("/sys/bus/pci/drivers/{VFIO_DRIVER}"));
    let group_dev = host.vfio_group_dev(pre.group);
    let mut binding = VfioBinding {
        host: host.clone(),
        bdf: *bdf,
        group: pre.group,
        original_driver: pre.driver.clone(),
        actions: vec![],
        hugepages_free: 0,
        restore_on_drop: false,
        timeout: opts.timeout,
    };
    if pre.driver.as_deref() == Some(VFIO_DRIVER) {
        wait_for(&group_dev, "the VFIO group device", opts.timeout)?;
        actions.push(format!(
            "{bdf} is already bound to vfio-pci (IOMMU group {}, {})",
            pre.group,
            group_dev.display()
        ));
        binding.original_driver = load_state(host, bdf)?.and_then(|s| s.driver);
    } else {
        if !vfio_drv.is_dir() {
            return Err(BindError::NoVfioDriver { path: vfio_drv });
        }
        let state = save_state(host, bdf, &SavedState { driver: pre.driver.clone() })?;
        actions.push(format!(
            "remembered the original driver ({}) in {}",
            pre.driver.as_deref().unwrap_or("none"),
            state.display()
        ));
        if let Some(d) = &pre.driver {
            let names: Vec<&str> = pre.block_devices.iter().map(|b| b.name.as_str()).collect();
            sysfs_write(&dev.join("driver/unbind"), &bdf.to_string())?;
            actions.push(format!(
                "unbound {bdf} from {d}{}",
                if names.is_empty() { String::new() } else { format!(" (removes {})", names.join(", ")) }
            ));
        }
        // From here on a failure hands the device back.
        binding.restore_on_drop = true;
        sysfs_write(&dev.join("driver_override"), VFIO_DRIVER)?;
        // The probe's own result says little (it fails when no driver
        // matches); the driver link afterwards is what counts.
        let _ = sysfs_write(&host.path("/sys/bus/pci/drivers_probe"), &bdf.to_string());
        let got = host.driver_of(bdf);
        if got.as_deref() != Some(VFIO_DRIVER) {
            return Err(BindError::WrongDriver {
                bdf: *bdf,
                want: VFIO_DRIVER.into(),
                got,
                hint: "; vfio-pci's probe failed: see `dmesg | tail` (no IOMMU group? device in use?)".into(),
            });
        }
        wait_for(&group_dev, "the VFIO group device", opts.timeout)?;
        actions.push(format!(
            "bound {bdf} to vfio-pci (driver_override + drivers_probe): IOMMU group {}, {}",
            pre.group,
            group_dev.display()
        ));
        binding.restore_on_drop = false;
    }
    let (line, free) = ensure_hugepages(host, opts.hugepages);
    actions.push(line);
    binding.hugepages_free = free;
    binding.actions = actions;
    // Restore on drop only what this call moved.
    binding.restore_on_drop = pre.driver.as_deref() != Some(VFIO_DRIVER);
    Ok(binding)
}

/// Have at least `want` free 2 MiB hugepages, raising the pool if needed.
/// Returns a line saying what happened and how many are free. Failing is
/// not an error: DMA memory then falls back to ordinary locked pages.
pub fn ensure_hugepages(host: &Host, want: u64) -> (String, u64) {
    let dir = host.path("/sys/kernel/mm/hugepages/hugepages-2048kB");
    let read = |f: &str| read_trimmed(&dir.join(f)).ok().and_then(|s| s.parse::<u64>().ok());
    let (Some(free), Some(nr)) = (read("free_hugepages"), read("nr_hugepages")) else {
        return ("this kernel has no 2 MiB hugepages: DMA memory will use ordinary locked 4 KiB pages".into(), 0);
    };
    if want == 0 || free >= want {
        return (format!("hugepages: {free} free 2 MiB pages (nr_hugepages={nr}), enough for DMA memory"), free);
    }
    // The per-size file, so the request is for 2 MiB pages even when the
    // default hugepage size is 1 GiB (/proc/sys/vm/nr_hugepages is the default size's).
    let target = nr + (want - free);
    let file = dir.join("nr_hugepages");
    if let Err(e) = sysfs_write(&file, &target.to_string()) {
        return (
            format!("could not reserve hugepages ({e}); DMA memory will fall back to ordinary locked pages"),
            free,
        );
    }
    let now = read("free_hugepages").unwrap_or(0);
    if now >= want {
        (format!("hugepages: raised nr_hugepages {nr} -> {target}: {now} free 2 MiB pages for DMA memory"), now)
    } else {
        (
            format!(
                "hugepages: asked for {target} 2 MiB pages but only {now} are free (memory too fragmented?); DMA memory will fall back to ordinary locked pages once they run out (reserve them at boot with hugepages=N on the kernel command line)"
            ),
            now,
        )
    }
}

/// The processes that have `/dev/vfio/<group>` open (scanning /proc/*/fd).
pub fn group_users(host: &Host, group: u32) -> Vec<String> {
    let want = format!("/dev/vfio/{group}");
    let mut users = vec![];
    let proc_dir = host.path("/proc");
    for pid in list_dir(&proc_dir).unwrap_or_default() {
        if !pid.bytes().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let fds = proc_dir.join(&pid).join("fd");
        let holds = list_dir(&fds)
            .unwrap_or_default()
            .iter()
            .any(|fd| std::fs::read_link(fds.join(fd)).is_ok_and(|t| t == Path::new(&want)));
        if holds {
            let comm = read_trimmed(&proc_dir.join(&pid).join("comm")).unwrap_or_else(|_| "?".into());
            let me = if pid == std::process::id().to_string() && host.root == Path::new("/") {
                ", this process"
            } else {
                ""
            };
            users.push(format!("pid {pid} ({comm}{me})"));
        }
    }
    users
}

/// Give `bdf` back to the driver it had before `bind` (from the state
/// file; `nvme` if there is none): unbind from vfio-pci, clear
/// `driver_override`, reprobe, wait for the controller's character device.
pub fn restore(host: &Host, bdf: &Bdf, timeout: Duration) -> Result<Vec<String>, BindError> {
    check_device(host, bdf)?;
    check_root(host, bdf)?;
    let dev = host.pci_device(bdf);
    let state = load_state(host, bdf)?;
    let want = match &state {
        Some(s) => s.driver.clone(),
        None => Some("nvme".to_string()),
    };
    let mut actions = vec![];
    let cur = host.driver_of(bdf);
    if cur.is_some() && cur == want {
        actions.push(format!("{bdf} is already bound to {}", cur.as_deref().unwrap_or("?")));
    } else {
        if let Some(d) = &cur {
            if d == VFIO_DRIVER {
                if let Some(group) = host.iommu_group(bdf) {
                    let users = group_users(host, group);
                    if !users.is_empty() {
                        return Err(BindError::GroupBusy { bdf: *bdf, group, users });
                    }
                }
            }
            sysfs_write(&dev.join("driver/unbind"), &bdf.to_string())?;
            actions.push(format!("unbound {bdf} from {d}"));
        }
        sysfs_write(&dev.join("driver_override"), "\n")?;
        actions.push("cleared driver_override".into());
        if let Some(w) = &want {
            let _ = sysfs_write(&host.path("/sys/bus/pci/drivers_probe"), &bdf.to_string());
            if host.driver_of(bdf).as_deref() != Some(w.as_str()) {
                // The probe chose no driver or another one: ask ours directly.
                if host.driver_of(bdf).is_some() {
                    sysfs_write(&dev.join("driver/unbind"), &bdf.to_string())?;
                }
                let _ = sysfs_write(&host.path(format!("/sys/bus/pci/drivers/{w}/bind")), &bdf.to_string());
            }
            let got = host.driver_of(bdf);
            if got.as_deref() != Some(w.as_str()) {
                return Err(BindError::WrongDriver {
                    bdf: *bdf,
                    want: w.clone(),
                    got,
                    hint: format!("; is the {w} module loaded (`modprobe {w}`)? see `dmesg | tail`"),
                });
            }
            actions.push(format!("bound {bdf} to {w}"));
        } else {
            actions.push(format!("left {bdf} without a driver, as it was before bind"));
        }
    }
    if want.as_deref() == Some("nvme") {
        // The nvme driver probes asynchronously: wait for the controller.
        let nvme_dir = dev.join("nvme");
        let start = Instant::now();
        let ctrl = loop {
            if let Some(c) = list_dir(&nvme_dir).unwrap_or_default().into_iter().find(|c| is_ctrl_name(c)) {
                break c;
            }
            if start.elapsed() > timeout {
                return Err(BindError::Timeout { what: "the nvme controller".into(), path: nvme_dir, timeout });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let chardev = host.path(format!("/dev/{ctrl}"));
        wait_for(&chardev, "the controller's character device", timeout)?;
        actions.push(format!("{ctrl} is back ({})", chardev.display()));
    }
    let p = state_path(host, bdf);
    if state.is_some() {
        std::fs::remove_file(&p).map_err(io_err("remove", &p))?;
        actions.push(format!("removed {}", p.display()));
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake machine: one NVMe controller at 0000:01:00.0 bound to nvme,
    /// controller nvme0 with namespace nvme0n1 (259:0), alone in IOMMU group 7.
    struct Fake {
        dir: PathBuf,
        host: Host,
        bdf: Bdf,
    }

    impl Fake {
        fn new(tag: &str) -> Fake {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("nvme-vfio-bind-{}-{tag}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let f = Fake { host: Host::at(&dir, 0), dir, bdf: Bdf::parse("0000:01:00.0").unwrap() };
            f.pci("0000:01:00.0", "0x010802", Some("nvme"), Some(7));
            f.mkdir("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0n1");
            f.blockdev("nvme0n1", "259:0");
            f.mkdir("sys/bus/pci/drivers/vfio-pci");
            f.mkdir("run");
            f.file(
                "proc/self/mountinfo",
                "22 1 0:21 / /proc rw,nosuid - proc proc rw\n29 1 259:5 / / rw,relatime - ext4 /dev/sda1 rw\n",
            );
            f.file("proc/mounts", "proc /proc proc rw 0 0\n/dev/sda1 / ext4 rw 0 0\n");
            f.file("proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda2                               partition\t1048572\t\t0\t\t-2\n");
            f
        }
        fn mkdir(&self, p: &str) {
            std::fs::create_dir_all(self.dir.join(p)).unwrap();
        }
        fn file(&self, p: &str, content: &str) {
            let p = self.dir.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        fn link(&self, p: &str, target: &str) {
            let p = self.dir.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&p);
            symlink(target, p).unwrap();
        }
        fn pci(&self, bdf: &str, class: &str, driver: Option<&str>, group: Option<u32>) {
            let d = format!("sys/bus/pci/devices/{bdf}");
            self.file(&format!("{d}/class"), &format!("{class}\n"));
            self.file(&format!("{d}/driver_override"), "(null)\n");
            if let Some(drv) = driver {
                self.link(&format!("{d}/driver"), &format!("../../../bus/pci/drivers/{drv}"));
            }
            if let Some(g) = group {
                self.link(&format!("{d}/iommu_group"), &format!("../../../kernel/iommu_groups/{g}"));
                self.link(
                    &format!("sys/kernel/iommu_groups/{g}/devices/{bdf}"),
                    &format!("../../../../devices/pci0000:00/{bdf}"),
                );
            }
        }
        fn blockdev(&self, name: &str, devnum: &str) {
            self.file(&format!("sys/block/{name}/dev"), &format!("{devnum}\n"));
            self.mkdir(&format!("sys/block/{name}/holders"));
        }
        fn partition(&self, disk: &str, part: &str, devnum: &str) {
            self.file(&format!("sys/block/{disk}/{part}/dev"), &format!("{devnum}\n"));
            self.file(&format!("sys/block/{disk}/{part}/partition"), "1\n");
            self.mkdir(&format!("sys/block/{disk}/{part}/holders"));
        }
        fn append(&self, p: &str, line: &str) {
            let p = self.dir.join(p);
            let mut s = std::fs::read_to_string(&p).unwrap_or_default();
            s.push_str(line);
            std::fs::write(p, s).unwrap();
        }
        fn check(&self) -> Result<Preflight, BindError> {
            check_bind(&self.host, &self.bdf)
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn clean_controller_passes_and_lists_its_namespaces() {
        let f = Fake::new("clean");
        f.partition("nvme0n1", "nvme0n1p1", "259:1");
        let p = f.check().unwrap();
        assert_eq!(p.group, 7);
        assert_eq!(p.driver.as_deref(), Some("nvme"));
        let names: Vec<&str> = p.block_devices.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["nvme0n1", "nvme0n1p1"]);
        assert_eq!(p.block_devices[1].devnum.as_deref(), Some("259:1"));
    }

    #[test]
    fn mounted_namespace_is_refused_by_device_number() {
        let f = Fake::new("mounted");
        f.append("proc/self/mountinfo", "40 29 259:0 / /mnt/data rw - xfs /dev/nvme0n1 rw\n");
        let e = f.check().unwrap_err();
        let BindError::InUse { uses, .. } = &e else { panic!("{e}") };
        assert_eq!(uses, &[Use::Mounted { dev: "nvme0n1".into(), mountpoint: "/mnt/data".into() }]);
        assert!(e.to_string().contains("/dev/nvme0n1 is mounted on /mnt/data"), "{e}");
        assert!(e.to_string().contains("Unmount"), "{e}");
    }

    #[test]
    fn mounted_partition_is_refused_also_by_name_in_proc_mounts() {
        let f = Fake::new("partition");
        f.partition("nvme0n1", "nvme0n1p2", "259:2");
        // Not in mountinfo by number (e.g. btrfs reports a virtual device
        // number there): /proc/mounts still names the device.
        f.append("proc/mounts", "/dev/nvme0n1p2 /home\\040dir btrfs rw 0 0\n");
        let e = f.check().unwrap_err();
        let BindError::InUse { uses, .. } = &e else { panic!("{e}") };
        assert_eq!(uses, &[Use::Mounted { dev: "nvme0n1p2".into(), mountpoint: "/home dir".into() }]);
    }

    #[test]
    fn holders_are_refused() {
        let f = Fake::new("holders");
        f.partition("nvme0n1", "nvme0n1p1", "259:1");
        f.mkdir("sys/block/nvme0n1/nvme0n1p1/holders/dm-0");
        let e = f.check().unwrap_err();
        let BindError::InUse { uses, .. } = &e else { panic!("{e}") };
        assert_eq!(uses, &[Use::Holders { dev: "nvme0n1p1".into(), holders: vec!["dm-0".into()] }]);
        assert!(e.to_string().contains("vgchange -an"), "{e}");
    }

    #[test]
    fn swap_is_refused() {
        let f = Fake::new("swap");
        f.append("proc/swaps", "/dev/nvme0n1                            partition\t4194300\t\t0\t\t-3\n");
        let e = f.check().unwrap_err();
        let BindError::InUse { uses, .. } = &e else { panic!("{e}") };
        assert_eq!(uses, &[Use::Swap { dev: "nvme0n1".into() }]);
        assert!(e.to_string().contains("swapoff"), "{e}");
    }

    #[test]
    fn multipath_head_in_use_is_refused() {
        let f = Fake::new("multipath");
        // Native multipath: the controller has the hidden path disk
        // nvme0c0n1; the head nvme0n1 lives in the subsystem.
        std::fs::remove_dir_all(f.dir.join("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0n1")).unwrap();
        f.mkdir("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0c0n1");
        f.blockdev("nvme0c0n1", "259:1");
        f.link("sys/class/nvme-subsystem/nvme-subsys0/nvme0", "../../../devices/pci0000:00/0000:01:00.0/nvme/nvme0");
        f.mkdir("sys/class/nvme-subsystem/nvme-subsys0/nvme0n1");
        f.mkdir("sys/block/nvme0n1/multipath/nvme0c0n1");
        f.append("proc/self/mountinfo", "41 29 259:0 / /srv rw - ext4 /dev/nvme0n1 rw\n");
        let names: Vec<String> = block_devices(&f.host, &f.bdf).unwrap().into_iter().map(|b| b.name).collect();
        assert_eq!(names, ["nvme0c0n1", "nvme0n1"]);
        let e = f.check().unwrap_err();
        assert!(e.to_string().contains("/dev/nvme0n1 is mounted on /srv"), "{e}");
    }

    #[test]
    fn head_shared_with_another_controller_is_not_ours() {
        let f = Fake::new("shared-head");
        f.link("sys/class/nvme-subsystem/nvme-subsys0/nvme0", "x");
        f.link("sys/class/nvme-subsystem/nvme-subsys0/nvme1", "y");
        f.mkdir("sys/class/nvme-subsystem/nvme-subsys0/nvme0n2");
        f.mkdir("sys/block/nvme0n2/multipath/nvme0c0n2");
        f.mkdir("sys/block/nvme0n2/multipath/nvme0c1n2");
        f.mkdir("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0c0n2");
        let names: Vec<String> = block_devices(&f.host, &f.bdf).unwrap().into_iter().map(|b| b.name).collect();
        assert_eq!(names, ["nvme0c0n2", "nvme0n1"], "the head keeps its path through nvme1");
    }

    #[test]
    fn group_with_a_bound_neighbour_is_not_viable() {
        let f = Fake::new("group");
        f.pci("0000:01:00.1", "0x020000", Some("e1000e"), Some(7));
        f.pci("0000:01:00.2", "0x0c0330", None, Some(7));
        f.pci("0000:00:01.0", "0x060400", Some("pcieport"), Some(7));
        let e = f.check().unwrap_err();
        let BindError::GroupNotViable { group, others, .. } = &e else { panic!("{e}") };
        assert_eq!(*group, 7);
        assert_eq!(others, &[GroupMember { bdf: "0000:01:00.1".into(), driver: Some("e1000e".into()) }]);
        let msg = e.to_string();
        assert!(msg.contains("0000:01:00.1 (bound to e1000e)") && msg.contains("vfio-pci"), "{msg}");
    }

    #[test]
    fn no_iommu_says_how_to_enable_it() {
        let f = Fake::new("noiommu");
        std::fs::remove_file(f.dir.join("sys/bus/pci/devices/0000:01:00.0/iommu_group")).unwrap();
        let e = f.check().unwrap_err();
        assert!(matches!(e, BindError::NoIommu { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("intel_iommu=on") && msg.contains("amd_iommu=on") && msg.contains("NOIOMMU"), "{msg}");
    }

    #[test]
    fn not_an_nvme_controller() {
        let f = Fake::new("class");
        f.pci("0000:01:00.0", "0x010601", Some("ahci"), Some(7));
        let e = f.check().unwrap_err();
        assert!(matches!(e, BindError::NotNvme { class: 0x010601, .. }), "{e}");
        assert!(e.to_string().contains("0x010802"), "{e}");
    }

    #[test]
    fn nonexistent_device() {
        let f = Fake::new("missing");
        let e = check_bind(&f.host, &Bdf::parse("0000:02:00.0").unwrap()).unwrap_err();
        assert!(matches!(e, BindError::NoDevice { .. }), "{e}");
        assert!(e.to_string().contains("lspci"), "{e}");
    }

    #[test]
    fn not_root() {
        let mut f = Fake::new("user");
        f.host.euid = 1000;
        let e = f.check().unwrap_err();
        assert!(matches!(e, BindError::NotRoot { euid: 1000, .. }), "{e}");
        assert!(e.to_string().contains("sudo"), "{e}");
    }

    #[test]
    fn state_file_round_trip_under_run_or_var_tmp() {
        let f = Fake::new("state");
        assert_eq!(load_state(&f.host, &f.bdf).unwrap(), None);
        let p = save_state(&f.host, &f.bdf, &SavedState { driver: Some("nvme".into()) }).unwrap();
        assert!(p.ends_with("run/nvme-bypass/0000:01:00.0.json"), "{}", p.display());
        assert_eq!(load_state(&f.host, &f.bdf).unwrap(), Some(SavedState { driver: Some("nvme".into()) }));
        std::fs::remove_dir_all(f.dir.join("run")).unwrap();
        assert!(state_path(&f.host, &f.bdf).ends_with("var/tmp/nvme-bypass/0000:01:00.0.json"));
    }

    #[test]
    fn unbind_refuses_while_the_group_is_open() {
        let f = Fake::new("busy");
        f.link("sys/bus/pci/devices/0000:01:00.0/driver", "../../../bus/pci/drivers/vfio-pci");
        f.file("proc/4242/comm", "nvme-bypass\n");
        f.link("proc/4242/fd/5", "/dev/vfio/7");
        f.link("proc/4243/fd/5", "/dev/null");
        let e = restore(&f.host, &f.bdf, Duration::from_millis(100)).unwrap_err();
        let BindError::GroupBusy { group: 7, users, .. } = &e else { panic!("{e}") };
        assert_eq!(users, &["pid 4242 (nvme-bypass)"]);
    }

    #[test]
    fn hugepage_pool_is_raised_when_short() {
        let f = Fake::new("huge");
        let (line, free) = ensure_hugepages(&f.host, 64);
        assert_eq!(free, 0);
        assert!(line.contains("no 2 MiB hugepages"), "{line}");
        f.file("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "10\n");
        f.file("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "10\n");
        let (line, _) = ensure_hugepages(&f.host, 64);
        // The fake kernel does not allocate: the request is written, the shortfall reported.
        assert_eq!(
            std::fs::read_to_string(f.dir.join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")).unwrap(),
            "64"
        );
        assert!(line.contains("fall back"), "{line}");
    }

    #[test]
    fn names() {
        assert!(is_ns_name("nvme0n1", false) && is_ns_name("nvme12n34", true));
        assert!(is_ns_name("nvme0c1n1", true) && !is_ns_name("nvme0c1n1", false));
        assert!(!is_ns_name("nvme0n1p1", true) && !is_ns_name("nvme0", true) && !is_ns_name("nvme-subsys0", true));
        assert!(is_ctrl_name("nvme3") && !is_ctrl_name("nvme3n1") && !is_ctrl_name("nvme"));
        assert_eq!(unescape_mount("/a\\040b\\011c"), "/a b\tc");
    }
}
