//! The synchronous system calls of the `psync` and `sync` engines: pread,
//! pwrite, lseek, read, write and fdatasync on raw buffer addresses (the buffers are DMA-visible memory, to
//! which no Rust references are made).

use std::os::fd::{AsRawFd, BorrowedFd};

/// Which way the data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// pread: device to buffer.
    Read,
    /// pwrite: buffer to device.
    Write,
}

/// One pread or pwrite of `len` bytes at `offset` with the buffer at user
/// address `addr`. Returns bytes transferred or a negative errno; EINTR is
/// retried (each try is counted in `*calls`).
///
/// # Safety
/// `addr` must be valid for `len` bytes (writable for a read) and nothing
/// else may access those bytes during the call.
pub unsafe fn pread_pwrite(fd: BorrowedFd<'_>, dir: Dir, addr: u64, len: u32, offset: u64, calls: &mut u64) -> i64 {
    loop {
        *calls += 1;
        // SAFETY: the caller guarantees the buffer; the descriptor is valid
        // for the duration of the borrow.
        let r = unsafe {
            match dir {
                Dir::Read => libc::pread64(fd.as_raw_fd(), addr as *mut libc::c_void, len as usize, offset as libc::off64_t),
                Dir::Write => libc::pwrite64(fd.as_raw_fd(), addr as *const libc::c_void, len as usize, offset as libc::off64_t),
            }
        };
        if r >= 0 {
            return r as i64;
        }
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        if e != libc::EINTR {
            return -(e as i64);
        }
    }
}

/// lseek to `offset` (SEEK_SET): 0 or a negative errno.
pub fn seek(fd: BorrowedFd<'_>, offset: u64, calls: &mut u64) -> i64 {
    *calls += 1;
    // SAFETY: lseek only takes the descriptor, valid for the borrow.
    if unsafe { libc::lseek64(fd.as_raw_fd(), offset as libc::off64_t, libc::SEEK_SET) } >= 0 {
        0
    } else {
        -(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64)
    }
}

/// One read or write of `len` bytes at the file's position with the
/// buffer at user address `addr`, as [`pread_pwrite`] otherwise.
///
/// # Safety
/// As for [`pread_pwrite`].
pub unsafe fn read_write(fd: BorrowedFd<'_>, dir: Dir, addr: u64, len: u32, calls: &mut u64) -> i64 {
    loop {
        *calls += 1;
        // SAFETY: the caller guarantees the buffer; the descriptor is valid
        // for the duration of the borrow.
        let r = unsafe {
            match dir {
                Dir::Read => libc::read(fd.as_raw_fd(), addr as *mut libc::c_void, len as usize),
                Dir::Write => libc::write(fd.as_raw_fd(), addr as *const libc::c_void, len as usize),
            }
        };
        if r >= 0 {
            return r as i64;
        }
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        if e != libc::EINTR {
            return -(e as i64);
        }
    }
}

/// fdatasync: 0 or a negative errno.
pub fn fdatasync(fd: BorrowedFd<'_>, calls: &mut u64) -> i64 {
    *calls += 1;
    // SAFETY: fdatasync only takes the descriptor, valid for the borrow.
    if unsafe { libc::fdatasync(fd.as_raw_fd()) } == 0 {
        0
    } else {
        -(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64)
    }
}
