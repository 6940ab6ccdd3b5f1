//! The envelope every message travels in: `{channel, action, content}`.
//!
//! Applications name their channels and actions with their own enums, declared
//! with [`channels!`](crate::channels) and [`actions!`](crate::actions). On the
//! wire both are `u16` ids; channels 0..=15 are the framework's (0: the
//! socket's keep-alive and close, 1: the session protocol).
//!
//! The content is any serde type. It is encoded when the message is built and
//! decoded on demand by the receiver, who names the type it expects; a
//! mismatch is a [`ContentError`], never a panic.

use bytes::{Buf, Bytes};
use serde::{de::DeserializeOwned, Serialize};

use crate::codec::{self, CodecConfig, ContentError, FrameError};

mod typed;

pub use typed::{DecodeError, TypedMessage};

/// The channel of the socket's own messages (ping, pong, close).
pub const SYSTEM_CHANNEL: u16 = 0;

/// The channel of the session protocol between a
/// `NetworkClient` and a
/// `ServerManager`: hello, welcome, requests
/// and their answers.
pub const SESSION_CHANNEL: u16 = 1;

/// The channel of rooms, lobby and RPC (the `switchboard-rooms` crate).
pub const ROOMS_CHANNEL: u16 = 2;

/// The channel of the real-time relay (the `switchboard-relay` crate).
pub const RELAY_CHANNEL: u16 = 3;

/// The relay's transforms from a client that asked for datagrams
/// (`RelayOptions::datagrams`): a sequenced channel, as QUIC datagrams
/// where the connection has them (newest wins: one sender, its own
/// transform).
pub const RELAY_MOVES_CHANNEL: u16 = 4;

/// The relay's batches of others' transforms to a client that asked for
/// datagrams: QUIC datagrams where the connection has them, delivered as
/// they come (many senders share it: the relay client keeps each player's
/// newest, by the relay's clock).
pub const RELAY_VIEW_CHANNEL: u16 = 5;

/// A one-value [`Channel`] for a framework feature's reserved channel
/// (which [`channels!`](crate::channels) refuses, being below 16): what the
/// rooms and relay crates use for [`ROOMS_CHANNEL`] and [`RELAY_CHANNEL`].
#[macro_export]
macro_rules! framework_channel {
    ($(#[$meta:meta])* $name:ident = $id:expr, $label:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name;

        impl $crate::message::Channel for $name {
            fn id(self) -> u16 {
                $id
            }
            fn from_id(id: u16) -> Option<Self> {
                (id == $id).then_some($name)
            }
            fn name(self) -> &'static str {
                $label
            }
        }
    };
}

/// Channels below this are the framework's; applications use
/// `FIRST_APP_CHANNEL..=65535`. Channels 2..=15 carry framework features
/// built on a `GameLogic` (2: rooms) or served apart (3: the relay); on a
/// `ServerManager` they reach the logic like application channels.
pub const FIRST_APP_CHANNEL: u16 = 16;

/// A channel enum of the application. Implement it with [`channels!`](crate::channels).
pub trait Channel: Copy + 'static {
    /// The id on the wire (16 or more: lower ids are the framework's).
    fn id(self) -> u16;
    /// The variant with this id, if any.
    fn from_id(id: u16) -> Option<Self>;
    /// The variant's name, for logs.
    fn name(self) -> &'static str;
}

/// An action enum of the application. Implement it with [`actions!`](crate::actions).
pub trait Action: Copy + 'static {
    /// The id on the wire.
    fn id(self) -> u16;
    /// The variant with this id, if any.
    fn from_id(id: u16) -> Option<Self>;
    /// The variant's name, for logs.
    fn name(self) -> &'static str;
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wire_enum {
    ($trait:ident, $min:expr, $(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $value:expr),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        $vis enum $name {
            $($(#[$vmeta])* $variant = $value),+
        }

        $(const _: () = assert!(
            $value >= $min,
            "channel ids 0..=15 are reserved for the framework"
        );)+

        impl $crate::message::$trait for $name {
            fn id(self) -> u16 {
                self as u16
            }
            fn from_id(id: u16) -> Option<Self> {
                match id {
                    $(x if x == $value => Some(Self::$variant),)+
                    _ => None,
                }
            }
            fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => stringify!($variant),)+
                }
            }
        }
    };
}

/// Declares an application's channel enum and implements [`Channel`] for it.
///
/// ```
/// switchboard_proto::channels! {
///     /// Where messages go.
///     pub enum Chan { Chat = 16, World = 17 }
/// }
/// use switchboard_proto::message::Channel;
/// assert_eq!(Chan::from_id(17), Some(Chan::World));
/// ```
///
/// Ids 0..=15 are refused at compile time: they are the framework's.
#[macro_export]
macro_rules! channels {
    ($($body:tt)*) => { $crate::__wire_enum!(Channel, $crate::message::FIRST_APP_CHANNEL, $($body)*); };
}

/// Declares an application's action enum.
///
/// **Typed** (what a game uses): the enum names its channel with `in`, and
/// each variant its content's type (none for a variant without content).
/// The enum is a [`TypedMessage`]: a value is a whole message, sent as it
/// is and received decoded; sending the wrong content for an action does
/// not compile. Derives are the caller's (`#[derive(Debug)]` above `enum`).
///
/// ```
/// switchboard_proto::channels! { pub enum Chan { Chat = 16 } }
/// switchboard_proto::actions! {
///     /// What can happen on the chat channel.
///     #[derive(Debug, Clone, PartialEq)]
///     pub enum Chat in Chan::Chat { Say(String) = 1, Emote(u8) = 2, Leave = 3 }
/// }
/// use switchboard_proto::message::TypedMessage;
/// assert_eq!(Chat::Emote(4).action_name(), "Emote");
/// ```
///
/// **Untyped** (relays, tools, framework crates): plain ids, the content
/// given apart (`Message::new(channel, action, &content)`), the enum an
/// [`Action`].
///
/// ```
/// switchboard_proto::actions! { pub enum ChatAction { Say = 1, Emote = 2 } }
/// use switchboard_proto::message::Action;
/// assert_eq!(ChatAction::Say.name(), "Say");
/// ```
#[macro_export]
macro_rules! actions {
    ($(#[$meta:meta])* $vis:vis enum $name:ident in $chan:path { $($body:tt)* }) => {
        $crate::__typed_actions!($(#[$meta])* $vis enum $name in $chan { $($body)* });
    };
    ($($body:tt)*) => { $crate::__wire_enum!(Action, 0, $($body)*); };
}

/// One message: a channel, an action and the encoded content.
///
/// Cloning is cheap: the content is shared [`Bytes`].
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    channel: u16,
    action: u16,
    content: Bytes,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("channel", &self.channel)
            .field("action", &self.action)
            .field("content_len", &self.content.len())
            .finish()
    }
}

impl Message {
    /// A message whose content is `content` encoded with the codec.
    pub fn new<C: Channel, A: Action, T: Serialize + ?Sized>(
        channel: C,
        action: A,
        content: &T,
    ) -> Result<Self, ContentError> {
        Ok(Self::from_raw(
            channel.id(),
            action.id(),
            Bytes::from(codec::encode_value(content)?),
        ))
    }

    /// A message from raw ids and already-encoded content.
    pub fn from_raw(channel: u16, action: u16, content: Bytes) -> Self {
        Self {
            channel,
            action,
            content,
        }
    }

    /// The channel id on the wire.
    pub fn channel_id(&self) -> u16 {
        self.channel
    }

    /// The action id on the wire.
    pub fn action_id(&self) -> u16 {
        self.action
    }

    /// The channel as the application's enum, if the id is one of its variants.
    pub fn channel<C: Channel>(&self) -> Option<C> {
        C::from_id(self.channel)
    }

    /// The action as the application's enum, if the id is one of its variants.
    pub fn action<A: Action>(&self) -> Option<A> {
        A::from_id(self.action)
    }

    /// Decodes the content as a `T`. Fails with a [`ContentError`] naming `T`
    /// when the bytes are not exactly one `T`.
    pub fn content<T: DeserializeOwned>(&self) -> Result<T, ContentError> {
        codec::decode_value(&self.content)
    }

    /// The message as a value of a [`TypedMessage`] (a typed action enum,
    /// a [`messages!`](crate::messages) set), or why it is not one.
    pub fn typed<M: TypedMessage>(&self) -> Result<M, DecodeError> {
        M::decode(self)
    }

    /// The encoded content bytes.
    pub fn content_bytes(&self) -> &Bytes {
        &self.content
    }

    /// Whether this is one of the socket's own messages (channel 0).
    pub fn is_system(&self) -> bool {
        self.channel == SYSTEM_CHANNEL
    }

    /// Whether this travels on a channel the framework reserves (0..=15).
    pub fn is_framework(&self) -> bool {
        self.channel < FIRST_APP_CHANNEL
    }

    /// Encodes the message into a complete frame, once; the result can be
    /// queued for any number of peers ([`EncodedMessage`] clones share the
    /// bytes).
    pub fn encode(&self, config: &CodecConfig) -> Result<EncodedMessage, FrameError> {
        let mut buf = Vec::with_capacity(codec::HEADER_LEN + 6 + self.content.len());
        buf.extend_from_slice(&[0; codec::HEADER_LEN]);
        // Two u16 encode as at most 3 bytes each; a Vec cannot refuse them.
        codec::encode_value_into(&(self.channel, self.action), &mut buf)
            .expect("encoding two integers into a Vec cannot fail");
        buf.extend_from_slice(&self.content);
        codec::encode_frame_in_place(buf, config).map(EncodedMessage)
    }

    /// Decodes a frame payload into a message. The content is not decoded
    /// until [`Message::content`] asks for it.
    pub fn decode(mut payload: Bytes) -> Result<Self, ContentError> {
        let (channel, action, used) = decode_envelope(&payload)?;
        // Advancing moves a pointer; slicing would clone (and share) the buffer.
        payload.advance(used);
        Ok(Self::from_raw(channel, action, payload))
    }
}

/// Reads a frame payload's channel and action; returns them and where the
/// content starts.
pub(crate) fn decode_envelope(payload: &[u8]) -> Result<(u16, u16, usize), ContentError> {
    match payload.get(..2) {
        // Fast path: both ids below 251 are one varint byte each, exactly as
        // bincode reads them.
        Some(&[channel, action]) if channel < 251 && action < 251 => {
            Ok((u16::from(channel), u16::from(action), 2))
        }
        _ => {
            let ((channel, action), used) = codec::decode_value_prefix::<(u16, u16)>(payload)?;
            Ok((channel, action, used))
        }
    }
}

/// A message already turned into a frame, header included: what sockets queue.
/// Clone it to send the same bytes to many peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedMessage(pub(crate) Bytes);

impl EncodedMessage {
    /// Builds the frame of a message of `channel`, `action` and `value`
    /// directly, without a [`Message`] in between: one buffer, the value
    /// encoded once, for a message that goes to many peers.
    pub fn of<C: Channel, A: Action, T: Serialize + ?Sized>(
        channel: C,
        action: A,
        value: &T,
        config: &CodecConfig,
    ) -> Result<EncodedMessage, crate::reason::SendError> {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; codec::HEADER_LEN]);
        codec::encode_value_into(&(channel.id(), action.id()), &mut buf)?;
        codec::encode_value_into(value, &mut buf)?;
        Ok(EncodedMessage(codec::encode_frame_in_place(buf, config)?))
    }

    /// Builds the frame of a message of `channel` and `action` whose
    /// content is `content` as it is: bytes the caller laid out itself (a
    /// format of its own, or values it encoded in place).
    pub fn raw<C: Channel, A: Action>(
        channel: C,
        action: A,
        content: &[u8],
        config: &CodecConfig,
    ) -> Result<EncodedMessage, crate::reason::SendError> {
        let mut buf = Vec::with_capacity(codec::HEADER_LEN + 6 + content.len());
        buf.extend_from_slice(&[0; codec::HEADER_LEN]);
        codec::encode_value_into(&(channel.id(), action.id()), &mut buf)?;
        buf.extend_from_slice(content);
        Ok(EncodedMessage(codec::encode_frame_in_place(buf, config)?))
    }

    /// The frame bytes as they go on the wire.
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// The frame bytes, taken.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Bytes on the wire.
    pub fn wire_len(&self) -> usize {
        self.0.len()
    }
}

/// Who a message came from: a connection's number on one server, unique for
/// the server's life. [`PeerId::SERVER`] (0) names the server itself on a
/// client.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct PeerId(pub u64);

impl PeerId {
    /// The server, as the sender of what a client receives.
    pub const SERVER: PeerId = PeerId(0);
}

impl std::fmt::Display for PeerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == PeerId::SERVER {
            write!(f, "server")
        } else {
            write!(f, "peer#{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::FrameDecoder;
    use bytes::BytesMut;

    crate::channels! { enum Chan { Chat = 16, World = 300 } }
    crate::actions! { enum Act { Say = 0, Shout = 7 } }

    #[test]
    fn message_round_trips_through_a_frame() {
        let msg = Message::new(Chan::World, Act::Shout, &("hi".to_string(), 42u64)).unwrap();
        let frame = msg.encode(&CodecConfig::default()).unwrap();
        let mut buf = BytesMut::from(&frame.as_bytes()[..]);
        let decoded = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
        let back = Message::decode(decoded.payload).unwrap();
        assert_eq!(back, msg);
        assert_eq!(back.channel::<Chan>(), Some(Chan::World));
        assert_eq!(back.action::<Act>(), Some(Act::Shout));
        assert_eq!(
            back.content::<(String, u64)>().unwrap(),
            ("hi".to_string(), 42)
        );
    }

    #[test]
    fn wrong_content_type_is_a_clear_error() {
        let msg = Message::new(Chan::Chat, Act::Say, &"a string").unwrap();
        let err = msg.content::<u64>().unwrap_err();
        assert!(err.to_string().contains("u64"), "{err}");
    }

    #[test]
    fn fast_and_bincode_envelope_decoding_agree() {
        for (channel, action) in [
            (0u16, 0u16),
            (16, 250),
            (250, 251),
            (251, 3),
            (300, 7),
            (65535, 65535),
        ] {
            let msg = Message::from_raw(channel, action, Bytes::from_static(b"\x05hello"));
            let frame = msg.encode(&CodecConfig::default()).unwrap();
            let payload = Bytes::copy_from_slice(&frame.as_bytes()[codec::HEADER_LEN..]);
            assert_eq!(Message::decode(payload).unwrap(), msg, "{channel}/{action}");
        }
    }

    #[test]
    fn envelope_bytes_are_bincode_varints() {
        let msg = Message::from_raw(300, 7, Bytes::from_static(b"xy"));
        let frame = msg.encode(&CodecConfig::default()).unwrap();
        // length 7, flags 0, channel 300 = 0xfb + u16 LE, action 7, content.
        assert_eq!(
            &frame.as_bytes()[..],
            b"\x00\x00\x00\x07\x00\xfb\x2c\x01\x07xy"
        );
    }
}
