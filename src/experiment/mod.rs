//! The experiment: which paths and variants a comparison runs, and the
//! device session around them.

pub mod plan;
pub mod session;
