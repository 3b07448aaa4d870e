//! nvb-insn-count: a QEMU TCG plugin that counts, exactly, what the guest
//! executes between two marker instructions run by nvme-bypass
//! (`src/measure/marker.rs`): instructions per vCPU in user and kernel mode,
//! instructions and executions per translation block (by its start address,
//! so the host can attribute them to functions), and accesses to I/O memory
//! (MMIO) per physical page. See README.md beside this folder's Cargo.toml.
//!
//! The plugin API is declared here by hand (the few functions used, as
//! QEMU 10.0's `include/qemu/qemu-plugin.h` declares them for API version
//! 4), so the plugin needs no bindings crate and builds offline.
//!
//! Counting: every translation block (TB) gets a slot, keyed by its start
//! address and its length in instructions; a callback QEMU calls as the
//! block starts adds 1 to the slot's counter of the vCPU (a plain add
//! into the plugin's own per-vCPU array). Instructions are executions
//! times the block's length. At START the counters are zeroed; at STOP
//! they are read and one JSON line is written. (QEMU's inline per-vCPU
//! ops into a scoreboard would avoid the call, but with single-threaded
//! TCG and two vCPUs they crash QEMU 10.0.2, and the test bed runs
//! single-threaded TCG.)

#![allow(non_camel_case_types)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

// ------------------------------------------------------------------ the API

type Id = u64;

#[repr(C)]
pub struct QemuInfo {
    target_name: *const c_char,
    version_min: c_int,
    version_cur: c_int,
    system_emulation: bool,
    smp_vcpus: c_int,
    max_vcpus: c_int,
}

#[repr(C)]
struct Tb {
    _p: [u8; 0],
}
#[repr(C)]
struct Insn {
    _p: [u8; 0],
}
#[repr(C)]
struct Hwaddr {
    _p: [u8; 0],
}
#[repr(C)]
struct Register {
    _p: [u8; 0],
}

#[repr(C)]
struct GArray {
    data: *mut c_char,
    len: c_uint,
}
#[repr(C)]
struct GByteArray {
    data: *mut u8,
    len: c_uint,
}

#[repr(C)]
struct RegDescriptor {
    handle: *mut Register,
    name: *const c_char,
    feature: *const c_char,
}

// enum qemu_plugin_cb_flags
const CB_NO_REGS: c_uint = 0;
const CB_R_REGS: c_uint = 1;
// enum qemu_plugin_mem_rw
const MEM_RW: c_uint = 3;

type TbTransCb = extern "C" fn(Id, *mut Tb);
type VcpuSimpleCb = extern "C" fn(Id, c_uint);
type VcpuUdataCb = extern "C" fn(c_uint, *mut c_void);
type UdataCb = extern "C" fn(Id, *mut c_void);
type SimpleCb = extern "C" fn(Id);
type MemCb = extern "C" fn(c_uint, u32, u64, *mut c_void);

extern "C" {
    fn qemu_plugin_register_vcpu_tb_trans_cb(id: Id, cb: TbTransCb);
    fn qemu_plugin_register_vcpu_init_cb(id: Id, cb: VcpuSimpleCb);
    fn qemu_plugin_register_atexit_cb(id: Id, cb: UdataCb, udata: *mut c_void);
    fn qemu_plugin_tb_n_insns(tb: *const Tb) -> usize;
    fn qemu_plugin_tb_vaddr(tb: *const Tb) -> u64;
    fn qemu_plugin_tb_get_insn(tb: *const Tb, idx: usize) -> *mut Insn;
    fn qemu_plugin_insn_data(insn: *const Insn, dest: *mut c_void, len: usize) -> usize;
    fn qemu_plugin_insn_size(insn: *const Insn) -> usize;
    fn qemu_plugin_register_vcpu_insn_exec_cb(
        insn: *mut Insn,
        cb: VcpuUdataCb,
        flags: c_uint,
        udata: *mut c_void,
    );
    fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut Tb,
        cb: VcpuUdataCb,
        flags: c_uint,
        udata: *mut c_void,
    );
    fn qemu_plugin_register_vcpu_mem_cb(
        insn: *mut Insn,
        cb: MemCb,
        flags: c_uint,
        rw: c_uint,
        udata: *mut c_void,
    );
    fn qemu_plugin_get_hwaddr(info: u32, vaddr: u64) -> *mut Hwaddr;
    fn qemu_plugin_hwaddr_is_io(h: *const Hwaddr) -> bool;
    fn qemu_plugin_hwaddr_phys_addr(h: *const Hwaddr) -> u64;
    fn qemu_plugin_mem_is_store(info: u32) -> bool;
    fn qemu_plugin_num_vcpus() -> c_int;
    fn qemu_plugin_outs(s: *const c_char);
    fn qemu_plugin_get_registers() -> *mut GArray;
    fn qemu_plugin_read_register(handle: *mut Register, buf: *mut GByteArray) -> c_int;
    fn qemu_plugin_reset(id: Id, cb: SimpleCb);
    // glib, which QEMU links and whose symbols the plugin shares
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_byte_array_free(a: *mut GByteArray, free_segment: c_int) -> *mut u8;
    fn g_array_free(a: *mut GArray, free_segment: c_int) -> *mut c_char;
}

/// The API version this plugin is written against (QEMU 10.0 offers 4).
#[no_mangle]
pub static qemu_plugin_version: c_int = 4;

// ------------------------------------------------------------------ state

/// TB slots per vCPU (8 bytes each); blocks beyond them
/// are counted per mode only (`tb_overflow` in the output).
const MAX_SLOTS: usize = 1 << 20;
/// After the slots: instructions and executions of overflow blocks,
/// user then kernel.
const OVF_INSNS: usize = MAX_SLOTS;
const OVF_EXECS: usize = MAX_SLOTS + 2;
/// Instructions so far in the window, user and kernel (the sum of the
/// slots, kept running so a marker can read it mid-window).
const RUN: usize = MAX_SLOTS + 4;
/// At the last PASS marker: RUN's two values, before the marker.
const LAST: usize = MAX_SLOTS + 6;
/// Bit 0: a PASS marker was seen in this window; bit 1: the pass since
/// found nothing (an EMPTY marker ran); bit 2: an interrupt came in it.
/// (LAST, PASS_STATE and the EMPTY_* tallies are the timeline's: vCPU 0's
/// fields.)
const PASS_STATE: usize = MAX_SLOTS + 8;
/// Empty passes: user and kernel instructions, passes, EMPTY markers,
/// passes discarded (longer than MAX_PASS: the thread left the vCPU).
const EMPTY_INSNS: usize = MAX_SLOTS + 9;
const EMPTY_PASSES: usize = MAX_SLOTS + 11;
const EMPTY_MARKS: usize = MAX_SLOTS + 12;
const EMPTY_DISCARDED: usize = MAX_SLOTS + 13;
/// The kernel's IOPOLL loop (see "Kernel polls" in README.md): at the last
/// poll's start, RUN's two values; the poll's state (bit 0 open, bit 1
/// found something, bit 2 an interrupt came in it); the polls that found
/// nothing, user and kernel instructions and their number; every poll
/// started; polls left out (an interrupt in them, or longer than
/// MAX_PASS); and, since the last PASS marker, the empty polls' user and
/// kernel instructions and number (taken back out when that pass is an
/// empty pass itself, which counts them whole).
const KLAST: usize = MAX_SLOTS + 14;
const KSTATE: usize = MAX_SLOTS + 16;
const KEMPTY_INSNS: usize = MAX_SLOTS + 17;
const KEMPTY_POLLS: usize = MAX_SLOTS + 19;
const KPOLLS: usize = MAX_SLOTS + 20;
const KDISCARDED: usize = MAX_SLOTS + 21;
const KPASS: usize = MAX_SLOTS + 22;
/// An interrupt-driven queue's waits (WAIT to WOKE markers): RUN's two
/// values at the WAIT; 1 while a wait is open; the waits' user and kernel
/// instructions; their number.
const WLAST: usize = MAX_SLOTS + 25;
const WSTATE: usize = MAX_SLOTS + 27;
const WAIT_INSNS: usize = MAX_SLOTS + 28;
const WAITS: usize = MAX_SLOTS + 30;
const ENTRY_U64S: usize = MAX_SLOTS + 31;
/// A pass longer than this (user + kernel instructions) is not one pass of
/// a polling loop: its thread was preempted.
const MAX_PASS: u64 = 1_000_000;
/// In a TB's callback data: the block is in the kernel's half.
const KERNEL_BIT: usize = 1 << 31;
/// x86-64: the upper half of the address space is the kernel's.
const KERNEL_BASE: u64 = 0xffff_8000_0000_0000;

/// `nopl 0x4e564253(%rax)` ("SBVN"): window start; `...45 42 56 4e` stop.
const MARK_START: [u8; 7] = [0x0f, 0x1f, 0x80, 0x53, 0x42, 0x56, 0x4e];
const MARK_STOP: [u8; 7] = [0x0f, 0x1f, 0x80, 0x45, 0x42, 0x56, 0x4e];
/// `...50 42 56 4e` ("PBVN"): a pass of the engine's loop starts;
/// `...5a 42 56 4e` ("ZBVN"): the pass found nothing (an empty poll).
const MARK_PASS: [u8; 7] = [0x0f, 0x1f, 0x80, 0x50, 0x42, 0x56, 0x4e];
const MARK_EMPTY: [u8; 7] = [0x0f, 0x1f, 0x80, 0x5a, 0x42, 0x56, 0x4e];
/// `...4b 42 56 4e` ("KBVN"): a kernel address to watch, `rdi`, of the
/// kind in `rax` (K_POLL...K_IRQ); run before the windows it serves.
const MARK_KERNEL: [u8; 7] = [0x0f, 0x1f, 0x80, 0x4b, 0x42, 0x56, 0x4e];
/// `...57 42 56 4e` ("WBVN"): the thread waits for its queue's interrupt;
/// `...52 42 56 4e` ("RBVN"): the wait is over.
const MARK_WAIT: [u8; 7] = [0x0f, 0x1f, 0x80, 0x57, 0x42, 0x56, 0x4e];
const MARK_WOKE: [u8; 7] = [0x0f, 0x1f, 0x80, 0x52, 0x42, 0x56, 0x4e];
const START: usize = 1;
const STOP: usize = 2;
const PASS: usize = 3;
const EMPTY: usize = 4;
const KERNEL: usize = 5;
const WAIT: usize = 6;
const WOKE: usize = 7;
/// Kinds of watched kernel addresses: a poll of the IOPOLL loop starts
/// (`nvme_poll`, which the block layer calls until one finds completions);
/// it found one (`nvme_pci_complete_batch`, `nvme_pci_complete_rq`: the
/// driver completes what it found); the system call returns
/// (`syscall_exit_to_user_mode`); an interrupt comes in (the `asm_sysvec_*`
/// and `asm_common_interrupt` entries).
const K_POLL: u8 = 1;
const K_FOUND: u8 = 2;
const K_EXIT: u8 = 3;
const K_IRQ: u8 = 4;

struct Slots {
    by_key: HashMap<(u64, u32), u32>,
    /// slot -> (TB start address, instructions)
    list: Vec<(u64, u32)>,
}

struct Window {
    id: u64,
    marker_fn: u64,
    /// The marking process's vDSO: start, length (0, 0: not said).
    vdso: (u64, u64),
    t0: Instant,
}

/// Per vCPU (up to max_vcpus), ENTRY_U64S counters; each is written by its
/// vCPU's thread only (and zeroed at START).
static COUNTS: OnceLock<Vec<Box<[AtomicU64]>>> = OnceLock::new();
static SLOTS: OnceLock<Mutex<Slots>> = OnceLock::new();
static OUT: OnceLock<String> = OnceLock::new();
static MMIO: AtomicBool = AtomicBool::new(true);
/// Count MMIO accesses: between START and STOP only.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static IO: Mutex<Option<HashMap<u64, [u64; 2]>>> = Mutex::new(None);
static WINDOW: Mutex<Option<Window>> = Mutex::new(None);
/// Register handles of rax, rdi, rsi and rdx (0: not found).
static REG_RAX: AtomicUsize = AtomicUsize::new(0);
static REG_RDI: AtomicUsize = AtomicUsize::new(0);
static REG_RSI: AtomicUsize = AtomicUsize::new(0);
static REG_RDX: AtomicUsize = AtomicUsize::new(0);
/// This plugin's id, for `qemu_plugin_reset`.
static PLUGIN_ID: AtomicU64 = AtomicU64::new(0);
static WINDOWS_WRITTEN: AtomicU64 = AtomicU64::new(0);
/// Watched kernel addresses -> kind (K_POLL...).
static KADDRS: Mutex<Option<HashMap<u64, u8>>> = Mutex::new(None);
/// Per TB slot: the kind of the watched address it starts at, or 0.
static KFLAGS: OnceLock<Box<[AtomicU8]>> = OnceLock::new();

fn kflags() -> &'static [AtomicU8] {
    KFLAGS.get_or_init(|| (0..MAX_SLOTS).map(|_| AtomicU8::new(0)).collect())
}

fn slots() -> &'static Mutex<Slots> {
    SLOTS.get_or_init(|| {
        Mutex::new(Slots {
            by_key: HashMap::new(),
            list: Vec::new(),
        })
    })
}

fn say(msg: &str) {
    let s = std::ffi::CString::new(format!("nvb-insn-count: {msg}\n")).unwrap_or_default();
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe { qemu_plugin_outs(s.as_ptr()) }
}

// ------------------------------------------------------------------ install

/// # Safety
/// Called by QEMU with a valid `info` and `argc` C strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: Id,
    info: *const QemuInfo,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    let info = &*info;
    let target = CStr::from_ptr(info.target_name).to_string_lossy();
    if target != "x86_64" || !info.system_emulation {
        say(&format!("needs x86_64 system emulation, not {target}"));
        return -1;
    }
    let mut out = None;
    for i in 0..argc.max(0) as usize {
        let arg = CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned();
        match arg.split_once('=') {
            Some(("out", p)) => out = Some(p.to_string()),
            Some(("mmio", v)) => match v {
                "on" | "true" | "yes" | "1" => MMIO.store(true, Ordering::Relaxed),
                "off" | "false" | "no" | "0" => MMIO.store(false, Ordering::Relaxed),
                _ => {
                    say(&format!("mmio={v}: want on or off"));
                    return -1;
                }
            },
            _ => {
                say(&format!("unknown argument '{arg}' (out=PATH, mmio=on|off)"));
                return -1;
            }
        }
    }
    let Some(out) = out else {
        say("out=PATH is required");
        return -1;
    };
    if let Err(e) = std::fs::File::create(&out) {
        say(&format!("cannot create {out}: {e}"));
        return -1;
    }
    let _ = OUT.set(out);
    let vcpus = info.max_vcpus.max(info.smp_vcpus).max(1) as usize;
    let _ = COUNTS.set(
        (0..vcpus)
            .map(|_| (0..ENTRY_U64S).map(|_| AtomicU64::new(0)).collect())
            .collect(),
    );
    *IO.lock().unwrap() = Some(HashMap::new());
    PLUGIN_ID.store(id, Ordering::Relaxed);
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    register(id);
    0
}

/// The callbacks that stay registered: translation (which adds each
/// block's) and exit.
fn register(id: Id) {
    // SAFETY: registering this plugin's own callbacks with its id.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
        qemu_plugin_register_atexit_cb(id, at_exit, std::ptr::null_mut());
    }
}

/// A code cache flush asked for at a window's START is done (every vCPU
/// stopped, every callback unregistered): register ours again.
extern "C" fn after_reset(id: Id) {
    register(id);
}

/// Find the handles of rax (window id), rdi (marker's address), rsi and
/// rdx (the vDSO's start and length).
extern "C" fn vcpu_init(_id: Id, _vcpu: c_uint) {
    if REG_RAX.load(Ordering::Acquire) != 0 {
        return;
    }
    // SAFETY: called on a vCPU, where QEMU lists its registers; the array
    // holds `len` descriptors and is ours to free.
    unsafe {
        let regs = qemu_plugin_get_registers();
        if regs.is_null() {
            return;
        }
        let descs =
            std::slice::from_raw_parts((*regs).data as *const RegDescriptor, (*regs).len as usize);
        for d in descs {
            match CStr::from_ptr(d.name).to_bytes() {
                b"rax" => REG_RAX.store(d.handle as usize, Ordering::Release),
                b"rdi" => REG_RDI.store(d.handle as usize, Ordering::Release),
                b"rsi" => REG_RSI.store(d.handle as usize, Ordering::Release),
                b"rdx" => REG_RDX.store(d.handle as usize, Ordering::Release),
                _ => {}
            }
        }
        g_array_free(regs, 1);
    }
}

fn read_reg(handle: usize) -> Option<u64> {
    if handle == 0 {
        return None;
    }
    // SAFETY: a fresh GByteArray QEMU fills and we free; read within a
    // callback registered with CB_R_REGS.
    unsafe {
        let buf = g_byte_array_new();
        let n = qemu_plugin_read_register(handle as *mut Register, buf);
        let v = if n >= 8 && (*buf).len >= 8 {
            let mut b = [0u8; 8];
            std::ptr::copy_nonoverlapping((*buf).data, b.as_mut_ptr(), 8);
            Some(u64::from_le_bytes(b))
        } else {
            None
        };
        g_byte_array_free(buf, 1);
        v
    }
}

// ------------------------------------------------------------------ translation

extern "C" fn tb_trans(_id: Id, tb: *mut Tb) {
    // SAFETY: `tb` and its instructions are valid during this callback.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        let vaddr = qemu_plugin_tb_vaddr(tb);
        let mmio = MMIO.load(Ordering::Relaxed);
        for i in 0..n {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            if qemu_plugin_insn_size(insn) == MARK_START.len() {
                let mut b = [0u8; 7];
                if qemu_plugin_insn_data(insn, b.as_mut_ptr() as *mut c_void, b.len()) == b.len() {
                    let kind = match b {
                        MARK_START => START,
                        MARK_STOP => STOP,
                        MARK_PASS => PASS,
                        MARK_EMPTY => EMPTY,
                        MARK_KERNEL => KERNEL,
                        MARK_WAIT => WAIT,
                        MARK_WOKE => WOKE,
                        _ => 0,
                    };
                    // The marker's place in its block: instructions the
                    // block's callback counted that have not run yet.
                    let udata = (kind | (n - i) << 8) as *mut c_void;
                    match kind {
                        START | STOP => qemu_plugin_register_vcpu_insn_exec_cb(insn, marker, CB_R_REGS, udata),
                        KERNEL => qemu_plugin_register_vcpu_insn_exec_cb(insn, kernel_marker, CB_R_REGS, udata),
                        PASS | EMPTY => qemu_plugin_register_vcpu_insn_exec_cb(insn, pass_marker, CB_NO_REGS, udata),
                        WAIT | WOKE => qemu_plugin_register_vcpu_insn_exec_cb(insn, wait_marker, CB_NO_REGS, udata),
                        _ => {}
                    }
                }
            }
            if mmio {
                qemu_plugin_register_vcpu_mem_cb(
                    insn,
                    mem_access,
                    CB_NO_REGS,
                    MEM_RW,
                    std::ptr::null_mut(),
                );
            }
        }
        let slot = {
            let mut s = slots().lock().unwrap();
            let key = (vaddr, n as u32);
            let slot = match s.by_key.get(&key) {
                Some(&x) => x as usize,
                None if s.list.len() < MAX_SLOTS => {
                    let x = s.list.len();
                    s.list.push(key);
                    s.by_key.insert(key, x as u32);
                    x
                }
                // past the table: counted per mode only
                None => MAX_SLOTS + (vaddr >= KERNEL_BASE) as usize,
            };
            if slot < MAX_SLOTS {
                if let Some(&kind) = KADDRS.lock().unwrap().as_ref().and_then(|m| m.get(&vaddr)) {
                    kflags()[slot].store(kind, Ordering::Relaxed);
                }
            }
            slot
        };
        let kernel = if vaddr >= KERNEL_BASE { KERNEL_BIT } else { 0 };
        let udata = (n << 32 | kernel | slot) as *mut c_void;
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, CB_NO_REGS, udata);
    }
}

// ------------------------------------------------------------------ execution

extern "C" fn tb_exec(vcpu: c_uint, udata: *mut c_void) {
    let Some(c) = COUNTS.get().and_then(|c| c.get(vcpu as usize)) else {
        return;
    };
    let (n, slot) = ((udata as usize >> 32) as u64, udata as usize & 0x7fff_ffff);
    let add = |i: usize, d: u64| {
        c[i].store(
            c[i].load(Ordering::Relaxed).wrapping_add(d),
            Ordering::Relaxed,
        )
    };
    if slot < MAX_SLOTS {
        if let Some(f) = KFLAGS.get() {
            let kind = f[slot].load(Ordering::Relaxed);
            if kind != 0 {
                kernel_event(kind, timeline_now(0));
            }
        }
    }
    add(RUN + (udata as usize & KERNEL_BIT != 0) as usize, n);
    if slot < MAX_SLOTS {
        add(slot, 1);
    } else {
        let k = slot - MAX_SLOTS;
        add(OVF_INSNS + k, n);
        add(OVF_EXECS + k, 1);
    }
}

extern "C" fn mem_access(_vcpu: c_uint, info: u32, vaddr: u64, _u: *mut c_void) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: QEMU's handle for this access, valid during the callback.
    let (page, store) = unsafe {
        let h = qemu_plugin_get_hwaddr(info, vaddr);
        if h.is_null() || !qemu_plugin_hwaddr_is_io(h) {
            return;
        }
        (
            qemu_plugin_hwaddr_phys_addr(h) & !0xfff,
            qemu_plugin_mem_is_store(info),
        )
    };
    if let Some(m) = IO.lock().unwrap().as_mut() {
        m.entry(page).or_default()[if store { 0 } else { 1 }] += 1;
    }
}

fn vcpus() -> usize {
    // SAFETY: no arguments; QEMU's count of vCPUs initialised so far.
    unsafe { qemu_plugin_num_vcpus().max(0) as usize }
}

/// The counters of every vCPU QEMU initialised.
fn entries() -> &'static [Box<[AtomicU64]>] {
    match COUNTS.get() {
        Some(c) => &c[..vcpus().min(c.len())],
        None => &[],
    }
}

/// PASS and EMPTY: each pass of the engine's loop (PASS to the next PASS)
/// that ran an EMPTY marker is added to the empty passes' instructions,
/// user and kernel, exactly (the count at a marker is the block's running
/// count less the block's instructions after it). Passes are timed on the
/// machine's timeline, as the kernel's polls are (see [`timeline`]); one
/// with an interrupt in it is left out (`empty_discarded`), as such a
/// kernel poll is: the interrupt's work is the background's.
extern "C" fn pass_marker(_vcpu: c_uint, udata: *mut c_void) {
    let Some(c) = timeline() else { return };
    let (kind, after) = (udata as usize & 0xff, (udata as usize >> 8) as u64);
    let get = |i: usize| c[i].load(Ordering::Relaxed);
    let set = |i: usize, v: u64| c[i].store(v, Ordering::Relaxed);
    let state = get(PASS_STATE);
    if kind == EMPTY {
        set(EMPTY_MARKS, get(EMPTY_MARKS) + 1);
        set(PASS_STATE, state | 2);
        return;
    }
    let now = timeline_now(after);
    close_pass(now);
    set(LAST, now[0]);
    set(LAST + 1, now[1]);
    set(PASS_STATE, 1);
}

/// WAIT and WOKE: each wait for a queue's interrupt, from its WAIT to its
/// WOKE on the machine's timeline (the sleep, the interrupt that ends it
/// and the wake-up run on any vCPU), is added to the window's waits.
extern "C" fn wait_marker(_vcpu: c_uint, udata: *mut c_void) {
    let Some(c) = timeline() else { return };
    let (kind, after) = (udata as usize & 0xff, (udata as usize >> 8) as u64);
    let now = timeline_now(after);
    if kind == WAIT {
        c[WLAST].store(now[0], Ordering::Relaxed);
        c[WLAST + 1].store(now[1], Ordering::Relaxed);
        c[WSTATE].store(1, Ordering::Relaxed);
    } else {
        close_wait(now);
    }
}

/// The open wait (if any) ends at `now`.
fn close_wait(now: [u64; 2]) {
    let Some(c) = timeline() else { return };
    let get = |i: usize| c[i].load(Ordering::Relaxed);
    let set = |i: usize, v: u64| c[i].store(v, Ordering::Relaxed);
    if get(WSTATE) == 0 {
        return;
    }
    set(WSTATE, 0);
    for i in 0..2 {
        set(WAIT_INSNS + i, get(WAIT_INSNS + i) + now[i].wrapping_sub(get(WLAST + i)));
    }
    set(WAITS, get(WAITS) + 1);
}

/// The pass since the last PASS marker ends at `now` (the timeline's user,
/// kernel): add it to the empty passes if it found nothing and saw no
/// interrupt. The kernel's empty polls inside it then leave the kernel's
/// tally (the pass holds them).
fn close_pass(now: [u64; 2]) {
    let Some(c) = timeline() else { return };
    let get = |i: usize| c[i].load(Ordering::Relaxed);
    let set = |i: usize, v: u64| c[i].store(v, Ordering::Relaxed);
    let inner = [get(KPASS), get(KPASS + 1), get(KPASS + 2)];
    for i in 0..3 {
        set(KPASS + i, 0);
    }
    let state = get(PASS_STATE);
    if state & 3 != 3 {
        return;
    }
    let (u, k) = (now[0].wrapping_sub(get(LAST)), now[1].wrapping_sub(get(LAST + 1)));
    if state & 4 != 0 || u.saturating_add(k) > MAX_PASS {
        set(EMPTY_DISCARDED, get(EMPTY_DISCARDED) + 1);
    } else {
        for i in 0..2 {
            set(KEMPTY_INSNS + i, get(KEMPTY_INSNS + i).wrapping_sub(inner[i]));
        }
        set(KEMPTY_POLLS, get(KEMPTY_POLLS).wrapping_sub(inner[2]));
        set(EMPTY_INSNS, get(EMPTY_INSNS) + u);
        set(EMPTY_INSNS + 1, get(EMPTY_INSNS + 1) + k);
        set(EMPTY_PASSES, get(EMPTY_PASSES) + 1);
    }
    set(PASS_STATE, 1);
}

/// The counters that hold the kernel polls' state and tallies: vCPU 0's.
/// The test bed runs single-threaded TCG, so one vCPU executes at a time
/// and the sum of every vCPU's running count is one timeline of the
/// machine's instructions. The polls are timed on it, not on one vCPU's
/// count: measured, a vCPU's count does not hold every instruction of the
/// thread that vCPU runs (in a counting boot the timer ticks of a vCPU
/// spinning in user mode, and part of the IOPOLL loop's own functions,
/// were counted on the other vCPU), so a poll timed on one vCPU's count
/// missed about a fifth of its instructions, which then stayed in the
/// row's count per I/O and grew with the number of polls.
fn timeline() -> Option<&'static [AtomicU64]> {
    entries().first().map(|c| &c[..])
}

/// The timeline's user and kernel instructions now, less `after` user
/// instructions of the running block not yet executed.
fn timeline_now(after: u64) -> [u64; 2] {
    let mut now = [0u64; 2];
    for c in entries() {
        now[0] = now[0].wrapping_add(c[RUN].load(Ordering::Relaxed));
        now[1] = now[1].wrapping_add(c[RUN + 1].load(Ordering::Relaxed));
    }
    now[0] = now[0].wrapping_sub(after);
    now
}

/// A watched kernel address ran, `now` the timeline's count at the block's
/// start: the IOPOLL loop's polls are timed from one start to the next
/// (or to the system call's return); one that found nothing and saw no
/// interrupt is added to the kernel's empty polls.
fn kernel_event(kind: u8, now: [u64; 2]) {
    let Some(c) = timeline() else { return };
    let get = |i: usize| c[i].load(Ordering::Relaxed);
    let set = |i: usize, v: u64| c[i].store(v, Ordering::Relaxed);
    let state = get(KSTATE);
    match kind {
        K_POLL => {
            close_kpoll(now);
            set(KLAST, now[0]);
            set(KLAST + 1, now[1]);
            set(KSTATE, 1);
            set(KPOLLS, get(KPOLLS) + 1);
        }
        K_FOUND if state & 1 != 0 => set(KSTATE, state | 2),
        K_IRQ => {
            if state & 1 != 0 {
                set(KSTATE, state | 4);
            }
            let pass = get(PASS_STATE);
            if pass & 1 != 0 {
                set(PASS_STATE, pass | 4);
            }
        }
        K_EXIT => close_kpoll(now),
        _ => {}
    }
}

/// The open kernel poll ends at `now` (the timeline's count).
fn close_kpoll(now: [u64; 2]) {
    let Some(c) = timeline() else { return };
    let get = |i: usize| c[i].load(Ordering::Relaxed);
    let set = |i: usize, v: u64| c[i].store(v, Ordering::Relaxed);
    let state = get(KSTATE);
    set(KSTATE, 0);
    if state & 1 == 0 || state & 2 != 0 {
        return;
    }
    let (u, k) = (now[0].wrapping_sub(get(KLAST)), now[1].wrapping_sub(get(KLAST + 1)));
    if state & 4 != 0 || u.saturating_add(k) > MAX_PASS {
        set(KDISCARDED, get(KDISCARDED) + 1);
        return;
    }
    for (i, d) in [u, k].into_iter().enumerate() {
        set(KEMPTY_INSNS + i, get(KEMPTY_INSNS + i) + d);
        set(KPASS + i, get(KPASS + i) + d);
    }
    set(KEMPTY_POLLS, get(KEMPTY_POLLS) + 1);
    set(KPASS + 2, get(KPASS + 2) + 1);
}

/// KBVN: watch kernel address `rdi` as kind `rax`. Blocks already
/// translated at that address are marked at once; later ones as they are
/// translated.
extern "C" fn kernel_marker(_vcpu: c_uint, _udata: *mut c_void) {
    let kind = read_reg(REG_RAX.load(Ordering::Acquire)).unwrap_or(0);
    let addr = read_reg(REG_RDI.load(Ordering::Acquire)).unwrap_or(0);
    if !(K_POLL as u64..=K_IRQ as u64).contains(&kind) || addr < KERNEL_BASE {
        say(&format!("kernel address marker: kind {kind} at {addr:#x} ignored"));
        return;
    }
    let kind = kind as u8;
    {
        let mut m = KADDRS.lock().unwrap();
        if m.get_or_insert_with(HashMap::new).insert(addr, kind) == Some(kind) {
            return;
        }
    }
    let s = slots().lock().unwrap();
    for (slot, &(vaddr, _)) in s.list.iter().enumerate() {
        if vaddr == addr {
            kflags()[slot].store(kind, Ordering::Relaxed);
        }
    }
}

extern "C" fn marker(_vcpu: c_uint, udata: *mut c_void) {
    let id = read_reg(REG_RAX.load(Ordering::Acquire)).unwrap_or(u64::MAX);
    let marker_fn = read_reg(REG_RDI.load(Ordering::Acquire)).unwrap_or(0);
    let (kind, after) = (udata as usize & 0xff, (udata as usize >> 8) as u64);
    if kind == START {
        // (with multi-threaded TCG another vCPU may be adding meanwhile:
        // at most its block in flight is lost)
        for e in entries() {
            e.iter().for_each(|a| a.store(0, Ordering::Relaxed));
        }
        if let Some(m) = IO.lock().unwrap().as_mut() {
            m.clear();
        }
        let vdso = (
            read_reg(REG_RSI.load(Ordering::Acquire)).unwrap_or(0),
            read_reg(REG_RDX.load(Ordering::Acquire)).unwrap_or(0),
        );
        *WINDOW.lock().unwrap() = Some(Window {
            id,
            marker_fn,
            vdso,
            t0: Instant::now(),
        });
        ACTIVE.store(true, Ordering::Relaxed);
        // Flush the code cache, so that every block the window runs is
        // translated again, at the address of the process that runs it:
        // QEMU shares a block between processes that map the same page
        // (the same binary, the vDSO, a shared library) and gives the
        // plugin the address of the process that ran it first (see
        // "Shared code" in README.md). QEMU stops every vCPU after this
        // block, flushes, unregisters our callbacks and calls
        // `after_reset`, before any vCPU runs on; nothing runs uncounted.
        // SAFETY: our own id; `after_reset` registers our callbacks again.
        unsafe { qemu_plugin_reset(PLUGIN_ID.load(Ordering::Relaxed), after_reset) };
    } else {
        ACTIVE.store(false, Ordering::Relaxed);
        // A pass that found nothing and ran into the window's end ends here.
        let now = timeline_now(after);
        close_pass(now);
        close_kpoll(now);
        close_wait(now);
        let Some(w) = WINDOW.lock().unwrap().take() else {
            say(&format!("STOP of window {id} without a START: ignored"));
            return;
        };
        if w.id != id {
            say(&format!("STOP of window {id} ends window {}", w.id));
        }
        write_window(&w);
    }
}

fn write_window(w: &Window) {
    let host_ns = w.t0.elapsed().as_nanos() as u64;
    let list = slots().lock().unwrap().list.clone();
    let mut per_tb: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut line = String::with_capacity(1 << 16);
    let _ = write!(
        line,
        "{{\"window\": {}, \"marker_fn\": {}, \"vdso\": [{}, {}], \"host_ns\": {host_ns}, \"vcpus\": [",
        w.id, w.marker_fn, w.vdso.0, w.vdso.1
    );
    let mut overflow = 0u64;
    for (v, e) in entries().iter().enumerate() {
        let c: Vec<u64> = e.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        let (mut user, mut kernel) = (c[OVF_INSNS], c[OVF_INSNS + 1]);
        overflow += c[OVF_INSNS] + c[OVF_INSNS + 1];
        for (slot, &(vaddr, n)) in list.iter().enumerate() {
            let execs = c[slot];
            if execs == 0 {
                continue;
            }
            let insns = execs * n as u64;
            if vaddr >= KERNEL_BASE {
                kernel += insns;
            } else {
                user += insns;
            }
            let t = per_tb.entry(vaddr).or_default();
            t.0 += insns;
            t.1 += execs;
        }
        let _ = write!(
            line,
            "{}{{\"vcpu\": {v}, \"user\": {user}, \"kernel\": {kernel}, \"empty_user\": {}, \"empty_kernel\": {}, \"empty_passes\": {}, \"empty_marks\": {}, \"empty_discarded\": {}, \"kpolls\": {}, \"kpoll_empty\": {}, \"kpoll_empty_user\": {}, \"kpoll_empty_kernel\": {}, \"kpoll_discarded\": {}, \"wait_user\": {}, \"wait_kernel\": {}, \"waits\": {}}}",
            if v > 0 { ", " } else { "" },
            c[EMPTY_INSNS],
            c[EMPTY_INSNS + 1],
            c[EMPTY_PASSES],
            c[EMPTY_MARKS],
            c[EMPTY_DISCARDED],
            c[KPOLLS],
            c[KEMPTY_POLLS],
            c[KEMPTY_INSNS],
            c[KEMPTY_INSNS + 1],
            c[KDISCARDED],
            c[WAIT_INSNS],
            c[WAIT_INSNS + 1],
            c[WAITS]
        );
    }
    let _ = write!(line, "], \"tb_overflow\": {overflow}, \"tbs\": [");
    let mut tbs: Vec<_> = per_tb.into_iter().collect();
    tbs.sort_unstable();
    for (i, (vaddr, (insns, execs))) in tbs.iter().enumerate() {
        let _ = write!(
            line,
            "{}[{vaddr}, {insns}, {execs}]",
            if i > 0 { ", " } else { "" }
        );
    }
    line.push_str("], \"io\": [");
    let mut io: Vec<_> = IO
        .lock()
        .unwrap()
        .as_ref()
        .map(|m| m.iter().map(|(&p, &c)| (p, c)).collect())
        .unwrap_or_default();
    io.sort_unstable();
    for (i, (page, [w_, r])) in io.iter().enumerate() {
        let _ = write!(line, "{}[{page}, {w_}, {r}]", if i > 0 { ", " } else { "" });
    }
    line.push_str("]}\n");
    let Some(out) = OUT.get() else { return };
    match std::fs::OpenOptions::new()
        .append(true)
        .open(out)
        .and_then(|mut f| f.write_all(line.as_bytes()))
    {
        Ok(()) => {
            WINDOWS_WRITTEN.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => say(&format!("cannot write window {} to {out}: {e}", w.id)),
    }
}

extern "C" fn at_exit(_id: Id, _u: *mut c_void) {
    if let Some(w) = WINDOW.lock().unwrap().as_ref() {
        say(&format!("window {} was never stopped: not written", w.id));
    }
    let n = slots().lock().unwrap().list.len();
    say(&format!(
        "{} windows written, {n} translation blocks seen",
        WINDOWS_WRITTEN.load(Ordering::Relaxed)
    ));
}
