//! The listing hook: how a running server gets listed somewhere (a master
//! server) without the core knowing where. The `switchboard-master` crate's
//! `Announce` plugs in here.

use std::net::SocketAddr;
use std::sync::Arc;

/// How full a server is, as a listing shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingStatus {
    /// Clients connected and welcomed now.
    pub players: usize,
    /// Sessions the server holds at most (`SessionConfig::max_sessions`).
    pub capacity: usize,
}

/// Something that lists a running server. The manager starts it once it
/// listens, on its own tokio runtime, and updates it on every tick.
pub trait Listing: Send + Sync + 'static {
    /// Starts listing the server that listens on `addr`, as full as
    /// `status` says and with `tags` (its TLS fingerprint, say) from its
    /// very first announcement. An error is logged and the server runs
    /// unlisted.
    fn start(
        &self,
        addr: SocketAddr,
        status: ListingStatus,
        tags: &[(String, String)],
    ) -> std::io::Result<Box<dyn ListingUpdates>>;
}

/// A started listing, kept by the manager while it runs and dropped when it
/// stops.
pub trait ListingUpdates: Send {
    /// How full the server is now.
    fn update(&mut self, status: ListingStatus);

    /// A `key=value` tag the listing shows from now on (the key's value
    /// replaced if it had one). A listing without tags ignores it.
    fn set_tag(&mut self, key: &str, value: &str) {
        let _ = (key, value);
    }
}

/// A [`Listing`] as a [`ManagerConfig`](super::ManagerConfig) field holds it
/// (cloneable; two hooks are equal when they are the same one).
#[derive(Clone)]
pub struct ListingHook(pub Arc<dyn Listing>);

impl ListingHook {
    /// Wraps a listing.
    pub fn new(listing: impl Listing) -> Self {
        Self(Arc::new(listing))
    }
}

impl std::fmt::Debug for ListingHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ListingHook")
    }
}

impl PartialEq for ListingHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
