//! The power-loss suite at the tier's size (`RBOLT_TIER`): every cell of the matrix (durable commits, commits without
//! syncs, one-sync commits alone and mixed with the others, mixes, `Db::sync`, `no_sync`, auto-shrink, vacuum steps between commits), every
//! write, sync and truncation point of its seeds, 8 power-loss images and one crash of the
//! process each; and every crash point of a vacuum after a seeded workload.

use rbolt_reliability::power::{Mode, PowerConfig, run};
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
