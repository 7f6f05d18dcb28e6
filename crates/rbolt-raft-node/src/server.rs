//! The node's HTTP server: the Raft RPCs its peers send and the client API (see
//! [`crate::api`] for the paths). A request for the leader that reaches a follower is
//! redirected there with `307 Temporary Redirect`, which keeps the method and the body, so
//! `curl -L` and [`crate::client::Client`] follow it.

use crate::api::{
    AddLearner, ChangeMembers, ErrorReply, HEADER_SNAPSHOT, MembershipReply, PATH_APPEND, PATH_KV,
    PATH_LEARNERS, PATH_MEMBERS, PATH_SNAPSHOT, PATH_STATUS, PATH_VOTE, SnapshotHeader, Status,
    WriteReply,
};
use crate::http::read_body;
use crate::kv::{self, KvConfig, KvRaft, KvStateMachine, Request};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, LOCATION};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use openraft::error::{ClientWriteError, ForwardToLeader, LinearizableReadError, RaftError};
use openraft::type_config::alias::SnapshotOf;
use openraft::type_config::async_runtime::WatchReceiver;
use openraft::{BasicNode, ReadPolicy};
use percent_encoding::percent_decode_str;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::future::Future;
use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Request bodies other than snapshots larger than this are refused: an append of
/// openraft's default 300 entries of large values stays far below it.
pub const REQUEST_BYTES_MAX: usize = 64 << 20;

/// Everything a request handler needs.
pub struct App {
    /// This node's id.
    pub id: u64,
    /// Its Raft.
    pub raft: KvRaft,
    /// A handle on its state machine, for reads.
    pub state: KvStateMachine,
    /// A reader of its log, for the counters in [`Status`].
    pub log: rbolt_raft::LogReader<KvConfig>,
    /// Its data directory (received snapshots are written there first).
    pub dir: PathBuf,
    /// Numbers received snapshot files.
    received_seq: AtomicU64,
}

impl App {
    /// The handler state of a node.
    pub fn new(
        id: u64,
        raft: KvRaft,
        state: KvStateMachine,
        log: rbolt_raft::LogReader<KvConfig>,
        dir: PathBuf,
    ) -> App {
        App {
            id,
            raft,
            state,
            log,
            dir,
            received_seq: AtomicU64::new(0),
        }
    }
}

type Answer = hyper::Response<Full<Bytes>>;

/// Serves HTTP on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return,
        };
        let Ok((stream, _)) = accepted else {
            // Out of descriptors or a connection reset before accept: the next one may work.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let app = Arc::clone(&app);
                async move { Ok::<_, Infallible>(route(&app, request).await) }
            });
            // A peer or client that goes away mid-request ends only its own connection.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Answer {
    hyper::Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(body.into()))
        .unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
}

fn json<T: Serialize>(status: StatusCode, value: &T) -> Answer {
    match serde_json::to_vec(value) {
        Ok(body) => answer(status, "application/json", body),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding: {e}")),
    }
}

fn error(status: StatusCode, error: impl Into<String>) -> Answer {
    let reply = ErrorReply {
        error: error.into(),
    };
    let body = serde_json::to_vec(&reply).unwrap_or_default();
    answer(status, "application/json", body)
}

/// Where a request for the leader goes: `307` to the leader's address with the same path and
/// query, or `503` while no leader is known.
fn forward(to: &ForwardToLeader<KvConfig>, path_and_query: &str) -> Answer {
    match &to.leader_node {
        Some(node) => hyper::Response::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header(LOCATION, format!("http://{}{path_and_query}", node.addr))
            .body(Full::new(Bytes::new()))
            .unwrap_or_else(|_| error(StatusCode::SERVICE_UNAVAILABLE, "bad leader address")),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no leader is known (an election is under way); retry",
        ),
    }
}

/// How a read is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// The leader confirms it still leads (ReadIndex) and waits until it has applied up to
    /// its commit index: the read sees every write acknowledged before it began.
    Linearizable,
    /// This node's state as it is: fast, possibly stale.
    Local,
}

fn read_mode(query: Option<&str>) -> Result<Read, String> {
    let mut mode = Read::Linearizable;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair {
            "read=local" => mode = Read::Local,
            "read=linearizable" => mode = Read::Linearizable,
            other => return Err(format!("unknown query parameter {other:?}")),
        }
    }
    Ok(mode)
}

async fn route(app: &App, request: hyper::Request<Incoming>) -> Answer {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |pq| pq.as_str().to_owned());
    let query = request.uri().query().map(str::to_owned);
    match (&method, path.as_str()) {
        (&Method::POST, PATH_APPEND) => {
            rpc(
                request,
                |rpc| async move { app.raft.append_entries(rpc).await },
            )
            .await
        }
        (&Method::POST, PATH_VOTE) => {
            rpc(request, |rpc| async move { app.raft.vote(rpc).await }).await
        }
        (&Method::POST, PATH_SNAPSHOT) => receive_snapshot(app, request).await,
        (&Method::GET, PATH_STATUS) => json(StatusCode::OK, &status(app)),
        (&Method::POST, PATH_LEARNERS) => add_learner(app, request, &path_and_query).await,
        (&Method::POST, PATH_MEMBERS) => change_members(app, request, &path_and_query).await,
        (&Method::GET, PATH_KV) => match read_mode(query.as_deref()) {
            Ok(mode) => dump(app, mode, &path_and_query).await,
            Err(e) => error(StatusCode::BAD_REQUEST, e),
        },
        (_, p) if p.starts_with(PATH_KV) && p[PATH_KV.len()..].starts_with('/') => {
            let key = match percent_decode_str(&p[PATH_KV.len() + 1..]).decode_utf8() {
                Ok(key) if !key.is_empty() => key.into_owned(),
                Ok(_) => return error(StatusCode::BAD_REQUEST, "empty key"),
                Err(_) => return error(StatusCode::BAD_REQUEST, "the key is not UTF-8"),
            };
            match method {
                Method::GET => match read_mode(query.as_deref()) {
                    Ok(mode) => get(app, &key, mode, &path_and_query).await,
                    Err(e) => error(StatusCode::BAD_REQUEST, e),
                },
                Method::PUT => {
                    let value = match read_body(request.into_body(), REQUEST_BYTES_MAX).await {
                        Ok(body) => match String::from_utf8(body.to_vec()) {
                            Ok(value) => value,
                            Err(_) => {
                                return error(StatusCode::BAD_REQUEST, "the value is not UTF-8");
                            }
                        },
                        Err(e) => return error(StatusCode::BAD_REQUEST, e),
                    };
                    write(app, Request::Put { key, value }, &path_and_query).await
                }
                Method::DELETE => write(app, Request::Delete { key }, &path_and_query).await,
                _ => error(StatusCode::METHOD_NOT_ALLOWED, "GET, PUT or DELETE"),
            }
        }
        _ => error(
            StatusCode::NOT_FOUND,
            format!("no route for {method} {path}"),
        ),
    }
}

/// Decodes a Raft RPC, runs it, and answers openraft's `Result` as JSON.
async fn rpc<Q, A, F, Fut>(request: hyper::Request<Incoming>, call: F) -> Answer
where
    Q: DeserializeOwned,
    A: Serialize,
    F: FnOnce(Q) -> Fut,
    Fut: Future<Output = Result<A, RaftError<KvConfig>>>,
{
    let message: Q = match decode_json(request).await {
        Ok(message) => message,
        Err(answer) => return answer,
    };
    json(StatusCode::OK, &call(message).await)
}

async fn decode_json<T: DeserializeOwned>(request: hyper::Request<Incoming>) -> Result<T, Answer> {
    let body = read_body(request.into_body(), REQUEST_BYTES_MAX)
        .await
        .map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    serde_json::from_slice(&body).map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))
}

/// Writes the streamed snapshot file into the data directory, then hands it to openraft,
/// which installs it through the state machine (verify, then rename into place).
async fn receive_snapshot(app: &App, request: hyper::Request<Incoming>) -> Answer {
    let header = request
        .headers()
        .get(HEADER_SNAPSHOT)
        .and_then(|v| v.to_str().ok())
        .map(serde_json::from_str::<SnapshotHeader>);
    let header = match header {
        Some(Ok(header)) => header,
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, format!("snapshot header: {e}")),
        None => return error(StatusCode::BAD_REQUEST, "no snapshot header"),
    };
    let seq = app.received_seq.fetch_add(1, Ordering::Relaxed);
    // The name ends in the state machine's temporary suffix: a crash leaves it for the next
    // start to delete.
    let path = app
        .dir
        .join(format!("received-{seq}{}", rbolt_raft::TMP_SUFFIX));
    let received = async {
        let mut file = tokio::fs::File::create_new(&path).await?;
        let mut body = request.into_body();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(std::io::Error::other)?;
            if let Some(data) = frame.data_ref() {
                file.write_all(data).await?;
            }
        }
        file.flush().await?;
        let mut file = file.into_std().await;
        file.seek(SeekFrom::Start(0))?;
        Ok::<_, std::io::Error>(file)
    }
    .await;
    let file = match received {
        Ok(file) => file,
        Err(e) => {
            let _ = tokio::fs::remove_file(&path).await;
            return error(
                StatusCode::BAD_REQUEST,
                format!("receiving the snapshot: {e}"),
            );
        }
    };
    let snapshot = SnapshotOf::<KvConfig, std::fs::File> {
        meta: header.meta,
        snapshot: file,
    };
    let installed = app
        .raft
        .install_full_snapshot(header.vote, snapshot)
        .await
        .map_err(RaftError::<KvConfig>::Fatal);
    // The state machine copied what it installed; the received file has served.
    let _ = tokio::fs::remove_file(&path).await;
    json(StatusCode::OK, &installed)
}

/// This node's [`Status`].
pub fn status(app: &App) -> Status {
    let metrics = app.raft.metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let log = app.log.counters();
    let apply = app.state.counters();
    Status {
        id: app.id,
        state: format!("{:?}", metrics.state),
        leader: metrics.current_leader,
        term: metrics.current_term,
        last_log_index: metrics.last_log_index,
        committed: metrics.local_committed.as_ref().map(|id| id.index),
        applied: metrics.last_applied.as_ref().map(|id| id.index),
        snapshot: metrics.snapshot.as_ref().map(|id| id.index),
        purged: metrics.purged.as_ref().map(|id| id.index),
        voters: membership.voter_ids().collect(),
        nodes: membership
            .nodes()
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect(),
        log_commits: log.commits,
        log_appends: log.appends,
        log_entries_appended: log.entries_appended,
        apply_commits: apply.commits,
        entries_applied: apply.entries_applied,
        snapshots_installed: apply.installs,
    }
}

/// Proposes `request` and answers once it is committed and applied here, on the leader.
async fn write(app: &App, request: Request, path_and_query: &str) -> Answer {
    match app.raft.client_write(request).await {
        Ok(written) => json(
            StatusCode::OK,
            &WriteReply {
                index: written.log_id.index,
                previous: written.data.previous,
            },
        ),
        Err(e) => write_error(e, path_and_query),
    }
}

fn write_error(e: RaftError<KvConfig, ClientWriteError<KvConfig>>, path_and_query: &str) -> Answer {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(to)) => forward(&to, path_and_query),
        // Not an acknowledgement: the entry may still commit through another leader.
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the leader changed before the write committed; it may or may not take effect",
        ),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
        other => error(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    }
}

/// Waits until a read on this node would see every write acknowledged before it started, or
/// answers where the read must go instead.
async fn linearize(app: &App, path_and_query: &str) -> Result<(), Answer> {
    match app.raft.ensure_linearizable(ReadPolicy::ReadIndex).await {
        Ok(_) => Ok(()),
        Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(to))) => {
            Err(forward(&to, path_and_query))
        }
        Err(RaftError::APIError(LinearizableReadError::QuorumNotEnough(e))) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the leader cannot reach a quorum: {e}"),
        )),
        Err(other) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, other.to_string())),
    }
}

/// Runs a read of the state machine on the blocking pool (it may fault pages in).
async fn read_state<T: Send + 'static>(
    app: &App,
    read: impl FnOnce(&KvStateMachine) -> rbolt_raft::Result<T> + Send + 'static,
) -> Result<T, Answer> {
    let state = app.state.clone();
    match tokio::task::spawn_blocking(move || read(&state)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

async fn get(app: &App, key: &str, mode: Read, path_and_query: &str) -> Answer {
    if mode == Read::Linearizable
        && let Err(answer) = linearize(app, path_and_query).await
    {
        return answer;
    }
    let key = key.to_owned();
    match read_state(app, move |state| kv::get(state, &key)).await {
        Ok(Some(value)) => answer(StatusCode::OK, "text/plain; charset=utf-8", value),
        Ok(None) => error(StatusCode::NOT_FOUND, "no such key"),
        Err(answer) => answer,
    }
}

async fn dump(app: &App, mode: Read, path_and_query: &str) -> Answer {
    if mode == Read::Linearizable
        && let Err(answer) = linearize(app, path_and_query).await
    {
        return answer;
    }
    match read_state(app, kv::dump).await {
        Ok(all) => json(StatusCode::OK, &all),
        Err(answer) => answer,
    }
}

fn membership_reply(written: &openraft::raft::ClientWriteResponse<KvConfig>) -> MembershipReply {
    let (voters, nodes) = match &written.membership {
        Some(m) => (
            m.voter_ids().collect(),
            m.nodes()
                .map(|(id, node)| (*id, node.addr.clone()))
                .collect(),
        ),
        None => (Vec::new(), BTreeMap::new()),
    };
    MembershipReply {
        index: written.log_id.index,
        voters,
        nodes,
    }
}

async fn add_learner(app: &App, request: hyper::Request<Incoming>, path_and_query: &str) -> Answer {
    let learner: AddLearner = match decode_json(request).await {
        Ok(learner) => learner,
        Err(answer) => return answer,
    };
    // Addresses travel in snapshot headers and redirects: HOST:PORT, ASCII, nothing else.
    if learner.addr.is_empty() || !learner.addr.is_ascii() || learner.addr.contains(['/', ' ']) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("address {:?} is not HOST:PORT", learner.addr),
        );
    }
    let node = BasicNode { addr: learner.addr };
    // Blocking: answers once the learner has caught up with the log.
    match app.raft.add_learner(learner.id, node, true).await {
        Ok(written) => json(StatusCode::OK, &membership_reply(&written)),
        Err(e) => write_error(e, path_and_query),
    }
}

async fn change_members(
    app: &App,
    request: hyper::Request<Incoming>,
    path_and_query: &str,
) -> Answer {
    let change: ChangeMembers = match decode_json(request).await {
        Ok(change) => change,
        Err(answer) => return answer,
    };
    let voters: BTreeSet<u64> = change.voters.into_iter().collect();
    match app.raft.change_membership(voters, false).await {
        Ok(written) => json(StatusCode::OK, &membership_reply(&written)),
        Err(e) => write_error(e, path_and_query),
    }
}
