//! [`AdminServer`]: its settings, its builder, the router over the routes
//! (`crate::routes`), and the listener it serves on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use switchboard::lifecycle::{ListenOptions, Running, StopHandle};
use switchboard::session::BackoffPolicy;
use switchboard::socket::BindScope;
use tokio_util::sync::CancellationToken;

use crate::access::{Access, Caller, Guard, MIN_TOKEN_CHARS};
use crate::history::History;
use crate::source::AdminSource;
use crate::{listener, metrics, recording, routes};

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
    pub(crate) started: Instant,
    /// What the sampler saw, a point a second and a point a minute.
    pub(crate) history: std::sync::Mutex<History>,
}

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
            .route("/", get(routes::page))
            .route("/api/events", get(routes::events))
            .route("/api/overview", get(routes::overview))
            .route("/api/clients", get(routes::clients))
            .route("/api/places", get(routes::places))
            .route("/api/clients/{id}/kick", post(routes::kick))
            .route("/api/log", get(routes::log))
            .route("/api/history", get(crate::history::route))
            .route("/api/notice", post(routes::notice))
            .route(
                "/api/bots",
                post(routes::spawn_bots).delete(routes::remove_bots),
            )
            .route("/api/recording", get(recording::status))
            .route("/api/recording/start", post(recording::start))
            .route("/api/recording/stop", post(recording::stop))
            .route("/api/recording/file", get(recording::download))
            .route("/metrics", get(routes::prometheus))
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
