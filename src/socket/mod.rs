//! One connection: [`Socket`] on the client side, and the listening
//! [`Endpoint`] that accepts them.
//!
//! A connection opens with a handshake (each side's first frame is a hello:
//! magic and protocol version), then carries [`Message`]s both ways. Sending
//! never blocks: frames go on a bounded outbound queue that a writer task
//! drains. Idle connections are pinged; a silent peer is dropped; a peer that
//! does not read is dropped as a slow consumer before its queue can grow past
//! its limits. A close flushes what was queued, then tells the peer why.
//!
//! The same connection runs over TCP or over a WebSocket (`websocket`): a
//! server may listen on both ([`EndpointConfig::websocket`]), one peer table
//! and one set of limits for the two. Off loopback it runs inside TLS
//! ([`crate::tls`]): a listener's first step (`first_step`: TLS, plain from
//! this machine, plaintext from another refused; then the WebSocket
//! upgrade) and the [`Dialer`]'s (`dial`: TLS to another machine).

mod accept;
mod config;
mod connection;
use switchboard_proto::connection::control;
mod dial;
mod events;
mod first_step;
mod handle;
mod ids;
mod listener;
mod names;
mod outqueue;
mod pacer;
pub mod quic;
mod server;
mod websocket;

pub(crate) use connection::TcpReader;

use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, ToSocketAddrs};

pub use config::{lan_address, BindScope, EndpointConfig, SocketConfig};
pub use connection::SocketEvent;
pub use control::{CloseFrame, ACTION_CLOSE, ACTION_PING, ACTION_PONG, MAGIC};
pub(crate) use dial::TurnedAway;
pub use dial::{ByteStream, Connector, Dialer, Opening, Transport};
pub use handle::{SocketHandle, SocketState, SocketStats};
pub use ids::{IdBuildHasher, IdHasher};
pub use listener::{Arrival, Listener, ListenerCaps, ListenerLimits, Places};
#[allow(deprecated)]
pub use names::{
    ExtendedTcpServer, ExtendedTcpSocket, ServerConfig, ServerEvent, ServerHandle, ServerStream,
};
pub use pacer::{Pacer, PacerConfig};
pub use quic::webtransport::WebTransportOffer;
pub use server::{Endpoint, EndpointEvent, EndpointHandle, EndpointStream, Incoming, PeerId};
pub use switchboard_proto::connection::datagram::ChannelSet;
pub use switchboard_proto::limits::address_key;
pub use switchboard_proto::limits::{ConnectionSlot, ConnectionSlots, SlotRefusal};
pub use switchboard_proto::reason::{
    retry_after_of, with_retry_after, CloseCode, DisconnectReason, IoFailure, SendError,
    SocketError,
};
pub use websocket::{
    accept_upgrade, forbid, Upgrade, UpgradeRules, WebPage, WebSocketConfig, MAX_HEADERS,
};

use crate::message::{Action, Channel, Message};
use crate::runtime;
use crate::signal::Signal;
use connection::Reporter;
use events::EventQueue;

/// A client's transport, once open.
enum Opened {
    Tcp(TcpStream),
    /// A connector's byte stream (a TLS session, a pipe).
    Stream(Box<dyn ByteStream>),
    WebSocket(
        Box<tokio_tungstenite::WebSocketStream<TcpStream>>,
        std::net::SocketAddr,
    ),
    Quic(quic::QuicTransport),
}

impl Opened {
    /// The client's WebSocket handshake to `url` over `stream`.
    async fn websocket(
        url: &str,
        stream: TcpStream,
        codec: &crate::codec::CodecConfig,
    ) -> std::io::Result<Opened> {
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr()?;
        let ws = websocket::client_handshake(url, stream, codec).await?;
        Ok(Opened::WebSocket(Box::new(ws), peer))
    }
}

/// Closes the connection when its owner goes away.
#[derive(Debug)]
struct CloseOnDrop(SocketHandle);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close(CloseCode::NORMAL, "closed");
    }
}

/// The signals of one socket. Slots run inside [`Socket::poll`].
#[derive(Debug, Default)]
pub struct SocketSignals {
    /// The handshake completed.
    pub connected: Signal<()>,
    /// A message arrived.
    pub received: Signal<Message>,
    /// The connection ended, and why. Always the last signal.
    pub disconnected: Signal<DisconnectReason>,
    /// Something went wrong; if it ended the connection, `disconnected` follows.
    pub error: Signal<SocketError>,
}

/// A framed, compressed, keep-alive connection with signals, over TCP, a
/// WebSocket or a connector's stream (`ExtendedTcpSocket` is its Qt-heritage
/// alias).
///
/// ```no_run
/// use switchboard::{Socket, SocketConfig};
/// let mut socket = Socket::connect("127.0.0.1:7000", SocketConfig::default());
/// socket.signals().received.connect(|msg| println!("got {msg:?}"));
/// loop {
///     socket.poll(); // once per frame: slots run here, on this thread
///     # break;
/// }
/// ```
///
/// The socket and its signals belong to the thread that polls it. For tokio,
/// [`into_stream`](Self::into_stream) turns it into a `Send` stream of
/// [`SocketEvent`]s. Dropping the socket closes the connection gracefully.
pub struct Socket {
    owner: CloseOnDrop,
    events: EventQueue<SocketEvent>,
    signals: SocketSignals,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket")
            .field("handle", &self.owner.0)
            .finish()
    }
}

impl Socket {
    /// Starts connecting to `addr` in plain TCP and returns at once, like
    /// Qt's `connectToHost`. `connected` (or `disconnected` with
    /// [`DisconnectReason::ConnectFailed`]) follows. Messages sent before the
    /// connection opens are queued. Plain whatever machine `addr` is: to
    /// another machine, dial through a [`Dialer`] (TLS, the server
    /// checked), as `NetworkClient` does.
    pub fn connect<A>(addr: A, config: SocketConfig) -> Self
    where
        A: ToSocketAddrs + Send + 'static,
    {
        Self::open(config, async move {
            TcpStream::connect(addr).await.map(Opened::Tcp)
        })
    }

    /// Starts connecting over the transport `opening` opens (a
    /// [`Connector`]'s, which has done its own first exchange), then the
    /// same protocol as [`connect`](Self::connect).
    pub fn connect_with(opening: Opening, config: SocketConfig) -> Self {
        Self::open(config, async move {
            opening.await.map(|transport| match transport {
                Transport::Tcp(stream) => Opened::Tcp(stream),
                Transport::Stream(stream) => Opened::Stream(stream),
                Transport::Quic(quic) => Opened::Quic(quic),
            })
        })
    }

    /// Starts connecting to a WebSocket listener at `url`
    /// (`ws://host:port/`, or `wss://` with TLS under it, the server
    /// checked by the default [`ServerTrust`](crate::tls::ServerTrust)), like
    /// [`connect`](Self::connect): the same protocol, one frame per binary
    /// message.
    pub fn connect_ws(url: &str, config: SocketConfig) -> Self {
        if url.starts_with("wss://") {
            return Dialer::default().connect(url, config);
        }
        let url = url.to_string();
        let codec = config.codec.clone();
        Self::open(config, async move {
            let target = websocket::WsUrl::parse(&url)?;
            let stream = TcpStream::connect((target.host.as_str(), target.port)).await?;
            Opened::websocket(&url, stream, &codec).await
        })
    }

    /// Like [`connect_ws`](Self::connect_ws), over a TCP stream already
    /// connected to the server (one bound to a chosen local address, say).
    pub fn connect_ws_over(url: &str, stream: TcpStream, config: SocketConfig) -> Self {
        let url = url.to_string();
        let codec = config.codec.clone();
        Self::open(config, async move {
            Opened::websocket(&url, stream, &codec).await
        })
    }

    /// Runs a connection once `open` has opened its transport.
    fn open<F>(config: SocketConfig, open: F) -> Self
    where
        F: std::future::Future<Output = std::io::Result<Opened>> + Send + 'static,
    {
        let handle = SocketHandle::new(config.clone());
        let (tx, events) = EventQueue::new(config.event_queue_len);
        let task_handle = handle.clone();
        let span = tracing::info_span!("connection", to = "server");
        // Boxed: the task keeps what it captures for its whole life, and
        // connecting (a WebSocket handshake above all) is big and brief.
        let open = Box::pin(open);
        let task = async move {
            let reporter = Reporter::client(tx);
            let opened = tokio::select! {
                opened = open => opened,
                () = task_handle.shared.killed() => {
                    task_handle.set_closed();
                    let reason = DisconnectReason::Closed {
                        code: CloseCode::NORMAL,
                        reason: "closed before connecting".into(),
                    };
                    let _ = reporter.events.send(events::Batch::one(SocketEvent::Disconnected(reason), &reporter.wrap)).await;
                    return;
                }
            };
            match opened {
                Ok(Opened::Tcp(stream)) => {
                    let _ = stream.set_nodelay(true);
                    if let Ok(addr) = stream.peer_addr() {
                        task_handle.set_peer_addr(addr);
                    }
                    connection::run_tcp(stream, task_handle, reporter).await;
                }
                Ok(Opened::Stream(stream)) => {
                    connection::run(stream, task_handle, reporter).await;
                }
                Ok(Opened::Quic(quic)) => {
                    task_handle.set_peer_addr(quic.link.remote_address());
                    connection::run_quic(quic.link, quic.send, quic.recv, task_handle, reporter)
                        .await;
                }
                Ok(Opened::WebSocket(ws, addr)) => {
                    task_handle.set_peer_addr(addr);
                    connection::run_ws(*ws, task_handle, reporter).await;
                }
                Err(err) => {
                    task_handle.set_closed();
                    // A WebSocket listener that turned the connection away
                    // for now said so as a TCP one does.
                    let turned = err
                        .get_ref()
                        .and_then(|e| e.downcast_ref::<TurnedAway>())
                        .cloned();
                    let reason = match turned {
                        Some(turned) => DisconnectReason::ClosedByPeer {
                            code: CloseCode::SERVER_FULL,
                            reason: turned.why,
                        },
                        None => DisconnectReason::ConnectFailed(err.into()),
                    };
                    let batch =
                        events::Batch::one(SocketEvent::Disconnected(reason), &reporter.wrap);
                    let _ = reporter.events.send(batch).await;
                }
            }
        };
        runtime::handle().spawn(tracing::Instrument::instrument(task, span));
        Self::from_parts(handle, events)
    }

    /// Runs the protocol over any byte stream: an in-memory pipe in tests,
    /// a TCP stream connected your own way (from a chosen local address, say),
    /// another transport later. The handshake starts at once. A tokio
    /// `TcpStream` runs as [`connect`](Self::connect)'s do: senders write
    /// to it directly while its writer idles, and it holds no read buffer
    /// while the peer is silent.
    pub fn from_stream<S>(stream: S, config: SocketConfig) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let handle = SocketHandle::new(config.clone());
        let (tx, events) = EventQueue::new(config.event_queue_len);
        let reporter = Reporter::client(tx);
        let mut slot = Some(stream);
        let tcp = (&mut slot as &mut dyn std::any::Any)
            .downcast_mut::<Option<TcpStream>>()
            .and_then(Option::take);
        if let Some(tcp) = tcp {
            if let Ok(addr) = tcp.peer_addr() {
                handle.set_peer_addr(addr);
            }
            runtime::handle().spawn(connection::run_tcp(tcp, handle.clone(), reporter));
        } else if let Some(stream) = slot {
            runtime::handle().spawn(connection::run(stream, handle.clone(), reporter));
        }
        Self::from_parts(handle, events)
    }

    fn from_parts(handle: SocketHandle, events: EventQueue<SocketEvent>) -> Self {
        Self {
            owner: CloseOnDrop(handle),
            events,
            signals: SocketSignals::default(),
        }
    }

    /// The signals to connect slots to.
    pub fn signals(&self) -> &SocketSignals {
        &self.signals
    }

    /// A `Send` handle for sending and closing from anywhere.
    pub fn handle(&self) -> SocketHandle {
        self.owner.0.clone()
    }

    /// Encodes and queues a message; never blocks.
    pub fn send(&self, message: &Message) -> Result<(), SendError> {
        self.owner.0.send(message)
    }

    /// Builds a message of `channel`, `action` and `value` straight into a
    /// frame and queues it ([`SocketHandle::send_value`]): the typed path,
    /// with no `Message` and no allocation in between. Never blocks.
    pub fn send_value<C: Channel, A: Action, T: serde::Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        value: &T,
    ) -> Result<(), SendError> {
        self.owner.0.send_value(channel, action, value)
    }

    /// Closes gracefully: queued messages go first, then the reason.
    pub fn close(&self, reason: &str) {
        self.owner.0.close(CloseCode::NORMAL, reason);
    }

    /// Where the connection is in its life.
    pub fn state(&self) -> SocketState {
        self.owner.0.state()
    }

    /// Delivers every queued event to the signals, on this thread. Returns how
    /// many were delivered. Call once per frame.
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), but first waits up to `timeout` for an event
    /// if none is queued. For programs without a frame loop of their own.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        let signals = &self.signals;
        self.events.deliver(timeout, |event| match event {
            SocketEvent::Connected => signals.connected.emit(&()),
            SocketEvent::Received(message) => signals.received.emit(&message),
            SocketEvent::Error(err) => signals.error.emit(&err),
            SocketEvent::Disconnected(reason) => signals.disconnected.emit(&reason),
        })
    }

    /// The next queued event without emitting it, waiting up to `timeout`
    /// (outside async code only) if none is queued.
    pub fn next_event_blocking(&mut self, timeout: Duration) -> Option<SocketEvent> {
        self.events.next_blocking(timeout)
    }

    /// Waits for the next event without emitting it (for async code that
    /// keeps the socket on one thread).
    pub async fn next_event(&mut self) -> Option<SocketEvent> {
        self.events.next().await
    }

    /// The next event without emitting it, as a `Stream` polls: what
    /// `NetworkClient`'s stream reads.
    pub(crate) fn poll_next_event(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<SocketEvent>> {
        futures::Stream::poll_next(std::pin::Pin::new(&mut self.events), cx)
    }

    /// The `Send` form for tokio: a stream of events plus the handle. Slots
    /// connected so far are dropped.
    pub fn into_stream(self) -> SocketStream {
        SocketStream {
            owner: self.owner,
            events: self.events,
        }
    }
}

/// A connection as a `Send` stream of [`SocketEvent`]s, for tokio code.
/// Dropping it closes the connection gracefully.
#[derive(Debug)]
pub struct SocketStream {
    owner: CloseOnDrop,
    events: EventQueue<SocketEvent>,
}

impl SocketStream {
    /// Connects to `addr` as the default [`Dialer`] does: TLS to another
    /// machine (the server checked by the platform's roots, then trust on
    /// first use), plain to this one; `ws://`, `wss://`, `tls://` as
    /// their forms say. What a service's client (a master's browser, a
    /// matchmaker's) dials with.
    pub fn dial(addr: impl std::fmt::Display, config: SocketConfig) -> Self {
        Dialer::default()
            .connect(&addr.to_string(), config)
            .into_stream()
    }

    /// Connects to `addr` in plain TCP, whatever machine it is (see
    /// [`Socket::connect`]; [`dial`](Self::dial) speaks TLS off this
    /// machine).
    pub fn connect<A>(addr: A, config: SocketConfig) -> Self
    where
        A: ToSocketAddrs + Send + 'static,
    {
        Socket::connect(addr, config).into_stream()
    }

    /// Connects to a WebSocket listener (see
    /// [`Socket::connect_ws`]).
    pub fn connect_ws(url: &str, config: SocketConfig) -> Self {
        Socket::connect_ws(url, config).into_stream()
    }

    /// Connects to a WebSocket listener over a connected TCP stream (see
    /// [`Socket::connect_ws_over`]).
    pub fn connect_ws_over(url: &str, stream: TcpStream, config: SocketConfig) -> Self {
        Socket::connect_ws_over(url, stream, config).into_stream()
    }

    /// Runs the protocol over any byte stream (see
    /// [`Socket::from_stream`]).
    pub fn from_stream<S>(stream: S, config: SocketConfig) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        Socket::from_stream(stream, config).into_stream()
    }

    /// Waits until this connection is open (its `Connected` event, which
    /// this takes) and returns it. A connection the server turned away for
    /// now (closed with [`CloseCode::SERVER_FULL`] and a retry-after, as a
    /// busy server does to many players behind one address) is opened
    /// again with `reopen` once that wait is over, at most `attempts` times
    /// in all; any other end before `Connected` is returned as it is. What
    /// the relay's bots and the load tester join with; a `NetworkClient`
    /// does the same by itself.
    pub async fn until_admitted<F, Fut>(
        mut self,
        mut reopen: F,
        attempts: u32,
    ) -> Result<SocketStream, DisconnectReason>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<SocketStream>>,
    {
        let mut attempt = 1;
        loop {
            let reason = loop {
                match self.next_event().await {
                    Some(SocketEvent::Connected) => return Ok(self),
                    Some(SocketEvent::Disconnected(reason)) => break reason,
                    Some(_) => {}
                    None => {
                        break DisconnectReason::Closed {
                            code: CloseCode::GOING_AWAY,
                            reason: "ended before it opened".into(),
                        }
                    }
                }
            };
            let wait = match &reason {
                DisconnectReason::ClosedByPeer { code, reason }
                    if *code == CloseCode::SERVER_FULL =>
                {
                    switchboard_proto::reason::retry_after_of(reason)
                }
                _ => None,
            };
            let Some(wait) = wait.filter(|_| attempt < attempts) else {
                return Err(reason);
            };
            attempt += 1;
            tokio::time::sleep(wait).await;
            match reopen().await {
                Some(next) => self = next,
                None => return Err(reason),
            }
        }
    }

    /// A `Send` handle for sending and closing from anywhere.
    pub fn handle(&self) -> SocketHandle {
        self.owner.0.clone()
    }

    /// Encodes and queues a message; never blocks.
    pub fn send(&self, message: &Message) -> Result<(), SendError> {
        self.owner.0.send(message)
    }

    /// Builds a message of `channel`, `action` and `value` straight into a
    /// frame and queues it ([`SocketHandle::send_value`]): the typed path,
    /// with no `Message` and no allocation in between. Never blocks.
    pub fn send_value<C: Channel, A: Action, T: serde::Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        value: &T,
    ) -> Result<(), SendError> {
        self.owner.0.send_value(channel, action, value)
    }

    /// Closes gracefully: queued messages go first, then the reason.
    pub fn close(&self, reason: &str) {
        self.owner.0.close(CloseCode::NORMAL, reason);
    }

    /// Waits for the next event; `None` after `Disconnected`.
    pub async fn next_event(&mut self) -> Option<SocketEvent> {
        self.events.next().await
    }

    /// The next event if one is queued, without waiting: after
    /// `next_event`, a loop takes what else has arrived with this and
    /// handles it as one batch.
    pub fn try_next_event(&mut self) -> Option<SocketEvent> {
        self.events.try_next()
    }

    /// Sends `message` and waits for the next message back, for a
    /// request/answer service (a master's list, a matchmaker): an error if
    /// none comes within `timeout` or the connection ends first (with the
    /// peer's reason).
    pub async fn ask(
        &mut self,
        message: &Message,
        timeout: std::time::Duration,
    ) -> std::io::Result<Message> {
        use std::io::{Error, ErrorKind};
        self.send(message).map_err(Error::other)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.next_event()).await {
                Err(_) => return Err(Error::new(ErrorKind::TimedOut, "no answer in time")),
                Ok(None) => return Err(Error::new(ErrorKind::ConnectionAborted, "hung up")),
                Ok(Some(SocketEvent::Received(reply))) => return Ok(reply),
                Ok(Some(SocketEvent::Disconnected(reason))) => {
                    return Err(Error::other(reason.to_string()))
                }
                Ok(Some(_)) => {}
            }
        }
    }
}

impl Stream for SocketStream {
    type Item = SocketEvent;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<SocketEvent>> {
        std::pin::Pin::new(&mut self.events).poll_next(cx)
    }
}
