//! What the server's routes share ([`crate::server`] and the routes it mounts: [`crate::peer`],
//! [`crate::membership`], [`crate::maintenance`]): the handler state [`App`], who may do what
//! ([`Access`]), what is known of a connection ([`Conn`]), the answers' builders, the body
//! limits, and the steps of a write or a read that every route takes the same way.

use crate::api;
use crate::context::Ctx;
use crate::kv::{KvConfig, KvRaft, KvStateMachine};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::StatusCode;
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use openraft::ReadPolicy;
use openraft::error::{ClientWriteError, ForwardToLeader, LinearizableReadError, RaftError};
use openraft::type_config::async_runtime::WatchReceiver;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Who may do what.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// The bearer token client writes and administration must carry, if one is set.
    pub client_token: Option<String>,
    /// Whether peer RPCs must come with a client certificate the node's authority signed
    /// (mutual TLS); such a certificate also authorizes client writes.
    pub peer_mtls: bool,
    /// The secret every peer RPC must carry in [`api::HEADER_PEER_SECRET`], if one is set
    /// (`--peer-secret-file`, the same on every node).
    pub peer_secret: Option<String>,
    /// Reads (keys, dumps, members, `/status`) need the same credentials as writes
    /// (`--client-auth-reads`); health checks and metrics stay open.
    pub client_auth_reads: bool,
}

impl Access {
    /// Whether peers must prove they are peers (mutual TLS or the peer secret).
    pub fn peers_authenticated(&self) -> bool {
        self.peer_mtls || self.peer_secret.is_some()
    }
}

/// Everything a request handler needs.
pub struct App {
    /// What the node's parts share.
    pub ctx: Arc<Ctx>,
    /// Its Raft.
    pub raft: KvRaft,
    /// A handle on its state machine, for reads.
    pub state: KvStateMachine,
    /// A reader of its log, for the counters in [`api::Status`].
    pub log: rbolt_raft::LogReader<KvConfig>,
    /// Who may do what.
    pub access: Access,
    /// The client the node probes nodes it is asked to add with.
    pub probe: crate::http::HttpClient,
    /// `http` or `https`: the scheme of the redirects it answers.
    pub scheme: &'static str,
    /// Numbers files in transit (received snapshots, backups).
    pub(crate) transit_seq: AtomicU64,
    /// Requests being answered, for the drain at a graceful stop.
    pub(crate) in_flight: std::sync::atomic::AtomicUsize,
    /// Set once the node is stopping: every answer closes its connection, so that clients
    /// move to another node instead of sending more on it.
    pub stopping: std::sync::atomic::AtomicBool,
    /// Held while a snapshot chunk is written or a received snapshot installed: one at a time.
    pub(crate) receiving: tokio::sync::Mutex<()>,
}

impl App {
    /// The handler state of a node.
    pub fn new(
        ctx: Arc<Ctx>,
        raft: KvRaft,
        state: KvStateMachine,
        log: rbolt_raft::LogReader<KvConfig>,
        access: Access,
        probe: crate::http::HttpClient,
    ) -> App {
        let scheme = probe.scheme();
        App {
            ctx,
            raft,
            state,
            log,
            access,
            probe,
            scheme,
            transit_seq: AtomicU64::new(0),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            stopping: std::sync::atomic::AtomicBool::new(false),
            receiving: tokio::sync::Mutex::new(()),
        }
    }

    /// Requests being answered now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The node's id.
    pub fn id(&self) -> u64 {
        self.ctx.id
    }

    /// A new name in the data directory for a file in transit (a name the state machine
    /// deletes at its next start if a crash leaves it).
    pub fn transit_path(&self, kind: &str) -> PathBuf {
        let seq = self.transit_seq.fetch_add(1, Ordering::Relaxed);
        self.ctx
            .dir
            .join(format!("{kind}-{seq}{}", rbolt_raft::TMP_SUFFIX))
    }
}

/// A response body: whole, or a file streamed.
pub type Answer = hyper::Response<UnsyncBoxBody<Bytes, std::io::Error>>;

/// What the server knows of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Conn {
    /// The client presented a certificate the node's authority signed.
    pub verified_cert: bool,
    /// That certificate is a peer's: it names the extended key usages `serverAuth` and
    /// `clientAuth` (see [`crate::tls::KeyUsages`]).
    pub peer_cert: bool,
    /// The address the connection comes from, for the log lines of refusals.
    pub remote: Option<std::net::SocketAddr>,
}

/// A whole body.
pub fn body(bytes: impl Into<Bytes>) -> UnsyncBoxBody<Bytes, std::io::Error> {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An answer of `status` with `body`.
pub fn answer(status: StatusCode, content_type: &str, bytes: impl Into<Bytes>) -> Answer {
    hyper::Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(body(bytes))
        .unwrap_or_else(|_| hyper::Response::new(body(Bytes::new())))
}

/// `value` as JSON.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Answer {
    match serde_json::to_vec(value) {
        Ok(bytes) => answer(status, "application/json", bytes),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding: {e}")),
    }
}

/// An error answer; a server error is logged.
pub fn error(status: StatusCode, error: impl Into<String>) -> Answer {
    let reply = api::ErrorReply {
        error: error.into(),
    };
    if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
        tracing::error!(%status, error = %reply.error, "request failed");
    }
    let bytes = serde_json::to_vec(&reply).unwrap_or_default();
    answer(status, "application/json", bytes)
}

/// Where a request for the leader goes: `307` to the leader's address with the same path and
/// query, or `503` while no leader is known.
pub fn forward(app: &App, to: &ForwardToLeader<KvConfig>, path_and_query: &str) -> Answer {
    match &to.leader_node {
        Some(node) => hyper::Response::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header(
                LOCATION,
                format!("{}://{}{path_and_query}", app.scheme, node.addr),
            )
            .body(body(Bytes::new()))
            .unwrap_or_else(|_| error(StatusCode::SERVICE_UNAVAILABLE, "bad leader address")),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no leader is known (an election is under way); retry",
        ),
    }
}

/// The declared length of a request's body, if it declares one.
pub fn declared_length(request: &hyper::Request<Incoming>) -> Option<u64> {
    request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// A body over the limit is read on, up to this many bytes, before the `413` is answered, so
/// that a client still sending it reads the answer instead of a broken pipe; past it the
/// connection is closed.
pub const DRAIN_BYTES_MAX: u64 = 128 << 20;

/// Reads a body of at most `limit` bytes, or answers `413` naming the limit.
pub async fn limited_body(
    request: hyper::Request<Incoming>,
    limit: usize,
    what: &str,
) -> Result<Bytes, Answer> {
    let too_large = |len: String| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{what} of {len} bytes: at most {limit} bytes"),
        )
    };
    let declared = declared_length(&request);
    if let Some(len) = declared
        && len > DRAIN_BYTES_MAX
    {
        return Err(too_large(len.to_string()));
    }
    let mut body = request.into_body();
    let mut bytes = bytes::BytesMut::new();
    let mut seen: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        seen += data.len() as u64;
        if seen > DRAIN_BYTES_MAX {
            break;
        }
        if seen <= limit as u64 && declared.is_none_or(|len| len <= limit as u64) {
            bytes.extend_from_slice(data);
        }
    }
    if seen > limit as u64 || declared.is_some_and(|len| len > limit as u64) {
        let len = declared.unwrap_or(seen);
        return Err(too_large(len.to_string()));
    }
    Ok(bytes.freeze())
}

/// `value` in a frame from this node: the answer to a peer's RPC.
pub fn framed<T: Serialize>(app: &App, value: &T) -> Answer {
    match crate::wire::encode(&app.ctx.cluster(), app.id(), value) {
        Ok(frame) => answer(StatusCode::OK, "application/octet-stream", frame),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Compares without an early exit, so the time taken says nothing of where a guess differs.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why this node, leading, cannot serve now (see [`Ctx::quorum_lost`]).
pub fn quorum_lost(app: &App) -> Option<String> {
    app.ctx.quorum_lost(&app.raft.metrics().borrow_watched())
}

/// Completes with the reason once this node, leading, has lost its quorum; checked every
/// heartbeat.
pub async fn quorum_loss(app: &App) -> String {
    let every = Duration::from_millis(app.raft.config().heartbeat_interval);
    loop {
        tokio::time::sleep(every).await;
        if let Some(lost) = quorum_lost(app) {
            return lost;
        }
    }
}

/// A `503` to a write that was proposed and may still take effect, marked so
/// ([`api::HEADER_OUTCOME`]) that a client does not send it again.
pub fn outcome_unknown(why: impl Into<String>) -> Answer {
    let mut answer = error(StatusCode::SERVICE_UNAVAILABLE, why);
    answer.headers_mut().insert(
        api::HEADER_OUTCOME,
        hyper::header::HeaderValue::from_static(api::OUTCOME_UNKNOWN),
    );
    answer
}

/// The answer to a failed write or membership change.
pub fn write_error(
    app: &App,
    e: RaftError<KvConfig, ClientWriteError<KvConfig>>,
    path_and_query: &str,
) -> Answer {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(to)) => {
            forward(app, &to, path_and_query)
        }
        // Not an acknowledgement: the entry may still commit through another leader.
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)) => outcome_unknown(
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
pub async fn linearize(app: &App, path_and_query: &str) -> Result<(), Answer> {
    if let Some(lost) = quorum_lost(app) {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, lost));
    }
    match app.raft.ensure_linearizable(ReadPolicy::ReadIndex).await {
        Ok(_) => Ok(()),
        Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(to))) => {
            Err(forward(app, &to, path_and_query))
        }
        Err(RaftError::APIError(LinearizableReadError::QuorumNotEnough(e))) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the leader cannot reach a quorum: {e}"),
        )),
        Err(other) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, other.to_string())),
    }
}

/// Runs a read of the state machine on the blocking pool (it may fault pages in).
pub async fn read_state<T: Send + 'static>(
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

/// Decodes a JSON request body of at most `limit` bytes.
pub async fn decode_json<T: DeserializeOwned>(
    request: hyper::Request<Incoming>,
    limit: usize,
) -> Result<T, Answer> {
    let body = limited_body(request, limit, "request").await?;
    serde_json::from_slice(&body).map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))
}
