//! `cargo xtask`: project automation. `cargo xtask bench` runs the benchmark suite;
//! `cargo xtask soak` runs the reliability suites at soak size; `cargo xtask mutants` runs
//! mutation testing over the lower crates. xtask drives cargo and the
//! benchmark binaries as child processes; it does not link rbolt. Its tests hold the tidy
//! test (`tidy.rs`), which keeps the house rules over the whole repository.

mod bench;
mod mutants;
mod soak;
#[cfg(test)]
mod tidy;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Project automation.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the criterion micro benchmarks, then rbolt against its peers, and writes
    /// target/bench-report/summary.md and target/bench-report/*.svg.
    Bench(bench::BenchArgs),
    /// Runs the reliability suites at soak size.
    Soak(soak::SoakArgs),
    /// Mutation testing of the lower crates (cargo-mutants), each mutant against its crate's
    /// own tests; fails on a missed mutant not listed in xtask/mutants-equivalent.txt.
    Mutants(mutants::MutantsArgs),
}

fn main() -> Result<()> {
    let raw: Vec<String> = std::env::args().skip(2).collect();
    match Cli::parse().command {
        Command::Bench(args) => bench::main(args, &raw),
        Command::Soak(args) => soak::soak(&args),
        Command::Mutants(args) => mutants::mutants(&args),
    }
}
