//! The reader half of a connection: reads the socket, slices whole frames
//! out of its buffer in batches for the owner, answers system frames.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use super::open::{Clock, Delivery};
use super::*;
use switchboard_proto::connection::budget::{InflateBudget, SharedBudget};
use switchboard_proto::connection::inbound;

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

impl Readable for crate::tls::TlsStream {
    const WAITS: bool = true;

    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        crate::tls::TlsStream::poll_readable(self, cx)
    }
}

impl<T: AsyncRead> Readable for tokio::io::ReadHalf<T> {}

impl Readable for quinn::RecvStream {}

impl Readable for wtransport::RecvStream {}

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
                handle,
                wrap: reporter.wrap,
                started: self.started,
            };
            let (taken, end) = take_frames(
                &mut self.buffer,
                &mut self.decoder,
                &self.budget,
                &mut batch,
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

/// Takes the whole frames at the start of `buffer` into `batch`, by the
/// protocol crate's rules ([`inbound::take_frames`]), up to BATCH events or
/// BATCH_BYTES bytes (which bounds what the event queue can hold).
/// Uncompressed frames stay where they are: the batch will carry the
/// buffer's first `taken` bytes once and each message as a range of them.
/// Returns `taken`, and how the reader ends if a frame ends it.
fn take_frames<E>(
    buffer: &mut bytes::BytesMut,
    decoder: &mut FrameDecoder,
    budget: &SharedBudget,
    batch: &mut Read<'_, E>,
) -> (usize, Option<ReadEnd>) {
    let limits = inbound::BatchLimits {
        items: crate::socket::events::BATCH,
        bytes: crate::socket::events::BATCH_BYTES,
    };
    let taken = inbound::take_frames(
        buffer,
        decoder,
        budget,
        std::time::Instant::now,
        limits,
        batch,
    );
    batch.frames += taken.frames;
    batch.bytes += taken.bytes;
    let end = taken.end.map(|end| match end {
        inbound::End::PeerClosed(close) => ReadEnd::PeerClosed(close),
        inbound::End::Failed(err) => ReadEnd::Failed(err),
    });
    (taken.taken, end)
}

/// The events of one read, and what they weighed: where the protocol
/// crate's rules put what the peer sent.
struct Read<'a, E> {
    items: Vec<Item>,
    events: Vec<E>,
    frames: u64,
    bytes: u64,
    handle: &'a SocketHandle,
    wrap: Wrap<E>,
    started: Instant,
}

impl<E> Read<'_, E> {
    fn push_event(&mut self, event: SocketEvent) {
        self.items.push(Item::Event);
        self.events.push(self.wrap.call(event));
    }
}

impl<E> inbound::Sink for Read<'_, E> {
    fn reserve(&mut self, buffered: usize) {
        if self.items.capacity() == 0 {
            // Room for every frame the buffer may hold, once.
            self.items
                .reserve((buffered / 16).clamp(1, crate::socket::events::BATCH));
        }
    }

    fn message_at(&mut self, channel: u16, action: u16, content: std::ops::Range<usize>) {
        // Offsets fit: a batch ends once it passes 256 KiB, and a frame's
        // length is a u32.
        self.items.push(Item::Message {
            channel,
            action,
            start: content.start as u32,
            len: content.len() as u32,
        });
    }

    fn message(&mut self, message: Message) {
        self.push_event(SocketEvent::Received(message));
    }

    fn error(&mut self, error: SocketError) {
        tracing::debug!(%error, "ignored");
        self.push_event(SocketEvent::Error(error));
    }

    fn ping(&mut self, stamp: u64) {
        self.handle.order(|out| out.pong = Some(stamp));
    }

    fn pong(&mut self, stamp: u64) {
        let now = self.started.elapsed().as_micros() as u64;
        self.handle
            .shared
            .counters
            .rtt_micros
            .store(now.saturating_sub(stamp), Ordering::Relaxed);
    }

    fn len(&self) -> usize {
        self.items.len()
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

#[cfg(test)]
mod tests;
