//! The userspace driver as a backend: [`nvme_driver`] queue pairs on any
//! register window and DMA allocator. The `sim` and `vfio` backends are this
//! type over the simulated controller and over a VFIO device.

use super::{BackendError, Geometry, Io, IoDone, IoQueue, IoStatus, Op, QueueCounters, QueueParams, Target};
use nvme_driver::{Controller, DataPtr, QueuePair, SubmitError};
use nvme_hal::{DmaRegion, RegisterWindow};
use std::sync::{Arc, Mutex};

/// A controller brought up by our driver, one namespace of it, shared by
/// the benchmark threads only to create and delete their queue pairs.
pub struct UserspaceTarget<R: RegisterWindow + 'static> {
    name: String,
    ctrl: Arc<Mutex<Option<Controller<R>>>>,
    geometry: Geometry,
    queue_entries: u32,
    facts: Vec<(String, String)>,
}

impl<R: RegisterWindow + 'static> UserspaceTarget<R> {
    /// Wrap a brought-up controller; `nsid` must be active.
    pub fn new(name: &str, mut ctrl: Controller<R>, nsid: u32) -> Result<Self, BackendError> {
        let ns = ctrl.identify_namespace(nsid)?;
        let geometry = Geometry { nsid, lba_size: ns.lba_size(), blocks: ns.nsze, max_transfer: ctrl.max_transfer() };
        if ns.current_format().ms != 0 {
            return Err(BackendError::Unsupported(format!(
                "namespace {nsid} is formatted with {} bytes of metadata per block; this tool needs a format without metadata",
                ns.current_format().ms
            )));
        }
        let id = ctrl.identify();
        let facts = vec![
            ("model".into(), id.mn.clone()),
            ("serial".into(), id.sn.clone()),
            ("firmware".into(), id.fr.clone()),
            ("nvme version".into(), ctrl.version().to_string()),
            ("max transfer".into(), format!("{} KiB (MDTS {})", ctrl.max_transfer() >> 10, id.mdts)),
            ("queue pairs granted".into(), ctrl.io_queues_granted().to_string()),
        ];
        let queue_entries = ctrl.max_queue_entries();
        Ok(UserspaceTarget {
            name: name.into(),
            ctrl: Arc::new(Mutex::new(Some(ctrl))),
            geometry,
            queue_entries,
            facts,
        })
    }

    /// Shut the controller down now (instead of when the last queue drops).
    pub fn shutdown(&self) -> Result<(), BackendError> {
        if let Some(c) = self.ctrl.lock().unwrap().take() {
            c.shutdown()?;
        }
        Ok(())
    }

    /// Run `f` with the controller (admin commands, identify).
    pub fn with_controller<T>(&self, f: impl FnOnce(&mut Controller<R>) -> T) -> Option<T> {
        self.ctrl.lock().unwrap().as_mut().map(f)
    }
}

impl<R: RegisterWindow + 'static> Target for UserspaceTarget<R> {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn geometry(&self) -> Geometry {
        self.geometry
    }
    fn polled(&self) -> bool {
        true
    }
    fn describe(&self) -> Vec<(String, String)> {
        self.facts.clone()
    }
    fn open_queue(&self, p: QueueParams) -> Result<Box<dyn IoQueue>, BackendError> {
        let mut guard = self.ctrl.lock().unwrap();
        let ctrl = guard.as_mut().ok_or_else(|| BackendError::Invalid("controller already shut down".into()))?;
        // A ring of N entries holds N-1 commands.
        let entries = (p.depth as u32 + 1).min(self.queue_entries);
        if entries < p.depth as u32 + 1 {
            return Err(BackendError::Invalid(format!(
                "--iodepth {} is more than the controller's largest queue holds ({} entries, CAP.MQES); use --iodepth {} or less",
                p.depth,
                self.queue_entries,
                self.queue_entries - 1
            )));
        }
        if p.buf_size > self.geometry.max_transfer {
            return Err(BackendError::Invalid(format!(
                "--bs {} is above the controller's maximum transfer of {} bytes (MDTS); use --bs {} or less",
                p.buf_size, self.geometry.max_transfer, self.geometry.max_transfer
            )));
        }
        let qp = ctrl.create_io_queue_pair(entries)?;
        let stride = p.buf_size.next_multiple_of(4096);
        let bufs = ctrl.allocator().alloc(stride * p.depth, 4096)?;
        Ok(Box::new(UserspaceQueue {
            qp: Some(qp),
            ctrl: self.ctrl.clone(),
            bufs,
            stride,
            nsid: self.geometry.nsid,
            lba_size: self.geometry.lba_size,
            batch: p.batch,
            depth: p.depth,
        }))
    }
}

/// One thread's queue pair and its buffers.
pub struct UserspaceQueue<R: RegisterWindow + 'static> {
    qp: Option<QueuePair<R>>,
    ctrl: Arc<Mutex<Option<Controller<R>>>>,
    bufs: DmaRegion,
    stride: usize,
    nsid: u32,
    lba_size: u32,
    batch: usize,
    depth: usize,
}

impl<R: RegisterWindow + 'static> UserspaceQueue<R> {
    #[inline]
    fn qp(&mut self) -> &mut QueuePair<R> {
        self.qp.as_mut().expect("queue pair present until drop")
    }
}

impl<R: RegisterWindow + 'static> Drop for UserspaceQueue<R> {
    fn drop(&mut self) {
        // Delete the queue pair on the controller (if it is still up), so
        // the controller forgets its memory before the memory goes.
        if let Some(qp) = self.qp.take() {
            if let Some(ctrl) = self.ctrl.lock().unwrap().as_mut() {
                let _ = ctrl.delete_io_queue_pair(qp);
            }
        }
    }
}

impl<R: RegisterWindow + 'static> IoQueue for UserspaceQueue<R> {
    fn depth(&self) -> usize {
        self.depth
    }

    #[inline]
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        let (nsid, lba_size, stride, base) = (self.nsid, self.lba_size as usize, self.stride, self.bufs.iova());
        let batch = if self.batch == 0 { usize::MAX } else { self.batch };
        let qp = self.qp.as_mut().expect("queue pair");
        let mut n = 0;
        let mut until_ring = batch;
        for io in ios {
            let data = DataPtr { iova: base + (io.buf as usize * stride) as u64, len: io.blocks as usize * lba_size };
            let r = match io.op {
                Op::Read => qp.read(nsid, io.lba, io.blocks, data, io.tag),
                Op::Write => qp.write(nsid, io.lba, io.blocks, data, io.tag),
                Op::Flush => qp.flush(nsid, io.tag),
            };
            match r {
                Ok(_) => n += 1,
                Err(SubmitError::QueueFull { .. }) => break,
                Err(e) => {
                    qp.ring();
                    return Err(e.into());
                }
            }
            until_ring -= 1;
            if until_ring == 0 {
                qp.ring();
                until_ring = batch;
            }
        }
        qp.ring();
        Ok(n)
    }

    #[inline]
    fn poll(&mut self, out: &mut [IoDone]) -> Result<usize, BackendError> {
        let mut i = 0;
        self.qp().poll(out.len(), |c| {
            out[i] = IoDone { tag: c.tag, status: if c.ok() { IoStatus::Ok } else { IoStatus::Nvme(c.status()) } };
            i += 1;
        });
        Ok(i)
    }

    fn buf_write(&mut self, buf: u32, off: usize, data: &[u8]) {
        self.bufs.copy_from(buf as usize * self.stride + off, data);
    }

    fn buf_read(&self, buf: u32, off: usize, out: &mut [u8]) {
        self.bufs.copy_to(buf as usize * self.stride + off, out);
    }

    fn counters(&self) -> QueueCounters {
        let s = self.qp.as_ref().map(|q| q.stats()).unwrap_or_default();
        QueueCounters {
            sq_doorbells: s.sq_doorbells,
            cq_doorbells: s.cq_doorbells,
            mmio_writes: s.mmio_doorbells,
            syscalls: 0,
            rejected_completions: s.invalid_cid + s.wrong_sqid,
        }
    }

    fn in_flight(&self) -> usize {
        self.qp.as_ref().map(|q| q.outstanding()).unwrap_or(0)
    }
}
