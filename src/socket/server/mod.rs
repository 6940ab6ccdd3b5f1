//! The listening side: accepts connections, keeps the table of open peers,
//! and sends to one, some or all of them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::Stream;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::message::PeerId;

use super::accept::{accept_loop, Transport};
use super::events::{Batch, EventQueue};
use super::{
    BindScope, CloseCode, DisconnectReason, EndpointConfig, SendError, SocketError, SocketHandle,
};
use crate::message::{Action, Channel, EncodedMessage, Message, TypedMessage};
use crate::router::{Delivery, Router};
use crate::runtime;
use crate::signal::{Signal, SlotHandle};
use switchboard_proto::connection::budget::AddressBudgets;
use switchboard_proto::limits::{Gate, GateLimits};

mod handle;

pub use handle::EndpointHandle;

/// The live peers, by id (ids the server hands out: the fast hasher).
pub(super) type PeerTable = HashMap<PeerId, SocketHandle, super::IdBuildHasher>;
/// What a listening server reports to its owner.
#[derive(Debug)]
#[non_exhaustive]
pub enum EndpointEvent {
    /// A peer completed its handshake.
    PeerConnected {
        /// Its id.
        peer: PeerId,
        /// Its address.
        addr: SocketAddr,
    },
    /// A message arrived from a peer.
    Received(Incoming),
    /// Something went wrong on a peer's connection.
    PeerError {
        /// Whose.
        peer: PeerId,
        /// What.
        error: SocketError,
    },
    /// A peer's connection ended; its last event.
    PeerDisconnected {
        /// Whose.
        peer: PeerId,
        /// Why.
        reason: DisconnectReason,
    },
}

/// A message and the peer it came from.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The sender.
    pub peer: PeerId,
    /// The message.
    pub message: Message,
}

/// What the server's handles and its accept loop share.
pub(super) struct ServerShared {
    pub(super) peers: RwLock<PeerTable>,
    pub(super) local_addr: SocketAddr,
    /// Where the WebSocket listener listens, if there is one.
    pub(super) websocket_addr: Option<SocketAddr>,
    /// Where the QUIC port listens, if there is one.
    pub(super) quic_addr: Option<SocketAddr>,
    /// The certificates the QUIC port serves browsers (WebTransport).
    pub(super) webtransport: Option<super::quic::webtransport::WebTransportOffer>,
    pub(super) config: EndpointConfig,
    pub(super) shutdown: CancellationToken,
    pub(super) tasks: TaskTracker,
    pub(super) next_peer: AtomicU64,
    pub(super) refused: AtomicU64,
    /// Connections turned away at accept that are being told why.
    pub(super) turned_away_telling: super::ConnectionSlots,
    /// Log lines about turned-away connections, per address.
    pub(super) turned_away_log: Mutex<switchboard_proto::limits::LogLimiter>,
    pub(super) handshake_failures: AtomicU64,
    /// QUIC clients sent a Retry to prove their address.
    pub(super) quic_retries: AtomicU64,
    /// Every connection's traffic, added up as it happens.
    pub(crate) traffic: Arc<crate::socket::handle::Counters>,
    /// Pending and open connections, per address.
    pub(super) gate: Mutex<Gate<SocketHandle>>,
    /// Told whenever a pending handshake leaves the gate: a listener
    /// waiting for room in it looks again.
    pub(super) room: Notify,
    /// Inflate budgets, per address.
    pub(super) budgets: Mutex<AddressBudgets>,
    /// One copy of the connections' settings, shared by all of them.
    pub(super) socket_config: Arc<super::SocketConfig>,
    /// The event queue, for connections attached from outside the accept
    /// loops; weak, so that the queue ends when the accept loops do.
    pub(super) events: mpsc::WeakSender<Batch<EndpointEvent>>,
    /// The TLS its listeners speak (none when bound to loopback, or
    /// plaintext by the operator's choice).
    pub(super) tls: Option<crate::tls::TlsServer>,
}

/// The signals of a listening server. Slots run inside
/// [`Endpoint::poll`].
#[derive(Debug, Default)]
pub struct ServerSignals {
    /// A peer completed its handshake.
    pub peer_connected: Signal<(PeerId, SocketAddr)>,
    /// Any message from any peer (before per-channel subscribers).
    pub received: Signal<Incoming>,
    /// A peer's connection ended, and why.
    pub peer_disconnected: Signal<(PeerId, DisconnectReason)>,
    /// Something went wrong on a peer's connection.
    pub error: Signal<(PeerId, SocketError)>,
}

/// Shuts the server down when its owner goes away.
struct ShutdownOnDrop(EndpointHandle);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        self.0.shutdown("server closed");
    }
}

/// The listening end of [`Socket`](super::Socket) connections (TCP and
/// WebSocket peers in one table), with signals and per-channel subscribers
/// (`ExtendedTcpServer` is its Qt-heritage alias).
///
/// Every peer's events arrive through one bounded queue, drained by
/// [`poll`](Self::poll) on the owner's thread (or as a stream, see
/// [`into_stream`](Self::into_stream)). Dropping the server shuts it down.
pub struct Endpoint {
    owner: ShutdownOnDrop,
    events: EventQueue<EndpointEvent>,
    signals: ServerSignals,
    router: Router,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("handle", &self.owner.0)
            .finish()
    }
}

impl Endpoint {
    /// Listens on `port` of the interfaces `scope` names; port 0 picks a free
    /// port (read it with [`local_addr`](Self::local_addr)).
    pub fn bind(scope: BindScope, port: u16, config: EndpointConfig) -> std::io::Result<Self> {
        Self::bind_addr(SocketAddr::new(scope.ip(), port), config)
    }

    /// Listens on an exact address.
    ///
    /// On an address that is not loopback it speaks TLS to other
    /// machines by [`EndpointConfig::tls`]; an identity that cannot be read
    /// or made fails the bind, saying why.
    pub fn bind_addr(addr: SocketAddr, config: EndpointConfig) -> std::io::Result<Self> {
        let tls = config.tls.for_address(addr)?;
        let runtime = runtime::handle();
        let listener = listen(addr, &runtime)?;
        let ws_listener = match &config.websocket {
            Some(ws) => Some(listen(SocketAddr::new(addr.ip(), ws.port), &runtime)?),
            None => None,
        };
        let (quic, webtransport) = match &config.quic {
            Some(quic) => {
                let (endpoint, certificates) =
                    super::quic::bind(addr, tls.as_ref(), quic, &config.socket)?;
                (Some(endpoint), certificates)
            }
            None => (None, None),
        };
        let (tx, events) = EventQueue::new(config.socket.event_queue_len);
        let shared = Arc::new(ServerShared {
            peers: RwLock::new(PeerTable::default()),
            local_addr: listener.local_addr()?,
            websocket_addr: ws_listener.as_ref().map(|l| l.local_addr()).transpose()?,
            quic_addr: quic.as_ref().map(|q| q.local_addr()).transpose()?,
            webtransport: match (
                &quic,
                config.quic.as_ref().and_then(|q| q.webtransport.as_ref()),
            ) {
                (Some(endpoint), Some(_)) => {
                    Some(super::quic::webtransport::WebTransportOffer::new(
                        endpoint.local_addr()?.port(),
                        webtransport,
                    ))
                }
                _ => None,
            },
            config: config.clone(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            next_peer: AtomicU64::new(1),
            refused: AtomicU64::new(0),
            // No share per address: players behind one NAT are told too.
            turned_away_telling: super::ConnectionSlots::new(
                config.max_turned_away_told,
                config.max_turned_away_told,
            ),
            turned_away_log: Mutex::new(switchboard_proto::limits::LogLimiter::new(
                switchboard_proto::limits::RateLimit {
                    per_second: 1.0 / 600.0,
                    burst: 1.0,
                },
            )),
            gate: Mutex::new(Gate::new(GateLimits {
                max_pending: config.max_pending_handshakes,
                max_pending_per_address: config.max_pending_handshakes_per_address,
                max_connections: config.max_connections,
                max_connections_per_address: config.max_connections_per_address,
                handshake_grace: config.pending_handshake_grace,
            })),
            room: Notify::new(),
            handshake_failures: AtomicU64::new(0),
            quic_retries: AtomicU64::new(0),
            traffic: Arc::default(),
            budgets: Mutex::new(AddressBudgets::new(
                config.socket.max_inflated_per_second,
                config.socket.codec.max_decompressed_len,
            )),
            socket_config: Arc::new(config.socket.clone()),
            events: tx.downgrade(),
            tls,
        });
        if let (Some(ws_listener), Some(ws)) = (ws_listener, &config.websocket) {
            let addr = ws_listener.local_addr()?;
            let mut rules = super::websocket::UpgradeRules::of(ws, &config.socket.codec);
            rules.webtransport = shared.webtransport.clone();
            let transport = Transport::WebSocket(Arc::new(rules));
            let accept = accept_loop(ws_listener, shared.clone(), tx.clone(), transport);
            shared.tasks.spawn_on(accept, &runtime);
            tracing::info!(%addr, "listening for WebSockets");
        }
        if let (Some(endpoint), Some(quic)) = (quic, &config.quic) {
            let addr = shared.quic_addr;
            let accept =
                super::quic::accept_loop(endpoint, shared.clone(), tx.clone(), quic.clone());
            shared.tasks.spawn_on(accept, &runtime);
            let certificates = shared.webtransport.as_ref().and_then(|w| w.certificates());
            if let (Some(certificates), Some(web)) = (certificates, &quic.webtransport) {
                let rotating = certificates
                    .clone()
                    .rotating(web.rotate_every, shared.shutdown.clone());
                shared.tasks.spawn_on(rotating, &runtime);
            }
            tracing::info!(?addr, "listening for QUIC");
        }
        let accept = accept_loop(listener, shared.clone(), tx, Transport::Tcp);
        shared.tasks.spawn_on(accept, &runtime);
        tracing::info!(addr = %shared.local_addr, "listening");
        Ok(Self {
            owner: ShutdownOnDrop(EndpointHandle { shared }),
            events,
            signals: ServerSignals::default(),
            router: Router::new(),
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.owner.0.local_addr()
    }

    /// The address of the WebSocket listener, if the server has one.
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        self.owner.0.websocket_addr()
    }

    /// The address of the QUIC port (UDP), if the server has one.
    pub fn quic_addr(&self) -> Option<SocketAddr> {
        self.owner.0.quic_addr()
    }

    /// A `Send` handle for sending to peers from anywhere.
    pub fn handle(&self) -> EndpointHandle {
        self.owner.0.clone()
    }

    /// The signals to connect slots to.
    pub fn signals(&self) -> &ServerSignals {
        &self.signals
    }

    /// Connects `slot` to every message on `channel`; the slot gets the
    /// sender, the action and the content.
    pub fn subscribe<C: Channel>(
        &self,
        channel: C,
        slot: impl FnMut(&Delivery) + 'static,
    ) -> SlotHandle {
        self.router.subscribe(channel, slot)
    }

    /// Removes every slot of `channel`.
    pub fn unsubscribe<C: Channel>(&self, channel: C) {
        self.router.unsubscribe(channel)
    }

    /// Messages that arrived on a channel without subscribers.
    pub fn unrouted(&self) -> u64 {
        self.router.unrouted()
    }

    /// Queues a message (a typed one, or a built [`Message`]) for one peer
    /// (as [`EndpointHandle::send_to`]).
    pub fn send_to(&self, peer: PeerId, message: &impl TypedMessage) -> Result<(), SendError> {
        self.owner.0.send_to(peer, message)
    }

    /// Encodes a message once and queues it for every peer (as
    /// [`EndpointHandle::broadcast`]).
    pub fn broadcast(&self, message: &impl TypedMessage) -> Result<usize, SendError> {
        self.owner.0.broadcast(message)
    }

    /// Stops accepting and closes every peer gracefully (see
    /// [`EndpointHandle::shutdown`]).
    pub fn shutdown(&self, reason: &str) {
        self.owner.0.shutdown(reason);
    }

    /// Delivers every queued event to the signals and subscribers, on this
    /// thread. Returns how many were delivered.
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), but first waits up to `timeout` for an event
    /// if none is queued.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        let (signals, router) = (&self.signals, &self.router);
        self.events.deliver(timeout, |event| match event {
            EndpointEvent::PeerConnected { peer, addr } => {
                signals.peer_connected.emit(&(peer, addr))
            }
            EndpointEvent::Received(incoming) => {
                signals.received.emit(&incoming);
                router.route(incoming.peer, &incoming.message);
            }
            EndpointEvent::PeerError { peer, error } => signals.error.emit(&(peer, error)),
            EndpointEvent::PeerDisconnected { peer, reason } => {
                signals.peer_disconnected.emit(&(peer, reason))
            }
        })
    }

    /// The `Send` form for tokio: a stream of [`EndpointEvent`]s plus the
    /// handle. Slots and subscribers connected so far are dropped.
    pub fn into_stream(self) -> EndpointStream {
        EndpointStream {
            owner: self.owner,
            events: self.events,
        }
    }
}

/// A listening server as a `Send` stream of [`EndpointEvent`]s, for tokio code.
/// The stream ends after a shutdown, once every connection has ended.
/// Dropping it shuts the server down.
pub struct EndpointStream {
    owner: ShutdownOnDrop,
    events: EventQueue<EndpointEvent>,
}

impl std::fmt::Debug for EndpointStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointStream")
            .field("handle", &self.owner.0)
            .finish()
    }
}

impl EndpointStream {
    /// Binds like [`Endpoint::bind`].
    pub fn bind(scope: BindScope, port: u16, config: EndpointConfig) -> std::io::Result<Self> {
        Ok(Endpoint::bind(scope, port, config)?.into_stream())
    }

    /// A `Send` handle for sending to peers from anywhere.
    pub fn handle(&self) -> EndpointHandle {
        self.owner.0.clone()
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.owner.0.local_addr()
    }

    /// The address of the WebSocket listener, if the server has one.
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        self.owner.0.websocket_addr()
    }

    /// The address of the QUIC port (UDP), if the server has one.
    pub fn quic_addr(&self) -> Option<SocketAddr> {
        self.owner.0.quic_addr()
    }

    /// Waits for the next event.
    pub async fn next_event(&mut self) -> Option<EndpointEvent> {
        self.events.next().await
    }

    /// The next event if one is queued, without waiting: a loop that
    /// handles what has arrived, then does something once for all of it
    /// (flushes, say), takes them with this after `next_event`.
    pub fn try_next_event(&mut self) -> Option<EndpointEvent> {
        self.events.try_next()
    }

    /// The longest any of the events taken since the last call waited
    /// between its connection's task and this stream (zero if none was
    /// taken). A loop that keeps up takes events a few microseconds after
    /// they arrive; one that falls behind (too much to do, or too little
    /// of the CPU) sees this grow. A [`Pacer`](super::Pacer) is told it
    /// ([`Pacer::took`](super::Pacer::took)) to wait longer while it lasts.
    pub fn take_queue_wait(&mut self) -> Duration {
        self.events.take_longest_wait()
    }
}

impl Stream for EndpointStream {
    type Item = EndpointEvent;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<EndpointEvent>> {
        std::pin::Pin::new(&mut self.events).poll_next(cx)
    }
}

/// A listening TCP socket on `addr`, registered with `runtime`. Its error
/// names the address ("cannot listen on 127.0.0.1:7100: Address already in
/// use"): a port clash says which port.
fn listen(addr: SocketAddr, runtime: &tokio::runtime::Handle) -> std::io::Result<TcpListener> {
    let _entered = runtime.enter();
    let listening = || {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(1024)
    };
    listening().map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            " (another program has that port: pick another)"
        } else {
            ""
        };
        std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}{hint}"))
    })
}
