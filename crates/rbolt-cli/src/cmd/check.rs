//! `rbolt check`: bbolt's consistency check, plus a check of both meta pages.

use crate::open::{FileArgs, open_error};
use crate::raw::{MetaSlot, RawFile};
use anyhow::{Result, bail};
use clap::Args;
use rbolt_page::{Pgid, Reason};
use serde::Serialize;
use std::io::Write;

/// Arguments of `check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Check only the tree under this page (and the buckets below it), as bbolt's
    /// `--from-page` does; 0 checks the whole file.
    #[arg(long, value_name = "PGID", default_value_t = 0)]
    pub from_page: u64,
    /// Print one JSON object (`{"ok":..,"errors":[..]}`) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    ok: bool,
    errors: &'a [String],
}

/// `rbolt check PATH [--from-page N]`: every problem on its own line, then `N errors found`
/// (exit 1) or `OK`.
///
/// Beyond bbolt's check, both meta pages are validated: a file whose newer meta is torn
/// still opens (from the older one) and may pass bbolt's check, but it has lost its last
/// commit and deserves a line. A file that does not open at all reports why as an error line.
pub fn check(args: &CheckArgs) -> Result<()> {
    crate::open::check_exists(&args.file.path)?;
    let mut errors: Vec<String> = Vec::new();
    let spinner = crate::progress::spinner("checking", crate::progress::Unit::Items, false);
    // Opening first takes the shared lock, so the metas read next cannot be mid-commit.
    let options = rbolt::Options::default()
        .read_only(true)
        .lock_timeout(args.file.lock.lock_timeout());
    let opened = match rbolt::Db::open_with(&args.file.path, options) {
        Err(error @ (rbolt::Error::Timeout { .. } | rbolt::Error::Locked { .. })) => {
            spinner.finish_and_clear();
            return Err(open_error(&args.file.path, error, &args.file.lock));
        }
        other => other.map_err(|error| open_error(&args.file.path, error, &args.file.lock)),
    };
    // Beside a live writer the metas on disk are the writer's to change: the check is of the
    // snapshot it published (the pages it is writing are not reachable from it).
    let beside_writer = matches!(&opened, Ok(db) if db.reads_beside_writer());
    match RawFile::open(&args.file.path, &args.file.lock) {
        _ if beside_writer => {}
        Ok(raw) => {
            let slots = raw.metas()?;
            for (index, slot) in slots.iter().enumerate() {
                if let Err(corruption) = &slot.valid
                    && !superseded_past_end(slot, &slots[1 - index])
                {
                    errors.push(format!("meta {corruption}"));
                }
            }
        }
        Err(error) => errors.push(crate::one_line(&error)),
    }
    match opened {
        Err(error) => errors.push(format!(
            "cannot open the database: {}",
            crate::one_line(&error)
        )),
        Ok(db) => {
            let tx = db.begin_read()?;
            if args.from_page == 0 {
                errors.extend(tx.check().iter().map(ToString::to_string));
            } else {
                let meta = tx.meta();
                let high_water = meta.pgid;
                if args.from_page < 2 || args.from_page >= high_water {
                    errors.push(format!(
                        "page ID ({}) out of range [2, {high_water})",
                        args.from_page
                    ));
                } else {
                    let found = tx.check_from(Pgid(args.from_page));
                    errors.extend(found.iter().map(ToString::to_string));
                }
            }
        }
    }
    spinner.finish_and_clear();
    let mut w = crate::out::stdout();
    if args.json {
        serde_json::to_writer(
            &mut w,
            &Report {
                ok: errors.is_empty(),
                errors: &errors,
            },
        )?;
        writeln!(w)?;
    } else {
        for error in &errors {
            writeln!(w, "{error}")?;
        }
        if errors.is_empty() {
            writeln!(w, "OK")?;
        } else {
            writeln!(w, "{} errors found", errors.len())?;
        }
    }
    crate::out::flush(w)?;
    if !errors.is_empty() {
        bail!(
            "{}: {} errors found",
            args.file.path.display(),
            errors.len()
        );
    }
    Ok(())
}

/// Whether `slot` is a sound meta of an older commit whose high-water mark lies past the end
/// of the file only because a newer, valid meta (`other`) shrank it: what a truncation leaves
/// until the next commit overwrites the slot. The database never opens it while the newer one
/// is intact, and Go bbolt does not look at its mark.
fn superseded_past_end(slot: &MetaSlot, other: &MetaSlot) -> bool {
    let past_end = matches!(
        &slot.valid,
        Err(corruption) if matches!(corruption.reason, Reason::HighWaterPastEnd { .. })
    );
    match (slot.meta, other.meta) {
        (Some(old), Some(new)) => past_end && other.valid.is_ok() && old.txid < new.txid,
        _ => false,
    }
}
