//! The API model test on a real file with a reader process beside the writer (issue 50):
//! the same random cases as `every_api_call_gives_the_models_result_and_leaves_the_models_state`,
//! run by `session::run_on` on [`Backing::file`], where a second process (this test binary
//! again) reads every commit and holds snapshots across commits, vacuum steps, batches,
//! compacts and the writer's reopens (`reader_process.rs`). Crashes, which need the simulated
//! file's images, are skipped there and counted.
//!
//! Shown failing with the writer ignoring reader-process slots when it frees pages
//! (`collect_live`: a held snapshot reads a freelist page where its tree was) and with the
//! writer not publishing its commits (a new transaction reads the open's state). Not caught:
//! a cut of the file that does not wait for reader processes (`blocks_truncation`): the pages
//! a held snapshot reaches stay pending, so the mark never goes below them, and the cuts it
//! then allows (many more shrinks while a snapshot is held) leave every snapshot whole —
//! `processes::a_shrink_waits_for_a_reader_process_of_an_older_snapshot` checks that rule.
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
/// Cases in CI (`RBOLT_TIER=ci`): 10 to 30 seconds on a loaded two-core machine, and enough
/// that every count in [`REQUIRED`] is above zero (shrinks while a snapshot is held, the
/// rarest, come about 9 times).
const CASES_CI: u64 = 100;
/// Cases under `cargo xtask soak`.
const CASES_SOAK: u64 = 300;

/// What must have happened at least once at the CI size for the run to prove anything: the
/// reader process's checks, and the writer's work while it held a snapshot.
const REQUIRED: &[(&str, &str)] = &[
    ("proc.commits-checked", "commits read in the reader process"),
    (
        "proc.newest-txids",
        "new transactions that read the writer's newest txid",
    ),
    ("proc.held-checks", "held snapshots checked"),
    (
        "proc.racing-snapshots",
        "transactions begun while the writer worked",
    ),
    (
        "proc.slots-checked",
        "reader tables the writer listed as the reader holds",
    ),
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

/// Rounds of a quarter of the cases run past the requested ones while a count of
/// [`REQUIRED`] is still zero (at the CI size or more): the check is of the generator, not of
/// luck.
const EXTRA_ROUNDS: u64 = 2;

/// What [`REQUIRED`] says of the counts still at zero.
fn unseen(tally: &Tally) -> Vec<&'static str> {
    REQUIRED
        .iter()
        .filter(|(event, _)| !tally.events.contains_key(event))
        .map(|(_, what)| *what)
        .collect()
}

#[test]
fn every_commit_reads_the_same_in_a_reader_process() {
    let cases = tier::size(
        "RBOLT_API_MODEL_PROCESS_CASES",
        CASES_FAST,
        CASES_CI,
        CASES_SOAK,
    );
    let mut seed = tier::number::<u64>("RBOLT_API_MODEL_PROCESS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let first_seed = seed;
    let started = std::time::Instant::now();
    let (mut rounds, mut ran) = (0, 0);
    loop {
        // Shown with a failure (and live under --nocapture): the seed replays the round.
        println!(
            "api-model-process: seed={seed} (RBOLT_API_MODEL_PROCESS_SEED={seed} replays this \
             round)"
        );
        let round = if rounds == 0 {
            cases
        } else {
            cases.div_ceil(4)
        };
        QuickCheck::new()
            .rng(Gen::from_size_and_seed(GEN_SIZE, seed))
            .tests(round)
            .max_tests(round)
            .quickcheck(property as fn(Case) -> TestResult);
        rounds += 1;
        ran += round;
        let missing = TOTAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tally| !unseen(tally).is_empty());
        if cases < CASES_CI || !missing || rounds > EXTRA_ROUNDS {
            break;
        }
        seed = seed.wrapping_add(1);
        println!("api-model-process: a count is still zero; a round of a quarter more cases");
    }
    let tally = TOTAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
        .expect("cases ran");
    assert_eq!(tally.cases, ran, "every case ran");
    let summary = tally.summary(first_seed, rounds);
    eprintln!(
        "{}",
        summary.replacen("api-model:", "api-model-process:", 1)
    );
    let counts: Vec<String> = REQUIRED
        .iter()
        .map(|(event, what)| format!("{what}={}", tally.events.get(event).unwrap_or(&0)))
        .collect();
    let skips: u64 = tally.skipped.values().sum();
    eprintln!(
        "api-model-process: cases={ran} in {:.1?}: {}; skipped={skips} (crashes need the \
         simulated file)",
        started.elapsed(),
        counts.join(", ")
    );
    if cases >= CASES_CI {
        let zero = unseen(&tally);
        assert!(zero.is_empty(), "the run never saw: {}", zero.join(", "));
    }
}
