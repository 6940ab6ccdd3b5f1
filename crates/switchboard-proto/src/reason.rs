//! Why a connection ended, and what can go wrong on one.

use crate::codec::{ContentError, FrameError};

/// A close code as sent in the close frame. The values follow WebSocket's
/// where one fits; applications may use 4000..=4999 for their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// An ordinary close.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// The server is shutting down, or the program is quitting.
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// The peer sent something that breaks the protocol.
    pub const PROTOCOL_ERROR: CloseCode = CloseCode(1002);
    /// The peers speak different protocol versions.
    pub const VERSION_MISMATCH: CloseCode = CloseCode(1003);
    /// The peer did not read fast enough and its outbound queue filled.
    pub const SLOW_CONSUMER: CloseCode = CloseCode(1008);
    /// Nothing arrived from the peer for too long.
    pub const IDLE_TIMEOUT: CloseCode = CloseCode(1011);
    /// The server has no room for this connection now: it is full, or too
    /// many connections from the same address are under way while it is
    /// busy (WebSocket's "try again later"). The reason may end with a
    /// retry-after ([`with_retry_after`]); a client waits that long at
    /// least before it tries again.
    pub const SERVER_FULL: CloseCode = CloseCode(1013);
    /// The client was not admitted (password, token, authentication); do not
    /// retry with the same credentials.
    pub const REFUSED: CloseCode = CloseCode(1010);
    /// Too many invalid messages.
    pub const ABUSE: CloseCode = CloseCode(1007);
    /// Another connection of the same client took over this session.
    pub const REPLACED: CloseCode = CloseCode(1012);
    /// Disconnected by the server's operator (the admin server's kick).
    pub const KICKED: CloseCode = CloseCode(4000);
}

/// `reason` with a retry-after the peer can read back
/// ([`retry_after_of`]): `"{reason} (retry after {ms} ms)"`.
pub fn with_retry_after(reason: &str, wait: std::time::Duration) -> String {
    format!("{reason} (retry after {} ms)", wait.as_millis())
}

/// The retry-after a close reason ends with (`"... (retry after 500 ms)"`),
/// if it has one.
pub fn retry_after_of(reason: &str) -> Option<std::time::Duration> {
    let rest = reason.strip_suffix(" ms)")?;
    let at = rest.rfind("(retry after ")?;
    let ms: u64 = rest[at + "(retry after ".len()..].parse().ok()?;
    Some(std::time::Duration::from_millis(ms))
}

impl std::fmt::Display for CloseCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An IO failure as a [`DisconnectReason`] keeps it: the kind to match on
/// (`ConnectionRefused`, `ConnectionReset`, `UnexpectedEof`, `TimedOut`...)
/// and the text for people.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IoFailure {
    /// What kind of failure (in a recording: its name, `ErrorKind`'s Debug).
    #[serde(with = "error_kind")]
    pub kind: std::io::ErrorKind,
    /// The system's or the library's words for it.
    pub message: String,
}

impl IoFailure {
    /// A failure of `kind`, described by `message`.
    pub fn new(kind: std::io::ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl From<&std::io::Error> for IoFailure {
    fn from(err: &std::io::Error) -> Self {
        Self::new(err.kind(), err.to_string())
    }
}

impl From<std::io::Error> for IoFailure {
    fn from(err: std::io::Error) -> Self {
        Self::from(&err)
    }
}

impl std::fmt::Display for IoFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why a connection ended. The owner reads it from the `disconnected` signal
/// (or the `Disconnected` event) after the fact.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// This side closed the connection.
    Closed {
        /// The code sent to the peer.
        code: CloseCode,
        /// The reason sent to the peer.
        reason: String,
    },
    /// The peer closed the connection and said why.
    ClosedByPeer {
        /// The peer's close code.
        code: CloseCode,
        /// The peer's reason, as it sent it.
        reason: String,
    },
    /// The connection could not be opened.
    ConnectFailed(IoFailure),
    /// The connection broke (reset, or the peer hung up without a goodbye:
    /// kind `UnexpectedEof`).
    ConnectionLost(IoFailure),
    /// The peer did not read its messages and its outbound queue filled, so
    /// this side dropped it to keep memory bounded.
    SlowConsumer,
    /// Nothing arrived from the peer within `idle_timeout`.
    IdleTimeout,
    /// The peer did not complete the handshake within `handshake_timeout`.
    HandshakeTimeout,
    /// The peer's first frame was not a Switchboard hello.
    NotSwitchboard,
    /// The peer speaks another protocol version.
    VersionMismatch {
        /// The version this side speaks.
        ours: u16,
        /// The version the peer announced.
        theirs: u16,
    },
    /// The peer broke the protocol (a bad frame, an undecodable envelope).
    ProtocolError(String),
    /// The server had no room for another connection.
    ServerFull,
}

impl DisconnectReason {
    /// A short stable name for the kind of reason ("connection lost",
    /// "slow consumer", ...), for counters and metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            DisconnectReason::Closed { .. } => "closed by server",
            DisconnectReason::ClosedByPeer { .. } => "closed by client",
            DisconnectReason::ConnectFailed(_) => "connect failed",
            DisconnectReason::ConnectionLost(_) => "connection lost",
            DisconnectReason::SlowConsumer => "slow consumer",
            DisconnectReason::IdleTimeout => "idle timeout",
            DisconnectReason::HandshakeTimeout => "handshake timeout",
            DisconnectReason::NotSwitchboard => "not switchboard",
            DisconnectReason::VersionMismatch { .. } => "version mismatch",
            DisconnectReason::ProtocolError(_) => "protocol error",
            DisconnectReason::ServerFull => "server full",
        }
    }

    /// The close code this side sends its peer for this reason (what a
    /// driver writes in the close frame of a connection that fails).
    pub fn close_code(&self) -> CloseCode {
        match self {
            DisconnectReason::Closed { code, .. } | DisconnectReason::ClosedByPeer { code, .. } => {
                *code
            }
            DisconnectReason::SlowConsumer => CloseCode::SLOW_CONSUMER,
            DisconnectReason::IdleTimeout | DisconnectReason::HandshakeTimeout => {
                CloseCode::IDLE_TIMEOUT
            }
            DisconnectReason::VersionMismatch { .. } => CloseCode::VERSION_MISMATCH,
            DisconnectReason::NotSwitchboard | DisconnectReason::ProtocolError(_) => {
                CloseCode::PROTOCOL_ERROR
            }
            DisconnectReason::ServerFull => CloseCode::SERVER_FULL,
            DisconnectReason::ConnectFailed(_) | DisconnectReason::ConnectionLost(_) => {
                CloseCode::GOING_AWAY
            }
        }
    }
}

impl std::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DisconnectReason::Closed { code, reason } => write!(f, "closed ({code}): {reason}"),
            DisconnectReason::ClosedByPeer { code, reason } => {
                write!(f, "closed by peer ({code}): {}", reason.escape_debug())
            }
            DisconnectReason::ConnectFailed(err) => write!(f, "connect failed: {err}"),
            DisconnectReason::ConnectionLost(err) => write!(f, "connection lost: {err}"),
            DisconnectReason::SlowConsumer => {
                write!(
                    f,
                    "slow consumer: the peer did not read and its queue filled"
                )
            }
            DisconnectReason::IdleTimeout => write!(f, "idle timeout: nothing heard from the peer"),
            DisconnectReason::HandshakeTimeout => {
                write!(f, "handshake timeout: the peer sent no hello")
            }
            DisconnectReason::NotSwitchboard => write!(f, "the peer is not a Switchboard peer"),
            DisconnectReason::VersionMismatch { ours, theirs } => write!(
                f,
                "protocol version mismatch: this side speaks {ours}, the peer {theirs}"
            ),
            DisconnectReason::ProtocolError(err) => write!(f, "protocol error: {err}"),
            DisconnectReason::ServerFull => write!(f, "server full"),
        }
    }
}

/// Something that went wrong on a connection; reported through the `error`
/// signal. Errors that end the connection are followed by `disconnected`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SocketError {
    /// A frame from the peer was bad; the connection is closed.
    #[error("bad frame from peer: {0}")]
    Frame(#[from] FrameError),
    /// A frame's envelope did not decode; the connection is closed.
    #[error("bad message envelope from peer: {0}")]
    Envelope(ContentError),
    /// A system frame arrived compressed (they never are); the connection
    /// is closed.
    #[error("compressed system frame from peer")]
    CompressedSystemFrame,
    /// The peer's compressed frames would inflate past the connection's
    /// budget (`SocketConfig::max_inflated_per_second`); the connection is
    /// closed.
    #[error("the peer's frames inflate past the budget of {per_second} bytes a second")]
    InflateBudget {
        /// The budget.
        per_second: usize,
    },
    /// The peer sent a system action this version does not know; it is
    /// counted and ignored.
    #[error("unknown system action {0} from peer")]
    UnknownSystemAction(u16),
    /// The transport carrying the frames broke its rules (a WebSocket text
    /// message, a WebSocket message that is not exactly one frame); the
    /// connection is closed.
    #[error("bad transport from peer: {0}")]
    Transport(String),
}

/// A message could not be queued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The connection is closed or closing.
    #[error("the connection is closed")]
    Closed,
    /// The peer's outbound queue is full; the peer is being disconnected.
    #[error("the peer is a slow consumer; it is being disconnected")]
    SlowConsumer,
    /// The message could not be framed (too large).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The content could not be encoded.
    #[error(transparent)]
    Content(#[from] ContentError),
}

/// `std::io::ErrorKind` by name, for recordings (the kinds a connection
/// ends with; any other reads back as `Other`).
mod error_kind {
    use std::io::ErrorKind;

    const KINDS: [ErrorKind; 12] = [
        ErrorKind::ConnectionRefused,
        ErrorKind::ConnectionReset,
        ErrorKind::ConnectionAborted,
        ErrorKind::NotConnected,
        ErrorKind::BrokenPipe,
        ErrorKind::TimedOut,
        ErrorKind::UnexpectedEof,
        ErrorKind::InvalidData,
        ErrorKind::InvalidInput,
        ErrorKind::AddrInUse,
        ErrorKind::WouldBlock,
        ErrorKind::Other,
    ];

    pub(super) fn serialize<S: serde::Serializer>(
        kind: &ErrorKind,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{kind:?}"))
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<ErrorKind, D::Error> {
        let name: String = serde::Deserialize::deserialize(d)?;
        Ok(KINDS
            .into_iter()
            .find(|kind| format!("{kind:?}") == name)
            .unwrap_or(ErrorKind::Other))
    }
}
