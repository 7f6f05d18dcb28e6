//! `cargo xtask soak [--minutes N]`: the reliability suites of `rbolt-reliability` at soak
//! size (10,000 kills, 100,000+ crash images, a million random file mutations, fuzzing for
//! `N` minutes), then the model-based API test of `rbolt` for `N` minutes, in release, then
//! their summary lines once more at the end.

use anyhow::{Context, Result, bail};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// The summary lines the suites print: `name: key=value ...`.
fn is_summary(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(name, rest)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            && rest.split(' ').next().is_some_and(|w| w.contains('='))
    })
}

/// Runs `cargo test <selection>` in release at soak size (the test tier `soak`), echoing its stderr and keeping
/// its summary lines.
fn run_suite(
    cargo: &str,
    selection: &[&str],
    minutes: &str,
    summaries: &mut Vec<String>,
) -> Result<std::process::ExitStatus> {
    let mut child = Command::new(cargo)
        .arg("test")
        .args(selection)
        .args(["--release", "--", "--nocapture", "--test-threads=2"])
        .env("RBOLT_TIER", "soak")
        .env("RBOLT_SOAK_MINUTES", minutes)
        .env("RBOLT_API_MODEL_MINUTES", minutes)
        .stderr(Stdio::piped())
        .spawn()
        .context("running cargo test")?;
    let stderr = child.stderr.take().context("piped stderr")?;
    let mut echo = std::io::stderr().lock();
    for line in BufReader::new(stderr).lines() {
        let line = line.context("reading cargo test's output")?;
        writeln!(echo, "{line}")?;
        if is_summary(&line) {
            summaries.push(line);
        }
    }
    child.wait().context("waiting for cargo test")
}

/// `cargo xtask soak`, as typed.
#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// How long the fuzzing and the model-based API test each run, in minutes.
    #[arg(long, value_name = "N", default_value_t = 5.0)]
    minutes: f64,
}

/// Runs the soak.
pub fn soak(args: &SoakArgs) -> Result<()> {
    let minutes = args.minutes.to_string();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut summaries = Vec::new();
    let suites: [(&str, &[&str]); 2] = [
        ("the reliability suites", &["-p", "rbolt-reliability"]),
        // The model-based API test (issue 12): seed after seed for `minutes`.
        (
            "the model-based API test",
            &["-p", "rbolt", "--test", "it", "api_model"],
        ),
    ];
    let mut failed = Vec::new();
    for (name, selection) in suites {
        let status = run_suite(&cargo, selection, &minutes, &mut summaries)
            .with_context(|| format!("running {name}"))?;
        if !status.success() {
            failed.push(format!("{name}: {status}"));
        }
    }
    let mut echo = std::io::stderr().lock();
    writeln!(echo, "\nsoak summary:")?;
    for line in &summaries {
        writeln!(echo, "{line}")?;
    }
    if !failed.is_empty() {
        bail!("the soak failed: {}", failed.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_summary;

    #[test]
    fn summary_lines_are_recognised() {
        assert!(is_summary("power-loss: seeds=2 images=16"));
        assert!(is_summary("fuzz: open_bytes_inputs=1"));
        assert!(is_summary("api-model: seeds=3 first_seed=7 cases=1500"));
        assert!(!is_summary("test power_loss ... ok"));
        assert!(!is_summary("warning: unused variable: x"));
        assert!(!is_summary("error: test failed, to rerun pass `-p x`"));
    }
}
