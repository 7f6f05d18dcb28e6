//! The child process of the reliability suites: `kill-loop` (the kill loop's workload) and
//! `failpoint` (a commit that panics at a failpoint) and `hostile-batch` (corrupt files, any of
//! which may overflow the stack). Exits 2 on a usage or setup error.

use rbolt_reliability::alloc_track::TrackingAlloc;

#[global_allocator]
static ALLOC: TrackingAlloc = TrackingAlloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("kill-loop") => rbolt_reliability::kill::child_main(&args[1..]),
        Some("failpoint") => rbolt_reliability::failpoints::child_main(&args[1..]),
        Some("hostile-batch") => rbolt_reliability::hostile::batch_main(&args[1..]),
        Some("hostile-replay") => rbolt_reliability::hostile::replay_main(&args[1..]),
        Some("hostile-walk") => rbolt_reliability::hostile::walk_main(&args[1..]),
        _ => Err(
            "usage: rbolt-crash-child kill-loop|failpoint|hostile-batch|hostile-replay|hostile-walk ARGS..."
                .into(),
        ),
    };
    if let Err(error) = result {
        eprintln!("rbolt-crash-child: {error}");
        std::process::exit(2);
    }
}
