//! Which names one NVMe namespace goes by: the controller's PCI address
//! (vfio), its block device `/dev/nvmeXnY` (block), its generic char device
//! `/dev/ngXnY` (passthru), found from any one of them through sysfs. Also
//! whether the controller is emulated, so figures can say so.

use std::path::{Path, PathBuf};

/// The names of one namespace.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Topology {
    /// PCI address of the controller.
    pub bdf: Option<String>,
    /// Controller name, e.g. `nvme0`.
    pub controller: Option<String>,
    /// Block device of the namespace.
    pub block: Option<PathBuf>,
    /// Generic char device of the namespace.
    pub generic: Option<PathBuf>,
    /// Namespace id.
    pub nsid: u32,
    /// Why the figures are emulated, when they are.
    pub emulated: Option<String>,
    /// The controller's driver now.
    pub driver: Option<String>,
}

fn link_name(p: &Path) -> Option<String> {
    std::fs::read_link(p).ok()?.file_name()?.to_str().map(str::to_string)
}

fn first_entry(dir: &Path, prefix: &str) -> Option<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v.into_iter().next()
}

/// Number after "nvme" in "nvme3" or "nvme3n1".
fn ctrl_index(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("nvme").or_else(|| name.strip_prefix("ng"))?;
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The canonical form `dddd:bb:dd.f` of a PCI address given as
/// `0000:01:00.0` or `01:00.0`, or None when `s` is not one.
pub fn canonical_bdf(s: &str) -> Option<String> {
    let full = if s.matches(':').count() == 1 { format!("0000:{s}") } else { s.to_string() };
    let (dbd, func) = full.split_once('.')?;
    let parts: Vec<&str> = dbd.split(':').collect();
    let hex = |x: &str, n: usize| x.len() == n && x.chars().all(|c| c.is_ascii_hexdigit());
    let ok = parts.len() == 3
        && hex(parts[0], 4)
        && hex(parts[1], 2)
        && hex(parts[2], 2)
        && func.len() == 1
        && func.chars().all(|c| ('0'..='7').contains(&c))
        && u8::from_str_radix(parts[2], 16).is_ok_and(|d| d < 32);
    ok.then(|| full.to_ascii_lowercase())
}

/// True when `s` looks like a PCI address (`0000:01:00.0` or `01:00.0`).
pub fn is_bdf(s: &str) -> bool {
    canonical_bdf(s).is_some()
}

/// Is the controller at `bdf` emulated? QEMU's NVMe controller is PCI 1b36:0010.
pub fn emulation_of_bdf(bdf: &str) -> Option<String> {
    let dir = Path::new("/sys/bus/pci/devices").join(bdf);
    let vendor = std::fs::read_to_string(dir.join("vendor")).ok()?;
    let device = std::fs::read_to_string(dir.join("device")).ok()?;
    (vendor.trim() == "0x1b36" && device.trim() == "0x0010")
        .then(|| "QEMU's emulated NVMe controller (PCI 1b36:0010) under TCG software emulation: use ratios between paths from one boot, never absolute speeds".to_string())
}

/// Why a device name could not be resolved to a controller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A PCI address with no device behind it.
    #[error("no PCI device {0} (not in /sys/bus/pci/devices); list NVMe controllers with `lspci -d ::0108`")]
    NoPciDevice(String),
    /// An NVMe name whose controller number cannot be read.
    #[error("cannot tell the controller of {0}")]
    NoController(String),
    /// An NVMe device node that does not exist.
    #[error("{0} does not exist; list namespaces with `ls /dev/nvme* /dev/ng*`")]
    NoDevice(String),
    /// Neither a PCI address nor an NVMe device name.
    #[error("{0} is neither a PCI address (0000:01:00.0) nor an NVMe device (/dev/nvme0n1, /dev/ng0n1)")]
    NotNvme(String),
}

/// Find the other names of the namespace `nsid` from `device`.
pub fn resolve(device: &str, nsid: u32) -> Result<Topology, TopologyError> {
    let mut t = Topology { nsid, ..Default::default() };
    let base = Path::new(device).file_name().and_then(|n| n.to_str()).unwrap_or(device).to_string();
    if is_bdf(device) {
        let bdf = canonical_bdf(device).expect("checked by is_bdf");
        let dir = Path::new("/sys/bus/pci/devices").join(&bdf);
        if !dir.exists() {
            return Err(TopologyError::NoPciDevice(bdf));
        }
        t.controller = first_entry(&dir.join("nvme"), "nvme");
        t.bdf = Some(bdf);
    } else if base.starts_with("nvme") || base.starts_with("ng") {
        let idx = ctrl_index(&base).ok_or_else(|| TopologyError::NoController(device.to_string()))?;
        // A multipath head nvmeXnY names its paths nvmeXcZnY: take the first.
        let mp = Path::new("/sys/block").join(&base).join("multipath");
        let ctrl = match first_entry(&mp, "nvme") {
            Some(path) => path.split('c').nth(1).and_then(|r| r.split('n').next()).map(|z| format!("nvme{z}")),
            None => Some(format!("nvme{idx}")),
        };
        t.controller = ctrl;
        if !Path::new(device).exists() {
            return Err(TopologyError::NoDevice(device.to_string()));
        }
    } else {
        return Err(TopologyError::NotNvme(device.to_string()));
    }
    if let Some(c) = &t.controller {
        let cdir = Path::new("/sys/class/nvme").join(c);
        if t.bdf.is_none() {
            t.bdf = link_name(&cdir.join("device"));
        }
        if let Some(i) = ctrl_index(c) {
            let block = PathBuf::from(format!("/dev/nvme{i}n{nsid}"));
            let generic = PathBuf::from(format!("/dev/ng{i}n{nsid}"));
            t.block = block.exists().then_some(block);
            t.generic = generic.exists().then_some(generic);
        }
    }
    if let Some(b) = &t.bdf {
        t.emulated = emulation_of_bdf(b);
        t.driver = link_name(&Path::new("/sys/bus/pci/devices").join(b).join("driver"));
    }
    Ok(t)
}

/// Emulation note for any device name a backend was given.
pub fn emulation_of(device: &str) -> Option<String> {
    resolve(device, 1).ok()?.emulated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(ctrl_index("nvme3n1"), Some(3));
        assert_eq!(ctrl_index("ng12n2"), Some(12));
        assert_eq!(ctrl_index("nvme0"), Some(0));
        assert!(is_bdf("0000:01:00.0"));
        assert_eq!(canonical_bdf("01:00.0").as_deref(), Some("0000:01:00.0"));
        assert_eq!(canonical_bdf("0000:AB:1f.7").as_deref(), Some("0000:ab:1f.7"));
        assert!(canonical_bdf("0000:01:00.8").is_none());
        assert!(canonical_bdf("0000:01:20.0").is_none());
        assert!(canonical_bdf("01:00").is_none());
        assert!(!is_bdf("/dev/nvme0n1"));
        assert!(resolve("/dev/sda", 1).is_err());
        assert!(resolve("0000:7f:1f.7", 1).unwrap_err().to_string().contains("no PCI device"));
        assert!(resolve("9999:99:99.9", 1).unwrap_err().to_string().contains("neither a PCI address"));
    }
}
