//! The Raft network: openraft's RPCs to a peer as HTTP requests (see [`crate::api`] for the
//! paths). Messages are openraft's own types as JSON; a snapshot is its rbolt file streamed as
//! the request body.

use crate::api::{HEADER_SNAPSHOT, PATH_APPEND, PATH_SNAPSHOT, PATH_VOTE, SnapshotHeader};
use crate::http::{self, Body, HttpClient, SendError};
use crate::kv::KvConfig;
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
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotOf, VoteOf};
use openraft::{BasicNode, OptionalSend};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::future::Future;
use std::io::{Seek, SeekFrom};
use std::net::IpAddr;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Snapshot files go out in chunks of this many bytes.
const SNAPSHOT_CHUNK_BYTES: usize = 256 << 10;

/// Makes a [`Peer`] for each node openraft talks to.
#[derive(Clone)]
pub struct Network {
    id: u64,
    client: HttpClient,
}

impl Network {
    /// The network of node `id`, whose connections leave from `local` when given.
    pub fn new(id: u64, local: Option<IpAddr>) -> Network {
        Network {
            id,
            client: http::client(local),
        }
    }
}

impl RaftNetworkFactory<KvConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            id: self.id,
            target,
            addr: node.addr.clone(),
            client: self.client.clone(),
        }
    }
}

/// One peer, at the address its membership entry gives.
pub struct Peer {
    id: u64,
    target: u64,
    addr: String,
    client: HttpClient,
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
    /// Posts `message` as JSON to `path` and decodes the peer's `Result` answer. A peer whose
    /// Raft has stopped (openraft's `Fatal`) is as good as unreachable.
    async fn call<Q: Serialize, A: DeserializeOwned>(
        &self,
        path: &str,
        action: RPCTypes,
        message: &Q,
        timeout: Duration,
    ) -> Result<A, RPCError<KvConfig>> {
        let body =
            serde_json::to_vec(message).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let answer = http::send(
            &self.client,
            &self.addr,
            Method::POST,
            path,
            &[("content-type", "application/json".to_owned())],
            http::full(body),
            timeout,
        )
        .await
        .map_err(|e| rpc_error(self.id, self.target, action, e))?;
        decode_answer(self.target, answer.status, &answer.body)
    }
}

/// Decodes a peer's answer to an RPC.
fn decode_answer<A: DeserializeOwned>(
    target: u64,
    status: StatusCode,
    body: &[u8],
) -> Result<A, RPCError<KvConfig>> {
    if status != StatusCode::OK {
        return Err(RPCError::Network(NetworkError::from_string(format!(
            "node {target} answered {status}: {}",
            String::from_utf8_lossy(body)
        ))));
    }
    let answer: Result<A, RaftError<KvConfig>> =
        serde_json::from_slice(body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
    answer.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))
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

    /// Streams the snapshot's rbolt file as the body; the vote and the snapshot's meta go in
    /// a header. Gives up when openraft cancels the replication or the timeout passes.
    async fn full_snapshot(
        &mut self,
        vote: VoteOf<KvConfig>,
        snapshot: SnapshotOf<KvConfig, File>,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<KvConfig>, StreamingError<KvConfig>> {
        let unreachable = |e: &dyn std::error::Error| {
            StreamingError::Unreachable(Unreachable::from_string(e.to_string()))
        };
        let header = SnapshotHeader {
            vote,
            meta: snapshot.meta,
        };
        let header = serde_json::to_string(&header).map_err(|e| unreachable(&e))?;
        let mut file = snapshot.snapshot;
        file.seek(SeekFrom::Start(0)).map_err(|e| unreachable(&e))?;
        let body = file_body(tokio::fs::File::from_std(file));
        let headers = [
            (HEADER_SNAPSHOT, header),
            ("content-type", "application/octet-stream".to_owned()),
        ];
        let send = http::send(
            &self.client,
            &self.addr,
            Method::POST,
            PATH_SNAPSHOT,
            &headers,
            body,
            option.hard_ttl(),
        );
        let answer = tokio::select! {
            answer = send => answer,
            closed = cancel => return Err(StreamingError::Closed(closed)),
        };
        let answer = answer.map_err(|e| {
            match rpc_error(self.id, self.target, RPCTypes::InstallSnapshot, e) {
                RPCError::Timeout(t) => StreamingError::Timeout(t),
                RPCError::Unreachable(u) => StreamingError::Unreachable(u),
                RPCError::Network(n) => StreamingError::Network(n),
                RPCError::RemoteError(r) => StreamingError::Unreachable(Unreachable::new(&r)),
            }
        })?;
        decode_answer(self.target, answer.status, &answer.body).map_err(|e| match e {
            RPCError::Network(n) => StreamingError::Network(n),
            other => StreamingError::Unreachable(Unreachable::new(&other)),
        })
    }
}

/// A body that reads `file` in chunks of [`SNAPSHOT_CHUNK_BYTES`].
fn file_body(file: tokio::fs::File) -> Body {
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
