//! What is measured, and how: the clock, latency histograms and CPU time,
//! core-to-core latency and core sharing, and which device a name is.

pub mod c2c;
pub mod clock;
pub mod cpu;
pub mod stats;
pub mod topology;
