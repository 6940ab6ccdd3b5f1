//! [`ManagerCore`]: the manager's rules as a state machine, with no socket
//! and no clock.
//!
//! ```text
//!  driver (tokio, or the in-memory harness)             ManagerCore
//!    connection opened / message / closed ──handle(event, now)──▶ sessions, rate limits,
//!    timer                               ──tick(now, rtt)──────▶ validate, apply, expire
//!    send / close / log          ◀──────── actions ──────────────┘
//! ```
//!
//! The tokio driver ([`ServerManager`](super::ServerManager)) turns socket
//! events into [`ManagerEvent`]s and carries out the [`ManagerAction`]s;
//! [`harness`](crate::harness) does the same in memory, with a clock the test
//! moves. Everything a server decides is decided here.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use super::logic::{Audience, GameLogic, JoinRequest, Outbox, Rejection, RejectionKind, Request};
use super::protocol::{
    self, ErrorCode, ErrorReply, Hello, Refused, Rejected, RequestFrame, Welcome,
};
use super::stats::{ClientStats, ServerStats};
use super::{LogEntry, LogLevel, ManagerConfig};
use crate::message::{Message, SESSION_CHANNEL};
use crate::session::{Admission, ClientId, RateLimiter, Refusal, Sessions};
use crate::socket::{CloseCode, DisconnectReason, PeerId};

/// Names at most this many characters long.
const MAX_NAME_CHARS: usize = 32;

/// How often the logic hears its clients' round-trip times.
const LATENCY_EVERY: Duration = Duration::from_secs(1);

/// What happened on the network, as the core takes it.
#[derive(Debug)]
#[non_exhaustive]
pub enum ManagerEvent {
    /// A connection completed its handshake.
    Connected {
        /// Its id.
        peer: PeerId,
        /// Its address.
        addr: SocketAddr,
    },
    /// A message arrived from a connection.
    Received {
        /// From whom.
        peer: PeerId,
        /// What.
        message: Message,
    },
    /// A connection ended.
    Disconnected {
        /// Which.
        peer: PeerId,
        /// Why.
        reason: DisconnectReason,
    },
}

/// What the core asks its driver to do, in order.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ManagerAction {
    /// Send `message` to one connection.
    Send {
        /// To whom.
        peer: PeerId,
        /// What.
        message: Message,
    },
    /// Send `message` to each of `peers`, encoded once.
    SendToMany {
        /// To whom.
        peers: Vec<PeerId>,
        /// What.
        message: Message,
    },
    /// Close a connection after what was queued for it, telling it why.
    Close {
        /// Which.
        peer: PeerId,
        /// The close code the peer reads.
        code: CloseCode,
        /// Why, for people.
        reason: String,
    },
    /// A line for the operator's log (already given to `tracing`).
    Log(LogEntry),
}

/// One connection, as the manager tracks it.
#[derive(Debug)]
struct Peer {
    addr: SocketAddr,
    connected_at: Instant,
    last_activity: Instant,
    limiter: RateLimiter,
    strikes: VecDeque<Instant>,
    client: Option<ClientId>,
    /// Already told to go (late hello); waiting for its disconnect event.
    closing: bool,
}

/// The manager's sessions, request validation and addressed updates, driven
/// by [`handle`](Self::handle) and [`tick`](Self::tick).
#[derive(Debug)]
pub struct ManagerCore<L: GameLogic> {
    logic: L,
    config: ManagerConfig,
    sessions: Sessions,
    peers: HashMap<PeerId, Peer>,
    stats: ServerStats,
    last_latency: Option<Instant>,
    actions: Vec<ManagerAction>,
}

impl<L: GameLogic> ManagerCore<L> {
    /// A core with no connection yet.
    pub fn new(config: ManagerConfig, logic: L) -> Self {
        Self {
            logic,
            sessions: Sessions::new(config.sessions.clone()),
            config,
            peers: HashMap::new(),
            stats: ServerStats::default(),
            last_latency: None,
            actions: Vec::new(),
        }
    }

    /// The game's logic.
    pub fn logic(&self) -> &L {
        &self.logic
    }

    /// The game's logic, to change it from outside a request (an editor, a
    /// test). Updates it wants sent go through [`broadcast`](Self::broadcast).
    pub fn logic_mut(&mut self) -> &mut L {
        &mut self.logic
    }

    /// Gives the logic back.
    pub fn into_logic(self) -> L {
        self.logic
    }

    /// The settings.
    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// How often [`tick`](Self::tick) wants to run: the logic's own rate
    /// ([`GameLogic::tick_interval`]) when it has one, else the config's.
    pub fn tick_interval(&self) -> Duration {
        self.logic
            .tick_interval()
            .unwrap_or(self.config.tick_interval)
    }

    /// Clients welcomed and connected now.
    pub fn players(&self) -> usize {
        self.peers.values().filter(|p| p.client.is_some()).count()
    }

    /// Takes in one network event; returns what to do about it.
    pub fn handle(
        &mut self,
        event: ManagerEvent,
        now: Instant,
    ) -> std::vec::Drain<'_, ManagerAction> {
        match event {
            ManagerEvent::Connected { peer, addr } => self.on_connected(peer, addr, now),
            ManagerEvent::Received { peer, message } => self.on_message(peer, message, now),
            ManagerEvent::Disconnected { peer, reason } => self.on_disconnected(peer, reason, now),
        }
        self.actions.drain(..)
    }

    /// Work on the clock: the logic's tick, its latency report (`rtt` gives
    /// a connection's measured round trip), expired sessions, late hellos.
    pub fn tick(
        &mut self,
        now: Instant,
        rtt: impl Fn(PeerId) -> Option<Duration>,
    ) -> std::vec::Drain<'_, ManagerAction> {
        let mut out = Outbox::default();
        self.logic.on_tick(now, &mut out);
        if self
            .last_latency
            .is_none_or(|t| now.saturating_duration_since(t) >= LATENCY_EVERY)
        {
            self.last_latency = Some(now);
            let latencies: Vec<(ClientId, Duration)> = self
                .peers
                .iter()
                .filter_map(|(peer, state)| Some((state.client?, rtt(*peer).unwrap_or_default())))
                .collect();
            if !latencies.is_empty() {
                self.logic.on_latency(&latencies, &mut out);
            }
        }
        for session in self.sessions.expire(now) {
            tracing::info!(client = %session.id, "session expired after its grace period");
            self.log(
                LogLevel::Info,
                format!("{} expired after its grace period", session.id),
            );
            self.logic.on_leave(session.id, &mut out);
        }
        self.dispatch(out);
        let hello_timeout = self.config.hello_timeout;
        let late: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| {
                p.client.is_none()
                    && !p.closing
                    && now.saturating_duration_since(p.connected_at) > hello_timeout
            })
            .map(|(peer, _)| *peer)
            .collect();
        for peer in late {
            self.close(peer, CloseCode::IDLE_TIMEOUT, "no hello in time");
            if let Some(state) = self.peers.get_mut(&peer) {
                state.closing = true;
            }
        }
        self.actions.drain(..)
    }

    /// Sends updates from outside a request (an operator's broadcast, a
    /// change made through [`logic_mut`](Self::logic_mut)).
    pub fn broadcast(&mut self, out: Outbox) -> std::vec::Drain<'_, ManagerAction> {
        self.dispatch(out);
        self.actions.drain(..)
    }

    /// The counters and connected clients; `socket` adds a connection's
    /// transport counters (frames, bytes, round trip) where the driver has
    /// them.
    pub fn snapshot(
        &self,
        now: Instant,
        socket: impl Fn(PeerId) -> Option<crate::socket::SocketStats>,
    ) -> ServerStats {
        let mut stats = self.stats.clone();
        stats.sessions = self.sessions.len();
        stats.clients = self
            .peers
            .iter()
            .filter_map(|(peer, state)| {
                let client = state.client?;
                let counters = socket(*peer).unwrap_or_default();
                Some(ClientStats {
                    id: client,
                    name: self
                        .sessions
                        .get(client)
                        .map(|s| s.name.clone())
                        .unwrap_or_default(),
                    addr: state.addr,
                    connected_for: now.saturating_duration_since(state.connected_at),
                    idle_for: now.saturating_duration_since(state.last_activity),
                    messages_in: counters.frames_in,
                    bytes_in: counters.bytes_in,
                    messages_out: counters.frames_out,
                    bytes_out: counters.bytes_out,
                    rtt_micros: counters.rtt_micros,
                })
            })
            .collect();
        stats.clients.sort_by_key(|c| c.id);
        stats
    }

    fn on_connected(&mut self, peer: PeerId, addr: SocketAddr, now: Instant) {
        self.stats.connections_total += 1;
        self.peers.insert(
            peer,
            Peer {
                addr,
                connected_at: now,
                last_activity: now,
                limiter: RateLimiter::new(self.config.message_rate, self.config.byte_rate, now),
                strikes: VecDeque::new(),
                client: None,
                closing: false,
            },
        );
    }

    fn on_message(&mut self, peer: PeerId, message: Message, now: Instant) {
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        state.last_activity = now;
        let len = message.content_bytes().len() + 8;
        if !state.limiter.allow(len, now) {
            self.stats.rate_limited_total += 1;
            let detail = format!(
                "over the rate limit; retry in {:?}",
                state.limiter.retry_after(len)
            );
            return self.error_reply(peer, 0, ErrorCode::RateLimited, detail, now);
        }
        let client = state.client;
        match (message.channel_id(), client) {
            (SESSION_CHANNEL, _) => self.on_session_message(peer, client, message, now),
            // Channel 0 is the socket's own; 2..=15 carry framework features
            // built on the game logic (rooms) and reach it like any other.
            (channel, _) if channel < SESSION_CHANNEL => {
                let detail = format!("channel {channel} is reserved");
                self.error_reply(peer, 0, ErrorCode::UnknownChannel, detail, now);
            }
            (_, Some(client)) => self.on_request(peer, client, 0, message, now),
            (_, None) => {
                let detail = "send a hello first".into();
                self.error_reply(peer, 0, ErrorCode::NotWelcomed, detail, now)
            }
        }
    }

    fn on_session_message(
        &mut self,
        peer: PeerId,
        client: Option<ClientId>,
        message: Message,
        now: Instant,
    ) {
        let bad = ErrorCode::BadContent;
        match (message.action_id(), client) {
            (protocol::HELLO, None) => match message.content::<Hello>() {
                Ok(hello) => self.on_hello(peer, hello, now),
                Err(err) => self.error_reply(peer, 0, bad, err.to_string(), now),
            },
            (protocol::REQUEST, Some(client)) => match RequestFrame::decode(&message) {
                Ok(frame) if frame.id != 0 => {
                    let inner = frame.message();
                    if inner.channel_id() <= SESSION_CHANNEL {
                        let detail = format!("channel {} is reserved", inner.channel_id());
                        self.error_reply(peer, frame.id, ErrorCode::UnknownChannel, detail, now);
                    } else {
                        self.on_request(peer, client, frame.id, inner, now);
                    }
                }
                Ok(_) => self.error_reply(peer, 0, bad, "request id 0".into(), now),
                Err(err) => self.error_reply(peer, 0, bad, err.to_string(), now),
            },
            (protocol::REQUEST, None) => {
                let detail = "send a hello first".into();
                self.error_reply(peer, 0, ErrorCode::NotWelcomed, detail, now)
            }
            (action, _) => {
                let detail = format!("session action {action} is not expected here");
                self.error_reply(peer, 0, ErrorCode::UnknownSessionAction, detail, now)
            }
        }
    }

    fn on_hello(&mut self, peer: PeerId, hello: Hello, now: Instant) {
        let admission = match &hello.resume {
            Some(resume) => self
                .sessions
                .resume(peer, resume.client, &resume.token, now),
            None => self.admit(peer, &hello, now),
        };
        let admission = match admission {
            Ok(admission) => admission,
            Err(refusal) => return self.refuse(peer, &hello, refusal),
        };
        if let Some(state) = self.peers.get_mut(&peer) {
            state.client = Some(admission.client);
        }
        if let Some(old) = admission.replaced {
            self.close(
                old,
                CloseCode::REPLACED,
                "replaced by a new connection of the same client",
            );
            if let Some(old_state) = self.peers.get_mut(&old) {
                old_state.client = None;
            }
        }
        let welcome = Welcome {
            client: admission.client,
            token: admission.token,
            resumed: admission.resumed,
            grace_secs: self
                .config
                .sessions
                .grace_period
                .as_secs()
                .min(u32::MAX as u64) as u32,
        };
        self.send(peer, protocol::session_message(protocol::WELCOME, &welcome));
        let mut out = Outbox::default();
        let client = admission.client;
        if admission.resumed {
            self.stats.resumes_total += 1;
            tracing::info!(%client, %peer, "client is back");
            self.log(LogLevel::Info, format!("{client} is back ({peer})"));
            self.logic.on_reconnect(client, &mut out);
        } else {
            self.stats.joins_total += 1;
            let name = hello.name.escape_debug().to_string();
            tracing::info!(%client, %peer, name = %name, "client joined");
            self.log(
                LogLevel::Info,
                format!("{client} joined as \"{name}\" ({peer})"),
            );
            self.logic.on_join(client, &hello.name, &mut out);
        }
        self.dispatch(out);
    }

    fn admit(&mut self, peer: PeerId, hello: &Hello, now: Instant) -> Result<Admission, Refusal> {
        let name = hello.name.trim();
        if name.is_empty()
            || name.chars().count() > MAX_NAME_CHARS
            || name.chars().any(char::is_control)
        {
            return Err(Refusal::InvalidName(format!(
                "a name has 1 to {MAX_NAME_CHARS} characters and no control characters"
            )));
        }
        if let Some(expected) = &self.config.password {
            let given = hello.password.as_deref().unwrap_or("");
            if !bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
                return Err(Refusal::WrongPassword);
            }
        }
        let join = JoinRequest {
            name,
            credentials: &hello.credentials,
            addr: self.peers.get(&peer).map(|p| p.addr),
        };
        self.logic
            .authenticate(&join)
            .map_err(Refusal::NotAllowed)?;
        self.sessions.admit_new(peer, name, now)
    }

    fn refuse(&mut self, peer: PeerId, hello: &Hello, refusal: Refusal) {
        self.stats.refused_total += 1;
        let name = hello.name.escape_debug().to_string();
        tracing::warn!(%peer, name = %name, %refusal, "hello refused");
        self.log(
            LogLevel::Warn,
            format!("{peer} (\"{name}\") refused: {refusal}"),
        );
        let refused = Refused {
            code: refusal.code(),
            reason: refusal.to_string(),
        };
        self.send(peer, protocol::session_message(protocol::REFUSED, &refused));
        self.close(peer, CloseCode::REFUSED, &refusal.to_string());
    }

    fn on_request(
        &mut self,
        peer: PeerId,
        client: ClientId,
        id: u64,
        message: Message,
        now: Instant,
    ) {
        let request = Request {
            client,
            id,
            message,
        };
        // The game's own log lines inside validate and apply carry the client.
        let _session = tracing::info_span!("session", %client, request = id).entered();
        match self.logic.validate(&request) {
            Ok(command) => {
                let mut out = Outbox::default();
                self.logic.apply(client, command, &mut out);
                self.stats.accepted_total += 1;
                // Updates first: when the requester hears "accepted", it has
                // already received the state the request produced.
                self.dispatch(out);
                if id != 0 {
                    self.send(peer, protocol::session_message(protocol::ACCEPTED, &id));
                }
            }
            Err(Rejection {
                kind: RejectionKind::Invalid,
                reason,
            }) => {
                self.stats.rejected_total += 1;
                let rejected = Rejected { id, reason };
                self.send(
                    peer,
                    protocol::session_message(protocol::REJECTED, &rejected),
                );
            }
            Err(Rejection { kind, reason }) => {
                let code = match kind {
                    RejectionKind::UnknownChannel => ErrorCode::UnknownChannel,
                    RejectionKind::UnknownAction => ErrorCode::UnknownAction,
                    _ => ErrorCode::BadContent,
                };
                self.error_reply(peer, id, code, reason, now);
            }
        }
    }

    /// Answers a message that could not be handled, and counts a strike.
    fn error_reply(
        &mut self,
        peer: PeerId,
        id: u64,
        code: ErrorCode,
        detail: String,
        now: Instant,
    ) {
        self.stats.errors_total += 1;
        let reply = ErrorReply { id, code, detail };
        self.send(peer, protocol::session_message(protocol::ERROR, &reply));
        let window = self.config.strike_window;
        let max = self.config.max_strikes as usize;
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        state.strikes.push_back(now);
        while state
            .strikes
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > window)
        {
            state.strikes.pop_front();
        }
        if state.strikes.len() > max {
            state.strikes.clear();
            tracing::warn!(%peer, "disconnected after too many invalid messages");
            self.log(
                LogLevel::Warn,
                format!("{peer}: disconnected after too many invalid messages"),
            );
            self.close(peer, CloseCode::ABUSE, "too many invalid messages");
        }
    }

    fn on_disconnected(&mut self, peer: PeerId, reason: DisconnectReason, now: Instant) {
        *self
            .stats
            .disconnects
            .entry(reason.kind().to_string())
            .or_default() += 1;
        let Some(state) = self.peers.remove(&peer) else {
            return;
        };
        if state.client.is_none() {
            return;
        }
        let left = matches!(&reason, DisconnectReason::ClosedByPeer { code, .. } if *code == CloseCode::NORMAL);
        let mut out = Outbox::default();
        if left {
            if let Some(session) = self.sessions.leave(peer) {
                tracing::info!(client = %session.id, %peer, %reason, "client left");
                self.log(LogLevel::Info, format!("{} left ({reason})", session.id));
                self.logic.on_leave(session.id, &mut out);
            }
        } else if let Some(client) = self.sessions.connection_lost(peer, now) {
            tracing::info!(%client, %peer, %reason, "client lost its connection");
            self.log(
                LogLevel::Info,
                format!("{client} lost its connection ({reason})"),
            );
            self.logic.on_connection_lost(client, &mut out);
        }
        self.dispatch(out);
    }

    /// Sends every update to exactly its audience.
    fn dispatch(&mut self, mut out: Outbox) {
        for (audience, message) in out.take() {
            let peers: Vec<PeerId> = match &audience {
                Audience::One(client) => self
                    .sessions
                    .get(*client)
                    .and_then(|s| s.peer())
                    .into_iter()
                    .collect(),
                Audience::Only(list) => list
                    .iter()
                    .filter_map(|c| self.sessions.get(*c).and_then(|s| s.peer()))
                    .collect(),
                _ => self
                    .sessions
                    .iter()
                    .filter(|s| audience.includes(s.id))
                    .filter_map(|s| s.peer())
                    .collect(),
            };
            if !peers.is_empty() {
                self.actions
                    .push(ManagerAction::SendToMany { peers, message });
            }
        }
    }

    fn send(&mut self, peer: PeerId, message: Message) {
        self.actions.push(ManagerAction::Send { peer, message });
    }

    fn close(&mut self, peer: PeerId, code: CloseCode, reason: &str) {
        self.actions.push(ManagerAction::Close {
            peer,
            code,
            reason: reason.to_string(),
        });
    }

    fn log(&mut self, level: LogLevel, text: String) {
        self.actions
            .push(ManagerAction::Log(LogEntry { level, text }));
    }
}
