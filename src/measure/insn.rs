//! Exact instruction counts of the emulated test bed, per I/O, by layer.
//!
//! Under QEMU TCG a plugin counts the guest's instructions between the
//! START/STOP markers the tool executes and writes one JSON line per window
//! (`insn.jsonl`). This module turns those windows, the guest's
//! `/proc/kallsyms` and our static binary's symbol table into figures per
//! I/O: user and kernel instructions after the idle background, the cost of
//! empty polls (its own figure), instructions by kernel layer and by part of
//! our program, and events (system calls, interrupts, context switches,
//! doorbell and other MMIO accesses). Pure: it parses text and bytes it is
//! given; `commands::count_report` reads the files.
//!
//! Window ids: row `i` of a comparison is window `i`; [`IDLE_WINDOW`] is an
//! idle background of known duration; [`CALIBRATION_BASE`]` + i` is row
//! `i`'s empty-poll calibration (K polls on a drained queue).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;

/// Guest virtual addresses at or above this are the kernel's.
pub const KERNEL_BASE: u64 = 0xffff_8000_0000_0000;
/// The idle background window.
pub const IDLE_WINDOW: u64 = 9999;
/// Row `i`'s empty-poll calibration is window `CALIBRATION_BASE + i`.
pub use crate::measure::marker::CALIBRATION_BASE;
/// The marker function whose runtime address the plugin reports
/// (`marker_fn`): its ELF address gives the load bias of a static-pie binary.
pub const MARKER_SYMBOL: &str = "nvme_bypass::measure::marker::start";
/// The NVMe doorbells: BAR0 + 0x1000 up to (not including) BAR0 + 0x2000
/// (with CAP.DSTRD = 0 that page holds the doorbells of 512 queue pairs).
pub const DOORBELL_PAGE: std::ops::Range<u64> = 0x1000..0x2000;

/// The kernel layers, in the order they are reported. The layer table
/// (`layers.tsv`) may name only these.
pub const KERNEL_LAYERS: [&str; 14] = [
    "syscall entry/exit",
    "io_uring",
    "aio",
    "block layer",
    "nvme driver",
    "DMA mapping and IOMMU",
    "interrupt entry and softirq",
    "scheduler, wake-up and idle exit",
    "page cache",
    "vfio",
    "memory management",
    "VFS and security checks",
    "kernel services (RCU, locks, lists, time)",
    "other (named)",
];
/// Kernel instructions the windows' TBs do not explain by a named function:
/// TBs before the first symbol, and the difference between the per-vCPU
/// totals and the TBs' sum (also after background subtraction).
pub const KERNEL_UNATTRIBUTED: &str = "kernel, unattributed";
/// The parts of our program (user instructions), by demangled symbol path
/// prefix; the first match wins, then "user: the rest".
pub const USER_GROUPS: [(&str, &[&str]); 5] = [
    (
        "user: our driver",
        &[
            "nvme_driver::",
            "nvme_hal::",
            "nvme_vfio::",
            "nvme_sim::",
            "nvme_spec::",
            "nvme_bypass::backend::userspace",
        ],
    ),
    ("user: engine", &["nvme_bypass::engine"]),
    ("user: latency recording", &["hdrhistogram::", "nvme_bypass::measure::stats"]),
    // Where the TSC is not invariant (QEMU TCG among them) the clock falls
    // back to CLOCK_MONOTONIC: std's Instant and libc's clock_gettime.
    (USER_CLOCK, &["std::sys::pal::unix::time", "std::time::", "clock_gettime", "__clock_gettime", "nvme_bypass::measure::clock"]),
    // the kernel paths' counterpart of "our driver": our rings and aio
    // contexts, and the io-uring crate they use
    ("user: our io_uring/aio code", &["nvme_bypass::backend::kernel", "io_uring::"]),
];
/// Reading the clock: std's and libc's time functions, and the vDSO's code
/// (`clock_gettime`, which runs outside the binary), located by the
/// window's START marker.
pub const USER_CLOCK: &str = "user: clock reads";
/// User functions of our binary in none of [`USER_GROUPS`] (std, libc, the
/// rest of nvme_bypass).
pub const USER_REST: &str = "user: the rest";
/// User instructions outside our binary's functions (other processes,
/// the vDSO, the loader) or not explained by the TBs.
pub const USER_UNATTRIBUTED: &str = "user: other processes, unattributed";

/// The reviewed layer table.
pub const LAYERS_TSV: &str = include_str!("layers.tsv");

fn addr<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum A {
        N(u64),
        S(String),
    }
    match A::deserialize(d)? {
        A::N(n) => Ok(n),
        A::S(s) => parse_hex(&s).ok_or_else(|| serde::de::Error::custom(format!("not an address: {s:?}"))),
    }
}

fn triples<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u64, u64, u64)>, D::Error> {
    #[derive(Deserialize)]
    struct T(#[serde(deserialize_with = "addr")] u64, u64, u64);
    Ok(Vec::<T>::deserialize(d)?.into_iter().map(|T(a, b, c)| (a, b, c)).collect())
}

/// A hexadecimal number, with or without `0x`.
pub fn parse_hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

/// One vCPU's instructions in a window.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct VcpuCount {
    /// vCPU index.
    pub vcpu: u32,
    /// Instructions below [`KERNEL_BASE`].
    pub user: u64,
    /// Instructions at or above it.
    pub kernel: u64,
    /// Of `user`, those of the engine's passes that found nothing (the
    /// plugin's PASS and EMPTY markers, `measure::marker`).
    #[serde(default)]
    pub empty_user: u64,
    /// Of `kernel`, those inside such passes.
    #[serde(default)]
    pub empty_kernel: u64,
    /// Empty passes added up.
    #[serde(default)]
    pub empty_passes: u64,
    /// EMPTY markers run (one per empty pass).
    #[serde(default)]
    pub empty_marks: u64,
    /// Empty passes left out: an interrupt came in them (its work is the
    /// background's), or longer than a pass can be (the thread was
    /// preempted). The plugin times passes and the kernel's polls on the
    /// machine's timeline, every vCPU's instructions summed, and keeps
    /// their tallies in vCPU 0's fields; the report sums the vCPUs.
    #[serde(default)]
    pub empty_discarded: u64,
    /// Polls of the kernel's IOPOLL loop started (`nvme_poll` entries;
    /// 0 when the process did not name the loop to the plugin:
    /// `measure::marker`).
    #[serde(default)]
    pub kpolls: u64,
    /// Of them, those that found nothing and saw no interrupt, each from
    /// its start to the next poll's (or the system call's return); polls
    /// inside an engine pass that was empty itself are left to that pass.
    #[serde(default)]
    pub kpoll_empty: u64,
    /// Their user instructions (none: the loop runs in the kernel).
    #[serde(default)]
    pub kpoll_empty_user: u64,
    /// Their kernel instructions.
    #[serde(default)]
    pub kpoll_empty_kernel: u64,
    /// Polls that found nothing left out: an interrupt came in them (its
    /// work is the background's), or longer than a poll can be.
    #[serde(default)]
    pub kpoll_discarded: u64,
    /// User instructions of the waits for an interrupt (the plugin's WAIT
    /// to WOKE markers, `measure::marker`), timed on the machine's
    /// timeline like the passes.
    #[serde(default)]
    pub wait_user: u64,
    /// Their kernel instructions: the system calls, the sleep, the
    /// interrupt that ends it, the wake-up.
    #[serde(default)]
    pub wait_kernel: u64,
    /// Waits added up.
    #[serde(default)]
    pub waits: u64,
}

/// One measured window of the plugin.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Window {
    /// Window id.
    pub window: u64,
    /// Runtime address of [`MARKER_SYMBOL`].
    #[serde(deserialize_with = "addr")]
    pub marker_fn: u64,
    /// The marking process's vDSO (start, length; 0 length when not said):
    /// its code is the clock's, outside the binary.
    #[serde(default)]
    pub vdso: (u64, u64),
    /// Per vCPU.
    pub vcpus: Vec<VcpuCount>,
    /// (translation block start, instructions, executions), all vCPUs.
    #[serde(deserialize_with = "triples")]
    pub tbs: Vec<(u64, u64, u64)>,
    /// (MMIO physical page, writes, reads).
    #[serde(default, deserialize_with = "triples")]
    pub io: Vec<(u64, u64, u64)>,
}

impl Window {
    /// User instructions, all vCPUs.
    pub fn user(&self) -> u64 {
        self.vcpus.iter().map(|v| v.user).sum()
    }
    /// Kernel instructions, all vCPUs.
    pub fn kernel(&self) -> u64 {
        self.vcpus.iter().map(|v| v.kernel).sum()
    }
    /// The waits for an interrupt, all vCPUs: instructions (user + kernel)
    /// and how many.
    pub fn waits(&self) -> (u64, u64) {
        self.vcpus.iter().fold((0, 0), |(i, n), v| (i + v.wait_user + v.wait_kernel, n + v.waits))
    }
    /// The empty passes, all vCPUs: (user, kernel) instructions, passes,
    /// EMPTY markers, passes discarded.
    pub fn empty(&self) -> EmptyPasses {
        let sum = |f: fn(&VcpuCount) -> u64| self.vcpus.iter().map(f).sum();
        EmptyPasses {
            user: sum(|v| v.empty_user),
            kernel: sum(|v| v.empty_kernel),
            passes: sum(|v| v.empty_passes),
            marks: sum(|v| v.empty_marks),
            discarded: sum(|v| v.empty_discarded),
        }
    }
    /// The kernel's IOPOLL polls, all vCPUs: (started, empty, instructions
    /// of the empty ones, empty ones left out).
    pub fn kernel_polls(&self) -> (u64, u64, u64, u64) {
        let sum = |f: fn(&VcpuCount) -> u64| self.vcpus.iter().map(f).sum();
        (sum(|v| v.kpolls), sum(|v| v.kpoll_empty), sum(|v| v.kpoll_empty_user + v.kpoll_empty_kernel), sum(|v| v.kpoll_discarded))
    }
}

/// Kernel instructions per empty pass from which the passes are taken to
/// enter the kernel (a system call's entry and exit alone cost more); a
/// pass that does not sees only the timer ticks that land in it, a few
/// instructions per pass on average.
pub const KERNEL_PASS_MIN: f64 = 100.0;

/// A window's empty passes, counted in place by the plugin.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EmptyPasses {
    /// User instructions in them.
    pub user: u64,
    /// Kernel instructions in them.
    pub kernel: u64,
    /// Passes counted.
    pub passes: u64,
    /// EMPTY markers run.
    pub marks: u64,
    /// Passes left out (see [`VcpuCount::empty_discarded`]).
    pub discarded: u64,
}

impl EmptyPasses {
    /// Do the passes enter the kernel (a poll that is a system call), so
    /// that their kernel instructions are theirs? Decided from the passes
    /// themselves ([`KERNEL_PASS_MIN`]): any system call elsewhere in the
    /// window (another thread, another vCPU) says nothing about them.
    pub fn enters_kernel(&self) -> bool {
        self.passes > 0 && self.kernel as f64 / self.passes as f64 >= KERNEL_PASS_MIN
    }
}

/// Parse `insn.jsonl`: one window a line; blank lines are skipped.
pub fn parse_windows(text: &str) -> Result<Vec<Window>, String> {
    let mut out = vec![];
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?);
    }
    Ok(out)
}

/// A function's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Sym {
    /// Start address (ELF address for our binary, runtime for the kernel).
    pub addr: u64,
    /// Size when known (ELF); an address past it is in no function.
    pub size: Option<u64>,
    /// Name (demangled for Rust).
    pub name: String,
    /// Kernel module, for module symbols.
    pub module: Option<String>,
}

/// Functions sorted by start address.
#[derive(Clone, Debug, Default)]
pub struct SymbolTable {
    syms: Vec<Sym>,
}

impl SymbolTable {
    /// A table of these functions (any order).
    pub fn new(mut syms: Vec<Sym>) -> Self {
        syms.sort_by_key(|s| s.addr);
        SymbolTable { syms }
    }

    /// Functions.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// No functions.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The function holding `addr`: the greatest start at or below it (and
    /// `addr` within its size, when the size is known).
    pub fn lookup(&self, addr: u64) -> Option<&Sym> {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        match s.size {
            Some(z) if z > 0 && addr >= s.addr.saturating_add(z) => None,
            _ => Some(s),
        }
    }

    /// Start addresses of the functions named `name`.
    pub fn addrs_of(&self, name: &str) -> Vec<u64> {
        self.syms.iter().filter(|s| s.name == name).map(|s| s.addr).collect()
    }

    /// Start addresses of the functions whose name starts with `prefix`.
    pub fn addrs_with_prefix(&self, prefix: &str) -> Vec<u64> {
        self.syms.iter().filter(|s| s.name.starts_with(prefix)).map(|s| s.addr).collect()
    }
}

/// Parse `/proc/kallsyms`: `ADDR TYPE NAME [\t[MODULE]]`. Only text
/// symbols (types t, T, w, W) are kept, so a data symbol never ends a
/// function early; zero addresses (kptr_restrict) are refused, since
/// every lookup would fail.
pub fn parse_kallsyms(text: &str) -> Result<SymbolTable, String> {
    let mut syms = vec![];
    let mut zero = 0usize;
    for (n, line) in text.lines().enumerate() {
        let mut f = line.split_whitespace();
        let (Some(a), Some(t), Some(name)) = (f.next(), f.next(), f.next()) else {
            if line.trim().is_empty() {
                continue;
            }
            return Err(format!("kallsyms line {}: expected ADDR TYPE NAME: {line:?}", n + 1));
        };
        let addr = parse_hex(a).ok_or_else(|| format!("kallsyms line {}: bad address {a:?}", n + 1))?;
        if !matches!(t, "t" | "T" | "w" | "W") {
            continue;
        }
        if addr == 0 {
            zero += 1;
            continue;
        }
        let module = f.next().map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string());
        syms.push(Sym {
            addr,
            size: None,
            name: name.to_string(),
            module,
        });
    }
    if syms.is_empty() {
        return Err(if zero > 0 {
            "kallsyms has only zero addresses: read it as root (or with kernel.kptr_restrict=0)".into()
        } else {
            "kallsyms has no text symbols".into()
        });
    }
    Ok(SymbolTable::new(syms))
}

/// Our binary's functions, from its ELF symbol table, demangled; `bias` is
/// the load bias, computed by [`UserSymbols::relocate`].
#[derive(Clone, Debug, Default)]
pub struct UserSymbols {
    /// Functions at their ELF addresses.
    pub table: SymbolTable,
    /// Runtime address minus ELF address.
    pub bias: u64,
    /// ELF address of the end of the binary's executable sections, when
    /// known: an address at or past it is in none of its functions, even
    /// past a last function whose size is not recorded (libc's `strcmp`).
    pub text_end: Option<u64>,
}

impl UserSymbols {
    /// Read the function symbols of an ELF file (a static or static-pie
    /// binary with its symbol table).
    pub fn from_elf(data: &[u8]) -> Result<Self, String> {
        use object::{Object, ObjectSymbol, SymbolKind};
        use object::ObjectSection;
        let file = object::File::parse(data).map_err(|e| format!("not an ELF file we can read: {e}"))?;
        let text_end = file
            .sections()
            .filter(|s| s.kind() == object::SectionKind::Text)
            .map(|s| s.address() + s.size())
            .max();
        let mut syms = vec![];
        for s in file.symbols() {
            if s.kind() != SymbolKind::Text || s.address() == 0 {
                continue;
            }
            let Ok(raw) = s.name() else { continue };
            syms.push(Sym {
                addr: s.address(),
                size: Some(s.size()),
                name: demangle(raw),
                module: None,
            });
        }
        if syms.is_empty() {
            return Err("the binary has no function symbols: use an unstripped build".into());
        }
        Ok(UserSymbols {
            table: SymbolTable::new(syms),
            bias: 0,
            text_end,
        })
    }

    /// The load bias of a process whose marker ran at `marker_fn`:
    /// `marker_fn` minus [`MARKER_SYMBOL`]'s ELF address.
    pub fn bias_for(&self, marker_fn: u64) -> Result<u64, String> {
        let at = self.table.addrs_of(MARKER_SYMBOL);
        let elf = *at
            .first()
            .ok_or_else(|| format!("the binary has no {MARKER_SYMBOL}: is it the binary that ran?"))?;
        Ok(marker_fn.wrapping_sub(elf))
    }

    /// Set the bias from the marker's runtime address ([`Self::bias_for`]).
    pub fn relocate(&mut self, marker_fn: u64) -> Result<(), String> {
        self.bias = self.bias_for(marker_fn)?;
        Ok(())
    }

    /// The function at runtime address `vaddr`.
    pub fn lookup(&self, vaddr: u64) -> Option<&Sym> {
        self.lookup_at(vaddr, self.bias)
    }

    /// The function at runtime address `vaddr` of a process loaded with `bias`.
    pub fn lookup_at(&self, vaddr: u64, bias: u64) -> Option<&Sym> {
        let elf = vaddr.wrapping_sub(bias);
        if self.text_end.is_some_and(|end| elf >= end) {
            return None;
        }
        self.table.lookup(elf)
    }
}

/// A symbol name demangled (Rust legacy and v0), without the hash;
/// other names unchanged.
pub fn demangle(raw: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(raw))
}

/// The crate path a demangled name belongs to: `<A as B>::f` and
/// `<&A>::f` are A's.
fn path_of(name: &str) -> &str {
    let mut s = name;
    loop {
        let t = s.trim_start_matches(['<', '&', '*']);
        let t = t
            .strip_prefix("mut ")
            .or_else(|| t.strip_prefix("const "))
            .or_else(|| t.strip_prefix("dyn "))
            .unwrap_or(t);
        if t.len() == s.len() {
            return s;
        }
        s = t;
    }
}

/// Which part of our program a (demangled) user function is.
pub fn user_group(name: &str) -> &'static str {
    let p = path_of(name);
    USER_GROUPS
        .iter()
        .find(|(_, prefixes)| prefixes.iter().any(|x| p.starts_with(x)))
        .map(|(g, _)| *g)
        .unwrap_or(USER_REST)
}

#[derive(Clone, Debug, PartialEq)]
enum Pattern {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Substring(String),
    Module(String),
}

impl Pattern {
    fn parse(p: &str) -> Option<Self> {
        if let Some(m) = p.strip_prefix('[').and_then(|m| m.strip_suffix(']')) {
            return Some(Pattern::Module(m.into()));
        }
        let (lead, trail) = (p.starts_with('*'), p.len() > 1 && p.ends_with('*'));
        let core = p.trim_start_matches('*').trim_end_matches('*');
        if core.is_empty() || core.contains('*') {
            return None;
        }
        Some(match (lead, trail) {
            (true, true) => Pattern::Substring(core.into()),
            (true, false) => Pattern::Suffix(core.into()),
            (false, true) => Pattern::Prefix(core.into()),
            (false, false) => Pattern::Exact(core.into()),
        })
    }

    fn matches(&self, s: &Sym) -> bool {
        match self {
            Pattern::Exact(x) => s.name == *x,
            Pattern::Prefix(x) => s.name.starts_with(x.as_str()),
            Pattern::Suffix(x) => s.name.ends_with(x.as_str()),
            Pattern::Substring(x) => s.name.contains(x.as_str()),
            Pattern::Module(m) => s.module.as_deref() == Some(m.as_str()),
        }
    }
}

/// Kernel function -> layer rules, first match wins.
#[derive(Clone, Debug)]
pub struct LayerTable {
    rules: Vec<(Pattern, usize)>,
}

/// Index of "other (named)" in [`KERNEL_LAYERS`].
const OTHER_NAMED: usize = KERNEL_LAYERS.len() - 1;

impl LayerTable {
    /// Parse a table: `pattern TAB layer` lines, `#` comments.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = vec![];
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let (p, layer) = line
                .split_once('\t')
                .ok_or_else(|| format!("layer table line {}: expected pattern TAB layer", n + 1))?;
            let pat = Pattern::parse(p.trim()).ok_or_else(|| format!("layer table line {}: bad pattern {p:?}", n + 1))?;
            let i = KERNEL_LAYERS
                .iter()
                .position(|l| *l == layer.trim())
                .ok_or_else(|| format!("layer table line {}: unknown layer {layer:?}", n + 1))?;
            rules.push((pat, i));
        }
        Ok(LayerTable { rules })
    }

    /// The project's table, [`LAYERS_TSV`].
    pub fn builtin() -> Self {
        Self::parse(LAYERS_TSV).expect("layers.tsv is checked by the tests")
    }

    /// The layer (index into [`KERNEL_LAYERS`]) of a kernel function, and
    /// whether a rule named it (false: "other (named)" by default).
    pub fn layer_of(&self, s: &Sym) -> (usize, bool) {
        match self.rules.iter().find(|(p, _)| p.matches(s)) {
            Some((_, i)) => (*i, true),
            None => (OTHER_NAMED, false),
        }
    }
}

/// Names of every part of the breakdown, in report order: the kernel
/// layers, kernel unattributed, the user groups, the rest, user unattributed.
pub fn breakdown_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = KERNEL_LAYERS.to_vec();
    v.push(KERNEL_UNATTRIBUTED);
    v.extend(USER_GROUPS.iter().map(|(g, _)| *g));
    v.push(USER_REST);
    v.push(USER_UNATTRIBUTED);
    v
}

/// What the analysis needs besides the windows.
pub struct Symbols<'a> {
    /// The guest kernel's functions.
    pub kernel: &'a SymbolTable,
    /// Our binary's functions; each window is relocated by its own
    /// `marker_fn`, this table's `bias` serving only when that fails.
    pub user: &'a UserSymbols,
    /// Kernel layers.
    pub layers: &'a LayerTable,
    /// NVMe BAR0 physical base, for doorbell writes.
    pub bar0: Option<u64>,
}

/// Events counted in a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Events {
    /// Executions of the TB at `entry_SYSCALL_64`.
    pub syscalls: f64,
    /// Executions of the TBs at `asm_common_interrupt` (device interrupts)
    /// and every `asm_sysvec_*` entry (APIC timer, IPIs, ...).
    pub interrupts: f64,
    /// Executions of the TB at `__switch_to_asm` (or, without it, `__switch_to`).
    pub context_switches: f64,
    /// MMIO writes to the NVMe doorbell page.
    pub doorbell_writes: f64,
    /// Other MMIO writes.
    pub other_mmio_writes: f64,
    /// MMIO reads.
    pub mmio_reads: f64,
    /// Executions of the TB at `nvme_poll`: the kernel looking at a
    /// polled completion queue (IOPOLL), found or not.
    pub kernel_polls: f64,
    /// Of the kernel polls, those that found a completion, counted by the
    /// plugin (`kpolls` less `kpoll_empty` and `kpoll_discarded`); 0 when
    /// the process did not name the poll loop to it.
    pub kernel_polls_found: f64,
    /// The thread's waits for its queue's interrupt (see
    /// [`PerIo::waits`]).
    pub waits: f64,
}

impl Events {
    fn combine(&self, o: &Events, k: f64, div: f64) -> Events {
        let f = |a: f64, b: f64| (a + k * b) / div;
        Events {
            syscalls: f(self.syscalls, o.syscalls),
            interrupts: f(self.interrupts, o.interrupts),
            context_switches: f(self.context_switches, o.context_switches),
            doorbell_writes: f(self.doorbell_writes, o.doorbell_writes),
            other_mmio_writes: f(self.other_mmio_writes, o.other_mmio_writes),
            mmio_reads: f(self.mmio_reads, o.mmio_reads),
            kernel_polls: f(self.kernel_polls, o.kernel_polls),
            kernel_polls_found: f(self.kernel_polls_found, o.kernel_polls_found),
            waits: f(self.waits, o.waits),
        }
    }
}

/// One window summed up by function, layer and event.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// User instructions (vCPU totals).
    pub user: f64,
    /// Kernel instructions (vCPU totals).
    pub kernel: f64,
    /// Instructions per part, in [`breakdown_names`] order; sums to
    /// user + kernel.
    pub parts: Vec<f64>,
    /// Events.
    pub events: Events,
    /// Kernel functions no layer rule names: (name, module) -> instructions.
    pub unmapped: HashMap<(String, Option<String>), u64>,
    /// Processes created (runs of `copy_process`) and ended (`do_exit`)
    /// in the window: none belongs to a path's I/O, and each costs far
    /// more than a path's I/O does.
    pub process_starts: u64,
    /// See `process_starts`.
    pub process_exits: u64,
}

/// Sum up one window.
pub fn tally(w: &Window, s: &Symbols) -> Tally {
    let names = breakdown_names();
    let idx = |n: &str| names.iter().position(|x| *x == n).unwrap();
    let (k_un, u_un) = (idx(KERNEL_UNATTRIBUTED), idx(USER_UNATTRIBUTED));
    let mut parts = vec![0f64; names.len()];
    let mut t = Tally {
        user: w.user() as f64,
        kernel: w.kernel() as f64,
        ..Default::default()
    };
    let (mut k_seen, mut u_seen) = (0f64, 0f64);
    // Each window says where its process's marker ran, so windows of
    // different runs of the binary relocate on their own.
    let bias = s.user.bias_for(w.marker_fn).unwrap_or(s.user.bias);
    let syscall = s.kernel.addrs_of("entry_SYSCALL_64");
    let mut irq = s.kernel.addrs_of("asm_common_interrupt");
    irq.extend(s.kernel.addrs_with_prefix("asm_sysvec_"));
    let poll = s.kernel.addrs_of("nvme_poll");
    let fork = s.kernel.addrs_of("copy_process");
    let exit = s.kernel.addrs_of("do_exit");
    let mut switch = s.kernel.addrs_of("__switch_to_asm");
    if switch.is_empty() {
        switch = s.kernel.addrs_of("__switch_to");
    }
    for &(va, insns, execs) in &w.tbs {
        let n = insns as f64;
        if va >= KERNEL_BASE {
            k_seen += n;
            if syscall.contains(&va) {
                t.events.syscalls += execs as f64;
            }
            if irq.contains(&va) {
                t.events.interrupts += execs as f64;
            }
            if switch.contains(&va) {
                t.events.context_switches += execs as f64;
            }
            if fork.contains(&va) {
                t.process_starts += execs;
            }
            if exit.contains(&va) {
                t.process_exits += execs;
            }
            if poll.contains(&va) {
                t.events.kernel_polls += execs as f64;
            }
            match s.kernel.lookup(va) {
                Some(sym) => {
                    let (layer, named) = s.layers.layer_of(sym);
                    parts[layer] += n;
                    if !named {
                        *t.unmapped.entry((sym.name.clone(), sym.module.clone())).or_default() += insns;
                    }
                }
                None => parts[k_un] += n,
            }
        } else {
            u_seen += n;
            match s.user.lookup_at(va, bias) {
                Some(sym) => parts[idx(user_group(&sym.name))] += n,
                // the vDSO: clock_gettime and its kin
                None if va.wrapping_sub(w.vdso.0) < w.vdso.1 => parts[idx(USER_CLOCK)] += n,
                None => parts[u_un] += n,
            }
        }
    }
    // The vCPU totals are the truth; what the TBs do not account for is
    // unattributed (either sign), so the parts sum to the totals.
    parts[k_un] += t.kernel - k_seen;
    parts[u_un] += t.user - u_seen;
    for &(page, writes, reads) in &w.io {
        let db = s.bar0.is_some_and(|b| page >= b + DOORBELL_PAGE.start && page < b + DOORBELL_PAGE.end);
        if db {
            t.events.doorbell_writes += writes as f64;
        } else {
            t.events.other_mmio_writes += writes as f64;
        }
        t.events.mmio_reads += reads as f64;
    }
    t.parts = parts;
    t
}

/// One row's inputs.
pub struct RowInput<'a> {
    /// The row's measured window.
    pub window: &'a Window,
    /// Its empty-poll calibration window, when there is one.
    pub calibration: Option<&'a Window>,
    /// I/Os the row completed (compare's summary).
    pub ios: u64,
    /// The row's measured duration, seconds (compare's summary).
    pub duration_s: f64,
    /// Empty polls the engine counted in the row (compare's summary).
    pub empty_polls: u64,
    /// CPU seconds the row's I/O threads ran (compare's summary: their
    /// user + system time), for the busy background.
    pub busy_cpu_s: f64,
}

/// The idle background.
pub struct Background<'a> {
    /// Window [`IDLE_WINDOW`].
    pub window: &'a Window,
    /// Its duration, seconds.
    pub seconds: f64,
    /// Window [`BUSY_WINDOW`] and its seconds: one vCPU spinning in user
    /// mode. A busy vCPU takes the timer tick an idle one skips, so the
    /// kernel's background grows with the CPU time a row's threads run
    /// as well as with its wall time.
    pub busy: Option<(&'a Window, f64)>,
    /// The two windows' tallies, made once for every row.
    idle_tally: Tally,
    busy_tally: Option<Tally>,
}

impl<'a> Background<'a> {
    /// The background of idle window `window` (`seconds` long) and, when
    /// measured, busy window `busy`, tallied once with `s`.
    pub fn new(window: &'a Window, seconds: f64, busy: Option<(&'a Window, f64)>, s: &Symbols) -> Self {
        Background { window, seconds, busy, idle_tally: tally(window, s), busy_tally: busy.map(|(w, _)| tally(w, s)) }
    }
    /// The idle window's tally.
    pub fn idle_tally(&self) -> &Tally {
        &self.idle_tally
    }
    /// The busy window's tally, when there is one.
    pub fn busy_tally(&self) -> Option<&Tally> {
        self.busy_tally.as_ref()
    }
}

/// The busy background's window (`nvme-bypass idle --spin`).
pub const BUSY_WINDOW: u64 = 9998;

/// Instructions per I/O.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PerIo {
    /// User instructions per I/O, background subtracted.
    pub user: f64,
    /// Kernel instructions per I/O, background subtracted.
    pub kernel: f64,
    /// user + kernel.
    pub total: f64,
    /// Instructions per I/O of the polls that found nothing, ours and the
    /// kernel's: `empty_polls_engine` + `empty_polls_kernel`. Included in
    /// `total`, shown apart, never subtracted. None when either is unknown.
    pub empty_polls: Option<f64>,
    /// The engine's passes that found nothing, measured in the row's own
    /// window: each from the PASS marker that starts it to the next (the
    /// counting plugin adds them up as they run). Without pass markers in
    /// the window: the engine's count of them x the instructions of one,
    /// measured in the row's calibration window (K empty passes on the
    /// drained queue).
    pub empty_polls_engine: Option<f64>,
    /// The kernel's IOPOLL polls that found nothing, measured in place:
    /// each from its start (`nvme_poll`) to the next poll's, added up by
    /// the plugin (`kpoll_empty_*`). 0 in a window without kernel polls;
    /// None when the kernel polled but its poll loop was not named to the
    /// plugin (`measure::marker`), so they could not be told apart.
    pub empty_polls_kernel: Option<f64>,
    /// Instructions per I/O of the thread's waits for its queue's
    /// interrupt (interrupt-driven userspace rows): each from before the
    /// system calls that sleep on the eventfd to after them, the sleep,
    /// the interrupt that ends it and the wake-up included, added up by
    /// the plugin (`wait_*`). Included in `total`, shown apart, never
    /// subtracted. How many waits a row needs follows the device's pace
    /// beside the CPU, as its empty polls do. 0 in rows that do not
    /// wait in our code (the kernel paths sleep inside their system
    /// calls, where the interrupt also completes the I/O).
    pub waits: f64,
}

/// An unmapped kernel function and its cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unmapped {
    /// Function.
    pub name: String,
    /// Module, for module symbols.
    pub module: Option<String>,
    /// Its instructions in the row's window per I/O (before background
    /// subtraction).
    pub instructions_per_io: f64,
}

/// Keys in order, serialized as a JSON object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Named(pub Vec<(String, f64)>);

impl Serialize for Named {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl Named {
    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }
    /// Sum of all values.
    pub fn sum(&self) -> f64 {
        self.0.iter().map(|(_, v)| v).sum()
    }
}

/// One row's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RowCounts {
    /// Instructions per I/O.
    pub instructions_per_io: PerIo,
    /// Instructions per I/O by part ([`breakdown_names`], background
    /// subtracted); sums to `instructions_per_io.total`.
    pub layers: Named,
    /// Events per I/O, background subtracted.
    pub events_per_io: Events,
    /// The idle background was subtracted (scaled to the row's duration).
    pub background_subtracted: bool,
    /// The costliest kernel functions no layer rule names.
    pub unmapped: Vec<Unmapped>,
    /// The share of the window's kernel instructions (background included)
    /// in functions no layer rule names: the goal is under 5%.
    pub unmapped_share_of_kernel: f64,
    /// Processes created in the row's window (not per I/O): their work is
    /// in the row's kernel and user figures, so a row with any is not a
    /// clean count (the test bed's guest starts none while it counts).
    pub processes_started: u64,
    /// Processes ended in the row's window (not per I/O).
    pub processes_exited: u64,
}

/// How many unmapped functions a row lists.
pub const UNMAPPED_LISTED: usize = 20;

/// The top `n` unmapped kernel functions of a tally, by instructions per I/O.
pub fn top_unmapped(t: &Tally, ios: u64, n: usize) -> Vec<Unmapped> {
    let mut v: Vec<_> = t.unmapped.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.into_iter()
        .take(n)
        .map(|((name, module), c)| Unmapped {
            name: name.clone(),
            module: module.clone(),
            instructions_per_io: *c as f64 / ios.max(1) as f64,
        })
        .collect()
}

/// Does an empty pass enter the kernel? A pass that does (a system call in
/// the calibration window: a kernel path's poll) costs its user and kernel
/// instructions; one that does not (a look at a completion queue in user
/// memory) costs its user instructions only, and the kernel instructions
/// around it are the background's (timer ticks), which the row's own
/// background subtraction already takes out: counted per pass they came
/// back tens of instructions per I/O, as many times as the row had empty
/// polls. Without a calibration window: user only.
fn pass_enters_kernel(c: Option<&Window>, s: &Symbols) -> bool {
    let Some(c) = c else { return false };
    let entry = s.kernel.addrs_of("entry_SYSCALL_64");
    c.tbs.iter().any(|&(va, _, execs)| execs > 0 && entry.contains(&va))
}

/// The instructions of a calibration window's K empty passes (see
/// [`pass_enters_kernel`]).
fn empty_pass(c: &Window, s: &Symbols) -> f64 {
    if pass_enters_kernel(Some(c), s) {
        (c.user() + c.kernel()) as f64
    } else {
        c.user() as f64
    }
}

/// A row's figures: its window less the idle background scaled to the
/// row's duration, per I/O. `calibration_polls` is K, the polls of each
/// calibration window.
pub fn row_counts(r: &RowInput, bg: Option<&Background>, calibration_polls: u64, s: &Symbols) -> Result<RowCounts, String> {
    if r.ios == 0 {
        return Err("the row completed no I/O".into());
    }
    let ios = r.ios as f64;
    let mut t = tally(r.window, s);
    let (mut b, scale) = match bg {
        Some(bg) if bg.seconds > 0.0 => (bg.idle_tally.clone(), r.duration_s / bg.seconds),
        Some(_) => return Err("the idle window's duration must be above 0".into()),
        None => (
            Tally {
                parts: vec![0.0; t.parts.len()],
                ..Default::default()
            },
            0.0,
        ),
    };
    // The busy background: what one busy vCPU adds per CPU second (the
    // spin window's kernel work less the idle window's for as long), times
    // the CPU seconds of the row's threads; expressed in the idle window's
    // units so one subtraction takes out both. The spin's user instructions
    // are the spin itself, not background: only kernel parts are added.
    if let (Some(bg), true) = (bg, scale > 0.0) {
        if let (Some((_, secs)), Some(busy)) = (bg.busy.filter(|(_, secs)| *secs > 0.0), &bg.busy_tally) {
            let idle_per_s = 1.0 / bg.seconds;
            let k = r.busy_cpu_s / scale;
            // (not clamped at 0 part by part, so the layers keep summing
            // to the total)
            let extra = |busy_x: f64, idle_x: f64| k * (busy_x / secs - idle_x * idle_per_s);
            b.kernel += extra(busy.kernel, b.kernel);
            let names = breakdown_names();
            for (i, n) in names.iter().enumerate() {
                if !n.starts_with("user") {
                    b.parts[i] += extra(busy.parts[i], b.parts[i]);
                }
            }
            b.events.interrupts += extra(busy.events.interrupts, b.events.interrupts);
            b.events.context_switches += extra(busy.events.context_switches, b.events.context_switches);
        }
    }
    let user = (t.user - scale * b.user) / ios;
    let kernel = (t.kernel - scale * b.kernel) / ios;
    // No empty polls cost nothing. Counted in place (the plugin's pass
    // markers) when the window has them; else priced by the calibration
    // window's K passes.
    let here = r.window.empty();
    let engine = match r.calibration {
        _ if r.empty_polls == 0 && here.marks == 0 => Some(0.0),
        _ if here.marks > 0 => {
            let kernel = if here.enters_kernel() { here.kernel } else { 0 };
            Some((here.user + kernel) as f64 / ios)
        }
        Some(c) if calibration_polls > 0 => Some(r.empty_polls as f64 * empty_pass(c, s) / calibration_polls as f64 / ios),
        _ => None,
    };
    let (kpolls, kempty, kpoll_empty_insns, kleft) = r.window.kernel_polls();
    let kernel_empty = match (kpolls, t.events.kernel_polls > 0.0) {
        (0, true) => None,
        (0, false) => Some(0.0),
        _ => {
            t.events.kernel_polls_found = kpolls.saturating_sub(kempty + kleft) as f64;
            Some(kpoll_empty_insns as f64 / ios)
        }
    };
    let (wait_insns, waits) = r.window.waits();
    t.events.waits = waits as f64;
    let layers = Named(
        breakdown_names()
            .into_iter()
            .zip(t.parts.iter().zip(&b.parts))
            .map(|(n, (x, y))| (n.to_string(), (x - scale * y) / ios))
            .collect(),
    );
    Ok(RowCounts {
        instructions_per_io: PerIo {
            user,
            kernel,
            total: user + kernel,
            empty_polls: engine.zip(kernel_empty).map(|(e, k)| e + k),
            empty_polls_engine: engine,
            empty_polls_kernel: kernel_empty,
            waits: wait_insns as f64 / ios,
        },
        layers,
        events_per_io: t.events.combine(&b.events, -scale, ios),
        background_subtracted: bg.is_some(),
        unmapped: top_unmapped(&t, r.ios, UNMAPPED_LISTED),
        unmapped_share_of_kernel: if t.kernel > 0.0 { t.unmapped.values().sum::<u64>() as f64 / t.kernel } else { 0.0 },
        processes_started: t.process_starts,
        processes_exited: t.process_exits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 T entry_SYSCALL_64
ffffffff81001100 t do_syscall_64
ffffffff81002000 T asm_common_interrupt
ffffffff81002100 T asm_sysvec_apic_timer_interrupt
ffffffff81003000 T __switch_to_asm
ffffffff81004000 T blk_mq_submit_bio
ffffffff81005000 T io_uring_cmd
ffffffff81006000 T mystery_function
ffffffff81006800 D some_data
ffffffff81007000 T another_unmapped
ffffffff81008000 A absolute_thing
ffffffffc0001000 t nvme_queue_rq\t[nvme]
ffffffffc0002000 t helper_without_prefix\t[nvme]
";

    fn ksyms() -> SymbolTable {
        parse_kallsyms(KALLSYMS).unwrap()
    }

    fn user_syms() -> UserSymbols {
        let s = |addr, size, name: &str| Sym {
            addr,
            size: Some(size),
            name: name.into(),
            module: None,
        };
        UserSymbols {
            table: SymbolTable::new(vec![
                s(0x1000, 0x100, MARKER_SYMBOL),
                s(0x2000, 0x800, "nvme_driver::queue::QueuePair::submit"),
                s(0x3000, 0x800, "nvme_bypass::engine::phase::Pass::run"),
                s(0x4000, 0x800, "hdrhistogram::Histogram<T>::record"),
                s(0x5000, 0x800, "memcpy"),
                s(
                    0x6000,
                    0x800,
                    "<nvme_bypass::backend::userspace::vfio::Q as nvme_bypass::backend::IoQueue>::submit",
                ),
            ]),
            bias: 0,
            text_end: Some(0x7000),
        }
    }

    const BIAS: u64 = 0x5555_0000_0000;

    fn window(id: u64, user: u64, kernel: u64, tbs: Vec<(u64, u64, u64)>, io: Vec<(u64, u64, u64)>) -> Window {
        Window {
            window: id,
            marker_fn: BIAS + 0x1000,
            vcpus: vec![VcpuCount { vcpu: 0, user, kernel, ..Default::default() }],
            tbs,
            io,
            vdso: (0, 0),
        }
    }

    #[test]
    fn windows_parse_numbers_and_hex_strings() {
        let text = r#"{"window": 0, "marker_fn": 93824992235520, "vcpus": [{"vcpu":0,"user":10,"kernel":20},{"vcpu":1,"user":1,"kernel":2}], "tbs": [[18446744071578845184, 5, 1], ["0x5555", 3, 3]], "io": [[4273995776, 2, 1]]}

{"window": 9999, "marker_fn": "0x1000", "vcpus": [], "tbs": []}
"#;
        let w = parse_windows(text).unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].user(), 11);
        assert_eq!(w[0].kernel(), 22);
        assert_eq!(w[0].tbs, vec![(0xffffffff81000000, 5, 1), (0x5555, 3, 3)]);
        assert_eq!(w[0].io, vec![(0xfec0_0000, 2, 1)]);
        assert_eq!(w[1].marker_fn, 0x1000);
        assert!(w[1].io.is_empty());
        let e = parse_windows("{\"window\": 1}\nnot json").unwrap_err();
        assert!(e.starts_with("line 1:"), "{e}");
    }

    #[test]
    fn kallsyms_keeps_text_symbols_and_modules() {
        let k = ksyms();
        // _stext .. nvme: 12 text symbols (data and absolute ones dropped).
        assert_eq!(k.len(), 12);
        assert_eq!(k.lookup(0xffffffff81001150).unwrap().name, "do_syscall_64");
        assert_eq!(k.lookup(0xffffffff81001000).unwrap().name, "entry_SYSCALL_64");
        // The data symbol does not cut mystery_function short.
        assert_eq!(k.lookup(0xffffffff81006900).unwrap().name, "mystery_function");
        let m = k.lookup(0xffffffffc0001010).unwrap();
        assert_eq!((m.name.as_str(), m.module.as_deref()), ("nvme_queue_rq", Some("nvme")));
        assert!(k.lookup(0xffffffff80000000).is_none());
        assert!(parse_kallsyms("0000000000000000 T _stext\n").unwrap_err().contains("root"));
        assert!(parse_kallsyms("zz T x\n").is_err());
    }

    #[test]
    fn user_symbols_relocate_with_the_marker() {
        let mut u = user_syms();
        u.relocate(BIAS + 0x1000).unwrap();
        assert_eq!(u.bias, BIAS);
        assert_eq!(u.lookup(BIAS + 0x2010).unwrap().name, "nvme_driver::queue::QueuePair::submit");
        // Past the function's size: in no function.
        assert!(u.lookup(BIAS + 0x2900).is_none());
        assert!(u.lookup(0x2010).is_none());
        let mut none = UserSymbols::default();
        assert!(none.relocate(1).unwrap_err().contains(MARKER_SYMBOL));
    }

    #[test]
    fn user_groups_by_crate() {
        assert_eq!(user_group("nvme_driver::queue::QueuePair::submit"), "user: our driver");
        assert_eq!(
            user_group("<nvme_bypass::backend::userspace::vfio::Q as nvme_bypass::backend::IoQueue>::submit"),
            "user: our driver"
        );
        assert_eq!(user_group("<&mut nvme_hal::Mmio>::write"), "user: our driver");
        assert_eq!(user_group("nvme_bypass::engine::phase::Pass::run"), "user: engine");
        assert_eq!(user_group("hdrhistogram::Histogram<T>::record"), "user: latency recording");
        assert_eq!(user_group("nvme_bypass::measure::stats::record"), "user: latency recording");
        assert_eq!(user_group("io_uring::submit::Submitter::enter"), "user: our io_uring/aio code");
        assert_eq!(user_group("memcpy"), USER_REST);
        assert_eq!(user_group("<nvme_bypass::backend::kernel::uring::UringQueue<C> as nvme_bypass::backend::IoQueue>::submit"), "user: our io_uring/aio code");
        assert_eq!(user_group("nvme_bypass::backend::kernel::uring::Ring<S,C>::reap"), "user: our io_uring/aio code");
    }

    #[inline(never)]
    fn a_function_of_this_binary() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn reads_and_demangles_a_real_elf_symbol_table() {
        assert_eq!(a_function_of_this_binary(), 7);
        let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let u = UserSymbols::from_elf(&data).unwrap();
        let name = "nvme_bypass::measure::insn::tests::a_function_of_this_binary";
        let at = u.table.addrs_of(name);
        assert_eq!(at.len(), 1, "{name} in the test binary's symbols");
        let f = a_function_of_this_binary as fn() -> u64 as usize as u64;
        // The runtime address less the ELF one is the load bias; the
        // function's own address maps back to it.
        let u = UserSymbols {
            bias: f.wrapping_sub(at[0]),
            ..u
        };
        assert_eq!(u.lookup(f).unwrap().name, name);
        assert!(UserSymbols::from_elf(b"not an elf").is_err());
    }

    #[test]
    fn demangles_rust_names() {
        assert_eq!(demangle("_ZN11nvme_bypass7measure6marker5start17h0123456789abcdefE"), MARKER_SYMBOL);
        assert_eq!(demangle("memcpy"), "memcpy");
    }

    #[test]
    fn patterns() {
        let s = |n: &str, m: Option<&str>| Sym {
            addr: 0,
            size: None,
            name: n.into(),
            module: m.map(Into::into),
        };
        assert!(Pattern::parse("blk_*").unwrap().matches(&s("blk_mq_run", None)));
        assert!(!Pattern::parse("blk_*").unwrap().matches(&s("__blk_mq_run", None)));
        assert!(Pattern::parse("*_map_sg*").unwrap().matches(&s("iommu_dma_map_sg", None)));
        assert!(Pattern::parse("*_fair").unwrap().matches(&s("enqueue_task_fair", None)));
        assert!(Pattern::parse("do_idle").unwrap().matches(&s("do_idle", None)));
        assert!(!Pattern::parse("do_idle").unwrap().matches(&s("do_idle2", None)));
        assert!(Pattern::parse("[nvme]").unwrap().matches(&s("anything", Some("nvme"))));
        assert!(!Pattern::parse("[nvme]").unwrap().matches(&s("anything", Some("nvme_core"))));
        assert!(Pattern::parse("a*b").is_none());
        assert!(Pattern::parse("*").is_none());
    }

    #[test]
    fn the_builtin_table_parses_and_places_the_known_functions() {
        let t = LayerTable::parse(LAYERS_TSV).unwrap();
        let l = |n: &str, m: Option<&str>| {
            KERNEL_LAYERS[t
                .layer_of(&Sym {
                    addr: 0,
                    size: None,
                    name: n.into(),
                    module: m.map(Into::into),
                })
                .0]
        };
        assert_eq!(l("entry_SYSCALL_64", None), "syscall entry/exit");
        assert_eq!(l("io_uring_cmd", None), "io_uring");
        assert_eq!(l("io_schedule", None), "scheduler, wake-up and idle exit");
        assert_eq!(l("aio_read", None), "aio");
        assert_eq!(l("blk_mq_submit_bio", None), "block layer");
        assert_eq!(l("nvme_queue_rq", Some("nvme")), "nvme driver");
        assert_eq!(l("nvme_irq", None), "nvme driver");
        assert_eq!(l("nvme_setup_cmd", Some("nvme_core")), "nvme driver");
        assert_eq!(l("dma_map_page_attrs", None), "DMA mapping and IOMMU");
        assert_eq!(l("intel_iommu_map_pages", None), "DMA mapping and IOMMU");
        assert_eq!(l("asm_common_interrupt", None), "interrupt entry and softirq");
        assert_eq!(l("__do_softirq", None), "interrupt entry and softirq");
        assert_eq!(l("try_to_wake_up", None), "scheduler, wake-up and idle exit");
        assert_eq!(l("filemap_read", None), "page cache");
        assert_eq!(l("vfio_pci_core_ioctl", None), "vfio");
        assert_eq!(l("kmem_cache_alloc", None), "memory management");
        assert_eq!(l("no_rule_for_me", None), "other (named)");
        assert!(LayerTable::parse("x\tno such layer\n").unwrap_err().contains("unknown layer"));
        assert!(LayerTable::parse("no tab here\n").is_err());
    }

    /// A row window, an idle window and a calibration window with figures
    /// worked out by hand.
    fn fixture() -> (Window, Window, Window) {
        let k = 0xffffffff81000000u64;
        let row = window(
            0,
            // user: 400 in TBs + 20 outside them
            420,
            // kernel: 1000 in TBs + 50 unattributed
            1050,
            vec![
                (k + 0x1000, 100, 10),         // entry_SYSCALL_64: 10 syscalls
                (k + 0x1120, 200, 10),         // do_syscall_64
                (k + 0x2000, 30, 3),           // asm_common_interrupt: 3
                (k + 0x2100, 20, 2),           // asm_sysvec_apic_timer_interrupt: 2
                (k + 0x3000, 50, 5),           // __switch_to_asm: 5
                (k + 0x4010, 150, 10),         // block layer
                (k + 0x5000, 100, 10),         // io_uring
                (k + 0x6000, 120, 10),         // mystery_function: unmapped
                (k + 0x7000, 30, 1),           // another_unmapped
                (0xffffffffc0001004, 100, 10), // nvme_queue_rq [nvme]
                (0xffffffffc0002000, 100, 10), // helper_without_prefix [nvme]
                (BIAS + 0x2000, 200, 10),      // our driver
                (BIAS + 0x3000, 100, 10),      // engine
                (BIAS + 0x4000, 50, 10),       // latency recording
                (BIAS + 0x5000, 40, 10),       // the rest
                (0x7fff_0000_0000, 10, 1),     // another process
            ],
            vec![(0xfebf_1000, 10, 0), (0xfebf_0000, 2, 4), (0xfe00_0000, 1, 1)],
        );
        // Idle: 2 s of 100 kernel (timer interrupts) + 10 user.
        let idle = window(IDLE_WINDOW, 10, 100, vec![(k + 0x2100, 100, 4), (0x7fff_0000_0000, 10, 1)], vec![]);
        // Calibration: K = 10 empty polls cost 60 user + 40 kernel, with a
        // system call each (a kernel path's poll).
        let cal = window(CALIBRATION_BASE, 60, 40, vec![(BIAS + 0x2000, 60, 10), (k + 0x1000, 10, 10), (k + 0x1120, 30, 10)], vec![]);
        (row, idle, cal)
    }

    fn run(bg: bool) -> RowCounts {
        let (row, idle, cal) = fixture();
        let k = ksyms();
        let mut u = user_syms();
        u.relocate(row.marker_fn).unwrap();
        let layers = LayerTable::builtin();
        let s = Symbols {
            kernel: &k,
            user: &u,
            layers: &layers,
            bar0: Some(0xfebf_0000),
        };
        let b = Background::new(&idle, 2.0, None, &s);
        // 10 I/Os over 1 s (half the idle window), 5 empty polls.
        let r = RowInput {
            window: &row,
            calibration: Some(&cal),
            ios: 10,
            duration_s: 1.0,
            empty_polls: 5,
            busy_cpu_s: 0.0,
        };
        row_counts(&r, bg.then_some(&b), 10, &s).unwrap()
    }

    #[test]
    fn kernel_polls_not_named_to_the_plugin_leave_the_empty_polls_unknown() {
        // nvme_poll ran 20 times, but the process named no poll loop to
        // the plugin: which polls found nothing is not known.
        let ks = parse_kallsyms("ffffffff81000000 T _stext\nffffffffc0001000 t nvme_poll\t[nvme]\n").unwrap();
        let row = window(0, 0, 1000, vec![(0xffffffffc0001000, 100, 20)], vec![]);
        let u = user_syms();
        let layers = LayerTable::builtin();
        let s = Symbols { kernel: &ks, user: &u, layers: &layers, bar0: None };
        let r = RowInput { window: &row, calibration: None, ios: 8, duration_s: 1.0, empty_polls: 0, busy_cpu_s: 0.0 };
        let c = row_counts(&r, None, 10, &s).unwrap();
        assert_eq!((c.events_per_io.kernel_polls, c.events_per_io.kernel_polls_found), (20.0 / 8.0, 0.0));
        assert_eq!((c.instructions_per_io.empty_polls_kernel, c.instructions_per_io.empty_polls), (None, None));
    }

    #[test]
    fn kernel_iopoll_polls_that_found_nothing_are_counted_in_place() {
        // The same window, with the plugin's own count of the kernel's
        // empty polls (the process named the loop to it): 16 empty polls of
        // 13 and 11 kernel instructions on two vCPUs, 2 left out.
        let ks = parse_kallsyms(
            "ffffffff81000000 T _stext\nffffffff81001000 T io_do_iopoll\nffffffff81002000 T blk_mq_submit_bio\n\
             ffffffffc0001000 t nvme_poll\t[nvme]\nffffffffc0002000 t nvme_poll_cq\t[nvme]\n",
        )
        .unwrap();
        let k = 0xffffffff81000000u64;
        let mut row = window(0, 0, 1000, vec![(k + 0x1000, 200, 20), (0xffffffffc0001000, 100, 20), (0xffffffffc0002000, 80, 4), (k + 0x2000, 620, 8)], vec![]);
        row.vcpus.push(VcpuCount { vcpu: 1, ..Default::default() });
        row.vcpus[0].kpolls = 12;
        row.vcpus[0].kpoll_empty = 8;
        row.vcpus[0].kpoll_empty_kernel = 8 * 13;
        row.vcpus[1].kpolls = 10;
        row.vcpus[1].kpoll_empty = 8;
        row.vcpus[1].kpoll_empty_kernel = 8 * 11;
        row.vcpus[1].kpoll_discarded = 2;
        assert_eq!(row.kernel_polls(), (22, 16, 192, 2));
        let u = user_syms();
        let layers = LayerTable::builtin();
        let s = Symbols { kernel: &ks, user: &u, layers: &layers, bar0: None };
        let r = RowInput { window: &row, calibration: None, ios: 8, duration_s: 1.0, empty_polls: 0, busy_cpu_s: 0.0 };
        let c = row_counts(&r, None, 10, &s).unwrap();
        assert_eq!(c.instructions_per_io.empty_polls_kernel, Some(192.0 / 8.0));
        assert!(close(c.instructions_per_io.empty_polls.unwrap(), 24.0));
        // found: 22 polls less 16 empty and 2 left out
        assert_eq!(c.events_per_io.kernel_polls_found, 4.0 / 8.0);
    }

    #[test]
    fn the_vdso_is_the_clock_and_code_past_the_binary_is_no_function_of_it() {
        let k = ksyms();
        let mut u = user_syms();
        // libc's strcmp: the last function, its size not recorded
        let mut syms: Vec<Sym> = (0..u.table.len()).filter_map(|i| u.table.syms.get(i).cloned()).collect();
        syms.push(Sym { addr: 0x6900, size: None, name: "strcmp".into(), module: None });
        u.table = SymbolTable::new(syms);
        let mut w = window(0, 60, 0, vec![(BIAS + 0x3000, 10, 1), (0x7ffc_0000_0b00, 30, 3), (BIAS + 0x9000, 20, 2)], vec![]);
        w.vdso = (0x7ffc_0000_0000, 0x2000);
        u.relocate(w.marker_fn).unwrap();
        let layers = LayerTable::builtin();
        let s = Symbols { kernel: &k, user: &u, layers: &layers, bar0: None };
        let t = tally(&w, &s);
        let names = breakdown_names();
        let part = |n: &str| t.parts[names.iter().position(|x| *x == n).unwrap()];
        assert_eq!(part("user: engine"), 10.0);
        assert_eq!(part(USER_CLOCK), 30.0, "the vDSO's code is the clock's");
        assert_eq!(part(USER_REST), 0.0, "past the binary's code: not strcmp's");
        assert_eq!(part(USER_UNATTRIBUTED), 20.0);
        // Without the vDSO said (an older plugin), its code is no one's.
        w.vdso = (0, 0);
        let t = tally(&w, &s);
        assert_eq!(t.parts[names.iter().position(|x| *x == USER_UNATTRIBUTED).unwrap()], 50.0);
        // Inside the binary's code, a sizeless last function still holds what follows it.
        assert_eq!(u.lookup(BIAS + 0x6950).unwrap().name, "strcmp");
    }

    #[test]
    fn waits_for_an_interrupt_are_counted_apart_and_left_in_the_total() {
        // An interrupt-driven row: 5 waits of 600 instructions (20 user,
        // the rest kernel) added up by the plugin, tallied on vCPU 0.
        let ks = parse_kallsyms("ffffffff81000000 T _stext\nffffffff81001000 T schedule\n").unwrap();
        let mut row = window(0, 100, 3900, vec![(0xffffffff81001000, 3900, 5)], vec![]);
        row.vcpus[0].wait_user = 5 * 20;
        row.vcpus[0].wait_kernel = 5 * 580;
        row.vcpus[0].waits = 5;
        assert_eq!(row.waits(), (3000, 5));
        let u = user_syms();
        let layers = LayerTable::builtin();
        let s = Symbols { kernel: &ks, user: &u, layers: &layers, bar0: None };
        let r = RowInput { window: &row, calibration: None, ios: 10, duration_s: 1.0, empty_polls: 0, busy_cpu_s: 0.0 };
        let c = row_counts(&r, None, 10, &s).unwrap();
        assert_eq!(c.instructions_per_io.waits, 300.0);
        assert_eq!(c.events_per_io.waits, 0.5);
        // in the total, never subtracted
        assert!(close(c.instructions_per_io.total, 400.0), "{:?}", c.instructions_per_io);
    }

    #[test]
    fn a_process_started_or_ended_in_a_window_is_counted_apart() {
        // Something else's fork and exit inside a row's window: counted,
        // so the report can say the row is not a clean count.
        let ks = parse_kallsyms(
            "ffffffff81000000 T _stext\nffffffff81001000 T copy_process\nffffffff81002000 T do_exit\nffffffff81003000 T blk_mq_submit_bio\n",
        )
        .unwrap();
        let k = 0xffffffff81000000u64;
        let row = window(0, 0, 1000, vec![(k + 0x1000, 300, 2), (k + 0x2000, 200, 1), (k + 0x3000, 500, 10)], vec![]);
        let u = user_syms();
        let layers = LayerTable::builtin();
        let s = Symbols { kernel: &ks, user: &u, layers: &layers, bar0: None };
        let r = RowInput { window: &row, calibration: None, ios: 10, duration_s: 1.0, empty_polls: 0, busy_cpu_s: 0.0 };
        let c = row_counts(&r, None, 10, &s).unwrap();
        assert_eq!((c.processes_started, c.processes_exited), (2, 1));
        let quiet = window(0, 0, 500, vec![(k + 0x3000, 500, 10)], vec![]);
        let r = RowInput { window: &quiet, ..r };
        let c = row_counts(&r, None, 10, &s).unwrap();
        assert_eq!((c.processes_started, c.processes_exited), (0, 0));
    }

    #[test]
    fn a_busy_vcpu_adds_its_ticks_per_cpu_second_of_the_row() {
        // Idle: 100 kernel in 2 s (50/s). Busy (a user spin, 2 s): 1100
        // kernel (550/s), so 500 more per CPU second. A row of 1 s wall
        // time whose thread ran 0.5 CPU s: 50 + 250 = 300 of background,
        // and (1050 - 300) / 10 I/Os = 75 kernel instructions per I/O.
        let (row, idle, _) = fixture();
        let k = 0xffffffff81000000u64;
        let busy = window(BUSY_WINDOW, 5000, 1100, vec![(k + 0x2100, 1100, 40), (BIAS + 0x3000, 5000, 1)], vec![]);
        let ks = ksyms();
        let mut u = user_syms();
        u.relocate(row.marker_fn).unwrap();
        let layers = LayerTable::builtin();
        let s = Symbols { kernel: &ks, user: &u, layers: &layers, bar0: None };
        let b = Background::new(&idle, 2.0, Some((&busy, 2.0)), &s);
        let r = RowInput { window: &row, calibration: None, ios: 10, duration_s: 1.0, empty_polls: 0, busy_cpu_s: 0.5 };
        let c = row_counts(&r, Some(&b), 10, &s).unwrap();
        assert!(close(c.instructions_per_io.kernel, 75.0), "{}", c.instructions_per_io.kernel);
        assert!(close(c.instructions_per_io.user, 41.5), "the spin's user instructions are not background: {}", c.instructions_per_io.user);
        let sum: f64 = c.layers.0.iter().map(|(_, v)| v).sum();
        assert!(close(sum, c.instructions_per_io.total), "layers {sum} still sum to the total {}", c.instructions_per_io.total);
    }

    /// A calibration window without system calls (a look at a completion
    /// queue in user memory): 60 user instructions for 10 passes, and 40
    /// kernel ones, timer ticks.
    fn user_mode_calibration() -> Window {
        window(CALIBRATION_BASE, 60, 40, vec![(BIAS + 0x2000, 60, 10), (0xffffffff81000000u64 + 0x2100, 40, 2)], vec![])
    }

    /// `empty_polls_engine` of `row`: 10 I/Os, 5 empty polls by the
    /// engine's count, the fixture's idle background, calibration `cal`.
    fn engine_empty(row: &Window, cal: Option<&Window>) -> Option<f64> {
        let (_, idle, _) = fixture();
        let ks = ksyms();
        let mut u = user_syms();
        u.relocate(row.marker_fn).unwrap();
        let layers = LayerTable::builtin();
        let s = Symbols { kernel: &ks, user: &u, layers: &layers, bar0: None };
        let b = Background::new(&idle, 2.0, None, &s);
        let r = RowInput { window: row, calibration: cal, ios: 10, duration_s: 1.0, empty_polls: 5, busy_cpu_s: 0.0 };
        row_counts(&r, Some(&b), 10, &s).unwrap().instructions_per_io.empty_polls_engine
    }

    #[test]
    fn a_user_mode_empty_pass_costs_its_user_instructions_only() {
        // Its 40 kernel instructions are the background's, so a pass is
        // 60 / 10 = 6 and 5 empty polls over 10 I/Os are 3 per I/O.
        let (row, _, _) = fixture();
        assert_eq!(engine_empty(&row, Some(&user_mode_calibration())), Some(3.0));
    }

    #[test]
    fn empty_passes_counted_in_place_are_the_figure() {
        // The plugin added up 7 empty passes in the row's own window: 91
        // user instructions and 12 kernel (a tick inside one). A user-mode
        // pass is its user instructions: 91 / 10 I/Os, whatever the
        // calibration's price, and whatever the engine's own count says.
        let (mut row, _, _) = fixture();
        row.vcpus[0].empty_user = 91;
        row.vcpus[0].empty_kernel = 12;
        row.vcpus[0].empty_passes = 7;
        row.vcpus[0].empty_marks = 7;
        assert_eq!(engine_empty(&row, Some(&user_mode_calibration())), Some(9.1));
        // Without a calibration window too.
        assert_eq!(engine_empty(&row, None), Some(9.1));
        // Passes that are system calls (7 x 400 kernel instructions) count
        // their kernel instructions too, calibration or not.
        row.vcpus[0].empty_kernel = 2800;
        assert_eq!(engine_empty(&row, None), Some(289.1));
        // The plugin's fields parse, and default to 0 when absent.
        let w = parse_windows(r#"{"window": 0, "marker_fn": 1, "vcpus": [{"vcpu":0,"user":10,"kernel":20,"empty_user":4,"empty_kernel":1,"empty_passes":2,"empty_marks":3,"empty_discarded":1},{"vcpu":1,"user":1,"kernel":2}], "tbs": []}"#).unwrap();
        assert_eq!(w[0].empty(), EmptyPasses { user: 4, kernel: 1, passes: 2, marks: 3, discarded: 1 });
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn exact_figures_per_io() {
        let c = run(true);
        // user (420 - 0.5 * 10) / 10, kernel (1050 - 0.5 * 100) / 10.
        assert_eq!(c.instructions_per_io.user, 41.5);
        assert_eq!(c.instructions_per_io.kernel, 100.0);
        assert_eq!(c.instructions_per_io.total, 141.5);
        // 5 empty polls x (100 / 10) per poll / 10 I/Os.
        assert_eq!(c.instructions_per_io.empty_polls, Some(5.0));
        let l = &c.layers;
        assert_eq!(l.get("syscall entry/exit"), Some(30.0));
        assert_eq!(l.get("block layer"), Some(15.0));
        assert_eq!(l.get("io_uring"), Some(10.0));
        assert_eq!(l.get("nvme driver"), Some(20.0));
        // 30 + 20 in the row less 0.5 x 100 of the idle timer interrupts.
        assert_eq!(l.get("interrupt entry and softirq"), Some(0.0));
        assert_eq!(l.get("scheduler, wake-up and idle exit"), Some(5.0));
        assert_eq!(l.get("other (named)"), Some(15.0));
        assert_eq!(l.get(KERNEL_UNATTRIBUTED), Some(5.0));
        assert_eq!(l.get("user: our driver"), Some(20.0));
        assert_eq!(l.get("user: engine"), Some(10.0));
        assert_eq!(l.get("user: latency recording"), Some(5.0));
        assert_eq!(l.get("user: our io_uring/aio code"), Some(0.0));
        assert_eq!(l.get(USER_REST), Some(4.0));
        // 10 in another process + 20 outside the TBs - 0.5 x 10 idle.
        assert_eq!(l.get(USER_UNATTRIBUTED), Some(2.5));
        let e = &c.events_per_io;
        assert_eq!(e.syscalls, 1.0);
        // 5 in the row less 0.5 x 4 idle timer ticks.
        assert_eq!(e.interrupts, 0.3);
        assert_eq!(e.context_switches, 0.5);
        assert_eq!(e.doorbell_writes, 1.0);
        assert_eq!(e.other_mmio_writes, 0.3);
        assert_eq!(e.mmio_reads, 0.5);
        assert!(c.background_subtracted);
    }

    #[test]
    fn layers_sum_to_the_total() {
        for bg in [true, false] {
            let c = run(bg);
            assert!(
                close(c.layers.sum(), c.instructions_per_io.total),
                "{bg}: {} vs {}",
                c.layers.sum(),
                c.instructions_per_io.total
            );
            let kernel: f64 = c.layers.0.iter().filter(|(n, _)| !n.starts_with("user: ")).map(|(_, v)| v).sum();
            assert!(close(kernel, c.instructions_per_io.kernel));
        }
        let raw = run(false);
        assert_eq!(raw.instructions_per_io.total, 147.0);
        assert!(!raw.background_subtracted);
    }

    #[test]
    fn unmapped_functions_listed_by_cost() {
        let c = run(true);
        let u: Vec<_> = c
            .unmapped
            .iter()
            .map(|u| (u.name.as_str(), u.module.as_deref(), u.instructions_per_io))
            .collect();
        // helper_without_prefix is named by the [nvme] rule, so not listed.
        assert_eq!(u, vec![("mystery_function", None, 12.0), ("another_unmapped", None, 3.0)]);
    }

    #[test]
    fn without_calibration_no_empty_poll_figure() {
        let (row, ..) = fixture();
        let k = ksyms();
        let u = user_syms();
        let layers = LayerTable::builtin();
        let s = Symbols {
            kernel: &k,
            user: &u,
            layers: &layers,
            bar0: None,
        };
        let r = RowInput {
            window: &row,
            calibration: None,
            ios: 10,
            duration_s: 1.0,
            empty_polls: 5,
            busy_cpu_s: 0.0,
        };
        let c = row_counts(&r, None, 10, &s).unwrap();
        assert_eq!(c.instructions_per_io.empty_polls, None);
        // No BAR0: every write is "other".
        assert_eq!(c.events_per_io.doorbell_writes, 0.0);
        assert_eq!(c.events_per_io.other_mmio_writes, 1.3);
        let r0 = RowInput { ios: 0, ..r };
        assert!(row_counts(&r0, None, 10, &s).is_err());
    }

    #[test]
    fn layers_serialize_in_order() {
        let n = Named(vec![("b".into(), 1.0), ("a".into(), 2.0)]);
        assert_eq!(serde_json::to_string(&n).unwrap(), r#"{"b":1.0,"a":2.0}"#);
    }
}
