//! A replicated key/value store on rbolt-raft: the application's types, its [`Machine`], an
//! in-process network, and node start/stop. `main.rs` runs it; the crate's cluster test uses
//! the same module.

#![allow(
    dead_code,
    reason = "each user (the example, the tests) uses a different part, so `expect` would be unfulfilled in some"
)]

use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, v2::RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{EntryOf, SnapshotOf, VoteOf};
use openraft::type_config::async_runtime::WatchReceiver;
use openraft::{BasicNode, EntryPayload, OptionalSend, Raft};
use rbolt_raft::Machine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A client's request: the log entry's payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Sets `key` to `value`.
    Set { key: String, value: String },
    /// Removes `key`.
    Delete { key: String },
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Set { key, value } => write!(f, "set {key} = {value}"),
            Request::Delete { key } => write!(f, "delete {key}"),
        }
    }
}

/// What a request did: the value the key held before.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub previous: Option<String>,
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "previous {:?}", self.previous)
    }
}

openraft::declare_raft_types!(
    /// The example's types; the rest are openraft's defaults (u64 node ids, tokio).
    pub KvConfig: D = Request, R = Response,
);

/// The bucket the example keeps its keys in.
pub const KV_BUCKET: &[u8] = b"kv";

/// The example's state machine logic: requests become puts and deletes in [`KV_BUCKET`].
#[derive(Debug, Default)]
pub struct KvMachine;

impl Machine<KvConfig> for KvMachine {
    fn apply(
        &self,
        tx: &mut rbolt::WriteTx<'_>,
        entry: &EntryOf<KvConfig>,
    ) -> rbolt_raft::Result<Response> {
        let EntryPayload::Normal(request) = &entry.payload else {
            return Ok(Response::default());
        };
        let mut kv = tx.create_bucket_if_not_exists(KV_BUCKET)?;
        let (key, value) = match request {
            Request::Set { key, value } => (key, Some(value)),
            Request::Delete { key } => (key, None),
        };
        let previous = kv
            .get(key.as_bytes())?
            .map(|v| String::from_utf8_lossy(v).into_owned());
        match value {
            Some(value) => kv.put(key.as_bytes(), value.as_bytes())?,
            None => {
                kv.delete(key.as_bytes())?;
            }
        }
        Ok(Response { previous })
    }
}

pub type KvStateMachine = rbolt_raft::StateMachine<KvConfig, KvMachine>;
pub type KvLogStore = rbolt_raft::LogStore<KvConfig>;
pub type KvRaft = Raft<KvConfig, KvStateMachine>;

/// Every key and value of a replica's state machine.
pub fn dump(state: &KvStateMachine) -> rbolt_raft::Result<BTreeMap<String, String>> {
    state.view(|tx| {
        let mut all = BTreeMap::new();
        if let Some(kv) = tx.bucket(KV_BUCKET)? {
            for item in kv.iter() {
                let item = item?;
                all.insert(
                    String::from_utf8_lossy(item.key()).into_owned(),
                    String::from_utf8_lossy(item.value().unwrap_or_default()).into_owned(),
                );
            }
        }
        Ok(all)
    })
}

/// The in-process network: every running node by id. A node that is not in it is unreachable,
/// as a stopped machine would be.
#[derive(Clone, Default)]
pub struct Router {
    nodes: Arc<Mutex<BTreeMap<u64, KvRaft>>>,
}

impl Router {
    fn nodes(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, KvRaft>> {
        self.nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn add(&self, id: u64, raft: KvRaft) {
        self.nodes().insert(id, raft);
    }

    pub fn remove(&self, id: u64) -> Option<KvRaft> {
        self.nodes().remove(&id)
    }

    pub fn get(&self, id: u64) -> Option<KvRaft> {
        self.nodes().get(&id).cloned()
    }

    fn reach(&self, id: u64) -> Result<KvRaft, Unreachable<KvConfig>> {
        self.get(id).ok_or_else(|| {
            Unreachable::new(&std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!("node {id} is down"),
            ))
        })
    }
}

/// A connection from one node to `target`.
pub struct Connection {
    router: Router,
    target: u64,
}

fn unreachable(error: &impl std::error::Error) -> Unreachable<KvConfig> {
    Unreachable::new(&std::io::Error::other(error.to_string()))
}

impl RaftNetworkFactory<KvConfig> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection {
        Connection {
            router: self.clone(),
            target,
        }
    }
}

impl RaftNetworkV2<KvConfig> for Connection {
    type SnapshotData = File;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<KvConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<KvConfig>, RPCError<KvConfig>> {
        let raft = self.router.reach(self.target)?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(unreachable(&e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<KvConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<KvConfig>, RPCError<KvConfig>> {
        let raft = self.router.reach(self.target)?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(unreachable(&e)))
    }

    /// A snapshot is an rbolt file; in process the receiver reads the sender's file handle.
    /// Over a real network the receiver would write the bytes into a file of its own and hand
    /// that to `install_full_snapshot`.
    async fn full_snapshot(
        &mut self,
        vote: VoteOf<KvConfig>,
        snapshot: SnapshotOf<KvConfig, File>,
        _cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<KvConfig>, StreamingError<KvConfig>> {
        let raft = self.router.reach(self.target)?;
        raft.install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| StreamingError::Unreachable(unreachable(&e)))
    }
}

/// A running node: its Raft handle and a handle on its state machine for reads.
pub struct Node {
    pub id: u64,
    pub raft: KvRaft,
    pub state: KvStateMachine,
}

/// Raft timing for an in-process cluster: fast elections, and snapshots (followed by log
/// purges) every `snapshot_every` entries so that a lagging node must catch up by snapshot.
pub fn config(snapshot_every: u64) -> Arc<openraft::Config> {
    let config = openraft::Config {
        cluster_name: "rbolt-raft-example".into(),
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(snapshot_every),
        max_in_snapshot_log_to_keep: 0,
        purge_batch_size: 1,
        ..Default::default()
    };
    Arc::new(
        config
            .validate()
            .expect("the example's Raft config is valid"),
    )
}

/// The membership of a new cluster of nodes `ids` (in process, nodes need no address).
pub fn members(ids: impl IntoIterator<Item = u64>) -> BTreeMap<u64, BasicNode> {
    ids.into_iter()
        .map(|id| (id, BasicNode::default()))
        .collect()
}

/// Opens node `id`'s storage in `dir` (creating it, or restarting from what is there) and
/// starts it on `router`.
pub async fn start(
    id: u64,
    dir: &Path,
    router: &Router,
    config: Arc<openraft::Config>,
) -> Result<Node, Box<dyn std::error::Error + Send + Sync>> {
    let (log, state) = rbolt_raft::open::<KvConfig, _>(dir, KvMachine)?;
    let raft = Raft::new(id, config, router.clone(), log, state.clone()).await?;
    router.add(id, raft.clone());
    Ok(Node { id, raft, state })
}

/// Stops `node` as a crashed machine would look to the others: unreachable at once, then shut
/// down, its files closed.
pub async fn stop(router: &Router, node: Node) {
    router.remove(node.id);
    let _ = node.raft.shutdown().await;
}

/// A running node that sees itself as the leader (the last one found, should two briefly
/// overlap across an election).
pub fn leader(router: &Router) -> Option<u64> {
    let nodes: Vec<KvRaft> = router.nodes().values().cloned().collect();
    let mut leader = None;
    for raft in nodes {
        let metrics = raft.metrics().borrow_watched().clone();
        if metrics.current_leader == Some(metrics.id)
            && metrics.state == openraft::ServerState::Leader
        {
            leader = Some(metrics.id);
        }
    }
    leader
}

/// Proposes `request` on the current leader, retrying through elections until `deadline`.
/// Returns the response once the entry is committed and applied on the leader.
pub async fn write(
    router: &Router,
    request: Request,
    deadline: tokio::time::Instant,
) -> Result<Response, String> {
    loop {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("no leader accepted {request:?} in time"));
        }
        let Some(raft) = leader(router).and_then(|id| router.get(id)) else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        match tokio::time::timeout(Duration::from_secs(2), raft.client_write(request.clone())).await
        {
            Ok(Ok(response)) => return Ok(response.data),
            // Not the leader any more, shut down, or too slow: ask again.
            Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}
