//! Starting, killing and asking the node processes of a test cluster, and the checks every
//! cluster test ends with.

use rbolt_raft_node::api::Status;
use rbolt_raft_node::client::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Cluster tests take this in turn: each starts several processes and measures elections.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The node binary under test: this build's, or the one `RBOLT_RAFT_NODE_EXE` names (to run
/// a regression test on an older build and see it fail there).
pub fn node_exe() -> String {
    std::env::var("RBOLT_RAFT_NODE_EXE")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_rbolt-raft-node").to_owned())
}

/// Raft timing for the tests: fast elections, frequent snapshots and no log kept behind
/// them, so a node that was down catches up by installing a snapshot.
pub const TIMING_ARGS: &[&str] = &[
    "--heartbeat-ms",
    "50",
    "--election-timeout-ms",
    "300",
    "--snapshot-every",
    "200",
    "--logs-to-keep",
    "0",
];

/// A generous bound for anything a healthy cluster does (an election, a restart, catching
/// up) on a loaded two-core machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The test kit's generator, seeded from `RBOLT_RAFT_SEED` or the clock: tests print their
/// seed so a failure can be replayed.
pub struct Rng(rbolt_testkit::rng::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(rbolt_testkit::rng::Rng::new(seed))
    }

    pub fn from_env_or_time(test: &str) -> Rng {
        let seed = std::env::var("RBOLT_RAFT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
                    ^ u64::from(std::process::id())
            });
        eprintln!("{test}: RBOLT_RAFT_SEED={seed}");
        Rng::new(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A duration from `low` to `high` milliseconds.
    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }
}

/// Sends one request to `addr` over plain TCP, following nothing; returns the status and the
/// body as text (`599` and the error when there is no answer).
pub async fn raw(
    addr: &str,
    method: hyper::Method,
    path: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (hyper::StatusCode, String) {
    let client = rbolt_raft_node::http::client(None);
    match rbolt_raft_node::http::send(
        &client,
        addr,
        method,
        path,
        headers,
        rbolt_raft_node::http::full(body),
        Duration::from_secs(30),
    )
    .await
    {
        Ok(answer) => (
            answer.status,
            String::from_utf8_lossy(&answer.body).into_owned(),
        ),
        Err(e) => (
            hyper::StatusCode::from_u16(599).expect("a status"),
            e.to_string(),
        ),
    }
}

/// A port on 127.0.0.1 that was free a moment ago, and that no other socket of this machine
/// will be given meanwhile.
///
/// A port the kernel picks (`bind` to port 0) lies in its ephemeral range, from which it also
/// picks the local port of every outgoing connection: between this call and the node's bind,
/// one of the many connections the tests make can take it, and the node then fails with
/// "Address already in use" (seen in CI). So the ports come from below that range, which the
/// kernel never hands out by itself: each process counts through them from an offset of its
/// own (concurrent test processes start apart; the count keeps this one's distinct), skipping
/// any port something listens on. Where the range cannot be read, the kernel picks.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let Some(ephemeral_start) = ephemeral_port_start() else {
        return TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
    };
    // The half below the ephemeral range, above the well-known and registered low ports.
    let low = (u32::from(ephemeral_start) / 2).max(1024);
    let span = u32::from(ephemeral_start).saturating_sub(low);
    assert!(
        span >= 256,
        "no room below the ephemeral ports ({ephemeral_start})"
    );
    let offset = std::process::id().wrapping_mul(2_654_435_761) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (low + (offset + n) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below {ephemeral_start}");
}

/// The first port of the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range).
fn ephemeral_port_start() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// One node of a test cluster.
pub struct NodeSpec {
    /// Where the process listens.
    pub listen: SocketAddr,
    /// Its address in `--peers` (the listen address, or a proxy in front of it).
    pub public: String,
    pub dir: PathBuf,
}

/// Node processes in a directory under the target directory (on the disk the tests run on).
pub struct Cluster {
    pub root: tempfile::TempDir,
    pub nodes: BTreeMap<u64, NodeSpec>,
    children: BTreeMap<u64, Child>,
    /// `--peers` of the initial members.
    pub peers: String,
    /// Extra arguments of `serve`.
    pub args: Vec<String>,
    /// Environment variables of each node's process (`FAILPOINTS`), by node.
    pub env: BTreeMap<u64, Vec<(String, String)>>,
    /// A client that asks one node and does not wait: for status polls.
    quick: Client,
    /// The client every test client starts from (TLS and token when the cluster uses them).
    pub base: Client,
}

impl Cluster {
    /// A cluster of nodes `1..=n` on 127.0.0.1, all initial members.
    pub fn new(n: u64, args: &[&str]) -> Cluster {
        let nodes = (1..=n)
            .map(|id| {
                let listen: SocketAddr = format!("127.0.0.1:{}", free_port())
                    .parse()
                    .expect("address");
                (id, listen, listen.to_string())
            })
            .collect();
        Cluster::with_addresses(nodes, args)
    }

    /// A cluster whose node `id` listens on `listen` and is known to its peers as `public`.
    pub fn with_addresses(nodes: Vec<(u64, SocketAddr, String)>, args: &[&str]) -> Cluster {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        let peers = nodes
            .iter()
            .map(|(id, _, public)| format!("{id}={public}"))
            .collect::<Vec<_>>()
            .join(",");
        let nodes = nodes
            .into_iter()
            .map(|(id, listen, public)| {
                let dir = root.path().join(format!("node-{id}")).join("data");
                (
                    id,
                    NodeSpec {
                        listen,
                        public,
                        dir,
                    },
                )
            })
            .collect();
        Cluster {
            root,
            nodes,
            children: BTreeMap::new(),
            peers,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: BTreeMap::new(),
            quick: Client::new()
                .with_timeout(Duration::from_secs(1))
                .following_redirects(false)
                .retrying(false),
            base: Client::new(),
        }
    }

    /// Every client of this cluster starts from `base` (TLS, a token).
    pub fn set_client(&mut self, base: Client) {
        self.quick = base
            .with_timeout(Duration::from_secs(1))
            .following_redirects(false)
            .retrying(false);
        self.base = base;
    }

    /// A client of this cluster that allows `timeout` per request.
    pub fn client(&self, timeout: Duration) -> Client {
        self.base.with_timeout(timeout)
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// Where a client reaches node `id` directly.
    pub fn addr(&self, id: u64) -> String {
        self.nodes[&id].listen.to_string()
    }

    pub fn log_path(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("node-{id}.log"))
    }

    /// Everything node `id` has written to its output.
    pub fn log_text(&self, id: u64) -> String {
        std::fs::read_to_string(self.log_path(id)).unwrap_or_default()
    }

    /// Waits until node `id`'s process exits on its own and returns its exit code.
    pub async fn wait_exit(&mut self, id: u64) -> Option<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let child = self.children.get_mut(&id).expect("node is running");
            if let Some(status) = child.try_wait().expect("status") {
                self.children.remove(&id);
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "node {id} did not exit:\n{}",
                self.log_tail(id)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts node `id` with `peers` and `extra` arguments besides the cluster's.
    pub fn start_with(&mut self, id: u64, peers: &str, extra: &[&str]) {
        let saved = self.args.clone();
        self.args.extend(extra.iter().map(|a| (*a).to_owned()));
        self.start_with_peers(id, peers);
        self.args = saved;
    }

    /// Starts node `id` (its process must not be running) as an initial member.
    pub fn start(&mut self, id: u64) {
        let peers = self.peers.clone();
        self.start_with_peers(id, &peers);
    }

    /// Starts node `id` with `peers` (empty: a node that joins later).
    pub fn start_with_peers(&mut self, id: u64, peers: &str) {
        assert!(!self.children.contains_key(&id), "node {id} is running");
        let spec = &self.nodes[&id];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(id))
            .expect("node log");
        let mut command = Command::new(node_exe());
        command
            .arg("serve")
            .arg("--id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(&spec.dir)
            .arg("--listen")
            .arg(spec.listen.to_string())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        command.envs(self.env.get(&id).into_iter().flatten().cloned());
        if !peers.is_empty() {
            command.arg("--peers").arg(peers);
        }
        let child = command.spawn().expect("the node starts");
        self.children.insert(id, child);
    }

    /// SIGKILLs node `id` and reaps it.
    pub fn kill(&mut self, id: u64) {
        let mut child = self
            .children
            .remove(&id)
            .unwrap_or_else(|| panic!("node {id} is not running"));
        if let Some(status) = child.try_wait().expect("status") {
            panic!(
                "node {id} exited on its own ({status}) before the kill:\n{}",
                self.log_tail(id)
            );
        }
        // `Child::kill` is SIGKILL on Unix: no shutdown, no flush.
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
    }

    /// Sends node `id` SIGTERM (a graceful stop); [`Cluster::wait_exit`] reaps it.
    pub fn terminate(&mut self, id: u64) {
        let pid = self.children[&id].id();
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGTERM to node {id}");
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.children.contains_key(&id)
    }

    /// Panics with its log if a node that should be running has exited.
    pub fn check_alive(&mut self) {
        let ids: Vec<u64> = self.children.keys().copied().collect();
        for id in ids {
            if let Some(status) = self
                .children
                .get_mut(&id)
                .and_then(|c| c.try_wait().ok())
                .flatten()
            {
                panic!("node {id} exited ({status}):\n{}", self.log_tail(id));
            }
        }
    }

    /// The last lines of node `id`'s output.
    pub fn log_tail(&self, id: u64) -> String {
        let text = std::fs::read_to_string(self.log_path(id)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Node `id`'s status, if it answers within a second.
    pub async fn status(&self, id: u64) -> Option<Status> {
        if !self.is_running(id) {
            return None;
        }
        self.quick.status(&self.addr(id)).await.ok()
    }

    /// The running node that leads in the highest term, if any.
    pub async fn leader(&self) -> Option<Status> {
        let mut leader: Option<Status> = None;
        for id in self.ids() {
            if let Some(status) = self.status(id).await
                && status.state == "Leader"
                && leader.as_ref().is_none_or(|l| l.term < status.term)
            {
                leader = Some(status);
            }
        }
        leader
    }

    /// Waits for a leader among `among` in a term above `term_above`.
    pub async fn wait_for_leader(&mut self, among: &[u64], term_above: u64) -> Status {
        let deadline = Instant::now() + PATIENCE;
        loop {
            for &id in among {
                if let Some(status) = self.status(id).await
                    && status.state == "Leader"
                    && status.term > term_above
                {
                    return status;
                }
            }
            self.check_alive();
            assert!(
                Instant::now() < deadline,
                "no leader among {among:?} above term {term_above} within {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The leader every running node follows, once they all do and have applied its commit
    /// index. Right after a start a second candidate can take over in the same term (openraft
    /// orders the leaders of one term by node id): a test that kills or damages "the leader"
    /// or "the followers" must not act on the first one seen.
    pub async fn settled_leader(&mut self) -> Status {
        self.wait_converged().await;
        self.leader().await.expect("a leader every node follows")
    }

    /// Waits until node `id`'s log holds `line`.
    pub async fn wait_for_log(&self, id: u64, line: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.log_text(id).contains(line) {
            assert!(
                Instant::now() < deadline,
                "node {id} never logged {line:?}:\n{}",
                self.log_tail(id)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until node `id` answers.
    pub async fn wait_until_up(&mut self, id: u64) {
        let deadline = Instant::now() + PATIENCE;
        while self.status(id).await.is_none() {
            self.check_alive();
            assert!(Instant::now() < deadline, "node {id} did not come up");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until every running node has applied the same index, the leader's commit index
    /// at that moment, and returns each node's data (read locally).
    pub async fn wait_converged(&mut self) -> BTreeMap<u64, BTreeMap<String, String>> {
        let deadline = Instant::now() + PATIENCE;
        let running: Vec<u64> = self.children.keys().copied().collect();
        loop {
            self.check_alive();
            let mut statuses = Vec::new();
            for &id in &running {
                statuses.extend(self.status(id).await);
            }
            let leader = statuses.iter().find(|s| s.state == "Leader");
            if let Some(leader) = leader
                && statuses.len() == running.len()
                && statuses
                    .iter()
                    .all(|s| s.applied == leader.committed && s.leader == Some(leader.id))
            {
                let mut data = BTreeMap::new();
                for &id in &running {
                    let dump = self
                        .base
                        .with_timeout(Duration::from_secs(30))
                        .retrying(false)
                        .following_redirects(false)
                        .dump(&self.addr(id), true)
                        .await
                        .unwrap_or_else(|e| panic!("node {id} dumps its data: {e}"));
                    data.insert(id, dump);
                }
                // Nothing was written between the statuses and the dumps if all still agree.
                let mut again = Vec::new();
                for &id in &running {
                    again.extend(self.status(id).await.map(|s| s.applied));
                }
                if again.iter().all(|a| *a == leader.committed) && again.len() == running.len() {
                    return data;
                }
            }
            if Instant::now() >= deadline {
                let tails: Vec<String> = running
                    .iter()
                    .map(|&id| format!("node {id}'s log:\n{}", self.log_tail(id)))
                    .collect();
                panic!(
                    "the nodes did not converge within {PATIENCE:?}: {statuses:#?}\n{}",
                    tails.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The entries of node `id`'s data directory.
    pub fn dir_entries(&self, id: u64) -> BTreeSet<String> {
        list_dir(&self.nodes[&id].dir)
    }
}

pub fn list_dir(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The writes of a test: every one sent (key and the one value ever sent for it) and those
/// acknowledged.
#[derive(Default)]
pub struct Ledger {
    pub sent: BTreeMap<String, String>,
    pub acked: BTreeSet<String>,
    /// Writes whose every attempt failed or timed out: they may or may not have taken effect.
    pub unknown: u64,
}

/// Checks the converged `data` of every node against `ledger`: every acknowledged write is on
/// every node, every key a node holds was sent with exactly that value, and the nodes agree.
/// `absent` are keys that must be on no node. Returns the number of acknowledged writes lost
/// (the caller asserts 0 after printing its summary).
pub fn check_data(
    data: &BTreeMap<u64, BTreeMap<String, String>>,
    ledger: &Ledger,
    absent: &BTreeSet<String>,
) -> usize {
    let mut lost = 0;
    for (id, all) in data {
        for key in &ledger.acked {
            if all.get(key) != ledger.sent.get(key) {
                lost += 1;
                eprintln!("node {id}: acknowledged {key} is {:?}", all.get(key));
            }
        }
        for (key, value) in all {
            assert_eq!(
                ledger.sent.get(key),
                Some(value),
                "node {id} holds {key} = {value}, which was never sent"
            );
            assert!(
                !absent.contains(key),
                "node {id} holds {key}, which must not exist"
            );
        }
    }
    let first = data.values().next().expect("a node");
    for (id, all) in data {
        assert!(
            all == first,
            "node {id} disagrees with node {}",
            data.keys().next().expect("a node")
        );
    }
    lost
}

/// The median and maximum of `samples`.
pub fn p50_max(samples: &[Duration]) -> (Duration, Duration) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    (
        sorted.get(sorted.len() / 2).copied().unwrap_or_default(),
        sorted.last().copied().unwrap_or_default(),
    )
}

/// Client writers running against a cluster, each writing its own keys in turn.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ledger: Arc<Mutex<Ledger>>,
}

/// How long a writer keeps trying one write (on other nodes, through elections) before it
/// counts it as unknown and moves on.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(15);

/// The value written for `key`: the key, padded to `bytes`.
pub fn value_for(key: &str, bytes: usize) -> String {
    let mut value = format!("{key}:");
    while value.len() < bytes {
        value.push('x');
    }
    value
}

impl Load {
    /// Starts `writers` writers, writing keys `PREFIX<writer>-<n>` with values of
    /// `value_bytes` to the nodes at `addrs` in turn (following redirects to the leader).
    pub fn start(addrs: Vec<String>, writers: usize, prefix: &str, value_bytes: usize) -> Load {
        Load::start_with(&Client::new(), addrs, writers, prefix, value_bytes)
    }

    /// [`Load::start`] with clients made from `base` (TLS, a token).
    pub fn start_with(
        base: &Client,
        addrs: Vec<String>,
        writers: usize,
        prefix: &str,
        value_bytes: usize,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let client = base.with_timeout(Duration::from_secs(3)).retrying(false);
        let tasks = (0..writers)
            .map(|w| {
                let (stop, ledger, client, addrs) = (
                    Arc::clone(&stop),
                    Arc::clone(&ledger),
                    client.clone(),
                    addrs.clone(),
                );
                let prefix = prefix.to_owned();
                tokio::spawn(async move {
                    let mut n = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("{prefix}{w}-{n:06}");
                        let value = value_for(&key, value_bytes);
                        lock(&ledger).sent.insert(key.clone(), value.clone());
                        let deadline = Instant::now() + WRITE_PATIENCE;
                        let mut at = w + n;
                        loop {
                            let addr = &addrs[at % addrs.len()];
                            // Retrying a put of the same value is harmless: puts are
                            // idempotent, so any attempt that took effect left the same state.
                            if client.put(addr, &key, &value).await.is_ok() {
                                lock(&ledger).acked.insert(key);
                                break;
                            }
                            if Instant::now() >= deadline {
                                lock(&ledger).unknown += 1;
                                break;
                            }
                            at += 1;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        n += 1;
                    }
                })
            })
            .collect();
        Load {
            stop,
            tasks,
            ledger,
        }
    }

    /// Writes acknowledged so far.
    pub fn acked(&self) -> usize {
        lock(&self.ledger).acked.len()
    }

    /// The keys acknowledged so far.
    pub fn acked_keys(&self) -> Vec<String> {
        lock(&self.ledger).acked.iter().cloned().collect()
    }

    /// Stops the writers (each finishes the write it is on) and returns what they did.
    pub async fn stop(self) -> Ledger {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.expect("writer task");
        }
        std::mem::take(&mut *lock(&self.ledger))
    }
}

pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Stands in for the nodes of `ids` on their addresses: answers every request with `status`
/// (its id replaced by each one's), as members started with an empty log and no leader do,
/// until dropped. A node with an empty log bootstraps the cluster only once a majority of its
/// initial members answer so; these let a test start one node alone as at a first start.
pub struct EmptyPeers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl EmptyPeers {
    pub async fn stand_in(cluster: &Cluster, ids: &[u64], status: &Status) -> EmptyPeers {
        let mut status = status.clone();
        status.state = "Follower".to_owned();
        status.leader = None;
        status.term = 0;
        status.last_log_index = None;
        status.committed = None;
        EmptyPeers::answering(cluster, ids, &status).await
    }

    /// Stands in for the nodes of `ids`, answering every request with `status` as it is (its
    /// id replaced by each one's): peers that say what a test wants them to.
    pub async fn answering(cluster: &Cluster, ids: &[u64], status: &Status) -> EmptyPeers {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tasks = Vec::new();
        for &id in ids {
            let listener = tokio::net::TcpListener::bind(cluster.addr(id))
                .await
                .expect("the node's address is free");
            let mut status = status.clone();
            status.id = id;
            let body = serde_json::to_vec(&status).expect("status as JSON");
            tasks.push(tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \
                         {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(&body).await;
                }
            }));
        }
        EmptyPeers { tasks }
    }
}

impl Drop for EmptyPeers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
