//! One thread, several devices: `--device` given more than once. A
//! [`MultiTarget`] opens one queue on every device for each thread and
//! presents them to the engine as one queue of `devices x iodepth` slots;
//! slot `s` belongs to device `s % devices`, so the I/Os interleave across
//! the devices and one core can be kept busy by more than one device, as
//! in the 10-SSD experiment. `--iodepth` is per device.
//!
//! The devices must share a logical block size; the region used is the
//! smallest namespace's. `--verify` is refused (a unit's expected content
//! would depend on which device the slot went to).

use super::{BackendError, Geometry, Io, IoDone, IoQueue, QueueCounters, QueueParams, Target};

/// Several opened namespaces driven as one.
pub struct MultiTarget {
    targets: Vec<Box<dyn Target>>,
    geometry: Geometry,
}

impl MultiTarget {
    /// Combine `targets` (at least two, same LBA size).
    pub fn new(targets: Vec<Box<dyn Target>>) -> Result<Self, BackendError> {
        assert!(targets.len() >= 2);
        let g0 = targets[0].geometry();
        for t in &targets[1..] {
            let g = t.geometry();
            if g.lba_size != g0.lba_size {
                return Err(BackendError::Invalid(format!(
                    "the devices have different logical block sizes ({} and {} bytes); drive devices of one format per run",
                    g0.lba_size, g.lba_size
                )));
            }
        }
        let geometry = Geometry {
            nsid: g0.nsid,
            lba_size: g0.lba_size,
            blocks: targets.iter().map(|t| t.geometry().blocks).min().unwrap_or(0),
            max_transfer: targets.iter().map(|t| t.geometry().max_transfer).min().unwrap_or(0),
        };
        Ok(MultiTarget { targets, geometry })
    }
}

impl Target for MultiTarget {
    fn name(&self) -> String {
        self.targets.iter().map(|t| t.name()).collect::<Vec<_>>().join(" + ")
    }
    fn geometry(&self) -> Geometry {
        self.geometry
    }
    fn polled(&self) -> bool {
        // One thread serves every device: it cannot sleep on one of them.
        true
    }
    fn open_queue(&self, p: QueueParams) -> Result<Box<dyn IoQueue>, BackendError> {
        let queues = self.targets.iter().map(|t| t.open_queue(p)).collect::<Result<Vec<_>, _>>()?;
        let per = p.depth;
        let n = queues.len();
        Ok(Box::new(MultiQueue { per_sub: vec![Vec::with_capacity(per); n], queues, per }))
    }
    fn new_pass(&self) {
        self.targets.iter().for_each(|t| t.new_pass());
    }
    fn wants_passes(&self) -> bool {
        self.targets.iter().any(|t| t.wants_passes())
    }
    fn write_protected(&self) -> Option<String> {
        self.targets.iter().find_map(|t| t.write_protected())
    }
    fn describe(&self) -> Vec<(String, String)> {
        let mut d = vec![("devices".to_string(), format!("{} driven by each thread, slot s on device s mod {}", self.targets.len(), self.targets.len()))];
        for (i, t) in self.targets.iter().enumerate() {
            for (k, v) in t.describe() {
                d.push((format!("device {i} {k}"), v));
            }
        }
        d
    }
}

/// One thread's queues on every device.
struct MultiQueue {
    queues: Vec<Box<dyn IoQueue>>,
    /// Slots (and buffers) per device.
    per: usize,
    /// Scratch: the I/Os of one submit call, by device.
    per_sub: Vec<Vec<Io>>,
}

impl IoQueue for MultiQueue {
    fn depth(&self) -> usize {
        self.per * self.queues.len()
    }
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        let n = self.queues.len();
        for v in &mut self.per_sub {
            v.clear();
        }
        for io in ios {
            // Global slot s -> device s % n, local slot s / n; the tag keeps the global slot.
            let mut local = *io;
            local.buf = io.buf / n as u32;
            self.per_sub[io.buf as usize % n].push(local);
        }
        // The engine puts back whatever is not accepted from the end of
        // `ios`; accept all or stop at the first device that takes fewer.
        let mut accepted = 0;
        for (d, batch) in self.per_sub.iter().enumerate() {
            if batch.is_empty() {
                continue;
            }
            let k = self.queues[d].submit(batch)?;
            accepted += k;
            if k < batch.len() {
                return Err(BackendError::Invalid(format!(
                    "device {d} accepted {k} of {} I/Os: a queue of a multi-device run was full; use a smaller --iodepth",
                    batch.len()
                )));
            }
        }
        Ok(accepted)
    }
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError> {
        let mut got = 0;
        for q in self.queues.iter_mut() {
            if got == out.len() {
                break;
            }
            got += q.poll(&mut out[got..])?;
        }
        Ok(got)
    }
    fn buf_write(&mut self, buf: u32, off: usize, data: &[u8]) {
        let n = self.queues.len() as u32;
        self.queues[(buf % n) as usize].buf_write(buf / n, off, data)
    }
    fn buf_read(&self, buf: u32, off: usize, out: &mut [u8]) {
        let n = self.queues.len() as u32;
        self.queues[(buf % n) as usize].buf_read(buf / n, off, out)
    }
    fn counters(&self) -> QueueCounters {
        let mut c = QueueCounters::default();
        for q in &self.queues {
            let x = q.counters();
            c.sq_doorbells += x.sq_doorbells;
            c.cq_doorbells += x.cq_doorbells;
            c.mmio_writes += x.mmio_writes;
            c.syscalls += x.syscalls;
            c.rejected_completions += x.rejected_completions;
        }
        c
    }
    fn in_flight(&self) -> usize {
        self.queues.iter().map(|q| q.in_flight()).sum()
    }
    fn submit_now(&mut self) -> Result<(), BackendError> {
        self.queues.iter_mut().try_for_each(|q| q.submit_now())
    }
    fn synchronous(&self) -> bool {
        self.queues.iter().all(|q| q.synchronous())
    }
    fn describe(&self) -> String {
        self.queues.iter().enumerate().map(|(i, q)| format!("device {i}: {}", q.describe())).collect::<Vec<_>>().join("; ")
    }
}
