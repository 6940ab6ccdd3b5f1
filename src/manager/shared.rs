//! Sessions shared by several server processes: where the manager's session
//! changes go and where a client unknown here is looked for, without the
//! core knowing the store (the `switchboard-redis` crate's `RedisSessions`
//! plugs in here).
//!
//! ```text
//!  client ──hello(resume id, token)──▶ process B: not in its table
//!                                       ──claim(id, token, new token)──▶ store
//!                                       ◀── the session (name, address) ──┘
//!  client ◀──welcome(same id, new token)── B; the session is B's from now on
//! ```
//!
//! The process that holds a session writes each change (online with its
//! current token, offline, gone) and keeps its online sessions alive; a
//! session whose process died lives on in the store for its grace period,
//! so its client can come back to another process and keep its id.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::session::{ClientId, ReconnectToken};

/// A boxed future, as the store's calls return.
pub type ShareFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ShareError>> + Send + 'a>>;

pub use switchboard_proto::manager::{ShareError, ShareUpdate};
pub use switchboard_proto::session::SharedSession;

/// A store of sessions shared by several processes. Each call may fail
/// (the store is down or slow); the manager then refuses what it cannot
/// check and keeps its own sessions going.
pub trait SessionShare: Send + Sync + 'static {
    /// Takes `client` over for this process when `token` is its current
    /// token and its grace period has not passed; its token becomes
    /// `new_token` in the same step, so that two processes cannot both
    /// take it. `None`: unknown, wrong token or expired (not told apart).
    fn claim<'a>(
        &'a self,
        client: ClientId,
        token: &'a ReconnectToken,
        new_token: &'a ReconnectToken,
        grace: Duration,
    ) -> ShareFuture<'a, Option<SharedSession>>;

    /// Writes `updates`, in order, for sessions this process holds: an
    /// online one lives `grace` from now (the manager writes its online
    /// sessions again every third of it, so they outlive a dead process by
    /// at most `grace`), an offline one `grace` from now, a gone one no
    /// more. A session another process has taken over is left alone and
    /// returned: it ends here.
    fn apply(&self, updates: Vec<ShareUpdate>, grace: Duration) -> ShareFuture<'_, Vec<ClientId>>;

    /// A count that goes up when the store may have lost what was written
    /// (it came back after an outage, or restarted empty): the manager then
    /// writes its online sessions again at once, instead of at the next
    /// third of the grace period. `None` (the default): never.
    fn restarts(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

/// Where a game's checkpoints go ([`Outbox::checkpoint`](super::Outbox::checkpoint)):
/// one store per game, which knows its name. Loading one back is the
/// game's own business (it builds its logic from it before serving).
pub trait CheckpointStore: Send + Sync + 'static {
    /// Keeps `state` as the game's latest checkpoint.
    fn save(&self, state: Vec<u8>) -> ShareFuture<'_, ()>;
}

/// A [`CheckpointStore`] as [`ManagerConfig::checkpoints`](super::ManagerConfig::checkpoints)
/// holds it (cloneable; two are equal when they are the same one).
#[derive(Clone)]
pub struct CheckpointHook(pub Arc<dyn CheckpointStore>);

impl CheckpointHook {
    /// Wraps a store.
    pub fn new(store: impl CheckpointStore) -> Self {
        Self(Arc::new(store))
    }
}

impl std::fmt::Debug for CheckpointHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckpointHook")
    }
}

impl PartialEq for CheckpointHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A [`SessionShare`] as [`ManagerConfig::shared_sessions`](super::ManagerConfig::shared_sessions)
/// holds it (cloneable; two are equal when they are the same one).
#[derive(Clone)]
pub struct SharedSessionsHook(pub Arc<dyn SessionShare>);

impl SharedSessionsHook {
    /// Wraps a store.
    pub fn new(share: impl SessionShare) -> Self {
        Self(Arc::new(share))
    }
}

impl std::fmt::Debug for SharedSessionsHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedSessionsHook")
    }
}

impl PartialEq for SharedSessionsHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
