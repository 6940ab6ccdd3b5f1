//! The settings of a client (`NetworkClient` in the driver).

use std::time::Duration;

use crate::connection::SocketConfig;

/// When and how often a client tries to get its session back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// Whether to reconnect at all (default true).
    pub enabled: bool,
    /// Wait before the first attempt (default 200 ms); doubles per attempt.
    /// Each wait is drawn at random between half and all of it, so the
    /// clients of a restarted server do not all come back at once.
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

/// The settings of a client (`NetworkClient` in the driver).
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
    /// [`RequestError::Timeout`](super::RequestError::Timeout) (default
    /// 30 s): its expiry, whether it waits for its verdict or, while the
    /// connection is down, for the session to resume (then it is sent
    /// again, and the server applies it at most once).
    pub request_timeout: Duration,
    /// Requests awaiting an answer at once (default 1024); one more fails
    /// with [`RequestError::TooManyPending`](super::RequestError::TooManyPending).
    pub max_pending_requests: usize,
    /// Verdicts the client keeps for `status` to answer (default 1024):
    /// the last ones; an older ticket answers
    /// [`RequestError::Forgotten`](super::RequestError::Forgotten).
    pub kept_verdicts: usize,
    /// Other addresses of the same service (default none): server
    /// processes that share sessions through Redis (`docs/SCALING.md`).
    /// After a connection loss the first attempt goes back to the server
    /// the session was on, each further attempt to the next address in
    /// turn, so a client whose server died resumes its session, with its
    /// id, on another.
    pub fallback_servers: Vec<String>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            socket: SocketConfig::default(),
            name: "player".into(),
            password: None,
            credentials: Vec::new(),
            reconnect: ReconnectPolicy::default(),
            request_timeout: Duration::from_secs(30),
            max_pending_requests: 1024,
            kept_verdicts: 1024,
            fallback_servers: Vec::new(),
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
