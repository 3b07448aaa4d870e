//! Numbers for people: the formatters every report and table uses, so the
//! same figure reads the same in bench, compare and sweep.

use std::time::Duration;

/// A count or rate with an SI suffix: 1234567 -> "1.23M", 45600 -> "45.6k",
/// 2.5e9 -> "2.50G", 512 -> "512".
pub fn si(x: f64) -> String {
    if x < 0.0 {
        // Signed: a figure less a background can be below zero; one that
        // rounds to 0 is 0.
        let s = si(-x);
        return if s == "0" { s } else { format!("-{s}") };
    }
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// fio's `enum n2s_unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    None,
    Byte,
    BytePerSec,
}

/// fio's `num2str` (lib/num2str.c): `num` x `base` shown in at most
/// `maxlen` digits (the '.' counted), divided by 1000 or 1024 (`pow2`) with
/// k/M/G or Ki/Mi/Gi prefixes until it fits, the remainder as decimals,
/// rounded as fio rounds ("carry rounding error" included).
pub fn num2str(num: u64, maxlen: usize, base: u64, pow2: bool, unit: Unit) -> String {
    let prefixes: [&str; 6] = if pow2 { ["", "Ki", "Mi", "Gi", "Ti", "Pi"] } else { ["", "k", "M", "G", "T", "P"] };
    let unit_s = match unit {
        Unit::None => "",
        Unit::Byte => "B",
        Unit::BytePerSec => "B/s",
    };
    let thousand: u64 = if pow2 { 1024 } else { 1000 };
    let mut post = 0usize;
    let mut b = base;
    while b > 1 {
        b /= thousand;
        post += 1;
    }
    let mut num = num;
    let mut modulo: Option<u64> = None;
    let mut carry = false;
    while post < prefixes.len() {
        if num.to_string().len() <= maxlen {
            break;
        }
        let m = num % thousand;
        num /= thousand;
        carry = m >= thousand / 2;
        modulo = Some(m);
        post += 1;
    }
    let post = post.min(prefixes.len() - 1);
    let Some(modulo) = modulo else {
        return format!("{num}{}{unit_s}", prefixes[post]);
    };
    let digits = num.to_string().len();
    if maxlen.saturating_sub(digits) <= 1 {
        if carry {
            num += 1;
        }
        return format!("{num}{}{unit_s}", prefixes[post]);
    }
    let decimals = maxlen - digits - 1;
    let frac = format!("{:.*}", decimals, modulo as f64 / thousand as f64);
    if frac.starts_with('1') {
        num += 1;
    }
    format!("{num}.{}{}{unit_s}", &frac[2..], prefixes[post])
}

/// Bandwidth in binary and decimal units, as fio prints it:
/// "1.50GiB/s (1.61GB/s)", "390.6MiB/s (409.6MB/s)".
pub fn bw(bytes_per_s: f64) -> String {
    let mib = bytes_per_s / (1 << 20) as f64;
    if mib >= 1024.0 {
        format!("{:.2}GiB/s ({:.2}GB/s)", mib / 1024.0, bytes_per_s / 1e9)
    } else {
        format!("{mib:.1}MiB/s ({:.1}MB/s)", bytes_per_s / 1e6)
    }
}

/// Nanoseconds as microseconds for a table column: one decimal below
/// 100 us, none above.
pub fn us(ns: u64) -> String {
    if ns >= 100_000 {
        format!("{:.0}", ns as f64 / 1000.0)
    } else {
        format!("{:.1}", ns as f64 / 1000.0)
    }
}

/// A block size as the command line takes it: "4k", "128k", "1m", or bytes.
pub fn size_label(b: u64) -> String {
    if b > 0 && b.trailing_zeros() >= 20 {
        format!("{}m", b >> 20)
    } else if b > 0 && b.trailing_zeros() >= 10 {
        format!("{}k", b >> 10)
    } else {
        b.to_string()
    }
}

/// A duration in seconds as the command line takes it: "5s", "0.5s".
pub fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// A list as the command line takes it: "1,4,16".
pub fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

/// The local time as fio prints it (ctime without the newline):
/// `Wed Dec  2 04:35:13 2026`.
pub fn fio_date(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (wday, mon, mday, h, m, s, y) = crate::sys::localtime(secs);
    format!("{} {} {mday:>2} {h:02}:{m:02}:{s:02} {y}", DAYS[wday], MONTHS[mon])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_the_same_everywhere() {
        assert_eq!(si(512.0), "512");
        assert_eq!(si(45_600.0), "45.6k");
        assert_eq!(si(1_234_567.0), "1.23M");
        assert_eq!(si(2.5e9), "2.50G");
        assert_eq!(si(-120.0), "-120");
        assert_eq!(si(-45_600.0), "-45.6k");
        assert_eq!(si(-0.2), "0");
        assert_eq!(bw(400e6), "381.5MiB/s (400.0MB/s)");
        assert_eq!(bw(1.5 * (1u64 << 30) as f64), "1.50GiB/s (1.61GB/s)");
        assert_eq!(us(12_345), "12.3");
        assert_eq!(us(123_456), "123");
        assert_eq!(size_label(4096), "4k");
        assert_eq!(size_label(128 << 10), "128k");
        assert_eq!(size_label(1 << 20), "1m");
        assert_eq!(size_label(512), "512");
        assert_eq!(size_label(0), "0");
        assert_eq!(secs(Duration::from_millis(500)), "0.5s");
        assert_eq!(secs(Duration::from_secs(5)), "5s");
        assert_eq!(join(&[1, 4, 16]), "1,4,16");
    }
}
