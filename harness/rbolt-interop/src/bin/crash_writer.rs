//! The rbolt process that the crash rounds of `go_interop` SIGKILL: `FILE PAGE_SIZE SEED
//! PLAN` (see `rbolt_interop::crash::child_main`); and, as `read-beside FILE`, the reader
//! process of its round with a reader beside the writer (`rbolt_interop::beside`). Exits 2 on
//! a usage or write error.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("read-beside") => rbolt_interop::beside::reader_main(&args[1..]),
        _ => rbolt_interop::crash::child_main(&args),
    };
    if let Err(error) = result {
        eprintln!("rbolt-interop-crash-writer: {error}");
        std::process::exit(2);
    }
}
