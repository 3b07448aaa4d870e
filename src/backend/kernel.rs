//! Options shared by the kernel paths (passthru and block), named as fio's.

/// Which kernel interface the block path uses, as fio's `--ioengine` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoEngine {
    /// io_uring (the default).
    #[value(name = "io_uring")]
    IoUring,
    /// Linux native AIO (io_setup / io_submit / io_getevents).
    Libaio,
    /// pread / pwrite, one I/O at a time per thread.
    Psync,
}

/// Kernel-path options.
#[derive(Clone, Debug)]
pub struct KernelOptions {
    /// Device path.
    pub device: String,
    /// Namespace id (passthru puts it in the command; block uses the device's).
    pub nsid: u32,
    /// Block path engine.
    pub ioengine: IoEngine,
    /// Register the buffers with io_uring (fio `fixedbufs`).
    pub fixedbufs: bool,
    /// Register the file with io_uring (fio `registerfiles`).
    pub registerfiles: bool,
    /// Polled completions: IORING_SETUP_IOPOLL (fio `hipri`); needs nvme poll queues.
    pub hipri: bool,
    /// Kernel submission thread: IORING_SETUP_SQPOLL (fio `sqthread_poll`).
    pub sqthread_poll: bool,
    /// CPU for the SQPOLL thread (fio `sqthread_poll_cpu`).
    pub sqthread_poll_cpu: Option<u32>,
    /// Buffered I/O instead of O_DIRECT (block path; fio `--direct=0`).
    pub buffered: bool,
}
