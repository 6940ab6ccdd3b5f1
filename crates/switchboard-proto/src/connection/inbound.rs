//! The rules for what a peer sends once the connection is open, frame by
//! frame, over a buffer the driver reads into: whole uncompressed frames are
//! handed out as ranges of that buffer (no copy), a compressed frame is
//! inflated within the inflate budget, and the system channel's frames
//! (ping, pong, close) are answered here. [`ConnectionCore`] and the tokio
//! driver both read through [`take_frames`]; only what they do with a
//! message differs (a [`Sink`]).
//!
//! [`ConnectionCore`]: super::ConnectionCore

use std::ops::Range;
use std::sync::Mutex;
use std::time::Instant;

use bytes::BytesMut;

use super::budget::InflateBudget;
use super::control::{self, CloseFrame};
use crate::codec::{self, FrameDecoder, FrameError};
use crate::message::{self, Message, SYSTEM_CHANNEL};
use crate::reason::{CloseCode, SocketError};

/// Where the frames of one read go, in the order they came.
pub trait Sink {
    /// Called once before the first whole uncompressed frame of a read,
    /// with the bytes buffered: room for the messages may be made here.
    fn reserve(&mut self, _buffered: usize) {}
    /// An application message in an uncompressed frame: its content is
    /// `buffer[content]` of the buffer given to [`take_frames`].
    fn message_at(&mut self, channel: u16, action: u16, content: Range<usize>);
    /// An application message inflated from a compressed frame.
    fn message(&mut self, message: Message);
    /// Something the peer did wrong that does not end the connection.
    fn error(&mut self, error: SocketError);
    /// The peer pinged with `stamp`: a pong of it is due. Only the latest
    /// ping needs its pong (a flood of pings costs one pong per write).
    fn ping(&mut self, stamp: u64);
    /// The pong of our ping `stamp` came back.
    fn pong(&mut self, stamp: u64);
    /// Items given so far in this read (messages and errors).
    fn len(&self) -> usize;
    /// Whether nothing was given yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a read ends the connection.
#[derive(Debug)]
pub enum End {
    /// The peer closed with this frame.
    PeerClosed(CloseFrame),
    /// The peer broke a rule (or the transport failed): the connection
    /// closes with a protocol error, after the owner hears `Error` of it.
    Failed(SocketError),
}

/// What [`take_frames`] took.
#[derive(Debug, Default)]
pub struct Taken {
    /// Bytes at the buffer's start that hold the whole uncompressed frames
    /// given as ranges: the driver splits them off (to share them with the
    /// messages) or advances past them. A compressed frame is consumed from
    /// the buffer itself, and only ever comes first.
    pub taken: usize,
    /// Frames taken, system frames included.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `Some` when a frame ended the connection: nothing after it is read.
    pub end: Option<End>,
}

/// The limits of one read's batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Items (messages and errors) at most.
    pub items: usize,
    /// Bytes after which the batch ends (at most one frame past it).
    pub bytes: u64,
}

/// Takes the whole frames at the start of `buffer` into `sink`, up to
/// `limits`. Uncompressed frames stay where they are, as ranges; a
/// compressed frame is inflated on its own when it comes first, and
/// otherwise ends the batch (the next call takes it). It inflates no more
/// than what is left of `budget` at `now()` (asked only then: a read of
/// whole uncompressed frames reads no clock).
///
/// The rules, the same for every driver: a system frame never arrives
/// compressed ([`SocketError::CompressedSystemFrame`]); an envelope that
/// does not decode, a bad frame, or a frame past the budget ends the
/// connection ([`End::Failed`]); an unknown system action is reported and
/// ignored; a close frame ends it ([`End::PeerClosed`]).
pub fn take_frames(
    buffer: &mut BytesMut,
    decoder: &mut FrameDecoder,
    budget: &Mutex<InflateBudget>,
    now: impl Fn() -> Instant,
    limits: BatchLimits,
    sink: &mut impl Sink,
) -> Taken {
    // The counts stay in locals on the hot path (one frame in a few
    // dozen instructions): `Taken` is built once, at the end.
    let (mut taken, mut frames, mut bytes) = (0usize, 0u64, 0u64);
    let end = 'frames: {
        while sink.len() < limits.items && bytes < limits.bytes {
            if let Some(len) = decoder.peek_raw(&buffer[taken..]) {
                if frames == 0 {
                    sink.reserve(buffer.len());
                }
                let payload = taken + codec::HEADER_LEN..taken + len;
                taken += len;
                frames += 1;
                bytes += len as u64;
                if let Some(end) = on_raw_frame(&buffer[..], payload, sink) {
                    break 'frames Some(end);
                }
                continue;
            }
            if taken > 0 {
                break;
            }
            // The first frame is compressed, incomplete or bad: the decoder
            // takes it, asks for more bytes, or says what is wrong.
            let max = decoder.config().max_decompressed_len;
            let room = lock(budget).room(now());
            decoder.config_mut().max_decompressed_len = room.min(max);
            let decoded = decoder.decode(buffer);
            decoder.config_mut().max_decompressed_len = max;
            let ended = match decoded {
                Ok(Some(frame)) => {
                    if frame.compressed {
                        lock(budget).spend(frame.payload.len());
                    }
                    frames += 1;
                    bytes += (frame.payload.len() + codec::HEADER_LEN) as u64;
                    on_frame(frame, sink)
                }
                Ok(None) => break,
                Err(FrameError::DecompressedTooLarge { .. }) if room < max => {
                    let per_second = lock(budget).per_second();
                    Some(End::Failed(SocketError::InflateBudget { per_second }))
                }
                Err(err) => Some(End::Failed(err.into())),
            };
            if ended.is_some() {
                break 'frames ended;
            }
        }
        None
    };
    Taken {
        taken,
        frames,
        bytes,
        end,
    }
}

fn lock(budget: &Mutex<InflateBudget>) -> std::sync::MutexGuard<'_, InflateBudget> {
    // A budget is a few numbers: one left by a panicking holder is still
    // one to go on with.
    budget
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A decoded (possibly inflated) frame.
fn on_frame(frame: codec::Frame, sink: &mut impl Sink) -> Option<End> {
    let compressed = frame.compressed;
    let message = match Message::decode(frame.payload) {
        Ok(message) => message,
        Err(err) => return Some(End::Failed(SocketError::Envelope(err))),
    };
    if !message.is_system() {
        sink.message(message);
        return None;
    }
    if compressed {
        // System frames are a few bytes and never compressed: one that is
        // only makes the receiver inflate for nothing.
        return Some(End::Failed(SocketError::CompressedSystemFrame));
    }
    on_system(message, sink)
}

/// An uncompressed frame whose payload is `buffer[payload]`: an application
/// message becomes a range; a system message is copied out and answered.
fn on_raw_frame(buffer: &[u8], payload: Range<usize>, sink: &mut impl Sink) -> Option<End> {
    let (channel, action, used) = match message::decode_envelope(&buffer[payload.clone()]) {
        Ok(envelope) => envelope,
        Err(err) => return Some(End::Failed(SocketError::Envelope(err))),
    };
    let content = payload.start + used..payload.end;
    if channel != SYSTEM_CHANNEL {
        sink.message_at(channel, action, content);
        return None;
    }
    let content = bytes::Bytes::copy_from_slice(&buffer[content]);
    on_system(Message::from_raw(channel, action, content), sink)
}

/// A message on the system channel.
fn on_system(message: Message, sink: &mut impl Sink) -> Option<End> {
    match message.action_id() {
        control::ACTION_PING => {
            if let Ok(stamp) = message.content::<u64>() {
                sink.ping(stamp);
            }
        }
        control::ACTION_PONG => {
            if let Ok(stamp) = message.content::<u64>() {
                sink.pong(stamp);
            }
        }
        control::ACTION_CLOSE => {
            let close = message.content::<CloseFrame>().unwrap_or(CloseFrame {
                code: CloseCode::PROTOCOL_ERROR,
                reason: "undecodable close frame".into(),
            });
            return Some(End::PeerClosed(close));
        }
        other => sink.error(SocketError::UnknownSystemAction(other)),
    }
    None
}
