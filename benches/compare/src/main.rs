//! `rbolt-compare`: runs the comparison workloads on one engine and prints one JSON line.
//!
//! `cargo xtask bench` runs this binary once per engine (`--engine NAME`), each in its own
//! process so that peak memory is per engine, and builds the report from the lines. Run by
//! hand: `rbolt-compare --list` names the engines compiled in;
//! `rbolt-compare --engine rbolt --n 100000 --dir /tmp/x --rw-secs 2` runs one. With
//! `RBOLT_COMPARE_MARKS=1` it also prints each phase's window on the monotonic clock, to cut a
//! `perf record -k CLOCK_MONOTONIC` profile to one phase.
//!
//! The only `unsafe` here is the two heed calls that heed marks `unsafe` (opening an LMDB
//! environment, switching `NO_SYNC`; see `engines/lmdb.rs`); the counting allocator's is
//! `rbolt-testkit`'s.

mod engines;
mod scale;
mod workload;

use std::process::ExitCode;
use std::time::Duration;

/// Counts the allocations of phases (b) and (e), every thread's (`rbolt-testkit`'s allocator).
#[global_allocator]
static GLOBAL: rbolt_testkit::alloc::CountingAlloc = rbolt_testkit::alloc::CountingAlloc;

const USAGE: &str = "usage: rbolt-compare --list
       rbolt-compare --engine NAME [--n N] [--dir DIR] [--seed S] [--rw-secs SECS]
                     [--scale] [--load-tx-keys K]

  --scale           add the rows that depend on the file's size (open after a clean close
                    and after a kill, check, backup, compact, vacuum beside a writer) and
                    load in transactions of 100,000 keys
  --load-tx-keys K  keys per transaction of the loads (default: all N in one; 100,000
                    with --scale)";

/// Keys per load transaction of `--scale` (issue 52).
const SCALE_LOAD_TX_KEYS: usize = 100_000;

fn main() -> ExitCode {
    match try_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rbolt-compare: {error}");
            ExitCode::FAILURE
        }
    }
}

fn try_main() -> Result<(), String> {
    let mut engine = None;
    let mut config = workload::Config {
        n: 1_000_000,
        seed: 0x5eed_0b01_7000_0001,
        dir: std::env::temp_dir().join(format!("rbolt-compare-{}", std::process::id())),
        rw: Duration::from_secs(5),
        load_tx_keys: 0,
        scale: false,
    };
    let mut kill_child = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--list" => {
                println!("{}", engines::names().join("\n"));
                return Ok(());
            }
            "--engine" => engine = Some(value()?),
            "--n" => config.n = value()?.parse().map_err(|e| format!("--n: {e}"))?,
            "--seed" => config.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--dir" => config.dir = value()?.into(),
            "--scale" => config.scale = true,
            "--load-tx-keys" => {
                config.load_tx_keys = value()?
                    .parse()
                    .map_err(|e| format!("--load-tx-keys: {e}"))?;
            }
            // The scale row "open after a kill" runs this binary again as the process that
            // dies: not for use by hand.
            "--kill-child" => kill_child = Some(std::path::PathBuf::from(value()?)),
            "--rw-secs" => {
                let secs: f64 = value()?.parse().map_err(|e| format!("--rw-secs: {e}"))?;
                config.rw = Duration::from_secs_f64(secs);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ => return Err(format!("unknown argument {arg}\n{USAGE}")),
        }
    }
    let engine = engine.ok_or_else(|| USAGE.to_string())?;
    if let Some(dir) = kill_child {
        let result = engines::kill_child(&engine, &dir, config.seed)
            .ok_or_else(|| format!("engine {engine} has no kill child"))?;
        return result.map_err(|e| format!("{engine} kill child: {e}"));
    }
    if config.load_tx_keys == 0 {
        config.load_tx_keys = if config.scale {
            SCALE_LOAD_TX_KEYS
        } else {
            config.n
        };
    }
    if config.n < 2 {
        return Err("--n must be at least 2".into());
    }
    std::fs::create_dir_all(&config.dir).map_err(|e| format!("{}: {e}", config.dir.display()))?;
    let result = engines::run(&engine, &config).ok_or_else(|| {
        format!(
            "engine {engine} is not compiled in (have: {})",
            engines::names().join(", ")
        )
    })?;
    let line = result.map_err(|e| format!("{engine}: {e}"))?;
    println!("{line}");
    Ok(())
}
