//! Where the player's connection stands, in words: the status line of the
//! full-screen interface, and the last line a player reads when the game
//! ends without its say.
//!
//! ```text
//!  Joining ──welcomed──▶ Connected ──lost──▶ Lost (countdown to the next attempt) ──welcomed──▶ Connected
//!     │                                        │ refused, closed, out of attempts, the local server died
//!     └────────────────────────────────────────┴──▶ Gone(why)
//! ```

use std::time::Instant;

use switchboard::{DisconnectReason, NetworkClient};

use crate::protocol::printable;

/// The connection's state, as the player is told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// Not welcomed yet.
    Joining,
    /// Welcomed: orders go through.
    Connected,
    /// The connection was lost (why); reconnect attempts follow.
    Lost(String),
    /// For good: why.
    Gone(String),
}

/// How a status line should look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    Good,
    Warning,
    Bad,
}

impl Link {
    /// The status line now: where the player is connected, or what is
    /// being tried and when the next attempt starts.
    pub(crate) fn line(&self, client: &NetworkClient, max_attempts: u32) -> (String, Tone) {
        let addr = printable(client.server_addr());
        match self {
            Link::Joining => (format!("joining the game at {addr}..."), Tone::Warning),
            Link::Connected => (format!("connected to {addr}"), Tone::Good),
            Link::Lost(why) => {
                let next = match client.next_reconnect() {
                    Some((attempt, at)) => {
                        let wait = at.saturating_duration_since(Instant::now());
                        format!(
                            "attempt {attempt} of {max_attempts} in {:.1} s",
                            wait.as_secs_f64()
                        )
                    }
                    None => format!("trying {addr} now"),
                };
                (
                    format!("connection lost ({why}): reconnecting, {next}"),
                    Tone::Warning,
                )
            }
            Link::Gone(why) => (format!("disconnected (q quits): {why}"), Tone::Bad),
        }
    }

    /// Why the game ended without the player's say, if it did.
    pub(crate) fn gone(&self) -> Option<&str> {
        match self {
            Link::Gone(why) => Some(why),
            _ => None,
        }
    }
}

/// A final disconnect in a player's words (a hosted game's server closes
/// with "the host, ada, quit"); `reconnecting` says whether the client was
/// trying to come back.
pub(crate) fn farewell(reason: &DisconnectReason, reconnecting: bool) -> String {
    match reason {
        DisconnectReason::ClosedByPeer { reason, .. } => {
            format!("the game's server closed it ({})", printable(reason))
        }
        other if reconnecting => {
            format!("gave up reconnecting: {}", printable(&other.to_string()))
        }
        other => printable(&other.to_string()),
    }
}
