//! The defects of issue 23, each on real processes: a key over rbolt's limit, a value whose
//! old JSON form outgrew the followers' limit, another cluster's data directory, a removed
//! member, add-learner of a dead address, `--peers` without a port or changed on restart, and
//! damage in `log.db`; and of issue 47: a voter stopped by a removed node's answer, and
//! `add-learner` answering before the learner caught up. Each failed on the build before the fix (run them on an older binary
//! with `RBOLT_RAFT_NODE_EXE=path`).

use crate::cluster::{
    Cluster, EmptyPeers, PATIENCE, SERIAL, TIMING_ARGS, free_port, node_exe, raw,
};
use hyper::{Method, StatusCode};
use rbolt_raft_node::identity::REMOVED_FILE;
use rbolt_raft_node::membership::PROMOTE_LAG_ENTRIES_MAX;
use std::process::Command;
use std::time::Duration;
use tokio::time::Instant;

/// Waits until `check` holds of node `id`'s status.
async fn wait_status(
    cluster: &Cluster,
    id: u64,
    what: &str,
    check: impl Fn(&rbolt_raft_node::api::Status) -> bool,
) -> rbolt_raft_node::api::Status {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = cluster.status(id).await
            && check(&status)
        {
            return status;
        }
        assert!(Instant::now() < deadline, "node {id}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Three running nodes with a leader, with the test timing and `args` (which replace the
/// timing's options of the same name).
async fn three(args: &[&str]) -> Cluster {
    let mut all: Vec<&str> = Vec::new();
    for pair in TIMING_ARGS.chunks(2) {
        if !args.contains(&pair[0]) {
            all.extend_from_slice(pair);
        }
    }
    all.extend_from_slice(args);
    let mut cluster = Cluster::new(3, &all);
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_over_the_limit_is_refused_and_the_cluster_goes_on() {
    let _serial = SERIAL.lock().await;
    let mut cluster = three(&[]).await;
    let client = cluster.client(PATIENCE);
    let addr = cluster.addr(1);
    let key = "k".repeat(32_769);
    let error = client
        .put(&addr, &key, "v")
        .await
        .expect_err("a key of 32,769 bytes is refused");
    assert_eq!(error.status(), Some(StatusCode::BAD_REQUEST), "{error}");
    assert!(error.to_string().contains("32768"), "{error}");
    let at_limit = "k".repeat(32_768);
    client
        .put(&addr, &at_limit, "fits")
        .await
        .expect("a key of 32,768 bytes is written");
    client
        .put(&addr, "after", "ok")
        .await
        .expect("the cluster takes writes");
    // Every node restarts and the cluster goes on (a committed entry that cannot be applied
    // used to stop every node at every restart).
    for id in cluster.ids() {
        cluster.kill(id);
    }
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    client
        .put(&addr, "after restart", "ok")
        .await
        .expect("writes after a restart");
    let data = cluster.wait_converged().await;
    for (id, all) in &data {
        assert_eq!(
            all.get(&at_limit).map(String::as_str),
            Some("fits"),
            "node {id}"
        );
        assert_eq!(all.len(), 3, "node {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_checked_against_the_request_limit_and_large_ones_replicate() {
    let _serial = SERIAL.lock().await;
    // 11 MiB of control characters: six times that once JSON-escaped.
    let value: String = (0..11 << 20)
        .map(|i| char::from(1 + (i % 31) as u8))
        .collect();
    {
        let cluster = three(&[]).await;
        let error = cluster
            .client(PATIENCE)
            .put(&cluster.addr(1), "big", &value)
            .await
            .expect_err("over the default limit");
        assert_eq!(
            error.status(),
            Some(StatusCode::PAYLOAD_TOO_LARGE),
            "{error}"
        );
        assert!(error.to_string().contains("1572864 bytes"), "{error}");
    }
    // An entry of 11 MiB takes a debug build on a loaded two-core machine longer than the
    // tests' 300 ms election timeout to send and store; meanwhile no follower answers, and the
    // leader rightly reports its quorum lost (CI saw a 503 "quorum lost ... for 300 ms"). An
    // election timeout must exceed the time the largest entry takes to replicate, here as in
    // production (README, "Large values").
    let mut cluster = three(&[
        "--max-request-bytes",
        "16777216",
        "--election-timeout-ms",
        "3000",
        "--heartbeat-ms",
        "200",
    ])
    .await;
    let client = cluster.client(PATIENCE);
    let addr = cluster.addr(1);
    client
        .put(&addr, "big", &value)
        .await
        .expect("under the raised limit");
    for n in 0..20 {
        client
            .put(&addr, &format!("after-{n}"), "ok")
            .await
            .expect("later writes go on");
    }
    let data = cluster.wait_converged().await;
    for (id, all) in &data {
        assert_eq!(
            all.get("big").map(String::len),
            Some(value.len()),
            "node {id}"
        );
        assert_eq!(all.len(), 21, "node {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clusters_data_directory_is_refused() {
    let _serial = SERIAL.lock().await;
    // Cluster A takes writes and moves its term on, then stops.
    let mut a = three(&["--initial-cluster-token", "cluster-a"]).await;
    let client = a.client(PATIENCE);
    for n in 0..50 {
        client
            .put(&a.addr(1), &format!("a-{n}"), "a")
            .await
            .expect("write to A");
    }
    for _ in 0..3 {
        let leader = a.wait_for_leader(&a.ids(), 0).await;
        a.kill(leader.id);
        a.start(leader.id);
    }
    let foreign = a.nodes[&3].dir.clone();
    for id in a.ids() {
        a.kill(id);
    }
    // Cluster B, whose node 3 is given A's directory.
    let mut b = Cluster::new(3, TIMING_ARGS);
    b.nodes.get_mut(&3).expect("node 3").dir = foreign;
    b.start_with(
        3,
        &b.peers.clone(),
        &["--initial-cluster-token", "cluster-b"],
    );
    assert_eq!(
        b.wait_exit(3).await,
        Some(1),
        "a directory of another cluster is refused"
    );
    assert!(
        b.log_text(3)
            .contains("belongs to cluster \"cluster-a\", not \"cluster-b\""),
        "{}",
        b.log_tail(3)
    );
    // Without tokens the node starts (it cannot tell), but neither side takes the other's
    // messages: B's term stays where its own elections put it, and B holds none of A's keys.
    for id in b.ids() {
        b.start(id);
    }
    let leader = b.wait_for_leader(&[1, 2], 0).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = b.wait_for_leader(&[1, 2], 0).await;
    assert!(
        after.term <= leader.term + 1 && after.term < 5,
        "B's term moved from {} to {}: the foreign node pulled it",
        leader.term,
        after.term
    );
    assert!(
        b.log_text(3).contains("--peers differs"),
        "the foreign node warns:\n{}",
        b.log_tail(3)
    );
    let metrics = raw(&b.addr(3), Method::GET, "/metrics", &[], Vec::new()).await;
    assert!(
        metrics
            .1
            .contains("rbolt_raft_peer_rpcs_refused_total{reason=\"wrong_cluster\"}"),
        "{}",
        metrics.1
    );
    assert!(
        b.log_text(after.id).contains("another cluster"),
        "B's leader says why node 3 refuses it:\n{}",
        b.log_tail(after.id)
    );
    let data = b
        .client(PATIENCE)
        .dump(&b.addr(after.id), false)
        .await
        .expect("dump");
    assert!(
        data.keys().all(|k| !k.starts_with("a-")),
        "B holds A's keys"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_member_stops_and_says_so() {
    let _serial = SERIAL.lock().await;
    let mut cluster = three(&[]).await;
    let client = cluster.client(PATIENCE);
    client
        .put(&cluster.addr(1), "before", "removal")
        .await
        .expect("write");
    // Node 3 is down while it is removed, so it never sees the membership without it.
    cluster.kill(3);
    let reply = client
        .change_members(&cluster.addr(1), vec![1, 2])
        .await
        .expect("remove node 3");
    assert_eq!(reply.voters, vec![1, 2]);
    let leader = cluster.wait_for_leader(&[1, 2], 0).await;
    cluster.start(3);
    // It campaigns once, hears it was removed, and stops.
    let status = wait_status(&cluster, 3, "learns it was removed", |s| {
        s.stopped
            .as_deref()
            .is_some_and(|s| s.starts_with("removed at index"))
    })
    .await;
    assert_eq!(status.state, "Stopped");
    let answer = client
        .retrying(false)
        .following_redirects(false)
        .put(&cluster.addr(3), "to", "removed")
        .await
        .expect_err("a removed node takes no writes");
    assert_eq!(answer.status(), Some(StatusCode::GONE), "{answer}");
    assert!(
        cluster
            .log_text(3)
            .contains("this node was removed from the cluster"),
        "{}",
        cluster.log_tail(3)
    );
    // Its campaign did not move the cluster's term, and the cluster goes on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = cluster.wait_for_leader(&[1, 2], 0).await;
    assert_eq!(
        after.term, leader.term,
        "the removed node disturbed the cluster"
    );
    client
        .put(&cluster.addr(1), "after", "removal")
        .await
        .expect("write");
    // A restart says why it will not serve.
    cluster.kill(3);
    cluster.start(3);
    assert_eq!(cluster.wait_exit(3).await, Some(1));
    assert!(
        cluster.log_text(3).contains("was removed from its cluster"),
        "{}",
        cluster.log_tail(3)
    );
}

/// Issue 47: a removed node answers every peer `410`; a voter that missed the removal asked
/// it for a vote and took that answer as its own removal, stopped for good and answered `410`
/// itself. Five nodes: two followers down, one of them removed; the removed one comes back and
/// stops (told by the members); then the other comes back alone with the old membership,
/// campaigns, asks the removed node, and must go on as the voter it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_is_not_stopped_by_a_removed_nodes_answer() {
    let _serial = SERIAL.lock().await;
    let mut cluster = Cluster::new(5, TIMING_ARGS);
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    let leader = cluster.settled_leader().await.id;
    let client = cluster.client(PATIENCE);
    client
        .put(&cluster.addr(leader), "before", "removal")
        .await
        .expect("write");
    let followers: Vec<u64> = cluster
        .ids()
        .into_iter()
        .filter(|&id| id != leader)
        .collect();
    let (voter, removed) = (followers[0], followers[1]);
    let survivors: Vec<u64> = cluster
        .ids()
        .into_iter()
        .filter(|&id| id != voter && id != removed)
        .collect();
    cluster.kill(voter);
    cluster.kill(removed);
    let mut voters = survivors.clone();
    voters.push(voter);
    voters.sort_unstable();
    let reply = client
        .change_members(&cluster.addr(leader), voters.clone())
        .await
        .expect("remove a node that is down");
    assert_eq!(reply.voters, voters);
    // The removed node comes back, asks the members for votes, and learns it was removed.
    cluster.start(removed);
    wait_status(&cluster, removed, "learns it was removed", |s| {
        s.stopped
            .as_deref()
            .is_some_and(|s| s.starts_with("removed at index"))
    })
    .await;
    // The voter comes back alone, with the membership of before the removal: it campaigns
    // and asks the removed node too, which answers `410` about itself.
    for &id in &survivors {
        cluster.kill(id);
    }
    cluster.start(voter);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut polls = 0;
    while Instant::now() < deadline {
        if let Some(status) = cluster.status(voter).await {
            polls += 1;
            assert_eq!(
                status.stopped,
                None,
                "voter {voter} stopped on removed node {removed}'s answer:\n{}",
                cluster.log_tail(voter)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(polls > 10, "voter {voter} hardly answered");
    assert!(
        cluster
            .log_text(voter)
            .contains("peer is no longer a member"),
        "voter {voter} never heard removed node {removed}:\n{}",
        cluster.log_tail(voter)
    );
    assert!(
        !cluster.dir_entries(voter).contains(REMOVED_FILE),
        "voter {voter} recorded a removal"
    );
    // The members come back; the voter votes, follows and holds what is written after.
    for &id in &survivors {
        cluster.start(id);
    }
    let led = cluster.wait_for_leader(&voters, 0).await;
    assert!(led.voters.contains(&voter), "{led:?}");
    client
        .put(&cluster.addr(led.id), "after", "return")
        .await
        .expect("write");
    let still = cluster
        .status(removed)
        .await
        .expect("the removed node answers");
    assert!(still.stopped.is_some(), "{still:?}");
    cluster.kill(removed);
    let data = cluster.wait_converged().await;
    assert!(data.contains_key(&voter));
    for (id, all) in &data {
        assert_eq!(
            all.get("before").map(String::as_str),
            Some("removal"),
            "node {id}"
        );
        assert_eq!(
            all.get("after").map(String::as_str),
            Some("return"),
            "node {id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learners_are_checked_before_they_are_added_or_promoted() {
    let _serial = SERIAL.lock().await;
    let cluster = three(&[]).await;
    let client = cluster.client(PATIENCE);
    let addr = cluster.addr(1);
    let dead = format!("127.0.0.1:{}", free_port());
    let error = client
        .add_learner(&addr, 4, &dead, false)
        .await
        .expect_err("nothing answers there");
    assert_eq!(
        error.status(),
        Some(StatusCode::UNPROCESSABLE_ENTITY),
        "{error}"
    );
    assert!(error.to_string().contains("not reachable yet"), "{error}");
    let added = client
        .add_learner(&addr, 4, &dead, true)
        .await
        .expect("forced");
    assert!(
        added
            .note
            .as_deref()
            .is_some_and(|n| n.contains("not reachable yet"))
    );
    assert!(added.nodes.contains_key(&4));
    // A learner that never caught up is not promoted.
    let error = client
        .change_members(&addr, vec![1, 2, 3, 4])
        .await
        .expect_err("node 4 has not caught up");
    assert_eq!(error.status(), Some(StatusCode::CONFLICT), "{error}");
    assert!(error.to_string().contains("has not caught up"), "{error}");
    // And it can be removed.
    let removed = client
        .remove_learner(&addr, 4)
        .await
        .expect("remove learner 4");
    assert!(!removed.nodes.contains_key(&4), "{:?}", removed.nodes);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let members = client.members(&addr).await.expect("members");
        if members.members.keys().copied().collect::<Vec<_>>() == vec![1, 2, 3] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 4 is still listed: {members:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let error = client
        .remove_learner(&addr, 2)
        .await
        .expect_err("a voter is not removed as a learner");
    assert_eq!(error.status(), Some(StatusCode::CONFLICT), "{error}");
    // Leadership moves on request.
    let leader = cluster.leader().await.expect("a leader");
    let to = if leader.id == 1 { 2 } else { 1 };
    let moved = client.transfer_leader(&addr, to).await.expect("transfer");
    assert_eq!(moved.leader, to);
    client
        .put(&addr, "after transfer", "ok")
        .await
        .expect("write");
}

/// Issue 47: `add-learner` answered before the learner had caught up (openraft's wait allows
/// 5000 entries of lag), so the README's next command, `change-members`, was refused `409`.
/// Node 4 joins a cluster whose log it can only get by a snapshot: once `add-learner` answers
/// `200`, node 4 is within the promotion lag of the leader's log, and the promotion that
/// follows at once is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_is_added_once_caught_up_and_promoted_at_once() {
    let _serial = SERIAL.lock().await;
    let mut cluster = Cluster::new(4, TIMING_ARGS);
    cluster.peers = (1..=3)
        .map(|id| format!("{id}={}", cluster.nodes[&id].public))
        .collect::<Vec<_>>()
        .join(",");
    for id in 1..=3 {
        cluster.start(id);
    }
    let leader = cluster.wait_for_leader(&[1, 2, 3], 0).await.id;
    let client = cluster.client(PATIENCE);
    let value = "v".repeat(2048);
    for n in 0..300 {
        client
            .put(&cluster.addr(leader), &format!("k{n:03}"), &value)
            .await
            .expect("write");
    }
    let last = cluster
        .status(leader)
        .await
        .and_then(|s| s.last_log_index)
        .expect("a log");
    cluster.start_with_peers(4, "");
    cluster.wait_until_up(4).await;
    let added = client
        .add_learner(&cluster.addr(leader), 4, &cluster.nodes[&4].public, false)
        .await
        .expect("add learner 4");
    assert_eq!(added.note, None, "{added:?}");
    let learner = cluster.status(4).await.expect("node 4 answers");
    let lag = PROMOTE_LAG_ENTRIES_MAX;
    assert!(
        learner.last_log_index.is_some_and(|got| got + lag >= last),
        "add-learner answered with node 4 at {:?} of {last} (more than {lag} behind)",
        learner.last_log_index
    );
    let promoted = client
        .change_members(&cluster.addr(leader), vec![1, 2, 3, 4])
        .await
        .expect("a learner that add-learner says caught up is promoted");
    assert_eq!(promoted.voters, vec![1, 2, 3, 4]);
    let data = cluster.wait_converged().await;
    assert_eq!(data[&4].len(), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_are_checked_and_a_changed_list_is_reported_on_restart() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let port = free_port();
    for peers in [
        "1=127.0.0.1",
        "1=127.0.0.1:0",
        "1=host:",
        "1=127.0.0.1:70000",
    ] {
        let mut child = Command::new(node_exe())
            .args([
                "serve",
                "--id",
                "1",
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .arg("--data-dir")
            .arg(dir.path().join("node"))
            .args(["--peers", peers])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("runs");
        // A node that accepts the address serves on: it is stopped and the test fails.
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("status") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(1),
            "--peers {peers} is refused: {stderr}"
        );
        assert!(stderr.contains("is not HOST:PORT"), "{peers}: {stderr}");
    }
    let mut cluster = three(&[]).await;
    cluster.kill(1);
    let other = format!("{},4=127.0.0.1:{}", cluster.peers, free_port());
    cluster.start_with_peers(1, &other);
    cluster.wait_until_up(1).await;
    let deadline = Instant::now() + PATIENCE;
    while !cluster.log_text(1).contains("--peers differs") {
        assert!(Instant::now() < deadline, "{}", cluster.log_tail(1));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A node killed before the membership entry reached it learns it from the leader: wait
    // until it knows one, then it must be the log's, not the changed `--peers`.
    let status = wait_status(&cluster, 1, "keeps its membership", |s| {
        s.leader.is_some() && !s.voters.is_empty()
    })
    .await;
    assert_eq!(status.voters, vec![1, 2, 3], "the log's membership is kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_stops_the_start_naming_the_entry() {
    let _serial = SERIAL.lock().await;
    let mut cluster = three(&["--snapshot-every", "100000"]).await;
    let client = cluster.client(PATIENCE);
    let marker = "entry-to-damage-".repeat(16);
    let written = client
        .put(&cluster.addr(1), "marked", &marker)
        .await
        .expect("write");
    cluster.wait_converged().await;
    cluster.kill(3);
    // Noise over every copy of the entry's value in node 3's log: the pages stay sound, so
    // only the entry's checksum can tell.
    let path = cluster.nodes[&3].dir.join(rbolt_raft::LOG_FILE);
    let mut bytes = std::fs::read(&path).expect("read");
    let needle = marker.as_bytes();
    let mut found = 0;
    let mut rng = crate::cluster::Rng::new(0x5eed);
    while let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
        for byte in &mut bytes[at..at + needle.len()] {
            *byte = rng.next() as u8;
        }
        found += 1;
    }
    assert!(found > 0, "the entry is in the log");
    std::fs::write(&path, bytes).expect("write");
    cluster.start(3);
    assert_eq!(
        cluster.wait_exit(3).await,
        Some(1),
        "{}",
        cluster.log_tail(3)
    );
    let log = cluster.log_text(3);
    assert!(
        log.contains("the log is damaged")
            && log.contains(&format!("log entry {} is damaged", written.index)),
        "{log}"
    );
    // The documented recovery: the directory moved aside, the node started on a new one. It
    // does not bootstrap into the running cluster (issue 47, item 6): it waits for the leader,
    // which sends it the log, the damaged entry's write included.
    let dir = cluster.nodes[&3].dir.clone();
    std::fs::rename(&dir, dir.with_extension("damaged")).expect("move aside");
    cluster.start(3);
    let data = cluster.wait_converged().await;
    assert_eq!(data[&3].get("marked"), Some(&marker), "node 3 caught up");
    let log = cluster.log_text(3);
    assert!(
        log.contains("the cluster already runs"),
        "{}",
        cluster.log_tail(3)
    );
    // It voted only once it held what the cluster had committed when it started (its data
    // lost, a vote from it could have elected a leader without the entry it lost).
    let withheld_until: u64 = log
        .split("withholds its vote until it holds index ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("node 3 never withheld its vote:\n{log}"));
    assert!(withheld_until >= written.index, "{withheld_until}");
    cluster.wait_for_log(3, "it votes again").await;
    // The leader, whose follower's log went back, sent it the log again: openraft asserts in
    // a debug build that this never happens unless allowed, and the leader panicked (found as
    // a flaky convergence of this test: 2 runs in 25 under load).
    for id in cluster.ids() {
        assert!(
            !cluster.log_text(id).contains("panicked"),
            "node {id}:\n{}",
            cluster.log_text(id)
        );
    }
}

/// A node whose directory was bootstrapped but whose log is still empty (killed before the
/// first entry reached it) bootstraps, at its next start, the membership recorded at its first
/// start, not a changed `--peers`: a changed list would make it a cluster of its own, with
/// voters the others do not have (found as a flaky `peers_are_checked...` above, when node 1
/// happened to be killed before the membership entry reached it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_an_empty_log_bootstraps_the_recorded_membership_not_a_changed_one() {
    let _serial = SERIAL.lock().await;
    let mut cluster = Cluster::new(3, TIMING_ARGS);
    // Node 1 alone, the others standing in with empty logs (a majority of the initial
    // members must answer so before a node bootstraps): it records the cluster and its
    // membership, and bootstraps it.
    cluster.start(1);
    cluster.wait_until_up(1).await;
    let empty = cluster.status(1).await.expect("node 1 answers");
    let _stand_ins = EmptyPeers::stand_in(&cluster, &[2, 3], &empty).await;
    let first = wait_status(&cluster, 1, "bootstraps", |s| !s.voters.is_empty()).await;
    assert_eq!(first.voters, vec![1, 2, 3]);
    cluster.kill(1);
    // Its log and state as if the first entry had never reached it; the records stay.
    let dir = cluster.nodes[&1].dir.clone();
    for file in [
        rbolt_raft::LOG_FILE,
        rbolt_raft::STATE_FILE,
        rbolt_raft::SNAPSHOT_FILE,
    ] {
        match std::fs::remove_file(dir.join(file)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("removing {file}: {e}"),
        }
    }
    let changed = format!("{},4=127.0.0.1:{}", cluster.peers, free_port());
    cluster.start_with_peers(1, &changed);
    cluster.wait_until_up(1).await;
    let status = wait_status(&cluster, 1, "bootstraps again", |s| !s.voters.is_empty()).await;
    assert_eq!(
        status.voters,
        vec![1, 2, 3],
        "the recorded membership is bootstrapped, not --peers {changed}"
    );
    assert!(cluster.log_text(1).contains("--peers differs"));
}

/// Issue 47, item 6, with the other members down when the one whose data was lost restarts:
/// a follower misses a write that the leader and the other follower commit; the leader and
/// that follower stop, and the follower's directory is lost (moved aside, as the recovery of a
/// damaged log says). Restarted alone, it does not bootstrap (too few members answer); once
/// the member that missed the write is back, it does not vote for it (with its vote that
/// member would lead and overwrite the write): no leader is elected. Once the old leader is
/// back the cluster converges, and every node holds the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_data_was_lost_neither_bootstraps_nor_votes_a_write_away() {
    let _serial = SERIAL.lock().await;
    let mut cluster = three(&["--snapshot-every", "100000"]).await;
    let leader = cluster.settled_leader().await.id;
    let followers: Vec<u64> = cluster
        .ids()
        .into_iter()
        .filter(|&id| id != leader)
        .collect();
    let (missed, lost) = (followers[0], followers[1]);
    cluster.kill(missed);
    let client = cluster.client(PATIENCE);
    client
        .put(&cluster.addr(leader), "kept", "acknowledged")
        .await
        .expect("committed by the leader and one follower");
    cluster.kill(leader);
    cluster.kill(lost);
    let dir = cluster.nodes[&lost].dir.clone();
    std::fs::rename(&dir, dir.with_extension("lost")).expect("move aside");
    cluster.start(lost);
    cluster.wait_until_up(lost).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let alone = cluster.status(lost).await.expect("it answers");
    assert!(alone.voters.is_empty(), "it bootstrapped alone: {alone:?}");
    assert!(
        cluster
            .log_text(lost)
            .contains("once a majority of the initial members answer"),
        "{}",
        cluster.log_tail(lost)
    );
    cluster.start(missed);
    cluster.wait_until_up(missed).await;
    cluster
        .wait_for_log(lost, "withholds its vote until it holds index")
        .await;
    // Several election timeouts (300 to 600 ms here): the member that missed the write
    // campaigns, and the one that lost its data refuses its votes.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        for id in [missed, lost] {
            let status = cluster.status(id).await;
            assert!(
                status.as_ref().is_none_or(|s| s.state != "Leader"),
                "node {id} leads without the write: {status:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.start(leader);
    let data = cluster.wait_converged().await;
    for (id, all) in &data {
        assert_eq!(
            all.get("kept").map(String::as_str),
            Some("acknowledged"),
            "node {id} lost the acknowledged write"
        );
    }
    cluster.wait_for_log(lost, "it votes again").await;
}
