//! `--quic-port`, shared by every mode that serves players: QUIC beside the
//! TCP port.

use clap::Args;
use switchboard::socket::quic::QuicConfig;
use switchboard::socket::WebTransportOffer;
use switchboard::EndpointConfig;

/// `--quic-port`.
#[derive(Debug, Args)]
pub(crate) struct QuicArgs {
    /// Also listen for QUIC clients on this UDP port (`quic://host:port`):
    /// the same protocol, sessions, rooms and zones as the TCP port, with
    /// sequenced channels (the relay's transforms) as datagrams that no
    /// lost packet holds back. 0 picks a port.
    #[arg(long)]
    quic_port: Option<u16>,
}

impl QuicArgs {
    /// Puts the QUIC port into `server` when one was given, WebTransport on
    /// it for browsers from the origins the WebSocket port allows
    /// (`--ws-origin`, applied before this).
    pub(crate) fn apply(&self, server: &mut EndpointConfig) {
        if let Some(port) = self.quic_port {
            let mut quic = QuicConfig::on(port);
            if let (Some(web), Some(ws)) = (&mut quic.webtransport, &server.websocket) {
                web.allowed_origins = ws.allowed_origins.clone();
            }
            server.quic = Some(quic);
        }
    }
}

/// Prints where QUIC clients connect, if they can, and where browsers
/// reach the same port over WebTransport, trusting which certificates.
pub(crate) fn announce(addr: Option<std::net::SocketAddr>, web: Option<WebTransportOffer>) {
    let Some(addr) = addr else { return };
    println!("QUIC clients: quic://{addr}");
    let Some(web) = web else { return };
    let hashes: Vec<String> = web.hashes().iter().map(ToString::to_string).collect();
    match hashes.split_first() {
        Some((now, next)) => println!(
            "WebTransport (browsers): https://{addr}/ trusting the certificate hash {now} \
             (next {}; a page served here reads them from /webtransport)",
            next.join(", ")
        ),
        None => println!("WebTransport (browsers): https://{addr}/ (the server's certificate)"),
    }
}
