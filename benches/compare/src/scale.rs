//! The rows that depend on the file's size, run with `--scale` (`cargo xtask bench --scale`,
//! issue 52): the open after a clean close, the engine's checker, its hot backup and its
//! compacting copy, right after the load; after the read-write phases, a writer's rate alone
//! and beside the engine's online vacuum; last, the open after a process that committed
//! without syncs died. An engine without one of these reports no row for it.

use crate::engines::{Engine, Result, fail};
use crate::workload::{BATCH_KEYS, Config, KILL_CHILD_TXS, Key, Phases, Rng, dir_size, time};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A fresh, empty directory beside the store's, for a copy: beside, so the store's recorded
/// size leaves the copy out.
fn copy_dir(phases: &Phases, name: &str) -> Result<PathBuf> {
    let mut dir = phases.dir.clone().into_os_string();
    dir.push(format!("-{name}"));
    let dir = PathBuf::from(dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Runs `row` and records it as `name` with `extra`, unless the engine has no such thing.
fn optional_row(
    phases: &mut Phases,
    name: &'static str,
    row: impl FnOnce() -> Option<Result<()>>,
    extra: impl FnOnce() -> Value,
) -> Result<()> {
    phases.restart();
    let start = Instant::now();
    match row() {
        None => return Ok(()),
        Some(result) => result.map_err(|e| fail(format!("{name}: {e}")))?,
    }
    let secs = start.elapsed().as_secs_f64();
    phases.record(name, secs, 0, extra());
    Ok(())
}

/// After the load: the open after a clean close (the handle dropped, then a timed open), the
/// checker, the hot backup and the compacting copy (each copy's size recorded, then deleted).
pub fn after_load<E: Engine>(db: E, phases: &mut Phases) -> Result<E> {
    if !E::REOPENS {
        return Ok(db);
    }
    let dir = phases.dir.clone();
    drop(db);
    phases.restart();
    let (secs, db) = time(|| E::open(&dir))?;
    phases.record("open_clean", secs, 0, json!({}));
    optional_row(phases, "check", || db.check(), || json!({}))?;
    for (name, compact) in [("backup", false), ("compact", true)] {
        let copy = copy_dir(phases, name)?;
        let row = || {
            if compact {
                db.compact(&copy)
            } else {
                db.backup(&copy)
            }
        };
        optional_row(
            phases,
            name,
            row,
            || json!({ "copy_bytes": dir_size(&copy).0 }),
        )?;
        std::fs::remove_dir_all(&copy)?;
    }
    Ok(db)
}

/// What a writer of `BATCH_KEYS`-key transactions rewriting `survivors` did.
struct Writes {
    txs: u64,
    /// Each transaction's time, µs, sorted.
    latencies_us: Vec<f64>,
    secs: f64,
}

impl Writes {
    fn figures(&self) -> Value {
        let at = |p: usize| {
            let sorted = &self.latencies_us;
            sorted
                .get((sorted.len() * p / 100).min(sorted.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0.0)
        };
        json!({
            "writes_per_sec": (self.txs * BATCH_KEYS as u64) as f64 / self.secs.max(1e-9),
            "tx_p50_us": at(50),
            "tx_p99_us": at(99),
        })
    }
}

/// Commits transactions of `BATCH_KEYS` surviving keys (rewritten with the same values, so
/// the store's keys stay as they are) until `stop` is set or `until` passes.
fn write_until<E: Engine>(
    db: &E,
    survivors: &[Key],
    seed: u64,
    stop: &AtomicBool,
    until: Option<Instant>,
) -> Result<Writes> {
    let mut rng = Rng::new(seed);
    let mut batch = [[0u8; crate::workload::KEY_LEN]; BATCH_KEYS];
    let mut latencies_us = Vec::new();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && until.is_none_or(|until| Instant::now() < until) {
        batch
            .iter_mut()
            .for_each(|key| *key = survivors[rng.below(survivors.len())]);
        let tx_start = Instant::now();
        db.put_tx(&batch, false)?;
        latencies_us.push(tx_start.elapsed().as_secs_f64() * 1e6);
    }
    latencies_us.sort_by(f64::total_cmp);
    Ok(Writes {
        txs: latencies_us.len() as u64,
        latencies_us,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// After the read-write phases (half the loaded keys deleted): a writer alone for
/// `config.rw` ("write_alone"), then the same writer beside the engine's online vacuum, run
/// to its end ("vacuum": the vacuum's time, the file before and after, the writer's rate and
/// latencies meanwhile). etcd's defragmentation blocks every write; the row says what the
/// writer keeps.
pub fn vacuum_beside_writer<E: Engine>(
    db: &E,
    survivors: &[Key],
    config: &Config,
    phases: &mut Phases,
) -> Result<()> {
    if !E::VACUUMS {
        return Ok(());
    }
    let stop = AtomicBool::new(false);
    phases.restart();
    let alone = write_until(
        db,
        survivors,
        config.seed ^ 0x5a,
        &stop,
        Some(Instant::now() + config.rw),
    )?;
    phases.record("write_alone", alone.secs, alone.txs, alone.figures());
    let file_before = dir_size(&phases.dir).0;
    let (secs, (vacuumed, beside)) = time(|| {
        std::thread::scope(|s| {
            let writer = s.spawn(|| write_until(db, survivors, config.seed ^ 0x5b, &stop, None));
            let vacuumed = db.vacuum().unwrap_or(Ok(()));
            stop.store(true, Ordering::Relaxed);
            let beside = writer.join().map_err(|_| fail("the writer panicked"))?;
            Ok((vacuumed, beside))
        })
    })?;
    vacuumed.map_err(|e| fail(format!("vacuum: {e}")))?;
    let beside = beside?;
    let mut extra = beside.figures();
    extra["file_bytes_before"] = json!(file_before);
    phases.record("vacuum", secs, beside.txs, extra);
    Ok(())
}

/// Last: the store reopened by a child process (this binary with `--kill-child`) that commits
/// `KILL_CHILD_TXS` transactions without syncs and dies without closing, then a timed open
/// here ("open_after_kill"); an engine whose open rebuilds state from the file pays it now.
pub fn open_after_kill<E: Engine>(db: E, config: &Config, phases: &mut Phases) -> Result<()> {
    if !E::REOPENS {
        return Ok(());
    }
    let dir = phases.dir.clone();
    drop(db);
    let status = std::process::Command::new(std::env::current_exe()?)
        .args(["--engine", E::NAME, "--seed", &config.seed.to_string()])
        .arg("--kill-child")
        .arg(&dir)
        .status()?;
    if !status.success() {
        return Err(fail(format!(
            "the child that dies after its commits: {status}"
        )));
    }
    phases.restart();
    let (secs, db) = time(|| E::open(&dir))?;
    phases.record(
        "open_after_kill",
        secs,
        0,
        json!({ "unsynced_commits": KILL_CHILD_TXS }),
    );
    drop(db);
    Ok(())
}
