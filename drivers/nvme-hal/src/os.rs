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
