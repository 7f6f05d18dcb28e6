//! SIGKILL under load: three node processes, client writers recording every acknowledged
//! write, and at seeded random moments a SIGKILL of a node (the leader on every other kill,
//! a random node on the rest), then a restart on its data directory. At the end every node
//! holds every acknowledged write, nothing that was never sent, and the nodes agree.
//!
//! Two variants run the same loop: one with a quota low enough that the NOSPACE alarm trips
//! again and again during the kills (an operator between kills deletes old keys, vacuums
//! and disarms, as in `space`), one with the apply unsynced over a long window (the default
//! `--apply-sync-every` and snapshots far apart, so a killed node replays many applied
//! entries from its log). Their size is `RBOLT_RAFT_KILL_VARIANT_KILLS` (8 kills in the fast
//! tier, 12 in CI, 100 in the soak).

use crate::cluster::{
    Cluster, Ledger, Load, PATIENCE, Rng, SERIAL, TIMING_ARGS, check_data, p50_max,
};
use rbolt_raft_node::client::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// Kills per run of the plain loop.
const KILLS: usize = 24;
/// Concurrent client writers.
const WRITERS: usize = 4;
/// Bytes per value: enough that snapshots are more than a page or two.
const VALUE_BYTES: usize = 200;
/// The quota of the quota variant: a few thousand keys, reached within seconds.
const QUOTA_BYTES: u64 = 256 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_no_acknowledged_write() {
    let _serial = SERIAL.lock().await;
    sigkill_under_load(Cluster::new(3, TIMING_ARGS), "sigkill under load").await;
}

/// The loop with every node's quota low: the NOSPACE alarm trips during the kills (at least
/// once, counted), puts are refused (507) while it is raised and the writers retry them; an
/// operator between kills deletes the oldest acknowledged keys, vacuums each node and
/// disarms. At the end every node reports the same alarms, a last cleanup clears them, a put
/// goes through, and every acknowledged write not deleted is on every node, every
/// acknowledged delete on none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_with_the_nospace_alarm_tripping_loses_no_acknowledged_write() {
    let _serial = SERIAL.lock().await;
    let quota = QUOTA_BYTES.to_string();
    let mut args = TIMING_ARGS.to_vec();
    args.extend(["--quota-backend-bytes", &quota]);
    let plan = Plan {
        kills: variant_kills(),
        operator: true,
    };
    let label = "sigkill under load, quota";
    sigkill_loop(Cluster::new(3, &args), label, &plan).await;
}

/// The loop with the apply unsynced over a long window: `--apply-sync-every` at its default
/// (1000) and snapshots every 5000 entries (not 200), so a killed node has applied up to a
/// thousand entries its state file does not hold durably, and replays them from its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_with_the_apply_unsynced_loses_no_acknowledged_write() {
    let _serial = SERIAL.lock().await;
    let args = [
        "--heartbeat-ms",
        "50",
        "--election-timeout-ms",
        "300",
        "--snapshot-every",
        "5000",
        "--logs-to-keep",
        "0",
    ];
    let plan = Plan {
        kills: variant_kills(),
        operator: false,
    };
    let label = "sigkill under load, unsynced apply";
    sigkill_loop(Cluster::new(3, &args), label, &plan).await;
}

/// Kills of each variant run (see the module's docs).
fn variant_kills() -> usize {
    rbolt_testkit::tier::size("RBOLT_RAFT_KILL_VARIANT_KILLS", 8, 12, 100) as usize
}

/// What a run of the loop does besides the kills.
struct Plan {
    kills: usize,
    /// Tend the NOSPACE alarm between kills ([`Operator`]) and require that it tripped.
    operator: bool,
}

/// Runs the SIGKILL test on `cluster` (not started yet), printing its summary as `label`.
pub async fn sigkill_under_load(cluster: Cluster, label: &str) {
    let plan = Plan {
        kills: KILLS,
        operator: false,
    };
    sigkill_loop(cluster, label, &plan).await;
}

/// What the kills of a run saw.
#[derive(Default)]
struct Kills {
    leader_kills: usize,
    elections: Vec<Duration>,
    installs: u64,
    acked_at_kill: Vec<usize>,
    term: u64,
}

/// Kills one node (the leader on even kills when there is one), waits for a new leader if it
/// led, and restarts it; returns its id.
async fn kill_one(
    cluster: &mut Cluster,
    rng: &mut Rng,
    kill: usize,
    load: &Load,
    k: &mut Kills,
) -> u64 {
    cluster.check_alive();
    let leader = cluster.leader().await;
    let victim = match (&leader, kill % 2) {
        (Some(leader), 0) => leader.id,
        _ => 1 + rng.below(3),
    };
    let was_leader = leader.as_ref().is_some_and(|l| l.id == victim);
    if let Some(leader) = &leader {
        k.term = k.term.max(leader.term);
    }
    k.acked_at_kill.push(load.acked());
    // The victim's installs since its last start, before they are gone with it.
    k.installs += cluster
        .status(victim)
        .await
        .map_or(0, |s| s.snapshots_installed);
    cluster.kill(victim);
    let killed_at = Instant::now();
    if was_leader {
        k.leader_kills += 1;
        let others: Vec<u64> = cluster
            .ids()
            .into_iter()
            .filter(|&id| id != victim)
            .collect();
        let elected = cluster.wait_for_leader(&others, k.term).await;
        k.elections.push(killed_at.elapsed());
        k.term = elected.term;
    }
    tokio::time::sleep(rng.millis(0, 800)).await;
    cluster.start(victim);
    cluster.wait_until_up(victim).await;
    victim
}

/// Waits until node `victim`, restarted while an alarm was raised (and nobody disarmed it),
/// reports the alarms the other nodes report: the alarm state survives a restart.
async fn alarm_survived(cluster: &Cluster, victim: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut reported = BTreeMap::new();
        for id in cluster.ids() {
            reported.extend(cluster.status(id).await.map(|s| (id, s.alarms)));
        }
        let theirs: BTreeSet<_> = reported
            .iter()
            .filter(|(id, _)| **id != victim)
            .map(|(_, a)| a.clone())
            .collect();
        if theirs.len() == 1 && reported.get(&victim).is_some_and(|a| theirs.contains(a)) {
            assert!(
                !reported[&victim].is_empty(),
                "the alarm was gone after node {victim}'s restart, nobody disarmed it: {reported:?}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {victim} restarted under an alarm reports {reported:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The loop: writers on every node, `plan.kills` kills, then the check.
async fn sigkill_loop(mut cluster: Cluster, label: &str, plan: &Plan) {
    let started = Instant::now();
    let mut rng = Rng::from_env_or_time(label);
    for id in cluster.ids() {
        cluster.start(id);
    }
    let first = cluster.wait_for_leader(&cluster.ids(), 0).await;
    let addrs: Vec<String> = cluster.ids().iter().map(|&id| cluster.addr(id)).collect();
    let load = Load::start_with(&cluster.base, addrs.clone(), WRITERS, "k", VALUE_BYTES);
    let mut operator = Operator::new(&cluster, addrs);
    if plan.operator {
        // The first kill comes under the alarm, the others as it trips again.
        let deadline = Instant::now() + PATIENCE;
        while !operator.alarmed().await {
            assert!(Instant::now() < deadline, "the quota was never reached");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut k = Kills {
        term: first.term,
        ..Kills::default()
    };
    for kill in 0..plan.kills {
        tokio::time::sleep(rng.millis(200, 1200)).await;
        // Under an alarm, the kill and the restart come before the operator's cleanup.
        let alarmed = plan.operator && operator.surely_alarmed().await;
        let victim = kill_one(&mut cluster, &mut rng, kill, &load, &mut k).await;
        if alarmed {
            alarm_survived(&cluster, victim).await;
            operator.kills_under_alarm += 1;
        }
        if plan.operator {
            operator.tend(&load).await;
        }
    }
    // Writes went on through the kills: the acknowledged count grew.
    let acked_before_last_kill = *k.acked_at_kill.last().expect("kills");
    tokio::time::sleep(Duration::from_millis(500)).await;
    if plan.operator {
        operator.tend(&load).await;
    }
    let mut ledger = load.stop().await;
    let after = if plan.operator {
        Some(operator.finish(&cluster, &mut ledger).await)
    } else {
        None
    };
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &operator.deleted);
    for id in cluster.ids() {
        k.installs += cluster
            .status(id)
            .await
            .map_or(0, |s| s.snapshots_installed);
    }
    let (p50, max) = p50_max(&k.elections);
    eprintln!(
        "{label}: {} kills ({} of the leader), {} writes acknowledged, {} unknown (no answer), \
         {lost} lost, {} keys on each node; new leader after a leader kill: p50 {p50:.2?}, max \
         {max:.2?} over {} elections; {} snapshots installed by restarted nodes; alarms: {}; \
         {:.1?}",
        plan.kills,
        k.leader_kills,
        ledger.acked.len() + operator.deleted.len() + operator.maybe_deleted.len(),
        ledger.unknown,
        data.values().next().map_or(0, |d| d.len()),
        k.elections.len(),
        k.installs,
        operator.summary(),
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert!(
        k.leader_kills * 2 >= plan.kills,
        "the leader was killed {} times of {}",
        k.leader_kills,
        plan.kills
    );
    assert!(
        k.acked_at_kill.last() > k.acked_at_kill.first() || plan.kills < 2,
        "writes were acknowledged throughout: {:?}",
        k.acked_at_kill
    );
    assert!(
        ledger.acked.len() + operator.deleted.len() + operator.maybe_deleted.len()
            > acked_before_last_kill,
        "writes were acknowledged after the last kill"
    );
    if let Some(after) = after {
        assert!(
            operator.kills_under_alarm > 0,
            "no kill while the alarm was raised"
        );
        assert!(data.values().all(|d| d.get(&after.0) == Some(&after.1)));
    }
}

/// Tends the NOSPACE alarm as an operator would: when a node reports one, deletes the oldest
/// half of the acknowledged keys (at most [`Operator::BATCH`]), vacuums every node and
/// disarms.
struct Operator {
    client: Client,
    addrs: Vec<String>,
    /// Keys whose delete was acknowledged: on no node at the end.
    deleted: BTreeSet<String>,
    /// Keys whose delete had no clear answer: on every node or on none.
    maybe_deleted: BTreeSet<String>,
    alarms_seen: usize,
    /// Kills (and restarts) while an alarm was raised.
    kills_under_alarm: usize,
    /// Whether the last cleanup's disarm went unanswered: it may still take effect (until a
    /// later disarm is acknowledged, which settles it one way or the other).
    disarm_in_doubt: bool,
    disarms: usize,
    vacuums: usize,
    /// The alarms each node reported before the last cleanup (they must agree).
    last_alarms: BTreeMap<u64, BTreeMap<u64, String>>,
}

impl Operator {
    /// The most keys deleted in one round.
    const BATCH: usize = 1500;

    fn new(cluster: &Cluster, addrs: Vec<String>) -> Operator {
        Operator {
            client: cluster
                .base
                .with_timeout(Duration::from_secs(3))
                .retrying(false),
            addrs,
            deleted: BTreeSet::new(),
            maybe_deleted: BTreeSet::new(),
            alarms_seen: 0,
            kills_under_alarm: 0,
            disarm_in_doubt: false,
            disarms: 0,
            vacuums: 0,
            last_alarms: BTreeMap::new(),
        }
    }

    fn summary(&self) -> String {
        format!(
            "{} seen, {} kills under one, {} disarms, {} vacuums, {} deletes acknowledged, {} unknown; before the \
             last cleanup every node reported {:?}",
            self.alarms_seen,
            self.kills_under_alarm,
            self.disarms,
            self.vacuums,
            self.deleted.len(),
            self.maybe_deleted.len(),
            self.last_alarms.values().next()
        )
    }

    /// Whether any node that answers reports an alarm.
    async fn alarmed(&self) -> bool {
        for addr in &self.addrs {
            if let Ok(status) = self.client.status(addr).await
                && !status.alarms.is_empty()
            {
                return true;
            }
        }
        false
    }

    /// Whether an alarm is raised and only the operator can clear it: no disarm of the
    /// operator's is in doubt, and all three nodes report an alarm. (One node reporting it is
    /// not enough: a node that has not yet applied the operator's last disarm reports the
    /// alarm that disarm cleared. The node that acknowledged the disarm had applied it, so
    /// an alarm it reports since was raised again, through the log.)
    async fn surely_alarmed(&self) -> bool {
        if self.disarm_in_doubt {
            return false;
        }
        for addr in &self.addrs {
            match self.client.status(addr).await {
                Ok(status) if !status.alarms.is_empty() => {}
                _ => return false,
            }
        }
        true
    }

    /// One round between kills: if a node reports an alarm, [`Operator::clean`].
    async fn tend(&mut self, load: &Load) {
        if self.alarmed().await {
            self.clean(load.acked_keys()).await;
        }
    }

    /// Deletes the oldest half of `acked` not deleted yet (at most [`Operator::BATCH`]),
    /// vacuums every node and disarms.
    async fn clean(&mut self, mut acked: Vec<String>) {
        self.alarms_seen += 1;
        acked.retain(|k| !self.deleted.contains(k) && !self.maybe_deleted.contains(k));
        // The writers' keys end in a sequence number: the oldest of each writer first.
        acked.sort_by(|a, b| a[a.len() - 6..].cmp(&b[b.len() - 6..]));
        acked.truncate((acked.len() / 2).min(Self::BATCH));
        self.delete(acked).await;
        for addr in &self.addrs {
            self.vacuums += usize::from(self.client.vacuum(addr).await.is_ok());
        }
        for addr in &self.addrs {
            if self.client.disarm_alarms(addr).await.is_ok() {
                self.disarms += 1;
                self.disarm_in_doubt = false;
                break;
            }
            self.disarm_in_doubt = true;
        }
    }

    /// Deletes `keys`, eight at a time, recording each outcome.
    async fn delete(&mut self, keys: Vec<String>) {
        for batch in keys.chunks(8) {
            let deletes = batch.iter().enumerate().map(|(i, key)| {
                let addr = self.addrs[i % self.addrs.len()].clone();
                let client = self.client.clone();
                async move { client.delete(&addr, key).await }
            });
            let done = futures_util::future::join_all(deletes).await;
            for (key, done) in batch.iter().zip(done) {
                // Deletes go on under the alarm: a refusal naming it is a failure, not an
                // unknown outcome.
                if let Err(e) = &done {
                    assert!(
                        e.status() != Some(hyper::StatusCode::INSUFFICIENT_STORAGE),
                        "a delete of {key} was refused under the alarm: {e}"
                    );
                }
                let set = if done.is_ok() {
                    &mut self.deleted
                } else {
                    &mut self.maybe_deleted
                };
                set.insert(key.clone());
            }
        }
    }

    /// After the load: every node reports the same alarms; cleanup rounds until none is
    /// raised; a put goes through. Takes the deleted keys out of `ledger`'s acknowledged ones
    /// (the unknown deletes are also out of the check: either outcome is right), and returns
    /// the put's key and value (added to the ledger).
    async fn finish(&mut self, cluster: &Cluster, ledger: &mut Ledger) -> (String, String) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut reported = BTreeMap::new();
            for id in cluster.ids() {
                reported.extend(cluster.status(id).await.map(|s| (id, s.alarms)));
            }
            let first = reported.values().next().cloned();
            if reported.len() == 3 && reported.values().all(|a| Some(a) == first.as_ref()) {
                self.last_alarms = reported;
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the alarms disagree: {reported:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (key, value) = ("after-the-kills".to_owned(), "v".to_owned());
        let deadline = Instant::now() + PATIENCE;
        loop {
            let acked: Vec<String> = ledger.acked.iter().cloned().collect();
            if self.alarmed().await {
                self.clean(acked).await;
                // Every member checks its space again before the next look.
                tokio::time::sleep(rbolt_raft_node::space::CHECK_EVERY * 3).await;
            } else if self.client.put(&self.addrs[0], &key, &value).await.is_ok()
                || self.client.put(&self.addrs[1], &key, &value).await.is_ok()
            {
                // A put can slip in between a disarm and the members' next look at their
                // space; the cleanup is over only when, after the put, no member finds its
                // store still over its quota (CI once saw 290,816 bytes against 262,144
                // after a cleanup that deleted too little: the alarm was right).
                tokio::time::sleep(rbolt_raft_node::space::CHECK_EVERY * 3).await;
                if !self.alarmed().await {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "puts never resumed: {}",
                self.summary()
            );
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        // The space was freed for good: no member raises its alarm again.
        tokio::time::sleep(rbolt_raft_node::space::CHECK_EVERY * 3).await;
        for id in cluster.ids() {
            let alarms = cluster.status(id).await.map(|s| s.alarms);
            assert_eq!(
                alarms,
                Some(BTreeMap::new()),
                "node {id} after the cleanup: {}",
                self.summary()
            );
        }
        for key in self.deleted.iter().chain(&self.maybe_deleted) {
            ledger.acked.remove(key);
        }
        ledger.sent.insert(key.clone(), value.clone());
        ledger.acked.insert(key.clone());
        (key, value)
    }
}
