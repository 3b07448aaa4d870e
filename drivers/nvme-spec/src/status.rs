//! Completion status decoding: Status Code Type, Status Code, and their names.
//! NVMe 1.4c §4.6.1 (Status Field), §4.6.1.1 (Status Code Type),
//! §4.6.1.2.1-4 (generic, command specific, media and data integrity, path
//! related status values). Names are upper case as SPDK prints them.

use bitfield_struct::bitfield;

/// Completion entry Dword 3 bits 31:16: the Phase Tag and the Status Field.
/// NVMe 1.4c §4.6 and §4.6.1 ("Status Field Definition").
#[bitfield(u16)]
#[derive(PartialEq, Eq)]
pub struct CqeStatus {
    /// Phase Tag: inverted by the controller each time it wraps the queue, so
    /// the host can tell a new entry from a stale one without a register read.
    pub p: bool,
    /// Status Code (meaning depends on SCT).
    pub sc: u8,
    /// Status Code Type.
    #[bits(3)]
    pub sct: u8,
    /// Command Retry Delay: which CRDT field of Identify Controller to wait.
    #[bits(2)]
    pub crd: u8,
    /// More: more status is in the Error Information log page.
    pub m: bool,
    /// Do Not Retry: the same command would fail again.
    pub dnr: bool,
}

/// Status Code Type. NVMe 1.4c §4.6.1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct StatusCodeType(pub u8);

impl StatusCodeType {
    /// Generic Command Status.
    pub const GENERIC: Self = Self(0);
    /// Command Specific Status.
    pub const COMMAND_SPECIFIC: Self = Self(1);
    /// Media and Data Integrity Errors.
    pub const MEDIA: Self = Self(2);
    /// Path Related Status.
    pub const PATH: Self = Self(3);
    /// Vendor Specific.
    pub const VENDOR: Self = Self(7);

    /// Name of the type.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "GENERIC",
            1 => "COMMAND SPECIFIC",
            2 => "MEDIA ERROR",
            3 => "PATH",
            7 => "VENDOR SPECIFIC",
            _ => "RESERVED",
        }
    }
}

/// Generic command status codes (SCT 0). NVMe 1.4c §4.6.1.2.1.
pub mod generic {
    pub const SUCCESS: u8 = 0x00;
    pub const INVALID_OPCODE: u8 = 0x01;
    pub const INVALID_FIELD: u8 = 0x02;
    pub const CID_CONFLICT: u8 = 0x03;
    pub const DATA_TRANSFER_ERROR: u8 = 0x04;
    pub const ABORTED_POWER_LOSS: u8 = 0x05;
    pub const INTERNAL_ERROR: u8 = 0x06;
    pub const ABORTED_BY_REQUEST: u8 = 0x07;
    pub const ABORTED_SQ_DELETION: u8 = 0x08;
    pub const INVALID_NAMESPACE_OR_FORMAT: u8 = 0x0B;
    pub const COMMAND_SEQUENCE_ERROR: u8 = 0x0C;
    pub const INVALID_PRP_OFFSET: u8 = 0x13;
    pub const LBA_OUT_OF_RANGE: u8 = 0x80;
    pub const CAPACITY_EXCEEDED: u8 = 0x81;
    pub const NAMESPACE_NOT_READY: u8 = 0x82;
}

/// Command specific status codes (SCT 1). NVMe 1.4c §4.6.1.2.2.
pub mod command_specific {
    pub const COMPLETION_QUEUE_INVALID: u8 = 0x00;
    pub const INVALID_QUEUE_IDENTIFIER: u8 = 0x01;
    pub const INVALID_QUEUE_SIZE: u8 = 0x02;
    pub const ABORT_COMMAND_LIMIT_EXCEEDED: u8 = 0x03;
    pub const ASYNC_EVENT_REQUEST_LIMIT_EXCEEDED: u8 = 0x05;
    pub const INVALID_INTERRUPT_VECTOR: u8 = 0x08;
    pub const INVALID_LOG_PAGE: u8 = 0x09;
    pub const INVALID_QUEUE_DELETION: u8 = 0x0C;
    pub const FEATURE_NOT_SAVEABLE: u8 = 0x0D;
    pub const FEATURE_NOT_CHANGEABLE: u8 = 0x0E;
}

/// Media and data integrity status codes (SCT 2). NVMe 1.4c §4.6.1.2.3.
pub mod media {
    pub const WRITE_FAULT: u8 = 0x80;
    pub const UNRECOVERED_READ_ERROR: u8 = 0x81;
    pub const COMPARE_FAILURE: u8 = 0x85;
    pub const ACCESS_DENIED: u8 = 0x86;
}

fn generic_name(sc: u8) -> &'static str {
    match sc {
        0x00 => "SUCCESS",
        0x01 => "INVALID OPCODE",
        0x02 => "INVALID FIELD",
        0x03 => "COMMAND ID CONFLICT",
        0x04 => "DATA TRANSFER ERROR",
        0x05 => "ABORTED - POWER LOSS",
        0x06 => "INTERNAL DEVICE ERROR",
        0x07 => "ABORTED - BY REQUEST",
        0x08 => "ABORTED - SQ DELETION",
        0x09 => "ABORTED - FAILED FUSED",
        0x0A => "ABORTED - MISSING FUSED",
        0x0B => "INVALID NAMESPACE OR FORMAT",
        0x0C => "COMMAND SEQUENCE ERROR",
        0x0D => "INVALID SGL SEGMENT DESCRIPTOR",
        0x0E => "INVALID NUMBER OF SGL DESCRIPTORS",
        0x0F => "DATA SGL LENGTH INVALID",
        0x10 => "METADATA SGL LENGTH INVALID",
        0x11 => "SGL DESCRIPTOR TYPE INVALID",
        0x12 => "INVALID CONTROLLER MEMORY BUFFER",
        0x13 => "INVALID PRP OFFSET",
        0x14 => "ATOMIC WRITE UNIT EXCEEDED",
        0x15 => "OPERATION DENIED",
        0x16 => "INVALID SGL OFFSET",
        0x18 => "HOSTID INCONSISTENT FORMAT",
        0x19 => "KEEP ALIVE EXPIRED",
        0x1A => "KEEP ALIVE INVALID",
        0x1B => "ABORTED - PREEMPT",
        0x1C => "SANITIZE FAILED",
        0x1D => "SANITIZE IN PROGRESS",
        0x1E => "SGL DATA BLOCK GRANULARITY INVALID",
        0x1F => "COMMAND NOT SUPPORTED FOR QUEUE IN CMB",
        0x20 => "NAMESPACE IS WRITE PROTECTED",
        0x21 => "COMMAND INTERRUPTED",
        0x22 => "TRANSIENT TRANSPORT ERROR",
        0x80 => "LBA OUT OF RANGE",
        0x81 => "CAPACITY EXCEEDED",
        0x82 => "NAMESPACE NOT READY",
        0x83 => "RESERVATION CONFLICT",
        0x84 => "FORMAT IN PROGRESS",
        _ => "GENERIC (UNKNOWN CODE)",
    }
}

fn command_specific_name(sc: u8) -> &'static str {
    match sc {
        0x00 => "INVALID COMPLETION QUEUE",
        0x01 => "INVALID QUEUE IDENTIFIER",
        0x02 => "INVALID QUEUE SIZE",
        0x03 => "ABORT COMMAND LIMIT EXCEEDED",
        0x05 => "ASYNC LIMIT EXCEEDED",
        0x06 => "INVALID FIRMWARE SLOT",
        0x07 => "INVALID FIRMWARE IMAGE",
        0x08 => "INVALID INTERRUPT VECTOR",
        0x09 => "INVALID LOG PAGE",
        0x0A => "INVALID FORMAT",
        0x0B => "FIRMWARE REQUIRES CONVENTIONAL RESET",
        0x0C => "INVALID QUEUE DELETION",
        0x0D => "FEATURE ID NOT SAVEABLE",
        0x0E => "FEATURE NOT CHANGEABLE",
        0x0F => "FEATURE NOT NAMESPACE SPECIFIC",
        0x10 => "FIRMWARE REQUIRES NVM RESET",
        0x11 => "FIRMWARE REQUIRES RESET",
        0x12 => "FIRMWARE REQUIRES MAX TIME VIOLATION",
        0x13 => "FIRMWARE ACTIVATION PROHIBITED",
        0x14 => "OVERLAPPING RANGE",
        0x15 => "NAMESPACE INSUFFICIENT CAPACITY",
        0x16 => "NAMESPACE ID UNAVAILABLE",
        0x18 => "NAMESPACE ALREADY ATTACHED",
        0x19 => "NAMESPACE IS PRIVATE",
        0x1A => "NAMESPACE NOT ATTACHED",
        0x1B => "THINPROVISIONING NOT SUPPORTED",
        0x1C => "CONTROLLER LIST INVALID",
        0x1D => "DEVICE SELF-TEST IN PROGRESS",
        0x1E => "BOOT PARTITION WRITE PROHIBITED",
        0x1F => "INVALID CONTROLLER ID",
        0x20 => "INVALID SECONDARY CONTROLLER STATE",
        0x21 => "INVALID NUMBER OF CONTROLLER RESOURCES",
        0x22 => "INVALID RESOURCE IDENTIFIER",
        0x23 => "SANITIZE PROHIBITED WHILE PMR ENABLED",
        0x24 => "ANA GROUP IDENTIFIER INVALID",
        0x25 => "ANA ATTACH FAILED",
        0x80 => "CONFLICTING ATTRIBUTES",
        0x81 => "INVALID PROTECTION INFO",
        0x82 => "ATTEMPTED WRITE TO RO RANGE",
        _ => "COMMAND SPECIFIC (UNKNOWN CODE)",
    }
}

fn media_name(sc: u8) -> &'static str {
    match sc {
        0x80 => "WRITE FAULTS",
        0x81 => "UNRECOVERED READ ERROR",
        0x82 => "GUARD CHECK ERROR",
        0x83 => "APPLICATION TAG CHECK ERROR",
        0x84 => "REFERENCE TAG CHECK ERROR",
        0x85 => "COMPARE FAILURE",
        0x86 => "ACCESS DENIED",
        0x87 => "DEALLOCATED OR UNWRITTEN BLOCK",
        _ => "MEDIA ERROR (UNKNOWN CODE)",
    }
}

fn path_name(sc: u8) -> &'static str {
    match sc {
        0x00 => "INTERNAL PATH ERROR",
        0x01 => "ASYMMETRIC ACCESS PERSISTENT LOSS",
        0x02 => "ASYMMETRIC ACCESS INACCESSIBLE",
        0x03 => "ASYMMETRIC ACCESS TRANSITION",
        0x60 => "CONTROLLER PATHING ERROR",
        0x70 => "HOST PATHING ERROR",
        0x71 => "ABORTED BY HOST",
        _ => "PATH ERROR (UNKNOWN CODE)",
    }
}

/// A decoded completion status (everything of the status field but the phase).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Status {
    /// Status Code Type.
    pub sct: StatusCodeType,
    /// Status Code.
    pub sc: u8,
    /// Command Retry Delay selector (0 = retry at once).
    pub crd: u8,
    /// More information in the Error Information log page.
    pub more: bool,
    /// Do Not Retry.
    pub dnr: bool,
}

impl Status {
    /// Successful completion.
    pub const SUCCESS: Status = Status::new(StatusCodeType::GENERIC, 0);

    /// A status with CRD, M and DNR clear.
    pub const fn new(sct: StatusCodeType, sc: u8) -> Self {
        Status { sct, sc, crd: 0, more: false, dnr: false }
    }
    /// The same status with Do Not Retry set.
    pub const fn with_dnr(mut self) -> Self {
        self.dnr = true;
        self
    }
    /// A generic status (SCT 0).
    pub const fn generic(sc: u8) -> Self {
        Self::new(StatusCodeType::GENERIC, sc)
    }
    /// A command specific status (SCT 1).
    pub const fn command_specific(sc: u8) -> Self {
        Self::new(StatusCodeType::COMMAND_SPECIFIC, sc)
    }
    /// Decode the 16-bit status field of a completion entry.
    pub fn from_cqe_status(s: CqeStatus) -> Self {
        Status { sct: StatusCodeType(s.sct()), sc: s.sc(), crd: s.crd(), more: s.m(), dnr: s.dnr() }
    }
    /// Encode into a completion status field with the given phase.
    pub fn to_cqe_status(self, phase: bool) -> CqeStatus {
        CqeStatus::new()
            .with_p(phase)
            .with_sc(self.sc)
            .with_sct(self.sct.0)
            .with_crd(self.crd)
            .with_m(self.more)
            .with_dnr(self.dnr)
    }
    /// True for Successful Completion.
    #[inline]
    pub fn is_success(&self) -> bool {
        self.sct == StatusCodeType::GENERIC && self.sc == 0
    }
    /// True when the same command may succeed if retried (DNR clear and not success).
    pub fn is_retryable(&self) -> bool {
        !self.is_success() && !self.dnr
    }
    /// The status name, as SPDK's `spdk_nvme_cpl_get_status_string` prints it.
    pub fn name(&self) -> &'static str {
        match self.sct.0 {
            0 => generic_name(self.sc),
            1 => command_specific_name(self.sc),
            2 => media_name(self.sc),
            3 => path_name(self.sc),
            7 => "VENDOR SPECIFIC",
            _ => "RESERVED STATUS CODE TYPE",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (sct {:#x}/sc {:#04x}", self.name(), self.sct.0, self.sc)?;
        if self.dnr {
            write!(f, ", dnr")?;
        }
        if self.more {
            write!(f, ", more")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_for_each_set() {
        assert_eq!(Status::generic(0x80).name(), "LBA OUT OF RANGE");
        assert_eq!(Status::generic(0x01).name(), "INVALID OPCODE");
        assert_eq!(Status::generic(0x13).name(), "INVALID PRP OFFSET");
        assert_eq!(Status::command_specific(0x01).name(), "INVALID QUEUE IDENTIFIER");
        assert_eq!(Status::new(StatusCodeType::MEDIA, 0x81).name(), "UNRECOVERED READ ERROR");
        assert_eq!(Status::new(StatusCodeType::PATH, 0x71).name(), "ABORTED BY HOST");
        assert!(Status::SUCCESS.is_success());
        assert!(!Status::generic(2).is_success());
    }

    #[test]
    fn round_trip_through_cqe_status() {
        for sct in [0u8, 1, 2, 3, 7] {
            for sc in [0u8, 1, 0x13, 0x80, 0xff] {
                let s = Status { sct: StatusCodeType(sct), sc, crd: 1, more: true, dnr: true };
                let f = s.to_cqe_status(true);
                assert!(f.p());
                assert_eq!(Status::from_cqe_status(f), s);
            }
        }
        assert!(Status::generic(6).is_retryable());
        assert!(!Status::generic(6).with_dnr().is_retryable());
    }

    #[test]
    fn display_says_dnr() {
        assert_eq!(
            Status::generic(0x80).with_dnr().to_string(),
            "LBA OUT OF RANGE (sct 0x0/sc 0x80, dnr)"
        );
    }
}
