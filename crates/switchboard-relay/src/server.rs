//! The relay's IO: native players over Switchboard (channel 3), JSON players
//! over newline-delimited JSON, one hub task that owns the [`Relay`].

use std::net::SocketAddr;
use switchboard::lifecycle::ListenOptions;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::hub::{RelayClient, RelayStats};
use crate::json::JsonEvent;
use switchboard::lifecycle::{Running, StopHandle};
use switchboard::socket::{BindScope, EndpointStream};

mod config;
mod messages;

pub use config::RelayConfig;
pub use messages::{
    Batch, NotABool, RelayAction, RelayChannel, RelayHello, RelayMovesChannel, RelayOptions,
    RelayViewChannel, Relayed, RELAY_CHANNEL,
};

pub(crate) enum Control {
    Clients(oneshot::Sender<Vec<RelayClient>>),
    Stats(oneshot::Sender<RelayStats>),
    Kick {
        id: u32,
        reason: String,
        done: oneshot::Sender<bool>,
    },
    Notice {
        text: String,
        done: oneshot::Sender<usize>,
    },
    StartRecording {
        path: std::path::PathBuf,
        done: oneshot::Sender<Result<(), crate::StartRecordingError>>,
    },
}

/// A running relay: its addresses, snapshots, and the way to stop it.
#[derive(Debug, Clone)]
pub struct RelayHandle {
    native_addr: SocketAddr,
    tls: Option<switchboard::tls::TlsServer>,
    websocket_addr: Option<SocketAddr>,
    quic_addr: Option<SocketAddr>,
    json_addr: Option<SocketAddr>,
    server: switchboard::socket::EndpointHandle,
    stop: CancellationToken,
    control: mpsc::Sender<Control>,
    log: crate::log::RelayLog,
    recording: crate::record::Current,
}

impl RelayHandle {
    /// Where the recording (`RelayConfig::record`, or
    /// [`start_recording`](Self::start_recording)) stands, if there has
    /// been one.
    pub fn recording(&self) -> Option<switchboard::manager::RecordingStatus> {
        self.recording.get().map(|r| r.status())
    }

    /// Stops the recording (the relay goes on); `false` if there was none
    /// going.
    pub fn stop_recording(&self) -> bool {
        self.recording
            .get()
            .is_some_and(|r| r.stop("stopped by the operator"))
    }

    /// Starts recording the relay now, to `path` (created, or truncated):
    /// the file begins with a snapshot of the relay's core
    /// ([`Relay::snapshot`](crate::Relay::snapshot)). Refused, with why,
    /// while a recording runs or when the file cannot be created.
    pub async fn start_recording(
        &self,
        path: std::path::PathBuf,
    ) -> Result<(), crate::StartRecordingError> {
        let (done, answer) = oneshot::channel();
        let gone = |_| crate::StartRecordingError::Stopped;
        self.control
            .send(Control::StartRecording { path, done })
            .await
            .map_err(|_| crate::StartRecordingError::Stopped)?;
        answer.await.map_err(gone)?
    }

    /// The latest lines of the relay's log (joins, leaves, kicks, drops,
    /// notices), oldest first.
    pub fn log(&self) -> Vec<crate::RelayLogLine> {
        self.log.lines()
    }

    /// Where native clients connect.
    pub fn native_addr(&self) -> SocketAddr {
        self.native_addr
    }

    /// Where WebSocket clients (browsers) connect, when the listener is on
    /// (`config.server.websocket`): the same protocol as native clients.
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        self.websocket_addr
    }

    /// Where QUIC clients connect (`config.server.quic`; UDP), if anywhere.
    pub fn quic_addr(&self) -> Option<SocketAddr> {
        self.quic_addr
    }

    /// The listening end of its native, WebSocket and QUIC connections (for
    /// what the metrics say of every port:
    /// [`endpoint_counters`](switchboard::admin::endpoint_counters)).
    pub fn endpoint(&self) -> switchboard::socket::EndpointHandle {
        self.server.clone()
    }

    /// How a browser page reaches the QUIC port's WebTransport (its port
    /// and the certificate hashes to trust; `None` without it): see
    /// [`EndpointHandle::webtransport`](switchboard::socket::EndpointHandle::webtransport).
    pub fn webtransport(&self) -> Option<switchboard::socket::WebTransportOffer> {
        self.server.webtransport()
    }

    /// The TLS the relay's ports speak to other machines (`None`: plain,
    /// on loopback or by the operator's choice).
    pub fn tls(&self) -> Option<switchboard::tls::TlsServer> {
        self.tls.clone()
    }

    /// Where JSON clients connect, when the listener is on.
    pub fn json_addr(&self) -> Option<SocketAddr> {
        self.json_addr
    }

    /// Stops the relay.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// Whether it still runs.
    pub fn is_running(&self) -> bool {
        !self.stop.is_cancelled() && !self.control.is_closed()
    }

    /// A copy of every client (not live state).
    pub async fn clients(&self) -> Vec<RelayClient> {
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Clients(tx)).await.is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Disconnects player `id`, telling it `reason` (a native player gets
    /// close code 4000, a JSON one an error line); it leaves its zone at
    /// once. `false` if there is no such player.
    pub async fn kick(&self, id: u32, reason: &str) -> bool {
        let (done, rx) = oneshot::channel();
        let kick = Control::Kick {
            id,
            reason: reason.to_string(),
            done,
        };
        if self.control.send(kick).await.is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Sends every player `text` (native: a `Notice`; JSON: a line
    /// `{"type":"notice","text":...}`); returns how many it reached.
    pub async fn notice(&self, text: &str) -> usize {
        let (done, rx) = oneshot::channel();
        let notice = Control::Notice {
            text: text.to_string(),
            done,
        };
        if self.control.send(notice).await.is_err() {
            return 0;
        }
        rx.await.unwrap_or(0)
    }

    /// A copy of the counters.
    pub async fn stats(&self) -> RelayStats {
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Stats(tx)).await.is_err() {
            return RelayStats::default();
        }
        rx.await.unwrap_or_default()
    }
}

/// A relay bound to its ports, ready to [`run`](Self::run); or started at
/// once with [`RelayBuilder::spawn`].
pub struct RelayServer {
    native: EndpointStream,
    json: Option<TcpListener>,
    json_events: (mpsc::Sender<JsonEvent>, mpsc::Receiver<JsonEvent>),
    control: mpsc::Receiver<Control>,
    config: RelayConfig,
    stop: CancellationToken,
    log: crate::log::RelayLog,
    recording: crate::record::Current,
}

impl std::fmt::Debug for RelayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayServer")
            .field("native", &self.native.local_addr())
            .finish()
    }
}

impl RelayServer {
    /// Listens on `port` of `scope` (0 picks a free port), and on
    /// `config.json_port` for JSON-lines clients when set.
    fn bind(
        scope: BindScope,
        port: u16,
        config: RelayConfig,
    ) -> std::io::Result<(RelayServer, RelayHandle)> {
        let native = EndpointStream::bind(scope, port, config.server.clone())?;
        let json = match config.json_port {
            Some(port) => Some(switchboard::lifecycle::tcp_listener(SocketAddr::new(
                scope.ip(),
                port,
            ))?),
            None => None,
        };
        let json_addr = json.as_ref().map(|l| l.local_addr()).transpose()?;
        let stop = CancellationToken::new();
        let (control_tx, control) = mpsc::channel(16);
        let log = crate::log::RelayLog::new();
        // Created here, so that a file that cannot be written is the
        // bind's error, not a relay that silently records nothing.
        let recording = crate::record::Current::default();
        if let Some(path) = &config.record {
            let header = crate::record::RelayHeader::of(&config);
            let recorder = crate::record::RelayRecorder::create(path, header, 65_536)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            recording.replace(std::sync::Arc::new(recorder));
        }
        let handle = RelayHandle {
            native_addr: native.local_addr(),
            tls: native.handle().tls(),
            websocket_addr: native.websocket_addr(),
            quic_addr: native.quic_addr(),
            json_addr,
            server: native.handle(),
            stop: stop.clone(),
            control: control_tx,
            log: log.clone(),
            recording: recording.clone(),
        };
        let server = RelayServer {
            native,
            json,
            json_events: mpsc::channel(1024),
            control,
            config,
            stop,
            log,
            recording,
        };
        Ok((server, handle))
    }

    /// Starts describing a relay: loopback, a free port, default settings,
    /// until told otherwise.
    pub fn builder() -> RelayBuilder {
        RelayBuilder {
            config: RelayConfig::default(),
            listen: ListenOptions::default(),
            websocket_port: None,
        }
    }

    /// Relays until `shutdown` completes or [`RelayHandle::shutdown`] is
    /// called, then closes every connection.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let (json_tx, json_rx) = self.json_events;
        if let Some(listener) = self.json {
            tokio::spawn(crate::json::accept_json(
                listener,
                json_tx,
                self.config.clone(),
                // The game port's identity, off loopback.
                self.native.handle().tls(),
                self.stop.clone(),
            ));
        }
        let stop = self.stop.clone();
        let recording = self.recording.clone();
        let hub = crate::dispatch::run(
            self.native,
            json_rx,
            self.control,
            self.config,
            self.stop,
            self.log,
            self.recording,
        );
        tokio::pin!(hub, shutdown);
        tokio::select! {
            _ = &mut hub => {}
            _ = &mut shutdown => {
                stop.cancel();
                // The hub sees the cancellation and closes every connection.
                hub.await;
            }
        }
        // The recording ends with the relay (its handles may outlive it).
        if let Some(recorder) = recording.get() {
            recorder.finish();
        }
    }
}

/// A relay about to start, made by [`RelayServer::builder`]: the same shape
/// as a game server's `ServerManager::builder`.
#[derive(Debug)]
pub struct RelayBuilder {
    config: RelayConfig,
    listen: ListenOptions,
    websocket_port: Option<u16>,
}

/// A relay running in this process: reads like its [`RelayHandle`];
/// `shutdown().await` (or `shutdown_blocking()`) stops it and waits until
/// every connection is closed.
pub type RunningRelay = Running<RelayHandle, ()>;

impl StopHandle for RelayHandle {
    fn stop(&self) {
        self.shutdown();
    }
}

impl RelayBuilder {
    /// The relay's settings (zones, limits, the JSON listener).
    /// A WebSocket port set with [`websocket_port`](Self::websocket_port)
    /// wins over `config.server.websocket`'s.
    pub fn config(mut self, config: RelayConfig) -> Self {
        self.config = config;
        self
    }

    switchboard::listen_setters!(
        "The native port (default 0: a free one, read with `native_addr`)."
    );

    /// Also listen for WebSockets on `port` (0: a free one).
    pub fn websocket_port(mut self, port: u16) -> Self {
        self.websocket_port = Some(port);
        self
    }

    /// Binds and returns the relay and its handle, for tokio code that
    /// runs it itself (`server.run(stop).await`).
    pub fn build(mut self) -> std::io::Result<(RelayServer, RelayHandle)> {
        if let Some(interest) = &self.config.interest {
            interest.check().map_err(|why| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("interest by distance: {why}"),
                )
            })?;
        }
        let precision = self.config.compact_precision;
        if !(precision.is_finite() && precision > 0.0) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("compact_precision must be a number above 0, not {precision}"),
            ));
        }
        if let Some(port) = self.websocket_port {
            let websocket = self
                .config
                .server
                .websocket
                .get_or_insert_with(Default::default);
            websocket.port = port;
        }
        RelayServer::bind(self.listen.scope, self.listen.port, self.config)
    }

    /// Binds and runs the relay on the background runtime (or the current
    /// one).
    pub fn spawn(self) -> std::io::Result<RunningRelay> {
        let (server, handle) = self.build()?;
        Ok(Running::spawn(handle, server.run(std::future::pending())))
    }
}
