//! The node's HTTP server: the Raft RPCs its peers send, the client API, the health checks and
//! the metrics (see [`crate::api`] for the paths), over TCP or TLS. A request for the leader
//! that reaches a follower is redirected there with `307 Temporary Redirect`, which keeps the
//! method and the body, so `curl -L` and [`crate::client::Client`] follow it.
//!
//! Every request is checked before anything is proposed or handed to Raft: bodies against the
//! limits ([`crate::limits`]; `413` names the limit), keys against rbolt's (`400`), peer frames
//! against their format and checksum (`400`) and the cluster (`409`), clients' writes against
//! the token or certificate they must show (`401`). A node that was removed answers `410`.

#![expect(
    clippy::result_large_err,
    reason = "the error of a handler step is the HTTP answer itself, returned at once"
)]

use crate::api::{self, HEADER_AUTHORIZATION, WriteReply};
use crate::context::{Ctx, Stopped};
use crate::kv::{self, KvConfig, KvRaft, KvStateMachine, Request};
use crate::limits::Refusal;
use crate::tls::KeyUsages;
use crate::{maintenance, membership, peer};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use openraft::ReadPolicy;
use openraft::error::{ClientWriteError, ForwardToLeader, LinearizableReadError, RaftError};
use openraft::type_config::async_runtime::WatchReceiver;
use percent_encoding::percent_decode_str;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::convert::Infallible;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// How long a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
    transit_seq: AtomicU64,
    /// Requests being answered, for the drain at a graceful stop.
    in_flight: std::sync::atomic::AtomicUsize,
    /// Set once the node is stopping: every answer closes its connection, so that clients
    /// move to another node instead of sending more on it.
    pub stopping: std::sync::atomic::AtomicBool,
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

/// Serves HTTP (or HTTPS with `tls`) on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return,
        };
        let Ok((stream, remote)) = accepted else {
            // Out of descriptors or a connection reset before accept: the next one may work.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = Arc::clone(&app);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                None => {
                    serve_connection(
                        stream,
                        app,
                        Conn {
                            verified_cert: false,
                            peer_cert: false,
                            remote: Some(remote),
                        },
                    )
                    .await
                }
                Some(acceptor) => {
                    if let Some((stream, conn)) = handshake(&app, &acceptor, stream, remote).await {
                        serve_connection(stream, app, conn).await;
                    }
                }
            }
        });
    }
}

/// The TLS handshake of a connection from `remote`, and what it tells of the client; `None`
/// when it fails or takes longer than [`HANDSHAKE_TIMEOUT`], counted as a refused request
/// (`tls_handshake`) and logged, at most every `WARN_EVERY` per address.
async fn handshake(
    app: &App,
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    remote: std::net::SocketAddr,
) -> Option<(tokio_rustls::server::TlsStream<tokio::net::TcpStream>, Conn)> {
    // The fallible accept hands the connection back on failure: it is closed only after the
    // refusal is counted and logged, so a client that sees it closed finds it in the metrics.
    let accept = acceptor.accept(stream).into_fallible();
    let (failed, _connection) = match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(stream)) => {
            let certs = stream.get_ref().1.peer_certificates();
            let conn = Conn {
                verified_cert: certs.is_some(),
                peer_cert: certs
                    .and_then(|chain| chain.first())
                    .is_some_and(|cert| KeyUsages::of(cert).peer()),
                remote: Some(remote),
            };
            return Some((stream, conn));
        }
        Ok(Err((e, connection))) => (e.to_string(), Some(connection)),
        Err(_) => (format!("no handshake within {HANDSHAKE_TIMEOUT:?}"), None),
    };
    app.ctx.metrics.refused("tls_handshake");
    if app.ctx.warn_now(&format!("handshake {}", remote.ip())) {
        tracing::warn!(remote = %remote.ip(), error = %failed, "TLS handshake refused");
    }
    None
}

/// Counts a request in flight until it is answered or dropped (its client went away).
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(count: &'a std::sync::atomic::AtomicUsize) -> InFlight<'a> {
        count.fetch_add(1, Ordering::AcqRel);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn serve_connection<S>(stream: S, app: Arc<App>, conn: Conn)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let app = Arc::clone(&app);
        async move {
            let _counted = InFlight::new(&app.in_flight);
            let mut answer = route(&app, conn, request).await;
            if app.stopping.load(Ordering::Acquire) {
                answer.headers_mut().insert(
                    hyper::header::CONNECTION,
                    hyper::header::HeaderValue::from_static("close"),
                );
            }
            Ok::<_, Infallible>(answer)
        }
    });
    // A peer or client that goes away mid-request ends only its own connection.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
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

/// The answer to a request refused before it was proposed.
fn refusal(app: &App, refusal: &Refusal) -> Answer {
    match refusal {
        Refusal::Key(why) => {
            app.ctx.metrics.refused("key");
            error(StatusCode::BAD_REQUEST, why.clone())
        }
        Refusal::TooLarge(why) => {
            app.ctx.metrics.refused("too_large");
            error(StatusCode::PAYLOAD_TOO_LARGE, why.clone())
        }
    }
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

/// The answer of a node that stopped serving.
fn stopped_answer(stopped: &Stopped) -> Answer {
    match stopped {
        Stopped::Removed(index) => error(
            StatusCode::GONE,
            format!(
                "this node was removed from the cluster (membership change at index {index}); \
                 ask another node"
            ),
        ),
        Stopped::StorageFailed(reason) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("this node's storage failed ({reason}); it is stopping"),
        ),
    }
}

/// How a read is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
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

async fn route(app: &App, conn: Conn, request: hyper::Request<Incoming>) -> Answer {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    if path.starts_with("/raft/") {
        return peer::route(app, conn, request).await;
    }
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |pq| pq.as_str().to_owned());
    let query = request.uri().query().map(str::to_owned);
    match (&method, path.as_str()) {
        (&Method::GET, api::PATH_LIVEZ) => return health(app, Check::Live),
        (&Method::GET, api::PATH_HEALTH) => {
            let exclude_nospace = query.as_deref() == Some("exclude=NOSPACE");
            return health(app, Check::Health { exclude_nospace });
        }
        (&Method::GET, api::PATH_READYZ) => return health(app, Check::Ready),
        (&Method::GET, api::PATH_METRICS) => return metrics(app),
        _ => {}
    }
    let writes = !matches!(method, Method::GET | Method::HEAD) || path == api::PATH_BACKUP;
    if (writes || app.access.client_auth_reads)
        && let Err(answer) = authorize(app, conn, &request)
    {
        return answer;
    }
    if (&method, path.as_str()) == (&Method::GET, api::PATH_STATUS) {
        return json(StatusCode::OK, &status(app));
    }
    if let Some(stopped) = app.ctx.stopped() {
        return stopped_answer(&stopped);
    }
    match (&method, path.as_str()) {
        (&Method::GET, api::PATH_MEMBERS) => membership::list(app),
        (&Method::POST, api::PATH_MEMBERS) => {
            membership::change_members(app, request, &path_and_query).await
        }
        (&Method::POST, api::PATH_LEARNERS) => {
            membership::add_learner(app, request, &path_and_query).await
        }
        (&Method::DELETE, p) if p.starts_with(api::PATH_LEARNERS) => {
            let id = p[api::PATH_LEARNERS.len()..].trim_start_matches('/');
            match id.parse::<u64>() {
                Ok(id) => membership::remove_learner(app, id, &path_and_query).await,
                Err(_) => error(StatusCode::BAD_REQUEST, format!("learner id {id:?}")),
            }
        }
        (&Method::POST, api::PATH_LEADER) => {
            membership::transfer_leader(app, request, &path_and_query).await
        }
        (&Method::GET, api::PATH_ALARMS) => maintenance::alarms(app).await,
        (&Method::POST, api::PATH_ALARMS_DISARM) => maintenance::disarm(app, &path_and_query).await,
        (&Method::POST, api::PATH_VACUUM) => maintenance::vacuum(app).await,
        (&Method::GET, api::PATH_BACKUP) => match read_mode(query.as_deref()) {
            Ok(mode) => backup(app, mode, &path_and_query).await,
            Err(e) => error(StatusCode::BAD_REQUEST, e),
        },
        (&Method::GET, api::PATH_KV) => match read_mode(query.as_deref()) {
            Ok(mode) => dump(app, mode, &path_and_query).await,
            Err(e) => error(StatusCode::BAD_REQUEST, e),
        },
        (_, p) if p.starts_with(api::PATH_KV) && p[api::PATH_KV.len()..].starts_with('/') => {
            let key = match percent_decode_str(&p[api::PATH_KV.len() + 1..]).decode_utf8() {
                Ok(key) => key.into_owned(),
                Err(_) => return error(StatusCode::BAD_REQUEST, "the key is not UTF-8"),
            };
            kv_route(app, method, key, request, query.as_deref(), &path_and_query).await
        }
        _ => error(
            StatusCode::NOT_FOUND,
            format!("no route for {method} {path}"),
        ),
    }
}

async fn kv_route(
    app: &App,
    method: Method,
    key: String,
    request: hyper::Request<Incoming>,
    query: Option<&str>,
    path_and_query: &str,
) -> Answer {
    let limits = app.ctx.limits;
    // The key is checked first, so a key over the limit is refused before its value is read.
    if let Err(refused) = limits.check(&Request::Delete { key: key.clone() }) {
        return refusal(app, &refused);
    }
    let id = match request_id(&request) {
        Ok(id) => id,
        Err(answer) => {
            app.ctx.metrics.refused("request_id");
            return answer;
        }
    };
    match method {
        Method::GET => match read_mode(query) {
            Ok(mode) => get(app, &key, mode, path_and_query).await,
            Err(e) => error(StatusCode::BAD_REQUEST, e),
        },
        Method::PUT => {
            let value = match limited_body(request, limits.max_request_bytes, "value").await {
                Ok(body) => match String::from_utf8(body.to_vec()) {
                    Ok(value) => value,
                    Err(_) => return error(StatusCode::BAD_REQUEST, "the value is not UTF-8"),
                },
                Err(answer) => {
                    app.ctx.metrics.refused("too_large");
                    return answer;
                }
            };
            write(app, once(id, Request::Put { key, value }), path_and_query).await
        }
        Method::DELETE => write(app, once(id, Request::Delete { key }), path_and_query).await,
        _ => error(StatusCode::METHOD_NOT_ALLOWED, "GET, PUT or DELETE"),
    }
}

/// The request id a client sent with a write ([`api::HEADER_REQUEST_ID`]), checked.
fn request_id(request: &hyper::Request<Incoming>) -> Result<Option<String>, Answer> {
    let Some(value) = request.headers().get(api::HEADER_REQUEST_ID) else {
        return Ok(None);
    };
    let id = value.to_str().unwrap_or("");
    crate::limits::check_request_id(id).map_err(|refused| match refused {
        Refusal::Key(why) | Refusal::TooLarge(why) => error(StatusCode::BAD_REQUEST, why),
    })?;
    Ok(Some(id.to_owned()))
}

/// `request` under request id `id`, if the client sent one.
fn once(id: Option<String>, request: Request) -> Request {
    match id {
        Some(id) => Request::Once {
            id,
            request: Box::new(request),
        },
        None => request,
    }
}

/// Checks that a client may write (or read, with `--client-auth-reads`): with a token set it
/// must send it as a bearer token, and with a token or mutual TLS it may instead present a
/// certificate the node's authority signed. With neither, anyone may.
fn authorize(app: &App, conn: Conn, request: &hyper::Request<Incoming>) -> Result<(), Answer> {
    let token = app.access.client_token.as_deref();
    if token.is_none() && !app.access.peer_mtls {
        return Ok(());
    }
    if conn.verified_cert {
        return Ok(());
    }
    let sent = request
        .headers()
        .get(HEADER_AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let (Some(sent), Some(token)) = (sent, token)
        && constant_time_eq(sent.as_bytes(), token.as_bytes())
    {
        return Ok(());
    }
    app.ctx.metrics.refused("unauthorized");
    let remote = conn.remote.map(|r| r.ip().to_string()).unwrap_or_default();
    if app.ctx.warn_now(&format!("unauthorized {remote}")) {
        tracing::warn!(%remote, method = %request.method(), path = %request.uri().path(), "client request refused: no client token or certificate");
    }
    Err(error(
        StatusCode::UNAUTHORIZED,
        "this request needs the client token (Authorization: Bearer TOKEN) or a client \
         certificate",
    ))
}

/// Compares without an early exit, so the time taken says nothing of where a guess differs.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Which health check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// The process serves and its storage has not failed.
    Live,
    /// It knows a leader (a leader: it heard from a quorum within an election timeout), its
    /// storage is sound, and no NOSPACE alarm is raised (as etcd's `/health`; unless
    /// `?exclude=NOSPACE`: reads are still served during one).
    Health {
        /// `?exclude=NOSPACE`: a raised alarm does not fail the check.
        exclude_nospace: bool,
    },
    /// As `Health`, and it has applied what it knows is committed.
    Ready,
}

fn health(app: &App, check: Check) -> Answer {
    let metrics = app.raft.metrics().borrow_watched().clone();
    let leader = metrics.current_leader;
    let failed = match app.ctx.stopped() {
        Some(Stopped::StorageFailed(reason)) => Some(format!("storage failed: {reason}")),
        Some(Stopped::Removed(index)) => Some(format!("removed from the cluster at index {index}")),
        None => None,
    };
    let lost = app.ctx.quorum_lost(&metrics);
    let reason = match (check, failed) {
        (_, Some(failed)) => Some(failed),
        (Check::Live, None) => None,
        (_, None) if leader.is_none() => Some("no leader is known".to_owned()),
        (_, None) if lost.is_some() => lost,
        (Check::Ready, None) if metrics.last_applied < metrics.local_committed => Some(format!(
            "applied {:?} of committed {:?}",
            metrics.last_applied.map(|id| id.index),
            metrics.local_committed.map(|id| id.index)
        )),
        (
            Check::Health {
                exclude_nospace: false,
            },
            None,
        ) => kv::alarms(&app.state)
            .ok()
            .filter(|alarms| !alarms.is_empty())
            .map(|alarms| kv::describe_alarms(&alarms)),
        _ => None,
    };
    let status = if reason.is_none() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(
        status,
        &api::Health {
            ok: reason.is_none(),
            reason: reason.unwrap_or_else(|| "ok".to_owned()),
            leader,
        },
    )
}

fn metrics(app: &App) -> Answer {
    let raft = app.raft.metrics().borrow_watched().clone();
    let m = &app.ctx.metrics;
    let index = |id: Option<u64>| id.map_or(0, |i| i as i64);
    // A leader that lost its quorum is no leader to anyone (etcd's `has_leader` after
    // CheckQuorum steps it down).
    m.has_leader.set(i64::from(
        raft.current_leader.is_some() && app.ctx.quorum_lost(&raft).is_none(),
    ));
    m.is_leader
        .set(i64::from(raft.current_leader == Some(app.id())));
    m.term.set(raft.current_term as i64);
    m.applied_index
        .set(index(raft.last_applied.map(|id| id.index)));
    m.committed_index
        .set(index(raft.local_committed.map(|id| id.index)));
    // The state file is read where the scrape is: a page or two of the mapping.
    let alarms = kv::alarms(&app.state).unwrap_or_default();
    m.alarm_active.set(i64::from(!alarms.is_empty()));
    app.ctx.space.update_metrics(&app.state);
    answer(
        StatusCode::OK,
        // What `encode` writes: OpenMetrics text (counters' `_total`, the closing `# EOF`).
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
        m.render(),
    )
}

/// This node's [`api::Status`].
pub fn status(app: &App) -> api::Status {
    let metrics = app.raft.metrics().borrow_watched().clone();
    let membership = metrics.membership_config.membership();
    let log = app.log.counters();
    let apply = app.state.counters();
    let stopped = app.ctx.stopped().map(|s| match s {
        Stopped::StorageFailed(reason) => format!("storage failed: {reason}"),
        Stopped::Removed(index) => format!("removed at index {index}"),
    });
    api::Status {
        id: app.id(),
        state: if stopped.is_some() {
            "Stopped".to_owned()
        } else {
            format!("{:?}", metrics.state)
        },
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
        cluster: app.ctx.cluster(),
        entries_refused: apply.refused,
        stopped,
        alarms: kv::alarms(&app.state).unwrap_or_default(),
        space_shortage: app.ctx.space.last_shortage(),
        store_in_use_bytes: crate::space::in_use_bytes(&app.state).unwrap_or(0),
        quota_backend_bytes: app.ctx.space.quota_bytes,
        apply_syncs: apply.syncs,
    }
}

/// Checks `request`, proposes it and answers once it is committed and applied here, on the
/// leader.
async fn write(app: &App, request: Request, path_and_query: &str) -> Answer {
    if let Err(refused) = app.ctx.limits.check(&request) {
        return refusal(app, &refused);
    }
    if let Some(lost) = quorum_lost(app) {
        app.ctx.metrics.refused("quorum_lost");
        return error(StatusCode::SERVICE_UNAVAILABLE, lost);
    }
    // A put under an alarm is refused before it is proposed, so that a full disk does not
    // fill with refused entries; one proposed just before the alarm is refused at apply.
    if request.is_put() {
        match read_state(app, kv::alarms).await {
            Ok(alarms) if !alarms.is_empty() => {
                app.ctx.metrics.refused("nospace");
                return error(
                    StatusCode::INSUFFICIENT_STORAGE,
                    kv::describe_alarms(&alarms),
                );
            }
            Ok(_) => {}
            Err(answer) => return answer,
        }
    }
    let started = Instant::now();
    // A write proposed just before the quorum is lost would wait for it to come back.
    let written = tokio::select! {
        written = app.raft.client_write(request) => written,
        lost = quorum_loss(app) => {
            app.ctx.metrics.proposals_failed.inc();
            return outcome_unknown(format!(
                "{lost}; the write was proposed and may or may not take effect"
            ));
        }
    };
    match written {
        Ok(written) if written.data.alarm.is_some() => {
            app.ctx.metrics.refused("nospace");
            error(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "the put was committed at index {} but an alarm refused it, so it changed \
                     nothing: {}",
                    written.log_id.index,
                    written.data.alarm.unwrap_or_default()
                ),
            )
        }
        Ok(written) if written.data.refused.is_none() => {
            app.ctx
                .metrics
                .commit_seconds
                .observe(started.elapsed().as_secs_f64());
            json(
                StatusCode::OK,
                &WriteReply {
                    index: written.log_id.index,
                    previous: written.data.previous,
                    duplicate_of: written.data.duplicate_of,
                },
            )
        }
        Ok(written) => {
            app.ctx.metrics.proposals_failed.inc();
            error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "the write was committed at index {} but could not be applied, so it \
                     changed nothing: {}",
                    written.log_id.index,
                    written.data.refused.unwrap_or_default()
                ),
            )
        }
        Err(e) => {
            app.ctx.metrics.proposals_failed.inc();
            write_error(app, e, path_and_query)
        }
    }
}

/// Why this node, leading, cannot serve now (see [`Ctx::quorum_lost`]).
fn quorum_lost(app: &App) -> Option<String> {
    app.ctx.quorum_lost(&app.raft.metrics().borrow_watched())
}

/// Completes with the reason once this node, leading, has lost its quorum; checked every
/// heartbeat.
async fn quorum_loss(app: &App) -> String {
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
fn outcome_unknown(why: impl Into<String>) -> Answer {
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

/// Streams a backup: one consistent copy of the state file, written to a file in transit
/// first (the copy is one read transaction; the client may read slowly).
async fn backup(app: &App, mode: Read, path_and_query: &str) -> Answer {
    if mode == Read::Linearizable
        && let Err(answer) = linearize(app, path_and_query).await
    {
        return answer;
    }
    let path = app.transit_path("backup");
    let state = app.state.clone();
    let written = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || {
            let file = std::fs::File::create_new(&path)?;
            let (last, bytes) = state.backup_to(std::io::BufWriter::new(file))?;
            let file = std::fs::File::open(&path)?;
            // Unlinked now: the open handle streams it, and nothing is left behind.
            std::fs::remove_file(&path)?;
            anyhow::Ok((file, last, bytes))
        })
        .await
    };
    match written {
        Ok(Ok((file, last, bytes))) => {
            tracing::info!(bytes, last_index = ?last.as_ref().map(|id| id.index), "backup written");
            hyper::Response::builder()
                .status(StatusCode::OK)
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(CONTENT_LENGTH, bytes)
                .body(crate::network::file_body(tokio::fs::File::from_std(file)))
                .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "backup"))
        }
        Ok(Err(e)) => {
            let _ = std::fs::remove_file(&path);
            error(StatusCode::INTERNAL_SERVER_ERROR, format!("backup: {e:#}"))
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("backup: {e}")),
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
