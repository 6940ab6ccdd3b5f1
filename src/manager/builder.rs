//! One way to start a [`ServerManager`], whatever its kind: in the game's
//! process ([`ServerBuilder::spawn`]), dedicated on this thread
//! ([`ServerBuilder::run`]), as the child process a game's `LocalServer`
//! started ([`serve_if_child`](crate::process::serve_if_child) builds the
//! same builder), or inside the caller's own tokio code
//! ([`ServerBuilder::build`]). Ports are set the same way for TCP and
//! WebSocket; the listing, the shared sessions and checkpoints are
//! [`ManagerConfig`] fields, set with [`ServerBuilder::config`].

use crate::lifecycle::ListenOptions;
use std::io::Write;

use tokio_util::sync::CancellationToken;

use super::{GameLogic, ManagerConfig, ManagerHandle, ServerManager};
use crate::lifecycle::{Running, ServerError, StopHandle};
use crate::runtime;
use crate::socket::{BindScope, WebSocketConfig};

/// What [`ServerBuilder::run`] calls once the server listens.
type OnStart<'a> = Box<dyn FnOnce(&ManagerHandle) + 'a>;

/// A server about to start: its logic, its settings, where it listens.
/// Made by [`ServerManager::builder`].
///
/// ```
/// use switchboard::{BindScope, ServerManager};
/// # struct Rules;
/// # impl switchboard::GameLogic for Rules {
/// #     type Message = switchboard::Message;
/// #     type Command = ();
/// #     fn validate(&self, _: &switchboard::Request) -> Result<(), switchboard::Rejection> { Ok(()) }
/// #     fn apply(&mut self, _: switchboard::ClientId, _: (), _: &mut switchboard::Outbox) {}
/// # }
/// let server = ServerManager::builder(Rules)
///     .bind(BindScope::Loopback)
///     .port(0)
///     .websocket_port(0)
///     .spawn()?;
/// println!("TCP {}, WebSocket {:?}", server.local_addr(), server.websocket_addr());
/// let _rules: Rules = server.shutdown_blocking()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ServerBuilder<'a, L: GameLogic> {
    logic: L,
    config: ManagerConfig,
    listen: ListenOptions,
    websocket_port: Option<u16>,
    quic_port: Option<u16>,
    watch_stdin: bool,
    on_start: Option<OnStart<'a>>,
}

impl<L: GameLogic> std::fmt::Debug for ServerBuilder<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("listen", &self.listen)
            .field("websocket_port", &self.websocket_port)
            .field("quic_port", &self.quic_port)
            .finish()
    }
}

impl<L: GameLogic> ServerManager<L> {
    /// Starts describing a server for `logic`: loopback, a free port,
    /// default settings, until told otherwise.
    pub fn builder<'a>(logic: L) -> ServerBuilder<'a, L> {
        ServerBuilder {
            logic,
            config: ManagerConfig::default(),
            listen: ListenOptions::default(),
            websocket_port: None,
            quic_port: None,
            watch_stdin: false,
            on_start: None,
        }
    }
}

impl<'a, L: GameLogic> ServerBuilder<'a, L> {
    /// The server's settings (limits, sessions, the listing, shared
    /// sessions, checkpoints). A WebSocket port set with
    /// [`websocket_port`](Self::websocket_port) wins over
    /// `config.server.websocket`'s.
    pub fn config(mut self, config: ManagerConfig) -> Self {
        self.config = config;
        self
    }

    crate::listen_setters!("The TCP port (default 0: a free one, read with `local_addr`).");

    /// Also listen for WebSockets (browsers) on `port`, on the same
    /// interfaces (0: a free one, read with `websocket_addr`); the rest of
    /// its settings are `config.server.websocket`'s, or the defaults.
    pub fn websocket_port(mut self, port: u16) -> Self {
        self.websocket_port = Some(port);
        self
    }

    /// Also listen for QUIC on UDP `port`, on the same interfaces (0: a free
    /// one, read with `quic_addr`); the rest of its settings are
    /// `config.server.quic`'s, or the defaults.
    pub fn quic_port(mut self, port: u16) -> Self {
        self.quic_port = Some(port);
        self
    }

    /// The join password (`ManagerRules::password`), when given.
    pub fn password(mut self, password: Option<String>) -> Self {
        if password.is_some() {
            self.config.rules.password = password;
        }
        self
    }

    /// [`run`](Self::run) only: also stop on EOF or a `shutdown` line on
    /// stdin (how a parent process stops its child, and how a child
    /// notices its parent died).
    pub fn watch_stdin(mut self, watch: bool) -> Self {
        self.watch_stdin = watch;
        self
    }

    /// [`run`](Self::run) only: called once the server listens and its
    /// ready line is out, inside the server's runtime (it may spawn tasks
    /// there: an admin server, say).
    pub fn on_start(mut self, started: impl FnOnce(&ManagerHandle) + 'a) -> Self {
        self.on_start = Some(Box::new(started));
        self
    }

    fn settings(mut self) -> (L, ManagerConfig, BindScope, u16) {
        if let Some(port) = self.websocket_port {
            let websocket = self
                .config
                .server
                .websocket
                .get_or_insert_with(WebSocketConfig::default);
            websocket.port = port;
        }
        if let Some(port) = self.quic_port {
            self.config
                .server
                .quic
                .get_or_insert_with(crate::socket::quic::QuicConfig::default)
                .port = port;
        }
        (self.logic, self.config, self.listen.scope, self.listen.port)
    }

    /// Binds and returns the manager and its handle, for tokio code that
    /// runs it itself: `manager.run(stop_future).await` gives the logic
    /// back. Must be called inside a tokio runtime.
    pub fn build(self) -> std::io::Result<(ServerManager<L>, ManagerHandle)> {
        let (logic, config, scope, port) = self.settings();
        ServerManager::bind(scope, port, config, logic)
    }

    /// Binds and runs the server in this process, on the background
    /// runtime (or the current one): a game that hosts, or a test.
    pub fn spawn(self) -> std::io::Result<RunningServer<L>> {
        let runtime = runtime::handle();
        let (manager, handle) = {
            let _entered = runtime.enter();
            self.build()?
        };
        Ok(Running::spawn(handle, manager.run(std::future::pending())))
    }

    /// A dedicated server on this thread: its own runtime, the open-file
    /// limit raised, the ready line printed on stdout once it listens;
    /// serves until Ctrl-C or SIGTERM (or stdin, with
    /// [`watch_stdin`](Self::watch_stdin)), then shuts down gracefully and
    /// returns the logic. A panic in the logic is returned as
    /// [`ServerError::Panicked`].
    pub fn run(mut self) -> Result<L, ServerError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("switchboard-server")
            .enable_all()
            .build()?;
        let files = crate::process::raise_open_files_limit();
        let watch_stdin = self.watch_stdin;
        let on_start = self.on_start.take();
        let (logic, mut config, scope, port) = self.settings();
        // The game's port and its WebSocket port share one cap; 64 files are
        // left for the rest (logs, saves, Redis).
        let server = &mut config.server;
        crate::process::share_descriptors(
            files.soft,
            64,
            &mut [("game", &mut server.max_connections)],
        );
        runtime.block_on(async move {
            let (manager, handle) = ServerManager::bind(scope, port, config, logic)?;
            let stop = CancellationToken::new();
            if watch_stdin {
                let (stop, handle, tagged) = (stop.clone(), handle.clone(), handle.clone());
                crate::process::watch_parent(
                    move |reason| match reason {
                        Some(reason) => handle.shutdown_with(&reason),
                        None => stop.cancel(),
                    },
                    move |key, value| tagged.set_listing_tag(key, value),
                );
            }
            {
                let mut stdout = std::io::stdout().lock();
                writeln!(
                    stdout,
                    "{}",
                    crate::process::ready_line(handle.local_addr().port())
                )?;
                stdout.flush()?;
            }
            if let Some(started) = on_start {
                started(&handle);
            }
            let signals = stop.clone();
            tokio::spawn(async move {
                crate::process::wait_for_signal().await;
                signals.cancel();
            });
            // On a worker, not on this thread: every batch a connection's
            // reader hands over would otherwise wake this thread from its
            // own park (a futex and a context switch per batch: 2.1x the
            // relay's CPU per delivery at 100 clients, `docs/PERFORMANCE.md`).
            crate::lifecycle::finish(tokio::spawn(manager.run(stop.cancelled_owned()))).await
        })
    }
}

/// The logic alone is a server with the defaults: what
/// [`serve_if_child`](crate::process::serve_if_child) takes.
impl<L: GameLogic> From<L> for ServerBuilder<'_, L> {
    fn from(logic: L) -> Self {
        ServerManager::builder(logic)
    }
}

/// A server running in this process, as [`ServerBuilder::spawn`] started
/// it: reads like its [`ManagerHandle`] (address, stats, log, kick);
/// `shutdown` stops it and gives the logic back (see [`Running`]).
pub type RunningServer<L> = Running<ManagerHandle, L>;

impl StopHandle for ManagerHandle {
    fn stop(&self) {
        self.shutdown();
    }
}
