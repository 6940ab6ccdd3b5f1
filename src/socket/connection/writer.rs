//! The writer half of a connection: the outbound queue to the socket, small
//! frames coalesced, the close frame last.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Buf;

use super::open::Clock;
use super::*;

/// Small segments are copied into one buffer of up to this many bytes and
/// written together; larger ones are written as they are.
const CHUNK: usize = 64 * 1024;
/// A segment at least this long is written as it is, not copied.
const WRITE_AS_IS: usize = 8 * 1024;

/// A chunk buffer smaller than this is let go after each write.
const KEEP_CHUNK: usize = 1024;

/// Where the writer is.
enum Step {
    /// Take everything queued, and the orders, in one lock.
    Take,
    /// Write what was taken.
    Write,
    /// Nothing was queued: senders on this runtime get one turn to add to
    /// the queue before the writer rests (bursts then leave in one write).
    Yielded,
    /// Everything is written and the socket is lent to senders, who may
    /// write a frame themselves; a sender, an order or a close wakes the
    /// task.
    Idle,
    /// Writing the close frame, then flushing and shutting down.
    Close(Bytes),
    Flush,
    Shutdown,
}

pub(super) struct WriteSide<W> {
    writer: W,
    step: Step,
    batch: VecDeque<Segment>,
    /// Small segments (and pongs and pings) copied together; allocated on
    /// first use, so an idle connection never pays for it.
    chunk: Vec<u8>,
    /// How much of `chunk` is written.
    at: usize,
    /// A large segment being written as it is.
    large: Bytes,
    /// Frames and bytes taken from the queue, being written.
    taken: (usize, usize),
    /// Frames and bytes written since the queue's accounting last saw them.
    written: (usize, usize),
    /// Pongs and pings in `chunk`, and their bytes.
    control: (usize, usize),
    /// A graceful close to write once what was taken is out.
    close: Option<(CloseCode, String)>,
}

impl<W: AsyncWrite + Unpin> WriteSide<W> {
    pub(super) fn new(writer: W) -> Self {
        Self {
            writer,
            step: Step::Take,
            batch: VecDeque::new(),
            chunk: Vec::new(),
            at: 0,
            large: Bytes::new(),
            taken: (0, 0),
            written: (0, 0),
            control: (0, 0),
            close: None,
        }
    }

    /// Writes until the close frame is out or the socket fails.
    pub(super) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        handle: &SocketHandle,
        clock: &mut Clock,
    ) -> Poll<WriteEnd> {
        match self.steps(cx, handle, clock) {
            Poll::Ready(Ok(())) => Poll::Ready(WriteEnd::SentClose),
            Poll::Ready(Err(err)) => Poll::Ready(WriteEnd::Failed(err)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn steps(
        &mut self,
        cx: &mut Context<'_>,
        handle: &SocketHandle,
        clock: &mut Clock,
    ) -> Poll<std::io::Result<()>> {
        let config = handle.config();
        loop {
            match &mut self.step {
                Step::Take => {
                    // Take the socket back from direct senders, and
                    // everything queued, in one lock.
                    let mut out = handle.outbound();
                    out.writer_idle = false;
                    // What the last batch wrote leaves the accounting here,
                    // in the same lock.
                    out.frames -= std::mem::take(&mut self.written.0);
                    out.bytes -= std::mem::take(&mut self.written.1);
                    self.taken = out.take_all(&mut self.batch);
                    if let Some((code, reason)) = out.close_now.take() {
                        // An urgent close jumps the queue.
                        drop(out);
                        self.batch.clear();
                        self.step = close_step(code, &reason, handle);
                        continue;
                    }
                    if self.batch.is_empty() {
                        self.close = out.close.take();
                    }
                    let (pong, ping) = (out.pong.take(), std::mem::take(&mut out.ping));
                    drop(out);
                    // Pongs and pings go first.
                    self.control = (0, 0);
                    if let Some(stamp) = pong {
                        self.add_control(&control::pong_frame(stamp, &config.codec));
                    }
                    if ping {
                        self.add_control(&control::ping_frame(clock.stamp(), &config.codec));
                    }
                    if !self.chunk.is_empty() || !self.batch.is_empty() {
                        self.step = Step::Write;
                    } else if let Some((code, reason)) = self.close.take() {
                        self.step = close_step(code, &reason, handle);
                    } else {
                        self.step = Step::Yielded;
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Step::Write => {
                    ready!(self.poll_batch(cx))?;
                    clock.sent = clock.stamp();
                    let (frames, bytes) = self.taken;
                    handle
                        .shared
                        .counters
                        .wrote(frames + self.control.0, bytes + self.control.1);
                    self.written = self.taken;
                    self.step = match self.close.take() {
                        Some((code, reason)) => close_step(code, &reason, handle),
                        None => Step::Take,
                    };
                }
                Step::Yielded => {
                    if !handle.outbound().is_empty() {
                        self.step = Step::Take;
                        continue;
                    }
                    ready!(Pin::new(&mut self.writer).poll_flush(cx))?;
                    // The task's waker is registered (`poll_killed`) before
                    // the writer is polled, so a sender that finds the writer
                    // idle after this wakes the task.
                    let mut out = handle.outbound();
                    if !out.is_empty() || out.has_orders() {
                        self.step = Step::Take;
                        continue;
                    }
                    out.writer_idle = true;
                    self.step = Step::Idle;
                    return Poll::Pending;
                }
                Step::Idle => {
                    // Woken for us: a sender or an order took the socket
                    // back (`writer_idle`), or a close came.
                    let out = handle.outbound();
                    if out.writer_idle && !out.has_orders() {
                        return Poll::Pending;
                    }
                    drop(out);
                    self.step = Step::Take;
                }
                Step::Close(frame) => {
                    while !frame.is_empty() {
                        let n = ready!(Pin::new(&mut self.writer).poll_write(cx, frame))?;
                        if n == 0 {
                            return Poll::Ready(Err(ErrorKind::WriteZero.into()));
                        }
                        frame.advance(n);
                    }
                    self.step = Step::Flush;
                }
                Step::Flush => {
                    ready!(Pin::new(&mut self.writer).poll_flush(cx))?;
                    self.step = Step::Shutdown;
                }
                Step::Shutdown => return Pin::new(&mut self.writer).poll_shutdown(cx),
            }
        }
    }

    /// Lets the chunk buffer go (the connection is quiet).
    pub(super) fn release_buffer(&mut self) {
        if self.chunk.is_empty() {
            self.chunk = Vec::new();
        }
    }

    fn add_control(&mut self, frame: &[u8]) {
        self.chunk.extend_from_slice(frame);
        self.control.0 += 1;
        self.control.1 += frame.len();
    }

    /// Writes `chunk`, then the batch's segments: small ones copied
    /// together into `chunk`, large ones as they are.
    fn poll_batch(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        loop {
            let pending = if self.at < self.chunk.len() {
                &self.chunk[self.at..]
            } else if !self.large.is_empty() {
                &self.large[..]
            } else {
                self.chunk.clear();
                self.at = 0;
                let Some(segment) = self.batch.pop_front() else {
                    if self.chunk.capacity() <= KEEP_CHUNK {
                        // A few control frames' worth: not worth keeping
                        // on an idle connection.
                        self.chunk = Vec::new();
                    }
                    return Poll::Ready(Ok(()));
                };
                if segment.bytes.len() >= WRITE_AS_IS {
                    self.large = segment.bytes;
                    continue;
                }
                self.chunk.extend_from_slice(&segment.bytes);
                while let Some(next) = self.batch.front() {
                    let len = next.bytes.len();
                    if len >= WRITE_AS_IS || self.chunk.len() + len > CHUNK {
                        break;
                    }
                    self.chunk.extend_from_slice(&next.bytes);
                    self.batch.pop_front();
                }
                continue;
            };
            let n = ready!(Pin::new(&mut self.writer).poll_write(cx, pending))?;
            if n == 0 {
                return Poll::Ready(Err(ErrorKind::WriteZero.into()));
            }
            if self.at < self.chunk.len() {
                self.at += n;
            } else {
                self.large.advance(n);
            }
        }
    }
}

/// Records the close as the connection's reason (unless one is recorded)
/// and builds its frame.
fn close_step(code: CloseCode, reason: &str, handle: &SocketHandle) -> Step {
    {
        let mut slot = handle.shared.kill_reason.lock().expect("kill_reason lock");
        slot.get_or_insert_with(|| DisconnectReason::Closed {
            code,
            reason: reason.to_string(),
        });
    }
    Step::Close(control::close_frame(code, reason, &handle.config().codec))
}
