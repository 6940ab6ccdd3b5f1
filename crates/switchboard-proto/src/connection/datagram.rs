//! Messages as unreliable, sequenced datagrams (QUIC's): the layout, and the
//! receiver's rule that only the newest of a channel is worth having.
//!
//! A channel a game declares sequenced ([`SocketConfig::sequenced_channels`]
//! on the sender) travels as datagrams where the transport has them: a lost
//! datagram delays nothing behind it, and the receiver drops any datagram
//! older than the newest it has taken on that channel, as renet's and
//! naia's sequenced channels do. Every other channel, and a sequenced
//! message too big for one datagram, travels on the reliable stream as a
//! frame.
//!
//! One datagram carries one message, uncompressed:
//!
//! ```text
//! sequence: u32, big-endian   (one counter per connection and direction,
//!                              starting at 0, +1 per datagram, wrapping)
//! channel:  varint (bincode's: < 251 is one byte)
//! action:   varint
//! content:  the rest: the message's content, as in a frame
//! ```
//!
//! Everything after the sequence is exactly a frame's payload (the envelope
//! of `codec`), so a datagram is decoded with the same code as a frame.
//!
//! [`SocketConfig::sequenced_channels`]: super::SocketConfig::sequenced_channels

use bytes::{Buf, Bytes};

use crate::codec::{self, ContentError};
use crate::message::{Message, FIRST_APP_CHANNEL, RELAY_MOVES_CHANNEL, RELAY_VIEW_CHANNEL};

/// Bytes before the envelope: the sequence.
pub const SEQUENCE_LEN: usize = 4;

/// Channels a receiver keeps a newest sequence for, per connection. A
/// datagram on one more channel is refused ([`DatagramError::TooManyChannels`]):
/// a peer cannot make the receiver remember without bound.
pub const MAX_SEQUENCED_CHANNELS: usize = 32;

/// The framework's channels that travel as datagrams: the relay's
/// (`RELAY_MOVES_CHANNEL` sequenced, `RELAY_VIEW_CHANNEL` as they come).
/// Every other framework channel travels only on the stream.
pub const FRAMEWORK_DATAGRAM_CHANNELS: [u16; 2] = [RELAY_MOVES_CHANNEL, RELAY_VIEW_CHANNEL];

/// Whether a message of `channel` travels as a datagram where the
/// transport has them: the sender's `sequenced` channels, and the relay's.
pub fn goes_as_datagram(channel: u16, sequenced: &ChannelSet) -> bool {
    FRAMEWORK_DATAGRAM_CHANNELS.contains(&channel) || sequenced.contains(channel)
}

/// The channels a sender sends as sequenced datagrams: a small sorted set
/// (a game declares a few). Empty by default: every message is reliable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelSet(Vec<u16>);

impl ChannelSet {
    /// The set of `channels` (application channels, 16 and up; the
    /// framework's own are always reliable and ignored here).
    pub fn of(channels: impl IntoIterator<Item = u16>) -> Self {
        let mut ids: Vec<u16> = channels
            .into_iter()
            .filter(|&c| c >= FIRST_APP_CHANNEL)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.truncate(MAX_SEQUENCED_CHANNELS);
        Self(ids)
    }

    /// Whether `channel` is in the set.
    pub fn contains(&self, channel: u16) -> bool {
        // A few entries: a scan beats a search, and the empty set (every
        // connection that declares nothing) costs one comparison.
        self.0.contains(&channel)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The channels, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.0.iter().copied()
    }
}

/// Why a datagram was refused. None ends the connection: a datagram is
/// dropped and counted, as a lost one would be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DatagramError {
    /// Shorter than a sequence and an envelope.
    #[error("a datagram of {0} bytes is too short")]
    TooShort(usize),
    /// Its envelope does not decode.
    #[error("a datagram's envelope does not decode: {0}")]
    Envelope(ContentError),
    /// On a framework channel (0..=15) other than the relay's two
    /// ([`FRAMEWORK_DATAGRAM_CHANNELS`]): ping, pong, close and the
    /// framework's other messages travel only on the stream.
    #[error("a datagram on framework channel {0}")]
    FrameworkChannel(u16),
    /// On one more channel than the receiver keeps sequences for.
    #[error("datagrams on more than {MAX_SEQUENCED_CHANNELS} channels")]
    TooManyChannels,
}

/// The longest head [`put_head`] writes: the sequence and two varints of
/// up to three bytes.
pub const MAX_HEAD_LEN: usize = SEQUENCE_LEN + 6;

/// Writes a datagram's head (the sequence and the envelope) into `buf`; the
/// caller appends the content.
pub fn put_head(buf: &mut Vec<u8>, sequence: u32, channel: u16, action: u16) {
    buf.extend_from_slice(&sequence.to_be_bytes());
    codec::put_varint_u16(buf, channel);
    codec::put_varint_u16(buf, action);
}

/// One message as a datagram.
pub fn encode(sequence: u32, message: &Message) -> Bytes {
    let content = message.content_bytes();
    let mut buf = Vec::with_capacity(MAX_HEAD_LEN + content.len());
    put_head(
        &mut buf,
        sequence,
        message.channel_id(),
        message.action_id(),
    );
    buf.extend_from_slice(content);
    Bytes::from(buf)
}

/// Reads a datagram: its sequence and its message (the content shares
/// `datagram`'s bytes).
pub fn decode(mut datagram: Bytes) -> Result<(u32, Message), DatagramError> {
    if datagram.len() < SEQUENCE_LEN + 2 {
        return Err(DatagramError::TooShort(datagram.len()));
    }
    let sequence = datagram.get_u32();
    let message = Message::decode(datagram).map_err(DatagramError::Envelope)?;
    if message.is_framework() && !FRAMEWORK_DATAGRAM_CHANNELS.contains(&message.channel_id()) {
        return Err(DatagramError::FrameworkChannel(message.channel_id()));
    }
    Ok((sequence, message))
}

/// Whether sequence `a` is newer than `b`, on a wrapping counter: `a` is
/// ahead of `b` by less than half the counter's range.
pub fn is_newer(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

/// The receiver's rule: per channel, only a datagram newer than the newest
/// taken is delivered (on `RELAY_VIEW_CHANNEL`, every one: its receiver
/// keeps each sender's newest itself).
#[derive(Debug, Default)]
pub struct Newest {
    /// `(channel, newest sequence taken)`, at most
    /// [`MAX_SEQUENCED_CHANNELS`].
    channels: Vec<(u16, u32)>,
}

impl Newest {
    /// Whether a datagram of `sequence` on `channel` is to be delivered
    /// (`Ok(true)`; it is now the channel's newest), is stale (`Ok(false)`:
    /// an older or repeated one, dropped), or is refused.
    pub fn take(&mut self, channel: u16, sequence: u32) -> Result<bool, DatagramError> {
        if channel == RELAY_VIEW_CHANNEL {
            // Many senders' transforms: the relay client orders them per
            // sender.
            return Ok(true);
        }
        if let Some((_, newest)) = self.channels.iter_mut().find(|(c, _)| *c == channel) {
            if !is_newer(sequence, *newest) {
                return Ok(false);
            }
            *newest = sequence;
            return Ok(true);
        }
        if self.channels.len() >= MAX_SEQUENCED_CHANNELS {
            return Err(DatagramError::TooManyChannels);
        }
        self.channels.push((channel, sequence));
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_is_the_sequence_then_a_frame_s_payload() {
        let message = Message::from_raw(20, 3, Bytes::from_static(b"xyz"));
        let bytes = encode(0x0102_0304, &message);
        // The vector in docs/PROTOCOL.md.
        assert_eq!(&bytes[..], &[1, 2, 3, 4, 20, 3, b'x', b'y', b'z']);
        let (sequence, back) = decode(bytes).unwrap();
        assert_eq!((sequence, back), (0x0102_0304, message));
    }

    #[test]
    fn channels_and_actions_past_250_take_bincode_s_three_byte_varint() {
        let message = Message::from_raw(300, 7, Bytes::new());
        let bytes = encode(9, &message);
        assert_eq!(&bytes[..], &[0, 0, 0, 9, 251, 44, 1, 7]);
        assert_eq!(decode(bytes).unwrap().1, message);
    }

    #[test]
    fn what_a_peer_may_not_send_as_a_datagram_is_refused() {
        assert_eq!(
            decode(Bytes::from_static(&[0, 0, 0])),
            Err(DatagramError::TooShort(3))
        );
        // Ping on the system channel.
        assert_eq!(
            decode(Bytes::from_static(&[0, 0, 0, 1, 0, 1])),
            Err(DatagramError::FrameworkChannel(0))
        );
        // A varint's marker with nothing after it.
        assert!(matches!(
            decode(Bytes::from_static(&[0, 0, 0, 1, 251, 1])),
            Err(DatagramError::Envelope(_))
        ));
    }

    #[test]
    fn only_what_is_newer_than_the_newest_taken_is_delivered() {
        let mut newest = Newest::default();
        assert_eq!(newest.take(20, 5), Ok(true));
        assert_eq!(newest.take(20, 4), Ok(false), "older");
        assert_eq!(newest.take(20, 5), Ok(false), "repeated");
        assert_eq!(newest.take(21, 1), Ok(true), "each channel its own");
        assert_eq!(newest.take(20, 7), Ok(true), "one lost between");
        // Across the counter's wrap.
        assert_eq!(newest.take(22, u32::MAX), Ok(true));
        assert_eq!(newest.take(22, 0), Ok(true));
        assert_eq!(newest.take(22, u32::MAX - 1), Ok(false));
    }

    #[test]
    fn the_relay_s_channels_go_as_datagrams_and_its_view_as_it_comes() {
        let none = ChannelSet::default();
        assert!(goes_as_datagram(RELAY_MOVES_CHANNEL, &none));
        assert!(goes_as_datagram(RELAY_VIEW_CHANNEL, &none));
        assert!(!goes_as_datagram(3, &none) && !goes_as_datagram(20, &none));
        assert!(goes_as_datagram(20, &ChannelSet::of([20])));
        let moves = Message::from_raw(RELAY_MOVES_CHANNEL, 2, Bytes::new());
        assert_eq!(decode(encode(1, &moves)).unwrap().1, moves);
        let mut newest = Newest::default();
        assert_eq!(newest.take(RELAY_MOVES_CHANNEL, 5), Ok(true));
        assert_eq!(newest.take(RELAY_MOVES_CHANNEL, 4), Ok(false));
        assert_eq!(newest.take(RELAY_VIEW_CHANNEL, 5), Ok(true));
        assert_eq!(newest.take(RELAY_VIEW_CHANNEL, 4), Ok(true), "as it comes");
    }

    #[test]
    fn a_peer_cannot_make_the_receiver_remember_unbounded_channels() {
        let mut newest = Newest::default();
        for channel in 0..MAX_SEQUENCED_CHANNELS as u16 {
            assert_eq!(newest.take(100 + channel, 0), Ok(true));
        }
        assert_eq!(newest.take(99, 0), Err(DatagramError::TooManyChannels));
        assert_eq!(newest.take(100, 1), Ok(true), "known channels still work");
    }

    #[test]
    fn a_channel_set_holds_application_channels_only() {
        let set = ChannelSet::of([20, 3, 20, 17]);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![17, 20]);
        assert!(set.contains(20) && !set.contains(3));
        assert!(ChannelSet::default().is_empty());
    }
}
