//! The client API and the command line on a running cluster: put, get (linearizable and
//! local), delete, and a membership change that adds a fourth node and later removes it.

use crate::cluster::{Cluster, PATIENCE, SERIAL, TIMING_ARGS, node_exe, raw};
use hyper::{Method, StatusCode};
use rbolt_raft_node::api::{HEADER_REQUEST_ID, WriteReply};
use rbolt_raft_node::client::Client;
use std::process::Command;
use tokio::time::Instant;

/// Runs the command line with `args` against `node`; returns its exit code and stdout.
fn cli(node: &str, args: &[&str]) -> (i32, String) {
    let (command, rest) = args.split_first().expect("a command");
    let output = Command::new(node_exe())
        .arg(command)
        .args(["--node", node])
        .args(rest)
        .output()
        .expect("the command runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).trim().to_owned(),
    )
}

/// Waits until node `id` sees exactly `voters` (it learns a change with the next append).
async fn wait_for_voters(cluster: &Cluster, id: u64, voters: &[u64]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = cluster.status(id).await;
        if status.as_ref().is_some_and(|s| s.voters == voters) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {id} never saw voters {voters:?}: {status:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_writes_reads_and_changes_membership() {
    let _serial = SERIAL.lock().await;
    let mut cluster = Cluster::new(4, TIMING_ARGS);
    for id in 1..=3 {
        cluster.start(id);
    }
    let leader = cluster.wait_for_leader(&[1, 2, 3], 0).await;
    let follower = [1, 2, 3]
        .into_iter()
        .find(|&id| id != leader.id)
        .expect("a follower");
    let via = cluster.addr(follower);

    // Writes through a follower are redirected to the leader.
    let (code, out) = cli(&via, &["put", "colour", "blue"]);
    assert_eq!(code, 0, "put: {out}");
    assert!(out.contains("\"previous\": null"), "{out}");
    let (code, out) = cli(&via, &["put", "colour", "green"]);
    assert_eq!(
        (code, out.contains("\"previous\": \"blue\"")),
        (0, true),
        "{out}"
    );
    assert_eq!(cli(&via, &["get", "colour"]), (0, "green".to_owned()));
    let (code, out) = cli(&via, &["put", "a key/with?odd#chars", "ünï"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        cli(&via, &["get", "a key/with?odd#chars"]),
        (0, "ünï".to_owned())
    );
    let (code, _) = cli(&via, &["delete", "colour"]);
    assert_eq!(code, 0);
    assert_eq!(
        cli(&via, &["get", "colour"]).0,
        2,
        "a missing key exits with 2"
    );

    // A local read on every node sees the write once it has applied it.
    let client = Client::new().with_timeout(PATIENCE);
    let written = client.put(&via, "local", "seen").await.expect("put");
    for id in 1..=3 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let applied = cluster.status(id).await.and_then(|s| s.applied);
            if applied >= Some(written.index) {
                break;
            }
            assert!(Instant::now() < deadline, "node {id} applies the write");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let local = client
            .get(&cluster.addr(id), "local", true)
            .await
            .expect("local get");
        assert_eq!(local.as_deref(), Some("seen"), "node {id}");
    }

    // A write sent again under its request id takes effect once, even around another
    // client's write of the same key (issue 47, item 6); a bad id is refused.
    let leader_addr = cluster.addr(leader.id);
    let put_as = |id: Option<&'static str>, value: &'static str| {
        let headers: Vec<(&str, String)> = id
            .map(|id| (HEADER_REQUEST_ID, id.to_owned()))
            .into_iter()
            .collect();
        let addr = leader_addr.clone();
        async move { raw(&addr, Method::PUT, "/kv/idem", &headers, value.into()).await }
    };
    let (status, first) = put_as(Some("req-1"), "first").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let first: WriteReply = serde_json::from_str(&first).expect("reply");
    assert_eq!(put_as(None, "other").await.0, StatusCode::OK);
    let (status, again) = put_as(Some("req-1"), "first").await;
    assert_eq!(status, StatusCode::OK, "{again}");
    let again: WriteReply = serde_json::from_str(&again).expect("reply");
    assert_eq!(again.duplicate_of, Some(first.index), "{again:?}");
    assert_eq!(
        client
            .get(&via, "idem", false)
            .await
            .expect("get")
            .as_deref(),
        Some("other"),
        "the resend took effect a second time"
    );
    for bad in ["", "with space", &"x".repeat(65)] {
        let headers = [(HEADER_REQUEST_ID, bad.to_owned())];
        let (status, body) = raw(
            &leader_addr,
            Method::PUT,
            "/kv/idem",
            &headers,
            b"v".to_vec(),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {body}");
    }
    // The client library sends ids when asked, and the command line always does.
    let ided = client.with_request_ids(true);
    assert_eq!(
        ided.put(&via, "idem", "by id")
            .await
            .expect("put")
            .duplicate_of,
        None
    );

    // Membership: node 4 joins as a learner, becomes a voter, and leaves again.
    cluster.start_with_peers(4, "");
    cluster.wait_until_up(4).await;
    let addr4 = cluster.nodes[&4].public.clone();
    let (code, _) = cli(&via, &["add-learner", "--id", "4", "--addr", "http://x/"]);
    assert_eq!(code, 1, "an address that is not HOST:PORT is refused");
    let (code, out) = cli(&via, &["add-learner", "--id", "4", "--addr", &addr4]);
    assert_eq!(code, 0, "add-learner: {out}");
    let (code, out) = cli(&via, &["change-members", "1,2,3,4"]);
    assert_eq!(code, 0, "change-members: {out}");
    assert!(
        out.contains("\"voters\": [\n    1,\n    2,\n    3,\n    4\n  ]"),
        "{out}"
    );
    wait_for_voters(&cluster, 4, &[1, 2, 3, 4]).await;
    // Node 4 applies what it received (a local read on it, through the command line).
    let deadline = Instant::now() + PATIENCE;
    while cli(
        &cluster.addr(4),
        &["get", "a key/with?odd#chars", "--local"],
    ) != (0, "ünï".to_owned())
    {
        assert!(Instant::now() < deadline, "node 4 never caught up");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (code, out) = cli(&cluster.addr(4), &["change-members", "1,2,3"]);
    assert_eq!(code, 0, "change-members: {out}");
    wait_for_voters(&cluster, follower, &[1, 2, 3]).await;
    assert_eq!(cli(&via, &["put", "after", "removal"]).0, 0);
}
