//! # nvme-vfio: an NVMe controller in userspace through VFIO
//!
//! VFIO lets a process own a PCI function safely: the IOMMU confines the
//! device's DMA to memory the process mapped for it, and the kernel hands
//! out the device's registers (BAR0) as a memory mapping. This crate is the
//! glue between that and the driver in `nvme-driver`, in layers
//! (libvfn's `support/` -> `iommu/` -> `nvme/` order):
//!
//! * [`Bdf`]: PCI addresses as sysfs spells them (`0000:01:00.0`).
//! * [`bind`]: moving a controller between the kernel's `nvme` driver and
//!   `vfio-pci`, refusing when any namespace of it is in use, explaining
//!   IOMMU problems (the `nvme-bypass bind`/`unbind` commands, and
//!   [`bind::to_vfio`]'s guard for programs that give it back afterwards).
//! * [`VfioPci`]: container (Type1v2 IOMMU), group, device file, config
//!   space (bus mastering), IOMMU page sizes and IOVA ranges.
//! * [`Bar`]: BAR0 as a bounds-checked volatile [`nvme_hal::RegisterWindow`],
//!   the only path to the registers.
//! * [`VfioDma`]: a [`nvme_hal::DmaAllocator`] whose memory (2 MiB
//!   hugepages, or ordinary locked pages when there are none) is mapped
//!   through the IOMMU at IOVAs from our own [`iova::IovaSpace`], pooled in
//!   2 MiB chunks, and unmapped when the last handle to it drops.
//!
//! Opening a controller (what `nvme-bypass --backend vfio` does):
//!
//! ```no_run
//! use nvme_vfio::{Bdf, Host, VfioPci};
//! let bdf = Bdf::parse("0000:01:00.0")?;
//! let dev = VfioPci::open(&Host::system(), &bdf)?;   // must be bound to vfio-pci
//! let bar = dev.map_bar0()?;                          // registers
//! let dma = dev.dma(true);                            // DMA memory, hugepages if any
//! dev.enable_bus_master()?;                           // before CC.EN=1
//! // nvme_driver::Controller::new(bar, dma, ...) brings the controller up.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The raw pointers (BAR0 and DMA memory) live in [`Bar`] and in
//! `nvme_hal::DmaRegion`; every `unsafe` block carries its `// SAFETY:`.

#![deny(clippy::undocumented_unsafe_blocks)]

mod bar;
mod bdf;
pub mod bind;
mod device;
pub mod dma;
pub mod host;
pub mod iova;

pub use bar::Bar;
pub use bdf::{Bdf, BdfError};
pub use bind::BindError;
pub use device::{parse_iommu_info, pci, IommuInfo, Msix, RegionInfo, VfioError, VfioPci};
pub use dma::{DmaStats, IommuError, VfioDma};
pub use host::Host;
