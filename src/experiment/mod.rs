//! The experiment: which paths and variants a comparison runs, and the
//! device session around them, and the rounds of a repeated comparison.

pub mod handback;
pub mod plan;
pub mod repeat;
pub mod session;
