//! The admin server's routes: the page, the live stream, the reads
//! (overview, clients, places, log, metrics) and the controls (kick,
//! notice, bots), each checking the caller's access first.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::access::{refuse, Access, Caller};
use crate::metrics;
use crate::server::{AdminState, EVENTS_EVERY, MAX_BOTS_PER_REQUEST};

/// The page: one file, styles and script inline, nothing fetched from
/// elsewhere (it works offline).
const PAGE: &str = include_str!("../assets/index.html");

/// The page holds no data (it fetches it with the token the operator
/// types), so it is served to anyone who can reach the port.
pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
            ),
        ],
        PAGE,
    )
        .into_response()
}

/// Everything the page shows, as server-sent events: a `snapshot` event a
/// second (mode, uptime, counters, clients).
pub(crate) async fn events(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    let tick = tokio::time::interval(EVENTS_EVERY);
    let stream = futures::stream::unfold((shared, tick), |(shared, mut tick)| async move {
        tick.tick().await;
        let snapshot = shared.snapshot().await;
        let data = json!({
            "mode": shared.source.mode(),
            "uptime_seconds": shared.started.elapsed().as_secs_f64(),
            "counters": snapshot.counters,
            "places": snapshot.places_or_groups(),
            "clients": snapshot.clients,
        });
        let event = Event::default().event("snapshot").data(data.to_string());
        Some((Ok::<_, std::convert::Infallible>(event), (shared, tick)))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

pub(crate) async fn overview(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    let snapshot = shared.snapshot().await;
    Json(json!({
        "mode": shared.source.mode(),
        "uptime_seconds": shared.started.elapsed().as_secs_f64(),
        "clients": snapshot.clients.len(),
        "counters": snapshot.counters,
    }))
    .into_response()
}

pub(crate) async fn clients(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    Json(shared.source.snapshot().await.clients).into_response()
}

pub(crate) async fn places(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    Json(shared.source.snapshot().await.places_or_groups()).into_response()
}

#[derive(Deserialize)]
pub(crate) struct KickBody {
    #[serde(default)]
    reason: String,
}

pub(crate) async fn kick(
    State(shared): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<String>,
    body: Option<Json<KickBody>>,
) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
        return response;
    }
    let reason: String = body
        .map(|Json(b)| b.reason)
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    let reason = if reason.trim().is_empty() {
        "kicked by the operator".to_string()
    } else {
        reason
    };
    if shared.source.kick(id.clone(), reason.clone()).await {
        tracing::info!(client = %id, %reason, "kicked by the operator");
        Json(json!({ "kicked": id, "reason": reason })).into_response()
    } else {
        refuse(StatusCode::NOT_FOUND, "no such client")
    }
}

pub(crate) async fn prometheus(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    let snapshot = shared.snapshot().await;
    let text = metrics::render(shared.source.mode(), &snapshot);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

#[derive(Deserialize)]
pub(crate) struct NoticeBody {
    text: String,
}

pub(crate) async fn notice(
    State(shared): State<Arc<AdminState>>,
    caller: Caller,
    body: Option<Json<NoticeBody>>,
) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
        return response;
    }
    let text: String = body.map(|Json(b)| b.text).unwrap_or_default();
    let text: String = text.chars().take(500).collect();
    if text.trim().is_empty() {
        return refuse(StatusCode::BAD_REQUEST, "a notice needs a text");
    }
    match shared.source.notice(text).await {
        Ok(reached) => Json(json!({ "reached": reached })).into_response(),
        Err(why) => refuse(StatusCode::NOT_IMPLEMENTED, &why),
    }
}

#[derive(Deserialize)]
pub(crate) struct BotsBody {
    count: usize,
    #[serde(default)]
    script: String,
    #[serde(default)]
    place: Option<String>,
}

pub(crate) async fn spawn_bots(
    State(shared): State<Arc<AdminState>>,
    caller: Caller,
    body: Option<Json<BotsBody>>,
) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
        return response;
    }
    let Some(Json(body)) = body else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "a JSON body {\"count\": N, \"script\": ...}",
        );
    };
    if !(1..=MAX_BOTS_PER_REQUEST).contains(&body.count) {
        let why = format!("1 to {MAX_BOTS_PER_REQUEST} bots at a time");
        return refuse(StatusCode::BAD_REQUEST, &why);
    }
    match shared
        .source
        .spawn_bots(body.count, body.script, body.place)
        .await
    {
        Ok(spawned) => Json(json!({ "spawned": spawned })).into_response(),
        Err(why) => refuse(StatusCode::BAD_REQUEST, &why),
    }
}

pub(crate) async fn remove_bots(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
        return response;
    }
    Json(json!({ "removed": shared.source.remove_bots().await })).into_response()
}

#[derive(Deserialize)]
pub(crate) struct LogQuery {
    /// `warn`: warnings only.
    #[serde(default)]
    level: Option<String>,
    /// Lines containing this (case-insensitive).
    #[serde(default)]
    q: Option<String>,
}

pub(crate) async fn log(
    State(shared): State<Arc<AdminState>>,
    caller: Caller,
    Query(query): Query<LogQuery>,
) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    let warn_only = query.level.as_deref() == Some("warn");
    let needle = query.q.unwrap_or_default().to_lowercase();
    let lines: Vec<_> = shared
        .source
        .log()
        .into_iter()
        .filter(|l| !warn_only || l.level == "warn")
        .filter(|l| needle.is_empty() || l.text.to_lowercase().contains(&needle))
        .collect();
    Json(lines).into_response()
}
