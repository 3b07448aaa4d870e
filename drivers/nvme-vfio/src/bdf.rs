//! PCI addresses ("BDF": bus, device, function, with the PCI domain first),
//! as sysfs names them: `0000:01:00.0`.

use std::fmt;
use std::str::FromStr;

/// A PCI function's address: `domain:bus:device.function`, e.g. `0000:01:00.0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bdf {
    /// PCI segment (domain), 16 bits.
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

/// A string that is not a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{given}' is not a PCI address ({why}); write it as sysfs and lspci -D do: domain:bus:device.function, e.g. 0000:01:00.0 (`lspci -D -d ::0108` lists NVMe controllers)")]
pub struct BdfError {
    /// What the user wrote.
    pub given: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl Bdf {
    /// Parse `0000:01:00.0`, or the short form `01:00.0` (domain 0000) that
    /// plain `lspci` prints. Hex digits may be upper or lower case.
    pub fn parse(s: &str) -> Result<Bdf, BdfError> {
        let err = |why| BdfError { given: s.to_string(), why };
        let t = s.trim();
        let (rest, func) = t.rsplit_once('.').ok_or_else(|| err("no '.' before the function number"))?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0000", *b, *v),
            _ => return Err(err("expected domain:bus:device.function")),
        };
        let hex = |field: &str, max_digits: usize, what: &'static str| -> Result<u32, BdfError> {
            if field.is_empty() || field.len() > max_digits || !field.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(err(what));
            }
            Ok(u32::from_str_radix(field, 16).expect("checked hex digits"))
        };
        let domain = hex(domain, 4, "the domain is 1-4 hex digits")?;
        let bus = hex(bus, 2, "the bus is 1-2 hex digits")?;
        let device = hex(device, 2, "the device is 1-2 hex digits")?;
        if device > 0x1f {
            return Err(err("the device number is at most 1f"));
        }
        if func.len() != 1 || !matches!(func.as_bytes()[0], b'0'..=b'7') {
            return Err(err("the function is one digit 0-7"));
        }
        Ok(Bdf { domain: domain as u16, bus: bus as u8, device: device as u8, function: func.as_bytes()[0] - b'0' })
    }
}

impl FromStr for Bdf {
    type Err = BdfError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Bdf::parse(s)
    }
}

impl fmt::Display for Bdf {
    /// The sysfs spelling: `0000:01:00.0`, lower-case hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{}", self.domain, self.bus, self.device, self.function)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_and_short_forms() {
        let b = Bdf::parse("0000:01:00.0").unwrap();
        assert_eq!(b, Bdf { domain: 0, bus: 1, device: 0, function: 0 });
        assert_eq!(b.to_string(), "0000:01:00.0");
        assert_eq!(Bdf::parse("01:00.0").unwrap(), b, "short form means domain 0000");
        let c: Bdf = "ABCD:Fe:1f.7".parse().unwrap();
        assert_eq!(c.to_string(), "abcd:fe:1f.7");
        assert_eq!(Bdf::parse(" 0000:00:01.0\n").unwrap().to_string(), "0000:00:01.0");
    }

    #[test]
    fn rejects_malformed_addresses_naming_the_expected_form() {
        for bad in [
            "",
            "0000:01:00",
            "0000:01:00.8",
            "0000:01:20.0",
            "00000:01:00.0",
            "0000:001:00.0",
            "0000:0g:00.0",
            "1:2:3:4.0",
            "/dev/nvme0n1",
            "0000:01:00.01",
        ] {
            let e = Bdf::parse(bad).unwrap_err();
            assert!(e.to_string().contains("0000:01:00.0"), "{bad}: {e}");
            assert_eq!(e.given, bad);
        }
    }
}
