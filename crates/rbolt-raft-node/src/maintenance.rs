//! The maintenance routes of the client API: the NOSPACE alarms (`GET /maintenance/alarms`,
//! `POST /maintenance/alarms/disarm`) and the online vacuum of a node's files
//! (`POST /maintenance/vacuum`); see [`crate::space`].

use crate::api;
use crate::app::{Answer, App, error, json, read_state, write_error};
use crate::kv::{self, Request};
use hyper::StatusCode;

/// `GET /maintenance/alarms`: the alarms as this node has applied them.
pub async fn alarms(app: &App) -> Answer {
    match read_state(app, kv::alarms).await {
        Ok(nospace) => json(
            StatusCode::OK,
            &api::Alarms {
                nospace,
                disarmed_at: None,
            },
        ),
        Err(answer) => answer,
    }
}

/// `POST /maintenance/alarms/disarm`: clears every alarm through the leader; answers the
/// alarms it cleared and the index of the disarm.
pub async fn disarm(app: &App, path_and_query: &str) -> Answer {
    let before = match read_state(app, kv::alarms).await {
        Ok(alarms) => alarms,
        Err(answer) => return answer,
    };
    match app.raft.client_write(Request::DisarmAlarms).await {
        Ok(written) => {
            tracing::warn!(index = written.log_id.index, alarms = ?before, "alarms disarmed");
            json(
                StatusCode::OK,
                &api::Alarms {
                    nospace: before,
                    disarmed_at: Some(written.log_id.index),
                },
            )
        }
        Err(e) => write_error(app, e, path_and_query),
    }
}

/// `POST /maintenance/vacuum`: the online vacuum of this node's state file, then of its log
/// file (one at a time per node: `409` while one runs). Each step is one short commit, so
/// applies and appends interleave with it; the files end shorter by the free pages their
/// ends held, which go back to the filesystem.
pub async fn vacuum(app: &App) -> Answer {
    use std::sync::atomic::Ordering as O;
    if app.ctx.vacuuming.swap(true, O::AcqRel) {
        return error(StatusCode::CONFLICT, "a vacuum of this node is running");
    }
    let state = app.state.db();
    let log = app.log.clone();
    let done = tokio::task::spawn_blocking(move || {
        let one = |db: &rbolt::Db| -> rbolt::Result<api::VacuumFile> {
            let report = db.vacuum(rbolt::VacuumOptions::default(), |_| {
                std::ops::ControlFlow::Continue(())
            })?;
            Ok(api::VacuumFile {
                bytes_before: report.file_len_before,
                bytes_after: report.file_len,
                steps: report.steps,
                elapsed_ms: report.elapsed.as_millis() as u64,
            })
        };
        Ok::<_, rbolt::Error>((one(&state)?, one(log.db())?))
    })
    .await;
    app.ctx.vacuuming.store(false, O::Release);
    match done {
        Ok(Ok((state, log))) => {
            tracing::info!(?state, ?log, "vacuum done");
            json(
                StatusCode::OK,
                &api::VacuumReply {
                    id: app.id(),
                    state,
                    log,
                },
            )
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("vacuum: {e}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("vacuum: {e}")),
    }
}
