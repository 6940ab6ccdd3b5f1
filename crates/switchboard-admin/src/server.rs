//! [`AdminServer`]: the routes, the token, the listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use switchboard::lifecycle::{ListenOptions, Running, StopHandle};
use switchboard::session::BackoffPolicy;
use switchboard::socket::BindScope;
use tokio_util::sync::CancellationToken;

use crate::access::{refuse, Access, Caller, Guard, MIN_TOKEN_CHARS};
use crate::history::History;
use crate::source::AdminSource;
use crate::{listener, metrics, recording};

/// Who may use the admin server, and its limits; each field says its
/// default. Where it listens is its builder's (`bind`, `port`): off
/// loopback it needs a `token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// The token every control needs (and, off loopback, every read),
    /// sent as `Authorization: Bearer <token>` (default none: reads on
    /// loopback only, controls off). At least [`MIN_TOKEN_CHARS`]
    /// characters, or the server does not start.
    pub token: Option<String>,
    /// Host names (the `Host` header) requests may use besides IP
    /// addresses and `localhost` (default none). Any other name is refused
    /// with 421: a web page that rebinds its own name to this address
    /// cannot read the API from the operator's browser.
    pub allowed_hosts: Vec<String>,
    /// Connections open at once (default 64); more are closed at accept,
    /// but for `reserved_for_token` more kept for the operator. The admin
    /// port shares the process's descriptors with the game's. A request
    /// without the right token is answered and its connection closed, so
    /// that keep-alive connections without it hold no place between
    /// requests.
    pub max_connections: usize,
    /// Connections open at once from one address (an IPv6 /64 counts as
    /// one; default 8: eight addresses are needed to hold every place);
    /// more are closed at accept.
    pub max_connections_per_address: usize,
    /// Places past `max_connections` kept for requests that carry a token
    /// (default 8): on one of them a request with no token is answered 503
    /// with `Retry-After` and closed, one with a token is served.
    pub reserved_for_token: usize,
    /// How long a request's headers may take to arrive (default 5 s); past
    /// it the connection is closed.
    pub header_read_timeout: Duration,
    /// A connection that moves no byte for this long is closed (default
    /// 30 s; the live page's stream sends every second).
    pub idle_timeout: Duration,
    /// Wrong tokens one address may send before it must wait (default 5);
    /// past it each wrong one doubles its wait (`token_backoff`: 1 s, up to
    /// 60 s), during which its requests get 429 without their token being
    /// compared. A right token clears its count.
    pub free_token_guesses: u32,
    /// The waits after wrong tokens.
    pub token_backoff: BackoffPolicy,
    /// How it speaks to other machines (default: HTTPS with the server's
    /// own identity, as the game's ports; see
    /// [`TlsSettings`](switchboard::tls::TlsSettings)): off loopback the
    /// token would otherwise cross the network in the clear. A plain
    /// request from another machine is answered 403 saying so. The TLS
    /// handshake counts within `header_read_timeout`.
    pub tls: switchboard::tls::TlsSettings,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            token: None,
            allowed_hosts: Vec::new(),
            max_connections: 64,
            max_connections_per_address: 8,
            reserved_for_token: 8,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            free_token_guesses: 5,
            token_backoff: BackoffPolicy::default(),
            tls: switchboard::tls::TlsSettings::default(),
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
    /// The token is shorter than [`MIN_TOKEN_CHARS`].
    #[error("an admin token needs at least {MIN_TOKEN_CHARS} characters")]
    WeakToken,
    /// The listener could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// An admin server bound and ready to [`run`](Self::run), made by
/// [`AdminBuilder::build`]; [`AdminServer::builder`] starts describing one.
pub struct AdminServer {
    listener: tokio::net::TcpListener,
    app: Router,
    state: Arc<AdminState>,
    config: AdminConfig,
    tls: Option<switchboard::tls::TlsServer>,
    stop: CancellationToken,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("listener", &self.listener)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A handle to a running admin server: its address, and the way to stop it.
#[derive(Debug, Clone)]
pub struct AdminHandle {
    addr: SocketAddr,
    stop: CancellationToken,
}

impl AdminHandle {
    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

impl StopHandle for AdminHandle {
    fn stop(&self) {
        self.shutdown();
    }
}

/// An admin server running in this process: reads like its
/// [`AdminHandle`]; dropping it (or `shutdown().await`) stops it.
pub type RunningAdmin = Running<AdminHandle, ()>;

/// An admin server about to start, made by [`AdminServer::builder`]: the
/// same shape as every server's builder (`bind`, `port`, `listen`,
/// `config`, then `build` or `spawn`).
pub struct AdminBuilder {
    source: Arc<dyn AdminSource>,
    config: AdminConfig,
    listen: ListenOptions,
}

impl std::fmt::Debug for AdminBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminBuilder")
            .field("source", &self.source.mode())
            .field("config", &self.config)
            .field("listen", &self.listen)
            .finish()
    }
}

pub(crate) struct AdminState {
    pub(crate) source: Arc<dyn AdminSource>,
    guard: Guard,
    started: Instant,
    /// What the sampler saw, a point a second and a point a minute.
    pub(crate) history: std::sync::Mutex<History>,
}

/// The page: one file, styles and script inline, nothing fetched from
/// elsewhere (it works offline).
const PAGE: &str = include_str!("../assets/index.html");

/// How often the live stream sends a snapshot, and the history samples.
pub(crate) const EVENTS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The largest request body (a kick's reason, a notice): 4 KiB.
const MAX_BODY: usize = 4096;
/// The most bots one request starts.
pub const MAX_BOTS_PER_REQUEST: usize = 500;

impl AdminServer {
    /// Starts describing an admin server for `source`: loopback, a free
    /// port, default settings, until told otherwise.
    pub fn builder(source: Arc<dyn AdminSource>) -> AdminBuilder {
        AdminBuilder {
            source,
            config: AdminConfig::default(),
            listen: ListenOptions::default(),
        }
    }

    /// Serves until `shutdown` completes or its handle stops it.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let AdminServer {
            listener,
            app,
            state,
            config,
            tls,
            stop,
        } = self;
        let serving = async {
            tokio::join!(
                crate::history::sample(state, stop.clone()),
                listener::serve(listener, app, config, tls, stop.clone()),
            );
        };
        tokio::select! {
            _ = serving => {}
            _ = shutdown => stop.cancel(),
            _ = stop.cancelled() => {}
        }
    }
}

impl AdminBuilder {
    /// Who may use it, and its limits.
    pub fn config(mut self, config: AdminConfig) -> Self {
        self.config = config;
        self
    }

    switchboard::listen_setters!("The port (default 0: a free one, read with `local_addr`). Off loopback the server needs a token.");

    /// Binds, and returns the server and its handle, for tokio code that
    /// runs it itself (`server.run(stop).await`).
    pub fn build(self) -> Result<(AdminServer, AdminHandle), AdminError> {
        let AdminBuilder {
            source,
            config,
            listen,
        } = self;
        let addr = listen.addr();
        let loopback = listen.scope == BindScope::Loopback;
        let token = config.token.clone().filter(|t| !t.is_empty());
        if !loopback && token.is_none() {
            return Err(AdminError::NeedsToken(addr));
        }
        if token
            .as_ref()
            .is_some_and(|t| t.chars().count() < MIN_TOKEN_CHARS)
        {
            return Err(AdminError::WeakToken);
        }
        let listen_error = |source| AdminError::Listen { addr, source };
        let listener = switchboard::lifecycle::tcp_listener(addr).map_err(listen_error)?;
        let addr = listener.local_addr().map_err(listen_error)?;
        let tls = config.tls.for_address(addr).map_err(listen_error)?;
        let state = Arc::new(AdminState {
            source,
            guard: Guard::new(
                token,
                loopback,
                config.allowed_hosts.clone(),
                config.free_token_guesses,
                config.token_backoff,
            ),
            started: Instant::now(),
            history: std::sync::Mutex::default(),
        });
        let app = Router::new()
            .route("/", get(page))
            .route("/api/events", get(events))
            .route("/api/overview", get(overview))
            .route("/api/clients", get(clients))
            .route("/api/places", get(places))
            .route("/api/clients/{id}/kick", post(kick))
            .route("/api/log", get(log))
            .route("/api/history", get(crate::history::route))
            .route("/api/notice", post(notice))
            .route("/api/bots", post(spawn_bots).delete(remove_bots))
            .route("/api/recording", get(recording::status))
            .route("/api/recording/start", post(recording::start))
            .route("/api/recording/stop", post(recording::stop))
            .route("/api/recording/file", get(recording::download))
            .route("/metrics", get(prometheus))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(state.clone());
        tracing::info!(%addr, https = tls.is_some(), "admin server listening");
        let stop = CancellationToken::new();
        let handle = AdminHandle {
            addr,
            stop: stop.clone(),
        };
        let server = AdminServer {
            listener,
            app,
            state,
            config,
            tls,
            stop,
        };
        Ok((server, handle))
    }

    /// Binds and serves on the background runtime (or the current one).
    pub fn spawn(self) -> Result<RunningAdmin, AdminError> {
        let (server, handle) = self.build()?;
        Ok(Running::spawn(handle, server.run(std::future::pending())))
    }
}

impl AdminState {
    /// The mode's snapshot, with the process's CPU and memory added.
    pub(crate) async fn snapshot(&self) -> crate::source::Snapshot {
        let mut snapshot = self.source.snapshot().await;
        snapshot.counters.extend(metrics::process_counters());
        snapshot
    }

    pub(crate) fn read(&self, caller: &Caller) -> Access {
        self.guard.read(caller)
    }

    pub(crate) fn control(&self, caller: &Caller) -> Access {
        self.guard.control(caller)
    }
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
async fn events(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
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

async fn overview(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
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

async fn clients(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
        return response;
    }
    Json(shared.source.snapshot().await.clients).into_response()
}

async fn places(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.read(&caller) {
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

async fn prometheus(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
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
struct NoticeBody {
    text: String,
}

async fn notice(
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
struct BotsBody {
    count: usize,
    #[serde(default)]
    script: String,
    #[serde(default)]
    place: Option<String>,
}

async fn spawn_bots(
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

async fn remove_bots(State(shared): State<Arc<AdminState>>, caller: Caller) -> Response {
    if let Access::Refused(response) = shared.control(&caller) {
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
