//! SIGKILL tests of rbolt-raft's storage: a parent process kills children that write to a
//! store, then reopens it and compares it with what the children reported.
//!
//! This is a test target without libtest's harness (`harness = false` in Cargo.toml) because
//! the same binary is also the child: started with `--child ...` it runs the child's write
//! loop until it is killed. Started by `cargo test` it runs each test below in turn (the
//! arguments that are not flags filter them by name, as libtest's do) and ends with libtest's
//! summary line.

mod rounds;

#[path = "../it/common.rs"]
mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;
use std::time::Instant;

/// The tests of this target, by name.
const TESTS: &[(&str, fn())] = &[
    (
        "sigkill_during_log_and_state_writes_loses_nothing_acknowledged",
        rounds::sigkill_during_log_and_state_writes_loses_nothing_acknowledged,
    ),
    (
        "sigkill_during_snapshot_install_leaves_old_or_new_state",
        rounds::sigkill_during_snapshot_install_leaves_old_or_new_state,
    ),
    (
        "sigkill_during_first_open_leaves_a_store_that_opens",
        rounds::sigkill_during_first_open_leaves_a_store_that_opens,
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        rounds::child(&args[1..]);
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "--list") {
        for (name, _) in TESTS {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    // libtest's flags mean nothing here; an `--ignored` run has nothing to run.
    let ignored_only = args.iter().any(|a| a == "--ignored");
    let exact = args.iter().any(|a| a == "--exact");
    let filters: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let selected: Vec<_> = TESTS
        .iter()
        .filter(|_| !ignored_only)
        .filter(|(name, _)| {
            filters.is_empty()
                || filters
                    .iter()
                    .any(|f| if exact { name == f } else { name.contains(f) })
        })
        .collect();
    let started = Instant::now();
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut failed) = (0, Vec::new());
    for (name, test) in &selected {
        match catch_unwind(AssertUnwindSafe(test)) {
            Ok(()) => {
                println!("test {name} ... ok");
                passed += 1;
            }
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    let filtered = TESTS.len() - selected.len();
    let result = if failed.is_empty() { "ok" } else { "FAILED" };
    if !failed.is_empty() {
        println!("\nfailures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {result}. {passed} passed; {} failed; 0 ignored; 0 measured; \
         {filtered} filtered out; finished in {:.2}s\n",
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
