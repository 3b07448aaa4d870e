//! A queue pair: one submission queue, its completion queue, the CIDs of
//! the commands in flight and their PRP list pages. The admin queue and
//! every I/O queue are this type. It is the hot path of the vfio and sim
//! backends: no allocation, lock or system call per command. It keeps the
//! CIDs, PRPs and counters; every ring slot, index, phase and doorbell is
//! `queue.rs`'s (`SubmissionQueue::post_batch` and `post_with`,
//! `CompletionQueue::reap` and `reap_into`).

use crate::cid::{cid_tag, CidBatch, CidTable};
use crate::doorbell::ShadowSlot;
use crate::error::SubmitError;
use crate::prp::{build_prps, DmaPrpList, PrpError};
use crate::queue::{CompletionQueue, NewCqe, SqTail, SubmissionQueue};
use nvme_hal::{DmaRegion, RegisterWindow};
use nvme_spec::NvmOpcode;
use nvme_spec::{Cqe, CqeStatus, QueueEntries, Sqe, Status};
use std::sync::Arc;

/// Largest submission queue this driver makes: 4096 entries, so at most
/// 4095 commands in flight. A command identifier carries the command's
/// slot in 12 bits (see [`crate::cid`]); Linux stops its PCIe queues at
/// 4095 entries (`NVME_PCI_MAX_QUEUE_SIZE`) for the same reason.
pub const MAX_SQ_ENTRIES: QueueEntries = match QueueEntries::new(4096) {
    Some(e) => e,
    None => unreachable!(),
};

/// Largest completion queue this driver makes: twice the largest
/// submission queue (see [`QueuePairParts::cq_entries`]).
pub const MAX_CQ_ENTRIES: QueueEntries = match QueueEntries::new(2 * MAX_SQ_ENTRIES.get()) {
    Some(e) => e,
    None => unreachable!(),
};

/// A data buffer as the controller sees it: a bus address and a length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPtr {
    /// Bus address (IOVA) of the first byte.
    pub iova: u64,
    /// Length in bytes.
    pub len: usize,
}

impl DataPtr {
    /// The whole of a DMA region.
    pub fn of(r: &DmaRegion) -> Self {
        DataPtr { iova: r.iova(), len: r.len() }
    }
}

/// A completed command, as handed to the caller of [`QueuePair::poll`].
#[derive(Clone, Copy, Debug)]
pub struct Completion {
    /// The tag given at submission.
    pub tag: u64,
    /// The command identifier it used.
    pub cid: u16,
    /// The raw status field (phase tag included); see [`Completion::ok`]
    /// and [`Completion::status`].
    pub raw_status: CqeStatus,
    /// Command specific result (completion dword 0).
    pub dw0: u32,
}

impl Completion {
    /// True for Successful Completion (every status bit but the phase clear).
    #[inline]
    pub fn ok(&self) -> bool {
        self.raw_status.into_bits() & !1 == 0
    }
    /// The decoded status.
    #[inline]
    pub fn status(&self) -> Status {
        Status::from_cqe_status(self.raw_status)
    }
}

/// One command of a batch for [`QueuePair::submit_batch`]: a Read, a Write
/// or a Flush (which ignores `slba`, `blocks` and `data`).
#[derive(Clone, Copy, Debug)]
pub struct IoCmd {
    /// [`NvmOpcode::Read`], [`NvmOpcode::Write`] or [`NvmOpcode::Flush`].
    pub op: NvmOpcode,
    /// Starting LBA.
    pub slba: u64,
    /// Number of logical blocks (1-based here; the entry carries it 0-based).
    pub blocks: u32,
    /// The data buffer.
    pub data: DataPtr,
    /// The caller's tag, handed back with the completion.
    pub tag: u64,
}

/// Counters kept by a queue pair; read them between runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Commands posted.
    pub submitted: u64,
    /// Completions delivered to the caller.
    pub completed: u64,
    /// Submission doorbell writes (MMIO on hardware).
    pub sq_doorbells: u64,
    /// Completion doorbell writes.
    pub cq_doorbells: u64,
    /// Completions whose CID was not outstanding (rejected).
    pub invalid_cid: u64,
    /// Completions whose CID names a slot of this queue but another
    /// generation of it: a late or repeated completion of an earlier
    /// command there (rejected; see [`crate::cid`]).
    pub stale_cid: u64,
    /// Completions naming another submission queue (rejected).
    pub wrong_sqid: u64,
    /// Doorbell writes that went to the MMIO register (with shadow
    /// doorbells, only those the EventIdx rule required).
    pub mmio_doorbells: u64,
}

impl QueueStats {
    /// Completions rejected so far, for any reason.
    #[inline(always)]
    pub fn rejected(&self) -> u64 {
        self.invalid_cid + self.stale_cid + self.wrong_sqid
    }
}

/// One submission queue, its completion queue, and their commands.
///
/// Aligned to 128 bytes (two cache lines: Intel's adjacent-line prefetcher
/// pulls lines in pairs), so the state one thread's hot loop writes (ring
/// indices, the CID top, counters) never shares a line with another
/// thread's data. See docs/queues.md, "Cache lines".
#[repr(align(128))]
pub struct QueuePair<R: RegisterWindow + ?Sized> {
    regs: Arc<R>,
    qid: u16,
    sq: SubmissionQueue,
    cq: CompletionQueue,
    cids: CidTable,
    prp_lists: Option<DmaRegion>,
    list_pages_per_cmd: usize,
    page_size: usize,
    max_transfer: usize,
    stats: QueueStats,
    last_rejected: Option<Cqe>,
    /// Completion doorbell batching threshold (see QueuePairParts::cq_entries).
    cq_ring_every: u16,
    /// See QueuePairParts::streaming_sq.
    streaming_sq: bool,
}

/// Everything needed to assemble a queue pair from memory the caller set up.
pub struct QueuePairParts<R: RegisterWindow + ?Sized> {
    /// Register window for the doorbells.
    pub regs: Arc<R>,
    /// Queue identifier (0 = admin).
    pub qid: u16,
    /// Submission ring memory.
    pub sq_mem: DmaRegion,
    /// Completion ring memory.
    pub cq_mem: DmaRegion,
    /// Entries in the submission ring (at most `entries - 1` commands in
    /// flight), at most [`MAX_SQ_ENTRIES`].
    pub entries: QueueEntries,
    /// Entries in the completion ring, from `entries` to [`MAX_CQ_ENTRIES`].
    /// When it is larger than the submission ring, the completion doorbell
    /// is rung only every `cq_entries - entries` consumed entries (the
    /// controller can never find it full): fewer doorbell writes, each an
    /// MMIO write or a VM exit.
    pub cq_entries: QueueEntries,
    /// Doorbell stride exponent (CAP.DSTRD).
    pub dstrd: u8,
    /// PRP list pages, `list_pages_per_cmd` pages per CID, or `None` when
    /// no command will span more than two pages.
    pub prp_lists: Option<DmaRegion>,
    /// List pages reserved per command.
    pub list_pages_per_cmd: usize,
    /// Controller memory page size (CC.MPS).
    pub page_size: usize,
    /// Largest transfer in bytes.
    pub max_transfer: usize,
    /// Shadow doorbell slots for the SQ and the CQ (Doorbell Buffer Config).
    pub shadow: Option<(ShadowSlot, ShadowSlot)>,
    /// Write the entries of [`QueuePair::submit_batch`] (and so of `read`
    /// and `write`) with streaming stores (x86 MOVNTI), fenced once per
    /// batch. An entry's cache line was last read by the controller; a
    /// cached store first has to take the line back (one transfer per entry,
    /// each waited for in turn once the store buffer fills), a streaming
    /// store writes it whole without reading it. SPDK copies its entries the
    /// same way. Other submissions use cached stores.
    pub streaming_sq: bool,
}

impl<R: RegisterWindow + ?Sized> QueuePair<R> {
    /// Assemble a queue pair. At most `entries - 1` commands are outstanding,
    /// so neither ring can overflow. Parts that do not fit together (rings
    /// larger than this driver makes or than their memory, a completion
    /// ring smaller than the submission ring, a maximum transfer below one
    /// page) are an [`Error::Invalid`](crate::Error::Invalid), never a panic:
    /// the sizes come from what a controller reported.
    pub fn new(p: QueuePairParts<R>) -> Result<Self, crate::Error> {
        check_parts(&p)?;
        // Both sizes are at most MAX_CQ_ENTRIES (8192): they fit the rings' u16 indices.
        let (entries, cq_entries) = (p.entries.get() as u16, p.cq_entries.get() as u16);
        let mut sq = SubmissionQueue::new(p.sq_mem, entries, nvme_spec::regs::sq_tail_doorbell(p.qid, p.dstrd));
        let mut cq = CompletionQueue::new(p.cq_mem, cq_entries, nvme_spec::regs::cq_head_doorbell(p.qid, p.dstrd));
        // Ring the CQ doorbell once this many consumed entries are unreported.
        // Occupancy the controller sees <= (entries - 1) uncompleted + unreported,
        // which stays below cq_entries - 1 while unreported < cq_entries - entries.
        let cq_ring_every = cq_entries.saturating_sub(entries).max(1);
        if let Some((s, c)) = p.shadow {
            sq.set_shadow(Some(s));
            cq.set_shadow(Some(c));
        }
        Ok(QueuePair {
            regs: p.regs,
            qid: p.qid,
            sq,
            cq,
            cids: CidTable::new(entries - 1),
            prp_lists: p.prp_lists,
            list_pages_per_cmd: p.list_pages_per_cmd,
            page_size: p.page_size,
            max_transfer: p.max_transfer,
            stats: QueueStats::default(),
            last_rejected: None,
            cq_ring_every,
            streaming_sq: p.streaming_sq,
        })
    }

    /// Queue identifier.
    pub fn qid(&self) -> u16 {
        self.qid
    }
    /// Most commands that can be outstanding at once (ring entries - 1).
    pub fn depth(&self) -> usize {
        self.cids.capacity()
    }
    /// Commands outstanding now.
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.cids.outstanding()
    }
    /// Largest transfer in bytes.
    pub fn max_transfer(&self) -> usize {
        self.max_transfer
    }
    /// Counters.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }
    /// The last completion rejected for an unknown or stale CID or a wrong SQ id.
    pub fn last_rejected(&self) -> Option<Cqe> {
        self.last_rejected
    }
    /// The submission queue (read-only view, for tracing).
    pub fn sq(&self) -> &SubmissionQueue {
        &self.sq
    }
    /// The completion queue (read-only view, for tracing).
    pub fn cq(&self) -> &CompletionQueue {
        &self.cq
    }
    /// Tags of the commands outstanding, with their CIDs.
    pub fn outstanding_commands(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.cids.busy_cids().map(|c| (c, self.cids.tag(c).unwrap_or(0)))
    }
    /// The register window.
    pub fn regs(&self) -> &Arc<R> {
        &self.regs
    }

    /// Post a command (its CID and PRPs are filled in here) without ringing
    /// the doorbell. Returns the CID used.
    #[inline]
    pub fn submit(&mut self, mut sqe: Sqe, data: Option<DataPtr>, tag: u64) -> Result<u16, SubmitError> {
        // At most entries-1 CIDs exist and a CID is freed only by its
        // completion, which the controller posts after consuming the entry:
        // a free CID implies a free submission slot.
        let Some(cid) = self.cids.alloc(tag) else {
            return Err(SubmitError::QueueFull { outstanding: self.cids.outstanding() });
        };
        if let Some(d) = data {
            if d.len > self.max_transfer {
                self.cids.cancel(cid);
                return Err(SubmitError::TooLarge { len: d.len, max: self.max_transfer });
            }
            let (prp1, prp2) = self.prps(cid, d).inspect_err(|_| self.cids.cancel(cid))?;
            sqe.prp1 = prp1;
            sqe.prp2 = prp2;
        }
        sqe.set_cid(cid);
        debug_assert!(!self.sq.is_full());
        self.sq.post(&sqe);
        self.stats.submitted += 1;
        Ok(cid)
    }

    /// Post a Read of `blocks` blocks at `slba` into `data`.
    #[inline]
    pub fn read(&mut self, nsid: u32, slba: u64, blocks: u32, data: DataPtr, tag: u64) -> Result<u16, SubmitError> {
        self.submit_rw(NvmOpcode::Read, nsid, slba, blocks, data, tag)
    }
    /// Post a Write of `blocks` blocks at `slba` from `data`.
    #[inline]
    pub fn write(&mut self, nsid: u32, slba: u64, blocks: u32, data: DataPtr, tag: u64) -> Result<u16, SubmitError> {
        self.submit_rw(NvmOpcode::Write, nsid, slba, blocks, data, tag)
    }

    /// [`read`](Self::read)/[`write`](Self::write): a batch of one, so the
    /// entry is exactly the one [`submit_batch`](Self::submit_batch) posts
    /// (the same entry `ReadWrite::build` makes; a test checks they are equal).
    #[inline]
    fn submit_rw(&mut self, op: NvmOpcode, nsid: u32, slba: u64, blocks: u32, data: DataPtr, tag: u64) -> Result<u16, SubmitError> {
        // A transfer above MDTS is refused before a full queue is reported.
        if data.len > self.max_transfer {
            return Err(SubmitError::TooLarge { len: data.len, max: self.max_transfer });
        }
        // The CID the batch will take: the top of the free stack.
        let Some(cid) = self.cids.batch().peek() else {
            return Err(SubmitError::QueueFull { outstanding: self.cids.outstanding() });
        };
        self.submit_batch(nsid, [IoCmd { op, slba, blocks, data, tag }])?;
        Ok(cid)
    }

    /// Post the commands `cmds` yields, without ringing the doorbell: the
    /// batch-shaped hot path of the vfio and sim backends.
    /// Each entry is the one [`read`](Self::read), [`write`](Self::write) or
    /// [`flush`](Self::flush) would post (a test checks they are equal); what
    /// is per batch is done once: the free-slot check (a free CID implies a
    /// free submission slot), the tail kept in a register and stored at the
    /// end, the counter update. Returns how many were posted, fewer than
    /// `cmds` holds when the queue filled up. A command that cannot be described (too
    /// long, or a buffer PRPs cannot express) ends the batch with its error;
    /// the commands before it stay posted.
    #[inline]
    pub fn submit_batch(&mut self, nsid: u32, cmds: impl IntoIterator<Item = IoCmd>) -> Result<usize, SubmitError> {
        // A free CID implies a free submission slot: at most that many.
        let free = self.cids.free();
        self.post_cmds(nsid, cmds.into_iter().take(free))
    }

    /// [`submit_batch`](Self::submit_batch) of `f(item)` for each of
    /// `items` (as many as fit): the slice bounds the batch by itself, so
    /// the post loop keeps no count of its own beside the slice's end (the
    /// backends' hot path).
    #[inline]
    pub fn submit_each<T>(&mut self, nsid: u32, items: &[T], f: impl FnMut(&T) -> IoCmd) -> Result<usize, SubmitError> {
        let items = &items[..items.len().min(self.cids.free())];
        // The store kind is a constant of each copy of the loop.
        if self.streaming_sq {
            self.post_slice::<true, T>(nsid, items, f)
        } else {
            self.post_slice::<false, T>(nsid, items, f)
        }
    }

    /// [`submit_each`](Self::submit_each) of `items` (no more than the free
    /// CIDs): the batch's CIDs are the top `items.len()` of the free stack
    /// ([`CidBatch::top_run`](crate::cid::CidBatch::top_run)), walked with
    /// the commands by one index (so the first command takes the deepest of
    /// them), and leave the stack once, after the loop (no top kept per
    /// command); after a refused command the run's unused CIDs stay on the
    /// stack ([`CidBatch::take`](crate::cid::CidBatch::take)). The entries
    /// are [`post_batch`](Self::post_batch)'s (a test checks they are
    /// equal): the common one written by this loop itself
    /// ([`SubmissionQueue::post_with`]), any other by `post_other`.
    #[inline(always)]
    fn post_slice<const STREAMING: bool, T>(&mut self, nsid: u32, items: &[T], mut f: impl FnMut(&T) -> IoCmd) -> Result<usize, SubmitError> {
        let lists = PrpLists { mem: self.prp_lists.as_ref(), pages: self.list_pages_per_cmd, page_size: self.page_size };
        let (max_transfer, page_mask) = (self.max_transfer, self.page_size - 1);
        // Dword 1 of every entry of the batch: its NSID above CDW0.
        let ns = (nsid as u64) << 32;
        let k = items.len();
        let mut cids = self.cids.batch();
        let (run, slots) = cids.top_run(k);
        // Command i takes the run's CID i: one index for both. The loop
        // writes the common entry itself (a read or write within its first
        // page: its zeros are constants); any other goes out of line. A
        // refused command ends the batch with its CID.
        let (posted, refused) = self.sq.post_with::<STREAMING, _>(|tail| {
            for (item, &cid) in items.iter().zip(run) {
                let c = f(item);
                slots.assign(cid, c.tag);
                if c.op != NvmOpcode::Flush && in_one_page(c.data, page_mask) {
                    debug_assert!(c.blocks >= 1 && c.blocks <= nvme_spec::cmd::MAX_BLOCKS_PER_COMMAND);
                    let dw0 = c.op as u64 | (cid as u64) << 16 | ns;
                    // NLB (CDW12) is 0's based; CDW13 = 0.
                    tail.push([dw0, 0, 0, c.data.iova, 0, c.slba, (c.blocks - 1) as u64, 0]);
                } else if let Err(e) = post_other(tail, (c.op, c.slba, c.blocks, c.data.iova, c.data.len), cid, nsid, page_mask, &lists, max_transfer) {
                    return Some((cid, e));
                }
            }
            None
        });
        // The commands posted, and a refused one, took their CIDs; the
        // refused one's goes back (as after its completion: next generation).
        cids.take(k, posted + refused.is_some() as usize);
        self.stats.submitted += posted as u64;
        if let Some((cid, e)) = refused {
            cids.release(cid); // never posted
            return Err(e);
        }
        Ok(posted)
    }

    /// Post what `cmds` yields, which is at most [`CidTable::free`]
    /// commands (the callers bound it): the loop takes a CID per command
    /// without a check and ends when `cmds` does.
    #[inline]
    fn post_cmds(&mut self, nsid: u32, cmds: impl Iterator<Item = IoCmd>) -> Result<usize, SubmitError> {
        // The store kind is a constant of each copy of the loop.
        if self.streaming_sq {
            self.post_batch::<true>(nsid, cmds)
        } else {
            self.post_batch::<false>(nsid, cmds)
        }
    }

    /// [`QueuePair::post_cmds`], with streaming or cached entry stores
    /// ([`SubmissionQueue::post_each`] writes them).
    #[inline(always)]
    fn post_batch<const STREAMING: bool>(&mut self, nsid: u32, mut cmds: impl Iterator<Item = IoCmd>) -> Result<usize, SubmitError> {
        let lists = PrpLists { mem: self.prp_lists.as_ref(), pages: self.list_pages_per_cmd, page_size: self.page_size };
        let (max_transfer, page_mask) = (self.max_transfer, self.page_size - 1);
        let free = self.cids.free();
        // Everything the loop touches, as plain values (see CidTable::batch).
        let mut cids = self.cids.batch();
        let mut result = Ok(());
        // One bound: the commands' end (no more than the free CIDs, so a
        // free CID implies a free submission slot too).
        self.sq.post_each::<STREAMING>(|| {
            let c = cmds.next()?;
            let cid = cids.pop(c.tag);
            match entry(c, cid, nsid, page_mask, |d| lists.build(cid, d, max_transfer)) {
                Ok(e) => Some(e),
                Err(e) => {
                    cids.release(cid); // never posted
                    result = Err(e);
                    None
                }
            }
        });
        drop(cids);
        // Each posted command holds a CID (one refused gave its CID back).
        let posted = free - self.cids.free();
        self.stats.submitted += posted as u64;
        result.map(|()| posted)
    }

    /// PRP1/PRP2 for `d`, using command `cid`'s list pages when needed.
    #[inline(always)]
    fn prps(&mut self, cid: u16, d: DataPtr) -> Result<(u64, u64), PrpError> {
        // The common case inline: the data fits in its first page.
        if in_one_page(d, self.page_size - 1) {
            return Ok((d.iova, 0));
        }
        self.prps_list(cid, d)
    }

    #[cold]
    #[inline(never)]
    fn prps_list(&mut self, cid: u16, d: DataPtr) -> Result<(u64, u64), PrpError> {
        PrpLists { mem: self.prp_lists.as_ref(), pages: self.list_pages_per_cmd, page_size: self.page_size }.prps(cid, d)
    }

    /// Post a Write Zeroes of `blocks` blocks at `slba`.
    pub fn write_zeroes(&mut self, nsid: u32, slba: u64, blocks: u32, tag: u64) -> Result<u16, SubmitError> {
        self.submit(nvme_spec::cmd::ReadWrite::write_zeroes(nsid, slba, blocks).build(), None, tag)
    }
    /// Post a Flush.
    pub fn flush(&mut self, nsid: u32, tag: u64) -> Result<u16, SubmitError> {
        self.submit(nvme_spec::cmd::flush(nsid), None, tag)
    }

    /// True when commands were posted since the last doorbell.
    #[inline]
    pub fn needs_doorbell(&self) -> bool {
        self.sq.needs_doorbell()
    }
    /// Ring the submission doorbell once for everything posted since the
    /// last ring (no-op when nothing is new). With shadow doorbells,
    /// completions consumed since the last completion doorbell are reported
    /// with it: both values share one cache line and one full fence, the
    /// fence being most of a doorbell's cost when the controller polls that
    /// line.
    #[inline]
    pub fn ring(&mut self) {
        if self.sq.needs_doorbell() {
            if self.cq.needs_doorbell() {
                let (sq, cq) = self.sq.ring_doorbell_with(&mut self.cq, &*self.regs);
                self.stats.mmio_doorbells += sq as u64 + cq.unwrap_or(false) as u64;
                self.stats.cq_doorbells += cq.is_some() as u64;
            } else {
                self.stats.mmio_doorbells += self.sq.ring_doorbell(&*self.regs) as u64;
            }
            self.stats.sq_doorbells += 1;
        }
    }

    /// Is a completion waiting at the head of the completion queue?
    #[inline]
    pub fn completion_pending(&self) -> bool {
        self.cq.cqe_pending()
    }

    /// Are `n` completions waiting at the head of the completion queue?
    /// (Looks at the n-th only: see [`CompletionQueue::ready`].)
    #[inline]
    pub fn completions_ready(&self, n: usize) -> bool {
        self.cq.ready(n)
    }

    /// Reap up to `max` completions, calling `f` for each, then ring the
    /// completion doorbell once (or not yet: see `cq_entries`). Completions
    /// with an unknown CID or another queue's SQ id are counted and dropped,
    /// never delivered. The head, phase and counters stay in registers for
    /// the pass (see `reap`).
    #[inline(always)]
    pub fn poll(&mut self, max: usize, mut f: impl FnMut(Completion)) -> usize {
        self.reap(max, |_, r| f(r.completion()))
    }

    /// Start loading the completion line at the head, so that the miss (the
    /// line comes from the controller's side) overlaps the caller's other
    /// work before it polls. A hint only.
    #[inline]
    pub fn prefetch_completions(&self) {
        self.cq.prefetch_head();
    }

    /// [`poll`](Self::poll) into a slice: up to `out.len()` completions,
    /// `fill(&mut out[i], completion i)`. Returns how many were filled.
    /// (Filling in place lets the caller store only the fields that
    /// change, straight into the slice; a completion's dword 0 is loaded
    /// only if asked for.) The slots are walked by address
    /// ([`CompletionQueue::reap_into`]): no index per completion.
    #[inline(always)]
    pub fn poll_into<T>(&mut self, out: &mut [T], mut fill: impl FnMut(&mut T, Reaped<'_>)) -> usize {
        let pass = self.begin_reap();
        // Everything the loop touches, as plain values (see CidTable::batch).
        let (qid, mut cids) = (self.qid, self.cids.batch());
        let (stats, last_rejected) = (&mut self.stats, &mut self.last_rejected);
        let n = self.cq.reap_into(out, |o, e| match take(qid, &mut cids, stats, last_rejected, e) {
            Some(r) => {
                fill(o, r);
                true
            }
            None => false,
        });
        drop(cids);
        self.end_reap(pass, n)
    }

    /// The completion loop: `f(i, completion)` for the i-th delivered
    /// completion, i < `max` ([`CompletionQueue::reap`] takes the entries);
    /// a completion for a CID not outstanding on this queue is rejected.
    #[inline(always)]
    fn reap(&mut self, max: usize, mut f: impl FnMut(usize, Reaped<'_>)) -> usize {
        let pass = self.begin_reap();
        // Everything the loop touches, as plain values (see CidTable::batch).
        let (qid, mut cids) = (self.qid, self.cids.batch());
        let (stats, last_rejected) = (&mut self.stats, &mut self.last_rejected);
        let n = self.cq.reap(max, |i, e| match take(qid, &mut cids, stats, last_rejected, e) {
            Some(r) => {
                f(i, r);
                true
            }
            None => false,
        });
        drop(cids);
        self.end_reap(pass, n)
    }

    /// What a completion pass starts from.
    #[inline(always)]
    fn begin_reap(&self) -> ReapPass {
        ReapPass { start: self.cq.head(), rejected: self.stats.rejected() }
    }

    /// The end of a completion pass that delivered `n`: the SQ head, the
    /// completion doorbell, the counter.
    #[inline(always)]
    fn end_reap(&mut self, pass: ReapPass, n: usize) -> usize {
        // SQ Head Pointer: how far the controller has consumed the SQ. The
        // last completion taken has the newest, read once after the pass
        // (its slot is ours until the doorbell below). The head of a
        // completion that is not ours is not taken: a pass that rejected
        // one keeps the head from before it (older is safe, the head only
        // moves forward).
        if self.cq.head() != pass.start && self.stats.rejected() == pass.rejected {
            self.sq.update_head(self.cq.last_sq_head());
        }
        if self.cq.head() != pass.start && self.cq.unreported() >= self.cq_ring_every {
            self.stats.mmio_doorbells += self.cq.ring_doorbell(&*self.regs) as u64;
            self.stats.cq_doorbells += 1;
        }
        self.stats.completed += n as u64;
        n
    }

    /// Reap one completion and return the raw entry with its tag (`None`
    /// when rejected), without ringing the completion doorbell: call
    /// [`ring_cq`](Self::ring_cq) after a batch (tracing, admin path).
    pub fn reap_raw(&mut self) -> Option<(Cqe, Option<u64>)> {
        let cqe = self.cq.pop()?;
        let tag = if cqe.sq_id == self.qid { self.cids.release(cqe.cid) } else { None };
        if tag.is_none() {
            let stale = cqe.sq_id == self.qid && self.cids.is_stale(cqe.cid);
            reject(&mut self.stats, &mut self.last_rejected, cqe, self.qid, stale);
        } else {
            // Only a completion that is ours says how far our SQ was consumed.
            self.sq.update_head(cqe.sq_head);
            self.stats.completed += 1;
        }
        Some((cqe, tag))
    }

    /// Ring the completion doorbell if entries were consumed since the last ring.
    pub fn ring_cq(&mut self) {
        if self.cq.needs_doorbell() {
            self.stats.mmio_doorbells += self.cq.ring_doorbell(&*self.regs) as u64;
            self.stats.cq_doorbells += 1;
        }
    }

    /// Forget every outstanding command (after the controller was reset or
    /// the queue deleted: their completions will never come). Returns their tags.
    pub fn abandon_outstanding(&mut self) -> Vec<u64> {
        let cids: Vec<u16> = self.cids.busy_cids().collect();
        cids.into_iter().filter_map(|c| self.cids.release(c)).collect()
    }

    pub(crate) fn memory(&self) -> (DmaRegion, DmaRegion) {
        (self.sq.memory().clone(), self.cq.memory().clone())
    }
}

/// The state a completion pass starts from (see `QueuePair::end_reap`).
#[derive(Clone, Copy)]
struct ReapPass {
    start: u16,
    rejected: u64,
}

/// A completion delivered by [`QueuePair::poll_into`]: [`Completion`]'s
/// fields, with the command specific result (dword 0) loaded only when
/// asked for. Not a reference into the ring: the entry's place in it.
#[derive(Clone, Copy)]
pub struct Reaped<'a> {
    /// The tag given at submission.
    pub tag: u64,
    /// The command identifier it used.
    pub cid: u16,
    /// The raw status field (phase tag included).
    pub raw_status: CqeStatus,
    entry: NewCqe<'a>,
}

impl Reaped<'_> {
    /// True for Successful Completion (every status bit but the phase clear).
    #[inline(always)]
    pub fn ok(&self) -> bool {
        self.raw_status.into_bits() & !1 == 0
    }
    /// The decoded status.
    #[inline]
    pub fn status(&self) -> Status {
        Status::from_cqe_status(self.raw_status)
    }
    /// Command specific result (completion dword 0).
    #[inline(always)]
    pub fn dw0(&self) -> u32 {
        self.entry.dw0()
    }
    /// As a [`Completion`] (dword 0 loaded).
    #[inline]
    pub fn completion(&self) -> Completion {
        Completion { tag: self.tag, cid: self.cid, raw_status: self.raw_status, dw0: self.dw0() }
    }
}

/// Why `p` cannot make a queue pair, if it cannot.
fn check_parts<R: RegisterWindow + ?Sized>(p: &QueuePairParts<R>) -> Result<(), crate::Error> {
    let bad = |what: String| Err(crate::Error::Invalid(format!("queue pair {}: {what}", p.qid)));
    if p.entries > MAX_SQ_ENTRIES {
        return bad(format!("a submission queue of {} is more than the {MAX_SQ_ENTRIES} this driver's command identifiers cover", p.entries));
    }
    if p.cq_entries < p.entries || p.cq_entries > MAX_CQ_ENTRIES {
        return bad(format!("a completion queue of {} for a submission queue of {} (it needs {} to {MAX_CQ_ENTRIES})", p.cq_entries, p.entries, p.entries));
    }
    let fits = |mem: &DmaRegion, bytes: usize| mem.len() >= bytes && (mem.as_ptr() as usize).is_multiple_of(64);
    if !fits(&p.sq_mem, p.entries.as_usize() * nvme_spec::sqe::SQE_SIZE) || !fits(&p.cq_mem, p.cq_entries.as_usize() * nvme_spec::cqe::CQE_SIZE) {
        return bad("ring memory smaller than the ring, or not 64-byte aligned".into());
    }
    // MDTS is at least one memory page (NVMe 1.4c §5.15.2.1): the hot path
    // relies on a one-page transfer never being too large.
    if !p.page_size.is_power_of_two() || p.max_transfer < p.page_size {
        return bad(format!("maximum transfer of {} bytes below one {}-byte page", p.max_transfer, p.page_size));
    }
    let list_bytes = p.entries.capacity() as usize * p.list_pages_per_cmd * p.page_size;
    if p.prp_lists.as_ref().map_or(p.list_pages_per_cmd != 0, |l| l.len() < list_bytes) {
        return bad("PRP list memory smaller than its pages".into());
    }
    Ok(())
}

/// The submission entry of `c` with CID `cid` (as eight qwords,
/// [`Sqe::to_qwords`]): PRP1 alone for data within its first page, else
/// `prps(data)` (the slow path: PRP2 or a list, or why not).
#[inline(always)]
fn entry(c: IoCmd, cid: u16, nsid: u32, page_mask: usize, prps: impl FnOnce(DataPtr) -> Result<(u64, u64), SubmitError>) -> Result<[u64; 8], SubmitError> {
    // CDW0 (opcode, CID) + NSID
    let dw0 = c.op as u64 | (cid as u64) << 16 | (nsid as u64) << 32;
    if c.op == NvmOpcode::Flush {
        return Ok([dw0, 0, 0, 0, 0, 0, 0, 0]);
    }
    debug_assert!(c.blocks >= 1 && c.blocks <= nvme_spec::cmd::MAX_BLOCKS_PER_COMMAND);
    let d = c.data;
    // The common case first (within MDTS too: at least one page).
    let (prp1, prp2) = if in_one_page(d, page_mask) { (d.iova, 0) } else { prps(d)? };
    let cdw12 = (c.blocks - 1) as u64; // NLB, 0's based; CDW13 = 0
    Ok([dw0, 0, 0, prp1, prp2, c.slba, cdw12, 0])
}

/// The entry of a command that [`QueuePair::submit_each`]'s loop does not
/// write itself (a Flush, or data past its first page: PRP2 or a list),
/// pushed at `tail`; or why it cannot be posted. The command comes as
/// scalars (its tag is not needed here): an [`IoCmd`] passed whole would
/// be laid out in memory on the hot path, before the branch to this one.
#[cold]
#[inline(never)]
fn post_other<const STREAMING: bool>(tail: &mut SqTail<'_, STREAMING>, (op, slba, blocks, iova, len): (NvmOpcode, u64, u32, u64, usize), cid: u16, nsid: u32, page_mask: usize, lists: &PrpLists<'_>, max_transfer: usize) -> Result<(), SubmitError> {
    let c = IoCmd { op, slba, blocks, data: DataPtr { iova, len }, tag: 0 };
    tail.push(entry(c, cid, nsid, page_mask, |d| lists.build(cid, d, max_transfer))?);
    Ok(())
}

/// True when PRP1 alone describes `d`: 1 to "rest of its first page" bytes
/// (`page_mask` = memory page size - 1), dword aligned (NVMe 1.4c §4.3).
#[inline(always)]
fn in_one_page(d: DataPtr, page_mask: usize) -> bool {
    // len - 1 wraps to usize::MAX for len 0, which never fits.
    d.len.wrapping_sub(1) <= page_mask - (d.iova as usize & page_mask) && d.iova & 3 == 0
}

/// A new completion `e` of queue `qid`: its CID given back and the
/// command's tag handed out, or, when it is not ours (another SQ, a CID not
/// outstanding), counted as rejected and `None`.
#[inline(always)]
fn take<'a>(qid: u16, cids: &mut CidBatch<'_>, stats: &mut QueueStats, last: &mut Option<Cqe>, e: NewCqe<'a>) -> Option<Reaped<'a>> {
    let (sq_id, dw3) = (e.sq_id(), e.dw3());
    let cid = dw3 as u16;
    let tag = if sq_id == qid { cids.release(cid) } else { None };
    let Some(tag) = tag else {
        let stale = sq_id == qid && cids.is_stale(cid);
        reject(stats, last, e.cqe(), qid, stale);
        return None;
    };
    Some(Reaped { tag, cid, raw_status: CqeStatus::from_bits((dw3 >> 16) as u16), entry: e })
}

/// Count and keep a completion that names another queue or a CID that is
/// not outstanding (a protocol error: it is never delivered). `stale`: the
/// CID is of another generation of one of our slots.
#[cold]
#[inline(never)]
fn reject(stats: &mut QueueStats, last: &mut Option<Cqe>, cqe: Cqe, qid: u16, stale: bool) {
    if cqe.sq_id != qid {
        stats.wrong_sqid += 1;
    } else if stale {
        stats.stale_cid += 1;
    } else {
        stats.invalid_cid += 1;
    }
    *last = Some(cqe);
}

/// The PRP list pages of a queue pair: `pages` pages per CID.
#[derive(Clone, Copy)]
struct PrpLists<'a> {
    mem: Option<&'a DmaRegion>,
    pages: usize,
    page_size: usize,
}

impl PrpLists<'_> {
    /// PRP1/PRP2 for `d`, writing command `cid`'s list pages (those of its
    /// slot, the CID's tag) when needed.
    fn prps(&self, cid: u16, d: DataPtr) -> Result<(u64, u64), PrpError> {
        match self.mem {
            Some(mem) => {
                let offset = cid_tag(cid) * self.pages * self.page_size;
                let mut list = DmaPrpList { mem, offset, pages: self.pages, page_size: self.page_size };
                build_prps(d.iova, d.len, self.page_size, &mut list)
            }
            None => build_prps(d.iova, d.len, self.page_size, &mut NoList),
        }
    }
    /// The slow path of a batch: a transfer longer than its first page.
    #[cold]
    #[inline(never)]
    fn build(&self, cid: u16, d: DataPtr, max_transfer: usize) -> Result<(u64, u64), SubmitError> {
        if d.len > max_transfer {
            return Err(SubmitError::TooLarge { len: d.len, max: max_transfer });
        }
        Ok(self.prps(cid, d)?)
    }
}

/// A list sink with no pages: commands of at most two pages only.
struct NoList;
impl crate::prp::PrpListSink for NoList {
    fn pages(&self) -> usize {
        0
    }
    fn page_iova(&self, _: usize) -> u64 {
        0
    }
    fn write_entry(&mut self, _: usize, _: usize, _: u64) {
        unreachable!("no PRP list pages")
    }
}
