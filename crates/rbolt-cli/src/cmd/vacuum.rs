//! `rbolt vacuum`: shrinks a database file in place, with no second file (unlike `compact`):
//! live pages move from the end of the file into free pages nearer its start, in ordinary
//! durable commits, and the file is cut at the end. Any step is a commit, so an interrupted
//! vacuum leaves a sound file, and running it again carries on.

use crate::open::{LockArgs, open_write};
use crate::progress::Unit;
use anyhow::Result;
use clap::Args;
use rbolt::{Options, VACUUM_STEP_PAGES_DEFAULT, VacuumOptions};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;

/// Arguments of `vacuum`.
#[derive(Args, Debug)]
pub struct VacuumArgs {
    /// The database to shrink in place.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// The most pages one step (one commit) moves.
    #[arg(long, default_value_t = VACUUM_STEP_PAGES_DEFAULT)]
    pub step_pages: usize,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// `rbolt vacuum PATH`: prints `X -> Y bytes (gain=Z.ZZx), N pages moved in S steps, T`.
pub fn vacuum(args: &VacuumArgs) -> Result<()> {
    let db = open_write(&args.path, &args.lock, false, Options::default())?;
    let page_size = db.page_size() as u64;
    // The bar counts bytes the file may still lose; its length is set from the first step.
    let bar = crate::progress::bar(0, Unit::Bytes, "vacuuming", false);
    let mut total = None;
    let options = VacuumOptions::default().pages_per_step(args.step_pages);
    let report = db.vacuum(options, |progress| {
        let total = *total.get_or_insert_with(|| {
            let total = progress
                .file_len_before
                .saturating_sub(progress.live_pages * page_size);
            bar.set_length(total);
            total
        });
        bar.set_position(total.saturating_sub(progress.bytes_to_go).min(total));
        ControlFlow::Continue(())
    });
    bar.finish_and_clear();
    let report = report?;
    drop(db);
    let size = report.file_len;
    let mut w = crate::out::stdout();
    writeln!(
        w,
        "{} -> {size} bytes (gain={:.2}x), {} pages moved in {} steps, {}",
        report.file_len_before,
        report.file_len_before as f64 / size.max(1) as f64,
        report.pages_moved,
        report.steps,
        crate::duration::go_string(report.elapsed),
    )?;
    crate::out::flush(w)
}
