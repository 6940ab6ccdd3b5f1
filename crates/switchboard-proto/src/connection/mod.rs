//! One connection: its settings and what it reports to its owner (plain
//! data, the same for every transport and driver), the framework's own
//! frames and the handshake's rule ([`control`]: hello, ping, pong, close),
//! the rules for what a peer sends ([`inbound`]), the inflate budget
//! ([`budget`]), the keep-alive rule ([`keepalive`]), an open connection's
//! life, its close and linger ([`lifecycle`]), how a connection ends
//! ([`ending`]), the slow-consumer rule
//! ([`SocketConfig::queue_has_room`]), messages as sequenced datagrams
//! ([`datagram`]), and
//! [`ConnectionCore`], the whole connection as a state machine without IO.
//! The tokio driver in `switchboard` reads through the same [`inbound`],
//! [`control`] and [`keepalive`] rules; `tests/conformance` in `switchboard`
//! runs one list of cases against both.

pub mod budget;
pub mod control;
mod core;
pub mod datagram;
pub mod ending;
pub mod inbound;
pub mod keepalive;
pub mod lifecycle;

pub use self::core::ConnectionCore;

use std::time::Duration;

use crate::codec::CodecConfig;
use crate::message::Message;
use crate::reason::{DisconnectReason, SocketError};

/// What the connection reports to its owner. Exhaustive on purpose: a new
/// kind of event must be handled by every consumer (the compiler says
/// where), never dropped by a catch-all arm.
#[derive(Debug)]
pub enum SocketEvent {
    /// The handshake completed; the connection is open.
    Connected,
    /// A message arrived.
    Received(Message),
    /// Something went wrong; if it ends the connection, `Disconnected` follows.
    Error(SocketError),
    /// The connection ended; always the last event.
    Disconnected(DisconnectReason),
}

/// The settings of one connection. Both ends of a connection may use
/// different settings; each enforces its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketConfig {
    /// Frame sizes and compression.
    pub codec: CodecConfig,
    /// How long the peer has to send its hello after the connection opens
    /// (default 5 s). Past it the connection is dropped with
    /// [`DisconnectReason::HandshakeTimeout`].
    pub handshake_timeout: Duration,
    /// After this long without sending anything, a ping is sent (default 5 s).
    /// Pings also measure the round-trip time.
    pub keepalive_interval: Duration,
    /// A peer from which nothing arrives for this long is disconnected with
    /// [`DisconnectReason::IdleTimeout`]
    /// (default 15 s). Must exceed the peer's `keepalive_interval`. Time the
    /// reader spends waiting for the owner to drain its event queue does not
    /// count.
    pub idle_timeout: Duration,
    /// Frames that may wait in the outbound queue (default 4096). A send that
    /// finds the queue full disconnects the peer as a
    /// [`DisconnectReason::SlowConsumer`].
    pub outbound_queue_len: usize,
    /// Bytes that may wait in the outbound queue (default 8 MiB). Past it the
    /// peer is disconnected as a slow consumer, as above.
    pub max_outbound_bytes: usize,
    /// Sizes the queue of events waiting for the owner's `poll()` (default
    /// 4096): it holds `event_queue_len / 256` batches (at least one), a
    /// batch being what one socket read brought in, at most 1024 events and
    /// about 256 KiB. When the queue is full the reader stops reading until
    /// the owner catches up; nothing is dropped. One `poll()` (or a
    /// `NetworkClient`'s `drain()`) hands out at most this many events, so
    /// a peer that sends without pause cannot keep a game's frame from
    /// ending.
    pub event_queue_len: usize,
    /// How long a closing connection may take to flush its queue, send its
    /// close frame and wait for the peer to hang up (default 2 s).
    pub close_timeout: Duration,
    /// Bytes the peer's compressed frames may inflate to per second
    /// (default 8 MiB), with one frame of `codec.max_decompressed_len` at
    /// once. On a server, every connection from one address (an IPv6 /64)
    /// shares this budget, so reconnecting does not refill it. A frame that
    /// would inflate past what is left is not inflated further: the
    /// connection is closed with a protocol error saying so.
    pub max_inflated_per_second: usize,
    /// The channels this end sends as unreliable, sequenced datagrams
    /// where the transport has them (QUIC; default none): state that only
    /// the newest value of matters (transforms, a tick's snapshot). A lost
    /// one delays nothing behind it, and the receiver drops any older than
    /// the newest it has of that channel. Over TCP and WebSocket, and for a
    /// message too big for one datagram, they travel reliably on the
    /// stream like every other channel ([`datagram`]).
    pub sequenced_channels: datagram::ChannelSet,
}

impl SocketConfig {
    /// The slow-consumer rule: whether a frame of `len` bytes fits an
    /// outbound queue holding `frames` frames of `bytes` bytes. A send that
    /// does not fit disconnects the peer as a slow consumer.
    pub fn queue_has_room(&self, frames: usize, bytes: usize, len: usize) -> bool {
        frames < self.outbound_queue_len && bytes + len <= self.max_outbound_bytes
    }
}

impl Default for SocketConfig {
    fn default() -> Self {
        Self {
            codec: CodecConfig::default(),
            handshake_timeout: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(15),
            outbound_queue_len: 4096,
            max_outbound_bytes: 8 * 1024 * 1024,
            event_queue_len: 4096,
            close_timeout: Duration::from_secs(2),
            max_inflated_per_second: 8 * 1024 * 1024,
            sequenced_channels: datagram::ChannelSet::default(),
        }
    }
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
