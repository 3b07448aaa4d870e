//! The fuzzer is the controller: register values over time, Identify data,
//! and every completion (whether, when, which CID and SQ id, status,
//! phase), stray and repeated completions and EventIdx values come from the
//! input, decoded by `arbitrary` into a Scenario. The driver runs bring-up,
//! Identify, I/O queue creation, reads and writes, Abort, reset, deletion
//! and shutdown against it; the device checks every address it is given
//! against the driver's live allocations and the buffers handed back (see
//! drivers/nvme-driver/tests/support/hostile.rs for the properties).
#![no_main]

#[path = "../../../drivers/nvme-driver/tests/support/hostile.rs"]
mod hostile;

libfuzzer_sys::fuzz_target!(|s: hostile::Scenario| {
    hostile::run(&s);
});
