//! The reader half of a connection: reads the socket, slices whole frames
//! out of its buffer in batches for the owner, answers system frames.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use super::open::{Clock, Delivery};
use super::*;
use crate::socket::budget::{InflateBudget, SharedBudget};

/// A transport the reader can wait on without a buffer: a TCP socket says
/// when it is readable, so an idle connection holds no read buffer at all;
/// other transports are read into a small one.
pub(crate) trait Readable: AsyncRead + Unpin {
    /// Whether [`poll_readable`](Self::poll_readable) really waits.
    const WAITS: bool = false;

    /// Ready when a read would find bytes (or the end).
    fn poll_readable(&mut self, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Readable for SharedTcp {
    const WAITS: bool = true;

    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.0.poll_read_ready(cx)
    }
}

impl<T: AsyncRead> Readable for tokio::io::ReadHalf<T> {}

/// The reader half: reads the socket itself (the framed reader of the
/// handshake handed over its stream and buffer) and takes whole frames
/// straight from the buffer, many per read.
pub(super) struct ReadSide<R> {
    io: R,
    buffer: bytes::BytesMut,
    decoder: FrameDecoder,
    budget: SharedBudget,
    started: Instant,
    /// A batch on its way to an owner whose queue is full.
    delivering: Option<Delivery>,
    /// How the reader ends once `delivering` is through.
    end: Option<ReadEnd>,
}

impl<R: Readable> ReadSide<R> {
    pub(super) fn new(
        io: R,
        buffer: bytes::BytesMut,
        decoder: FrameDecoder,
        handle: &SocketHandle,
        started: Instant,
    ) -> Self {
        let config = handle.config();
        let budget = handle
            .shared
            .inflate
            .lock()
            .expect("inflate lock")
            .clone()
            .unwrap_or_else(|| {
                let own = InflateBudget::new(
                    config.max_inflated_per_second,
                    config.codec.max_decompressed_len,
                    started.into_std(),
                );
                std::sync::Arc::new(std::sync::Mutex::new(own))
            });
        Self {
            io,
            buffer,
            decoder,
            budget,
            started,
            delivering: None,
            end: None,
        }
    }

    /// Lets the read buffer go while nothing is buffered: the next read
    /// takes a fresh one.
    pub(super) fn release_buffer(&mut self) {
        if R::WAITS && self.buffer.is_empty() && self.delivering.is_none() {
            self.buffer = bytes::BytesMut::new();
        }
    }

    /// Reads and hands batches to the owner until the peer or the owner
    /// ends the connection.
    pub(super) fn poll<E: Send + 'static>(
        &mut self,
        cx: &mut Context<'_>,
        handle: &SocketHandle,
        reporter: &Reporter<E>,
        clock: &mut Clock,
    ) -> Poll<ReadEnd> {
        loop {
            if let Some(delivering) = &mut self.delivering {
                let delivered = ready!(delivering.as_mut().poll(cx));
                self.delivering = None;
                clock.heard = clock.stamp();
                if !delivered {
                    return Poll::Ready(ReadEnd::OwnerGone);
                }
                if let Some(end) = self.end.take() {
                    return Poll::Ready(end);
                }
                continue;
            }
            let mut batch = Read {
                items: Vec::new(),
                events: Vec::new(),
                frames: 0,
                bytes: 0,
            };
            let (taken, end) = take_frames(
                &mut self.buffer,
                &mut self.decoder,
                &self.budget,
                &mut batch,
                handle,
                reporter,
                self.started,
            );
            handle.shared.counters.read(batch.frames, batch.bytes);
            // Frames taken (system frames included): more may be buffered.
            let took_any = batch.frames > 0;
            if !batch.items.is_empty() {
                let chunk = self.buffer.split_to(taken).freeze();
                let queued = Batch::new(batch.items, batch.events, chunk, reporter.wrap);
                // Waiting for the owner is not the peer's silence.
                clock.heard = Clock::BUSY;
                match deliver(queued, batch.bytes, reporter) {
                    Ok(true) => clock.heard = clock.stamp(),
                    Ok(false) => return Poll::Ready(ReadEnd::OwnerGone),
                    Err(delivering) => self.delivering = Some(delivering),
                }
            } else {
                bytes::Buf::advance(&mut self.buffer, taken);
            }
            if batch.bytes > IDLE_READ_BUFFER as u64 / 2 {
                grow_read_buffer(&mut self.buffer);
            }
            shrink_read_buffer(&mut self.buffer);
            if self.delivering.is_some() {
                self.end = end;
                continue;
            }
            if let Some(end) = end {
                return Poll::Ready(end);
            }
            if took_any {
                // More whole frames may be buffered (a batch stops at its
                // limits): take them before reading.
                continue;
            }
            // Nothing whole is buffered: read. The connection's timer
            // watches for silence meanwhile.
            if R::WAITS && self.buffer.is_empty() {
                // No buffer is taken until there is something to read, and
                // a small one is let go while there is not (a big one, of a
                // busy connection, goes once it has been quiet a while).
                match self.io.poll_readable(cx) {
                    Poll::Pending => {
                        if self.buffer.capacity() <= IDLE_READ_BUFFER {
                            self.buffer = bytes::BytesMut::new();
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(err)) => {
                        return Poll::Ready(ReadEnd::Failed(codec::FrameError::Io(err).into()))
                    }
                    Poll::Ready(Ok(())) => {}
                }
                if self.buffer.capacity() < IDLE_READ_BUFFER {
                    self.buffer = bytes::BytesMut::with_capacity(IDLE_READ_BUFFER);
                }
            }
            if self.buffer.capacity() - self.buffer.len() < MIN_READ_ROOM {
                self.buffer.reserve(IDLE_READ_BUFFER);
            }
            let read = tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.buffer);
            match ready!(read) {
                Ok(0) if self.buffer.is_empty() => return Poll::Ready(ReadEnd::Eof),
                Ok(0) => {
                    let truncated = codec::FrameError::Truncated {
                        buffered: self.buffer.len(),
                    };
                    return Poll::Ready(ReadEnd::Failed(truncated.into()));
                }
                Ok(_) => clock.heard = clock.stamp(),
                Err(err) => {
                    return Poll::Ready(ReadEnd::Failed(
                        match super::super::websocket::TransportViolation::of(&err) {
                            Some(violation) => SocketError::Transport(violation.0.clone()),
                            None => codec::FrameError::Io(err).into(),
                        },
                    ))
                }
            }
        }
    }
}

/// Hands a batch to the owner: `Ok(true)` when it is in the owner's queue,
/// `Ok(false)` when the owner is gone, or the delivery to wait for when the
/// queue (or the connection's share of it) is full.
fn deliver<E: Send + 'static>(
    queued: Batch<E>,
    bytes: u64,
    reporter: &Reporter<E>,
) -> Result<bool, Delivery> {
    let queued = match &reporter.credit {
        Some(credit) if !credit.try_acquire(bytes) => {
            let (credit, events) = (credit.clone(), reporter.events.clone());
            return Err(Box::pin(async move {
                credit.acquire(bytes).await;
                let queued = queued.counted(credit, bytes);
                events.send(queued).await.is_ok()
            }));
        }
        Some(credit) => queued.counted(credit.clone(), bytes),
        None => queued,
    };
    match reporter.events.try_send(queued) {
        Ok(()) => Ok(true),
        Err(mpsc::error::TrySendError::Full(queued)) => {
            let events = reporter.events.clone();
            Err(Box::pin(async move { events.send(queued).await.is_ok() }))
        }
        Err(mpsc::error::TrySendError::Closed(_)) => Ok(false),
    }
}

/// Room a read needs in the buffer at least, or the buffer is grown first.
const MIN_READ_ROOM: usize = 256;

/// Takes the whole frames at the start of `buffer` into `batch`, up to
/// BATCH events or BATCH_BYTES bytes (which bounds what the event queue can
/// hold). Uncompressed frames stay where they are: the batch will carry the
/// buffer's first `taken` bytes once and each message as a range of them. A
/// compressed frame is decoded on its own when it comes first, and otherwise
/// ends the batch; the next turn takes it. Returns `taken`, and how the
/// reader ends if a frame ends it.
fn take_frames<E>(
    buffer: &mut bytes::BytesMut,
    decoder: &mut FrameDecoder,
    budget: &SharedBudget,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> (usize, Option<ReadEnd>) {
    let mut taken = 0;
    while batch.items.len() < crate::socket::events::BATCH
        && batch.bytes < crate::socket::events::BATCH_BYTES
    {
        if let Some(len) = decoder.peek_raw(&buffer[taken..]) {
            if batch.items.capacity() == 0 {
                // Room for every frame the buffer may hold, once.
                batch
                    .items
                    .reserve((buffer.len() / 16).clamp(1, crate::socket::events::BATCH));
            }
            let payload = taken + codec::HEADER_LEN..taken + len;
            taken += len;
            batch.frames += 1;
            batch.bytes += len as u64;
            let end = on_raw_frame(&buffer[..], payload, batch, handle, reporter, started);
            if end.is_some() {
                return (taken, end);
            }
            continue;
        }
        if taken > 0 {
            break;
        }
        // The first frame is compressed, incomplete or bad: the decoder
        // takes it, asks for more bytes, or says what is wrong. It inflates
        // no more than what is left of this second's budget.
        let max = handle.config().codec.max_decompressed_len;
        let room = budget
            .lock()
            .expect("budget lock")
            .room(std::time::Instant::now());
        decoder.config_mut().max_decompressed_len = room.min(max);
        let decoded = decoder.decode(buffer);
        decoder.config_mut().max_decompressed_len = max;
        let end = match decoded {
            Ok(Some(frame)) => {
                if frame.compressed {
                    budget
                        .lock()
                        .expect("budget lock")
                        .spend(frame.payload.len());
                }
                on_frame(Some(Ok(frame)), batch, handle, reporter, started)
            }
            Ok(None) => break,
            Err(codec::FrameError::DecompressedTooLarge { .. }) if room < max => {
                let per_second = budget.lock().expect("budget lock").per_second();
                Some(ReadEnd::Failed(SocketError::InflateBudget { per_second }))
            }
            Err(err) => Some(ReadEnd::Failed(err.into())),
        };
        if end.is_some() {
            return (taken, end);
        }
    }
    (taken, None)
}

/// The events of one read, and what they weighed.
struct Read<E> {
    items: Vec<Item>,
    events: Vec<E>,
    frames: u64,
    bytes: u64,
}

impl<E> Read<E> {
    fn push_event(&mut self, event: E) {
        self.items.push(Item::Event);
        self.events.push(event);
    }
}

/// What a connection reads into until traffic arrives: an idle connection
/// costs little.
pub(super) const IDLE_READ_BUFFER: usize = 256;
/// What a connection with traffic reads into: big reads, few system calls.
const BUSY_READ_BUFFER: usize = 64 * 1024;

/// After a large frame the buffer may have grown to its size: once it holds
/// little again, a buffer of the usual size takes its place, so that one
/// big frame does not make the connection cost megabytes for the rest of
/// its life.
fn shrink_read_buffer(buffer: &mut bytes::BytesMut) {
    if buffer.capacity() > 2 * BUSY_READ_BUFFER && buffer.len() <= BUSY_READ_BUFFER / 2 {
        let mut usual = bytes::BytesMut::with_capacity(BUSY_READ_BUFFER);
        usual.extend_from_slice(buffer);
        *buffer = usual;
    }
}

/// Swaps the small read buffer for a big one, once. A fresh buffer (not a
/// grown one) is needed: `BytesMut` keeps reallocating at the size it was
/// first created with. A big buffer's capacity is what is left of it after
/// the batches split off its front, so any buffer with more room than a
/// small one is kept: reads fill it up to its end, and only then does the
/// next one come (replacing it on every read, as a test of `>= BUSY` did,
/// cost a 64 KiB allocation per read, freed on the owner's thread).
fn grow_read_buffer(buffer: &mut bytes::BytesMut) {
    if buffer.capacity() > IDLE_READ_BUFFER {
        return;
    }
    let mut big = bytes::BytesMut::with_capacity(BUSY_READ_BUFFER);
    big.extend_from_slice(buffer);
    *buffer = big;
}

/// Handles one read result: application messages and errors go into
/// `batch`, system messages are answered here. `Some` ends the reader.
fn on_frame<E>(
    next: Option<Result<codec::Frame, codec::FrameError>>,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> Option<ReadEnd> {
    let frame = match next {
        None => return Some(ReadEnd::Eof),
        Some(Err(err)) => return Some(ReadEnd::Failed(err.into())),
        Some(Ok(frame)) => frame,
    };
    batch.frames += 1;
    batch.bytes += frame.payload.len() as u64 + codec::HEADER_LEN as u64;
    let compressed = frame.compressed;
    let message = match Message::decode(frame.payload) {
        Ok(message) => message,
        Err(err) => return Some(ReadEnd::Failed(SocketError::Envelope(err))),
    };
    if compressed && message.is_system() {
        // System frames are a few bytes and never compressed: one that is
        // only makes the server inflate for nothing.
        return Some(ReadEnd::Failed(SocketError::CompressedSystemFrame));
    }
    if !message.is_system() {
        batch.push_event(reporter.wrap.call(SocketEvent::Received(message)));
        return None;
    }
    on_system(message, batch, handle, reporter, started)
}

/// Handles an uncompressed frame whose payload is `buffer[payload]` (the
/// reader's fast path): an application message becomes a range of the
/// batch's buffer; a system message is copied out and handled here.
fn on_raw_frame<E>(
    buffer: &[u8],
    payload: std::ops::Range<usize>,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> Option<ReadEnd> {
    let (channel, action, used) = match crate::message::decode_envelope(&buffer[payload.clone()]) {
        Ok(envelope) => envelope,
        Err(err) => return Some(ReadEnd::Failed(SocketError::Envelope(err))),
    };
    let content = payload.start + used..payload.end;
    if channel != crate::message::SYSTEM_CHANNEL {
        // Offsets fit: a batch ends once it passes 256 KiB, and a frame's
        // length is a u32.
        batch.items.push(Item::Message {
            channel,
            action,
            start: content.start as u32,
            len: content.len() as u32,
        });
        return None;
    }
    let content = bytes::Bytes::copy_from_slice(&buffer[content]);
    let message = Message::from_raw(channel, action, content);
    on_system(message, batch, handle, reporter, started)
}

/// Answers a message on the system channel. `Some` ends the reader.
fn on_system<E>(
    message: Message,
    batch: &mut Read<E>,
    handle: &SocketHandle,
    reporter: &Reporter<E>,
    started: Instant,
) -> Option<ReadEnd> {
    match message.action_id() {
        control::ACTION_PING => {
            if let Ok(stamp) = message.content::<u64>() {
                // Only the latest ping needs its pong.
                handle.order(|out| out.pong = Some(stamp));
            }
        }
        control::ACTION_PONG => {
            if let Ok(stamp) = message.content::<u64>() {
                let now = started.elapsed().as_micros() as u64;
                handle
                    .shared
                    .counters
                    .rtt_micros
                    .store(now.saturating_sub(stamp), Ordering::Relaxed);
            }
        }
        control::ACTION_CLOSE => {
            let close = message.content::<CloseFrame>().unwrap_or(CloseFrame {
                code: CloseCode::PROTOCOL_ERROR,
                reason: "undecodable close frame".into(),
            });
            return Some(ReadEnd::PeerClosed(close));
        }
        other => {
            tracing::debug!(action = other, "unknown system action ignored");
            batch.push_event(
                reporter
                    .wrap
                    .call(SocketEvent::Error(SocketError::UnknownSystemAction(other))),
            );
        }
    }
    None
}

#[cfg(test)]
mod tests;
