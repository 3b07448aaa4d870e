//! Data integrity: every written block carries a stamp (magic, LBA, seed,
//! generation, CRC-32C of the whole block), and every read block is checked
//! against what the run wrote there. A block written by another path with
//! the same seed verifies too, which is how the test bed cross-checks vfio,
//! passthru and block.
//!
//! Block layout (per logical block, little-endian):
//! `0..8` magic "NVBYPASS", `8..16` LBA, `16..24` seed, `24..32` generation,
//! `32..36` CRC-32C of bytes `0..32` and `36..end`, `36..end` a pattern
//! derived from (seed, LBA, generation).

use crate::backend::{IoQueue, Op};
use crate::engine::job::{ThreadResult, VerifySpec};
use crate::engine::workload::Workload;

/// The magic at the start of every stamped block.
pub const MAGIC: &[u8; 8] = b"NVBYPASS";

/// Fill `block` (one logical block) with the stamp of (`lba`, `seed`, `generation`).
pub fn stamp_block(block: &mut [u8], lba: u64, seed: u64, generation: u64) {
    assert!(block.len() >= 64);
    block[0..8].copy_from_slice(MAGIC);
    block[8..16].copy_from_slice(&lba.to_le_bytes());
    block[16..24].copy_from_slice(&seed.to_le_bytes());
    block[24..32].copy_from_slice(&generation.to_le_bytes());
    let mut x = seed ^ lba.rotate_left(17) ^ generation.rotate_left(43) ^ 0x5555_5555_5555_5555;
    for chunk in block[36..].chunks_mut(8) {
        // xorshift64: cheap, and different for every block and generation.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&block[0..32]), &block[36..]);
    block[32..36].copy_from_slice(&crc.to_le_bytes());
}

/// What a read block held, when it was not what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// No stamp at all (never written by this tool, or overwritten).
    NoStamp,
    /// The CRC does not match the content: the data is corrupt.
    BadCrc { stored: u32, computed: u32 },
    /// A valid stamp of another block (misdirected I/O).
    WrongLba { found: u64 },
    /// A valid stamp written with another seed.
    WrongSeed { found: u64 },
    /// A valid stamp of an older or newer write (lost or reordered write).
    WrongGeneration { found: u64, expected: u64 },
    /// fio's own verify header (`struct verify_header`, magic 0xacca):
    /// data written by fio's `verify=`, whose format is not checked here.
    FioHeader { verify_type: u16 },
}

/// fio's verify header magic (`FIO_HDR_MAGIC`), little-endian at the
/// start of each block fio writes with `verify=`.
const FIO_HDR_MAGIC: u16 = 0xacca;

/// The verify type of fio's verify header at the start of `block`
/// (fio 3.33's `verify.h`: 1 `meta` to 19 `null`), if it holds one.
pub fn fio_header(block: &[u8]) -> Option<u16> {
    let u = |o: usize| Some(u16::from_le_bytes(block.get(o..o + 2)?.try_into().ok()?));
    let (magic, kind) = (u(0)?, u(2)?);
    (magic == FIO_HDR_MAGIC && (1..=19).contains(&kind)).then_some(kind)
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::NoStamp => write!(f, "no verify stamp (block never written with --verify)"),
            Mismatch::BadCrc { stored, computed } => write!(f, "corrupt: crc32c {computed:#010x}, stamp says {stored:#010x}"),
            Mismatch::WrongLba { found } => write!(f, "block carries LBA {found}: misdirected I/O"),
            Mismatch::WrongSeed { found } => write!(f, "block written with seed {found}"),
            Mismatch::WrongGeneration { found, expected } => write!(f, "generation {found}, expected {expected}: lost or stale write"),
            Mismatch::FioHeader { verify_type } => write!(
                f,
                "the block holds fio's own verify header (magic 0xacca, verify type {verify_type}): written by fio with verify=, a format nvme-bypass does not check; verify it with fio, or write the data with nvme-bypass and verify that"
            ),
        }
    }
}

/// Check one block. `generation` is `None` when any generation is acceptable
/// (verifying data written by another run or another path).
pub fn check_block(block: &[u8], lba: u64, seed: u64, generation: Option<u64>) -> Result<(), Mismatch> {
    if &block[0..8] != MAGIC {
        return Err(fio_header(block).map_or(Mismatch::NoStamp, |verify_type| Mismatch::FioHeader { verify_type }));
    }
    let u = |o: usize| u64::from_le_bytes(block[o..o + 8].try_into().unwrap());
    let stored = u32::from_le_bytes(block[32..36].try_into().unwrap());
    let computed = crc32c::crc32c_append(crc32c::crc32c(&block[0..32]), &block[36..]);
    if stored != computed {
        return Err(Mismatch::BadCrc { stored, computed });
    }
    if u(8) != lba {
        return Err(Mismatch::WrongLba { found: u(8) });
    }
    if u(16) != seed {
        return Err(Mismatch::WrongSeed { found: u(16) });
    }
    if let Some(g) = generation {
        if u(24) != g {
            return Err(Mismatch::WrongGeneration { found: u(24), expected: g });
        }
    }
    Ok(())
}

/// Verification state of one thread, with one hook on each side of the
/// phase loop: [`Verifier::on_submit`] before an I/O is placed,
/// [`Verifier::on_complete`] when it is reaped, [`Verifier::release`] when
/// it will not run after all.
pub(crate) struct Verifier {
    seed: u64,
    only: bool,
    /// Generation last written per unit (0 = never written by this run).
    gens: Vec<u64>,
    /// Units with an I/O in flight (no two I/Os on one unit at once).
    busy: Vec<bool>,
    /// The generation each slot's write stamps.
    slot_gen: Vec<u64>,
    scratch: Vec<u8>,
    lba_size: usize,
}

impl Verifier {
    /// `units` I/O units of `bs` bytes, a queue of `depth` slots.
    pub fn new(v: VerifySpec, units: u64, bs: usize, lba_size: usize, depth: usize) -> Self {
        Verifier { seed: v.seed, only: v.only, gens: vec![0; units as usize], busy: vec![false; units as usize], slot_gen: vec![0; depth], scratch: vec![0; bs], lba_size }
    }

    /// Only checking what is there (no prefill, no generations).
    pub fn only(&self) -> bool {
        self.only
    }

    /// The units this run wrote, in order.
    pub fn written(&self) -> Vec<u64> {
        (0..self.gens.len() as u64).filter(|&u| self.gens[u as usize] > 0).collect()
    }

    /// Submit side: `op` on `unit` is about to go out in `slot`. False
    /// when the unit has an I/O in flight: the expected content of a read
    /// must not depend on completion order, so the I/O waits for that one
    /// to complete (fio's `serialize_overlap`), keeping the pattern's
    /// offsets as drawn. A write's buffer is stamped with the unit's next
    /// generation.
    pub fn on_submit(&mut self, q: &mut dyn IoQueue, wl: &Workload, slot: u32, op: Op, unit: u64) -> bool {
        if self.busy[unit as usize] {
            return false;
        }
        self.busy[unit as usize] = true;
        if op == Op::Write {
            let g = self.gens[unit as usize] + 1;
            self.slot_gen[slot as usize] = g;
            let lba0 = wl.lba_of(unit);
            for (i, blk) in self.scratch.chunks_mut(self.lba_size).enumerate() {
                stamp_block(blk, lba0 + i as u64, self.seed, g);
            }
            q.buf_write(slot, 0, &self.scratch);
        }
        true
    }

    /// The I/O on `unit` will not run (not accepted, or lost for good).
    pub fn release(&mut self, unit: u64) {
        self.busy[unit as usize] = false;
    }

    /// Reap side: `op` on `unit` in `slot` completed (`ok`: successfully).
    /// A write's generation becomes the unit's; a read's blocks are checked.
    pub fn on_complete(&mut self, q: &mut dyn IoQueue, slot: u32, op: Op, unit: u64, ok: bool, wl: &Workload, res: &mut ThreadResult) {
        self.busy[unit as usize] = false;
        if !ok {
            return;
        }
        match op {
            Op::Write => self.gens[unit as usize] = self.slot_gen[slot as usize],
            Op::Read => self.check_read(q, slot, wl.lba_of(unit), unit, res),
            Op::Flush => {}
        }
    }

    fn check_read(&mut self, q: &mut dyn IoQueue, slot: u32, lba0: u64, unit: u64, res: &mut ThreadResult) {
        q.buf_read(slot, 0, &mut self.scratch);
        let expected = if self.only { None } else { Some(self.gens[unit as usize]) };
        for (i, blk) in self.scratch.chunks(self.lba_size).enumerate() {
            let lba = lba0 + i as u64;
            // A unit never written by this run (and no prefill): nothing to expect.
            if expected == Some(0) {
                continue;
            }
            res.verified_blocks += 1;
            if let Err(m) = check_block(blk, lba, self.seed, expected) {
                res.mismatches += 1;
                if res.first_mismatch.is_none() {
                    res.first_mismatch = Some(format!("LBA {lba}: {m}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_then_check() {
        for size in [512usize, 4096] {
            let mut b = vec![0u8; size];
            stamp_block(&mut b, 77, 5, 2);
            assert_eq!(check_block(&b, 77, 5, Some(2)), Ok(()));
            assert_eq!(check_block(&b, 77, 5, None), Ok(()));
            assert_eq!(check_block(&b, 78, 5, Some(2)), Err(Mismatch::WrongLba { found: 77 }));
            assert_eq!(check_block(&b, 77, 6, Some(2)), Err(Mismatch::WrongSeed { found: 5 }));
            assert_eq!(check_block(&b, 77, 5, Some(3)), Err(Mismatch::WrongGeneration { found: 2, expected: 3 }));
        }
    }

    #[test]
    fn a_corrupted_block_is_detected() {
        let mut b = vec![0u8; 4096];
        stamp_block(&mut b, 1, 1, 1);
        for pos in [40usize, 1000, 4095, 9, 30] {
            let mut c = b.clone();
            c[pos] ^= 0x01; // one flipped bit anywhere
            assert!(check_block(&c, 1, 1, Some(1)).is_err(), "flip at {pos} undetected");
        }
        assert_eq!(check_block(&vec![0u8; 512], 1, 1, None), Err(Mismatch::NoStamp));
    }

    #[test]
    fn a_block_fio_wrote_with_its_verify_header_is_named_as_fios() {
        // fio 3.33's verify=crc32c header: magic 0xacca, verify type 5
        // (VERIFY_CRC32C), little-endian.
        let mut b = vec![0u8; 512];
        b[..4].copy_from_slice(&[0xca, 0xac, 5, 0]);
        assert_eq!(fio_header(&b), Some(5));
        assert_eq!(check_block(&b, 0, 1, None), Err(Mismatch::FioHeader { verify_type: 5 }));
        assert!(Mismatch::FioHeader { verify_type: 5 }.to_string().contains("verify it with fio"));
        b[2] = 0; // VERIFY_NONE is no header fio writes
        assert_eq!(check_block(&b, 0, 1, None), Err(Mismatch::NoStamp));
        assert_eq!(fio_header(&[0xca]), None);
    }

    #[test]
    fn generations_differ_in_content() {
        let (mut a, mut b) = (vec![0u8; 512], vec![0u8; 512]);
        stamp_block(&mut a, 1, 1, 1);
        stamp_block(&mut b, 1, 1, 2);
        assert_ne!(a[36..], b[36..]);
    }
}
