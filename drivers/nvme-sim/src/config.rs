//! How a simulated controller is configured, and why it may fail to start.
//! A leaf of the crate: the controller (`device`) and the handle (`lib`)
//! both read it, and it names nothing of theirs but the event type.

use crate::event::SimEvent;
use std::sync::Arc;
use std::time::Duration;

/// What happens to the data of reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataMode {
    /// Namespaces are RAM: writes store, reads return what was written.
    Ram,
    /// No data moves; commands are validated and completed. Reads leave the
    /// host buffer untouched.
    Null,
}

/// One namespace. A namespace of 0 blocks is an inactive NSID (allocated,
/// not attached): Identify returns zeroes for it, the active list skips it,
/// and I/O to it fails with Invalid Namespace. That gives NSID lists with
/// gaps, or without NSID 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamespaceConfig {
    /// Size in logical blocks.
    pub blocks: u64,
    /// Logical block size in bytes: 512 or 4096.
    pub lba_size: u32,
}

/// How a namespace presents itself beyond its block size: metadata,
/// end-to-end protection and its I/O command set, as Identify reports them.
/// Only reported: the simulator moves data as for a plain namespace, so
/// this is for testing what a driver refuses before it sends any I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamespaceFormat {
    /// Metadata bytes per block of the format in use (0 = none).
    pub ms: u16,
    /// Metadata at the end of each block (FLBAS bit 4), else separate.
    pub extended: bool,
    /// Protection information type in use (DPS bits 2:0): 0 none, 1..3.
    pub pi: u8,
    /// Command Set Identifier (Identify CNS 03h): 0 NVM, 2 zoned.
    pub csi: u8,
    /// Reported write protected (Identify Namespace NSATTR bit 0); the
    /// data path does not refuse writes, only the report says so.
    pub write_protected: bool,
}

/// A callback receiving controller-side events (for `nvme-bypass trace`).
pub type EventHook = Arc<dyn Fn(&SimEvent) + Send + Sync>;

/// Configuration of a simulated controller.
#[derive(Clone)]
pub struct SimConfig {
    /// Namespaces, NSID 1.. in order. NN reports `namespaces.len() + inactive_namespaces`.
    pub namespaces: Vec<NamespaceConfig>,
    /// Extra namespace IDs that exist but are inactive (Identify returns zeroes).
    pub inactive_namespaces: u32,
    /// Formats of the namespaces, by index as in `namespaces`; a namespace
    /// without an entry is plain NVM without metadata.
    pub namespace_formats: Vec<NamespaceFormat>,
    /// Data handling.
    pub data: DataMode,
    /// MDTS: max transfer `4 KiB << mdts` (0 = unlimited).
    pub mdts: u8,
    /// Largest queue, in entries (CAP.MQES + 1), at most 65536 (MQES =
    /// FFFFh). 1 (MQES = 0) is below the specification's minimum of 2 and
    /// exists to show what a host does with a controller that reports it.
    pub max_queue_entries: u32,
    /// I/O queue pairs the controller can grant.
    pub max_io_queues: u16,
    /// CAP.DSTRD: doorbell stride `4 << dstrd`.
    pub dstrd: u8,
    /// CAP.TO in 500 ms units.
    pub timeout_500ms: u8,
    /// Time from CC.EN=1 to CSTS.RDY=1. Clearing CC.EN again before
    /// CSTS.RDY is 1 has undefined results (NVMe 1.4c §3.1.5, CC.EN); this
    /// controller then reports fatal status (CSTS.CFS) and stays failed
    /// until a reset.
    pub ready_delay: Duration,
    /// NVMe 2.0 ready timeouts (CAP.CRMS, CRTO register at 68h), in 500 ms
    /// units: (CRWMT, CRIMT). `None`: a 1.4 controller (CRMS = 0, CRTO reads 0).
    pub ready_timeouts_500ms: Option<(u16, u16)>,
    /// RTD3 Entry Latency reported in Identify Controller, microseconds
    /// (the time a normal shutdown may take; 0 = not reported).
    pub rtd3e_us: u32,
    /// Time from CC.SHN = 01b to CSTS.SHST = 10b (SHST reads 01b,
    /// "occurring", meanwhile); `Duration::MAX`: the shutdown never completes.
    pub shutdown_time: Duration,
    /// Set Features Number of Queues grants every queue the controller has,
    /// whatever was asked, as QEMU's emulated controller does (the
    /// specification lets a controller allocate more than requested).
    pub grants_every_queue: bool,
    /// Serial number (Identify SN).
    pub serial: String,
    /// Model number (Identify MN).
    pub model: String,
    /// Firmware revision (Identify FR).
    pub firmware: String,
    /// NVMe version (VS and Identify Controller VER): (major, minor). A
    /// 1.0 controller decodes only bit 0 of Identify's CNS, as the 1.0
    /// specification defines it (CNS 02h reads as a namespace, 03h as the
    /// controller).
    pub version: (u16, u8),
    /// Host Memory Buffer Preferred Size reported in Identify Controller
    /// (HMPRE, 4 KiB pages; 0: none asked for). HMMIN is half of it.
    pub host_memory_buffer_pages: u32,
    /// Command Retry Delay Times 1-3 reported in Identify Controller
    /// (CRDT, 100 ms units; all 0: none). With them, a host that enables
    /// ACRE gets statuses injected by `Faults::status_every` with CRD 1.
    pub retry_delays_100ms: [u16; 3],
    /// Maximum Time for Firmware Activation reported in Identify
    /// Controller (MTFA, 100 ms units; 0: not reported): how long a host
    /// should let `Faults::pause_ms` last before it acts.
    pub firmware_activation_100ms: u16,
    /// Controller Type reported in Identify Controller (CNTRLTYPE: 1 I/O,
    /// 2 Discovery, 3 Administrative; 0 not reported).
    pub controller_type: u8,
    /// Identify Controller SQES and CQES (bits 3:0 required, 7:4 largest
    /// entry size, log2 bytes): 0x66 and 0x44 for the NVM command set.
    pub entry_sizes: (u8, u8),
    /// Advertise and implement Doorbell Buffer Config (OACS bit 8).
    pub shadow_doorbells: bool,
    /// Count register writes (an atomic increment per write).
    pub count_register_writes: bool,
    /// Pin the controller thread to this CPU.
    pub cpu: Option<usize>,
    /// Busy-poll iterations with no work before the thread starts yielding.
    pub idle_spins: u32,
    /// Longest park when idle (a register write wakes it sooner).
    pub max_park: Duration,
    /// Controller-side event callback.
    pub events: Option<EventHook>,
    /// Run the controller on its own thread (true), or synchronously inside
    /// the host's register accesses (false): deterministic, single threaded,
    /// for traces and instruction counting. See
    /// [`SimController::step`](crate::SimController::step).
    pub threaded: bool,
    /// Answer every Identify Namespace Identification Descriptor list (CNS
    /// 03h) with Invalid Namespace or Format, as some controllers of the
    /// NVM command set alone do (Linux's `NVME_QUIRK_NO_NS_DESC_LIST`).
    pub ns_descriptors_fail: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            namespaces: vec![NamespaceConfig { blocks: 1 << 17, lba_size: 512 }],
            inactive_namespaces: 0,
            namespace_formats: vec![],
            data: DataMode::Ram,
            mdts: 7,
            max_queue_entries: 2048,
            max_io_queues: 64,
            dstrd: 0,
            timeout_500ms: 4,
            ready_delay: Duration::ZERO,
            ready_timeouts_500ms: None,
            rtd3e_us: 0,
            shutdown_time: Duration::ZERO,
            grants_every_queue: false,
            serial: "NVBSIM0001".into(),
            model: "nvme-bypass simulated controller".into(),
            firmware: "1.0".into(),
            version: (1, 4),
            host_memory_buffer_pages: 0,
            retry_delays_100ms: [0; 3],
            firmware_activation_100ms: 0,
            controller_type: 1,
            entry_sizes: (0x66, 0x44),
            shadow_doorbells: true,
            count_register_writes: false,
            cpu: None,
            idle_spins: 20_000,
            max_park: Duration::from_millis(2),
            events: None,
            threaded: true,
            ns_descriptors_fail: false,
        }
    }
}

impl SimConfig {
    /// HMMIN: half the Host Memory Buffer asked for.
    pub fn host_memory_min_pages(&self) -> u32 {
        self.host_memory_buffer_pages / 2
    }

    /// One namespace of `bytes` bytes with `lba_size`-byte blocks.
    pub fn with_namespace(mut self, bytes: u64, lba_size: u32) -> Self {
        self.namespaces = vec![NamespaceConfig { blocks: bytes / lba_size as u64, lba_size }];
        self
    }
}

/// Why a simulated controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Bad configuration.
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    /// Namespace memory could not be had.
    #[error("could not allocate {0} bytes for the simulated namespaces; use a smaller namespace (bench --sim-size, fio size=) or no data (bench --sim-data null)")]
    Memory(u64),
}
