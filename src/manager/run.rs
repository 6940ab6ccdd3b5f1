//! The manager's event loop: from server events to session and logic calls,
//! and from the logic's outbox to addressed sends.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Instant;

use subtle::ConstantTimeEq;

use super::logic::{Audience, GameLogic, JoinRequest, Outbox, Rejection, RejectionKind, Request};
use super::protocol::{
    self, ErrorCode, ErrorReply, Hello, Refused, Rejected, RequestFrame, Welcome,
};
use super::stats::{ClientStats, ServerStats};
use super::{Control, LogEntry, LogLevel, ManagerConfig};
use crate::master::Announcer;
use crate::message::{Message, SESSION_CHANNEL};
use crate::session::{ClientId, RateLimiter, Refusal, Sessions};
use crate::socket::{CloseCode, DisconnectReason, PeerId, ServerEvent, ServerHandle, ServerStream};

/// Names at most this many characters long.
const MAX_NAME_CHARS: usize = 32;

fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// One connection, as the manager tracks it.
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

pub(super) struct Runner<L: GameLogic> {
    server: ServerStream,
    handle: ServerHandle,
    logic: L,
    config: ManagerConfig,
    control: Control,
    sessions: Sessions,
    peers: HashMap<PeerId, Peer>,
    stats: ServerStats,
    last_latency: Option<Instant>,
}

impl<L: GameLogic> Runner<L> {
    pub(super) fn new(
        server: ServerStream,
        logic: L,
        config: ManagerConfig,
        control: Control,
    ) -> Self {
        Self {
            handle: server.handle(),
            server,
            logic,
            sessions: Sessions::new(config.sessions.clone()),
            config,
            control,
            peers: HashMap::new(),
            stats: ServerStats::default(),
            last_latency: None,
        }
    }

    pub(super) async fn run(mut self, shutdown: impl Future<Output = ()>) -> L {
        tokio::pin!(shutdown);
        // Listed on master servers: heartbeats and answers on the game port.
        let announcer = match self.config.announce.clone() {
            Some(mut announce) => {
                // Complete before the first heartbeat goes out.
                self.refresh_listing(&mut announce.info);
                match Announcer::start(self.handle.local_addr(), announce).await {
                    Ok(announcer) => Some(announcer),
                    Err(err) => {
                        let addr = self.handle.local_addr();
                        self.log(
                            LogLevel::Warn,
                            format!("cannot announce on UDP {addr}: {err}"),
                        );
                        None
                    }
                }
            }
            None => None,
        };
        let mut tick = tokio::time::interval(self.config.tick_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = self.control.shutdown.clone();
        self.log(
            LogLevel::Info,
            format!("serving on {}", self.handle.local_addr()),
        );
        loop {
            tokio::select! {
                event = self.server.next_event() => match event {
                    Some(event) => self.on_event(event),
                    None => break,
                },
                Some(reply) = self.control.stats_rx.recv() => {
                    let _ = reply.send(self.snapshot());
                }
                _ = tick.tick() => {
                    self.on_tick();
                    if let Some(announcer) = &announcer {
                        announcer.update(|info| self.refresh_listing(info));
                    }
                }
                _ = &mut shutdown => break,
                _ = stop.cancelled() => break,
            }
        }
        self.shut_down().await;
        self.logic
    }

    async fn shut_down(&mut self) {
        self.log(LogLevel::Info, "shutting down".to_string());
        self.handle.shutdown("server shutting down");
        let deadline = tokio::time::Instant::now() + self.config.shutdown_timeout;
        // Keep draining events so that every connection can finish flushing.
        while let Ok(Some(event)) =
            tokio::time::timeout_at(deadline, self.server.next_event()).await
        {
            if let ServerEvent::PeerDisconnected { peer, reason } = event {
                self.on_disconnected(peer, reason);
            }
        }
    }

    /// Keeps what the server announces current: its player count, and its
    /// capacity when the game did not set one.
    fn refresh_listing(&self, info: &mut crate::master::ServerInfo) {
        let players = self.peers.values().filter(|p| p.client.is_some()).count();
        info.players = players.min(u16::MAX as usize) as u16;
        if info.max_players == 0 {
            info.max_players = self.config.sessions.max_sessions.min(u16::MAX as usize) as u16;
        }
        info.max_players = info.max_players.max(info.players);
        info.bots = info.bots.min(info.players);
    }

    fn on_event(&mut self, event: ServerEvent) {
        match event {
            ServerEvent::PeerConnected { peer, addr } => {
                let at = now();
                self.stats.connections_total += 1;
                self.peers.insert(
                    peer,
                    Peer {
                        addr,
                        connected_at: at,
                        last_activity: at,
                        limiter: RateLimiter::new(
                            self.config.message_rate,
                            self.config.byte_rate,
                            at,
                        ),
                        strikes: VecDeque::new(),
                        client: None,
                        closing: false,
                    },
                );
            }
            ServerEvent::Received(incoming) => self.on_message(incoming.peer, incoming.message),
            ServerEvent::PeerError { peer, error } => {
                self.log(LogLevel::Warn, format!("{peer}: {error}"));
            }
            ServerEvent::PeerDisconnected { peer, reason } => self.on_disconnected(peer, reason),
        }
    }

    fn on_message(&mut self, peer: PeerId, message: Message) {
        let at = now();
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        state.last_activity = at;
        let len = message.content_bytes().len() + 8;
        if !state.limiter.allow(len, at) {
            self.stats.rate_limited_total += 1;
            let detail = format!(
                "over the rate limit; retry in {:?}",
                state.limiter.retry_after(len)
            );
            self.error_reply(peer, 0, ErrorCode::RateLimited, detail);
            return;
        }
        let client = state.client;
        match (message.channel_id(), client) {
            (SESSION_CHANNEL, _) => self.on_session_message(peer, client, message),
            // Channel 0 is the socket's own; 2..=15 carry framework features
            // built on the game logic (rooms) and reach it like any other.
            (channel, _) if channel < SESSION_CHANNEL => {
                self.error_reply(
                    peer,
                    0,
                    ErrorCode::UnknownChannel,
                    format!("channel {channel} is reserved"),
                );
            }
            (_, Some(client)) => self.on_request(peer, client, 0, message),
            (_, None) => {
                self.error_reply(peer, 0, ErrorCode::NotWelcomed, "send a hello first".into())
            }
        }
    }

    fn on_session_message(&mut self, peer: PeerId, client: Option<ClientId>, message: Message) {
        match (message.action_id(), client) {
            (protocol::HELLO, None) => match message.content::<Hello>() {
                Ok(hello) => self.on_hello(peer, hello),
                Err(err) => self.error_reply(peer, 0, ErrorCode::BadContent, err.to_string()),
            },
            (protocol::REQUEST, Some(client)) => match RequestFrame::decode(&message) {
                Ok(frame) if frame.id != 0 => {
                    let inner = frame.message();
                    if inner.channel_id() <= SESSION_CHANNEL {
                        let detail = format!("channel {} is reserved", inner.channel_id());
                        self.error_reply(peer, frame.id, ErrorCode::UnknownChannel, detail);
                    } else {
                        self.on_request(peer, client, frame.id, inner);
                    }
                }
                Ok(_) => self.error_reply(peer, 0, ErrorCode::BadContent, "request id 0".into()),
                Err(err) => self.error_reply(peer, 0, ErrorCode::BadContent, err.to_string()),
            },
            (protocol::REQUEST, None) => {
                self.error_reply(peer, 0, ErrorCode::NotWelcomed, "send a hello first".into())
            }
            (action, _) => self.error_reply(
                peer,
                0,
                ErrorCode::UnknownSessionAction,
                format!("session action {action} is not expected here"),
            ),
        }
    }

    fn on_hello(&mut self, peer: PeerId, hello: Hello) {
        let at = now();
        let admission = match &hello.resume {
            Some(resume) => self.sessions.resume(peer, resume.client, &resume.token, at),
            None => self.admit(peer, &hello, at),
        };
        let admission = match admission {
            Ok(admission) => admission,
            Err(refusal) => return self.refuse(peer, &hello, refusal),
        };
        if let Some(state) = self.peers.get_mut(&peer) {
            state.client = Some(admission.client);
        }
        if let Some(old) = admission.replaced {
            self.handle.close_peer_with(
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
        let _ = self.handle.send_to(
            peer,
            &protocol::session_message(protocol::WELCOME, &welcome),
        );
        let mut out = Outbox::default();
        if admission.resumed {
            self.stats.resumes_total += 1;
            self.log(
                LogLevel::Info,
                format!("{} is back ({peer})", admission.client),
            );
            self.logic.on_reconnect(admission.client, &mut out);
        } else {
            self.stats.joins_total += 1;
            let name = hello.name.escape_debug().to_string();
            self.log(
                LogLevel::Info,
                format!("{} joined as \"{name}\" ({peer})", admission.client),
            );
            self.logic.on_join(admission.client, &hello.name, &mut out);
        }
        self.dispatch(out);
    }

    fn admit(
        &mut self,
        peer: PeerId,
        hello: &Hello,
        at: Instant,
    ) -> Result<crate::session::Admission, Refusal> {
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
        self.sessions.admit_new(peer, name, at)
    }

    fn refuse(&mut self, peer: PeerId, hello: &Hello, refusal: Refusal) {
        self.stats.refused_total += 1;
        let name = hello.name.escape_debug().to_string();
        self.log(
            LogLevel::Warn,
            format!("{peer} (\"{name}\") refused: {refusal}"),
        );
        let refused = Refused {
            code: refusal.code(),
            reason: refusal.to_string(),
        };
        let _ = self.handle.send_to(
            peer,
            &protocol::session_message(protocol::REFUSED, &refused),
        );
        self.handle
            .close_peer_with(peer, CloseCode::REFUSED, &refusal.to_string());
    }

    fn on_request(&mut self, peer: PeerId, client: ClientId, id: u64, message: Message) {
        let request = Request {
            client,
            id,
            message,
        };
        match self.logic.validate(&request) {
            Ok(command) => {
                let mut out = Outbox::default();
                self.logic.apply(client, command, &mut out);
                self.stats.accepted_total += 1;
                // Updates first: when the requester hears "accepted", it has
                // already received the state the request produced.
                self.dispatch(out);
                if id != 0 {
                    let _ = self
                        .handle
                        .send_to(peer, &protocol::session_message(protocol::ACCEPTED, &id));
                }
            }
            Err(Rejection {
                kind: RejectionKind::Invalid,
                reason,
            }) => {
                self.stats.rejected_total += 1;
                let rejected = Rejected { id, reason };
                let _ = self.handle.send_to(
                    peer,
                    &protocol::session_message(protocol::REJECTED, &rejected),
                );
            }
            Err(Rejection { kind, reason }) => {
                let code = match kind {
                    RejectionKind::UnknownChannel => ErrorCode::UnknownChannel,
                    RejectionKind::UnknownAction => ErrorCode::UnknownAction,
                    _ => ErrorCode::BadContent,
                };
                self.error_reply(peer, id, code, reason);
            }
        }
    }

    /// Answers a message that could not be handled, and counts a strike.
    fn error_reply(&mut self, peer: PeerId, id: u64, code: ErrorCode, detail: String) {
        self.stats.errors_total += 1;
        let reply = ErrorReply { id, code, detail };
        let _ = self
            .handle
            .send_to(peer, &protocol::session_message(protocol::ERROR, &reply));
        let at = now();
        let window = self.config.strike_window;
        let max = self.config.max_strikes as usize;
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        state.strikes.push_back(at);
        while state
            .strikes
            .front()
            .is_some_and(|t| at.saturating_duration_since(*t) > window)
        {
            state.strikes.pop_front();
        }
        if state.strikes.len() > max {
            state.strikes.clear();
            self.log(
                LogLevel::Warn,
                format!("{peer}: disconnected after too many invalid messages"),
            );
            self.handle
                .close_peer_with(peer, CloseCode::ABUSE, "too many invalid messages");
        }
    }

    fn on_disconnected(&mut self, peer: PeerId, reason: DisconnectReason) {
        *self
            .stats
            .disconnects
            .entry(reason_kind(&reason))
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
                self.log(LogLevel::Info, format!("{} left ({reason})", session.id));
                self.logic.on_leave(session.id, &mut out);
            }
        } else if let Some(client) = self.sessions.connection_lost(peer, now()) {
            self.log(
                LogLevel::Info,
                format!("{client} lost its connection ({reason})"),
            );
            self.logic.on_connection_lost(client, &mut out);
        }
        self.dispatch(out);
    }

    fn on_tick(&mut self) {
        let at = now();
        let mut out = Outbox::default();
        self.logic.on_tick(at, &mut out);
        if self
            .last_latency
            .is_none_or(|t| at.saturating_duration_since(t) >= std::time::Duration::from_secs(1))
        {
            self.last_latency = Some(at);
            let latencies: Vec<(ClientId, std::time::Duration)> = self
                .peers
                .iter()
                .filter_map(|(peer, state)| {
                    let rtt = self.handle.peer(*peer)?.stats().rtt_micros;
                    Some((state.client?, std::time::Duration::from_micros(rtt)))
                })
                .collect();
            if !latencies.is_empty() {
                self.logic.on_latency(&latencies, &mut out);
            }
        }
        for session in self.sessions.expire(at) {
            self.log(
                LogLevel::Info,
                format!("{} expired after its grace period", session.id),
            );
            self.logic.on_leave(session.id, &mut out);
        }
        self.dispatch(out);
        let late: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| {
                p.client.is_none()
                    && !p.closing
                    && at.saturating_duration_since(p.connected_at) > self.config.hello_timeout
            })
            .map(|(peer, _)| *peer)
            .collect();
        for peer in late {
            self.handle
                .close_peer_with(peer, CloseCode::IDLE_TIMEOUT, "no hello in time");
            if let Some(state) = self.peers.get_mut(&peer) {
                state.closing = true;
            }
        }
    }

    /// Sends every update to exactly its audience, encoding each once.
    fn dispatch(&mut self, mut out: Outbox) {
        for (audience, message) in out.take() {
            let Ok(encoded) = self.handle.encode(&message) else {
                self.log(LogLevel::Warn, "an update was too large to send".into());
                continue;
            };
            let targets: Vec<PeerId> = match &audience {
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
            self.handle.send_encoded_to_many(targets, &encoded);
        }
    }

    fn snapshot(&self) -> ServerStats {
        let at = now();
        let mut stats = self.stats.clone();
        stats.sessions = self.sessions.len();
        stats.clients = self
            .peers
            .iter()
            .filter_map(|(peer, state)| {
                let client = state.client?;
                let socket = self.handle.peer(*peer)?.stats();
                Some(ClientStats {
                    id: client,
                    name: self
                        .sessions
                        .get(client)
                        .map(|s| s.name.clone())
                        .unwrap_or_default(),
                    addr: state.addr,
                    connected_for: at.saturating_duration_since(state.connected_at),
                    idle_for: at.saturating_duration_since(state.last_activity),
                    messages_in: socket.frames_in,
                    bytes_in: socket.bytes_in,
                    messages_out: socket.frames_out,
                    bytes_out: socket.bytes_out,
                    rtt_micros: socket.rtt_micros,
                })
            })
            .collect();
        stats.clients.sort_by_key(|c| c.id);
        stats
    }

    fn log(&self, level: LogLevel, text: String) {
        match level {
            LogLevel::Info => tracing::info!("{text}"),
            LogLevel::Warn => tracing::warn!("{text}"),
        }
        let _ = self.control.log.send(LogEntry { level, text });
    }
}

/// A short stable name for a disconnect reason, for the stats.
fn reason_kind(reason: &DisconnectReason) -> String {
    let kind = match reason {
        DisconnectReason::Closed { .. } => "closed by server",
        DisconnectReason::ClosedByPeer { .. } => "closed by client",
        DisconnectReason::ConnectFailed(_) => "connect failed",
        DisconnectReason::ConnectionLost(_) => "connection lost",
        DisconnectReason::SlowConsumer => "slow consumer",
        DisconnectReason::IdleTimeout => "idle timeout",
        DisconnectReason::HandshakeTimeout => "handshake timeout",
        DisconnectReason::NotSwitchboard => "not switchboard",
        DisconnectReason::VersionMismatch { .. } => "version mismatch",
        DisconnectReason::ProtocolError(_) => "protocol error",
        DisconnectReason::ServerFull => "server full",
    };
    kind.to_string()
}
