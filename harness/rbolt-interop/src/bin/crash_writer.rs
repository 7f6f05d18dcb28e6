//! The rbolt process that the crash rounds of `go_interop` SIGKILL: `FILE PAGE_SIZE SEED
//! PLAN` (see `rbolt_interop::crash::child_main`). Exits 2 on a usage or write error.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(error) = rbolt_interop::crash::child_main(&args) {
        eprintln!("rbolt-interop-crash-writer: {error}");
        std::process::exit(2);
    }
}
