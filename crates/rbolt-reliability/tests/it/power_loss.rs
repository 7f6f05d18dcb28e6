//! The power-loss suite at CI size: every write and sync point of 24 seeds, 8 images each.

use rbolt_reliability::power::{PowerConfig, run};
use rbolt_reliability::summary::size;
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
