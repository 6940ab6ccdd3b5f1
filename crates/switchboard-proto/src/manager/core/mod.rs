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
//! The tokio driver (`switchboard`'s `ServerManager`) turns socket events
//! into [`ManagerEvent`]s and carries out the [`ManagerAction`]s; the
//! in-memory harness does the same with a clock the test moves, and so can a
//! replay of a recording. Time comes in with every call and randomness from
//! the [`Entropy`] given at construction: the same inputs give the same
//! outputs. Everything a server decides is decided here.

mod events;
mod hello;
mod outputs;
mod requests;
mod shared;
mod snapshot;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use super::config::ManagerRules;
use super::logic::{Audience, GameLogic, JoinRequest, Outbox, Rejection, RejectionKind, Request};
use super::protocol::{
    self, ErrorCode, ErrorReply, Refused, Rejected, RequestFrame, SessionHello, Welcome,
};
use super::stats::{ClientStats, ServerStats};
use super::{LogEntry, LogLevel, ShareError, ShareUpdate};
use crate::connection::SocketStats;
use crate::entropy::Entropy;
use crate::limits::{Backoff, LogLimiter, RateLimiter, Strikes};
use crate::message::{Message, PeerId, TypedMessage, SESSION_CHANNEL};
use crate::reason::{CloseCode, DisconnectReason};
use crate::session::{Admission, ClientId, ReconnectToken, Refusal, Sessions, SharedSession};

pub use events::{ManagerAction, ManagerEvent};
pub use snapshot::{Snapshot, SnapshotError};

/// The shortest tick a server runs (1 ms): a zero interval would spin.
pub const MIN_TICK: Duration = Duration::from_millis(1);

/// How often the logic hears its clients' round-trip times.
const LATENCY_EVERY: Duration = Duration::from_secs(1);

/// One connection, as the manager tracks it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Peer {
    addr: SocketAddr,
    #[serde(with = "crate::record::clock::instant")]
    connected_at: Instant,
    #[serde(with = "crate::record::clock::instant")]
    last_activity: Instant,
    limiter: RateLimiter,
    strikes: Strikes,
    client: Option<ClientId>,
    /// Already told to go (late hello); waiting for its disconnect event.
    closing: bool,
    /// Its hello waits for the shared store's answer.
    claiming: Option<SessionHello>,
}

/// The manager's sessions, request validation and addressed updates, driven
/// by [`handle`](Self::handle) and [`tick`](Self::tick).
#[derive(Debug)]
pub struct ManagerCore<L: GameLogic> {
    logic: L,
    config: ManagerRules,
    /// The driver has a shared session store (`ManagerConfig::shared_sessions`).
    shared_sessions: bool,
    /// The driver has a checkpoint store (`ManagerConfig::checkpoints`).
    checkpoints: bool,
    /// Where the request-time histogram reads the time, if anywhere (the
    /// operator's counters only: the rules never read it).
    stopwatch: Option<fn() -> Instant>,
    sessions: Sessions,
    peers: HashMap<PeerId, Peer>,
    stats: ServerStats,
    last_latency: Option<Instant>,
    /// Wrong passwords per address.
    password_failures: Backoff,
    peer_logs: LogLimiter,
    actions: Vec<ManagerAction>,
    /// Claims sent to the shared store and not yet answered.
    pending_claims: usize,
    /// When the online sessions were last refreshed in the shared store.
    last_refresh: Option<Instant>,
    /// Each session's last verdicts, for requests sent again after a
    /// reconnect (`ManagerRules::remembered_verdicts`).
    answered: HashMap<ClientId, Answered>,
}

/// A session's highest request id handled, and its last verdicts as sent.
#[derive(Debug, Default)]
struct Answered {
    highest: u64,
    verdicts: VecDeque<(u64, Message)>,
}

impl<L: GameLogic> ManagerCore<L> {
    /// A core with no connection yet, drawing ids and tokens from `entropy`
    /// (`switchboard::session::OsEntropy` in a server; `Seeded` in a test or
    /// a replay).
    pub fn new(config: ManagerRules, logic: L, entropy: Box<dyn Entropy>) -> Self {
        Self {
            logic,
            shared_sessions: false,
            checkpoints: false,
            stopwatch: None,
            sessions: Sessions::new(config.sessions.clone(), entropy),
            password_failures: Backoff::new(config.password_backoff),
            peer_logs: LogLimiter::new(config.peer_log_rate),
            config,
            peers: HashMap::new(),
            stats: ServerStats::default(),
            last_latency: None,
            actions: Vec::new(),
            pending_claims: 0,
            last_refresh: None,
            answered: HashMap::new(),
        }
    }

    /// `client`'s session is over: the game hears it leave, and its
    /// remembered verdicts go.
    fn leave_game(&mut self, client: ClientId, out: &mut Outbox) {
        self.answered.remove(&client);
        self.logic.on_leave(client, out);
    }

    /// Sessions unknown here are looked up in a store shared with other
    /// processes ([`ManagerAction::Claim`]), and changes are written to it
    /// ([`ManagerAction::Share`]). Off by default.
    pub fn with_shared_sessions(mut self, on: bool) -> Self {
        self.shared_sessions = on;
        self
    }

    /// The game's checkpoints go to a store ([`ManagerAction::Checkpoint`]).
    /// Off by default: they are dropped.
    pub fn with_checkpoints(mut self, on: bool) -> Self {
        self.checkpoints = on;
        self
    }

    /// Times each request's validate and apply with `clock` for the
    /// operator's histogram (`ServerStats::request_time`). Off by default
    /// (a test, a replay): the rules never read a clock of their own.
    pub fn with_stopwatch(mut self, clock: fn() -> Instant) -> Self {
        self.stopwatch = Some(clock);
        self
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

    /// The rules' settings.
    pub fn rules(&self) -> &ManagerRules {
        &self.config
    }

    /// How often [`tick`](Self::tick) wants to run: the logic's own rate
    /// ([`GameLogic::tick_interval`]) when it has one, else the config's;
    /// never less than [`MIN_TICK`].
    pub fn tick_interval(&self) -> Duration {
        self.logic
            .tick_interval()
            .unwrap_or(self.config.tick_interval)
            .max(MIN_TICK)
    }

    /// Every id the server's players go by ([`PlayerIds`](crate::session::PlayerIds)).
    pub fn player_ids(&self) -> &crate::session::PlayerIds {
        self.sessions.ids()
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
            ManagerEvent::Failed { peer, error } => {
                self.peer_log(peer, LogLevel::Warn, format!("{peer}: {error}"), now)
            }
            ManagerEvent::Claimed {
                peer,
                client,
                new_token,
                result,
            } => self.on_claimed(peer, client, new_token, result, now),
            ManagerEvent::MovedAway { clients } => self.on_moved_away(clients),
            ManagerEvent::StoreRestored => {
                self.last_refresh = None;
                self.refresh_shared(now);
                let text = "shared session store restored: online sessions written again";
                self.log(LogLevel::Info, text.to_string());
            }
        }
        self.actions.drain(..)
    }

    /// Work on the clock: the logic's tick, its latency report (`rtt` gives
    /// a connection's measured round trip), expired sessions, late hellos.
    pub fn tick(
        &mut self,
        now: Instant,
        mut rtt: impl FnMut(PeerId) -> Option<Duration>,
    ) -> std::vec::Drain<'_, ManagerAction> {
        let mut out = Outbox::default();
        self.logic.on_tick(now, &mut out);
        if self
            .last_latency
            .is_none_or(|t| now.saturating_duration_since(t) >= LATENCY_EVERY)
        {
            self.last_latency = Some(now);
            // In id order, as everything the core hands on: the same inputs
            // give the same outputs, whatever a hash map's order (a replay
            // checks it).
            let mut online: Vec<(ClientId, PeerId)> = self
                .peers
                .iter()
                .filter_map(|(peer, state)| Some((state.client?, *peer)))
                .collect();
            online.sort_unstable();
            let latencies: Vec<(ClientId, Duration)> = online
                .into_iter()
                .map(|(client, peer)| (client, rtt(peer).unwrap_or_default()))
                .collect();
            if !latencies.is_empty() {
                self.logic.on_latency(&latencies, &mut out);
            }
        }
        self.password_failures.forget_old(now);
        for session in self.sessions.expire(now) {
            self.share(ShareUpdate::Gone { client: session.id });
            tracing::info!(client = %session.id, "session expired after its grace period");
            self.log(
                LogLevel::Info,
                format!("{} expired after its grace period", session.id),
            );
            self.leave_game(session.id, &mut out);
        }
        self.dispatch(out);
        self.refresh_shared(now);
        let hello_timeout = self.config.hello_timeout;
        let mut late: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| {
                p.client.is_none()
                    && !p.closing
                    && now.saturating_duration_since(p.connected_at) > hello_timeout
            })
            .map(|(peer, _)| *peer)
            .collect();
        late.sort_unstable();
        for peer in late {
            self.close(peer, CloseCode::IDLE_TIMEOUT, "no hello in time");
            if let Some(state) = self.peers.get_mut(&peer) {
                state.closing = true;
            }
        }
        self.actions.drain(..)
    }

    /// The operator disconnects `client`: its session ends at once (the
    /// game hears it leave, the others as the game tells them) and its
    /// connection is closed with [`CloseCode::KICKED`] and `reason`.
    /// `false` (and nothing done) if it is not connected.
    pub fn kick(
        &mut self,
        client: ClientId,
        reason: &str,
        now: Instant,
    ) -> (bool, std::vec::Drain<'_, ManagerAction>) {
        let peer = self.sessions.get(client).and_then(|s| s.peer());
        let Some(session) = peer.and_then(|peer| self.sessions.leave(peer)) else {
            return (false, self.actions.drain(..));
        };
        let peer = peer.expect("a session left by its peer");
        self.share(ShareUpdate::Gone { client: session.id });
        // The connection is no one's any more while it closes: not listed,
        // and its end changes nothing.
        if let Some(state) = self.peers.get_mut(&peer) {
            state.client = None;
            state.closing = true;
        }
        let text = format!(
            "{} kicked by the operator: {}",
            session.id,
            reason.escape_debug()
        );
        self.peer_log(peer, LogLevel::Warn, text, now);
        self.close(peer, CloseCode::KICKED, reason);
        let mut out = Outbox::default();
        self.logic.on_kicked(session.id, reason, &mut out);
        self.dispatch(out);
        (true, self.actions.drain(..))
    }

    /// Sends updates from outside a request (an operator's broadcast, a
    /// change made through [`logic_mut`](Self::logic_mut)).
    pub fn broadcast(&mut self, out: Outbox) -> std::vec::Drain<'_, ManagerAction> {
        self.dispatch(out);
        self.actions.drain(..)
    }

    /// The counters and connected clients; `socket` adds a connection's
    /// transport counters (frames, bytes, round trip) and its address now
    /// (a QUIC peer that moved has a new one) where the driver has them.
    pub fn snapshot(
        &self,
        now: Instant,
        socket: impl Fn(PeerId) -> Option<(SocketStats, Option<SocketAddr>)>,
    ) -> ServerStats {
        let mut stats = self.stats.clone();
        stats.sessions = self.sessions.len();
        stats.logs_skipped_total = self.peer_logs.skipped_total();
        stats.places = self.logic.places();
        stats.clients = self
            .peers
            .iter()
            .filter_map(|(peer, state)| {
                let client = state.client?;
                let (counters, addr) = socket(*peer).unwrap_or_default();
                Some(ClientStats {
                    id: client,
                    name: self
                        .sessions
                        .get(client)
                        .map(|s| s.name.clone())
                        .unwrap_or_default(),
                    addr: addr.unwrap_or(state.addr),
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
                strikes: Strikes::new(),
                client: None,
                closing: false,
                claiming: None,
            },
        );
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
                self.share(ShareUpdate::Gone { client: session.id });
                let text = format!("{} left ({reason})", session.id);
                self.addr_log(state.addr, LogLevel::Info, text, now);
                self.leave_game(session.id, &mut out);
            }
        } else if let Some(client) = self.sessions.connection_lost(peer, now) {
            self.share(ShareUpdate::Offline { client });
            let text = format!("{client} lost its connection ({reason})");
            self.addr_log(state.addr, LogLevel::Info, text, now);
            self.logic.on_connection_lost(client, &mut out);
        }
        self.dispatch(out);
    }
}
