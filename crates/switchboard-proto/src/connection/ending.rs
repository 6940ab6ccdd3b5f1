//! How a connection ends, decided once for every driver: from how its
//! reading ended and the close under way, if any.

use std::io::ErrorKind;

use super::control::CloseFrame;
use crate::reason::{DisconnectReason, IoFailure};

/// How reading an open connection ended.
#[derive(Debug)]
pub enum ReadEnd {
    /// The peer sent its close frame.
    PeerClosed(CloseFrame),
    /// The stream ended without one.
    Eof,
    /// The transport failed.
    Lost(std::io::Error),
}

/// The end of a connection whose reading ended as `read`. A close under
/// way (`closing`: ours, begun first) is the reason whatever the peer did
/// after it; otherwise the peer's close with its code and reason, or a
/// lost connection.
pub fn ended(read: ReadEnd, closing: Option<DisconnectReason>) -> DisconnectReason {
    closing.unwrap_or_else(|| match read {
        ReadEnd::PeerClosed(close) => DisconnectReason::ClosedByPeer {
            code: close.code,
            reason: close.reason,
        },
        ReadEnd::Eof => lost("the peer hung up without a goodbye"),
        ReadEnd::Lost(err) => DisconnectReason::ConnectionLost(err.into()),
    })
}

/// The end of a connection whose peer hung up before its hello.
pub fn hung_up_in_handshake() -> DisconnectReason {
    lost("the peer hung up before its hello")
}

fn lost(what: &'static str) -> DisconnectReason {
    DisconnectReason::ConnectionLost(IoFailure::new(ErrorKind::UnexpectedEof, what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::CloseCode;

    #[test]
    fn a_close_under_way_is_the_reason_whatever_the_peer_does_next() {
        let ours = DisconnectReason::Closed {
            code: CloseCode::NORMAL,
            reason: "bye".into(),
        };
        assert_eq!(ended(ReadEnd::Eof, Some(ours.clone())), ours);
        let theirs = CloseFrame {
            code: CloseCode::GOING_AWAY,
            reason: "quit".into(),
        };
        assert!(matches!(
            ended(ReadEnd::PeerClosed(theirs), None),
            DisconnectReason::ClosedByPeer { code: CloseCode::GOING_AWAY, reason } if reason == "quit"
        ));
        assert!(matches!(
            ended(ReadEnd::Eof, None),
            DisconnectReason::ConnectionLost(_)
        ));
    }
}
