//! The NOSPACE alarm, raised through the log: each node checks its space
//! ([`Space::check`](crate::space::Space::check)) every [`CHECK_EVERY`] and, while it is short
//! and its alarm is not raised, proposes [`Request::RaiseAlarm`] on the leader (here when this
//! node leads, else through the leader's [`api::PATH_ALARM`]). What the alarm stops and how it
//! is cleared: [`crate::space`].

use crate::api::{self, AlarmRaise};
use crate::app::App;
use crate::kv::{self, Request};
use crate::space::{CHECK_EVERY, RAISE_TIMEOUT};
use crate::wire;
use hyper::{Method, StatusCode};
use openraft::type_config::async_runtime::WatchReceiver;
use std::sync::Arc;
use std::time::Instant;

/// Checks this node's space every [`CHECK_EVERY`] and raises its NOSPACE alarm through the
/// leader while it is short and the alarm is not raised; keeps the alarm gauge current.
pub async fn watch(app: Arc<App>) {
    let mut last_raise: Option<Instant> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(CHECK_EVERY) => {}
            () = app.ctx.space.short.notified() => {}
        }
        if app.ctx.stopped().is_some() {
            return;
        }
        let checked = {
            let app = Arc::clone(&app);
            tokio::task::spawn_blocking(move || {
                let shortage = app.ctx.space.check(&app.state);
                let alarms = kv::alarms(&app.state).unwrap_or_default();
                (shortage, alarms)
            })
            .await
        };
        let Ok((shortage, alarms)) = checked else {
            continue;
        };
        app.ctx
            .metrics
            .alarm_active
            .set(i64::from(!alarms.is_empty()));
        let Some(reason) = shortage else { continue };
        if alarms.contains_key(&app.id())
            || last_raise.is_some_and(|at| at.elapsed() < CHECK_EVERY * 2)
        {
            continue;
        }
        last_raise = Some(Instant::now());
        let raised = tokio::time::timeout(RAISE_TIMEOUT, raise(&app, &reason)).await;
        match raised.unwrap_or_else(|_| Err(format!("no answer within {RAISE_TIMEOUT:?}"))) {
            Ok(()) => tracing::warn!(%reason, "NOSPACE alarm raised for this member"),
            Err(e) => {
                if app.ctx.warn_now("raise alarm") {
                    tracing::warn!(%reason, error = %e, "raising the NOSPACE alarm failed; retrying");
                }
            }
        }
    }
}

/// Raises this member's alarm: proposed here if this node leads, else sent to the leader.
async fn raise(app: &App, reason: &str) -> Result<(), String> {
    let metrics = app.raft.metrics().borrow_watched().clone();
    let Some(leader) = metrics.current_leader else {
        return Err("no leader is known".to_owned());
    };
    if leader == app.id() {
        return propose_raise(app, app.id(), reason.to_owned()).await;
    }
    let Some(node) = metrics.membership_config.membership().get_node(&leader) else {
        return Err(format!("leader {leader} is not in the membership"));
    };
    let message = AlarmRaise {
        member: app.id(),
        reason: reason.to_owned(),
    };
    let frame = wire::encode(&app.ctx.cluster(), app.id(), &message).map_err(|e| e.to_string())?;
    let headers: Vec<(&str, String)> = app
        .access
        .peer_secret
        .iter()
        .map(|secret| (api::HEADER_PEER_SECRET, secret.clone()))
        .collect();
    let answer = crate::http::send_limited(
        &app.probe,
        &node.addr,
        Method::POST,
        api::PATH_ALARM,
        &headers,
        crate::http::full(frame),
        RAISE_TIMEOUT,
        crate::limits::SMALL_RPC_BYTES_MAX,
    )
    .await
    .map_err(|e| e.to_string())?;
    if answer.status != StatusCode::OK {
        return Err(format!(
            "leader {leader} answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    Ok(())
}

/// The longest reason an alarm carries into the log, in bytes.
pub const ALARM_REASON_BYTES_MAX: usize = 1024;

/// Proposes member `member`'s alarm on this node, which must lead; waits at most
/// [`RAISE_TIMEOUT`].
pub async fn propose_raise(app: &App, member: u64, mut reason: String) -> Result<(), String> {
    if reason.len() > ALARM_REASON_BYTES_MAX {
        let mut end = ALARM_REASON_BYTES_MAX;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    let written = tokio::time::timeout(
        RAISE_TIMEOUT,
        app.raft
            .client_write(Request::RaiseAlarm { member, reason }),
    )
    .await
    .map_err(|_| format!("not committed within {RAISE_TIMEOUT:?}"))?;
    written.map(drop).map_err(|e| e.to_string())
}
