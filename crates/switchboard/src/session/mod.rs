//! Sessions, ids and reconnect tokens, as plain state machines.
//!
//! Nothing here touches a socket or a clock: every method takes `now`. The
//! [`ServerManager`](crate::manager::ServerManager) moves bytes and calls in;
//! the tests drive the same code in memory with made-up instants.

mod backoff;
mod rate;
mod table;
mod token;

pub use backoff::{Backoff, BackoffPolicy};
pub use rate::{KeyedLimiter, RateLimit, RateLimiter};
pub use table::{Admission, ClientId, Refusal, Session, SessionConfig, Sessions};
pub use token::ReconnectToken;
