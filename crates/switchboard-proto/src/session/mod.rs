//! Sessions, ids and reconnect tokens, as plain state machines.
//!
//! Nothing here touches a socket, a clock or the OS's random source: every
//! method takes `now`, and the table takes its randomness from the
//! [`Entropy`](crate::entropy::Entropy) it was made with. The manager moves
//! bytes and calls in; tests drive the same code in memory with made-up
//! instants and a seeded source.

use std::net::IpAddr;

mod ids;
mod table;
mod token;

pub use ids::{ClientId, IdClaim, IdRefusal, PlayerIds};
pub use table::{Admission, Refusal, Session, SessionConfig, Sessions};
pub use token::ReconnectToken;

/// Names (players', rooms') have at most this many characters.
pub const MAX_NAME_CHARS: usize = 32;

/// A name a peer chose that breaks the one rule for names ([`checked_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a name has 1 to {MAX_NAME_CHARS} characters and no control characters")]
pub struct NameError;

/// The one rule for names a peer chooses (a player's, a room's): trimmed,
/// 1 to [`MAX_NAME_CHARS`] characters, no control characters. Returns the
/// trimmed name, or why not.
pub fn checked_name(raw: &str) -> Result<&str, NameError> {
    let name = raw.trim();
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(NameError);
    }
    Ok(name)
}

/// A session as every process of a service sees it (what a shared store
/// keeps; its token is kept apart).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SharedSession {
    /// Its id.
    pub client: ClientId,
    /// The player's name.
    pub name: String,
    /// The address it joined from (an IPv6 /64 as one address).
    pub from: IpAddr,
    /// How many times the client came back.
    pub reconnects: u32,
}
