//! What a namespace is, and whether this tool can run a workload on it.
//!
//! The workloads read and write plain data blocks anywhere in a range, with
//! no metadata and no protection information. A namespace formatted
//! otherwise, or one of another I/O command set, is refused here, by name,
//! before any I/O reaches it: a random write to a zoned namespace fails,
//! and one to a namespace with protection information would be checked
//! against guard tags we never sent. `nvme-bypass info` shows the same
//! verdict for every namespace.

use super::BackendError;
use nvme_driver::Controller;
use nvme_hal::RegisterWindow;
use nvme_spec::identify::{csi, IdentifyNamespace, NsDescriptors};

/// One active namespace as Identify describes it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NamespaceInfo {
    pub nsid: u32,
    pub id_ns: IdentifyNamespace,
    /// Command Set Identifier (Identify CNS 03h); NVM when not reported.
    pub csi: u8,
    /// Why a workload cannot run on it; `None` when it can.
    pub unusable: Option<String>,
}

impl NamespaceInfo {
    pub fn new(nsid: u32, id_ns: IdentifyNamespace, descriptors: &NsDescriptors) -> Self {
        let csi = descriptors.command_set();
        let unusable = unusable(nsid, &id_ns, csi);
        NamespaceInfo { nsid, id_ns, csi, unusable }
    }
}

/// Every active namespace of the controller in NSID order, or only
/// `nsid` (an error naming the active ones when it is not active).
pub fn active<R: RegisterWindow>(ctrl: &mut Controller<R>, nsid: Option<u32>) -> Result<Vec<NamespaceInfo>, BackendError> {
    let nsids = match nsid {
        Some(n) => vec![n],
        None => ctrl.active_namespaces()?,
    };
    let mut v = vec![];
    for n in nsids {
        let id_ns = match ctrl.identify_namespace(n) {
            Ok(ns) => ns,
            Err(nvme_driver::Error::InactiveNamespace { .. }) => return Err(inactive(ctrl, n)),
            Err(e) => return Err(e.into()),
        };
        let d = ctrl.identify_ns_descriptors(n)?;
        v.push(NamespaceInfo::new(n, id_ns, &d));
    }
    Ok(v)
}

/// Namespace `nsid` is not active: say which are.
fn inactive<R: RegisterWindow + ?Sized>(ctrl: &mut Controller<R>, nsid: u32) -> BackendError {
    let active = ctrl.active_namespaces().unwrap_or_default();
    BackendError::Invalid(match active.first() {
        None => format!("namespace {nsid} is not active, and this controller has no active namespace: create or attach one (nvme create-ns, nvme attach-ns)"),
        Some(first) => format!(
            "namespace {nsid} is not active on this controller; its active namespaces are {}: use --nsid {first} (or another of them; `nvme-bypass info` describes each)",
            active.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
    })
}

/// Identify namespace `nsid` for a workload: an error naming the active
/// namespaces when it is not one of them, or naming the feature that stands
/// in the way (see [`unusable`]); nothing is sent but admin commands.
pub fn usable<R: RegisterWindow + ?Sized>(ctrl: &mut Controller<R>, nsid: u32) -> Result<IdentifyNamespace, BackendError> {
    let ns = match ctrl.identify_namespace(nsid) {
        Ok(ns) => ns,
        Err(nvme_driver::Error::InactiveNamespace { .. }) => return Err(inactive(ctrl, nsid)),
        Err(e) => return Err(e.into()),
    };
    let d = ctrl.identify_ns_descriptors(nsid)?;
    match unusable(nsid, &ns, d.command_set()) {
        Some(why) => Err(BackendError::Unsupported(why)),
        None => Ok(ns),
    }
}

/// Why a workload of this tool cannot run on namespace `nsid`, in words that
/// name the feature and say what to do; `None` when it can.
pub fn unusable(nsid: u32, ns: &IdentifyNamespace, csi: u8) -> Option<String> {
    if csi != csi::NVM {
        let name = NsDescriptors::command_set_name(csi);
        return Some(if csi == csi::ZONED {
            format!(
                "namespace {nsid} is a zoned namespace (Zoned Namespace Command Set, CSI {csi:#04x}): it takes writes only at each zone's write pointer, and this tool's workloads write anywhere in their range; use a namespace of the NVM command set (`nvme-bypass info` shows each namespace's)"
            )
        } else {
            format!(
                "namespace {nsid} uses the {name} command set (CSI {csi:#04x}), not the NVM command set this tool speaks; use an NVM namespace (`nvme-bypass info` shows each namespace's)"
            )
        });
    }
    let f = ns.current_format();
    let plain = ns
        .formats()
        .find(|(_, g)| g.ms == 0 && g.lbads == f.lbads)
        .or_else(|| ns.formats().find(|(_, g)| g.ms == 0 && g.block_size() != 0))
        .map(|(i, g)| format!("LBA format {i} ({} bytes, no metadata)", g.block_size()));
    let reformat = match &plain {
        Some(p) => format!("reformat it to {p} (`nvme format /dev/nvmeX -n {nsid} --lbaf=N --pi=0`, which erases the namespace) or use another namespace"),
        None => "use another namespace: this one lists no LBA format without metadata".to_string(),
    };
    let layout = if ns.metadata_extended() {
        "at the end of each block's data (extended LBA)"
    } else {
        "in a separate buffer"
    };
    if ns.pi_type() != 0 {
        return Some(format!(
            "namespace {nsid} has end-to-end protection information enabled (Type {}, in the {} eight of its {} metadata bytes per block, {layout}); this tool sends no protection information, which the controller would check or insert: {reformat}",
            ns.pi_type(),
            if ns.pi_first() { "first" } else { "last" },
            f.ms
        ));
    }
    if f.ms != 0 {
        return Some(format!(
            "namespace {nsid} is formatted with {} bytes of metadata per block, {layout}; this tool moves data blocks only: {reformat}",
            f.ms
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvme_spec::identify::LbaFormat;

    /// QEMU's list of formats (512 B, +8, +16, +64, 4 KiB, +8, +16, +64), format `index` in use.
    fn qemu_ns(index: u8) -> IdentifyNamespace {
        let mut ns = IdentifyNamespace { nsze: 1000, ncap: 1000, nuse: 1000, nlbaf: 7, flbas: index, ..Default::default() };
        for (i, (ms, lbads)) in [(0, 9), (8, 9), (16, 9), (64, 9), (0, 12), (8, 12), (16, 12), (64, 12)].into_iter().enumerate() {
            ns.lbaf[i] = LbaFormat { ms, lbads, rp: 0 };
        }
        ns
    }

    #[test]
    fn plain_formats_are_usable() {
        assert_eq!(unusable(1, &qemu_ns(0), csi::NVM), None);
        assert_eq!(unusable(1, &qemu_ns(4), csi::NVM), None);
    }

    #[test]
    fn metadata_is_refused_naming_it_and_a_format_without() {
        // ms=8 separate (QEMU mset=0), 512-byte blocks
        let m = unusable(3, &qemu_ns(1), csi::NVM).unwrap();
        assert!(m.contains("namespace 3") && m.contains("8 bytes of metadata per block, in a separate buffer"), "{m}");
        assert!(m.contains("LBA format 0 (512 bytes, no metadata)") && m.contains("nvme format"), "{m}");
        // ms=16 extended (mset=1), 4 KiB blocks: the plain 4 KiB format is proposed
        let mut ns = qemu_ns(6);
        ns.flbas |= 0x10;
        let m = unusable(2, &ns, csi::NVM).unwrap();
        assert!(m.contains("16 bytes of metadata per block, at the end of each block's data (extended LBA)"), "{m}");
        assert!(m.contains("LBA format 4 (4096 bytes"), "{m}");
        // No format without metadata at all.
        let mut only = IdentifyNamespace { nsze: 8, nlbaf: 0, ..Default::default() };
        only.lbaf[0] = LbaFormat { ms: 8, lbads: 9, rp: 0 };
        assert!(unusable(1, &only, csi::NVM).unwrap().contains("lists no LBA format without metadata"));
    }

    #[test]
    fn protection_information_is_refused_by_name() {
        let mut ns = qemu_ns(1);
        ns.dps = 1; // Type 1, last eight bytes
        let m = unusable(1, &ns, csi::NVM).unwrap();
        assert!(m.contains("protection information enabled (Type 1, in the last eight of its 8 metadata bytes"), "{m}");
        assert!(m.contains("--pi=0"), "{m}");
        ns.dps = 8 | 3;
        assert!(unusable(1, &ns, csi::NVM).unwrap().contains("Type 3, in the first eight"));
    }

    #[test]
    fn other_command_sets_are_refused_by_name() {
        let m = unusable(4, &qemu_ns(0), csi::ZONED).unwrap();
        assert!(m.contains("namespace 4 is a zoned namespace") && m.contains("write pointer"), "{m}");
        let m = unusable(4, &qemu_ns(0), csi::KEY_VALUE).unwrap();
        assert!(m.contains("Key Value command set"), "{m}");
    }
}
