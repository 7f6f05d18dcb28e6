//! The partition suite: three nodes behind the fault-injecting proxies of [`crate::faults`],
//! several clients writing (puts of values unique to each write, a few deletes) and reading
//! (linearizable reads) a handful of keys, while a seeded schedule of faults plays: the
//! leader or another node isolated (a minority of one against a majority), one-way cuts
//! (any pair, the leader unable to speak, the leader unable to hear), a bridge (two halves
//! that only the middle node reaches), latency on every link, and Raft requests replayed
//! late on new connections. Then every link heals and the nodes converge.
//!
//! The clients reach the nodes through the proxies too, so their links have faults of their
//! own: a node's client connections cut (requests part way through included) and refused, a
//! node's answers to its clients held until the clients give up (requests that took effect,
//! their answers lost), latency both ways. And a node is SIGKILLed (the leader half the time)
//! and restarted on its directory when the fault heals. The first three rounds are a kill, lost
//! answers and cut connections; the rest are drawn.
//!
//! Every client operation is recorded with its invocation and completion times and its
//! outcome: `Ok` (only a `200`), `Fail` (certainly no effect: a `4xx`, a `503` that refused
//! the write before it was proposed, no connection made, a redirect loop) or `Unknown` (a
//! timeout, a connection lost part way, a `503` with `x-rbolt-outcome: unknown`, any other
//! `5xx`). The converged state is one more read of each key after everything. The whole
//! history must be linearizable per key ([`crate::linearizable`]), and every acknowledged
//! write must be in the converged state or overwritten by a write that may follow it.
//!
//! Its length is `RBOLT_PARTITION_SECONDS` of faults (20 s in the fast tier, 30 in CI, 300 in
//! the soak); `RBOLT_RAFT_SEED` replays a schedule (timings still vary from run to run).

use crate::cluster::{Rng, SERIAL, lock};
use crate::faults::{Faults, Link, NODES, cluster_behind_proxies};
use crate::linearizable::{Call, Op, Outcome, check};
use bytes::Bytes;
use hyper::{Method, StatusCode};
use rbolt_raft_node::api::{HEADER_OUTCOME, OUTCOME_UNKNOWN};
use rbolt_raft_node::client::{Client, ClientError, key_path};
use rbolt_raft_node::http::{Answer, SendError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The keys the clients share.
const KEYS: u64 = 5;
/// Concurrent clients.
const CLIENTS: u64 = 4;
/// How long one operation may take, retries of what certainly took no effect included.
const OP_TIMEOUT: Duration = Duration::from_secs(2);

/// The kinds of fault the schedule draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// The leader of the moment cut off both ways.
    IsolateLeader,
    /// A node drawn at random cut off both ways.
    IsolateNode,
    /// One node's bytes to another dropped, the other way open.
    OneWay,
    /// The leader's bytes to every follower dropped: it hears them but cannot answer.
    LeaderMute,
    /// Every follower's bytes to the leader dropped: it speaks but hears nothing back.
    LeaderDeaf,
    /// Two nodes cut from each other, both reaching the third.
    Bridge,
    /// Latency on every link.
    Delay,
    /// Raft requests re-sent late on new connections, on every link (half the time with the
    /// leader isolated: an election's votes replayed too).
    Replay,
    /// A node's client connections cut (a request part way through included), new ones
    /// refused.
    ClientCut,
    /// The leader's answers to its clients held until the fault heals: the clients give up
    /// on requests that took effect.
    ClientAnswersLost,
    /// Latency both ways on every client link.
    ClientDelay,
    /// A node SIGKILLed (the leader half the time), restarted when the fault heals.
    Kill,
}

const FAULTS: [Fault; 12] = [
    Fault::IsolateLeader,
    Fault::IsolateNode,
    Fault::OneWay,
    Fault::LeaderMute,
    Fault::LeaderDeaf,
    Fault::Bridge,
    Fault::Delay,
    Fault::Replay,
    Fault::ClientCut,
    Fault::ClientAnswersLost,
    Fault::ClientDelay,
    Fault::Kill,
];

/// The faults of the first rounds, so that every run has a kill and client faults.
const FIRST_FAULTS: [Fault; 3] = [Fault::Kill, Fault::ClientAnswersLost, Fault::ClientCut];

/// The operations of every client, timed from one origin.
struct History {
    origin: Instant,
    calls: Mutex<Vec<Call>>,
}

impl History {
    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// What a write's answer says of its effect.
fn write_outcome(result: Result<(String, Answer), ClientError>) -> Outcome {
    match result {
        Ok((_, answer)) => {
            let unknown = answer
                .headers
                .get(HEADER_OUTCOME)
                .is_some_and(|v| v.as_bytes() == OUTCOME_UNKNOWN.as_bytes());
            match answer.status {
                StatusCode::OK => Outcome::Ok,
                StatusCode::SERVICE_UNAVAILABLE if unknown => Outcome::Unknown,
                // Refused before it was proposed; committed but refused by the alarm.
                StatusCode::SERVICE_UNAVAILABLE | StatusCode::INSUFFICIENT_STORAGE => Outcome::Fail,
                s if s.is_client_error() || s.is_redirection() => Outcome::Fail,
                _ => Outcome::Unknown,
            }
        }
        // No connection carried it, or no node took it.
        Err(
            ClientError::Send(SendError::Unreachable { .. })
            | ClientError::Redirect { .. }
            | ClientError::RedirectLoop { .. },
        ) => Outcome::Fail,
        Err(_) => Outcome::Unknown,
    }
}

/// One client: operations on random keys through random nodes until `stop`.
async fn client(
    id: u64,
    addrs: Vec<String>,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let mut rng = Rng::new(seed);
    let client = Client::new().with_timeout(OP_TIMEOUT);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("k{}", rng.below(KEYS));
        let addr = &addrs[rng.below(addrs.len() as u64) as usize];
        let roll = rng.below(100);
        let invoke = history.now();
        let (op, outcome) = if roll < 50 {
            match client.get(addr, &key, false).await {
                Ok(value) => (Op::Read(value), Outcome::Ok),
                Err(_) => (Op::Read(None), Outcome::Fail),
            }
        } else if roll < 94 {
            let value = format!("c{id}-{n}");
            let body = Bytes::copy_from_slice(value.as_bytes());
            let result = client
                .request(addr, Method::PUT, &key_path(&key), body)
                .await;
            (Op::Write(Some(value)), write_outcome(result))
        } else {
            let result = client
                .request(addr, Method::DELETE, &key_path(&key), Bytes::new())
                .await;
            (Op::Write(None), write_outcome(result))
        };
        let complete = history.now();
        lock(&history.calls).push(Call {
            client: id as usize,
            key,
            op,
            invoke,
            complete,
            outcome,
        });
        n += 1;
        // A client backs off after a failure, as clients do: a cut or dead node fails requests
        // at once, and a client retrying at once would fill the history with them (unknown
        // deletes, each concurrent with everything after it, make the search explode).
        if outcome != Outcome::Ok {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Applies `fault`; returns what it did.
fn apply(fault: Fault, faults: &Faults, leader: Option<u64>, rng: &mut Rng) -> String {
    let node = |rng: &mut Rng| 1 + rng.below(NODES);
    let leader = leader.unwrap_or_else(|| node(rng));
    let others = |of: u64| (1..=NODES).filter(move |&o| o != of);
    match fault {
        Fault::IsolateLeader => faults.isolate(leader),
        Fault::IsolateNode => faults.isolate(node(rng)),
        Fault::OneWay => {
            let from = node(rng);
            let to = others(from).nth(rng.below(NODES - 1) as usize).unwrap_or(1);
            faults.set_link(from, to, Link::Drop);
            return format!("{fault:?} {from}->{to}");
        }
        Fault::LeaderMute => others(leader).for_each(|o| faults.set_link(leader, o, Link::Drop)),
        Fault::LeaderDeaf => others(leader).for_each(|o| faults.set_link(o, leader, Link::Drop)),
        Fault::Bridge => {
            let middle = node(rng);
            let ends: Vec<u64> = others(middle).collect();
            faults.set_link(ends[0], ends[1], Link::Drop);
            faults.set_link(ends[1], ends[0], Link::Drop);
            return format!("{fault:?} via {middle}");
        }
        Fault::Delay => {
            for from in 1..=NODES {
                for to in others(from) {
                    faults.set_link(from, to, Link::Delay(rng.millis(5, 120)));
                }
            }
        }
        Fault::Replay => {
            for from in 1..=NODES {
                others(from).for_each(|to| faults.set_link(from, to, Link::Replay));
            }
            // Half the time with the leader cut off, so that votes are replayed too.
            if rng.below(2) == 0 {
                faults.isolate(leader);
                return format!("{fault:?} with leader {leader} isolated");
            }
        }
        Fault::ClientCut => {
            let cut = node(rng);
            faults.set_client_link(cut, Link::Drop, Link::Pass);
            return format!("{fault:?} of node {cut}");
        }
        Fault::ClientAnswersLost => faults.set_client_link(leader, Link::Pass, Link::Drop),
        Fault::ClientDelay => {
            for to in 1..=NODES {
                let (up, down) = (rng.millis(5, 300), rng.millis(5, 300));
                faults.set_client_link(to, Link::Delay(up), Link::Delay(down));
            }
        }
        // The caller kills.
        Fault::Kill => {}
    }
    format!("{fault:?} (leader {leader})")
}

/// Acknowledged writes the converged state lost: those whose key holds a value only writes
/// that completed before they began could have left (or none of the deletes that could
/// follow them, for a key that is gone).
fn lost_writes(calls: &[Call], finals: &BTreeMap<String, Option<String>>) -> Vec<String> {
    let mut lost = Vec::new();
    for w in calls.iter().filter(|c| c.outcome == Outcome::Ok) {
        let Op::Write(written) = &w.op else {
            continue;
        };
        let last = finals.get(&w.key).cloned().flatten();
        let before_w = |c: &Call| c.outcome == Outcome::Ok && c.complete < w.invoke;
        let candidates: Vec<&Call> = calls
            .iter()
            .filter(|c| {
                c.key == w.key && c.outcome != Outcome::Fail && c.op == Op::Write(last.clone())
            })
            .collect();
        let overwritten_before = match &last {
            // The initial absence precedes every write.
            None => written.is_some() && candidates.iter().all(|c| before_w(c)),
            Some(_) => !candidates.is_empty() && candidates.iter().all(|c| before_w(c)),
        };
        if overwritten_before {
            lost.push(format!("{w:?}: the key ends as {last:?}"));
        }
    }
    lost
}

/// The history with one key's final read turned stale: it returns the value of an
/// acknowledged write that completed before the write of the final value began. The checker
/// must find it (it proves the check can fail on a real history). `None` if no key has such
/// a pair.
fn with_stale_final_read(calls: &[Call], ops: usize) -> Option<Vec<Call>> {
    let acked = |c: &&Call| c.outcome == Outcome::Ok && matches!(c.op, Op::Write(Some(_)));
    for (at, last) in calls.iter().enumerate().skip(ops) {
        let Op::Read(Some(value)) = &last.op else {
            continue;
        };
        let Some(writer) = calls[..ops]
            .iter()
            .filter(acked)
            .find(|c| c.key == last.key && c.op == Op::Write(Some(value.clone())))
        else {
            continue;
        };
        let Some(older) = calls[..ops]
            .iter()
            .filter(acked)
            .find(|c| c.key == last.key && c.complete < writer.invoke)
        else {
            continue;
        };
        let mut stale = calls.to_vec();
        let Op::Write(older_value) = &older.op else {
            continue;
        };
        stale[at].op = Op::Read(older_value.clone());
        return Some(stale);
    }
    None
}

/// The history with every put of unknown outcome whose value a read returned recorded as
/// failed (certainly without effect), as a client that took a lost answer for a refusal
/// would record it.
fn with_unknown_as_failed(calls: &[Call]) -> Vec<Call> {
    let seen: std::collections::BTreeSet<String> = calls
        .iter()
        .filter_map(|c| match (&c.op, c.outcome) {
            (Op::Read(Some(v)), Outcome::Ok) => Some(v.clone()),
            _ => None,
        })
        .collect();
    let mut flipped = calls.to_vec();
    for call in &mut flipped {
        if call.outcome == Outcome::Unknown
            && matches!(&call.op, Op::Write(Some(v)) if seen.contains(v))
        {
            call.outcome = Outcome::Fail;
        }
    }
    flipped
}

/// Puts of unknown outcome whose value a read (or the final state) returned: they took
/// effect.
fn unknown_seen(calls: &[Call]) -> usize {
    let seen: std::collections::BTreeSet<&str> = calls
        .iter()
        .filter_map(|c| match (&c.op, c.outcome) {
            (Op::Read(Some(v)), Outcome::Ok) => Some(v.as_str()),
            _ => None,
        })
        .collect();
    calls
        .iter()
        .filter(|c| c.outcome == Outcome::Unknown)
        .filter(|c| matches!(&c.op, Op::Write(Some(v)) if seen.contains(v.as_str())))
        .count()
}

/// Counts of calls by kind and outcome.
fn summary(calls: &[Call]) -> String {
    let mut counts: BTreeMap<(&str, Outcome), u64> = BTreeMap::new();
    for call in calls {
        let kind = match call.op {
            Op::Read(_) => "read",
            Op::Write(Some(_)) => "put",
            Op::Write(None) => "delete",
        };
        *counts.entry((kind, call.outcome)).or_default() += 1;
    }
    counts
        .iter()
        .map(|((kind, outcome), n)| format!("{kind} {outcome:?} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_suite_every_key_stays_linearizable_under_faults() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let seconds = rbolt_testkit::tier::size("RBOLT_PARTITION_SECONDS", 20, 30, 300);
    let mut rng = Rng::from_env_or_time("partition_suite");
    let faults = Faults::new(rng.next());
    let mut cluster = cluster_behind_proxies(&faults).await;
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    // The clients go through the proxies (each node's address in `--peers`).
    let addrs: Vec<String> = cluster
        .ids()
        .iter()
        .map(|id| cluster.nodes[id].public.clone())
        .collect();
    let history = Arc::new(History {
        origin: Instant::now(),
        calls: Mutex::new(Vec::new()),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (addrs, history, stop) = (addrs.clone(), Arc::clone(&history), Arc::clone(&stop));
            tokio::spawn(client(id, addrs, history, stop, rng.next()))
        })
        .collect();

    let until = Instant::now() + Duration::from_secs(seconds);
    let mut applied: BTreeMap<Fault, u64> = BTreeMap::new();
    let mut round = 0;
    while Instant::now() < until {
        tokio::time::sleep(rng.millis(300, 1200)).await;
        let fault = FIRST_FAULTS
            .get(round)
            .copied()
            .unwrap_or_else(|| FAULTS[rng.below(FAULTS.len() as u64) as usize]);
        round += 1;
        let leader = cluster.leader().await.map(|s| s.id);
        let killed = (fault == Fault::Kill).then(|| match leader {
            Some(leader) if rng.below(2) == 0 => leader,
            _ => 1 + rng.below(NODES),
        });
        let what = match killed {
            Some(victim) => {
                // Panics if the node had exited on its own.
                cluster.kill(victim);
                format!("{fault:?} {victim} (leader {leader:?})")
            }
            None => apply(fault, &faults, leader, &mut rng),
        };
        *applied.entry(fault).or_default() += 1;
        let held = rng.millis(800, 2500);
        eprintln!(
            "partition_suite: {:>6.1?} {what} for {held:.1?}",
            history.origin.elapsed()
        );
        tokio::time::sleep(held).await;
        faults.heal();
        if let Some(victim) = killed {
            cluster.start(victim);
        }
    }
    // Clients go on a moment on the healed cluster, then finish the operation they are on.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    for task in clients {
        task.await.expect("client task");
    }
    let stopped = history.origin.elapsed();
    let data = cluster.wait_converged().await;
    let converged = history.origin.elapsed();
    let first = data.values().next().expect("a node").clone();
    for (id, all) in &data {
        assert_eq!(all, &first, "node {id} disagrees with the first node");
    }
    let mut calls = std::mem::take(&mut *lock(&history.calls));
    let (ops, end) = (calls.len(), history.now());
    let finals: BTreeMap<String, Option<String>> = (0..KEYS)
        .map(|k| format!("k{k}"))
        .map(|key| {
            let value = first.get(&key).cloned();
            (key, value)
        })
        .collect();
    assert!(
        first.keys().all(|k| finals.contains_key(k)),
        "keys nobody wrote: {first:?}"
    );
    // The converged state: a read of each key after everything.
    for (key, value) in &finals {
        calls.push(Call {
            client: usize::MAX,
            key: key.clone(),
            op: Op::Read(value.clone()),
            invoke: end,
            complete: end + 1,
            outcome: Outcome::Ok,
        });
    }
    let lost = lost_writes(&calls, &finals);
    let checking = Instant::now();
    let anomalies = check(&calls);
    let checked_in = checking.elapsed();
    // Recording an ambiguous answer as a failure would be wrong: the same history with the
    // unknown puts that were seen to take effect recorded as failed must fail the check.
    let seen = unknown_seen(&calls);
    if seen > 0 {
        assert!(
            !check(&with_unknown_as_failed(&calls)).is_empty(),
            "the checker accepted {seen} failed puts whose values were read"
        );
    }
    let ok_writes = calls
        .iter()
        .filter(|c| matches!(c.op, Op::Write(_)) && c.outcome == Outcome::Ok)
        .count();
    let ok_reads = calls[..ops]
        .iter()
        .filter(|c| matches!(c.op, Op::Read(_)) && c.outcome == Outcome::Ok)
        .count();
    eprintln!(
        "partition_suite: {seconds} s of faults {applied:?}, requests replayed {:?}; {ops} \
         operations by {CLIENTS} clients on {KEYS} keys: {} ({} unknown puts seen to take \
         effect); checked linearizable per key in \
         {checked_in:.1?} (a copy with one stale final read fails it): {} anomalies; {} \
         acknowledged writes lost; final state {finals:?}; clients stopped at {stopped:.1?}, \
         the nodes converged at {converged:.1?}; {:.1?} in all",
        faults.replayed(),
        summary(&calls[..ops]),
        unknown_seen(&calls),
        anomalies.len(),
        lost.len(),
        started.elapsed()
    );
    for anomaly in &anomalies {
        eprintln!("partition_suite: {anomaly}");
    }
    for write in &lost {
        eprintln!("partition_suite: lost {write}");
    }
    assert!(
        anomalies.is_empty(),
        "{} keys not linearizable",
        anomalies.len()
    );
    assert!(lost.is_empty(), "{} acknowledged writes lost", lost.len());
    // The same history with one stale final read must fail the check.
    let stale = with_stale_final_read(&calls, ops).expect("a key with two acknowledged puts");
    assert_eq!(
        check(&stale).len(),
        1,
        "the checker missed a stale final read"
    );
    assert!(
        ok_writes > 0 && ok_reads > 0,
        "the clients got nothing through ({ok_writes} writes, {ok_reads} reads)"
    );
}
