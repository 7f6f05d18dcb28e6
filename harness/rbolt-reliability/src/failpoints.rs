//! Failpoints: every named point of the commit path, made to return an error (in process) and
//! to panic (in a child process).
//!
//! `fail`'s configuration is process-global: run this suite alone in its process (its own
//! test binary), never next to other suites that commit.
//!
//! With `return`, a point before the meta write must leave the transaction rolled back, the
//! handle usable, the in-memory freelist as it was (the same free and pending counts, and a
//! retry of the same transaction allocating exactly the pages a run without the failure
//! does), and the file at the last acknowledged state. A point past the first sync must poison
//! the handle. With `panic`, a reopen must show the last acknowledged state (or, for the points
//! at or after the meta write, the one in flight).

use crate::model::{
    Item, PROGRESS_BUCKET, STEP_KEY, Tree, describe_difference, freelist_counts, progress, read_db,
};
use crate::summary::{Failures, Summary};
use crate::verdict::{Failure, Reopens, Verdict, judge};
use crate::workload::{Op, Workload, apply_model, commit_step};
use rbolt::{Db, Error, Options};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Every failpoint of the commit path, in the order a commit reaches them, and whether an
/// error injected there must poison the handle (it lies past the meta write).
pub const POINTS: [(&str, bool); 12] = [
    ("commit::before-spill", false),
    ("commit::before-freelist", false),
    ("commit::remap", false),
    ("commit::before-grow", false),
    ("commit::grow", false),
    ("commit::before-write", false),
    ("commit::after-first-data-write", false),
    ("commit::before-data-sync", false),
    ("commit::before-meta", false),
    ("commit::before-meta-sync", true),
    ("commit::after-meta-sync", true),
    ("commit::unmap", true),
];

/// Workload steps committed before the step that meets the failpoint.
const PREFIX_STEPS: u64 = 10;

/// What the failpoint suite found.
#[derive(Clone, Debug, Default)]
pub struct FailpointReport {
    /// Hits of each point while a whole workload runs with counting callbacks.
    pub census: BTreeMap<&'static str, u64>,
    /// Points whose `return` made the commit fail with that point's error.
    pub return_hits: u64,
    /// Points whose `panic` made the child panic there.
    pub panic_hits: u64,
    /// Handles poisoned as they must be (after a `return` past the meta write).
    pub poisoned: u64,
    /// Rolled-back commits whose freelist counts changed, or whose retry allocated differently
    /// from a run without the failure.
    pub freelist_mismatches: u64,
    /// Reopens, and reads through a rolled-back handle, that did not show what was
    /// acknowledged (`wrong_state` also counts handles in the wrong poison state).
    pub reopens: Reopens,
    /// Reopens, after a `return` or a `panic`, at the in-flight state (allowed at and past the
    /// meta write).
    pub at_in_flight: u64,
    /// Descriptions of the failures.
    pub failures: Failures,
}

impl FailpointReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        let never_hit = POINTS
            .iter()
            .filter(|(name, _)| self.census.get(name).copied().unwrap_or(0) == 0)
            .count();
        let summary = Summary::new("failpoints")
            .field("points", POINTS.len())
            .field("census_hits", self.census.values().sum::<u64>())
            .field("never_hit", never_hit)
            .field("return_hits", self.return_hits)
            .field("panic_hits", self.panic_hits)
            .field("poisoned", self.poisoned)
            .field("at_in_flight", self.at_in_flight)
            .field("freelist_mismatches", self.freelist_mismatches);
        self.reopens.fields(summary)
    }

    /// Whether every point was hit in every mode and behaved.
    pub fn is_clean(&self) -> bool {
        POINTS
            .iter()
            .all(|(name, _)| self.census.get(name).copied().unwrap_or(0) > 0)
            && self.return_hits == POINTS.len() as u64
            && self.panic_hits == POINTS.len() as u64
            && self.freelist_mismatches == 0
            && self.reopens.is_clean()
            && self.failures.is_empty()
    }
}

/// The workload before the failing step.
struct Setup {
    options: Options,
    workload: Workload,
}

fn setup(seed: u64) -> Setup {
    Setup {
        // Even seeds commit durably with one sync (issue 51): the same failpoints, with the
        // one-sync meta's write and sync where the two-sync protocol has its second.
        options: Options::default().one_sync(seed.is_multiple_of(2)),
        workload: Workload::new(seed, rbolt::PAGE_SIZE_DEFAULT),
    }
}

/// Commits the prefix steps; returns the model after them.
fn prefix(db: &Db, workload: &Workload) -> Result<Tree, String> {
    let mut model = Tree::default();
    for step in 1..=PREFIX_STEPS {
        let ops = workload.step(step, &mut model);
        commit_step(db, &ops).map_err(|e| format!("prefix step {step}: {e}"))?;
    }
    Ok(model)
}

/// The step that meets every failpoint: it frees pages (deletes), and writes more than the
/// current mapping holds, so the file grows and is remapped. Returns its ops and the model
/// after it.
pub fn trigger(model: &Tree, file_len: u64, page_size: usize) -> (Vec<Op>, Tree) {
    let mut after = model.clone();
    let mut ops = Vec::new();
    let mut push = |op: Op, after: &mut Tree| {
        apply_model(&op, after);
        ops.push(op);
    };
    let step = progress(model) + 1;
    push(
        Op::Put {
            bucket: vec![PROGRESS_BUCKET.to_vec()],
            key: STEP_KEY.to_vec(),
            value: step.to_be_bytes().to_vec(),
        },
        &mut after,
    );
    // Free some pages: delete values from the first buckets that have any.
    let mut deletes = Vec::new();
    for (name, item) in &model.entries {
        if let Item::Bucket(bucket) = item
            && name.as_slice() != PROGRESS_BUCKET
        {
            for (key, item) in bucket.entries.iter().take(20) {
                if matches!(item, Item::Value(_)) {
                    deletes.push(Op::Delete {
                        bucket: vec![name.clone()],
                        key: key.clone(),
                    });
                }
            }
        }
    }
    for op in deletes {
        push(op, &mut after);
    }
    let fp = vec![b"fp".to_vec()];
    if !model.entries.contains_key(b"fp".as_slice()) {
        push(Op::CreateBucket(fp.clone()), &mut after);
    }
    let mapped = file_len.max(32 * 1024).next_power_of_two();
    let n_values = 2 * mapped / page_size as u64 + 2;
    for i in 0..n_values {
        push(
            Op::Put {
                bucket: fp.clone(),
                key: format!("v{step:06}-{i:06}").into_bytes(),
                value: vec![(i % 251) as u8; page_size * 3 / 4],
            },
            &mut after,
        );
    }
    (ops, after)
}

/// The error's message and those of its sources.
fn error_chain(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Runs the suite in `dir`, with `child` the `rbolt-crash-child` binary.
pub fn run(child: &Path, dir: &Path, seed: u64) -> FailpointReport {
    let mut report = FailpointReport::default();
    let setup = setup(seed);
    if let Err(error) = census(dir, &setup, &mut report) {
        report.failures.push(format!("census: {error}"));
    }
    let control = match control(dir, &setup) {
        Ok(control) => control,
        Err(error) => {
            report.failures.push(format!("control run: {error}"));
            return report;
        }
    };
    for (index, (name, poisons)) in POINTS.iter().enumerate() {
        let path = dir.join(format!("return-{index}.db"));
        if let Err(error) = return_mode(&path, &setup, &control, name, *poisons, &mut report) {
            report.failures.push(format!("{name} return: {error}"));
        }
        let path = dir.join(format!("panic-{index}.db"));
        if let Err(error) = panic_mode(child, &path, seed, &setup, name, *poisons, &mut report) {
            report.failures.push(format!("{name} panic: {error}"));
        }
    }
    report
}

/// Counts each point's hits over a whole run: a failpoint never hit would prove nothing.
fn census(dir: &Path, setup: &Setup, report: &mut FailpointReport) -> Result<(), String> {
    let counters: Vec<Arc<AtomicU64>> = POINTS.iter().map(|_| Arc::default()).collect();
    for ((name, _), counter) in POINTS.iter().zip(&counters) {
        let counter = counter.clone();
        fail::cfg_callback(*name, move || {
            counter.fetch_add(1, Ordering::Relaxed);
        })?;
    }
    let result = (|| {
        let db = Db::open_with(dir.join("census.db"), setup.options.clone())
            .map_err(|e| e.to_string())?;
        let model = prefix(&db, &setup.workload)?;
        let file_len = db.file_len().map_err(|e| e.to_string())?;
        let (ops, _) = trigger(&model, file_len, db.page_size());
        commit_step(&db, &ops).map_err(|e| format!("trigger: {e}"))
    })();
    for (name, _) in POINTS {
        fail::remove(name);
    }
    for ((name, _), counter) in POINTS.iter().zip(&counters) {
        report.census.insert(name, counter.load(Ordering::Relaxed));
    }
    result
}

/// What a run without failures leaves after the trigger step.
struct Control {
    meta: (u64, u64, u64, u64),
    freelist: (usize, usize, usize, usize),
}

fn meta_of(db: &Db) -> Result<(u64, u64, u64, u64), String> {
    db.view(|tx| {
        let meta = tx.meta();
        Ok((meta.root.root, meta.freelist, meta.pgid, meta.txid))
    })
    .map_err(|e: rbolt::Error| e.to_string())
}

fn control(dir: &Path, setup: &Setup) -> Result<Control, String> {
    let db =
        Db::open_with(dir.join("control.db"), setup.options.clone()).map_err(|e| e.to_string())?;
    let model = prefix(&db, &setup.workload)?;
    let file_len = db.file_len().map_err(|e| e.to_string())?;
    let (ops, _) = trigger(&model, file_len, db.page_size());
    commit_step(&db, &ops).map_err(|e| format!("trigger: {e}"))?;
    Ok(Control {
        meta: meta_of(&db)?,
        freelist: freelist_counts(&db.stats()),
    })
}

/// Reopens `path` and judges it: it must hold `acked`, or `in_flight` when given.
fn judge_reopen(
    path: &Path,
    options: &Options,
    acked: &Tree,
    in_flight: Option<&Tree>,
    what: &str,
    report: &mut FailpointReport,
) {
    let db = Db::open_with(path, options.clone());
    match judge(db.as_ref(), false, acked, in_flight) {
        Verdict::Acked => {}
        Verdict::InFlight => report.at_in_flight += 1,
        // Only the power-loss suite tells garbage apart; `judge` never says this.
        Verdict::Unsynced(_) => {
            unreachable!("the failpoint suite acknowledges durable commits only")
        }
        Verdict::InitGarbage => unreachable!("the failpoint suite does not classify garbage"),
        Verdict::Failed(failure) => report.reopens.record(failure, what, &mut report.failures),
    }
}

fn return_mode(
    path: &Path,
    setup: &Setup,
    control: &Control,
    name: &'static str,
    poisons: bool,
    report: &mut FailpointReport,
) -> Result<(), String> {
    let db = Db::open_with(path, setup.options.clone()).map_err(|e| e.to_string())?;
    let acked = prefix(&db, &setup.workload)?;
    let file_len = db.file_len().map_err(|e| e.to_string())?;
    let (ops, after) = trigger(&acked, file_len, db.page_size());
    // Pages freed by the last commit are released when the next write transaction begins;
    // an empty one does that, so `before` is the freelist the failing commit starts from.
    // (`stats` takes the writer lock, so it cannot be called inside the transaction.)
    db.begin_write().map_err(|e| e.to_string())?.rollback();
    let before = freelist_counts(&db.stats());
    fail::cfg(name, "return")?;
    let result = commit_step(&db, &ops);
    fail::remove(name);
    match result {
        Err(error) if error_chain(&error).contains(name) => report.return_hits += 1,
        Err(error) => return Err(format!("the commit failed, but not at the point: {error}")),
        Ok(()) => return Err("the commit succeeded: the point was not hit".into()),
    }
    let what = format!("{name} return");
    if poisons {
        let write = db.begin_write().map(drop);
        let read = db.begin_read().map(drop);
        if matches!(write, Err(Error::Poisoned)) && matches!(read, Err(Error::Poisoned)) {
            report.poisoned += 1;
        } else {
            report.reopens.wrong_state += 1;
            report.failures.push(format!(
                "{what}: the handle is not poisoned (begin_write {write:?}, begin_read {read:?})"
            ));
        }
        drop(db);
        judge_reopen(path, &setup.options, &acked, Some(&after), &what, report);
        return Ok(());
    }
    // Rolled back: the handle works, the freelist is as it was, the file as acknowledged.
    if let Err(error) = db.begin_read().map(drop) {
        report.reopens.wrong_state += 1;
        report.failures.push(format!(
            "{what}: the handle does not work after a rollback: {error}"
        ));
    }
    let after_failure = freelist_counts(&db.stats());
    if after_failure != before {
        report.freelist_mismatches += 1;
        report.failures.push(format!(
            "{what}: freelist (free, pending, free bytes, freelist bytes) {before:?} before, {after_failure:?} after the rollback"
        ));
    }
    match read_db(&db) {
        Ok(state) if state == acked => {}
        Ok(state) => {
            let detail = format!(
                "the handle shows changes of the failed commit: {}",
                describe_difference(&acked, &state)
            );
            let failures = &mut report.failures;
            report
                .reopens
                .record(Failure::Wrong(detail), &what, failures);
        }
        Err(error) => {
            let failure = Failure::Check(format!("read: {error}"));
            report.reopens.record(failure, &what, &mut report.failures);
        }
    }
    // What a reopen would find now (a copy, so that this handle goes on).
    let copy = path.with_extension("copy");
    std::fs::copy(path, &copy).map_err(|e| format!("copy: {e}"))?;
    judge_reopen(
        &copy,
        &setup.options,
        &acked,
        None,
        &format!("{what}, reopened"),
        report,
    );
    // The retry allocates exactly what a run without the failure does.
    commit_step(&db, &ops).map_err(|e| format!("retry: {e}"))?;
    let meta = meta_of(&db)?;
    let freelist = freelist_counts(&db.stats());
    if meta != control.meta || freelist != control.freelist {
        report.freelist_mismatches += 1;
        report.failures.push(format!(
            "{what}: after the retry (root, freelist, high water, txid) {meta:?} and freelist counts {freelist:?}; without the failure {:?} and {:?}",
            control.meta, control.freelist
        ));
    }
    drop(db);
    judge_reopen(
        path,
        &setup.options,
        &after,
        None,
        &format!("{what}, after the retry"),
        report,
    );
    Ok(())
}

fn panic_mode(
    child: &Path,
    path: &Path,
    seed: u64,
    setup: &Setup,
    name: &'static str,
    poisons: bool,
    report: &mut FailpointReport,
) -> Result<(), String> {
    let (acked, file_len, page_size) = {
        let db = Db::open_with(path, setup.options.clone()).map_err(|e| e.to_string())?;
        let acked = prefix(&db, &setup.workload)?;
        let file_len = db.file_len().map_err(|e| e.to_string())?;
        (acked, file_len, db.page_size())
    };
    let (_, after) = trigger(&acked, file_len, page_size);
    let output = Command::new(child)
        .arg("failpoint")
        .arg(path)
        .arg(seed.to_string())
        .arg(name)
        .output()
        .map_err(|e| format!("spawn {}: {e}", child.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() || !stderr.contains(&format!("failpoint {name} panic")) {
        return Err(format!(
            "the child did not panic at the point ({}): {stderr}",
            output.status
        ));
    }
    report.panic_hits += 1;
    let what = format!("{name} panic");
    judge_reopen(
        path,
        &setup.options,
        &acked,
        poisons.then_some(&after),
        &what,
        report,
    );
    Ok(())
}

/// The child's side: `failpoint PATH SEED NAME`. Opens the file the parent prepared, makes
/// point `NAME` panic, and commits the trigger step: it must not return.
pub(crate) fn child_main(args: &[String]) -> Result<(), String> {
    let [path, seed, name] = args else {
        return Err("usage: failpoint PATH SEED NAME".into());
    };
    let seed: u64 = seed.parse().map_err(|_| "bad seed")?;
    let setup = setup(seed);
    let db = Db::open_with(path, setup.options).map_err(|e| format!("open: {e}"))?;
    let model = read_db(&db).map_err(|e| format!("read: {e}"))?;
    let file_len = db.file_len().map_err(|e| e.to_string())?;
    let (ops, _) = trigger(&model, file_len, db.page_size());
    fail::cfg(name.as_str(), "panic")?;
    let result = commit_step(&db, &ops);
    Err(format!(
        "the commit returned {result:?} instead of panicking"
    ))
}
