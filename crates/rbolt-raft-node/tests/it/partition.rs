//! Partition: the leader is cut off from its peers while clients keep writing; a new leader
//! is elected; writes sent to the old leader after the cut are never acknowledged (and exist
//! nowhere at the end); after healing, all nodes converge on every acknowledged write.
//!
//! Peers reach each other through the fault-injecting proxies of [`crate::faults`]: cutting
//! a node off closes its connections through the proxies and refuses new ones, in both
//! directions. Clients (from 127.0.0.1) always get through, so a client can still send writes
//! to the isolated leader.

use crate::cluster::{Ledger, Load, PATIENCE, Rng, SERIAL, check_data, lock, p50_max};
use crate::faults::{Faults, cluster_behind_proxies};
use hyper::StatusCode;
use rbolt_raft_node::client::{Client, ClientError};
use rbolt_raft_node::http::SendError;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Partition rounds per run: each isolates the leader of the moment.
const ROUNDS: usize = 3;
/// Concurrent writers sending to an isolated leader.
const ISOLATED_WRITERS: usize = 4;
/// How long writes are sent to an isolated leader.
const ISOLATED_WRITES_FOR: Duration = Duration::from_secs(3);

/// What became of the writes sent to an isolated leader.
#[derive(Default)]
struct Outcomes {
    sent: u64,
    acked: u64,
    /// Taken and never committed: timed out, or answered as proposed but uncommitted.
    taken: u64,
    unavailable: u64,
    redirected: u64,
}

impl Outcomes {
    fn add(&mut self, other: &Outcomes) {
        self.sent += other.sent;
        self.acked += other.acked;
        self.taken += other.taken;
        self.unavailable += other.unavailable;
        self.redirected += other.redirected;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_acknowledges_nothing_and_the_rest_go_on() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut rng = Rng::from_env_or_time("partition");
    let faults = Faults::new(rng.next());
    let mut cluster = cluster_behind_proxies(&faults).await;
    for id in cluster.ids() {
        cluster.start(id);
    }
    let mut leader = cluster.wait_for_leader(&cluster.ids(), 0).await;
    let addrs: Vec<String> = cluster.ids().iter().map(|&id| cluster.addr(id)).collect();
    let load = Load::start(addrs, 3, "p", 100);

    let isolated_writes = Arc::new(Mutex::new(Ledger::default()));
    let mut elections = Vec::new();
    let mut isolated = Outcomes::default();
    for round in 0..ROUNDS {
        tokio::time::sleep(rng.millis(500, 1500)).await;
        let old = leader.clone();
        faults.isolate(old.id);
        let cut_at = Instant::now();
        // Writes straight to the isolated leader, following no redirect: an `Ok` would be an
        // acknowledgement by the old leader after it was cut off.
        let client = Client::new()
            .with_timeout(Duration::from_millis(1500))
            .following_redirects(false)
            .retrying(false);
        let old_addr = cluster.addr(old.id);
        let isolated_writers: Vec<_> = (0..ISOLATED_WRITERS)
            .map(|w| {
                let (client, ledger, old_addr) = (
                    client.clone(),
                    Arc::clone(&isolated_writes),
                    old_addr.clone(),
                );
                tokio::spawn(async move {
                    let mut outcomes = Outcomes::default();
                    let until = Instant::now() + ISOLATED_WRITES_FOR;
                    let mut n = 0;
                    while Instant::now() < until {
                        let key = format!("isolated-{round}-{w}-{n}");
                        n += 1;
                        lock(&ledger).sent.insert(key.clone(), "never".to_owned());
                        outcomes.sent += 1;
                        match client.put(&old_addr, &key, "never").await {
                            Ok(_) => {
                                outcomes.acked += 1;
                                lock(&ledger).acked.insert(key);
                            }
                            Err(ClientError::Send(SendError::Timeout { .. })) => {
                                outcomes.taken += 1;
                            }
                            // Proposed, then the leader found its quorum lost (issue 47).
                            Err(e)
                                if e.status() == Some(StatusCode::SERVICE_UNAVAILABLE)
                                    && e.to_string().contains("may or may not take effect") =>
                            {
                                outcomes.taken += 1;
                            }
                            Err(e) if e.status().is_some_and(|s| s.is_redirection()) => {
                                outcomes.redirected += 1;
                            }
                            Err(e) if e.status() == Some(StatusCode::SERVICE_UNAVAILABLE) => {
                                outcomes.unavailable += 1;
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            Err(e) => panic!("unexpected answer from the isolated leader: {e}"),
                        }
                    }
                    outcomes
                })
            })
            .collect();
        let others: Vec<u64> = cluster
            .ids()
            .into_iter()
            .filter(|&id| id != old.id)
            .collect();
        leader = cluster.wait_for_leader(&others, old.term).await;
        elections.push(cut_at.elapsed());
        for writer in isolated_writers {
            isolated.add(&writer.await.expect("isolated writer"));
        }
        // The majority side takes writes while the old leader is cut off.
        let acked_before = load.acked();
        let deadline = Instant::now() + PATIENCE;
        while load.acked() < acked_before + 20 {
            assert!(
                Instant::now() < deadline,
                "round {round}: the majority takes no writes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        faults.heal();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ledger = load.stop().await;
    let data = cluster.wait_converged().await;
    let isolated_ledger = std::mem::take(&mut *lock(&isolated_writes));
    let absent: BTreeSet<String> = isolated_ledger.sent.keys().cloned().collect();
    let mut all = ledger;
    // Isolated writes count as sent (so a node holding one is caught as "must not exist"
    // rather than "never sent").
    all.sent.extend(isolated_ledger.sent);
    let lost = check_data(&data, &all, &absent);
    let (p50, max) = p50_max(&elections);
    eprintln!(
        "partition: {ROUNDS} rounds isolating the leader; new leader after p50 {p50:.2?}, max \
         {max:.2?}; {} writes sent to the isolated leader: {} acknowledged, {} taken and never \
         committed (timed out, or answered as proposed when its quorum was lost), {} refused \
         before they were proposed, {} redirected; none of them on any node after healing; {} writes acknowledged by the cluster, {} unknown, \
         {lost} lost; {:.1?}",
        isolated.sent,
        isolated.acked,
        isolated.taken,
        isolated.unavailable,
        isolated.redirected,
        all.acked.len(),
        all.unknown,
        started.elapsed()
    );
    assert_eq!(isolated.acked, 0, "the isolated leader acknowledged writes");
    assert!(
        isolated.taken > 0,
        "the isolated leader took writes it could not commit (else the test proves little)"
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
}
