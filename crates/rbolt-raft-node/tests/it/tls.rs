//! TLS: a cluster whose nodes talk HTTPS to clients and to each other, peers with mutual TLS
//! and client writes with a bearer token, passes the SIGKILL test; without a certificate,
//! token or client certificate the same requests are refused; and a node refuses to listen on
//! a non-loopback address without peer authentication, and without TLS unless told
//! `--insecure`.
//!
//! The certificates are made here with rcgen: an authority, and one certificate for every
//! node (`127.0.0.1` and `localhost`, for servers and clients).

use crate::cluster::{Cluster, PATIENCE, SERIAL, TIMING_ARGS, free_port, node_exe};
use hyper::{Method, StatusCode};
use rbolt_raft_node::client::Client;
use rbolt_raft_node::tls::TlsFiles;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The token of the TLS tests' clients.
const TOKEN: &str = "s3cret-token-of-the-tls-test";

/// The files a TLS cluster needs.
struct Certs {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    token: PathBuf,
}

fn make_certs(dir: &Path) -> Certs {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "rbolt-raft test authority");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
    let node_key = rcgen::KeyPair::generate().expect("node key");
    let mut params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("node params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "rbolt-raft node");
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.signed_by(&node_key, &ca).expect("node certificate");
    let certs = Certs {
        ca: dir.join("ca.pem"),
        cert: dir.join("node.pem"),
        key: dir.join("node-key.pem"),
        token: dir.join("token"),
    };
    std::fs::write(&certs.ca, ca.pem()).expect("write");
    std::fs::write(&certs.cert, cert.pem()).expect("write");
    std::fs::write(&certs.key, node_key.serialize_pem()).expect("write");
    std::fs::write(&certs.token, format!("{TOKEN}\n")).expect("write");
    certs
}

/// A three-node cluster over TLS with mutual TLS between peers and a client token, and a
/// client of it (trusting the authority, sending the token, no client certificate).
fn tls_cluster() -> (Cluster, Certs) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir")
        .keep();
    let certs = make_certs(&dir);
    let path = |p: &Path| p.display().to_string();
    let mut args: Vec<String> = TIMING_ARGS.iter().map(|a| (*a).to_owned()).collect();
    args.extend([
        "--tls-cert".to_owned(),
        path(&certs.cert),
        "--tls-key".to_owned(),
        path(&certs.key),
        "--tls-ca".to_owned(),
        path(&certs.ca),
        "--peer-mtls".to_owned(),
        "--client-token-file".to_owned(),
        path(&certs.token),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cluster = Cluster::new(3, &args);
    cluster.set_client(client_of(&certs, false).with_token(Some(TOKEN.to_owned())));
    (cluster, certs)
}

/// A client trusting the test authority, presenting the node certificate when `present`.
fn client_of(certs: &Certs, present: bool) -> Client {
    let files = TlsFiles {
        cert: Some(certs.cert.clone()),
        key: Some(certs.key.clone()),
        ca: Some(certs.ca.clone()),
    };
    Client::new().with_tls(files.client(present).expect("client TLS"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_loses_no_acknowledged_write_under_sigkill() {
    let _serial = SERIAL.lock().await;
    let (cluster, _certs) = tls_cluster();
    crate::kill::sigkill_under_load(cluster, "sigkill under load, TLS").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_refuses_what_lacks_a_token_or_certificate() {
    let _serial = SERIAL.lock().await;
    let (mut cluster, certs) = tls_cluster();
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    let addr = cluster.addr(1);
    let base = cluster.client(PATIENCE);
    base.put(&addr, "with", "token")
        .await
        .expect("a write with the token");
    // Reads need no token; writes do, unless the client shows a certificate.
    let anonymous = client_of(&certs, false).with_timeout(PATIENCE);
    assert_eq!(
        anonymous
            .get(&addr, "with", false)
            .await
            .expect("read")
            .as_deref(),
        Some("token")
    );
    let error = anonymous
        .put(&addr, "no", "token")
        .await
        .expect_err("no token");
    assert_eq!(error.status(), Some(StatusCode::UNAUTHORIZED), "{error}");
    let wrong = anonymous.with_token(Some("guess".to_owned()));
    let error = wrong
        .put(&addr, "wrong", "token")
        .await
        .expect_err("a wrong token");
    assert_eq!(error.status(), Some(StatusCode::UNAUTHORIZED), "{error}");
    client_of(&certs, true)
        .with_timeout(PATIENCE)
        .put(&addr, "with", "certificate")
        .await
        .expect("a client certificate authorizes a write");
    // Peer RPCs need the certificate.
    let (_, answer) = anonymous
        .retrying(false)
        .request(
            &addr,
            Method::POST,
            "/raft/vote",
            bytes::Bytes::from_static(b"x"),
        )
        .await
        .expect("an answer");
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    // Plain HTTP gets no answer from a TLS port.
    let plain = Client::new()
        .with_timeout(Duration::from_secs(2))
        .retrying(false);
    assert!(
        plain.status(&addr).await.is_err(),
        "plain HTTP is not served"
    );
    let data = cluster.wait_converged().await;
    for all in data.values() {
        assert_eq!(all.get("with").map(String::as_str), Some("certificate"));
        assert!(!all.contains_key("no") && !all.contains_key("wrong"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_tls_refuses_a_non_loopback_address() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let certs = make_certs(dir.path());
    let secret = dir.path().join("peer-secret");
    std::fs::write(&secret, "a-peer-secret-of-the-tls-test\n").expect("write");
    let short = dir.path().join("short-secret");
    std::fs::write(&short, "short\n").expect("write");
    let port = free_port();
    let serve = |extra: &[&Path]| {
        let mut command = Command::new(node_exe());
        command
            .args(["serve", "--id", "1", "--listen", &format!("0.0.0.0:{port}")])
            .arg("--data-dir")
            .arg(dir.path().join("node"))
            .args(extra);
        command
    };
    let p = Path::new;
    let tls_with_token = [
        p("--tls-cert"),
        &certs.cert,
        p("--tls-key"),
        &certs.key,
        p("--tls-ca"),
        &certs.ca,
        p("--client-token-file"),
        &certs.token,
    ];
    // Refused: nothing; --insecure alone (it waives TLS, never peer authentication); TLS and
    // a client token without peer authentication (issue 47: peers were then anyone); a peer
    // secret too short to be one.
    let refusals: [(&[&Path], &str); 4] = [
        (&[], "without peer authentication"),
        (&[p("--insecure")], "without peer authentication"),
        (&tls_with_token, "without peer authentication"),
        (
            &[p("--insecure"), p("--peer-secret-file"), &short],
            "must be at least 16",
        ),
    ];
    for (args, says) in refusals {
        let output = serve(args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // With --insecure and a peer secret it serves.
    let mut child = serve(&[p("--insecure"), p("--peer-secret-file"), &secret])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let client = Client::new()
        .with_timeout(Duration::from_millis(500))
        .retrying(false);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while client.status(&format!("127.0.0.1:{port}")).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the insecure node never answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
}
