//! The driver against a hostile controller (tests/support/hostile.rs): a
//! scripted device whose register values, Identify data and every
//! completion come from a script. The fuzz target `hostile` (tests/fuzz)
//! drives the same run from fuzz input; every input it found that broke a
//! property is checked in under tests/fuzz/regressions/hostile/ and replayed
//! here, next to hand-written scenarios for the classes of fault.

mod support;

use arbitrary::{Arbitrary, Unstructured};
use support::hostile::{run, Act, CapScript, Fate, HostScript, How, IdentScript, NsScript, Outcome, Scenario, Transition};

/// Admin commands before the first I/O: Identify Controller, Set Features
/// Number of Queues, Identify Namespace, the active namespace list, Create
/// I/O CQ and SQ.
const ADMIN_UP: usize = 6;

/// A well-behaved controller: 4 KiB pages, 512-byte blocks, one namespace.
fn honest() -> Scenario {
    Scenario {
        cap: CapScript { mqes: 63, to: 1, dstrd: 0, css: 1, mpsmin: 0, crms: 0 },
        vs: 0x10400,
        crto: 0,
        host: HostScript {
            admin_entries: 8,
            io_queues: 0,
            shadow: false,
            batch_cq: true,
            streaming: false,
            queue_entries: 14,
            ios: 8,
            blocks: 1,
            offset: 0,
            abort: false,
            reset: false,
            delete: true,
            second_queue: false,
        },
        ident: IdentScript { mdts: 5, nn: 1, sqes: 0x66, cqes: 0x44, oacs: 0, rtd3e: 0, patches: vec![] },
        ns: NsScript { nsze: 1 << 20, ncap: 1 << 20, nlbaf: 0, flbas: 0, lbaf: [9 << 16, 0, 0, 0] },
        queues_allocated: 0,
        acts: vec![],
    }
}

#[test]
fn an_honest_controller_passes() {
    let r = run(&honest());
    assert!(r.up && r.completed == 8 && r.errors.is_empty(), "{r:?}");
    let mut s = honest();
    s.host.shadow = true;
    s.ident.oacs = 1 << 8;
    s.host.abort = true;
    s.host.reset = true;
    s.host.second_queue = true;
    s.host.io_queues = 1;
    s.queues_allocated = 0x0001_0001;
    let r = run(&s);
    assert!(r.up && r.completed == 16 && r.errors.is_empty(), "{r:?}");
}

#[test]
fn a_controller_that_never_becomes_ready_is_a_timeout() {
    let mut s = honest();
    s.acts = vec![Act::Transition(Transition { reads: 0, outcome: Outcome::Never })];
    let r = run(&s);
    assert!(!r.up && r.errors[0].contains("did not set CSTS.RDY"), "{r:?}");
}

#[test]
fn completions_lost_repeated_and_forged_are_survived() {
    let mut s = honest();
    s.host.abort = true;
    let bad = How { cid_xor: 1, ..Default::default() };
    // The admin commands up to the I/O queue pair complete, then the I/O.
    s.acts = vec![Act::Fate(Fate::Now(How::default())); ADMIN_UP + 2];
    s.acts.extend([
        Act::Fate(Fate::Never),
        Act::Repeat,
        Act::Fate(Fate::Later(3, How::default())),
        Act::Stray { cq: 1, cid: 2, sqid: 1, sqhd: 0, status: 0, phase_ok: true },
        Act::Fate(Fate::Now(bad)),
        Act::Fate(Fate::Now(How { status: Some(0x4004), ..Default::default() })),
    ]);
    let r = run(&s);
    assert!(r.up && r.completed > 0, "{r:?}");
}

/// Every input the fuzzer found that broke a property, replayed.
#[test]
fn fuzz_regressions_replay() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fuzz/regressions/hostile");
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("tests/fuzz/regressions/hostile exists") {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        if let Ok(s) = Scenario::arbitrary_take_rest(Unstructured::new(&bytes)) {
            eprintln!("replaying {}", path.display());
            run(&s);
            n += 1;
        }
    }
    eprintln!("{n} fuzz regressions replayed");
}

/// `NVB_HOSTILE_REPLAY=<dir or file>`: replay fuzz inputs (a corpus, an
/// artifact) and print how far each went. Does nothing otherwise.
#[test]
fn replay_from_environment() {
    let Some(p) = std::env::var_os("NVB_HOSTILE_REPLAY") else { return };
    let mut p = std::path::PathBuf::from(p);
    // Tests run in the crate's directory: a relative path that is not
    // found there is taken from the workspace's root, where it was typed.
    if p.is_relative() && !p.exists() {
        p = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(p);
    }
    let files: Vec<_> = if p.is_dir() { std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()).collect() } else { vec![p] };
    for f in files.into_iter().filter(|f| f.extension().is_none_or(|x| x != "md")) {
        let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("NVB_HOSTILE_REPLAY: cannot read {}: {e}; give a fuzz input or a folder of them (a relative path is taken from the crate's folder, then from the repository's root)", f.display()));
        if let Ok(s) = Scenario::arbitrary_take_rest(Unstructured::new(&bytes)) {
            let r = run(&s);
            println!("{}: up={} completed={} abandoned={} errors={:?}", f.display(), r.up, r.completed, r.abandoned, r.errors);
        }
    }
}

/// A Delete I/O SQ the controller refuses leaves the queue on the device:
/// its rings, PRP lists and data buffers must stay allocated (quarantine)
/// until the controller is seen to stop, which the device checks at every
/// step.
#[test]
fn a_refused_queue_deletion_keeps_the_queue_memory() {
    let mut s = honest();
    // The admin commands up to the I/O queue pair, eight I/Os: all complete.
    s.acts = vec![Act::Fate(Fate::Now(How::default())); ADMIN_UP + 8];
    // Delete I/O SQ: Invalid Queue Identifier (SCT 1, SC 01h).
    s.acts.push(Act::Fate(Fate::Now(How { status: Some((1 << 9 | 0x01) << 1), ..Default::default() })));
    let r = run(&s);
    assert_eq!(r.completed, 8, "{r:?}");
    assert!(r.errors.iter().any(|e| e.contains("deleting I/O queue pair 1 failed")), "{r:?}");
}

/// A command the controller never completes comes back to the caller as
/// abandoned once the reset has stopped the controller and the queue pair
/// is re-created, and its buffer with it: the device checks it holds no
/// command on that buffer then, and never touches it again.
#[test]
fn a_command_never_completed_comes_back_after_the_reset() {
    let mut s = honest();
    s.acts = vec![Act::Fate(Fate::Now(How::default())); ADMIN_UP];
    s.acts.push(Act::Fate(Fate::Never));
    let r = run(&s);
    assert_eq!((r.completed, r.abandoned), (7 + 8, 1), "{r:?}");
    assert!(r.errors.is_empty(), "{r:?}");
}

/// Doorbell Buffer Config that never completes, and a controller that
/// fails fatally when the reset tries to stop it: the controller may have
/// taken both buffers and was never seen to stop, so they stay allocated
/// (the device reads the shadow doorbells at every step it takes).
#[test]
fn doorbell_buffers_stay_while_their_command_may_still_run() {
    let mut s = honest();
    s.host.shadow = true;
    s.ident.oacs = 1 << 8;
    // Identify Controller and Number of Queues complete; Doorbell Buffer
    // Config does not; the reset's CC.EN = 0 ends in CSTS.CFS.
    s.acts = vec![Act::Fate(Fate::Now(How::default())); 2];
    s.acts.push(Act::Fate(Fate::Never));
    s.acts.push(Act::Transition(Transition { reads: 0, outcome: Outcome::Fatal }));
    let r = run(&s);
    assert!(!r.up && r.errors.iter().any(|e| e.contains("Doorbell Buffer Config did not complete")), "{r:?}");
    // And the message does not claim the controller was left disabled.
    assert!(r.errors.iter().all(|e| e.contains("did not stop") && !e.contains("left disabled")), "{r:?}");
}
