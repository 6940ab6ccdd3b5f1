//! [`ServerManager`]: sessions, validated requests, addressed updates.
//!
//! The manager owns an [`Endpoint`](crate::Endpoint) (as a
//! stream) and a [`GameLogic`]. For every connection it waits for a hello,
//! admits the client or tells it why not, gives it an id and a reconnect
//! token, and from then on hands each of its requests to the logic. What the
//! logic accepts is applied and its updates go to exactly the clients they
//! are addressed to; what it rejects changes nothing and is answered to the
//! sender alone.

mod builder;
mod config;
mod listing;
mod record;
pub use switchboard_proto::manager::protocol;
mod run;
mod run_shared;
mod shared;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use crate::lifecycle::ServerError;
pub use builder::{RunningServer, ServerBuilder};
pub use config::{ManagerConfig, ManagerRules};
pub use listing::{Listing, ListingHook, ListingStatus, ListingUpdates};
pub use record::{RecordConfig, RecordingStatus, StartRecordingError};
pub use shared::{
    CheckpointHook, CheckpointStore, SessionShare, ShareError, ShareFuture, ShareUpdate,
    SharedSession, SharedSessionsHook,
};
pub use switchboard_proto::manager::core::{
    ManagerAction, ManagerCore, ManagerEvent, Snapshot, SnapshotError, MIN_TICK,
};
pub use switchboard_proto::manager::logic::{
    Audience, GameLogic, JoinRequest, Outbox, Place, Rejection, RejectionKind, Request,
};
pub use switchboard_proto::manager::stats::{
    ClientStats, ServerStats, MAX_CHANNEL_KEYS, OTHER_CHANNEL, REQUEST_TIME_BOUNDS_MICROS,
};

use crate::runtime;
use crate::session::ClientId;
use crate::socket::{BindScope, EndpointStream};

pub use switchboard_proto::manager::{LogEntry, LogLevel};

/// A game server: the logic and the sessions behind a listening socket.
pub struct ServerManager<L: GameLogic> {
    server: EndpointStream,
    config: ManagerConfig,
    core: ManagerCore<L>,
    recorder: Option<record::SessionRecorder>,
    control: Control,
}

/// The manager's side of its handle.
struct Control {
    shutdown: CancellationToken,
    /// What the clients are told when it stops (`shutdown_with`).
    farewell: Farewell,
    stats_rx: mpsc::Receiver<oneshot::Sender<ServerStats>>,
    kick_rx: mpsc::Receiver<Kick>,
    log: broadcast::Sender<LogEntry>,
    /// Tags for the listing, set by the handle, passed on at the next tick.
    tags: ListingTags,
    /// Recordings the operator starts while the server runs.
    record_rx: mpsc::Receiver<StartRecording>,
    /// The recording now, if any.
    current: record::Current,
}

/// The reason a shutdown gives the clients, when one was given.
type Farewell = Arc<std::sync::Mutex<Option<String>>>;

/// Tags the listing should show (`ManagerHandle::set_listing_tag`), waiting
/// for the manager's next tick.
type ListingTags = Arc<std::sync::Mutex<Vec<(String, String)>>>;

/// The listing tag a server beyond loopback lists its TLS fingerprint in:
/// `tls=3f1c...` (64 hex digits), for a server browser to pin it by.
pub const TLS_TAG: &str = "tls";

/// The listing tag a server with a WebSocket port lists that port in:
/// `ws=7201` (with [`TLS_TAG`], `wss://`).
pub const WS_TAG: &str = "ws";

/// The listing tag a server with a QUIC port lists that UDP port in:
/// `quic=7202` (the identity of [`TLS_TAG`]'s fingerprint).
pub const QUIC_TAG: &str = "quic";

/// The listing tag a server whose QUIC port speaks WebTransport lists the
/// hash of the certificate it serves browsers now in: `wt=9a0e...` (64 hex
/// digits; a page passes it as `serverCertificateHashes` to
/// `https://host:<quic port>/`), or [`WT_CA`] when it serves a certificate
/// browsers trust. The port rotates its certificates: the listing follows
/// within a tick.
pub const WT_TAG: &str = "wt";

/// [`WT_TAG`]'s value for a port that serves browsers the server's own
/// CA-issued certificate (`BrowserCertificate::Identity`): no hashes.
pub const WT_CA: &str = "ca";

/// The listing tag of the hash of the certificate a WebTransport port will
/// serve next ([`WT_TAG`]): a page that keeps both works across a rotation.
pub const WT_NEXT_TAG: &str = "wt_next";

/// The operator's kick: who, why, and the answer (whether it was there).
type Kick = (ClientId, String, oneshot::Sender<bool>);

/// A recording to start now, and the answer (why not, if not).
type StartRecording = (
    RecordConfig,
    oneshot::Sender<Result<(), StartRecordingError>>,
);

/// A cloneable, `Send` handle to a running manager: its address, its stats,
/// its log, and the way to stop it.
#[derive(Debug, Clone)]
pub struct ManagerHandle {
    local_addr: SocketAddr,
    websocket_addr: Option<SocketAddr>,
    quic_addr: Option<SocketAddr>,
    server: crate::socket::EndpointHandle,
    shutdown: CancellationToken,
    farewell: Farewell,
    tags: ListingTags,
    stats_tx: mpsc::Sender<oneshot::Sender<ServerStats>>,
    kick_tx: mpsc::Sender<Kick>,
    log: broadcast::Sender<LogEntry>,
    ids: crate::session::PlayerIds,
    recording: record::Current,
    record_tx: mpsc::Sender<StartRecording>,
}

impl<L: GameLogic> ServerManager<L> {
    /// Listens on `port` of `scope` (0 picks a free port) and returns the
    /// manager, ready to [`run`](Self::run) (see [`ServerManager::builder`]).
    pub(crate) fn bind(
        scope: BindScope,
        port: u16,
        config: ManagerConfig,
        logic: L,
    ) -> std::io::Result<(Self, ManagerHandle)> {
        let server = EndpointStream::bind(scope, port, config.server.clone())?;
        Self::new(server, config, logic)
    }

    /// A manager over an already listening server.
    fn new(
        server: EndpointStream,
        config: ManagerConfig,
        logic: L,
    ) -> std::io::Result<(Self, ManagerHandle)> {
        let shutdown = CancellationToken::new();
        let farewell = Farewell::default();
        let tags = ListingTags::default();
        // A listed server beyond loopback lists the key players pin it by
        // (as trusted as the listing: see docs/SECURITY.md).
        // And every other way in: a player picks the transport it has.
        {
            let mut tags = tags.lock().expect("tags lock");
            if let Some(fingerprint) = server.handle().tls_fingerprint() {
                tags.push((TLS_TAG.to_string(), fingerprint.to_string()));
            }
            for (tag, addr) in [
                (WS_TAG, server.websocket_addr()),
                (QUIC_TAG, server.quic_addr()),
            ] {
                if let Some(addr) = addr {
                    tags.push((tag.to_string(), addr.port().to_string()));
                }
            }
        }
        let (stats_tx, stats_rx) = mpsc::channel(16);
        let (kick_tx, kick_rx) = mpsc::channel(16);
        let (record_tx, record_rx) = mpsc::channel(4);
        let (log, _) = broadcast::channel(256);
        let current = record::Current::default();
        let recorder = match &config.record {
            Some(record) => Some(record::SessionRecorder::start::<L>(
                record,
                &config.rules,
                None,
                &current,
            )?),
            None => None,
        };
        let core = ManagerCore::new(config.rules.clone(), logic, current.entropy())
            .with_shared_sessions(config.shared_sessions.is_some())
            .with_checkpoints(config.checkpoints.is_some())
            .with_stopwatch(std::time::Instant::now);
        let handle = ManagerHandle {
            local_addr: server.local_addr(),
            websocket_addr: server.websocket_addr(),
            quic_addr: server.quic_addr(),
            server: server.handle(),
            shutdown: shutdown.clone(),
            farewell: farewell.clone(),
            tags: tags.clone(),
            stats_tx,
            kick_tx,
            log: log.clone(),
            ids: core.player_ids().clone(),
            recording: current.clone(),
            record_tx,
        };
        let manager = Self {
            server,
            config,
            core,
            recorder,
            control: Control {
                shutdown,
                farewell,
                tags,
                stats_rx,
                kick_rx,
                log,
                record_rx,
                current,
            },
        };
        Ok((manager, handle))
    }

    /// Serves until `shutdown` completes or [`ManagerHandle::shutdown`] is
    /// called, then shuts down gracefully: stops accepting, tells every
    /// client "server shutting down" after flushing what was queued for it,
    /// and returns the logic, within `shutdown_timeout`.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> L {
        use tracing::Instrument;
        let span = tracing::info_span!("manager", addr = %self.server.local_addr());
        run::Runner::new(
            self.server,
            self.config,
            self.core,
            self.recorder,
            self.control,
        )
        .run(shutdown)
        .instrument(span)
        .await
    }
}

impl ManagerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address of the WebSocket listener, if the manager has one
    /// (`config.server.websocket`).
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        self.websocket_addr
    }

    /// The address of the QUIC port (UDP), if the manager has one
    /// (`config.server.quic`): clients dial `quic://` it.
    pub fn quic_addr(&self) -> Option<SocketAddr> {
        self.quic_addr
    }

    /// The listening end of its connections (for what the metrics say of
    /// every port: [`endpoint_counters`](crate::admin::endpoint_counters)).
    pub fn endpoint(&self) -> crate::socket::EndpointHandle {
        self.server.clone()
    }

    /// How a browser page reaches the QUIC port's WebTransport (its port
    /// and the certificate hashes to trust; `None` without it): see
    /// [`EndpointHandle::webtransport`](crate::socket::EndpointHandle::webtransport).
    pub fn webtransport(&self) -> Option<crate::socket::WebTransportOffer> {
        self.server.webtransport()
    }

    /// The TLS the manager's ports speak to other machines (`None`: plain,
    /// on loopback or by the operator's choice): for what serves beside it
    /// (a join code's host link) to present the same identity.
    pub fn tls(&self) -> Option<crate::tls::TlsServer> {
        self.server.tls()
    }

    /// Runs a client connection over `stream` for a peer at `addr`, as if
    /// it had connected to the manager's port (the same sessions, limits
    /// and rules): how a compatibility listener (AxisPy's JSON, say) joins
    /// its translated clients to the game. See
    /// [`EndpointHandle::attach`](crate::socket::EndpointHandle::attach).
    pub fn attach<S>(&self, stream: S, addr: SocketAddr) -> Option<crate::PeerId>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    {
        self.server.attach(stream, addr)
    }

    /// Every id this server's players go by: where a compatibility
    /// listener whose clients choose their own ids (AxisPy's) admits them,
    /// so that no id is held twice, whatever the connection's kind, and the
    /// reserved ones are never anyone's.
    pub fn player_ids(&self) -> &crate::session::PlayerIds {
        &self.ids
    }

    /// Asks the manager to shut down gracefully, and returns at once (its
    /// owner awaits it: [`RunningServer::shutdown`]).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Like [`shutdown`](Self::shutdown), telling every client `reason`
    /// (the close frame's reason, instead of "server shutting down"): a
    /// hosted game's server stops with "the host, ada, quit".
    pub fn shutdown_with(&self, reason: &str) {
        *self.farewell.lock().expect("farewell lock") = Some(reason.to_string());
        self.shutdown.cancel();
    }

    /// Sets a `key=value` tag of this server's listing on its masters
    /// (`ManagerConfig::listing`), replacing the key's value if it had one:
    /// what the server learned after it started (a join code). Shown from
    /// the manager's next tick; nothing without a listing.
    pub fn set_listing_tag(&self, key: &str, value: &str) {
        self.tags
            .lock()
            .expect("tags lock")
            .push((key.to_string(), value.to_string()));
    }

    /// Whether a shutdown was asked for.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// A snapshot of the counters and connected clients. `None` once the
    /// manager has stopped.
    pub async fn stats(&self) -> Option<ServerStats> {
        let (tx, rx) = oneshot::channel();
        self.stats_tx.send(tx).await.ok()?;
        rx.await.ok()
    }

    /// Like [`stats`](Self::stats), from code outside async, waiting up to
    /// `timeout`.
    pub fn stats_blocking(&self, timeout: Duration) -> Option<ServerStats> {
        if !runtime::may_block() {
            return None;
        }
        runtime::handle().block_on(async {
            tokio::time::timeout(timeout, self.stats())
                .await
                .ok()
                .flatten()
        })
    }

    /// Disconnects `client` for the operator: its session ends at once (the
    /// game hears it leave) and its connection is closed with code 4000 and
    /// `reason`, which its client does not reconnect after. `false` if it
    /// is not connected (or the manager has stopped).
    pub async fn kick(&self, client: ClientId, reason: &str) -> bool {
        let (tx, rx) = oneshot::channel();
        if self
            .kick_tx
            .send((client, reason.to_string(), tx))
            .await
            .is_err()
        {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Where the session's recording stands (the last one, when it has
    /// stopped), if there has been one (`ManagerConfig::record`,
    /// [`start_recording`](Self::start_recording)).
    pub fn recording(&self) -> Option<RecordingStatus> {
        self.recording.status()
    }

    /// Stops the recording (the file says the operator stopped it); the
    /// game goes on. `false` if nothing was being recorded.
    pub fn stop_recording(&self) -> bool {
        self.recording.stop("stopped by the operator")
    }

    /// Starts recording the session now, to `config.path` (created, or
    /// truncated): the file begins with a snapshot of the core and the game
    /// ([`ManagerCore::capture`]), so its replay starts where the game
    /// stands. Refused, with why, while a recording runs, when the game
    /// takes no snapshot ([`GameLogic::snapshot`]), or when the file
    /// cannot be created.
    pub async fn start_recording(&self, config: RecordConfig) -> Result<(), StartRecordingError> {
        let (tx, rx) = oneshot::channel();
        if self.record_tx.send((config, tx)).await.is_err() {
            return Err(StartRecordingError::Stopped);
        }
        rx.await.unwrap_or(Err(StartRecordingError::Stopped))
    }

    /// The manager's log from now on. A receiver that falls more than 256
    /// lines behind loses the oldest and is told how many.
    pub fn log(&self) -> broadcast::Receiver<LogEntry> {
        self.log.subscribe()
    }
}
