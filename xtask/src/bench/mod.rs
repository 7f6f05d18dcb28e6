//! `cargo xtask bench`: the criterion micro benchmarks of every crate, then the workload
//! comparison of rbolt with its peers (`benches/compare`), then one report in
//! `target/bench-report/`: `summary.md`, one SVG chart per workload family, and the raw JSON.

mod chart;
mod compare;
mod machine;
mod micro;
mod report;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime};

const USAGE: &str = "\
usage: cargo xtask bench [OPTIONS] [-- CRITERION_ARGS]

Runs the criterion micro benchmarks, then rbolt against its peers, and writes
target/bench-report/summary.md and target/bench-report/*.svg.

options:
  --quick                 smoke run: N = 100,000, 1 s read-write phase, micro benchmarks
                          skipped unless `--only micro` (under 2 minutes once built)
  --n N                   keys per workload (default 1,000,000)
  --engines A,B,...       engines to compare (default: all; rbolt is always run)
                          known: rbolt, lmdb, redb, sled, jammdb, bbolt-rs
  --only micro|compare    run one half only
  --rw-secs SECS          length of the read-write phase (default 5, --quick 1)
  --repeat R              run every engine R times, taking turns (default 1); the report
                          shows each cell's median and its min-max, ratios of medians
  --timeout SECS          give up on an engine run after this long (default 1200, --quick 300)
  --replot                rewrite summary.md and the charts from the last run's compare.json
                          and criterion's latest results; run nothing
  --save-baseline NAME    passed to criterion: save the micro results as NAME
  --baseline NAME         passed to criterion: compare the micro results with NAME
  -h, --help              this text";

/// Every engine the comparison crate knows, rbolt first; the others are cargo features of
/// `benches/compare`, all on by default.
pub const ENGINES: &[&str] = &["rbolt", "lmdb", "redb", "sled", "jammdb", "bbolt-rs"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Only {
    Both,
    Micro,
    Compare,
}

#[derive(Debug)]
pub struct Args {
    quick: bool,
    pub replot: bool,
    pub n: usize,
    pub engines: Vec<String>,
    only: Only,
    pub rw_secs: f64,
    /// Runs of each engine, interleaved.
    pub repeat: usize,
    pub timeout: Duration,
    baseline: Option<(String, String)>,
    criterion_extra: Vec<String>,
    /// The command as typed, for the report.
    pub command: String,
}

fn parse(raw: &[String]) -> Result<Option<Args>> {
    let mut args = Args {
        quick: false,
        replot: false,
        n: 0,
        engines: ENGINES.iter().map(|e| e.to_string()).collect(),
        only: Only::Both,
        rw_secs: 0.0,
        repeat: 1,
        timeout: Duration::ZERO,
        baseline: None,
        criterion_extra: Vec::new(),
        command: std::iter::once("cargo xtask bench".to_string())
            .chain(raw.iter().cloned())
            .collect::<Vec<_>>()
            .join(" "),
    };
    let mut only_given = false;
    let mut iter = raw.iter();
    while let Some(arg) = iter.next() {
        let mut value = || {
            iter.next()
                .cloned()
                .with_context(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--quick" => args.quick = true,
            "--replot" => args.replot = true,
            "--n" => args.n = value()?.replace(['_', ','], "").parse().context("--n")?,
            "--engines" => {
                let list = value()?;
                let mut engines = vec!["rbolt".to_string()];
                for engine in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                    if !ENGINES.contains(&engine) {
                        bail!("unknown engine {engine}; known: {}", ENGINES.join(", "));
                    }
                    if !engines.iter().any(|e| e == engine) {
                        engines.push(engine.to_string());
                    }
                }
                args.engines = engines;
            }
            "--only" => {
                only_given = true;
                args.only = match value()?.as_str() {
                    "micro" => Only::Micro,
                    "compare" => Only::Compare,
                    other => bail!("--only takes micro or compare, not {other}"),
                }
            }
            "--rw-secs" => args.rw_secs = value()?.parse().context("--rw-secs")?,
            "--repeat" => {
                args.repeat = value()?.parse().context("--repeat")?;
                if args.repeat == 0 {
                    bail!("--repeat must be at least 1");
                }
            }
            "--timeout" => {
                args.timeout = Duration::from_secs(value()?.parse().context("--timeout")?)
            }
            "--save-baseline" => args.baseline = Some(("--save-baseline".into(), value()?)),
            "--baseline" => args.baseline = Some(("--baseline".into(), value()?)),
            "--" => {
                args.criterion_extra = iter.by_ref().cloned().collect();
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    if args.n == 0 {
        args.n = if args.quick { 100_000 } else { 1_000_000 };
    }
    if args.n < 20_000 {
        bail!("--n must be at least 20,000 (the delete phase commits 10,000 keys at a time)");
    }
    if args.rw_secs <= 0.0 {
        args.rw_secs = if args.quick { 1.0 } else { 5.0 };
    }
    if args.timeout.is_zero() {
        args.timeout = Duration::from_secs(if args.quick { 300 } else { 1200 });
    }
    if args.quick && !only_given {
        args.only = Only::Compare;
    }
    Ok(Some(args))
}

/// Where cargo puts things, from `cargo metadata` (so `CARGO_TARGET_DIR` and config count).
pub struct Layout {
    pub workspace: PathBuf,
    pub target: PathBuf,
    pub report: PathBuf,
}

fn layout() -> Result<Layout> {
    let output = Command::new(cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let path = |key: &str| -> Result<PathBuf> {
        Ok(PathBuf::from(
            meta[key]
                .as_str()
                .with_context(|| format!("cargo metadata has no {key}"))?,
        ))
    };
    let target = path("target_directory")?;
    Ok(Layout {
        workspace: path("workspace_root")?,
        report: target.join("bench-report"),
        target,
    })
}

pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

pub fn main(raw: &[String]) -> Result<()> {
    let Some(args) = parse(raw)? else {
        return Ok(());
    };
    let layout = layout()?;
    if args.replot {
        let compare = compare::load(&layout.report.join("compare.json"))?;
        // Only when the run that wrote compare.json ran the micro benchmarks too.
        let ran_micro = parse(
            &compare
                .command
                .split_whitespace()
                .skip(3)
                .map(String::from)
                .collect::<Vec<_>>(),
        )
        .ok()
        .flatten()
        .is_some_and(|run| run.only == Only::Both);
        let micro = micro::latest(&layout).filter(|_| ran_micro);
        let args = Args {
            command: compare.command.clone(),
            ..args
        };
        let machine = machine::Machine::probe(&layout.target);
        let summary = report::write(&layout, &args, &machine, micro.as_ref(), Some(&compare))?;
        for path in chart::write(&layout.report, &compare)? {
            eprintln!("wrote {}", path.display());
        }
        eprintln!("wrote {}", summary.display());
        return Ok(());
    }
    std::fs::create_dir_all(&layout.report)
        .with_context(|| format!("creating {}", layout.report.display()))?;
    let started = SystemTime::now();
    let machine = machine::Machine::probe(&layout.target);

    let micro = if args.only != Only::Compare {
        let mut criterion_args = Vec::new();
        if let Some((flag, name)) = &args.baseline {
            criterion_args.extend([flag.clone(), name.clone()]);
        }
        criterion_args.extend(args.criterion_extra.iter().cloned());
        let mut micro = micro::run(&layout, &criterion_args, started)?;
        // Criterion compares every run with the one before it; only `--baseline NAME` is a
        // comparison the user asked for, so only then does the report show the change.
        if !matches!(&args.baseline, Some((flag, _)) if flag == "--baseline") {
            for bench in &mut micro.benches {
                bench.change = None;
            }
        }
        Some(micro)
    } else {
        None
    };

    let compare = if args.only != Only::Micro {
        Some(compare::run(&layout, &args)?)
    } else {
        None
    };

    let summary = report::write(&layout, &args, &machine, micro.as_ref(), compare.as_ref())?;
    if let Some(compare) = &compare {
        for path in chart::write(&layout.report, compare)? {
            eprintln!("wrote {}", path.display());
        }
    }
    eprintln!("wrote {}", summary.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &[&str], expected: &str) {
        let raw: Vec<String> = raw.iter().map(|s| s.to_string()).collect();
        let args = parse(&raw).unwrap().unwrap();
        let got = format!(
            "n={} engines={} only={:?} rw={} repeat={} timeout={} baseline={:?} extra={:?}",
            args.n,
            args.engines.join(","),
            args.only,
            args.rw_secs,
            args.repeat,
            args.timeout.as_secs(),
            args.baseline,
            args.criterion_extra
        );
        assert_eq!(got, expected);
    }

    #[test]
    fn flags() {
        check(
            &[],
            "n=1000000 engines=rbolt,lmdb,redb,sled,jammdb,bbolt-rs only=Both rw=5 repeat=1 timeout=1200 baseline=None extra=[]",
        );
        check(
            &["--quick"],
            "n=100000 engines=rbolt,lmdb,redb,sled,jammdb,bbolt-rs only=Compare rw=1 repeat=1 timeout=300 baseline=None extra=[]",
        );
        check(
            &["--quick", "--only", "micro", "--engines", "lmdb,redb"],
            "n=100000 engines=rbolt,lmdb,redb only=Micro rw=1 repeat=1 timeout=300 baseline=None extra=[]",
        );
        check(
            &["--n", "200_000", "--baseline", "main", "--", "--noplot"],
            "n=200000 engines=rbolt,lmdb,redb,sled,jammdb,bbolt-rs only=Both rw=5 repeat=1 timeout=1200 baseline=Some((\"--baseline\", \"main\")) extra=[\"--noplot\"]",
        );
        check(
            &[
                "--only",
                "compare",
                "--repeat",
                "3",
                "--engines",
                "lmdb,redb",
            ],
            "n=1000000 engines=rbolt,lmdb,redb only=Compare rw=5 repeat=3 timeout=1200 baseline=None extra=[]",
        );
    }

    #[test]
    fn rejects() {
        for raw in [
            &["--engines", "rocksdb"][..],
            &["--only", "all"],
            &["--n", "10"],
            &["--repeat", "0"],
            &["--repeat", "x"],
            &["--frobnicate"],
        ] {
            let raw: Vec<String> = raw.iter().map(|s| s.to_string()).collect();
            assert!(parse(&raw).is_err(), "{raw:?}");
        }
    }
}
