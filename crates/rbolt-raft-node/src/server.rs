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
use crate::app::{
    Answer, App, Conn, answer, constant_time_eq, error, json, limited_body, linearize,
    outcome_unknown, quorum_loss, quorum_lost, read_state, write_error,
};
use crate::context::Stopped;
use crate::kv::{self, Request};
use crate::limits::Refusal;
use crate::tls::KeyUsages;
use crate::{maintenance, membership, peer};
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use openraft::type_config::async_runtime::WatchReceiver;
use percent_encoding::percent_decode_str;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// How long a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
    if let Some(answer) = open_route(app, &method, &path, query.as_deref()) {
        return answer;
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

/// The answer to a request for `/metrics` or a health check (open to anyone who reaches a
/// listener); `None` for any other request.
fn open_route(app: &App, method: &Method, path: &str, query: Option<&str>) -> Option<Answer> {
    if method != Method::GET {
        return None;
    }
    Some(match path {
        api::PATH_LIVEZ => health(app, Check::Live),
        api::PATH_HEALTH => {
            let exclude_nospace = query == Some("exclude=NOSPACE");
            health(app, Check::Health { exclude_nospace })
        }
        api::PATH_READYZ => health(app, Check::Ready),
        api::PATH_METRICS => metrics(app),
        _ => return None,
    })
}

/// Serves `/metrics` and the health checks only, in plain HTTP, on `listener`
/// (`--listen-metrics`): every other request is 404, so that a monitoring system reaches
/// neither the client nor the peer API there.
pub async fn serve_metrics(listener: TcpListener, app: Arc<App>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let app = Arc::clone(&app);
                async move {
                    let path = request.uri().path();
                    let answer = open_route(&app, request.method(), path, request.uri().query())
                        .unwrap_or_else(|| {
                            error(
                                StatusCode::NOT_FOUND,
                                format!(
                                    "the metrics listener serves only GET {}, {}, {} and {}; \
                                     {} {path} is on the client address",
                                    api::PATH_METRICS,
                                    api::PATH_LIVEZ,
                                    api::PATH_READYZ,
                                    api::PATH_HEALTH,
                                    request.method()
                                ),
                            )
                        });
                    Ok::<_, Infallible>(answer)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
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
