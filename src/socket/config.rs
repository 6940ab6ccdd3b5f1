//! Every limit and timer of a connection and of a listening server.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::websocket::WebSocketConfig;
use crate::codec::CodecConfig;

/// The settings of one connection. Both ends of a connection may use
/// different settings; each enforces its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketConfig {
    /// Frame sizes and compression.
    pub codec: CodecConfig,
    /// How long the peer has to send its hello after the connection opens
    /// (default 5 s). Past it the connection is dropped with
    /// [`DisconnectReason::HandshakeTimeout`](super::DisconnectReason::HandshakeTimeout).
    pub handshake_timeout: Duration,
    /// After this long without sending anything, a ping is sent (default 5 s).
    /// Pings also measure the round-trip time.
    pub keepalive_interval: Duration,
    /// A peer from which nothing arrives for this long is disconnected with
    /// [`DisconnectReason::IdleTimeout`](super::DisconnectReason::IdleTimeout)
    /// (default 15 s). Must exceed the peer's `keepalive_interval`. Time the
    /// reader spends waiting for the owner to drain its event queue does not
    /// count.
    pub idle_timeout: Duration,
    /// Frames that may wait in the outbound queue (default 4096). A send that
    /// finds the queue full disconnects the peer as a
    /// [`DisconnectReason::SlowConsumer`](super::DisconnectReason::SlowConsumer).
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
        }
    }
}

/// Who may connect to a listening server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BindScope {
    /// 127.0.0.1 only: single player, nobody else on the network can connect.
    Loopback,
    /// 0.0.0.0: every interface, for hosting a game others join.
    AllInterfaces,
}

impl BindScope {
    /// The address this scope binds to.
    pub fn ip(self) -> IpAddr {
        match self {
            BindScope::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
            BindScope::AllInterfaces => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }
}

/// The settings of a listening [`ExtendedTcpServer`](super::ExtendedTcpServer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Settings for every accepted connection. Its `event_queue_len` sizes the
    /// server's single event queue, shared by all peers.
    pub socket: SocketConfig,
    /// Connections open at once (default 1024). One more completes the
    /// handshake, is told "server full" and is closed.
    pub max_connections: usize,
    /// Connections still in their handshake at once (default 64). A
    /// connection that finds them all taken evicts the oldest (it is
    /// closed), so silent connections cannot keep everyone else out; but
    /// see `pending_handshake_grace`.
    pub max_pending_handshakes: usize,
    /// How long a pending handshake is safe from eviction (default 500 ms).
    /// While all `max_pending_handshakes` are younger, the listeners accept
    /// nobody new: newcomers wait in the kernel's backlog until a handshake
    /// completes, fails, or ages past this. A burst of joins (a server
    /// restart, a load test) is then let in a table at a time instead of
    /// evicting handshakes that only waited for the CPU; silent connections
    /// hold a place for at most this long once newcomers queue behind them.
    pub pending_handshake_grace: Duration,
    /// Connections in their handshake from one address at once (default 8;
    /// an IPv6 address counts per /64). Further ones from that address are
    /// closed at once, before any byte is read from them.
    pub max_pending_handshakes_per_ip: usize,
    /// Connections open or in their handshake from one address (default
    /// 64). Further ones from that address are closed at once.
    pub max_connections_per_ip: usize,
    /// Bytes of one connection's messages waiting in the server's shared
    /// event queue (default 1 MiB). Past it that connection's reader waits
    /// for the server to catch up (TCP pushes back on the peer), so a fast
    /// or big sender cannot fill the queue ahead of everyone else: another
    /// peer's message waits behind at most this much of it.
    pub max_queued_bytes_per_peer: usize,
    /// A WebSocket listener beside the TCP one (default none): browsers and
    /// other WebSocket clients speak the same protocol on it, one frame per
    /// binary message, and join the same peer table under the same limits
    /// (the per-address ones count both listeners' connections together).
    pub websocket: Option<WebSocketConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            socket: SocketConfig::default(),
            max_connections: 1024,
            max_pending_handshakes: 64,
            pending_handshake_grace: Duration::from_millis(500),
            max_pending_handshakes_per_ip: 8,
            max_connections_per_ip: 64,
            max_queued_bytes_per_peer: 1024 * 1024,
            websocket: None,
        }
    }
}
