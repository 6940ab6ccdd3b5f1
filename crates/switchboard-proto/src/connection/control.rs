//! The framework's own frames: the hello that opens a connection, and the
//! ping, pong and close messages on the system channel.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecConfig};
use crate::message::{Message, SYSTEM_CHANNEL};
use crate::reason::{CloseCode, DisconnectReason};
use crate::PROTOCOL_VERSION;

/// The four bytes every hello starts with.
pub const MAGIC: [u8; 4] = *b"SWBD";

/// System action: ping, content `u64` (opaque to the receiver, echoed back).
pub const ACTION_PING: u16 = 1;
/// System action: pong, content the `u64` of the ping it answers.
pub const ACTION_PONG: u16 = 2;
/// System action: close, content [`CloseFrame`]; the last frame a side sends.
pub const ACTION_CLOSE: u16 = 3;

/// The content of a close message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseFrame {
    /// Why, as a number.
    pub code: CloseCode,
    /// Why, for people.
    pub reason: String,
}

/// The hello frame: header, magic and our protocol version (u16 big-endian).
pub fn hello_frame(version: u16) -> Bytes {
    let mut payload = Vec::with_capacity(6);
    payload.extend_from_slice(&MAGIC);
    payload.extend_from_slice(&version.to_be_bytes());
    codec::encode_frame(&payload, &CodecConfig::default()).expect("a 6-byte frame always fits")
}

/// What a first frame says about the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerHello {
    /// A Switchboard peer speaking our version.
    Compatible,
    /// A Switchboard peer speaking another version.
    OtherVersion(u16),
    /// Not a Switchboard hello at all.
    NotSwitchboard,
}

/// Reads a peer's hello payload.
pub fn parse_hello(payload: &[u8]) -> PeerHello {
    match payload {
        [m0, m1, m2, m3, v0, v1] if [*m0, *m1, *m2, *m3] == MAGIC => {
            let version = u16::from_be_bytes([*v0, *v1]);
            if version == PROTOCOL_VERSION {
                PeerHello::Compatible
            } else {
                PeerHello::OtherVersion(version)
            }
        }
        _ => PeerHello::NotSwitchboard,
    }
}

/// The largest hello frame accepted, so that a stranger cannot make a pending
/// handshake buffer a full-size frame.
pub const MAX_HELLO_FRAME_LEN: usize = 64;

/// The codec limits while the peer's hello is awaited: the hello is a few
/// bytes and never compressed, so nothing bigger is read or inflated before
/// it.
pub fn hello_codec(codec: &CodecConfig) -> CodecConfig {
    CodecConfig {
        max_frame_len: MAX_HELLO_FRAME_LEN,
        max_decompressed_len: MAX_HELLO_FRAME_LEN,
        ..codec.clone()
    }
}

/// The handshake's rule for the peer's first frame, as the decoder (with
/// [`hello_codec`]'s limits) gave it: an uncompressed hello of our version
/// opens the connection; another version, a compressed frame, a frame too
/// big or not a hello at all are refused with their reason. (A transport
/// error is the driver's: it is not a frame.)
pub fn check_first_frame(
    first: Result<&codec::Frame, &codec::FrameError>,
) -> Result<(), DisconnectReason> {
    let frame = match first {
        Ok(frame) if !frame.compressed => frame,
        Ok(_) | Err(_) => return Err(DisconnectReason::NotSwitchboard),
    };
    match parse_hello(&frame.payload) {
        PeerHello::Compatible => Ok(()),
        PeerHello::OtherVersion(theirs) => Err(DisconnectReason::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs,
        }),
        PeerHello::NotSwitchboard => Err(DisconnectReason::NotSwitchboard),
    }
}

/// The close frame a peer sent right behind its hello, if it is among
/// `buffered` (what was read past the hello): a server turning a client
/// away at accept writes the two at once, and the client should hear why
/// before it counts as connected. Only looks: `buffered` is not consumed.
pub fn close_behind_hello(buffered: &[u8], config: &CodecConfig) -> Option<CloseFrame> {
    if buffered.is_empty() {
        return None;
    }
    let mut copy = bytes::BytesMut::from(buffered);
    let frame = codec::FrameDecoder::new(config.clone())
        .decode(&mut copy)
        .ok()??;
    if frame.compressed {
        return None;
    }
    let (channel, action, used) = crate::message::decode_envelope(&frame.payload).ok()?;
    if channel != SYSTEM_CHANNEL || action != ACTION_CLOSE {
        return None;
    }
    codec::decode_value::<CloseFrame>(&frame.payload[used..]).ok()
}

fn system_frame<T: Serialize>(action: u16, content: &T, config: &CodecConfig) -> Bytes {
    let content = codec::encode_value(content).expect("system content always encodes");
    Message::from_raw(SYSTEM_CHANNEL, action, Bytes::from(content))
        .encode(config)
        .expect("system frames are small")
        .into_bytes()
}

/// A ping frame.
pub fn ping_frame(stamp: u64, config: &CodecConfig) -> Bytes {
    system_frame(ACTION_PING, &stamp, config)
}

/// A pong frame answering the ping stamped `stamp`.
pub fn pong_frame(stamp: u64, config: &CodecConfig) -> Bytes {
    system_frame(ACTION_PONG, &stamp, config)
}

/// A close frame. The reason is cut to 1 KiB so it always fits.
pub fn close_frame(code: CloseCode, reason: &str, config: &CodecConfig) -> Bytes {
    let mut end = reason.len().min(1024);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let close = CloseFrame {
        code,
        reason: reason[..end].to_string(),
    };
    system_frame(ACTION_CLOSE, &close, config)
}
