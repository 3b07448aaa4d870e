//! One PCI function opened through VFIO: the container (an IOMMU domain
//! with the Type1v2 backend), the function's IOMMU group, the device file,
//! its BAR0 and config space, and DMA memory mapped into the domain.
//!
//! vfio-ioctls (without its KVM features) opens the container, group and
//! device. It has no call for a few things a userspace driver needs, done
//! here with raw ioctls on its file descriptors (each documented at its
//! use): VFIO_IOMMU_GET_INFO (IOMMU page sizes and usable IOVA ranges) and
//! VFIO_DEVICE_GET_REGION_INFO (its own region table can shift indices when
//! a region query fails, and it reports no errors); config space is read
//! and written with pread/pwrite so that errors are not swallowed.

use crate::bar::Bar;
use crate::bind::{check_device, check_group, BindError, VFIO_DRIVER};
use crate::dma::{DmaConfig, Iommu, IommuError, VfioDma};
use crate::host::Host;
use crate::iova::{IovaSpace, DEFAULT_IOVA_END, IOVA_BASE};
use crate::Bdf;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use vfio_bindings::bindings::vfio as sys;
use vfio_ioctls::{VfioContainer, VfioDevice, VfioOps, VfioRegionInfoCap};

/// Errors opening and using a VFIO device, each with what to do next.
#[derive(Debug, thiserror::Error)]
pub enum VfioError {
    /// A check shared with binding failed (no device, no IOMMU, group not viable).
    #[error(transparent)]
    Bind(#[from] BindError),
    /// This architecture's queue barriers do not order against a device
    /// (see `nvme_hal::barrier`).
    #[error("the userspace driver's memory barriers are written for x86-64 and aarch64, not {arch}: a controller could read half-written commands. Measure this machine with the block or passthru paths")]
    NoDeviceBarriers { arch: &'static str },
    /// The device is not on vfio-pci.
    #[error("{bdf} is bound to {}, not vfio-pci: run `nvme-bypass bind {bdf}` first (and `nvme-bypass unbind {bdf}` afterwards to give it back to the kernel)", .driver.as_deref().unwrap_or("no driver"))]
    NotBound { bdf: Bdf, driver: Option<String> },
    /// /dev/vfio/vfio could not be opened or lacks Type1v2.
    #[error("could not set up a VFIO container (/dev/vfio/vfio){hint}")]
    Container {
        hint: String,
        #[source]
        source: vfio_ioctls::VfioError,
    },
    /// The group or the device could not be opened.
    #[error("could not open {bdf} through its VFIO group /dev/vfio/{group}{hint}")]
    Open {
        bdf: Bdf,
        group: u32,
        hint: String,
        #[source]
        source: vfio_ioctls::VfioError,
    },
    /// An ioctl or a config-space access failed.
    #[error("{what} for {bdf} failed")]
    Sys {
        what: &'static str,
        bdf: Bdf,
        #[source]
        source: io::Error,
    },
    /// Interrupts could not be set up through VFIO.
    #[error("{what} for {bdf} failed")]
    Irq {
        what: &'static str,
        bdf: Bdf,
        #[source]
        source: vfio_ioctls::VfioError,
    },
    /// BAR0 is unusable.
    #[error("BAR0 of {bdf} cannot be used: {why}")]
    Bar0 { bdf: Bdf, why: String },
}

/// What the IOMMU backend says about itself (VFIO_IOMMU_GET_INFO).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IommuInfo {
    /// Bitmap of supported IOMMU page sizes (bit n set: 2^n bytes).
    pub pgsizes: u64,
    /// Usable IOVA ranges, inclusive `(start, end)`; empty when the kernel
    /// does not say (before 5.4).
    pub ranges: Vec<(u64, u64)>,
    /// How many more DMA mappings the container accepts, if reported.
    pub dma_avail: Option<u32>,
}

impl IommuInfo {
    /// The smallest IOMMU page (4 KiB if unknown).
    pub fn min_page(&self) -> usize {
        if self.pgsizes == 0 {
            4096
        } else {
            1usize << self.pgsizes.trailing_zeros()
        }
    }

    /// Page sizes as text: "4K 2M 1G".
    pub fn page_sizes(&self) -> String {
        (0..64)
            .filter(|b| self.pgsizes >> b & 1 == 1)
            .map(|b| match b {
                0..=9 => format!("{}", 1u64 << b),
                10..=19 => format!("{}K", 1u64 << (b - 10)),
                20..=29 => format!("{}M", 1u64 << (b - 20)),
                _ => format!("{}G", 1u64 << (b - 30)),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Parse the buffer VFIO_IOMMU_GET_INFO filled: `struct
/// vfio_iommu_type1_info` and, when `flags` has VFIO_IOMMU_INFO_CAPS, the
/// capability chain at `cap_offset` (each capability starts with `struct
/// vfio_info_cap_header { u16 id; u16 version; u32 next; }`, `next` being
/// an offset from the start of the buffer, 0 at the end). Pure, bounds
/// checked: a malformed chain ends the walk.
pub fn parse_iommu_info(buf: &[u8]) -> IommuInfo {
    let u16_at = |o: usize| buf.get(o..o + 2).map(|b| u16::from_ne_bytes(b.try_into().unwrap()));
    let u32_at = |o: usize| buf.get(o..o + 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap()));
    let u64_at = |o: usize| buf.get(o..o + 8).map(|b| u64::from_ne_bytes(b.try_into().unwrap()));
    let mut info = IommuInfo::default();
    let flags = u32_at(4).unwrap_or(0);
    if flags & sys::VFIO_IOMMU_INFO_PGSIZES != 0 {
        info.pgsizes = u64_at(8).unwrap_or(0);
    }
    if flags & sys::VFIO_IOMMU_INFO_CAPS == 0 {
        return info;
    }
    let mut off = u32_at(16).unwrap_or(0) as usize;
    let mut seen = 0;
    while off != 0 && seen < 64 {
        seen += 1;
        let (Some(id), Some(next)) = (u16_at(off), u32_at(off + 4)) else { break };
        match id as u32 {
            sys::VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE => {
                let n = u32_at(off + 8).unwrap_or(0) as usize;
                for i in 0..n {
                    let at = off + 16 + 16 * i;
                    match (u64_at(at), u64_at(at + 8)) {
                        (Some(s), Some(e)) => info.ranges.push((s, e)),
                        _ => break,
                    }
                }
            }
            sys::VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL => info.dma_avail = u32_at(off + 8),
            _ => {}
        }
        if next as usize <= off {
            break; // chains only go forward
        }
        off = next as usize;
    }
    info
}

/// `_IO(VFIO_TYPE, VFIO_BASE + nr)`: VFIO's ioctls carry their size in `argsz`.
const fn vfio_ioctl(nr: u32) -> libc::c_ulong {
    ((sys::VFIO_TYPE as libc::c_ulong) << 8) | (sys::VFIO_BASE + nr) as libc::c_ulong
}
const VFIO_DEVICE_GET_INFO: libc::c_ulong = vfio_ioctl(7);
const VFIO_DEVICE_GET_REGION_INFO: libc::c_ulong = vfio_ioctl(8);
const VFIO_DEVICE_RESET: libc::c_ulong = vfio_ioctl(11);
const VFIO_IOMMU_GET_INFO: libc::c_ulong = vfio_ioctl(12);

/// PCI config space: the Command register and its bits (PCI Local Bus 3.0 §6.2.2).
pub mod pci {
    /// Offset of the Command register.
    pub const COMMAND: u64 = 0x04;
    /// Memory Space Enable: respond to accesses to the memory BARs.
    pub const COMMAND_MEMORY: u16 = 1 << 1;
    /// Bus Master Enable: allow the function to issue DMA.
    pub const COMMAND_BUS_MASTER: u16 = 1 << 2;
}

/// Where a VFIO region lives in the device file.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegionInfo {
    /// VFIO_REGION_INFO_FLAG_*.
    pub flags: u32,
    /// Size in bytes.
    pub size: u64,
    /// Offset in the device file (for pread/pwrite/mmap).
    pub offset: u64,
}

/// The device and its container, shared by the [`Bar`] and the DMA
/// mappings so neither outlives the device file. Field order: the device
/// closes (and leaves the container) before the container goes.
struct Open {
    device: VfioDevice,
    container: Arc<VfioContainer>,
}

impl Iommu for Open {
    unsafe fn map_dma(&self, iova: u64, len: usize, vaddr: *mut u8) -> Result<(), IommuError> {
        // SAFETY: the caller upholds the contract (the memory stays mapped
        // and unreferenced until unmap_dma succeeds).
        Ok(unsafe { self.container.vfio_dma_map(iova, len, vaddr) }?)
    }
    fn unmap_dma(&self, iova: u64, len: usize) -> Result<(), IommuError> {
        Ok(self.container.vfio_dma_unmap(iova, len)?)
    }
}

/// A PCI function opened through VFIO.
pub struct VfioPci {
    bdf: Bdf,
    group: u32,
    open: Arc<Open>,
    iommu: IommuInfo,
    bar0: RegionInfo,
    config: RegionInfo,
}

impl VfioPci {
    /// Open `bdf`, which must be bound to vfio-pci and alone (or with
    /// VFIO-safe company) in its IOMMU group.
    pub fn open(host: &Host, bdf: &Bdf) -> Result<VfioPci, VfioError> {
        if !nvme_hal::barrier::DEVICE_BARRIERS {
            return Err(VfioError::NoDeviceBarriers { arch: std::env::consts::ARCH });
        }
        let dev_dir = host.pci_device(bdf);
        // There, and an NVMe controller, before anything about its driver.
        check_device(host, bdf)?;
        let driver = host.driver_of(bdf);
        if driver.as_deref() != Some(VFIO_DRIVER) {
            return Err(VfioError::NotBound { bdf: *bdf, driver });
        }
        // Explains an unviable group by naming the devices (the ioctl only says "not viable").
        let group = check_group(host, bdf)?;

        let container = VfioContainer::new(None).map_err(|source| {
            let hint = match &source {
                vfio_ioctls::VfioError::OpenContainer(e) if e.kind() == io::ErrorKind::NotFound => {
                    ": the vfio module is not loaded (`modprobe vfio-pci`)".to_string()
                }
                vfio_ioctls::VfioError::OpenContainer(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    ": permission denied, run as root".to_string()
                }
                vfio_ioctls::VfioError::VfioExtension => {
                    ": the kernel offers no Type1v2 IOMMU backend (`modprobe vfio_iommu_type1`)".to_string()
                }
                _ => String::new(),
            };
            VfioError::Container { hint, source }
        })?;
        let container = Arc::new(container);
        let ops: Arc<dyn VfioOps> = container.clone();
        let device = VfioDevice::new(&dev_dir, ops, false).map_err(|source| {
            let hint = match &source {
                vfio_ioctls::VfioError::OpenGroup(e, _) => match (e.kind(), e.raw_os_error()) {
                    (io::ErrorKind::NotFound, _) => {
                        format!(": /dev/vfio/{group} does not exist; run `nvme-bypass bind {bdf}`")
                    }
                    (io::ErrorKind::PermissionDenied, _) => ": permission denied, run as root".into(),
                    (_, Some(libc::EBUSY)) => {
                        ": the group is already open, by another nvme-bypass or a VM using the device; stop it first"
                            .into()
                    }
                    _ => String::new(),
                },
                vfio_ioctls::VfioError::GroupViable => {
                    ": the group is not viable (a device in it is bound to a driver other than vfio-pci)".into()
                }
                vfio_ioctls::VfioError::GroupSetContainer => {
                    ": the group is already attached to another container (another process has it)".into()
                }
                _ => String::new(),
            };
            VfioError::Open { bdf: *bdf, group, hint, source }
        })?;
        let open = Arc::new(Open { device, container });
        let iommu = iommu_info(&open.container).map_err(|source| VfioError::Sys {
            what: "VFIO_IOMMU_GET_INFO",
            bdf: *bdf,
            source,
        })?;
        let region = |index: u32, what| {
            region_info(&open.device, index).map_err(|source| VfioError::Sys { what, bdf: *bdf, source })
        };
        let bar0 = region(sys::VFIO_PCI_BAR0_REGION_INDEX, "VFIO_DEVICE_GET_REGION_INFO (BAR0)")?;
        let config = region(sys::VFIO_PCI_CONFIG_REGION_INDEX, "VFIO_DEVICE_GET_REGION_INFO (config space)")?;
        Ok(VfioPci { bdf: *bdf, group, open, iommu, bar0, config })
    }

    /// The PCI address.
    pub fn bdf(&self) -> Bdf {
        self.bdf
    }
    /// The IOMMU group number.
    pub fn group(&self) -> u32 {
        self.group
    }
    /// The IOMMU's page sizes and IOVA ranges.
    pub fn iommu(&self) -> &IommuInfo {
        &self.iommu
    }
    /// BAR0's size, offset and flags.
    pub fn bar0_info(&self) -> RegionInfo {
        self.bar0
    }

    /// Read `buf.len()` bytes of config space at `offset`.
    pub fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), VfioError> {
        let fd = self.open.device.as_raw_fd();
        // SAFETY: pread writes at most buf.len() bytes into buf, which we own.
        let n = unsafe {
            libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), (self.config.offset + offset) as libc::off_t)
        };
        if n != buf.len() as isize {
            return Err(VfioError::Sys { what: "reading PCI config space", bdf: self.bdf, source: short_io(n) });
        }
        Ok(())
    }

    /// Write `buf` to config space at `offset`.
    pub fn config_write(&self, offset: u64, buf: &[u8]) -> Result<(), VfioError> {
        let fd = self.open.device.as_raw_fd();
        // SAFETY: pwrite reads at most buf.len() bytes from buf.
        let n =
            unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), (self.config.offset + offset) as libc::off_t) };
        if n != buf.len() as isize {
            return Err(VfioError::Sys { what: "writing PCI config space", bdf: self.bdf, source: short_io(n) });
        }
        Ok(())
    }

    /// Turn on Bus Master Enable (and Memory Space Enable, should the BAR
    /// decode be off) in the Command register, so the controller may DMA.
    /// Returns the Command register as it was.
    pub fn enable_bus_master(&self) -> Result<u16, VfioError> {
        let mut b = [0u8; 2];
        self.config_read(pci::COMMAND, &mut b)?;
        let old = u16::from_le_bytes(b);
        let new = old | pci::COMMAND_BUS_MASTER | pci::COMMAND_MEMORY;
        if new != old {
            self.config_write(pci::COMMAND, &new.to_le_bytes())?;
        }
        Ok(old)
    }

    /// A function-level reset through vfio-pci (VFIO_DEVICE_RESET: FLR, or
    /// the reset method the function has), which saves and restores the
    /// configuration space around it, bus mastering included. Raw ioctls
    /// (vfio-ioctls' `reset` drops the outcome): an error says whether the
    /// function has no reset method (VFIO_DEVICE_FLAGS_RESET clear) or the
    /// reset failed (e.g. EAGAIN: the kernel could not lock the device).
    pub fn reset_function(&self) -> Result<(), VfioError> {
        let fd = self.open.device.as_raw_fd();
        let sys_err = |what| VfioError::Sys { what, bdf: self.bdf, source: io::Error::last_os_error() };
        let mut info = sys::vfio_device_info { argsz: std::mem::size_of::<sys::vfio_device_info>() as u32, ..Default::default() };
        // SAFETY: the device fd is open; the kernel writes at most `argsz`
        // bytes into `info`, a properly sized vfio_device_info we own.
        if unsafe { libc::ioctl(fd, VFIO_DEVICE_GET_INFO, &mut info as *mut sys::vfio_device_info) } != 0 {
            return Err(sys_err("VFIO_DEVICE_GET_INFO"));
        }
        if info.flags & sys::VFIO_DEVICE_FLAGS_RESET == 0 {
            return Err(VfioError::Sys {
                what: "a function reset (VFIO_DEVICE_FLAGS_RESET clear: the function has no reset method vfio-pci can use)",
                bdf: self.bdf,
                source: io::Error::from_raw_os_error(libc::ENOTTY),
            });
        }
        // SAFETY: VFIO_DEVICE_RESET takes no argument; the device fd is open.
        if unsafe { libc::ioctl(fd, VFIO_DEVICE_RESET) } != 0 {
            return Err(sys_err("VFIO_DEVICE_RESET"));
        }
        Ok(())
    }

    /// Map BAR0 (the NVMe registers and doorbells) into this process.
    pub fn map_bar0(&self) -> Result<Arc<Bar>, VfioError> {
        let err = |why: String| VfioError::Bar0 { bdf: self.bdf, why };
        let r = self.bar0;
        if r.size == 0 {
            return Err(err("the region is empty (no memory BAR0?)".into()));
        }
        if r.flags & sys::VFIO_REGION_INFO_FLAG_MMAP == 0 {
            return Err(err("vfio-pci does not allow mapping it (VFIO_REGION_INFO_FLAG_MMAP clear)".into()));
        }
        // With a sparse-mmap capability only parts may be mapped (the MSI-X
        // table on kernels before 4.16): use the part at offset 0, which
        // holds the registers and the first doorbells.
        let mut len = r.size as usize;
        let sparse =
            self.open.device.get_region_caps(sys::VFIO_PCI_BAR0_REGION_INDEX).into_iter().find_map(|c| match c {
                VfioRegionInfoCap::SparseMmap(s) => Some(s),
                _ => None,
            });
        if let Some(s) = sparse {
            let first = s
                .areas
                .iter()
                .find(|a| a.offset == 0)
                .ok_or_else(|| err("no mmap-able area at offset 0 (sparse mmap)".into()))?;
            len = first.size as usize;
        }
        let fd = self.open.device.as_raw_fd();
        // SAFETY: a fresh shared mapping of the device file at BAR0's
        // offset, with no address hint; the result is checked. It is owned
        // by the Bar, which unmaps it on drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                r.offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(err(format!(
                "mmap of {len:#x} bytes at offset {:#x} failed: {}",
                r.offset,
                io::Error::last_os_error()
            )));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| err("mmap returned NULL".into()))?;
        // SAFETY: ptr/len are the mapping just made, unmapped only by the
        // Bar; `open` keeps the device file (and so the mapping's backing)
        // open for as long as the Bar lives.
        Ok(Arc::new(unsafe { Bar::from_mapping(ptr, len, self.open.clone()) }))
    }

    /// DMA memory mapped into this device's IOMMU domain. `hugepages`:
    /// try 2 MiB hugepages first.
    pub fn dma(&self, hugepages: bool) -> Arc<VfioDma> {
        let ranges =
            if self.iommu.ranges.is_empty() { vec![(0, DEFAULT_IOVA_END - 1)] } else { self.iommu.ranges.clone() };
        // 2 MiB of unmapped IOVA after each mapping: a device overrun faults.
        let space = IovaSpace::new(&ranges, IOVA_BASE, u64::MAX, crate::dma::CHUNK_SIZE as u64);
        let iommu: Arc<dyn Iommu> = self.open.clone();
        Arc::new(VfioDma::new(iommu, space, DmaConfig { hugepages, iommu_page: self.iommu.min_page() }))
    }
}

fn short_io(n: isize) -> io::Error {
    if n < 0 {
        io::Error::last_os_error()
    } else {
        io::Error::new(io::ErrorKind::UnexpectedEof, format!("short transfer ({n} bytes)"))
    }
}

/// VFIO_DEVICE_GET_REGION_INFO for one region (raw ioctl; see the module doc).
fn region_info(device: &VfioDevice, index: u32) -> io::Result<RegionInfo> {
    let mut info = sys::vfio_region_info {
        argsz: std::mem::size_of::<sys::vfio_region_info>() as u32,
        flags: 0,
        index,
        cap_offset: 0,
        size: 0,
        offset: 0,
    };
    // SAFETY: the device fd is open; the kernel writes at most `argsz`
    // bytes into `info`, a properly sized vfio_region_info we own.
    let rc = unsafe {
        libc::ioctl(device.as_raw_fd(), VFIO_DEVICE_GET_REGION_INFO, &mut info as *mut sys::vfio_region_info)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(RegionInfo { flags: info.flags, size: info.size, offset: info.offset })
}

/// VFIO_IOMMU_GET_INFO with its capability chain (raw ioctl: vfio-ioctls
/// does not expose it). Called twice: once to learn the size the chain
/// needs (`argsz` comes back larger), once with a buffer that size.
fn iommu_info(container: &VfioContainer) -> io::Result<IommuInfo> {
    let fd = container.as_raw_fd();
    let mut argsz = std::mem::size_of::<sys::vfio_iommu_type1_info>() as u32;
    for _ in 0..2 {
        // u64 words: the structures in it are 8-byte aligned.
        let mut buf = vec![0u64; (argsz as usize).div_ceil(8)];
        buf[0] = argsz as u64; // argsz is the first u32 (little endian: low half)
                               // SAFETY: buf is argsz bytes (rounded up) of writable memory we own;
                               // the kernel writes at most argsz bytes.
        let rc = unsafe { libc::ioctl(fd, VFIO_IOMMU_GET_INFO, buf.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let want = u32::from_ne_bytes(bytes[0..4].try_into().unwrap());
        if want <= argsz {
            return Ok(parse_iommu_info(&bytes[..argsz as usize]));
        }
        argsz = want;
    }
    Err(io::Error::other("VFIO_IOMMU_GET_INFO kept asking for a larger buffer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_numbers_by_name() {
        // As /proc/interrupts prints them on a 2-CPU x86 guest (6.12).
        let t = "           CPU0       CPU1
  0:         41          0   IO-APIC   2-edge      timer
 26:       1204          0  IR-PCI-MSIX-0000:00:01.0    1-edge      nvme0q1
 30:          0         12  IR-PCI-MSIX-0000:00:01.0    0-edge      vfio-msix[0](0000:00:01.0)
 31:        880          3  IR-PCI-MSIX-0000:00:01.0    1-edge      vfio-msix[1](0000:00:01.0)
 32:          0          0  IR-PCI-MSIX-0000:00:01.0    10-edge      vfio-msix[10](0000:00:01.0)
LOC:      51234      50321   Local timer interrupts
";
        assert_eq!(irq_named(t, "vfio-msix[1](0000:00:01.0)"), Some(31));
        assert_eq!(irq_named(t, "vfio-msix[10](0000:00:01.0)"), Some(32));
        assert_eq!(irq_named(t, "vfio-msix[0](0000:00:01.0)"), Some(30));
        assert_eq!(irq_named(t, "vfio-msix[2](0000:00:01.0)"), None);
        assert_eq!(irq_named(t, "vfio-msix[1](0000:00:02.0)"), None);
    }

    #[test]
    fn ioctl_numbers() {
        // _IO(';', 100 + n): from <linux/vfio.h>.
        assert_eq!(VFIO_DEVICE_GET_REGION_INFO, 0x3b6c);
        assert_eq!(VFIO_IOMMU_GET_INFO, 0x3b70);
    }

    fn put32(b: &mut [u8], o: usize, v: u32) {
        b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
    }
    fn put64(b: &mut [u8], o: usize, v: u64) {
        b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
    }

    #[test]
    fn parses_page_sizes_iova_ranges_and_dma_avail() {
        // info (24) | IOVA range cap at 24: header(8) nr(4) pad(4) 2 ranges (32) | DMA avail cap at 80
        let mut b = vec![0u8; 96];
        put32(&mut b, 0, 96);
        put32(&mut b, 4, sys::VFIO_IOMMU_INFO_PGSIZES | sys::VFIO_IOMMU_INFO_CAPS);
        put64(&mut b, 8, 0x4020_1000);
        put32(&mut b, 16, 24);
        b[24..26].copy_from_slice(&(sys::VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE as u16).to_ne_bytes());
        put32(&mut b, 28, 80);
        put32(&mut b, 32, 2);
        put64(&mut b, 40, 0);
        put64(&mut b, 48, 0xfedf_ffff);
        put64(&mut b, 56, 0xfef0_0000);
        put64(&mut b, 64, 0x7f_ffff_ffff);
        b[80..82].copy_from_slice(&(sys::VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL as u16).to_ne_bytes());
        put32(&mut b, 84, 0);
        put32(&mut b, 88, 65535);
        let i = parse_iommu_info(&b);
        assert_eq!(i.pgsizes, 0x4020_1000);
        assert_eq!(i.min_page(), 4096);
        assert_eq!(i.page_sizes(), "4K 2M 1G");
        assert_eq!(i.ranges, [(0, 0xfedf_ffff), (0xfef0_0000, 0x7f_ffff_ffff)]);
        assert_eq!(i.dma_avail, Some(65535));
    }

    #[test]
    fn malformed_chain_stops_the_walk() {
        let mut b = vec![0u8; 40];
        put32(&mut b, 4, sys::VFIO_IOMMU_INFO_PGSIZES | sys::VFIO_IOMMU_INFO_CAPS);
        put64(&mut b, 8, 0x1000);
        put32(&mut b, 16, 24);
        b[24..26].copy_from_slice(&(sys::VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE as u16).to_ne_bytes());
        put32(&mut b, 28, 24); // points at itself
        put32(&mut b, 32, 1000); // claims 1000 ranges in a 40-byte buffer
        let i = parse_iommu_info(&b);
        assert_eq!(i.pgsizes, 0x1000);
        assert!(i.ranges.is_empty());
        assert_eq!(parse_iommu_info(&[]), IommuInfo::default());
    }
}

/// MSI-X interrupts of a device, one eventfd per vector: the kernel's
/// vfio-pci signals the eventfd when the device raises the vector. Dropping
/// this disables MSI-X again.
pub struct Msix {
    fds: Vec<vmm_sys_util::eventfd::EventFd>,
    open: Arc<Open>,
    bdf: Bdf,
}

impl Msix {
    /// Number of vectors enabled.
    pub fn vectors(&self) -> usize {
        self.fds.len()
    }
    /// A duplicate descriptor of vector `v`'s eventfd: reading 8 bytes
    /// from it blocks until the vector fires and returns how many times it did.
    pub fn eventfd(&self, v: usize) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::{FromRawFd, IntoRawFd};
        let dup = self.fds.get(v).ok_or_else(|| io::Error::other(format!("MSI-X vector {v} not enabled")))?.try_clone()?;
        // SAFETY: into_raw_fd hands over ownership of a valid, open descriptor.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(dup.into_raw_fd()) })
    }
    /// Steer vector `v`'s interrupt to `cpu` (`/proc/irq/N/smp_affinity_list`,
    /// N found by the name vfio-pci gives it in `/proc/interrupts`,
    /// `vfio-msix[v](BDF)`), so that a queue whose thread is pinned is
    /// woken on its own CPU, as the kernel's nvme driver places each queue's
    /// interrupt on the CPUs that submit to it: no wake-up crosses to
    /// another CPU, and none lands on a CPU the scheduler happens to pick.
    /// Returns the interrupt number. Needs root, as VFIO does.
    pub fn steer(&self, v: usize, cpu: usize) -> io::Result<u32> {
        let name = format!("vfio-msix[{v}]({})", self.bdf);
        let table = std::fs::read_to_string("/proc/interrupts")?;
        let irq = irq_named(&table, &name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{name} is not in /proc/interrupts")))?;
        std::fs::write(format!("/proc/irq/{irq}/smp_affinity_list"), cpu.to_string())?;
        Ok(irq)
    }
}

/// The interrupt number of the `/proc/interrupts` line whose last field
/// is `name`.
fn irq_named(table: &str, name: &str) -> Option<u32> {
    table.lines().find_map(|l| {
        let (irq, rest) = l.trim_start().split_once(':')?;
        (rest.split_whitespace().last() == Some(name)).then(|| irq.parse().ok()).flatten()
    })
}

impl Drop for Msix {
    fn drop(&mut self) {
        let _ = self.open.device.disable_msix();
    }
}

impl VfioPci {
    /// Enable MSI-X vectors `0..vectors`, each signalling its own eventfd.
    /// Vector 0 is the admin queue's (NVMe 1.4c: the admin completion queue
    /// uses vector 0); I/O queue `qid` is given vector `qid` by the driver.
    pub fn enable_msix(&self, vectors: u32) -> Result<Msix, VfioError> {
        let available = self.open.device.get_irq_info(vfio_bindings::bindings::vfio::VFIO_PCI_MSIX_IRQ_INDEX).map(|i| i.count).unwrap_or(0);
        if available < vectors {
            return Err(VfioError::Sys {
                what: "MSI-X (VFIO_DEVICE_GET_IRQ_INFO)",
                bdf: self.bdf,
                source: io::Error::other(format!(
                    "the device offers {available} MSI-X vectors, {vectors} needed (one per queue plus the admin queue); use fewer threads or polled completions"
                )),
            });
        }
        let fds = (0..vectors)
            .map(|_| vmm_sys_util::eventfd::EventFd::new(0))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|source| VfioError::Sys { what: "eventfd", bdf: self.bdf, source })?;
        self.open.device.enable_msix(fds.iter().collect()).map_err(|source| VfioError::Irq {
            what: "VFIO_DEVICE_SET_IRQS (MSI-X)",
            bdf: self.bdf,
            source,
        })?;
        Ok(Msix { fds, open: self.open.clone(), bdf: self.bdf })
    }
}
