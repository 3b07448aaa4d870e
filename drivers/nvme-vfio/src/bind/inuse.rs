//! Whether anything uses a controller's disks, and holding them so nothing
//! can start to while the controller changes drivers.
//!
//! Three kinds of evidence, because no single one sees everything:
//!
//! * what the kernel publishes: mount tables (ours and those of other mount
//!   namespaces, such as containers'), `holders/` (LVM, dm, md),
//!   /proc/swaps, btrfs's device lists, loop devices' backing files, the
//!   NVMe-oF target's namespaces. These name the user, so they come first;
//! * the kernel's own answer: a whole disk opened `O_RDONLY | O_EXCL` fails
//!   with EBUSY while anything has claimed it or one of its partitions
//!   (every mounted file system, including each member of a multi-device
//!   btrfs, a ZFS vdev, md, dm, bcache, swap, an `O_EXCL` program). The
//!   claims are kept ([`Claims`]) until the controller has left its driver,
//!   so nothing can mount or assemble the disk in between;
//! * the processes: a plain `open()` (a VM's disk, a database, `dd`) claims
//!   nothing, so every `/proc/PID/fd` is read for the controller's block
//!   devices and its character devices (`/dev/nvmeX`, `/dev/ngXnY`).
//!
//! Only whole disks are claimed: the kernel lets one holder claim a disk or
//! any of its partitions, not both (`bd_may_claim`), and the whole-disk claim
//! already covers the partitions both ways. When a disk refuses, its
//! partitions are tried one by one to say which one is busy.

use crate::host::{devnum_string, list_dir, read_trimmed, Host};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A block device (namespace or partition) of the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDev {
    /// Kernel name, e.g. `nvme0n1`, `nvme0c0n1`, `nvme0n1p2`.
    pub name: String,
    /// `major:minor`, when sysfs has it (a multipath path has none).
    pub devnum: Option<String>,
    /// Path of its directory in sysfs (holders live there).
    pub sysfs: PathBuf,
    /// The disk it is a partition of (`None` for a whole disk).
    pub partition_of: Option<String>,
    /// Hidden from userspace (a multipath path disk, `nvmeXcYnZ`).
    pub hidden: bool,
}

/// A device node of the controller, for finding the processes that have it open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevNode {
    /// Name under /dev: `nvme0n1`, `nvme0n1p1`, `ng0n1`, `nvme0`.
    pub name: String,
    /// `major:minor`, when sysfs has it.
    pub devnum: Option<String>,
    /// A block device (else a character device).
    pub block: bool,
}

/// Why [`claim`] could not claim a disk (a [`BindError`](super::BindError)
/// of the same name to the caller).
#[derive(Debug)]
pub enum ClaimError {
    /// A disk has no device node to claim it through.
    NoDeviceNode { dev: String, devnum: String },
    /// An exclusive open failed other than with EBUSY.
    Claim { path: PathBuf, source: io::Error },
}

/// One reason a device of the controller is in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Use {
    /// Mounted (found in /proc/self/mountinfo or /proc/mounts).
    Mounted { dev: String, mountpoint: String },
    /// Mounted in another mount namespace (a container's), found in the
    /// mountinfo of a process `pid` in it.
    MountedElsewhere { dev: String, mountpoint: String, pid: u32, comm: String },
    /// Held by other block devices (/sys/block/DEV/holders).
    Holders { dev: String, holders: Vec<String> },
    /// Used as swap (/proc/swaps).
    Swap { dev: String },
    /// A device of a btrfs file system (/sys/fs/btrfs/FSID/devices) that
    /// is mounted through another of its devices.
    BtrfsMember { dev: String, fsid: String, mountpoints: Vec<String> },
    /// The backing file of a loop device (/sys/block/loopN/loop/backing_file).
    LoopBacking { dev: String, loop_dev: String },
    /// A namespace of the kernel's NVMe-oF target (nvmet configfs).
    NvmetExport { dev: String, subsystem: String, nsid: String },
    /// Refused an exclusive open (EBUSY) with none of the above to explain it.
    Claimed { dev: String },
    /// Open in a process (/proc/PID/fd).
    OpenBy { dev: String, pid: u32, comm: String, this_process: bool },
}

impl Use {
    /// The device it is about (name under /dev).
    pub fn dev(&self) -> &str {
        match self {
            Use::Mounted { dev, .. }
            | Use::MountedElsewhere { dev, .. }
            | Use::Holders { dev, .. }
            | Use::Swap { dev }
            | Use::BtrfsMember { dev, .. }
            | Use::LoopBacking { dev, .. }
            | Use::NvmetExport { dev, .. }
            | Use::Claimed { dev }
            | Use::OpenBy { dev, .. } => dev,
        }
    }
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Use::Mounted { dev, mountpoint } => write!(f, "/dev/{dev} is mounted on {mountpoint}"),
            Use::MountedElsewhere { dev, mountpoint, pid, comm } => {
                write!(f, "/dev/{dev} is mounted on {mountpoint} in the mount namespace of pid {pid} ({comm})")
            }
            Use::Holders { dev, holders } => {
                write!(f, "/dev/{dev} is held by {} (LVM, device-mapper or md)", holders.join(", "))
            }
            Use::Swap { dev } => write!(f, "/dev/{dev} is used as swap"),
            Use::BtrfsMember { dev, fsid, mountpoints } => {
                write!(f, "/dev/{dev} is a device of the btrfs file system {fsid}")?;
                if !mountpoints.is_empty() {
                    write!(f, " mounted on {}", mountpoints.join(", "))?;
                }
                Ok(())
            }
            Use::LoopBacking { dev, loop_dev } => write!(f, "/dev/{dev} backs the loop device /dev/{loop_dev}"),
            Use::NvmetExport { dev, subsystem, nsid } => write!(
                f,
                "/dev/{dev} is exported by the kernel's NVMe-oF target (subsystem {subsystem}, namespace {nsid})"
            ),
            Use::Claimed { dev } => write!(
                f,
                "the kernel refuses to let go of /dev/{dev} (an exclusive open fails with EBUSY): it is claimed by a file system not in the mount tables (one device of a multi-device btrfs), a ZFS pool, md, device-mapper, bcache, or a program that opened it with O_EXCL"
            ),
            Use::OpenBy { dev, pid, comm, this_process } => write!(
                f,
                "/dev/{dev} is open in pid {pid} ({comm}{})",
                if *this_process { ", this process" } else { "" }
            ),
        }
    }
}

/// What to do about `uses`, one clause per kind, for the refusal message.
pub fn advice(uses: &[Use]) -> String {
    let any = |f: fn(&Use) -> bool| uses.iter().any(f);
    let mut v: Vec<String> = vec![];
    if any(|u| matches!(u, Use::Mounted { .. } | Use::Holders { .. } | Use::Swap { .. })) {
        v.push("Unmount the file systems, deactivate what holds the devices (`vgchange -an VG`, `mdadm --stop`, `dmsetup remove`), `swapoff` the swap".into());
    }
    if let Some(Use::MountedElsewhere { pid, mountpoint, .. }) =
        uses.iter().find(|u| matches!(u, Use::MountedElsewhere { .. }))
    {
        v.push(format!(
            "unmount it in that mount namespace (`nsenter -t {pid} -m umount {mountpoint}`) or stop the container it belongs to"
        ));
    }
    if any(|u| matches!(u, Use::BtrfsMember { .. })) {
        v.push("unmount the btrfs (or `btrfs device remove` the device from it)".into());
    }
    if any(|u| matches!(u, Use::LoopBacking { .. })) {
        v.push("detach the loop device (`losetup -d /dev/loopN`)".into());
    }
    if any(|u| matches!(u, Use::NvmetExport { .. })) {
        v.push("disable the namespace in the NVMe-oF target (`echo 0 > /sys/kernel/config/nvmet/subsystems/NQN/namespaces/N/enable`)".into());
    }
    if any(|u| matches!(u, Use::Claimed { .. })) {
        v.push("release what claims the disk (`lsblk -f` and `zpool status` show what is on it; `zpool export POOL` for ZFS, `mdadm --stop` for md)".into());
    }
    if let Some(Use::OpenBy { dev, .. }) = uses.iter().find(|u| matches!(u, Use::OpenBy { .. })) {
        v.push(format!("stop those processes or let them close the device (`fuser -v /dev/{dev}` lists them)"));
    }
    let mut s = v.join("; ");
    if let Some(c) = s.get(0..1) {
        s.replace_range(0..1, &c.to_uppercase());
    }
    s
}

/// Undo the octal escapes (`\040` for a space) of /proc mount tables.
pub(super) fn unescape_mount(s: &str) -> String {
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

/// The device behind `p` on a real machine, as `(is_block, major:minor)`,
/// when `named` (what the path or link says) is under /dev: device nodes
/// live there, in containers too, and a stat() elsewhere could wait on a
/// network file system that stopped answering.
fn node_id(host: &Host, p: &Path, named: &str) -> Option<(bool, String)> {
    if !host.is_system() || !named.starts_with("/dev/") {
        return None;
    }
    let m = std::fs::metadata(p).ok()?;
    let ft = m.file_type();
    (ft.is_block_device() || ft.is_char_device()).then(|| (ft.is_block_device(), devnum_string(m.rdev())))
}

/// Every way the kernel reports `devs` in use: mounted (by device number
/// in /proc/self/mountinfo, by name in /proc/mounts), held, swap, a device
/// of a mounted btrfs, the backing of a loop device, a namespace of the
/// NVMe-oF target.
pub fn uses_of(host: &Host, devs: &[BlockDev]) -> Vec<Use> {
    let mut uses = vec![];
    let mountinfo = std::fs::read_to_string(host.path("/proc/self/mountinfo")).unwrap_or_default();
    let mounts = std::fs::read_to_string(host.path("/proc/mounts")).unwrap_or_default();
    let swaps = std::fs::read_to_string(host.path("/proc/swaps")).unwrap_or_default();
    // mountinfo: id parent major:minor root mountpoint opts ... - fstype source superopts
    let mi: Vec<(String, String, Option<String>, Option<String>)> = mountinfo
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() >= 5).then(|| {
                let mut tail = line.split(" - ").nth(1).unwrap_or("").split_whitespace();
                let fstype = tail.next().map(str::to_string);
                (f[2].to_string(), unescape_mount(f[4]), fstype, tail.next().map(str::to_string))
            })
        })
        .collect();
    let elsewhere = other_namespace_mounts(host);
    let btrfs = btrfs_members(host);
    let loops = loop_backings(host);
    let nvmet = nvmet_namespaces(host);
    for d in devs {
        let devpath = format!("/dev/{}", d.name);
        let mut mounted: Vec<String> = vec![];
        for (devnum, mp, _, source) in &mi {
            if d.devnum.as_deref() == Some(devnum.as_str()) || source.as_deref() == Some(devpath.as_str()) {
                mounted.push(mp.clone());
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
        let mut is_mounted = !mounted.is_empty();
        for m in mounted {
            uses.push(Use::Mounted { dev: d.name.clone(), mountpoint: m });
        }
        for (devnum, mountpoint, pid, comm) in &elsewhere {
            if d.devnum.as_deref() == Some(devnum.as_str()) {
                is_mounted = true;
                uses.push(Use::MountedElsewhere {
                    dev: d.name.clone(),
                    mountpoint: mountpoint.clone(),
                    pid: *pid,
                    comm: comm.clone(),
                });
            }
        }
        let mut holders = list_dir(&d.sysfs.join("holders")).unwrap_or_default();
        if !holders.is_empty() {
            holders.sort();
            uses.push(Use::Holders { dev: d.name.clone(), holders });
        }
        if swaps.lines().skip(1).any(|l| l.split_whitespace().next() == Some(devpath.as_str())) {
            uses.push(Use::Swap { dev: d.name.clone() });
        }
        if !is_mounted {
            for (fsid, members) in &btrfs {
                if members.contains(&d.name) {
                    // The file system shows in the mount table under the
                    // device it was mounted with, which may be another one.
                    let mut mps: Vec<String> = mi
                        .iter()
                        .filter(|(_, _, t, s)| {
                            t.as_deref() == Some("btrfs")
                                && s.as_deref().and_then(|s| s.strip_prefix("/dev/")).is_some_and(|s| members.contains(s))
                        })
                        .map(|(_, mp, _, _)| mp.clone())
                        .collect();
                    mps.sort();
                    mps.dedup();
                    uses.push(Use::BtrfsMember { dev: d.name.clone(), fsid: fsid.clone(), mountpoints: mps });
                }
            }
        }
        let ours = |p: &str| p == devpath || (d.devnum.is_some() && node_id(host, Path::new(p), p).map(|x| x.1) == d.devnum);
        for (loop_dev, backing) in &loops {
            if ours(backing) {
                uses.push(Use::LoopBacking { dev: d.name.clone(), loop_dev: loop_dev.clone() });
            }
        }
        for (subsystem, nsid, path) in &nvmet {
            if ours(path) {
                uses.push(Use::NvmetExport { dev: d.name.clone(), subsystem: subsystem.clone(), nsid: nsid.clone() });
            }
        }
    }
    uses
}

/// The mounts of the other mount namespaces, as `(major:minor, mountpoint,
/// pid, comm)`: each namespace's /proc/PID/mountinfo read once, from its
/// lowest pid. By device number only: /dev names may differ in there.
fn other_namespace_mounts(host: &Host) -> Vec<(String, String, u32, String)> {
    let proc_dir = host.path("/proc");
    let Ok(ours) = std::fs::read_link(proc_dir.join("self/ns/mnt")) else { return vec![] };
    let mut pids: Vec<u32> = list_dir(&proc_dir).unwrap_or_default().iter().filter_map(|p| p.parse().ok()).collect();
    pids.sort_unstable();
    let mut seen = BTreeSet::from([ours]);
    let mut out = vec![];
    for pid in pids {
        let dir = proc_dir.join(pid.to_string());
        let Ok(ns) = std::fs::read_link(dir.join("ns/mnt")) else { continue };
        if !seen.insert(ns) {
            continue;
        }
        let comm = read_trimmed(&dir.join("comm")).unwrap_or_else(|_| "?".into());
        for line in std::fs::read_to_string(dir.join("mountinfo")).unwrap_or_default().lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 5 {
                out.push((f[2].to_string(), unescape_mount(f[4]), pid, comm.clone()));
            }
        }
    }
    out
}

/// btrfs file systems and the names of their devices.
fn btrfs_members(host: &Host) -> BTreeMap<String, BTreeSet<String>> {
    let root = host.path("/sys/fs/btrfs");
    let mut out = BTreeMap::new();
    for fsid in list_dir(&root).unwrap_or_default() {
        let members: BTreeSet<String> = list_dir(&root.join(&fsid).join("devices")).unwrap_or_default().into_iter().collect();
        if !members.is_empty() {
            out.insert(fsid, members);
        }
    }
    out
}

/// Loop devices and their backing files.
fn loop_backings(host: &Host) -> Vec<(String, String)> {
    let mut out = vec![];
    for b in list_dir(&host.path("/sys/block")).unwrap_or_default() {
        if b.starts_with("loop") {
            if let Ok(f) = read_trimmed(&host.path(format!("/sys/block/{b}/loop/backing_file"))) {
                out.push((b, f));
            }
        }
    }
    out
}

/// Enabled namespaces of the NVMe-oF target: (subsystem, nsid, device_path).
fn nvmet_namespaces(host: &Host) -> Vec<(String, String, String)> {
    let root = host.path("/sys/kernel/config/nvmet/subsystems");
    let mut out = vec![];
    for s in list_dir(&root).unwrap_or_default() {
        let nsdir = root.join(&s).join("namespaces");
        for n in list_dir(&nsdir).unwrap_or_default() {
            let d = nsdir.join(&n);
            if read_trimmed(&d.join("enable")).is_ok_and(|e| e == "1") {
                if let Ok(p) = read_trimmed(&d.join("device_path")) {
                    out.push((s.clone(), n, p));
                }
            }
        }
    }
    out
}

/// Exclusive opens of the controller's disks, held until dropped.
#[derive(Debug, Default)]
pub struct Claims {
    held: Vec<(String, File)>,
}

impl Claims {
    /// The claimed disks.
    pub fn devices(&self) -> Vec<&str> {
        self.held.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Their file descriptors (this process's own opens, not a use).
    pub(super) fn fds(&self) -> Vec<RawFd> {
        self.held.iter().map(|(_, f)| f.as_raw_fd()).collect()
    }
}

/// The node to open for `d`: /dev/NAME, else /dev/block/MAJ:MIN.
fn node_of(host: &Host, d: &BlockDev) -> Option<PathBuf> {
    let p = host.path(format!("/dev/{}", d.name));
    if p.exists() {
        return Some(p);
    }
    let p = host.path(format!("/dev/block/{}", d.devnum.as_deref()?));
    p.exists().then_some(p)
}

fn is_busy(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EBUSY)
}

/// Claim every whole disk of `devs` (see the module text). A disk that
/// refuses is reported as [`Use::Claimed`] (naming the busy partitions)
/// unless `explained` already names it or them. A disk without a device
/// number, or a hidden one without a node (a multipath path: userspace
/// reaches it through the head), cannot be opened by anyone and is skipped.
pub fn claim(host: &Host, devs: &[BlockDev], explained: &BTreeSet<String>) -> Result<(Claims, Vec<Use>), ClaimError> {
    let mut claims = Claims::default();
    let mut uses = vec![];
    for d in devs.iter().filter(|d| d.partition_of.is_none() && d.devnum.is_some()) {
        let Some(node) = node_of(host, d) else {
            // A multipath path disk has no node (its head has); anything
            // else without one could be in use through a node elsewhere.
            if d.hidden {
                continue;
            }
            return Err(ClaimError::NoDeviceNode { dev: d.name.clone(), devnum: d.devnum.clone().unwrap_or_default() });
        };
        match (host.open_exclusive)(&node, d.devnum.as_deref()) {
            Ok(f) => claims.held.push((d.name.clone(), f)),
            Err(e) if is_busy(&e) => {
                let mut busy = vec![];
                for p in devs.iter().filter(|p| p.partition_of.as_deref() == Some(d.name.as_str())) {
                    if let Some(pn) = node_of(host, p) {
                        if (host.open_exclusive)(&pn, p.devnum.as_deref()).is_err_and(|e| is_busy(&e)) {
                            busy.push(p.name.clone());
                        }
                    }
                }
                if busy.is_empty() {
                    busy.push(d.name.clone());
                }
                for b in busy {
                    if !explained.contains(&b) && !explained.contains(&d.name) {
                        uses.push(Use::Claimed { dev: b });
                    }
                }
            }
            Err(source) => return Err(ClaimError::Claim { path: node, source }),
        }
    }
    Ok((claims, uses))
}

/// The processes that have any of `nodes` open, by /proc/PID/fd: the link
/// text names the node (`/dev/nvme0n1`), or on a real machine the file
/// behind it is that device whatever its name. This process's `own` file
/// descriptors (its claims) are not a use.
pub fn open_by(host: &Host, nodes: &[DevNode], own: &[RawFd]) -> Vec<Use> {
    let by_path: BTreeMap<String, &DevNode> = nodes
        .iter()
        .flat_map(|n| {
            let mut v = vec![(format!("/dev/{}", n.name), n)];
            if let Some(d) = &n.devnum {
                v.push((format!("/dev/{}/{d}", if n.block { "block" } else { "char" }), n));
            }
            v
        })
        .collect();
    let by_id: BTreeMap<(bool, &str), &DevNode> =
        nodes.iter().filter_map(|n| Some(((n.block, n.devnum.as_deref()?), n))).collect();
    let me = std::process::id();
    let proc_dir = host.path("/proc");
    let mut found: BTreeSet<(u32, String)> = BTreeSet::new();
    for pid in list_dir(&proc_dir).unwrap_or_default() {
        let Ok(pid_n) = pid.parse::<u32>() else { continue };
        let fds = proc_dir.join(&pid).join("fd");
        // Processes come and go: one that vanished, or whose fds we may
        // not read, is skipped (as root, every live one is readable).
        for fd in list_dir(&fds).unwrap_or_default() {
            if host.is_system() && pid_n == me && fd.parse::<RawFd>().is_ok_and(|n| own.contains(&n)) {
                continue;
            }
            let link = fds.join(&fd);
            let Ok(target) = std::fs::read_link(&link) else { continue };
            let t = target.to_string_lossy();
            let hit = by_path.get(t.trim_end_matches(" (deleted)")).copied().or_else(|| {
                let (block, id) = node_id(host, &link, &t)?;
                by_id.get(&(block, id.as_str())).copied()
            });
            if let Some(n) = hit {
                found.insert((pid_n, n.name.clone()));
            }
        }
    }
    found
        .into_iter()
        .map(|(pid, dev)| {
            let comm = read_trimmed(&proc_dir.join(pid.to_string()).join("comm")).unwrap_or_else(|_| "?".into());
            Use::OpenBy { dev, pid, comm, this_process: host.is_system() && pid == me }
        })
        .collect()
}
