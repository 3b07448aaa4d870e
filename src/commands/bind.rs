//! `nvme-bypass bind` / `unbind`: move a controller between the kernel's
//! nvme driver and vfio-pci, safely. The work (checks, sysfs writes, state
//! file, hugepages) is in [`nvme_vfio::bind`]; this is the command line.

use crate::error::{exit, Error};
use nvme_vfio::bind::{self, BindOptions};
use nvme_vfio::{Bdf, Host};
use std::time::Duration;

/// Options of bind/unbind.
#[derive(clap::Args, Debug, Clone)]
pub struct BindArgs {
    /// PCI address of the controller, e.g. 0000:01:00.0.
    pub bdf: String,
    /// bind only: 2 MiB hugepages to have free for DMA memory afterwards (0: leave the pool alone).
    #[arg(long, default_value_t = 64)]
    pub hugepages: u64,
    /// Seconds to wait for device files to appear.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

fn parse(a: &BindArgs) -> Result<Bdf, Error> {
    Ok(Bdf::parse(&a.bdf)?)
}

/// Bind `bdf` to vfio-pci. Returns the process exit code.
pub fn bind(a: &BindArgs) -> Result<i32, Error> {
    let bdf = parse(a)?;
    let opts = BindOptions { hugepages: a.hugepages, timeout: Duration::from_secs(a.timeout) };
    let binding = bind::to_vfio(&Host::system(), &bdf, &opts)?;
    for line in binding.keep() {
        println!("{line}");
    }
    println!("{bdf} is ready for `nvme-bypass bench --backend vfio --device {bdf}`; `nvme-bypass unbind {bdf}` gives it back");
    Ok(exit::OK)
}

/// Give `bdf` back to its original driver.
pub fn unbind(a: &BindArgs) -> Result<i32, Error> {
    let bdf = parse(a)?;
    let actions = bind::restore(&Host::system(), &bdf, Duration::from_secs(a.timeout))?;
    for line in actions {
        println!("{line}");
    }
    Ok(exit::OK)
}
