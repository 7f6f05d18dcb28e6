//! Killing nodes during their first start and during snapshot installs: they come back and
//! catch up.
//!
//! First start: in rounds, three new nodes start on new directories and each is SIGKILLed at
//! its own random moment of its first start (from 0 to the time a node takes to answer); they
//! are restarted on what the kills left, must form a cluster, take a write, and agree.
//!
//! Install: nodes 1 and 2 start (a majority of three) and take writes; node 3 has never run.
//! It is killed once during its first start; then, in rounds, it is started while the leader
//! has purged the log it lacks, so it must install a snapshot, and killed at a random moment
//! once its directory shows a snapshot arriving. Finally it runs: it must catch up, and every
//! node must hold every acknowledged write.

use crate::cluster::{
    Cluster, Load, PATIENCE, Rng, SERIAL, TIMING_ARGS, check_data, free_port, list_dir, node_exe,
};
use rbolt_raft_node::client::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

/// Rounds of the first-start test, each a new cluster whose three nodes are all killed.
const FIRST_START_ROUNDS: usize = 5;
/// Kills of node 3 while it receives or installs a snapshot.
const INSTALL_KILLS: usize = 4;
/// Attempts at catching an install, at most (an install that finishes before it is seen is
/// not a kill during install).
const INSTALL_ATTEMPTS_MAX: usize = 20;
/// Once a snapshot is seen arriving, the kill comes from 0 to this many milliseconds later.
const INSTALL_KILL_MS_MAX: u64 = 40;
/// Bytes per value: a snapshot of a few megabytes takes long enough to receive and install
/// that its temporary files can be seen.
const VALUE_BYTES: usize = 2000;

/// How long a node takes from its start until it answers, measured on a throwaway node.
async fn startup_time(root: &std::path::Path) -> Duration {
    let dir = root.join("calibration");
    let listen = format!("127.0.0.1:{}", free_port());
    let spawned = Instant::now();
    let mut child = Command::new(node_exe())
        .args(["serve", "--id", "9", "--listen", &listen, "--data-dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node starts");
    let client = Client::new()
        .with_timeout(Duration::from_millis(500))
        .retrying(false);
    while client.status(&listen).await.is_err() {
        assert!(
            spawned.elapsed() < PATIENCE,
            "the calibration node never answered"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = spawned.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

/// What a kill during the first start found in the node's directory.
fn first_start_state(entries: &BTreeSet<String>) -> &'static str {
    let has = |name: &str| entries.contains(name);
    if entries.is_empty() {
        "no files"
    } else if !has(rbolt_raft::STATE_FILE) {
        "no state file"
    } else if !has(rbolt_raft::LOG_FILE) {
        "the state file only"
    } else if !has(rbolt_raft_node::node::NODE_ID_FILE) {
        "both files, no node id"
    } else {
        "everything"
    }
}

/// The temporary file that shows a snapshot being received or installed, if there is one.
fn installing(entries: &BTreeSet<String>) -> Option<&'static str> {
    entries.iter().find_map(|name| {
        // A partial snapshot being received (kept across restarts: `.partial`).
        if name.starts_with("received-") && name.ends_with(".partial") {
            Some("receiving")
        } else if !name.ends_with(rbolt_raft::TMP_SUFFIX) {
            None
        } else if name.starts_with("received-") {
            Some("receiving")
        } else if name.starts_with("incoming-") {
            Some("verifying")
        } else if name.starts_with("state-") {
            Some("staging the state file")
        } else {
            None
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_snapshot_install_lose_nothing() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut rng = Rng::from_env_or_time("kill during install");
    let mut cluster = Cluster::new(3, TIMING_ARGS);
    cluster.start(1);
    cluster.start(2);
    cluster.wait_for_leader(&[1, 2], 0).await;
    let load = Load::start(vec![cluster.addr(1), cluster.addr(2)], 4, "s", VALUE_BYTES);

    // 1. One kill during node 3's first start.
    let startup = startup_time(cluster.root.path()).await;
    let node_dir = cluster.nodes[&3].dir.clone();
    cluster.start(3);
    tokio::time::sleep(rng.millis(0, startup.as_millis() as u64)).await;
    cluster.kill(3);
    let first_start = first_start_state(&list_dir(&node_dir));

    // 2. Kills during snapshot installs.
    let mut install_kills: BTreeMap<&str, usize> = BTreeMap::new();
    let mut attempts = 0;
    let mut node3_last = None;
    while install_kills.values().sum::<usize>() < INSTALL_KILLS {
        attempts += 1;
        assert!(
            attempts <= INSTALL_ATTEMPTS_MAX,
            "no kill during an install in {INSTALL_ATTEMPTS_MAX} attempts: {install_kills:?}"
        );
        // Wait until the leader has purged past what node 3 has, so it needs a snapshot.
        let deadline = Instant::now() + PATIENCE;
        loop {
            let leader = cluster.leader().await;
            if leader.is_some_and(|l| l.purged.is_some() && l.purged > node3_last) {
                break;
            }
            assert!(Instant::now() < deadline, "the leader never purged its log");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cluster.start(3);
        let deadline = Instant::now() + PATIENCE;
        let caught = loop {
            if installing(&list_dir(&node_dir)).is_some() {
                // An install began: kill it at a random moment of it (or after it).
                tokio::time::sleep(rng.millis(0, INSTALL_KILL_MS_MAX)).await;
                break installing(&list_dir(&node_dir));
            }
            // Installed already (or never needed): a miss.
            if let Some(status) = cluster.status(3).await
                && status.snapshots_installed > 0
            {
                break None;
            }
            assert!(
                Instant::now() < deadline,
                "node 3 never installed a snapshot"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        if let Some(status) = cluster.status(3).await {
            node3_last = status.last_log_index.max(node3_last);
        }
        cluster.kill(3);
        if let Some(what) = caught {
            *install_kills.entry(what).or_default() += 1;
        }
    }

    // 3. Node 3 runs: it comes back on what the kills left, catches up, and agrees.
    cluster.start(3);
    cluster.wait_until_up(3).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ledger = load.stop().await;
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &BTreeSet::new());
    let status = cluster.status(3).await.expect("node 3 answers");
    eprintln!(
        "kill during install: node 3 killed in its first start found {first_start}; \
         {} kills during snapshot installs in {attempts} attempts, at {install_kills:?}; node 3 \
         then caught up to index {:?} ({} snapshot installs in its last run); {} writes \
         acknowledged, {} unknown, {lost} lost; {:.1?}",
        install_kills.values().sum::<usize>(),
        status.applied,
        status.snapshots_installed,
        ledger.acked.len(),
        ledger.unknown,
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert_eq!(data.len(), 3, "all three nodes hold the data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_first_start_leave_nodes_that_form_a_cluster() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut rng = Rng::from_env_or_time("kill during first start");
    let mut found: BTreeMap<&str, usize> = BTreeMap::new();
    let mut kill_ms_max = 0;
    let mut elections = Vec::new();
    for round in 0..FIRST_START_ROUNDS {
        let mut cluster = Cluster::new(3, TIMING_ARGS);
        if round == 0 {
            kill_ms_max = startup_time(cluster.root.path()).await.as_millis() as u64;
        }
        // Each node dies at its own moment; the kills are ordered by time.
        let mut deaths: Vec<(Duration, u64)> = cluster
            .ids()
            .into_iter()
            .map(|id| (rng.millis(0, kill_ms_max), id))
            .collect();
        deaths.sort();
        let spawned = Instant::now();
        for id in cluster.ids() {
            cluster.start(id);
        }
        for (at, id) in deaths {
            tokio::time::sleep_until(spawned + at).await;
            cluster.kill(id);
        }
        for id in cluster.ids() {
            *found
                .entry(first_start_state(&cluster.dir_entries(id)))
                .or_default() += 1;
        }
        let restarted = Instant::now();
        for id in cluster.ids() {
            cluster.start(id);
        }
        cluster.wait_for_leader(&cluster.ids(), 0).await;
        elections.push(restarted.elapsed());
        let key = format!("round-{round}");
        let client = Client::new().with_timeout(PATIENCE);
        let written = client
            .put(&cluster.addr(1), &key, "formed")
            .await
            .unwrap_or_else(|e| panic!("round {round}: the restarted cluster takes a write: {e}"));
        let data = cluster.wait_converged().await;
        for (id, all) in &data {
            assert_eq!(
                all.get(&key).map(String::as_str),
                Some("formed"),
                "round {round}: node {id} holds the write at index {}",
                written.index
            );
            assert_eq!(
                all.len(),
                1,
                "round {round}: node {id} holds only that write"
            );
        }
    }
    eprintln!(
        "kill during first start: {FIRST_START_ROUNDS} new clusters, each of the {} nodes killed \
         0 to {kill_ms_max} ms after its start (a node answers after about that), found \
         {found:?}; every cluster formed after the restart (leader after {:?}), took a write \
         and agreed; {:.1?}",
        FIRST_START_ROUNDS * 3,
        elections,
        started.elapsed()
    );
}
