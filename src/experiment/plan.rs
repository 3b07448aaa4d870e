//! The plan of a comparison: which rows run, each a path ([`PathSpec`]) with
//! the block scheduler to set for it and a note, in run order. `compare`
//! runs its rows once, `sweep` at every point of its grid.

use crate::backend::kernel::{IoEngine, KernelOptions};
use crate::backend::path::{PathKind, PathSpec};
use crate::backend::userspace::sim::SimOptions;
use crate::backend::userspace::vfio::VfioOptions;
use crate::measure::topology::Topology;
use serde::Serialize;
use std::path::Path;

/// One row: a path, the scheduler it runs under, what it shows.
#[derive(Clone, Debug, Serialize)]
pub struct Variant {
    /// Row label: the path's, then the scheduler.
    pub label: String,
    /// Which path.
    pub path: PathKind,
    /// The path and its options.
    #[serde(skip)]
    pub spec: PathSpec,
    /// I/O scheduler to set on the block device for this row.
    pub scheduler: Option<String>,
    /// What the row shows, in a few words.
    pub note: String,
}

impl Variant {
    /// A row of `spec` under `scheduler`.
    pub fn new(spec: PathSpec, scheduler: Option<&str>, note: impl Into<String>) -> Self {
        let label = match scheduler {
            Some(s) => format!("{} sched={s}", spec.label()),
            None => spec.label(),
        };
        Variant { label, path: spec.kind(), spec, scheduler: scheduler.map(str::to_string), note: note.into() }
    }
}

fn kopts(t: &Topology, dev: &Path, engine: IoEngine) -> KernelOptions {
    KernelOptions { device: dev.display().to_string(), nsid: t.nsid, ioengine: engine, ..Default::default() }
}

/// A kernel path at its best, as Axboe's per-core records ran it: fixed
/// buffers, registered file and ring fd, single issuer with deferred task
/// work, and polled completions when nvme has poll queues.
fn best(t: &Topology, dev: &Path) -> (KernelOptions, String) {
    let mut k = kopts(t, dev, IoEngine::IoUring);
    k.fixedbufs = true;
    k.registerfiles = true;
    k.register_ring = true;
    k.defer_taskrun = true;
    k.hipri = poll_queues_available();
    let note = format!(
        "fixed buffers, registered file and ring fd, single issuer + deferred task work{}",
        if poll_queues_available() { ", polled (IOPOLL)" } else { "; no poll queues for IOPOLL" }
    );
    (k, note)
}

fn poll_queues_available() -> bool {
    std::fs::read_to_string("/sys/module/nvme/parameters/poll_queues")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(|n| n > 0)
}

fn schedulers(block: &Path) -> Vec<String> {
    let name = block.file_name().and_then(|n| n.to_str()).unwrap_or("");
    std::fs::read_to_string(format!("/sys/block/{name}/queue/scheduler"))
        .map(|s| s.split_whitespace().map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string()).collect())
        .unwrap_or_default()
}

/// Our driver on the controller of `t`, polled with shadow doorbells unless
/// told otherwise (queues are given when the row opens).
fn vfio(t: &Topology) -> VfioOptions {
    VfioOptions::new(t.bdf.clone().unwrap_or_default(), t.nsid)
}

/// The simulator paths `sweep` knows (`sim`: data in RAM, `sim-null`: no
/// data moved), with a namespace of `size` bytes and the controller thread
/// on `cpu`.
pub fn sim(null: bool, size: u64, cpu: Option<usize>) -> Variant {
    Variant::new(PathSpec::Sim(SimOptions { size, null, cpu, ..SimOptions::default() }), None, if null { "simulator, no data moved" } else { "simulator, data in RAM" })
}

/// The rows for a list of row names (None: all that apply), in run order
/// (kernel paths first, vfio last so the controller moves once), and why
/// any asked for were skipped.
/// The names `--paths` takes on a device (`interrupts`, `mmio`: vfio's
/// variants of those names alone).
pub const PATH_NAMES: [&str; 10] = ["block", "libaio", "psync", "buffered", "sched", "best", "passthru", "vfio", "interrupts", "mmio"];

/// A name in `paths` that is not one of [`PATH_NAMES`], as a message.
pub fn unknown_path(paths: &[String]) -> Option<String> {
    let p = paths.iter().find(|p| !PATH_NAMES.contains(&p.as_str()))?;
    Some(format!("unknown path '{p}' in --paths; use one or more of {}", PATH_NAMES.join(", ")))
}

pub fn plan_paths(paths: Option<&[String]>, t: &Topology) -> (Vec<Variant>, Vec<String>) {
    let all = ["block", "libaio", "passthru", "vfio", "buffered", "sched", "best"];
    let want: Vec<String> = paths.map(<[String]>::to_vec).unwrap_or_else(|| all.iter().map(|s| s.to_string()).collect());
    let has = |p: &str| want.iter().any(|w| w == p);
    let mut v = vec![];
    let mut skipped = vec![];
    if let Some(b) = &t.block {
        if has("block") {
            v.push(Variant::new(PathSpec::Block(kopts(t, b, IoEngine::IoUring)), None, "O_DIRECT, interrupts (baseline)"));
        }
        if has("libaio") {
            v.push(Variant::new(PathSpec::Block(kopts(t, b, IoEngine::Libaio)), None, "O_DIRECT, the classic fio engine"));
        }
        if has("psync") {
            v.push(Variant::new(PathSpec::Block(kopts(t, b, IoEngine::Psync)), None, "pread/pwrite, one I/O at a time per thread (at depth 1 whatever --iodepth says, as fio's sync engines)"));
        }
        if has("buffered") {
            let k = KernelOptions { buffered: true, ..kopts(t, b, IoEngine::IoUring) };
            v.push(Variant::new(PathSpec::Block(k), None, "page cache instead of O_DIRECT (caches dropped first)"));
        }
        if has("sched") {
            let s = schedulers(b);
            if s.iter().any(|x| x == "mq-deadline") && s.iter().any(|x| x == "none") {
                for sched in ["none", "mq-deadline"] {
                    v.push(Variant::new(PathSpec::Block(kopts(t, b, IoEngine::IoUring)), Some(sched), format!("I/O scheduler {sched} (restored after)")));
                }
            } else {
                skipped.push(format!(
                    "sched: {} has no choice of I/O scheduler ({}); a multipath head has none: boot with nvme_core.multipath=N",
                    b.display(),
                    if s.is_empty() { "no scheduler file".to_string() } else { s.join(" ") }
                ));
            }
        }
        if has("best") {
            let (k, note) = best(t, b);
            v.push(Variant::new(PathSpec::Block(k), None, note));
        }
    } else if want.iter().any(|w| matches!(w.as_str(), "block" | "libaio" | "psync" | "buffered" | "sched")) {
        skipped.push(format!(
            "block rows: no block device for namespace {} (not an active namespace of this controller, or the controller not on nvme; `nvme-bypass info --device {}` lists its namespaces)",
            t.nsid,
            t.bdf.as_deref().unwrap_or("BDF")
        ));
    }
    if let Some(g) = &t.generic {
        if has("passthru") {
            v.push(Variant::new(PathSpec::Passthru(kopts(t, g, IoEngine::IoUring)), None, "io_uring URING_CMD, interrupts"));
        }
        if has("best") {
            let (k, note) = best(t, g);
            v.push(Variant::new(PathSpec::Passthru(k), None, note));
        }
    } else if has("passthru") {
        skipped.push("passthru: no /dev/ngXnY for this namespace (kernel older than 5.19, or controller not on nvme)".into());
    }
    if has("vfio") {
        if t.bdf.is_some() {
            v.push(Variant::new(PathSpec::Vfio(vfio(t)), None, "userspace driver, polled, shadow doorbells when offered"));
            if has("best") || has("interrupts") {
                v.push(Variant::new(
                    PathSpec::Vfio(VfioOptions { interrupts: true, ..vfio(t) }),
                    None,
                    "userspace driver, MSI-X interrupts through VFIO eventfds: the thread sleeps when idle",
                ));
            }
            if has("best") || has("mmio") {
                v.push(Variant::new(
                    PathSpec::Vfio(VfioOptions { shadow_doorbells: false, ..vfio(t) }),
                    None,
                    "userspace driver, polled, every doorbell an MMIO write (no shadow doorbells)",
                ));
            }
        } else {
            skipped.push("vfio: no PCI address for this device".into());
        }
    }
    (v, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn topology() -> Topology {
        Topology {
            bdf: Some("0000:01:00.0".into()),
            nsid: 1,
            block: Some(PathBuf::from("/dev/nvme0n1")),
            generic: Some(PathBuf::from("/dev/ng0n1")),
            ..Default::default()
        }
    }

    #[test]
    fn every_row_is_labelled_by_its_path() {
        let t = topology();
        let all: Vec<String> = ["block", "libaio", "psync", "buffered", "passthru", "vfio", "best"].iter().map(|s| s.to_string()).collect();
        let (rows, skipped) = plan_paths(Some(&all), &t);
        assert!(skipped.is_empty(), "{skipped:?}");
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["block/io_uring", "block/libaio", "block/psync", "block/io_uring buffered", "block/io_uring best", "passthru", "passthru best", "vfio", "vfio interrupts", "vfio mmio doorbells"]
        );
        for r in &rows {
            assert_eq!(r.label, r.spec.label());
            assert_eq!(r.path, r.spec.kind());
        }
        let PathSpec::Vfio(o) = &rows[9].spec else { panic!("vfio") };
        assert!(!o.shadow_doorbells && !o.interrupts);
        let PathSpec::Vfio(o) = &rows[8].spec else { panic!("vfio") };
        assert!(o.shadow_doorbells && o.interrupts);
        assert_eq!(o.bdf, "0000:01:00.0");
        let PathSpec::Block(k) = &rows[3].spec else { panic!("block") };
        assert_eq!(k.device, "/dev/nvme0n1");
        let PathSpec::Passthru(k) = &rows[6].spec else { panic!("passthru") };
        assert_eq!(k.device, "/dev/ng0n1");
    }

    #[test]
    fn scheduler_rows_carry_it_in_the_label() {
        let v = Variant::new(PathSpec::Block(kopts(&topology(), Path::new("/dev/nvme0n1"), IoEngine::IoUring)), Some("mq-deadline"), "");
        assert_eq!(v.label, "block/io_uring sched=mq-deadline");
        assert_eq!(v.scheduler.as_deref(), Some("mq-deadline"));
        assert_eq!(sim(false, 1 << 30, None).label, "sim");
        assert_eq!(sim(true, 1 << 30, None).label, "sim-null");
        assert_eq!(sim(true, 1 << 30, None).path, PathKind::Sim);
    }

    #[test]
    fn rows_that_do_not_apply_are_skipped_with_a_reason() {
        let t = Topology { block: None, generic: None, bdf: None, ..topology() };
        let (rows, skipped) = plan_paths(None, &t);
        assert!(rows.is_empty());
        assert_eq!(skipped.len(), 3, "{skipped:?}");
    }
}
