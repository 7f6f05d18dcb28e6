//! Power loss: crash a [`SimFile`] at every write, sync and truncation of a seeded workload,
//! take the images a power failure could leave there (every sector of every unsynced write
//! kept, dropped, torn or garbled) and the file a crash of the process leaves (every write
//! there, same boot; a write it stopped that may have been a copy into the mapping cut at
//! 8-byte boundaries), reopen each, and demand a clean check and the content of one committed
//! state: after a power loss, the last durable one or a later acknowledged one, or the one in
//! flight; after a crash of the process, the last acknowledged one or the one in flight. Some
//! recoveries crash again during their next commit and are reopened once more.
//!
//! The suite is a matrix: each [`Mode`] is a way of committing (durable commits only, commits
//! without syncs only, a mix, `Db::sync` between them, `Options::no_sync`, auto-shrink, vacuum
//! steps between commits), and each runs over the options of [`variant`] (page sizes, both
//! freelist kinds, `no_freelist_sync`, `no_grow_sync`). One summary line per mode.

use crate::model::{Tree, describe_difference, read_db};
use crate::parallel::run_units;
use crate::summary::{Failures, Summary};
use crate::verdict::{Acked, Failure, Reopens, Verdict};
use crate::workload::{Op, Workload, all_ops, commit_step_with, models};
use rbolt::storage::{CrashProfile, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Durability, FreelistKind, Options};
use rbolt_fixtures::rng::Rng;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// Why images of an interrupted creation whose sectors came back as garbage may be refused:
/// printed with the count, so that the one allowed failure class is never silent.
pub const INIT_GARBAGE_REASON: &str = "a new file whose one creation write was never synced \
    and came back with random bytes cannot be told from a file of another program, so rbolt \
    refuses to overwrite it; every image of a creation cut short without garbage must open";

/// Steps run past the workload's end by the compound crashes.
const COMPOUND_STEPS_MAX: u64 = 3;

/// A way of committing: one cell of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every commit durable (`Durability::Immediate`).
    Immediate,
    /// Every commit without syncs (`Durability::None`).
    NoneOnly,
    /// Each commit durable or not, at random.
    Mixed,
    /// Commits without syncs, a `Db::sync` after some.
    Sync,
    /// `Options::no_sync`: commits without syncs by default, some durable, some `Db::sync`s.
    NoSyncOption,
    /// `Options::auto_shrink`, commits durable or not at random.
    AutoShrink,
    /// Commits durable or not at random, a vacuum step after some.
    Vacuum,
    /// Every commit durable with one sync (`Durability::OneSync`, issue 51).
    OneSync,
    /// Each commit with one sync, two or none at random, a `Db::sync` or a vacuum step after
    /// some.
    OneSyncMixed,
}

/// What follows a step's commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Nothing.
    Nothing,
    /// `Db::sync`.
    Sync,
    /// `Db::vacuum_step` of a few pages.
    VacuumStep,
}

impl Mode {
    /// Every cell.
    pub const ALL: [Mode; 9] = [
        Mode::Immediate,
        Mode::NoneOnly,
        Mode::Mixed,
        Mode::Sync,
        Mode::NoSyncOption,
        Mode::AutoShrink,
        Mode::Vacuum,
        Mode::OneSync,
        Mode::OneSyncMixed,
    ];

    /// Its name in summary lines.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Immediate => "immediate",
            Mode::NoneOnly => "none",
            Mode::Mixed => "mixed",
            Mode::Sync => "none+sync",
            Mode::NoSyncOption => "no_sync",
            Mode::AutoShrink => "auto_shrink",
            Mode::Vacuum => "vacuum",
            Mode::OneSync => "one_sync",
            Mode::OneSyncMixed => "one_sync+mixed",
        }
    }

    /// The name of its summary line.
    pub fn suite_name(self) -> &'static str {
        match self {
            Mode::Immediate => "power-loss[immediate]",
            Mode::NoneOnly => "power-loss[none]",
            Mode::Mixed => "power-loss[mixed]",
            Mode::Sync => "power-loss[none+sync]",
            Mode::NoSyncOption => "power-loss[no_sync]",
            Mode::AutoShrink => "power-loss[auto_shrink]",
            Mode::Vacuum => "power-loss[vacuum]",
            Mode::OneSync => "power-loss[one_sync]",
            Mode::OneSyncMixed => "power-loss[one_sync+mixed]",
        }
    }

    /// The options of seed `seed` in this mode.
    pub fn options(self, seed: u64) -> (Options, &'static str) {
        let (options, name) = variant(seed);
        let options = match self {
            Mode::NoSyncOption => options.no_sync(true),
            Mode::AutoShrink => options.auto_shrink(true),
            _ => options,
        };
        (options, name)
    }

    /// How step `step` of seed `seed` commits, and what follows it.
    pub fn plan(self, seed: u64, step: u64) -> (Durability, After) {
        let mut rng = Rng::derive(seed ^ 0xD0_5A7E, step);
        let coin = rng.coin();
        match self {
            Mode::OneSync => return (Durability::OneSync, After::Nothing),
            Mode::OneSyncMixed => {
                let durability = match rng.below(3) {
                    0 => Durability::OneSync,
                    1 => Durability::Immediate,
                    _ => Durability::None,
                };
                let after = match rng.below(6) {
                    0 => After::Sync,
                    1 => After::VacuumStep,
                    _ => After::Nothing,
                };
                return (durability, after);
            }
            _ => {}
        }
        let (none, after) = match self {
            Mode::Immediate => (false, After::Nothing),
            Mode::NoneOnly => (true, After::Nothing),
            Mode::Mixed | Mode::AutoShrink => (coin, After::Nothing),
            Mode::Sync => (true, after_if(rng.chance(1, 3), After::Sync)),
            Mode::NoSyncOption => (!rng.chance(1, 5), after_if(rng.chance(1, 5), After::Sync)),
            Mode::Vacuum => (coin, after_if(rng.chance(1, 3), After::VacuumStep)),
            Mode::OneSync | Mode::OneSyncMixed => unreachable!("planned above"),
        };
        let durability = if none {
            Durability::None
        } else {
            Durability::Immediate
        };
        (durability, after)
    }
}

fn after_if(yes: bool, after: After) -> After {
    if yes { after } else { After::Nothing }
}

/// Pages a vacuum step between commits moves: few, so that steps stay small.
const VACUUM_STEP_PAGES: usize = 4;

/// Runs step `step` of `mode` and seed `seed`: its commit, then what follows it. Updates
/// `acked` as each part returns `Ok`; returns the first error.
pub(crate) fn run_step(
    db: &Db,
    mode: Mode,
    seed: u64,
    step: u64,
    ops: &[Op],
    acked: &mut Acked,
) -> rbolt::Result<()> {
    let (durability, after) = mode.plan(seed, step);
    commit_step_with(db, ops, Some(durability)).inspect_err(|_| acked.in_flight = Some(step))?;
    if acked.durable.is_none() {
        acked.durable = acked.step;
    }
    acked.step = Some(step);
    if durability != Durability::None {
        acked.durable = Some(step);
    }
    match after {
        After::Nothing => {}
        After::Sync => {
            db.sync()?;
            acked.durable = Some(step);
        }
        After::VacuumStep => {
            if db.vacuum_step(VACUUM_STEP_PAGES)?.committed {
                acked.durable = Some(step);
            }
        }
    }
    Ok(())
}

/// How big a power-loss run is.
#[derive(Clone, Debug)]
pub struct PowerConfig {
    /// The cell.
    pub mode: Mode,
    /// Seeds `first_seed..first_seed + seeds`; each seed picks its options and workload.
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Workload steps (commits) per seed.
    pub steps: u64,
    /// Images per crash point for each of the random profiles (`Random`, `Torn`, `Garbage`);
    /// `KeepAll` and `DropAll` give one each.
    pub random_images: u64,
    /// Worker threads.
    pub threads: usize,
}

crate::report! {
    /// What a power-loss run found.
    pub struct PowerReport {
        /// Seeds run.
        pub seeds: u64,
        /// Crash points (write and sync operations) crashed at.
        pub crash_points: u64,
        /// Images reopened, compound ones included.
        pub images: u64,
        /// Files a crash of the process left (same boot, every write there), reopened; each must
        /// hold the last acknowledged state or the one in flight.
        pub process_images: u64,
        /// Of those, files whose crash stopped a write that may have been a copy into the
        /// mapping, cut at an 8-byte boundary (a kill can stop a copy anywhere).
        pub torn_copy_images: u64,
        /// Images from a crash during the commit after a recovery.
        pub compound_images: u64,
        /// Images that reopened at the acknowledged state.
        pub at_acked: u64,
        /// Images that reopened at the in-flight commit's state.
        pub at_in_flight: u64,
        /// Power-loss images that reopened at an acknowledged state older than the last one: the
        /// last durable one or one after it, the later commits (all without syncs) lost, as
        /// `Durability::None` allows.
        pub at_unsynced: u64,
        /// Images of a crash during a new file's creation whose creation write came back with
        /// garbage sectors, refused at open (the one allowed case; see [`INIT_GARBAGE_REASON`]).
        pub init_garbage_refused: u64,
        /// Images that did not reopen as they must (a creation cut short included, unless it
        /// is the allowed case).
        pub reopens: Reopens,
        /// Panics anywhere in reopening, checking or reading.
        pub panics: u64,
        /// Descriptions of the failures.
        pub failures: Failures,
    }
}

impl PowerReport {
    /// The suite's summary line for the cell `mode`.
    pub fn summary(&self, mode: Mode) -> Summary {
        self.fields(Summary::new(mode.suite_name()))
    }

    /// Prints the reason for the allowed class, when it occurred (after the summary line).
    pub fn print_allowed(&self) {
        if self.init_garbage_refused > 0 {
            eprintln!(
                "power-loss: allowed init_garbage_refused={}: {INIT_GARBAGE_REASON}",
                self.init_garbage_refused
            );
        }
    }

    /// Whether every image recovered as it must.
    pub fn is_clean(&self) -> bool {
        self.reopens.is_clean() && self.panics == 0 && self.failures.is_empty()
    }
}

/// The options seed `seed` runs with, and their name for failure messages.
pub fn variant(seed: u64) -> (Options, &'static str) {
    let options = Options::default();
    match seed % 6 {
        0 => (options, "default"),
        1 => (options.page_size(1024), "page-1k"),
        2 => (options.freelist(FreelistKind::Span), "span"),
        3 => (options.no_freelist_sync(true), "no-freelist-sync"),
        4 => (options.no_grow_sync(true), "no-grow-sync"),
        _ => (
            options
                .page_size(512)
                .freelist(FreelistKind::Span)
                .no_freelist_sync(true),
            "page-512-span-no-freelist-sync",
        ),
    }
}

/// Runs one cell of the power-loss suite.
pub fn run(config: &PowerConfig) -> PowerReport {
    run_units(config.seeds, config.threads, |i| {
        run_seed(config.first_seed + i, config)
    })
}

/// The workload of one seed and what a run without faults does.
pub(crate) struct Reference {
    pub(crate) mode: Mode,
    pub(crate) seed: u64,
    pub(crate) options: Options,
    pub(crate) name: &'static str,
    pub(crate) steps: u64,
    /// `ops[k - 1]`: step `k`, for `k` up to `steps + COMPOUND_STEPS_MAX`.
    pub(crate) ops: Vec<Vec<Op>>,
    /// `models[k]`: the state after step `k`.
    pub(crate) models: Vec<Tree>,
    /// The kind of every storage operation of the run.
    pub(crate) log: Vec<OpKind>,
}

pub(crate) fn reference(mode: Mode, seed: u64, steps: u64) -> Result<Reference, String> {
    let (options, name) = mode.options(seed);
    let page_size = crate::workload::page_size_of(&options);
    let workload = Workload::new(seed, page_size);
    let ops = all_ops(&workload, steps + COMPOUND_STEPS_MAX);
    let models = models(&workload, steps + COMPOUND_STEPS_MAX);
    let sim = SimFile::new().map_err(|e| e.to_string())?;
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone())
        .map_err(|e| format!("reference open: {e}"))?;
    let mut acked = Acked::new(Some(0), None);
    for (k, step_ops) in ops.iter().take(steps as usize).enumerate() {
        let step = k as u64 + 1;
        run_step(&db, mode, seed, step, step_ops, &mut acked)
            .map_err(|e| format!("reference step {step}: {e}"))?;
    }
    let state = read_db(&db).map_err(|e| e.to_string())?;
    if state != models[steps as usize] {
        return Err(format!(
            "reference run differs from the model: {}",
            describe_difference(&models[steps as usize], &state)
        ));
    }
    // The run ends with the handle's close, whose operations are crash points too: it makes
    // commits made without syncs durable and, under `auto_shrink`, cuts the file's growth
    // room off.
    drop(db);
    Ok(Reference {
        mode,
        seed,
        options,
        name,
        steps,
        ops,
        models,
        log: sim.op_log(),
    })
}

/// Whether a crash at an operation of this kind is a crash point: a write, a sync or a length
/// change.
pub(crate) fn is_crash_point(kind: OpKind) -> bool {
    matches!(
        kind,
        OpKind::Write
            | OpKind::WriteVectored
            | OpKind::SyncData
            | OpKind::SyncAll
            | OpKind::Grow
            | OpKind::Shrink
    )
}

/// Runs every crash point of seed `seed`.
pub fn run_seed(seed: u64, config: &PowerConfig) -> PowerReport {
    let mut report = PowerReport {
        seeds: 1,
        ..PowerReport::default()
    };
    let reference = match reference(config.mode, seed, config.steps) {
        Ok(reference) => reference,
        Err(error) => {
            report.failures.push(format!("seed {seed}: {error}"));
            return report;
        }
    };
    let mut rng = Rng::derive(seed, 0xC0A5);
    for (op, kind) in reference.log.iter().enumerate() {
        if !is_crash_point(*kind) {
            continue;
        }
        report.crash_points += 1;
        let op = op as u64;
        let (sim, acked) = match crash_run(&reference, op) {
            Ok(found) => found,
            Err(error) => {
                report.failures.push(format!(
                    "seed {seed} ({}) crash at op {op}: {error}",
                    reference.name
                ));
                continue;
            }
        };
        let mut images = vec![(CrashProfile::KeepAll, 0), (CrashProfile::DropAll, 0)];
        for profile in [
            CrashProfile::Random,
            CrashProfile::Torn,
            CrashProfile::Garbage,
        ] {
            for _ in 0..config.random_images {
                images.push((profile, rng.next_u64()));
            }
        }
        // One image per crash point recovers and then crashes again in its next commit.
        let compound_at = rng.index(images.len());
        for (index, (profile, image_seed)) in images.into_iter().enumerate() {
            let image = sim.crash_image(profile, image_seed);
            let what = format!(
                "seed {seed} ({}) crash at op {op} ({kind:?}), {profile:?} image {image_seed:#x}",
                reference.name
            );
            let compound = (index == compound_at).then(|| rng.next_u64());
            check_image(&reference, image, acked, compound, &what, &mut report);
        }
        // The process crashed instead: the page cache keeps every write, and every
        // acknowledged commit must be there, those without syncs too. A write the crash
        // stopped that may have been a copy into the mapping is cut at 8-byte boundaries too:
        // a kill can stop a copy anywhere.
        let all = Acked {
            durable: None,
            ..acked
        };
        let torn_cuts = sim.torn_copy_len().map_or(Vec::new(), |len| {
            let random = 8 * (1 + rng.below((len / 8).max(1) as u64) as usize);
            vec![8, len / 16 * 8, len.saturating_sub(8), random]
        });
        let cuts = std::iter::once(None).chain(torn_cuts.into_iter().map(Some));
        for cut in cuts {
            let next = match cut {
                None => sim.after_process_crash(),
                Some(cut) => sim.after_process_crash_torn(cut),
            };
            match next {
                Ok(next) => {
                    let what = format!(
                        "seed {seed} ({}) crash of the process at op {op} ({kind:?}), the copy \
                         it stopped cut at {cut:?}",
                        reference.name
                    );
                    report.process_images += 1;
                    report.torn_copy_images += u64::from(cut.is_some());
                    check_sim(&reference, next, true, all, None, &what, &mut report);
                }
                Err(error) => report.failures.push(format!("seed {seed}: {error}")),
            }
        }
    }
    report
}

/// Runs the workload on a new file that crashes at operation `op`.
pub(crate) fn crash_run(reference: &Reference, op: u64) -> Result<(SimFile, Acked), String> {
    let sim = SimFile::new().map_err(|e| e.to_string())?;
    sim.set_fault_plan(FaultPlan::new().crash_at(op));
    let mut acked = Acked::new(None, Some(0));
    if let Ok(db) = Db::open_storage(Arc::new(sim.clone()), reference.options.clone()) {
        acked = Acked::new(Some(0), None);
        for step in 1..=reference.steps {
            let ops = &reference.ops[step as usize - 1];
            let ran = run_step(&db, reference.mode, reference.seed, step, ops, &mut acked);
            if ran.is_err() {
                break;
            }
        }
        // The close, as the reference run's (after a crash it writes nothing: the file has
        // crashed).
        drop(db);
    }
    if sim.crashed_at() != Some(op) {
        return Err(format!(
            "the run did not crash at op {op} (crashed at {:?}): the workload is not deterministic",
            sim.crashed_at()
        ));
    }
    let log = sim.op_log();
    if log.get(op as usize) != reference.log.get(op as usize) {
        return Err(format!(
            "op {op} is {:?}, the reference run's is {:?}",
            log.get(op as usize),
            reference.log.get(op as usize)
        ));
    }
    Ok((sim, acked))
}

/// Whether `image` is something a creation cut short by a crash can leave: every byte zero or
/// what creation writes there (sectors kept, dropped or torn, but no garbage).
pub(crate) fn is_torn_creation(image: &[u8], page_size: usize) -> bool {
    let prefixes = rbolt_page::empty_db_prefixes(page_size);
    image.len() <= rbolt_page::EMPTY_DB_PAGES * page_size
        && image.iter().enumerate().all(|(offset, &have)| {
            let (page, within) = (offset / page_size, offset % page_size);
            have == 0 || prefixes[page].get(within) == Some(&have)
        })
}

/// Reopens `image` (a power loss), judges it, and (when `compound` holds a seed) crashes it
/// again during its next commit and judges that image too.
fn check_image(
    reference: &Reference,
    image: Vec<u8>,
    acked: Acked,
    compound: Option<u64>,
    what: &str,
    report: &mut PowerReport,
) {
    report.images += 1;
    let page_size = crate::workload::page_size_of(&reference.options);
    let garbage = !is_torn_creation(&image, page_size);
    match SimFile::from_image(image) {
        Ok(sim) => check_sim(reference, sim, garbage, acked, compound, what, report),
        Err(error) => report.failures.push(format!("{what}: {error}")),
    }
}

/// Reopens the file `sim`, judges it, and (when `compound` holds a seed) crashes it again
/// during its next commit and judges that image too. `garbage`: a refused creation is the
/// allowed class.
fn check_sim(
    reference: &Reference,
    sim: SimFile,
    garbage: bool,
    acked: Acked,
    compound: Option<u64>,
    what: &str,
    report: &mut PowerReport,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let db = Db::open_storage(Arc::new(sim.clone()), reference.options.clone());
        let verdict = match acked.judge(&reference.models, db.as_ref()) {
            Verdict::Failed(Failure::InitError(_)) if garbage => Verdict::InitGarbage,
            verdict => verdict,
        };
        (sim, db.ok(), verdict)
    }));
    let (sim, db, verdict) = match outcome {
        Ok(found) => found,
        Err(panic) => {
            report.panics += 1;
            report
                .failures
                .push(format!("{what}: panic: {}", panic_message(&panic)));
            return;
        }
    };
    let recovered = acked.recovered(&verdict);
    match verdict {
        Verdict::Acked => report.at_acked += 1,
        Verdict::InFlight => report.at_in_flight += 1,
        Verdict::Unsynced(_) => report.at_unsynced += 1,
        Verdict::InitGarbage => report.init_garbage_refused += 1,
        Verdict::Failed(failure) => report.reopens.record(failure, what, &mut report.failures),
    }
    if let (Some(seed), Some(step), Some(db)) = (compound, recovered, db) {
        compound_crash(reference, sim, db, step, seed, what, report);
    }
}

/// The recovered database commits the next steps with its file crashing at a random
/// operation; the image of that crash must recover too.
fn compound_crash(
    reference: &Reference,
    sim: SimFile,
    db: Db,
    recovered: u64,
    seed: u64,
    what: &str,
    report: &mut PowerReport,
) {
    let mut rng = Rng::new(seed);
    let crash_op = sim.op_count() + rng.below(10);
    sim.set_fault_plan(FaultPlan::new().crash_at(crash_op));
    let mut acked = Acked::new(Some(recovered), None);
    let last = (recovered + COMPOUND_STEPS_MAX).min(reference.ops.len() as u64);
    for step in recovered + 1..=last {
        let ops = &reference.ops[step as usize - 1];
        let result = catch_unwind(AssertUnwindSafe(|| {
            run_step(&db, reference.mode, reference.seed, step, ops, &mut acked)
        }));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(_)) => break,
            Err(panic) => {
                report.panics += 1;
                report.failures.push(format!(
                    "{what}: panic in the commit after recovery: {}",
                    panic_message(&panic)
                ));
                return;
            }
        }
    }
    drop(db);
    let profile = *rng.pick(&CrashProfile::ALL).expect("not empty");
    let image_seed = rng.next_u64();
    let image = sim.crash_image(profile, image_seed);
    report.compound_images += 1;
    let what = format!(
        "{what}, recovered to step {recovered}, crashed again at op {crash_op}, {profile:?} image {image_seed:#x}"
    );
    check_image(reference, image, acked, None, &what, report);
}

/// The message of a caught panic.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic>".into()
    }
}
