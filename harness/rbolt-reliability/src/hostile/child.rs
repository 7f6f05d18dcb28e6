//! The child's side of the suite, run by `rbolt-crash-child`: a batch of cases, one case
//! replayed step by step, or one walk over a file, each on a thread with a stated stack.

use super::suite::plan;
use super::{Runner, Tally, evaluate};
use crate::scan::entries_max;
use rbolt::storage::SimFile;
use rbolt::{Db, Options};
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// The child's side: `hostile-batch SEED RANDOM WITH_4K LIMIT_MS START END`: runs those cases
/// of the plan and prints their tally.
pub(crate) fn batch_main(args: &[String]) -> Result<(), String> {
    let [seed, random, with_4k, limit_ms, start, end] = args else {
        return Err("usage: hostile-batch SEED RANDOM WITH_4K LIMIT_MS START END".into());
    };
    let parse = |s: &String| s.parse::<u64>().map_err(|_| format!("bad number {s}"));
    let plan = plan(parse(seed)?, parse(random)?, parse(with_4k)? != 0);
    let range = parse(start)? as usize..(parse(end)? as usize).min(plan.specs.len());
    let limit = Duration::from_millis(parse(limit_ms)?);
    // Panic messages reach the parent through the tally; backtraces would only slow the
    // cases down.
    std::panic::set_hook(Box::new(|_| {}));
    let mut runner = Runner::new(limit);
    let mut out = std::io::stdout().lock();
    for index in range {
        // Said before the case runs, so that if it kills this process the parent knows it.
        writeln!(out, "start {index}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
        let (what, image, expect) = plan.material.make(&plan.specs[index]);
        let what = format!("#{index} {what}");
        let what_job = what.clone();
        match runner.run(Box::new(move || evaluate(&image, &expect, &what_job))) {
            Some(tally) => writeln!(out, "{}", tally.to_lines()).map_err(|e| e.to_string())?,
            None => {
                let mut hang = Tally {
                    cases: 1,
                    hangs: 1,
                    ..Tally::default()
                };
                hang.fail(&what, format!("did not finish within {limit:?}"));
                writeln!(out, "{}", hang.to_lines()).map_err(|e| e.to_string())?;
                // The hung case's thread cannot be stopped and would slow every later case
                // down: end here, and the parent starts a new child after this case.
                break;
            }
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(())
}

/// The child's side: `hostile-replay SEED RANDOM WITH_4K INDEX [FILE]`: runs case `INDEX`
/// step by step, saying each step on stderr before it runs (so a crash names its step), and
/// writes the case's file to `FILE` if given. For whoever fixes what a case found.
pub(crate) fn replay_main(args: &[String]) -> Result<(), String> {
    // On a thread with the stack the suite's workers have.
    let args = args.to_vec();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || replay(&args))
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "the replay panicked".to_string())?
}

fn replay(args: &[String]) -> Result<(), String> {
    let (seed, random, with_4k, index, file) = match args {
        [a, b, c, d] => (a, b, c, d, None),
        [a, b, c, d, e] => (a, b, c, d, Some(e)),
        _ => return Err("usage: hostile-replay SEED RANDOM WITH_4K INDEX [FILE]".into()),
    };
    let parse = |s: &String| s.parse::<u64>().map_err(|_| format!("bad number {s}"));
    let plan = plan(parse(seed)?, parse(random)?, parse(with_4k)? != 0);
    let spec = plan
        .specs
        .get(parse(index)? as usize)
        .ok_or("no such case")?;
    let (what, image, _) = plan.material.make(spec);
    eprintln!("case: {what}");
    if let Some(file) = file {
        std::fs::write(file, &image).map_err(|e| format!("write {file}: {e}"))?;
    }
    let step = |name: &str| {
        eprintln!("step: {name}");
    };
    for read_only in [true, false] {
        step(if read_only {
            "open read-only"
        } else {
            "open read-write"
        });
        let sim = SimFile::from_image(image.clone()).map_err(|e| e.to_string())?;
        let db = match Db::open_storage(Arc::new(sim), Options::default().read_only(read_only)) {
            Ok(db) => db,
            Err(error) => {
                eprintln!("  open error: {error}");
                continue;
            }
        };
        step("check");
        let checked = db.view(|tx| Ok::<_, rbolt::Error>(tx.check()));
        eprintln!("  {checked:?}");
        step("scan (iterate, both directions, nested buckets, lookups)");
        let tx = db.begin_read().map_err(|e| e.to_string())?;
        let scanned = crate::scan::scan_buckets(tx.root(), entries_max(image.len() as u64));
        eprintln!("  {:?}", scanned.map(|s| s.entries));
        step("stats");
        eprintln!("  {:?}", tx.root().stats().map(|s| (s.bucket_n, s.key_n)));
    }
    Ok(())
}

/// The child's side: `hostile-walk FILE WHAT`: on a thread with a 2 MiB stack, opens the file
/// read-write (`open-read-write`), or read-only and then checks it (`check`), computes the
/// root's page statistics (`stats`) or iterates every top-level entry both ways (`iterate`). Prints `ok` and exits 0 when the call ends (in `Ok` or an error); fails
/// when iteration yields more entries than the file can hold.
pub(crate) fn walk_main(args: &[String]) -> Result<(), String> {
    let [path, what] = args else {
        return Err("usage: hostile-walk FILE open-read-write|check|stats|iterate".into());
    };
    let image = std::fs::read(path).map_err(|e| format!("read {path}: {e}"))?;
    let what = what.clone();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || walk(image, &what))
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "panicked".to_string())?
}

fn walk(image: Vec<u8>, what: &str) -> Result<(), String> {
    let cap = entries_max(image.len() as u64);
    let sim = SimFile::from_image(image).map_err(|e| e.to_string())?;
    let read_only = what != "open-read-write";
    let db = match Db::open_storage(Arc::new(sim), Options::default().read_only(read_only)) {
        Ok(db) => db,
        // An error is a fine end for a corrupt file.
        Err(error) => {
            println!("ok: open: {error}");
            return Ok(());
        }
    };
    let tx = db.begin_read().map_err(|e| e.to_string())?;
    match what {
        "open-read-write" => println!("ok"),
        "check" => println!("ok {}", tx.check().len()),
        "stats" => {
            let stats = tx.root().stats();
            println!("ok {:?}", stats.map(|s| s.bucket_n));
        }
        "iterate" => {
            for (direction, entries) in [
                (
                    "forwards",
                    Box::new(tx.root().iter()) as Box<dyn Iterator<Item = _>>,
                ),
                ("backwards", Box::new(tx.root().iter().rev())),
            ] {
                let mut n = 0u64;
                for entry in entries {
                    n += 1;
                    if entry.is_err() {
                        break;
                    }
                    if n > cap {
                        return Err(format!(
                            "iterating {direction} yielded more than {cap} entries from a file of that size"
                        ));
                    }
                }
            }
            println!("ok");
        }
        other => return Err(format!("unknown walk {other}")),
    }
    Ok(())
}
