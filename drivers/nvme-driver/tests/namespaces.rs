//! Namespaces unlike a single NSID 1: gaps in the NSID list, no NSID 1,
//! inactive NSIDs, and the command set and format Identify reports, against
//! the simulated controller.

use nvme_driver::{Controller, ControllerConfig, DataPtr, Error};
use nvme_sim::{NamespaceConfig, NamespaceFormat, SimConfig, SimController, SimRegisters};
use nvme_spec::identify::csi;
use nvme_spec::status::generic as gs;
use nvme_spec::StatusCodeType;
use std::time::{Duration, Instant};

fn bring_up(cfg: SimConfig) -> (SimController, Controller<SimRegisters>) {
    let sim = SimController::start(SimConfig { idle_spins: 2000, ..cfg }).unwrap();
    let ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig { io_queues: 1, admin_timeout: Duration::from_secs(5), ..Default::default() }).unwrap();
    (sim, ctrl)
}

/// NSIDs 1 and 3 inactive (0 blocks), 2 plain, 4 with 16 bytes of separate
/// metadata and protection information Type 1, 5 zoned.
fn gaps() -> SimConfig {
    let ns = |blocks| NamespaceConfig { blocks, lba_size: 512 };
    SimConfig {
        namespaces: vec![ns(0), ns(4096), ns(0), ns(4096), ns(4096)],
        namespace_formats: vec![
            NamespaceFormat::default(),
            NamespaceFormat::default(),
            NamespaceFormat::default(),
            NamespaceFormat { ms: 16, pi: 1, ..Default::default() },
            NamespaceFormat { csi: csi::ZONED, ..Default::default() },
        ],
        ..SimConfig::default()
    }
}

#[test]
fn active_list_skips_inactive_nsids() {
    let (_sim, mut ctrl) = bring_up(gaps());
    assert_eq!(ctrl.identify().nn, 5);
    assert_eq!(ctrl.active_namespaces().unwrap(), [2, 4, 5]);
    for n in [1, 3] {
        assert!(matches!(ctrl.identify_namespace(n), Err(Error::InactiveNamespace { .. })), "nsid {n}");
    }
    assert_eq!(ctrl.identify_namespace(2).unwrap().nsze, 4096);
}

#[test]
fn controllers_before_1_1_and_1_3_are_not_asked_for_lists_they_do_not_define() {
    // NVMe 1.0 decodes one bit of CNS: CNS 02h would read as a namespace
    // (NSID 0: an error) and CNS 03h as the controller's page.
    for version in [(1, 0), (1, 2)] {
        let (_sim, mut ctrl) = bring_up(SimConfig { version, ..gaps() });
        assert!(!ctrl.version().at_least(1, 3), "{version:?}");
        assert_eq!(ctrl.active_namespaces().unwrap(), [2, 4, 5], "{version:?}: one by one before 1.1");
        let d = ctrl.identify_ns_descriptors(2).unwrap();
        assert_eq!(d.csi, None, "{version:?}: not asked before 1.3: NVM, not reported");
    }
    // An NN of billions (nonsense, found by fuzzing): the first 1024 only.
    let (_sim, mut ctrl) = bring_up(SimConfig { version: (1, 0), inactive_namespaces: 3_000_000_000, ..gaps() });
    let t = Instant::now();
    assert_eq!(ctrl.active_namespaces().unwrap(), [2, 4, 5]);
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
}

#[test]
fn command_set_and_format_as_identify_reports_them() {
    let (_sim, mut ctrl) = bring_up(gaps());
    assert_eq!(ctrl.identify_ns_descriptors(2).unwrap().csi, Some(csi::NVM));
    assert_eq!(ctrl.identify_ns_descriptors(5).unwrap().csi, Some(csi::ZONED));
    assert_eq!(ctrl.identify_ns_descriptors(3).unwrap().csi, None, "inactive: no descriptors");
    let pi = ctrl.identify_namespace(4).unwrap();
    assert_eq!((pi.current_format().ms, pi.pi_type(), pi.metadata_extended()), (16, 1, false));
    assert_eq!(pi.lbaf[0].ms, 0, "a format without metadata is listed too");
}

#[test]
fn io_to_an_inactive_nsid_is_invalid_namespace() {
    let (_sim, mut ctrl) = bring_up(gaps());
    let mut qp = ctrl.create_io_queue_pair(8).unwrap();
    let buf = ctrl.allocator().alloc(4096, 4096).unwrap();
    for (nsid, want) in [(3, gs::INVALID_NAMESPACE_OR_FORMAT), (2, gs::SUCCESS)] {
        qp.submit(nvme_spec::cmd::ReadWrite::read(nsid, 0, 1).build(), Some(DataPtr::of(&buf)), 1).unwrap();
        qp.ring();
        let start = Instant::now();
        let mut st = None;
        while st.is_none() {
            qp.poll(1, |c| st = Some(c.status()));
            assert!(start.elapsed() < Duration::from_secs(5), "command timed out");
        }
        let st = st.unwrap();
        assert_eq!((st.sct, st.sc), (StatusCodeType::GENERIC, want), "nsid {nsid}");
    }
}

/// More than one CNS 02h page of active namespaces: the list goes on from
/// the last ID of a full page, as Linux's `nvme_scan_ns_list` reads it.
#[test]
fn active_list_reads_every_page() {
    let ns = |blocks| NamespaceConfig { blocks, lba_size: 512 };
    // 1500 NSIDs, every third inactive: 1000 active, in two pages.
    let namespaces: Vec<NamespaceConfig> = (1..=1500u32).map(|i| ns(if i % 3 == 0 { 0 } else { 8 })).collect();
    let (_sim, mut ctrl) = bring_up(SimConfig { namespaces, data: nvme_sim::DataMode::Null, ..SimConfig::default() });
    let active = ctrl.active_namespaces().unwrap();
    let expected: Vec<u32> = (1..=1500u32).filter(|i| i % 3 != 0).collect();
    assert_eq!(active.len(), expected.len());
    assert_eq!(active, expected);
}

/// A controller of the NVM command set alone (CAP.CSS bit 6 clear) that
/// fails Identify CNS 03h still has usable namespaces (NVM); one with I/O
/// command sets does not get the error hidden: its namespaces' set is not
/// known without the list.
#[test]
fn a_failed_descriptor_list_is_nvm_only_where_nvm_is_all_there_is() {
    let (_sim, mut ctrl) = bring_up(SimConfig { ns_descriptors_fail: true, ..SimConfig::default() });
    assert!(!ctrl.cap().supports_io_command_sets());
    assert_eq!(ctrl.identify_ns_descriptors(1).unwrap().csi, None, "NVM, not reported");
    let (_sim, mut ctrl) = bring_up(SimConfig { ns_descriptors_fail: true, ..gaps() });
    assert!(ctrl.cap().supports_io_command_sets(), "a zoned namespace: CAP.CSS bit 6");
    match ctrl.identify_ns_descriptors(2) {
        Err(Error::Command { status, .. }) => assert_eq!(status.sc, gs::INVALID_NAMESPACE_OR_FORMAT),
        other => panic!("{other:?}"),
    }
}
