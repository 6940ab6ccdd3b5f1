//! A connection's outbound queue: whole frames waiting for its writer.

use std::collections::VecDeque;
use std::sync::Arc;

use std::cell::RefCell;

use bytes::{Buf, Bytes, BytesMut};

use crate::codec::{self, CodecConfig, ContentError};
use switchboard_proto::reason::{CloseCode, SendError};

thread_local! {
    /// The buffer a thread builds its outgoing frames in, reused: a small
    /// message costs no allocation on its way to the queue.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A scratch buffer that grew past this (a big message) is let go after use.
const SCRATCH_KEEP: usize = 64 * 1024;

/// Builds the frame of a message on `channel` and `action` whose content
/// `content` writes, in this thread's scratch buffer, and hands it to
/// `then`: lent when it goes raw, shared when it was compressed.
pub(crate) fn with_frame<R>(
    config: &CodecConfig,
    channel: u16,
    action: u16,
    content: impl FnOnce(&mut Vec<u8>) -> Result<(), ContentError>,
    then: impl FnOnce(Frame<'_>) -> Result<R, SendError>,
) -> Result<R, SendError> {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            let result = build(&mut buf, config, channel, action, content, then);
            if buf.capacity() > SCRATCH_KEEP {
                *buf = Vec::new();
            }
            result
        }
        // A nested call (a `Serialize` that sends, say): a buffer of its own.
        Err(_) => build(&mut Vec::new(), config, channel, action, content, then),
    })
}

fn build<R>(
    buf: &mut Vec<u8>,
    config: &CodecConfig,
    channel: u16,
    action: u16,
    content: impl FnOnce(&mut Vec<u8>) -> Result<(), ContentError>,
    then: impl FnOnce(Frame<'_>) -> Result<R, SendError>,
) -> Result<R, SendError> {
    buf.clear();
    buf.extend_from_slice(&[0; codec::HEADER_LEN]);
    codec::put_varint_u16(buf, channel);
    codec::put_varint_u16(buf, action);
    content(buf)?;
    match codec::finish_frame(buf, config)? {
        Some(compressed) => then(Frame::SocketInner(&compressed)),
        None => then(Frame::Borrowed(buf)),
    }
}

/// One frame to queue: bytes shared with other queues (a message encoded
/// once for many peers), or bytes the sender built in a scratch buffer of
/// its own and lends for the call.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Frame<'a> {
    /// Encoded once; queues share it.
    SocketInner(&'a Bytes),
    /// Lent for the call; copied if it must wait.
    Borrowed(&'a [u8]),
}

impl Frame<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Frame::SocketInner(bytes) => bytes,
            Frame::Borrowed(bytes) => bytes,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// The frame from byte `from` on, as bytes that may wait in a queue.
    pub(crate) fn rest_from(&self, from: usize) -> Bytes {
        match self {
            Frame::SocketInner(bytes) => bytes.slice(from..),
            Frame::Borrowed(bytes) => Bytes::copy_from_slice(&bytes[from..]),
        }
    }

    fn to_shared(self) -> Bytes {
        self.rest_from(0)
    }
}

/// Whole frames, end to end, and how many.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) bytes: Bytes,
    pub(crate) frames: usize,
}

/// Frames up to this size are copied into the queue's tail buffer; larger
/// ones are queued as they are (shared, not copied).
const SMALL_FRAME: usize = 512;
/// The tail buffer's smallest allocation.
const TAIL_START: usize = 512;
/// The largest allocation the tail starts with (it may grow past it).
const TAIL_HINT_MAX: usize = 64 * 1024;

/// The outbound queue: frames waiting for the writer, and a pending close.
///
/// A plain buffer under a mutex rather than a channel: small frames are
/// copied end to end into `tail` (a copy of a few dozen bytes costs less than
/// sharing the frame: the reference count of a frame sent to many peers, or
/// many times, would bounce between the sender's and the writer's cores),
/// large ones are queued whole; the writer takes everything in one lock, so a
/// burst of small frames costs one lock, one wake-up and one write. `frames`
/// and `bytes` count what is queued *and* what the writer has taken but not
/// yet written, so the limits bound all the memory a peer's backlog holds.
#[derive(Debug, Default)]
pub(crate) struct OutQueue {
    /// Segments before the tail.
    pub(crate) queue: VecDeque<Segment>,
    /// Small frames, after everything in `queue`.
    pub(crate) tail: BytesMut,
    pub(crate) tail_frames: usize,
    /// How big the last tail was: the next one starts at that size, so a
    /// steady stream of bursts allocates once per burst, not once per
    /// doubling.
    pub(crate) tail_hint: usize,
    pub(crate) frames: usize,
    pub(crate) bytes: usize,
    /// Set by a graceful close: written after every frame queued before it.
    pub(crate) close: Option<(CloseCode, String)>,
    /// Set by an urgent close (protocol error, idle peer, kill): written
    /// next, whatever is still queued.
    pub(crate) close_now: Option<(CloseCode, String)>,
    /// The stamp of the latest ping, to answer next (only the latest needs
    /// its pong, so pings cannot pile up).
    pub(crate) pong: Option<u64>,
    /// The connection's timer asks for a keep-alive ping.
    pub(crate) ping: bool,
    /// The writer task has written everything and waits: a sender that
    /// finds the queue empty may write its frame to the socket itself.
    pub(crate) writer_idle: bool,
    /// When a sender last wrote directly (the writer's keep-alive counts it
    /// as sending).
    pub(crate) last_direct: Option<std::time::Instant>,
    /// The stream, for direct writes, while the connection runs (TCP or
    /// TLS over TCP; never WebSocket). Taken away when the connection ends,
    /// so that handles do not keep the socket open.
    pub(crate) direct: Option<Direct>,
}

/// A stream a sender may write to itself, without the writer task.
#[derive(Clone, Debug)]
pub(crate) enum Direct {
    Tcp(Arc<tokio::net::TcpStream>),
    /// Encrypted on the sender's thread.
    Tls(crate::tls::TlsStream),
}

impl Direct {
    /// Writes `slices` without waiting: how many of their bytes went, and
    /// whether ciphertext is left for the writer to flush (TLS takes all of
    /// them or none).
    pub(crate) fn try_write(&self, slices: &[std::io::IoSlice<'_>]) -> (usize, bool) {
        match self {
            Direct::Tcp(stream) => {
                let written = match slices {
                    [one] => stream.try_write(one),
                    _ => stream.try_write_vectored(slices),
                };
                (written.unwrap_or(0), false)
            }
            Direct::Tls(session) => match session.try_send(slices) {
                Some(all_out) => (slices.iter().map(|slice| slice.len()).sum(), !all_out),
                None => (0, false),
            },
        }
    }
}

impl OutQueue {
    /// Whether no frame waits for the writer.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.tail.is_empty()
    }

    /// Queues a frame: copied into the tail when small, shared (or, when
    /// borrowed, copied once into a buffer of its own) when large.
    pub(crate) fn push(&mut self, frame: Frame<'_>) {
        let len = frame.len();
        if len <= SMALL_FRAME {
            if self.tail.capacity() - self.tail.len() < frame.len() {
                // At least doubling: a long burst reallocates a few times,
                // not once per few frames.
                let more = (len.max(self.tail.len()))
                    .max(self.tail_hint)
                    .max(TAIL_START);
                self.tail.reserve(more);
            }
            self.tail.extend_from_slice(frame.as_slice());
            self.tail_frames += 1;
        } else {
            self.seal_tail();
            self.queue.push_back(Segment {
                bytes: frame.to_shared(),
                frames: 1,
            });
        }
        self.frames += 1;
        self.bytes += len;
    }

    /// Builds a small frame straight onto the tail: header, ids, and the
    /// content `content` writes, with no buffer in between. `Ok(None)`: it
    /// must go the general way (it would be worth compressing, or is past
    /// the frame limit), and nothing of it stays on the tail. The caller
    /// checks the queue's limits with the returned length and takes the
    /// frame back with [`unpush_tail`](Self::unpush_tail) if they refuse it.
    pub(crate) fn push_onto_tail(
        &mut self,
        config: &CodecConfig,
        channel: u16,
        action: u16,
        content: impl FnOnce(&mut BytesMut) -> Result<(), ContentError>,
    ) -> Result<Option<usize>, ContentError> {
        if self.tail.capacity() - self.tail.len() < SMALL_FRAME {
            let more = self.tail.len().max(self.tail_hint).max(TAIL_START);
            self.tail.reserve(more);
        }
        let start = self.tail.len();
        self.tail.extend_from_slice(&[0; codec::HEADER_LEN]);
        codec::put_varint_u16(&mut self.tail, channel);
        codec::put_varint_u16(&mut self.tail, action);
        if let Err(err) = content(&mut self.tail) {
            self.tail.truncate(start);
            return Err(err);
        }
        let len = self.tail.len() - start;
        let payload = len - codec::HEADER_LEN;
        if payload >= config.compress_threshold || payload + 1 > config.max_frame_len {
            self.tail.truncate(start);
            return Ok(None);
        }
        codec::write_header(&mut self.tail[start..start + codec::HEADER_LEN], payload, 0);
        self.tail_frames += 1;
        self.frames += 1;
        self.bytes += len;
        Ok(Some(len))
    }

    /// Takes back the frame of `len` bytes [`push_onto_tail`](Self::push_onto_tail)
    /// just added.
    pub(crate) fn unpush_tail(&mut self, len: usize) {
        self.tail.truncate(self.tail.len() - len);
        self.tail_frames -= 1;
        self.frames -= 1;
        self.bytes -= len;
    }

    /// Queues the rest of a frame a direct write left, first in line.
    pub(crate) fn push_front_rest(&mut self, rest: Bytes) {
        self.frames += 1;
        self.bytes += rest.len();
        self.queue.push_front(Segment {
            bytes: rest,
            frames: 1,
        });
    }

    /// Ends the tail as a segment of the queue.
    /// The whole buffer goes: an idle connection keeps no tail.
    pub(crate) fn seal_tail(&mut self) {
        if !self.tail.is_empty() {
            self.tail_hint = self.tail.len().clamp(TAIL_START, TAIL_HINT_MAX);
            let bytes = std::mem::take(&mut self.tail).freeze();
            let frames = std::mem::take(&mut self.tail_frames);
            self.queue.push_back(Segment { bytes, frames });
        }
    }

    /// Writes what is queued to `stream` in one vectored write, as much as
    /// it takes without waiting, and takes that off the queue; returns the
    /// frames wholly written and the bytes (a frame partly written stays
    /// counted until it is out), and whether ciphertext waits for the
    /// writer.
    pub(crate) fn write_direct(&mut self, stream: &Direct) -> (usize, usize, bool) {
        let mut slices = [std::io::IoSlice::new(&[]); 64];
        let mut count = 0;
        for (slice, segment) in slices.iter_mut().zip(&self.queue) {
            *slice = std::io::IoSlice::new(&segment.bytes);
            count += 1;
        }
        if count < slices.len() && !self.tail.is_empty() {
            slices[count] = std::io::IoSlice::new(&self.tail);
            count += 1;
        }
        let (written, backlog) = stream.try_write(&slices[..count]);
        self.last_direct = Some(std::time::Instant::now());
        let (mut left, mut frames) = (written, 0);
        while left > 0 {
            match self.queue.front_mut() {
                Some(front) if front.bytes.len() <= left => {
                    left -= front.bytes.len();
                    frames += front.frames;
                    self.queue.pop_front();
                }
                Some(front) => {
                    front.bytes.advance(left);
                    left = 0;
                }
                None if self.tail.len() <= left => {
                    self.tail_hint = self.tail.len().clamp(TAIL_START, TAIL_HINT_MAX);
                    self.tail = BytesMut::new();
                    frames += std::mem::take(&mut self.tail_frames);
                    left = 0;
                }
                None => {
                    self.tail.advance(left);
                    left = 0;
                }
            }
        }
        self.frames -= frames;
        self.bytes -= written;
        (frames, written, backlog)
    }

    /// Moves every queued frame into `into` (empty), in order, for the
    /// writer; returns the frames and bytes moved.
    pub(crate) fn take_all(&mut self, into: &mut VecDeque<Segment>) -> (usize, usize) {
        self.seal_tail();
        std::mem::swap(&mut self.queue, into);
        into.iter()
            .fold((0, 0), |(f, b), s| (f + s.frames, b + s.bytes.len()))
    }

    /// Whether the writer has a close, a pong or a ping to write.
    pub(crate) fn has_orders(&self) -> bool {
        self.close.is_some() || self.close_now.is_some() || self.pong.is_some() || self.ping
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    /// The frame `with_frame` builds for `(channel, action, value)`.
    fn built(channel: u16, action: u16, value: &impl serde::Serialize) -> Vec<u8> {
        with_frame(
            &CodecConfig::default(),
            channel,
            action,
            |buf| codec::encode_value_into(value, buf),
            |frame| Ok(frame.as_slice().to_vec()),
        )
        .unwrap()
    }

    /// The frame `Message::encode` makes for the same.
    fn encoded(channel: u16, action: u16, value: &impl serde::Serialize) -> Vec<u8> {
        let content = Bytes::from(codec::encode_value(value).unwrap());
        let message = Message::from_raw(channel, action, content);
        message
            .encode(&CodecConfig::default())
            .unwrap()
            .as_bytes()
            .to_vec()
    }

    #[test]
    fn frames_built_in_scratch_are_byte_for_byte_what_encode_makes() {
        let small = [0.5f32; 16];
        // Compressed when that pays, as `encode` does.
        let big = "all work and no play ".repeat(200);
        for (channel, action) in [(16, 1), (250, 251), (u16::MAX, 300)] {
            assert_eq!(
                built(channel, action, &small),
                encoded(channel, action, &small)
            );
            assert_eq!(built(channel, action, &big), encoded(channel, action, &big));
        }
        assert!(built(16, 1, &big).len() < big.len() / 4);
        // Past the frame limit: refused, and the next frame is built as well.
        let huge = vec![7u8; 2 * 1024 * 1024];
        let config = CodecConfig {
            compress_threshold: usize::MAX,
            ..CodecConfig::default()
        };
        let refused = with_frame(
            &config,
            16,
            1,
            |buf| codec::encode_value_into(&huge, buf),
            |_| Ok(()),
        );
        assert!(matches!(refused, Err(SendError::Frame(_))), "{refused:?}");
        assert_eq!(built(16, 1, &small), encoded(16, 1, &small));
    }

    #[test]
    fn frames_built_onto_the_tail_are_what_encode_makes_and_big_ones_go_the_general_way() {
        let config = CodecConfig::default();
        let mut queue = OutQueue::default();
        let small = [0.5f32; 16];
        let mut expected = Vec::new();
        for (channel, action) in [(16, 1), (250, 251), (u16::MAX, 300)] {
            let content = |tail: &mut BytesMut| codec::encode_value_onto(&small, tail);
            let len = queue
                .push_onto_tail(&config, channel, action, content)
                .unwrap();
            expected.extend(encoded(channel, action, &small));
            assert_eq!(len, Some(encoded(channel, action, &small).len()));
        }
        assert_eq!(&queue.tail[..], &expected[..]);
        assert_eq!((queue.frames, queue.bytes), (3, expected.len()));
        // Worth compressing: not on the tail, nothing left behind.
        let big = "all work and no play ".repeat(200);
        let content = |tail: &mut BytesMut| codec::encode_value_onto(&big, tail);
        assert_eq!(queue.push_onto_tail(&config, 16, 1, content).unwrap(), None);
        assert_eq!(&queue.tail[..], &expected[..]);
        // Taken back whole.
        queue.unpush_tail(expected.len() / 3);
        assert_eq!((queue.frames, queue.bytes), (2, expected.len() * 2 / 3));
    }
}
