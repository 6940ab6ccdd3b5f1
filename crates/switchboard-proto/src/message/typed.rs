//! Typed messages: an action enum whose variants carry their content, so
//! that the channel, the action and the content's type travel together and
//! a mismatch is a compile error, not a `BadContent` at run time.
//!
//! ```
//! switchboard_proto::channels! { pub enum Chan { Score = 16 } }
//! switchboard_proto::actions! {
//!     /// What travels on the score channel.
//!     #[derive(Debug, PartialEq)]
//!     pub enum Score in Chan::Score { Add(u32) = 1, Total(u32) = 2, Reset = 3 }
//! }
//! use switchboard_proto::message::{Message, TypedMessage};
//! let message = Score::Add(3).to_message().unwrap();
//! assert_eq!((message.channel_id(), message.action_id()), (16, 1));
//! assert_eq!(message.typed::<Score>().unwrap(), Score::Add(3));
//! ```
//!
//! Content of another type for an action does not compile:
//!
//! ```compile_fail
//! switchboard_proto::channels! { pub enum Chan { Score = 16 } }
//! switchboard_proto::actions! { pub enum Score in Chan::Score { Add(u32) = 1 } }
//! let _ = Score::Add("three");
//! ```

use crate::codec::ContentError;

use super::Message;

/// A value that is a whole message: its channel, its action and its
/// content, of the type the action declares. Implemented by the typed form
/// of [`actions!`](crate::actions) (one channel), by
/// [`messages!`](crate::messages) (several channels), and by [`Message`]
/// itself (untyped: relays and tools).
pub trait TypedMessage: Sized {
    /// Whether messages of this type travel on `channel` (a receiver asks
    /// before decoding).
    fn accepts_channel(channel: u16) -> bool;

    /// The channel id on the wire.
    fn channel_id(&self) -> u16;

    /// The action id on the wire.
    fn action_id(&self) -> u16;

    /// The action's name, for logs.
    fn action_name(&self) -> &'static str;

    /// Appends the encoded content to `out`.
    fn encode_content(&self, out: &mut Vec<u8>) -> Result<(), ContentError>;

    /// The value a received message carries, or why it carries none (a
    /// channel or an action this type does not know, content that is not
    /// the action's type).
    fn decode(message: &Message) -> Result<Self, DecodeError>;

    /// The message this value is, encoded.
    fn to_message(&self) -> Result<Message, ContentError> {
        let mut content = Vec::new();
        self.encode_content(&mut content)?;
        Ok(Message::from_raw(
            self.channel_id(),
            self.action_id(),
            content.into(),
        ))
    }
}

/// Untyped access, for relays and tools: a [`Message`] is sent as it is and
/// received whatever it holds.
impl TypedMessage for Message {
    fn accepts_channel(_: u16) -> bool {
        true
    }

    fn channel_id(&self) -> u16 {
        self.channel
    }

    fn action_id(&self) -> u16 {
        self.action
    }

    fn action_name(&self) -> &'static str {
        "message"
    }

    fn encode_content(&self, out: &mut Vec<u8>) -> Result<(), ContentError> {
        out.extend_from_slice(&self.content);
        Ok(())
    }

    fn decode(message: &Message) -> Result<Self, DecodeError> {
        Ok(message.clone())
    }

    fn to_message(&self) -> Result<Message, ContentError> {
        Ok(self.clone())
    }
}

/// Why a received message is not a value of the type asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The type does not travel on this channel.
    #[error("unknown channel {0}")]
    UnknownChannel(u16),
    /// The type has no such action on this channel.
    #[error("unknown action {action} on channel {channel}")]
    UnknownAction {
        /// The channel id.
        channel: u16,
        /// The action id.
        action: u16,
    },
    /// The content is not the action's type.
    #[error(transparent)]
    Content(#[from] ContentError),
}

/// Declares a typed action enum: `actions! { enum Act in Chan::Score { ... } }`
/// (the rule of [`actions!`](crate::actions) with `in`).
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_actions {
    ($(#[$meta:meta])* $vis:vis enum $name:ident in $chan:path {
        $($(#[$vmeta:meta])* $variant:ident $(($ty:ty))? = $value:expr),+ $(,)?
    }) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$vmeta])* $variant $(($ty))?),+
        }

        const _: () = {
            let ids: &[u16] = &[$($value),+];
            let mut i = 0;
            while i < ids.len() {
                let mut j = i + 1;
                while j < ids.len() {
                    assert!(ids[i] != ids[j], "two actions share an id");
                    j += 1;
                }
                i += 1;
            }
        };

        impl $crate::message::TypedMessage for $name {
            fn accepts_channel(channel: u16) -> bool {
                channel == $crate::message::Channel::id($chan)
            }

            fn channel_id(&self) -> u16 {
                $crate::message::Channel::id($chan)
            }

            fn action_id(&self) -> u16 {
                match self {
                    $(Self::$variant { .. } => $value,)+
                }
            }

            fn action_name(&self) -> &'static str {
                match self {
                    $(Self::$variant { .. } => stringify!($variant),)+
                }
            }

            fn encode_content(
                &self,
                out: &mut Vec<u8>,
            ) -> Result<(), $crate::codec::ContentError> {
                match self {
                    $(Self::$variant $(($crate::__typed_bind!(content, $ty)))? => {
                        $crate::__typed_encode!(out $(, content, $ty)?)
                    })+
                }
            }

            fn decode(
                message: &$crate::message::Message,
            ) -> Result<Self, $crate::message::DecodeError> {
                let channel = message.channel_id();
                if !<Self as $crate::message::TypedMessage>::accepts_channel(channel) {
                    return Err($crate::message::DecodeError::UnknownChannel(channel));
                }
                let bytes: &[u8] = message.content_bytes();
                match message.action_id() {
                    $(id if id == $value => {
                        $crate::__typed_unit!(bytes $(, $ty)?);
                        Ok(Self::$variant $(($crate::codec::decode_value::<$ty>(bytes)?))?)
                    })+
                    action => Err($crate::message::DecodeError::UnknownAction { channel, action }),
                }
            }
        }
    };
}

/// A variant's content as a binding (a pattern), named by the caller.
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_bind {
    ($binding:ident, $ty:ty) => {
        $binding
    };
}

/// Encodes a variant's content, if it has one.
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_encode {
    ($out:ident) => {
        Ok(())
    };
    ($out:ident, $content:ident, $ty:ty) => {
        $crate::codec::encode_value_onto::<$ty, _>($content, $out)
    };
}

/// A variant without content takes none: anything else is an error.
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_unit {
    ($bytes:ident) => {
        $crate::codec::decode_value::<()>($bytes)?
    };
    ($bytes:ident, $ty:ty) => {};
}

/// Declares a game's messages across several channels: one enum with a
/// variant per typed action enum, itself a [`TypedMessage`] (what a
/// `GameLogic` that serves several channels receives, or a client decodes
/// its updates as). Each action enum converts into it with `From`.
///
/// ```
/// switchboard_proto::channels! { pub enum Chan { Game = 16, Chat = 17 } }
/// switchboard_proto::actions! { pub enum Game in Chan::Game { Move((u8, u8)) = 1 } }
/// switchboard_proto::actions! { pub enum Chat in Chan::Chat { Say(String) = 1 } }
/// switchboard_proto::messages! { pub enum Incoming { Game(Game), Chat(Chat) } }
///
/// use switchboard_proto::message::TypedMessage;
/// let message = Chat::Say("hi".into()).to_message().unwrap();
/// assert!(matches!(message.typed::<Incoming>(), Ok(Incoming::Chat(Chat::Say(text))) if text == "hi"));
/// ```
#[macro_export]
macro_rules! messages {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident($ty:ty)),+ $(,)?
    }) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$vmeta])* $variant($ty)),+
        }

        $(impl From<$ty> for $name {
            fn from(value: $ty) -> Self {
                Self::$variant(value)
            }
        })+

        impl $crate::message::TypedMessage for $name {
            fn accepts_channel(channel: u16) -> bool {
                $(<$ty as $crate::message::TypedMessage>::accepts_channel(channel))||+
            }

            fn channel_id(&self) -> u16 {
                match self {
                    $(Self::$variant(inner) => $crate::message::TypedMessage::channel_id(inner),)+
                }
            }

            fn action_id(&self) -> u16 {
                match self {
                    $(Self::$variant(inner) => $crate::message::TypedMessage::action_id(inner),)+
                }
            }

            fn action_name(&self) -> &'static str {
                match self {
                    $(Self::$variant(inner) => $crate::message::TypedMessage::action_name(inner),)+
                }
            }

            fn encode_content(
                &self,
                out: &mut Vec<u8>,
            ) -> Result<(), $crate::codec::ContentError> {
                match self {
                    $(Self::$variant(inner) => {
                        $crate::message::TypedMessage::encode_content(inner, out)
                    })+
                }
            }

            fn decode(
                message: &$crate::message::Message,
            ) -> Result<Self, $crate::message::DecodeError> {
                let channel = message.channel_id();
                $(if <$ty as $crate::message::TypedMessage>::accepts_channel(channel) {
                    return <$ty as $crate::message::TypedMessage>::decode(message)
                        .map(Self::$variant);
                })+
                Err($crate::message::DecodeError::UnknownChannel(channel))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::CodecConfig;
    use crate::message::{Action, Channel};

    crate::channels! { enum Chan { Score = 16, Chat = 17 } }
    crate::actions! {
        #[derive(Debug, PartialEq)]
        enum Score in Chan::Score { Add(u32) = 1, Named((String, u8)) = 300, Reset = 2 }
    }
    crate::actions! {
        #[derive(Debug, PartialEq)]
        enum Talk in Chan::Chat { Say(String) = 1 }
    }
    crate::messages! {
        #[derive(Debug, PartialEq)]
        enum Any { Score(Score), Talk(Talk) }
    }
    crate::actions! { enum Raw { Add = 1, Reset = 2 } }

    #[test]
    fn typed_message_is_the_same_bytes_as_the_untyped_one() {
        let typed = Score::Add(7).to_message().unwrap();
        let untyped = Message::new(Chan::Score, Raw::Add, &7u32).unwrap();
        assert_eq!(typed, untyped);
        let config = CodecConfig::default();
        assert_eq!(
            typed.encode(&config).unwrap(),
            untyped.encode(&config).unwrap()
        );
        let reset = Score::Reset.to_message().unwrap();
        assert_eq!(reset, Message::new(Chan::Score, Raw::Reset, &()).unwrap());
        assert!(reset.content_bytes().is_empty());
    }

    #[test]
    fn every_variant_round_trips() {
        for value in [Score::Add(3), Score::Named(("ann".into(), 2)), Score::Reset] {
            let message = value.to_message().unwrap();
            assert_eq!(message.typed::<Score>().unwrap(), value);
        }
        assert_eq!(Score::Named(("a".into(), 1)).action_id(), 300);
        assert_eq!(Score::Reset.action_name(), "Reset");
        assert_eq!(Chan::Score.id(), Score::Add(1).channel_id());
        assert_eq!(Raw::Reset.id(), Score::Reset.action_id());
    }

    #[test]
    fn undecodable_messages_say_why() {
        let other_channel = Talk::Say("x".into()).to_message().unwrap();
        assert_eq!(
            other_channel.typed::<Score>().unwrap_err(),
            DecodeError::UnknownChannel(17)
        );
        let unknown = Message::new(Chan::Score, Raw::Add, &1u32).unwrap();
        let unknown = Message::from_raw(16, 9, unknown.content_bytes().clone());
        assert_eq!(
            unknown.typed::<Score>().unwrap_err(),
            DecodeError::UnknownAction {
                channel: 16,
                action: 9
            }
        );
        let wrong = Message::new(Chan::Score, Raw::Add, &"text").unwrap();
        let err = wrong.typed::<Score>().unwrap_err();
        assert!(matches!(err, DecodeError::Content(_)), "{err}");
        let extra = Message::new(Chan::Score, Raw::Reset, &5u8).unwrap();
        assert!(matches!(
            extra.typed::<Score>(),
            Err(DecodeError::Content(ContentError::LeftOver { .. }))
        ));
    }

    #[test]
    fn a_message_set_decodes_each_channel_into_its_enum() {
        let score = Score::Add(4).to_message().unwrap();
        let talk = Talk::Say("hi".into()).to_message().unwrap();
        assert_eq!(score.typed::<Any>().unwrap(), Any::Score(Score::Add(4)));
        assert_eq!(
            talk.typed::<Any>().unwrap(),
            Any::Talk(Talk::Say("hi".into()))
        );
        assert_eq!(
            Any::from(Score::Reset).to_message().unwrap().channel_id(),
            16
        );
        let elsewhere = Message::from_raw(40, 1, Default::default());
        assert_eq!(
            elsewhere.typed::<Any>().unwrap_err(),
            DecodeError::UnknownChannel(40)
        );
        assert!(Any::accepts_channel(17) && !Any::accepts_channel(18));
    }

    #[test]
    fn an_untyped_message_passes_through_unchanged() {
        let message = Message::from_raw(300, 2, bytes::Bytes::from_static(b"\x01\x02"));
        assert_eq!(message.typed::<Message>().unwrap(), message);
        assert_eq!(message.to_message().unwrap(), message);
    }
}
