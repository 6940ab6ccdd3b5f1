//! The client's side of the rules: its settings, the verdicts of its
//! requests, and [`ClientCore`], the session as a state machine (hello,
//! welcome, reconnect with backoff and jitter, request verdicts) with no IO:
//! a driver feeds it the connection's events and the time, and carries out
//! what it asks.

use std::sync::Arc;

use crate::codec::ContentError;
use crate::manager::protocol::{ErrorCode, ErrorReply};
use crate::reason::SendError;
use crate::session::ClientId;

mod config;
mod core;

pub use self::config::{ClientConfig, ReconnectPolicy};
pub use self::core::{ClientAction, ClientCore, ClientEvent};

/// A request in flight, as a plain id: the client answers its status
/// (`NetworkClient::status`, `NetworkClient::wait`,
/// [`ClientCore::status`]) and announces its verdict as
/// [`ClientEvent::RequestDone`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestTicket(pub(crate) u64);

impl RequestTicket {
    /// The request id the server's answer carries.
    pub fn id(self) -> u64 {
        self.0
    }
}

/// What the server said when it let the client in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcomed {
    /// The client's id.
    pub client: ClientId,
    /// Whether the old session was resumed after a reconnect.
    pub resumed: bool,
}

/// Something the client should know about that is not a message.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server could not handle a message.
    #[error(transparent)]
    Server(ErrorReply),
    /// The server rejected a plain message (sent without a request id).
    #[error("rejected: {0}")]
    Rejected(String),
    /// The connection reported a problem.
    #[error(transparent)]
    Socket(std::sync::Arc<crate::reason::SocketError>),
}

/// Why a request did not get accepted or rejected.
///
/// Two `Send` errors are equal when they are the same error (one `Arc`).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// There is no connection to send on (lost, or reconnecting).
    #[error("not connected")]
    NotConnected,
    /// `max_pending_requests` requests await answers already.
    #[error("too many requests awaiting answers")]
    TooManyPending,
    /// The content could not be encoded; nothing was sent.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// The message could not be queued (connection closed, slow consumer,
    /// frame too large).
    #[error("cannot send: {0}")]
    Send(Arc<SendError>),
    /// No answer within `request_timeout`.
    #[error("no answer in time")]
    Timeout,
    /// The connection ended before the answer came; the request may or may
    /// not have been applied.
    #[error("connection lost before the answer")]
    ConnectionLost,
    /// The ticket is not one of the client's last
    /// [`kept_verdicts`](ClientConfig::kept_verdicts) requests: its verdict
    /// was forgotten (or it was never this client's).
    #[error("verdict forgotten: older than the last kept_verdicts requests")]
    Forgotten,
    /// The server could not handle the request at all.
    #[error("server error {code:?}: {detail}")]
    Server {
        /// What kind.
        code: ErrorCode,
        /// Details.
        detail: String,
    },
}

impl PartialEq for RequestError {
    fn eq(&self, other: &Self) -> bool {
        use RequestError::*;
        match (self, other) {
            (NotConnected, NotConnected)
            | (TooManyPending, TooManyPending)
            | (Timeout, Timeout)
            | (ConnectionLost, ConnectionLost)
            | (Forgotten, Forgotten) => true,
            (Content(a), Content(b)) => a == b,
            (Send(a), Send(b)) => Arc::ptr_eq(a, b),
            (Server { code, detail }, Server { code: c, detail: d }) => code == c && detail == d,
            _ => false,
        }
    }
}

impl Eq for RequestError {}

/// Where a request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum RequestStatus {
    /// Sent, no answer yet.
    Pending,
    /// The server applied it.
    Accepted,
    /// The server's rules refused it; nothing changed. The reason is for the
    /// player.
    Rejected(String),
    /// It got no verdict.
    Failed(RequestError),
}

impl RequestStatus {
    /// Whether the request has its verdict (or failed): not `Pending`.
    pub fn is_done(&self) -> bool {
        !matches!(self, RequestStatus::Pending)
    }

    /// Whether the server applied it.
    pub fn is_accepted(&self) -> bool {
        matches!(self, RequestStatus::Accepted)
    }
}
