//! `cargo xtask`: project automation. `cargo xtask bench` runs the benchmark suite;
//! `cargo xtask soak` runs the reliability suites at soak size.

mod soak;

use anyhow::{Context, Result, bail};
use std::process::Command;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("bench") => bench(&args[1..]),
        Some("soak") => soak::soak(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask bench [-- criterion args] | soak [--minutes N]");
            std::process::exit(2);
        }
    }
}

/// Runs the criterion micro benchmarks of every crate that has them.
fn bench(extra: &[String]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["bench", "--workspace", "--benches", "--"])
        .args(extra)
        .status()
        .context("running cargo bench")?;
    if !status.success() {
        bail!("cargo bench failed: {status}");
    }
    Ok(())
}
