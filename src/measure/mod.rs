//! What is measured, and how: the clock, latency histograms and CPU time,
//! core-to-core latency and core sharing, which device a name is, and the
//! markers of the test bed's instruction-counting plugin.

pub mod c2c;
pub mod clock;
pub mod cpu;
pub mod marker;
pub mod stats;
pub mod topology;
