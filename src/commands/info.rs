//! `info`: Identify Controller and every active namespace, as nvme-cli names the fields.

use crate::backend::namespace::NamespaceInfo;
use crate::backend::BackendError;
use crate::commands::args::*;
use crate::error::{exit, Error};
use crate::report::OutputFormat;

#[derive(clap::Args, Debug, Clone)]
pub struct InfoArgs {
    /// Path to the controller.
    #[arg(long, value_enum, default_value = "sim")]
    pub backend: PathKind,
    /// Device: a PCI address (vfio), /dev/nvme0 or /dev/ng0n1 (passthru), /dev/nvme0n1 (block).
    #[arg(long)]
    pub device: Option<String>,
    /// Namespace ID (default: every active namespace; on /dev/ngXnY or /dev/nvmeXnY, that one).
    #[arg(long, value_parser = crate::commands::args::parse_nsid)]
    pub nsid: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    #[command(flatten)]
    pub sim: SimArgs,
    /// The options given on the command line (clap's ids), filled in by
    /// the dispatcher: those of another backend are refused.
    #[arg(skip)]
    pub given: Vec<String>,
}

pub fn info(a: &InfoArgs) -> Result<i32, Error> {
    if let Some(d) = &a.device {
        refuse_non_nvme(d)?;
    }
    refuse_foreign_options(&a.given, a.backend)?;
    let (ctrl, namespaces, path) = match a.backend {
        PathKind::Sim => {
            if a.device.as_deref().is_some_and(|d| d != "sim") {
                return Err(Error::usage("--device is not used by --backend sim; drop it, or pick --backend vfio|passthru|block"));
            }
            let o = sim_options(&a.sim, &DriverArgs::default(), 1, None)?;
            let sim = nvme_sim::SimController::start(nvme_sim::SimConfig {
                mdts: o.mdts,
                ..nvme_sim::SimConfig::default().with_namespace(o.size, o.lba_size)
            })
            .map_err(BackendError::from)?;
            let mut c = nvme_driver::Controller::new(sim.registers(), sim.allocator(), nvme_driver::ControllerConfig::default()).map_err(BackendError::from)?;
            let (ctrl, ns) = identify_all(&mut c, a.nsid)?;
            (ctrl, ns, "sim".to_string())
        }
        PathKind::Vfio => {
            let bdf = a.device.as_deref().ok_or_else(|| Error::usage("--backend vfio needs --device (e.g. --device 0000:01:00.0)"))?;
            let mut v = crate::backend::userspace::vfio::open_controller(bdf)?;
            let (ctrl, ns) = identify_all(&mut v.ctrl, a.nsid)?;
            (ctrl, ns, "vfio".to_string())
        }
        PathKind::Passthru | PathKind::Block => {
            // Identify through the kernel's admin passthrough ioctl, on the
            // controller (/dev/nvme0) or a namespace: its generic device
            // (/dev/ng0n1, passthru's) or its block device (/dev/nvme0n1,
            // block's), as `nvme id-ctrl` does. The kernel's nvme driver
            // answers either way.
            let example = if a.backend == PathKind::Block { "/dev/nvme0n1" } else { "/dev/nvme0 or /dev/ng0n1" };
            let dev = a.device.as_deref().ok_or_else(|| Error::usage(format!("--backend {} needs --device (e.g. --device {example})", a.backend.name())))?;
            let (ctrl, ns) = crate::backend::kernel::passthru::identify(dev, a.nsid)?;
            (ctrl, ns, format!("NVME_IOCTL_ADMIN_CMD on {dev}"))
        }
    };
    print!("{}", identify_report(&ctrl, &namespaces, a.output_format, &path));
    Ok(exit::OK)
}

/// Identify Controller, then every active namespace (or only `nsid`).
fn identify_all<R: nvme_hal::RegisterWindow>(
    c: &mut nvme_driver::Controller<R>,
    nsid: Option<u32>,
) -> Result<(nvme_spec::identify::IdentifyController, Vec<NamespaceInfo>), Error> {
    Ok((c.identify().clone(), crate::backend::namespace::active(c, nsid)?))
}

/// Identify data as nvme-cli's id-ctrl / id-ns print it, one id-ns block per
/// namespace, each followed by its size and whether a workload can run on it
/// (or as JSON).
pub fn identify_report(ctrl: &nvme_spec::identify::IdentifyController, namespaces: &[NamespaceInfo], fmt: OutputFormat, path: &str) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    match fmt {
        OutputFormat::Json => {
            let ns: Vec<_> = namespaces
                .iter()
                .map(|n| {
                    serde_json::json!({
                        "nsid": n.nsid,
                        "id_ns": nvme_cli_json(serde_json::to_value(&n.id_ns).unwrap()),
                        "command_set": nvme_spec::identify::NsDescriptors::command_set_name(n.csi),
                        "csi": n.csi,
                        "lba_size": n.id_ns.lba_size(),
                        "metadata_size": n.id_ns.current_format().ms,
                        "size_bytes": n.id_ns.size_bytes(),
                        "usable": n.unusable.is_none(),
                        "unusable_reason": n.unusable,
                    })
                })
                .collect();
            let mut v = serde_json::json!({
                "path": path,
                "id_ctrl": nvme_cli_json(serde_json::to_value(ctrl).unwrap()),
                "active_namespaces": namespaces.iter().map(|n| n.nsid).collect::<Vec<_>>(),
                "namespaces": ns,
            });
            // The first namespace also at the top level, as before.
            if let Some(n) = namespaces.first() {
                v["nsid"] = n.nsid.into();
                v["id_ns"] = nvme_cli_json(serde_json::to_value(&n.id_ns).unwrap());
                v["lba_size"] = n.id_ns.lba_size().into();
                v["size_bytes"] = n.id_ns.size_bytes().into();
            }
            writeln!(out, "{}", serde_json::to_string_pretty(&v).unwrap()).unwrap();
        }
        OutputFormat::Normal => {
            writeln!(out, "NVME Identify Controller (via {path}):").unwrap();
            for (k, v) in ctrl.nvme_cli_fields() {
                writeln!(out, "{k:<9} : {v}").unwrap();
            }
            writeln!(out).unwrap();
            let ids: Vec<_> = namespaces.iter().map(|n| n.nsid.to_string()).collect();
            writeln!(out, "namespaces: {} shown ({})", namespaces.len(), if ids.is_empty() { "none active".into() } else { ids.join(", ") }).unwrap();
            for n in namespaces {
                writeln!(out).unwrap();
                writeln!(out, "NVME Identify Namespace {}:", n.nsid).unwrap();
                for (k, v) in n.id_ns.nvme_cli_fields() {
                    if k.starts_with("lbaf") {
                        writeln!(out, "{k} : {v}").unwrap(); // nvme-cli: "lbaf  0 : ms:0 ..."
                    } else {
                        writeln!(out, "{k:<9} : {v}").unwrap();
                    }
                }
                writeln!(out).unwrap();
                writeln!(out, "namespace {}: {} blocks of {} bytes = {} bytes", n.nsid, n.id_ns.nsze, n.id_ns.lba_size(), n.id_ns.size_bytes()).unwrap();
                let set = nvme_spec::identify::NsDescriptors::command_set_name(n.csi);
                match &n.unusable {
                    None => writeln!(out, "namespace {}: {set} command set, {} bytes of metadata per block: usable by bench", n.nsid, n.id_ns.current_format().ms).unwrap(),
                    Some(why) => writeln!(out, "namespace {}: not usable by bench: {why}", n.nsid).unwrap(),
                }
            }
        }
    }
    out
}

/// Identify data under the keys and in the forms nvme-cli's `id-ctrl -o
/// json` / `id-ns -o json` give them, so scripts written for those read
/// ours: `crdt1`-`crdt3` for the CRDT array, `nguid` and `eui64` as hex
/// strings, and `lbafs` (the NLBAF + 1 formats, each `{ms, ds, rp}`) for
/// the 64-entry `lbaf` table.
fn nvme_cli_json(mut v: serde_json::Value) -> serde_json::Value {
    let Some(o) = v.as_object_mut() else { return v };
    if let Some(serde_json::Value::Array(c)) = o.remove("crdt") {
        for (i, x) in c.into_iter().enumerate() {
            o.insert(format!("crdt{}", i + 1), x);
        }
    }
    for k in ["nguid", "eui64"] {
        if let Some(serde_json::Value::Array(b)) = o.get(k) {
            let hex: String = b.iter().map(|x| format!("{:02x}", x.as_u64().unwrap_or(0))).collect();
            o.insert(k.into(), hex.into());
        }
    }
    if let Some(serde_json::Value::Array(f)) = o.remove("lbaf") {
        let n = o.get("nlbaf").and_then(serde_json::Value::as_u64).unwrap_or(0) as usize + 1;
        let lbafs: Vec<serde_json::Value> = f
            .into_iter()
            .take(n)
            .map(|e| serde_json::json!({ "ms": e["ms"], "ds": e["lbads"], "rp": e["rp"] }))
            .collect();
        o.insert("lbafs".into(), lbafs.into());
    }
    v
}

#[cfg(test)]
mod info_tests {
    use super::*;
    use nvme_sim::{NamespaceConfig, NamespaceFormat, SimConfig, SimController};

    /// NSIDs 2, 4 (4 KiB blocks), 5 (8 bytes of metadata, extended) and 6
    /// (zoned) active; 1 and 3 allocated but inactive.
    fn controller_with_gaps() -> (SimController, nvme_driver::Controller<nvme_sim::SimRegisters>) {
        let ns = |blocks, lba_size| NamespaceConfig { blocks, lba_size };
        let meta = NamespaceFormat { ms: 8, extended: true, ..Default::default() };
        let zoned = NamespaceFormat { csi: nvme_spec::identify::csi::ZONED, ..Default::default() };
        let sim = SimController::start(SimConfig {
            namespaces: vec![ns(0, 512), ns(2048, 512), ns(0, 512), ns(256, 4096), ns(1024, 512), ns(1024, 512)],
            namespace_formats: vec![Default::default(), Default::default(), Default::default(), Default::default(), meta, zoned],
            idle_spins: 2000,
            ..SimConfig::default()
        })
        .unwrap();
        let c = nvme_driver::Controller::new(sim.registers(), sim.allocator(), nvme_driver::ControllerConfig::default()).unwrap();
        (sim, c)
    }

    #[test]
    fn info_shows_every_active_namespace_and_its_formats() {
        let (_sim, mut c) = controller_with_gaps();
        let (ctrl, ns) = identify_all(&mut c, None).unwrap();
        assert_eq!(ns.iter().map(|n| n.nsid).collect::<Vec<_>>(), [2, 4, 5, 6]);
        let text = identify_report(&ctrl, &ns, OutputFormat::Normal, "sim");
        for n in [2, 4, 5, 6] {
            assert!(text.contains(&format!("NVME Identify Namespace {n}:")), "{text}");
        }
        assert!(!text.contains("Namespace 1:") && !text.contains("Namespace 3:"), "{text}");
        assert!(text.contains("namespaces: 4 shown (2, 4, 5, 6)"), "{text}");
        // nvme-cli's id-ns lines for the LBA formats
        assert!(text.contains("lbaf  0 : ms:0   lbads:9  rp:0 (in use)"), "{text}");
        assert!(text.contains("lbaf  1 : ms:0   lbads:12 rp:0 (in use)"), "{text}");
        assert!(text.contains("lbaf  2 : ms:8   lbads:9  rp:0 (in use)"), "{text}");
        assert!(text.contains("namespace 4: 256 blocks of 4096 bytes = 1048576 bytes"), "{text}");
        assert!(text.contains("namespace 2: NVM command set, 0 bytes of metadata per block: usable by bench"), "{text}");
        assert!(text.contains("namespace 5: not usable by bench: namespace 5 is formatted with 8 bytes of metadata"), "{text}");
        assert!(text.contains("namespace 6: not usable by bench: namespace 6 is a zoned namespace"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&identify_report(&ctrl, &ns, OutputFormat::Json, "sim")).unwrap();
        assert_eq!(json["active_namespaces"], serde_json::json!([2, 4, 5, 6]));
        assert_eq!(json["namespaces"][1]["lba_size"], 4096);
        assert_eq!(json["namespaces"][2]["usable"], false);
        assert_eq!(json["namespaces"][3]["command_set"], "Zoned Namespace");
        assert_eq!(json["nsid"], 2);
        // One namespace asked for; an inactive one is refused, naming the active ones.
        assert_eq!(identify_all(&mut c, Some(4)).unwrap().1.len(), 1);
        let e = identify_all(&mut c, Some(3)).unwrap_err();
        let e = crate::error::chain(&e);
        assert!(e.contains("namespace 3 is not active") && e.contains("2, 4, 5, 6"), "{e}");
    }

    #[test]
    fn workloads_refuse_unusable_namespaces_before_any_io() {
        use crate::backend::userspace::UserspaceTarget;
        for (nsid, want) in [
            (1, "namespace 1 is not active on this controller; its active namespaces are 2, 4, 5, 6: use --nsid 2"),
            (3, "its active namespaces are 2, 4, 5, 6"),
            (5, "8 bytes of metadata per block, at the end of each block's data"),
            (6, "zoned namespace"),
        ] {
            let (sim, c) = controller_with_gaps();
            let fetched = sim.stats().fetched.load(std::sync::atomic::Ordering::Relaxed);
            let e = UserspaceTarget::new("sim", c, nsid).err().expect("refused");
            assert!(e.to_string().contains(want), "nsid {nsid}: {e}");
            // Admin commands only (Identify): no I/O queue was even created.
            let after = sim.stats().fetched.load(std::sync::atomic::Ordering::Relaxed);
            assert!(after - fetched <= 4, "nsid {nsid}: {} commands", after - fetched);
        }
        let (_sim, c) = controller_with_gaps();
        let t = UserspaceTarget::new("sim", c, 4).unwrap();
        assert_eq!(crate::backend::Target::geometry(&t).lba_size, 4096);
    }
}
