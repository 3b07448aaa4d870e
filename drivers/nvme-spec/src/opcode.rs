//! Command opcodes, split by command set as the kernel's `nvme_admin_opcode`
//! and `nvme_opcode` are: admin `0x01` (Create I/O SQ) and NVM `0x01` (Write)
//! are different commands, so they are different types.

/// Admin command set opcodes. NVMe 1.4c §5.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdminOpcode {
    /// Delete I/O Submission Queue. NVMe 1.4c §5.6.
    DeleteIoSq = 0x00,
    /// Create I/O Submission Queue. NVMe 1.4c §5.4.
    CreateIoSq = 0x01,
    /// Get Log Page. NVMe 1.4c §5.14.
    GetLogPage = 0x02,
    /// Delete I/O Completion Queue. NVMe 1.4c §5.5.
    DeleteIoCq = 0x04,
    /// Create I/O Completion Queue. NVMe 1.4c §5.3.
    CreateIoCq = 0x05,
    /// Identify. NVMe 1.4c §5.15.
    Identify = 0x06,
    /// Abort a command. NVMe 1.4c §5.1.
    Abort = 0x08,
    /// Set Features. NVMe 1.4c §5.21.
    SetFeatures = 0x09,
    /// Get Features. NVMe 1.4c §5, "Get Features command".
    GetFeatures = 0x0A,
    /// Asynchronous Event Request. NVMe 1.4c §5.2.
    AsyncEventRequest = 0x0C,
    /// Keep Alive.
    KeepAlive = 0x18,
    /// Doorbell Buffer Config (shadow doorbells, for emulated controllers).
    /// NVMe 1.4c §5 "Doorbell Buffer Config command"; OACS bit 8.
    DoorbellBufferConfig = 0x7C,
    /// Format NVM.
    FormatNvm = 0x80,
}

impl AdminOpcode {
    /// The opcode for a byte, if it is one this crate names.
    pub fn from_u8(v: u8) -> Option<Self> {
        use AdminOpcode::*;
        Some(match v {
            0x00 => DeleteIoSq,
            0x01 => CreateIoSq,
            0x02 => GetLogPage,
            0x04 => DeleteIoCq,
            0x05 => CreateIoCq,
            0x06 => Identify,
            0x08 => Abort,
            0x09 => SetFeatures,
            0x0A => GetFeatures,
            0x0C => AsyncEventRequest,
            0x18 => KeepAlive,
            0x7C => DoorbellBufferConfig,
            0x80 => FormatNvm,
            _ => return None,
        })
    }
    /// Name as nvme-cli and the kernel's trace events print it.
    pub fn name(self) -> &'static str {
        use AdminOpcode::*;
        match self {
            DeleteIoSq => "Delete I/O SQ",
            CreateIoSq => "Create I/O SQ",
            GetLogPage => "Get Log Page",
            DeleteIoCq => "Delete I/O CQ",
            CreateIoCq => "Create I/O CQ",
            Identify => "Identify",
            Abort => "Abort",
            SetFeatures => "Set Features",
            GetFeatures => "Get Features",
            AsyncEventRequest => "Asynchronous Event Request",
            KeepAlive => "Keep Alive",
            DoorbellBufferConfig => "Doorbell Buffer Config",
            FormatNvm => "Format NVM",
        }
    }
}

/// NVM command set I/O opcodes. NVMe 1.4c §6.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NvmOpcode {
    /// Flush volatile write cache to media. NVMe 1.4c §6.8.
    Flush = 0x00,
    /// Write. NVMe 1.4c §6.15.
    Write = 0x01,
    /// Read. NVMe 1.4c §6.9.
    Read = 0x02,
    /// Write Uncorrectable.
    WriteUncorrectable = 0x04,
    /// Compare.
    Compare = 0x05,
    /// Write Zeroes. NVMe 1.4c §6.16.
    WriteZeroes = 0x08,
    /// Dataset Management (deallocate = TRIM). NVMe 1.4c §6.7.
    DatasetManagement = 0x09,
}

impl NvmOpcode {
    /// The opcode for a byte, if it is one this crate names.
    pub fn from_u8(v: u8) -> Option<Self> {
        use NvmOpcode::*;
        Some(match v {
            0x00 => Flush,
            0x01 => Write,
            0x02 => Read,
            0x04 => WriteUncorrectable,
            0x05 => Compare,
            0x08 => WriteZeroes,
            0x09 => DatasetManagement,
            _ => return None,
        })
    }
    /// Name as nvme-cli prints it.
    pub fn name(self) -> &'static str {
        use NvmOpcode::*;
        match self {
            Flush => "Flush",
            Write => "Write",
            Read => "Read",
            WriteUncorrectable => "Write Uncorrectable",
            Compare => "Compare",
            WriteZeroes => "Write Zeroes",
            DatasetManagement => "Dataset Management",
        }
    }
    /// True when the command moves data from host to controller.
    pub fn is_write(self) -> bool {
        matches!(self, NvmOpcode::Write)
    }
}

/// Identify CNS values. NVMe 1.4c §5.15.
pub mod cns {
    /// Identify Namespace data structure for NSID.
    pub const NAMESPACE: u8 = 0x00;
    /// Identify Controller data structure.
    pub const CONTROLLER: u8 = 0x01;
    /// Active Namespace ID list (IDs greater than NSID).
    pub const ACTIVE_NAMESPACES: u8 = 0x02;
    /// Namespace Identification Descriptor list.
    pub const NS_DESCRIPTORS: u8 = 0x03;
}

/// Feature identifiers used by this project. NVMe 1.4c §5.21.1.
pub mod feature {
    /// Arbitration.
    pub const ARBITRATION: u8 = 0x01;
    /// Power Management.
    pub const POWER_MANAGEMENT: u8 = 0x02;
    /// Volatile Write Cache.
    pub const VOLATILE_WRITE_CACHE: u8 = 0x06;
    /// Number of Queues. NVMe 1.4c §5.21.1.7.
    pub const NUMBER_OF_QUEUES: u8 = 0x07;
    /// Interrupt Coalescing.
    pub const INTERRUPT_COALESCING: u8 = 0x08;
    /// Interrupt Vector Configuration.
    pub const INTERRUPT_VECTOR_CONFIG: u8 = 0x09;
    /// Asynchronous Event Configuration.
    pub const ASYNC_EVENT_CONFIG: u8 = 0x0B;
    /// Host Memory Buffer (NVMe 1.4c §5.21.1.13): host memory a controller
    /// without DRAM of its own keeps its tables in.
    pub const HOST_MEMORY_BUFFER: u8 = 0x0D;
    /// Host Behavior Support (NVMe 1.4c §5.21.1.22): a 512-byte data
    /// structure whose byte 0 bit 0, ACRE, lets the controller ask for a
    /// retry delay (a completion's CRD, Identify Controller CRDT1-3).
    pub const HOST_BEHAVIOR_SUPPORT: u8 = 0x16;
}

/// Log page identifiers. NVMe 1.4c §5.14.1.
pub mod log_page {
    /// Error Information.
    pub const ERROR_INFO: u8 = 0x01;
    /// SMART / Health Information.
    pub const SMART_HEALTH: u8 = 0x02;
    /// Firmware Slot Information.
    pub const FIRMWARE_SLOT: u8 = 0x03;
}
