//! The entry points of `rbolt-crash-child`, the process the suites kill, let panic, or run
//! hostile files in. They are the library's only for the binary's sake: nothing else calls
//! them, and they are not part of its API.

/// Runs the child's command `args` (without the program name): `kill-loop`, `failpoint`,
/// `hostile-batch`, `hostile-replay`, `hostile-walk` or `read-beside`, each with its own
/// arguments.
pub fn main(args: &[String]) -> Result<(), String> {
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("kill-loop") => crate::kill::child_main(rest),
        Some("failpoint") => crate::failpoints::child_main(rest),
        Some("hostile-batch") => crate::hostile::child::batch_main(rest),
        Some("hostile-replay") => crate::hostile::child::replay_main(rest),
        Some("hostile-walk") => crate::hostile::child::walk_main(rest),
        Some("read-beside") => crate::power_lock::child_main(rest),
        _ => Err(
            "usage: rbolt-crash-child kill-loop|failpoint|hostile-batch|hostile-replay|hostile-walk|read-beside ARGS..."
                .into(),
        ),
    }
}
