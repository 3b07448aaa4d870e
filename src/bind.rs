//! `nvme-bypass bind` / `unbind`: move a controller between the kernel's
//! nvme driver and vfio-pci, safely (issue 3). Not implemented yet.

/// Options of bind/unbind.
#[derive(clap::Args, Debug, Clone)]
pub struct BindArgs {
    /// PCI address of the controller, e.g. 0000:01:00.0.
    pub bdf: String,
}

/// Bind `bdf` to vfio-pci. Returns the process exit code.
pub fn bind(a: &BindArgs) -> Result<i32, crate::cli::CliError> {
    Err(crate::cli::CliError::usage(format!("bind is not implemented yet ({})", a.bdf)))
}

/// Give `bdf` back to its original driver.
pub fn unbind(a: &BindArgs) -> Result<i32, crate::cli::CliError> {
    Err(crate::cli::CliError::usage(format!("unbind is not implemented yet ({})", a.bdf)))
}
