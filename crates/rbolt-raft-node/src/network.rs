//! The Raft network: openraft's RPCs to a peer as HTTP requests (see [`crate::api`] for the
//! paths). Messages are openraft's own types in binary frames ([`crate::wire`]) that carry the
//! cluster id and the sender; a snapshot is its rbolt file in chunks that resume, checked end
//! to end ([`crate::snapshot_transfer`]).
//!
//! A peer's refusals are answered here: a peer of another cluster (`409`), a peer that says
//! this node was removed (`410` naming this node, see [`Ctx::peer_says_removed`]; a `410`
//! naming another node, the peer itself, is only logged), a peer whose limit is
//! below this node's entries (`413`); each is logged, at most every [`WARN_EVERY`] per peer.
//!
//! [`WARN_EVERY`]: crate::context::WARN_EVERY

use crate::api::{
    ChunkReply, HEADER_CLUSTER, HEADER_FROM, HEADER_MEMBERSHIP_INDEX, HEADER_PEER_SECRET,
    HEADER_REMOVED_NODE, HEADER_SNAPSHOT, HEADER_SNAPSHOT_CHUNK, PATH_APPEND, PATH_SNAPSHOT,
    PATH_SNAPSHOT_CHUNK, PATH_TRANSFER, PATH_VOTE, SnapshotHeader,
};
use crate::context::Ctx;
use crate::http::{self, Body, HttpClient, SendError};
use crate::kv::KvConfig;
use crate::limits::SMALL_RPC_BYTES_MAX;
use crate::snapshot_transfer::Outgoing;
use crate::wire;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Method, StatusCode};
use openraft::error::{
    NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RPCTypes, RaftNetworkFactory, v2::RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotOf, VoteOf};
use openraft::{BasicNode, OptionalSend};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Snapshot files go out in chunks of this many bytes.
const SNAPSHOT_CHUNK_BYTES: usize = 256 << 10;

/// Makes a [`Peer`] for each node openraft talks to.
#[derive(Clone)]
pub struct Network {
    ctx: Arc<Ctx>,
    client: HttpClient,
    peer_secret: Option<Arc<str>>,
}

impl Network {
    /// The network of the node of `ctx`, over `client`, sending `peer_secret` (if the cluster
    /// has one) with every request.
    pub fn new(ctx: Arc<Ctx>, client: HttpClient, peer_secret: Option<String>) -> Network {
        Network {
            ctx,
            client,
            peer_secret: peer_secret.map(Arc::from),
        }
    }
}

impl RaftNetworkFactory<KvConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            ctx: Arc::clone(&self.ctx),
            target,
            addr: node.addr.clone(),
            client: self.client.clone(),
            peer_secret: self.peer_secret.clone(),
        }
    }
}

/// One peer, at the address its membership entry gives.
pub struct Peer {
    ctx: Arc<Ctx>,
    target: u64,
    addr: String,
    client: HttpClient,
    peer_secret: Option<Arc<str>>,
}

/// An RPC's failure as openraft wants it: a peer it cannot reach is backed off, a timeout or
/// a broken exchange is retried.
fn rpc_error(id: u64, target: u64, action: RPCTypes, error: SendError) -> RPCError<KvConfig> {
    match error {
        SendError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&error)),
        SendError::Timeout { timeout, .. } => RPCError::Timeout(Timeout {
            action,
            id,
            target,
            timeout,
        }),
        SendError::Failed { .. } => RPCError::Network(NetworkError::new(&error)),
    }
}

impl Peer {
    /// The peer secret's header, when the cluster has one.
    fn secret_header(&self) -> Option<(&'static str, String)> {
        self.peer_secret
            .as_deref()
            .map(|secret| (HEADER_PEER_SECRET, secret.to_owned()))
    }

    /// Posts `message` in a frame to `path` and decodes the peer's `Result` answer. A peer
    /// whose Raft has stopped (openraft's `Fatal`) is as good as unreachable.
    async fn call<Q: Serialize, A: DeserializeOwned>(
        &self,
        path: &str,
        action: RPCTypes,
        message: &Q,
        timeout: Duration,
    ) -> Result<A, RPCError<KvConfig>> {
        let body = wire::encode(&self.ctx.cluster(), self.ctx.id, message)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let body_bytes = body.len();
        let mut headers = vec![("content-type", "application/octet-stream".to_owned())];
        headers.extend(self.secret_header());
        let answer = http::send_limited(
            &self.client,
            &self.addr,
            Method::POST,
            path,
            &headers,
            http::full(body),
            timeout,
            SMALL_RPC_BYTES_MAX,
        )
        .await
        .map_err(|e| {
            if matches!(e, SendError::Unreachable { .. })
                && self.ctx.warn_now(&format!("unreachable {}", self.target))
            {
                tracing::warn!(peer = self.target, addr = %self.addr, error = %e, "peer unreachable");
            }
            rpc_error(self.ctx.id, self.target, action, e)
        })?;
        self.decode_answer(&answer, body_bytes)
    }

    /// Decodes a peer's answer to an RPC, acting on its refusals.
    fn decode_answer<A: DeserializeOwned>(
        &self,
        answer: &http::Answer,
        sent_bytes: usize,
    ) -> Result<A, RPCError<KvConfig>> {
        let text = String::from_utf8_lossy(&answer.body);
        let refused = |why: String| RPCError::Unreachable(Unreachable::from_string(why));
        match answer.status {
            StatusCode::OK => {}
            StatusCode::CONFLICT => {
                if self.ctx.warn_now(&format!("cluster {}", self.target)) {
                    tracing::error!(peer = self.target, addr = %self.addr, answer = %text, "peer refuses this node: another cluster");
                }
                return Err(refused(format!("node {} refuses: {text}", self.target)));
            }
            StatusCode::GONE => {
                let number = |name: &str| {
                    answer
                        .headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok())
                };
                let (index, removed) =
                    (number(HEADER_MEMBERSHIP_INDEX), number(HEADER_REMOVED_NODE));
                // Only an answer about this node says anything of it: a peer that was removed
                // itself answers `410` naming itself, whatever this node is.
                match (index, removed) {
                    (Some(index), Some(removed)) if removed == self.ctx.id => {
                        self.ctx.peer_says_removed(index, self.target);
                    }
                    _ => {
                        if self.ctx.warn_now(&format!("gone {}", self.target)) {
                            tracing::warn!(peer = self.target, addr = %self.addr, removed, answer = %text, "peer is no longer a member");
                        }
                    }
                }
                return Err(refused(format!("node {} answers: {text}", self.target)));
            }
            StatusCode::PAYLOAD_TOO_LARGE => {
                if self.ctx.warn_now(&format!("too large {}", self.target)) {
                    tracing::error!(peer = self.target, sent_bytes, limit_here = self.ctx.limits.append_bytes_max(), answer = %text, "peer refuses a request as too large: its --max-request-bytes is below this node's; give every node the same");
                }
                return Err(RPCError::Network(NetworkError::from_string(format!(
                    "node {} refuses {sent_bytes} bytes: {text}",
                    self.target
                ))));
            }
            status => {
                if self.ctx.warn_now(&format!("status {}", self.target)) {
                    tracing::warn!(peer = self.target, %status, answer = %text, "peer refused an RPC");
                }
                return Err(RPCError::Network(NetworkError::from_string(format!(
                    "node {} answered {status}: {text}",
                    self.target
                ))));
            }
        }
        let (_, answer): (_, Result<A, RaftError<KvConfig>>) =
            wire::decode(&answer.body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
    }
}

impl RaftNetworkV2<KvConfig> for Peer {
    type SnapshotData = File;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<KvConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<KvConfig>, RPCError<KvConfig>> {
        self.call(
            PATH_APPEND,
            RPCTypes::AppendEntries,
            &rpc,
            option.hard_ttl(),
        )
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<KvConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<KvConfig>, RPCError<KvConfig>> {
        self.call(PATH_VOTE, RPCTypes::Vote, &rpc, option.hard_ttl())
            .await
    }

    async fn transfer_leader(
        &mut self,
        rpc: TransferLeaderRequest<KvConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<KvConfig>, RPCError<KvConfig>> {
        self.call(
            PATH_TRANSFER,
            RPCTypes::TransferLeader,
            &rpc,
            option.hard_ttl(),
        )
        .await
    }

    /// Sends the snapshot in chunks, then asks the peer to install it (see
    /// [`crate::snapshot_transfer`]). Each request has the timeout openraft gives
    /// (`install_snapshot_timeout`), the install one more second per 10 MiB of the file (the
    /// peer checks and copies it); nothing bounds the whole. Gives up when openraft cancels
    /// the replication; an attempt that fails part way leaves the peer holding what it
    /// received, and the next goes on from there.
    async fn full_snapshot(
        &mut self,
        vote: VoteOf<KvConfig>,
        snapshot: SnapshotOf<KvConfig, File>,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<KvConfig>, StreamingError<KvConfig>> {
        tokio::select! {
            answer = self.send_snapshot(vote, snapshot, option.hard_ttl()) => answer,
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}

/// An RPC's failure as openraft's snapshot streaming wants it.
fn streaming(error: RPCError<KvConfig>) -> StreamingError<KvConfig> {
    match error {
        RPCError::Timeout(t) => StreamingError::Timeout(t),
        RPCError::Unreachable(u) => StreamingError::Unreachable(u),
        RPCError::Network(n) => StreamingError::Network(n),
        RPCError::RemoteError(r) => StreamingError::Unreachable(Unreachable::new(&r)),
    }
}

impl Peer {
    /// Posts a snapshot request to `path` with `headers` besides the sender's, and answers it
    /// unless the peer refused it (then the refusal as an error, acted on as for any RPC).
    async fn snapshot_request(
        &self,
        path: &str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<http::Answer, StreamingError<KvConfig>> {
        let mut all = vec![
            (HEADER_CLUSTER, self.ctx.cluster()),
            (HEADER_FROM, self.ctx.id.to_string()),
            ("content-type", "application/octet-stream".to_owned()),
        ];
        all.extend(headers);
        all.extend(self.secret_header());
        let sent = body.len();
        let answer = http::send_limited(
            &self.client,
            &self.addr,
            Method::POST,
            path,
            &all,
            http::full(body),
            timeout,
            SMALL_RPC_BYTES_MAX,
        )
        .await
        .map_err(|e| {
            streaming(rpc_error(
                self.ctx.id,
                self.target,
                RPCTypes::InstallSnapshot,
                e,
            ))
        })?;
        if answer.status != StatusCode::OK {
            // Not a frame: decoding it acts on the refusal and makes the error.
            return Err(match self.decode_answer::<()>(&answer, sent) {
                Err(RPCError::Network(n)) => StreamingError::Network(n),
                Err(other) => StreamingError::Unreachable(Unreachable::new(&other)),
                Ok(()) => StreamingError::Network(NetworkError::from_string("no answer")),
            });
        }
        Ok(answer)
    }

    /// Sends `bytes` at `offset` of `snapshot`; answers what the peer holds of it.
    async fn send_chunk(
        &self,
        snapshot: &Outgoing,
        offset: u64,
        bytes: Vec<u8>,
        timeout: Duration,
    ) -> Result<u64, StreamingError<KvConfig>> {
        let chunk = serde_json::to_string(&snapshot.chunk(offset))
            .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
        let answer = self
            .snapshot_request(
                PATH_SNAPSHOT_CHUNK,
                vec![(HEADER_SNAPSHOT_CHUNK, chunk)],
                bytes,
                timeout,
            )
            .await?;
        let reply: ChunkReply = serde_json::from_slice(&answer.body)
            .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
        if reply.held > snapshot.length {
            return Err(StreamingError::Network(NetworkError::from_string(format!(
                "node {} holds {} bytes of a snapshot of {}",
                self.target, reply.held, snapshot.length
            ))));
        }
        Ok(reply.held)
    }

    /// The transfer [`RaftNetworkV2::full_snapshot`] runs.
    async fn send_snapshot(
        &self,
        vote: VoteOf<KvConfig>,
        snapshot: SnapshotOf<KvConfig, File>,
        timeout: Duration,
    ) -> Result<SnapshotResponse<KvConfig>, StreamingError<KvConfig>> {
        let network = |e: &dyn std::error::Error| {
            StreamingError::Network(NetworkError::from_string(e.to_string()))
        };
        let meta = snapshot.meta;
        let outgoing = Outgoing::new(snapshot.snapshot)
            .await
            .map_err(|e| network(&e))?;
        // An empty chunk asks what the peer holds of this snapshot already.
        let mut held = self.send_chunk(&outgoing, 0, Vec::new(), timeout).await?;
        if held > 0 {
            tracing::info!(
                peer = self.target,
                held,
                length = outgoing.length,
                "snapshot transfer resumed where the peer's copy ends"
            );
        }
        while held < outgoing.length {
            let bytes = outgoing
                .read(held, self.ctx.limits.snapshot_chunk_bytes)
                .await
                .map_err(|e| network(&e))?;
            if bytes.is_empty() {
                return Err(StreamingError::Network(NetworkError::from_string(
                    "the snapshot file is shorter than it was",
                )));
            }
            held = self.send_chunk(&outgoing, held, bytes, timeout).await?;
        }
        let header = SnapshotHeader {
            vote,
            meta,
            length: outgoing.length,
            digest: outgoing.digest.clone(),
        };
        let header = serde_json::to_string(&header).map_err(|e| network(&e))?;
        let install_timeout = timeout + Duration::from_secs(outgoing.length / (10 << 20));
        let answer = self
            .snapshot_request(
                PATH_SNAPSHOT,
                vec![(HEADER_SNAPSHOT, header)],
                Vec::new(),
                install_timeout,
            )
            .await?;
        self.decode_answer(&answer, 0).map_err(|e| match e {
            RPCError::Network(n) => StreamingError::Network(n),
            other => StreamingError::Unreachable(Unreachable::new(&other)),
        })
    }
}

/// A body that reads `file` in chunks of [`SNAPSHOT_CHUNK_BYTES`].
pub fn file_body(file: tokio::fs::File) -> Body {
    let chunks = futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = BytesMut::with_capacity(SNAPSHOT_CHUNK_BYTES);
        match file.read_buf(&mut buf).await {
            Ok(0) => None,
            Ok(_) => Some((Ok(Frame::data(Bytes::from(buf))), Some(file))),
            Err(error) => Some((Err(error), None)),
        }
    });
    BodyExt::boxed_unsync(StreamBody::new(chunks.boxed()))
}
