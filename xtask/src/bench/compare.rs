//! The workload comparison: builds `benches/compare` (its own workspace, so the peers never
//! enter `cargo test --workspace`), then runs it once per engine and repeat, each run in its
//! own process, one after the other, and reads the JSON line each prints. With `--repeat R`
//! the engines take turns R times (the order rotated each round), so a burst of load on a
//! shared machine lands on every engine alike; the report takes each cell's median.

use super::{Args, Layout, cargo};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the comparison crate lives, from the workspace root.
pub const MANIFEST: &str = "benches/compare/Cargo.toml";

/// The crates whose versions the report names for each engine.
const ENGINE_CRATES: &[(&str, &[&str])] = &[
    ("rbolt", &["rbolt"]),
    ("lmdb", &["heed", "lmdb-master-sys"]),
    ("lmdb-named", &["heed", "lmdb-master-sys"]),
    ("redb", &["redb"]),
    ("sled", &["sled"]),
    ("jammdb", &["jammdb"]),
    ("bbolt-rs", &["bbolt-rs"]),
];

/// Every run of one engine.
pub struct EngineRun {
    pub name: String,
    /// e.g. "heed 0.22.1, lmdb-master-sys 0.2.6".
    pub version: String,
    /// One per repeat, in run order: the child's JSON line, or why there is none.
    pub results: Vec<std::result::Result<Value, String>>,
    /// Wall time of all its runs together.
    pub wall_secs: f64,
}

impl EngineRun {
    /// The lines of the runs that finished.
    pub fn ok(&self) -> Vec<&Value> {
        self.results
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .collect()
    }

    /// The errors of the runs that did not.
    pub fn errors(&self) -> Vec<&str> {
        self.results
            .iter()
            .filter_map(|r| r.as_ref().err().map(String::as_str))
            .collect()
    }
}

pub struct Compare {
    /// The command that produced the results (as typed).
    pub command: String,
    pub n: usize,
    pub rw_secs: f64,
    /// Runs per engine asked for.
    pub repeat: usize,
    pub runs: Vec<EngineRun>,
}

impl Compare {
    /// The engines with at least one finished run, rbolt first, with those runs' lines.
    pub fn ok(&self) -> impl Iterator<Item = (&str, Vec<&Value>)> {
        self.runs.iter().filter_map(|run| {
            let lines = run.ok();
            (!lines.is_empty()).then_some((run.name.as_str(), lines))
        })
    }
}

/// The engines of round `round`: `engines` rotated by `round`, so that no engine always runs
/// right after the same one (the page cache and the disk remember the run before).
fn round_order(engines: &[String], round: usize) -> Vec<&String> {
    let shift = round % engines.len().max(1);
    engines[shift..].iter().chain(&engines[..shift]).collect()
}

pub fn run(layout: &Layout, args: &Args) -> Result<Compare> {
    let binary = build(layout, &args.engines)?;
    let versions = versions(&layout.workspace.join("benches/compare/Cargo.lock"));
    // Inside the target directory, so on the same filesystem as the build.
    let data_dir = layout
        .target
        .join("bench-data")
        .join(format!("run-{}", std::process::id()));
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let mut runs: Vec<EngineRun> = args
        .engines
        .iter()
        .map(|name| EngineRun {
            name: name.clone(),
            version: version_of(name, &versions),
            results: Vec::new(),
            wall_secs: 0.0,
        })
        .collect();
    let mut lines = Vec::new();
    for round in 0..args.repeat {
        for name in round_order(&args.engines, round) {
            let dir = data_dir.join(name);
            eprintln!(
                "== {name} (run {} of {}): n = {}, data in {}",
                round + 1,
                args.repeat,
                args.n,
                dir.display()
            );
            let start = Instant::now();
            let result = run_engine(&binary, name, &dir, args);
            let wall_secs = start.elapsed().as_secs_f64();
            if let Err(error) = &result {
                eprintln!("== {name}: no result: {error}");
            }
            let _ = std::fs::remove_dir_all(&dir);
            lines.push(match &result {
                Ok(value) => {
                    let mut value = value.clone();
                    value["round"] = Value::from(round);
                    value
                }
                Err(error) => serde_json::json!({ "engine": name, "round": round, "error": error }),
            });
            let run = runs
                .iter_mut()
                .find(|run| &run.name == name)
                .expect("every engine has a run");
            run.results.push(result);
            run.wall_secs += wall_secs;
        }
    }
    let _ = std::fs::remove_dir(&data_dir);
    let _ = std::fs::remove_dir(data_dir.parent().unwrap_or(&data_dir));
    let raw = serde_json::json!({
        "command": args.command,
        "n": args.n,
        "rw_secs": args.rw_secs,
        "repeat": args.repeat,
        "versions": runs.iter().map(|run| (run.name.clone(), Value::from(run.version.clone())))
            .collect::<serde_json::Map<_, _>>(),
        "engines": lines,
    });
    let raw_path = layout.report.join("compare.json");
    std::fs::write(&raw_path, serde_json::to_string_pretty(&raw)?)
        .with_context(|| format!("writing {}", raw_path.display()))?;
    Ok(Compare {
        command: args.command.clone(),
        n: args.n,
        rw_secs: args.rw_secs,
        repeat: args.repeat,
        runs,
    })
}

/// "heed 0.22.1, lmdb-master-sys 0.2.6": the versions of the crates behind `engine`.
fn version_of(engine: &str, versions: &[(String, String)]) -> String {
    ENGINE_CRATES
        .iter()
        .find(|(name, _)| *name == engine)
        .map(|(_, crates)| {
            crates
                .iter()
                .map(|krate| {
                    let version = versions
                        .iter()
                        .find(|(n, _)| n == krate)
                        .map_or("?", |(_, v)| v.as_str());
                    format!("{krate} {version}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Reads back the `compare.json` a run wrote (for `--replot`).
pub fn load(path: &Path) -> Result<Compare> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let raw: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    // Runs written before the results carried their command were a bare array.
    let lines = match &raw {
        Value::Array(lines) => lines.clone(),
        _ => raw["engines"].as_array().cloned().unwrap_or_default(),
    };
    // One line per run; a run of several repeats has several lines per engine, which are
    // gathered under the engine in the order they ran.
    let mut runs: Vec<EngineRun> = Vec::new();
    for line in lines {
        let name = line["engine"].as_str().unwrap_or("?").to_string();
        let result = match line["error"].as_str() {
            Some(error) => Err(error.to_string()),
            None => Ok(line),
        };
        match runs.iter_mut().find(|run| run.name == name) {
            Some(run) => run.results.push(result),
            None => runs.push(EngineRun {
                version: raw["versions"][&name].as_str().unwrap_or("").to_string(),
                name,
                results: vec![result],
                wall_secs: 0.0,
            }),
        }
    }
    let first = runs
        .iter()
        .flat_map(|run| run.results.iter())
        .find_map(|result| result.as_ref().ok());
    let repeat = runs.iter().map(|run| run.results.len()).max().unwrap_or(1);
    Ok(Compare {
        command: raw["command"]
            .as_str()
            .unwrap_or("cargo xtask bench")
            .to_string(),
        n: first.and_then(|v| v["n"].as_u64()).unwrap_or(0) as usize,
        rw_secs: raw["rw_secs"]
            .as_f64()
            .or_else(|| first.and_then(|v| v["rw_secs"].as_f64()))
            .unwrap_or(5.0),
        repeat,
        runs,
    })
}

/// Builds the comparison binary with the features of the engines asked for.
fn build(layout: &Layout, engines: &[String]) -> Result<PathBuf> {
    let target = layout.target.join("compare");
    // An engine's feature is its name up to a variant suffix (`lmdb-named` is `lmdb`).
    let mut peers: Vec<&str> = engines
        .iter()
        .map(|e| e.strip_suffix("-named").unwrap_or(e))
        .filter(|e| *e != "rbolt")
        .collect();
    peers.sort_unstable();
    peers.dedup();
    let mut command = Command::new(cargo());
    command
        .current_dir(&layout.workspace)
        .args(["build", "--release", "--manifest-path", MANIFEST])
        .arg("--target-dir")
        .arg(&target)
        .arg("--no-default-features");
    if !peers.is_empty() {
        command.args(["--features", &peers.join(",")]);
    }
    eprintln!("building the comparison: {command:?}");
    let status = command.status().context("running cargo build")?;
    if !status.success() {
        bail!(
            "building {MANIFEST} failed ({status}); a peer that does not build here can be left \
             out with --engines"
        );
    }
    Ok(target.join("release").join("rbolt-compare"))
}

/// Runs one engine's child process with a time limit; its stderr (progress) passes through.
fn run_engine(
    binary: &Path,
    name: &str,
    dir: &Path,
    args: &Args,
) -> std::result::Result<Value, String> {
    let mut child = Command::new(binary)
        .args(["--engine", name, "--n", &args.n.to_string(), "--rw-secs"])
        .arg(args.rw_secs.to_string())
        .arg("--dir")
        .arg(dir)
        .args(if args.scale.is_empty() {
            &[][..]
        } else {
            &["--scale"][..]
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", binary.display()))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    // Progress passes through; the last phase finished is kept for the error message.
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let last_phase = std::sync::Arc::new(std::sync::Mutex::new(String::from("none")));
    let progress = {
        let last_phase = last_phase.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr)
                .lines()
                .map_while(std::result::Result::ok)
            {
                eprintln!("{line}");
                if let Some(phase) = line
                    .strip_prefix('[')
                    .and_then(|rest| rest.split_once("] "))
                    .and_then(|(_, rest)| rest.split_once(':'))
                    .map(|(phase, _)| phase.to_string())
                {
                    *last_phase.lock().unwrap_or_else(|e| e.into_inner()) = phase;
                }
            }
        })
    };
    let last_phase = move || last_phase.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let start = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None if start.elapsed() > args.timeout => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = progress.join();
                return Err(format!(
                    "did not finish within {} s (--timeout); last phase finished: {}",
                    args.timeout.as_secs(),
                    last_phase()
                ));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let text = reader
        .join()
        .map_err(|_| "stdout reader panicked".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = progress.join();
    if !status.success() {
        return Err(format!(
            "exited with {status}; last phase finished: {}",
            last_phase()
        ));
    }
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or("no JSON line")?;
    serde_json::from_str(line).map_err(|e| format!("bad JSON line: {e}"))
}

/// (name, version) of every package in a Cargo.lock; "?" when unreadable.
fn versions(lock: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let mut out = Vec::new();
    let mut name = None;
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("name = ") {
            name = Some(value.trim_matches('"').to_string());
        } else if let Some(value) = line.strip_prefix("version = ")
            && let Some(name) = name.take()
        {
            out.push((name, value.trim_matches('"').to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_rotate_the_engines() {
        let engines: Vec<String> = ["rbolt", "lmdb", "redb"].map(String::from).to_vec();
        let order = |round| {
            round_order(&engines, round)
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(order(0), "rbolt,lmdb,redb");
        assert_eq!(order(1), "lmdb,redb,rbolt");
        assert_eq!(order(2), "redb,rbolt,lmdb");
        assert_eq!(order(3), "rbolt,lmdb,redb");
    }

    #[test]
    fn load_gathers_the_repeats_of_each_engine() {
        let dir = std::env::temp_dir().join(format!("xtask-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("compare.json");
        std::fs::write(
            &path,
            r#"{"command":"c","rw_secs":2,"versions":{"rbolt":"rbolt 0.1.0"},"engines":[
              {"engine":"rbolt","n":100,"round":0},
              {"engine":"lmdb","round":0,"error":"boom"},
              {"engine":"lmdb","n":100,"round":1},
              {"engine":"rbolt","n":100,"round":1}]}"#,
        )
        .unwrap();
        let compare = load(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(compare.repeat, 2);
        assert_eq!(compare.n, 100);
        let summary: Vec<(String, usize, Vec<&str>)> = compare
            .runs
            .iter()
            .map(|run| (run.name.clone(), run.ok().len(), run.errors()))
            .collect();
        assert_eq!(
            summary,
            [
                ("rbolt".to_string(), 2, vec![]),
                ("lmdb".to_string(), 1, vec!["boom"])
            ]
        );
        assert_eq!(compare.runs[0].version, "rbolt 0.1.0");
    }

    #[test]
    fn load_keeps_what_the_per_transaction_rows_read() {
        let dir = std::env::temp_dir().join(format!("xtask-load-txs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("compare.json");
        // A line of a run with `txs`, `cpu_secs` and `page_size`, and one from before them.
        std::fs::write(
            &path,
            r#"{"command":"c","rw_secs":1,"engines":[
              {"engine":"rbolt","n":100,"page_size":4096,"phases":{"commit_durable":
                {"secs":0.5,"written_bytes":8192000,"cpu_secs":0.04,"txs":1000}}},
              {"engine":"lmdb","n":100,"phases":{"commit_durable":
                {"secs":0.5,"written_bytes":8192000}}}]}"#,
        )
        .unwrap();
        let compare = load(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let row = |short: &str| {
            let metric = crate::bench::report::METRICS
                .iter()
                .find(|m| m.short == short)
                .expect(short);
            compare
                .runs
                .iter()
                .map(|run| (metric.get)(run.ok()[0]).map(|v| (v * 1e6).round() / 1e6))
                .collect::<Vec<_>>()
        };
        assert_eq!(row("(d) CPU/commit"), [Some(40.0), None]);
        assert_eq!(row("(d) pages/commit"), [Some(2.0), None]);
        assert_eq!(row("(d) wall/commit"), [Some(500.0), None]);
        assert_eq!(row("(d) written/commit"), [Some(8.0), Some(8.0)]);
    }

    #[test]
    fn versions_from_lock() {
        let dir = std::env::temp_dir().join(format!("xtask-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lock = dir.join("Cargo.lock");
        std::fs::write(
            &lock,
            "version = 4\n\n[[package]]\nname = \"heed\"\nversion = \"0.22.1\"\nsource = \"x\"\n\n\
             [[package]]\nname = \"rbolt\"\nversion = \"0.1.0\"\n",
        )
        .unwrap();
        let found = versions(&lock);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            found,
            [
                ("heed".to_string(), "0.22.1".to_string()),
                ("rbolt".to_string(), "0.1.0".to_string())
            ]
        );
    }
}
