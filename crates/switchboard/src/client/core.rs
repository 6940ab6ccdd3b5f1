//! [`ClientCore`]: a client's session rules as a state machine, with no
//! socket and no clock.
//!
//! ```text
//!  start ──▶ Connecting ──hello──▶ Welcomed ──connection lost──▶ Reconnecting ──hello(id, token)──▶ Welcomed
//!               │ refused                                           │ attempts used up, refused,
//!               ▼                                                   ▼ or a final close
//!           Disconnected ◀────────────────────────────────────── Disconnected
//! ```
//!
//! The driver ([`NetworkClient`](super::NetworkClient), or the in-memory
//! [`harness`](crate::harness)) feeds it the connection's events and the
//! time, carries out its [`ClientAction`]s (open a connection, send, close)
//! and hands its [`ClientEvent`]s to the game.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::{ClientConfig, ClientError, RequestError, RequestStatus, Welcomed};
use crate::manager::protocol::{
    self, ErrorReply, Hello, Refused, Rejected, RequestFrame, Resume, Welcome,
};
use crate::message::{Message, SESSION_CHANNEL};
use crate::session::{ClientId, ReconnectToken};
use crate::socket::{CloseCode, DisconnectReason, SocketEvent};

/// What the game hears from its client, in order: by signals
/// ([`NetworkClient::poll`](super::NetworkClient::poll)) or pulled
/// ([`NetworkClient::drain`](super::NetworkClient::drain)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClientEvent {
    /// The connection opened (the welcome follows).
    Connected,
    /// The server admitted the client (first join or resumed session).
    Welcomed(Welcomed),
    /// The server refused the client, with its code and reason; no reconnect
    /// follows.
    Refused(Refused),
    /// An application message.
    Message(Message),
    /// The connection was lost; a reconnect follows.
    ConnectionLost(DisconnectReason),
    /// A reconnect attempt starts (its number, from 1).
    Reconnecting(u32),
    /// The client is disconnected for good, and why.
    Disconnected(DisconnectReason),
    /// A problem that is not a disconnect.
    Error(ClientError),
    /// A request got its verdict.
    RequestDone {
        /// The request's id ([`RequestTicket::id`](super::RequestTicket::id)).
        id: u64,
        /// The verdict.
        status: RequestStatus,
    },
}

/// What the core asks its driver to do.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClientAction {
    /// Open a new connection to the server (the hello follows as a `Send`).
    Connect,
    /// Send a message on the current connection.
    Send(Message),
    /// Close the current connection with a goodbye, after what was queued.
    Close(String),
}

/// The client's session: identity, requests awaiting verdicts, reconnects.
#[derive(Debug)]
pub struct ClientCore {
    config: ClientConfig,
    identity: Option<(ClientId, ReconnectToken)>,
    /// A connection exists (between `Connect` and its `Disconnected`).
    connected: bool,
    welcomed: bool,
    refused: bool,
    closed: bool,
    next_request: u64,
    /// Each open request's deadline.
    pending: HashMap<u64, Instant>,
    /// The next reconnect attempt: its number and when.
    retry: Option<(u32, Instant)>,
    /// The reconnect attempt started last (0: none since the last loss).
    started_attempt: u32,
    /// A directory redirected the client: its next attempt goes at once.
    redirected: bool,
    /// xorshift state for the reconnect jitter.
    rng: u64,
    /// Which of the service's addresses (`ClientConfig::fallback_servers`
    /// after the first) the last welcome came from, and which the current
    /// attempt goes to.
    home: usize,
    target: usize,
    actions: VecDeque<ClientAction>,
    events: VecDeque<ClientEvent>,
}

impl ClientCore {
    /// A client that will join with `config`; `seed` draws its reconnect
    /// jitter (any value; tests pick one to be deterministic).
    pub fn new(config: ClientConfig, seed: u64) -> Self {
        Self {
            config,
            identity: None,
            connected: false,
            welcomed: false,
            refused: false,
            closed: false,
            next_request: 1,
            pending: HashMap::new(),
            retry: None,
            started_attempt: 0,
            redirected: false,
            rng: splitmix64(seed) | 1,
            home: 0,
            target: 0,
            actions: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Starts joining: a connection, then the hello.
    pub fn start(&mut self) {
        self.open();
    }

    fn open(&mut self) {
        let hello = Hello {
            name: self.config.name.clone(),
            password: self.config.password.clone(),
            credentials: self.config.credentials.clone(),
            resume: self.identity.as_ref().map(|(client, token)| Resume {
                client: *client,
                token: token.clone(),
            }),
        };
        self.connected = true;
        self.welcomed = false;
        self.actions.push_back(ClientAction::Connect);
        // Queued before anything else, so the server reads it first.
        self.actions
            .push_back(ClientAction::Send(protocol::session_message(
                protocol::HELLO,
                &hello,
            )));
    }

    /// Replaces `ClientConfig::fallback_servers` (a directory said where
    /// the service is now); the next attempts go round the new list, the
    /// client's first address first.
    pub fn set_fallback_servers(&mut self, servers: Vec<String>) {
        self.config.fallback_servers = servers;
        self.home = 0;
        self.target = 0;
    }

    /// Like [`set_fallback_servers`](Self::set_fallback_servers), when a
    /// directory says where the service is *now*: the next reconnect
    /// attempt goes to the first of `servers`, the following ones round
    /// the list (the client's first address, where it was, last). When the
    /// list is news (not what the client had), that attempt does not wait
    /// out its backoff.
    pub fn redirect(&mut self, servers: Vec<String>, now: Instant) {
        let news = servers != self.config.fallback_servers;
        let count = 1 + servers.len();
        self.config.fallback_servers = servers;
        // The next attempt `a` goes to (home + a - 1) % count: make it 1.
        let next = match self.retry {
            Some((attempt, _)) if attempt == self.started_attempt => attempt + 1,
            Some((attempt, _)) => attempt,
            None => 1,
        } as usize;
        self.home = (1 + count - (next.saturating_sub(1) % count)) % count;
        self.target = 0;
        if !news {
            return;
        }
        match &mut self.retry {
            // Scheduled, not started: it goes now.
            Some((attempt, at)) if *attempt != self.started_attempt => *at = now.min(*at),
            // Under way (to where the client was): the next one goes as
            // soon as it fails.
            Some(_) => self.redirected = true,
            None => {}
        }
    }

    /// Which address the current connection goes to: 0 the one the client
    /// was made with, `n` the `n`-th of `ClientConfig::fallback_servers`.
    pub fn server(&self) -> usize {
        self.target
    }

    /// The id the server gave, once welcomed (kept across reconnects).
    pub fn client_id(&self) -> Option<ClientId> {
        self.identity.as_ref().map(|(client, _)| *client)
    }

    /// Whether the server has welcomed the current connection.
    pub fn is_welcomed(&self) -> bool {
        self.welcomed
    }

    /// Whether a connection exists (it may not be welcomed yet).
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// Whether the client has given up for good (refused, closed, or out of
    /// reconnect attempts).
    pub fn is_finished(&self) -> bool {
        !self.connected && self.retry.is_none()
    }

    /// Sends a request; returns its id. Its verdict comes as
    /// [`ClientEvent::RequestDone`].
    pub fn request(
        &mut self,
        channel: u16,
        action: u16,
        content: Vec<u8>,
        now: Instant,
    ) -> Result<u64, RequestError> {
        if !self.connected {
            return Err(RequestError::NotConnected);
        }
        if self.pending.len() >= self.config.max_pending_requests {
            return Err(RequestError::TooManyPending);
        }
        let id = self.next_request;
        self.next_request += 1;
        let frame = RequestFrame {
            id,
            channel,
            action,
            content,
        };
        self.pending.insert(id, now + self.config.request_timeout);
        self.actions
            .push_back(ClientAction::Send(protocol::session_message(
                protocol::REQUEST,
                &frame,
            )));
        Ok(id)
    }

    /// Forgets a request whose message could not be sent after all.
    pub fn cancel_request(&mut self, id: u64) {
        self.pending.remove(&id);
    }

    /// Leaves for good: the goodbye goes after what was queued; no reconnect
    /// follows.
    pub fn close(&mut self, reason: &str) {
        self.closed = true;
        self.retry = None;
        self.started_attempt = 0;
        if self.connected {
            self.actions
                .push_back(ClientAction::Close(reason.to_string()));
        }
    }

    /// Takes in one event of the current connection.
    pub fn handle(&mut self, event: SocketEvent, now: Instant) {
        match event {
            SocketEvent::Connected => self.events.push_back(ClientEvent::Connected),
            SocketEvent::Received(message) if message.channel_id() == SESSION_CHANNEL => {
                self.on_session_message(message)
            }
            SocketEvent::Received(message) => self.events.push_back(ClientEvent::Message(message)),
            SocketEvent::Error(err) => self
                .events
                .push_back(ClientEvent::Error(ClientError::Socket(err.into()))),
            SocketEvent::Disconnected(reason) => self.on_disconnected(reason, now),
        }
    }

    /// Work on the clock: late requests fail, a due reconnect starts.
    pub fn tick(&mut self, now: Instant) {
        let mut late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        late.sort_unstable();
        for id in late {
            self.finish_request(id, RequestStatus::Failed(RequestError::Timeout));
        }
        if let Some((attempt, at)) = self.retry {
            if !self.connected && now >= at {
                // The first attempt goes back where the session was; each
                // further one to the next address of the service.
                let servers = 1 + self.config.fallback_servers.len();
                self.target = (self.home + attempt.saturating_sub(1) as usize) % servers;
                self.started_attempt = attempt;
                self.events.push_back(ClientEvent::Reconnecting(attempt));
                self.open();
            }
        }
    }

    /// When [`tick`](Self::tick) next has work: the first request deadline
    /// or the next reconnect attempt.
    pub fn next_deadline(&self) -> Option<Instant> {
        let retry = self.retry.filter(|_| !self.connected).map(|(_, at)| at);
        self.pending.values().copied().chain(retry).min()
    }

    /// The next thing for the driver to do.
    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.actions.pop_front()
    }

    /// The next thing for the game to hear.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    fn on_session_message(&mut self, message: Message) {
        match message.action_id() {
            protocol::WELCOME => {
                let Ok(welcome) = message.content::<Welcome>() else {
                    return self.bad_session_message(protocol::WELCOME);
                };
                self.identity = Some((welcome.client, welcome.token));
                self.welcomed = true;
                self.home = self.target;
                self.retry = None;
                self.started_attempt = 0;
                self.events.push_back(ClientEvent::Welcomed(Welcomed {
                    client: welcome.client,
                    resumed: welcome.resumed,
                }));
            }
            protocol::REFUSED => {
                let refused = message.content::<Refused>().unwrap_or(Refused {
                    code: 0,
                    reason: String::new(),
                });
                self.refused = true;
                self.events.push_back(ClientEvent::Refused(refused));
            }
            protocol::ACCEPTED => match message.content::<u64>() {
                Ok(id) => self.finish_request(id, RequestStatus::Accepted),
                Err(_) => self.bad_session_message(protocol::ACCEPTED),
            },
            protocol::REJECTED => {
                let Ok(rejected) = message.content::<Rejected>() else {
                    return self.bad_session_message(protocol::REJECTED);
                };
                if rejected.id == 0 {
                    let error = ClientError::Rejected(rejected.reason);
                    self.events.push_back(ClientEvent::Error(error));
                } else {
                    self.finish_request(rejected.id, RequestStatus::Rejected(rejected.reason));
                }
            }
            protocol::ERROR => {
                let Ok(reply) = message.content::<ErrorReply>() else {
                    return self.bad_session_message(protocol::ERROR);
                };
                if reply.id != 0 && self.pending.contains_key(&reply.id) {
                    let failure = RequestError::Server {
                        code: reply.code,
                        detail: reply.detail.clone(),
                    };
                    self.finish_request(reply.id, RequestStatus::Failed(failure));
                }
                self.events
                    .push_back(ClientEvent::Error(ClientError::Server(reply)));
            }
            other => tracing::debug!(action = other, "unknown session action from server"),
        }
    }

    fn bad_session_message(&mut self, action: u16) {
        tracing::debug!(action, "undecodable session message from server");
    }

    fn finish_request(&mut self, id: u64, status: RequestStatus) {
        if self.pending.remove(&id).is_some() {
            self.events
                .push_back(ClientEvent::RequestDone { id, status });
        }
    }

    fn on_disconnected(&mut self, reason: DisconnectReason, now: Instant) {
        self.connected = false;
        self.welcomed = false;
        let mut open: Vec<u64> = self.pending.keys().copied().collect();
        open.sort_unstable();
        for id in open {
            let failure = RequestStatus::Failed(RequestError::ConnectionLost);
            self.finish_request(id, failure);
        }
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
            self.started_attempt = 0;
            self.events.push_back(ClientEvent::Disconnected(reason));
            return;
        }
        if attempt == 1 {
            self.events.push_back(ClientEvent::ConnectionLost(reason));
        }
        let delay = if std::mem::take(&mut self.redirected) {
            Duration::ZERO
        } else {
            self.backoff(attempt)
        };
        self.retry = Some((attempt, now + delay));
    }

    /// The wait before attempt `attempt`: doubling from `initial_delay` up to
    /// `max_delay`, then drawn at random between half and all of it, so the
    /// clients of a restarted server do not all come back in one instant.
    fn backoff(&mut self, attempt: u32) -> Duration {
        let policy = &self.config.reconnect;
        let full = policy
            .initial_delay
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(policy.max_delay);
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let fraction = 0.5 + (self.rng >> 11) as f64 / (1u64 << 53) as f64 * 0.5;
        full.mul_f64(fraction)
    }
}

/// Spreads any seed (0, 1, 2, ...) over all 64 bits.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> DisconnectReason {
        DisconnectReason::ConnectionLost(crate::socket::IoFailure::new(
            std::io::ErrorKind::ConnectionReset,
            "reset",
        ))
    }

    fn welcomed_core(seed: u64) -> ClientCore {
        let mut core = ClientCore::new(ClientConfig::named("ann"), seed);
        core.start();
        let welcome = Welcome {
            client: ClientId::random(),
            token: ReconnectToken([1; 32]),
            resumed: false,
            grace_secs: 60,
        };
        let message = protocol::session_message(protocol::WELCOME, &welcome);
        core.handle(SocketEvent::Received(message), Instant::now());
        core
    }

    fn retry_delay(core: &ClientCore, from: Instant) -> Duration {
        core.next_deadline().unwrap() - from
    }

    #[test]
    fn reconnect_waits_are_jittered_between_half_and_all_of_the_backoff() {
        let now = Instant::now();
        let mut delays = Vec::new();
        for seed in 0..64 {
            let mut core = welcomed_core(seed);
            core.handle(SocketEvent::Disconnected(lost()), now);
            let delay = retry_delay(&core, now);
            assert!(delay >= Duration::from_millis(100) && delay <= Duration::from_millis(200));
            delays.push(delay);
        }
        delays.sort();
        delays.dedup();
        assert!(
            delays.len() > 32,
            "64 clients drew {} distinct waits",
            delays.len()
        );
    }

    #[test]
    fn reconnect_backoff_doubles_up_to_the_maximum() {
        let mut core = welcomed_core(7);
        let mut now = Instant::now();
        let mut previous_top = Duration::ZERO;
        for attempt in 1..=8u32 {
            core.handle(SocketEvent::Disconnected(lost()), now);
            let delay = retry_delay(&core, now);
            let full = Duration::from_millis(200)
                .saturating_mul(1 << (attempt - 1))
                .min(Duration::from_secs(5));
            assert!(
                delay >= full / 2 && delay <= full,
                "attempt {attempt}: {delay:?}"
            );
            previous_top = previous_top.max(delay);
            now += delay;
            core.tick(now);
            assert!(matches!(core.poll_action(), Some(ClientAction::Connect)));
            while core.poll_action().is_some() {}
        }
        assert!(previous_top <= Duration::from_secs(5));
    }

    #[test]
    fn a_redirect_sends_the_next_attempt_to_the_directory_s_first_server() {
        let mut core = welcomed_core(3);
        core.set_fallback_servers(vec!["dead:1".into()]);
        let mut now = Instant::now();
        core.handle(SocketEvent::Disconnected(lost()), now);
        // Attempt 1 (back where it was) starts; the directory then says
        // where the game is now.
        now += Duration::from_secs(10);
        core.tick(now);
        assert_eq!(core.server(), 0);
        core.redirect(vec!["alive:2".into(), "dead:1".into()], now);
        // It fails: the next one goes at once (the list was news), to
        // "alive:2".
        core.handle(SocketEvent::Disconnected(lost()), now);
        assert_eq!(retry_delay(&core, now), Duration::ZERO);
        core.tick(now);
        assert_eq!(core.server(), 1);
        // The same list again is no news: the backoff holds.
        core.redirect(vec!["alive:2".into(), "dead:1".into()], now);
        core.handle(SocketEvent::Disconnected(lost()), now);
        assert!(retry_delay(&core, now) > Duration::ZERO);
        now += Duration::from_secs(10);
        core.tick(now);
        assert_eq!(core.server(), 1, "still the directory's first");
    }
}
