//! The commands that read run while another process writes the file (issue 50): each reads
//! one consistent snapshot beside the writer, through its reader table.

use crate::support::{command, rbolt};
use serde_json::Value;
use std::io::Read;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Keys in bucket `b`; every commit gives each the same new value, so a snapshot that mixed
/// two commits would show two values.
const KEYS: usize = 50;

fn commit(db: &::rbolt::Db, round: u64) {
    db.update(|tx| {
        let mut b = tx.create_bucket_if_not_exists("b")?;
        for k in 0..KEYS {
            b.put(format!("k{k:02}"), format!("{round:08}").repeat(20))?;
        }
        Ok::<_, ::rbolt::Error>(())
    })
    .unwrap();
}

/// The values `export` printed for bucket `b`.
fn exported_values(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|line| {
            let line: serde_json::Value = serde_json::from_str(line).unwrap();
            line.get("value").map(|v| v.to_string())
        })
        .collect()
}

#[test]
fn read_commands_read_one_snapshot_beside_a_live_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let db = ::rbolt::Db::open_with(&path, ::rbolt::Options::default().no_sync(true)).unwrap();
    commit(&db, 0);
    let stop = AtomicBool::new(false);
    let file = path.to_str().unwrap();
    /// Stops the writer however the scope ends (a failed assertion included), so that the
    /// scope's join does not wait for ever.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        let stop_guard = Stop(&stop);
        let writer = s.spawn(|| {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                commit(&db, round);
                round += 1;
            }
            round
        });
        for _ in 0..4 {
            let values = exported_values(&rbolt(["export", file]).ok());
            assert_eq!(values.len(), KEYS, "one value per key");
            assert!(
                values.iter().all(|v| *v == values[0]),
                "one commit's values"
            );
            assert_eq!(rbolt(["check", file, "--no-progress"]).ok(), "OK\n");
            assert_eq!(rbolt(["keys", file, "b"]).ok().lines().count(), KEYS);
            assert!(!rbolt(["get", file, "b", "k07"]).ok().is_empty());
            let stats = rbolt(["stats", file]).ok();
            assert!(stats.contains("(this command)"), "{stats}");
        }
        drop(stop_guard);
        let rounds = writer.join().unwrap();
        assert!(rounds > 4, "the writer committed meanwhile: {rounds}");
    });
    // Raw page commands keep to the shared lock: they read free pages, which a writer
    // rewrites.
    rbolt(["pages", file]).fails_with("no writer open");
}

/// The slot of process `pid` in a list of reader slots (`field` names the pid's key).
fn slot_of<'a>(slots: &'a Value, field: &str, pid: u32) -> &'a Value {
    slots
        .as_array()
        .unwrap_or_else(|| panic!("no list of reader slots: {slots}"))
        .iter()
        .find(|slot| slot[field] == pid)
        .unwrap_or_else(|| panic!("no slot of pid {pid}: {slots}"))
}

/// `stats` (text and `--json`) and `inspect` list the reader slots of a live writer: a reader
/// process that holds a snapshot (an `export` whose output nobody reads blocks once the pipe
/// is full, inside its transaction) with its pid, txid, mapped bytes and age, and the command
/// itself. Without a writer, nothing is added to bbolt's output.
#[test]
fn stats_and_inspect_list_the_reader_processes_of_a_live_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let file = path.to_str().unwrap();
    let db = ::rbolt::Db::open(&path).unwrap();
    db.update(|tx| {
        let mut big = tx.create_bucket("big")?;
        for i in 0u32..4000 {
            big.put(i.to_be_bytes(), [b'v'; 500])?;
        }
        Ok::<_, ::rbolt::Error>(())
    })
    .unwrap();
    let mut export = command(["export", file])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = export.id();
    let start = Instant::now();
    let held = loop {
        let slots = db.reader_processes().unwrap();
        if let Some(txid) = slots.iter().find(|s| s.pid == pid).and_then(|s| s.txid) {
            break txid;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{slots:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    for round in 0..3 {
        commit(&db, round); // the held snapshot falls behind
    }

    let stats: Value = serde_json::from_str(&rbolt(["stats", "--json", file]).ok()).unwrap();
    let slots = &stats["ReaderProcesses"];
    let slot = slot_of(slots, "Pid", pid);
    assert_eq!(slot["Txid"], held, "{slot}");
    assert_eq!(slot["ThisCommand"], false, "{slot}");
    assert_eq!(slot["PidSeen"], true, "{slot}");
    assert!(
        slot["MappedBytes"].as_u64().unwrap() >= 4000 * 500,
        "{slot}"
    );
    assert!(slot["AgeSeconds"].as_u64().is_some(), "{slot}");
    let this = slots
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["ThisCommand"] == true);
    assert!(this.is_some_and(|s| s["Pid"] != pid), "{slots}");
    assert_eq!(stats["KeyN"], 4000 + KEYS, "bbolt's fields are still there");

    let inspect: Value = serde_json::from_str(&rbolt(["inspect", file]).ok()).unwrap();
    let slot = slot_of(&inspect["readerProcesses"], "pid", pid);
    assert_eq!(slot["txid"], held, "{slot}");
    assert!(
        slot["mappedBytes"].as_u64().unwrap() >= 4000 * 500,
        "{slot}"
    );
    assert!(slot["ageSeconds"].as_u64().is_some(), "{slot}");
    assert_eq!(inspect["name"], "root");
    assert_eq!(inspect["buckets"].as_array().unwrap().len(), 2, "{inspect}");

    let text = rbolt(["stats", file]).ok();
    assert!(
        text.contains(&format!("pid {pid}, reads txid {held} (")),
        "{text}"
    );

    // A root without buckets is kept open for the field too.
    let empty = dir.path().join("empty.db");
    let empty_db = ::rbolt::Db::open(&empty).unwrap();
    let inspect = rbolt(["inspect", empty.to_str().unwrap()]).ok();
    let inspect: Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(inspect["keyN"], 0, "{inspect}");
    assert_eq!(
        inspect["readerProcesses"][0]["thisCommand"], true,
        "{inspect}"
    );
    drop(empty_db);

    let mut out = Vec::new();
    export.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    assert!(export.wait().unwrap().success());
    drop(db);
    // No writer: the shared lock, no table, bbolt's output.
    let stats: Value = serde_json::from_str(&rbolt(["stats", "--json", file]).ok()).unwrap();
    assert!(stats.get("ReaderProcesses").is_none(), "{stats}");
    let inspect: Value = serde_json::from_str(&rbolt(["inspect", file]).ok()).unwrap();
    assert!(inspect.get("readerProcesses").is_none(), "{inspect}");
}
