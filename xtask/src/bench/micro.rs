//! The criterion micro benchmarks: run them, then collect every median criterion wrote
//! during this run from `target/criterion/**/new/estimates.json`.

use super::{Layout, cargo};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::SystemTime;

/// The crates with criterion benchmarks.
const CRATES: &[&str] = &["rbolt-freelist", "rbolt-btree", "rbolt-bench"];

pub struct Bench {
    /// Criterion's full id: `group/function[/parameter]`.
    pub id: String,
    pub median_ns: f64,
    /// Elements or bytes per iteration, when the benchmark declares them.
    pub throughput: Option<(f64, &'static str)>,
    /// Relative change of the median against `--baseline`, when criterion computed one.
    pub change: Option<f64>,
}

pub struct Micro {
    pub benches: Vec<Bench>,
    /// `allocs/op NAME: N` lines the benchmarks print.
    pub allocs: Vec<String>,
}

pub fn run(layout: &Layout, criterion_args: &[String], started: SystemTime) -> Result<Micro> {
    let mut command = Command::new(cargo());
    command.current_dir(&layout.workspace).arg("bench");
    for name in CRATES {
        command.args(["-p", name]);
    }
    command
        // `--bench *`, not `--benches`: that also runs the libraries (bench = true by
        // default), whose test harness rejects criterion's flags.
        .args(["--bench", "*", "--"])
        .args(criterion_args)
        .stderr(Stdio::piped());
    eprintln!("running {command:?}");
    let mut child = command.spawn().context("running cargo bench")?;
    let stderr = child.stderr.take().context("cargo bench stderr")?;
    let mut allocs = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line?;
        let _ = writeln!(std::io::stderr(), "{line}");
        if line.starts_with("allocs/op ") {
            allocs.push(line);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("cargo bench failed: {status}");
    }
    let mut benches = Vec::new();
    collect(&layout.target.join("criterion"), started, &mut benches)?;
    benches.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(Micro { benches, allocs })
}

/// The latest result of every benchmark criterion has kept, for `--replot`; `None` if none.
pub fn latest(layout: &Layout) -> Option<Micro> {
    let mut benches = Vec::new();
    collect(
        &layout.target.join("criterion"),
        SystemTime::UNIX_EPOCH,
        &mut benches,
    )
    .ok()?;
    benches.sort_by(|a, b| a.id.cmp(&b.id));
    // A `change/` from some earlier comparison says nothing about these results.
    benches.iter_mut().for_each(|bench| bench.change = None);
    (!benches.is_empty()).then_some(Micro {
        benches,
        allocs: Vec::new(),
    })
}

/// Walks `dir` for `new/estimates.json` files written since `since`.
fn collect(dir: &Path, since: SystemTime, out: &mut Vec<Bench>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|name| name == "new") {
            let estimates = path.join("estimates.json");
            let fresh = std::fs::metadata(&estimates)
                .and_then(|meta| meta.modified())
                .is_ok_and(|modified| modified >= since);
            if fresh {
                out.push(read_bench(&path, since)?);
            }
        } else {
            collect(&path, since, out)?;
        }
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Reads one benchmark from its `new/` directory (and `../change/` when present).
fn read_bench(new: &Path, since: SystemTime) -> Result<Bench> {
    let estimates = read_json(&new.join("estimates.json"))?;
    let median_ns = estimates["median"]["point_estimate"]
        .as_f64()
        .with_context(|| format!("no median in {}", new.display()))?;
    let meta = read_json(&new.join("benchmark.json")).unwrap_or(Value::Null);
    let id = meta["full_id"].as_str().map_or_else(
        || {
            new.parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        },
        str::to_string,
    );
    let throughput = match &meta["throughput"] {
        Value::Object(map) => map.iter().find_map(|(kind, amount)| {
            let unit = match kind.as_str() {
                "Elements" | "ElementsAndBytes" => "elem",
                "Bytes" | "BytesDecimal" => "B",
                _ => return None,
            };
            let amount = amount.as_f64().or_else(|| amount["elements"].as_f64())?;
            Some((amount, unit))
        }),
        _ => None,
    };
    // Criterion writes `change/` only when it compared with a baseline; a stale one from an
    // earlier run is ignored.
    let change_path = new.with_file_name("change").join("estimates.json");
    let change = std::fs::metadata(&change_path)
        .and_then(|meta| meta.modified())
        .is_ok_and(|modified| modified >= since)
        .then(|| read_json(&change_path).ok())
        .flatten()
        .and_then(|change| change["median"]["point_estimate"].as_f64());
    Ok(Bench {
        id,
        median_ns,
        throughput,
        change,
    })
}
