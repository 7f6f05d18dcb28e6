//! The I/O-error suite at CI size: every storage call of a workload failed, every way.

use rbolt_reliability::io_errors::{IoConfig, run};
use rbolt_reliability::summary::size;
use std::time::Instant;

#[test]
fn io_errors() {
    let config = IoConfig {
        seeds: size("RBOLT_IO_SEEDS", 6, 60),
        first_seed: 0,
        steps_per_phase: size("RBOLT_IO_STEPS", 5, 8),
        threads: 2,
    };
    let started = Instant::now();
    let report = run(&config);
    report.summary().secs_since(started).print();
    assert!(report.is_clean(), "{}", report.failures);
    // The faults were injected and reached the caller (a plan that never fires would leave
    // a clean report too).
    assert!(report.runs > 0 && report.faults_fired > 0, "no fault fired");
    assert_eq!(report.surfaced, report.faults_fired, "faults not surfaced");
}
