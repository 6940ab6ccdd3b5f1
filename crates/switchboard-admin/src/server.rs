//! [`AdminServer`]: the routes, the token, the listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::metrics;
use crate::source::AdminSource;

/// Where the admin server listens and who may use it; each field says its
/// default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// The address (default `127.0.0.1:0`: loopback, a free port). An
    /// address other than loopback needs a `token`.
    pub addr: SocketAddr,
    /// The token every control needs (and, off loopback, every read),
    /// sent as `Authorization: Bearer <token>` (default none: reads on
    /// loopback only, controls off).
    pub token: Option<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
        }
    }
}

/// Why an admin server did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// Bound off loopback without a token.
    #[error("an admin server on {0} (not loopback) needs a token")]
    NeedsToken(SocketAddr),
    /// The listener could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running admin server; dropping it (or [`shutdown`](Self::shutdown))
/// stops it.
#[derive(Debug)]
pub struct AdminServer {
    addr: SocketAddr,
    stop: CancellationToken,
}

struct Shared {
    source: Arc<dyn AdminSource>,
    token: Option<String>,
    /// Reads need no token (bound to loopback).
    open_reads: bool,
    started: Instant,
}

/// The page: one file, styles and script inline, nothing fetched from
/// elsewhere (it works offline).
const PAGE: &str = include_str!("../assets/index.html");

/// How often the live stream sends a snapshot.
const EVENTS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The largest request body (a kick's reason, a notice): 4 KiB.
const MAX_BODY: usize = 4096;
/// The most bots one request starts.
pub const MAX_BOTS_PER_REQUEST: usize = 500;

impl AdminServer {
    /// Listens on `config.addr` and serves `source` on the current tokio
    /// runtime.
    pub async fn spawn(
        config: AdminConfig,
        source: Arc<dyn AdminSource>,
    ) -> Result<AdminServer, AdminError> {
        Self::start(config, source, &tokio::runtime::Handle::current())
    }

    /// Listens on `config.addr` and serves `source` on `runtime`, from
    /// code that is not async (a server's `bind`).
    pub fn start(
        config: AdminConfig,
        source: Arc<dyn AdminSource>,
        runtime: &tokio::runtime::Handle,
    ) -> Result<AdminServer, AdminError> {
        let loopback = config.addr.ip().is_loopback();
        if !loopback && config.token.as_deref().is_none_or(str::is_empty) {
            return Err(AdminError::NeedsToken(config.addr));
        }
        let listen_error = |source| AdminError::Listen {
            addr: config.addr,
            source,
        };
        let listener = std::net::TcpListener::bind(config.addr).map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(listen_error)?
        };
        let addr = listener.local_addr().map_err(listen_error)?;
        let shared = Arc::new(Shared {
            source,
            token: config.token.filter(|t| !t.is_empty()),
            open_reads: loopback,
            started: Instant::now(),
        });
        let app = Router::new()
            .route("/", get(page))
            .route("/api/events", get(events))
            .route("/api/overview", get(overview))
            .route("/api/clients", get(clients))
            .route("/api/places", get(places))
            .route("/api/clients/{id}/kick", post(kick))
            .route("/api/log", get(log))
            .route("/api/notice", post(notice))
            .route("/api/bots", post(spawn_bots).delete(remove_bots))
            .route("/metrics", get(prometheus))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(shared);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        runtime.spawn(async move {
            let serve =
                axum::serve(listener, app).with_graceful_shutdown(stopped.cancelled_owned());
            if let Err(err) = serve.await {
                tracing::warn!(%err, "admin server failed");
            }
        });
        tracing::info!(%addr, "admin server listening");
        Ok(AdminServer { addr, stop })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What a request may do, by its token.
enum Access {
    Granted,
    Refused(Response),
}

impl Shared {
    /// The mode's snapshot, with the process's CPU and memory added.
    async fn snapshot(&self) -> crate::source::Snapshot {
        let mut snapshot = self.source.snapshot().await;
        snapshot.counters.extend(metrics::process_counters());
        snapshot
    }

    /// Whether `headers` carry the token (compared in constant time).
    fn has_token(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return false;
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        bool::from(given.as_bytes().ct_eq(token.as_bytes()))
    }

    fn read(&self, headers: &HeaderMap) -> Access {
        if self.open_reads || self.has_token(headers) {
            Access::Granted
        } else {
            Access::Refused(refuse(StatusCode::UNAUTHORIZED, "a token is needed"))
        }
    }

    fn control(&self, headers: &HeaderMap) -> Access {
        if self.token.is_none() {
            let why = "no admin token is configured: controls are off";
            return Access::Refused(refuse(StatusCode::FORBIDDEN, why));
        }
        if self.has_token(headers) {
            Access::Granted
        } else {
            Access::Refused(refuse(StatusCode::UNAUTHORIZED, "a valid token is needed"))
        }
    }
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({ "error": why }))).into_response()
}

/// The page holds no data (it fetches it with the token the operator
/// types), so it is served to anyone who can reach the port.
async fn page() -> Response {
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
async fn events(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    if let Access::Refused(response) = shared.read(&headers) {
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

async fn overview(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Access::Refused(response) = shared.read(&headers) {
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

async fn clients(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Access::Refused(response) = shared.read(&headers) {
        return response;
    }
    Json(shared.source.snapshot().await.clients).into_response()
}

async fn places(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Access::Refused(response) = shared.read(&headers) {
        return response;
    }
    Json(shared.source.snapshot().await.places_or_groups()).into_response()
}

#[derive(Deserialize)]
struct KickBody {
    #[serde(default)]
    reason: String,
}

async fn kick(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Option<Json<KickBody>>,
) -> Response {
    if let Access::Refused(response) = shared.control(&headers) {
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

async fn prometheus(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Access::Refused(response) = shared.read(&headers) {
        return response;
    }
    let snapshot = shared.snapshot().await;
    let uptime = shared.started.elapsed().as_secs_f64();
    let text = metrics::render(shared.source.mode(), uptime, &snapshot);
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
struct NoticeBody {
    text: String,
}

async fn notice(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Option<Json<NoticeBody>>,
) -> Response {
    if let Access::Refused(response) = shared.control(&headers) {
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
struct BotsBody {
    count: usize,
    #[serde(default)]
    script: String,
    #[serde(default)]
    place: Option<String>,
}

async fn spawn_bots(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Option<Json<BotsBody>>,
) -> Response {
    if let Access::Refused(response) = shared.control(&headers) {
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

async fn remove_bots(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Access::Refused(response) = shared.control(&headers) {
        return response;
    }
    Json(json!({ "removed": shared.source.remove_bots().await })).into_response()
}

#[derive(Deserialize)]
struct LogQuery {
    /// `warn`: warnings only.
    #[serde(default)]
    level: Option<String>,
    /// Lines containing this (case-insensitive).
    #[serde(default)]
    q: Option<String>,
}

async fn log(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(query): Query<LogQuery>,
) -> Response {
    if let Access::Refused(response) = shared.read(&headers) {
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
