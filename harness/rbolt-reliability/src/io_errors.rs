//! I/O errors: the N-th storage call of a workload fails — once, or from then on — with
//! `ENOSPC` or `EIO`, or writes short; for every N. The error must reach the caller (never be
//! swallowed), a failed sync must poison the handle, any other failure must roll back and leave
//! the handle usable with its freelist as before, and the file — as the process sees it, and as
//! a power loss right after would leave it — must reopen, check clean and hold the last
//! acknowledged state (or the one in flight, when the failure came at or after its meta write).
//! Odd seeds commit two steps in three without syncs; after a failed sync the kernel may have
//! dropped any page written since the last good one (it reads back old, or zeros), and the
//! file is reopened so in the same boot and after a reboot: it must hold an acknowledged state
//! at or after the last durable one, whole.

use crate::model::{Tree, describe_difference, progress, read_db};
use crate::parallel::{Report, run_units};
use crate::power::{panic_message, variant};
use crate::summary::{Failures, Summary};
use crate::verdict::{Acked, Failure, Reopens, Verdict};
use crate::workload::{Op, Workload, all_ops, commit_step_with, models};
use rbolt::storage::{CrashProfile, FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Error, Options};
use rbolt_fixtures::rng::Rng;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// How big an I/O-error run is.
#[derive(Clone, Debug)]
pub struct IoConfig {
    /// Seeds `first_seed..first_seed + seeds`.
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Steps before the reopen in the middle of the workload, and again after it.
    pub steps_per_phase: u64,
    /// Worker threads.
    pub threads: usize,
}

crate::report! {
    /// What an I/O-error run found.
    pub struct IoReport {
        /// Workload runs, one per (operation, fault).
        pub runs: u64,
        /// Runs in which the fault fired.
        pub faults_fired: u64,
        /// Calls that returned the injected error.
        pub surfaced: u64,
        /// Calls during which the fault fired that still returned `Ok`.
        pub swallowed: u64,
        /// Handles poisoned after a failed sync or meta write, as they must be.
        pub poisoned: u64,
        /// Failed syncs or meta writes that left the handle unpoisoned.
        pub not_poisoned: u64,
        /// Failures that rolled back and left a working handle.
        pub rolled_back: u64,
        /// Rollbacks after which the freelist counts or the content differ from before.
        pub rollback_mismatches: u64,
        /// Images of a failed sync whose pages the kernel dropped (kept, old or zeros), in the
        /// same boot and after a reboot, reopened.
        pub failed_sync_images: u64,
        /// Images that lost commits made without syncs since the last durable one (a power
        /// loss, or pages a failed sync dropped), as `Durability::None` allows.
        pub unsynced_lost: u64,
        /// Reopens (in the middle of the workload, and of the file as the process sees it and
        /// as a power loss would leave it) that did not show what was acknowledged.
        pub reopens: Reopens,
        /// Panics.
        pub panics: u64,
        /// Descriptions of the failures.
        pub failures: Failures,
    }
}

impl IoReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        self.fields(Summary::new("io-errors"))
    }

    /// Whether every fault was handled as it must be.
    pub fn is_clean(&self) -> bool {
        self.swallowed == 0
            && self.not_poisoned == 0
            && self.rollback_mismatches == 0
            && self.reopens.is_clean()
            && self.panics == 0
            && self.failures.is_empty()
    }
}

/// One injected fault.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The operation fails once.
    At(FaultError),
    /// The operation and every later one fail.
    From(FaultError),
    /// A write writes this many bytes, then fails with `EIO`.
    Short(usize),
}

impl Fault {
    fn plan(self, op: u64) -> FaultPlan {
        match self {
            Fault::At(error) => FaultPlan::new().fail_at(op, error),
            Fault::From(error) => FaultPlan::new().fail_from(op, error),
            Fault::Short(len) => FaultPlan::new().short_write_at(op, len, FaultError::Io),
        }
    }

    /// Whether a call that ran operations `before..after` met the fault at `op`.
    fn fired_within(self, op: u64, before: u64, after: u64) -> bool {
        match self {
            Fault::At(_) | Fault::Short(_) => (before..after).contains(&op),
            Fault::From(_) => after > op && after > before,
        }
    }

    /// The first operation of `before..` that fails.
    fn first_failed(self, op: u64, before: u64) -> u64 {
        match self {
            Fault::From(_) => op.max(before),
            Fault::At(_) | Fault::Short(_) => op,
        }
    }
}

/// Runs the I/O-error suite.
pub fn run(config: &IoConfig) -> IoReport {
    run_units(config.seeds, config.threads, |i| {
        run_seed(config.first_seed + i, config)
    })
}

struct Seed {
    options: Options,
    phase_steps: u64,
    ops: Vec<Vec<Op>>,
    models: Vec<Tree>,
    /// Two steps in three commit without syncs (odd seeds): a failed sync then finds commits
    /// whose pages the kernel may drop.
    unsynced: bool,
}

impl Seed {
    /// How step `step` commits.
    fn durability(&self, step: u64) -> rbolt::Durability {
        if self.unsynced && !step.is_multiple_of(3) {
            rbolt::Durability::None
        } else {
            rbolt::Durability::Immediate
        }
    }
}

/// Runs every fault at every operation of seed `seed`'s workload.
pub fn run_seed(seed: u64, config: &IoConfig) -> IoReport {
    let mut report = IoReport::default();
    let (options, name) = variant(seed);
    let page_size = crate::workload::page_size_of(&options);
    let workload = Workload::new(seed, page_size);
    let steps = 2 * config.steps_per_phase;
    let setup = Seed {
        options,
        phase_steps: config.steps_per_phase,
        ops: all_ops(&workload, steps),
        models: models(&workload, steps),
        unsynced: seed % 2 == 1,
    };
    // The reference run: its operation log says which operation is which.
    let sim = SimFile::new().expect("memfd");
    let mut scratch = IoReport::default();
    let acked = workload_run(&setup, &sim, None, &mut scratch, "reference");
    if acked.step != Some(steps) || !scratch.failures.is_empty() {
        report.failures.push(format!(
            "seed {seed} ({name}): the reference run failed: {}",
            scratch.failures
        ));
        return report;
    }
    let log = sim.op_log();
    let mut rng = Rng::derive(seed, 0x10E4);
    for (op, kind) in log.iter().enumerate() {
        let op = op as u64;
        let mut faults = vec![
            Fault::At(FaultError::NoSpace),
            Fault::At(FaultError::Io),
            Fault::From(FaultError::NoSpace),
            Fault::From(FaultError::Io),
        ];
        if matches!(kind, OpKind::Write | OpKind::WriteVectored) {
            let len = *rng
                .pick(&[1usize, 79, 80, 512, 4096 + 100])
                .expect("not empty");
            faults.push(Fault::Short(len));
        }
        for fault in faults {
            let what = format!("seed {seed} ({name}) op {op} ({kind:?}) {fault:?}");
            report.runs += 1;
            let result = catch_unwind(AssertUnwindSafe(|| {
                let mut one = IoReport::default();
                let sim = SimFile::new().expect("memfd");
                sim.set_fault_plan(fault.plan(op));
                let acked = workload_run(&setup, &sim, Some((op, fault)), &mut one, &what);
                let fired = sim.op_count() > op;
                if fired {
                    one.faults_fired += 1;
                }
                let failed_sync = fired
                    && !matches!(fault, Fault::Short(_))
                    && matches!(kind, OpKind::SyncData | OpKind::SyncAll);
                verify_images(&setup, &sim, acked, failed_sync, &what, &mut one);
                one
            }));
            match result {
                Ok(one) => report.merge(one),
                Err(panic) => {
                    report.panics += 1;
                    report
                        .failures
                        .push(format!("{what}: panic: {}", panic_message(&panic)));
                }
            }
        }
    }
    report
}

/// The freelist's part of the stats, after the release a write transaction's start makes.
fn freelist_counts(db: &Db) -> Option<(usize, usize, usize, usize)> {
    // A write transaction's start publishes the freelist's figures.
    db.begin_write().ok()?.rollback();
    Some(crate::model::freelist_counts(&db.stats()))
}

/// Runs the workload (open, steps, reopen, steps) on `sim`, whose fault plan is `fault` at an
/// operation; returns what was acknowledged.
fn workload_run(
    setup: &Seed,
    sim: &SimFile,
    fault: Option<(u64, Fault)>,
    report: &mut IoReport,
    what: &str,
) -> Acked {
    let mut acked = Acked::new(None, Some(0));
    // Checks one call's result against the fault; returns whether it failed.
    let call = |report: &mut IoReport, before: u64, failed: Option<&Error>, call: &str| -> bool {
        let after = sim.op_count();
        let fired = fault.is_some_and(|(op, fault)| fault.fired_within(op, before, after));
        match (fired, failed) {
            (true, Some(_)) => report.surfaced += 1,
            (true, None) => {
                report.swallowed += 1;
                let (op, _) = fault.expect("fired");
                report.failures.push(format!(
                    "{what}: {call} returned Ok though operation {op} failed"
                ));
            }
            (false, Some(error)) => report.failures.push(format!(
                "{what}: {call} failed without an injected fault: {error}"
            )),
            (false, None) => {}
        }
        failed.is_some()
    };
    let mut next_step = 1;
    for phase in 0..2 {
        let before = sim.op_count();
        let db = Db::open_storage(Arc::new(sim.clone()), setup.options.clone());
        if call(
            report,
            before,
            db.as_ref().err(),
            &format!("open (phase {phase})"),
        ) {
            return acked;
        }
        let db = db.expect("checked");
        if acked.step.is_none() {
            acked = Acked::new(Some(0), None);
            if setup.unsynced {
                acked.durable = Some(0);
            }
        }
        if phase == 1 && setup.unsynced {
            // The open made the newest commit durable (or failed, above).
            acked.durable = acked.step;
        }
        if phase == 1 {
            // What the reopen shows must be what was acknowledged.
            let step = acked.step.expect("set");
            match read_db(&db) {
                Ok(state) if state == setup.models[step as usize] => {}
                Ok(state) => {
                    let detail = format!(
                        "the reopen in the middle shows step {}, acknowledged {step}: {}",
                        progress(&state),
                        describe_difference(&setup.models[step as usize], &state)
                    );
                    let failure = if progress(&state) < step {
                        Failure::Lost(detail)
                    } else {
                        Failure::Wrong(detail)
                    };
                    report.reopens.record(failure, what, &mut report.failures);
                    return acked;
                }
                Err(error) => {
                    let failure = Failure::Check(format!("read after the reopen: {error}"));
                    report.reopens.record(failure, what, &mut report.failures);
                    return acked;
                }
            }
        }
        let phase_end = next_step + setup.phase_steps;
        while next_step < phase_end {
            let step = next_step;
            let counts_before = freelist_counts(&db);
            let before = sim.op_count();
            let durability = setup.durability(step);
            let ops = &setup.ops[step as usize - 1];
            let result = commit_step_with(&db, ops, Some(durability));
            if !call(
                report,
                before,
                result.as_ref().err(),
                &format!("commit of step {step}"),
            ) {
                acked.step = Some(step);
                if setup.unsynced && durability == rbolt::Durability::Immediate {
                    acked.durable = Some(step);
                }
                next_step += 1;
                continue;
            }
            let Some((op, fault)) = fault else {
                return acked;
            };
            if !fault.fired_within(op, before, sim.op_count()) {
                // rbolt failed on its own (`call` recorded it): retrying the step would fail
                // the same way for ever.
                return acked;
            }
            let failed_op = fault.first_failed(op, before);
            let failed_kind = sim.op_log()[failed_op as usize];
            let poisoned = matches!(db.begin_read(), Err(Error::Poisoned));
            // A failed sync leaves the file's state unknown, and so does a failed meta write
            // (the only `write_all_at` of a commit): the handle must refuse to go on.
            let must_poison = matches!(failed_kind, OpKind::SyncData | OpKind::Write);
            if poisoned {
                report.poisoned += 1;
                acked.in_flight = Some(step);
                return acked;
            }
            if must_poison {
                report.not_poisoned += 1;
                report.failures.push(format!(
                    "{what}: step {step}: the handle is not poisoned after operation {failed_op} ({failed_kind:?}) failed"
                ));
                return acked;
            }
            report.rolled_back += 1;
            let counts_after = freelist_counts(&db);
            if counts_after != counts_before {
                report.rollback_mismatches += 1;
                report.failures.push(format!(
                    "{what}: step {step}: freelist counts {counts_before:?} before the failed commit, {counts_after:?} after"
                ));
            }
            let step_acked = acked.step.expect("set") as usize;
            match read_db(&db) {
                Ok(state) if state == setup.models[step_acked] => {}
                Ok(state) => {
                    report.rollback_mismatches += 1;
                    report.failures.push(format!(
                        "{what}: step {step}: after the rollback the handle shows {}",
                        describe_difference(&setup.models[step_acked], &state)
                    ));
                }
                Err(error) => {
                    report.rollback_mismatches += 1;
                    report.failures.push(format!(
                        "{what}: step {step}: read after the rollback: {error}"
                    ));
                }
            }
            if matches!(fault, Fault::From(_)) {
                // Every later operation fails too: the handle cannot get further.
                return acked;
            }
            // A fault that fired once: the retry must work (the loop runs the step again).
        }
        // The close is a durable point after commits without syncs: its failure must reach
        // the caller too (the reopen below then finds what the process left).
        let before = sim.op_count();
        let closed = db.close();
        let failed = call(
            report,
            before,
            closed.as_ref().err(),
            &format!("close (phase {phase})"),
        );
        if failed && matches!(fault, Some((_, Fault::From(_)))) {
            // Every later operation fails too: the reopen cannot get further.
            return acked;
        }
    }
    acked
}

/// Reopens the file as the next process of this boot sees it (every acknowledged commit
/// there), as a power loss now would leave it (the durable image, in a new boot), and, after a
/// failed sync, as this boot and the next see it when the kernel dropped pages the sync could
/// not write (each page written since the last good sync kept, old or zeros): those may lose
/// the commits made without syncs since the last durable one, never more, never a mix.
fn verify_images(
    setup: &Seed,
    sim: &SimFile,
    acked: Acked,
    failed_sync: bool,
    what: &str,
    report: &mut IoReport,
) {
    let strict = Acked {
        durable: None,
        ..acked
    };
    let mut images = vec![
        (sim.after_process_crash().expect("memfd"), "process", strict),
        (
            SimFile::from_image(sim.crash_image(CrashProfile::DropAll, 0)).expect("memfd"),
            "durable",
            acked,
        ),
    ];
    if failed_sync {
        for seed in 0..FAILED_SYNC_IMAGES {
            let dropped = sim.after_failed_sync(seed).expect("memfd");
            let reboot = dropped.crash_image(CrashProfile::KeepAll, 0);
            images.push((dropped, "after the failed sync, same boot", acked));
            let rebooted = SimFile::from_image(reboot).expect("memfd");
            images.push((rebooted, "after the failed sync, rebooted", acked));
        }
    }
    for (copy, which, acked) in images {
        let failed_sync = which.starts_with("after the failed sync");
        report.failed_sync_images += u64::from(failed_sync);
        let db = Db::open_storage(Arc::new(copy.clone()), setup.options.clone());
        let what = format!("{what}, {which} image");
        let verdict = acked.judge(&setup.models, db.as_ref());
        let recovered = acked.recovered(&verdict);
        judged(verdict, &what, report);
        // What the recovery made durable must be on disk: a power loss right after it (the
        // pages the failed sync left clean in the cache are then gone) keeps exactly the state
        // the reopen showed.
        if failed_sync && let (Ok(db), Some(recovered)) = (db, recovered) {
            drop(db);
            let after = SimFile::from_image(copy.crash_image(CrashProfile::DropAll, 0));
            let db = Db::open_storage(Arc::new(after.expect("memfd")), setup.options.clone());
            let then = Acked::new(Some(recovered), None);
            let what = format!("{what}, reopened, then a power loss");
            judged(then.judge(&setup.models, db.as_ref()), &what, report);
        }
    }
}

/// Counts a reopen's verdict.
fn judged(verdict: Verdict, what: &str, report: &mut IoReport) {
    match verdict {
        Verdict::Acked | Verdict::InFlight => {}
        // Commits without syncs lost to a power loss or dropped pages, as allowed.
        Verdict::Unsynced(_) => report.unsynced_lost += 1,
        Verdict::InitGarbage => unreachable!("only the power-loss suite classifies garbage"),
        Verdict::Failed(failure) => report.reopens.record(failure, what, &mut report.failures),
    }
}

/// Images per failed sync of each kind (same boot, rebooted), each from another seed.
const FAILED_SYNC_IMAGES: u64 = 3;
