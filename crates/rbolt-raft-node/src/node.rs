//! Starting a node: its storage, its Raft, its server, and the first start of a cluster.

use crate::kv::{KvConfig, KvMachine};
use crate::network::Network;
use crate::server::{self, App};
use anyhow::{Context, bail};
use openraft::error::{InitializeError, RaftError};
use openraft::{BasicNode, Raft};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file in a node's data directory that records its id, so that a directory is never
/// served under another id.
pub const NODE_ID_FILE: &str = "node-id";

/// What a node needs to start.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Its id, unique in the cluster.
    pub id: u64,
    /// Its directory: the log, the state, the snapshot and [`NODE_ID_FILE`].
    pub data_dir: PathBuf,
    /// Where it listens for peers and clients. Its connections to peers leave from this
    /// address's IP (unless it is unspecified, `0.0.0.0`).
    pub listen: SocketAddr,
    /// The initial members of the cluster, this node included, by id: `host:port` each. A node
    /// that is among them and has never been initialized initializes the cluster with exactly
    /// this membership (every initial member may do so: the entries are identical). Empty for a
    /// node that joins an existing cluster as a learner.
    pub peers: BTreeMap<u64, String>,
    /// Raft's timing and snapshot policy.
    pub raft: RaftTiming,
}

/// Raft's timing and snapshot policy for a node.
#[derive(Clone, Copy, Debug)]
pub struct RaftTiming {
    /// The leader's heartbeat, in milliseconds.
    pub heartbeat_ms: u64,
    /// The shortest election timeout, in milliseconds; the longest is twice this.
    pub election_timeout_ms: u64,
    /// A snapshot is built every this many applied entries (the log before it is then purged).
    pub snapshot_every: u64,
    /// Entries kept in the log behind the last snapshot, for followers that lag a little.
    pub logs_to_keep: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming {
            heartbeat_ms: 100,
            election_timeout_ms: 500,
            snapshot_every: 10_000,
            logs_to_keep: 1000,
        }
    }
}

impl RaftTiming {
    /// The openraft configuration.
    pub fn config(&self) -> anyhow::Result<Arc<openraft::Config>> {
        let config = openraft::Config {
            cluster_name: "rbolt-raft-node".into(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_timeout_ms,
            election_timeout_max: self.election_timeout_ms * 2,
            // A snapshot is a whole rbolt file sent in one request: allow it time.
            install_snapshot_timeout: 60_000,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.logs_to_keep,
            ..Default::default()
        };
        Ok(Arc::new(config.validate().context("Raft configuration")?))
    }
}

/// Records `id` in `dir` on first start, and refuses a directory recorded under another id.
/// The record is written to a temporary file, synced, renamed into place and the directory
/// synced, so a crash leaves no record or a whole one.
fn check_node_id(dir: &Path, id: u64) -> anyhow::Result<()> {
    let path = dir.join(NODE_ID_FILE);
    match fs::read_to_string(&path) {
        Ok(found) => {
            let found: u64 = found
                .trim()
                .parse()
                .with_context(|| format!("{} does not hold a node id", path.display()))?;
            if found != id {
                bail!("{} belongs to node {found}, not node {id}", dir.display());
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let tmp = dir.join(format!("{NODE_ID_FILE}{}", rbolt_raft::TMP_SUFFIX));
            let mut file = File::create(&tmp).with_context(|| tmp.display().to_string())?;
            writeln!(file, "{id}")?;
            file.sync_all()?;
            drop(file);
            fs::rename(&tmp, &path)?;
            File::open(dir)?.sync_all()?;
            Ok(())
        }
        Err(e) => Err(e).with_context(|| path.display().to_string()),
    }
}

/// Runs node `options` until `shutdown` completes, then stops Raft and returns.
pub async fn run(
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let NodeOptions {
        id,
        data_dir,
        listen,
        peers,
        raft: timing,
    } = options;
    if !peers.is_empty() && !peers.contains_key(&id) {
        bail!("--peers lists the initial members; it must include this node ({id})");
    }
    let config = timing.config()?;
    let dir = data_dir.clone();
    let (log, state) = tokio::task::spawn_blocking(move || {
        let opened = rbolt_raft::open::<KvConfig, _>(&dir, KvMachine)?;
        check_node_id(&dir, id)?;
        anyhow::Ok(opened)
    })
    .await?
    .with_context(|| format!("opening {}", data_dir.display()))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let local = (!listen.ip().is_unspecified()).then(|| listen.ip());
    let reader = log.reader();
    let raft = Raft::new(id, config, Network::new(id, local), log, state.clone())
        .await
        .context("starting Raft")?;
    let app = Arc::new(App::new(id, raft.clone(), state, reader, data_dir.clone()));
    let serving = tokio::spawn(server::serve(listener, Arc::clone(&app), shutdown));
    if !peers.is_empty() && !raft.is_initialized().await? {
        let members: BTreeMap<u64, BasicNode> = peers
            .iter()
            .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
            .collect();
        match raft.initialize(members).await {
            // Another member's initialization reached this node first.
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
            Err(e) => return Err(e).context("initializing the cluster"),
        }
    }
    eprintln!(
        "rbolt-raft-node {id}: serving on {listen}, data in {}",
        data_dir.display()
    );
    serving.await?;
    raft.shutdown().await?;
    eprintln!("rbolt-raft-node {id}: stopped");
    Ok(())
}

/// Parses `--peers`: `ID=HOST:PORT` pairs separated by commas.
pub fn parse_peers(text: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut peers = BTreeMap::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((id, addr)) = pair.split_once('=') else {
            bail!("peer {pair:?} is not ID=HOST:PORT");
        };
        let id: u64 = id
            .trim()
            .parse()
            .with_context(|| format!("peer id {id:?}"))?;
        let addr = addr.trim();
        if addr.is_empty() || !addr.is_ascii() || addr.contains('/') {
            bail!("peer address {addr:?} is not HOST:PORT");
        }
        if peers.insert(id, addr.to_owned()).is_some() {
            bail!("peer {id} is listed twice");
        }
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_and_bad_ones_are_refused() {
        let peers = parse_peers("1=127.0.0.1:7001, 2=127.0.0.1:7002,3=h:1").expect("parses");
        assert_eq!(peers.len(), 3);
        assert_eq!(peers[&2], "127.0.0.1:7002");
        for bad in ["1", "x=a:1", "1=", "1=a:1,1=b:2", "1=http://a:1"] {
            assert!(parse_peers(bad).is_err(), "{bad} is refused");
        }
    }

    #[test]
    fn a_directory_keeps_its_node_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        check_node_id(dir.path(), 7).expect("first");
        check_node_id(dir.path(), 7).expect("same id");
        let error = check_node_id(dir.path(), 8).expect_err("another id");
        assert!(error.to_string().contains("belongs to node 7"), "{error}");
    }
}
