//! Sessions, ids and reconnect tokens, as plain state machines.
//!
//! Nothing here touches a socket or a clock: every method takes `now`. The
//! [`ServerManager`](crate::manager::ServerManager) moves bytes and calls in;
//! the tests drive the same code in memory with made-up instants.

mod ids;
mod table;
pub mod ticket;
mod token;

pub use ids::{IdClaim, IdRefusal, PlayerIds};
pub use switchboard_proto::limits::{
    Backoff, BackoffPolicy, KeyedLimiter, LogLimiter, Outage, RateLimit, RateLimiter,
};
pub use table::{Admission, ClientId, Refusal, Session, SessionConfig, Sessions};
pub use token::ReconnectToken;

/// Names (players', rooms') have at most this many characters.
pub const MAX_NAME_CHARS: usize = 32;

/// The one rule for names a peer chooses (a player's, a room's): trimmed,
/// 1 to [`MAX_NAME_CHARS`] characters, no control characters. Returns the
/// trimmed name, or why not.
pub fn checked_name(raw: &str) -> Result<&str, String> {
    let name = raw.trim();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(format!(
            "a name has 1 to {MAX_NAME_CHARS} characters and no control characters"
        ));
    }
    Ok(name)
}
