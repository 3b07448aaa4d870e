//! The one error type the commands return, and the one place that prints
//! an error with its chain of causes and what to do next.

use crate::backend::BackendError;

/// Exit codes.
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// The run happened but found errors (failed I/Os, verify mismatches).
    pub const RUN_FAILED: i32 = 1;
    /// Bad input or environment: nothing was done to the device.
    pub const USAGE: i32 = 2;
    /// Not started: the state it was told to wait for did not come in time
    /// (`bench --wait-fast-c2c`).
    pub const NOT_STARTED: i32 = 3;
    /// Stopped by a signal (`nvme-bypass fio`, as fio: 128).
    pub const SIGNALLED: i32 = 128;
}

/// What went wrong, by kind; each kind has its exit code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input or environment: nothing was done to the device.
    #[error("{0}")]
    Usage(String),
    /// Not started: the state it was told to wait for did not come in time.
    #[error("{0}")]
    NotStarted(String),
    /// A path could not be opened or failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// Moving a controller between drivers failed or was refused.
    #[error(transparent)]
    Bind(#[from] nvme_vfio::bind::BindError),
    /// A PCI address that does not parse.
    #[error(transparent)]
    Bdf(#[from] nvme_vfio::BdfError),
    /// Our driver, driven directly rather than through a path (`trace`), failed.
    #[error(transparent)]
    Driver(#[from] nvme_driver::Error),
    /// The simulated controller could not start.
    #[error(transparent)]
    Sim(#[from] nvme_sim::SimError),
    /// A device could not be resolved to its controller and namespaces.
    #[error(transparent)]
    Topology(#[from] crate::measure::topology::TopologyError),
    /// Something the command needs before any I/O could not be had (a
    /// results folder, a sysfs file): nothing was done to the device.
    #[error("{what}: {source}{hint}")]
    Setup {
        what: String,
        hint: String,
        #[source]
        source: std::io::Error,
    },
    /// A results file or directory could not be written after the runs.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Bad input: the message says what to do instead.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    /// An I/O error writing results, with what was being written.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// A failure before any I/O, with what to do next (`hint`, may be empty).
    pub fn setup(what: impl Into<String>, hint: impl Into<String>, source: std::io::Error) -> Self {
        let hint = hint.into();
        Error::Setup { what: what.into(), hint: if hint.is_empty() { hint } else { format!("; {hint}") }, source }
    }

    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            // A device that failed mid-run (recovery gave up) is not bad input.
            Error::Backend(b) if b.device_failed() => exit::RUN_FAILED,
            Error::Io { .. } => exit::RUN_FAILED,
            Error::NotStarted(_) => exit::NOT_STARTED,
            _ => exit::USAGE,
        }
    }
}

/// An error and its causes on one line, each cause once: the form every
/// message of this tool takes ("what failed: why; what to do next").
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
        src = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_names_each_cause_once() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = Error::io("writing results/table.txt", io);
        assert_eq!(
            chain(&e),
            "writing results/table.txt: No such file or directory (os error 2)"
        );
        let b = Error::from(BackendError::os(
            "open /dev/ng0n1",
            "run as root",
            std::io::Error::from_raw_os_error(libc::EACCES),
        ));
        let s = chain(&b);
        assert_eq!(s.matches("Permission denied").count(), 1, "{s}");
        assert!(s.ends_with("; run as root"), "{s}");
    }

    #[test]
    fn exit_codes_by_kind() {
        assert_eq!(Error::usage("x").exit_code(), exit::USAGE);
        assert_eq!(Error::NotStarted("x".into()).exit_code(), exit::NOT_STARTED);
        assert_eq!(
            Error::from(BackendError::Failed("x".into())).exit_code(),
            exit::RUN_FAILED
        );
        assert_eq!(
            Error::from(BackendError::Invalid("x".into())).exit_code(),
            exit::USAGE
        );
        // Recovery that gave up is the device failing, whatever the cause.
        let gave_up = BackendError::unrecovered("the controller failed", BackendError::Invalid("x".into()));
        assert_eq!(Error::from(gave_up).exit_code(), exit::RUN_FAILED);
        let bdf = nvme_vfio::Bdf::parse("0000:01:00").unwrap_err();
        assert_eq!(Error::from(BackendError::from(bdf)).exit_code(), exit::USAGE);
        let bdf = nvme_vfio::Bdf::parse("0000:01:00").unwrap_err();
        assert_eq!(chain(&Error::from(bdf.clone())), bdf.to_string());
        assert_eq!(Error::from(bdf).exit_code(), exit::USAGE);
    }

    #[test]
    fn a_cause_carried_as_a_source_is_printed_once() {
        let os = BackendError::os("io_uring_enter", "", std::io::Error::from_raw_os_error(libc::EIO));
        let e = Error::from(BackendError::unrecovered("the controller failed", os));
        let s = chain(&e);
        assert_eq!(s.matches("Input/output error").count(), 1, "{s}");
        assert!(s.starts_with("the controller failed: io_uring_enter: Input/output error"), "{s}");
        assert!(s.ends_with("if it is merely slow"), "{s}");
    }
}
