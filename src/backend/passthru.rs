//! The `passthru` backend: io_uring NVMe passthrough on /dev/ngXnY (issue 4).
//! Not implemented yet.

use super::kernel::KernelOptions;
use super::{BackendError, Target};

/// Open the generic char device for passthrough.
pub fn open(o: &KernelOptions) -> Result<Box<dyn Target>, BackendError> {
    Err(BackendError::Unsupported(format!("the passthru backend is not implemented yet (asked for {})", o.device)))
}
