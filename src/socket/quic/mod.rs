//! QUIC beside TCP (quinn): the same connection, its reliable part on one
//! QUIC stream and its sequenced channels as QUIC datagrams.
//!
//! A client opens one bidirectional stream and the connection's protocol
//! runs over it exactly as over TCP: the hello, every frame, ping and pong,
//! the close (`connection::run_quic`). The channels a sender declares
//! sequenced ([`SocketConfig::sequenced_channels`](super::SocketConfig))
//! leave as datagrams instead (`datagrams`: one message each, newest wins
//! at the receiver), or on the stream when one does not fit the path.
//!
//! A server's QUIC port ([`EndpointConfig::quic`](super::EndpointConfig))
//! admits through the same gate as its TCP and WebSocket ports (`accept`):
//! the caps per address and in total, pending handshakes. Under load
//! (half the pending handshakes taken) a client whose address is not yet
//! validated is sent a Retry first, so a spoofed source gets one small
//! packet for its Initial and nothing more; quinn never sends an
//! unvalidated address more than three times what it received (RFC 9000,
//! section 8).
//!
//! TLS 1.3 is part of QUIC: a server serves the identity of its TLS
//! settings, or, bound to loopback (or plaintext by the operator's
//! choice), a certificate made at start. A client checks the server by
//! its dialer's [`ServerTrust`](crate::tls::ServerTrust) as over TCP,
//! except a server on this machine, whose certificate it cannot know
//! and to which nothing leaves the machine.

mod accept;
mod datagrams;
mod dial;
mod handle;
pub mod webtransport;

pub(super) use accept::accept_loop;
pub use datagrams::DatagramStats;
pub(crate) use datagrams::{receive, Carrier, Datagrams};
pub(super) use dial::opening;
pub use dial::QuicTransport;
/// The datagram layout and the receiver's newest-wins rule
/// (`docs/PROTOCOL.md` §11a).
pub use switchboard_proto::connection::datagram;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::SocketConfig;
use crate::tls::{ServerIdentity, TlsServer};
use webtransport::ShortLivedCertificates;

/// The protocol a Switchboard QUIC connection negotiates (ALPN).
pub const ALPN: &[u8] = b"switchboard";

/// When a server's QUIC port makes a client prove its address (a Retry:
/// one more round trip) before it spends a handshake on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AddressValidation {
    /// When half of `EndpointConfig::max_pending_handshakes` are taken
    /// (default): a burst of spoofed Initials costs the server one small
    /// Retry each, and players pay the round trip only then.
    #[default]
    UnderLoad,
    /// Always.
    Always,
}

/// A server's QUIC port: UDP beside its TCP port, the same peers, limits
/// and identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicConfig {
    /// The UDP port (0: a free one; read it with
    /// `Endpoint::quic_addr`).
    pub port: u16,
    /// When a client must prove its address first (default under load).
    pub address_validation: AddressValidation,
    /// Datagrams a client may send per second (default 240, and as many
    /// at once). Past it they are dropped and counted, as a lost datagram
    /// would be; the game's and the relay's own budgets apply to what gets
    /// through.
    pub max_datagrams_per_second: u32,
    /// Bytes of a connection's datagrams that may wait to be read
    /// (default 64 KiB): past it the oldest are dropped (newer state
    /// supersedes them).
    pub datagram_buffer: usize,
    /// Bytes of a connection's datagrams that may wait to be sent (default
    /// 4 KiB: a relay tick's view for one player is at most about 2 KiB).
    /// Past it the oldest are dropped: when the path is slower than the
    /// game, a datagram waiting here is late, and the next one makes it
    /// worthless (at 5 % loss and 64 KiB, transforms waited up to 0.8 s).
    pub datagram_send_buffer: usize,
    /// WebTransport for browsers on the same port (default on: see
    /// [`webtransport`]); `None`, native QUIC clients only.
    pub webtransport: Option<webtransport::WebTransportConfig>,
}

impl Default for QuicConfig {
    fn default() -> Self {
        Self {
            port: 0,
            address_validation: AddressValidation::default(),
            max_datagrams_per_second: 240,
            datagram_buffer: 64 * 1024,
            datagram_send_buffer: 4 * 1024,
            webtransport: Some(webtransport::WebTransportConfig::default()),
        }
    }
}

impl QuicConfig {
    /// QUIC on `port`, every other setting its default.
    pub fn on(port: u16) -> Self {
        Self {
            port,
            ..Self::default()
        }
    }
}

/// quinn's transport settings for one of our connections: one stream, no
/// unidirectional ones (with WebTransport on the port: the two
/// bidirectional and three unidirectional streams a browser's HTTP/3
/// session opens; a stream the server never reads holds at most its
/// window, and all of them together the connection's), datagrams within
/// `quic`'s buffers, BBR, and an idle timeout past the connection's own
/// (its pings keep QUIC's path alive; its idle rule decides).
///
/// BBR, not quinn's default Cubic: Cubic reads every loss as congestion,
/// and at 5 % random loss (a mobile link) it shrank the window until a
/// relay's datagrams queued behind it (300 players, 100 ms round trip:
/// p99 304 ms against 190 ms with BBR; docs/PERFORMANCE.md).
fn transport(socket: &SocketConfig, quic: &QuicConfig) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    let (bidi, uni) = if quic.webtransport.is_some() {
        (2u32, 3u32)
    } else {
        (1, 0)
    };
    transport.max_concurrent_bidi_streams(bidi.into());
    transport.max_concurrent_uni_streams(uni.into());
    transport.receive_window((2 * STREAM_WINDOW).into());
    transport.stream_receive_window(STREAM_WINDOW.into());
    transport.datagram_receive_buffer_size(Some(quic.datagram_buffer));
    transport.datagram_send_buffer_size(quic.datagram_send_buffer);
    transport.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
    let idle = socket.idle_timeout + socket.close_timeout;
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(idle).ok());
    // A client behind a NAT keeps its mapping through silence.
    transport.keep_alive_interval(Some(socket.keepalive_interval.min(Duration::from_secs(10))));
    transport
}

/// Bytes a peer may send on one stream ahead of the server's reading
/// (quinn's default; the connection's window is twice this).
const STREAM_WINDOW: u32 = 1_250_000;

/// The QUIC settings of a server whose TCP port speaks `tls` (`None`: on
/// loopback, or plaintext by the operator's choice; then a certificate made
/// now), and with WebTransport, the certificates it serves browsers.
fn server_config(
    tls: Option<&TlsServer>,
    quic: &QuicConfig,
    socket: &SocketConfig,
) -> std::io::Result<(quinn::ServerConfig, Option<Arc<ShortLivedCertificates>>)> {
    let made;
    let tls = match tls {
        Some(tls) => tls,
        None => {
            let identity = ServerIdentity::generate().map_err(std::io::Error::other)?;
            made = TlsServer::new(&identity).map_err(std::io::Error::other)?;
            &made
        }
    };
    let mut rustls = tls.with_alpn(ALPN);
    let certificates = match &quic.webtransport {
        Some(webtransport)
            if webtransport.certificate == webtransport::BrowserCertificate::Identity =>
        {
            rustls.alpn_protocols.push(webtransport::H3_ALPN.to_vec());
            None
        }
        Some(webtransport) => {
            let certificates = ShortLivedCertificates::new(webtransport)?;
            rustls.alpn_protocols.push(webtransport::H3_ALPN.to_vec());
            rustls.cert_resolver = Arc::new(webtransport::ByProtocol {
                native: rustls.cert_resolver.clone(),
                webtransport: certificates.clone(),
            });
            Some(certificates)
        }
        None => None,
    };
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(rustls).map_err(std::io::Error::other)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport(socket, quic)));
    Ok((config, certificates))
}

/// A server's QUIC endpoint on `addr`'s IP and `quic.port`, and with
/// WebTransport, the certificates it serves browsers.
pub(super) fn bind(
    addr: SocketAddr,
    tls: Option<&TlsServer>,
    quic: &QuicConfig,
    socket: &SocketConfig,
) -> std::io::Result<(quinn::Endpoint, Option<Arc<ShortLivedCertificates>>)> {
    let (config, certificates) = server_config(tls, quic, socket)?;
    let _guard = crate::runtime::handle().enter();
    let endpoint = quinn::Endpoint::server(config, SocketAddr::new(addr.ip(), quic.port))?;
    Ok((endpoint, certificates))
}
