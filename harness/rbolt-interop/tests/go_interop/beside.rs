//! The round with an rbolt reader process beside the rbolt writer (issue 50): while the rbolt
//! writer holds the file and a reader process of rbolt reads beside it, Go bbolt's opens, a
//! read-write one and a read-only one, are refused (Go's `Options.Timeout`: they cannot take
//! the `flock` the rbolt writer holds), and the writer goes on committing. Then the writer
//! closes; the reader still reads its snapshot whole; it detaches; and Go opens the file,
//! writes a round and checks it, and rbolt's check and export agree with Go's model.

use crate::go::GoInterop;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// How long Go waits for the file lock before it gives up.
const GO_LOCK_WAIT: &str = "300ms";

fn commit(db: &rbolt::Db, round: u32) -> rbolt::Result<()> {
    db.update(|tx| {
        let mut b = tx.create_bucket_if_not_exists("beside")?;
        for i in 0..500u32 {
            b.put(i.to_be_bytes(), format!("round {round} key {i}").repeat(8))?;
        }
        Ok(())
    })
}

/// Runs the round in `dir`; returns what went wrong, if anything.
pub fn run(go: &GoInterop, dir: &Path) -> Result<(), String> {
    let file = dir.join("beside.db");
    let _ = std::fs::remove_file(&file);
    let db = rbolt::Db::open(&file).map_err(|e| format!("rbolt's open: {e}"))?;
    commit(&db, 0).map_err(|e| format!("rbolt's commit: {e}"))?;
    let mut reader = Command::new(env!("CARGO_BIN_EXE_rbolt-interop-crash-writer"))
        .arg("read-beside")
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("the reader process: {e}"))?;
    let mut lines = BufReader::new(reader.stdout.take().ok_or("no stdout")?).lines();
    let mut next_line = || match lines.next() {
        Some(Ok(line)) => Ok(line),
        _ => Err("the reader process said nothing".to_string()),
    };
    let attached = next_line()?;
    if !attached.starts_with("attached ") || !attached.ends_with(" 500") {
        return Err(format!("the reader process: {attached}"));
    }
    let listed = db.reader_processes().map_err(|e| e.to_string())?;
    if !listed.iter().any(|slot| slot.pid == reader.id()) {
        return Err(format!("the writer does not list the reader: {listed:?}"));
    }
    for (command, extra) in [("write", None), ("check", Some("--read-only"))] {
        let mut args = vec!["--timeout".to_string(), GO_LOCK_WAIT.to_string()];
        args.extend(extra.map(String::from));
        let refused = go.run(command, &file, &args);
        if refused.ok() || !refused.stderr.contains("timeout") {
            return Err(format!(
                "Go's {command} beside the rbolt writer: {}",
                refused.describe()
            ));
        }
    }
    for round in 1..4 {
        commit(&db, round).map_err(|e| format!("rbolt's commit beside Go: {e}"))?;
    }
    db.close().map_err(|e| format!("rbolt's close: {e}"))?;
    drop(reader.stdin.take());
    let after_close = next_line()?;
    let status = reader.wait().map_err(|e| e.to_string())?;
    if after_close != "same" || !status.success() {
        return Err(format!(
            "the reader after the writer closed: {after_close} ({status})"
        ));
    }
    let model_out = dir.join("beside.model.jsonl");
    let args: Vec<String> = ["--seed", "50", "--txs", "3", "--ops", "100", "--model-out"]
        .into_iter()
        .map(String::from)
        .chain([model_out.display().to_string()])
        .collect();
    let written = go.run("write", &file, &args);
    if !written.ok() {
        return Err(format!(
            "Go's write after the rbolt processes: {}",
            written.describe()
        ));
    }
    let expected = std::fs::read_to_string(&model_out).map_err(|e| e.to_string())?;
    let checked = crate::rbolt_side::check(&file).map_err(|e| e.to_string())?;
    if !checked.hazards.is_empty() || !checked.other.is_empty() {
        return Err(format!(
            "rbolt's check after Go: {:?} {:?}",
            checked.hazards, checked.other
        ));
    }
    let export = crate::rbolt_side::export(&file).map_err(|e| e.to_string())?;
    if export != expected {
        return Err(format!(
            "rbolt's export after Go differs from Go's model: {}",
            crate::first_difference(&export, &expected)
        ));
    }
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&model_out);
    Ok(())
}
