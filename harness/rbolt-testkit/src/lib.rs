//! Test support every rbolt crate may lean on, with no dependencies of its own: [`alloc`], the
//! one counting global allocator (per-thread and process-wide allocation counts, and the
//! largest single request), [`rng`], the seeded generator tests, suites and benchmarks
//! draw from, [`fnv`], the FNV-1a hash test support digests and derives with, and
//! [`deadline`], the hang guard.
//! (The tidy test lives in `xtask`.)
//!
//! It is `publish = false` and only ever a dev-dependency (or a dependency of the benchmark
//! and reliability harnesses); no library crate links it. The allocator is the only `unsafe`
//! outside the facade's storage layer.

pub mod alloc;
pub mod deadline;
pub mod fnv;
pub mod rng;
