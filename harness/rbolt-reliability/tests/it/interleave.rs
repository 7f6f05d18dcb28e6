//! The deterministic-interleavings suite at CI size: seed 0 is the schedule of issue 21's
//! defect 2 (a `Db::sync` racing a commit without syncs), the others random scripts.

use rbolt_reliability::interleave::{InterleaveConfig, run};
use rbolt_reliability::summary::size;
use std::time::Instant;

#[test]
fn interleavings() {
    let config = InterleaveConfig {
        seeds: size("RBOLT_INTERLEAVE_SEEDS", 10, 200),
        first_seed: 0,
        actions: 4,
        threads: 2,
    };
    let started = Instant::now();
    let report = run(&config);
    report.summary().secs_since(started).print();
    assert!(report.is_clean(), "{}", report.failures);
    // The suite must have reached what it is about: schedules where the second thread had to
    // wait for the paused first, and power losses that fell back to the durable state.
    assert!(report.blocked > 0, "{}", report.summary());
    assert!(report.at_unsynced > 0, "{}", report.summary());
}
