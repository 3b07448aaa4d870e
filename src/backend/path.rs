//! One description of a path: which of the four it is and its own options,
//! with one way to open it and one name for it, as fio's `ioengine_ops` plus
//! `load_ioengine` and SPDK's transport registry describe theirs. The CLI,
//! `compare`, `sweep`, `trace` and `driver-cost` all build their paths here.

use crate::backend::kernel::KernelOptions;
use crate::backend::userspace::sim::{SimOptions, SimTarget};
use crate::backend::userspace::vfio::VfioOptions;
use crate::backend::{BackendError, Target};

/// The paths to a namespace (`--backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PathKind {
    /// Our userspace driver against the in-process simulated controller (no hardware, no root).
    Sim,
    /// Our userspace driver on a controller bound to vfio-pci (--device 0000:01:00.0).
    Vfio,
    /// io_uring NVMe passthrough on the generic char device (--device /dev/ng0n1).
    Passthru,
    /// The kernel block layer with O_DIRECT (--device /dev/nvme0n1).
    Block,
}

impl PathKind {
    /// The name `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Sim => "sim",
            PathKind::Vfio => "vfio",
            PathKind::Passthru => "passthru",
            PathKind::Block => "block",
        }
    }
}

/// A path with its options. `queues` (one per thread) is given at [`open`](PathSpec::open).
#[derive(Clone, Debug)]
pub enum PathSpec {
    /// Our driver on the simulated controller.
    Sim(SimOptions),
    /// Our driver on a controller bound to vfio-pci.
    Vfio(VfioOptions),
    /// io_uring NVMe passthrough.
    Passthru(KernelOptions),
    /// The kernel block layer (engine as fio names it).
    Block(KernelOptions),
}

impl PathSpec {
    /// Which path.
    pub fn kind(&self) -> PathKind {
        match self {
            PathSpec::Sim(_) => PathKind::Sim,
            PathSpec::Vfio(_) => PathKind::Vfio,
            PathSpec::Passthru(_) => PathKind::Passthru,
            PathSpec::Block(_) => PathKind::Block,
        }
    }

    /// The kernel path's options (passthru, block).
    pub fn kernel(&self) -> Option<&KernelOptions> {
        match self {
            PathSpec::Passthru(k) | PathSpec::Block(k) => Some(k),
            _ => None,
        }
    }

    /// Open the path with `queues` queue pairs (sim, vfio; the kernel paths
    /// open a ring or context per thread as it asks).
    pub fn open(&self, queues: u16) -> Result<Box<dyn Target>, BackendError> {
        match self {
            // Synchronous and several jobs: a controller per job, so no
            // two jobs step one controller (see SimPerJob).
            PathSpec::Sim(o) if !o.threaded && queues > 1 => Ok(Box::new(crate::backend::userspace::sim::SimPerJob::open(o, queues)?)),
            PathSpec::Sim(o) => Ok(Box::new(SimTarget::open(&SimOptions { queues, ..o.clone() })?)),
            PathSpec::Vfio(o) => crate::backend::userspace::vfio::open(&VfioOptions { queues, ..o.clone() }),
            PathSpec::Passthru(k) => crate::backend::kernel::passthru::open(k),
            PathSpec::Block(k) => crate::backend::kernel::block::open(k),
        }
    }

    /// The row label `compare` and `sweep` print: the path, then what its
    /// options change from the path's plain form ("vfio mmio doorbells",
    /// "block/libaio", "passthru best").
    pub fn label(&self) -> String {
        let mut l = match self {
            PathSpec::Sim(o) => (if o.null { "sim-null" } else { "sim" }).to_string(),
            PathSpec::Vfio(_) => "vfio".to_string(),
            PathSpec::Passthru(_) => "passthru".to_string(),
            PathSpec::Block(k) => format!("block/{}", k.ioengine.name()),
        };
        let mut add = |on: bool, what: &str| {
            if on {
                l.push(' ');
                l.push_str(what);
            }
        };
        match self {
            PathSpec::Sim(o) => {
                add(!o.threaded, "sync");
                add(o.threaded && !o.shadow_doorbells, "mmio doorbells");
                add(!o.streaming_sq, "cached sq stores");
            }
            PathSpec::Vfio(o) => {
                add(o.interrupts, "interrupts");
                add(!o.shadow_doorbells, "mmio doorbells");
                add(!o.streaming_sq, "cached sq stores");
            }
            PathSpec::Passthru(k) | PathSpec::Block(k) => {
                add(k.buffered, "buffered");
                // fio's names for the rest; all four together are "best"
                // (polled or not: that depends on the host's poll queues).
                let best = k.fixedbufs && k.registerfiles && k.register_ring && k.defer_taskrun;
                add(best, "best");
                add(!best && k.fixedbufs, "fixedbufs");
                add(!best && k.registerfiles, "registerfiles");
                add(!best && k.register_ring, "register_ring");
                add(!best && k.defer_taskrun, "defer_taskrun");
                add(!best && k.hipri, "hipri");
                add(k.sqthread_poll, "sqthread_poll");
            }
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::kernel::IoEngine;

    fn k(engine: IoEngine) -> KernelOptions {
        KernelOptions { device: "/dev/nvme0n1".into(), nsid: 1, ioengine: engine, ..Default::default() }
    }

    fn vfio() -> VfioOptions {
        VfioOptions::new("0000:01:00.0".into(), 1)
    }

    #[test]
    fn labels_name_the_path_and_what_its_options_change() {
        assert_eq!(PathSpec::Sim(SimOptions::default()).label(), "sim");
        assert_eq!(PathSpec::Sim(SimOptions { null: true, ..Default::default() }).label(), "sim-null");
        assert_eq!(PathSpec::Sim(SimOptions { threaded: false, shadow_doorbells: false, ..Default::default() }).label(), "sim sync");
        assert_eq!(PathSpec::Vfio(vfio()).label(), "vfio");
        assert_eq!(PathSpec::Vfio(VfioOptions { interrupts: true, ..vfio() }).label(), "vfio interrupts");
        assert_eq!(PathSpec::Vfio(VfioOptions { shadow_doorbells: false, ..vfio() }).label(), "vfio mmio doorbells");
        assert_eq!(PathSpec::Passthru(k(IoEngine::IoUring)).label(), "passthru");
        assert_eq!(PathSpec::Block(k(IoEngine::IoUring)).label(), "block/io_uring");
        assert_eq!(PathSpec::Block(k(IoEngine::Libaio)).label(), "block/libaio");
        assert_eq!(PathSpec::Block(k(IoEngine::Psync)).label(), "block/psync");
        assert_eq!(PathSpec::Block(KernelOptions { buffered: true, ..k(IoEngine::IoUring) }).label(), "block/io_uring buffered");
        let best = KernelOptions { fixedbufs: true, registerfiles: true, register_ring: true, defer_taskrun: true, ..k(IoEngine::IoUring) };
        assert_eq!(PathSpec::Block(best.clone()).label(), "block/io_uring best");
        assert_eq!(PathSpec::Block(KernelOptions { hipri: true, ..best.clone() }).label(), "block/io_uring best");
        assert_eq!(PathSpec::Passthru(best).label(), "passthru best");
        assert_eq!(PathSpec::Passthru(KernelOptions { fixedbufs: true, hipri: true, ..k(IoEngine::IoUring) }).label(), "passthru fixedbufs hipri");
    }

    #[test]
    fn kinds_carry_the_backend_names() {
        use clap::ValueEnum;
        for kind in PathKind::value_variants() {
            assert_eq!(kind.to_possible_value().unwrap().get_name(), kind.name());
        }
        assert_eq!(PathSpec::Vfio(vfio()).kind(), PathKind::Vfio);
        assert_eq!(PathSpec::Block(k(IoEngine::Psync)).kind(), PathKind::Block);
        assert!(PathSpec::Vfio(vfio()).kernel().is_none());
    }
}
