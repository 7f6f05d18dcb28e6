//! The vote route (`POST /raft/vote`) asked directly, as a peer would: a node whose log is
//! empty while its cluster runs withholds its vote until it holds the highest commit index its
//! peers reported (issue 47, item 6), and a vote request without the cluster's peer secret,
//! with a wrong one or of another cluster is refused before Raft sees it. A refused vote
//! leaves the node's term and vote, on disk too, as they were.

use crate::cluster::{Cluster, EmptyPeers, SERIAL, TIMING_ARGS, raw};
use hyper::{Method, StatusCode};
use openraft::RaftLogReader;
use openraft::Vote;
use openraft::raft::VoteRequest;
use rbolt_raft_node::api::HEADER_PEER_SECRET;
use rbolt_raft_node::kv::KvConfig;
use rbolt_raft_node::wire;

/// The cluster's token in this test.
const TOKEN: &str = "votes";

/// The cluster's peer secret in this test.
const PEER_SECRET: &str = "votes-peer-secret-0123456789";

/// The commit index the stand-in peers report: the node must hold it before it votes.
const COMMITTED: u64 = 40;

/// A vote request of `cluster` from candidate `from` in `term`, whose last log entry is at
/// `last_index` (in term `term - 1`), if any.
fn vote_frame(cluster: &str, from: u64, term: u64, last_index: Option<u64>) -> Vec<u8> {
    let last = last_index.map(|index| openraft::testing::log_id::<KvConfig>(term - 1, from, index));
    let rpc = VoteRequest::<KvConfig>::new(Vote::new(term, from), last);
    wire::encode(cluster, from, &rpc).expect("encode")
}

/// The value of metric line `name` in `metrics`, 0 when absent.
fn metric(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Node 1 starts on an empty directory while its peers (stand-ins for nodes 2 and 3) say the
/// cluster runs, with index 40 committed in term 7: it does not bootstrap, and withholds its
/// vote. Candidates 2 and 3 then ask it for its vote with the cluster's peer secret, in a
/// later term, with an empty log and with a log longer than the commit: both are refused
/// (`503`, naming the index it waits for). The same requests with no secret or a wrong one
/// are refused `401`, and one of another cluster `409`. Each refusal is counted by reason;
/// the node's term stays 0 and no vote reaches its `log.db`. Without the withholding, the
/// first request is granted (`200`) and the vote of term 8 is on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vote_is_withheld_while_catching_up_and_refused_without_credentials() {
    let _serial = SERIAL.lock().await;
    let mut cluster = Cluster::new(3, TIMING_ARGS);
    let secret_file = cluster.root.path().join("peer-secret");
    std::fs::write(&secret_file, format!("{PEER_SECRET}\n")).expect("write");
    cluster.args.extend([
        "--peer-secret-file".to_owned(),
        secret_file.display().to_string(),
        "--initial-cluster-token".to_owned(),
        TOKEN.to_owned(),
    ]);
    cluster.start(1);
    cluster.wait_until_up(1).await;
    let mut running = cluster.status(1).await.expect("node 1 answers");
    assert_eq!(running.cluster, TOKEN);
    running.state = "Leader".to_owned();
    running.leader = Some(2);
    running.term = 7;
    running.last_log_index = Some(COMMITTED);
    running.committed = Some(COMMITTED);
    let _stand_ins = EmptyPeers::answering(&cluster, &[2, 3], &running).await;
    cluster
        .wait_for_log(
            1,
            &format!("withholds its vote until it holds index {COMMITTED}"),
        )
        .await;

    let addr = cluster.addr(1);
    let before = cluster.status(1).await.expect("node 1 answers");
    assert_eq!(before.term, 0, "{before:?}");
    let secret = [(HEADER_PEER_SECRET, PEER_SECRET.to_owned())];
    let wrong = [(HEADER_PEER_SECRET, "not-the-peer-secret-at-all".to_owned())];
    let requests = [
        (2, vote_frame(TOKEN, 2, 8, None)),
        (3, vote_frame(TOKEN, 3, 9, Some(COMMITTED + 5))),
    ];
    for (candidate, frame) in &requests {
        let (status, body) = raw(&addr, Method::POST, "/raft/vote", &secret, frame.clone()).await;
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "candidate {candidate}, with the secret: {body}"
        );
        assert!(
            body.contains(&format!("it votes once it holds index {COMMITTED}")),
            "{body}"
        );
        for headers in [&[][..], &wrong[..]] {
            let (status, body) =
                raw(&addr, Method::POST, "/raft/vote", headers, frame.clone()).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "candidate {candidate}, {headers:?}: {body}"
            );
        }
    }
    let other = vote_frame("another-cluster", 2, 8, None);
    let (status, body) = raw(&addr, Method::POST, "/raft/vote", &secret, other).await;
    assert_eq!(status, StatusCode::CONFLICT, "another cluster: {body}");

    let (_, metrics) = raw(&addr, Method::GET, "/metrics", &[], Vec::new()).await;
    for (reason, count) in [
        ("catching_up", 2),
        ("no_secret", 2),
        ("wrong_secret", 2),
        ("wrong_cluster", 1),
    ] {
        let name = format!("rbolt_raft_peer_rpcs_refused_total{{reason=\"{reason}\"}}");
        assert_eq!(metric(&metrics, &name), count, "{name}:\n{metrics}");
    }
    let after = cluster.status(1).await.expect("node 1 answers");
    assert_eq!(
        (after.term, &after.state, after.leader, after.last_log_index),
        (0, &before.state, None, None),
        "a refused vote moved node 1: {after:?}"
    );

    // The vote on disk: none was saved.
    cluster.kill(1);
    let path = cluster.nodes[&1].dir.join(rbolt_raft::LOG_FILE);
    let mut log = rbolt_raft::LogStore::<KvConfig>::open(&path).expect("open node 1's log");
    let vote = log.read_vote().await.expect("read the vote");
    assert!(
        vote.is_none_or(|v| v.leader_id().term == 0),
        "a refused vote reached node 1's log: {vote:?}"
    );
}
