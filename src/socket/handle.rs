//! The sending side of a connection, shared between its owner and its task.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::reason::{CloseCode, DisconnectReason, SendError};
use super::SocketConfig;
use crate::message::{EncodedMessage, Message};

/// What the writer task takes from the outbound queue.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// A complete frame to write.
    Frame(Bytes),
    /// Write everything queued before this, then the close frame, then hang up.
    Close(CloseCode, String),
}

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
}

/// A snapshot of a connection's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketStats {
    /// Frames received, system frames included.
    pub frames_in: u64,
    /// Bytes received on the wire.
    pub bytes_in: u64,
    /// Frames written, system frames included.
    pub frames_out: u64,
    /// Bytes written on the wire.
    pub bytes_out: u64,
    /// The last measured round-trip time in microseconds (0 until the first
    /// pong).
    pub rtt_micros: u64,
    /// Bytes waiting in the outbound queue.
    pub queued_bytes: u64,
    /// Frames waiting in the outbound queue.
    pub queued_frames: u64,
}

pub(crate) struct Shared {
    pub(crate) outbound: mpsc::Sender<Outbound>,
    pub(crate) queued_bytes: AtomicUsize,
    pub(crate) state: AtomicU8,
    pub(crate) kill: CancellationToken,
    pub(crate) kill_reason: Mutex<Option<DisconnectReason>>,
    pub(crate) counters: Counters,
    pub(crate) peer_addr: Mutex<Option<SocketAddr>>,
    pub(crate) config: SocketConfig,
}

/// A cloneable, `Send` handle to one connection: send to it, close it, read
/// its counters, from any thread.
#[derive(Clone)]
pub struct SocketHandle {
    pub(crate) shared: Arc<Shared>,
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
    pub(crate) fn new(config: SocketConfig) -> (Self, mpsc::Receiver<Outbound>) {
        // One slot more than the frame limit, so a close always fits behind a
        // full queue of frames.
        let (tx, rx) = mpsc::channel(config.outbound_queue_len.max(1) + 1);
        let shared = Shared {
            outbound: tx,
            queued_bytes: AtomicUsize::new(0),
            state: AtomicU8::new(CONNECTING),
            kill: CancellationToken::new(),
            kill_reason: Mutex::new(None),
            counters: Counters::default(),
            peer_addr: Mutex::new(None),
            config,
        };
        (
            Self {
                shared: Arc::new(shared),
            },
            rx,
        )
    }

    /// Encodes `message` and queues it. Never blocks. See [`send_encoded`](Self::send_encoded).
    pub fn send(&self, message: &Message) -> Result<(), SendError> {
        let encoded = message.encode(&self.shared.config.codec)?;
        self.send_encoded(&encoded)
    }

    /// Queues an already-encoded message (encode once, send many). Never
    /// blocks. When the queue is full, by frames or by bytes, the peer is
    /// disconnected as a slow consumer and this returns
    /// [`SendError::SlowConsumer`].
    pub fn send_encoded(&self, message: &EncodedMessage) -> Result<(), SendError> {
        match self.state() {
            SocketState::Closing | SocketState::Closed => return Err(SendError::Closed),
            SocketState::Connecting | SocketState::Open => {}
        }
        let len = message.wire_len();
        let before = self.shared.queued_bytes.fetch_add(len, Ordering::AcqRel);
        let frames_full = self.shared.outbound.capacity() <= 1;
        if frames_full || before + len > self.shared.config.max_outbound_bytes {
            self.shared.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            self.kill(DisconnectReason::SlowConsumer);
            return Err(SendError::SlowConsumer);
        }
        match self
            .shared
            .outbound
            .try_send(Outbound::Frame(message.0.clone()))
        {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.shared.queued_bytes.fetch_sub(len, Ordering::AcqRel);
                self.kill(DisconnectReason::SlowConsumer);
                Err(SendError::SlowConsumer)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.shared.queued_bytes.fetch_sub(len, Ordering::AcqRel);
                Err(SendError::Closed)
            }
        }
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
        // The queue keeps one slot beyond the frame limit, but a racing
        // sender may have taken it; then the close cannot wait its turn.
        if self
            .shared
            .outbound
            .try_send(Outbound::Close(code, reason.to_string()))
            .is_err()
        {
            self.kill(DisconnectReason::SlowConsumer);
        }
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
        self.shared.kill.cancel();
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

    /// The peer's address, once known (never for in-memory streams).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
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
        SocketStats {
            frames_in: c.frames_in.load(Ordering::Relaxed),
            bytes_in: c.bytes_in.load(Ordering::Relaxed),
            frames_out: c.frames_out.load(Ordering::Relaxed),
            bytes_out: c.bytes_out.load(Ordering::Relaxed),
            rtt_micros: c.rtt_micros.load(Ordering::Relaxed),
            queued_bytes: self.shared.queued_bytes.load(Ordering::Relaxed) as u64,
            queued_frames: (self.shared.outbound.max_capacity() - self.shared.outbound.capacity())
                as u64,
        }
    }
}
