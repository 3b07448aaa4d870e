//! Small OS helpers shared by the controller simulator and the benchmark.

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("CPU {cpu} out of range")));
    }
    // SAFETY: cpu_set_t is plain data that CPU_ZERO/CPU_SET only write
    // inside (cpu is in range); sched_setaffinity reads it and affects only
    // the calling thread (pid 0).
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The one CPU the calling thread may run on, if it is pinned to exactly
/// one (`None` when it may run on several, or the affinity cannot be read).
pub fn current_thread_cpu() -> Option<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most
    // its size into it, and CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set));
        match (cpus.next(), cpus.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        }
    }
}

/// Allow the calling thread on CPUs `0..ncpus` again.
pub fn unpin_current_thread(ncpus: usize) -> std::io::Result<()> {
    // SAFETY: as for pin_current_thread; every index is below CPU_SETSIZE.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..ncpus.min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Read the CPU's time-stamp counter (x86-64), or 0 elsewhere. Cheap (tens
/// of cycles) and, on CPUs with an invariant TSC, a steady clock that the
/// benchmark calibrates against CLOCK_MONOTONIC.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no memory effects and is available on every
        // x86-64 CPU (user mode, unless CR4.TSD is set, which Linux does not
        // do by default).
        #[allow(unused_unsafe)]
        unsafe {
            std::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}
