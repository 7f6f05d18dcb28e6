//! The README's certificate recipe, run as written: its three `sh` blocks (the authority, a
//! node's certificate, a client's) are read from the README, run with `sh -e` in a temporary
//! directory, and their files start a three-node cluster with mutual TLS between peers.

use crate::cluster::{Cluster, PATIENCE, SERIAL, TIMING_ARGS, node_exe};
use crate::sweep::vote_frame;
use hyper::{Method, StatusCode};
use rbolt_raft_node::client::Client;
use rbolt_raft_node::tls::TlsFiles;
use std::path::Path;
use std::process::Command;

/// The README, as built.
const README: &str = include_str!("../../README.md");

/// The `sh` blocks of the README's section `heading` (up to the next heading of its level or
/// above).
fn sh_blocks(heading: &str) -> Vec<&'static str> {
    let start = README
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("the README has no {heading:?}"));
    let level = heading.split(' ').next().expect("a heading");
    let section = &README[start + heading.len() + 2..];
    let end = section
        .match_indices("\n#")
        .find(|(at, _)| {
            let line = &section[at + 1..];
            let hashes = line.chars().take_while(|&c| c == '#').count();
            hashes <= level.len() && line[hashes..].starts_with(' ')
        })
        .map_or(section.len(), |(at, _)| at);
    section[..end]
        .split("```sh\n")
        .skip(1)
        .map(|block| block.split("```").next().expect("a closed block"))
        .collect()
}

/// Runs `script` with `sh -e` in `dir`, with `env`.
fn run(script: &str, dir: &Path, env: &[(&str, &str)]) {
    let output = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
        .expect("sh runs");
    assert!(
        output.status.success(),
        "the README's block failed ({env:?}):\n{script}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The recipe's authority, three node certificates for 127.0.0.1 and a client's: the nodes
/// start with `--peer-mtls` and elect a leader (each checks the others' certificates as a
/// server's and as a client's, and their address); the client's certificate writes and reads
/// (`--client-auth-reads`), and a vote request it signs is refused as a client's (`403`); a
/// node does not start on the client's certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_certificate_recipe_makes_a_cluster_that_elects() {
    let _serial = SERIAL.lock().await;
    let blocks = sh_blocks("### Certificates with openssl");
    assert_eq!(blocks.len(), 3, "the authority, a node's, a client's");
    let mut args: Vec<&str> = TIMING_ARGS.to_vec();
    args.extend(["--peer-mtls", "--client-auth-reads"]);
    let mut cluster = Cluster::new(3, &args);
    let dir = cluster.root.path().join("certs");
    std::fs::create_dir(&dir).expect("mkdir");
    run(blocks[0], &dir, &[]);
    for id in cluster.ids() {
        run(
            blocks[1],
            &dir,
            &[("NODE", &format!("node-{id}")), ("ADDR", "127.0.0.1")],
        );
    }
    run(blocks[2], &dir, &[("CLIENT", "client-1")]);
    let file = |name: &str| dir.join(name).display().to_string();
    cluster.args.extend(["--tls-ca".to_owned(), file("ca.pem")]);

    // A node refuses the client's certificate for its own.
    let output = Command::new(node_exe())
        .args(["serve", "--id", "1", "--listen", "127.0.0.1:1"])
        .arg("--data-dir")
        .arg(cluster.root.path().join("refused"))
        .args(["--peer-mtls", "--tls-ca", &file("ca.pem")])
        .args(["--tls-cert", &file("client-1.pem")])
        .args(["--tls-key", &file("client-1-key.pem")])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("lacks the extended key usage serverAuth"),
        "{stderr}"
    );

    let files = TlsFiles {
        cert: Some(file("client-1.pem").into()),
        key: Some(file("client-1-key.pem").into()),
        ca: Some(file("ca.pem").into()),
    };
    cluster.set_client(Client::new().with_tls(files.client(true).expect("client TLS")));
    let peers = cluster.peers.clone();
    for id in cluster.ids() {
        let (cert, key) = (
            file(&format!("node-{id}.pem")),
            file(&format!("node-{id}-key.pem")),
        );
        cluster.start_with(id, &peers, &["--tls-cert", &cert, "--tls-key", &key]);
    }
    let leader = cluster.wait_for_leader(&cluster.ids(), 0).await;
    let client = cluster.client(PATIENCE);
    client
        .put(&cluster.addr(leader.id), "recipe", "works")
        .await
        .expect("the client's certificate writes");
    let data = cluster.wait_converged().await;
    for (id, all) in &data {
        assert_eq!(
            all.get("recipe").map(String::as_str),
            Some("works"),
            "node {id}"
        );
    }
    let forged = vote_frame(&leader.cluster, leader.id, leader.term + 1000);
    let (_, answer) = client
        .retrying(false)
        .request(
            &cluster.addr(leader.id),
            Method::POST,
            "/raft/vote",
            bytes::Bytes::from(forged),
        )
        .await
        .expect("an answer");
    assert_eq!(
        answer.status,
        StatusCode::FORBIDDEN,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}
