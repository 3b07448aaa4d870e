//! The subcommands, one file each; shared option groups in [`args`].

pub mod args;
pub mod bench;
pub mod bind;
pub mod compare;
pub mod count_report;
pub mod driver_cost;
pub mod fio;
pub mod idle;
pub mod info;
pub mod reliability_args;
pub mod sweep;
pub mod trace;
