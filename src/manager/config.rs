//! The settings of a [`ServerManager`](super::ServerManager).

use std::time::Duration;

use super::{CheckpointHook, ListingHook, SharedSessionsHook};
use crate::session::{BackoffPolicy, RateLimit, SessionConfig};
use crate::socket::{PacerConfig, ServerConfig};

/// Every limit and timer of a server manager; each field says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerConfig {
    /// The listening socket's limits.
    pub server: ServerConfig,
    /// Grace period and session count.
    pub sessions: SessionConfig,
    /// A join password (hosted games). None (default): anyone may join. A
    /// wrong or missing one is refused before the client gets an id.
    pub password: Option<String>,
    /// How an address that gave a wrong password is slowed down: it waits
    /// 1 s, doubling with each failure up to 60 s, before its next attempt
    /// is even checked (refusal 9 says how long); 4096 addresses remembered.
    pub password_backoff: BackoffPolicy,
    /// How long a connection may take to send its hello (default 5 s). Past
    /// it the connection is closed.
    pub hello_timeout: Duration,
    /// Messages per second per client (default 60/s, burst 120). A message
    /// over it is dropped and answered with a `RateLimited` error.
    pub message_rate: RateLimit,
    /// Bytes per second per client (default 64 KiB/s, burst 256 KiB).
    /// Likewise.
    pub byte_rate: RateLimit,
    /// Error replies a client may earn within `strike_window` (default 20)
    /// before it is disconnected for abuse.
    pub max_strikes: u32,
    /// The window for `max_strikes` (default 10 s).
    pub strike_window: Duration,
    /// Log lines about peers from one address (default 1 a second, burst
    /// 20): joins, leaves, refusals, errors. Past it they are skipped and
    /// counted (`ServerStats::logs_skipped_total`), and the next line says
    /// how many were, so no peer can flood the operator's log.
    pub peer_log_rate: RateLimit,
    /// How long a shutdown may take to flush every client (default 5 s).
    pub shutdown_timeout: Duration,
    /// How often expired sessions and late hellos are looked for, and
    /// `GameLogic::on_tick` runs, unless the logic declares its own rate
    /// with `GameLogic::tick_interval` (default 250 ms).
    pub tick_interval: Duration,
    /// When updates for many clients leave (default: at once while quiet;
    /// under load, each client's updates share a write, waiting up to
    /// 5 ms: [`PacerConfig`]). A reply to one client (a verdict) leaves at
    /// once, with whatever waits for that client before it.
    pub pacing: PacerConfig,
    /// Where to list the server once it listens (a master server: the
    /// `switchboard-master` crate's `Announce::hook`). None (default): not
    /// listed anywhere.
    pub listing: Option<ListingHook>,
    /// Sessions shared with other processes (the `switchboard-redis`
    /// crate's `RedisSessions`; `docs/SCALING.md`): a client whose process
    /// died comes back to this one with its id. None (default): sessions
    /// live in this process only.
    pub shared_sessions: Option<SharedSessionsHook>,
    /// Reconnects looked up in the shared store at once at most (default
    /// 256); past it a reconnect of a session unknown here is refused with
    /// [`Refusal::Unavailable`](crate::session::Refusal::Unavailable), so
    /// a flood of made-up ids cannot queue work without bound.
    pub max_pending_claims: usize,
    /// Where the game's checkpoints go (`Outbox::checkpoint`; the
    /// `switchboard-redis` crate's `RedisCheckpoints`). None (default):
    /// checkpoints are dropped.
    pub checkpoints: Option<CheckpointHook>,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            server: ServerConfig::default(),
            sessions: SessionConfig::default(),
            password: None,
            password_backoff: BackoffPolicy::default(),
            hello_timeout: Duration::from_secs(5),
            message_rate: RateLimit {
                per_second: 60.0,
                burst: 120.0,
            },
            byte_rate: RateLimit {
                per_second: 64.0 * 1024.0,
                burst: 256.0 * 1024.0,
            },
            max_strikes: 20,
            strike_window: Duration::from_secs(10),
            peer_log_rate: RateLimit {
                per_second: 1.0,
                burst: 20.0,
            },
            shutdown_timeout: Duration::from_secs(5),
            tick_interval: Duration::from_millis(250),
            pacing: PacerConfig::default(),
            listing: None,
            shared_sessions: None,
            max_pending_claims: 256,
            checkpoints: None,
        }
    }
}
