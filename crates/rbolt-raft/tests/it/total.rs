//! What keeps one bad entry or one damaged file from stopping a node: an entry that fails to
//! apply is answered as refused on its own, the batch around it applied; a damaged log entry
//! is an error naming it; a log of the format before checksums is upgraded; and a backup
//! seeds a new node whose state, snapshot and log agree.

use crate::common::{
    REFUSED_PREFIX, TestConfig, TestLog, TestMachine, TestState, append, apply, data, entry, log_id,
};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};
use openraft::type_config::alias::EntryOf;
use openraft::{EntryPayload, Membership, Vote};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn open(dir: &Path) -> (TestLog, TestState) {
    rbolt_raft::open::<TestConfig, _>(dir, TestMachine).expect("the store opens")
}

fn normal(index: u64, payload: &str) -> EntryOf<TestConfig> {
    EntryOf::<TestConfig>::new_normal(log_id(1, index), payload.to_owned())
}

/// Records the entries the state machine reports refused, with the error's text.
#[derive(Default)]
struct Refusals(std::sync::Mutex<Vec<(u64, String)>>);

impl rbolt_raft::Observer for Refusals {
    fn entry_refused(&self, index: u64, error: &rbolt_raft::Error) {
        self.0
            .lock()
            .expect("lock")
            .push((index, error.to_string()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_that_fails_to_apply_is_refused_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, mut state) = open(dir.path());
    let refusals = std::sync::Arc::new(Refusals::default());
    state.set_observer(refusals.clone());
    let refused = format!("{REFUSED_PREFIX} this one");
    let batch = vec![
        normal(1, "a"),
        normal(2, &refused),
        normal(3, "b"),
        normal(4, &refused),
        normal(5, "c"),
    ];
    apply(&mut state, batch)
        .await
        .expect("an entry's own error does not fail the apply");
    let refusals = refusals.0.lock().expect("lock").clone();
    assert_eq!(
        refusals.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![2, 4],
        "{refusals:?}"
    );
    assert!(
        refusals[0].1.starts_with("key too large: 32769 bytes"),
        "{refusals:?}"
    );
    // The refused entries changed nothing (not even their first put); the rest is applied.
    let expected: BTreeMap<u64, String> = [(1, "a"), (3, "b"), (5, "c")]
        .into_iter()
        .map(|(i, v)| (i, v.to_owned()))
        .collect();
    assert_eq!(data(&state), expected);
    assert_eq!(state.applied().expect("applied").0, Some(log_id(1, 5)));
    assert_eq!(state.counters().refused, 2);
    assert_eq!(state.counters().entries_applied, 5);
    // A reopened state machine is where the batch left it.
    drop((log, state));
    let (_log, state) = open(dir.path());
    assert_eq!(data(&state), expected);
    assert_eq!(state.applied().expect("applied").0, Some(log_id(1, 5)));
}

/// Overwrites every copy of `needle` in `path` with `0xA5` bytes; returns how many it found.
fn damage_every_copy(path: &Path, needle: &[u8]) -> usize {
    let mut bytes = std::fs::read(path).expect("read");
    let mut found = 0;
    let mut at = 0;
    while let Some(offset) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
        let start = at + offset;
        bytes[start..start + needle.len()].fill(0xA5);
        found += 1;
        at = start + needle.len();
    }
    std::fs::write(path, bytes).expect("write");
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_entry_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = "the-payload-of-entry-seven-".repeat(8);
    {
        let (mut log, _state) = open(dir.path());
        let entries: Vec<_> = (1..=10)
            .map(|i| {
                if i == 7 {
                    normal(i, &marker)
                } else {
                    entry(1, i)
                }
            })
            .collect();
        append(&mut log, entries).await.expect("append");
        assert_eq!(log.verify().expect("a sound log verifies"), 10);
    }
    let path = dir.path().join(rbolt_raft::LOG_FILE);
    assert!(
        damage_every_copy(&path, &marker.as_bytes()[8..40]) > 0,
        "the entry is in the file"
    );
    let (mut log, _state) = open(dir.path());
    let named = |error: &dyn std::fmt::Display| {
        let text = error.to_string();
        assert!(
            text.contains("log entry 7 is damaged") && text.contains("log.db"),
            "{text}"
        );
    };
    match log.verify() {
        Err(error @ rbolt_raft::Error::Damaged { index: 7, .. }) => named(&error),
        other => panic!("verify: {other:?}"),
    }
    let mut reader = log.get_log_reader().await;
    let error = reader
        .try_get_log_entries(5..9)
        .await
        .expect_err("a read across the damaged entry fails");
    named(&error);
    // Entries before it still read.
    assert_eq!(
        reader.try_get_log_entries(1..7).await.expect("read").len(),
        6
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_without_checksums_is_upgraded_when_opened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(rbolt_raft::LOG_FILE);
    {
        // A log as the previous format wrote it: MessagePack entries, no checksum.
        let db = rbolt::Db::open(&path).expect("open");
        db.update(|tx| {
            tx.create_bucket(rbolt_raft::LOG_META_BUCKET)?
                .put(b"format", b"rbolt-raft 1")?;
            let mut log = tx.create_bucket(rbolt_raft::LOG_BUCKET)?;
            for i in 1..=3 {
                let encoded = rmp_serde::to_vec_named(&entry(2, i)).expect("encode");
                log.put(i.to_be_bytes(), &encoded)?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .expect("write");
    }
    let mut log = TestLog::open(&path).expect("a format 1 log opens");
    assert_eq!(log.verify().expect("verifies"), 3);
    let read = log.try_get_log_entries(1..=3).await.expect("read");
    assert_eq!(read, (1..=3).map(|i| entry(2, i)).collect::<Vec<_>>());
    drop(log);
    let format = rbolt::Db::open(&path)
        .expect("open")
        .view(|tx| {
            Ok::<_, rbolt::Error>(
                tx.bucket(rbolt_raft::LOG_META_BUCKET)?
                    .and_then(|m| m.get(b"format").ok().flatten().map(<[u8]>::to_vec)),
            )
        })
        .expect("view");
    assert_eq!(format.as_deref(), Some(&b"rbolt-raft 2"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_seeds_a_node_whose_state_snapshot_and_log_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log, mut state) = open(&dir.path().join("old"));
    apply(&mut state, (1..=20).map(|i| entry(3, i)).collect())
        .await
        .expect("apply");
    let backup = dir.path().join("backup.db");
    let (last, bytes) = state
        .backup_to(std::fs::File::create(&backup).expect("create"))
        .expect("backup");
    assert_eq!(last, Some(log_id(3, 20)));
    assert_eq!(std::fs::metadata(&backup).expect("meta").len(), bytes);
    assert_eq!(
        rbolt_raft::check_backup::<TestConfig>(&backup)
            .expect("checks")
            .0,
        last
    );
    let before = data(&state);

    let voters = BTreeSet::from([7, 8]);
    let membership = Membership::new_with_defaults(vec![voters.clone()], voters);
    let new_dir = dir.path().join("new");
    let start =
        rbolt_raft::restore::<TestConfig>(&backup, &new_dir, membership.clone(), Vote::new(3, 7))
            .expect("restore");
    assert_eq!(start, log_id(3, 20));
    let error =
        rbolt_raft::restore::<TestConfig>(&backup, &new_dir, membership.clone(), Vote::new(3, 7))
            .expect_err("a directory that holds a node");
    assert!(
        error.to_string().contains("holds a node already"),
        "{error}"
    );

    let (mut log, mut restored) = open(&new_dir);
    assert_eq!(data(&restored), before);
    let (applied, stored) = restored.applied_state().await.expect("applied");
    assert_eq!(applied, Some(log_id(3, 20)));
    assert_eq!(stored.membership(), &membership);
    assert_eq!(stored.log_id(), &Some(log_id(3, 20)));
    let snapshot = restored.snapshot_meta().expect("a snapshot");
    assert_eq!(snapshot.last_log_id, Some(log_id(3, 20)));
    let log_state = log.get_log_state().await.expect("log state");
    assert_eq!(log_state.last_purged_log_id, Some(log_id(3, 20)));
    assert_eq!(log_state.last_log_id, Some(log_id(3, 20)));
    assert_eq!(log.read_vote().await.expect("vote"), Some(Vote::new(3, 7)));
    // The new node goes on after the backup.
    append(&mut log, vec![entry(4, 21)])
        .await
        .expect("append after the purge point");
    assert!(matches!(
        log.try_get_log_entries(21..22).await.expect("read")[0].payload,
        EntryPayload::Normal(_)
    ));

    // A damaged backup is refused before anything is written.
    let damaged = dir.path().join("damaged.db");
    let mut bytes = std::fs::read(&backup).expect("read");
    let half = bytes.len() / 2;
    bytes.truncate(half);
    std::fs::write(&damaged, bytes).expect("write");
    let other = dir.path().join("other");
    rbolt_raft::restore::<TestConfig>(&damaged, &other, membership, Vote::new(3, 7))
        .expect_err("a truncated backup");
    assert!(!other.join(rbolt_raft::STATE_FILE).exists());
}

/// What a restore killed part way leaves (its marker, a state file, a half-copied temporary
/// file, a record of the caller's) is refused by the open with a typed error that says to run
/// the restore again, and the restore run again clears it and finishes; a record name that is
/// not a plain name of the caller's is refused before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_restore_is_refused_by_the_open_and_finished_by_a_rerun() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_log, mut state) = open(&dir.path().join("old"));
    apply(&mut state, (1..=5).map(|i| entry(2, i)).collect())
        .await
        .expect("apply");
    let backup = dir.path().join("backup.db");
    state
        .backup_to(std::fs::File::create(&backup).expect("create"))
        .expect("backup");
    let before = data(&state);
    let voters = BTreeSet::from([7]);
    let membership = Membership::new_with_defaults(vec![voters.clone()], voters);

    let new_dir = dir.path().join("new");
    std::fs::create_dir(&new_dir).expect("mkdir");
    for (name, bytes) in [
        (rbolt_raft::RESTORING_FILE, &b"x"[..]),
        (
            rbolt_raft::STATE_FILE,
            &std::fs::read(&backup).expect("read")[..],
        ),
        ("restoring-snapshot.tmp", &b"half"[..]),
        ("node-id", &b"9\n"[..]),
    ] {
        std::fs::write(new_dir.join(name), bytes).expect("write");
    }
    let refused = rbolt_raft::open::<TestConfig, _>(&new_dir, TestMachine).err();
    assert!(
        matches!(refused, Some(rbolt_raft::Error::RestoreUnfinished { .. })),
        "{refused:?}"
    );
    let message = refused.expect("refused").to_string();
    assert!(
        message.contains("run the same restore command again"),
        "{message}"
    );

    for bad in ["", "../x", "log.db", "restoring", "a.tmp", "."] {
        let error = rbolt_raft::restore_with::<TestConfig>(
            &backup,
            &new_dir,
            membership.clone(),
            Vote::new(2, 7),
            &[(bad, b"1\n")],
        )
        .expect_err("a bad record name");
        assert!(error.to_string().contains("cannot be a record"), "{error}");
    }
    let start = rbolt_raft::restore_with::<TestConfig>(
        &backup,
        &new_dir,
        membership,
        Vote::new(2, 7),
        &[("node-id", b"7\n")],
    )
    .expect("the rerun finishes");
    assert_eq!(start, log_id(2, 5));
    assert_eq!(
        std::fs::read(new_dir.join("node-id")).expect("read"),
        b"7\n"
    );
    let left: BTreeSet<String> = std::fs::read_dir(&new_dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let expected = ["log.db", "node-id", "snapshot.db", "state.db"];
    assert_eq!(left, expected.iter().map(|s| (*s).to_owned()).collect());
    let (_log, restored) = open(&new_dir);
    assert_eq!(data(&restored), before);
}
