//! The model-based test of the public API (issue 12, defect 1's property test).
//!
//! Random sequences of bucket, key, cursor, sequence and transaction operations (deletes of
//! many keys at once among them: ranges, prefixes, predicates, pops) run against
//! the facade and against an in-memory model of nested buckets at once. Every result is
//! compared, the error variant included; after every operation the open transaction's whole
//! visible state (every bucket, key, value and sequence) equals the model — after an `Err`,
//! the model as it was before the call. Operations are chosen to fail as often as to
//! succeed: missing and existing names, empty names and keys, names, keys and values over
//! the limits, the wrong kind, moves onto themselves, into their own children, to missing
//! parents and onto existing names, commits past `max_size`. Transactions commit, roll back,
//! are dropped, panic inside `update`; the database is reopened with other options and
//! read-only; old readers on other threads must keep their snapshots; `compact`,
//! `write_to`, `copy_file` and `batch` run beside; after every commit the database checks
//! clean.
//!
//! `every_commit_reads_the_same_in_a_reader_process` (`process_test.rs`, Linux) runs the same
//! cases on a real file with a reader process beside the writer (issue 50): after every commit
//! it reads the model's committed state, and the snapshots it holds read as they did across
//! commits, vacuum steps, batches, compacts and the writer's reopens (`reader_process.rs`).
//!
//! The run prints one summary line and fails unless every kind of operation and every class
//! of chosen failure occurred. `RBOLT_API_MODEL_CASES` sets the number of cases per seed,
//! `RBOLT_API_MODEL_SEED` replays a run, and `RBOLT_API_MODEL_MINUTES` runs seed after seed
//! for that long (`cargo xtask soak` does).

mod dump;
mod exec;
mod handles;
mod many;
mod model;
mod ops;
#[cfg(target_os = "linux")]
mod process_test;
mod reader_child;
mod reader_process;
mod reads;
mod session;

pub use reader_child::child as reader_child;

use model::{Class, ErrKind};
use ops::Case;
use quickcheck::{Gen, QuickCheck, TestResult};
use rbolt_testkit::tier;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

// While it was written this test kept each class of failure it found behind a flag until
// the fix landed (failed moves dropping edits, nesting past about 400 levels, on_commit hooks
// calling `update`, move names over `KEY_SIZE_MAX`, a writable root, and `Bucket::stats` in a
// write transaction missing nested buckets). None is left: every class runs.

/// Deep chains of buckets: from this many levels...
pub const CHAIN_DEPTH_MIN: usize = 100;
/// ...to at most this many, past the 1,024 levels the facade once capped nesting at (issue 12,
/// decision 4: nesting has no limit). A bound on the test's cost, not on the facade: every
/// step compares every bucket. Creates and moves that would nest deeper are skipped.
pub const NESTING_DEPTH_TESTED_MAX: usize = 1100;
/// Old readers kept open at once.
pub const READERS_MAX: usize = 3;

/// Cases per seed in the fast tier (`cargo test`, dev profile): a few seconds.
const CASES_FAST: u64 = 80;
/// Cases per seed in CI (`RBOLT_TIER=ci`, dev profile): 15 to 30 seconds on a shared two-core
/// machine.
const CASES_CI: u64 = 250;
/// Cases per seed under `cargo xtask soak` (`RBOLT_TIER=soak`), which also sets
/// `RBOLT_API_MODEL_MINUTES`: seeds follow one another until the time is spent.
const CASES_SOAK: u64 = 500;
/// quickcheck's size parameter (the ops draw their own ranges).
const GEN_SIZE: usize = 100;

/// Counts of what ran, to print and to prove the run was not vacuous.
#[derive(Default)]
pub struct Tally {
    pub cases: u64,
    pub ops: u64,
    /// The deepest nesting of buckets built.
    depth_max: usize,
    kinds: BTreeMap<&'static str, u64>,
    events: BTreeMap<&'static str, u64>,
    errors: BTreeMap<&'static str, u64>,
    classes: BTreeMap<Class, u64>,
    skipped: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// A kind of API call ran.
    pub fn kind(&mut self, name: &'static str) {
        *self.kinds.entry(name).or_default() += 1;
    }

    /// A transaction-level event happened (a commit, a reopen, ...).
    pub fn event(&mut self, name: &'static str) {
        *self.events.entry(name).or_default() += 1;
    }

    /// A call failed as the model said, for `class`.
    pub fn error(&mut self, kind: &ErrKind, class: Class) {
        *self.errors.entry(kind.name()).or_default() += 1;
        *self.classes.entry(class).or_default() += 1;
    }

    /// Buckets were nested `depth` levels deep.
    pub fn depth(&mut self, depth: usize) {
        self.depth_max = self.depth_max.max(depth);
    }

    /// An operation was not run because an exclusion flag is set.
    pub fn skip(&mut self, name: &'static str) {
        *self.skipped.entry(name).or_default() += 1;
    }

    fn merge(&mut self, other: Tally) {
        self.cases += other.cases;
        self.ops += other.ops;
        self.depth_max = self.depth_max.max(other.depth_max);
        for (k, v) in other.kinds {
            *self.kinds.entry(k).or_default() += v;
        }
        for (k, v) in other.events {
            *self.events.entry(k).or_default() += v;
        }
        for (k, v) in other.errors {
            *self.errors.entry(k).or_default() += v;
        }
        for (k, v) in other.classes {
            *self.classes.entry(k).or_default() += v;
        }
        for (k, v) in other.skipped {
            *self.skipped.entry(k).or_default() += v;
        }
    }

    fn summary(&self, first_seed: u64, seeds: u64) -> String {
        let list = |map: &BTreeMap<&'static str, u64>| {
            map.iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let events: String = self
            .events
            .iter()
            .map(|(k, v)| format!(" {k}={v}"))
            .collect();
        let classes: Vec<String> = self
            .classes
            .iter()
            .map(|(k, v)| format!("{}:{v}", k.name()))
            .collect();
        format!(
            "api-model: seeds={seeds} first_seed={first_seed} cases={} ops={} calls={}{events} \
             nesting_max={} errors={} classes={} skipped={}",
            self.cases,
            self.ops,
            self.kinds.values().sum::<u64>(),
            self.depth_max,
            list(&self.errors),
            classes.join(","),
            if self.skipped.is_empty() {
                "none".to_string()
            } else {
                list(&self.skipped)
            },
        )
    }

    /// Fails unless every kind of call, every event and every class of chosen failure
    /// occurred.
    fn assert_complete(&self) {
        let missing = self.missing();
        assert!(
            missing.is_empty(),
            "the run never tried: {}",
            missing.join(", ")
        );
    }

    /// Every kind of call, event and class of chosen failure that has not occurred yet.
    fn missing(&self) -> Vec<String> {
        let mut kinds = vec![
            "put",
            "delete",
            "get",
            "create_bucket(tx)",
            "create_bucket_path",
            "create_bucket(nested)",
            "create_bucket_if_not_exists(tx)",
            "create_bucket_if_not_exists(nested)",
            "delete_bucket(tx)",
            "delete_bucket(nested)",
            "move_bucket",
            "bucket_path_mut",
            "bucket_mut(tx)",
            "bucket_mut(nested)",
            "bucket(view)",
            "cursor.forward",
            "cursor.backward",
            "cursor.seek",
            "cursor.current",
            "cursor_mut.forward",
            "cursor_mut.backward",
            "cursor_mut.seek",
            "cursor_mut.delete",
            "iter",
            "range",
            "iter.next",
            "iter.next_back",
            "sequence",
            "set_sequence",
            "next_sequence",
            "for_each",
            "for_each_bucket",
            "tx.for_each",
            "stats",
            "deep-chain",
            "bulk.put",
            "bulk.delete",
            "bulk.cursor_mut.delete",
            "on_commit",
            "handles",
            "handles.put",
            "handles.get",
            "handles.copy",
            "handles.drop",
            "handles.bucket_mut",
            "handles.create_bucket_if_not_exists",
            "handles.delete_bucket(other)",
            "handles.refused.bucket_mut",
            "handles.refused.create_bucket",
            "handles.refused.create_bucket_if_not_exists",
            "handles.refused.delete_bucket",
            "handles.refused.move_from",
            "handles.refused.move_into",
            "handles.refused.move_onto",
            "handles.refused.bucket_path_mut",
            "handles.refused.create_bucket_path",
        ];
        kinds.extend([
            "delete_range",
            "delete_prefix",
            "clear",
            "retain",
            "try_retain",
            "try_retain.failed",
            "extract_if",
            "pop_first",
            "pop_last",
        ]);
        kinds.push("on_commit.update");
        kinds.extend(["set_durability", "sync", "vacuum_step", "vacuum"]);
        let events = [
            "commits",
            "rollbacks",
            "drops",
            "panics",
            "update-errors",
            "max-size",
            "reopens",
            "read-only-reopens",
            "old-readers",
            "reader-checks",
            "compacts",
            "write-tos",
            "copy-files",
            "batches",
            "batch-calls",
            "hooks-run",
            "deep-chains",
            "handles-held",
            "several-handles-held",
            "durable-commits",
            "commits-without-syncs",
            "vacuum-steps",
            "process-crashes",
            "power-losses",
            "crash-kept-all",
            "crash-kept-durable",
        ];
        let mut missing: Vec<String> = Vec::new();
        missing.extend(
            kinds
                .iter()
                .filter(|k| !self.kinds.contains_key(*k))
                .map(|k| format!("call {k}")),
        );
        missing.extend(
            events
                .iter()
                .filter(|k| !self.events.contains_key(*k))
                .map(|k| format!("event {k}")),
        );
        missing.extend(
            Class::ALL
                .iter()
                .filter(|c| !self.classes.contains_key(*c))
                .map(|c| format!("failure class {}", c.name())),
        );
        missing
    }
}

/// The counts of every case that passed.
static TOTAL: Mutex<Option<Tally>> = Mutex::new(None);

fn property(case: Case) -> TestResult {
    let mut tally = Tally {
        cases: 1,
        ..Tally::default()
    };
    session::run(&case, &mut tally);
    TOTAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get_or_insert_with(Tally::default)
        .merge(tally);
    TestResult::passed()
}

/// Rounds run past the requested ones while a kind of case has not occurred (see the test).
const EXTRA_ROUNDS: usize = 4;

/// Whether the rounds so far tried every kind of case.
fn covered() -> bool {
    TOTAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .is_some_and(|tally| tally.missing().is_empty())
}

#[test]
fn every_api_call_gives_the_models_result_and_leaves_the_models_state() {
    let cases = tier::size("RBOLT_API_MODEL_CASES", CASES_FAST, CASES_CI, CASES_SOAK);
    let deadline = tier::number("RBOLT_API_MODEL_MINUTES")
        .map(|minutes: f64| Instant::now() + Duration::from_secs_f64(minutes * 60.0));
    let mut seed = tier::number::<u64>("RBOLT_API_MODEL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let first_seed = seed;
    let mut seeds = 0;
    // A round that missed a rare case (a crash that kept only the durable commit comes about
    // 3.5 times a round at CI's size, so one round in 30 sees none) is followed by another,
    // up to EXTRA_ROUNDS, before the coverage check: the check is of the generator, not luck.
    let mut extra_rounds = 0;
    loop {
        // Shown with a failure (and live under --nocapture): the seed replays the round.
        println!("api-model: seed={seed} (RBOLT_API_MODEL_SEED={seed} replays this round)");
        QuickCheck::new()
            .rng(Gen::from_size_and_seed(GEN_SIZE, seed))
            .tests(cases)
            .max_tests(cases)
            .quickcheck(property as fn(Case) -> TestResult);
        seeds += 1;
        match deadline {
            Some(deadline) if Instant::now() < deadline => seed = seed.wrapping_add(1),
            _ if extra_rounds < EXTRA_ROUNDS && !covered() => {
                extra_rounds += 1;
                seed = seed.wrapping_add(1);
                println!("api-model: a case is still missing; round {extra_rounds} more");
            }
            _ => break,
        }
    }
    let tally = TOTAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
        .expect("cases ran");
    assert_eq!(tally.cases, cases * seeds, "every case ran");
    eprintln!("{}", tally.summary(first_seed, seeds));
    tally.assert_complete();
}

/// The case a CI-tier run found (shrunk by quickcheck): commits without syncs on 16 KiB pages
/// (not the system's page size, so a commit whose meta lands in slot 0 syncs anyway), two
/// `on_commit` hooks that each commit an update, then a power loss. The first hook's commit was
/// durable and the file held it, a state the model did not list (it took the hooks' writes as
/// one commit). Each hook's commit is a state of its own now.
#[test]
fn a_power_loss_may_keep_the_commit_of_one_on_commit_hook_of_several() {
    use ops::{Case, Op};
    let case = Case {
        page_size: 16384,
        freelist: rbolt::FreelistKind::Span,
        no_freelist_sync: false,
        ops: vec![
            Op::Reopen {
                options: 2762214380,
            },
            Op::OnCommit { update: true },
            Op::OnCommit { update: true },
            Op::Commit,
            Op::Crash {
                process: false,
                seed: 654313078,
            },
        ],
    };
    // A tally of its own: the random test counts the cases it ran in `TOTAL`.
    session::run(&case, &mut Tally::default());
}

/// CI's seed 1796688532933262189, shrunk: two threads' batch calls on a reopened handle, then a
/// power loss; the file held none of the states the model allows.
#[test]
fn a_power_loss_after_two_threads_batch_calls_keeps_a_committed_state() {
    use ops::{Case, Op};
    let case = Case {
        page_size: 256,
        freelist: rbolt::FreelistKind::Array,
        no_freelist_sync: false,
        ops: vec![
            Op::Reopen {
                options: 1660374099,
            },
            Op::Batch {
                threads: 2,
                failing: false,
            },
            Op::Crash {
                process: false,
                seed: 253208644,
            },
        ],
    };
    session::run(&case, &mut Tally::default());
}
