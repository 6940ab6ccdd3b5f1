//! The session protocol on channel 1: how a client joins, comes back, asks,
//! and hears the answers. Shared by the client (`NetworkClient`) and the
//! server (`ServerManager`); byte layouts in `docs/PROTOCOL.md`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::codec::{self, ContentError};
use crate::message::{Message, SESSION_CHANNEL};
use crate::session::{ClientId, ReconnectToken};

/// Client → server, first message: who I am.
pub const HELLO: u16 = 1;
/// Server → client: you are in; your id and token.
pub const WELCOME: u16 = 2;
/// Server → client: you are not admitted, and why; the connection closes.
pub const REFUSED: u16 = 3;
/// Client → server: a request with an id, wrapping an application message.
pub const REQUEST: u16 = 4;
/// Server → client: the request with this id was accepted.
pub const ACCEPTED: u16 = 5;
/// Server → client: the request with this id was rejected, and why.
pub const REJECTED: u16 = 6;
/// Server → client: a message could not be handled at all (unknown channel
/// or action, undecodable content, too early, too fast).
pub const ERROR: u16 = 7;
/// Client → server: a request sent again after a resume (the same id, of
/// the session's numbering, and content as first sent): applied only if
/// the server has not handled that id, else answered with its verdict
/// again (`docs/PROTOCOL.md`, "Requests across a reconnect").
pub const REQUEST_AGAIN: u16 = 8;

/// The first message of a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHello {
    /// The player's name (1..=32 characters, no control characters).
    pub name: String,
    /// The join password of a hosted game, if it has one.
    pub password: Option<String>,
    /// Opaque credentials for the game's authentication hook.
    pub credentials: Vec<u8>,
    /// Present when coming back: the id and the last token received.
    pub resume: Option<Resume>,
}

/// The id and token a returning client presents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// The id the server gave.
    pub client: ClientId,
    /// The most recent token the server gave.
    pub token: ReconnectToken,
}

/// The server's answer to an admitted hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The client's public id.
    pub client: ClientId,
    /// The secret to present next time; replaces any earlier one.
    pub token: ReconnectToken,
    /// Whether an existing session was resumed.
    pub resumed: bool,
    /// How long the server keeps the session after a connection loss.
    pub grace_secs: u32,
}

/// The server's answer to a refused hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// [`Refusal::code`](crate::session::Refusal::code).
    pub code: u16,
    /// Why, for people.
    pub reason: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (refusal {})", self.reason, self.code)
    }
}

/// A request: an application message with an id the answer will carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFrame {
    /// Chosen by the client, unique among its open requests; never 0.
    pub id: u64,
    /// The application channel.
    pub channel: u16,
    /// The application action.
    pub action: u16,
    /// The encoded content.
    pub content: Vec<u8>,
}

/// A rejection of request `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// The request's id (0 for a plain message sent without one).
    pub id: u64,
    /// Why, for the player.
    pub reason: String,
}

/// What kind of message could not be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The channel is not one the game handles.
    UnknownChannel,
    /// The action is not one the channel handles.
    UnknownAction,
    /// The content did not decode as the type the action takes.
    BadContent,
    /// A message other than hello before the welcome.
    NotWelcomed,
    /// Over the per-client message or byte rate; the message was dropped.
    RateLimited,
    /// A session message the server does not know.
    UnknownSessionAction,
    /// A request sent again after a reconnect that the server had already
    /// handled, whose verdict it no longer remembers
    /// (`ManagerRules::remembered_verdicts`): it was not applied again.
    AlreadyHandled,
}

/// The answer to a message that could not be handled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// The request's id if it was one, else 0.
    pub id: u64,
    /// What kind of problem.
    pub code: ErrorCode,
    /// Details for logs and developers.
    pub detail: String,
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "server error {:?}: {}", self.code, self.detail)
    }
}

impl std::error::Error for ErrorReply {}

/// A session-channel message carrying `content`.
pub fn session_message<T: Serialize>(action: u16, content: &T) -> Message {
    let bytes = codec::encode_value(content).expect("session messages always encode");
    Message::from_raw(SESSION_CHANNEL, action, Bytes::from(bytes))
}

impl RequestFrame {
    /// The application message inside.
    pub fn message(&self) -> Message {
        Message::from_raw(self.channel, self.action, Bytes::from(self.content.clone()))
    }

    /// Decodes a request frame's content.
    pub fn decode(message: &Message) -> Result<Self, ContentError> {
        message.content()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte layout docs/PROTOCOL.md promises for a welcome.
    #[test]
    fn welcome_bytes_match_the_protocol_document() {
        let client = ClientId(uuid::Uuid::from_bytes([0x11; 16]));
        let welcome = Welcome {
            client,
            token: ReconnectToken([0x22; 32]),
            resumed: true,
            grace_secs: 300,
        };
        let bytes = codec::encode_value(&welcome).unwrap();
        let mut expected = vec![16];
        expected.extend_from_slice(&[0x11; 16]);
        expected.extend_from_slice(&[0x22; 32]);
        expected.push(1);
        expected.extend_from_slice(&[0xfb, 0x2c, 0x01]);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn error_codes_are_variant_indexes() {
        let reply = ErrorReply {
            id: 5,
            code: ErrorCode::RateLimited,
            detail: "x".into(),
        };
        assert_eq!(codec::encode_value(&reply).unwrap(), [5, 4, 1, b'x']);
    }
}
