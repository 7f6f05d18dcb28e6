//! SIGKILL under load: three node processes, client writers recording every acknowledged
//! write, and at seeded random moments a SIGKILL of a node (the leader on every other kill,
//! a random node on the rest), then a restart on its data directory. At the end every node
//! holds every acknowledged write, nothing that was never sent, and the nodes agree.

use crate::cluster::{Cluster, Load, Rng, SERIAL, TIMING_ARGS, check_data, p50_max};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// Kills per run.
const KILLS: usize = 24;
/// Concurrent client writers.
const WRITERS: usize = 4;
/// Bytes per value: enough that snapshots are more than a page or two.
const VALUE_BYTES: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_no_acknowledged_write() {
    let _serial = SERIAL.lock().await;
    sigkill_under_load(Cluster::new(3, TIMING_ARGS), "sigkill under load").await;
}

/// Runs the SIGKILL test on `cluster` (not started yet), printing its summary as `label`.
pub async fn sigkill_under_load(mut cluster: Cluster, label: &str) {
    let started = Instant::now();
    let mut rng = Rng::from_env_or_time(label);
    for id in cluster.ids() {
        cluster.start(id);
    }
    let first = cluster.wait_for_leader(&cluster.ids(), 0).await;
    let addrs: Vec<String> = cluster.ids().iter().map(|&id| cluster.addr(id)).collect();
    let load = Load::start_with(&cluster.base, addrs, WRITERS, "k", VALUE_BYTES);

    let (mut leader_kills, mut elections, mut installs) = (0, Vec::new(), 0);
    let mut acked_at_kill = Vec::new();
    let mut term = first.term;
    for kill in 0..KILLS {
        tokio::time::sleep(rng.millis(200, 1200)).await;
        cluster.check_alive();
        let leader = cluster.leader().await;
        let victim = match (&leader, kill % 2) {
            (Some(leader), 0) => leader.id,
            _ => 1 + rng.below(3),
        };
        let was_leader = leader.as_ref().is_some_and(|l| l.id == victim);
        if let Some(leader) = &leader {
            term = term.max(leader.term);
        }
        acked_at_kill.push(load.acked());
        // The victim's installs since its last start, before they are gone with it.
        installs += cluster
            .status(victim)
            .await
            .map_or(0, |s| s.snapshots_installed);
        cluster.kill(victim);
        let killed_at = Instant::now();
        if was_leader {
            leader_kills += 1;
            let others: Vec<u64> = cluster
                .ids()
                .into_iter()
                .filter(|&id| id != victim)
                .collect();
            let elected = cluster.wait_for_leader(&others, term).await;
            elections.push(killed_at.elapsed());
            term = elected.term;
        }
        tokio::time::sleep(rng.millis(0, 800)).await;
        cluster.start(victim);
        cluster.wait_until_up(victim).await;
    }
    // Writes went on through the kills: the acknowledged count grew.
    let acked_before_last_kill = *acked_at_kill.last().expect("kills");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ledger = load.stop().await;
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &BTreeSet::new());
    for id in cluster.ids() {
        installs += cluster
            .status(id)
            .await
            .map_or(0, |s| s.snapshots_installed);
    }
    let (p50, max) = p50_max(&elections);
    eprintln!(
        "{label}: {KILLS} kills ({leader_kills} of the leader), {} writes \
         acknowledged, {} unknown (no answer), {lost} lost, {} keys on each node; new leader \
         after a leader kill: p50 {p50:.2?}, max {max:.2?} over {} elections; {installs} \
         snapshots installed by restarted nodes; {:.1?}",
        ledger.acked.len(),
        ledger.unknown,
        data.values().next().map_or(0, |d| d.len()),
        elections.len(),
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert!(
        leader_kills * 2 >= KILLS,
        "the leader was killed {leader_kills} times of {KILLS}"
    );
    assert!(
        ledger.acked.len() > acked_before_last_kill && acked_before_last_kill > acked_at_kill[0],
        "writes were acknowledged throughout: {acked_at_kill:?}, {} at the end",
        ledger.acked.len()
    );
}
