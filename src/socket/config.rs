//! Every limit and timer of a connection and of a listening server.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::websocket::WebSocketConfig;

pub use switchboard_proto::connection::SocketConfig;

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

/// The address this machine uses on its network (the source address of
/// its route out; a UDP socket "connected" to a documentation address
/// sends nothing): what a host tells players on its network, and where a
/// test reaches this machine as another machine would. `None` without a
/// route out.
pub fn lan_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// The settings of a listening [`Endpoint`](super::Endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointConfig {
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
    /// Connections in their handshake from one address at once while the
    /// server is busy (default 8; an IPv6 address counts per /64). Busy
    /// means half of `max_pending_handshakes` taken: until then players
    /// behind one address (a LAN party, a school, a carrier's NAT) are all
    /// let in, as SYN cookies engage only under load. Past it further ones
    /// from that address are turned away before any byte is read from
    /// them, and told why with a retry-after (a hello and a close frame of
    /// code `SERVER_FULL`; over WebSocket inside the upgraded connection);
    /// clients wait that long and try again.
    pub max_pending_handshakes_per_address: usize,
    /// Connections open or in their handshake from one address while the
    /// server is crowded (default 64): half of `max_connections` open or in
    /// their handshake.
    /// Past it further ones from that address are turned away and told so
    /// as above.
    pub max_connections_per_address: usize,
    /// Connections turned away at accept that are being told why at once
    /// (default 1024, from any address: many players behind one NAT may
    /// all need telling): each is written a few bytes and held until its
    /// peer hangs up or `SocketConfig::close_timeout` passes (a task and a
    /// descriptor each). Past it a turned-away connection is closed
    /// without a word.
    pub max_turned_away_told: usize,
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
    /// A QUIC port beside the TCP one (default none): UDP on the same
    /// address, the same protocol on one QUIC stream per connection, and
    /// the sequenced channels as datagrams
    /// ([`SocketConfig::sequenced_channels`]); the same peer table and
    /// limits (the per-address ones count every port's connections
    /// together). Its TLS is the TCP port's identity, or on loopback a
    /// certificate made at start. See [`quic`](super::quic).
    pub quic: Option<super::quic::QuicConfig>,
    /// How it speaks to other machines (default: TLS 1.3 with the
    /// server's own identity from the default data directory; see
    /// [`TlsSettings`](crate::tls::TlsSettings)). A server bound to
    /// loopback ignores it: it speaks plain and pays nothing. A server
    /// bound elsewhere serves TLS, on the TCP and the WebSocket port
    /// (`wss://`) alike, to every peer whose first byte opens a TLS
    /// handshake, lets plain peers in from this machine only (the host's
    /// own game), and tells a plain peer from another machine that it
    /// speaks only TLS (a close of code `REFUSED`; over WebSocket a `403`),
    /// then closes. The TLS handshake counts within
    /// `SocketConfig::handshake_timeout` and the pending-handshake caps, as
    /// the protocol's own hello does after it.
    pub tls: crate::tls::TlsSettings,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            socket: SocketConfig::default(),
            max_connections: 1024,
            max_pending_handshakes: 64,
            pending_handshake_grace: Duration::from_millis(500),
            max_pending_handshakes_per_address: 8,
            max_connections_per_address: 64,
            max_turned_away_told: 1024,
            max_queued_bytes_per_peer: 1024 * 1024,
            websocket: None,
            quic: None,
            tls: crate::tls::TlsSettings::default(),
        }
    }
}
