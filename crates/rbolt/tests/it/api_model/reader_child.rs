//! The reader process's side of `reader_process.rs` (`RBOLT_PROCESS_CHILD=api-model-reader`):
//! this test binary run again, read-only beside the writer, serving the parent's commands on
//! stdin and answering on stdout. A thread of its own meanwhile begins transactions while the
//! writer works (commits, vacuums, shrinks, closes and reopens), each read whole and checked.

use super::dump;
use rbolt::{Db, Options, ReadTx};
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The pause between the racing thread's transactions: the writer has most of a core.
const RACING_PAUSE: Duration = Duration::from_millis(3);

/// What the racing thread found: transactions read whole and clean, and the first that was
/// not.
#[derive(Default)]
struct Racing {
    stop: AtomicBool,
    clean: AtomicU64,
    wrong: Mutex<Option<String>>,
}

/// Opens `path` read-only beside the writer, says `ready`, then serves one command a line on
/// stdin until it closes: `now` (a transaction's text, the transaction ended), `hold` (the
/// same, the transaction kept), `check <n>` (the `n`th held transaction's text again),
/// `release <n>`, `racing` (the racing thread's count since the last ask, or what it found
/// wrong).
pub fn child(path: &Path) -> String {
    let db = match Db::open_with(path, Options::default().read_only(true)) {
        Ok(db) => db,
        Err(e) => return format!("cannot open beside the writer: {e}"),
    };
    if !db.reads_beside_writer() {
        return "opened, but not beside the writer".into();
    }
    // A first transaction claims the handle's slot, kept from here on.
    drop(db.begin_read());
    let racing = Racing::default();
    std::thread::scope(|s| {
        let thread = s.spawn(|| race(&db, &racing));
        serve(&db, &racing);
        racing.stop.store(true, Ordering::Relaxed);
        thread.join().expect("the racing thread");
    });
    "done".into()
}

/// The command loop (see [`child`]).
fn serve(db: &Db, racing: &Racing) {
    let mut out = BufWriter::new(std::io::stdout().lock());
    writeln!(out, "CHILD ready")
        .and_then(|()| out.flush())
        .expect("stdout");
    let mut held: Vec<ReadTx<'_>> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let (command, arg) = line.split_once(' ').unwrap_or((&line, ""));
        let index = arg.parse::<usize>().ok();
        match (command, index) {
            ("now" | "hold", _) => match db.begin_read() {
                Ok(tx) => {
                    send(&tx, &mut out);
                    if command == "hold" {
                        held.push(tx);
                    }
                }
                Err(e) => writeln!(out, "CHILD error begin_read: {e}").expect("stdout"),
            },
            ("check", Some(index)) if index < held.len() => send(&held[index], &mut out),
            ("release", Some(index)) if index < held.len() => {
                drop(held.remove(index));
                writeln!(out, "CHILD released").expect("stdout");
            }
            ("racing", _) => {
                let wrong = racing
                    .wrong
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                match wrong {
                    Some(wrong) => writeln!(out, "CHILD racing-wrong {wrong}"),
                    None => writeln!(
                        out,
                        "CHILD racing {}",
                        racing.clean.swap(0, Ordering::Relaxed)
                    ),
                }
                .expect("stdout");
            }
            _ => writeln!(out, "CHILD error no command {line:?}").expect("stdout"),
        }
        out.flush().expect("stdout");
    }
}

/// Writes `tx`'s text and what its check found (see `ReaderProcess::snapshot`).
fn send(tx: &ReadTx<'_>, out: &mut impl Write) {
    let lines = dump::of_tree(tx.root()).unwrap_or_else(|e| vec![format!("E {e}")]);
    let errors: Vec<String> = tx
        .check()
        .iter()
        .map(|e| format!("{e:?}").replace('\n', " "))
        .collect();
    writeln!(
        out,
        "CHILD dump {} {} {}",
        tx.id().0,
        lines.len(),
        errors.len()
    )
    .expect("stdout");
    for line in lines.iter().chain(&errors) {
        writeln!(out, "{line}").expect("stdout");
    }
}

/// The racing thread: transactions begun whenever, while the writer works, each read whole
/// (every bucket, key and value) and checked, until `racing.stop`.
fn race(db: &Db, racing: &Racing) {
    while !racing.stop.load(Ordering::Relaxed) {
        std::thread::sleep(RACING_PAUSE);
        let wrong = match db.begin_read() {
            Ok(tx) => match dump::of_tree(tx.root()) {
                Ok(_) => {
                    let errors = tx.check();
                    (!errors.is_empty())
                        .then(|| format!("txid {}: check found {errors:?}", tx.id().0))
                }
                Err(e) => Some(format!("txid {}: {e}", tx.id().0)),
            },
            Err(e) => Some(format!("begin_read: {e}")),
        };
        match wrong {
            None => {
                racing.clean.fetch_add(1, Ordering::Relaxed);
            }
            Some(wrong) => {
                racing
                    .wrong
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get_or_insert(wrong.replace('\n', " "));
            }
        }
    }
}
