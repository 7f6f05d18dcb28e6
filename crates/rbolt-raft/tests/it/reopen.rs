//! After every kind of write, closing and reopening the store gives back the same vote, log,
//! purge point, committed id, applied state, data and snapshot; and writes that would break an
//! invariant are refused without changing anything.

use crate::common::{
    Rng, TestConfig, TestLog, TestMachine, TestState, append, apply, data, entry, log_id, payload,
    tmp_leftovers, vote,
};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine};
use openraft::type_config::alias::{LogIdOf, SnapshotMetaOf, VoteOf};
use openraft::{Membership, StoredMembership};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

fn open(dir: &Path) -> (TestLog, TestState) {
    rbolt_raft::open::<TestConfig, _>(dir, TestMachine).expect("the store opens")
}

/// What the store should hold, as far as disk is concerned.
#[derive(Debug, Default)]
struct Model {
    /// Log entries by index, as (term, payload).
    log: BTreeMap<u64, u64>,
    purged: Option<LogIdOf<TestConfig>>,
    vote: Option<VoteOf<TestConfig>>,
    /// The committed id as last written to disk.
    committed_on_disk: Option<LogIdOf<TestConfig>>,
    /// The committed id as last saved (in memory until the next write).
    committed_saved: Option<LogIdOf<TestConfig>>,
    applied: Option<LogIdOf<TestConfig>>,
    data: BTreeMap<u64, String>,
    snapshot: Option<Option<LogIdOf<TestConfig>>>,
}

impl Model {
    fn next_index(&self) -> u64 {
        match (self.log.keys().next_back(), &self.purged) {
            (Some(&last), _) => last + 1,
            (None, Some(purged)) => purged.index + 1,
            (None, None) => 0,
        }
    }

    fn last_log_id(&self) -> Option<LogIdOf<TestConfig>> {
        match self.log.iter().next_back() {
            Some((&index, &term)) => Some(log_id(term, index)),
            None => self.purged,
        }
    }

    /// A write of the log store reached disk: the saved committed id went with it.
    fn log_written(&mut self) {
        self.committed_on_disk = self.committed_saved;
    }
}

/// Compares everything the reopened store reports with the model.
async fn check(log: &mut TestLog, state: &mut TestState, model: &Model, step: &str) {
    let entries = log
        .get_log_reader()
        .await
        .try_get_log_entries(..)
        .await
        .expect("the log reads");
    let got: BTreeMap<u64, u64> = entries
        .iter()
        .map(|e| {
            assert_eq!(
                e.payload,
                openraft::EntryPayload::Normal(payload(e.log_id.leader_id.term, e.index())),
                "{step}: entry payload"
            );
            (e.index(), e.log_id.leader_id.term)
        })
        .collect();
    assert_eq!(got, model.log, "{step}: log entries");
    let state_of_log = log.get_log_state().await.expect("log state");
    assert_eq!(
        state_of_log.last_purged_log_id, model.purged,
        "{step}: purge point"
    );
    assert_eq!(
        state_of_log.last_log_id,
        model.last_log_id(),
        "{step}: last log id"
    );
    assert_eq!(
        log.get_log_reader().await.read_vote().await.expect("vote"),
        model.vote,
        "{step}: vote"
    );
    assert_eq!(
        log.read_committed().await.expect("committed"),
        model.committed_on_disk,
        "{step}: committed"
    );
    let (applied, _) = state.applied_state().await.expect("applied state");
    assert_eq!(applied, model.applied, "{step}: last applied");
    assert_eq!(data(state), model.data, "{step}: state machine data");
    let snapshot = state
        .get_current_snapshot()
        .await
        .expect("current snapshot");
    assert_eq!(
        snapshot.map(|s| s.meta.last_log_id),
        model.snapshot,
        "{step}: current snapshot"
    );
}

/// A state machine elsewhere whose snapshot the store under test installs once.
async fn donor_snapshot(
    dir: &Path,
) -> (
    SnapshotMetaOf<TestConfig>,
    std::fs::File,
    BTreeMap<u64, String>,
) {
    let (_log, mut state) = open(dir);
    apply(&mut state, (1000..1010).map(|i| entry(50, i)).collect())
        .await
        .expect("the donor applies");
    let snapshot = state
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("the donor builds a snapshot");
    let data = data(&state);
    (snapshot.meta, snapshot.snapshot, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_survives_reopen() {
    let (mut rng, seed) = Rng::from_env_or_time();
    eprintln!("every_write_survives_reopen: RBOLT_RAFT_SEED={seed}");
    let dir = tempfile::tempdir().expect("tempdir");
    let donor_dir = tempfile::tempdir().expect("tempdir");
    let (donor_meta, donor_file, donor_data) = donor_snapshot(donor_dir.path()).await;
    let mut donor_file = Some(donor_file);
    let mut model = Model::default();
    let mut term = 1;
    let (mut log, mut state) = open(dir.path());
    let steps = 80;
    for step in 0..steps {
        let op = if step == steps / 2 { 99 } else { rng.below(8) };
        let label = match op {
            0 => {
                term += 1;
                let v = vote(term, rng.below(3), rng.below(2) == 0);
                log.save_vote(&v).await.expect("save_vote");
                model.vote = Some(v);
                model.log_written();
                "save_vote"
            }
            1 | 2 => {
                let first = model.next_index();
                let n = 1 + rng.below(40);
                let entries = (first..first + n).map(|i| entry(term, i)).collect();
                append(&mut log, entries).await.expect("append");
                for i in first..first + n {
                    model.log.insert(i, term);
                }
                model.log_written();
                "append"
            }
            3 => {
                // Never below what is applied: Raft truncates only uncommitted entries.
                let low = model
                    .applied
                    .as_ref()
                    .map_or(0, |a| a.index + 1)
                    .max(model.purged.as_ref().map_or(0, |p| p.index + 1));
                let Some((&last, _)) = model.log.iter().next_back() else {
                    continue;
                };
                if last < low {
                    continue;
                }
                let after = low + rng.below(last - low + 1);
                let after_id = model.log.get(&after).map(|&t| log_id(t, after));
                log.truncate_after(after_id).await.expect("truncate_after");
                model.log.retain(|&i, _| i <= after);
                model.log_written();
                // A new leader would follow.
                term += 1;
                "truncate_after"
            }
            4 => {
                let Some(applied) = model.applied else {
                    continue;
                };
                let upto = rng.below(applied.index + 1);
                let Some(&t) = model.log.get(&upto) else {
                    continue;
                };
                log.purge(log_id(t, upto)).await.expect("purge");
                model.log.retain(|&i, _| i > upto);
                model.purged = Some(log_id(t, upto));
                model.log_written();
                "purge"
            }
            5 => {
                let start = model.applied.as_ref().map_or(0, |a| a.index + 1);
                let pending: Vec<(u64, u64)> =
                    model.log.range(start..).map(|(&i, &t)| (i, t)).collect();
                if pending.is_empty() || pending[0].0 != start {
                    continue;
                }
                let n = 1 + rng.below(pending.len() as u64) as usize;
                let batch: Vec<_> = pending[..n].iter().map(|&(i, t)| entry(t, i)).collect();
                apply(&mut state, batch).await.expect("apply");
                for &(i, t) in &pending[..n] {
                    model.data.insert(i, payload(t, i));
                }
                let (i, t) = pending[n - 1];
                model.applied = Some(log_id(t, i));
                // Committed ids only move forward, and cover what is applied.
                log.save_committed(model.applied)
                    .await
                    .expect("save_committed");
                model.committed_saved = model.applied;
                "apply (+ save_committed)"
            }
            6 => {
                let snapshot = state
                    .get_snapshot_builder()
                    .await
                    .build_snapshot()
                    .await
                    .expect("build_snapshot");
                assert_eq!(
                    snapshot.meta.last_log_id, model.applied,
                    "built snapshot's last id"
                );
                model.snapshot = Some(model.applied);
                "build_snapshot"
            }
            7 => {
                log.flush_committed().await.expect("flush_committed");
                model.log_written();
                "flush_committed"
            }
            _ => {
                let file = donor_file.take().expect("installed once");
                state
                    .install_snapshot(&donor_meta, file)
                    .await
                    .expect("install_snapshot");
                // openraft purges the log up to an installed snapshot.
                let last = donor_meta.last_log_id.expect("the donor applied entries");
                log.purge(last).await.expect("purge after install");
                model.log.clear();
                model.purged = Some(last);
                model.log_written();
                model.applied = Some(last);
                model.data = donor_data.clone();
                model.snapshot = Some(Some(last));
                term = term.max(51);
                "install_snapshot"
            }
        };
        drop(log);
        drop(state);
        (log, state) = open(dir.path());
        // A committed id saved but not yet written is gone with the old handle, by design.
        model.committed_saved = model.committed_on_disk;
        check(
            &mut log,
            &mut state,
            &model,
            &format!("step {step} ({label})"),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_that_would_leave_a_hole_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _state) = open(dir.path());
    append(&mut log, (0..3).map(|i| entry(1, i)).collect())
        .await
        .expect("append 0..3");
    let cases: Vec<(&str, Vec<u64>)> = vec![
        ("after a gap", vec![4]),
        ("not consecutive", vec![3, 5]),
        ("out of order", vec![3, 2]),
        ("over the last entry", vec![2]),
    ];
    for (name, indexes) in cases {
        let error = append(&mut log, indexes.iter().map(|&i| entry(1, i)).collect())
            .await
            .expect_err(name);
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::InvalidData,
            "{name}: {error}"
        );
        let state = log.get_log_state().await.expect("log state");
        assert_eq!(
            state.last_log_id,
            Some(log_id(1, 2)),
            "{name}: the log is unchanged"
        );
    }
    // Purged past its end, the log is empty and must go on right after the purge point.
    log.purge(log_id(1, 10)).await.expect("purge");
    append(&mut log, vec![entry(2, 12)])
        .await
        .expect_err("a gap after the purge point");
    append(&mut log, vec![entry(2, 11)])
        .await
        .expect("right after the purge point");
    let entries = log.try_get_log_entries(..).await.expect("read");
    assert_eq!(entries.iter().map(|e| e.index()).collect::<Vec<_>>(), [11]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_snapshot_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let donor_dir = tempfile::tempdir().expect("tempdir");
    let (donor_meta, _donor_file, _) = donor_snapshot(donor_dir.path()).await;
    let (_log, mut state) = open(dir.path());
    apply(&mut state, (0..5).map(|i| entry(1, i)).collect())
        .await
        .expect("apply");
    let before = data(&state);
    let applied_before = state.applied_state().await.expect("applied").0;

    let reopen_donor = || {
        std::fs::File::open(donor_dir.path().join(rbolt_raft::SNAPSHOT_FILE))
            .expect("donor snapshot")
    };
    let garbage = {
        let path = donor_dir.path().join("garbage");
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(&[0xAB; 64 * 1024]).expect("write");
        std::fs::File::open(&path).expect("reopen")
    };
    let truncated = {
        let bytes = std::fs::read(donor_dir.path().join(rbolt_raft::SNAPSHOT_FILE)).expect("read");
        let path = donor_dir.path().join("truncated");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
        std::fs::File::open(&path).expect("reopen")
    };
    let mut wrong_id = donor_meta.clone();
    wrong_id.last_log_id = Some(log_id(50, 2000));
    let mut wrong_membership = donor_meta.clone();
    wrong_membership.last_membership = StoredMembership::new(
        Some(log_id(50, 1000)),
        Membership::new_with_defaults(vec![BTreeSet::from([7])], []),
    );
    let cases = vec![
        ("garbage bytes", donor_meta.clone(), garbage),
        ("a truncated file", donor_meta.clone(), truncated),
        ("a meta with another last log id", wrong_id, reopen_donor()),
        (
            "a meta with another membership",
            wrong_membership,
            reopen_donor(),
        ),
    ];
    for (name, meta, file) in cases {
        let error = state.install_snapshot(&meta, file).await.expect_err(name);
        eprintln!("{name}: refused with {error}");
        assert_eq!(
            state.applied_state().await.expect("applied").0,
            applied_before,
            "{name}"
        );
        assert_eq!(data(&state), before, "{name}: data unchanged");
        assert!(
            state
                .get_current_snapshot()
                .await
                .expect("snapshot")
                .is_none(),
            "{name}"
        );
        let leftovers = tmp_leftovers(dir.path());
        assert!(
            leftovers.is_empty(),
            "{name}: temporary files left: {leftovers:?}"
        );
    }
    // The real one installs.
    state
        .install_snapshot(&donor_meta, reopen_donor())
        .await
        .expect("the real snapshot installs");
    assert_eq!(
        state.applied_state().await.expect("applied").0,
        donor_meta.last_log_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_another_format_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log.db");
    {
        let db = rbolt::Db::open(&path).expect("open");
        db.update(|tx| {
            tx.create_bucket(rbolt_raft::LOG_META_BUCKET)?
                .put(b"format", b"something else 7")
        })
        .expect("write");
    }
    let error = TestLog::open(&path).expect_err("another format");
    assert!(error.to_string().contains("something else 7"), "{error}");
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).expect("mkdir");
    {
        let db = rbolt::Db::open(state_dir.join(rbolt_raft::STATE_FILE)).expect("open");
        db.update(|tx| {
            tx.create_bucket(rbolt_raft::SM_META_BUCKET)?
                .put(b"format", b"v0")
        })
        .expect("write");
    }
    TestState::open(&state_dir, TestMachine).expect_err("another format");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_after_an_install_reads_the_installed_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let donor_dir = tempfile::tempdir().expect("tempdir");
    let (donor_meta, donor_file, _) = donor_snapshot(donor_dir.path()).await;
    let (_log, mut state) = open(dir.path());
    apply(&mut state, (0..3).map(|i| entry(1, i)).collect())
        .await
        .expect("apply");
    let mut builder = state.get_snapshot_builder().await;
    state
        .install_snapshot(&donor_meta, donor_file)
        .await
        .expect("install");
    let built = builder.build_snapshot().await.expect("build");
    assert_eq!(built.meta, donor_meta);
    let current = state
        .get_current_snapshot()
        .await
        .expect("current")
        .expect("some");
    assert_eq!(current.meta, donor_meta);
}
