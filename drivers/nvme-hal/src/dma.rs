//! DMA-visible memory: a region the device reads and writes on its own
//! schedule, with a bus address (IOVA) the device uses to reach it.

use std::ptr::NonNull;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Errors allocating or mapping DMA memory.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    /// mmap failed.
    #[error("could not allocate {len} bytes of {kind} memory: {source}{hint}")]
    Alloc {
        len: usize,
        kind: &'static str,
        hint: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The region could not be locked in RAM.
    #[error("could not lock {len} bytes of DMA memory in RAM (RLIMIT_MEMLOCK too low?): {source}; raise it with `ulimit -l unlimited` or run as root")]
    Lock {
        len: usize,
        #[source]
        source: std::io::Error,
    },
    /// Mapping the region for the device (IOMMU) failed.
    #[error("could not map {len} bytes at IOVA {iova:#x} for the device: {msg}")]
    Map { len: usize, iova: u64, msg: String },
    /// The IOMMU refused the mapping (`source`: why, from the IOMMU's driver).
    #[error("could not map {len} bytes at IOVA {iova:#x} for the device: {source}; if this is ENOMEM/ENOSPC the locked-memory limit (ulimit -l) or vfio_iommu_type1's dma_entry_limit is reached")]
    IommuMap {
        len: usize,
        iova: u64,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The allocator's address space is used up.
    #[error("out of DMA memory: asked for {asked} bytes, {left} left in the pool; {hint}")]
    Exhausted { asked: usize, left: usize, hint: &'static str },
}

/// Something that hands out DMA memory a controller can reach.
///
/// The VFIO layer maps memory through the IOMMU; the simulated controller
/// hands out memory it can translate by IOVA; tests use [`HostMemory`].
pub trait DmaAllocator: Send + Sync {
    /// A zeroed region of at least `len` bytes, aligned to `align` in both
    /// virtual and bus address (`align` a power of two, at most the page size
    /// the allocator uses for large requests).
    fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError>;
}

impl<T: DmaAllocator + ?Sized> DmaAllocator for Arc<T> {
    fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError> {
        (**self).alloc(len, align)
    }
}

/// A handle to DMA-visible memory: a raw pointer, a length, a bus address,
/// and a keep-alive for whatever owns the mapping (its `Drop` unmaps).
///
/// No method returns a reference into the memory, and every access is an
/// atomic operation on a naturally aligned word inside the region, both
/// checked on every call (out of bounds or misaligned panics, in release
/// builds too): scalar loads and stores are Relaxed atomics (the same
/// instructions as plain ones on x86-64), or Acquire/Release for the words
/// that hand ownership between host and device (a completion's status
/// dword, a doorbell slot); payloads move with `copy_from`/`copy_to` and
/// `fill`, which move whole aligned words (single bytes at unaligned ends)
/// with Relaxed atomics too. So two users touching the same bytes at once
/// (the simulated controller's thread, another queue pair's thread, a
/// controller reset zeroing a shared page) read unspecified values but never
/// race in the sense of the Rust memory model, which is what lets this type
/// be `Clone` and `Sync` with a safe API. The memory model asks one more
/// thing, which the queue protocol gives: accesses that do race use the same
/// size and address (a doorbell slot is always a 4-byte word; `fill` writes
/// 4-byte words). Which bytes each party may touch when (doorbells, phase
/// tags) is the NVMe protocol's business: payload copies are for bytes the
/// device is not accessing (before the doorbell that publishes a write,
/// after the completion of a read).
///
/// Cloning or slicing gives another handle to the same memory: the memory is
/// shared with a device by design. For a word accessed on a hot path, take
/// a [`DmaWord`] (checked once, when it is made).
#[derive(Clone)]
pub struct DmaRegion {
    ptr: NonNull<u8>,
    len: usize,
    iova: u64,
    _owner: Arc<dyn Send + Sync>,
}

// SAFETY: a DmaRegion is a pointer to memory kept alive by `_owner` (which is
// itself Send + Sync); moving the handle to another thread moves no data.
unsafe impl Send for DmaRegion {}
// SAFETY: every access goes through atomic operations on raw pointers
// (never a reference, never a plain load or store), so concurrent use from
// several threads is free of data races.
unsafe impl Sync for DmaRegion {}

impl std::fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DmaRegion {{ iova: {:#x}, len: {:#x} }}", self.iova, self.len)
    }
}

/// The atomic word at `p`, for one access.
///
/// # Safety
/// `p` must be aligned for `A`, inside live DMA memory for the duration of
/// the access, and that memory is only ever accessed atomically (the
/// [`DmaRegion`] rules).
#[inline(always)]
unsafe fn atomic<'a, A>(p: *mut u8) -> &'a A {
    // SAFETY: the caller's contract; A is one of the std atomic integer
    // types, which have the size and alignment of their integer and whose
    // shared references permit mutation (interior mutability).
    unsafe { &*(p as *const A) }
}

impl DmaRegion {
    /// Wrap memory owned by `owner`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as
    /// `owner` lives, and nothing may create Rust references into it or
    /// access it other than through [`DmaRegion`] and its views.
    pub unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize, iova: u64, owner: Arc<dyn Send + Sync>) -> Self {
        assert!(iova.checked_add(len as u64).is_some(), "DMA region's bus addresses wrap around");
        DmaRegion { ptr, len, iova, _owner: owner }
    }

    /// The bus address the device uses for the first byte.
    #[inline]
    pub fn iova(&self) -> u64 {
        self.iova
    }
    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The virtual address of the first byte, for handing to the kernel
    /// (io_uring buffer registration). Dereferencing it is the caller's
    /// responsibility.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    /// The same memory seen by the device at another bus address (used by
    /// allocators that map host memory at IOVAs of their own choosing).
    pub fn with_iova(mut self, iova: u64) -> Self {
        assert!(iova.checked_add(self.len as u64).is_some(), "DMA region's bus addresses wrap around");
        self.iova = iova;
        self
    }
    /// The same memory with `guard` kept alive (and dropped) together with
    /// the last handle of the returned region and its clones: an allocator
    /// learns this way when the memory is no longer used by its owner.
    pub fn with_guard<G: Send + Sync + 'static>(self, guard: G) -> DmaRegion {
        DmaRegion { ptr: self.ptr, len: self.len, iova: self.iova, _owner: Arc::new((self._owner, guard)) }
    }
    /// A handle to `len` bytes starting at `offset`.
    pub fn sub(&self, offset: usize, len: usize) -> DmaRegion {
        self.range(offset, len, "DMA sub-region out of bounds");
        DmaRegion {
            // SAFETY: offset <= self.len, so the result stays inside (or one past) the allocation.
            ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(offset)) },
            len,
            // In range: iova + self.len does not overflow (checked when made).
            iova: self.iova + offset as u64,
            _owner: self._owner.clone(),
        }
    }
    /// The 4-byte word at `offset` as a [`DmaWord`]: bounds and alignment
    /// are checked here, once, and not again on its accesses.
    pub fn word(&self, offset: usize) -> DmaWord {
        self.at::<u32>(offset);
        DmaWord { mem: self.sub(offset, 4) }
    }

    /// Panics unless `[offset, offset + len)` is inside the region (no
    /// overflow: `offset <= self.len` first). Returns its first byte.
    #[inline(always)]
    fn range(&self, offset: usize, len: usize, what: &'static str) -> *mut u8 {
        assert!(offset <= self.len && self.len - offset >= len, "{what}");
        self.ptr.as_ptr().wrapping_add(offset)
    }

    /// The address of a `T` at `offset`, checked to be inside the region and
    /// aligned for `T` (a misaligned atomic access is undefined behaviour,
    /// so this is a check in release builds too, not a debug assertion).
    #[inline(always)]
    fn at<T>(&self, offset: usize) -> *mut u8 {
        let p = self.range(offset, std::mem::size_of::<T>(), "DMA access out of bounds");
        assert!(p.cast::<T>().is_aligned(), "unaligned DMA access");
        p
    }

    /// Relaxed load of a u32 (4-byte aligned).
    #[inline]
    pub fn read32(&self, offset: usize) -> u32 {
        // SAFETY: `at` checked bounds and alignment; the memory is valid
        // while `_owner` lives and is only accessed atomically.
        unsafe { atomic::<AtomicU32>(self.at::<u32>(offset)) }.load(Ordering::Relaxed)
    }
    /// Relaxed store of a u32.
    #[inline]
    pub fn write32(&self, offset: usize, v: u32) {
        // SAFETY: as for read32.
        unsafe { atomic::<AtomicU32>(self.at::<u32>(offset)) }.store(v, Ordering::Relaxed)
    }
    /// Relaxed load of a u64 (8-byte aligned).
    #[inline]
    pub fn read64(&self, offset: usize) -> u64 {
        // SAFETY: as for read32.
        unsafe { atomic::<AtomicU64>(self.at::<u64>(offset)) }.load(Ordering::Relaxed)
    }
    /// Relaxed store of a u64.
    #[inline]
    pub fn write64(&self, offset: usize, v: u64) {
        // SAFETY: as for read32.
        unsafe { atomic::<AtomicU64>(self.at::<u64>(offset)) }.store(v, Ordering::Relaxed)
    }
    /// Relaxed 8-byte stores into `count` blocks of `stride` bytes from
    /// `offset`: in block k, `value(k)[i]` at byte `at[i]` of the block
    /// (each inside the block; block starts and `at` 8-byte aligned).
    /// Bounds and alignment are checked once for them all, then each is
    /// one store (a few words in every sector of a buffer: the engine's
    /// scramble of a write's content, as fio's).
    #[inline]
    pub fn write64_blocks<const N: usize>(&self, offset: usize, stride: usize, count: usize, at: [usize; N], mut value: impl FnMut(usize) -> [u64; N]) {
        let Some(last) = at.iter().max() else { return };
        if count == 0 {
            return;
        }
        assert!(stride.is_multiple_of(8) && at.iter().all(|&a| a.is_multiple_of(8) && a + 8 <= stride), "unaligned DMA access, or outside its block");
        let span = (count - 1).checked_mul(stride).and_then(|s| s.checked_add(last + 8)).expect("DMA access out of bounds");
        let mut p = self.range(offset, span, "DMA access out of bounds");
        assert!(p.cast::<u64>().is_aligned(), "unaligned DMA access");
        for k in 0..count {
            let v = value(k);
            for i in 0..N {
                // SAFETY: block k starts at offset + k * stride, and at[i] +
                // 8 <= stride: inside the checked range (its last block up
                // to the largest at[i] + 8); 8-byte aligned (the first
                // block's start is, stride and at[i] are multiples of 8);
                // the memory is only accessed atomically.
                unsafe { atomic::<AtomicU64>(p.add(at[i])) }.store(v[i], Ordering::Relaxed);
            }
            p = p.wrapping_add(stride);
        }
    }
    /// Store of 16 dwords (one 64-byte submission entry), 4-byte aligned.
    #[inline]
    pub fn write_dwords16(&self, offset: usize, v: [u32; 16]) {
        let p = self.at::<[u32; 16]>(offset);
        for (i, d) in v.into_iter().enumerate() {
            // SAFETY: the 64 bytes were checked to be inside and 4-byte
            // aligned, so every dword is; accessed only atomically.
            unsafe { atomic::<AtomicU32>(p.add(4 * i)) }.store(d, Ordering::Relaxed)
        }
    }
    /// Load of 16 dwords.
    #[inline]
    pub fn read_dwords16(&self, offset: usize) -> [u32; 16] {
        let p = self.at::<[u32; 16]>(offset);
        // SAFETY: as for write_dwords16.
        std::array::from_fn(|i| unsafe { atomic::<AtomicU32>(p.add(4 * i)) }.load(Ordering::Relaxed))
    }
    /// Load of 3 dwords (the first 12 bytes of a completion entry).
    #[inline]
    pub fn read_dwords3(&self, offset: usize) -> [u32; 3] {
        let p = self.at::<[u32; 3]>(offset);
        // SAFETY: as for write_dwords16, for 12 bytes.
        std::array::from_fn(|i| unsafe { atomic::<AtomicU32>(p.add(4 * i)) }.load(Ordering::Relaxed))
    }
    /// Store of 3 dwords.
    #[inline]
    pub fn write_dwords3(&self, offset: usize, v: [u32; 3]) {
        let p = self.at::<[u32; 3]>(offset);
        for (i, d) in v.into_iter().enumerate() {
            // SAFETY: as for write_dwords16, for 12 bytes.
            unsafe { atomic::<AtomicU32>(p.add(4 * i)) }.store(d, Ordering::Relaxed)
        }
    }
    /// Atomic load with Acquire ordering: the word that tells whether the
    /// other side has published new data (a completion's phase/status dword).
    /// Everything the other side wrote before its Release store is visible
    /// after this load observes that store.
    #[inline]
    pub fn load32_acquire(&self, offset: usize) -> u32 {
        // SAFETY: as for read32.
        unsafe { atomic::<AtomicU32>(self.at::<u32>(offset)) }.load(Ordering::Acquire)
    }
    /// Atomic store with Release ordering (publishes earlier stores).
    #[inline]
    pub fn store32_release(&self, offset: usize, v: u32) {
        // SAFETY: as for read32.
        unsafe { atomic::<AtomicU32>(self.at::<u32>(offset)) }.store(v, Ordering::Release)
    }
    /// Copy `src` into the region at `offset`.
    pub fn copy_from(&self, offset: usize, src: &[u8]) {
        let dst = self.range(offset, src.len(), "DMA copy out of bounds");
        // Bytes up to the first 8-byte boundary, whole qwords, the rest.
        let head = dst.align_offset(8).min(src.len());
        let (first, rest) = src.split_at(head);
        let (words, last) = rest.split_at(rest.len() & !7);
        for (i, &b) in first.iter().enumerate() {
            // SAFETY: dst + i is inside the checked range; bytes are always
            // aligned; the memory is only accessed atomically.
            unsafe { atomic::<AtomicU8>(dst.add(i)) }.store(b, Ordering::Relaxed);
        }
        let at = dst.wrapping_add(head);
        for (i, w) in words.chunks_exact(8).enumerate() {
            let q = u64::from_ne_bytes(w.try_into().expect("chunks of 8"));
            // SAFETY: 8 bytes inside the checked range, 8-byte aligned (`at`
            // is on the boundary); accessed only atomically.
            unsafe { atomic::<AtomicU64>(at.add(8 * i)) }.store(q, Ordering::Relaxed);
        }
        let at = at.wrapping_add(words.len());
        for (i, &b) in last.iter().enumerate() {
            // SAFETY: as for the first bytes.
            unsafe { atomic::<AtomicU8>(at.add(i)) }.store(b, Ordering::Relaxed);
        }
    }
    /// Copy from the region at `offset` into `dst`.
    pub fn copy_to(&self, offset: usize, dst: &mut [u8]) {
        let src = self.range(offset, dst.len(), "DMA copy out of bounds");
        let head = src.align_offset(8).min(dst.len());
        let (first, rest) = dst.split_at_mut(head);
        let len = rest.len();
        let (words, last) = rest.split_at_mut(len & !7);
        for (i, b) in first.iter_mut().enumerate() {
            // SAFETY: as in copy_from.
            *b = unsafe { atomic::<AtomicU8>(src.add(i)) }.load(Ordering::Relaxed);
        }
        let at = src.wrapping_add(head);
        for (i, w) in words.chunks_exact_mut(8).enumerate() {
            // SAFETY: as in copy_from.
            let q = unsafe { atomic::<AtomicU64>(at.add(8 * i)) }.load(Ordering::Relaxed);
            w.copy_from_slice(&q.to_ne_bytes());
        }
        let at = at.wrapping_add(words.len());
        for (i, b) in last.iter_mut().enumerate() {
            // SAFETY: as in copy_from.
            *b = unsafe { atomic::<AtomicU8>(at.add(i)) }.load(Ordering::Relaxed);
        }
    }
    /// Copy `len` bytes from `src` at `src_off` into this region at `offset`
    /// (region to region). The ranges may overlap: the bytes go through an
    /// ordinary buffer, so every access to DMA memory stays an atomic one.
    pub fn copy_from_region(&self, offset: usize, src: &DmaRegion, src_off: usize, len: usize) {
        self.range(offset, len, "DMA copy out of bounds");
        src.range(src_off, len, "DMA copy out of bounds");
        let mut stage = vec![0u8; len];
        src.copy_to(src_off, &mut stage);
        self.copy_from(offset, &stage);
    }
    /// Set `len` bytes at `offset` to `byte`: 4-byte words with Relaxed
    /// atomic stores (single bytes at unaligned ends), so a fill may race
    /// other users' 4-byte accesses to the same words (a controller reset
    /// zeroing the shadow doorbell pages while queue threads store to their
    /// slots) without undefined behaviour.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) {
        let dst = self.range(offset, len, "DMA fill out of bounds");
        let word = u32::from_ne_bytes([byte; 4]);
        let mut i = 0;
        while i < len && !(dst as usize + i).is_multiple_of(4) {
            // SAFETY: inside the checked range; accessed only atomically.
            unsafe { atomic::<AtomicU8>(dst.add(i)) }.store(byte, Ordering::Relaxed);
            i += 1;
        }
        while len - i >= 4 {
            // SAFETY: 4 bytes inside the checked range, 4-byte aligned.
            unsafe { atomic::<AtomicU32>(dst.add(i)) }.store(word, Ordering::Relaxed);
            i += 4;
        }
        while i < len {
            // SAFETY: as for the first bytes.
            unsafe { atomic::<AtomicU8>(dst.add(i)) }.store(byte, Ordering::Relaxed);
            i += 1;
        }
    }
}

/// One naturally aligned 4-byte word of DMA memory (a shadow doorbell or
/// EventIdx slot), made by [`DmaRegion::word`], which checks bounds and
/// alignment once: its accesses are then one atomic instruction each, with
/// no check, for the hot path. It keeps the memory alive like a region.
#[derive(Clone, Debug)]
pub struct DmaWord {
    /// Exactly the word: 4 bytes, 4-byte aligned (checked when made).
    mem: DmaRegion,
}

impl DmaWord {
    #[inline(always)]
    fn cell(&self) -> &AtomicU32 {
        // SAFETY: the word is inside live memory (kept by `mem`) and 4-byte
        // aligned, both checked in DmaRegion::word; DMA memory is only
        // accessed atomically.
        unsafe { atomic::<AtomicU32>(self.mem.ptr.as_ptr()) }
    }
    /// The bus address of the word.
    pub fn iova(&self) -> u64 {
        self.mem.iova
    }
    /// Relaxed load.
    #[inline(always)]
    pub fn load(&self) -> u32 {
        self.cell().load(Ordering::Relaxed)
    }
    /// Relaxed store.
    #[inline(always)]
    pub fn store(&self, v: u32) {
        self.cell().store(v, Ordering::Relaxed)
    }
    /// Acquire load (see [`DmaRegion::load32_acquire`]).
    #[inline(always)]
    pub fn load_acquire(&self) -> u32 {
        self.cell().load(Ordering::Acquire)
    }
    /// Release store (see [`DmaRegion::store32_release`]).
    #[inline(always)]
    pub fn store_release(&self, v: u32) {
        self.cell().store(v, Ordering::Release)
    }
}

/// A ring of fixed-size entries in DMA memory (a submission or completion
/// queue), with accessors that check only `index < entries`: the region's
/// size and alignment were checked once, at construction, so one compare per
/// access keeps every access in bounds. The entry size, `1 << SHIFT` bytes,
/// is part of the type ([`SqRing`]: 64-byte submission entries, [`CqRing`]:
/// 16-byte completion entries), so the address arithmetic is a constant shift
/// and a 64-byte store cannot be aimed at a ring of 16-byte entries. The same
/// rules as [`DmaRegion`]: no references into the ring, every access an
/// aligned atomic operation (Relaxed, or Acquire/Release for the status
/// dword): on x86-64 the same instructions as plain loads and stores.
#[derive(Clone, Debug)]
pub struct DmaRing<const SHIFT: u32> {
    mem: DmaRegion,
    entries: usize,
}

/// A ring of 64-byte entries (NVMe submission queue entries).
pub type SqRing = DmaRing<6>;
/// A ring of 16-byte entries (NVMe completion queue entries).
pub type CqRing = DmaRing<4>;

impl<const SHIFT: u32> DmaRing<SHIFT> {
    /// A ring of `entries` entries of `1 << SHIFT` bytes (at least 16) at
    /// the start of `mem`, which must be 64-byte aligned and large enough.
    pub fn new(mem: DmaRegion, entries: usize) -> Self {
        const { assert!(4 <= SHIFT && SHIFT <= 12, "ring entries are 16 bytes to 4 KiB") };
        assert!(entries.checked_mul(1 << SHIFT).is_some_and(|b| b <= mem.len()), "ring larger than its memory");
        assert_eq!(mem.as_ptr() as usize % 64, 0, "ring memory must be 64-byte aligned");
        DmaRing { mem, entries }
    }
    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.entries
    }
    /// The memory behind the ring.
    pub fn region(&self) -> &DmaRegion {
        &self.mem
    }
    /// A view of the ring for one pass of a hot loop. Its base address and
    /// size are plain values the compiler keeps in registers: a store into
    /// the ring (which could alias anything, as far as it knows) does not
    /// make it reload them from the ring's owner. Same checks as the ring.
    #[inline(always)]
    pub fn view(&self) -> RingView<'_, SHIFT> {
        RingView { base: self.mem.ptr, entries: self.entries, _ring: PhantomData }
    }
    /// Atomic Acquire load of dword 3 of the entry at `index`.
    #[inline(always)]
    pub fn load_dw3_acquire(&self, index: usize) -> u32 {
        self.view().load_dw3_acquire(index)
    }
    /// Load of dwords 0-2 of the entry at `index`.
    #[inline(always)]
    pub fn read_dw012(&self, index: usize) -> [u32; 3] {
        self.view().read_dw012(index)
    }
}

impl DmaRing<6> {
    /// Store a 64-byte entry (8 little-endian qwords) at `index`.
    #[inline(always)]
    pub fn write64(&self, index: usize, q: [u64; 8]) {
        self.view().write64(index, q)
    }
    /// Load of the 64-byte entry at `index` as 16 dwords (the controller's
    /// fetch), as 8 qword loads.
    #[inline(always)]
    pub fn read_dwords16(&self, index: usize) -> [u32; 16] {
        let p = self.view().entry(index).p;
        let mut d = [0u32; 16];
        for i in 0..8 {
            // SAFETY: index checked; 64 bytes inside a 64-byte entry; each
            // qword 8-byte aligned (as for write64); accessed only atomically.
            let q = u64::from_le(unsafe { atomic::<AtomicU64>(p.wrapping_add(8 * i)) }.load(Ordering::Relaxed));
            (d[2 * i], d[2 * i + 1]) = (q as u32, (q >> 32) as u32);
        }
        d
    }
}

/// A [`DmaRing`] borrowed for one pass of a hot loop (see [`DmaRing::view`]).
#[derive(Clone, Copy)]
pub struct RingView<'a, const SHIFT: u32> {
    base: NonNull<u8>,
    entries: usize,
    _ring: PhantomData<&'a DmaRing<SHIFT>>,
}

impl<'a, const SHIFT: u32> RingView<'a, SHIFT> {
    /// Number of entries.
    #[inline(always)]
    pub fn entries(&self) -> usize {
        self.entries
    }
    /// The entry at `index` (checked: `index < entries`).
    #[inline(always)]
    pub fn entry(&self, index: usize) -> RingEntry<'a, SHIFT> {
        assert!(index < self.entries, "ring index out of bounds");
        // In bounds: index < entries and entries << SHIFT <= len (checked in
        // DmaRing::new); the borrow keeps the ring's memory alive.
        RingEntry { p: self.base.as_ptr().wrapping_add(index << SHIFT), _ring: PhantomData }
    }
    /// A cursor at entry `index` (checked once, here): see [`RingCursor`].
    #[inline(always)]
    pub fn cursor(&self, index: usize) -> RingCursor<'a, SHIFT> {
        let at = self.entry(index).p;
        let base = self.base.as_ptr();
        RingCursor { at, base, end: base.wrapping_add(self.entries << SHIFT), _ring: PhantomData }
    }
    /// Atomic Acquire load of dword 3 of the entry at `index` (a
    /// completion's status and phase).
    #[inline(always)]
    pub fn load_dw3_acquire(&self, index: usize) -> u32 {
        self.entry(index).load_dw3_acquire()
    }
    /// Load of dwords 0-2 of the entry at `index`.
    #[inline(always)]
    pub fn read_dw012(&self, index: usize) -> [u32; 3] {
        self.entry(index).read_dw012()
    }
    /// Load of dword `K` of the entry at `index` (a completion's result or
    /// SQ head/id dword, read after its status dword).
    #[inline(always)]
    pub fn read_dw<const K: usize>(&self, index: usize) -> u32 {
        self.entry(index).read_dw::<K>()
    }
    /// Hint that the entry at `index` is about to be read (x86 PREFETCHT0;
    /// nothing elsewhere): asking for several entries at once lets their
    /// transfers overlap, rather than each load waiting for its own. A hint
    /// only: memory is unchanged and an index past the end is ignored.
    #[inline(always)]
    pub fn prefetch_read(&self, index: usize) {
        #[cfg(target_arch = "x86_64")]
        if index < self.entries {
            let p = self.base.as_ptr().wrapping_add(index << SHIFT) as *const i8;
            // SAFETY: SSE (which the intrinsic's target feature names) is
            // part of the x86_64 baseline; a prefetch reads and writes no
            // memory and never faults; p is inside the ring besides.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = index;
    }
    /// Store of dwords 0-2 of the entry at `index` (the controller side of
    /// a completion: everything but the status and phase dword), as one
    /// qword and one dword.
    #[inline(always)]
    pub fn write_dw012(&self, index: usize, v: [u32; 3]) {
        self.entry(index).write_dw012(v)
    }
    /// Atomic Release store of dword 3 of the entry at `index` (a
    /// completion's status and phase, written after dwords 0-2 so that the
    /// host's Acquire load of the phase makes the whole entry visible).
    #[inline(always)]
    pub fn store_dw3_release(&self, index: usize, v: u32) {
        self.entry(index).store_dw3_release(v)
    }
}

/// A position in a ring that is always one of its entries: made by
/// [`RingView::cursor`] (the one check) and moved only by
/// [`advance`](Self::advance), which wraps at the end. So the entry at it
/// ([`RingCursor::entry`]) needs no check: a queue's loop walks its ring
/// with one compare per entry, the wrap's. It holds the entry's address,
/// not its index (no shift and add per access).
#[derive(Clone, Copy)]
pub struct RingCursor<'a, const SHIFT: u32> {
    /// Invariant: `base <= at < end`, at a multiple of `1 << SHIFT` from base.
    at: *mut u8,
    base: *mut u8,
    end: *mut u8,
    _ring: PhantomData<&'a DmaRing<SHIFT>>,
}

impl<'a, const SHIFT: u32> RingCursor<'a, SHIFT> {
    /// The entry at the cursor.
    #[inline(always)]
    pub fn entry(&self) -> RingEntry<'a, SHIFT> {
        RingEntry { p: self.at, _ring: PhantomData }
    }
    /// The cursor's index in the ring.
    #[inline(always)]
    pub fn index(&self) -> usize {
        (self.at as usize - self.base as usize) >> SHIFT
    }
    /// Move to the next entry, wrapping to the first after the last;
    /// returns true when it wrapped (once per lap, kept out of the line).
    #[inline(always)]
    pub fn advance(&mut self) -> bool {
        self.at = self.at.wrapping_add(1 << SHIFT);
        if self.at == self.end {
            self.at = wrap_to(self.base);
            return true;
        }
        false
    }
}

/// The wrap of a [`RingCursor`]: once per lap, out of the loop's line.
#[cold]
#[inline(never)]
fn wrap_to(base: *mut u8) -> *mut u8 {
    base
}

/// One entry of a ring, in bounds by construction ([`RingView::entry`]
/// checks the index, a [`RingCursor`] is always inside): its accesses
/// check nothing. Every access an aligned atomic one, as for [`DmaRing`].
#[derive(Clone, Copy)]
pub struct RingEntry<'a, const SHIFT: u32> {
    /// Invariant: the start of an entry of a live ring (`1 << SHIFT`
    /// bytes, at least 16, inside the region, 16-byte aligned).
    p: *mut u8,
    _ring: PhantomData<&'a DmaRing<SHIFT>>,
}

impl<const SHIFT: u32> RingEntry<'_, SHIFT> {
    /// Atomic Acquire load of dword 3 (a completion's status and phase).
    #[inline(always)]
    pub fn load_dw3_acquire(&self) -> u32 {
        // SAFETY: the entry is inside the ring (type invariant) and at least
        // 16 bytes, so bytes 12..16 are inside; 4-byte aligned; accessed
        // only atomically.
        unsafe { atomic::<AtomicU32>(self.p.wrapping_add(12)) }.load(Ordering::Acquire)
    }
    /// Load of dwords 0-2.
    #[inline(always)]
    pub fn read_dw012(&self) -> [u32; 3] {
        // SAFETY: type invariant; 12 bytes inside a >=16-byte entry; each
        // dword 4-byte aligned; accessed only atomically.
        std::array::from_fn(|i| unsafe { atomic::<AtomicU32>(self.p.wrapping_add(4 * i)) }.load(Ordering::Relaxed))
    }
    /// Load of dword `K`.
    #[inline(always)]
    pub fn read_dw<const K: usize>(&self) -> u32 {
        const { assert!(K < (1 << SHIFT) / 4, "dword index beyond the entry") };
        // SAFETY: type invariant; bytes 4K..4K+4 are inside the entry (K is
        // below its dword count); 4-byte aligned; accessed only atomically.
        unsafe { atomic::<AtomicU32>(self.p.wrapping_add(4 * K)) }.load(Ordering::Relaxed)
    }
    /// Load of 16-bit word `K` (bytes 2K..2K+2: a completion's SQ
    /// Identifier is word 5), alone: a compare can take it from memory.
    #[inline(always)]
    pub fn read_w<const K: usize>(&self) -> u16 {
        const { assert!(K < (1 << SHIFT) / 2, "word index beyond the entry") };
        // SAFETY: type invariant; bytes 2K..2K+2 are inside the entry (K is
        // below its word count); 2-byte aligned; accessed only atomically.
        unsafe { atomic::<AtomicU16>(self.p.wrapping_add(2 * K)) }.load(Ordering::Relaxed)
    }
    /// Store of dwords 0-2, as one qword and one dword.
    #[inline(always)]
    pub fn write_dw012(&self, v: [u32; 3]) {
        let dw01 = v[0] as u64 | (v[1] as u64) << 32;
        // SAFETY: type invariant; bytes 0..12 are inside a >=16-byte entry;
        // the entry is 16-byte aligned, so the qword and the dword are
        // aligned; accessed only atomically.
        unsafe {
            atomic::<AtomicU64>(self.p).store(dw01.to_le(), Ordering::Relaxed);
            atomic::<AtomicU32>(self.p.wrapping_add(8)).store(v[2].to_le(), Ordering::Relaxed);
        }
    }
    /// Atomic Release store of dword 3.
    #[inline(always)]
    pub fn store_dw3_release(&self, v: u32) {
        // SAFETY: as load_dw3_acquire.
        unsafe { atomic::<AtomicU32>(self.p.wrapping_add(12)) }.store(v, Ordering::Release)
    }
}

impl RingView<'_, 6> {
    /// Store a 64-byte entry at `index`: [`RingEntry::write64`].
    #[inline(always)]
    pub fn write64(&self, index: usize, q: [u64; 8]) {
        self.entry(index).write64(q)
    }
    /// Store a 64-byte entry at `index` with streaming stores:
    /// [`RingEntry::write64_stream`].
    #[inline(always)]
    pub fn write64_stream(&self, index: usize, q: [u64; 8]) {
        self.entry(index).write64_stream(q)
    }
}

impl RingEntry<'_, 6> {
    /// Store the 64-byte entry (8 little-endian qwords), one aligned 8-byte
    /// Relaxed atomic store per qword. (Plain stores take fewer instructions
    /// than assembling 16-byte vectors: four of the eight qwords of a read
    /// or write are zero and become immediate stores.)
    #[inline(always)]
    pub fn write64(&self, q: [u64; 8]) {
        for (i, v) in q.into_iter().enumerate() {
            // SAFETY: the 64 bytes are inside the region (type invariant);
            // entries are 64-byte aligned (aligned base, 64-byte entries), so
            // each qword is 8-byte aligned; accessed only atomically.
            unsafe { atomic::<AtomicU64>(self.p.wrapping_add(8 * i)) }.store(v.to_le(), Ordering::Relaxed)
        }
    }

    /// Store the entry like [`RingEntry::write64`], with non-temporal
    /// (streaming) stores where the CPU has them (x86_64 MOVNTI): the
    /// entry's cache line is written whole, without first fetching it from
    /// the cache of the core (or the device) that last read it, and leaves
    /// this core's cache. Streaming stores are weakly ordered: call
    /// [`stream_fence`] before publishing the entry (the doorbell).
    #[inline(always)]
    pub fn write64_stream(&self, q: [u64; 8]) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self.p;
            // One asm block with constant offsets from one base register
            // (the intrinsic, _mm_stream_si64, computes each address apart).
            // SAFETY: as write64: the 64 bytes are inside the region (type
            // invariant), and each qword is 8-byte aligned; MOVNTI (SSE2) is
            // in the x86_64 baseline. The block writes only those 64 bytes
            // and touches no stack or flags; an aligned 8-byte store is
            // single-copy atomic on x86-64, so the block does what eight
            // Relaxed atomic stores (then a fence) do.
            unsafe {
                std::arch::asm!(
                    "movnti qword ptr [{p}], {q0}",
                    "movnti qword ptr [{p} + 8], {q1}",
                    "movnti qword ptr [{p} + 16], {q2}",
                    "movnti qword ptr [{p} + 24], {q3}",
                    "movnti qword ptr [{p} + 32], {q4}",
                    "movnti qword ptr [{p} + 40], {q5}",
                    "movnti qword ptr [{p} + 48], {q6}",
                    "movnti qword ptr [{p} + 56], {q7}",
                    p = in(reg) p,
                    q0 = in(reg) q[0], q1 = in(reg) q[1], q2 = in(reg) q[2], q3 = in(reg) q[3],
                    q4 = in(reg) q[4], q5 = in(reg) q[5], q6 = in(reg) q[6], q7 = in(reg) q[7],
                    options(nostack, preserves_flags),
                )
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.write64(q)
    }
}

/// Make every earlier streaming store ([`RingView::write64_stream`])
/// visible before any later store (x86 SFENCE; a Release fence elsewhere,
/// where the streaming store is a plain one).
#[inline(always)]
pub fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86_64 baseline; SFENCE only orders stores.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(Ordering::Release)
}

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; it is not tied to a thread.
unsafe impl Send for Mapping {}
// SAFETY: Mapping itself is never read or written through; it only unmaps on drop.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap and are unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Ordinary process memory as a DMA region whose "bus address" is its
/// virtual address: for unit tests, io_uring registered buffers, and as the
/// backing of allocators that choose their own IOVAs (VFIO, the simulator).
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMemory {
    /// Back allocations of 2 MiB multiples with hugepages (MAP_HUGETLB).
    pub hugepages: bool,
    /// Lock the pages in RAM (mlock), as memory a device DMAs into must be.
    pub lock: bool,
}

/// Size of an x86-64 huge page.
pub const HUGEPAGE_SIZE: usize = 2 << 20;

impl HostMemory {
    /// Plain pageable memory, for tests and the simulator.
    pub fn plain() -> Self {
        HostMemory { hugepages: false, lock: false }
    }
    /// Map `len` bytes (rounded up to the page size) of zeroed memory.
    pub fn map(&self, len: usize) -> Result<DmaRegion, DmaError> {
        let page = if self.hugepages { HUGEPAGE_SIZE } else { 4096 };
        let Some(len) = len.max(1).checked_next_multiple_of(page) else {
            return Err(DmaError::Alloc {
                len,
                kind: if self.hugepages { "hugepage" } else { "anonymous" },
                hint: "; the size does not fit the address space",
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        };
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if self.hugepages {
            flags |= libc::MAP_HUGETLB;
        }
        // SAFETY: anonymous mapping with no address hint; the result is checked.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(DmaError::Alloc {
                len,
                kind: if self.hugepages { "hugepage" } else { "anonymous" },
                hint: if self.hugepages {
                    "; reserve hugepages with `echo 512 > /proc/sys/vm/nr_hugepages` (nvme-bypass bind does this)"
                } else {
                    ""
                },
                source: std::io::Error::last_os_error(),
            });
        }
        let ptr = NonNull::new(p.cast::<u8>()).expect("mmap returned NULL");
        let owner = Arc::new(Mapping { ptr, len });
        if self.lock {
            // SAFETY: the range is the mapping just created.
            if unsafe { libc::mlock(p, len) } != 0 {
                return Err(DmaError::Lock { len, source: std::io::Error::last_os_error() });
            }
        }
        // SAFETY: ptr is valid for len bytes while `owner` (the mapping) lives.
        Ok(unsafe { DmaRegion::from_raw_parts(ptr, len, ptr.as_ptr() as u64, owner) })
    }
}

impl DmaAllocator for HostMemory {
    fn alloc(&self, len: usize, align: usize) -> Result<DmaRegion, DmaError> {
        // The mapping is page aligned: 4 KiB, or 2 MiB with hugepages.
        assert!(align.is_power_of_two() && (align <= 4096 || self.hugepages && align <= HUGEPAGE_SIZE));
        self.map(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_and_copy_round_trip() {
        let r = HostMemory::plain().alloc(8192, 4096).unwrap();
        assert_eq!(r.len(), 8192);
        assert_eq!(r.iova() % 4096, 0);
        r.write32(4, 0xdead_beef);
        assert_eq!(r.read32(4), 0xdead_beef);
        r.write64(8, u64::MAX);
        assert_eq!(r.read64(8), u64::MAX);
        r.copy_from(100, b"hello");
        let mut b = [0u8; 5];
        r.copy_to(100, &mut b);
        assert_eq!(&b, b"hello");
        let s = r.sub(4096, 4096);
        assert_eq!(s.iova(), r.iova() + 4096);
        s.store32_release(0, 7);
        assert_eq!(r.load32_acquire(4096), 7);
        let d: [u32; 16] = std::array::from_fn(|i| i as u32);
        s.write_dwords16(64, d);
        assert_eq!(s.read_dwords16(64), d);
        s.fill(0, 4096, 0);
        assert_eq!(s.read64(64), 0);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn out_of_bounds_panics() {
        let r = HostMemory::plain().alloc(4096, 4096).unwrap();
        r.read32(4094);
    }

    #[test]
    #[should_panic(expected = "unaligned DMA access")]
    fn misaligned_scalar_access_panics_in_release_builds_too() {
        // A misaligned atomic access is undefined behaviour: it must be
        // refused by a check that release builds keep.
        let r = HostMemory::plain().alloc(4096, 4096).unwrap();
        r.load32_acquire(2);
    }

    #[test]
    fn every_scalar_access_checks_alignment() {
        let r = HostMemory::plain().alloc(4096, 4096).unwrap();
        let refused = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
        assert!(refused(&|| { let _ = r.read32(1); }));
        assert!(refused(&|| r.write32(6, 0)));
        assert!(refused(&|| { let _ = r.read64(4); }));
        assert!(refused(&|| r.write64(12, 0)));
        assert!(refused(&|| r.store32_release(3, 0)));
        assert!(refused(&|| { let _ = r.read_dwords16(2); }));
        assert!(refused(&|| r.write_dwords3(1, [0; 3])));
        assert!(refused(&|| drop(r.word(4098))));
        assert!(refused(&|| drop(r.word(4096))), "a word past the end");
        // Aligned ones work, and a word is the same memory as the region.
        let w = r.word(4092);
        w.store_release(0xabcd);
        assert_eq!(r.read32(4092), 0xabcd);
        r.write32(4092, 7);
        assert_eq!((w.load(), w.load_acquire(), w.iova()), (7, 7, r.iova() + 4092));
    }

    #[test]
    fn block_stores_land_in_each_block_and_are_checked_once_for_all() {
        let r = HostMemory::plain().alloc(4096, 4096).unwrap();
        // Three words in each of 7 sectors of 512 bytes from byte 512.
        r.write64_blocks(512, 512, 7, [64, 48, 56], |k| [k as u64, 100 + k as u64, 200]);
        for k in 0..7 {
            let at = 512 + 512 * k;
            assert_eq!([r.read64(at + 64), r.read64(at + 48), r.read64(at + 56)], [k as u64, 100 + k as u64, 200]);
            assert_eq!(r.read64(at), 0, "nothing else written");
        }
        assert_eq!(r.read64(48), 0, "nothing before the first block");
        r.write64_blocks(0, 512, 0, [0], |_| [9]);
        assert_eq!(r.read64(0), 0, "no block, no store");
        let refused = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
        assert!(refused(&|| r.write64_blocks(512, 512, 8, [0], |_| [1])), "a block past the end");
        assert!(refused(&|| r.write64_blocks(0, 512, 8, [505], |_| [1])), "a word past its block");
        assert!(refused(&|| r.write64_blocks(0, 512, 1, [4], |_| [1])), "unaligned in its block");
        assert!(refused(&|| r.write64_blocks(4, 512, 1, [0], |_| [1])), "unaligned block");
        assert!(refused(&|| r.write64_blocks(0, 500, 2, [0], |_| [1])), "unaligned stride");
        // The last block's words may end before the region's end.
        r.write64_blocks(3584, 512, 1, [504, 0], |_| [5, 6]);
        assert_eq!((r.read64(4088), r.read64(3584)), (5, 6));
    }

    #[test]
    fn copies_and_fills_at_any_offset_and_length() {
        // Unaligned heads and tails go byte by byte, the middle by words:
        // every split must land the same bytes as a plain copy would.
        let r = HostMemory::plain().alloc(8192, 4096).unwrap();
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
        for off in 0..12 {
            for len in [0, 1, 3, 7, 8, 9, 15, 16, 17, 100, 300] {
                r.fill(0, 400, 0xee);
                r.copy_from(off, &src[..len]);
                let mut back = vec![0u8; 400];
                r.copy_to(0, &mut back);
                assert!(back[..off].iter().all(|&b| b == 0xee), "before {off}+{len}");
                assert_eq!(&back[off..off + len], &src[..len], "{off}+{len}");
                assert!(back[off + len..].iter().all(|&b| b == 0xee), "after {off}+{len}");
                let mut part = vec![0u8; len];
                r.copy_to(off, &mut part);
                assert_eq!(part, &src[..len]);
                r.fill(off, len, 0x11);
                r.copy_to(0, &mut back);
                assert!(back[off..off + len].iter().all(|&b| b == 0x11) && back[off + len..].iter().all(|&b| b == 0xee));
            }
        }
        // Region to region, overlapping forwards and backwards (memmove).
        r.copy_from(0, &src);
        r.copy_from_region(5, &r, 0, 300);
        let mut back = vec![0u8; 300];
        r.copy_to(5, &mut back);
        assert_eq!(back, src);
        r.copy_from_region(0, &r, 5, 300);
        r.copy_to(0, &mut back);
        assert_eq!(back, src);
    }

    #[test]
    fn a_fill_may_race_other_threads_slot_stores() {
        // A controller reset zeroes the shadow doorbell pages while queue
        // threads store into their slots: every access atomic, so this is
        // no data race (under Miri, a plain fill here is reported as one).
        let r = HostMemory::plain().alloc(4096, 4096).unwrap();
        let queue = r.sub(0, 64);
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..rounds {
                    queue.store32_release(8, i);
                    let _ = queue.load32_acquire(12);
                }
            });
            for _ in 0..rounds {
                r.fill(0, 64, 0);
            }
        });
        r.fill(0, 64, 0);
        assert_eq!(r.read32(8), 0);
    }

    #[test]
    #[should_panic(expected = "wrap around")]
    fn bus_addresses_cannot_wrap() {
        // A region ending past 2^64 would hand the device wrapped addresses.
        let r = HostMemory::plain().alloc(4096, 4096).unwrap();
        let _ = r.with_iova(u64::MAX - 100).sub(200, 4);
    }

    #[test]
    fn a_size_past_the_address_space_is_an_error_not_a_wrapped_mapping() {
        for huge in [false, true] {
            let e = HostMemory { hugepages: huge, lock: false }.map(usize::MAX - 10).unwrap_err();
            assert!(e.to_string().contains("does not fit"), "{e}");
        }
    }

    #[test]
    #[should_panic]
    fn alignments_that_are_not_powers_of_two_are_refused() {
        let _ = HostMemory { hugepages: true, lock: false }.alloc(4096, 3);
    }

    #[test]
    fn region_outlives_allocator_handle() {
        let r = HostMemory::plain().alloc(4096, 4096).unwrap();
        let s = r.sub(0, 16);
        drop(r);
        s.write32(0, 1);
        assert_eq!(s.read32(0), 1);
    }

    #[test]
    fn ring_stores_land_where_the_loads_look() {
        // Streaming and cached entry stores write the same bytes; the
        // controller-side completion stores fill dwords 0-3 of their slot
        // and nothing else; prefetch hints change nothing.
        let mem = HostMemory::plain();
        let (a, b) = (SqRing::new(mem.map(4096).unwrap(), 4), SqRing::new(mem.map(4096).unwrap(), 4));
        let q = [0x0102_0304_0506_0708, 0, u64::MAX, 3, 4, 5, 6, 7];
        a.view().write64(2, q);
        b.view().write64_stream(2, q);
        b.view().prefetch_read(1);
        b.view().prefetch_read(9); // past the end: ignored
        stream_fence();
        assert_eq!(a.read_dwords16(2), b.read_dwords16(2));
        assert_eq!(b.view().read_dw::<15>(2), 0);
        assert_eq!(b.view().read_dw::<0>(2), 0x0506_0708);
        let cq = CqRing::new(mem.map(4096).unwrap(), 8);
        cq.view().write_dw012(5, [1, 2, 3]);
        cq.view().store_dw3_release(5, 4);
        assert_eq!(cq.read_dw012(5), [1, 2, 3]);
        assert_eq!(cq.load_dw3_acquire(5), 4);
        assert_eq!((cq.load_dw3_acquire(4), cq.view().read_dw::<0>(6)), (0, 0), "neighbours untouched");
    }
}
