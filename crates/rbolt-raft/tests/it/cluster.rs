//! Three nodes in one process, over the example's in-process network: the leader stops in the
//! middle of a stream of client writes and later restarts from its files, by which time the
//! new leader has purged the log it lacks, so it must catch up by installing a snapshot. Every
//! acknowledged write must be on every node at the end.

use crate::app::{self, Request, Router};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const WRITES: usize = 600;
const WRITERS: usize = 4;
const SNAPSHOT_EVERY: u64 = 64;

/// Acknowledged writes: key, value, and when the leader acknowledged them.
type Acked = Arc<Mutex<Vec<(String, String, Instant)>>>;

fn acked_count(acked: &Acked) -> usize {
    acked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .len()
}

async fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_loss_and_snapshot_catch_up_lose_no_acknowledged_write() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let node_dir = |id: u64| dir.path().join(format!("node-{id}"));
    let router = Router::default();
    let config = app::config(SNAPSHOT_EVERY);
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(
            app::start(id, &node_dir(id), &router, config.clone())
                .await
                .expect("node starts"),
        );
    }
    nodes[0]
        .raft
        .initialize(app::members(1..=3))
        .await
        .expect("initialize");
    wait_for("the first leader", Duration::from_secs(10), || {
        app::leader(&router).is_some()
    })
    .await;

    // Clients: WRITERS tasks share the keys 0..WRITES, each retrying through elections.
    let acked: Acked = Arc::default();
    let failed = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let (router, acked, failed, next) = (
            router.clone(),
            Arc::clone(&acked),
            Arc::clone(&failed),
            Arc::clone(&next),
        );
        writers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= WRITES {
                    return;
                }
                let (key, value) = (format!("key-{i:05}"), format!("value-{i}"));
                let request = Request::Set {
                    key: key.clone(),
                    value: value.clone(),
                };
                match app::write(&router, request, deadline).await {
                    Ok(_) => acked
                        .lock()
                        .expect("acked")
                        .push((key, value, Instant::now())),
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }

    // A third of the way in, the leader stops.
    wait_for("a third of the writes", Duration::from_secs(30), || {
        acked_count(&acked) >= WRITES / 3
    })
    .await;
    let old_leader = app::leader(&router).expect("a leader");
    let position = nodes
        .iter()
        .position(|n| n.id == old_leader)
        .expect("leader is a node");
    let old = nodes.swap_remove(position);
    let acked_before_stop = acked_count(&acked);
    let stopped_at = Instant::now();
    app::stop(&router, old).await;
    wait_for("a new leader", Duration::from_secs(10), || {
        app::leader(&router).is_some()
    })
    .await;
    let elected_after = stopped_at.elapsed();
    wait_for("a write after the stop", Duration::from_secs(10), || {
        acked
            .lock()
            .expect("acked")
            .iter()
            .any(|(_, _, at)| *at > stopped_at)
    })
    .await;
    let first_ack_after = acked
        .lock()
        .expect("acked")
        .iter()
        .filter(|(_, _, at)| *at > stopped_at)
        .map(|(_, _, at)| *at - stopped_at)
        .min()
        .expect("a write after the stop");

    // What the stopped node has on disk, and when the new leader has purged past it.
    let old_last_index = {
        let (mut log, _) =
            rbolt_raft::open::<app::KvConfig, _>(node_dir(old_leader), app::KvMachine)
                .expect("the stopped node's files open");
        openraft::storage::RaftLogStorage::get_log_state(&mut log)
            .await
            .expect("log state")
            .last_log_id
            .map(|id| id.index)
    };
    let new_leader = app::leader(&router).expect("a leader");
    let leader_raft = router.get(new_leader).expect("leader is running");
    let purged = leader_raft
        .wait(Some(Duration::from_secs(30)))
        .metrics(
            |m| m.purged.as_ref().map(|p| p.index) > old_last_index,
            "the new leader purges past the stopped node's log",
        )
        .await
        .expect("the leader purges")
        .purged
        .map(|p| p.index);

    // The old leader comes back from its files; its next entries are purged on the leader.
    nodes.push(
        app::start(old_leader, &node_dir(old_leader), &router, config.clone())
            .await
            .expect("restart"),
    );
    for writer in writers {
        writer.await.expect("writer task");
    }
    let leader = app::leader(&router)
        .and_then(|id| router.get(id))
        .expect("a leader");
    // The leader's committed index covers every acknowledged write (a write is acknowledged
    // once applied on the leader). Its metrics may lag behind its last apply, so they are not
    // the bound to wait for.
    let last_applied = leader
        .ensure_linearizable(openraft::ReadPolicy::ReadIndex)
        .await
        .map(|read| Some(read.index()))
        .expect("the leader's read index");
    for node in &nodes {
        node.raft
            .wait(Some(Duration::from_secs(20)))
            .applied_index_at_least(last_applied, "every node applies everything")
            .await
            .unwrap_or_else(|e| panic!("node {} catches up: {e}", node.id));
    }

    // The restarted node's snapshot covers entries it never had in its log.
    let restarted = nodes
        .iter()
        .find(|n| n.id == old_leader)
        .expect("restarted node");
    let restarted_snapshot = restarted
        .state
        .snapshot_meta()
        .and_then(|m| m.last_log_id)
        .map(|id| id.index);
    assert!(
        restarted_snapshot > old_last_index,
        "node {old_leader} caught up through a snapshot: snapshot {restarted_snapshot:?}, \
         log before restart ended at {old_last_index:?}"
    );

    let acked = acked.lock().expect("acked").clone();
    let expected: BTreeMap<&str, &str> = acked
        .iter()
        .map(|(k, v, _)| (k.as_str(), v.as_str()))
        .collect();
    let mut lost = 0;
    for node in &nodes {
        let all = app::dump(&node.state).expect("dump");
        for (key, value) in &expected {
            if all.get(*key).map(String::as_str) != Some(*value) {
                lost += 1;
                eprintln!(
                    "node {}: acknowledged {key} = {value} is {:?}",
                    node.id,
                    all.get(*key)
                );
            }
        }
        // Nothing else either: every key a node holds is one a client wrote, with the value
        // written for it (a failed write is at most a retried one, never a different value).
        for (key, value) in &all {
            let i: usize = key
                .strip_prefix("key-")
                .and_then(|i| i.parse().ok())
                .unwrap_or_else(|| panic!("node {}: unexpected key {key}", node.id));
            assert!(i < WRITES, "node {}: key {key} was never written", node.id);
            assert_eq!(*value, format!("value-{i}"), "node {}: {key}", node.id);
        }
    }
    let failed = failed.load(Ordering::Relaxed);
    eprintln!(
        "cluster: {} writes acknowledged ({acked_before_stop} before the leader stopped), \
         {failed} not acknowledged, {lost} lost; leader {old_leader} stopped, node {new_leader} \
         elected after {elected_after:.2?}, first write acknowledged {first_ack_after:.2?} after \
         the stop; node {old_leader} restarted with its log at {old_last_index:?} while the leader \
         had purged to {purged:?}, and caught up by snapshot (snapshot at {restarted_snapshot:?}); \
         {:.2?} in all",
        acked.len(),
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert_eq!(
        acked.len(),
        WRITES,
        "every write is acknowledged within the deadline"
    );
    for node in nodes {
        app::stop(&router, node).await;
    }
}
