//! The `block` backend: the kernel block layer with O_DIRECT (issue 4).
//! Not implemented yet.

use super::kernel::KernelOptions;
use super::{BackendError, Target};

/// Open the block device (or a regular file, for tests).
pub fn open(o: &KernelOptions) -> Result<Box<dyn Target>, BackendError> {
    Err(BackendError::Unsupported(format!("the block backend is not implemented yet (asked for {})", o.device)))
}
