//! Identify Controller / Identify Namespace pages as a device returns them
//! (NVMe 1.4c §5.15.2): any 4096 bytes must parse, and everything the
//! driver derives from them (MDTS in bytes, block size, capacity, the
//! nvme-cli listing, the round trip) must not panic or overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvme_spec::identify::{IdentifyController, IdentifyNamespace, IDENTIFY_SIZE};

fuzz_target!(|data: &[u8]| {
    let mut page = [0u8; IDENTIFY_SIZE];
    let n = data.len().min(IDENTIFY_SIZE);
    page[..n].copy_from_slice(&data[..n]);

    let c = IdentifyController::parse(&page);
    for mps in [4096usize, 8192, 65536] {
        let _ = c.max_transfer_bytes(mps);
    }
    let _ = (c.supports_shadow_doorbells(), c.supports_write_zeroes(), c.supports_dsm());
    let _ = c.nvme_cli_fields();
    // What we write back parses to the same thing.
    assert_eq!(IdentifyController::parse(&c.to_bytes()), c);

    let ns = IdentifyNamespace::parse(&page);
    let size = ns.lba_size();
    assert!(size == 0 || size.is_power_of_two());
    let _ = (ns.size_bytes(), ns.is_inactive(), ns.current_format(), ns.nvme_cli_fields());
    assert_eq!(IdentifyNamespace::parse(&ns.to_bytes()), ns);
});
