//! Membership an operator drives through any node (changes go to the leader): the member
//! list, adding a learner (checked to answer first), removing one, promoting learners to
//! voters (refused while one has not caught up) and handing leadership to another voter.

use crate::api::{
    self, AddLearner, ChangeMembers, Hello, LeaderReply, Member, MembershipReply, TransferLeader,
};
use crate::app::{Answer, App, decode_json, error, forward, json, write_error};
use crate::identity::check_addr;
use crate::kv::KvConfig;
use crate::limits::SMALL_RPC_BYTES_MAX;
use crate::wire;
use hyper::body::Incoming;
use hyper::{Method, StatusCode};
use openraft::error::ForwardToLeader;
use openraft::type_config::async_runtime::WatchReceiver;
use openraft::{BasicNode, ChangeMembers as Change, Instant as _, RaftMetrics};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// A learner may be promoted while it is at most this many entries behind the leader's log.
pub const PROMOTE_LAG_ENTRIES_MAX: u64 = 100;
/// How long a leadership transfer may take before the answer says it did not happen.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the probe of a node about to be added may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long adding a learner waits for it to catch up (to within
/// [`PROMOTE_LAG_ENTRIES_MAX`]) before it answers `202` with its progress: below the command
/// line's default timeout of 10 s.
pub const LEARNER_CATCH_UP_WAIT: Duration = Duration::from_secs(8);

fn metrics(app: &App) -> RaftMetrics<KvConfig> {
    app.raft.metrics().borrow_watched().clone()
}

/// `Some(answer)` redirecting to the leader unless this node leads.
fn unless_leader(app: &App, path_and_query: &str) -> Option<Answer> {
    let m = metrics(app);
    if m.current_leader == Some(app.id()) {
        return None;
    }
    let leader = m.current_leader.and_then(|id| {
        let node = m.membership_config.membership().get_node(&id).cloned()?;
        Some(ForwardToLeader::new(id, node))
    });
    Some(forward(
        app,
        &leader.unwrap_or_else(ForwardToLeader::empty),
        path_and_query,
    ))
}

fn membership_reply(
    written: &openraft::raft::ClientWriteResponse<KvConfig>,
    note: Option<String>,
) -> MembershipReply {
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
        note,
    }
}

/// `GET /cluster/members`: every member, and on the leader each one's replication progress.
pub fn list(app: &App) -> Answer {
    let m = metrics(app);
    let membership = m.membership_config.membership();
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let members = membership
        .nodes()
        .map(|(id, node)| {
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(id).cloned().flatten())
                .map(|id| id.index);
            let last_ack_ms = m
                .heartbeat
                .as_ref()
                .and_then(|h| h.get(id).cloned().flatten())
                .map(|at| at.elapsed().as_millis() as u64);
            let member = Member {
                addr: node.addr.clone(),
                role: if voters.contains(id) {
                    "voter"
                } else {
                    "learner"
                }
                .to_owned(),
                matched,
                last_ack_ms,
            };
            (*id, member)
        })
        .collect();
    json(
        StatusCode::OK,
        &api::Members {
            id: app.id(),
            leader: m.current_leader,
            last_log_index: (m.current_leader == Some(app.id()))
                .then_some(m.last_log_index)
                .flatten(),
            membership_index: m.membership_config.log_id().as_ref().map(|id| id.index),
            members,
        },
    )
}

/// Asks `addr` who it is. `Ok(None)`: it does not answer.
async fn probe(app: &App, addr: &str) -> Result<Option<Hello>, String> {
    let hello = Hello {
        id: app.id(),
        cluster: app.ctx.cluster(),
    };
    let frame = wire::encode(&hello.cluster, app.id(), &hello).map_err(|e| e.to_string())?;
    let headers: Vec<(&str, String)> = app
        .access
        .peer_secret
        .iter()
        .map(|secret| (api::HEADER_PEER_SECRET, secret.clone()))
        .collect();
    let sent = crate::http::send_limited(
        &app.probe,
        addr,
        Method::POST,
        api::PATH_HELLO,
        &headers,
        crate::http::full(frame),
        PROBE_TIMEOUT,
        SMALL_RPC_BYTES_MAX,
    )
    .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(_) => return Ok(None),
    };
    if answer.status != StatusCode::OK {
        return Err(format!(
            "{addr} answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    let (_, hello): (_, Hello) = wire::decode(&answer.body).map_err(|e| e.to_string())?;
    Ok(Some(hello))
}

/// `POST /cluster/learners`: adds a node as a learner once it answers as that node; with
/// `force`, adds it even if it does not answer yet.
pub async fn add_learner(
    app: &App,
    request: hyper::Request<Incoming>,
    path_and_query: &str,
) -> Answer {
    let learner: AddLearner = match decode_json(request, SMALL_RPC_BYTES_MAX).await {
        Ok(learner) => learner,
        Err(answer) => return answer,
    };
    if let Err(e) = check_addr(&learner.addr) {
        return error(StatusCode::BAD_REQUEST, format!("{e:#}"));
    }
    if let Some(answer) = unless_leader(app, path_and_query) {
        return answer;
    }
    let reachable = match probe(app, &learner.addr).await {
        Ok(Some(hello)) if hello.id != learner.id => {
            return error(
                StatusCode::CONFLICT,
                format!(
                    "{} is node {}, not node {}",
                    learner.addr, hello.id, learner.id
                ),
            );
        }
        Ok(Some(_)) => true,
        Ok(None) => false,
        Err(e) => return error(StatusCode::CONFLICT, e),
    };
    if !reachable && !learner.force {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "node {} at {} is not reachable yet: start it (serve --id {} \
                 --initial-cluster-state existing) and try again, or add it with force \
                 (it catches up once it answers)",
                learner.id, learner.addr, learner.id
            ),
        );
    }
    let node = BasicNode {
        addr: learner.addr.clone(),
    };
    // Not openraft's blocking wait: it waits without a bound, and for a lag of up to its
    // `replication_lag_threshold` (5000 entries), which is not what `change-members` asks.
    let written = match app.raft.add_learner(learner.id, node, false).await {
        Ok(written) => written,
        Err(e) => return write_error(app, e, path_and_query),
    };
    tracing::info!(id = learner.id, addr = %learner.addr, reachable, "learner added");
    // The reply comes once the learner may be promoted, or says how far it is.
    let behind = if reachable {
        catch_up(app, learner.id).await.err()
    } else {
        Some(format!(
            "node {} is not reachable yet; it catches up once it answers",
            learner.id
        ))
    };
    let status = if behind.is_none() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    json(status, &membership_reply(&written, behind))
}

/// Waits until learner `id` may be promoted (see `lagging`), for at most
/// [`LEARNER_CATCH_UP_WAIT`]; else says how far it is.
async fn catch_up(app: &App, id: u64) -> Result<(), String> {
    let learner = BTreeSet::from([id]);
    let deadline = tokio::time::Instant::now() + LEARNER_CATCH_UP_WAIT;
    let mut rx = app.raft.metrics();
    loop {
        let Some(why) = lagging(&rx.borrow_watched(), &learner) else {
            return Ok(());
        };
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => {
                return Err(format!(
                    "added, but not caught up within {LEARNER_CATCH_UP_WAIT:?}: {why}"
                ));
            }
        }
    }
}

/// `DELETE /cluster/learners/ID`: removes a learner (a voter must be made a learner first, by
/// a change of the voters).
pub async fn remove_learner(app: &App, id: u64, path_and_query: &str) -> Answer {
    if let Some(answer) = unless_leader(app, path_and_query) {
        return answer;
    }
    let m = metrics(app);
    let membership = m.membership_config.membership();
    if membership.get_node(&id).is_none() {
        return error(StatusCode::NOT_FOUND, format!("node {id} is not a member"));
    }
    if membership.voter_ids().any(|v| v == id) {
        return error(
            StatusCode::CONFLICT,
            format!("node {id} is a voter: change the voters without it first"),
        );
    }
    match app
        .raft
        .change_membership(Change::RemoveNodes(BTreeSet::from([id])), false)
        .await
    {
        Ok(written) => {
            tracing::info!(id, "learner removed");
            json(StatusCode::OK, &membership_reply(&written, None))
        }
        Err(e) => write_error(app, e, path_and_query),
    }
}

/// Why the learners among `voters` may not be promoted yet, if one may not.
fn lagging(m: &RaftMetrics<KvConfig>, voters: &BTreeSet<u64>) -> Option<String> {
    let membership = m.membership_config.membership();
    let current: BTreeSet<u64> = membership.voter_ids().collect();
    let last = m.last_log_index.unwrap_or(0);
    for id in voters.difference(&current) {
        if membership.get_node(id).is_none() {
            return Some(format!(
                "node {id} is not a member: add it as a learner first"
            ));
        }
        let matched = m
            .replication
            .as_ref()
            .and_then(|r| r.get(id).cloned().flatten())
            .map(|id| id.index);
        if matched.is_none_or(|matched| matched + PROMOTE_LAG_ENTRIES_MAX < last) {
            return Some(format!(
                "learner {id} has not caught up: replicated to index {matched:?} of {last} (at \
                 most {PROMOTE_LAG_ENTRIES_MAX} behind may be promoted); is it reachable? \
                 GET /cluster/members shows its progress"
            ));
        }
    }
    None
}

/// `POST /cluster/members`: makes exactly these the voters, once every learner among them has
/// caught up.
pub async fn change_members(
    app: &App,
    request: hyper::Request<Incoming>,
    path_and_query: &str,
) -> Answer {
    let change: ChangeMembers = match decode_json(request, SMALL_RPC_BYTES_MAX).await {
        Ok(change) => change,
        Err(answer) => return answer,
    };
    if let Some(answer) = unless_leader(app, path_and_query) {
        return answer;
    }
    let voters: BTreeSet<u64> = change.voters.into_iter().collect();
    if voters.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "a cluster needs at least one voter",
        );
    }
    if let Some(why) = lagging(&metrics(app), &voters) {
        return error(StatusCode::CONFLICT, why);
    }
    match app.raft.change_membership(voters.clone(), false).await {
        Ok(written) => {
            tracing::info!(?voters, "voters changed");
            json(StatusCode::OK, &membership_reply(&written, None))
        }
        Err(e) => write_error(app, e, path_and_query),
    }
}

/// `POST /cluster/leader`: the leader hands leadership to voter `to` and the answer waits
/// until `to` leads.
pub async fn transfer_leader(
    app: &App,
    request: hyper::Request<Incoming>,
    path_and_query: &str,
) -> Answer {
    let transfer: TransferLeader = match decode_json(request, SMALL_RPC_BYTES_MAX).await {
        Ok(transfer) => transfer,
        Err(answer) => return answer,
    };
    if let Some(answer) = unless_leader(app, path_and_query) {
        return answer;
    }
    let m = metrics(app);
    if !m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == transfer.to)
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!("node {} is not a voter", transfer.to),
        );
    }
    if transfer.to != app.id() {
        if let Err(e) = app.raft.trigger().transfer_leader(transfer.to).await {
            return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
        }
        tracing::info!(to = transfer.to, "leadership transfer started");
    }
    let mut watch = app.raft.metrics();
    let waited = tokio::time::timeout(TRANSFER_TIMEOUT, async {
        loop {
            let now = watch.borrow_watched().clone();
            if now.current_leader == Some(transfer.to) && now.current_term > m.current_term
                || transfer.to == app.id()
            {
                return (now.current_term, true);
            }
            if watch.changed().await.is_err() {
                return (now.current_term, false);
            }
        }
    })
    .await;
    match waited {
        Ok((term, true)) => json(
            StatusCode::OK,
            &LeaderReply {
                leader: transfer.to,
                term,
            },
        ),
        _ => error(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "node {} did not take over within {TRANSFER_TIMEOUT:?}; GET /status on it says why",
                transfer.to
            ),
        ),
    }
}
