//! Requests in flight: their verdicts, and the ticket a game holds.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::NetworkClient;
use crate::codec::ContentError;
use crate::manager::protocol::ErrorCode;
use crate::socket::SendError;

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
            | (ConnectionLost, ConnectionLost) => true,
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

/// A request in flight; its status changes when the client takes in the
/// answer (in `poll`, `drain` or [`wait`](Self::wait)). Also announced by
/// [`ClientSignals::request_done`](super::ClientSignals::request_done) and
/// [`ClientEvent::RequestDone`](super::ClientEvent::RequestDone).
#[derive(Debug, Clone)]
pub struct RequestTicket {
    pub(super) id: u64,
    pub(super) status: Rc<RefCell<RequestStatus>>,
}

impl RequestTicket {
    /// The request id the server's answer carries.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The current status.
    pub fn status(&self) -> RequestStatus {
        self.status.borrow().clone()
    }

    /// Whether an answer (or a failure) has arrived.
    pub fn is_done(&self) -> bool {
        !matches!(*self.status.borrow(), RequestStatus::Pending)
    }

    /// Runs `client`'s network side until this request has its verdict or
    /// `timeout` passes, and returns the status (still `Pending` on a
    /// timeout shorter than the request's own). Events that arrive meanwhile
    /// wait for the next `poll` or `drain`; no slot runs here.
    pub fn wait(&self, client: &mut NetworkClient, timeout: Duration) -> RequestStatus {
        let deadline = Instant::now() + timeout;
        while !self.is_done() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            client.pump(left.min(Duration::from_millis(50)));
        }
        self.status()
    }
}
