//! Parsers for option values: sizes, durations, CPU lists and simulator
//! fault specifications. Pure functions with no dependency on the rest of
//! the crate, so the fuzz targets (tests/fuzz) compile this file as it is.
//! Every input gives a value or an error message saying how to write it;
//! none panics or allocates without bound (the fuzz targets check both).

use std::time::Duration;

/// Parse "4k", "1M", "512", "2g" (powers of 1024, as fio does).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let m = match s[i..].to_ascii_lowercase().trim_end_matches("ib").trim_end_matches('b') {
                "" => 1,
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                "t" => 1 << 40,
                other => return Err(format!("unknown size suffix '{other}' in '{s}'; use k, m, g or t")),
            };
            (&s[..i], m)
        }
        None => (s, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| format!("'{s}' is not a size; write e.g. 4k, 128k, 1g"))?;
    n.checked_mul(mult).ok_or_else(|| format!("size '{s}' is too large"))
}

/// Parse "5", "5s", "500ms", "2m".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let err = || format!("'{s}' is not a duration; write e.g. 5, 5s, 500ms, 2m");
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| err())?;
    if !(n >= 0.0 && n.is_finite()) {
        return Err(err());
    }
    let secs = match unit {
        "s" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(err()),
    };
    // "99999999999999999999" is a finite number of seconds no Duration holds.
    Duration::try_from_secs_f64(secs).map_err(|_| format!("'{s}' is too long a duration"))
}

/// Most CPUs a list may name (Linux's NR_CPUS maximum).
pub const MAX_CPUS: usize = 8192;

/// Parse "0,1" or "0-3" or "0-1,4" into CPU numbers below [`MAX_CPUS`].
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut v = vec![];
    for part in s.split(',') {
        let part = part.trim();
        let err = || format!("'{part}' is not a CPU list item; write e.g. 0,1 or 0-3");
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>().map_err(|_| err())?, b.trim().parse::<usize>().map_err(|_| err())?),
            None => {
                let a = part.parse::<usize>().map_err(|_| err())?;
                (a, a)
            }
        };
        if a > b {
            return Err(err());
        }
        // Checked before expanding: "0-99999999999" must not allocate.
        if b >= MAX_CPUS || v.len() + (b - a) >= MAX_CPUS {
            return Err(format!("CPU list '{s}' names CPUs beyond {}; no machine has that many", MAX_CPUS - 1));
        }
        v.extend(a..=b);
    }
    if v.is_empty() {
        return Err("empty CPU list".into());
    }
    Ok(v)
}

/// One fault for the simulated controller (`--sim-fault`), see
/// `nvme_sim::Faults` for what each does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimFault {
    /// Never post the completion of every Nth I/O command.
    DropEvery(u32),
    /// Delay every I/O completion by this many microseconds.
    DelayUs(u32),
    /// Complete every Nth I/O command with the status of `Status`/`Dnr`.
    StatusEvery(u32),
    /// Status code type and status code for `StatusEvery`.
    Status { sct: u8, sc: u8 },
    /// Set Do Not Retry on injected statuses.
    Dnr(bool),
    /// Report controller fatal status (CSTS.CFS) after N more I/O commands.
    FatalAfter(u32),
    /// Stop responding after N more I/O commands.
    HangAfter(u32),
    /// Hold the completion of every Nth I/O command until aborted.
    StallEvery(u32),
    /// Answer every Abort with Abort Command Limit Exceeded.
    RefuseAbort(bool),
    /// Post every Nth completion with a CID never submitted.
    CorruptCidEvery(u32),
    /// Post every Nth completion naming another submission queue.
    BadSqidEvery(u32),
    /// Flip a bit in the data of every Nth Read.
    CorruptDataEvery(u32),
    /// After N more I/O commands, pause processing (CSTS.PP, a firmware
    /// activation) for MS milliseconds.
    Pause { after: u32, ms: u32 },
}

/// The keys `--sim-fault` accepts, for messages.
pub const SIM_FAULT_KEYS: &str = "drop-every=N, delay-us=N, status-every=N, status=SCT:SC, dnr=0|1, fatal-after=N, hang-after=N, stall-every=N, refuse-abort=0|1, corrupt-cid-every=N, bad-sqid-every=N, corrupt-data-every=N, pause=N:MS";

fn number(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parse "key=value[,key=value...]" (see [`SIM_FAULT_KEYS`]).
pub fn parse_sim_faults(s: &str) -> Result<Vec<SimFault>, String> {
    let mut out = vec![];
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = item.split_once('=').ok_or_else(|| format!("'{item}' is not key=value; --sim-fault takes {SIM_FAULT_KEYS}"))?;
        let (key, value) = (key.trim(), value.trim());
        let bad = || format!("'{value}' is not a valid value for {key} in --sim-fault '{item}'");
        let n = || number(value).ok_or_else(bad);
        let every = || n().and_then(|n| if n == 0 { Err(format!("{key}=0 injects nothing; use 1 or more")) } else { Ok(n) });
        out.push(match key {
            "drop-every" => SimFault::DropEvery(every()?),
            "delay-us" => SimFault::DelayUs(n()?.min(10_000_000)),
            "status-every" => SimFault::StatusEvery(every()?),
            "status" => {
                let (sct, sc) = value.split_once(':').ok_or_else(bad)?;
                let (sct, sc) = (number(sct).ok_or_else(bad)?, number(sc).ok_or_else(bad)?);
                if sct > 7 || sc > 0xff || (sct == 0 && sc == 0) {
                    return Err(format!("status={value}: SCT is 0-7 and SC 0-0xff, and 0:0 is success (e.g. 0:0x06 Internal Error, 2:0x81 Unrecovered Read Error)"));
                }
                SimFault::Status { sct: sct as u8, sc: sc as u8 }
            }
            "dnr" | "refuse-abort" => {
                let on = match value {
                    "1" | "true" | "yes" => true,
                    "0" | "false" | "no" => false,
                    _ => return Err(bad()),
                };
                if key == "dnr" { SimFault::Dnr(on) } else { SimFault::RefuseAbort(on) }
            }
            "fatal-after" => SimFault::FatalAfter(every()?),
            "hang-after" => SimFault::HangAfter(every()?),
            "stall-every" => SimFault::StallEvery(every()?),
            "corrupt-cid-every" => SimFault::CorruptCidEvery(every()?),
            "bad-sqid-every" => SimFault::BadSqidEvery(every()?),
            "corrupt-data-every" => SimFault::CorruptDataEvery(every()?),
            "pause" => {
                let (after, ms) = value.split_once(':').ok_or_else(|| format!("pause={value}: give pause=N:MS (after N more I/O commands, pause MS milliseconds)"))?;
                match (number(after), number(ms)) {
                    (Some(after), Some(ms)) if after > 0 && ms > 0 => SimFault::Pause { after, ms: ms.min(600_000) },
                    _ => return Err(format!("pause={value}: give pause=N:MS with N and MS at least 1 (after N more I/O commands, pause MS milliseconds)")),
                }
            }
            _ => return Err(format!("unknown fault '{key}'; --sim-fault takes {SIM_FAULT_KEYS}")),
        });
    }
    if out.is_empty() {
        return Err(format!("--sim-fault needs at least one of {SIM_FAULT_KEYS}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("4x").is_err());
        assert!(parse_size("99999999999t").is_err());
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        // Found by the fuzz target: Duration::from_secs_f64 panics on these.
        assert!(parse_duration("99999999999999999999").unwrap_err().contains("too long"));
        assert!(parse_duration("9999999999999999h").unwrap_err().contains("too long"));
        assert!(parse_duration("1e3").is_err(), "no exponents: 'e' starts a unit");
        assert!(parse_duration("NaN").is_err());
    }

    #[test]
    fn cpu_lists_are_bounded() {
        assert_eq!(parse_cpu_list("0-2,5"), Ok(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpu_list(" 1 - 2 "), Ok(vec![1, 2]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("").is_err());
        // Found by the fuzz target: this used to allocate 10^11 entries.
        assert!(parse_cpu_list("0-99999999999").unwrap_err().contains("no machine"));
        assert!(parse_cpu_list(&"0-8000,".repeat(3)).is_err());
    }

    #[test]
    fn sim_faults() {
        assert_eq!(
            parse_sim_faults("status-every=10, status=0:0x06,dnr=1"),
            Ok(vec![SimFault::StatusEvery(10), SimFault::Status { sct: 0, sc: 6 }, SimFault::Dnr(true)])
        );
        assert_eq!(parse_sim_faults("hang-after=100"), Ok(vec![SimFault::HangAfter(100)]));
        assert_eq!(parse_sim_faults("pause=500:1000"), Ok(vec![SimFault::Pause { after: 500, ms: 1000 }]));
        assert!(parse_sim_faults("pause=500").unwrap_err().contains("pause=N:MS"));
        assert!(parse_sim_faults("pause=0:10").unwrap_err().contains("at least 1"));
        assert!(parse_sim_faults("drop-every=0").unwrap_err().contains("injects nothing"));
        assert!(parse_sim_faults("status=0:0").is_err());
        assert!(parse_sim_faults("status=9:1").is_err());
        assert!(parse_sim_faults("explode=1").unwrap_err().contains("unknown fault"));
        assert!(parse_sim_faults("drop-every").unwrap_err().contains("key=value"));
        assert!(parse_sim_faults(",").is_err());
    }
}
