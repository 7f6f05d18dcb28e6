//! `rbolt export` and `rbolt check` of a file another writer grows, empties, vacuums and
//! shrinks at full rate (issue 50, attacked from outside): each export is one snapshot, of a
//! commit no older than the last one the writer had acknowledged before the export began and
//! no newer than the one in flight when it ended (a commit is readable as it returns, a moment
//! before its caller records it); each check of the live file is clean.

use crate::support::rbolt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Keys in bucket `b` holding the round (the same value for all in a commit).
const KEYS: usize = 40;

/// Round `round`: every key of `b` names it; every 7th round adds 1,500 values of 500 bytes
/// to bucket `big` (the file grows), the round after deletes it (it can shrink again).
fn commit(db: &::rbolt::Db, round: u64) {
    db.update(|tx| {
        let mut b = tx.create_bucket_if_not_exists("b")?;
        for k in 0..KEYS {
            b.put(format!("k{k:02}"), format!("{round:08}").repeat(20))?;
        }
        drop(b);
        if round.is_multiple_of(7) {
            let mut big = tx.create_bucket_if_not_exists("big")?;
            for i in 0..1500u32 {
                big.put(i.to_be_bytes(), [b'x'; 500])?;
            }
        } else if tx.bucket("big")?.is_some() {
            tx.delete_bucket("big")?;
        }
        Ok::<_, ::rbolt::Error>(())
    })
    .unwrap();
}

/// The rounds the values of bucket `b` in an export name (values are written in hex).
fn exported_rounds(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|line| {
            let line: serde_json::Value = serde_json::from_str(line).unwrap();
            // Hex: 160 bytes of text, the round's 8 digits 20 times.
            let hex = line.get("value")?.as_str()?;
            (hex.len() == 320).then(|| {
                let digits: String = (0..8)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap() as char)
                    .collect();
                digits.parse().unwrap()
            })
        })
        .collect()
}

#[test]
fn export_of_a_file_written_grown_and_shrunk_at_full_rate_is_one_acknowledged_snapshot() {
    let exports = match std::env::var("RBOLT_TIER").as_deref() {
        Ok("ci") => 20,
        Ok("soak") => 200,
        _ => 4,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let options = ::rbolt::Options::default().no_sync(true).auto_shrink(true);
    let db = ::rbolt::Db::open_with(&path, options).unwrap();
    commit(&db, 1);
    let (stop, acked) = (AtomicBool::new(false), AtomicU64::new(1));
    let file = path.to_str().unwrap();
    /// Stops the writer however the scope ends, so that its join does not wait for ever.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        let stop_guard = Stop(&stop);
        let (db, stop, acked) = (&db, &stop, &acked);
        let writer = s.spawn(move || {
            let mut round = 2;
            while !stop.load(Ordering::Relaxed) {
                commit(db, round);
                acked.store(round, Ordering::SeqCst);
                if round.is_multiple_of(50) {
                    db.vacuum(::rbolt::VacuumOptions::default(), |_| {
                        std::ops::ControlFlow::Continue(())
                    })
                    .unwrap();
                }
                round += 1;
            }
        });
        for _ in 0..exports {
            let before = acked.load(Ordering::SeqCst);
            let rounds = exported_rounds(&rbolt(["export", file]).ok());
            let after = acked.load(Ordering::SeqCst);
            assert_eq!(rounds.len(), KEYS, "one value per key");
            assert!(
                rounds.iter().all(|r| *r == rounds[0]),
                "one commit: {rounds:?}"
            );
            assert!(
                (before..=after + 1).contains(&rounds[0]),
                "exported round {} outside {before}..={after} acknowledged, and one in flight",
                rounds[0]
            );
            assert_eq!(rbolt(["check", file, "--no-progress"]).ok(), "OK\n");
        }
        drop(stop_guard);
        writer.join().unwrap();
    });
    assert!(
        acked.load(Ordering::SeqCst) > 10,
        "the writer committed meanwhile"
    );
}
