//! The commands that read run while another process writes the file (issue 50): each reads
//! one consistent snapshot beside the writer, through its reader table.

use crate::support::rbolt;
use std::sync::atomic::{AtomicBool, Ordering};

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
