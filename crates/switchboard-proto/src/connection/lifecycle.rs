//! The life of an open connection after its handshake, as one state
//! machine for every driver: a close begun (by the owner, a broken rule, an
//! idle peer) with its reason and deadline, our close frame out, the
//! linger until the peer hangs up, and the end the owner hears.
//! `ConnectionCore` and the tokio driver both hold one; they only move
//! bytes and report what it decides.
//!
//! ```text
//!   Open ── begin_close(reason) ──▶ Closing (close frame ordered, deadline set)
//!     │                               │ close_sent: linger until the reading ends
//!     │ read_ended: the peer's close, │ read_ended / deadline_passed
//!     ▼ EOF, a lost transport         ▼
//!   End(reason) ◀─────────────────── End(reason)
//! ```

use std::ops::Add;
use std::time::Duration;

use super::ending::{self, ReadEnd};
use crate::reason::{CloseCode, DisconnectReason, IoFailure};

/// What the driver does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Go on (reading, writing, waiting for the deadline).
    Continue,
    /// The connection has ended: tell the owner this, drop the transport.
    End(DisconnectReason),
}

/// An open connection's life; `Instant` is the driver's clock.
#[derive(Debug)]
pub struct Lifecycle<Instant> {
    /// The end the owner hears, once known (the first close's reason).
    reason: Option<DisconnectReason>,
    /// By when a close under way must be done.
    deadline: Option<Instant>,
    close_timeout: Duration,
    read_done: bool,
    write_done: bool,
}

impl<Instant: Copy + Ord + Add<Duration, Output = Instant>> Lifecycle<Instant> {
    /// A connection just opened; a close under way gets `close_timeout`.
    pub fn new(close_timeout: Duration) -> Self {
        Self {
            reason: None,
            deadline: None,
            close_timeout,
            read_done: false,
            write_done: false,
        }
    }

    /// By when the close under way must be done, if one is.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the reading side has ended (or is no longer waited for).
    pub fn read_done(&self) -> bool {
        self.read_done
    }

    /// Whether our close frame is out (or writing failed).
    pub fn write_done(&self) -> bool {
        self.write_done
    }

    /// The reason of the close under way, if any.
    pub fn closing(&self) -> Option<&DisconnectReason> {
        self.reason.as_ref()
    }

    /// A close begins at `now` for `reason`: the first close's reason is
    /// the end the owner hears, and its deadline the one that holds.
    /// `true` when this is the first: the driver orders its close frame
    /// (code and text from `reason`).
    pub fn begin_close(&mut self, reason: DisconnectReason, now: Instant) -> bool {
        self.deadline.get_or_insert(now + self.close_timeout);
        let first = self.reason.is_none();
        self.reason.get_or_insert(reason);
        first
    }

    /// The peer is silent past the idle timeout: close, and do not wait
    /// for it to hang up.
    pub fn idle(&mut self, now: Instant) -> bool {
        self.read_done = true;
        self.begin_close(DisconnectReason::IdleTimeout, now)
    }

    /// The peer broke a rule (`what`): close as a protocol error. The
    /// driver reports the error to the owner first.
    pub fn broken_rule(&mut self, what: &str, now: Instant) -> bool {
        self.read_done = true;
        self.begin_close(DisconnectReason::ProtocolError(what.to_string()), now)
    }

    /// The owner went away: close normally.
    pub fn owner_gone(&mut self, now: Instant) -> bool {
        self.read_done = true;
        let reason = DisconnectReason::Closed {
            code: CloseCode::NORMAL,
            reason: "closed".into(),
        };
        self.begin_close(reason, now)
    }

    /// Our close frame is out at `now` (`reason` is the close's, for a
    /// close the driver began on its own). Lingers until the reading ends
    /// (closing with unread bytes would reset the connection and lose the
    /// close frame on the way), or ends if it has.
    pub fn close_sent(&mut self, reason: impl FnOnce() -> DisconnectReason, now: Instant) -> Step {
        self.write_done = true;
        self.reason.get_or_insert_with(reason);
        self.deadline.get_or_insert(now + self.close_timeout);
        self.end_if_done()
    }

    /// Writing failed: the connection is lost (unless a close had its
    /// reason already).
    pub fn write_failed(&mut self, error: std::io::Error) -> Step {
        self.write_done = true;
        Step::End(
            self.reason
                .take()
                .unwrap_or(DisconnectReason::ConnectionLost(error.into())),
        )
    }

    /// The reading side ended as `end`.
    pub fn read_ended(&mut self, end: ReadEnd) -> Step {
        self.read_done = true;
        if self.write_done {
            return self.end_if_done();
        }
        Step::End(ending::ended(end, self.reason.take()))
    }

    /// The time is `now`: the close's deadline, if it passed, ends the
    /// connection (a close frame never written: the close timed out).
    pub fn deadline_passed(&mut self, now: Instant) -> Option<DisconnectReason> {
        if self.deadline.is_none_or(|deadline| now < deadline) {
            return None;
        }
        Some(self.reason.take().unwrap_or_else(|| {
            DisconnectReason::ConnectionLost(IoFailure::new(
                std::io::ErrorKind::TimedOut,
                "close timed out",
            ))
        }))
    }

    fn end_if_done(&mut self) -> Step {
        match (self.read_done && self.write_done, self.reason.take()) {
            (true, Some(reason)) => Step::End(reason),
            (_, reason) => {
                self.reason = reason;
                Step::Continue
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const LINGER: Duration = Duration::from_secs(2);

    fn bye() -> DisconnectReason {
        DisconnectReason::Closed {
            code: CloseCode::NORMAL,
            reason: "bye".into(),
        }
    }

    #[test]
    fn a_graceful_close_lingers_until_the_peer_hangs_up_then_ends_with_its_reason() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(LINGER);
        assert!(
            life.begin_close(bye(), t0),
            "the first close orders the frame"
        );
        assert!(!life.begin_close(DisconnectReason::IdleTimeout, t0));
        assert_eq!(life.close_sent(bye, t0), Step::Continue, "lingers");
        assert_eq!(life.read_ended(ReadEnd::Eof), Step::End(bye()));
    }

    #[test]
    fn a_close_whose_peer_never_hangs_up_ends_at_its_deadline() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(LINGER);
        life.begin_close(bye(), t0);
        assert_eq!(life.close_sent(bye, t0), Step::Continue);
        assert_eq!(life.deadline_passed(t0 + LINGER / 2), None);
        assert_eq!(life.deadline_passed(t0 + LINGER), Some(bye()));
    }

    #[test]
    fn an_idle_peer_is_not_waited_for_once_the_close_is_out() {
        let t0 = Instant::now();
        let mut life = Lifecycle::new(LINGER);
        assert!(life.idle(t0));
        assert_eq!(
            life.close_sent(|| unreachable!("the idle close has its reason"), t0),
            Step::End(DisconnectReason::IdleTimeout)
        );
    }

    #[test]
    fn the_peer_s_close_or_a_lost_transport_ends_an_open_connection_at_once() {
        let mut life = Lifecycle::<Instant>::new(LINGER);
        assert!(matches!(
            life.read_ended(ReadEnd::Eof),
            Step::End(DisconnectReason::ConnectionLost(_))
        ));
        let mut life = Lifecycle::<Instant>::new(LINGER);
        assert!(matches!(
            life.write_failed(std::io::ErrorKind::BrokenPipe.into()),
            Step::End(DisconnectReason::ConnectionLost(_))
        ));
    }
}
