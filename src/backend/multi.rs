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

use super::{BackendError, Geometry, Io, IoDone, IoQueue, Op, QueueCounters, QueueParams, Recovery, Scramble, Target};
use std::time::Duration;

/// How a [`MultiTarget`] shares the work between its devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Slot `s` on device `s % devices`; the depth given is per device,
    /// every device serves the whole region (`bench --device a --device b`).
    SlotPerDevice,
    /// fio's files: the depth given is shared by the devices.
    Interleaved(Interleave),
}

/// fio's files of one job (`filename=a:b`), taken in turn (its default
/// `file_service_type=roundrobin`): each file's region starts at its own
/// block (fio's `file_offset`: `offset=N%` is N% of each file) and has its
/// own number of units (of `unit_blocks` blocks, the job's block size).
/// The engine's region starts at block 0. Unit `u` of it is the next unit of
/// the next file in turn that still has units: while every file has some
/// that is file `u mod N`'s unit `u / N`; once the smallest is used up the
/// others go on in turn, as fio goes on with the files not yet done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interleave {
    /// Each file's first block.
    starts: Vec<u64>,
    unit_blocks: u64,
    /// Stretches of the region in which the same files take units in
    /// turn, in order; the first has every file.
    runs: Vec<Run>,
    /// Units in the engine's region: every file's.
    units: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Run {
    /// The run's first unit of the engine's region.
    start: u64,
    /// Each of its files' unit at `start`.
    local: u64,
    files: Vec<u32>,
}

impl Interleave {
    /// `units[i]`: file i's region in units (0: the file is left out),
    /// from its block `starts[i]`.
    fn new(starts: &[u64], unit_blocks: u64, units: &[u64]) -> Self {
        assert_eq!(starts.len(), units.len());
        let (mut runs, mut start, mut local) = (vec![], 0, 0);
        loop {
            let files: Vec<u32> = (0..units.len() as u32).filter(|&i| units[i as usize] > local).collect();
            let Some(next) = files.iter().map(|&i| units[i as usize]).min() else { break };
            let width = files.len() as u64;
            runs.push(Run { start, local, files });
            start += (next - local) * width;
            local = next;
        }
        Interleave { starts: starts.to_vec(), unit_blocks, runs, units: start }
    }

    /// The file engine block `lba` is on and its block there.
    #[inline]
    fn route(&self, lba: u64) -> (usize, u64) {
        let (unit, within) = (lba / self.unit_blocks, lba % self.unit_blocks);
        // Usually one run (files of one size); a scan of a few otherwise.
        let r = self.runs.iter().rev().find(|r| r.start <= unit).unwrap_or(&self.runs[0]);
        let (i, width) = (unit - r.start, r.files.len() as u64);
        let file = r.files[(i % width) as usize] as usize;
        (file, self.starts[file] + (r.local + i / width) * self.unit_blocks + within)
    }
}

/// Several opened namespaces driven as one.
pub struct MultiTarget {
    targets: Vec<Box<dyn Target>>,
    geometry: Geometry,
    spread: Spread,
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
        Ok(MultiTarget { targets, geometry, spread: Spread::SlotPerDevice })
    }

    /// Device `i`'s capacity in bytes.
    pub fn device_bytes(&self, i: usize) -> u64 {
        self.targets[i].geometry().bytes()
    }

    /// Device `i`'s name.
    pub fn device_name(&self, i: usize) -> String {
        self.targets[i].name()
    }

    /// As fio drives the files of one job (`filename=a:b`): device i's
    /// region is `file_bytes[i]` from `offsets[i]` (whole `unit` bytes,
    /// the job's block size; 0 bytes leaves that device out, as fio ignores
    /// a file with nothing past its offset), the engine's region, from 0,
    /// is all of them taken in turn by units (see [`Interleave`]), and the
    /// job's iodepth is shared.
    pub fn interleaved(mut self, offsets: &[u64], file_bytes: &[u64], unit: u64) -> Result<Self, BackendError> {
        let lba = self.geometry.lba_size as u64;
        assert_eq!(file_bytes.len(), self.targets.len());
        assert_eq!(offsets.len(), self.targets.len());
        if unit == 0 || unit % lba != 0 || offsets.iter().any(|o| o % lba != 0) || file_bytes.iter().any(|b| b % unit != 0) || file_bytes.iter().all(|b| *b == 0) {
            return Err(BackendError::Invalid(format!(
                "several files need each offset in whole {lba}-byte sectors and each file's size in whole blocks of {unit} bytes"
            )));
        }
        for ((t, b), offset) in self.targets.iter().zip(file_bytes).zip(offsets) {
            if offset + b > t.geometry().bytes() {
                return Err(BackendError::Invalid(format!(
                    "the region of {} ends at byte {} but it has {} bytes; give a smaller size or offset",
                    t.name(),
                    offset + b,
                    t.geometry().bytes()
                )));
            }
        }
        let units: Vec<u64> = file_bytes.iter().map(|b| b / unit).collect();
        let starts: Vec<u64> = offsets.iter().map(|o| o / lba).collect();
        let il = Interleave::new(&starts, unit / lba, &units);
        self.geometry.blocks = il.units * (unit / lba);
        self.spread = Spread::Interleaved(il);
        Ok(self)
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
        // Interleaved, any slot may go to any device: every device's queue
        // has all of them (the depth is the job's, shared).
        let queues = self.targets.iter().map(|t| t.open_queue(p)).collect::<Result<Vec<_>, _>>()?;
        let per = p.depth;
        let n = queues.len();
        let (depth, owner) = match self.spread {
            Spread::SlotPerDevice => (per * n, vec![]),
            Spread::Interleaved(_) => (per, vec![0; per]),
        };
        Ok(Box::new(MultiQueue { per_sub: vec![Vec::with_capacity(per); n], queues, depth, spread: self.spread.clone(), owner, flushes: 0 }))
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
        let n = self.targets.len();
        let how = match &self.spread {
            Spread::SlotPerDevice => format!("{n} driven by each thread, slot s on device s mod {n}"),
            Spread::Interleaved(il) => {
                let sizes = il.runs.len() > 1;
                format!(
                    "{n} driven by each thread, as fio's files: the devices take the units of the region (units of {} blocks) in turn{}, the iodepth shared",
                    il.unit_blocks,
                    if sizes { ", those with the larger regions going on in turn once a smaller one is used up" } else { "" }
                )
            }
        };
        let mut d = vec![("devices".to_string(), how)];
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
    /// Slots the engine sees.
    depth: usize,
    spread: Spread,
    /// Interleaved: the device each slot's last I/O went to (whose buffer
    /// holds its data).
    owner: Vec<u32>,
    /// Interleaved: flushes sent, to take the devices in turn.
    flushes: usize,
    /// Scratch: the I/Os of one submit call, by device.
    per_sub: Vec<Vec<Io>>,
}

/// The devices' recoveries as one (device i's note prefixed "device i: "),
/// or the first device's error.
fn merge(got: Vec<(usize, Result<Option<Recovery>, BackendError>)>) -> Result<Option<Recovery>, BackendError> {
    let mut all: Option<Recovery> = None;
    for (i, r) in got {
        let Some(r) = r? else { continue };
        let a = all.get_or_insert_with(Recovery::default);
        a.aborts_sent += r.aborts_sent;
        a.aborted += r.aborted;
        a.escalate |= r.escalate;
        a.reset |= r.reset;
        a.recreated |= r.recreated;
        a.abandoned.extend(r.abandoned);
        let sep = if a.note.is_empty() { "" } else { "; " };
        a.note = format!("{}{sep}device {i}: {}", a.note, r.note);
    }
    Ok(all)
}

impl MultiQueue {
    /// The device an I/O goes to and the I/O as that device sees it.
    #[inline]
    fn route(&mut self, io: &Io) -> (usize, Io) {
        let n = self.queues.len();
        let mut local = *io;
        match &self.spread {
            // Global slot s -> device s % n, local slot s / n; the tag keeps the global slot.
            Spread::SlotPerDevice => {
                local.buf = io.buf / n as u32;
                (io.buf as usize % n, local)
            }
            Spread::Interleaved(il) => {
                let d = if io.op == Op::Flush {
                    // In turn over the devices with a region (a file left
                    // out gets no writes, so no flush either).
                    self.flushes += 1;
                    let with = &il.runs[0].files;
                    with[self.flushes % with.len()] as usize
                } else {
                    let (d, lba) = il.route(io.lba);
                    local.lba = lba;
                    d
                };
                self.owner[io.buf as usize] = d as u32;
                (d, local)
            }
        }
    }
}

impl IoQueue for MultiQueue {
    fn depth(&self) -> usize {
        self.depth
    }
    fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
        for v in &mut self.per_sub {
            v.clear();
        }
        for io in ios {
            let (d, local) = self.route(io);
            self.per_sub[d].push(local);
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
        match self.spread {
            Spread::SlotPerDevice => self.queues[(buf % n) as usize].buf_write(buf / n, off, data),
            // The slot's next I/O may go to any device: each gets the data.
            Spread::Interleaved(_) => self.queues.iter_mut().for_each(|q| q.buf_write(buf, off, data)),
        }
    }
    fn buf_scramble(&mut self, buf: u32, len: usize, s: Scramble) {
        let n = self.queues.len() as u32;
        match self.spread {
            Spread::SlotPerDevice => self.queues[(buf % n) as usize].buf_scramble(buf / n, len, s),
            Spread::Interleaved(_) => self.queues.iter_mut().for_each(|q| q.buf_scramble(buf, len, s)),
        }
    }
    fn buf_read(&self, buf: u32, off: usize, out: &mut [u8]) {
        let n = self.queues.len() as u32;
        match self.spread {
            Spread::SlotPerDevice => self.queues[(buf % n) as usize].buf_read(buf / n, off, out),
            Spread::Interleaved(_) => self.queues[self.owner[buf as usize] as usize].buf_read(buf, off, out),
        }
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
    /// The longest any of the devices may stay paused: their I/Os share
    /// one watchdog.
    fn processing_paused(&self) -> Option<Duration> {
        self.queues.iter().filter_map(|q| q.processing_paused()).max()
    }
    fn submit_now(&mut self) -> Result<(), BackendError> {
        self.queues.iter_mut().try_for_each(|q| q.submit_now())
    }
    /// A retried I/O goes back to the device it went to; the longest of
    /// the devices' delays serves them all.
    fn retry_delays(&self) -> [Duration; 3] {
        self.queues.iter().map(|q| q.retry_delays()).fold([Duration::ZERO; 3], |a, d| [a[0].max(d[0]), a[1].max(d[1]), a[2].max(d[2])])
    }
    /// Every device's queue is given back; the first that failed says
    /// what went wrong, the others' failures are warned of.
    fn close(self: Box<Self>) -> Result<(), BackendError> {
        let mut first = Ok(());
        for (i, q) in self.queues.into_iter().enumerate() {
            match q.close() {
                Err(e) if first.is_ok() => first = Err(e),
                Err(e) => eprintln!("nvme-bypass: warning: closing device {i}'s queue: {e}"),
                Ok(()) => {}
            }
        }
        first
    }
    /// Every device is looked at: each handles its own fatal status.
    fn check_health(&mut self, timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        let got = self.queues.iter_mut().map(|q| q.check_health(timeout)).enumerate().collect();
        merge(got)
    }
    /// Each device aborts the overdue I/Os it holds (a queue ignores tags
    /// not its own).
    fn abort(&mut self, tags: &[u64], timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        let got: Vec<_> = self.queues.iter_mut().map(|q| q.abort(tags, timeout)).collect();
        let handled = got.iter().any(|r| matches!(r, Ok(Some(_))));
        // A device that held none of them has nothing to say.
        let got = got.into_iter().enumerate().filter(|(_, r)| r.as_ref().map_or(true, |r| matches!(r, Some(r) if r.aborts_sent > 0 || r.escalate))).collect();
        Ok(merge(got)?.or_else(|| handled.then(|| Recovery { note: "no device held them".into(), ..Default::default() })))
    }
    /// Resets the devices that still hold one of the `stuck` I/Os (every
    /// device when none is named): a stuck device does not reset those
    /// that never held one, nor one whose aborted I/O has come back since.
    fn reset(&mut self, stuck: &[u64], timeout: Duration) -> Result<Option<Recovery>, BackendError> {
        let on: Vec<bool> = self.queues.iter().map(|q| stuck.is_empty() || q.holds_any(stuck)).collect();
        if !on.contains(&true) {
            // Their completions are in, not yet taken: the next poll takes them.
            return Ok(Some(Recovery { note: "no device holds the overdue I/Os any more: nothing reset".into(), ..Default::default() }));
        }
        let got = self.queues.iter_mut().enumerate().filter(|(i, _)| on[*i]).map(|(i, q)| (i, q.reset(stuck, timeout))).collect();
        merge(got)
    }
    fn holds_any(&self, tags: &[u64]) -> bool {
        self.queues.iter().any(|q| q.holds_any(tags))
    }
    fn synchronous(&self) -> bool {
        self.queues.iter().all(|q| q.synchronous())
    }
    fn describe(&self) -> String {
        self.queues.iter().enumerate().map(|(i, q)| format!("device {i}: {}", q.describe())).collect::<Vec<_>>().join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A device that records the I/Os it is given and completes none.
    struct Recorder {
        blocks: u64,
        seen: Arc<Mutex<Vec<Io>>>,
    }

    struct RecQueue {
        depth: usize,
        seen: Arc<Mutex<Vec<Io>>>,
    }

    impl RecQueue {
        fn tags(&self) -> Vec<u64> {
            self.seen.lock().unwrap().iter().map(|io| io.tag).collect()
        }
    }

    impl Target for Recorder {
        fn name(&self) -> String {
            "recorder".into()
        }
        fn geometry(&self) -> Geometry {
            Geometry { nsid: 1, lba_size: 512, blocks: self.blocks, max_transfer: 1 << 20 }
        }
        fn polled(&self) -> bool {
            true
        }
        fn open_queue(&self, p: QueueParams) -> Result<Box<dyn IoQueue>, BackendError> {
            Ok(Box::new(RecQueue { depth: p.depth, seen: self.seen.clone() }))
        }
    }

    impl IoQueue for RecQueue {
        fn depth(&self) -> usize {
            self.depth
        }
        fn submit(&mut self, ios: &[Io]) -> Result<usize, BackendError> {
            assert!(ios.iter().all(|io| (io.buf as usize) < self.depth), "a slot past the device's queue");
            self.seen.lock().unwrap().extend_from_slice(ios);
            Ok(ios.len())
        }
        fn poll(&mut self, _: &mut [IoDone]) -> Result<usize, BackendError> {
            Ok(0)
        }
        fn buf_write(&mut self, _: u32, _: usize, _: &[u8]) {}
        fn buf_read(&self, _: u32, _: usize, _: &mut [u8]) {}
        fn counters(&self) -> QueueCounters {
            QueueCounters::default()
        }
        fn in_flight(&self) -> usize {
            0
        }
        // As our driver's queues: abort what it holds of `tags`; a reset
        // gives back everything it held.
        fn abort(&mut self, tags: &[u64], _: Duration) -> Result<Option<Recovery>, BackendError> {
            let n = self.tags().iter().filter(|t| tags.contains(t)).count() as u64;
            Ok(Some(Recovery { aborts_sent: n, escalate: n > 0, note: format!("Abort sent for {n}"), ..Default::default() }))
        }
        fn reset(&mut self, _: &[u64], _: Duration) -> Result<Option<Recovery>, BackendError> {
            Ok(Some(Recovery { reset: true, recreated: true, abandoned: self.tags(), note: "reset".into(), ..Default::default() }))
        }
        fn holds_any(&self, tags: &[u64]) -> bool {
            self.tags().iter().any(|t| tags.contains(t))
        }
        fn check_health(&mut self, _: Duration) -> Result<Option<Recovery>, BackendError> {
            Ok(self.tags().contains(&99).then(|| Recovery { reset: true, abandoned: vec![99], note: "fatal".into(), ..Default::default() }))
        }
    }

    fn two(blocks: [u64; 2]) -> (MultiTarget, [Arc<Mutex<Vec<Io>>>; 2]) {
        let seen = [Arc::new(Mutex::new(vec![])), Arc::new(Mutex::new(vec![]))];
        let ts: Vec<Box<dyn Target>> = (0..2).map(|i| Box::new(Recorder { blocks: blocks[i], seen: seen[i].clone() }) as Box<dyn Target>).collect();
        (MultiTarget::new(ts).unwrap(), seen)
    }

    #[test]
    fn interleaved_units_go_to_the_files_in_turn_each_in_order() {
        // Files of 64 KiB from offsets 4 KiB and 8 KiB, units of 4 KiB
        // (8 sectors).
        let (m, seen) = two([1000, 2000]);
        let m = m.interleaved(&[4096, 8192], &[65536, 65536], 4096).unwrap();
        assert_eq!(m.geometry().blocks, 2 * 128, "the engine's region: both files' 16 units");
        // The depth is the job's, shared: 4 slots, each usable on either device.
        let mut q = m.open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        assert_eq!(q.depth(), 4);
        // A sequential pass over the region: units 0, 1, 2, ...
        let ios: Vec<Io> = (0..32u64).map(|u| Io { op: Op::Read, lba: u * 8, blocks: 8, buf: (u % 4) as u32, tag: u }).collect();
        for c in ios.chunks(4) {
            assert_eq!(q.submit(c).unwrap(), 4);
        }
        for (d, s) in seen.iter().enumerate() {
            let s = s.lock().unwrap();
            let lbas: Vec<u64> = s.iter().map(|io| io.lba).collect();
            assert_eq!(lbas, (0..16).map(|k| 8 * (d as u64 + 1) + k * 8).collect::<Vec<_>>(), "device {d}: its own file in order, from its own offset");
            let tags: Vec<u64> = s.iter().map(|io| io.tag).collect();
            assert_eq!(tags, (0..16).map(|k| 2 * k + d as u64).collect::<Vec<_>>(), "device {d}: every other unit");
        }
    }

    #[test]
    fn files_of_different_sizes_go_on_in_turn_once_the_smallest_is_done() {
        // fio without size=: each file from offset to its own end. Files of
        // 2 and 5 units (4 KiB, 8 sectors): units 0-3 alternate, 4-6 are
        // the larger file's last three, so each file is covered once.
        let (m, seen) = two([16, 40]);
        let m = m.interleaved(&[0, 0], &[8192, 20480], 4096).unwrap();
        assert_eq!(m.geometry().blocks, 7 * 8, "the engine's region: all seven units");
        let mut q = m.open_queue(QueueParams { depth: 7, buf_size: 4096, batch: 0 }).unwrap();
        let ios: Vec<Io> = (0..7u64).map(|u| Io { op: Op::Read, lba: u * 8 + 3, blocks: 1, buf: u as u32, tag: u }).collect();
        assert_eq!(q.submit(&ios).unwrap(), 7);
        let got = |d: usize| seen[d].lock().unwrap().iter().map(|io| (io.tag, io.lba)).collect::<Vec<_>>();
        assert_eq!(got(0), [(0, 3), (2, 11)], "the smaller file: units 0 and 2");
        assert_eq!(got(1), [(1, 3), (3, 11), (4, 19), (5, 27), (6, 35)], "the larger: units 1 and 3, then the rest in order");
        // Three files of 1, 3 and 2 units: three runs.
        let il = Interleave::new(&[0, 0, 0], 1, &[1, 3, 2]);
        let map: Vec<(usize, u64)> = (0..il.units).map(|u| il.route(u)).collect();
        assert_eq!(map, [(0, 0), (1, 0), (2, 0), (1, 1), (2, 1), (1, 2)]);
    }

    #[test]
    fn interleaved_regions_must_fit_their_devices_in_whole_units() {
        let (m, _) = two([256, 2000]);
        let e = m.interleaved(&[0, 0], &[256 * 512 + 4096, 4096], 4096).err().unwrap().to_string();
        assert!(e.contains("ends at byte 135168 but it has 131072 bytes"), "{e}");
        let (m, _) = two([256, 2000]);
        let e = m.interleaved(&[0, 0], &[6144, 6144], 4096).err().unwrap().to_string();
        assert!(e.contains("whole blocks of 4096"), "{e}");
        let (m, _) = two([256, 2000]);
        let e = m.interleaved(&[0, 100], &[4096, 4096], 4096).err().unwrap().to_string();
        assert!(e.contains("whole 512-byte sectors"), "{e}");
        // Each file's region from its own offset must fit it.
        let (m, _) = two([256, 2000]);
        let e = m.interleaved(&[255 * 512, 0], &[4096, 4096], 4096).err().unwrap().to_string();
        assert!(e.contains("ends at byte 134656 but it has 131072 bytes"), "{e}");
    }

    #[test]
    fn recovery_reaches_the_device_that_holds_the_overdue_ios_only() {
        let (m, _) = two([1000, 1000]);
        let mut q = m.interleaved(&[0, 0], &[65536, 65536], 4096).unwrap().open_queue(QueueParams { depth: 4, buf_size: 4096, batch: 0 }).unwrap();
        // Unit 0 (tag 7) on device 0, unit 1 (tag 99) on device 1.
        let ios = [Io { op: Op::Read, lba: 0, blocks: 8, buf: 0, tag: 7 }, Io { op: Op::Read, lba: 8, blocks: 8, buf: 1, tag: 99 }];
        assert_eq!(q.submit(&ios).unwrap(), 2);
        let d = Duration::from_secs(1);
        // Each device checks its own health: device 1's fatal status only.
        let r = q.check_health(d).unwrap().unwrap();
        assert_eq!((r.abandoned, r.note.as_str()), (vec![99], "device 1: fatal"));
        // Tag 7 overdue: only device 0 speaks, and only it is reset.
        let r = q.abort(&[7], d).unwrap().unwrap();
        assert_eq!((r.aborts_sent, r.escalate, r.note.as_str()), (1, true, "device 0: Abort sent for 1"));
        let r = q.reset(&[7], d).unwrap().unwrap();
        assert_eq!((r.abandoned, r.note.as_str()), (vec![7], "device 0: reset"));
        // A reset for no I/O in particular resets every device.
        let r = q.reset(&[], d).unwrap().unwrap();
        assert_eq!((r.abandoned, r.note.as_str()), (vec![7, 99], "device 0: reset; device 1: reset"));
        // Stuck I/Os on both devices: both reset.
        let r = q.reset(&[7, 99], d).unwrap().unwrap();
        assert_eq!(r.note, "device 0: reset; device 1: reset");
        // An aborted I/O that has come back since (no device holds it):
        // nothing is reset.
        let r = q.reset(&[5], d).unwrap().unwrap();
        assert!(!r.reset && r.abandoned.is_empty() && r.note.contains("nothing reset"), "{r:?}");
        assert!(q.holds_any(&[99]) && !q.holds_any(&[5]));
        // Tags no device holds: handled (not left to a kernel driver), nothing sent.
        let r = q.abort(&[5], d).unwrap().unwrap();
        assert_eq!((r.aborts_sent, r.escalate), (0, false));
    }

    #[test]
    fn slot_per_device_keeps_the_depth_per_device() {
        let (m, seen) = two([1000, 1000]);
        let mut q = m.open_queue(QueueParams { depth: 2, buf_size: 4096, batch: 0 }).unwrap();
        assert_eq!(q.depth(), 4);
        let ios: Vec<Io> = (0..4u32).map(|s| Io { op: Op::Read, lba: 0, blocks: 8, buf: s, tag: s as u64 }).collect();
        assert_eq!(q.submit(&ios).unwrap(), 4);
        assert_eq!(seen[0].lock().unwrap().iter().map(|io| (io.tag, io.buf)).collect::<Vec<_>>(), [(0, 0), (2, 1)]);
        assert_eq!(seen[1].lock().unwrap().iter().map(|io| (io.tag, io.buf)).collect::<Vec<_>>(), [(1, 0), (3, 1)]);
    }
}
