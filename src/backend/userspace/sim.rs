//! The `sim` backend: our userspace driver against the in-process simulated
//! controller. No hardware, no root. In `null` data mode it measures the
//! driver's own cost per I/O.

use super::UserspaceTarget;
use crate::backend::BackendError;
use nvme_driver::{Controller, ControllerConfig};
use nvme_sim::{DataMode, SimConfig, SimController, SimRegisters};

/// Options of the simulated controller.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Namespace size in bytes.
    pub size: u64,
    /// LBA size (512 or 4096).
    pub lba_size: u32,
    /// Move data (RAM) or not (null).
    pub null: bool,
    /// Queue pairs to grant.
    pub queues: u16,
    /// CPU for the controller thread.
    pub cpu: Option<usize>,
    /// MDTS.
    pub mdts: u8,
    /// CAP.MQES, 0's based (2047: 2048-entry queues; 65535: 65536).
    pub mqes: u16,
    /// Controller on its own thread (true) or synchronous (false, see nvme_sim::SimConfig::threaded).
    pub threaded: bool,
    /// The driver uses shadow doorbells (the simulator offers them).
    pub shadow_doorbells: bool,
    /// The driver writes submission entries with streaming stores
    /// (ControllerConfig::streaming_sq).
    pub streaming_sq: bool,
}

/// A simulated controller and our driver on it. Field order matters: the
/// target (driver) drops before the controller thread stops.
pub struct SimTarget {
    /// The driver side.
    pub target: UserspaceTarget<SimRegisters>,
    /// The controller.
    pub sim: SimController,
}

impl SimTarget {
    /// Start a simulated controller and bring it up with our driver.
    pub fn open(o: &SimOptions) -> Result<Self, BackendError> {
        let cfg = SimConfig {
            data: if o.null { DataMode::Null } else { DataMode::Ram },
            max_io_queues: o.queues.max(1),
            cpu: o.cpu,
            mdts: o.mdts,
            max_queue_entries: o.mqes as u32 + 1,
            threaded: o.threaded,
            ..SimConfig::default().with_namespace(o.size, o.lba_size)
        };
        let sim = SimController::start(cfg)?;
        let ctrl = Controller::new(
            sim.registers(),
            sim.allocator(),
            ControllerConfig { io_queues: o.queues.max(1), shadow_doorbells: o.shadow_doorbells, streaming_sq: o.streaming_sq, ..Default::default() },
        )?;
        let name = if o.null { "sim (null data)" } else { "sim" };
        let target = UserspaceTarget::new(name, ctrl, 1)?;
        Ok(SimTarget { target, sim })
    }
}

impl crate::backend::Target for SimTarget {
    fn name(&self) -> String {
        self.target.name()
    }
    fn geometry(&self) -> crate::backend::Geometry {
        self.target.geometry()
    }
    fn polled(&self) -> bool {
        true
    }
    fn open_queue(&self, p: crate::backend::QueueParams) -> Result<Box<dyn crate::backend::IoQueue>, BackendError> {
        self.target.open_queue(p)
    }
    fn describe(&self) -> Vec<(String, String)> {
        let mut d = self.target.describe();
        let c = self.sim.config();
        d.push((
            "simulator".into(),
            format!(
                "{} data, {} blocks of {} bytes, {}",
                match c.data {
                    nvme_sim::DataMode::Ram => "RAM",
                    nvme_sim::DataMode::Null => "null (no data moved)",
                },
                c.namespaces[0].blocks,
                c.namespaces[0].lba_size,
                match (c.threaded, c.cpu) {
                    (false, _) => "controller stepped on the job's thread at each doorbell write".to_string(),
                    (true, Some(cpu)) => format!("controller thread on CPU {cpu}"),
                    (true, None) => "controller thread on any CPU".to_string(),
                }
            ),
        ));
        d
    }
}
