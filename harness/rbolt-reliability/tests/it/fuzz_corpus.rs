//! The fuzz targets' logic over a deterministic corpus at CI size; under the soak, random
//! inputs for the soak's minutes as well.

use rbolt_reliability::fuzz::{open_bytes, open_bytes_corpus, ops, ops_corpus};
use rbolt_reliability::power::panic_message;
use rbolt_reliability::summary::{Failures, Summary, size, soak, soak_minutes};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// Runs `target` over `inputs`; returns how many panicked, with the first few messages.
fn run(target: fn(&[u8]), inputs: impl Iterator<Item = Vec<u8>>, name: &str) -> (u64, Failures) {
    let mut runs = 0;
    let mut failures = Failures::default();
    for (index, input) in inputs.enumerate() {
        runs += 1;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&input))) {
            failures.push(format!(
                "{name} input #{index} ({} bytes): {}",
                input.len(),
                panic_message(&panic)
            ));
        }
    }
    (runs, failures)
}

/// The fuzz targets' logic over a deterministic corpus (and, under `RBOLT_SOAK`, over random
/// inputs for `RBOLT_SOAK_MINUTES`).
#[test]
fn fuzz_corpus() {
    let started = Instant::now();
    let open_n = size("RBOLT_FUZZ_OPEN", 3000, 3000) as usize;
    let ops_n = size("RBOLT_FUZZ_OPS", 500, 1500) as usize;
    let (open_runs, mut failures) = run(
        open_bytes,
        open_bytes_corpus(1, open_n).into_iter(),
        "open-bytes",
    );
    let (mut ops_runs, ops_failures) = run(ops, ops_corpus(2, ops_n, 2000).into_iter(), "ops");
    failures.extend(ops_failures);
    let mut open_runs = open_runs;
    let mut random_runs = 0;
    if soak() {
        // Random inputs for the soak's minutes, counted from here (not from the start, or a
        // short soak would spend them all on the fixed corpus), and at least one round.
        let budget = Duration::from_secs_f64(soak_minutes() * 60.0);
        let random_started = Instant::now();
        let mut seed = 1000;
        while random_runs == 0 || random_started.elapsed() < budget {
            seed += 1;
            let (n, f) = run(
                open_bytes,
                open_bytes_corpus(seed, 500).into_iter(),
                "open-bytes",
            );
            open_runs += n;
            random_runs += n;
            failures.extend(f);
            let (n, f) = run(ops, ops_corpus(seed, 200, 6000).into_iter(), "ops");
            ops_runs += n;
            random_runs += n;
            failures.extend(f);
        }
    }
    Summary::new("fuzz")
        .field("open_bytes_inputs", open_runs)
        .field("ops_inputs", ops_runs)
        .field("random_inputs", random_runs)
        .field("failures", failures.total())
        .secs_since(started)
        .print();
    assert!(failures.is_empty(), "{failures}");
    assert!(
        !soak() || random_runs > 0,
        "the soak's random phase ran no input"
    );
}
