//! The `vfio` backend: our userspace driver on a controller bound to
//! vfio-pci. BAR0 is mapped into the process, queues and buffers live in
//! IOMMU-mapped memory, completions are polled: no kernel in the data path.
//!
//! It is [`UserspaceTarget`] (exactly what the `sim` backend uses) over a
//! [`nvme_vfio::Bar`] and a [`nvme_vfio::VfioDma`], plus the VFIO device
//! kept open underneath.

use super::UserspaceTarget;
use crate::backend::{BackendError, Geometry, IoQueue, QueueParams, Target};
use nvme_driver::{Controller, ControllerConfig};
use nvme_hal::{DmaAllocator, RegisterWindow};
use nvme_spec::regs::{self, Cap};
use nvme_vfio::{Bar, Bdf, Host, VfioDma, VfioPci};
use std::sync::Arc;

/// Options of the vfio backend.
#[derive(Clone, Debug, Default)]
pub struct VfioOptions {
    /// PCI address, e.g. 0000:01:00.0.
    pub bdf: String,
    /// Namespace id.
    pub nsid: u32,
    /// I/O queue pairs to ask for (one per thread).
    pub queues: u16,
    /// Use shadow doorbells when the controller offers them (OACS bit 8).
    pub shadow_doorbells: bool,
    /// Interrupt-driven completions (MSI-X through VFIO eventfds) instead of polling.
    pub interrupts: bool,
    /// Write submission entries with streaming stores (ControllerConfig::streaming_sq).
    pub streaming_sq: bool,
    /// The most host memory given to a controller that asks for a Host
    /// Memory Buffer (ControllerConfig::host_memory_max); 0 gives none.
    pub host_memory_max: usize,
}

impl VfioOptions {
    /// Namespace `nsid` of the controller at `bdf` as our driver drives it
    /// by default: one queue pair (the caller sets how many), polled,
    /// shadow doorbells and streaming stores, and a Host Memory Buffer of
    /// up to Linux's 128 MiB.
    pub fn new(bdf: String, nsid: u32) -> Self {
        VfioOptions { bdf, nsid, queues: 1, shadow_doorbells: true, interrupts: false, streaming_sq: true, host_memory_max: nvme_driver::HOST_MEMORY_MAX }
    }
}

/// A controller opened through VFIO and brought up by our driver.
///
/// Field order is drop order: the driver (which shuts the controller down
/// and deletes its queues) goes first, then the DMA allocator, then the
/// VFIO device. The BAR, every DMA mapping and the driver's function reset
/// also hold the device open themselves, so no order of drops can leave
/// them dangling.
pub struct VfioTarget {
    /// The driver side.
    pub target: UserspaceTarget<Bar>,
    /// MSI-X vectors, when interrupt driven (disabled after the driver stops).
    _msix: Option<Arc<nvme_vfio::Msix>>,
    dma: Arc<VfioDma>,
    dev: Arc<VfioPci>,
    bar_len: usize,
}

/// What a controller's model needs of the driver (nvme_driver's quirk
/// tables, by its PCI vendor and device ids): two waits, zero for a model
/// that needs none, and the priority of its submission queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quirks {
    /// Between CC.EN = 0 and reading CSTS.RDY
    /// (`nvme_driver::controller::ready_check_delay`).
    pub ready_check_delay: std::time::Duration,
    /// After vfio-pci's reset at open, before bring-up
    /// (`nvme_driver::controller::init_delay`).
    pub init_delay: std::time::Duration,
    /// I/O submission queues created with medium priority
    /// (`nvme_driver::controller::medium_prio_sq`).
    pub medium_prio_sq: bool,
}

impl Quirks {
    /// The quirks of the controller at `bdf`, by the PCI ids `host`'s sysfs
    /// gives (read once for all); none when they cannot be read.
    pub fn of(host: &Host, bdf: &Bdf) -> Quirks {
        host.pci_ids(bdf)
            .map(|(vendor, device)| Quirks {
                ready_check_delay: nvme_driver::controller::ready_check_delay(vendor, device),
                init_delay: nvme_driver::controller::init_delay(vendor, device),
                medium_prio_sq: nvme_driver::controller::medium_prio_sq(vendor, device),
            })
            .unwrap_or_default()
    }
}

/// The function-level reset the driver escalates to when the controller
/// does not clear CSTS.RDY after CC.EN = 0, at bring-up or at a reset
/// (`Controller::new_with_function_reset`): the controller keeps it, and
/// with it the device, for as long as it lives.
fn function_reset(dev: &Arc<VfioPci>) -> impl FnMut() -> Result<(), String> + Send + Sync + 'static {
    let dev = dev.clone();
    move || dev.reset_function().map_err(|e| crate::error::chain(&e))
}

fn vfio_err(bdf: &str, source: nvme_vfio::VfioError) -> BackendError {
    BackendError::Vfio { bdf: bdf.to_string(), source }
}

impl VfioTarget {
    /// Open the controller at `o.bdf` (bound to vfio-pci) and bring it up.
    pub fn open(o: &VfioOptions) -> Result<Self, BackendError> {
        let bdf = Bdf::parse(&o.bdf)?;
        let host = Host::system();
        let dev = Arc::new(VfioPci::open(&host, &bdf).map_err(|e| vfio_err(&o.bdf, e))?);
        let bar = dev.map_bar0().map_err(|e| vfio_err(&o.bdf, e))?;
        let dma = dev.dma(true);
        // The controller fetches commands by DMA as soon as CC.EN=1.
        dev.enable_bus_master().map_err(|e| vfio_err(&o.bdf, e))?;

        // Every doorbell the driver will ring must lie inside the mapped BAR.
        let bar_len = bar.len();
        let cap = Cap::from_bits(bar.read64(regs::offset::CAP));
        let queues = o.queues.max(1);
        let last_doorbell = regs::cq_head_doorbell(queues, cap.dstrd()) + 4;
        if last_doorbell > bar_len {
            return Err(BackendError::Unsupported(format!(
                "{queues} I/O queues need doorbells up to BAR0 offset {last_doorbell:#x}, but only {bar_len:#x} bytes of BAR0 could be mapped; use fewer threads"
            )));
        }
        let mem: Arc<dyn DmaAllocator> = dma.clone();
        // Interrupts: vector 0 for the admin queue, vector qid for queue qid.
        let msix = if o.interrupts {
            Some(Arc::new(dev.enable_msix(queues as u32 + 1).map_err(|e| vfio_err(&o.bdf, e))?))
        } else {
            None
        };
        let Quirks { ready_check_delay, init_delay, medium_prio_sq } = Quirks::of(&host, &bdf);
        let cfg = ControllerConfig {
            io_queues: queues,
            shadow_doorbells: o.shadow_doorbells,
            interrupts: o.interrupts,
            streaming_sq: o.streaming_sq,
            ready_check_delay,
            init_delay,
            medium_prio_sq,
            host_memory_max: o.host_memory_max,
            ..Default::default()
        };
        let ctrl = Controller::new_with_function_reset(bar, mem, cfg, function_reset(&dev))?;
        let mut target = UserspaceTarget::new(if o.interrupts { "vfio interrupts" } else { "vfio" }, ctrl, o.nsid)?;
        if !ready_check_delay.is_zero() {
            target.add_fact("reset quirk", "this model needs 2.3 s between CC.EN = 0 and reading CSTS.RDY (Linux's NVME_QUIRK_DELAY_BEFORE_CHK_RDY): a reset and the hand-back wait that long");
        }
        if !init_delay.is_zero() {
            target.add_fact("open quirk", "this model is not ready at once after the reset vfio-pci does when it is opened (SPDK's NVME_QUIRK_DELAY_BEFORE_INIT): bring-up waits 2 s first");
        }
        if medium_prio_sq {
            target.add_fact("queue quirk", "this model's submission queues are created with medium priority (QPRIO 10b), as Linux's driver creates them for it (NVME_QUIRK_MEDIUM_PRIO_SQ)");
        }
        if let Some(m) = msix.clone() {
            // Called on the thread that will wait on the queue: if it is
            // pinned to one CPU (--cpus), its vector is steered there.
            target = target.with_interrupts(Arc::new(move |qid| {
                let fd = m.eventfd(qid as usize)?;
                if let Some(cpu) = nvme_hal::current_thread_cpu() {
                    if let Err(e) = m.steer(qid as usize, cpu) {
                        eprintln!("nvme-bypass: note: queue {qid}'s interrupt stays where the kernel put it (steering it to CPU {cpu}: {e})");
                    }
                }
                Ok(fd)
            }));
        }
        Ok(VfioTarget { target, _msix: msix, dma, dev, bar_len })
    }
}

/// A controller opened through VFIO and brought up for admin commands
/// only (`info`): no namespace is checked, no I/O queue created.
/// Field order is drop order, as in [`VfioTarget`].
pub struct VfioController {
    pub ctrl: Controller<Bar>,
    _dma: Arc<VfioDma>,
    _dev: Arc<VfioPci>,
}

/// Open the controller at `bdf` (bound to vfio-pci) for admin commands.
pub fn open_controller(bdf: &str) -> Result<VfioController, BackendError> {
    let b = Bdf::parse(bdf)?;
    let host = Host::system();
    let dev = Arc::new(VfioPci::open(&host, &b).map_err(|e| vfio_err(bdf, e))?);
    let bar = dev.map_bar0().map_err(|e| vfio_err(bdf, e))?;
    let dma = dev.dma(true);
    dev.enable_bus_master().map_err(|e| vfio_err(bdf, e))?;
    let mem: Arc<dyn DmaAllocator> = dma.clone();
    let Quirks { ready_check_delay, init_delay, medium_prio_sq } = Quirks::of(&host, &b);
    let cfg = ControllerConfig { io_queues: 1, shadow_doorbells: false, ready_check_delay, init_delay, medium_prio_sq, ..Default::default() };
    let ctrl = Controller::new_with_function_reset(bar, mem, cfg, function_reset(&dev))?;
    Ok(VfioController { ctrl, _dma: dma, _dev: dev })
}

/// The raw pieces for tools that drive the controller themselves (`trace`):
/// BAR0 as a register window, the DMA allocator, and the device (keep it
/// alive as long as the other two are used). Bus mastering is on.
pub fn open_raw(bdf: &str) -> Result<(Arc<Bar>, Arc<dyn DmaAllocator>, VfioPci), BackendError> {
    let b = Bdf::parse(bdf)?;
    let dev = VfioPci::open(&Host::system(), &b).map_err(|e| vfio_err(bdf, e))?;
    let bar = dev.map_bar0().map_err(|e| vfio_err(bdf, e))?;
    let dma: Arc<dyn DmaAllocator> = dev.dma(true);
    dev.enable_bus_master().map_err(|e| vfio_err(bdf, e))?;
    Ok((bar, dma, dev))
}

impl Target for VfioTarget {
    fn name(&self) -> String {
        self.target.name()
    }
    fn geometry(&self) -> Geometry {
        self.target.geometry()
    }
    fn polled(&self) -> bool {
        self.target.polled()
    }
    fn open_queue(&self, p: QueueParams) -> Result<Box<dyn IoQueue>, BackendError> {
        self.target.open_queue(p)
    }
    fn write_protected(&self) -> Option<String> {
        self.target.write_protected()
    }
    fn describe(&self) -> Vec<(String, String)> {
        let mut d = self.target.describe();
        let iommu = self.dev.iommu();
        let ranges = match iommu.ranges.as_slice() {
            [] => "not reported".to_string(),
            r => r.iter().map(|(s, e)| format!("{s:#x}-{e:#x}")).collect::<Vec<_>>().join(", "),
        };
        d.push(("device".into(), format!("{}, IOMMU group {}", self.dev.bdf(), self.dev.group())));
        d.push((
            "BAR0".into(),
            format!("{} KiB mapped ({} KiB region)", self.bar_len >> 10, self.dev.bar0_info().size >> 10),
        ));
        d.push((
            "IOMMU".into(),
            format!(
                "VFIO type1v2, page sizes {}, valid IOVA {ranges}{}",
                iommu.page_sizes(),
                iommu.dma_avail.map(|n| format!(", {n} more mappings allowed")).unwrap_or_default()
            ),
        ));
        if self._msix.is_none() {
            d.push(("completions".into(), "polled (no interrupts)".into()));
        }
        let (shadow, refused) =
            self.target.with_controller(|c| (c.shadow_doorbells(), c.shadow_doorbells_refused().map(str::to_string))).unwrap_or((false, None));
        d.push((
            "doorbells".into(),
            match (shadow, refused) {
                (true, _) => "shadow doorbells (Doorbell Buffer Config), MMIO only when EventIdx asks".into(),
                (false, Some(why)) => format!("every doorbell an MMIO write (the controller refused Doorbell Buffer Config: {why})"),
                (false, None) => "every doorbell an MMIO write".into(),
            },
        ));
        // Asked now, not at open: the queues and buffers are allocated after it.
        let st = self.dma.stats();
        d.push((
            "DMA memory".into(),
            format!("{}, IOVAs from {:#x}", st.describe(), st.lowest_iova.unwrap_or(nvme_vfio::iova::IOVA_BASE)),
        ));
        d
    }
}

/// Open a controller bound to vfio-pci and bring it up with our driver.
pub fn open(o: &VfioOptions) -> Result<Box<dyn Target>, BackendError> {
    Ok(Box::new(VfioTarget::open(o)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The PCI ids are read from the host's sysfs once, and each quirk
    /// table gives its quirk; ids that cannot be read give none.
    #[test]
    fn quirks_by_the_pci_ids_sysfs_gives() {
        let root = std::env::temp_dir().join(format!("nvb-quirks-{}", std::process::id()));
        let host = Host::at(&root, 0);
        let bdf = Bdf::parse("0000:05:00.0").unwrap();
        let ids = |vendor: &str, device: &str| {
            let d = host.pci_device(&bdf);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(d.join("device"), format!("{device}\n")).unwrap();
            Quirks::of(&host, &bdf)
        };
        // Samsung PM1725a: a wait before reading CSTS.RDY.
        assert_eq!(ids("0x144d", "0xa822"), Quirks { ready_check_delay: Duration::from_millis(2300), ..Quirks::default() });
        // Intel DC P4500: a wait after vfio-pci's reset.
        assert_eq!(ids("0x8086", "0x0a54"), Quirks { init_delay: Duration::from_secs(2), ..Quirks::default() });
        // Intel 600P/P3100: medium priority submission queues, no wait.
        assert_eq!(ids("0x8086", "0xf1a5"), Quirks { medium_prio_sq: true, ..Quirks::default() });
        // QEMU's controller, ids that are not hex, no device: none.
        assert_eq!(ids("0x1b36", "0x0010"), Quirks::default());
        assert_eq!(ids("0x144d", "zz"), Quirks::default());
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(Quirks::of(&host, &bdf), Quirks::default());
    }
}
