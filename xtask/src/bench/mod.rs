//! `cargo xtask bench`: the criterion micro benchmarks of every crate, then the workload
//! comparison of rbolt with its peers (`benches/compare`), then one report in
//! `target/bench-report/`: `summary.md`, one SVG chart per workload family, and the raw JSON;
//! after a full run, the current table of `docs/BENCHMARKS.md` (`report/doc.rs`).

mod chart;
mod compare;
mod machine;
mod micro;
mod report;
mod scale;
mod scale_chart;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime};

/// Every engine the comparison crate knows, rbolt first; the others are cargo features of
/// `benches/compare`, all on by default (`lmdb-named` is LMDB with its keys in a named
/// database, the counterpart of a bbolt bucket; it comes with the `lmdb` feature and runs
/// only when asked for by name).
pub const ENGINES: &[&str] = &["rbolt", "lmdb", "redb", "sled", "jammdb", "bbolt-rs"];

/// Engines run only when `--engines` names them.
pub const EXTRA_ENGINES: &[&str] = &["lmdb-named"];

/// Which half of the suite to run.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum Only {
    #[value(skip)]
    Both,
    /// The criterion micro benchmarks.
    Micro,
    /// rbolt against its peers.
    Compare,
}

/// `cargo xtask bench`, as typed.
#[derive(Debug, clap::Args)]
#[command(override_usage = "cargo xtask bench [OPTIONS] [-- CRITERION_ARGS]")]
pub struct BenchArgs {
    /// Smoke run: N = 100,000, 1 s read-write phase, micro benchmarks skipped unless
    /// `--only micro` (under 2 minutes once built).
    #[arg(long)]
    quick: bool,
    /// Keys per workload (default 1,000,000; `_` and `,` may group digits).
    #[arg(long, value_name = "N", value_parser = parse_count)]
    n: Option<usize>,
    /// Engines to compare (default: all; rbolt is always run). Known: rbolt, lmdb, redb,
    /// sled, jammdb, bbolt-rs.
    #[arg(long, value_name = "A,B,...")]
    engines: Option<String>,
    /// Run one half only.
    #[arg(long, value_enum)]
    only: Option<Only>,
    /// Length of the read-write phase in seconds (default 5, --quick 1).
    #[arg(long, value_name = "SECS")]
    rw_secs: Option<f64>,
    /// Run every engine R times, taking turns; the report shows each cell's median and its
    /// min-max, ratios of medians.
    #[arg(long, value_name = "R", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    repeat: u64,
    /// Give up on an engine run after this many seconds (default 1200, --quick 300).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// Rewrite summary.md and the charts from the last run's compare.json and criterion's
    /// latest results; run nothing.
    #[arg(long)]
    replot: bool,
    /// The comparison at growing N (`--scale-n`), loads in transactions of 100,000 keys, with
    /// the rows that depend on the file's size (opens, check, backup, compact, vacuum beside a
    /// writer); writes `target/bench-report/scale.md`, `scale.svg` and `scale.json` (with
    /// `--replot`: scale.md and scale.svg again from that scale.json; with `--doc`: also the
    /// "At scale" section of docs/BENCHMARKS.md). Long (about 10 GB of files at 50M); not
    /// part of CI.
    #[arg(long, conflicts_with_all = ["only", "quick"])]
    scale: bool,
    /// The N of `--scale`, ascending (default 1M,10M; `m` and `k` suffixes allowed, e.g.
    /// `1m,10m,50m`).
    #[arg(long, value_name = "N,N,...", requires = "scale")]
    scale_n: Option<String>,
    /// Write the comparison's table into docs/BENCHMARKS.md even when N is below 1,000,000
    /// (a full run, or a replot of one, always writes it); with `--scale`, write the scale
    /// table and chart into its "At scale" section (only then).
    #[arg(long)]
    doc: bool,
    /// Passed to criterion: save the micro results as NAME.
    #[arg(long, value_name = "NAME", conflicts_with = "baseline")]
    save_baseline: Option<String>,
    /// Passed to criterion: compare the micro results with NAME.
    #[arg(long, value_name = "NAME")]
    baseline: Option<String>,
    /// Arguments for criterion, after `--`.
    #[arg(last = true, value_name = "CRITERION_ARGS")]
    criterion_extra: Vec<String>,
}

fn parse_count(text: &str) -> Result<usize, String> {
    text.replace(['_', ','], "")
        .parse()
        .map_err(|e| format!("{text:?}: {e}"))
}

#[derive(Debug, Clone)]
pub struct Args {
    pub replot: bool,
    /// Write the document's table whatever N.
    pub doc: bool,
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
    /// `--scale`: the N to run at (empty without it).
    pub scale: Vec<usize>,
}

impl BenchArgs {
    /// The settings these flags ask for, with the defaults that depend on `--quick` filled
    /// in; `command` is the command line as typed, for the report.
    fn resolve(self, command: String) -> Result<Args> {
        let mut engines = vec!["rbolt".to_string()];
        let list = self.engines.as_deref();
        for engine in list
            .unwrap_or(&ENGINES.join(","))
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            if !ENGINES.contains(&engine) && !EXTRA_ENGINES.contains(&engine) {
                let known = [ENGINES, EXTRA_ENGINES].concat();
                bail!("unknown engine {engine}; known: {}", known.join(", "));
            }
            if !engines.iter().any(|e| e == engine) {
                engines.push(engine.to_string());
            }
        }
        let n = self
            .n
            .unwrap_or(if self.quick { 100_000 } else { 1_000_000 });
        if n < 20_000 {
            bail!("--n must be at least 20,000 (the delete phase commits 10,000 keys at a time)");
        }
        let scale = match (self.scale, self.scale_n.as_deref()) {
            (false, _) => Vec::new(),
            (true, list) => scale::parse_ns(list.unwrap_or("1m,10m"))?,
        };
        let only = match self.only {
            Some(only) => only,
            None if self.quick => Only::Compare,
            None => Only::Both,
        };
        let baseline = match (self.save_baseline, self.baseline) {
            (Some(name), _) => Some(("--save-baseline".to_string(), name)),
            (None, Some(name)) => Some(("--baseline".to_string(), name)),
            (None, None) => None,
        };
        Ok(Args {
            replot: self.replot,
            doc: self.doc,
            n,
            engines,
            only,
            rw_secs: self
                .rw_secs
                .filter(|secs| *secs > 0.0)
                .unwrap_or(if self.quick { 1.0 } else { 5.0 }),
            repeat: self.repeat as usize,
            timeout: Duration::from_secs(self.timeout.filter(|secs| *secs > 0).unwrap_or(
                if self.quick {
                    300
                } else if self.scale {
                    scale::TIMEOUT_SECS
                } else {
                    1200
                },
            )),
            baseline,
            criterion_extra: self.criterion_extra,
            command,
            scale,
        })
    }
}

/// Parses `raw`, the arguments after `cargo xtask bench`: for the tests, and to learn what a
/// stored report's command line asked for.
fn parse(raw: &[String]) -> Result<Args> {
    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        bench: BenchArgs,
    }
    let line = <Line as clap::Parser>::try_parse_from(
        std::iter::once("cargo xtask bench").chain(raw.iter().map(String::as_str)),
    )?;
    line.bench.resolve(command_line(raw))
}

/// `cargo xtask bench` and `raw`, as one line.
fn command_line(raw: &[String]) -> String {
    std::iter::once("cargo xtask bench".to_string())
        .chain(raw.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
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

/// Runs `cargo xtask bench` with `args`; `raw` is the arguments as typed, for the report.
pub fn main(args: BenchArgs, raw: &[String]) -> Result<()> {
    let args = args.resolve(command_line(raw))?;
    let layout = layout()?;
    if args.replot && !args.scale.is_empty() {
        return scale::replot(&layout, &args);
    }
    if args.replot {
        return replot(&layout, args);
    }
    std::fs::create_dir_all(&layout.report)
        .with_context(|| format!("creating {}", layout.report.display()))?;
    if !args.scale.is_empty() {
        return scale::run(&layout, &args);
    }
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
    match &compare {
        Some(compare) => write_doc(&layout, &args, compare, &report::utc_now()),
        None => Ok(()),
    }
}

/// `--replot` of the comparison: summary.md, the charts and the document's table again from
/// the last `compare.json` (and criterion's latest results); runs nothing.
fn replot(layout: &Layout, args: Args) -> Result<()> {
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
    .is_ok_and(|run| run.only == Only::Both);
    let micro = micro::latest(layout).filter(|_| ran_micro);
    let args = Args {
        command: compare.command.clone(),
        ..args
    };
    let machine = machine::Machine::probe(&layout.target);
    let summary = report::write(layout, &args, &machine, micro.as_ref(), Some(&compare))?;
    for path in chart::write(&layout.report, &compare)? {
        eprintln!("wrote {}", path.display());
    }
    eprintln!("wrote {}", summary.display());
    let written = std::fs::metadata(layout.report.join("compare.json"))
        .and_then(|m| m.modified())
        .map_or_else(|_| report::utc_now(), report::utc_date);
    write_doc(layout, &args, &compare, &written)
}

/// Writes the comparison's table into `docs/BENCHMARKS.md` after a full run (N of at least
/// 1,000,000) or when `--doc` asks; otherwise says why it did not.
fn write_doc(layout: &Layout, args: &Args, compare: &compare::Compare, date: &str) -> Result<()> {
    let doc = layout.workspace.join("docs/BENCHMARKS.md");
    if compare.n < report::DOC_TABLE_N_MIN && !args.doc {
        eprintln!(
            "kept {}: N = {} is not the full run's {} (--doc writes it anyway)",
            doc.display(),
            report::group_thousands(compare.n),
            report::group_thousands(report::DOC_TABLE_N_MIN)
        );
        return Ok(());
    }
    report::write_doc(&doc, compare, date)?;
    eprintln!("wrote the current table of {}", doc.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &[&str], expected: &str) {
        let raw: Vec<String> = raw.iter().map(|s| s.to_string()).collect();
        let args = parse(&raw).unwrap();
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
        // An extra engine runs when named, and only then (the default lists above lack it).
        check(
            &["--only", "compare", "--engines", "lmdb,lmdb-named"],
            "n=1000000 engines=rbolt,lmdb,lmdb-named only=Compare rw=5 repeat=1 timeout=1200 baseline=None extra=[]",
        );
    }

    #[test]
    fn rejects() {
        for raw in [
            &["--engines", "rocksdb"][..],
            &["--engines", "redb-named"],
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
