//! [`NetworkClient`]: a client of a [`ServerManager`](crate::ServerManager),
//! local or remote, with channel subscribers, requests and reconnection.
//!
//! The session rules (hello, welcome, reconnect with backoff and jitter,
//! request verdicts and expiry) are [`ClientCore`], which has no IO; this
//! module drives it with a socket and the clock, and hands its events to the
//! game three ways: signals and channel slots run by [`NetworkClient::poll`],
//! events pulled with [`NetworkClient::drain`], or a `Stream` for tokio code.

mod request;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use serde::Serialize;

pub use request::RequestTicket;
pub use switchboard_proto::client::{
    ClientAction, ClientConfig, ClientCore, ClientError, ClientEvent, ReconnectPolicy,
    RequestError, RequestStatus, Welcomed,
};

use crate::manager::protocol::Refused;
use crate::message::{Action, Channel, Message};
use crate::router::{Delivery, Router};
use crate::session::ClientId;
use crate::signal::{Connection, Signal};
use crate::socket::{
    DisconnectReason, ExtendedTcpSocket, PeerId, SendError, SocketConfig, SocketEvent, SocketState,
};

/// The signals of a client; slots run inside [`NetworkClient::poll`].
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
    pub request_done: Signal<(u64, RequestStatus)>,
}

/// A client of a Switchboard server: connect, then each frame either
/// [`poll`](Self::poll) (signals and channel slots run) or
/// [`drain`](Self::drain) (the game takes the events itself).
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
    socket: Option<ExtendedTcpSocket>,
    core: ClientCore,
    router: Router,
    signals: ClientSignals,
    /// The status cells of open tickets.
    tickets: HashMap<u64, Rc<RefCell<RequestStatus>>>,
    /// Events taken in, not yet handed to the game.
    events: VecDeque<ClientEvent>,
    /// The stream's timer for the core's next deadline.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl std::fmt::Debug for NetworkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkClient")
            .field("addr", &self.servers[self.core.server()])
            .field("client", &self.client_id())
            .field("welcomed", &self.is_welcomed())
            .finish()
    }
}

impl NetworkClient {
    /// Starts connecting to `addr` and returns at once; `connected` and
    /// `welcomed` follow. `addr` is "host:port" or a `SocketAddr` for the
    /// TCP port, or a `ws://host:port/` URL for a server's WebSocket
    /// listener (the same session either way).
    pub fn connect(addr: impl ToString, config: ClientConfig) -> Self {
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        let mut servers = vec![addr.to_string()];
        servers.extend(config.fallback_servers.iter().cloned());
        let mut client = Self {
            servers,
            socket_config: config.socket.clone(),
            socket: None,
            core: ClientCore::new(config, u64::from_le_bytes(seed)),
            router: Router::new(),
            signals: ClientSignals::default(),
            tickets: HashMap::new(),
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

    /// Whether the client has given up for good (refused, closed, or out of
    /// reconnect attempts).
    pub fn is_finished(&self) -> bool {
        self.core.is_finished()
    }

    /// Connects `slot` to every message on `channel`. The slot stays
    /// connected until the returned [`Connection`] is disconnected (or made
    /// [scoped](Connection::scoped)), or [`unsubscribe`](Self::unsubscribe).
    pub fn subscribe<C: Channel>(
        &self,
        channel: C,
        slot: impl FnMut(&Delivery) + 'static,
    ) -> Connection {
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
    /// as an error). Never blocks.
    pub fn send<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        content: &T,
    ) -> Result<(), SendError> {
        let socket = self.socket.as_ref().ok_or(SendError::Closed)?;
        socket.send(&Message::new(channel, action, content)?)
    }

    /// Sends a request; its verdict arrives through the returned ticket, the
    /// `request_done` signal and [`ClientEvent::RequestDone`]. Never blocks.
    pub fn request<C: Channel, A: Action, T: Serialize + ?Sized>(
        &mut self,
        channel: C,
        action: A,
        content: &T,
    ) -> Result<RequestTicket, RequestError> {
        if self.socket.is_none() {
            return Err(RequestError::NotConnected);
        }
        let content = crate::codec::encode_value(content)?;
        let id = self
            .core
            .request(channel.id(), action.id(), content, Instant::now())?;
        if let Some(Err(err)) = self.carry_out() {
            self.core.cancel_request(id);
            return Err(RequestError::Send(Arc::new(err)));
        }
        let status = Rc::new(RefCell::new(RequestStatus::Pending));
        self.tickets.insert(id, status.clone());
        Ok(RequestTicket { id, status })
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
            .map_or(SocketState::Closed, ExtendedTcpSocket::state)
    }

    /// Takes in what the network brought, then runs the signals and channel
    /// slots for it on this thread. Returns how many events were delivered.
    /// Call once per frame.
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), but first waits up to `timeout` for an
    /// event if none is queued.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        self.pump(timeout);
        let mut delivered = 0;
        while let Some(event) = self.events.pop_front() {
            delivered += 1;
            self.emit(event);
        }
        delivered
    }

    /// Takes in what the network brought and hands the events to the
    /// caller, in order; no signal or slot runs. The pull-style alternative
    /// to [`poll`](Self::poll): a game uses one or the other.
    pub fn drain(&mut self) -> std::collections::vec_deque::Drain<'_, ClientEvent> {
        self.drain_timeout(Duration::ZERO)
    }

    /// Like [`drain`](Self::drain), but first waits up to `timeout` for an
    /// event if none is queued.
    pub fn drain_timeout(
        &mut self,
        timeout: Duration,
    ) -> std::collections::vec_deque::Drain<'_, ClientEvent> {
        self.pump(timeout);
        self.events.drain(..)
    }

    /// Moves socket events into the core (waiting up to `timeout` for the
    /// first), runs its clock, carries out its actions, and keeps its events
    /// for the game.
    fn pump(&mut self, timeout: Duration) {
        let mut wait = if self.events.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        // At most a queue's worth per call: a server that sends as fast as
        // the game takes cannot keep one call (or the events kept for the
        // game) growing forever; the rest waits in the socket's queue.
        let mut budget = self.socket_config.event_queue_len.max(1);
        while budget > 0 {
            budget -= 1;
            if let Some(deadline) = self.core.next_deadline() {
                wait = wait.min(deadline.saturating_duration_since(Instant::now()));
            }
            let event = match self.socket.as_mut() {
                Some(socket) => socket.next_event_blocking(wait),
                None => {
                    if !wait.is_zero() && crate::runtime::may_block() {
                        std::thread::sleep(wait);
                    }
                    None
                }
            };
            let Some(event) = event else { break };
            wait = Duration::ZERO;
            self.take_in(event);
        }
        self.core.tick(Instant::now());
        self.carry_out();
        self.collect_events();
    }

    fn take_in(&mut self, event: SocketEvent) {
        if matches!(event, SocketEvent::Disconnected(_)) {
            self.socket = None;
        }
        self.core.handle(event, Instant::now());
    }

    /// Does what the core asked. Returns the result of the last send, for
    /// `request`.
    fn carry_out(&mut self) -> Option<Result<(), SendError>> {
        let mut last = None;
        while let Some(action) = self.core.poll_action() {
            match action {
                ClientAction::Connect => {
                    let config = self.socket_config.clone();
                    let addr = &self.servers[self.core.server() % self.servers.len()];
                    self.socket = Some(if addr.starts_with("ws://") {
                        ExtendedTcpSocket::connect_ws(addr, config)
                    } else {
                        ExtendedTcpSocket::connect(addr.clone(), config)
                    });
                }
                ClientAction::Send(message) => {
                    last = Some(match &self.socket {
                        Some(socket) => socket.send(&message),
                        None => Err(SendError::Closed),
                    });
                }
                ClientAction::Close(reason) => {
                    if let Some(socket) = &self.socket {
                        socket.close(&reason);
                    }
                }
            }
        }
        last
    }

    /// Moves the core's events into the game's queue, updating tickets.
    fn collect_events(&mut self) {
        while let Some(event) = self.core.poll_event() {
            if let ClientEvent::RequestDone { id, status } = &event {
                if let Some(cell) = self.tickets.remove(id) {
                    *cell.borrow_mut() = status.clone();
                }
            }
            self.events.push_back(event);
        }
    }

    fn emit(&self, event: ClientEvent) {
        let signals = &self.signals;
        match event {
            ClientEvent::Connected => signals.connected.emit(&()),
            ClientEvent::Welcomed(welcomed) => signals.welcomed.emit(&welcomed),
            ClientEvent::Refused(refused) => signals.refused.emit(&refused),
            ClientEvent::Message(message) => {
                signals.received.emit(&message);
                self.router.route(PeerId::SERVER, message);
            }
            ClientEvent::ConnectionLost(reason) => signals.connection_lost.emit(&reason),
            ClientEvent::Reconnecting(attempt) => signals.reconnecting.emit(&attempt),
            ClientEvent::Disconnected(reason) => signals.disconnected.emit(&reason),
            ClientEvent::Error(error) => signals.error.emit(&error),
            ClientEvent::RequestDone { id, status } => signals.request_done.emit(&(id, status)),
        }
    }
}

/// For tokio code: the client's events as a stream (on a `LocalSet` or a
/// current-thread runtime: the client is not `Send`). It ends once the
/// client has given up for good and every event was taken.
impl Stream for NetworkClient {
    type Item = ClientEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ClientEvent>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.events.pop_front() {
                return Poll::Ready(Some(event));
            }
            // Socket events first, then the clock.
            let mut progressed = false;
            if let Some(socket) = this.socket.as_mut() {
                if let Poll::Ready(Some(event)) = socket.poll_next_event(cx) {
                    this.take_in(event);
                    progressed = true;
                }
            }
            this.core.tick(Instant::now());
            this.carry_out();
            this.collect_events();
            if progressed || !this.events.is_empty() {
                continue;
            }
            if this.core.is_finished() {
                return Poll::Ready(None);
            }
            // Wake for the core's next deadline as well as for the socket.
            match this.core.next_deadline() {
                Some(deadline) => {
                    let deadline = tokio::time::Instant::from_std(deadline);
                    let timer = this
                        .timer
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                    if timer.deadline() != deadline {
                        timer.as_mut().reset(deadline);
                    }
                    if timer.as_mut().poll(cx).is_ready() {
                        continue;
                    }
                }
                None => this.timer = None,
            }
            return Poll::Pending;
        }
    }
}
