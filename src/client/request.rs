//! Requests in flight: their verdicts, and the ticket a game holds.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::NetworkClient;
use switchboard_proto::client::RequestStatus;

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
