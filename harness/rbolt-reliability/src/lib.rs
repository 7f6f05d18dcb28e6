//! rbolt-reliability: the suites that show rbolt keeps committed transactions through crashes
//! and survives hostile files, on an ordinary machine, in CI, with figures.
//!
//! It owns the engines of six suites — a SIGKILL loop against a real file ([`kill`]), power
//! loss over a simulated file ([`power`], and with the reader table's lock file torn or missing,
//! [`power_lock`]), failpoints in the commit path ([`failpoints`]),
//! injected I/O errors ([`io_errors`]), corrupt and truncated files ([`hostile`]) and the fuzz
//! targets' logic ([`fuzz`]) — and what they share: a seeded workload ([`workload`]) with its
//! model ([`model`]), a bounded full scan ([`scan`]), how a reopened file is judged
//! ([`verdict`]), the worker threads ([`parallel`]), and the one summary line each suite
//! prints ([`summary`]). Their random choices come from `rbolt_fixtures::rng`, so every suite
//! is reproducible from its seed. The tests in `tests/` run them at the size of the test tier
//! (`RBOLT_TIER`: small by default, CI's sizes under `ci`, large under `soak`, which
//! `cargo xtask soak` sets). The child processes the suites start run the
//! `rbolt-crash-child` binary, whose entry points (`child`) are hidden from the API.
//!
//! It uses rbolt only through its public API and must never change it: a bug found here is
//! shown by a failing test and fixed by the facade's owner.

#[doc(hidden)]
pub mod child;
pub mod failpoints;
pub mod fuzz;
pub mod hostile;
pub mod interleave;
pub mod io_errors;
pub mod kill;
pub mod model;
pub mod parallel;
pub mod power;
pub mod power_lock;
pub mod scan;
pub mod summary;
pub mod vacuum;
pub mod verdict;
pub mod workload;
