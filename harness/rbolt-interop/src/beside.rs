//! The rbolt reader process of the suite's round with a reader beside the writer (issue 50):
//! `rbolt-interop-crash-writer read-beside FILE` opens FILE read-only beside its rbolt writer,
//! holds one snapshot, says `attached TXID KEYS` (its txid, and the keys of its top-level
//! buckets), and when its stdin closes reads the same snapshot again and says `same` (or what
//! changed) before it exits. While it holds the snapshot, the writer may close: the reader
//! keeps reading what it mapped.

use rbolt::{Db, Options, ReadTx};
use std::io::{BufRead, Write};

/// The reader's entry point; `args` is `[FILE]`.
pub fn reader_main(args: &[String]) -> Result<(), String> {
    let [file] = args else {
        return Err(format!("usage: read-beside FILE (got {args:?})"));
    };
    let db = Db::open_with(file, Options::default().read_only(true)).map_err(|e| e.to_string())?;
    if !db.reads_beside_writer() {
        return Err("the open did not read beside a writer".into());
    }
    let tx = db.begin_read().map_err(|e| e.to_string())?;
    let keys = count_keys(&tx)?;
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock<'_>, line: String| {
        writeln!(out, "{line}").and_then(|()| out.flush())
    };
    say(&mut out, format!("attached {} {keys}", tx.id().0)).map_err(|e| e.to_string())?;
    for line in std::io::stdin().lock().lines() {
        line.map_err(|e| e.to_string())?;
    }
    let again = count_keys(&tx)?;
    let answer = match again == keys {
        true => "same".to_string(),
        false => format!("changed: {keys} keys, then {again}"),
    };
    say(&mut out, answer).map_err(|e| e.to_string())
}

/// The keys (values, not nested buckets) of the snapshot's top-level buckets.
fn count_keys(tx: &ReadTx<'_>) -> Result<usize, String> {
    let root = tx.root();
    let mut keys = 0;
    for entry in root.iter() {
        let entry = entry.map_err(|e| e.to_string())?;
        let bucket = root
            .bucket(entry.key())
            .map_err(|e| e.to_string())?
            .ok_or("a top-level bucket vanished")?;
        for item in bucket.iter() {
            keys += usize::from(!item.map_err(|e| e.to_string())?.is_bucket());
        }
    }
    Ok(keys)
}
