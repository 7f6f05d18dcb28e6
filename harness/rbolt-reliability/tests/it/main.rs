//! The reliability suites at CI size. Each prints one summary line (see with
//! `cargo test -p rbolt-reliability -- --nocapture`) and asserts its failure counts are zero.

mod bugs;
mod fuzz_corpus;
mod hostile;
mod interleave;
mod io_errors;
mod kill_loop;
mod power_loss;

use rbolt_testkit::alloc::CountingAlloc;

/// The hostile-file checks run here by the fuzz corpus (and by `rbolt-crash-child`, which has
/// its own) assert that no file makes rbolt allocate more than it justifies.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;
