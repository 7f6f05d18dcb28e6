//! The power-loss suite at CI size: every write and sync point of 24 seeds, 8 images each;
//! and every crash point of a vacuum after a seeded workload.

use rbolt_reliability::power::{PowerConfig, run};
use rbolt_reliability::summary::size;
use rbolt_reliability::vacuum::VacuumPowerConfig;
use std::time::Instant;

#[test]
fn power_loss() {
    let config = PowerConfig {
        seeds: size("RBOLT_POWER_SEEDS", 24, 240),
        first_seed: 0,
        steps: size("RBOLT_POWER_STEPS", 16, 16),
        random_images: 2,
        threads: 2,
    };
    let started = Instant::now();
    let report = run(&config);
    report.summary().secs_since(started).print();
    report.print_allowed();
    assert!(report.images >= 10_000 || std::env::var("RBOLT_POWER_SEEDS").is_ok());
    assert!(report.is_clean(), "{}", report.failures);
}

/// Power loss anywhere in an online vacuum, truncations included.
#[test]
fn power_loss_vacuum() {
    let config = VacuumPowerConfig {
        seeds: size("RBOLT_VACUUM_POWER_SEEDS", 8, 120),
        first_seed: 0,
        steps: size("RBOLT_VACUUM_POWER_STEPS", 20, 36),
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
