//! The child process of the reliability suites: `kill-loop` (the kill loop's workload) and
//! `failpoint` (a commit that panics at a failpoint) and `hostile-batch` (corrupt files, any of
//! which may overflow the stack), plus `hostile-replay` and `hostile-walk` for whoever
//! reproduces a case. Exits 2 on a usage or setup error.

use rbolt_testkit::alloc::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(error) = rbolt_reliability::child::main(&args) {
        eprintln!("rbolt-crash-child: {error}");
        std::process::exit(2);
    }
}
