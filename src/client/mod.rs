//! [`NetworkClient`]: a client of a [`ServerManager`](crate::ServerManager),
//! local or remote, with channel subscribers, requests and reconnection.
//!
//! The session rules (hello, welcome, reconnect with backoff and jitter,
//! request verdicts and expiry) are [`ClientCore`], which has no IO; this
//! module drives it with a socket and the clock.
//!
//! One event model: the client's events wait in one queue, in order, and
//! the game takes each once, as it likes: [`NetworkClient::drain`] or
//! [`NetworkClient::next_event`] (the values), [`NetworkClient::poll`]
//! (only the slots), or the `Stream` for tokio code. Signals and channel
//! subscriptions are adapters on that one path: whichever way an event is
//! taken, its signal and its channel's slots run once, as it is taken. A
//! game that subscribes and drains loses nothing.

mod events;

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use events::Drain;
pub use switchboard_proto::client::{
    ClientAction, ClientConfig, ClientCore, ClientError, ClientEvent, ReconnectPolicy,
    RequestError, RequestStatus, RequestTicket, Welcomed,
};

use crate::manager::protocol::Refused;
use crate::message::{Channel, Message, TypedMessage};
use crate::router::{Delivery, Router};
use crate::session::ClientId;
use crate::signal::{Signal, SlotHandle};
use crate::socket::{Dialer, DisconnectReason, SendError, Socket, SocketConfig, SocketState};

/// The signals of a client: each runs once per event, as the game takes the
/// event (`poll`, `drain`, `next_event` or the stream).
#[derive(Debug, Default)]
pub struct ClientSignals {
    /// The connection opened (the welcome follows).
    pub connected: Signal<()>,
    /// The server admitted the client (first join or resumed session).
    pub welcomed: Signal<Welcomed>,
    /// The server refused the client, with the refusal's code and reason;
    /// no reconnect follows.
    pub refused: Signal<Refused>,
    /// Every application message, before the channel subscribers.
    pub received: Signal<Message>,
    /// The connection was lost; a reconnect follows.
    pub connection_lost: Signal<DisconnectReason>,
    /// A reconnect attempt starts (its number, from 1).
    pub reconnecting: Signal<u32>,
    /// The client is disconnected for good, and why.
    pub disconnected: Signal<DisconnectReason>,
    /// A problem that is not a disconnect.
    pub error: Signal<ClientError>,
    /// A request got its verdict.
    pub request_done: Signal<(RequestTicket, RequestStatus)>,
}

/// A client of a Switchboard server: connect, then each frame take its
/// events: [`drain`](Self::drain) them (their signals and channel slots run
/// as they are taken), or [`poll`](Self::poll) when slots are all the game
/// uses.
///
/// The client joins with a hello, keeps the id and the secret token the
/// server gives it, and after a connection loss reconnects with backoff,
/// presenting both to get the same id and session back.
///
/// ```no_run
/// use switchboard::{ClientConfig, ClientEvent, NetworkClient};
/// let mut client = NetworkClient::connect("127.0.0.1:7000", ClientConfig::named("ann"));
/// loop {
///     for event in client.drain() {
///         match event {
///             ClientEvent::Welcomed(w) => println!("in as {}", w.client),
///             ClientEvent::Message(m) => println!("{m:?}"),
///             _ => {}
///         }
///     }
///     // ... the rest of the frame ...
///     # break;
/// }
/// ```
pub struct NetworkClient {
    /// The address it was made with, then `ClientConfig::fallback_servers`.
    servers: Vec<String>,
    socket_config: SocketConfig,
    /// How each connection opens.
    dialer: Dialer,
    socket: Option<Socket>,
    core: ClientCore,
    router: Router,
    signals: ClientSignals,
    /// Events taken in, not yet handed to the game.
    events: VecDeque<ClientEvent>,
    /// The stream's timer for the core's next deadline.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl std::fmt::Debug for NetworkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkClient")
            .field("addr", &self.server_addr())
            .field("client", &self.client_id())
            .field("welcomed", &self.is_welcomed())
            .finish()
    }
}

impl NetworkClient {
    /// Starts connecting to `addr` and returns at once; `connected` and
    /// `welcomed` follow. `addr` is "host:port" or a `SocketAddr` for the
    /// TCP port, or a `ws://host:port/` URL for a server's WebSocket
    /// listener (the same session either way). Other forms of address
    /// need their connector: see [`connect_via`](Self::connect_via).
    pub fn connect(addr: impl ToString, config: ClientConfig) -> Self {
        Self::connect_via(Dialer::default(), addr, config)
    }

    /// Like [`connect`](Self::connect), with the address forms of
    /// `dialer`'s connectors too (every reconnect dials the same way): say,
    /// `CODE@host:port` for a game hosted through the join-code relay at
    /// `host:port`, with `switchboard_hosting::JoinCodes`.
    pub fn connect_via(dialer: Dialer, addr: impl ToString, config: ClientConfig) -> Self {
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        let mut servers = vec![addr.to_string()];
        servers.extend(config.fallback_servers.iter().cloned());
        let mut client = Self {
            servers,
            socket_config: config.socket.clone(),
            dialer,
            socket: None,
            core: ClientCore::new(config, u64::from_le_bytes(seed)),
            router: Router::new(),
            signals: ClientSignals::default(),
            events: VecDeque::new(),
            timer: None,
        };
        client.core.start();
        client.carry_out();
        client
    }

    /// Replaces `ClientConfig::fallback_servers`: where else the service
    /// is, as a directory (a master server's list, say) says now. The next
    /// reconnect attempts go round the address the client was made with,
    /// then these.
    pub fn set_fallback_servers(&mut self, servers: Vec<String>) {
        self.servers.truncate(1);
        self.servers.extend(servers.iter().cloned());
        self.core.set_fallback_servers(servers);
    }

    /// Where the service is *now*, as a directory says while the client is
    /// reconnecting (a named game that moved to another server): the next
    /// attempt goes to the first of `servers` (at once, when the list is
    /// news), then round the list, the address the client was made with
    /// last.
    pub fn redirect(&mut self, servers: Vec<String>) {
        self.servers.truncate(1);
        self.servers.extend(servers.iter().cloned());
        self.core.redirect(servers, std::time::Instant::now());
        self.carry_out();
    }

    /// The signals to connect slots to.
    pub fn signals(&self) -> &ClientSignals {
        &self.signals
    }

    /// The id the server gave, once welcomed (kept across reconnects).
    pub fn client_id(&self) -> Option<ClientId> {
        self.core.client_id()
    }

    /// Whether the server has welcomed this connection.
    pub fn is_welcomed(&self) -> bool {
        self.core.is_welcomed()
    }

    /// The address the current (or the last) connection goes to: the one
    /// the client was made with, or a fallback or redirect.
    pub fn server_addr(&self) -> &str {
        &self.servers[self.core.server() % self.servers.len()]
    }

    /// The next reconnect attempt while the client waits for it: its number
    /// (from 1, of `ReconnectPolicy::max_attempts`) and when it starts.
    /// `None` while connected or connecting, and once the client gave up.
    pub fn next_reconnect(&self) -> Option<(u32, std::time::Instant)> {
        self.core.next_reconnect()
    }

    /// Whether the client has given up for good (refused, closed, or out of
    /// reconnect attempts).
    pub fn is_finished(&self) -> bool {
        self.core.is_finished()
    }

    /// Connects `slot` to every message on `channel`. The slot stays
    /// connected until the returned [`SlotHandle`] is disconnected (or made
    /// [scoped](SlotHandle::scoped)), or [`unsubscribe`](Self::unsubscribe).
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

    /// Messages that arrived on a channel without subscribers (in `poll`).
    pub fn unrouted(&self) -> u64 {
        self.router.unrouted()
    }

    /// Sends a plain message (no answer awaited; a rejection still arrives
    /// as an error): a value of a typed action enum, or a built
    /// [`Message`]. Never blocks.
    pub fn send(&self, message: impl TypedMessage) -> Result<(), SendError> {
        let socket = self.socket.as_ref().ok_or(SendError::Closed)?;
        socket.send(&message.to_message()?)
    }

    /// Sends a request: a value of a typed action enum, or a built
    /// [`Message`]. Its verdict comes from [`status`](Self::status) and
    /// [`wait`](Self::wait), and as [`ClientEvent::RequestDone`] (with the
    /// `request_done` signal). Never blocks.
    /// A request made while the connection is down and a reconnect is
    /// under way is kept and sent when the session resumes (the server
    /// applies a request at most once): it waits at most
    /// `ClientConfig::request_timeout`.
    pub fn request(&mut self, message: impl TypedMessage) -> Result<RequestTicket, RequestError> {
        let ticket = self.core.request(&message, Instant::now())?;
        if let Some(Err(err)) = self.carry_out() {
            self.core.cancel_request(ticket);
            return Err(RequestError::Send(Arc::new(err)));
        }
        Ok(ticket)
    }

    /// Where a request stands, as far as the events taken in so far say:
    /// `Pending`, then its verdict (kept for the last
    /// [`kept_verdicts`](ClientConfig::kept_verdicts) requests).
    pub fn status(&self, ticket: RequestTicket) -> RequestStatus {
        self.core.status(ticket)
    }

    /// Runs the network side until `ticket` has its verdict or `timeout`
    /// passes, and returns its status (still `Pending` on a timeout shorter
    /// than the request's own). Events that arrive meanwhile wait in the
    /// queue for the game; no slot runs here.
    pub fn wait(&mut self, ticket: RequestTicket, timeout: Duration) -> RequestStatus {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status(ticket);
            let left = deadline.saturating_duration_since(Instant::now());
            if status.is_done() || left.is_zero() {
                return status;
            }
            self.pump(left.min(Duration::from_millis(50)));
        }
    }

    /// Leaves the server for good: queued messages go first, then the
    /// goodbye; the server ends the session at once. No reconnect follows.
    pub fn close(&mut self, reason: &str) {
        self.core.close(reason);
        self.carry_out();
    }

    /// Where the current connection is in its life.
    pub fn state(&self) -> SocketState {
        self.socket
            .as_ref()
            .map_or(SocketState::Closed, Socket::state)
    }

    /// Moves the current QUIC connection onto `socket`, a new UDP socket
    /// (the player's device changed networks): the connection and the
    /// session go on from the new address, with no reconnect. An error
    /// without a QUIC connection (see `SocketHandle::rebind`).
    pub fn rebind(&self, socket: std::net::UdpSocket) -> std::io::Result<()> {
        match &self.socket {
            Some(current) => current.handle().rebind(socket),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "no connection to move",
            )),
        }
    }

    /// The current connection's counts now (frames and bytes each way,
    /// round trip, what waits to be written): for a game's network
    /// overlay. What arrived is counted as it is read off the socket,
    /// before the game's next `poll()` takes it. Zero without a connection.
    pub fn stats(&self) -> crate::socket::SocketStats {
        self.socket
            .as_ref()
            .map(|socket| socket.handle().stats())
            .unwrap_or_default()
    }
}
