//! The power-loss suite at the tier's size (`RBOLT_TIER`): every cell of the matrix (durable commits, commits without
//! syncs, one-sync commits alone and mixed with the others, mixes, `Db::sync`, `no_sync`, auto-shrink, vacuum steps between commits), every
//! write, sync and truncation point of its seeds, 8 power-loss images and one crash of the
//! process each; every crash point of a vacuum after a seeded workload; and the cells with the
//! lock file missing, cut short, garbage or stale, a reader process attached after each reopen.

use rbolt_reliability::power::{Mode, PowerConfig, run};
use rbolt_reliability::power_lock::{LockConfig, LockDamage};
use rbolt_reliability::summary::{Tier, size};
use rbolt_reliability::vacuum::VacuumPowerConfig;
use rbolt_testkit::tier::is_set;
use std::time::Instant;

#[test]
fn power_loss() {
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut images = 0;
    for mode in Mode::ALL {
        let config = PowerConfig {
            mode,
            seeds: size("RBOLT_POWER_SEEDS", 4, 16, 60),
            first_seed: 0,
            steps: size("RBOLT_POWER_STEPS", 16, 16, 16),
            random_images: 2,
            threads: 2,
        };
        let cell = Instant::now();
        let report = run(&config);
        report.summary(mode).secs_since(cell).print();
        report.print_allowed();
        images += report.images;
        // Every cell reaches what it is about.
        let unsynced_expected = !matches!(mode, Mode::Immediate | Mode::OneSync);
        if unsynced_expected && report.at_unsynced == 0 {
            failures.push(format!(
                "{}: no image fell back to the durable state",
                mode.name()
            ));
        }
        if !report.is_clean() {
            failures.push(format!("{}: {}", mode.name(), report.failures));
        }
    }
    eprintln!("power-loss: {images} images in {:.0?}", started.elapsed());
    // The tier's seeds reach this many images; seeds set by hand may reach fewer.
    let images_min = Tier::current().pick(2_000, 10_000, 10_000);
    assert!(
        images >= images_min || is_set("RBOLT_POWER_SEEDS"),
        "{images} images, fewer than {images_min}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Power loss anywhere in an online vacuum, truncations included.
#[test]
fn power_loss_vacuum() {
    let config = VacuumPowerConfig {
        seeds: size("RBOLT_VACUUM_POWER_SEEDS", 8, 8, 120),
        first_seed: 0,
        steps: size("RBOLT_VACUUM_POWER_STEPS", 20, 20, 36),
        random_images: 1,
        threads: 2,
    };
    let started = Instant::now();
    let report = rbolt_reliability::vacuum::run(&config);
    report.summary().secs_since(started).print();
    assert!(report.is_clean(), "{}", report.failures);
    // The suite must have reached what it is about.
    assert!(report.pages_moved > 0, "{}", report.summary());
    assert!(report.truncation_crashes > 0, "{}", report.summary());
    assert!(
        report.unsynced_truncation_points > 0,
        "{}",
        report.summary()
    );
    assert!(report.longer_than_mark > 0, "{}", report.summary());
}

/// Power loss with the lock file missing, cut short, garbage or a stale copy (issue 50): every
/// crash point of the seeds, one image each, reopened as a real file beside the damaged lock
/// file; the writer rebuilds the table and a reader attaches beside it.
#[test]
fn power_loss_with_the_lock_file_torn_or_missing() {
    // tmpfs when there is one: every image is a real file, written and synced.
    let shm = std::path::Path::new("/dev/shm");
    let dir = match shm.is_dir() {
        true => tempfile::tempdir_in(shm),
        false => tempfile::tempdir(),
    }
    .expect("temp dir");
    let mut failures = Vec::new();
    for damage in LockDamage::ALL {
        let config = LockConfig {
            damage,
            seeds: size("RBOLT_POWER_LOCK_SEEDS", 4, 16, 60),
            first_seed: 0,
            steps: size("RBOLT_POWER_STEPS", 16, 16, 16),
            dir: dir.path().to_path_buf(),
            child: env!("CARGO_BIN_EXE_rbolt-crash-child").into(),
            threads: 2,
        };
        let started = Instant::now();
        let report = rbolt_reliability::power_lock::run(&config);
        report.summary(damage).secs_since(started).print();
        report.print_allowed();
        // Every image that reopened had a reader attach beside it; every cell drew both
        // durable and lost unsynced states.
        let reopened = report.at_acked + report.at_in_flight + report.at_unsynced;
        if report.readers_attached != reopened || report.at_unsynced == 0 {
            failures.push(format!(
                "{}: {}",
                damage.suite_name(),
                report.summary(damage)
            ));
        }
        if !report.is_clean() {
            failures.push(format!("{}: {}", damage.suite_name(), report.failures));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
