//! The server side of the Raft RPCs (`/raft/...`): every message is checked before Raft sees
//! it: the sender's certificate when peers must use mutual TLS (`403`), the peer secret when
//! the cluster has one (`401`), its size (`413`), its frame (`400`), its cluster (`409`); a
//! vote from a node the committed membership no longer holds is answered `410 Gone` with that
//! membership's index and the node it names, so a removed node learns it was removed instead
//! of campaigning forever.

use crate::api::{
    AlarmRaise, HEADER_MEMBERSHIP_INDEX, HEADER_PEER_SECRET, HEADER_REMOVED_NODE, Hello,
    PATH_ALARM, PATH_APPEND, PATH_HELLO, PATH_SNAPSHOT, PATH_SNAPSHOT_CHUNK, PATH_TRANSFER,
    PATH_VOTE,
};
use crate::app::{Answer, App, Conn, constant_time_eq, error, framed, limited_body};
use crate::context::Stopped;
use crate::kv::KvConfig;
use crate::limits::SMALL_RPC_BYTES_MAX;
use crate::wire;
use hyper::body::Incoming;
use hyper::{Method, StatusCode};
use openraft::error::RaftError;
use openraft::raft::VoteRequest;
use openraft::type_config::async_runtime::WatchReceiver;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;

/// Routes a `/raft/...` request.
pub async fn route(app: &App, conn: Conn, request: hyper::Request<Incoming>) -> Answer {
    if let Some(refusal) = unauthenticated(app, conn, &request) {
        return refusal;
    }
    match app.ctx.stopped() {
        Some(Stopped::Removed(index)) => {
            return gone(index, app.id(), "this node was removed from the cluster");
        }
        Some(Stopped::StorageFailed(reason)) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("storage failed: {reason}"),
            );
        }
        None => {}
    }
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let append_limit = app.ctx.limits.append_bytes_max();
    match (&method, path.as_str()) {
        (&Method::POST, PATH_APPEND) => {
            rpc(app, request, append_limit, |_, rpc| async move {
                app.raft.append_entries(rpc).await
            })
            .await
        }
        (&Method::POST, PATH_VOTE) => vote(app, request).await,
        (&Method::POST, PATH_TRANSFER) => {
            rpc(app, request, SMALL_RPC_BYTES_MAX, |_, rpc| async move {
                app.raft
                    .handle_transfer_leader(rpc)
                    .await
                    .map_err(RaftError::<KvConfig>::Fatal)
            })
            .await
        }
        (&Method::POST, PATH_HELLO) => hello(app, request).await,
        (&Method::POST, PATH_ALARM) => alarm(app, request).await,
        (&Method::POST, PATH_SNAPSHOT) => crate::snapshot_transfer::install(app, request).await,
        (&Method::POST, PATH_SNAPSHOT_CHUNK) => {
            crate::snapshot_transfer::receive_chunk(app, request).await
        }
        _ => error(
            StatusCode::NOT_FOUND,
            format!("no route for {method} {path}"),
        ),
    }
}

/// The refusal of a sender that does not prove it is a peer: it must show a peer certificate
/// when peers use mutual TLS (`403`; a client's certificate from the same authority is not
/// one), and the peer secret when the cluster has one (`401`).
/// A refusal is counted by reason and logged, at most every `WARN_EVERY` per reason and
/// address, before anything of the request is read.
fn unauthenticated(app: &App, conn: Conn, request: &hyper::Request<Incoming>) -> Option<Answer> {
    let refuse = |status: StatusCode, reason: &'static str, why: &str| {
        app.ctx.metrics.peer_refused(reason);
        let remote = conn.remote.map(|r| r.ip().to_string()).unwrap_or_default();
        if app
            .ctx
            .warn_now(&format!("unauthenticated {reason} {remote}"))
        {
            tracing::warn!(reason, %remote, path = %request.uri().path(), "peer message refused: the sender did not prove it is a peer");
        }
        Some(error(status, why))
    };
    if app.access.peer_mtls && !conn.verified_cert {
        return refuse(
            StatusCode::FORBIDDEN,
            "no_certificate",
            "peer RPCs need a client certificate signed by the cluster's authority",
        );
    }
    if app.access.peer_mtls && !conn.peer_cert {
        return refuse(
            StatusCode::FORBIDDEN,
            "client_certificate",
            "this certificate is a client's, not a peer's: a peer's names the extended key \
             usages serverAuth and clientAuth",
        );
    }
    if let Some(secret) = &app.access.peer_secret {
        let sent = request
            .headers()
            .get(HEADER_PEER_SECRET)
            .map(|v| v.as_bytes());
        match sent {
            None => {
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    "no_secret",
                    "peer RPCs need the cluster's peer secret (--peer-secret-file)",
                );
            }
            Some(sent) if !constant_time_eq(sent, secret.as_bytes()) => {
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    "wrong_secret",
                    "the peer secret is not this cluster's (--peer-secret-file)",
                );
            }
            Some(_) => {}
        }
    }
    None
}

/// A `410 Gone`: the committed membership of log index `index` does not hold node `removed`.
/// The answer names that node, so that a sender acts on it only when it is about itself: a
/// removed node answers every peer so, and a voter that asks it must not take that answer as
/// its own removal.
fn gone(index: u64, removed: u64, why: &str) -> Answer {
    let mut answer = error(
        StatusCode::GONE,
        format!("{why} (the committed membership of index {index} does not hold node {removed})"),
    );
    let headers = answer.headers_mut();
    headers.insert(HEADER_MEMBERSHIP_INDEX, index.into());
    headers.insert(HEADER_REMOVED_NODE, removed.into());
    answer
}

/// The answer to a message refused for `reason`, counted and logged (at most every
/// `WARN_EVERY` per reason and sender).
fn refused(app: &App, status: StatusCode, reason: &'static str, from: u64, why: String) -> Answer {
    app.ctx.metrics.peer_refused(reason);
    if app.ctx.warn_now(&format!("refused {reason} {from}")) {
        tracing::warn!(reason, from, %why, "peer message refused");
    }
    error(status, why)
}

/// Reads and decodes a frame of at most `limit` bytes, and checks its cluster.
async fn receive<Q: DeserializeOwned>(
    app: &App,
    request: hyper::Request<Incoming>,
    limit: usize,
) -> Result<(wire::Envelope, Q), Answer> {
    let bytes = limited_body(request, limit, "peer message")
        .await
        .inspect_err(|_| app.ctx.metrics.peer_refused("too_large"))?;
    let (envelope, payload) = wire::open(&bytes)
        .map_err(|e| refused(app, StatusCode::BAD_REQUEST, "malformed", 0, e.to_string()))?;
    // The cluster before the payload: a message of another cluster is refused as such, even
    // if it is of another version too.
    app.ctx
        .check_cluster(&envelope.cluster, envelope.from)
        .map_err(|why| {
            refused(
                app,
                StatusCode::CONFLICT,
                "wrong_cluster",
                envelope.from,
                why,
            )
        })?;
    let message = wire::decode_payload::<Q>(payload).map_err(|e| {
        refused(
            app,
            StatusCode::BAD_REQUEST,
            "malformed",
            envelope.from,
            e.to_string(),
        )
    })?;
    Ok((envelope, message))
}

/// Decodes a Raft RPC, runs it, and answers openraft's `Result` in a frame.
async fn rpc<Q, A, F, Fut>(
    app: &App,
    request: hyper::Request<Incoming>,
    limit: usize,
    call: F,
) -> Answer
where
    Q: DeserializeOwned,
    A: Serialize,
    F: FnOnce(wire::Envelope, Q) -> Fut,
    Fut: Future<Output = Result<A, RaftError<KvConfig>>>,
{
    match receive::<Q>(app, request, limit).await {
        Ok((envelope, message)) => framed(app, &call(envelope, message).await),
        Err(answer) => answer,
    }
}

/// A vote request, unless its candidate is not in the committed membership or this node
/// withholds its vote while it catches up ([`crate::context::Ctx::withhold_votes_until`]).
async fn vote(app: &App, request: hyper::Request<Incoming>) -> Answer {
    let (envelope, rpc) =
        match receive::<VoteRequest<KvConfig>>(app, request, SMALL_RPC_BYTES_MAX).await {
            Ok(received) => received,
            Err(answer) => return answer,
        };
    let candidate = rpc.vote.leader_id().node_id;
    if candidate != envelope.from {
        return refused(
            app,
            StatusCode::BAD_REQUEST,
            "malformed",
            envelope.from,
            format!("node {} sent the vote of node {candidate}", envelope.from),
        );
    }
    let last_log_index = app.raft.metrics().borrow_watched().last_log_index;
    if let Some(index) = app.ctx.votes_withheld(last_log_index) {
        return refused(
            app,
            StatusCode::SERVICE_UNAVAILABLE,
            "catching_up",
            envelope.from,
            format!(
                "this node started with an empty log while the cluster ran; it votes once it \
                 holds index {index} (it holds {last_log_index:?})"
            ),
        );
    }
    let committed = app
        .raft
        .metrics()
        .borrow_watched()
        .committed_membership_config
        .clone();
    if let Some(index) = committed.log_id().as_ref().map(|id| id.index)
        && committed.membership().get_node(&candidate).is_none()
    {
        app.ctx.metrics.peer_refused("removed_member");
        if app.ctx.warn_now(&format!("removed {candidate}")) {
            tracing::warn!(
                candidate,
                membership_index = index,
                "a node that is no longer a member asks for votes; told it was removed"
            );
        }
        return gone(
            index,
            candidate,
            &format!("node {candidate} is not a member"),
        );
    }
    framed(app, &app.raft.vote(rpc).await)
}

/// A member short of space asks this node, the leader, to raise its NOSPACE alarm. Only a
/// member's own alarm, and only a member's.
async fn alarm(app: &App, request: hyper::Request<Incoming>) -> Answer {
    let (envelope, raise) = match receive::<AlarmRaise>(app, request, SMALL_RPC_BYTES_MAX).await {
        Ok(received) => received,
        Err(answer) => return answer,
    };
    if raise.member != envelope.from {
        return refused(
            app,
            StatusCode::BAD_REQUEST,
            "malformed",
            envelope.from,
            format!(
                "node {} raised the alarm of member {}",
                envelope.from, raise.member
            ),
        );
    }
    let metrics = app.raft.metrics().borrow_watched().clone();
    if metrics
        .membership_config
        .membership()
        .get_node(&raise.member)
        .is_none()
    {
        return refused(
            app,
            StatusCode::FORBIDDEN,
            "not_member",
            envelope.from,
            format!("node {} is not a member", raise.member),
        );
    }
    if metrics.current_leader != Some(app.id()) {
        return error(
            StatusCode::MISDIRECTED_REQUEST,
            "this node does not lead; ask the leader",
        );
    }
    match crate::alarm::propose_raise(app, raise.member, raise.reason).await {
        Ok(()) => framed(app, &()),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

/// A node about to add this one checks that it answers and who it is.
async fn hello(app: &App, request: hyper::Request<Incoming>) -> Answer {
    let bytes = match limited_body(request, SMALL_RPC_BYTES_MAX, "peer message").await {
        Ok(bytes) => bytes,
        Err(answer) => return answer,
    };
    let (envelope, payload) = match wire::open(&bytes) {
        Ok(opened) => opened,
        Err(e) => return refused(app, StatusCode::BAD_REQUEST, "malformed", 0, e.to_string()),
    };
    // A node that has not joined yet does not take the asker's cluster from a hello: only a
    // leader's append or snapshot makes it a member.
    let ours = app.ctx.cluster();
    if !ours.is_empty() && ours != envelope.cluster {
        return refused(
            app,
            StatusCode::CONFLICT,
            "wrong_cluster",
            envelope.from,
            format!(
                "cluster mismatch: node {} belongs to cluster {ours:?}, the asker to {:?}",
                app.id(),
                envelope.cluster
            ),
        );
    }
    if let Err(e) = wire::decode_payload::<Hello>(payload) {
        return refused(
            app,
            StatusCode::BAD_REQUEST,
            "malformed",
            envelope.from,
            e.to_string(),
        );
    }
    framed(
        app,
        &Hello {
            id: app.id(),
            cluster: ours,
        },
    )
}
