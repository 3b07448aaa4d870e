//! What is measured, and how: the clock, latency histograms and CPU time,
//! core-to-core latency and core sharing, which device a name is, and the
//! emulator's exact instruction counts by layer.

pub mod c2c;
pub mod clock;
pub mod cpu;
pub mod insn;
pub mod stats;
pub mod topology;
