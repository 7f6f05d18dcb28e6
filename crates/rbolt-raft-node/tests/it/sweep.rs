//! The bad-input sweep: first, on a quiet cluster, forged peer messages without the peer
//! secret (refused, counted and logged; no term or log moves); then, while clients write,
//! every route and every Raft RPC of every node gets what a careless or hostile client or
//! peer might send: keys, values and bodies over
//! the limits, malformed JSON, malformed, truncated and damaged binary frames, frames of the
//! wrong message, another cluster's token, terms from the past and the future, a snapshot
//! that is not one. Every answer is counted by status and checked against what that input
//! must get; at the end every node is healthy and no acknowledged write is lost.

use crate::cluster::{Cluster, Load, SERIAL, TIMING_ARGS, check_data, raw, value_for};
use hyper::{Method, StatusCode};
use openraft::Vote;
use openraft::raft::{AppendEntriesRequest, TransferLeaderRequest, VoteRequest};
use rbolt_raft_node::api::{AlarmRaise, HEADER_PEER_SECRET, Hello};
use rbolt_raft_node::kv::{KvConfig, Request};
use rbolt_raft_node::wire;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// The cluster's token in this test.
const TOKEN: &str = "sweep";

/// The cluster's peer secret in this test: the sweep's own frames carry it (they test what
/// comes after authentication); the forged ones do not.
const PEER_SECRET: &str = "sweep-peer-secret-0123456789";

/// The header that authenticates a peer message.
fn peer() -> [(&'static str, String); 1] {
    [(HEADER_PEER_SECRET, PEER_SECRET.to_owned())]
}

/// Answers counted by category and status.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<&'static str, BTreeMap<u16, u64>>,
    /// Answers outside what their category allows: (category, request, status, body).
    wrong: Vec<String>,
}

impl Tally {
    fn count(
        &mut self,
        category: &'static str,
        what: &str,
        answer: (StatusCode, String),
        allowed: &[u16],
    ) {
        let status = answer.0.as_u16();
        *self
            .counts
            .entry(category)
            .or_default()
            .entry(status)
            .or_default() += 1;
        if !allowed.contains(&status) {
            let body: String = answer.1.chars().take(200).collect();
            self.wrong
                .push(format!("{category}: {what}: {status} {body}"));
        }
    }

    fn total(&self) -> u64 {
        self.counts.values().flat_map(|c| c.values()).sum()
    }
}

fn log_id(term: u64, node: u64, index: u64) -> openraft::type_config::alias::LogIdOf<KvConfig> {
    openraft::testing::log_id::<KvConfig>(term, node, index)
}

/// A valid vote request frame from `from` in `term`, of cluster `cluster`.
pub fn vote_frame(cluster: &str, from: u64, term: u64) -> Vec<u8> {
    let rpc = VoteRequest::<KvConfig>::new(Vote::new(term, from), None);
    wire::encode(cluster, from, &rpc).expect("encode")
}

/// A valid append frame from `from` claiming to lead in `term`, whose previous entry no
/// node has (so no follower takes its entries).
fn append_frame(cluster: &str, from: u64, term: u64) -> Vec<u8> {
    let rpc = AppendEntriesRequest::<KvConfig> {
        vote: Vote::new_committed(term, from),
        prev_log_id: Some(log_id(term, from, 1 << 40)),
        entries: Vec::new(),
        leader_commit: None,
    };
    wire::encode(cluster, from, &rpc).expect("encode")
}

/// Bad inputs on the client routes of `addr`.
async fn client_routes(tally: &mut Tally, addr: &str, max_request: usize) {
    let long_key = format!("/kv/{}", "k".repeat(32_769));
    for method in [Method::PUT, Method::GET, Method::DELETE] {
        let answer = raw(addr, method.clone(), &long_key, &[], b"v".to_vec()).await;
        tally.count("oversized key", method.as_str(), answer, &[400]);
    }
    let value = vec![b'v'; max_request + 1];
    let answer = raw(addr, Method::PUT, "/kv/big", &[], value).await;
    tally.count("oversized value", "PUT", answer, &[413]);
    for path in ["/cluster/learners", "/cluster/members", "/cluster/leader"] {
        let answer = raw(addr, Method::POST, path, &[], vec![b' '; 100 << 10]).await;
        tally.count("oversized body", path, answer, &[413]);
        for body in [&b"{"[..], b"[]", b"{\"id\":\"x\"}", b"\xff\xfe", b""] {
            let answer = raw(addr, Method::POST, path, &[], body.to_vec()).await;
            tally.count("malformed JSON", path, answer, &[400, 307]);
        }
    }
    let odd: [(Method, &str, &[u8]); 8] = [
        (Method::PUT, "/kv/%ff%fe", b"v"),
        (Method::PUT, "/kv/ok", b"\xff\xfe"),
        (Method::PUT, "/kv/", b"v"),
        (Method::GET, "/kv/a?read=sideways", b""),
        (Method::PATCH, "/kv/a", b""),
        (Method::GET, "/nowhere", b""),
        (
            Method::POST,
            "/cluster/learners",
            b"{\"id\":9,\"addr\":\"http://x/\"}",
        ),
        (Method::DELETE, "/cluster/learners/x", b""),
    ];
    for (method, path, body) in odd {
        let answer = raw(addr, method.clone(), path, &[], body.to_vec()).await;
        tally.count("odd client request", path, answer, &[400, 404, 405, 307]);
    }
}

/// Bad inputs on the Raft RPCs of `addr` (whose node is `id`), from a sender posing as
/// member `from`.
async fn rpc_routes(tally: &mut Tally, addr: &str, from: u64, append_limit: usize) {
    let frame = vote_frame(TOKEN, from, 1);
    let mut truncations = BTreeSet::from([
        0,
        1,
        4,
        5,
        6,
        frame.len() / 2,
        frame.len() - 4,
        frame.len() - 1,
    ]);
    truncations.retain(|&n| n < frame.len());
    for path in [
        "/raft/append",
        "/raft/vote",
        "/raft/hello",
        "/raft/transfer",
        "/raft/alarm",
    ] {
        for n in &truncations {
            let answer = raw(addr, Method::POST, path, &peer(), frame[..*n].to_vec()).await;
            tally.count("truncated frame", path, answer, &[400]);
        }
        for at in [0, 4, 6, frame.len() / 2, frame.len() - 1] {
            let mut damaged = frame.clone();
            damaged[at] ^= 0x5a;
            let answer = raw(addr, Method::POST, path, &peer(), damaged).await;
            tally.count("damaged frame", path, answer, &[400]);
        }
        let json = br#"{"vote":{"leader_id":{"term":99,"node_id":1},"committed":false}}"#;
        let answer = raw(addr, Method::POST, path, &peer(), json.to_vec()).await;
        tally.count("malformed frame", path, answer, &[400]);
        let answer = raw(addr, Method::POST, path, &peer(), vec![0xA5; 4096]).await;
        tally.count("malformed frame", path, answer, &[400]);
        let too_big = if path == "/raft/append" {
            append_limit + 1
        } else {
            (64 << 10) + 1
        };
        let answer = raw(addr, Method::POST, path, &peer(), vec![0; too_big]).await;
        tally.count("oversized frame", path, answer, &[413]);
        let other = vote_frame("another-cluster", from, 1);
        let answer = raw(addr, Method::POST, path, &peer(), other).await;
        tally.count("wrong cluster", path, answer, &[409]);
    }
    // A sound frame of the wrong message.
    let hello = wire::encode(
        TOKEN,
        from,
        &Hello {
            id: from,
            cluster: TOKEN.to_owned(),
        },
    )
    .expect("encode");
    // (Not to /raft/alarm: frames are typed by their path, and a hello's fields, an id and a
    // string, read as a sound alarm of its sender, which a member may raise.)
    for path in ["/raft/append", "/raft/vote", "/raft/transfer"] {
        let answer = raw(addr, Method::POST, path, &peer(), hello.clone()).await;
        tally.count("wrong message", path, answer, &[400]);
    }
    // An alarm raised by one member for another (a member raises only its own).
    let alarm = AlarmRaise {
        member: from + 1,
        reason: "forged".to_owned(),
    };
    let forged = wire::encode(TOKEN, from, &alarm).expect("encode");
    let answer = raw(addr, Method::POST, "/raft/alarm", &peer(), forged).await;
    tally.count("wrong message", "/raft/alarm", answer, &[400]);
    // A vote whose frame names another sender than the vote.
    let forged = wire::encode(
        TOKEN,
        from,
        &VoteRequest::<KvConfig>::new(Vote::new(1, from + 100), None),
    )
    .expect("encode");
    let answer = raw(addr, Method::POST, "/raft/vote", &peer(), forged).await;
    tally.count("wrong message", "/raft/vote", answer, &[400]);
    // Terms from the past: Raft answers, refusing them.
    let answer = raw(
        addr,
        Method::POST,
        "/raft/vote",
        &peer(),
        vote_frame(TOKEN, from, 0),
    )
    .await;
    tally.count("old term", "/raft/vote", answer, &[200]);
    let answer = raw(
        addr,
        Method::POST,
        "/raft/append",
        &peer(),
        append_frame(TOKEN, from, 0),
    )
    .await;
    tally.count("old term", "/raft/append", answer, &[200]);
    // Snapshots that are not one, and one of another cluster.
    let header = (
        "x-rbolt-raft-snapshot",
        r#"{"vote":{"leader_id":{"term":1000000,"node_id":1},"committed":true},"meta":{"last_log_id":null,"last_membership":{"log_id":null,"membership":{"configs":[],"nodes":{}}}}}"#.to_owned(),
    );
    let sender = [
        ("x-rbolt-cluster", TOKEN.to_owned()),
        ("x-rbolt-from", from.to_string()),
        peer()[0].clone(),
    ];
    let headers = [
        header.clone(),
        sender[0].clone(),
        sender[1].clone(),
        sender[2].clone(),
    ];
    let answer = raw(
        addr,
        Method::POST,
        "/raft/snapshot",
        &headers,
        vec![0xA5; 8192],
    )
    .await;
    tally.count("bad snapshot", "garbage file", answer, &[400]);
    let answer = raw(addr, Method::POST, "/raft/snapshot", &sender, vec![0; 10]).await;
    tally.count("bad snapshot", "no header", answer, &[400]);
    let bad_header = [
        ("x-rbolt-raft-snapshot", "{".to_owned()),
        sender[0].clone(),
        sender[1].clone(),
        sender[2].clone(),
    ];
    let answer = raw(
        addr,
        Method::POST,
        "/raft/snapshot",
        &bad_header,
        vec![0; 10],
    )
    .await;
    tally.count("bad snapshot", "bad header", answer, &[400]);
    let foreign = [
        header,
        ("x-rbolt-cluster", "another-cluster".to_owned()),
        sender[1].clone(),
        sender[2].clone(),
    ];
    let answer = raw(addr, Method::POST, "/raft/snapshot", &foreign, vec![0; 10]).await;
    tally.count("wrong cluster", "/raft/snapshot", answer, &[409]);
    // Snapshot chunks: no header, a malformed one, a digest that names no file, bytes past
    // the snapshot's end, another cluster's.
    let digest = "0".repeat(32);
    let chunk = |digest: &str, length: u64, offset: u64| {
        (
            "x-rbolt-raft-snapshot-chunk",
            format!(r#"{{"length":{length},"digest":"{digest}","offset":{offset}}}"#),
        )
    };
    let bad_chunks = [
        (None, "no header"),
        (
            Some(("x-rbolt-raft-snapshot-chunk", "{".to_owned())),
            "bad header",
        ),
        (Some(chunk("../../etc/passwd", 10, 0)), "bad digest"),
        (Some(chunk(&digest, 5, 0)), "past the end"),
        (Some(chunk(&digest, 100, u64::MAX - 4)), "offset overflows"),
    ];
    for (header, what) in bad_chunks {
        let mut headers = sender.to_vec();
        headers.extend(header);
        let answer = raw(
            addr,
            Method::POST,
            "/raft/snapshot/chunk",
            &headers,
            vec![0; 10],
        )
        .await;
        tally.count("bad snapshot chunk", what, answer, &[400]);
    }
    let mut foreign = foreign[1..].to_vec();
    foreign.push(chunk(&digest, 100, 0));
    let answer = raw(
        addr,
        Method::POST,
        "/raft/snapshot/chunk",
        &foreign,
        vec![0; 10],
    )
    .await;
    tally.count("wrong cluster", "/raft/snapshot/chunk", answer, &[409]);
}

/// Future terms, posing as a member: Raft may take the term (a forged leader deposes the
/// real one, which a cluster without mutual TLS cannot tell from a real one), and the
/// cluster must recover from it. Sent last; each is answered by Raft.
async fn future_terms(tally: &mut Tally, addr: &str, from: u64, term: u64) {
    let answer = raw(
        addr,
        Method::POST,
        "/raft/vote",
        &peer(),
        vote_frame(TOKEN, from, term + 1000),
    )
    .await;
    tally.count("future term", "/raft/vote", answer, &[200]);
    let answer = raw(
        addr,
        Method::POST,
        "/raft/append",
        &peer(),
        append_frame(TOKEN, from, term + 2000),
    )
    .await;
    tally.count("future term", "/raft/append", answer, &[200]);
}

/// An append frame of `cluster` from `leader` claiming `term`, whose previous entry is the
/// last one every node has (`last` of `last_term`) and whose one entry, committed at once,
/// writes `forged`: a follower that took it would store the key.
pub fn forged_append(cluster: &str, leader: u64, term: u64, last_term: u64, last: u64) -> Vec<u8> {
    let entry = log_id(term, leader, last + 1);
    let rpc = AppendEntriesRequest::<KvConfig> {
        vote: Vote::new_committed(term, leader),
        prev_log_id: Some(log_id(last_term, leader, last)),
        entries: vec![openraft::Entry {
            log_id: entry,
            payload: openraft::EntryPayload::Normal(Request::Put {
                key: "forged".to_owned(),
                value: "written-without-credentials".to_owned(),
            }),
        }],
        leader_commit: Some(entry),
    };
    wire::encode(cluster, leader, &rpc).expect("encode")
}

/// Forged peer messages, sent to every node of a quiet cluster without the peer secret or with
/// a wrong one: the vote and append of a sender posing as the leader in a far future term
/// (which Raft would take), a transfer, a hello, an alarm, a snapshot and a snapshot chunk. Each
/// must be refused (`401`)
/// before Raft sees it, counted and logged; every node's term and log stay as they were, and
/// no node holds `forged`.
async fn forged_without_credentials(tally: &mut Tally, cluster: &mut Cluster) {
    let before = cluster.wait_converged().await;
    let mut statuses = BTreeMap::new();
    for id in cluster.ids() {
        statuses.insert(id, cluster.status(id).await.expect("status"));
    }
    let leader = statuses
        .values()
        .find(|s| s.state == "Leader")
        .expect("a leader");
    let (term, last) = (leader.term, leader.last_log_index.expect("a log"));
    let frames = [
        ("/raft/vote", vote_frame(TOKEN, leader.id, term + 1000)),
        (
            "/raft/append",
            forged_append(TOKEN, leader.id, term + 1000, term, last),
        ),
        (
            "/raft/transfer",
            wire::encode(
                TOKEN,
                leader.id,
                &TransferLeaderRequest::<KvConfig>::new(
                    Vote::new_committed(term + 1000, leader.id),
                    1,
                    None,
                ),
            )
            .expect("encode"),
        ),
        (
            "/raft/hello",
            wire::encode(
                TOKEN,
                leader.id,
                &Hello {
                    id: leader.id,
                    cluster: TOKEN.to_owned(),
                },
            )
            .expect("encode"),
        ),
        (
            "/raft/alarm",
            wire::encode(
                TOKEN,
                leader.id,
                &AlarmRaise {
                    member: leader.id,
                    reason: "forged: puts would stop".to_owned(),
                },
            )
            .expect("encode"),
        ),
    ];
    let wrong = [(HEADER_PEER_SECRET, "not-the-peer-secret-at-all".to_owned())];
    let snapshot = [
        ("x-rbolt-cluster", TOKEN.to_owned()),
        ("x-rbolt-from", leader.id.to_string()),
    ];
    for id in cluster.ids() {
        let addr = cluster.addr(id);
        for headers in [&[][..], &wrong[..]] {
            for (path, frame) in &frames {
                let answer = raw(&addr, Method::POST, path, headers, frame.clone()).await;
                tally.count("forged, no credentials", path, answer, &[401]);
            }
            let mut with = snapshot.to_vec();
            with.extend_from_slice(headers);
            let answer = raw(&addr, Method::POST, "/raft/snapshot", &with, vec![0; 10]).await;
            tally.count("forged, no credentials", "/raft/snapshot", answer, &[401]);
            with.push((
                "x-rbolt-raft-snapshot-chunk",
                format!(
                    r#"{{"length":10,"digest":"{}","offset":0}}"#,
                    "0".repeat(32)
                ),
            ));
            let path = "/raft/snapshot/chunk";
            let answer = raw(&addr, Method::POST, path, &with, vec![0; 10]).await;
            tally.count("forged, no credentials", path, answer, &[401]);
        }
    }
    // Raft would have answered the vote and the append at once: give it as long again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = cluster.wait_converged().await;
    assert_eq!(after, before, "the forged messages changed the store");
    for (id, was) in &statuses {
        let now = cluster.status(*id).await.expect("status");
        assert_eq!(
            (now.term, now.last_log_index, now.leader),
            (was.term, was.last_log_index, was.leader),
            "node {id}: forged messages moved its term or log"
        );
        assert!(
            now.alarms.is_empty(),
            "node {id}: a forged alarm was raised"
        );
        let (_, metrics) = raw(&cluster.addr(*id), Method::GET, "/metrics", &[], Vec::new()).await;
        for reason in ["no_secret", "wrong_secret"] {
            let line = format!("rbolt_raft_peer_rpcs_refused_total{{reason=\"{reason}\"}} 7");
            assert!(
                metrics.contains(&line),
                "node {id}: no {line:?} in\n{metrics}"
            );
        }
        let logged = cluster
            .log_text(*id)
            .matches("the sender did not prove it is a peer")
            .count();
        // One line per reason and address within `WARN_EVERY`, not one per message.
        assert_eq!(logged, 2, "node {id}: {}", cluster.log_tail(*id));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_of_bad_input_leaves_the_cluster_healthy_and_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut args = TIMING_ARGS.to_vec();
    args.extend_from_slice(&["--initial-cluster-token", TOKEN]);
    let mut cluster = Cluster::new(3, &args);
    let secret_file = cluster.root.path().join("peer-secret");
    std::fs::write(&secret_file, format!("{PEER_SECRET}\n")).expect("write");
    cluster.args.push("--peer-secret-file".to_owned());
    cluster.args.push(secret_file.display().to_string());
    for id in cluster.ids() {
        cluster.start(id);
    }
    let first = cluster.wait_for_leader(&cluster.ids(), 0).await;
    cluster
        .client(crate::cluster::PATIENCE)
        .put(
            &cluster.addr(first.id),
            "w-before",
            &value_for("w-before", 100),
        )
        .await
        .expect("write");
    forged_without_credentials(&mut tally, &mut cluster).await;
    let addrs: Vec<String> = cluster.ids().iter().map(|&id| cluster.addr(id)).collect();
    let load = Load::start(addrs, 3, "w", 100);
    let limits = rbolt_raft_node::limits::Limits::default();
    for round in 0..2 {
        for id in cluster.ids() {
            let addr = cluster.addr(id);
            let from = 1 + id % 3;
            client_routes(&mut tally, &addr, limits.max_request_bytes).await;
            rpc_routes(&mut tally, &addr, from, limits.append_bytes_max()).await;
            cluster.check_alive();
        }
        eprintln!(
            "sweep: round {round} done, {} answers so far",
            tally.total()
        );
    }
    let acked_before_future = load.acked();
    let leader = cluster.wait_for_leader(&cluster.ids(), 0).await;
    for id in cluster.ids() {
        future_terms(&mut tally, &cluster.addr(id), 1 + id % 3, leader.term).await;
    }
    // The cluster recovers from the forged terms and goes on taking writes.
    let recovered = cluster.wait_for_leader(&cluster.ids(), leader.term).await;
    let deadline = Instant::now() + crate::cluster::PATIENCE;
    while load.acked() < acked_before_future + 20 {
        assert!(
            Instant::now() < deadline,
            "no writes after the forged terms"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut ledger = load.stop().await;
    // The write the forged messages were checked against.
    ledger
        .sent
        .insert("w-before".to_owned(), value_for("w-before", 100));
    ledger.acked.insert("w-before".to_owned());
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &BTreeSet::new());
    let mut healthy = 0;
    for id in cluster.ids() {
        let (status, body) = raw(&cluster.addr(id), Method::GET, "/health", &[], Vec::new()).await;
        assert_eq!(status, StatusCode::OK, "node {id}: {body}");
        healthy += 1;
    }
    let counts: Vec<String> = tally
        .counts
        .iter()
        .map(|(category, by)| {
            let by: Vec<String> = by.iter().map(|(s, n)| format!("{n}x{s}")).collect();
            format!("{category}: {}", by.join(" "))
        })
        .collect();
    eprintln!(
        "bad-input sweep: {} requests over every route and RPC of 3 nodes ({}); {} answered \
         outside what they must get; first leader term {}, after the forged future terms \
         term {}; {} writes acknowledged meanwhile, {} unknown, {lost} lost; {healthy}/3 nodes \
         healthy; {:.1?}",
        tally.total(),
        counts.join("; "),
        tally.wrong.len(),
        first.term,
        recovered.term,
        ledger.acked.len(),
        ledger.unknown,
        started.elapsed()
    );
    assert!(tally.wrong.is_empty(), "{:#?}", tally.wrong);
    assert_eq!(lost, 0, "acknowledged writes lost");
}
