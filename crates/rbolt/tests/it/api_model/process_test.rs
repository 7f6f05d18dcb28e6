//! The API model test on a real file with a reader process beside the writer (issue 50):
//! the same random cases as `every_api_call_gives_the_models_result_and_leaves_the_models_state`,
//! run by `session::run_on` on [`Backing::file`], where a second process (this test binary
//! again) reads every commit and holds snapshots across commits, vacuum steps, batches,
//! compacts and the writer's reopens (`reader_process.rs`). Crashes, which need the simulated
//! file's images, are skipped there and counted.
//!
//! `RBOLT_API_MODEL_PROCESS_CASES` sets the number of cases, `RBOLT_API_MODEL_PROCESS_SEED`
//! replays a run.

use super::ops::Case;
use super::reader_process::Backing;
use super::{GEN_SIZE, Tally, session};
use quickcheck::{Gen, QuickCheck, TestResult};
use rbolt_testkit::tier;
use std::sync::Mutex;

/// Cases in the fast tier (`cargo test`): a few seconds.
const CASES_FAST: u64 = 20;
/// Cases in CI (`RBOLT_TIER=ci`): under 40 seconds on a loaded two-core machine, and enough
/// that every count in [`REQUIRED`] is above zero.
const CASES_CI: u64 = 150;
/// Cases under `cargo xtask soak`.
const CASES_SOAK: u64 = 300;

/// What must have happened at least once at the CI size for the run to prove anything: the
/// reader process's checks, and the writer's work while it held a snapshot.
const REQUIRED: &[(&str, &str)] = &[
    ("proc.commits-checked", "commits read in the reader process"),
    ("proc.held-checks", "held snapshots checked"),
    ("proc.held.commits", "commits while it held a snapshot"),
    ("proc.held.vacuum-steps", "vacuum steps while it held one"),
    ("proc.held.shrinks", "shrinks of the file while it held one"),
    (
        "proc.held.reopens",
        "the writer's reopens while it held one",
    ),
    (
        "proc.held.read-only-reopens",
        "read-only reopens while it held one",
    ),
    ("proc.held.batches", "batches while it held one"),
    ("proc.held.compacts", "compacts while it held one"),
];

/// The counts of every case that passed (this test's own: the other runs beside it).
static TOTAL: Mutex<Option<Tally>> = Mutex::new(None);

fn property(case: Case) -> TestResult {
    let mut tally = Tally {
        cases: 1,
        ..Tally::default()
    };
    session::run_on(Backing::file(), &case, &mut tally);
    TOTAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get_or_insert_with(Tally::default)
        .merge(tally);
    TestResult::passed()
}

#[test]
fn every_commit_reads_the_same_in_a_reader_process() {
    let cases = tier::size(
        "RBOLT_API_MODEL_PROCESS_CASES",
        CASES_FAST,
        CASES_CI,
        CASES_SOAK,
    );
    let seed = tier::number::<u64>("RBOLT_API_MODEL_PROCESS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    println!(
        "api-model-process: seed={seed} (RBOLT_API_MODEL_PROCESS_SEED={seed} replays this run)"
    );
    let started = std::time::Instant::now();
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(GEN_SIZE, seed))
        .tests(cases)
        .max_tests(cases)
        .quickcheck(property as fn(Case) -> TestResult);
    let tally = TOTAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
        .expect("cases ran");
    assert_eq!(tally.cases, cases, "every case ran");
    eprintln!("{}", tally.summary(seed, 1));
    let count = |event: &str| tally.events.get(event).copied().unwrap_or(0);
    let counts: Vec<String> = REQUIRED
        .iter()
        .map(|(event, what)| format!("{what}={}", count(event)))
        .collect();
    let skips: u64 = tally.skipped.values().sum();
    eprintln!(
        "api-model-process: cases={cases} in {:.1?}: {}; skipped={skips} (crashes need the \
         simulated file)",
        started.elapsed(),
        counts.join(", ")
    );
    if cases >= CASES_CI {
        let zero: Vec<&str> = REQUIRED
            .iter()
            .filter(|(event, _)| count(event) == 0)
            .map(|(_, what)| *what)
            .collect();
        assert!(zero.is_empty(), "the run never saw: {}", zero.join(", "));
    }
}
