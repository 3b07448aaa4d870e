//! `nvme-bypass count-report`: the emulated test bed's exact instruction
//! counts beside a comparison. QEMU TCG counted every guest instruction
//! between the markers of each compare row (`insn.jsonl`); with the guest's
//! kallsyms and the binary that ran, each row gets user and kernel
//! instructions per I/O net of the idle background, the empty polls' share
//! as its own figure, system calls, interrupts, doorbell writes and context
//! switches per I/O, and the kernel's instructions by layer. Writes
//! `count.json`, `count.txt` and `instructions_per_io_by_layer.svg`.
//!
//! These are instruction counts of an emulated machine, not time: they say
//! how much work each path asks of the CPU, exactly and repeatably, not how
//! fast real hardware runs it. Every output says so.

mod chart;

use crate::error::{exit, Error};
use crate::measure::insn::{self, Background, LayerTable, RowCounts, RowInput, Symbols, UserSymbols, Window, CALIBRATION_BASE, IDLE_WINDOW};
use chart::{Bar, MEASURED};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Options of `count-report`.
#[derive(clap::Args, Debug, Clone)]
pub struct CountReportArgs {
    /// compare.json of the run the windows measured.
    #[arg(long)]
    pub compare: PathBuf,
    /// The instruction counting plugin's windows, one JSON line each.
    #[arg(long)]
    pub windows: PathBuf,
    /// The guest's /proc/kallsyms, read as root during the run.
    #[arg(long)]
    pub kallsyms: PathBuf,
    /// The nvme-bypass binary that ran in the guest (unstripped).
    #[arg(long)]
    pub binary: PathBuf,
    /// Physical base address of the controller's BAR0, hex (doorbells are BAR0 + 0x1000..0x2000).
    #[arg(long, value_parser = parse_bar0)]
    pub bar0: Option<u64>,
    /// Duration of the idle background window (9999), seconds; without it nothing is subtracted.
    #[arg(long)]
    pub idle_seconds: Option<f64>,
    /// Polls in each empty-poll calibration window (10000 + row): the engine makes 10000.
    #[arg(long, default_value_t = crate::measure::marker::CALIBRATION_POLLS)]
    pub calibration_polls: u64,
    /// Folder for count.json, count.txt and the chart (created).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn parse_bar0(s: &str) -> Result<u64, String> {
    insn::parse_hex(s).ok_or_else(|| format!("not a hex address: {s:?}"))
}

/// What count-report reads of compare.json.
#[derive(Clone, Debug, Deserialize)]
pub struct CompareFile {
    /// Rows in run order: row i is window i.
    pub rows: Vec<CompareRow>,
    /// The baseline row's label.
    #[serde(default = "default_baseline")]
    pub baseline: String,
}

fn default_baseline() -> String {
    "block/io_uring".into()
}

/// A row of compare.json.
#[derive(Clone, Debug, Deserialize)]
pub struct CompareRow {
    /// What ran.
    pub variant: CompareVariant,
    /// Its summary, when it ran.
    pub summary: Option<CompareSummary>,
    /// Why it did not run.
    #[serde(default)]
    pub error: Option<String>,
}

/// A row's variant.
#[derive(Clone, Debug, Deserialize)]
pub struct CompareVariant {
    /// Row label.
    pub label: String,
    /// Path kind, as compare wrote it.
    #[serde(default)]
    pub path: serde_json::Value,
}

/// The parts of a run summary the counts need.
#[derive(Clone, Debug, Deserialize)]
pub struct CompareSummary {
    /// Measured wall time, ns.
    pub elapsed_ns: u64,
    /// Reads.
    pub read: Ios,
    /// Writes.
    pub write: Ios,
    /// The engine's counters.
    pub cpu: EmptyPolls,
}

/// I/O count of a direction.
#[derive(Clone, Debug, Deserialize)]
pub struct Ios {
    /// I/Os.
    pub ios: u64,
}

/// The engine's empty polls.
#[derive(Clone, Debug, Deserialize)]
pub struct EmptyPolls {
    /// Polls that found nothing.
    #[serde(default)]
    pub empty_polls: u64,
    /// The I/O threads' CPU time, ns.
    #[serde(default)]
    pub cpu_ns: u64,
}

/// One row of count.json.
#[derive(Clone, Debug, Serialize)]
pub struct CountRow {
    /// Row label.
    pub label: String,
    /// Path kind.
    pub path: serde_json::Value,
    /// The plugin's window.
    pub window: u64,
    /// I/Os of the row (compare's summary).
    pub ios: u64,
    /// Measured seconds (compare's summary).
    pub duration_s: f64,
    /// What the figures are.
    pub measurement: &'static str,
    /// The figures, when the row has them.
    #[serde(flatten)]
    pub counts: Option<RowCounts>,
    /// Total instructions per I/O over the baseline row's.
    pub total_vs_baseline: Option<f64>,
    /// Why the row has no figures.
    pub error: Option<String>,
}

/// count.json.
#[derive(Clone, Debug, Serialize)]
pub struct CountReport {
    /// Tool version.
    pub version: &'static str,
    /// What the figures are.
    pub measurement: &'static str,
    /// Baseline row label.
    pub baseline: String,
    /// The idle background's duration, seconds (none: not subtracted).
    pub idle_seconds: Option<f64>,
    /// Polls per calibration window.
    pub calibration_polls: u64,
    /// BAR0 physical base.
    pub bar0: Option<String>,
    /// Rows in compare's order.
    pub rows: Vec<CountRow>,
    /// One line per path: its instructions per I/O against the baseline's.
    pub headline: Vec<String>,
    /// Things the reader should know (missing windows, ...).
    pub notes: Vec<String>,
}

/// The inputs, parsed.
pub struct Inputs<'a> {
    /// compare.json.
    pub compare: &'a CompareFile,
    /// The windows.
    pub windows: &'a [Window],
    /// Symbols and layers.
    pub symbols: Symbols<'a>,
    /// Idle window seconds.
    pub idle_seconds: Option<f64>,
    /// K.
    pub calibration_polls: u64,
}

/// The report from parsed inputs.
pub fn build(i: &Inputs) -> CountReport {
    let mut notes = vec![];
    let find = |id: u64| i.windows.iter().find(|w| w.window == id);
    let bg = match (find(IDLE_WINDOW), i.idle_seconds) {
        (Some(w), Some(seconds)) => {
            // The busy background (window 9998: one vCPU spinning in user
            // mode for as long), when the boot measured it.
            let busy = find(insn::BUSY_WINDOW).filter(|_| seconds > 0.0).map(|b| (b, seconds));
            let bg = Background::new(w, seconds, busy, &i.symbols);
            // Either background window with a process's work in it
            // overstates what every row has subtracted.
            for (what, id, t) in [("idle", IDLE_WINDOW, Some(bg.idle_tally())), ("busy", insn::BUSY_WINDOW, bg.busy_tally())] {
                let Some(t) = t else { continue };
                if t.process_starts + t.process_exits > 0 {
                    notes.push(format!(
                        "{what} background (window {id}): {} process(es) started and {} ended in it, so it overstates the background subtracted from every row",
                        t.process_starts, t.process_exits
                    ));
                }
            }
            if seconds > 0.0 {
                notes.push(format!(
                    "idle background (window {IDLE_WINDOW}, {seconds} s, same boot): {:.0} user and {:.0} kernel instructions per second, subtracted from every row for its duration",
                    w.user() as f64 / seconds,
                    w.kernel() as f64 / seconds
                ));
            }
            if let Some((b, _)) = busy {
                notes.push(format!(
                    "busy background (window {}, {seconds} s, one vCPU spinning in user mode): {:.0} kernel instructions per second, {:.0} more than idle per CPU second of a row's threads, subtracted for each row's CPU seconds",
                    insn::BUSY_WINDOW,
                    b.kernel() as f64 / seconds,
                    (b.kernel() as f64 - w.kernel() as f64) / seconds
                ));
            }
            Some(bg)
        }
        (None, Some(_)) => {
            notes.push(format!("no idle window ({IDLE_WINDOW}): the background is not subtracted"));
            None
        }
        (Some(_), None) => {
            notes.push("--idle-seconds not given: the background is not subtracted".into());
            None
        }
        (None, None) => None,
    };
    if i.calibration_polls == 0 {
        notes.push("--calibration-polls not given: no empty-poll figure".into());
    }
    let mut rows = vec![];
    for (n, r) in i.compare.rows.iter().enumerate() {
        let id = n as u64;
        let (ios, duration_s, empty_polls, busy_cpu_s) = match &r.summary {
            Some(s) => (s.read.ios + s.write.ios, s.elapsed_ns as f64 / 1e9, s.cpu.empty_polls, s.cpu.cpu_ns as f64 / 1e9),
            None => (0, 0.0, 0, 0.0),
        };
        let mut row = CountRow {
            label: r.variant.label.clone(),
            path: r.variant.path.clone(),
            window: id,
            ios,
            duration_s,
            measurement: MEASURED,
            counts: None,
            total_vs_baseline: None,
            error: None,
        };
        let result = match (&r.summary, find(id)) {
            (None, _) => Err(format!("not run: {}", r.error.as_deref().unwrap_or("no summary"))),
            (Some(_), None) => Err(format!("no window {id} in the counts")),
            (Some(_), Some(w)) => {
                let calibration = find(CALIBRATION_BASE + id);
                let here = w.empty();
                // The plugin's EMPTY markers and the engine's own count of
                // empty polls are the same events: a difference means the
                // window and the measured interval differ (several threads,
                // or a plugin without pass markers).
                if here.marks != empty_polls {
                    notes.push(format!(
                        "{}: the window ran {} empty-poll markers, the engine counted {} empty polls",
                        row.label, here.marks, empty_polls
                    ));
                }
                if here.discarded > 0 {
                    notes.push(format!(
                        "{}: {} empty passes left out of its empty-poll figure (an interrupt came in them, whose work is the background's, or longer than one pass can be: the thread was preempted; left in the row)",
                        row.label, here.discarded
                    ));
                }
                let (kpolls, kempty, _, kleft) = w.kernel_polls();
                if kpolls > 0 {
                    notes.push(format!(
                        "{}: the kernel's IOPOLL loop polled {} times; {} found nothing and are counted as its empty polls, {} more found nothing but had an interrupt in them (left in the row; the interrupt's work is the background's)",
                        row.label, kpolls, kempty, kleft
                    ));
                }
                let (wait_insns, waits) = w.waits();
                if waits > 0 {
                    notes.push(format!(
                        "{}: {} waits for its queue's interrupt ({:.3} per I/O), {:.0} instructions each (the system calls, the sleep, the interrupt that ends it, the wake-up): {:.0} per I/O, in its total; how many it needs follows the device's pace beside the CPU",
                        row.label,
                        waits,
                        waits as f64 / ios.max(1) as f64,
                        wait_insns as f64 / waits as f64,
                        wait_insns as f64 / ios.max(1) as f64
                    ));
                }
                if calibration.is_none() && here.marks == 0 && i.calibration_polls > 0 && empty_polls > 0 {
                    notes.push(format!("{}: no calibration window {}", row.label, CALIBRATION_BASE + id));
                }
                let input = RowInput {
                    window: w,
                    calibration,
                    ios,
                    duration_s,
                    empty_polls,
                    busy_cpu_s,
                };
                insn::row_counts(&input, bg.as_ref(), i.calibration_polls, &i.symbols)
            }
        };
        match result {
            Ok(c) => {
                if c.processes_started + c.processes_exited > 0 {
                    notes.push(format!(
                        "{}: {} process(es) started and {} ended during its window; their work is in its figures (not a clean count)",
                        row.label, c.processes_started, c.processes_exited
                    ));
                }
                row.counts = Some(c)
            }
            Err(e) => row.error = Some(e),
        }
        rows.push(row);
    }
    let base = rows
        .iter()
        .find(|r| r.label == i.compare.baseline)
        .and_then(|r| r.counts.as_ref())
        .map(|c| c.instructions_per_io.total);
    let mut headline = vec![];
    for r in rows.iter_mut() {
        let (Some(b), Some(c)) = (base, r.counts.as_ref()) else { continue };
        if b <= 0.0 {
            continue;
        }
        let x = c.instructions_per_io.total / b;
        r.total_vs_baseline = Some(x);
        if r.label != i.compare.baseline {
            headline.push(format!(
                "{}: {:.0} instructions per I/O, {:.2}x the {:.0} of {}{}",
                r.label,
                c.instructions_per_io.total,
                x,
                b,
                i.compare.baseline,
                if x > 0.0 && x < 1.0 {
                    format!(" ({:.1}x fewer)", 1.0 / x)
                } else {
                    String::new()
                }
            ));
        }
    }
    if base.is_none() {
        notes.push(format!("no counts for the baseline row {}: no ratios", i.compare.baseline));
    }
    CountReport {
        version: env!("CARGO_PKG_VERSION"),
        measurement: MEASURED,
        baseline: i.compare.baseline.clone(),
        idle_seconds: bg.as_ref().map(|b| b.seconds),
        calibration_polls: i.calibration_polls,
        bar0: i.symbols.bar0.map(|b| format!("{b:#x}")),
        rows,
        headline,
        notes,
    }
}

/// How many layers the table shows per row.
const TOP_LAYERS: usize = 3;

/// A figure of the table, signed: less the idle background it can be
/// below zero, and a 0 there would hide that the background outweighed it.
fn num(x: f64) -> String {
    crate::report::fmt::si(x)
}

/// The table printed beside compare's.
pub fn table(r: &CountReport) -> String {
    let mut o = format!("instructions per I/O: {MEASURED}\n\n");
    o.push_str(&format!(
        "{:<32} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {}\n",
        "path", "usr/IO", "krn/IO", "total/IO", "empty/IO", "wait/IO", "sysc/IO", "irq/IO", "db/IO", "ctxs/IO", "top layers (instructions per I/O)"
    ));
    for row in &r.rows {
        let Some(c) = &row.counts else {
            o.push_str(&format!("{:<32} {}\n", row.label, row.error.as_deref().unwrap_or("no counts")));
            continue;
        };
        let p = &c.instructions_per_io;
        let e = &c.events_per_io;
        let mut top: Vec<&(String, f64)> = c.layers.0.iter().filter(|(_, v)| *v > 0.0).collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = top.iter().take(TOP_LAYERS).map(|(n, v)| format!("{n} {}", num(*v))).collect();
        o.push_str(&format!(
            "{:<32} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>8.2}  {}\n",
            row.label,
            num(p.user),
            num(p.kernel),
            num(p.total),
            p.empty_polls.map(num).unwrap_or("-".into()),
            num(p.waits),
            e.syscalls,
            e.interrupts,
            e.doorbell_writes,
            e.context_switches,
            top.join(", ")
        ));
    }
    o.push_str(
        "\nGuest instructions counted exactly by QEMU TCG between the markers of each row, per I/O,\n\
         less the idle background scaled to the row's duration (so a figure can be negative: the\n\
         background outweighed what the row did there). empty/IO: polls that found nothing,\n\
         ours (each empty pass of the loop counted where it ran) and the kernel's IOPOLL (each poll of\n\
         nvme_poll that found nothing, counted where it ran), in total/IO, never subtracted.\n\
         wait/IO: our thread's waits for its queue's interrupt (the system calls, the sleep, the\n\
         interrupt that ends it, the wake-up; counted where they ran), in total/IO, never subtracted;\n\
         the kernel paths sleep inside their own system calls and show none.\n\
         sysc, irq, ctxs:\n\
         executions of entry_SYSCALL_64, asm_common_interrupt + asm_sysvec_*, __switch_to_asm.\n\
         db: MMIO writes to the controller's doorbell page. Work, not time: an emulated machine.\n",
    );
    if !r.headline.is_empty() {
        o.push_str(&format!("\nheadline (total instructions per I/O, relative to {}):\n", r.baseline));
        for h in &r.headline {
            o.push_str(&format!("  {h}\n"));
        }
    }
    for n in &r.notes {
        o.push_str(&format!("note: {n}\n"));
    }
    o
}

/// The chart's bars: rows with counts, their parts in breakdown order.
pub fn bars(r: &CountReport) -> Vec<Bar> {
    r.rows
        .iter()
        .filter_map(|row| {
            row.counts.as_ref().map(|c| Bar {
                label: row.label.clone(),
                parts: c.layers.0.clone(),
            })
        })
        .collect()
}

fn read_text(p: &Path, what: &str) -> Result<String, Error> {
    std::fs::read_to_string(p).map_err(|e| Error::setup(format!("cannot read {what} {}", p.display()), "", e))
}

/// Run the report.
pub fn count_report(a: &CountReportArgs) -> Result<i32, Error> {
    let compare: CompareFile =
        serde_json::from_str(&read_text(&a.compare, "--compare")?).map_err(|e| Error::usage(format!("{} is not a compare.json: {e}", a.compare.display())))?;
    let windows = insn::parse_windows(&read_text(&a.windows, "--windows")?).map_err(|e| Error::usage(format!("{}: {e}", a.windows.display())))?;
    let kernel = insn::parse_kallsyms(&read_text(&a.kallsyms, "--kallsyms")?).map_err(|e| Error::usage(format!("{}: {e}", a.kallsyms.display())))?;
    let elf = std::fs::read(&a.binary).map_err(|e| Error::setup(format!("cannot read --binary {}", a.binary.display()), "", e))?;
    let mut user = UserSymbols::from_elf(&elf).map_err(|e| Error::usage(format!("{}: {e}", a.binary.display())))?;
    if let Some(w) = windows.iter().find(|w| w.window < IDLE_WINDOW) {
        user.relocate(w.marker_fn).map_err(|e| Error::usage(format!("{}: {e}", a.binary.display())))?;
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| Error::setup(format!("cannot create --out {}", dir.display()), "pick a folder you can write", e))?;
    }
    let layers = LayerTable::builtin();
    let inputs = Inputs {
        compare: &compare,
        windows: &windows,
        symbols: Symbols {
            kernel: &kernel,
            user: &user,
            layers: &layers,
            bar0: a.bar0,
        },
        idle_seconds: a.idle_seconds,
        calibration_polls: a.calibration_polls,
    };
    let report = build(&inputs);
    let text = table(&report);
    print!("{text}");
    if let Some(dir) = &a.out {
        let write = |name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, body).map_err(|e| Error::io(format!("cannot write {}", p.display()), e))
        };
        write("count.txt", &text)?;
        write("count.json", &serde_json::to_string_pretty(&report).unwrap())?;
        let sub = format!("{} rows; baseline {}; {MEASURED}", report.rows.len(), report.baseline);
        let svg =
            chart::stacked_layers(&bars(&report), &sub).map_err(|e| Error::io(format!("cannot draw the chart: {e}"), std::io::Error::other(e.clone())))?;
        write("instructions_per_io_by_layer.svg", &svg)?;
    }
    // A row compare could not run has no window by design; a row that ran
    // and has no counts means the windows and compare.json do not match.
    let ran_without_counts = compare.rows.iter().zip(&report.rows).any(|(c, r)| c.summary.is_some() && r.counts.is_none());
    Ok(if ran_without_counts { exit::RUN_FAILED } else { exit::OK })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::insn::{parse_kallsyms, Sym, SymbolTable, VcpuCount, MARKER_SYMBOL};

    fn compare() -> CompareFile {
        serde_json::from_value(serde_json::json!({
            "version": "0.1.0",
            "rows": [
                {"variant": {"label": "block/io_uring", "path": "Block"}, "summary": {"elapsed_ns": 1_000_000_000u64, "read": {"ios": 10}, "write": {"ios": 0}, "cpu": {"empty_polls": 0}}},
                {"variant": {"label": "vfio", "path": "Vfio"}, "summary": {"elapsed_ns": 1_000_000_000u64, "read": {"ios": 8}, "write": {"ios": 2}, "cpu": {"empty_polls": 20}}},
                {"variant": {"label": "passthru", "path": "Passthru"}, "summary": null, "error": "no /dev/ng0n1"}
            ],
            "baseline": "block/io_uring"
        }))
        .unwrap()
    }

    fn w(id: u64, user: u64, kernel: u64, tbs: Vec<(u64, u64, u64)>) -> Window {
        Window {
            window: id,
            marker_fn: 0x10_1000,
            vcpus: vec![VcpuCount { vcpu: 0, user, kernel, ..Default::default() }],
            tbs,
            io: vec![],
            vdso: (0, 0),
        }
    }

    #[test]
    fn rows_ratios_and_outputs() {
        let k = parse_kallsyms("ffffffff81000000 T entry_SYSCALL_64\nffffffff81001000 T blk_mq_submit_bio\nffffffff81002000 T copy_process\n").unwrap();
        let user = UserSymbols {
            table: SymbolTable::new(vec![
                Sym {
                    addr: 0x1000,
                    size: Some(0x100),
                    name: MARKER_SYMBOL.into(),
                    module: None,
                },
                Sym {
                    addr: 0x2000,
                    size: Some(0x100),
                    name: "nvme_driver::f".into(),
                    module: None,
                },
            ]),
            bias: 0,
            text_end: None,
        };
        let windows = vec![
            w(0, 0, 2000, vec![(0xffffffff81000000, 500, 10), (0xffffffff81001000, 1500, 10)]),
            w(1, 500, 0, vec![(0x10_2000, 500, 30)]),
            w(IDLE_WINDOW, 0, 0, vec![]),
            // A process started in the busy background's window.
            w(insn::BUSY_WINDOW, 0, 0, vec![(0xffffffff81002000, 0, 1)]),
            w(CALIBRATION_BASE + 1, 10, 0, vec![(0x10_2000, 10, 10)]),
        ];
        let c = compare();
        let layers = LayerTable::builtin();
        let i = Inputs {
            compare: &c,
            windows: &windows,
            symbols: Symbols {
                kernel: &k,
                user: &user,
                layers: &layers,
                bar0: None,
            },
            idle_seconds: Some(1.0),
            calibration_polls: 10,
        };
        let r = build(&i);
        assert_eq!(r.rows.len(), 3);
        let b = r.rows[0].counts.as_ref().unwrap();
        assert_eq!(b.instructions_per_io.total, 200.0);
        assert_eq!(b.layers.get("block layer"), Some(150.0));
        assert_eq!(b.events_per_io.syscalls, 1.0);
        let v = r.rows[1].counts.as_ref().unwrap();
        assert_eq!(v.instructions_per_io.total, 50.0);
        assert_eq!(v.layers.get("user: our driver"), Some(50.0));
        // 20 empty polls x 1 instruction each / 10 I/Os.
        assert_eq!(v.instructions_per_io.empty_polls, Some(2.0));
        assert_eq!(r.rows[1].total_vs_baseline, Some(0.25));
        assert!(r.rows[2].counts.is_none());
        assert!(r.rows[2].error.as_deref().unwrap().contains("no /dev/ng0n1"));
        assert_eq!(
            r.headline,
            vec!["vfio: 50 instructions per I/O, 0.25x the 200 of block/io_uring (4.0x fewer)".to_string()]
        );
        let t = table(&r);
        assert!(t.contains("measured, emulated"));
        assert!(t.contains("passthru"));
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        let row = &json["rows"][1];
        assert_eq!(row["instructions_per_io"]["total"], 50.0);
        assert_eq!(row["instructions_per_io"]["empty_polls"], 2.0);
        assert_eq!(row["layers"]["user: our driver"], 50.0);
        assert_eq!(row["events_per_io"]["syscalls"], 0.0);
        assert_eq!(row["measurement"], MEASURED);
        assert!(row["unmapped"].is_array());
        assert_eq!(bars(&r).len(), 2);
        let said = |what: &str| r.notes.iter().any(|n| n.contains(what));
        assert!(said("busy background (window 9998): 1 process(es) started"), "{:?}", r.notes);
        // The window has no pass markers, the engine counted 20 empty polls.
        assert!(said("vfio: the window ran 0 empty-poll markers, the engine counted 20 empty polls"), "{:?}", r.notes);

        // Less the idle background a figure can be negative: the table
        // prints it signed, never as 0.
        let mut r = r;
        let c = r.rows[1].counts.as_mut().unwrap();
        c.instructions_per_io.user = -120.0;
        c.instructions_per_io.kernel = -4_500.0;
        let t = table(&r);
        let line = t.lines().find(|l| l.starts_with("vfio")).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cols[1..4], ["-120", "-4.5k", "50"], "{line}");
        assert!(t.contains("a figure can be negative"), "{t}");
    }
}
