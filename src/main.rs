//! The `nvme-bypass` command; everything is in the library (`src/lib.rs`).

fn main() {
    std::process::exit(nvme_bypass::cli::main());
}
