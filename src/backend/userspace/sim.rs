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
    /// Device faults switched on once the controller is up.
    pub faults: SimFaults,
}

impl Default for SimOptions {
    /// The simulator as `bench --backend sim` runs it without options: 1 GiB
    /// in RAM, 512-byte blocks, MDTS 7, 2048-entry queues, the controller on
    /// its own thread, shadow doorbells and streaming stores on.
    fn default() -> Self {
        SimOptions { size: 1 << 30, lba_size: 512, null: false, queues: 1, cpu: None, mdts: 7, mqes: 2047, threaded: true, shadow_doorbells: true, streaming_sq: true, faults: SimFaults::default() }
    }
}

impl SimOptions {
    /// The simulated controller these options describe.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            data: if self.null { DataMode::Null } else { DataMode::Ram },
            max_io_queues: self.queues.max(1),
            cpu: self.cpu,
            mdts: self.mdts,
            max_queue_entries: self.mqes as u32 + 1,
            threaded: self.threaded,
            ..SimConfig::default().with_namespace(self.size, self.lba_size)
        }
    }
}

/// The device faults to inject (`nvme_sim::Faults`, as values; 0 is off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimFaults {
    /// Never post the completion of every Nth I/O command.
    pub drop_every: u32,
    /// Delay every I/O completion by this many microseconds.
    pub delay_us: u32,
    /// Complete every Nth I/O command with `status_sct`/`status_sc`.
    pub status_every: u32,
    /// Status code type of the injected status.
    pub status_sct: u32,
    /// Status code of the injected status.
    pub status_sc: u32,
    /// Set Do Not Retry on injected statuses.
    pub status_dnr: bool,
    /// Report controller fatal status after N more I/O commands.
    pub fatal_after: u32,
    /// Stop responding after N more I/O commands.
    pub hang_after: u32,
    /// Hold the completion of every Nth I/O command until aborted.
    pub stall_every: u32,
    /// Answer every Abort with Abort Command Limit Exceeded.
    pub refuse_abort: bool,
    /// Post every Nth completion with a CID never submitted.
    pub corrupt_cid_every: u32,
    /// Post every Nth completion naming another submission queue.
    pub bad_sqid_every: u32,
    /// Flip a bit in the data of every Nth Read.
    pub corrupt_data_every: u32,
    /// After N more I/O commands, pause processing (CSTS.PP = 1, a
    /// firmware activation) ...
    pub pause_after: u32,
    /// ... this many milliseconds.
    pub pause_ms: u32,
}

impl SimFaults {
    /// Switch the faults on in a running controller.
    pub fn inject(&self, sim: &SimController) {
        use std::sync::atomic::Ordering::Relaxed;
        let f = sim.faults();
        f.drop_every.store(self.drop_every, Relaxed);
        f.delay_us.store(self.delay_us, Relaxed);
        f.status_every.store(self.status_every, Relaxed);
        f.status_sct.store(self.status_sct, Relaxed);
        f.status_sc.store(self.status_sc, Relaxed);
        f.status_dnr.store(self.status_dnr, Relaxed);
        f.fatal_after.store(self.fatal_after, Relaxed);
        f.hang_after.store(self.hang_after, Relaxed);
        f.stall_every.store(self.stall_every, Relaxed);
        f.refuse_abort.store(self.refuse_abort, Relaxed);
        f.corrupt_cid_every.store(self.corrupt_cid_every, Relaxed);
        f.bad_sqid_every.store(self.bad_sqid_every, Relaxed);
        f.corrupt_data_every.store(self.corrupt_data_every, Relaxed);
        f.pause_ms.store(self.pause_ms, Relaxed);
        f.pause_after.store(self.pause_after, Relaxed);
    }
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
        let sim = SimController::start(o.config())?;
        let ctrl = Controller::new(
            sim.registers(),
            sim.allocator(),
            ControllerConfig { io_queues: o.queues.max(1), shadow_doorbells: o.shadow_doorbells, streaming_sq: o.streaming_sq, ..Default::default() },
        )?;
        let name = if o.null { "sim (null data)" } else { "sim" };
        let target = UserspaceTarget::new(name, ctrl, 1)?;
        o.faults.inject(&sim);
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
    fn write_protected(&self) -> Option<String> {
        self.target.write_protected()
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

/// The synchronous simulator with several jobs: one controller per job,
/// each stepped on its own job's thread at its doorbell writes, so two jobs
/// share no controller, lock or queue state (what "scaling in one box"
/// asks of the driver). Each job's region lies in its own controller's
/// namespace, as it would lie in its own slice of one.
pub struct SimPerJob {
    targets: Vec<SimTarget>,
    next: std::sync::atomic::AtomicUsize,
}

impl SimPerJob {
    /// `jobs` synchronous controllers of options `o`, one queue pair each.
    pub fn open(o: &SimOptions, jobs: u16) -> Result<Self, BackendError> {
        let one = SimOptions { queues: 1, ..o.clone() };
        let targets = (0..jobs).map(|_| SimTarget::open(&one)).collect::<Result<Vec<_>, _>>()?;
        Ok(SimPerJob { targets, next: std::sync::atomic::AtomicUsize::new(0) })
    }
}

impl crate::backend::Target for SimPerJob {
    fn name(&self) -> String {
        self.targets[0].target.name()
    }
    fn geometry(&self) -> crate::backend::Geometry {
        self.targets[0].target.geometry()
    }
    fn polled(&self) -> bool {
        true
    }
    fn open_queue(&self, p: crate::backend::QueueParams) -> Result<Box<dyn crate::backend::IoQueue>, BackendError> {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.targets.get(i) {
            Some(t) => t.target.open_queue(p),
            None => Err(BackendError::Invalid(format!("{} simulated controllers, one per job: no controller left for a {}th queue", self.targets.len(), i + 1))),
        }
    }
    fn write_protected(&self) -> Option<String> {
        self.targets[0].target.write_protected()
    }
    fn describe(&self) -> Vec<(String, String)> {
        let mut d = crate::backend::Target::describe(&self.targets[0]);
        d.push(("controllers".into(), format!("{} simulated controllers, one per job, each stepped on its job's thread", self.targets.len())));
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bench --sim-sync --numjobs 2`: the two controllers are opened one
    /// after the other on the main thread, then each is stepped by its own
    /// job's thread. What a step writes must share no cache line (nor the
    /// adjacent line the prefetcher pairs it with) with the other
    /// controller's, wherever the allocator put them: "no shared cache line
    /// on the hot path" (the two-job scaling test, scripts/sim-scaling.py).
    #[test]
    fn per_job_controllers_share_no_line_a_step_writes() {
        let o = SimOptions { null: true, threaded: false, shadow_doorbells: false, size: 1 << 24, ..SimOptions::default() };
        let t = SimPerJob::open(&o, 2).unwrap();
        let hot: Vec<Vec<nvme_sim::HotMemory>> = t.targets.iter().map(|s| s.sim.hot_memory()).collect();
        if let Err(e) = nvme_sim::check_no_shared_block(&hot[0], &hot[1]) {
            panic!("job 0's and job 1's controllers: {e}");
        }
    }
}
