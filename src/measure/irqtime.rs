//! Whether the kernel accounts interrupt time (CONFIG_IRQ_TIME_ACCOUNTING):
//! with it, /proc/stat's irq and softirq columns are time measured at every
//! interrupt entry and exit; without it, every CPU column is sampled at
//! timer ticks, and an interrupt that comes and goes between two ticks on an
//! otherwise idle CPU is never seen. Then the kernel CPU of an
//! interrupt-driven path is a lower bound (docs/methodology.md, "System-wide
//! CPU").
//!
//! Read from the kernel's build configuration: /boot/config-<release>
//! (where distributions keep it; the test bed's initramfs carries its
//! kernel's) or /proc/config.gz (CONFIG_IKCONFIG_PROC kernels, decompressed
//! with `gzip -dc`). Built in, it can still be off at run time: x86 kernels
//! turn it off with `tsc=noirqtime` on the command line, or when the TSC is
//! found unstable (it is then not in the available clocksources). No
//! /proc/stat column tells: tick sampling also charges a tick that lands in
//! an interrupt or softirq to the irq or softirq column, so nonzero columns
//! appear with and without the option.

use serde::Serialize;

/// What is known of the kernel's interrupt time accounting.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IrqTimeAccounting {
    /// True: on; false: off; None: unknown (no kernel configuration found).
    pub on: Option<bool>,
    /// How that was decided, in words.
    pub how: String,
}

/// CONFIG_IRQ_TIME_ACCOUNTING in the text of a kernel configuration: Some
/// (true) when `=y`; Some(false) when "is not set", or when the text is a
/// configuration without the option (an architecture that lacks it); None
/// when the text is no kernel configuration.
pub fn from_config(text: &str) -> Option<bool> {
    let mut is_config = false;
    for l in text.lines() {
        let l = l.trim();
        if l == "CONFIG_IRQ_TIME_ACCOUNTING=y" {
            return Some(true);
        }
        if l == "# CONFIG_IRQ_TIME_ACCOUNTING is not set" {
            return Some(false);
        }
        is_config |= l.starts_with("CONFIG_");
    }
    is_config.then_some(false)
}

/// Built in (`config`), is it on at run time? Off when the command line
/// says `tsc=noirqtime` or the kernel lists its clocksources without `tsc`
/// (x86 turns irq time off when it marks the TSC unstable).
pub fn decide(config: Option<bool>, cmdline: &str, tsc_listed: Option<bool>, where_: &str) -> IrqTimeAccounting {
    let (on, how) = match config {
        None => (None, "unknown: no kernel configuration (/boot/config-<release>, /proc/config.gz) to read CONFIG_IRQ_TIME_ACCOUNTING from".to_string()),
        Some(false) => (Some(false), format!("off: CONFIG_IRQ_TIME_ACCOUNTING is not set ({where_}); CPU time is sampled at timer ticks")),
        Some(true) if cmdline.split_whitespace().any(|w| w == "tsc=noirqtime") => {
            (Some(false), format!("off: CONFIG_IRQ_TIME_ACCOUNTING=y ({where_}) but the kernel command line has tsc=noirqtime"))
        }
        Some(true) if cfg!(target_arch = "x86_64") && tsc_listed == Some(false) => {
            (Some(false), format!("off: CONFIG_IRQ_TIME_ACCOUNTING=y ({where_}) but the kernel found the TSC unstable, which turns it off"))
        }
        Some(true) => (Some(true), format!("on: CONFIG_IRQ_TIME_ACCOUNTING=y ({where_})")),
    };
    IrqTimeAccounting { on, how }
}

/// This kernel's interrupt time accounting (read once).
pub fn detect() -> IrqTimeAccounting {
    static IT: std::sync::OnceLock<IrqTimeAccounting> = std::sync::OnceLock::new();
    IT.get_or_init(|| {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let boot = format!("/boot/config-{}", release.trim());
        let config = std::fs::read_to_string(&boot)
            .ok()
            .and_then(|t| from_config(&t).map(|c| (c, boot)))
            .or_else(|| {
                let out = std::process::Command::new("gzip").args(["-dc", "/proc/config.gz"]).stderr(std::process::Stdio::null()).output().ok()?;
                from_config(&String::from_utf8_lossy(&out.stdout)).map(|c| (c, "/proc/config.gz".to_string()))
            });
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
        let tsc_listed = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/available_clocksource")
            .ok()
            .map(|s| s.split_whitespace().any(|w| w == "tsc"));
        let (c, w) = match config {
            Some((c, w)) => (Some(c), w),
            None => (None, String::new()),
        };
        decide(c, &cmdline, tsc_listed, &w)
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_is_read_from_a_configuration() {
        assert_eq!(from_config("CONFIG_A=y\nCONFIG_IRQ_TIME_ACCOUNTING=y\n"), Some(true));
        assert_eq!(from_config("CONFIG_A=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\n"), Some(false));
        assert_eq!(from_config("CONFIG_A=y\nCONFIG_HAVE_IRQ_TIME_ACCOUNTING=y\n"), Some(false), "HAVE_ is not the option");
        assert_eq!(from_config(""), None);
        assert_eq!(from_config("garbage"), None);
    }

    #[test]
    fn built_in_can_be_off_at_run_time() {
        let on = decide(Some(true), "quiet", Some(true), "/boot/config-x");
        assert_eq!(on.on, Some(true));
        assert!(on.how.contains("/boot/config-x"), "{}", on.how);
        assert_eq!(decide(Some(true), "quiet tsc=noirqtime", Some(true), "x").on, Some(false));
        assert_eq!(decide(Some(false), "", Some(true), "x").on, Some(false));
        assert_eq!(decide(None, "", None, "").on, None);
        assert_eq!(decide(Some(true), "", None, "x").on, Some(true), "no clocksource list: nothing says off");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(decide(Some(true), "", Some(false), "x").on, Some(false));
        }
    }

    #[test]
    fn this_kernel_gives_an_answer_that_says_how() {
        let d = detect();
        assert!(d.how.starts_with(match d.on {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        }));
    }
}
