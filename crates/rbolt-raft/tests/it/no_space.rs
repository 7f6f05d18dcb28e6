//! A full disk: a write that fails for want of space changed nothing, and runs again while the
//! observer asks for it (`Observer::no_space`), so a node can wait for room instead of
//! stopping. The log runs on rbolt's simulated file, whose growth fails with `ENOSPC` until the
//! observer "frees space"; the state machine on a real file with a size limit
//! (`MaxSizeReached`, the same class of error), whose observer gives up after a few attempts.

use crate::common::{TestConfig, TestMachine, TestState, append, apply, data, entry};
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};
use rbolt::storage::{FaultError, FaultPlan, OpKind, SimFile};
use rbolt_raft::{LogStore, Observer, StateMachine};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Answers `no_space` with `true` until it has been asked `retries` times, then `false`; the
/// first time it runs `free` (makes room).
struct Retrying {
    retries: u32,
    asked: AtomicU32,
    free: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    errors: Mutex<Vec<String>>,
}

impl Retrying {
    fn new(retries: u32, free: Option<Box<dyn FnOnce() + Send>>) -> Arc<Retrying> {
        Arc::new(Retrying {
            retries,
            asked: AtomicU32::new(0),
            free: Mutex::new(free),
            errors: Mutex::new(Vec::new()),
        })
    }
}

impl Observer for Retrying {
    fn no_space(&self, _file: &Path, error: &rbolt_raft::Error, attempt: u32) -> bool {
        let asked = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(attempt, asked, "attempts are counted from 1, in a row");
        assert!(
            error.is_no_space(),
            "only a want of space is retried: {error}"
        );
        self.errors.lock().expect("lock").push(error.to_string());
        if let Some(free) = self.free.lock().expect("lock").take() {
            free();
        }
        asked <= self.retries
    }
}

fn log_on(sim: &SimFile) -> LogStore<TestConfig> {
    let db = rbolt::Db::open_storage(Arc::new(sim.clone()), rbolt::Options::default())
        .expect("rbolt opens the simulated file");
    LogStore::from_db(db).expect("the log store opens")
}

/// Entries big enough that appending them grows the file.
fn big_entries(from: u64, n: u64) -> Vec<openraft::type_config::alias::EntryOf<TestConfig>> {
    (from..from + n)
        .map(|i| {
            let mut e = entry(1, i);
            if let openraft::EntryPayload::Normal(payload) = &mut e.payload {
                payload.push_str(&"x".repeat(2000));
            }
            e
        })
        .collect()
}

#[tokio::test]
async fn an_append_that_finds_the_disk_full_waits_for_room_and_loses_nothing() {
    let sim = SimFile::new().expect("sim");
    let mut log = log_on(&sim);
    append(&mut log, big_entries(1, 3)).await.expect("append");
    // The disk is full: every growth of the file fails, until the observer makes room.
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::Grow, FaultError::NoSpace));
    let freed = sim.clone();
    let observer = Retrying::new(
        u32::MAX,
        Some(Box::new(move || freed.set_fault_plan(FaultPlan::new()))),
    );
    log.set_observer(observer.clone());

    append(&mut log, big_entries(4, 200))
        .await
        .expect("the append completes once there is room");

    assert_eq!(
        observer.asked.load(Ordering::SeqCst),
        1,
        "one failure, then room"
    );
    let read = log.try_get_log_entries(1..204).await.expect("read");
    assert_eq!(read, {
        let mut all = big_entries(1, 3);
        all.extend(big_entries(4, 200));
        all
    });
}

#[tokio::test]
async fn an_append_the_observer_gives_up_on_fails_and_leaves_the_log_as_it_was() {
    let sim = SimFile::new().expect("sim");
    let mut log = log_on(&sim);
    append(&mut log, big_entries(1, 3)).await.expect("append");
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::Grow, FaultError::NoSpace));
    let observer = Retrying::new(2, None);
    log.set_observer(observer.clone());

    let failed = append(&mut log, big_entries(4, 200)).await;

    assert!(failed.is_err(), "the observer declined the third attempt");
    assert_eq!(observer.asked.load(Ordering::SeqCst), 3);
    let state = log.get_log_state().await.expect("log state");
    assert_eq!(state.last_log_id.map(|id| id.index), Some(3));
    // The handle is not poisoned: once there is room, the next append goes through.
    sim.set_fault_plan(FaultPlan::new());
    append(&mut log, big_entries(4, 200))
        .await
        .expect("append with room");
}

#[tokio::test]
async fn an_apply_at_the_size_limit_is_retried_then_fails_having_changed_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = rbolt_raft::rbolt_options().max_size(256 << 10);
    let mut state: TestState =
        StateMachine::open_with(dir.path(), TestMachine, options).expect("open");
    apply(&mut state, big_entries(1, 3)).await.expect("apply");
    let observer = Retrying::new(2, None);
    state.set_observer(observer.clone());
    let before = state.applied().expect("applied");

    let failed = apply(&mut state, big_entries(4, 400)).await;

    assert!(failed.is_err(), "the file cannot hold 800 KB under 256 KiB");
    assert_eq!(observer.asked.load(Ordering::SeqCst), 3);
    assert!(
        observer.errors.lock().expect("lock")[0].contains("maximum size"),
        "{:?}",
        observer.errors.lock().expect("lock")
    );
    assert_eq!(state.applied().expect("applied"), before);
    assert_eq!(data(&state).len(), 3, "nothing of the failed batch is kept");
    // Without an observer the first failure is the answer, as before.
    let plain_dir = tempfile::tempdir().expect("tempdir");
    let mut plain: TestState = StateMachine::open_with(
        plain_dir.path(),
        TestMachine,
        rbolt_raft::rbolt_options().max_size(256 << 10),
    )
    .expect("open");
    assert!(apply(&mut plain, big_entries(1, 400)).await.is_err());
    let _ = plain.applied_state().await.expect("applied state");
}
