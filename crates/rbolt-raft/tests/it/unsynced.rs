//! Apply batches without syncs (`StateMachine::set_sync_every`): the state file is synced
//! once every so many entries; a power loss sets it back to its last sync, whole, whose
//! applied id claims no more than it holds, and openraft applies the rest again from the log.

use crate::app::{self, KvMachine, Request, Router};
use openraft::Raft;
use openraft::type_config::async_runtime::WatchReceiver;
use rbolt_raft::STATE_FILE;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

async fn start(dir: &Path, router: &Router, sync_every: u64) -> app::Node {
    let (log, state) = rbolt_raft::open::<app::KvConfig, _>(dir, KvMachine).expect("open");
    state.set_sync_every(sync_every);
    let raft = Raft::new(1, app::config(10_000), router.clone(), log, state.clone())
        .await
        .expect("raft");
    router.add(1, raft.clone());
    app::Node { id: 1, raft, state }
}

async fn put(router: &Router, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let request = Request::Set {
        key: format!("key-{n:03}"),
        value: format!("value-{n}"),
    };
    app::write(router, request, deadline).await.expect("write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_set_back_to_its_last_sync_catches_up_from_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node_dir = dir.path().join("node-1");
    let router = Router::default();

    // Syncs once every 8 entries: 20 single writes (and the first start's entries) make two
    // or three syncs, not one per batch.
    let node = start(&node_dir, &router, 8).await;
    node.raft
        .initialize(app::members(1..=1))
        .await
        .expect("initialize");
    for n in 0..20 {
        put(&router, n).await;
    }
    let counters = node.state.counters();
    assert!(
        (2..=3).contains(&counters.syncs) && counters.commits >= 20,
        "{counters:?}"
    );

    // A durable point, then ten writes after it: the file a power loss would leave is the
    // state file as of the durable point.
    node.state.db().sync().expect("sync");
    let image = std::fs::read(node_dir.join(STATE_FILE)).expect("read");
    let (durable_applied, _) = node.state.applied().expect("applied");
    for n in 20..30 {
        put(&router, n).await;
    }
    let last = node.raft.metrics().borrow_watched().last_applied;
    app::stop(&router, node).await;
    std::fs::write(node_dir.join(STATE_FILE), &image).expect("the power loss's state file");

    // Reopened as the power loss left it: the applied id is the durable one and the data
    // holds exactly what it says (the first 20 writes), never more.
    let (_, state) = rbolt_raft::open::<app::KvConfig, _>(&node_dir, KvMachine).expect("open");
    let (applied, _) = state.applied().expect("applied");
    assert_eq!(applied, durable_applied);
    let held = app::dump(&state).expect("dump");
    assert_eq!(held.len(), 20, "{held:?}");
    drop(state);

    // openraft applies the committed entries after it again, from the log.
    let node = start(&node_dir, &router, 8).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while node.raft.metrics().borrow_watched().last_applied < last {
        assert!(
            Instant::now() < deadline,
            "the entries were not applied again"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let all = app::dump(&node.state).expect("dump");
    assert_eq!(all.len(), 30, "every acknowledged write is back: {all:?}");
    for n in 0..30 {
        assert_eq!(all.get(&format!("key-{n:03}")), Some(&format!("value-{n}")));
    }
    app::stop(&router, node).await;
}
