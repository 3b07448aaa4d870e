//! Moving an NVMe controller between the kernel's `nvme` driver and
//! `vfio-pci`, safely.
//!
//! Taking a controller away from the kernel makes every namespace of it
//! vanish at once, with whatever was using it: a mounted file system loses
//! its disk, an LVM volume group a physical volume, a VM its disk, the
//! machine its swap. So [`check_bind`] refuses, saying what holds the disk
//! and what to do, when anything uses a namespace of the controller or a
//! partition of one (mounted, held by device-mapper or md, swap, a device
//! of a mounted btrfs, a loop device's backing, exported by the NVMe-oF
//! target, claimed by anything else such as ZFS: see [`inuse`]), when any
//! process has one of its block or character devices open, when the
//! controller's IOMMU group holds devices VFIO cannot take along, and when
//! there is no IOMMU at all. It returns the disks claimed (`O_EXCL`), and
//! [`to_vfio`] keeps them claimed until the driver has let go of them, so
//! nothing can mount or assemble them in between. Then it:
//!
//! 1. remembers the original driver and `driver_override` in a small state
//!    file ([`state`]: `/run/nvme-bypass/BDF.json`, root's alone);
//! 2. writes `vfio-pci` to the device's `driver_override`, so that from the
//!    unbind on no driver but vfio-pci may take it;
//! 3. unbinds it from its driver (its block devices disappear);
//! 4. writes the address to `/sys/bus/pci/drivers_probe`: vfio-pci takes it
//!    (this is the kernel's order: override, unbind, probe;
//!    Documentation/ABI/testing/sysfs-bus-pci, `driver_override`);
//! 5. waits for `/dev/vfio/<group>`;
//! 6. reserves 2 MiB hugepages for DMA memory, noting in the state file what
//!    the pool was.
//!
//! [`restore`] does the reverse, in the same order: refuses while a process
//! still has the VFIO group open (the kernel would block the unbind until
//! it closes it), writes the original driver to `driver_override`, unbinds
//! from vfio-pci, reprobes so that driver takes it, puts `driver_override`
//! back as it was, waits for the controller's character device, and gives
//! back the hugepages `bind` reserved.
//!
//! Every function takes a [`Host`], so the checks run against a fake sysfs
//! and procfs in a temporary directory in the unit tests.

mod error;
pub mod inuse;
pub mod state;

pub use error::{BindError, GroupMember};
pub use inuse::{BlockDev, Claims, DevNode, Use};
pub use state::{load_state, save_state, state_path, HugepageRaise, SavedState, STATE_DIR};

use crate::host::{link_name, list_dir, read_trimmed, Host, NVME_CLASS};
use crate::Bdf;
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The driver VFIO uses for PCI devices.
pub const VFIO_DRIVER: &str = "vfio-pci";

/// Drivers that may stay bound to other devices of the IOMMU group without
/// making it unusable for VFIO (the kernel's `vfio_dev_driver_allowed`
/// list, plus vfio-pci itself; a device with no driver is fine too).
const GROUP_SAFE_DRIVERS: &[&str] = &[VFIO_DRIVER, "pci-stub", "pcieport"];

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> BindError + 'a {
    move |source| BindError::Io { what, path: path.to_path_buf(), source }
}

/// What [`check_bind`] found out, and the disks it claimed.
#[derive(Debug)]
pub struct Preflight {
    /// The controller.
    pub bdf: Bdf,
    /// Its driver now.
    pub driver: Option<String>,
    /// Its IOMMU group.
    pub group: u32,
    /// Its namespaces and their partitions (all unused).
    pub block_devices: Vec<BlockDev>,
    /// Its character devices: the controller's and the generic namespace ones.
    pub char_devices: Vec<DevNode>,
    /// The whole disks, opened `O_EXCL`: while this is alive, nothing can
    /// mount, assemble or otherwise claim them or their partitions.
    pub claims: Claims,
}

/// Checks that need only the device to exist and be an NVMe controller:
/// the first thing to say about an address, before its driver or binding
/// (advice to bind or unbind a device that is not a controller goes round
/// in circles).
pub fn check_device(host: &Host, bdf: &Bdf) -> Result<(), BindError> {
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

fn digits(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit())
}

fn is_ctrl_name(s: &str) -> bool {
    s.strip_prefix("nvme").is_some_and(digits)
}

/// `nvmeXnY` (`with_path = false`) or also `nvmeXcYnZ` (`with_path = true`).
fn is_ns_name(s: &str, with_path: bool) -> bool {
    let Some(rest) = s.strip_prefix("nvme") else { return false };
    let Some((head, ns)) = rest.split_once('n') else { return false };
    if !digits(ns) {
        return false;
    }
    match head.split_once('c') {
        Some((s, c)) => with_path && digits(s) && digits(c),
        None => digits(head),
    }
}

/// A generic namespace character device, `ngXnY`.
fn is_generic_name(s: &str) -> bool {
    s.strip_prefix("ng").and_then(|r| r.split_once('n')).is_some_and(|(a, b)| digits(a) && digits(b))
}

/// The nvmeX controllers of `bdf`.
fn controllers(host: &Host, bdf: &Bdf) -> Result<Vec<String>, BindError> {
    let nvme_dir = host.pci_device(bdf).join("nvme");
    Ok(list_dir(&nvme_dir).map_err(io_err("list", &nvme_dir))?.into_iter().filter(|c| is_ctrl_name(c)).collect())
}

/// The subsystems that hold one of `ctrls`, each with its entries and
/// whether all of its controllers are ours.
fn our_subsystems(host: &Host, ctrls: &[String]) -> Result<Vec<(PathBuf, Vec<String>, bool)>, BindError> {
    let subsys_root = host.path("/sys/class/nvme-subsystem");
    let mut out = vec![];
    for s in list_dir(&subsys_root).map_err(io_err("list", &subsys_root))? {
        let sd = subsys_root.join(&s);
        let entries = list_dir(&sd).map_err(io_err("list", &sd))?;
        if !entries.iter().any(|e| ctrls.contains(e)) {
            continue;
        }
        let all_ctrls_ours = entries.iter().filter(|e| is_ctrl_name(e)).all(|e| ctrls.contains(e));
        out.push((sd, entries, all_ctrls_ours));
    }
    Ok(out)
}

/// The controller's block devices: its namespaces (`nvmeXnY`, or with
/// native multipath the per-path `nvmeXcYnZ` and the subsystem's head
/// `nvmeSnY` when every path of it goes through this controller), and the
/// partitions of each.
pub fn block_devices(host: &Host, bdf: &Bdf) -> Result<Vec<BlockDev>, BindError> {
    let nvme_dir = host.pci_device(bdf).join("nvme");
    let ctrls = controllers(host, bdf)?;
    let mut names: Vec<String> = vec![];
    for c in &ctrls {
        let d = nvme_dir.join(c);
        names.extend(list_dir(&d).map_err(io_err("list", &d))?.into_iter().filter(|n| is_ns_name(n, true)));
    }
    // Multipath heads live in the subsystem, not under the controller.
    for (_, entries, all_ctrls_ours) in our_subsystems(host, &ctrls)? {
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
                parts.push(BlockDev {
                    devnum: read_trimmed(&psys.join("dev")).ok(),
                    name: p,
                    sysfs: psys,
                    partition_of: Some(n.clone()),
                    hidden: false,
                });
            }
        }
        parts.sort_by(|a, b| a.name.cmp(&b.name));
        let hidden = !is_ns_name(&n, false) || read_trimmed(&sysfs.join("hidden")).is_ok_and(|h| h == "1");
        out.push(BlockDev { name: n, devnum, sysfs, partition_of: None, hidden });
        out.extend(parts);
    }
    Ok(out)
}

/// The controller's character devices: `/dev/nvmeX` of each controller and
/// the generic namespace devices `/dev/ngXnY`, under the controller or, for
/// a multipath head among `block` (`nvmeSnY`), its subsystem's `ngSnY`.
pub fn char_devices(host: &Host, bdf: &Bdf, block: &[BlockDev]) -> Result<Vec<DevNode>, BindError> {
    let nvme_dir = host.pci_device(bdf).join("nvme");
    let ctrls = controllers(host, bdf)?;
    let dev = |d: &Path| read_trimmed(&d.join("dev")).ok();
    let mut out = vec![];
    for c in &ctrls {
        let d = nvme_dir.join(c);
        out.push(DevNode { name: c.clone(), devnum: dev(&d), block: false });
        for g in list_dir(&d).map_err(io_err("list", &d))?.into_iter().filter(|g| is_generic_name(g)) {
            out.push(DevNode { devnum: dev(&d.join(&g)), name: g, block: false });
        }
    }
    for (sd, entries, _) in our_subsystems(host, &ctrls)? {
        for g in entries.iter().filter(|e| is_generic_name(e)) {
            let head = format!("nvme{}", &g[2..]);
            if block.iter().any(|b| b.name == head) {
                out.push(DevNode { name: g.clone(), devnum: dev(&sd.join(g)), block: false });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup();
    Ok(out)
}

/// The checks before [`to_vfio`]: the device exists, is an NVMe controller,
/// we are root, there is an IOMMU, the group is usable by VFIO, nothing
/// uses a namespace or partition of the controller, and no process has one
/// of its devices open. The whole disks stay claimed in the result.
pub fn check_bind(host: &Host, bdf: &Bdf) -> Result<Preflight, BindError> {
    check_device(host, bdf)?;
    check_root(host, bdf)?;
    let group = check_group(host, bdf)?;
    let block_devices = block_devices(host, bdf)?;
    let char_devices = char_devices(host, bdf, &block_devices)?;
    let mut uses = inuse::uses_of(host, &block_devices);
    let explained: BTreeSet<String> = uses.iter().map(|u| u.dev().to_string()).collect();
    let (claims, claimed) = inuse::claim(host, &block_devices, &explained)?;
    uses.extend(claimed);
    // After the claims: from here on no file system, md or dm can take the
    // disks, and a plain open() (which claims nothing, so nothing can stop
    // it) has only until the unbind.
    let nodes: Vec<DevNode> = block_devices
        .iter()
        .map(|b| DevNode { name: b.name.clone(), devnum: b.devnum.clone(), block: true })
        .chain(char_devices.iter().cloned())
        .collect();
    uses.extend(inuse::open_by(host, &nodes, &claims.fds()));
    if !uses.is_empty() {
        return Err(BindError::InUse { bdf: *bdf, uses });
    }
    Ok(Preflight { bdf: *bdf, driver: host.driver_of(bdf), group, block_devices, char_devices, claims })
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

/// Write `value` to a sysfs attribute.
fn sysfs_write(host: &Host, path: &Path, value: &str) -> Result<(), BindError> {
    (host.write_attr)(path, value).map_err(io_err("write to", path))
}

/// The device's `driver_override`, `None` when not set (`(null)`).
fn read_override(host: &Host, bdf: &Bdf) -> Option<String> {
    read_trimmed(&host.pci_device(bdf).join("driver_override")).ok().filter(|s| !s.is_empty() && s != "(null)")
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

/// Move `bdf` to vfio-pci after [`check_bind`]'s checks, holding its disks
/// claimed until its driver has let go of them, and set up hugepages. A
/// controller already on vfio-pci stays there (the returned binding then
/// does not restore it on drop).
pub fn to_vfio(host: &Host, bdf: &Bdf, opts: &BindOptions) -> Result<VfioBinding, BindError> {
    let mut pre = check_bind(host, bdf)?;
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
    let hugepages;
    if pre.driver.as_deref() == Some(VFIO_DRIVER) {
        wait_for(&group_dev, "the VFIO group device", opts.timeout)?;
        actions.push(format!(
            "{bdf} is already bound to vfio-pci (IOMMU group {}, {})",
            pre.group,
            group_dev.display()
        ));
        let saved = load_state(host, bdf)?;
        binding.original_driver = saved.as_ref().and_then(|s| s.driver.clone());
        hugepages = ensure_hugepages(host, opts.hugepages);
        actions.push(hugepages.line.clone());
        if let Some(r) = hugepages.raised {
            // `unbind` gives the pool back. A controller bound to vfio-pci
            // by hand has no state yet: unbind gives it to nvme then, as it
            // does without a state file.
            let mut st = saved.unwrap_or(SavedState { driver: Some("nvme".into()), ..Default::default() });
            st.hugepages = Some(merge_raise(st.hugepages, r));
            if let Err(e) = save_state(host, bdf, &st) {
                restore_hugepages(host, r);
                return Err(e);
            }
        }
    } else {
        if !vfio_drv.is_dir() {
            return Err(BindError::NoVfioDriver { path: vfio_drv });
        }
        let mut st = SavedState { driver: pre.driver.clone(), driver_override: read_override(host, bdf), hugepages: None };
        let state = save_state(host, bdf, &st)?;
        actions.push(format!(
            "remembered the original driver ({}) in {}",
            pre.driver.as_deref().unwrap_or("none"),
            state.display()
        ));
        // From here on a failure hands the device back (and removes the state file).
        binding.restore_on_drop = true;
        // The override first: from the moment the unbind lets go of the
        // device, only vfio-pci may take it (not nvme again, on a probe
        // someone else starts).
        sysfs_write(host, &dev.join("driver_override"), VFIO_DRIVER)?;
        if let Some(d) = &pre.driver {
            let names: Vec<&str> = pre.block_devices.iter().map(|b| b.name.as_str()).collect();
            sysfs_write(host, &dev.join("driver/unbind"), &bdf.to_string())?;
            actions.push(format!(
                "unbound {bdf} from {d}{}",
                if names.is_empty() { String::new() } else { format!(" (removes {})", names.join(", ")) }
            ));
        }
        // The disks are gone with the driver: nothing is left to claim.
        drop(std::mem::take(&mut pre.claims));
        // The probe's own result says little (it fails when no driver
        // matches); the driver link afterwards is what counts.
        let _ = sysfs_write(host, &host.path("/sys/bus/pci/drivers_probe"), &bdf.to_string());
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
            "bound {bdf} to vfio-pci (driver_override, unbind, drivers_probe): IOMMU group {}, {}",
            pre.group,
            group_dev.display()
        ));
        hugepages = ensure_hugepages(host, opts.hugepages);
        actions.push(hugepages.line.clone());
        if let Some(r) = hugepages.raised {
            st.hugepages = Some(r);
            if let Err(e) = save_state(host, bdf, &st) {
                restore_hugepages(host, r);
                return Err(e);
            }
        }
    }
    binding.hugepages_free = hugepages.free;
    binding.actions = actions;
    // Restore on drop only what this call moved.
    binding.restore_on_drop = pre.driver.as_deref() != Some(VFIO_DRIVER);
    Ok(binding)
}

/// Two raises of the pool as one: from the first one's `before` to the
/// larger `set`.
fn merge_raise(old: Option<HugepageRaise>, new: HugepageRaise) -> HugepageRaise {
    match old {
        Some(o) => HugepageRaise { before: o.before.min(new.before), set: o.set.max(new.set) },
        None => new,
    }
}

/// What [`ensure_hugepages`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hugepages {
    /// One line saying what happened.
    pub line: String,
    /// Free 2 MiB pages afterwards.
    pub free: u64,
    /// The raise, when the pool was raised (for `unbind` to undo).
    pub raised: Option<HugepageRaise>,
}

const HUGEPAGES_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";

/// Have at least `want` free 2 MiB hugepages, raising the pool if needed.
/// Failing is not an error: DMA memory then falls back to ordinary locked
/// pages.
pub fn ensure_hugepages(host: &Host, want: u64) -> Hugepages {
    let dir = host.path(HUGEPAGES_2M);
    let read = |f: &str| read_trimmed(&dir.join(f)).ok().and_then(|s| s.parse::<u64>().ok());
    let (Some(free), Some(nr)) = (read("free_hugepages"), read("nr_hugepages")) else {
        return Hugepages {
            line: "this kernel has no 2 MiB hugepages: DMA memory will use ordinary locked 4 KiB pages".into(),
            free: 0,
            raised: None,
        };
    };
    if want == 0 || free >= want {
        return Hugepages {
            line: format!("hugepages: {free} free 2 MiB pages (nr_hugepages={nr}), enough for DMA memory"),
            free,
            raised: None,
        };
    }
    // The per-size file, so the request is for 2 MiB pages even when the
    // default hugepage size is 1 GiB (/proc/sys/vm/nr_hugepages is the default size's).
    let target = nr + (want - free);
    let file = dir.join("nr_hugepages");
    if let Err(e) = sysfs_write(host, &file, &target.to_string()) {
        return Hugepages {
            line: format!("could not reserve hugepages ({e}); DMA memory will fall back to ordinary locked pages"),
            free,
            raised: None,
        };
    }
    // The kernel may grant fewer than asked: what it set is what to undo.
    let set = read("nr_hugepages").unwrap_or(target);
    let raised = (set != nr).then_some(HugepageRaise { before: nr, set });
    let now = read("free_hugepages").unwrap_or(0);
    let line = if now >= want {
        format!("hugepages: raised nr_hugepages {nr} -> {set}: {now} free 2 MiB pages for DMA memory (unbind gives them back)")
    } else {
        format!(
            "hugepages: asked for {target} 2 MiB pages but only {now} are free (memory too fragmented?); DMA memory will fall back to ordinary locked pages once they run out (reserve them at boot with hugepages=N on the kernel command line)"
        )
    };
    Hugepages { line, free: now, raised }
}

/// Put the pool back as it was before `r`, unless someone changed it since.
/// Returns a line saying what happened (failing is reported, not an error:
/// the controller is back either way).
pub fn restore_hugepages(host: &Host, r: HugepageRaise) -> String {
    let file = host.path(HUGEPAGES_2M).join("nr_hugepages");
    let nr = read_trimmed(&file).ok().and_then(|s| s.parse::<u64>().ok());
    if nr != Some(r.set) {
        return format!(
            "hugepages: left nr_hugepages at {}: it changed after bind set it to {} (it was {} before)",
            nr.map_or("?".to_string(), |n| n.to_string()),
            r.set,
            r.before
        );
    }
    match sysfs_write(host, &file, &r.before.to_string()) {
        Ok(()) => format!("hugepages: nr_hugepages {} -> {}, as before bind", r.set, r.before),
        Err(e) => format!(
            "hugepages: could not give back the pages bind reserved ({e}); do it with `echo {} > {HUGEPAGES_2M}/nr_hugepages`",
            r.before
        ),
    }
}

/// Give back the pool `bind` raised for `bdf`, or, while another controller
/// bound by us is still on vfio-pci (and may be using the pages), hand the
/// raise over to its state file so that its `unbind` gives it back.
fn give_back_hugepages(host: &Host, bdf: &Bdf, r: HugepageRaise) -> Result<String, BindError> {
    for other in state::other_bound(host, bdf)? {
        if let Some(mut st) = load_state(host, &other)? {
            st.hugepages = Some(merge_raise(st.hugepages, r));
            save_state(host, &other, &st)?;
            return Ok(format!(
                "hugepages: left nr_hugepages at {} while {other} is still bound to vfio-pci; its unbind gives the pool back",
                r.set
            ));
        }
    }
    Ok(restore_hugepages(host, r))
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
            let me = if pid == std::process::id().to_string() && host.is_system() { ", this process" } else { "" };
            users.push(format!("pid {pid} ({comm}{me})"));
        }
    }
    users
}

/// Give `bdf` back to the driver it had before `bind` (from the state
/// file; `nvme` if there is none), in the kernel's order: that driver to
/// `driver_override`, unbind from vfio-pci, reprobe; then `driver_override`
/// as it was before `bind`, wait for the controller's character device,
/// give back the hugepages `bind` reserved, remove the state file.
pub fn restore(host: &Host, bdf: &Bdf, timeout: Duration) -> Result<Vec<String>, BindError> {
    check_device(host, bdf)?;
    check_root(host, bdf)?;
    let dev = host.pci_device(bdf);
    let saved = load_state(host, bdf)?;
    let want = match &saved {
        Some(s) => s.driver.clone(),
        None => Some("nvme".to_string()),
    };
    let original_override = saved.as_ref().and_then(|s| s.driver_override.clone());
    let mut actions = vec![];
    let cur = host.driver_of(bdf);
    if cur.is_some() && cur == want {
        actions.push(format!("{bdf} is already bound to {}", cur.as_deref().unwrap_or("?")));
    } else {
        if cur.as_deref() == Some(VFIO_DRIVER) {
            if let Some(group) = host.iommu_group(bdf) {
                let users = group_users(host, group);
                if !users.is_empty() {
                    return Err(BindError::GroupBusy { bdf: *bdf, group, users });
                }
            }
        }
        // The override first, naming the driver that is to have the
        // device, so that vfio-pci cannot take it again in between.
        match &want {
            Some(w) => {
                sysfs_write(host, &dev.join("driver_override"), w)?;
                actions.push(format!("set driver_override to {w}"));
            }
            None => sysfs_write(host, &dev.join("driver_override"), original_override.as_deref().unwrap_or("\n"))?,
        }
        if let Some(d) = &cur {
            sysfs_write(host, &dev.join("driver/unbind"), &bdf.to_string())?;
            actions.push(format!("unbound {bdf} from {d}"));
        }
        if let Some(w) = &want {
            let _ = sysfs_write(host, &host.path("/sys/bus/pci/drivers_probe"), &bdf.to_string());
            if host.driver_of(bdf).as_deref() != Some(w.as_str()) {
                // The probe chose no driver or another one: ask ours directly.
                if host.driver_of(bdf).is_some() {
                    sysfs_write(host, &dev.join("driver/unbind"), &bdf.to_string())?;
                }
                let _ = sysfs_write(host, &host.path(format!("/sys/bus/pci/drivers/{w}/bind")), &bdf.to_string());
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
    // driver_override as it was before bind (clearing it leaves the driver bound).
    if read_override(host, bdf) != original_override {
        sysfs_write(host, &dev.join("driver_override"), original_override.as_deref().unwrap_or("\n"))?;
        actions.push(match &original_override {
            Some(o) => format!("set driver_override back to {o}"),
            None => "cleared driver_override".into(),
        });
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
    if let Some(r) = saved.as_ref().and_then(|s| s.hugepages) {
        actions.push(give_back_hugepages(host, bdf, r)?);
    }
    if saved.is_some() && state::remove_state(host, bdf)? {
        actions.push(format!("removed {}", state_path(host, bdf).display()));
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::open_tree_exclusive;
    use std::cell::{Cell, RefCell};
    use std::fs::File;
    use std::os::unix::fs::{symlink, PermissionsExt};

    thread_local! {
        /// What the fake kernel was asked to do, in order.
        static LOG: RefCell<Vec<String>> = const { RefCell::new(vec![]) };
        /// Device nodes (file names) whose exclusive open fails with EBUSY.
        static BUSY: RefCell<Vec<String>> = const { RefCell::new(vec![]) };
        /// Make the fake kernel refuse the unbind.
        static FAIL_UNBIND: Cell<bool> = const { Cell::new(false) };
    }

    fn log() -> Vec<String> {
        LOG.with(|l| l.borrow().clone())
    }

    /// [`OpenExclusive`] for the fake tree: EBUSY for the nodes in BUSY,
    /// as the kernel answers for a claimed disk.
    fn fake_open_exclusive(node: &Path, devnum: Option<&str>) -> io::Result<File> {
        let name = node.file_name().unwrap().to_string_lossy().into_owned();
        if BUSY.with(|b| b.borrow().contains(&name)) {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        open_tree_exclusive(node, devnum)
    }

    /// The fake tree's root, from a path in it.
    fn root_of(p: &Path) -> PathBuf {
        let s = p.to_string_lossy();
        PathBuf::from(&s[..s.find("/sys/").expect("a sysfs path")])
    }

    /// Whether this process has `node` open (a claim held).
    fn is_open_here(node: &Path) -> bool {
        list_dir(Path::new("/proc/self/fd"))
            .unwrap()
            .iter()
            .filter_map(|fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).ok())
            .any(|t| Path::new(t.to_string_lossy().trim_end_matches(" (deleted)")) == node)
    }

    fn fake_bind(root: &Path, bdf: &str, drv: &str) {
        let dev = root.join("sys/bus/pci/devices").join(bdf);
        let _ = std::fs::remove_file(dev.join("driver"));
        symlink(format!("../../../bus/pci/drivers/{drv}"), dev.join("driver")).unwrap();
        if drv == VFIO_DRIVER {
            let g = link_name(&dev.join("iommu_group")).unwrap();
            std::fs::create_dir_all(root.join("dev/vfio")).unwrap();
            std::fs::write(root.join(format!("dev/vfio/{g}")), "").unwrap();
        } else if drv == "nvme" {
            std::fs::create_dir_all(dev.join("nvme/nvme0/nvme0n1")).unwrap();
            std::fs::write(dev.join("nvme/nvme0/dev"), "245:0\n").unwrap();
            std::fs::write(root.join("dev/nvme0"), "").unwrap();
            std::fs::write(root.join("dev/nvme0n1"), "").unwrap();
        }
    }

    /// A small model of the kernel's PCI core behind sysfs writes: unbind
    /// removes the driver (and with nvme its devices), drivers_probe binds
    /// the driver_override's driver (nvme without one), drivers/X/bind binds
    /// X if the override allows it, the hugepage pool grants what is asked.
    /// Every write is logged; the unbind notes whether nvme0n1 is claimed.
    fn fake_kernel(attr: &Path, value: &str) -> io::Result<()> {
        let root = root_of(attr);
        let name = attr.file_name().unwrap().to_string_lossy().into_owned();
        let parent = attr.parent().unwrap();
        let entry = match name.as_str() {
            "unbind" => {
                let dev = parent.parent().unwrap();
                let node = root.join("dev/nvme0n1");
                let claimed = if is_open_here(&node) { " (nvme0n1 claimed)" } else { "" };
                if FAIL_UNBIND.with(|f| f.get()) {
                    LOG.with(|l| l.borrow_mut().push(format!("unbind refused{claimed}")));
                    return Err(io::Error::from_raw_os_error(libc::EIO));
                }
                if link_name(&dev.join("driver")).as_deref() == Some("nvme") {
                    let _ = std::fs::remove_dir_all(dev.join("nvme"));
                    let _ = std::fs::remove_file(&node);
                    let _ = std::fs::remove_file(root.join("dev/nvme0"));
                }
                std::fs::remove_file(dev.join("driver"))?;
                format!("unbind{claimed}")
            }
            "driver_override" => {
                let v = value.trim();
                std::fs::write(attr, if v.is_empty() { "(null)\n".to_string() } else { format!("{v}\n") })?;
                format!("driver_override={}", if v.is_empty() { "(null)" } else { v })
            }
            "drivers_probe" => {
                let dev = root.join("sys/bus/pci/devices").join(value);
                if !dev.join("driver").exists() {
                    let ov = read_trimmed(&dev.join("driver_override"))?;
                    let drv = if ov == "(null)" { "nvme".to_string() } else { ov };
                    if root.join("sys/bus/pci/drivers").join(&drv).is_dir() {
                        fake_bind(&root, value, &drv);
                    }
                }
                "probe".to_string()
            }
            "bind" => {
                let drv = parent.file_name().unwrap().to_string_lossy().into_owned();
                let dev = root.join("sys/bus/pci/devices").join(value);
                let ov = read_trimmed(&dev.join("driver_override"))?;
                if dev.join("driver").exists() || (ov != "(null)" && ov != drv) {
                    return Err(io::Error::from_raw_os_error(libc::EBUSY));
                }
                fake_bind(&root, value, &drv);
                format!("bind {drv}")
            }
            "nr_hugepages" => {
                let old: u64 = read_trimmed(attr)?.parse().unwrap();
                let new: u64 = value.trim().parse().unwrap();
                let freef = parent.join("free_hugepages");
                let free: u64 = read_trimmed(&freef)?.parse().unwrap();
                std::fs::write(&freef, format!("{}\n", (free + new).saturating_sub(old)))?;
                std::fs::write(attr, format!("{new}\n"))?;
                format!("nr_hugepages={new}")
            }
            _ => {
                std::fs::write(attr, value)?;
                format!("{name}={value}")
            }
        };
        LOG.with(|l| l.borrow_mut().push(entry));
        Ok(())
    }

    /// A fake machine: one NVMe controller at 0000:01:00.0 bound to nvme,
    /// controller nvme0 (245:0) with namespace nvme0n1 (259:0), alone in
    /// IOMMU group 7; device nodes are plain files under dev/.
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
            let mut host = Host::at(&dir, 0);
            host.open_exclusive = fake_open_exclusive;
            let f = Fake { host, dir, bdf: Bdf::parse("0000:01:00.0").unwrap() };
            f.pci("0000:01:00.0", "0x010802", Some("nvme"), Some(7));
            f.mkdir("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0n1");
            f.file("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/dev", "245:0\n");
            f.blockdev("nvme0n1", "259:0");
            f.file("dev/nvme0", "");
            f.mkdir("sys/bus/pci/drivers/vfio-pci");
            f.mkdir("sys/bus/pci/drivers/nvme");
            f.mkdir("run");
            f.file(
                "proc/self/mountinfo",
                "22 1 0:21 / /proc rw,nosuid - proc proc rw\n29 1 259:5 / / rw,relatime - ext4 /dev/sda1 rw\n",
            );
            f.file("proc/mounts", "proc /proc proc rw 0 0\n/dev/sda1 / ext4 rw 0 0\n");
            f.file("proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda2                               partition\t1048572\t\t0\t\t-2\n");
            f.file("proc/1/comm", "init\n");
            f.link("proc/1/fd/0", "/dev/console");
            f
        }
        /// With the fake kernel behind sysfs writes (binding works end to end).
        fn with_kernel(tag: &str) -> Fake {
            let mut f = Fake::new(tag);
            f.host.write_attr = fake_kernel;
            f.hugepages(0, 0);
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
        fn read(&self, p: &str) -> String {
            std::fs::read_to_string(self.dir.join(p)).unwrap().trim().to_string()
        }
        fn link(&self, p: &str, target: &str) {
            let p = self.dir.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&p);
            symlink(target, p).unwrap();
        }
        fn chmod(&self, p: &str, mode: u32) {
            std::fs::set_permissions(self.dir.join(p), std::fs::Permissions::from_mode(mode)).unwrap();
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
            self.file(&format!("dev/{name}"), "");
        }
        fn partition(&self, disk: &str, part: &str, devnum: &str) {
            self.file(&format!("sys/block/{disk}/{part}/dev"), &format!("{devnum}\n"));
            self.file(&format!("sys/block/{disk}/{part}/partition"), "1\n");
            self.mkdir(&format!("sys/block/{disk}/{part}/holders"));
            self.file(&format!("dev/{part}"), "");
        }
        fn hugepages(&self, nr: u64, free: u64) {
            self.file("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", &format!("{nr}\n"));
            self.file("sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", &format!("{free}\n"));
        }
        fn nr_hugepages(&self) -> u64 {
            self.read("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages").parse().unwrap()
        }
        /// A process `pid` called `comm` with `target` open as fd `fd`.
        fn process(&self, pid: u32, comm: &str, fd: u32, target: &str) {
            self.file(&format!("proc/{pid}/comm"), &format!("{comm}\n"));
            self.link(&format!("proc/{pid}/fd/{fd}"), target);
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
        fn uses(&self) -> (String, Vec<Use>) {
            let e = self.check().unwrap_err();
            let BindError::InUse { uses, .. } = &e else { panic!("{e}") };
            (e.to_string(), uses.clone())
        }
        fn bind(&self) -> Result<VfioBinding, BindError> {
            to_vfio(&self.host, &self.bdf, &BindOptions { hugepages: 64, timeout: Duration::from_millis(200) })
        }
        fn unbind(&self) -> Result<Vec<String>, BindError> {
            restore(&self.host, &self.bdf, Duration::from_millis(200))
        }
        fn state_file(&self) -> PathBuf {
            state_path(&self.host, &self.bdf)
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            LOG.with(|l| l.borrow_mut().clear());
            BUSY.with(|b| b.borrow_mut().clear());
            FAIL_UNBIND.with(|f| f.set(false));
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
        // The whole disk is claimed; its partition with it (the kernel
        // refuses a claim of both by different holders).
        assert_eq!(p.claims.devices(), ["nvme0n1"]);
        let chars: Vec<&str> = p.char_devices.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(chars, ["nvme0"]);
    }

    #[test]
    fn mounted_namespace_is_refused_by_device_number() {
        let f = Fake::new("mounted");
        f.append("proc/self/mountinfo", "40 29 259:0 / /mnt/data rw - xfs /dev/nvme0n1 rw\n");
        // A mounted disk also refuses the exclusive open: that must not add a second, vaguer reason.
        BUSY.with(|b| b.borrow_mut().push("nvme0n1".into()));
        let (msg, uses) = f.uses();
        assert_eq!(uses, &[Use::Mounted { dev: "nvme0n1".into(), mountpoint: "/mnt/data".into() }]);
        assert!(msg.contains("/dev/nvme0n1 is mounted on /mnt/data"), "{msg}");
        assert!(msg.contains("Unmount"), "{msg}");
    }

    #[test]
    fn mounted_partition_is_refused_also_by_name_in_proc_mounts() {
        let f = Fake::new("partition");
        f.partition("nvme0n1", "nvme0n1p2", "259:2");
        // Not in mountinfo by number (e.g. btrfs reports a virtual device
        // number there): /proc/mounts still names the device.
        f.append("proc/mounts", "/dev/nvme0n1p2 /home\\040dir btrfs rw 0 0\n");
        BUSY.with(|b| b.borrow_mut().extend(["nvme0n1".into(), "nvme0n1p2".into()]));
        let (_, uses) = f.uses();
        assert_eq!(uses, &[Use::Mounted { dev: "nvme0n1p2".into(), mountpoint: "/home dir".into() }]);
    }

    #[test]
    fn a_mount_in_another_mount_namespace_is_refused_naming_a_process_in_it() {
        // A container's mount: not in our mount table, but the kernel's
        // claim refuses, and the container's mountinfo names it.
        let f = Fake::new("mntns");
        f.link("proc/self/ns/mnt", "mnt:[4026531841]");
        f.link("proc/1/ns/mnt", "mnt:[4026531841]");
        f.process(901, "sleep", 1, "/dev/null");
        f.link("proc/901/ns/mnt", "mnt:[4026532300]");
        f.file("proc/901/mountinfo", "600 500 0:60 / / rw - overlay overlay rw\n601 600 259:0 / /mnt/nvb\\040fs ro - ext2 /dev/nvme0n1 ro\n");
        f.process(902, "sh", 1, "/dev/null");
        f.link("proc/902/ns/mnt", "mnt:[4026532300]");
        f.file("proc/902/mountinfo", "601 600 259:0 / /again rw - ext2 /dev/nvme0n1 rw\n");
        BUSY.with(|b| b.borrow_mut().push("nvme0n1".into()));
        let (msg, uses) = f.uses();
        assert_eq!(
            uses,
            &[Use::MountedElsewhere { dev: "nvme0n1".into(), mountpoint: "/mnt/nvb fs".into(), pid: 901, comm: "sleep".into() }]
        );
        assert!(msg.contains("mounted on /mnt/nvb fs in the mount namespace of pid 901 (sleep)"), "{msg}");
        assert!(msg.contains("nsenter -t 901 -m umount"), "{msg}");
    }

    #[test]
    fn holders_are_refused() {
        let f = Fake::new("holders");
        f.partition("nvme0n1", "nvme0n1p1", "259:1");
        f.mkdir("sys/block/nvme0n1/nvme0n1p1/holders/dm-0");
        let (msg, uses) = f.uses();
        assert_eq!(uses, &[Use::Holders { dev: "nvme0n1p1".into(), holders: vec!["dm-0".into()] }]);
        assert!(msg.contains("vgchange -an"), "{msg}");
    }

    #[test]
    fn swap_is_refused() {
        let f = Fake::new("swap");
        f.append("proc/swaps", "/dev/nvme0n1                            partition\t4194300\t\t0\t\t-3\n");
        let (msg, uses) = f.uses();
        assert_eq!(uses, &[Use::Swap { dev: "nvme0n1".into() }]);
        assert!(msg.contains("swapoff"), "{msg}");
    }

    #[test]
    fn a_process_holding_the_namespace_open_is_refused_by_pid_and_command() {
        // `sleep 600 </dev/nvme0n1 &`: a plain open claims nothing, so only
        // /proc/PID/fd shows it.
        let f = Fake::new("open");
        f.process(4242, "sleep", 0, "/dev/nvme0n1");
        f.process(4243, "bash", 3, "/dev/null");
        let (msg, uses) = f.uses();
        assert_eq!(
            uses,
            &[Use::OpenBy { dev: "nvme0n1".into(), pid: 4242, comm: "sleep".into(), this_process: false }]
        );
        assert!(msg.contains("/dev/nvme0n1 is open in pid 4242 (sleep)"), "{msg}");
        assert!(msg.contains("fuser -v /dev/nvme0n1"), "{msg}");
    }

    #[test]
    fn processes_holding_a_partition_or_the_character_devices_are_refused() {
        let f = Fake::new("open-chr");
        f.partition("nvme0n1", "nvme0n1p1", "259:1");
        f.mkdir("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/ng0n1");
        f.file("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/ng0n1/dev", "244:0\n");
        f.process(100, "qemu-system-x86", 17, "/dev/nvme0n1p1");
        f.process(200, "fio", 5, "/dev/ng0n1");
        f.process(300, "smartd", 4, "/dev/nvme0");
        f.process(301, "smartd", 4, "/dev/nvme1");
        let (msg, uses) = f.uses();
        let who: Vec<(String, u32, String)> = uses
            .iter()
            .map(|u| match u {
                Use::OpenBy { dev, pid, comm, .. } => (dev.clone(), *pid, comm.clone()),
                u => panic!("{u}"),
            })
            .collect();
        assert_eq!(
            who,
            [
                ("nvme0n1p1".to_string(), 100, "qemu-system-x86".to_string()),
                ("ng0n1".into(), 200, "fio".into()),
                ("nvme0".into(), 300, "smartd".into())
            ]
        );
        assert!(msg.contains("pid 200 (fio)") && msg.contains("pid 300 (smartd)"), "{msg}");
    }

    #[test]
    fn a_disk_the_kernel_will_not_let_go_of_is_refused() {
        // A ZFS vdev, or one device of a multi-device btrfs mounted by
        // another: nothing in the mount table names it, the kernel's claim does.
        let f = Fake::new("claimed");
        BUSY.with(|b| b.borrow_mut().push("nvme0n1".into()));
        let (msg, uses) = f.uses();
        assert_eq!(uses, &[Use::Claimed { dev: "nvme0n1".into() }]);
        assert!(msg.contains("EBUSY") && msg.contains("ZFS") && msg.contains("zpool"), "{msg}");
    }

    #[test]
    fn a_claimed_partition_is_named() {
        let f = Fake::new("claimed-part");
        f.partition("nvme0n1", "nvme0n1p1", "259:1");
        f.partition("nvme0n1", "nvme0n1p2", "259:2");
        BUSY.with(|b| b.borrow_mut().extend(["nvme0n1".into(), "nvme0n1p2".into()]));
        let (_, uses) = f.uses();
        assert_eq!(uses, &[Use::Claimed { dev: "nvme0n1p2".into() }]);
    }

    #[test]
    fn a_btrfs_device_mounted_through_another_is_refused() {
        let f = Fake::new("btrfs");
        f.link("sys/fs/btrfs/5f1c/devices/nvme0n1", "../../../../devices/x/nvme0n1");
        f.link("sys/fs/btrfs/5f1c/devices/sdb", "../../../../devices/y/sdb");
        f.append("proc/self/mountinfo", "50 29 0:45 / /data rw - btrfs /dev/sdb rw\n");
        f.append("proc/mounts", "/dev/sdb /data btrfs rw 0 0\n");
        BUSY.with(|b| b.borrow_mut().push("nvme0n1".into()));
        let (msg, uses) = f.uses();
        assert_eq!(
            uses,
            &[Use::BtrfsMember { dev: "nvme0n1".into(), fsid: "5f1c".into(), mountpoints: vec!["/data".into()] }]
        );
        assert!(msg.contains("btrfs file system 5f1c mounted on /data"), "{msg}");
    }

    #[test]
    fn loop_backing_and_nvmet_export_are_refused() {
        let f = Fake::new("loop");
        f.file("sys/block/loop3/loop/backing_file", "/dev/nvme0n1\n");
        f.file("sys/block/loop4/loop/backing_file", "/var/lib/img\n");
        f.file("sys/kernel/config/nvmet/subsystems/nqn.x/namespaces/1/device_path", "/dev/nvme0n1\n");
        f.file("sys/kernel/config/nvmet/subsystems/nqn.x/namespaces/1/enable", "1\n");
        f.file("sys/kernel/config/nvmet/subsystems/nqn.x/namespaces/2/device_path", "/dev/nvme0n1\n");
        f.file("sys/kernel/config/nvmet/subsystems/nqn.x/namespaces/2/enable", "0\n");
        let (msg, uses) = f.uses();
        assert_eq!(
            uses,
            &[
                Use::LoopBacking { dev: "nvme0n1".into(), loop_dev: "loop3".into() },
                Use::NvmetExport { dev: "nvme0n1".into(), subsystem: "nqn.x".into(), nsid: "1".into() }
            ]
        );
        assert!(msg.contains("losetup -d") && msg.contains("nvmet"), "{msg}");
    }

    #[test]
    fn a_disk_without_a_device_node_is_not_taken_unchecked() {
        let f = Fake::new("nonode");
        std::fs::remove_file(f.dir.join("dev/nvme0n1")).unwrap();
        let e = f.check().unwrap_err();
        assert!(matches!(&e, BindError::NoDeviceNode { dev, .. } if dev == "nvme0n1"), "{e}");
        assert!(e.to_string().contains("mknod /dev/nvme0n1 b 259 0"), "{e}");
        // /dev/block/MAJ:MIN (udev's link) will do.
        f.link("dev/block/259:0", "../nvme0n1x");
        f.file("dev/nvme0n1x", "");
        assert_eq!(f.check().unwrap().claims.devices(), ["nvme0n1"]);
    }

    #[test]
    fn multipath_head_in_use_is_refused() {
        let f = Fake::new("multipath");
        // Native multipath: the controller has the hidden path disk
        // nvme0c0n1 (no device node); the head nvme0n1 and its generic
        // device ng0n1 live in the subsystem.
        std::fs::remove_dir_all(f.dir.join("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0n1")).unwrap();
        f.mkdir("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0c0n1");
        f.file("sys/block/nvme0c0n1/hidden", "1\n");
        f.link("sys/class/nvme-subsystem/nvme-subsys0/nvme0", "../../../devices/pci0000:00/0000:01:00.0/nvme/nvme0");
        f.mkdir("sys/class/nvme-subsystem/nvme-subsys0/nvme0n1");
        f.file("sys/class/nvme-subsystem/nvme-subsys0/ng0n1/dev", "244:0\n");
        f.mkdir("sys/block/nvme0n1/multipath/nvme0c0n1");
        let names: Vec<String> = block_devices(&f.host, &f.bdf).unwrap().into_iter().map(|b| b.name).collect();
        assert_eq!(names, ["nvme0c0n1", "nvme0n1"]);
        let p = f.check().unwrap();
        assert_eq!(p.claims.devices(), ["nvme0n1"], "the head is claimed, the hidden path skipped");
        let chars: Vec<&str> = p.char_devices.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(chars, ["ng0n1", "nvme0"]);
        drop(p);
        f.process(77, "fio", 3, "/dev/ng0n1");
        f.append("proc/self/mountinfo", "41 29 259:0 / /srv rw - ext4 /dev/nvme0n1 rw\n");
        let (msg, _) = f.uses();
        assert!(msg.contains("/dev/nvme0n1 is mounted on /srv"), "{msg}");
        assert!(msg.contains("/dev/ng0n1 is open in pid 77 (fio)"), "{msg}");
    }

    #[test]
    fn head_shared_with_another_controller_is_not_ours() {
        let f = Fake::new("shared-head");
        f.link("sys/class/nvme-subsystem/nvme-subsys0/nvme0", "x");
        f.link("sys/class/nvme-subsystem/nvme-subsys0/nvme1", "y");
        f.mkdir("sys/class/nvme-subsystem/nvme-subsys0/nvme0n2");
        f.mkdir("sys/class/nvme-subsystem/nvme-subsys0/ng0n2");
        f.mkdir("sys/block/nvme0n2/multipath/nvme0c0n2");
        f.mkdir("sys/block/nvme0n2/multipath/nvme0c1n2");
        f.mkdir("sys/bus/pci/devices/0000:01:00.0/nvme/nvme0/nvme0c0n2");
        let names: Vec<String> = block_devices(&f.host, &f.bdf).unwrap().into_iter().map(|b| b.name).collect();
        assert_eq!(names, ["nvme0c0n2", "nvme0n1"], "the head keeps its path through nvme1");
        // A process on the shared head's generic device keeps its path: no refusal.
        f.process(88, "fio", 3, "/dev/ng0n2");
        f.check().unwrap();
    }

    #[test]
    fn claims_are_held_across_the_unbind() {
        let f = Fake::with_kernel("held");
        let b = f.bind().unwrap();
        assert!(log().contains(&"unbind (nvme0n1 claimed)".to_string()), "{:?}", log());
        // ... and released once the driver has let go.
        assert!(!is_open_here(&f.dir.join("dev/nvme0n1")));
        drop(b);
    }

    #[test]
    fn bind_writes_driver_override_before_the_unbind() {
        let f = Fake::with_kernel("order");
        let b = f.bind().unwrap();
        let l = log();
        let pos = |e: &str| l.iter().position(|x| x.starts_with(e)).unwrap_or_else(|| panic!("no {e} in {l:?}"));
        assert!(pos("driver_override=vfio-pci") < pos("unbind"), "{l:?}");
        assert!(pos("unbind") < pos("probe"), "{l:?}");
        assert_eq!(host_driver(&f), Some(VFIO_DRIVER.into()));
        assert_eq!(b.keep().iter().filter(|a| a.contains("driver_override, unbind, drivers_probe")).count(), 1);
    }

    fn host_driver(f: &Fake) -> Option<String> {
        f.host.driver_of(&f.bdf)
    }

    #[test]
    fn unbind_names_the_driver_in_driver_override_before_the_unbind_and_clears_it_after() {
        let f = Fake::with_kernel("order-back");
        f.bind().unwrap().keep();
        LOG.with(|l| l.borrow_mut().clear());
        let actions = f.unbind().unwrap();
        let l = log();
        let pos = |e: &str| l.iter().position(|x| x.starts_with(e)).unwrap_or_else(|| panic!("no {e} in {l:?}"));
        assert!(pos("driver_override=nvme") < pos("unbind"), "{l:?}");
        assert!(pos("unbind") < pos("probe"), "{l:?}");
        assert!(pos("probe") < pos("driver_override=(null)"), "{l:?}");
        assert_eq!(host_driver(&f).as_deref(), Some("nvme"));
        assert_eq!(f.read("sys/bus/pci/devices/0000:01:00.0/driver_override"), "(null)");
        assert!(actions.iter().any(|a| a == "cleared driver_override"), "{actions:?}");
        assert!(!f.state_file().exists());
    }

    #[test]
    fn an_override_set_before_bind_is_put_back() {
        let f = Fake::with_kernel("override-kept");
        f.file("sys/bus/pci/devices/0000:01:00.0/driver_override", "nvme\n");
        f.bind().unwrap().keep();
        f.unbind().unwrap();
        assert_eq!(f.read("sys/bus/pci/devices/0000:01:00.0/driver_override"), "nvme");
    }

    #[test]
    fn a_failed_bind_puts_everything_back() {
        let f = Fake::with_kernel("failed");
        FAIL_UNBIND.with(|x| x.set(true));
        let e = f.bind().err().expect("the unbind fails");
        assert!(matches!(e, BindError::Io { what: "write to", .. }), "{e}");
        assert_eq!(host_driver(&f).as_deref(), Some("nvme"));
        assert_eq!(f.read("sys/bus/pci/devices/0000:01:00.0/driver_override"), "(null)");
        assert!(!f.state_file().exists(), "no state left behind");
    }

    #[test]
    fn unbind_gives_back_the_hugepages_bind_reserved() {
        let f = Fake::with_kernel("huge-back");
        f.hugepages(4, 0);
        let b = f.bind().unwrap();
        assert_eq!(b.hugepages_free, 64);
        b.keep();
        assert_eq!(f.nr_hugepages(), 68);
        let st = load_state(&f.host, &f.bdf).unwrap().unwrap();
        assert_eq!(st.hugepages, Some(HugepageRaise { before: 4, set: 68 }));
        let actions = f.unbind().unwrap();
        assert_eq!(f.nr_hugepages(), 4);
        assert!(actions.iter().any(|a| a.contains("nr_hugepages 68 -> 4")), "{actions:?}");
    }

    #[test]
    fn the_guard_gives_back_the_hugepages_too() {
        let f = Fake::with_kernel("huge-guard");
        let b = f.bind().unwrap();
        assert_eq!(f.nr_hugepages(), 64);
        b.restore().unwrap();
        assert_eq!(f.nr_hugepages(), 0);
        assert_eq!(host_driver(&f).as_deref(), Some("nvme"));
    }

    #[test]
    fn a_pool_changed_since_bind_is_left_alone() {
        let f = Fake::with_kernel("huge-changed");
        f.bind().unwrap().keep();
        f.hugepages(100, 36);
        let actions = f.unbind().unwrap();
        assert_eq!(f.nr_hugepages(), 100);
        assert!(actions.iter().any(|a| a.contains("left nr_hugepages at 100")), "{actions:?}");
    }

    /// A function that is not an NVMe controller is refused as such, first:
    /// by bind, and by opening it through VFIO, whose next check (its
    /// driver) would send the user to bind it, and bind to unbind it.
    #[test]
    fn a_function_that_is_not_a_controller_is_refused_by_class_first() {
        let f = Fake::with_kernel("not-nvme");
        f.pci("0000:00:03.0", "0x020000", Some("virtio-pci"), Some(3));
        let nic = Bdf::parse("0000:00:03.0").unwrap();
        let want = "0000:00:03.0 is not an NVMe controller (class 0x020000; an NVMe controller's is 0x010802)";
        let e = check_device(&f.host, &nic).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
        let e = to_vfio(&f.host, &nic, &BindOptions::default()).err().expect("refused").to_string();
        assert!(e.contains(want), "{e}");
        let e = crate::VfioPci::open(&f.host, &nic).err().expect("refused").to_string();
        assert!(e.contains(want) && !e.contains("bind"), "{e}");
        check_device(&f.host, &f.bdf).unwrap();
    }

    /// The ids the driver's quirk table is looked up by, as sysfs gives them.
    #[test]
    fn pci_ids_as_sysfs_gives_them() {
        let f = Fake::with_kernel("ids");
        f.pci("0000:05:00.0", "0x010802", Some("nvme"), Some(9));
        f.file("sys/bus/pci/devices/0000:05:00.0/vendor", "0x144d\n");
        f.file("sys/bus/pci/devices/0000:05:00.0/device", "0xa822\n");
        assert_eq!(f.host.pci_ids(&Bdf::parse("0000:05:00.0").unwrap()).unwrap(), (0x144d, 0xa822));
        f.file("sys/bus/pci/devices/0000:05:00.0/device", "zz\n");
        assert!(f.host.pci_ids(&Bdf::parse("0000:05:00.0").unwrap()).is_err());
    }

    #[test]
    fn hugepages_stay_while_another_bound_controller_may_use_them() {
        let f = Fake::with_kernel("huge-two");
        f.pci("0000:02:00.0", "0x010802", Some(VFIO_DRIVER), Some(8));
        f.mkdir("dev/vfio");
        f.file("dev/vfio/8", "");
        let other = Bdf::parse("0000:02:00.0").unwrap();
        save_state(&f.host, &other, &SavedState { driver: Some("nvme".into()), ..Default::default() }).unwrap();
        f.bind().unwrap().keep();
        assert_eq!(f.nr_hugepages(), 64);
        let actions = f.unbind().unwrap();
        assert_eq!(f.nr_hugepages(), 64, "0000:02:00.0 may still be using them");
        assert!(actions.iter().any(|a| a.contains("while 0000:02:00.0 is still bound")), "{actions:?}");
        assert_eq!(load_state(&f.host, &other).unwrap().unwrap().hugepages, Some(HugepageRaise { before: 0, set: 64 }));
        // The last unbind gives the pool back.
        restore(&f.host, &other, Duration::from_millis(200)).unwrap();
        assert_eq!(f.nr_hugepages(), 0);
    }

    #[test]
    fn state_file_round_trip_in_run() {
        let f = Fake::new("state");
        assert_eq!(load_state(&f.host, &f.bdf).unwrap(), None);
        let st = SavedState {
            driver: Some("nvme".into()),
            driver_override: None,
            hugepages: Some(HugepageRaise { before: 0, set: 64 }),
        };
        let p = save_state(&f.host, &f.bdf, &st).unwrap();
        assert!(p.ends_with("run/nvme-bypass/0000:01:00.0.json"), "{}", p.display());
        assert_eq!(load_state(&f.host, &f.bdf).unwrap(), Some(st));
        let m = std::fs::metadata(f.dir.join("run/nvme-bypass")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(f.read("run/nvme-bypass/0000:01:00.0.json").contains("\"driver\":\"nvme\""));
    }

    #[test]
    fn state_never_falls_back_to_a_world_writable_directory() {
        let f = Fake::new("state-norun");
        std::fs::remove_dir_all(f.dir.join("run")).unwrap();
        f.mkdir("var/tmp");
        f.chmod("var/tmp", 0o1777);
        let e = save_state(&f.host, &f.bdf, &SavedState::default()).unwrap_err();
        assert!(matches!(e, BindError::UnsafeStateDir { .. }), "{e}");
        assert!(e.to_string().contains("does not exist") && e.to_string().contains("tmpfs"), "{e}");
        assert!(!f.dir.join("var/tmp/nvme-bypass").exists());
        // ... and a bind refuses before it changes anything.
        let e = f.bind().err().unwrap();
        assert!(matches!(e, BindError::UnsafeStateDir { .. }), "{e}");
        assert_eq!(host_driver(&f).as_deref(), Some("nvme"));
    }

    #[test]
    fn a_state_directory_someone_else_could_redirect_is_refused() {
        // A link planted where the directory would be.
        let f = Fake::new("state-link");
        f.mkdir("elsewhere");
        f.link("run/nvme-bypass", "../elsewhere");
        let e = save_state(&f.host, &f.bdf, &SavedState::default()).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(list_dir(&f.dir.join("elsewhere")).unwrap(), Vec::<String>::new());
        // Writable by others.
        let f = Fake::new("state-mode");
        f.mkdir("run/nvme-bypass");
        f.chmod("run/nvme-bypass", 0o777);
        let e = save_state(&f.host, &f.bdf, &SavedState::default()).unwrap_err();
        assert!(e.to_string().contains("0777") && e.to_string().contains("chmod 0700"), "{e}");
        assert!(load_state(&f.host, &f.bdf).is_err(), "nor is such a directory read");
        // /run itself writable by others and not sticky.
        let f = Fake::new("state-run");
        f.chmod("run", 0o777);
        let e = save_state(&f.host, &f.bdf, &SavedState::default()).unwrap_err();
        assert!(e.to_string().contains("not sticky"), "{e}");
        // Sticky and world-writable (a tmpfs mounted without mode=): fine,
        // nobody else may rename or remove our directory in it.
        let f = Fake::new("state-sticky");
        f.chmod("run", 0o1777);
        save_state(&f.host, &f.bdf, &SavedState::default()).unwrap();
    }

    #[test]
    fn a_state_file_that_is_a_link_is_replaced_not_written_through() {
        let f = Fake::new("state-file-link");
        f.file("victim", "precious\n");
        f.mkdir("run/nvme-bypass");
        f.chmod("run/nvme-bypass", 0o700);
        f.link("run/nvme-bypass/0000:01:00.0.json", "../../victim");
        let e = load_state(&f.host, &f.bdf).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        f.link("run/nvme-bypass/0000:01:00.0.json.new", "../../victim");
        save_state(&f.host, &f.bdf, &SavedState::default()).unwrap();
        assert_eq!(f.read("victim"), "precious");
        assert!(!std::fs::symlink_metadata(f.state_file()).unwrap().file_type().is_symlink());
    }

    #[test]
    fn a_state_file_cannot_steer_sysfs_writes() {
        let f = Fake::new("state-bad");
        save_state(&f.host, &f.bdf, &SavedState::default()).unwrap();
        std::fs::write(f.state_file(), "{\"driver\":\"../../../../kernel/x\"}\n").unwrap();
        let e = load_state(&f.host, &f.bdf).unwrap_err();
        assert!(matches!(e, BindError::InvalidState { .. }), "{e}");
        assert!(e.to_string().contains("not a driver name"), "{e}");
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
        let h = ensure_hugepages(&f.host, 64);
        assert_eq!((h.free, h.raised), (0, None));
        assert!(h.line.contains("no 2 MiB hugepages"), "{}", h.line);
        f.hugepages(10, 10);
        let h = ensure_hugepages(&f.host, 64);
        // The fake tree does not allocate: the request is written, the shortfall reported.
        assert_eq!(f.nr_hugepages(), 64);
        assert_eq!(h.raised, Some(HugepageRaise { before: 10, set: 64 }));
        assert!(h.line.contains("fall back"), "{}", h.line);
    }

    #[test]
    fn the_exclusive_open_takes_only_a_block_device() {
        // The real opener on a regular file where /dev/nvme0n1 should be (a
        // `dd of=/dev/nvme0n1` run while the device was absent leaves one):
        // opening it claims nothing, so it must not count as a claim.
        let f = Fake::new("regular");
        let e = crate::host::open_block_exclusive(&f.dir.join("dev/nvme0n1"), Some("259:0")).unwrap_err();
        assert!(e.to_string().contains("not a block device"), "{e}");
    }

    /// The kernel's exclusive open, for real, on a loop device: needs root
    /// and losetup; skipped, saying why, without them.
    #[test]
    fn the_kernel_refuses_a_second_exclusive_open_with_ebusy() {
        if crate::host::process_euid() != 0 {
            eprintln!("skipped: needs root to set up a loop device");
            return;
        }
        let img = std::env::temp_dir().join(format!("nvme-vfio-excl-{}.img", std::process::id()));
        std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
        let out = std::process::Command::new("losetup").args(["-f", "--show"]).arg(&img).output();
        let _ = std::fs::remove_file(&img);
        let dev = match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
            Ok(o) => return eprintln!("skipped: losetup failed: {}", String::from_utf8_lossy(&o.stderr).trim()),
            Err(e) => return eprintln!("skipped: no losetup: {e}"),
        };
        let detach = || {
            let _ = std::process::Command::new("losetup").args(["-d", &dev]).status();
        };
        let devnum = read_trimmed(Path::new(&format!("/sys/class/block/{}/dev", &dev[5..]))).unwrap();
        let plain = File::open(&dev).unwrap();
        let first = crate::host::open_block_exclusive(Path::new(&dev), Some(&devnum));
        let second = crate::host::open_block_exclusive(Path::new(&dev), Some(&devnum));
        drop((plain, first.as_ref().ok()));
        let first_ok = first.is_ok();
        drop(first);
        let wrong = crate::host::open_block_exclusive(Path::new(&dev), Some("1:2"));
        detach();
        assert!(first_ok, "a plain open does not stop a claim");
        assert_eq!(second.unwrap_err().raw_os_error(), Some(libc::EBUSY));
        assert_eq!(wrong.unwrap_err().kind(), io::ErrorKind::InvalidData, "another device's number");
    }

    #[test]
    fn names() {
        assert!(is_ns_name("nvme0n1", false) && is_ns_name("nvme12n34", true));
        assert!(is_ns_name("nvme0c1n1", true) && !is_ns_name("nvme0c1n1", false));
        assert!(!is_ns_name("nvme0n1p1", true) && !is_ns_name("nvme0", true) && !is_ns_name("nvme-subsys0", true));
        assert!(is_ctrl_name("nvme3") && !is_ctrl_name("nvme3n1") && !is_ctrl_name("nvme"));
        assert!(is_generic_name("ng0n1") && is_generic_name("ng12n3") && !is_generic_name("ng0") && !is_generic_name("nvme0n1"));
        assert_eq!(inuse::unescape_mount("/a\\040b\\011c"), "/a b\tc");
    }
}
