//! Power loss: crash a [`SimFile`] at every write and sync of a seeded workload, take the
//! images a power failure could leave there (every sector of every unsynced write kept,
//! dropped, torn or garbled), reopen each, and demand a clean check and the state of the last
//! acknowledged commit or of the one in flight. Some recoveries crash again during their next
//! commit and are reopened once more.

use crate::model::{Tree, describe_difference, read_db};
use crate::parallel::{Report, run_units};
use crate::summary::{Failures, Summary};
use crate::verdict::{Acked, Failure, Reopens, Verdict};
use crate::workload::{Op, Workload, all_ops, commit_step, models};
use rbolt::storage::{CrashProfile, FaultPlan, OpKind, SimFile};
use rbolt::{Db, FreelistKind, Options};
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

/// How big a power-loss run is.
#[derive(Clone, Debug)]
pub struct PowerConfig {
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

/// What a power-loss run found.
#[derive(Clone, Debug, Default)]
pub struct PowerReport {
    /// Seeds run.
    pub seeds: u64,
    /// Crash points (write and sync operations) crashed at.
    pub crash_points: u64,
    /// Images reopened, compound ones included.
    pub images: u64,
    /// Images from a crash during the commit after a recovery.
    pub compound_images: u64,
    /// Images that reopened at the acknowledged state.
    pub at_acked: u64,
    /// Images that reopened at the in-flight commit's state.
    pub at_in_flight: u64,
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

impl Report for PowerReport {
    fn merge(&mut self, other: PowerReport) {
        self.seeds += other.seeds;
        self.crash_points += other.crash_points;
        self.images += other.images;
        self.compound_images += other.compound_images;
        self.at_acked += other.at_acked;
        self.at_in_flight += other.at_in_flight;
        self.init_garbage_refused += other.init_garbage_refused;
        self.reopens.merge(other.reopens);
        self.panics += other.panics;
        self.failures.extend(other.failures);
    }
}

impl PowerReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        let summary = Summary::new("power-loss")
            .field("seeds", self.seeds)
            .field("crash_points", self.crash_points)
            .field("images", self.images)
            .field("compound_images", self.compound_images)
            .field("at_acked", self.at_acked)
            .field("at_in_flight", self.at_in_flight)
            .field("init_garbage_refused", self.init_garbage_refused);
        self.reopens.fields(summary).field("panics", self.panics)
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

/// Runs the power-loss suite.
pub fn run(config: &PowerConfig) -> PowerReport {
    run_units(config.seeds, config.threads, |i| {
        run_seed(config.first_seed + i, config)
    })
}

/// The workload of one seed and what a run without faults does.
struct Reference {
    options: Options,
    name: &'static str,
    steps: u64,
    /// `ops[k - 1]`: step `k`, for `k` up to `steps + COMPOUND_STEPS_MAX`.
    ops: Vec<Vec<Op>>,
    /// `models[k]`: the state after step `k`.
    models: Vec<Tree>,
    /// The kind of every storage operation of the run.
    log: Vec<OpKind>,
}

fn reference(seed: u64, steps: u64) -> Result<Reference, String> {
    let (options, name) = variant(seed);
    let page_size = crate::workload::page_size_of(&options);
    let workload = Workload::new(seed, page_size);
    let ops = all_ops(&workload, steps + COMPOUND_STEPS_MAX);
    let models = models(&workload, steps + COMPOUND_STEPS_MAX);
    let sim = SimFile::new().map_err(|e| e.to_string())?;
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone())
        .map_err(|e| format!("reference open: {e}"))?;
    for (k, step_ops) in ops.iter().take(steps as usize).enumerate() {
        commit_step(&db, step_ops).map_err(|e| format!("reference step {}: {e}", k + 1))?;
    }
    let state = read_db(&db).map_err(|e| e.to_string())?;
    if state != models[steps as usize] {
        return Err(format!(
            "reference run differs from the model: {}",
            describe_difference(&models[steps as usize], &state)
        ));
    }
    Ok(Reference {
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
fn is_crash_point(kind: OpKind) -> bool {
    matches!(
        kind,
        OpKind::Write | OpKind::WriteVectored | OpKind::SyncData | OpKind::SyncAll | OpKind::Grow
    )
}

/// Runs every crash point of seed `seed`.
pub fn run_seed(seed: u64, config: &PowerConfig) -> PowerReport {
    let mut report = PowerReport {
        seeds: 1,
        ..PowerReport::default()
    };
    let reference = match reference(seed, config.steps) {
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
    }
    report
}

/// Runs the workload on a new file that crashes at operation `op`.
fn crash_run(reference: &Reference, op: u64) -> Result<(SimFile, Acked), String> {
    let sim = SimFile::new().map_err(|e| e.to_string())?;
    sim.set_fault_plan(FaultPlan::new().crash_at(op));
    let mut acked = Acked {
        step: None,
        in_flight: Some(0),
    };
    if let Ok(db) = Db::open_storage(Arc::new(sim.clone()), reference.options.clone()) {
        acked = Acked {
            step: Some(0),
            in_flight: None,
        };
        for step in 1..=reference.steps {
            match commit_step(&db, &reference.ops[step as usize - 1]) {
                Ok(()) => acked.step = Some(step),
                Err(_) => {
                    acked.in_flight = Some(step);
                    break;
                }
            }
        }
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

/// Reopens `image`, judges it, and (when `compound` holds a seed) crashes it again during its
/// next commit and judges that image too.
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
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let garbage = !is_torn_creation(&image, page_size);
        let sim = SimFile::from_image(image).expect("memfd");
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
    let mut acked = Acked {
        step: Some(recovered),
        in_flight: None,
    };
    let last = (recovered + COMPOUND_STEPS_MAX).min(reference.ops.len() as u64);
    for step in recovered + 1..=last {
        let result = catch_unwind(AssertUnwindSafe(|| {
            commit_step(&db, &reference.ops[step as usize - 1])
        }));
        match result {
            Ok(Ok(())) => acked.step = Some(step),
            Ok(Err(_)) => {
                acked.in_flight = Some(step);
                break;
            }
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
