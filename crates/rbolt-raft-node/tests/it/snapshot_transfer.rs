//! A snapshot sent in chunks that resume, checked end to end: a follower that lags behind a
//! purged log catches up on a snapshot many chunks long although its transfer is cut part way
//! (a chunk half written) and a byte of it is damaged on its way (where only the digest can
//! tell). The failpoints are the receiving node's (`FAILPOINTS` in its environment).

use crate::cluster::{Cluster, Load, PATIENCE, SERIAL, TIMING_ARGS, check_data};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// The chunk size: small, so the snapshot is many chunks.
pub(crate) const CHUNK_BYTES: &str = "65536";

/// Keys written while node 3 is down, and their values' size: a snapshot of a few MiB.
const KEYS: usize = 2000;
pub(crate) const VALUE_BYTES: usize = 1000;

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
    let (mut cluster, ledger, _) = lagging_node_3(
        "snapshot::chunk-cut=3*off->1*return->off;\
         snapshot::chunk-flip=10*off->1*return->off",
    )
    .await;
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

/// Node `id`'s counter `name` (`rbolt_raft_<name>_total`), 0 if it is not there.
pub(crate) async fn counter(cluster: &Cluster, id: u64, name: &str) -> u64 {
    let (_, metrics) = crate::cluster::raw(
        &cluster.addr(id),
        hyper::Method::GET,
        "/metrics",
        &[],
        Vec::new(),
    )
    .await;
    let prefix = format!("rbolt_raft_{name}_total ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The partial snapshot in node `id`'s directory, and its length, if there is one (either
/// form of its name: `.tmp` was the suffix before partials were kept across restarts).
pub(crate) fn partial_of(cluster: &Cluster, id: u64) -> Option<(String, u64)> {
    let dir = &cluster.nodes[&id].dir;
    cluster.dir_entries(id).into_iter().find_map(|name| {
        let partial = name.ends_with(".partial") || name.ends_with(rbolt_raft::TMP_SUFFIX);
        (name.starts_with("received-") && partial)
            .then(|| {
                std::fs::metadata(dir.join(&name))
                    .map(|m| (name, m.len()))
                    .ok()
            })
            .flatten()
    })
}

/// The `held` and `length` of the last "resumed" line in `log`.
pub(crate) fn last_resume(log: &str) -> Option<(u64, u64)> {
    resumes(log).pop()
}

/// The `held` and `length` of every "resumed" line in `log`.
pub(crate) fn resumes(log: &str) -> Vec<(u64, u64)> {
    let field = |line: &str, name: &str| -> Option<u64> {
        let at = line.find(&format!("{name}="))? + name.len() + 1;
        let digits: String = line[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    log.lines()
        .filter(|l| l.contains("snapshot transfer resumed where the peer's copy ends"))
        .filter_map(|line| Some((field(line, "held")?, field(line, "length")?)))
        .collect()
}

/// A cluster of 3 whose node 3 is down while the others take [`KEYS`] writes and purge their
/// log, so that node 3 needs a snapshot when it comes back; node 3 runs with `failpoints`.
pub(crate) async fn lagging_node_3(failpoints: &str) -> (Cluster, crate::cluster::Ledger, u64) {
    let mut args = TIMING_ARGS.to_vec();
    args.extend(["--snapshot-chunk-bytes", CHUNK_BYTES]);
    let mut cluster = Cluster::new(3, &args);
    cluster
        .env
        .insert(3, vec![("FAILPOINTS".to_owned(), failpoints.to_owned())]);
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    cluster.kill(3);
    let load = Load::start(vec![cluster.addr(1), cluster.addr(2)], 8, "t", VALUE_BYTES);
    let deadline = Instant::now() + PATIENCE * 2;
    while load.acked() < KEYS {
        assert!(
            Instant::now() < deadline,
            "only {} acknowledged",
            load.acked()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ledger = load.stop().await;
    let leader = cluster.wait_for_leader(&[1, 2], 0).await;
    assert!(leader.purged.is_some_and(|p| p > 0), "log kept: {leader:?}");
    (cluster, ledger, leader.id)
}

/// Starts node 3 and SIGKILLs it once its partial snapshot holds at least `at_least` bytes;
/// returns the partial's name and length after the kill.
pub(crate) async fn kill_node_3_mid_transfer(
    cluster: &mut Cluster,
    at_least: u64,
) -> (String, u64) {
    cluster.start(3);
    let deadline = Instant::now() + PATIENCE;
    while partial_of(cluster, 3).is_none_or(|(_, held)| held < at_least) {
        assert!(
            Instant::now() < deadline,
            "node 3 received no {at_least} bytes of a snapshot:\n{}",
            cluster.log_tail(3)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cluster.kill(3);
    partial_of(cluster, 3).expect("the partial snapshot is still there after the kill")
}

/// Node 3, receiving a snapshot in slow 64 KiB chunks, is SIGKILLed after at least 8 chunks
/// arrived and restarted (without the slow chunks): its partial copy survives the restart, the
/// leader resumes the transfer from exactly what node 3 held (its log says so), node 3 receives
/// only the rest (its `snapshot_bytes_received` counter, which starts at 0 with the process),
/// and it ends with exactly the others' data, no acknowledged write lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_killed_mid_snapshot_transfer_resumes_after_its_restart() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let (mut cluster, ledger, leader) = lagging_node_3("snapshot::chunk-slow=sleep(100)").await;
    let (name, held) = kill_node_3_mid_transfer(&mut cluster, 8 * 65536).await;
    cluster.env.remove(&3);
    cluster.start(3);
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &BTreeSet::new());
    let received = counter(&cluster, 3, "snapshot_bytes_received").await;
    let resume = last_resume(&cluster.log_text(leader));
    let status = cluster.status(3).await.expect("node 3 answers");
    eprintln!(
        "restart mid-transfer: {name} held {held} bytes at the kill; the leader resumed at \
         {resume:?}; node 3 then received {received} bytes; {} writes acknowledged, {lost} \
         lost; {:.1?}",
        ledger.acked.len(),
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert!(status.snapshots_installed > 0, "{status:?}");
    let (resumed_at, length) = resume.unwrap_or_else(|| {
        panic!(
            "the transfer started over:\n{}\n{}",
            cluster.log_tail(leader),
            cluster.log_tail(3)
        )
    });
    assert_eq!(resumed_at, held, "resumed where node 3's copy ended");
    assert_eq!(
        received,
        length - held,
        "node 3 received only what it lacked"
    );
    assert!(
        name.contains(&format!("-{length}.")),
        "{name} names {length}"
    );
    assert!(
        partial_of(&cluster, 3).is_none(),
        "the installed copy is gone"
    );
}
