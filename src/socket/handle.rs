//! The sending side of a connection, shared between its owner and its task.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use futures::task::AtomicWaker;
use serde::Serialize;

use super::outqueue::{with_frame, Frame, OutQueue};
use super::SocketConfig;
use crate::codec;
use crate::message::{Action, Channel, EncodedMessage, Message};
use switchboard_proto::reason::{CloseCode, DisconnectReason, SendError};

/// A frame sent within this long of a direct write is part of a burst and
/// goes through the writer task instead.
const DIRECT_WRITE_GAP: std::time::Duration = std::time::Duration::from_micros(5);

const CONNECTING: u8 = 0;
const OPEN: u8 = 1;
const CLOSING: u8 = 2;
const CLOSED: u8 = 3;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketState {
    /// Connecting or in the handshake; sends are queued.
    Connecting,
    /// Open.
    Open,
    /// A close was asked for; no more sends.
    Closing,
    /// Closed.
    Closed,
}

/// Counters of one connection; read with [`SocketHandle::stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) frames_in: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) frames_out: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) rtt_micros: AtomicU64,
    /// The server's totals over all its connections, counted as well (they
    /// never fall when a connection ends).
    pub(crate) server: Option<Arc<Counters>>,
}

impl Counters {
    /// Counts `frames` whole frames and `bytes` bytes read.
    pub(crate) fn read(&self, frames: u64, bytes: u64) {
        self.frames_in.fetch_add(frames, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        if let Some(server) = &self.server {
            server.read(frames, bytes);
        }
    }

    /// Counts `frames` whole frames and `bytes` bytes written.
    pub(crate) fn wrote(&self, frames: usize, bytes: usize) {
        self.frames_out.fetch_add(frames as u64, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
        if let Some(server) = &self.server {
            server.wrote(frames, bytes);
        }
    }

    /// The traffic counted so far (no queue, no round trip).
    pub(crate) fn traffic(&self) -> SocketStats {
        SocketStats {
            frames_in: self.frames_in.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            frames_out: self.frames_out.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            ..SocketStats::default()
        }
    }
}

pub use switchboard_proto::connection::SocketStats;

pub(crate) struct SocketInner {
    pub(crate) outbound: Mutex<OutQueue>,
    /// The connection's task: woken when the queue gains work for an idle
    /// writer, for an order or a close, and when the connection is killed.
    pub(crate) task: AtomicWaker,
    pub(crate) state: AtomicU8,
    /// Reached the server through its WebSocket listener.
    pub(crate) websocket: std::sync::atomic::AtomicBool,
    /// Set by [`SocketHandle::kill`]: the task ends the connection now.
    pub(crate) killed: AtomicBool,
    pub(crate) kill_reason: Mutex<Option<DisconnectReason>>,
    pub(crate) counters: Counters,
    pub(crate) peer_addr: Mutex<Option<SocketAddr>>,
    /// The inflate budget this connection shares with others from its
    /// address (set by a server); `None`: a budget of its own.
    pub(crate) inflate: Mutex<Option<switchboard_proto::connection::budget::SharedBudget>>,
    /// Shared by every connection of a server.
    pub(crate) config: Arc<SocketConfig>,
    /// A QUIC connection's datagrams, for its sequenced channels.
    pub(crate) datagrams: std::sync::OnceLock<Arc<super::quic::Datagrams>>,
}

impl SocketInner {
    /// Ready once the connection is killed. Registers the task's waker, so
    /// the connection's task (the only one that waits on it) calls this
    /// first whenever it is polled.
    pub(crate) fn poll_killed(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.task.register(cx.waker());
        if self.killed.load(Ordering::Acquire) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }

    /// Resolves once the connection is killed (see
    /// [`poll_killed`](Self::poll_killed)).
    pub(crate) async fn killed(&self) {
        std::future::poll_fn(|cx| self.poll_killed(cx)).await
    }
}

/// A cloneable, `Send` handle to one connection: send to it, close it, read
/// its counters, from any thread.
#[derive(Clone)]
pub struct SocketHandle {
    pub(crate) shared: Arc<SocketInner>,
}

impl std::fmt::Debug for SocketHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketHandle")
            .field("peer_addr", &self.peer_addr())
            .field("state", &self.state())
            .finish()
    }
}

impl SocketHandle {
    pub(crate) fn new(config: impl Into<Arc<SocketConfig>>) -> Self {
        Self::counted(config, None)
    }

    /// A handle whose traffic also counts in `server`'s totals.
    pub(crate) fn counted(
        config: impl Into<Arc<SocketConfig>>,
        server: Option<Arc<Counters>>,
    ) -> Self {
        let config = config.into();
        let shared = SocketInner {
            outbound: Mutex::new(OutQueue::default()),
            task: AtomicWaker::new(),
            state: AtomicU8::new(CONNECTING),
            websocket: std::sync::atomic::AtomicBool::new(false),
            killed: AtomicBool::new(false),
            kill_reason: Mutex::new(None),
            counters: Counters {
                server,
                ..Counters::default()
            },
            peer_addr: Mutex::new(None),
            inflate: Mutex::new(None),
            config,
            datagrams: std::sync::OnceLock::new(),
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Whether the peer reached the server through its WebSocket listener
    /// (a browser, a JavaScript client) rather than its TCP port.
    pub fn is_websocket(&self) -> bool {
        self.shared.websocket.load(Ordering::Relaxed)
    }

    /// Encodes `message` and queues it. Never blocks. See [`send_encoded`](Self::send_encoded).
    /// The frame is built in a buffer the calling thread reuses: nothing is
    /// allocated for a small message.
    pub fn send(&self, message: &Message) -> Result<(), SendError> {
        let content = message.content_bytes();
        if self.sent_as_datagram(
            message.channel_id(),
            message.action_id(),
            content.len(),
            |buf| {
                buf.extend_from_slice(content);
                Ok(())
            },
        )? {
            return Ok(());
        }
        with_frame(
            &self.shared.config.codec,
            message.channel_id(),
            message.action_id(),
            |buf| {
                buf.extend_from_slice(content);
                Ok(())
            },
            |frame| self.send_frame(frame),
        )
    }

    /// Builds a message of `channel`, `action` and `value` straight into a
    /// frame and sends it, as [`send`](Self::send) does a [`Message`]: the
    /// typed path a game takes per message, with no `Message` and no
    /// allocation in between (the value is encoded once, into a buffer the
    /// calling thread reuses). The same limits and errors as
    /// [`send_encoded`](Self::send_encoded).
    pub fn send_value<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        value: &T,
    ) -> Result<(), SendError> {
        if self.value_as_datagram(channel, action, value)? {
            return Ok(());
        }
        let Some(mut out) = self.push_value(channel, action, value)? else {
            return self.with_value_frame(channel, action, value, |frame| self.send_frame(frame));
        };
        if !out.writer_idle {
            // The writer is busy and takes it with what it has.
            return Ok(());
        }
        // Alone (the only frame waiting, and not right behind a direct
        // write): on the wire from this thread, as `send_frame` does; part
        // of a burst: the writer's, woken once.
        let now = std::time::Instant::now();
        let alone = out.frames == 1
            && out.direct.is_some()
            && out
                .last_direct
                .is_none_or(|at| now.duration_since(at) >= DIRECT_WRITE_GAP);
        if alone {
            self.flush_locked(out);
            return Ok(());
        }
        out.writer_idle = false;
        drop(out);
        self.shared.task.wake();
        Ok(())
    }

    /// [`send_value`](Self::send_value) without writing: the frame leaves
    /// with the next [`flush`](Self::flush), as with
    /// [`queue_encoded`](Self::queue_encoded). A game loop queues what it
    /// sends in a frame and flushes once.
    pub fn queue_value<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        value: &T,
    ) -> Result<(), SendError> {
        if self.value_as_datagram(channel, action, value)? {
            return Ok(());
        }
        if self.push_value(channel, action, value)?.is_some() {
            return Ok(());
        }
        self.with_value_frame(channel, action, value, |frame| {
            self.admit(frame.len())?.push(frame);
            Ok(())
        })
    }

    /// Builds a small frame of `value` straight onto the queue's tail,
    /// under the lock, with no buffer in between (nearly every message);
    /// returns the lock. `None`: it must go the general way (worth
    /// compressing, or past the frame limit), nothing was queued.
    fn push_value<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        value: &T,
    ) -> Result<Option<std::sync::MutexGuard<'_, OutQueue>>, SendError> {
        let config = &self.shared.config;
        let mut out = self.admit(0)?;
        let content = |tail: &mut BytesMut| codec::encode_value_onto(value, tail);
        let Some(len) = out.push_onto_tail(&config.codec, channel.id(), action.id(), content)?
        else {
            return Ok(None);
        };
        // The one slow-consumer rule, on the queue as it was before the push.
        if !config.queue_has_room(out.frames.saturating_sub(1), out.bytes - len, len) {
            out.unpush_tail(len);
            drop(out);
            self.kill(DisconnectReason::SlowConsumer);
            return Err(SendError::SlowConsumer);
        }
        Ok(Some(out))
    }

    /// Builds the frame of `value` in this thread's scratch buffer and hands
    /// it to `then`.
    fn with_value_frame<C: Channel, A: Action, T: Serialize + ?Sized>(
        &self,
        channel: C,
        action: A,
        value: &T,
        then: impl FnOnce(Frame<'_>) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        let codec = &self.shared.config.codec;
        let content = |buf: &mut Vec<u8>| codec::encode_value_into(value, buf);
        with_frame(codec, channel.id(), action.id(), content, then)
    }

    /// Queues an already-encoded message (encode once, send many). Never
    /// blocks. When the queue is full, by frames or by bytes, the peer is
    /// disconnected as a slow consumer and this returns
    /// [`SendError::SlowConsumer`].
    pub fn send_encoded(&self, message: &EncodedMessage) -> Result<(), SendError> {
        if self.encoded_as_datagram(message) {
            return Ok(());
        }
        self.send_frame(Frame::SocketInner(message.as_bytes()))
    }

    fn send_frame(&self, frame: Frame<'_>) -> Result<(), SendError> {
        let len = frame.len();
        let mut out = self.admit(len)?;
        if out.is_empty() && out.writer_idle {
            // The writer has nothing to write: put this frame on the wire
            // ourselves, under the lock so that nothing can overtake it, and
            // without waking the writer. Only for frames that come alone: a
            // frame right behind a direct one (a burst) goes to the writer,
            // so a burst pays one system call, not one per frame.
            if let Some(stream) = out.direct.clone() {
                let now = std::time::Instant::now();
                let alone = out
                    .last_direct
                    .is_none_or(|at| now.duration_since(at) >= DIRECT_WRITE_GAP);
                if alone {
                    let (written, backlog) =
                        stream.try_write(&[std::io::IoSlice::new(frame.as_slice())]);
                    // From when the write returned: a system call slower
                    // than the gap must not make every frame of a burst
                    // look alone (one system call per frame).
                    out.last_direct = Some(std::time::Instant::now());
                    if written > 0 {
                        // A frame counts once it is all out.
                        let whole = usize::from(written == len);
                        self.shared.counters.wrote(whole, written);
                        if written == len {
                            if backlog {
                                // Ciphertext the socket did not take: the
                                // writer sends it before anything else.
                                self.wake_writer(out);
                            }
                            return Ok(());
                        }
                        // The rest goes through the writer, first in line.
                        out.push_front_rest(frame.rest_from(written));
                        let wake = std::mem::replace(&mut out.writer_idle, false);
                        drop(out);
                        if wake {
                            self.shared.task.wake();
                        }
                        return Ok(());
                    }
                }
            }
        }
        out.push(frame);
        // Only a writer that went idle needs waking; a busy one looks at the
        // queue again before it rests. Waking once per idle period, not per
        // frame, keeps the notify off the per-message path.
        let wake = std::mem::replace(&mut out.writer_idle, false);
        drop(out);
        if wake {
            self.shared.task.wake();
        }
        Ok(())
    }

    /// Queues an already-encoded message without writing it and without
    /// waking the writer: it leaves with the next [`flush`](Self::flush) at
    /// the latest, together with everything queued before it (a writer
    /// still busy with earlier frames takes it with them, sooner). A sender that fans many
    /// messages out per tick (a relay) queues them all, then flushes each
    /// peer once: one system call per peer per tick instead of one per
    /// message. The same limits as [`send_encoded`](Self::send_encoded).
    pub fn queue_encoded(&self, message: &EncodedMessage) -> Result<(), SendError> {
        if self.encoded_as_datagram(message) {
            return Ok(());
        }
        self.admit(message.wire_len())?
            .push(Frame::SocketInner(message.as_bytes()));
        Ok(())
    }

    /// Sends what [`queue_encoded`](Self::queue_encoded) left waiting. When
    /// the writer task is idle the frames go out in one vectored write from
    /// the calling thread; whatever the socket does not take (or every frame,
    /// when the writer is busy or the stream is not TCP) is the writer's.
    pub fn flush(&self) {
        self.flush_locked(self.outbound());
    }

    /// [`flush`](Self::flush), the queue's lock already taken.
    fn flush_locked(&self, mut out: std::sync::MutexGuard<'_, OutQueue>) {
        if out.is_empty() || !out.writer_idle {
            return;
        }
        if let Some(stream) = out.direct.clone() {
            let (frames, written, backlog) = out.write_direct(&stream);
            self.shared.counters.wrote(frames, written);
            if out.is_empty() && !backlog {
                return;
            }
        }
        self.wake_writer(out);
    }

    /// Hands the socket back to the writer task (idle) and wakes it.
    fn wake_writer(&self, mut out: std::sync::MutexGuard<'_, OutQueue>) {
        out.writer_idle = false;
        drop(out);
        self.shared.task.wake();
    }

    /// Takes the queue's lock for one more frame of `len` bytes, or refuses
    /// it: closed, or over the limits (then the peer is disconnected as a
    /// slow consumer).
    fn admit(&self, len: usize) -> Result<std::sync::MutexGuard<'_, OutQueue>, SendError> {
        let config = &self.shared.config;
        let out = self.outbound();
        // Checked under the lock: `close` sets the state before it takes the
        // lock, so no frame can slip in behind a close frame.
        match self.state() {
            SocketState::Closing | SocketState::Closed => return Err(SendError::Closed),
            SocketState::Connecting | SocketState::Open => {}
        }
        if !config.queue_has_room(out.frames, out.bytes, len) {
            drop(out);
            self.kill(DisconnectReason::SlowConsumer);
            return Err(SendError::SlowConsumer);
        }
        Ok(out)
    }

    /// Gives the writer an order (a pong, an urgent close) and wakes it.
    pub(crate) fn order(&self, give: impl FnOnce(&mut OutQueue)) {
        let mut out = self.outbound();
        give(&mut out);
        // No direct writes until the writer has carried the order out.
        out.writer_idle = false;
        drop(out);
        self.shared.task.wake();
    }

    /// Lends (Some) or takes back (None) the stream for direct writes.
    pub(crate) fn set_direct(&self, stream: Option<super::outqueue::Direct>) {
        let mut out = self.outbound();
        out.writer_idle = false;
        out.direct = stream;
    }

    pub(crate) fn outbound(&self) -> std::sync::MutexGuard<'_, OutQueue> {
        self.shared.outbound.lock().expect("outbound queue lock")
    }

    /// Closes the connection gracefully: frames queued before this call are
    /// sent, then a close frame carrying `code` and `reason`, then the
    /// connection ends. Later sends fail with [`SendError::Closed`]. Closing
    /// twice does nothing.
    pub fn close(&self, code: CloseCode, reason: &str) {
        let was = self.shared.state.fetch_max(CLOSING, Ordering::AcqRel);
        if was >= CLOSING {
            return;
        }
        self.outbound().close = Some((code, reason.to_string()));
        self.shared.task.wake();
    }

    /// Ends the connection now, without flushing the queue: the task sends
    /// the close frame for `reason` if it can and reports `reason`.
    pub(crate) fn kill(&self, reason: DisconnectReason) {
        let mut slot = self.shared.kill_reason.lock().expect("kill_reason lock");
        if slot.is_none() {
            *slot = Some(reason);
        }
        drop(slot);
        self.shared.state.fetch_max(CLOSING, Ordering::AcqRel);
        self.shared.killed.store(true, Ordering::Release);
        self.shared.task.wake();
    }

    /// Where the connection is in its life.
    pub fn state(&self) -> SocketState {
        match self.shared.state.load(Ordering::Acquire) {
            CONNECTING => SocketState::Connecting,
            OPEN => SocketState::Open,
            CLOSING => SocketState::Closing,
            _ => SocketState::Closed,
        }
    }

    pub(crate) fn set_open(&self) {
        let _ = self.shared.state.compare_exchange(
            CONNECTING,
            OPEN,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    pub(crate) fn set_closed(&self) {
        self.shared.state.store(CLOSED, Ordering::Release);
    }

    /// The peer's address, once known (never for in-memory streams); over
    /// QUIC, its address now (a peer that moved has a new one).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        if let Some(link) = self.shared.datagrams.get() {
            return Some(link.remote_address());
        }
        *self.shared.peer_addr.lock().expect("peer_addr lock")
    }

    pub(crate) fn set_peer_addr(&self, addr: SocketAddr) {
        *self.shared.peer_addr.lock().expect("peer_addr lock") = Some(addr);
    }

    /// The connection's settings.
    pub fn config(&self) -> &SocketConfig {
        &self.shared.config
    }

    /// A snapshot of the connection's counters.
    pub fn stats(&self) -> SocketStats {
        let c = &self.shared.counters;
        let out = self.outbound();
        SocketStats {
            rtt_micros: c.rtt_micros.load(Ordering::Relaxed),
            queued_bytes: out.bytes as u64,
            queued_frames: out.frames as u64,
            ..c.traffic()
        }
    }
}
