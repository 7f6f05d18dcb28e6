//! The workload comparison: builds `benches/compare` (its own workspace, so the peers never
//! enter `cargo test --workspace`), then runs it once per engine, each in its own process,
//! one after the other, and reads the JSON line each prints.

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
    ("redb", &["redb"]),
    ("sled", &["sled"]),
    ("jammdb", &["jammdb"]),
    ("bbolt-rs", &["bbolt-rs"]),
];

pub struct EngineRun {
    pub name: String,
    /// e.g. "heed 0.22.1, lmdb-master-sys 0.2.6".
    pub version: String,
    /// The child's JSON line, or why there is none.
    pub result: std::result::Result<Value, String>,
    pub wall_secs: f64,
}

pub struct Compare {
    /// The command that produced the results (as typed).
    pub command: String,
    pub n: usize,
    pub rw_secs: f64,
    pub runs: Vec<EngineRun>,
}

impl Compare {
    /// The engines that produced results, rbolt first.
    pub fn ok(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.runs
            .iter()
            .filter_map(|run| run.result.as_ref().ok().map(|v| (run.name.as_str(), v)))
    }
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
    let mut runs = Vec::new();
    for name in &args.engines {
        let dir = data_dir.join(name);
        eprintln!("== {name}: n = {}, data in {}", args.n, dir.display());
        let start = Instant::now();
        let result = run_engine(&binary, name, &dir, args);
        let wall_secs = start.elapsed().as_secs_f64();
        if let Err(error) = &result {
            eprintln!("== {name}: no result: {error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
        let version = ENGINE_CRATES
            .iter()
            .find(|(engine, _)| engine == name)
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
            .unwrap_or_default();
        runs.push(EngineRun {
            name: name.clone(),
            version,
            result,
            wall_secs,
        });
    }
    let _ = std::fs::remove_dir(&data_dir);
    let _ = std::fs::remove_dir(data_dir.parent().unwrap_or(&data_dir));
    let raw: Vec<Value> = runs
        .iter()
        .map(|run| match &run.result {
            Ok(value) => value.clone(),
            Err(error) => serde_json::json!({ "engine": run.name, "error": error }),
        })
        .collect();
    let raw = serde_json::json!({
        "command": args.command,
        "n": args.n,
        "rw_secs": args.rw_secs,
        "versions": runs.iter().map(|run| (run.name.clone(), Value::from(run.version.clone())))
            .collect::<serde_json::Map<_, _>>(),
        "engines": raw,
    });
    let raw_path = layout.report.join("compare.json");
    std::fs::write(&raw_path, serde_json::to_string_pretty(&raw)?)
        .with_context(|| format!("writing {}", raw_path.display()))?;
    Ok(Compare {
        command: args.command.clone(),
        n: args.n,
        rw_secs: args.rw_secs,
        runs,
    })
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
    let runs: Vec<EngineRun> = lines
        .into_iter()
        .map(|line| {
            let name = line["engine"].as_str().unwrap_or("?").to_string();
            EngineRun {
                version: raw["versions"][&name].as_str().unwrap_or("").to_string(),
                name,
                result: match line["error"].as_str() {
                    Some(error) => Err(error.to_string()),
                    None => Ok(line),
                },
                wall_secs: 0.0,
            }
        })
        .collect();
    let first = runs.iter().find_map(|run| run.result.as_ref().ok());
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
        runs,
    })
}

/// Builds the comparison binary with the features of the engines asked for.
fn build(layout: &Layout, engines: &[String]) -> Result<PathBuf> {
    let target = layout.target.join("compare");
    let peers: Vec<&str> = engines
        .iter()
        .map(String::as_str)
        .filter(|e| *e != "rbolt")
        .collect();
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
