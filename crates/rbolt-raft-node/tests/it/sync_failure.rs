//! A failed sync stops the node: after its log or state file failed to sync, what it wrote
//! may be lost although it was reported, so the node must not go on (it could acknowledge a
//! write it does not hold). rbolt's failpoint `commit::before-meta-sync` (the node's test build
//! has them; `FAILPOINTS` in one node's environment sets them) fails one commit of that node
//! where its meta sync would fail and poisons the handle, as a failed `fdatasync` does.

use crate::cluster::{Cluster, Load, PATIENCE, SERIAL, TIMING_ARGS, check_data};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// The failpoint: a commit's meta is written, and the sync after it fails.
const FAILPOINT: &str = "commit::before-meta-sync";

/// One commit of node 1 fails at the meta sync, once (the failpoint is off again after it, so
/// a node that went on would find its files writable), while four clients write through
/// every node: node 1 must exit non-zero, naming the storage failure; the others elect a
/// leader and take writes; node 1, restarted without the fault, catches up, and every node
/// holds every acknowledged write. Twice: node 1 leading, with the state file synced every
/// 1000 entries (the default), and node 1 following, with every apply synced; the commits
/// before the failure differ, so that it falls on the log or the state file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_stops_the_node_and_no_acknowledged_write_is_lost() {
    let _serial = SERIAL.lock().await;
    fail_one_sync(true, &[], 200).await;
    fail_one_sync(false, &["--apply-sync-every", "1"], 151).await;
}

/// The test above, with node 1 leading or not (`lead`), `args` for every node, and `commits`
/// of node 1 (log and state file together) before the one that fails.
async fn fail_one_sync(lead: bool, args: &[&str], commits: u64) {
    let started = Instant::now();
    let mut all = TIMING_ARGS.to_vec();
    all.extend_from_slice(args);
    let mut cluster = Cluster::new(3, &all);
    let failpoints = format!("{FAILPOINT}={commits}*off->1*return->off");
    cluster
        .env
        .insert(1, vec![("FAILPOINTS".to_owned(), failpoints)]);
    for id in cluster.ids() {
        cluster.start(id);
    }
    let first = cluster.wait_for_leader(&cluster.ids(), 0).await;
    if (first.id == 1) != lead {
        // If the hand-off fails the test goes on with node 1 in the other role: its failed
        // commit must not lose an acknowledged write there either.
        let to = if lead { 1 } else { 2 };
        let client = cluster.client(PATIENCE);
        let _ = client.transfer_leader(&cluster.addr(first.id), to).await;
    }
    let led = cluster.leader().await.map(|s| s.id);
    let addrs: Vec<String> = cluster.ids().iter().map(|&id| cluster.addr(id)).collect();
    let load = Load::start_with(&cluster.base, addrs, 4, "k", 100);

    let code = cluster.wait_exit(1).await;
    let acked_at_failure = load.acked();
    let log = cluster.log_text(1);
    assert_eq!(code, Some(1), "node 1 went on after a failed sync:\n{log}");
    assert!(
        log.contains("storage failed") && log.contains(&format!("failpoint {FAILPOINT}")),
        "node 1's exit does not say why:\n{}",
        cluster.log_tail(1)
    );

    // The other two elect a leader and take writes.
    cluster.wait_for_leader(&[2, 3], 0).await;
    let deadline = Instant::now() + PATIENCE;
    while load.acked() < acked_at_failure + 50 {
        assert!(
            Instant::now() < deadline,
            "no write acknowledged after node 1 stopped ({acked_at_failure} before)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ledger = load.stop().await;

    cluster.env.remove(&1);
    cluster.start(1);
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &BTreeSet::new());
    let why = log
        .lines()
        .find(|line| line.contains("storage failed"))
        .unwrap_or_default();
    eprintln!(
        "failed sync {args:?}: node 1 (leader at the start: {}) exited with {code:?} after {} \
         acknowledged writes ({why}); {} acknowledged in all, {} unknown, {lost} lost, {} keys \
         on each node; {:.1?}",
        led == Some(1),
        acked_at_failure,
        ledger.acked.len(),
        ledger.unknown,
        data.values().next().map_or(0, |d| d.len()),
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
}
