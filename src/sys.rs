//! The experiment's direct system calls, gathered in one place so the rest
//! of `src/` is safe code. (The io_uring backends also push entries with the
//! io-uring crate's `unsafe` API; each such block says why it holds.)

/// getrusage for `who` (RUSAGE_THREAD or RUSAGE_SELF): (user ns, system ns).
pub fn rusage_ns(who: i32) -> (u64, u64) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one struct rusage through a valid pointer; a
    // zeroed rusage is a valid value whether or not the call succeeds.
    let ru = unsafe {
        libc::getrusage(who, ru.as_mut_ptr());
        ru.assume_init()
    };
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// getrusage for `who` (RUSAGE_THREAD or RUSAGE_SELF): context switches
/// (voluntary + involuntary), major and minor page faults, as fio's `cpu`
/// line shows them.
pub fn rusage_counts(who: i32) -> (u64, u64, u64) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: as in rusage_ns: one struct rusage written through a valid
    // pointer, and a zeroed one is valid whether or not the call succeeds.
    let ru = unsafe {
        libc::getrusage(who, ru.as_mut_ptr());
        ru.assume_init()
    };
    ((ru.ru_nvcsw + ru.ru_nivcsw) as u64, ru.ru_majflt as u64, ru.ru_minflt as u64)
}

/// localtime_r: (weekday 0 = Sunday, month 0-11, day, hour, minute,
/// second, year) of `secs` since the epoch, in the local time zone.
pub fn localtime(secs: i64) -> (usize, usize, i32, i32, i32, i32, i32) {
    let t = secs as libc::time_t;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // SAFETY: localtime_r reads one time_t and writes one struct tm through
    // valid pointers; a zeroed tm (tm_zone null) is valid if it fails.
    let tm = unsafe {
        libc::localtime_r(&t, tm.as_mut_ptr());
        tm.assume_init()
    };
    (tm.tm_wday.rem_euclid(7) as usize, tm.tm_mon.rem_euclid(12) as usize, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_year + 1900)
}

/// clock_gettime(clock) in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// sysconf(_SC_CLK_TCK): USER_HZ, the unit of /proc/stat's CPU times
/// (None when sysconf does not say).
pub fn clk_tck() -> Option<u64> {
    // SAFETY: sysconf only reads a configuration value.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (v > 0).then_some(v as u64)
}

/// Is the given fd a terminal?
pub fn isatty(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor number.
    unsafe { libc::isatty(fd) == 1 }
}

/// The calling thread's id (gettid(2)): what fio's `pid=` shows for a job
/// run as a thread.
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// Is `dir` a directory this process may create files in (access(2),
/// W_OK)?
pub fn writable_dir(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: a NUL-terminated path that outlives the call; access only reads it.
    dir.is_dir() && unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0
}

/// Effective user id.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// A pidfd of process `pid` (pidfd_open(2), Linux 5.3+): it becomes
/// readable once every thread of the process has exited (so the kernel has
/// closed its files), and never names a later process that reuses the pid.
pub fn pidfd_open(pid: u32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor (or -1); it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor the kernel just gave us and nothing
    // else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Ignore signal `sig` (SIG_IGN): not even a handler runs, so a terminal
/// write of a background process is not stopped by SIGTTOU, and SIG_IGN
/// stays across exec.
pub fn ignore_signal(sig: i32) -> std::io::Result<()> {
    // SAFETY: installing SIG_IGN runs no code of ours at delivery.
    if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Wait up to `timeout_ms` for `fd` to be readable; true when it is.
pub fn poll_readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: poll reads and writes one pollfd through a valid pointer.
    let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    match rc {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

/// Read an eventfd's counter (8 bytes), resetting it.
pub fn read_eventfd(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut v = 0u64;
    // SAFETY: read writes at most 8 bytes into `v`.
    let rc = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    if rc == 8 {
        Ok(v)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The file offset alignment O_DIRECT needs on `path` (statx's
/// STATX_DIOALIGN, Linux 6.1+), or None where the kernel or the filesystem
/// does not say.
pub fn dio_offset_align(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: statx reads the NUL-terminated path and writes one struct
    // statx through a valid pointer; a zeroed statx is a valid value.
    let (rc, st) = unsafe {
        let rc = libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_DIOALIGN, st.as_mut_ptr());
        (rc, st.assume_init())
    };
    (rc == 0 && st.stx_mask & libc::STATX_DIOALIGN != 0 && st.stx_dio_offset_align != 0).then_some(st.stx_dio_offset_align)
}

/// On signal `sig`: the first time, store `sig` in `slot` and set `flag`
/// (a request to stop); again, at least `force_ns` after the first, exit
/// at once with status 1; sooner, nothing (the same request, delivered
/// twice). Everything the handler does is async-signal-safe: atomics,
/// clock_gettime, _exit.
pub fn on_stop_signal(
    sig: i32,
    slot: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    force_ns: u64,
) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// CLOCK_MONOTONIC of the first stop signal (0: none yet), shared by
    /// every signal registered here.
    static FIRST: AtomicU64 = AtomicU64::new(0);
    let handler = move || {
        let now = clock_ns(libc::CLOCK_MONOTONIC).max(1);
        match FIRST.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {
                slot.store(sig as usize, Ordering::SeqCst);
                flag.store(true, Ordering::SeqCst);
            }
            Err(first) if now.saturating_sub(first) >= force_ns => signal_hook::low_level::exit(1),
            Err(_) => {}
        }
    };
    // SAFETY: the handler only touches atomics, reads CLOCK_MONOTONIC and
    // may call _exit, all async-signal-safe; it allocates nothing and
    // takes no lock.
    unsafe { signal_hook::low_level::register(sig, handler) }.map(|_| ())
}

/// Drop the page cache of `f`'s whole range (posix_fadvise
/// POSIX_FADV_DONTNEED), as fio's `invalidate` does before a job: clean
/// pages go, dirty ones are written back first by the kernel only if
/// already under writeback (so `fsync` first when it matters).
pub fn drop_page_cache(f: &std::fs::File) -> std::io::Result<()> {
    fadvise(f, libc::POSIX_FADV_DONTNEED)
}

/// posix_fadvise over `f`'s whole range: `advice` is one of libc's
/// `POSIX_FADV_*` (RANDOM turns the page cache's readahead off for the
/// open file, SEQUENTIAL doubles it).
pub fn fadvise(f: &std::fs::File, advice: i32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise only advises the kernel about a descriptor we
    // hold open; it touches no memory of ours.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, advice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

/// fallocate(2) mode 0 of `len` bytes at `offset`: the blocks are
/// allocated (unwritten: they read as zeros) and the file grows to cover
/// them, as fio's default `fallocate=native` lays out a write job's file.
pub fn fallocate(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate takes a descriptor and three integers; `file` keeps
    // the descriptor open for the call.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as libc::off_t, len as libc::off_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
