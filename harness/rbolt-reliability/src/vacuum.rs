//! Power loss during an online vacuum: a seeded workload fills a [`SimFile`] and deletes most
//! of it, then a vacuum (small steps, so many commits and truncations) runs with the file
//! crashing at each of its writes, syncs and length changes in turn. Every image a power
//! failure could leave there must open (never `Error::Truncated`: the file is cut only after
//! the meta with the lower mark is durable), check clean, and hold the content, which a vacuum
//! never changes. Crashes at a truncation (between the shrink's meta sync and the cut) and
//! images that lose an unsynced truncation are counted on their own.

use crate::model::{Tree, describe_difference, read_db};
use crate::parallel::run_units;
use crate::power::{panic_message, variant};
use crate::summary::{Failures, Summary};
use crate::workload::{BULK_BUCKET, Workload, all_ops, commit_step};
use rbolt::storage::{CrashProfile, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Options, VacuumOptions};
use rbolt_fixtures::rng::Rng;
use std::ops::ControlFlow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// Pages per vacuum step: small, so that a vacuum of a small file still takes many commits.
const STEP_PAGES: usize = 4;

/// How big a run is.
#[derive(Clone, Debug)]
pub struct VacuumPowerConfig {
    /// Seeds `first_seed..first_seed + seeds`; each picks its options (`power::variant`) and
    /// workload.
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Workload steps before the vacuum.
    pub steps: u64,
    /// Images per crash point for each random profile (`Random`, `Torn`, `Garbage`).
    pub random_images: u64,
    /// Worker threads.
    pub threads: usize,
}

crate::report! {
    /// What a run found.
    pub struct VacuumPowerReport {
        /// Seeds run.
        pub seeds: u64,
        /// Pages the reference vacuums moved.
        pub pages_moved: u64,
        /// Crash points (writes, syncs, length changes of the vacuum).
        pub crash_points: u64,
        /// Of those, crashes at a truncation: after the shrinking meta was synced, before the cut.
        pub truncation_crashes: u64,
        /// Crash points after a truncation and before the next sync, where an image may lose it.
        pub unsynced_truncation_points: u64,
        /// Images reopened.
        pub images: u64,
        /// Images whose file is longer than its high-water mark needs: a truncation not made, or
        /// lost (sound: the pages past the mark are free).
        pub longer_than_mark: u64,
        /// Images that did not open, did not check clean, or held other content.
        pub bad_images: u64,
        /// Panics anywhere.
        pub panics: u64,
        /// Descriptions of the failures.
        pub failures: Failures,
    }
}

impl VacuumPowerReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        self.fields(Summary::new("power-loss-vacuum"))
    }

    /// Whether every image reopened as it must.
    pub fn is_clean(&self) -> bool {
        self.bad_images == 0 && self.panics == 0 && self.failures.is_empty()
    }
}

/// Runs the suite.
pub fn run(config: &VacuumPowerConfig) -> VacuumPowerReport {
    run_units(config.seeds, config.threads, |i| {
        run_seed(config.first_seed + i, config)
    })
}

/// The file a seed vacuums: the workload's steps, then the bulk bucket and most of the rest
/// deleted, durable. Returns the image and its content.
fn prepare(seed: u64, steps: u64, options: &Options) -> Result<(Vec<u8>, Tree), String> {
    let page_size = crate::workload::page_size_of(options);
    let workload = Workload::new(seed, page_size);
    let sim = SimFile::new().map_err(|e| e.to_string())?;
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).map_err(|e| e.to_string())?;
    for (k, ops) in all_ops(&workload, steps).iter().enumerate() {
        commit_step(&db, ops).map_err(|e| format!("step {}: {e}", k + 1))?;
    }
    // Thin it out: the bulk values go, and every other value of the other buckets.
    db.update(|tx| {
        if tx.bucket(BULK_BUCKET)?.is_some() {
            let mut bulk = tx.bucket_mut(BULK_BUCKET)?.expect("checked");
            let keys: Vec<Vec<u8>> = bulk
                .as_bucket()
                .iter()
                .filter_map(|entry| entry.ok())
                .filter(|entry| entry.value().is_some())
                .map(|entry| entry.key().to_vec())
                .collect();
            for key in keys.iter().skip(keys.len() / 10) {
                bulk.delete(key)?;
            }
        }
        Ok(())
    })
    .map_err(|e: rbolt::Error| format!("thinning: {e}"))?;
    db.sync().map_err(|e| e.to_string())?;
    let model = read_db(&db).map_err(|e| e.to_string())?;
    drop(db);
    let image = sim.live_image().map_err(|e| e.to_string())?;
    Ok((image, model))
}

/// Runs every crash point of seed `seed`'s vacuum.
pub fn run_seed(seed: u64, config: &VacuumPowerConfig) -> VacuumPowerReport {
    let mut report = VacuumPowerReport {
        seeds: 1,
        ..VacuumPowerReport::default()
    };
    let (options, name) = variant(seed);
    let (image, model) = match prepare(seed, config.steps, &options) {
        Ok(found) => found,
        Err(error) => {
            report
                .failures
                .push(format!("seed {seed} ({name}): {error}"));
            return report;
        }
    };
    // The reference vacuum: its operations are the crash points.
    let reference = match SimFile::from_image(image.clone()) {
        Ok(sim) => sim,
        Err(error) => {
            report.failures.push(format!("seed {seed}: memfd: {error}"));
            return report;
        }
    };
    let vacuum = |db: &Db| {
        db.vacuum(VacuumOptions::default().pages_per_step(STEP_PAGES), |_| {
            ControlFlow::Continue(())
        })
    };
    let start = {
        let db = match Db::open_storage(Arc::new(reference.clone()), options.clone()) {
            Ok(db) => db,
            Err(error) => {
                report
                    .failures
                    .push(format!("seed {seed} ({name}): open: {error}"));
                return report;
            }
        };
        let start = reference.op_count() as usize;
        match vacuum(&db) {
            Ok(done) => report.pages_moved += done.pages_moved,
            Err(error) => {
                report
                    .failures
                    .push(format!("seed {seed} ({name}): vacuum: {error}"));
                return report;
            }
        }
        start
    };
    let log = reference.op_log();
    let mut rng = Rng::derive(seed, 0x7AC0);
    let mut truncated_unsynced = false;
    for (op, &kind) in log.iter().enumerate().skip(start) {
        match kind {
            OpKind::SyncData | OpKind::SyncAll => truncated_unsynced = false,
            OpKind::Shrink => {}
            OpKind::Write | OpKind::WriteVectored | OpKind::Grow => {}
            _ => continue,
        }
        report.crash_points += 1;
        report.truncation_crashes += u64::from(kind == OpKind::Shrink);
        report.unsynced_truncation_points += u64::from(truncated_unsynced);
        let what = format!("seed {seed} ({name}) crash at op {op} ({kind:?})");
        let sim = match crash_run(&image, &options, op as u64, &vacuum) {
            Ok(sim) => sim,
            Err(error) => {
                report.failures.push(format!("{what}: {error}"));
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
        for (profile, image_seed) in images {
            let crashed = sim.crash_image(profile, image_seed);
            let what = format!("{what}, {profile:?} image {image_seed:#x}");
            check_image(crashed, &options, &model, &what, &mut report);
        }
        if kind == OpKind::Shrink {
            truncated_unsynced = true;
        }
    }
    report
}

/// Vacuums the prepared image on a file that crashes at operation `op`.
fn crash_run(
    image: &[u8],
    options: &Options,
    op: u64,
    vacuum: &dyn Fn(&Db) -> rbolt::Result<rbolt::VacuumProgress>,
) -> Result<SimFile, String> {
    let sim = SimFile::from_image(image.to_vec()).map_err(|e| e.to_string())?;
    sim.set_fault_plan(FaultPlan::new().crash_at(op));
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone())
        .map_err(|e| format!("open: {e}"))?;
    if vacuum(&db).is_ok() {
        return Err("the vacuum succeeded on a crashed file".into());
    }
    drop(db);
    if sim.crashed_at() != Some(op) {
        return Err(format!(
            "crashed at {:?}: the vacuum is not deterministic",
            sim.crashed_at()
        ));
    }
    Ok(sim)
}

/// Reopens one image: it must open, check clean and hold `model`.
fn check_image(
    image: Vec<u8>,
    options: &Options,
    model: &Tree,
    what: &str,
    report: &mut VacuumPowerReport,
) {
    report.images += 1;
    let image_len = image.len() as u64;
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<bool, String> {
        let sim = SimFile::from_image(image).map_err(|e| e.to_string())?;
        let db =
            Db::open_storage(Arc::new(sim), options.clone()).map_err(|e| format!("open: {e}"))?;
        let (problems, high_water) = db
            .view(|tx| Ok((tx.check(), tx.meta().pgid)))
            .map_err(|e: rbolt::Error| e.to_string())?;
        if !problems.is_empty() {
            return Err(format!("check: {problems:?}"));
        }
        let found = read_db(&db).map_err(|e| format!("read: {e}"))?;
        if &found != model {
            return Err(format!("content: {}", describe_difference(model, &found)));
        }
        Ok(image_len > high_water * db.page_size() as u64)
    }));
    match outcome {
        Ok(Ok(longer)) => report.longer_than_mark += u64::from(longer),
        Ok(Err(error)) => {
            report.bad_images += 1;
            report.failures.push(format!("{what}: {error}"));
        }
        Err(panic) => {
            report.panics += 1;
            report
                .failures
                .push(format!("{what}: panic: {}", panic_message(&panic)));
        }
    }
}
