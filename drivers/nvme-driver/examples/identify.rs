//! Identify a controller: the smallest complete use of the driver.
//!
//! ```text
//! cargo run --example identify
//! ```
//!
//! It starts the in-process simulated controller (no hardware, no root),
//! brings it up (`Controller::new` follows NVMe 1.4c §7.6.1 step by step:
//! read CAP, disable, program the admin queues, enable, wait for ready),
//! and prints what Identify Controller and Identify Namespace return.
//! Follow the calls into `drivers/nvme-driver/src/controller.rs`.

use nvme_driver::{Controller, ControllerConfig};
use nvme_sim::{SimConfig, SimController};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The controller: a thread-free model that runs inside register accesses.
    let sim = SimController::start(SimConfig { threaded: false, ..SimConfig::default() })?;

    // Bring-up. `registers()` is what BAR0 is on real hardware; `allocator()`
    // hands out memory the controller can reach by bus address (an IOMMU
    // mapping on real hardware).
    let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default())?;

    let cap = ctrl.cap();
    println!("CAP: up to {} entries per queue, doorbell stride {} bytes, ready timeout {} ms", cap.max_queue_entries(), cap.doorbell_stride(), cap.timeout_ms());
    println!("VS:  NVMe {}", ctrl.version());

    let id = ctrl.identify().clone();
    println!("Identify Controller:");
    for (field, value) in id.nvme_cli_fields().iter().take(12) {
        println!("  {field:<8} : {value}");
    }
    println!("  max transfer: {} KiB", ctrl.max_transfer() >> 10);

    for nsid in ctrl.active_namespaces()? {
        let ns = ctrl.identify_namespace(nsid)?;
        println!("Namespace {nsid}: {} blocks of {} bytes ({} MiB)", ns.nsze, ns.lba_size(), ns.size_bytes() >> 20);
    }

    // Normal shutdown (NVMe 1.4c §7.6.2): CC.SHN, wait for CSTS.SHST.
    ctrl.shutdown()?;
    Ok(())
}
