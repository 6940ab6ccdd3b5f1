//! [`NetworkClient`]: a client of a [`ServerManager`](crate::ServerManager),
//! local or remote, with channel subscribers, requests and reconnection.
//!
//! ```text
//!  connect ──▶ Connecting ──hello──▶ Welcomed ──connection lost──▶ Reconnecting ──hello(id, token)──▶ Welcomed
//!                 │ refused                                           │ attempts used up, refused,
//!                 ▼                                                   ▼ or a final close
//!             Disconnected ◀────────────────────────────────────── Disconnected
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::manager::protocol::{
    self, ErrorCode, ErrorReply, Hello, Refused, Rejected, RequestFrame, Resume, Welcome,
};
use crate::message::{Action, Channel, Message, SESSION_CHANNEL};
use crate::router::{Delivery, Router};
use crate::session::{ClientId, ReconnectToken};
use crate::signal::{Connection, Signal};
use crate::socket::{
    CloseCode, DisconnectReason, ExtendedTcpSocket, PeerId, SendError, SocketConfig, SocketEvent,
    SocketState,
};

/// When and how often a client tries to get its session back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// Whether to reconnect at all (default true).
    pub enabled: bool,
    /// Wait before the first attempt (default 200 ms); doubles per attempt.
    pub initial_delay: Duration,
    /// The longest wait between attempts (default 5 s).
    pub max_delay: Duration,
    /// Attempts before giving up (default 30).
    pub max_attempts: u32,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            initial_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            max_attempts: 30,
        }
    }
}

/// The settings of a [`NetworkClient`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The connection's limits and timers.
    pub socket: SocketConfig,
    /// The player's name (1..=32 characters).
    pub name: String,
    /// The join password of a hosted game.
    pub password: Option<String>,
    /// Opaque credentials for the server's authentication hook.
    pub credentials: Vec<u8>,
    /// Reconnection after a connection loss.
    pub reconnect: ReconnectPolicy,
    /// A request with no answer after this long fails with
    /// [`RequestError::Timeout`] (default 10 s).
    pub request_timeout: Duration,
    /// Requests awaiting an answer at once (default 1024); one more fails
    /// with [`RequestError::TooManyPending`].
    pub max_pending_requests: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            socket: SocketConfig::default(),
            name: "player".into(),
            password: None,
            credentials: Vec::new(),
            reconnect: ReconnectPolicy::default(),
            request_timeout: Duration::from_secs(10),
            max_pending_requests: 1024,
        }
    }
}

impl ClientConfig {
    /// Default settings with this player name.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }
}

/// Why a request did not get accepted or rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// There is no connection to send on (lost, or reconnecting).
    #[error("not connected")]
    NotConnected,
    /// `max_pending_requests` requests await answers already.
    #[error("too many requests awaiting answers")]
    TooManyPending,
    /// The message could not be queued.
    #[error("cannot send: {0}")]
    Send(String),
    /// No answer within `request_timeout`.
    #[error("no answer in time")]
    Timeout,
    /// The connection ended before the answer came; the request may or may
    /// not have been applied.
    #[error("connection lost before the answer")]
    ConnectionLost,
    /// The server could not handle the request at all.
    #[error("server error {code:?}: {detail}")]
    Server {
        /// What kind.
        code: ErrorCode,
        /// Details.
        detail: String,
    },
}

/// Where a request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestStatus {
    /// Sent, no answer yet.
    Pending,
    /// The server applied it.
    Accepted,
    /// The server's rules refused it; nothing changed. The reason is for the
    /// player.
    Rejected(String),
    /// It got no verdict.
    Failed(RequestError),
}

/// A request in flight; its status changes when `poll()` delivers the
/// answer. Also announced by [`ClientSignals::request_done`].
#[derive(Debug, Clone)]
pub struct RequestTicket {
    id: u64,
    status: Rc<RefCell<RequestStatus>>,
}

impl RequestTicket {
    /// The request id the server's answer carries.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The current status.
    pub fn status(&self) -> RequestStatus {
        self.status.borrow().clone()
    }

    /// Whether an answer (or a failure) has arrived.
    pub fn is_done(&self) -> bool {
        !matches!(*self.status.borrow(), RequestStatus::Pending)
    }
}

/// What the server said when it let the client in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcomed {
    /// The client's id.
    pub client: ClientId,
    /// Whether the old session was resumed after a reconnect.
    pub resumed: bool,
}

/// Something the client should know about that is not a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// The server could not handle a message.
    Server(ErrorReply),
    /// The server rejected a plain message (sent without a request id).
    Rejected(String),
    /// The connection reported a problem.
    Socket(String),
}

/// The signals of a client; slots run inside [`NetworkClient::poll`].
#[derive(Debug, Default)]
pub struct ClientSignals {
    /// The connection opened (the welcome follows).
    pub connected: Signal<()>,
    /// The server admitted the client (first join or resumed session).
    pub welcomed: Signal<Welcomed>,
    /// The server refused the client; no reconnect follows.
    pub refused: Signal<String>,
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

struct Pending {
    deadline: Instant,
    status: Rc<RefCell<RequestStatus>>,
}

/// A client of a Switchboard server: connect, subscribe slots to channels,
/// send requests, and call [`poll`](Self::poll) once per frame.
///
/// The client joins with a hello, keeps the id and the secret token the
/// server gives it, and after a connection loss reconnects with backoff,
/// presenting both to get the same id and session back.
pub struct NetworkClient {
    addr: String,
    config: ClientConfig,
    socket: Option<ExtendedTcpSocket>,
    router: Router,
    signals: ClientSignals,
    identity: Option<(ClientId, ReconnectToken)>,
    welcomed: bool,
    refused: bool,
    closed: bool,
    next_request: u64,
    pending: HashMap<u64, Pending>,
    /// The next reconnect attempt: its number and when.
    retry: Option<(u32, Instant)>,
}

impl std::fmt::Debug for NetworkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkClient")
            .field("addr", &self.addr)
            .field("client", &self.client_id())
            .field("welcomed", &self.welcomed)
            .finish()
    }
}

impl NetworkClient {
    /// Starts connecting to `addr` ("host:port" or a `SocketAddr`) and
    /// returns at once; `connected` and `welcomed` follow.
    pub fn connect(addr: impl ToString, config: ClientConfig) -> Self {
        let mut client = Self {
            addr: addr.to_string(),
            config,
            socket: None,
            router: Router::new(),
            signals: ClientSignals::default(),
            identity: None,
            welcomed: false,
            refused: false,
            closed: false,
            next_request: 1,
            pending: HashMap::new(),
            retry: None,
        };
        client.open_socket();
        client
    }

    fn open_socket(&mut self) {
        let socket = ExtendedTcpSocket::connect(self.addr.clone(), self.config.socket.clone());
        let hello = Hello {
            name: self.config.name.clone(),
            password: self.config.password.clone(),
            credentials: self.config.credentials.clone(),
            resume: self.identity.as_ref().map(|(client, token)| Resume {
                client: *client,
                token: token.clone(),
            }),
        };
        // Queued before anything else, so the server reads it first.
        let _ = socket.send(&protocol::session_message(protocol::HELLO, &hello));
        self.welcomed = false;
        self.socket = Some(socket);
    }

    /// The signals to connect slots to.
    pub fn signals(&self) -> &ClientSignals {
        &self.signals
    }

    /// The id the server gave, once welcomed (kept across reconnects).
    pub fn client_id(&self) -> Option<ClientId> {
        self.identity.as_ref().map(|(client, _)| *client)
    }

    /// Whether the server has welcomed this connection.
    pub fn is_welcomed(&self) -> bool {
        self.welcomed
    }

    /// Whether the client has given up for good (refused, closed, or out of
    /// reconnect attempts).
    pub fn is_finished(&self) -> bool {
        self.socket.is_none() && self.retry.is_none()
    }

    /// Connects `slot` to every message on `channel`. Dropping the returned
    /// [`Connection`] unsubscribes it.
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

    /// Messages that arrived on a channel without subscribers.
    pub fn unrouted(&self) -> u64 {
        self.router.unrouted()
    }

    /// Sends a plain message (no answer awaited; a rejection still arrives
    /// through the `error` signal). Never blocks.
    pub fn send<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        content: &T,
    ) -> Result<(), SendError> {
        let socket = self.socket.as_ref().ok_or(SendError::Closed)?;
        socket.send(&Message::new(channel, action, content)?)
    }

    /// Sends a request; its verdict arrives through the returned ticket and
    /// the `request_done` signal. Never blocks.
    pub fn request<C: Channel, A: Action, T: Serialize + ?Sized>(
        &mut self,
        channel: C,
        action: A,
        content: &T,
    ) -> Result<RequestTicket, RequestError> {
        let socket = self.socket.as_ref().ok_or(RequestError::NotConnected)?;
        if self.pending.len() >= self.config.max_pending_requests {
            return Err(RequestError::TooManyPending);
        }
        let content =
            crate::codec::encode_value(content).map_err(|e| RequestError::Send(e.to_string()))?;
        let id = self.next_request;
        let frame = RequestFrame {
            id,
            channel: channel.id(),
            action: action.id(),
            content,
        };
        socket
            .send(&protocol::session_message(protocol::REQUEST, &frame))
            .map_err(|e| RequestError::Send(e.to_string()))?;
        self.next_request += 1;
        let status = Rc::new(RefCell::new(RequestStatus::Pending));
        self.pending.insert(
            id,
            Pending {
                deadline: Instant::now() + self.config.request_timeout,
                status: status.clone(),
            },
        );
        Ok(RequestTicket { id, status })
    }

    /// Leaves the server for good: queued messages go first, then the
    /// goodbye; the server ends the session at once. No reconnect follows.
    pub fn close(&mut self, reason: &str) {
        self.closed = true;
        self.retry = None;
        if let Some(socket) = &self.socket {
            socket.close(reason);
        }
    }

    /// Where the current connection is in its life.
    pub fn state(&self) -> SocketState {
        self.socket
            .as_ref()
            .map_or(SocketState::Closed, ExtendedTcpSocket::state)
    }

    /// Delivers queued events to signals and subscribers on this thread,
    /// times out late requests, and starts due reconnects.
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), but first waits up to `timeout` for an
    /// event if none is queued.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        let mut delivered = 0;
        let mut wait = timeout;
        loop {
            let event = match self.socket.as_mut() {
                Some(socket) => socket.next_event_blocking(wait),
                None => {
                    if !wait.is_zero() && crate::runtime::may_block() {
                        let until_retry = self
                            .retry
                            .map_or(wait, |(_, at)| at.saturating_duration_since(Instant::now()));
                        std::thread::sleep(wait.min(until_retry));
                    }
                    None
                }
            };
            let Some(event) = event else { break };
            wait = Duration::ZERO;
            delivered += 1;
            self.on_event(event);
        }
        self.expire_requests();
        self.maybe_reconnect();
        delivered
    }

    fn on_event(&mut self, event: SocketEvent) {
        match event {
            SocketEvent::Connected => self.signals.connected.emit(&()),
            SocketEvent::Received(message) if message.channel_id() == SESSION_CHANNEL => {
                self.on_session_message(message)
            }
            SocketEvent::Received(message) => {
                self.signals.received.emit(&message);
                self.router.route(PeerId::SERVER, message);
            }
            SocketEvent::Error(err) => self
                .signals
                .error
                .emit(&ClientError::Socket(err.to_string())),
            SocketEvent::Disconnected(reason) => self.on_disconnected(reason),
        }
    }

    fn on_session_message(&mut self, message: Message) {
        match message.action_id() {
            protocol::WELCOME => {
                let Ok(welcome) = message.content::<Welcome>() else {
                    return;
                };
                self.identity = Some((welcome.client, welcome.token));
                self.welcomed = true;
                self.retry = None;
                self.signals.welcomed.emit(&Welcomed {
                    client: welcome.client,
                    resumed: welcome.resumed,
                });
            }
            protocol::REFUSED => {
                let refused = message
                    .content::<Refused>()
                    .map(|r| r.reason)
                    .unwrap_or_default();
                self.refused = true;
                self.signals.refused.emit(&refused);
            }
            protocol::ACCEPTED => {
                if let Ok(id) = message.content::<u64>() {
                    self.finish_request(id, RequestStatus::Accepted);
                }
            }
            protocol::REJECTED => {
                let Ok(rejected) = message.content::<Rejected>() else {
                    return;
                };
                if rejected.id == 0 {
                    self.signals
                        .error
                        .emit(&ClientError::Rejected(rejected.reason));
                } else {
                    self.finish_request(rejected.id, RequestStatus::Rejected(rejected.reason));
                }
            }
            protocol::ERROR => {
                let Ok(reply) = message.content::<ErrorReply>() else {
                    return;
                };
                if reply.id != 0 && self.pending.contains_key(&reply.id) {
                    let failure = RequestError::Server {
                        code: reply.code,
                        detail: reply.detail.clone(),
                    };
                    self.finish_request(reply.id, RequestStatus::Failed(failure));
                }
                self.signals.error.emit(&ClientError::Server(reply));
            }
            other => tracing::debug!(action = other, "unknown session action from server"),
        }
    }

    fn finish_request(&mut self, id: u64, status: RequestStatus) {
        if let Some(pending) = self.pending.remove(&id) {
            *pending.status.borrow_mut() = status.clone();
            self.signals.request_done.emit(&(id, status));
        }
    }

    fn fail_all_requests(&mut self, error: RequestError) {
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            self.finish_request(id, RequestStatus::Failed(error.clone()));
        }
    }

    fn expire_requests(&mut self) {
        let now = Instant::now();
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            self.finish_request(id, RequestStatus::Failed(RequestError::Timeout));
        }
    }

    fn on_disconnected(&mut self, reason: DisconnectReason) {
        self.socket = None;
        self.welcomed = false;
        self.fail_all_requests(RequestError::ConnectionLost);
        let policy = &self.config.reconnect;
        let attempt = self.retry.map_or(1, |(n, _)| n + 1);
        let may_retry = policy.enabled
            && !self.refused
            && !self.closed
            && self.identity.is_some()
            && worth_retrying(&reason)
            && attempt <= policy.max_attempts;
        if !may_retry {
            self.retry = None;
            self.signals.disconnected.emit(&reason);
            return;
        }
        if attempt == 1 {
            self.signals.connection_lost.emit(&reason);
        }
        let delay = policy
            .initial_delay
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(policy.max_delay);
        self.retry = Some((attempt, Instant::now() + delay));
    }

    fn maybe_reconnect(&mut self) {
        if let Some((attempt, at)) = self.retry {
            if self.socket.is_none() && Instant::now() >= at {
                self.signals.reconnecting.emit(&attempt);
                self.open_socket();
            }
        }
    }
}

/// Whether a connection that ended this way may get its session back.
fn worth_retrying(reason: &DisconnectReason) -> bool {
    match reason {
        DisconnectReason::ConnectionLost(_)
        | DisconnectReason::ConnectFailed(_)
        | DisconnectReason::IdleTimeout
        | DisconnectReason::HandshakeTimeout => true,
        DisconnectReason::ClosedByPeer { code, .. } => {
            *code == CloseCode::IDLE_TIMEOUT || *code == CloseCode::SLOW_CONSUMER
        }
        _ => false,
    }
}
