//! `rbolt`: inspect, check, repair, copy and benchmark database files in Go bbolt's format
//! (version 2), with the commands, flags and output shapes of Go's `bbolt` tool wherever it has
//! them, so that scripts and habits written for `bbolt` carry over.
//!
//! This crate owns the command line only. Everything it knows of files comes from the `rbolt`
//! facade (databases, transactions, check, stats) and from `rbolt-page` (page views, for the
//! commands that read raw pages of files that may not open). It never writes to a file it was
//! asked to read: read commands open the file read-only with a shared lock, and `surgery`
//! commands write a modified copy to `--output`.
//!
//! Exit status: 0 on success, 1 on any failure (a corrupt file found by `check` included), 2 on
//! a usage error. Errors are one line on stderr, `rbolt: ...`, naming the file.
#![forbid(unsafe_code)]

mod cmd;
mod duration;
mod format;
mod go_flags;
mod new_file;
mod open;
mod out;
mod progress;
mod raw;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write as _;
use std::process::ExitCode;

/// Inspect, check, repair, copy and benchmark bbolt database files.
///
/// Works on the files of Go's bbolt (etcd's among them) with the commands and flags of Go's
/// `bbolt` tool, plus `put`, `delete`, `export` and `import`.
#[derive(Debug, Parser)]
#[command(
    name = "rbolt",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    /// Never draw progress bars (they are drawn only on a terminal anyway).
    #[arg(long, global = true)]
    no_progress: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the version of rbolt and of the file format it reads.
    Version,
    /// Print the page size and the fields of the meta in use.
    Info(cmd::read::InfoArgs),
    /// Verify the integrity of a database: every page accounted for once, keys in order.
    Check(cmd::check::CheckArgs),
    /// Print the names of the top-level buckets.
    Buckets(cmd::read::BucketsArgs),
    /// Print the keys of a (nested) bucket, nested bucket names included.
    Keys(cmd::read::KeysArgs),
    /// Print the value of a key in a (nested) bucket.
    Get(cmd::read::GetArgs),
    /// Set a key to a value in a (nested) bucket.
    Put(cmd::write::PutArgs),
    /// Delete a key (or, with --bucket, a bucket) from a (nested) bucket.
    Delete(cmd::write::DeleteArgs),
    /// Print page and key statistics of the top-level buckets (with a name prefix, of those).
    Stats(cmd::read::StatsArgs),
    /// Print a table of every page: its id, type, item count and overflow.
    Pages(cmd::pages::PagesArgs),
    /// Print one or more pages in human-readable form.
    Page(cmd::pages::PageArgs),
    /// Print the key and value of one element of a leaf page.
    PageItem(cmd::pages::PageItemArgs),
    /// Print a hexadecimal dump of one or more pages.
    Dump(cmd::pages::DumpArgs),
    /// Print the tree of buckets with their key counts, as JSON.
    Inspect(cmd::read::InspectArgs),
    /// Copy a database into a new, compacted file, leaving the source untouched.
    Compact(cmd::compact::CompactArgs),
    /// Shrink a database file in place: move live pages down, cut the free end off.
    Vacuum(cmd::vacuum::VacuumArgs),
    /// Write every bucket and key as JSON lines (the fixtures' manifest format).
    Export(cmd::transfer::ExportArgs),
    /// Read JSON lines written by `export` into a new or existing database.
    Import(cmd::transfer::ImportArgs),
    /// Run a synthetic write-then-read benchmark (bbolt's `bench`).
    Bench(cmd::bench::BenchArgs),
    /// Repair commands; each writes a modified copy to --output, never touching the source.
    #[command(subcommand)]
    Surgery(cmd::surgery::SurgeryCommand),
}

/// Runs the command. Every error of a command on a file names the file: it is added here, in
/// one place, rather than by each command.
fn run(cli: Cli) -> anyhow::Result<()> {
    use cmd::in_file;
    match cli.command {
        Command::Version => cmd::read::version(),
        Command::Info(args) => in_file(&args.file.path, cmd::read::info(&args)),
        Command::Check(args) => in_file(&args.file.path, cmd::check::check(&args)),
        Command::Buckets(args) => in_file(&args.file.path, cmd::read::buckets(&args)),
        Command::Keys(args) => in_file(&args.file.path, cmd::read::keys(&args)),
        Command::Get(args) => in_file(&args.file.path, cmd::read::get(&args)),
        Command::Put(args) => in_file(&args.path, cmd::write::put(&args)),
        Command::Delete(args) => in_file(&args.file.path, cmd::write::delete(&args)),
        Command::Stats(args) => in_file(&args.file.path, cmd::read::stats(&args)),
        Command::Pages(args) => in_file(&args.file.path, cmd::pages::pages(&args)),
        Command::Page(args) => in_file(&args.path, cmd::pages::page(&args)),
        Command::PageItem(args) => in_file(&args.path, cmd::pages::page_item(&args)),
        Command::Dump(args) => in_file(&args.path, cmd::pages::dump(&args)),
        Command::Inspect(args) => in_file(&args.file.path, cmd::read::inspect(&args)),
        Command::Compact(args) => in_file(&args.path, cmd::compact::compact(&args)),
        Command::Vacuum(args) => in_file(&args.path, cmd::vacuum::vacuum(&args)),
        Command::Export(args) => in_file(&args.file.path, cmd::transfer::export(&args)),
        Command::Import(args) => in_file(&args.path, cmd::transfer::import(&args)),
        Command::Bench(args) => cmd::bench::bench(args),
        Command::Surgery(command) => cmd::surgery::run(command),
    }
}

fn main() -> ExitCode {
    // Go bbolt's scripts spell long flags with one dash (`-count 1000`): see `go_flags`.
    let cli = Cli::parse_from(go_flags::normalise(std::env::args_os(), Cli::command()));
    if cli.no_progress {
        progress::disable();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`| head`): nothing failed that they care about.
        Err(error) if out::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            // Not `eprintln!`, which panics (exit 101) when stderr is a closed pipe
            // (`rbolt check x.db 2>&1 | head -1`): the failure is the exit code's to tell.
            let _ = writeln!(std::io::stderr(), "rbolt: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, `outer: inner: root`. A cause whose text the line
/// already holds is left out: some errors show their source in their own message too.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every long flag of every command is rewritten from its Go spelling, `-NAME`.
    #[test]
    fn every_long_flag_takes_one_dash() {
        let mut root = Cli::command();
        root.build();
        // Each command with the words that reach it.
        let mut stack = vec![(Vec::<String>::new(), &root)];
        let mut flags = 0;
        while let Some((path, command)) = stack.pop() {
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                let words = |flag: String| {
                    std::iter::once("rbolt".to_owned())
                        .chain(path.iter().cloned())
                        .chain([flag])
                        .map(std::ffi::OsString::from)
                        .collect::<Vec<_>>()
                };
                let out = crate::go_flags::normalise(words(format!("-{long}")), Cli::command());
                assert_eq!(out, words(format!("--{long}")), "{path:?}");
                flags += 1;
            }
            for sub in command.get_subcommands() {
                let mut path = path.clone();
                path.push(sub.get_name().to_owned());
                stack.push((path, sub));
            }
        }
        assert!(flags > 60, "only {flags} flags found");
    }

    #[test]
    fn errors_fit_one_line_without_repeats() {
        let root = std::io::Error::other("disk on fire");
        let error = anyhow::Error::new(root).context("cannot read x.db\nat all");
        assert_eq!(
            super::one_line(&error),
            "cannot read x.db at all: disk on fire"
        );
        let repeated = anyhow::anyhow!("inner").context("outer: inner");
        assert_eq!(super::one_line(&repeated), "outer: inner");
    }
}
