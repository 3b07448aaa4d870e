//! Reports: text for people in fio's layout ([`text()`]), and JSON shaped
//! like fio's `--output-format=json` ([`fio_json()`]), both from one
//! [`RunSummary`]; the number formatters every table shares ([`fmt`]).

pub mod fio_json;
pub mod fio_layout;
pub mod fmt;
pub mod summary;
pub mod text;

pub use fio_json::{fio_json, unix_ms};
pub use summary::{CpuSummary, DirSummary, RunSummary, SystemSummary};
pub use text::text;

/// Output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Text for people.
    Normal,
    /// JSON: bench's shaped like fio's --output-format=json (fio's tools read it); compare's,
    /// sweep's and trace's their own (compare and sweep: docs/methodology.md).
    Json,
}
