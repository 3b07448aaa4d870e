//! Linux native AIO ("libaio") without libaio: the four system calls
//! (`io_setup`, `io_submit`, `io_getevents`, `io_destroy`) through
//! `libc::syscall`, with our own mirrors of the kernel's `struct iocb` and
//! `struct io_event` (`include/uapi/linux/aio_abi.h`). This is what fio's
//! `libaio` engine does through the library, minus the library.

use std::io;

/// `IOCB_CMD_PREAD`.
pub const IOCB_CMD_PREAD: u16 = 0;
/// `IOCB_CMD_PWRITE`.
pub const IOCB_CMD_PWRITE: u16 = 1;
/// `IOCB_CMD_FSYNC`.
pub const IOCB_CMD_FSYNC: u16 = 2;

/// `struct iocb`: one request, as io_submit reads it. 64 bytes.
/// The kernel copies it during `io_submit`; only its address comes back,
/// in [`IoEvent::obj`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Iocb {
    /// Returned as-is in [`IoEvent::data`]: our slot number.
    pub aio_data: u64,
    /// Filled in by the kernel (`PADDED(aio_key, aio_rw_flags)`: little-endian order).
    pub aio_key: u32,
    /// RWF_* flags for this request.
    pub aio_rw_flags: u32,
    /// IOCB_CMD_*.
    pub aio_lio_opcode: u16,
    /// I/O priority.
    pub aio_reqprio: i16,
    /// File descriptor.
    pub aio_fildes: u32,
    /// User address of the buffer.
    pub aio_buf: u64,
    /// Bytes to transfer.
    pub aio_nbytes: u64,
    /// File offset in bytes.
    pub aio_offset: i64,
    /// Reserved.
    pub aio_reserved2: u64,
    /// IOCB_FLAG_*.
    pub aio_flags: u32,
    /// eventfd to signal on completion (with IOCB_FLAG_RESFD).
    pub aio_resfd: u32,
}

#[cfg(target_endian = "little")]
const _: () = {
    assert!(std::mem::size_of::<Iocb>() == 64);
    assert!(std::mem::offset_of!(Iocb, aio_key) == 8);
    assert!(std::mem::offset_of!(Iocb, aio_rw_flags) == 12);
    assert!(std::mem::offset_of!(Iocb, aio_lio_opcode) == 16);
    assert!(std::mem::offset_of!(Iocb, aio_fildes) == 20);
    assert!(std::mem::offset_of!(Iocb, aio_buf) == 24);
    assert!(std::mem::offset_of!(Iocb, aio_nbytes) == 32);
    assert!(std::mem::offset_of!(Iocb, aio_offset) == 40);
    assert!(std::mem::offset_of!(Iocb, aio_flags) == 56);
    assert!(std::mem::offset_of!(Iocb, aio_resfd) == 60);
};

/// `struct io_event`: one completion. 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoEvent {
    /// The request's `aio_data`.
    pub data: u64,
    /// The user address of the request's iocb.
    pub obj: u64,
    /// Bytes transferred, or a negative errno.
    pub res: i64,
    /// Secondary result (0).
    pub res2: i64,
}

const _: () = assert!(std::mem::size_of::<IoEvent>() == 32);
const _: () = assert!(std::mem::offset_of!(IoEvent, res) == 16);

/// `AIO_RING_MAGIC` (fs/aio.c): the completion ring's header says this
/// when its layout is the one below.
const AIO_RING_MAGIC: u32 = 0xa10a_10a1;

/// The header of the kernel's completion ring (`struct aio_ring`,
/// fs/aio.c), which io_setup maps into our address space at the address it
/// returns as the context id. `io_event`s follow it.
#[repr(C)]
struct AioRingHeader {
    id: u32,
    /// Events the ring holds.
    nr: u32,
    /// Next event to consume (written by the consumer: us, or io_getevents).
    head: u32,
    /// Next event the kernel fills (written by the kernel after the event).
    tail: u32,
    magic: u32,
    compat_features: u32,
    incompat_features: u32,
    header_length: u32,
}

const _: () = assert!(std::mem::size_of::<AioRingHeader>() == 32);

/// An AIO context (`aio_context_t`), destroyed on drop.
#[derive(Debug)]
pub struct AioContext {
    ctx: libc::c_ulong,
    /// The ring can be read from user space (see [`AioContext::reap_user`]).
    user_ring: bool,
}

impl AioContext {
    /// `io_setup(nr_events)`: a context that can hold `nr_events` requests in flight.
    pub fn new(nr_events: u32) -> io::Result<Self> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes one aio_context_t through the valid pointer;
        // the context must be zero on entry, as it is.
        let r = unsafe { libc::syscall(libc::SYS_io_setup, nr_events as libc::c_long, &mut ctx as *mut libc::c_ulong) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut c = AioContext { ctx, user_ring: false };
        let hdr = c.header();
        // SAFETY: `hdr` points at the ring header, mapped by io_setup for as
        // long as the context lives; these fields are written once, at setup.
        let (magic, incompat, len, nr) = unsafe {
            (
                std::ptr::addr_of!((*hdr).magic).read_volatile(),
                std::ptr::addr_of!((*hdr).incompat_features).read_volatile(),
                std::ptr::addr_of!((*hdr).header_length).read_volatile(),
                std::ptr::addr_of!((*hdr).nr).read_volatile(),
            )
        };
        c.user_ring = magic == AIO_RING_MAGIC && incompat == 0 && len as usize == std::mem::size_of::<AioRingHeader>() && nr > 0;
        Ok(c)
    }

    fn header(&self) -> *mut AioRingHeader {
        self.ctx as usize as *mut AioRingHeader
    }

    /// Reap up to `events.len()` completions straight from the kernel's
    /// completion ring, without a system call (fio's `userspace_reap`).
    /// The kernel fills an event, then publishes it by advancing `tail`
    /// (after a write barrier); we consume by advancing `head`, which the
    /// kernel reads to recycle slots. Only one consumer may run at a time:
    /// the owning thread, which never calls io_getevents concurrently.
    /// Returns None when the ring cannot be read this way.
    pub fn reap_user(&self, events: &mut [IoEvent]) -> Option<usize> {
        let (nr, head_a, mut head, tail) = self.ring_indices()?;
        let hdr = self.header();
        let first = (hdr as *const u8).wrapping_add(std::mem::size_of::<AioRingHeader>()) as *const IoEvent;
        let mut n = 0;
        while n < events.len() && head != tail {
            // SAFETY: head < nr, and the ring maps nr events after the header.
            events[n] = unsafe { first.add(head as usize).read_volatile() };
            head = if head + 1 == nr { 0 } else { head + 1 };
            n += 1;
        }
        if n > 0 {
            // Release: our reads of the events happen before the kernel may reuse their slots.
            head_a.store(head, std::sync::atomic::Ordering::Release);
        }
        Some(n)
    }

    /// Completions waiting in the ring, read without a system call; None
    /// when the ring cannot be read this way (see [`AioContext::reap_user`]).
    pub fn ready_user(&self) -> Option<usize> {
        let (nr, _, head, tail) = self.ring_indices()?;
        Some(if tail >= head { tail - head } else { nr - head + tail } as usize)
    }

    /// The ring's size, its `head` (ours to move) and that head's value,
    /// and its `tail` as the kernel last published it; None when the ring
    /// cannot be read in user memory or its indices are out of range.
    fn ring_indices(&self) -> Option<(u32, &std::sync::atomic::AtomicU32, u32, u32)> {
        if !self.user_ring {
            return None;
        }
        let hdr = self.header();
        // SAFETY: the header is mapped while the context lives (Drop runs
        // io_destroy), so for as long as the borrow of `self`. `head` and
        // `tail` are u32s shared with the kernel: accessed only
        // atomically. `nr` is constant after setup.
        let (nr, head_a, tail_a) = unsafe {
            (
                std::ptr::addr_of!((*hdr).nr).read_volatile(),
                std::sync::atomic::AtomicU32::from_ptr(std::ptr::addr_of_mut!((*hdr).head)),
                std::sync::atomic::AtomicU32::from_ptr(std::ptr::addr_of_mut!((*hdr).tail)),
            )
        };
        // Acquire pairs with the kernel's barrier before it moves `tail`:
        // the events below `tail` are complete once we see it.
        let tail = tail_a.load(std::sync::atomic::Ordering::Acquire);
        let head = head_a.load(std::sync::atomic::Ordering::Relaxed);
        if head >= nr || tail >= nr {
            return None;
        }
        Some((nr, head_a, head, tail))
    }

    /// `io_submit`: hand `iocbs` to the kernel. Returns how many were
    /// accepted (a prefix); an error only when the first one was refused.
    ///
    /// # Safety
    /// Every pointer must point to a valid [`Iocb`] (the kernel copies it
    /// during the call), and each iocb's buffer must stay valid and untouched
    /// by us until its completion has been reaped.
    pub unsafe fn submit(&self, iocbs: &[*mut Iocb]) -> io::Result<usize> {
        // SAFETY: the caller guarantees the iocbs and their buffers; the
        // pointer array is valid for iocbs.len() entries.
        let r = unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, iocbs.len() as libc::c_long, iocbs.as_ptr()) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// `io_getevents`: reap between `min` and `events.len()` completions.
    /// With `block == false` the call returns at once (zero timeout);
    /// otherwise it waits until `min` are there.
    pub fn get_events(&self, min: usize, events: &mut [IoEvent], block: bool) -> io::Result<usize> {
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let timeout: *const libc::timespec = if block { std::ptr::null() } else { &zero };
        // SAFETY: `events` is valid for writes of events.len() io_events, the
        // timeout pointer is null or points to `zero`, which outlives the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.ctx,
                min.min(events.len()) as libc::c_long,
                events.len() as libc::c_long,
                events.as_mut_ptr(),
                timeout,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }
}

impl Drop for AioContext {
    fn drop(&mut self) {
        // io_destroy cancels what it can and waits for the rest, so no
        // request touches its buffer after this returns.
        // SAFETY: the context is ours and destroyed once.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_and_empty_poll() {
        let ctx = match AioContext::new(4) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: io_setup failed here ({e})");
                return;
            }
        };
        let mut ev = [IoEvent::default(); 4];
        assert_eq!(ctx.get_events(0, &mut ev, false).unwrap(), 0);
        assert_eq!(ctx.reap_user(&mut ev), Some(0), "this kernel's AIO ring has an unexpected layout");
    }
}
