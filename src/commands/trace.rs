//! `nvme-bypass trace`: a short, fixed story told by the running driver.
//! Controller bring-up, Identify, an I/O queue pair with a deliberately
//! small queue, enough writes and reads to wrap both rings, a multi-page
//! transfer with a PRP list, shutdown. Every register access is printed with
//! its name and decoded fields; every submission entry field by field (and
//! its bytes with `--hex`); every doorbell; the controller fetching entries
//! and posting completions (simulator); every completion entry; the phase
//! flip when the completion queue wraps.
//!
//! On the simulator the controller runs synchronously inside the register
//! accesses, so the story is the same every time, and host and controller
//! steps interleave in causal order.

use crate::backend::path::{PathKind, PathSpec};
use crate::backend::userspace::sim::SimOptions;
use crate::backend::userspace::vfio::{Quirks, VfioOptions};
use crate::error::{exit, Error};
use crate::report::OutputFormat;
use nvme_driver::{AdminEvent, AdminObserver, Controller, ControllerConfig, DataPtr, QueuePair};
use nvme_hal::RegisterWindow;
use nvme_sim::{SimConfig, SimController, SimEvent};
use nvme_spec::describe;
use nvme_spec::{Cqe, QueueEntries, Sqe};
use serde::Serialize;
use std::sync::{Arc, Mutex};

/// Options of `trace`.
#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    /// Also print the 64 bytes of each submission entry.
    #[arg(long)]
    pub hex: bool,
    /// Entries in the I/O queues (small, so the story wraps them).
    #[arg(long, default_value_t = 4)]
    pub queue_entries: u32,
    /// Read/write commands in the story.
    #[arg(long, default_value_t = 10)]
    pub commands: u32,
    /// Path: sim (the simulator, default) or vfio (a controller bound to vfio-pci, --device BDF): our driver's
    /// queues. The kernel paths (passthru, block) are not offered: their queues are the kernel's, out of sight.
    #[arg(long, default_value = "sim", value_parser = parse_trace_backend)]
    pub backend: PathKind,
    /// PCI address for --backend vfio.
    #[arg(long)]
    pub device: Option<String>,
    /// Namespace the story reads and writes (--backend vfio; the
    /// simulator has namespace 1 only).
    #[arg(long, default_value_t = 1, value_parser = crate::commands::args::parse_nsid)]
    pub nsid: u32,
    /// Allow the story's writes on a real controller (--backend vfio): they
    /// overwrite --commands blocks from block 0 of the namespace, and 16 KiB
    /// from block 64.
    #[arg(long)]
    pub allow_write: bool,
}

/// One step of the story.
#[derive(Clone, Debug, Serialize)]
pub struct Event {
    /// Sequence number.
    pub seq: usize,
    /// "host" (the driver) or "ctrl" (the controller), or "story".
    pub who: &'static str,
    /// What kind of step: reg_read, reg_write, doorbell, sqe, fetch, cqe, phase_flip, prp_list, ...
    pub kind: &'static str,
    /// One line for people.
    pub text: String,
    /// Extra lines (hex, field lists).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detail: Vec<String>,
    /// Register offset, queue id, slot, value... when they apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qid: Option<u16>,
    /// Slot in the ring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<u16>,
    /// Value written or read, or the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
}

/// Where events go: printed at once (text) or collected (JSON).
pub struct Tracer {
    events: Mutex<Vec<Event>>,
    print: bool,
    dstrd: Mutex<u8>,
    /// I/O completions with an error status.
    failed: std::sync::atomic::AtomicUsize,
}

impl Tracer {
    fn new(print: bool) -> Arc<Self> {
        Arc::new(Tracer { events: Mutex::new(vec![]), print, dstrd: Mutex::new(0), failed: Default::default() })
    }
    fn emit(&self, who: &'static str, kind: &'static str, text: String, detail: Vec<String>, qid: Option<u16>, slot: Option<u16>, value: Option<u64>) {
        let mut ev = self.events.lock().unwrap();
        let seq = ev.len() + 1;
        if self.print {
            // Write errors (a closed pipe: `trace | head`) are ignored, so the
            // story still ends with the controller shut down.
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = if who == "story" {
                writeln!(out, "\n== {text}")
            } else {
                writeln!(out, "[{seq:4}] {who:<4} {kind:<10} {text}")
            };
            for d in &detail {
                let _ = writeln!(out, "{:22}{d}", "");
            }
        }
        ev.push(Event { seq, who, kind, text, detail, qid, slot, value });
    }
    fn story(&self, text: &str) {
        self.emit("story", "chapter", text.into(), vec![], None, None, None);
    }
    fn dstrd(&self) -> u8 {
        *self.dstrd.lock().unwrap()
    }
}

/// A register window that reports every access to the tracer.
pub struct TracedRegs<R: RegisterWindow + ?Sized> {
    inner: Arc<R>,
    tr: Arc<Tracer>,
}

impl<R: RegisterWindow + ?Sized> TracedRegs<R> {
    fn log(&self, write: bool, off: usize, v: u64, wide: bool) {
        let d = self.tr.dstrd();
        let name = describe::register_name(off, d);
        let fields = if off == nvme_spec::regs::offset::CAP && wide {
            describe::cap_fields(v)
        } else {
            describe::register_fields(off, v as u32, d)
        };
        let is_db = off >= nvme_spec::regs::offset::DOORBELL_BASE;
        let kind = match (is_db, write) {
            (true, _) => "doorbell",
            (false, true) => "reg_write",
            (false, false) => "reg_read",
        };
        let qid = is_db.then(|| ((off - nvme_spec::regs::offset::DOORBELL_BASE) / (4usize << d) / 2) as u16);
        let val = if wide { format!("{v:#018x}") } else { format!("{v:#010x}") };
        let text = format!("{} {name:<8} @{off:#06x} {} {val}  {fields}", if write { "write" } else { "read " }, if write { "<-" } else { "->" });
        self.tr.emit("host", kind, text, vec![], qid, None, Some(v));
    }
}

impl<R: RegisterWindow + ?Sized> RegisterWindow for TracedRegs<R> {
    fn read32(&self, off: usize) -> u32 {
        let v = self.inner.read32(off);
        self.log(false, off, v as u64, false);
        v
    }
    fn write32(&self, off: usize, v: u32) {
        // Log first: in the synchronous simulator the controller reacts
        // inside the write, and its steps must follow this line.
        self.log(true, off, v as u64, false);
        self.inner.write32(off, v)
    }
    fn read64(&self, off: usize) -> u64 {
        let v = self.inner.read64(off);
        if off == nvme_spec::regs::offset::CAP {
            // Doorbell names depend on the stride: learn it as the driver does.
            *self.tr.dstrd.lock().unwrap() = nvme_spec::regs::Cap::from_bits(v).dstrd();
        }
        self.log(false, off, v, true);
        v
    }
    fn write64(&self, off: usize, v: u64) {
        self.log(true, off, v, true);
        self.inner.write64(off, v)
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
}

fn controller_event(tr: &Tracer, hex: bool, e: &SimEvent) {
    match e {
        SimEvent::Enabled { asq, acq, admin_entries } => tr.emit(
            "ctrl",
            "enabled",
            format!("CC.EN 0->1: admin SQ at {asq:#x}, CQ at {acq:#x}, {admin_entries} entries; CSTS.RDY <- 1"),
            vec![],
            Some(0),
            None,
            None,
        ),
        SimEvent::Reset => tr.emit("ctrl", "reset", "CC.EN 1->0: controller reset, all queues gone, CSTS.RDY <- 0".into(), vec![], None, None, None),
        SimEvent::ShutdownComplete => tr.emit("ctrl", "shutdown", "CC.SHN=01b seen: shutdown processing complete, CSTS.SHST <- 10b".into(), vec![], None, None, None),
        SimEvent::DoorbellSeen { qid, tail, shadow } => tr.emit(
            "ctrl",
            "db_seen",
            format!("sees SQ{qid} tail {tail}{}", if *shadow { " (shadow doorbell)" } else { "" }),
            vec![],
            Some(*qid),
            None,
            Some(*tail as u64),
        ),
        SimEvent::Fetch { qid, slot, sqe } => {
            let mut detail = vec![];
            if hex {
                detail = describe::hex64(&sqe.to_bytes());
            }
            tr.emit("ctrl", "fetch", format!("fetch SQ{qid}[{slot}]: {}", describe::sqe_line(sqe, *qid == 0)), detail, Some(*qid), Some(*slot), None)
        }
        SimEvent::Complete { cqid, slot, cqe } => tr.emit(
            "ctrl",
            "post_cqe",
            format!("post CQ{cqid}[{slot}] with phase {}: {cqe}", cqe.phase() as u8),
            vec![],
            Some(*cqid),
            Some(*slot),
            Some(cqe.phase() as u64),
        ),
        SimEvent::PrpList { list_iova, entries } => tr.emit(
            "ctrl",
            "prp_list",
            format!("walk PRP list at {list_iova:#x}: {} entries", entries.len()),
            entries.iter().enumerate().map(|(i, e)| format!("entry {i}: {e:#x}")).collect(),
            None,
            None,
            Some(entries.len() as u64),
        ),
        SimEvent::Queue { qid, cq, created, entries } => tr.emit(
            "ctrl",
            "queue",
            format!("{} I/O {} {qid} ({entries} entries)", if *created { "created" } else { "deleted" }, if *cq { "CQ" } else { "SQ" }),
            vec![],
            Some(*qid),
            None,
            None,
        ),
    }
}

fn post_and_print<R: RegisterWindow + ?Sized>(tr: &Tracer, qp: &mut QueuePair<R>, sqe: Sqe, data: Option<DataPtr>, tag: u64, hex: bool) -> Result<(), Error> {
    let tail_before = qp.sq().tail();
    qp.submit(sqe, data, tag).map_err(nvme_driver::Error::from)?;
    report_sqe(tr, qp.qid(), tail_before, qp.sq().tail(), &qp.sq().entry(tail_before), hex);
    Ok(())
}

/// The host's post of `posted` into SQ`qid`[`slot`], the tail moving on to
/// `tail`: an I/O command's (`post_and_print`) or an admin command's (the
/// driver's [`AdminEvent::Posted`]).
fn report_sqe(tr: &Tracer, qid: u16, slot: u16, tail: u16, posted: &Sqe, hex: bool) {
    let admin = qid == 0;
    let mut detail = vec![describe::sqe_line(posted, admin)];
    if hex {
        detail.extend(describe::hex64(&posted.to_bytes()));
    }
    tr.emit(
        "host",
        "sqe",
        format!(
            "post SQ{qid}[{slot}] {} cid={} (tail {slot} -> {tail}){}",
            describe::opcode_name(posted.opcode(), admin),
            posted.cid(),
            if tail < slot { ": SQ tail wrapped to slot 0" } else { "" }
        ),
        detail,
        Some(qid),
        Some(slot),
        None,
    );
}

fn reap_and_print<R: RegisterWindow + ?Sized>(tr: &Tracer, qp: &mut QueuePair<R>) -> usize {
    let mut n = 0;
    loop {
        let head = qp.cq().head();
        let phase = qp.cq().phase();
        let Some((cqe, tag)) = qp.reap_raw() else { break };
        n += 1;
        if !cqe.decoded_status().is_success() {
            tr.failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        report_cqe(tr, qp.qid(), head, &cqe, tag.is_some());
        if qp.cq().phase() != phase {
            tr.emit(
                "host",
                "phase_flip",
                format!(
                    "CQ{} head wrapped from slot {head} to 0: the phase of new entries flips {} -> {}",
                    qp.qid(),
                    phase as u8,
                    qp.cq().phase() as u8
                ),
                vec![],
                Some(qp.qid()),
                Some(head),
                Some(qp.cq().phase() as u64),
            );
        }
    }
    // One completion doorbell for the whole pass, as the hot path does.
    qp.ring_cq();
    n
}

/// The host's reap of `cqe` from CQ`qid`[`slot`]; `ours` is false for a
/// CID that is not outstanding.
fn report_cqe(tr: &Tracer, qid: u16, slot: u16, cqe: &Cqe, ours: bool) {
    tr.emit(
        "host",
        "cqe",
        format!(
            "reap CQ{qid}[{slot}] phase {} matches: {cqe}{}",
            cqe.phase() as u8,
            if ours { "" } else { "  (REJECTED: CID not outstanding)" }
        ),
        vec![],
        Some(qid),
        Some(slot),
        Some(cqe.phase() as u64),
    );
}

/// The story's path: the simulator, synchronous (it runs inside the
/// register accesses, so host and controller steps interleave in causal
/// order) with a 64 MiB namespace, or a controller on vfio-pci. Shadow
/// doorbells off either way: the story shows every doorbell as the register
/// write it is (docs/queues.md explains the shadow variant). The simulator
/// grants as many queues as it does by default, as the story's Set Features
/// shows.
fn path(a: &TraceArgs) -> Result<PathSpec, Error> {
    Ok(match a.backend {
        PathKind::Sim => {
            crate::commands::args::sim_namespace(a.nsid)?;
            PathSpec::Sim(SimOptions { size: 64 << 20, queues: SimConfig::default().max_io_queues, threaded: false, shadow_doorbells: false, ..SimOptions::default() })
        }
        PathKind::Vfio => PathSpec::Vfio(VfioOptions {
            shadow_doorbells: false,
            ..VfioOptions::new(a.device.clone().ok_or_else(|| Error::usage("trace --backend vfio needs --device BDF"))?, a.nsid)
        }),
        other => return Err(Error::usage(format!("trace runs on --backend sim or vfio (our driver), not {}", other.name()))),
    })
}

/// `trace --backend`: the paths whose queues are ours to show.
fn parse_trace_backend(s: &str) -> Result<PathKind, String> {
    match s {
        "sim" => Ok(PathKind::Sim),
        "vfio" => Ok(PathKind::Vfio),
        "passthru" | "block" => Err(format!(
            "trace tells our driver's story, on sim or vfio; {s} goes through the kernel's nvme driver, whose queues are out of sight: use --backend sim or vfio, or `nvme-bypass bench --backend {s}` for that path's figures"
        )),
        _ => Err(format!("'{s}' is not a path; use --backend sim or vfio")),
    }
}

/// Most read/write commands a story tells.
const MAX_COMMANDS: u32 = 10_000;

/// Run the story.
pub fn trace(a: &TraceArgs) -> Result<i32, Error> {
    if let Some(d) = &a.device {
        crate::commands::args::refuse_non_nvme(d)?;
    }
    if a.queue_entries < 2 || a.queue_entries > 64 {
        return Err(Error::usage("--queue-entries must be 2..=64 (small, so the story wraps the rings)"));
    }
    // The story is kept whole (JSON) or printed as told: a story a reader
    // can follow, not a benchmark (bench runs long).
    if a.commands == 0 || a.commands > MAX_COMMANDS {
        return Err(Error::usage(format!("--commands must be 1..={MAX_COMMANDS}: a story to read; for a long run use `nvme-bypass bench`")));
    }
    if a.device.is_some() && a.backend != PathKind::Vfio {
        return Err(Error::usage("--device is used by --backend vfio only: add --backend vfio to trace that controller (without it the story is the simulator's)"));
    }
    if a.allow_write && a.backend != PathKind::Vfio {
        return Err(Error::usage("--allow-write has no effect on --backend sim: it permits the story's writes on a real controller (--backend vfio); the simulator's namespace is its own, drop it"));
    }
    let print = a.output_format == OutputFormat::Normal;
    let tr = Tracer::new(print);
    match path(a)? {
        PathSpec::Sim(o) => {
            let tr2 = tr.clone();
            let hex = a.hex;
            let cfg = SimConfig { events: Some(Arc::new(move |e: &SimEvent| controller_event(&tr2, hex, e))), ..o.config() };
            let sim = SimController::start(cfg)?;
            let regs = Arc::new(TracedRegs { inner: sim.registers(), tr: tr.clone() });
            story(&tr, regs, sim.allocator(), a, DriverSetup { shadow_doorbells: o.shadow_doorbells, streaming_sq: o.streaming_sq, quirks: Quirks::default() })?;
            drop(sim);
        }
        PathSpec::Vfio(o) => {
            let bdf = &o.bdf;
            if !a.allow_write {
                return Err(Error::usage(format!(
                    "the trace story writes {} blocks from block 0 of namespace {} of {bdf}, and 16 KiB from block 64; add --allow-write if those hold nothing you need",
                    a.commands, a.nsid
                )));
            }
            let (regs, mem, dev) = crate::backend::userspace::vfio::open_raw(bdf)?;
            let traced = Arc::new(TracedRegs { inner: regs, tr: tr.clone() });
            let quirks = nvme_vfio::Bdf::parse(bdf).map(|b| Quirks::of(&nvme_vfio::Host::system(), &b)).unwrap_or_default();
            story(&tr, traced, mem, a, DriverSetup { shadow_doorbells: o.shadow_doorbells, streaming_sq: o.streaming_sq, quirks })?;
            drop(dev);
        }
        PathSpec::Passthru(_) | PathSpec::Block(_) => unreachable!("path() refuses the kernel paths"),
    }
    if !print {
        let ev = tr.events.lock().unwrap();
        println!("{}", serde_json::to_string_pretty(&*ev).unwrap());
    }
    match tr.failed.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Ok(exit::OK),
        n => {
            eprintln!("nvme-bypass: error: {n} of the story's I/O commands completed with an error status (their completions above say which)");
            Ok(exit::RUN_FAILED)
        }
    }
}

/// How the story's driver drives the controller: the path's doorbell and
/// store choices, and what the controller's model needs (its quirks).
struct DriverSetup {
    shadow_doorbells: bool,
    streaming_sq: bool,
    quirks: Quirks,
}

fn story<R: RegisterWindow + ?Sized + 'static>(
    tr: &Arc<Tracer>,
    regs: Arc<R>,
    mem: Arc<dyn nvme_hal::DmaAllocator>,
    a: &TraceArgs,
    DriverSetup { shadow_doorbells, streaming_sq, quirks }: DriverSetup,
) -> Result<(), Error> {
    tr.story("bring-up, NVMe 1.4c §7.6.1: read CAP, disable, admin queues in AQA/ASQ/ACQ, CC with EN=1, wait for CSTS.RDY; then Identify and Set Features Number of Queues");
    // Completion queues as large as submission queues, each pass ringing
    // its doorbell: the plain protocol, no batching.
    // The admin commands' host side comes from the driver, which posts
    // and reaps them itself.
    let (tr2, hex) = (tr.clone(), a.hex);
    let admin_observer = AdminObserver(Arc::new(move |e: AdminEvent<'_>| match e {
        AdminEvent::Posted { slot, tail, sqe } => report_sqe(&tr2, 0, slot, tail, sqe, hex),
        AdminEvent::Reaped { slot, cqe, ours } => report_cqe(&tr2, 0, slot, cqe, ours),
    }));
    let cfg = ControllerConfig {
        io_queues: 1,
        shadow_doorbells,
        streaming_sq,
        batch_cq_doorbells: false,
        ready_check_delay: quirks.ready_check_delay,
        init_delay: quirks.init_delay,
        medium_prio_sq: quirks.medium_prio_sq,
        admin_observer: Some(admin_observer),
        ..Default::default()
    };
    let mut ctrl = Controller::new(regs, mem, cfg)?;
    let nsid = a.nsid;
    tr.story(&format!("Identify Namespace {nsid} (admin command, data returned in a 4 KiB page named by PRP1)"));
    // As bench: a namespace whose blocks carry metadata or protection
    // information, or of another command set (zoned), is refused before
    // any I/O; the story's plain reads and writes do not fit it.
    let ns = crate::backend::namespace::usable(&mut ctrl, nsid)?;
    let lba = ns.lba_size() as usize;
    // The PRP-list write needs 16 KiB in one command (and the data buffer
    // holds 64 KiB): refused before any write on a controller that takes less.
    if ctrl.max_transfer() < 16 << 10 {
        return Err(Error::usage(format!(
            "this controller takes at most {} bytes per command (its MDTS), and the story's PRP-list example writes 16 KiB in one; trace a controller that takes 16 KiB or more",
            ctrl.max_transfer()
        )));
    }
    // The driver clamps the size to what CAP.MQES allows: the story says
    // so rather than name a size the queues do not have.
    let entries = QueueEntries::clamped(a.queue_entries as u64, QueueEntries::MIN, ctrl.max_io_queue_entries());
    let clamped = if entries.get() < a.queue_entries {
        format!(" (--queue-entries {} is more than this controller's CAP.MQES allows)", a.queue_entries)
    } else {
        String::new()
    };
    tr.story(&format!(
        "create an I/O queue pair of {} entries{clamped} (at most {} commands in flight): the CQ first, then the SQ that names it",
        entries.get(),
        entries.capacity()
    ));
    let mut qp = ctrl.create_io_queue_pair(entries.get())?;
    // Owned with the queue: if the story stops early, the controller keeps
    // it until the queue is gone, as it may still write into it.
    let buf = ctrl.alloc_queue_buffer(&qp, 64 << 10)?;
    let depth = qp.depth() as u32;
    tr.story(&format!(
        "{} writes then {} reads of one block each, {depth} at a time, each batch with one SQ doorbell; the rings wrap",
        a.commands, a.commands
    ));
    for (phase, write) in [(0, true), (1, false)] {
        let mut done = 0u32;
        while done < a.commands {
            let batch = depth.min(a.commands - done);
            for i in 0..batch {
                let lbn = (done + i) as u64;
                let data = DataPtr { iova: buf.iova() + (i as usize * lba) as u64, len: lba };
                let sqe = if write {
                    nvme_spec::cmd::ReadWrite::write(nsid, lbn, 1).build()
                } else {
                    nvme_spec::cmd::ReadWrite::read(nsid, lbn, 1).build()
                };
                post_and_print(tr, &mut qp, sqe, Some(data), phase * 1000 + lbn, a.hex)?;
            }
            qp.ring();
            let mut got = 0;
            let start = std::time::Instant::now();
            while got < batch as usize {
                got += reap_and_print(tr, &mut qp);
                if start.elapsed() > std::time::Duration::from_secs(10) {
                    return Err(Error::usage("the controller did not complete the story's commands within 10 s"));
                }
            }
            done += batch;
        }
    }
    tr.story("a 16 KiB write spanning four pages: PRP1 names the first page, PRP2 a PRP list naming the other three (NVMe 1.4c §4.3)");
    let blocks = (16 << 10) / lba as u32;
    post_and_print(tr, &mut qp, nvme_spec::cmd::ReadWrite::write(nsid, 64, blocks).build(), Some(DataPtr { iova: buf.iova(), len: 16 << 10 }), 7777, a.hex)?;
    qp.ring();
    let start = std::time::Instant::now();
    while reap_and_print(tr, &mut qp) == 0 {
        if start.elapsed() > std::time::Duration::from_secs(10) {
            return Err(Error::usage("the 16 KiB write did not complete within 10 s"));
        }
    }
    tr.story("delete the I/O queue pair (SQ first, then CQ), then normal shutdown, NVMe 1.4c §7.6.2: CC.SHN=01b, wait for CSTS.SHST=10b, CC.EN=0");
    ctrl.delete_io_queue_pair(qp)?;
    ctrl.shutdown()?;
    Ok(())
}
