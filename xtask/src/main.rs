//! `cargo xtask`: project automation. `cargo xtask bench` runs the benchmark suite;
//! `cargo xtask soak` runs the reliability suites at soak size.

mod bench;
mod soak;

use anyhow::Result;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("bench") => bench::main(&args[1..]),
        Some("soak") => soak::soak(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask bench [-- criterion args] | soak [--minutes N]");
            std::process::exit(2);
        }
    }
}
