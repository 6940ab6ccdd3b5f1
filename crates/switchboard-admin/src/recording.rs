//! The session's recording from the admin page: its status (a read), and
//! starting, stopping and downloading it (controls: a recording holds
//! everything players sent). A recording starts with the server
//! (`--record FILE`) or from here, while the game runs: then it begins with
//! a snapshot of the server's core and game, in a file the server names
//! (`--record-dir`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::access::{refuse, Access, Caller};
use crate::server::AdminState;

/// `GET /api/recording`: where the recording stands (its file's name,
/// not its path).
pub(crate) async fn status(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    let Some(status) = shared.source.recording() else {
        return refuse(StatusCode::NOT_FOUND, "this server records nothing");
    };
    let file = status
        .path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned());
    let bytes = std::fs::metadata(&status.path).map(|m| m.len()).ok();
    Json(json!({
        "file": file,
        "recording": status.recording,
        "complete": status.complete,
        "stopped": status.stopped,
        "bytes": bytes,
    }))
    .into_response()
}

/// `POST /api/recording/start`: starts one now (refused, with why, while
/// one runs or where the mode cannot).
pub(crate) async fn start(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
        return response;
    }
    match shared.source.start_recording().await {
        Ok(file) => {
            tracing::info!(%file, "recording started by the operator");
            Json(json!({ "started": true, "file": file })).into_response()
        }
        Err(why) => refuse(StatusCode::CONFLICT, &why),
    }
}

/// `POST /api/recording/stop`: stops it; the game goes on.
pub(crate) async fn stop(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
        return response;
    }
    if shared.source.stop_recording() {
        tracing::info!("recording stopped by the operator");
        Json(json!({ "stopped": true })).into_response()
    } else {
        refuse(StatusCode::CONFLICT, "nothing is being recorded")
    }
}

/// `GET /api/recording/file`: the complete file, streamed.
pub(crate) async fn download(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
        return response;
    }
    let Some(status) = shared.source.recording() else {
        return refuse(StatusCode::NOT_FOUND, "this server records nothing");
    };
    if !status.complete {
        return refuse(
            StatusCode::CONFLICT,
            "the recording is not complete: stop it first",
        );
    }
    let file = match tokio::fs::File::open(&status.path).await {
        Ok(file) => file,
        Err(err) => {
            tracing::warn!(%err, "the recording could not be opened");
            return refuse(StatusCode::NOT_FOUND, "the recording's file is gone");
        }
    };
    let len = match file.metadata().await {
        Ok(meta) => meta.len(),
        Err(_) => return refuse(StatusCode::NOT_FOUND, "the recording's file is gone"),
    };
    let name = status.path.file_name().map_or("session.swrec".into(), |n| {
        n.to_string_lossy().replace('"', "")
    });
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, len.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::new(file)),
    )
        .into_response()
}
