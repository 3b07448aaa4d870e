//! `nvme-bypass trace` on the simulator: no hardware, no root. The story's
//! steps appear in order, and the phase flips exactly when the completion
//! queue wraps.

use serde_json::Value;
use std::process::Command;

fn trace(args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).arg("trace").args(args).args(["--output-format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

fn pos(ev: &[Value], pred: impl Fn(&Value) -> bool, what: &str) -> usize {
    ev.iter().position(pred).unwrap_or_else(|| panic!("no {what} in the trace"))
}

fn text(e: &Value) -> &str {
    e["text"].as_str().unwrap()
}

#[test]
fn story_steps_in_order() {
    let ev = trace(&[]);
    let cap = pos(&ev, |e| e["kind"] == "reg_read" && text(e).contains("CAP") && text(e).contains("MQES="), "CAP read");
    let aqa = pos(&ev, |e| e["kind"] == "reg_write" && text(e).contains("AQA"), "AQA write");
    let asq = pos(&ev, |e| e["kind"] == "reg_write" && text(e).contains("ASQ "), "ASQ write");
    let acq = pos(&ev, |e| e["kind"] == "reg_write" && text(e).contains("ACQ "), "ACQ write");
    let en = pos(&ev, |e| e["kind"] == "reg_write" && text(e).contains("CC ") && text(e).contains("EN=1"), "CC.EN=1 write");
    let rdy = pos(&ev, |e| e["kind"] == "reg_read" && text(e).contains("RDY=1"), "CSTS.RDY=1 read");
    let idc = pos(&ev, |e| e["kind"] == "fetch" && text(e).contains("Identify") && text(e).contains("cns=0x01"), "Identify Controller fetch");
    let cq = pos(&ev, |e| e["kind"] == "fetch" && text(e).contains("Create I/O CQ"), "Create I/O CQ");
    let sq = pos(&ev, |e| e["kind"] == "fetch" && text(e).contains("Create I/O SQ"), "Create I/O SQ");
    let first_io = pos(&ev, |e| e["kind"] == "sqe" && e["qid"] == 1, "I/O submission");
    let db = pos(&ev, |e| e["kind"] == "doorbell" && text(e).contains("SQ1TDBL"), "SQ1 tail doorbell");
    let fetch = pos(&ev, |e| e["kind"] == "fetch" && e["qid"] == 1, "I/O fetch");
    let post = pos(&ev, |e| e["kind"] == "post_cqe" && e["qid"] == 1, "I/O completion");
    let reap = pos(&ev, |e| e["kind"] == "cqe" && e["qid"] == 1, "I/O reap");
    let cqdb = pos(&ev, |e| e["kind"] == "doorbell" && text(e).contains("CQ1HDBL"), "CQ1 head doorbell");
    let prp = pos(&ev, |e| e["kind"] == "prp_list", "PRP list walk");
    let shn = pos(&ev, |e| e["kind"] == "reg_write" && text(e).contains("SHN=01"), "CC.SHN=01 write");
    let shst = pos(&ev, |e| e["kind"] == "shutdown", "shutdown complete");
    let order = [cap, aqa, asq, acq, en, rdy, idc, cq, sq, first_io, db, fetch, post, reap, cqdb, prp, shn, shst];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "steps out of order: {order:?}");
    // The multi-page write: PRP2 points at a list of three entries.
    assert_eq!(ev[prp]["value"], 3);
    // Every I/O the host posted was fetched and completed successfully.
    let posted = ev.iter().filter(|e| e["kind"] == "sqe" && e["qid"] == 1).count();
    let reaped: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "cqe" && e["qid"] == 1).collect();
    assert_eq!(posted, reaped.len());
    assert!(reaped.iter().all(|e| text(e).contains("SUCCESS")));
}

#[test]
fn phase_flips_exactly_when_the_completion_queue_wraps() {
    for entries in ["2", "3", "4", "7"] {
        let ev = trace(&["--queue-entries", entries, "--commands", "13"]);
        let n: u64 = entries.parse().unwrap();
        let mut expected_phase = 1u64;
        let mut reaped = 0u64;
        let mut flips = 0;
        for (i, e) in ev.iter().enumerate() {
            if e["qid"] != 1 {
                continue;
            }
            match e["kind"].as_str().unwrap() {
                "cqe" => {
                    assert_eq!(e["slot"].as_u64().unwrap(), reaped % n, "CQ head moves one slot per entry");
                    assert_eq!(e["value"].as_u64().unwrap(), expected_phase, "entry {reaped} carries the lap's phase");
                    reaped += 1;
                    let wrapped = reaped % n == 0;
                    let next_is_flip = ev[i + 1]["kind"] == "phase_flip";
                    assert_eq!(wrapped, next_is_flip, "flip iff the head wrapped (entries {n}, reap {reaped})");
                }
                "phase_flip" => {
                    flips += 1;
                    expected_phase ^= 1;
                    assert_eq!(e["value"].as_u64().unwrap(), expected_phase);
                }
                _ => {}
            }
        }
        assert_eq!(flips, reaped / n, "one flip per lap");
        assert!(flips >= 2, "the story wraps the queue more than once");
    }
}

#[test]
fn text_output_and_hex() {
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(["trace", "--hex"]).output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("== bring-up"));
    assert!(s.contains("00: 02 00"), "hex of a Read SQE (opcode 02h first)");
    assert!(s.contains("phase_flip"));
}

/// --backend offers only the paths whose queues are ours to show (a kernel
/// path is refused saying what to use instead, and --help lists none), and
/// vfio's --allow-write is refused on the simulator, as is a namespace it
/// does not have.
#[test]
fn only_our_driver_s_paths_and_their_options_are_offered() {
    for b in ["passthru", "block"] {
        let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(["trace", "--backend", b]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("use --backend sim or vfio") && err.contains(&format!("nvme-bypass bench --backend {b}")), "{err}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(["trace", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    // The permission to write a real controller is vfio's only.
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(["trace", "--allow-write"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--allow-write has no effect on --backend sim"), "{err}");
    // The simulator has namespace 1 only, as bench says.
    let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).args(["trace", "--nsid", "2"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("namespace 2 is not active on the simulated controller; it has namespace 1"), "{err}");
    let backend = &help[help.find("--backend").unwrap()..help.find("--device").unwrap()];
    assert!(backend.contains("sim") && backend.contains("vfio") && !backend.contains("Possible values"), "{backend}");
}

/// Admin commands show the host's side as I/O commands do: each is posted
/// before its doorbell, fetched, completed and then reaped, CID for CID,
/// before the head doorbell.
#[test]
fn admin_commands_show_the_host_s_post_and_reap() {
    let ev = trace(&[]);
    let fetches: Vec<usize> = (0..ev.len()).filter(|&i| ev[i]["kind"] == "fetch" && ev[i]["qid"] == 0).collect();
    assert!(fetches.len() >= 7, "bring-up, Identify Namespace, queue creation and deletion: {}", fetches.len());
    for f in fetches {
        let cid = text(&ev[f]).split("cid=").nth(1).unwrap().split(' ').next().unwrap().to_string();
        let post = (0..f).rev().find(|&i| ev[i]["kind"] == "sqe" && ev[i]["qid"] == 0).expect("a host post before the fetch");
        assert!(text(&ev[post]).contains(&format!("cid={cid} ")), "{} / {}", text(&ev[post]), text(&ev[f]));
        let db = (post..f).find(|&i| ev[i]["kind"] == "doorbell" && text(&ev[i]).contains("SQ0TDBL"));
        assert!(db.is_some(), "the SQ0 doorbell between the post and the fetch of cid {cid}");
        let reap = (f..ev.len()).find(|&i| ev[i]["kind"] == "cqe" && ev[i]["qid"] == 0).expect("a host reap after the fetch");
        assert!(text(&ev[reap]).contains(&format!("cid:{cid} ")) && text(&ev[reap]).contains("SUCCESS"), "{}", text(&ev[reap]));
        assert!(ev[reap + 1]["kind"] == "doorbell" && text(&ev[reap + 1]).contains("CQ0HDBL"), "{}", text(&ev[reap + 1]));
    }
}

/// docs/queues.md teaches from the trace: every trace line it quotes is
/// one the trace prints today, sequence number included (`...` stands for
/// text left out). When this fails, run the commands below, update the
/// quoted lines, and check the `[N]` citations in the prose beside them.
#[test]
fn the_guide_quotes_the_trace_as_it_is() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_nvme-bypass")).arg("trace").args(args).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let outputs = [run(&[]), run(&["--queue-entries", "2", "--commands", "3"])];
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/queues.md")).unwrap();
    // A quoted line matches a printed one when its pieces between `...`
    // appear in order, the first at the start, and nothing follows the
    // last unless the quote ends in `...`.
    let matches = |quote: &str, line: &str| {
        let pieces: Vec<&str> = quote.split("...").map(str::trim).collect();
        let mut at = 0;
        for (k, p) in pieces.iter().enumerate() {
            if p.is_empty() {
                continue;
            }
            match line[at..].find(p) {
                Some(i) if k > 0 || i == 0 => at += i + p.len(),
                _ => return false,
            }
        }
        quote.trim_end().ends_with("...") || line[at..].trim().is_empty()
    };
    let mut quoted = 0;
    let mut stale = vec![];
    for (n, q) in guide.lines().enumerate() {
        let Some(rest) = q.strip_prefix('[') else { continue };
        if !rest.split(']').next().is_some_and(|seq| !seq.trim().is_empty() && seq.trim().chars().all(|c| c.is_ascii_digit())) {
            continue;
        }
        quoted += 1;
        if !outputs.iter().any(|o| o.lines().any(|l| matches(q, l))) {
            stale.push(format!("docs/queues.md:{}: {q}", n + 1));
        }
    }
    assert!(quoted > 50, "the guide quotes {quoted} trace lines");
    assert!(stale.is_empty(), "trace lines the guide quotes that `nvme-bypass trace` (or `trace --queue-entries 2 --commands 3`) no longer prints:\n{}", stale.join("\n"));
}
