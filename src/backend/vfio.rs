//! The `vfio` backend: our userspace driver on a controller bound to
//! vfio-pci (issue 3). Not implemented yet.

use super::{BackendError, Target};

/// Options of the vfio backend.
#[derive(Clone, Debug, Default)]
pub struct VfioOptions {
    /// PCI address, e.g. 0000:01:00.0.
    pub bdf: String,
    /// Namespace id.
    pub nsid: u32,
    /// I/O queue pairs to ask for (one per thread).
    pub queues: u16,
}

/// Open a controller bound to vfio-pci and bring it up with our driver.
pub fn open(o: &VfioOptions) -> Result<Box<dyn Target>, BackendError> {
    Err(BackendError::Unsupported(format!("the vfio backend is not implemented yet (asked for {})", o.bdf)))
}
