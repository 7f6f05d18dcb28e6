//! Three replicas of an rbolt key/value store under openraft, in one process.
//!
//! ```text
//! cargo run -p rbolt-raft --example kv_cluster
//! ```
//!
//! Starts three nodes in a temporary directory, writes through the leader, stops the leader,
//! writes through the new one, restarts the old leader from its files, and reads every key back
//! from every replica.

mod app;

use std::time::Duration;
use tokio::time::Instant;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let router = app::Router::default();
    let config = app::config(50);
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(
            app::start(
                id,
                &dir.path().join(format!("node-{id}")),
                &router,
                config.clone(),
            )
            .await?,
        );
    }
    nodes[0].raft.initialize(app::members(1..=3)).await?;

    let deadline = Instant::now() + Duration::from_secs(60);
    let put = |i: u32| app::Request::Set {
        key: format!("key-{i:04}"),
        value: format!("value-{i}"),
    };
    for i in 0..100 {
        app::write(&router, put(i), deadline).await?;
    }
    let old_leader = app::leader(&router).ok_or("no leader")?;
    println!("wrote 100 keys through node {old_leader}; stopping it");
    let index = nodes
        .iter()
        .position(|n| n.id == old_leader)
        .ok_or("leader not found")?;
    app::stop(&router, nodes.swap_remove(index)).await;

    for i in 100..200 {
        app::write(&router, put(i), deadline).await?;
    }
    println!(
        "wrote 100 more through node {:?}; restarting node {old_leader}",
        app::leader(&router)
    );
    let dir_old = dir.path().join(format!("node-{old_leader}"));
    nodes.push(app::start(old_leader, &dir_old, &router, config.clone()).await?);

    let last = app::write(&router, put(200), deadline).await?;
    println!("last write replaced {:?}", last.previous);
    let leader = app::leader(&router)
        .and_then(|id| router.get(id))
        .ok_or("no leader")?;
    // The leader's read index covers every acknowledged write; its metrics may lag its last
    // apply, so they are not the bound to wait for.
    let applied = Some(
        leader
            .ensure_linearizable(openraft::ReadPolicy::ReadIndex)
            .await?
            .index(),
    );
    for node in &nodes {
        // The restarted node catches up by installing the leader's snapshot: its log was purged.
        node.raft
            .wait(Some(Duration::from_secs(20)))
            .applied_index_at_least(applied, "caught up")
            .await?;
        let all = app::dump(&node.state)?;
        println!(
            "node {}: {} keys, key-0150 = {:?}",
            node.id,
            all.len(),
            all.get("key-0150")
        );
    }
    for node in nodes {
        app::stop(&router, node).await;
    }
    Ok(())
}
