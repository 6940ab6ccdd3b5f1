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
//! The driver (`NetworkClient`, or the in-memory harness) feeds it the connection's events and the
//! time, carries out its [`ClientAction`]s (open a connection, send, close)
//! and hands its [`ClientEvent`]s to the game.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;

mod reconnect;

use super::{ClientConfig, ClientError, RequestError, RequestStatus, RequestTicket, Welcomed};
use crate::connection::SocketEvent;
use crate::manager::protocol::{
    self, ErrorReply, Refused, Rejected, RequestFrame, Resume, SessionHello, Welcome,
};
use crate::message::{Message, TypedMessage, SESSION_CHANNEL};
use crate::reason::DisconnectReason;
use crate::session::{ClientId, ReconnectToken};

/// What the game hears from its client, in order: by signals
/// (`NetworkClient::poll`) or pulled (`NetworkClient::drain`).
///
/// Exhaustive on purpose: a new kind of event must be handled by every
/// consumer (the compiler says where), never dropped by a catch-all arm.
#[derive(Debug, Clone)]
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
        /// The request.
        ticket: RequestTicket,
        /// The verdict.
        status: RequestStatus,
    },
}

/// What the core asks its driver to do.
///
/// Exhaustive on purpose: every driver must carry out every action.
#[derive(Debug, Clone)]
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
    /// Each open request as sent, and the connection it last went on (0:
    /// none yet): what goes again when the session resumes on a new one.
    unanswered: BTreeMap<u64, (Message, u32)>,
    /// The current connection's number (from 1).
    connection: u32,
    /// The last verdicts, oldest first (`ClientConfig::kept_verdicts`).
    verdicts: VecDeque<(u64, RequestStatus)>,
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
            unanswered: BTreeMap::new(),
            connection: 0,
            verdicts: VecDeque::new(),
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
        let hello = SessionHello {
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
        self.connection += 1;
        self.actions.push_back(ClientAction::Connect);
        // Queued before anything else, so the server reads it first.
        self.actions
            .push_back(ClientAction::Send(protocol::session_message(
                protocol::HELLO,
                &hello,
            )));
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

    /// Sends a request (a typed message, or a built [`Message`]); returns
    /// its ticket. Its verdict comes as [`ClientEvent::RequestDone`] and
    /// from [`status`](Self::status): exactly one. A request made while the
    /// connection is down and a reconnect is under way is kept and sent when
    /// the session resumes; so is one whose connection dropped before its
    /// verdict came (the server answers a request it already handled with
    /// its verdict again, never applying it twice). Either waits at most
    /// `request_timeout`.
    pub fn request(
        &mut self,
        message: &impl TypedMessage,
        now: Instant,
    ) -> Result<RequestTicket, RequestError> {
        let reconnecting = self.retry.is_some() && self.identity.is_some();
        if !self.connected && !reconnecting {
            return Err(RequestError::NotConnected);
        }
        if self.pending.len() >= self.config.max_pending_requests {
            return Err(RequestError::TooManyPending);
        }
        let mut content = Vec::new();
        message.encode_content(&mut content)?;
        let (channel, action) = (message.channel_id(), message.action_id());
        let id = self.next_request;
        self.next_request += 1;
        let frame = RequestFrame {
            id,
            channel,
            action,
            content,
        };
        self.pending.insert(id, now + self.config.request_timeout);
        let message = protocol::session_message(protocol::REQUEST, &frame);
        // On a reconnect, nothing new goes before the session is back and
        // the older unanswered requests have gone again: the server sees a
        // session's requests in the order they were made.
        let send_now = self.connected && (self.welcomed || self.identity.is_none());
        let sent_on = if send_now {
            self.actions.push_back(ClientAction::Send(message.clone()));
            self.connection
        } else {
            0
        };
        self.unanswered.insert(id, (message, sent_on));
        Ok(RequestTicket(id))
    }

    /// Forgets a request whose message could not be sent after all.
    pub fn cancel_request(&mut self, ticket: RequestTicket) {
        self.pending.remove(&ticket.0);
        self.unanswered.remove(&ticket.0);
    }

    /// The session is back on a new connection (`resumed`), or a new one
    /// began: requests not yet sent on this connection go now, or, in a new
    /// session (which cannot know them), fail as lost.
    fn resend_unanswered(&mut self, resumed: bool) {
        let current = self.connection;
        let stale: Vec<u64> = self
            .unanswered
            .iter()
            .filter(|(_, (_, on))| *on != current)
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            if resumed {
                if let Some((message, on)) = self.unanswered.get_mut(&id) {
                    // Marked as sent again: applied only if the server has
                    // not handled it before (a request made while the
                    // connection was down has never been sent: the same).
                    let again = Message::from_raw(
                        message.channel_id(),
                        protocol::REQUEST_AGAIN,
                        message.content_bytes().clone(),
                    );
                    *on = current;
                    self.actions.push_back(ClientAction::Send(again));
                }
            } else {
                self.finish_request(id, RequestStatus::Failed(RequestError::ConnectionLost));
            }
        }
    }

    /// Where a request stands: `Pending` until its verdict, then the
    /// verdict while it is among the last
    /// [`kept_verdicts`](ClientConfig::kept_verdicts).
    pub fn status(&self, ticket: RequestTicket) -> RequestStatus {
        if self.pending.contains_key(&ticket.0) {
            return RequestStatus::Pending;
        }
        self.verdicts
            .iter()
            .rev()
            .find(|(id, _)| *id == ticket.0)
            .map_or(
                RequestStatus::Failed(RequestError::Forgotten),
                |(_, status)| status.clone(),
            )
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

    /// The next reconnect attempt while the client waits for it: its number
    /// (from 1) and when it starts. `None` while connected (or connecting),
    /// and once the client has given up. A game shows it as a countdown.
    pub fn next_reconnect(&self) -> Option<(u32, Instant)> {
        self.retry.filter(|_| !self.connected)
    }

    /// When [`tick`](Self::tick) next has work: the first request deadline
    /// or the next reconnect attempt.
    pub fn next_deadline(&self) -> Option<Instant> {
        let retry = self.next_reconnect().map(|(_, at)| at);
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
                self.resend_unanswered(welcome.resumed);
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
        self.unanswered.remove(&id);
        if self.pending.remove(&id).is_some() {
            if self.verdicts.len() >= self.config.kept_verdicts {
                self.verdicts.pop_front();
            }
            if self.config.kept_verdicts > 0 {
                self.verdicts.push_back((id, status.clone()));
            }
            let ticket = RequestTicket(id);
            self.events
                .push_back(ClientEvent::RequestDone { ticket, status });
        }
    }
}

/// Spreads any seed (0, 1, 2, ...) over all 64 bits.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
