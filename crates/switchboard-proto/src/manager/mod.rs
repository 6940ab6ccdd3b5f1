//! The server's side of the rules: the session protocol's messages, the
//! game's logic (what a request is, what it may answer, where updates go),
//! the counters a server keeps, its log lines, and the changes it writes to
//! a store shared with other processes, and [`ManagerCore`](core::ManagerCore),
//! the manager's rules as a state machine with no socket and no clock.

use crate::session::{ClientId, ReconnectToken, SharedSession};

pub mod config;
pub mod core;
pub mod logic;
pub mod protocol;
pub mod stats;

/// One line of the manager's log (what the driver's `ManagerHandle::log`
/// carries). The same line goes to `tracing`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// `tracing`'s level for it.
    pub level: LogLevel,
    /// The text (client-chosen strings in it are escaped).
    pub text: String,
}

/// How important a [`LogEntry`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Routine: joins, leaves.
    Info,
    /// Something a client did wrong, or a limit that tripped.
    Warn,
}

/// The store could not be reached or answered in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{0}")]
pub struct ShareError(pub String);

/// One change to a session held by this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareUpdate {
    /// Online here; `token` is the only one that will work next (a new
    /// session, or a token rotated by a reconnect).
    Online {
        /// The session.
        session: SharedSession,
        /// Its current token.
        token: ReconnectToken,
    },
    /// Its connection was lost: it waits out its grace period.
    Offline {
        /// Whose.
        client: ClientId,
    },
    /// It ended for good (left, kicked, expired, gave way).
    Gone {
        /// Whose.
        client: ClientId,
    },
}
