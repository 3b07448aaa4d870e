//! What is measured, and how: the clock, latency histograms and CPU time,
//! core-to-core latency and core sharing, which device a name is, and the
//! emulator's exact instruction counts by layer, and the markers that
//! open and close a counting window; whether the kernel accounts
//! interrupt time.

pub mod c2c;
pub mod clock;
pub mod cpu;
pub mod insn;
pub mod irqtime;
pub mod marker;
pub mod spread;
pub mod stats;
pub mod topology;
