//! A snapshot sent in chunks that resume, checked end to end: a follower that lags behind a
//! purged log catches up on a snapshot many chunks long although its transfer is cut part way
//! (a chunk half written) and a byte of it is damaged on its way (where only the digest can
//! tell). The failpoints are the receiving node's (`FAILPOINTS` in its environment).

use crate::cluster::{Cluster, Load, PATIENCE, SERIAL, TIMING_ARGS, check_data};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// The chunk size: small, so the snapshot is many chunks.
const CHUNK_BYTES: &str = "65536";

/// Keys written while node 3 is down, and their values' size: a snapshot of a few MiB.
const KEYS: usize = 2000;
const VALUE_BYTES: usize = 1000;

/// Node 3 is down while 2000 keys of 1000 bytes are written and the leader purges its log;
/// restarted, it needs the snapshot, sent in 64 KiB chunks. Its fourth data chunk is cut half
/// way (the sender sees a failed request) and its eleventh has a byte flipped. The leader must
/// resume the cut transfer where node 3's copy ends (it logs so), node 3 must refuse the
/// damaged copy by its digest (counted as `snapshot_unsound`) and discard it, and the next
/// transfer must install: node 3 holds exactly what the others hold, every acknowledged write
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_and_damaged_snapshot_transfer_resumes_and_is_checked_before_install() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut args = TIMING_ARGS.to_vec();
    args.extend(["--snapshot-chunk-bytes", CHUNK_BYTES]);
    let mut cluster = Cluster::new(3, &args);
    cluster.env.insert(
        3,
        vec![(
            "FAILPOINTS".to_owned(),
            "snapshot::chunk-cut=3*off->1*return->off;\
             snapshot::chunk-flip=10*off->1*return->off"
                .to_owned(),
        )],
    );
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    cluster.kill(3);
    let addrs = vec![cluster.addr(1), cluster.addr(2)];
    let load = Load::start(addrs, 8, "t", VALUE_BYTES);
    let deadline = Instant::now() + PATIENCE * 2;
    while load.acked() < KEYS {
        assert!(
            Instant::now() < deadline,
            "only {} writes acknowledged",
            load.acked()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ledger = load.stop().await;
    let leader = cluster.wait_for_leader(&[1, 2], 0).await;
    assert!(
        leader.purged.is_some_and(|p| p > 0),
        "the leader kept its log: {leader:?}"
    );

    cluster.start(3);
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &BTreeSet::new());
    let status = cluster.status(3).await.expect("node 3 answers");
    let resumed = [1, 2].iter().any(|&id| {
        cluster
            .log_text(id)
            .contains("snapshot transfer resumed where the peer's copy ends")
    });
    let (_, metrics) = crate::cluster::raw(
        &cluster.addr(3),
        hyper::Method::GET,
        "/metrics",
        &[],
        Vec::new(),
    )
    .await;
    let refused_unsound = metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix("rbolt_raft_peer_rpcs_refused_total{reason=\"snapshot_unsound\"} ")
        })
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let snapshot_bytes = std::fs::metadata(cluster.nodes[&3].dir.join(rbolt_raft::SNAPSHOT_FILE))
        .map_or(0, |m| m.len());
    eprintln!(
        "snapshot transfer: {} writes acknowledged, {lost} lost; node 3 installed {} \
         snapshot(s) of {snapshot_bytes} bytes; resumed: {resumed}; damaged copies refused: \
         {refused_unsound}; {:.1?}",
        ledger.acked.len(),
        status.snapshots_installed,
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert!(status.snapshots_installed > 0, "{status:?}");
    assert!(
        snapshot_bytes > 10 * 65536,
        "the snapshot is only {snapshot_bytes} bytes"
    );
    assert!(
        resumed,
        "no transfer resumed:\n{}\n{}",
        cluster.log_tail(1),
        cluster.log_tail(2)
    );
    assert!(
        refused_unsound >= 1 && cluster.log_text(3).contains("damaged on its way"),
        "the damaged copy was not refused by its digest:\n{}",
        cluster.log_tail(3)
    );
}
