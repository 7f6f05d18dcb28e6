//! The failpoint suite, alone in its process: `fail`'s configuration is process-global, so a
//! failpoint configured here would fail the commits of any suite running beside it.

use rbolt_reliability::failpoints::run;
use std::path::Path;
use std::time::Instant;

#[test]
fn failpoints() {
    // Seed 7 with two syncs per durable commit, seed 8 with one (issue 51).
    for seed in [7, 8] {
        let dir = tempfile::tempdir().expect("temp dir");
        let started = Instant::now();
        let report = run(
            Path::new(env!("CARGO_BIN_EXE_rbolt-crash-child")),
            dir.path(),
            seed,
        );
        report.summary().secs_since(started).print();
        assert!(
            report.is_clean(),
            "seed {seed}: {:#?}\n{}",
            report.census,
            report.failures
        );
    }
}
