//! Sessions, ids and reconnect tokens, as plain state machines (from
//! `switchboard-proto`, which reads neither a clock nor the OS's random
//! source), with what the driver adds: the OS's random source
//! ([`OsEntropy`]) and the tickets processes of a service give each other
//! ([`ticket`]).
//!
//! The [`ServerManager`](crate::manager::ServerManager) moves bytes and calls
//! in; the tests drive the same code in memory with made-up instants.

pub mod ticket;

pub use switchboard_proto::entropy::{Entropy, Seeded};
pub use switchboard_proto::limits::{
    doubling, prefix_key, Backoff, BackoffPolicy, Clock, KeyedLimiter, LogLimiter, Millis, Outage,
    RateLimit, RateLimiter, Strikes, TokenBucket,
};
pub use switchboard_proto::session::{
    checked_name, Admission, ClientId, IdClaim, IdRefusal, PlayerIds, ReconnectToken, Refusal,
    Session, SessionConfig, Sessions, MAX_NAME_CHARS,
};

/// The OS's random source, for what a server gives out: ids and reconnect
/// tokens (which must be unpredictable).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, bytes: &mut [u8]) {
        getrandom::fill(bytes).expect("the OS random source failed");
    }
}
