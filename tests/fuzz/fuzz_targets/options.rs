//! Option values as a user types them (--bs, --size, --runtime,
//! --io-timeout, --cpus, --sim-fault): the parsers of src/cli/parse.rs, compiled
//! here as they are. Any string gives a value or an error, never a panic or
//! an unbounded allocation, and values round-trip where they can.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../../src/cli/parse.rs"]
#[allow(dead_code)]
mod parse;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(n) = parse::parse_size(s) {
        assert_eq!(parse::parse_size(&n.to_string()), Ok(n));
    }
    let _ = parse::parse_duration(s);
    if let Ok(v) = parse::parse_cpu_list(s) {
        assert!(!v.is_empty() && v.len() <= parse::MAX_CPUS && v.iter().all(|&c| c < parse::MAX_CPUS));
    }
    if let Ok(f) = parse::parse_sim_faults(s) {
        assert!(!f.is_empty());
    }
});
