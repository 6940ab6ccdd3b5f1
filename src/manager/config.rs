//! The settings of a [`ServerManager`](super::ServerManager).

use std::time::Duration;

pub use switchboard_proto::manager::config::ManagerRules;

use super::{CheckpointHook, ListingHook, RecordConfig, SharedSessionsHook};
use crate::socket::{EndpointConfig, PacerConfig};

/// Every setting of a server manager: the rules' (in `rules`, the protocol
/// crate's [`ManagerRules`]: sessions, password, rate limits, strikes, the
/// tick) and the driver's own (the listener, pacing, shutdown, and the
/// hooks for listing, shared sessions and checkpoints). Each field says its
/// default.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerConfig {
    /// What the rules decide with: sessions, the join password, rate
    /// limits, strikes, the tick (see [`ManagerRules`]).
    pub rules: ManagerRules,
    /// The listening socket's limits.
    pub server: EndpointConfig,
    /// How long a shutdown may take to flush every client (default 5 s).
    pub shutdown_timeout: Duration,
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
    /// Where the game's checkpoints go (`Outbox::checkpoint`; the
    /// `switchboard-redis` crate's `RedisCheckpoints`). None (default):
    /// checkpoints are dropped.
    pub checkpoints: Option<CheckpointHook>,
    /// Record every input of the rules to a file, for an exact replay
    /// (`docs/RECORDING.md`). None (default): nothing is recorded.
    pub record: Option<RecordConfig>,
    /// Connect tokens new players must bring (default none: anyone may
    /// join, as the rules say). With them, a hello that starts a new
    /// session carries a token in its `credentials`, sealed by the game's
    /// backend under the key the servers share, naming this server,
    /// unexpired and never seen here before; the game's
    /// [`authenticate`](crate::GameLogic::authenticate) then sees the
    /// token's user data as the credentials. Anything else is refused
    /// (code 12) before the rules see it. A returning client is checked by
    /// its reconnect token, not a connect token.
    pub connect_tokens: Option<crate::token::TokenRules>,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            rules: ManagerRules::default(),
            server: EndpointConfig::default(),
            shutdown_timeout: Duration::from_secs(5),
            pacing: PacerConfig::default(),
            listing: None,
            shared_sessions: None,
            checkpoints: None,
            record: None,
            connect_tokens: None,
        }
    }
}
