//! The rules' settings of a server manager: what [`ManagerCore`](super::core::ManagerCore)
//! decides with. The driver's own settings (listeners, pacing, shutdown, the
//! hooks for listing, shared sessions and checkpoints) are the driver's
//! `ManagerConfig`, which holds these as its `rules`.

use std::time::Duration;

use crate::limits::{BackoffPolicy, RateLimit};
use crate::session::SessionConfig;

/// Every limit and timer of the manager's rules; each field says its default.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ManagerRules {
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
    /// How often expired sessions and late hellos are looked for, and
    /// `GameLogic::on_tick` runs, unless the logic declares its own rate
    /// with `GameLogic::tick_interval` (default 250 ms).
    pub tick_interval: Duration,
    /// Reconnects looked up in the shared store at once at most (default
    /// 256); past it a reconnect of a session unknown here is refused with
    /// [`Refusal::Unavailable`](crate::session::Refusal::Unavailable), so
    /// a flood of made-up ids cannot queue work without bound.
    pub max_pending_claims: usize,
    /// Verdicts remembered per session (default 64): a client whose
    /// connection dropped sends its unanswered requests again when it
    /// resumes, and one the server already handled gets its verdict again
    /// instead of being applied twice. A request older than the remembered
    /// ones, sent again, is answered [`ErrorCode::AlreadyHandled`](crate::manager::protocol::ErrorCode::AlreadyHandled).
    /// (A recording keeps it in its header's own field, so that recordings
    /// of format 2 still read.)
    #[serde(skip, default = "default_remembered_verdicts")]
    pub remembered_verdicts: usize,
}

fn default_remembered_verdicts() -> usize {
    64
}

impl Default for ManagerRules {
    fn default() -> Self {
        Self {
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
            tick_interval: Duration::from_millis(250),
            max_pending_claims: 256,
            remembered_verdicts: default_remembered_verdicts(),
        }
    }
}
