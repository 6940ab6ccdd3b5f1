//! `--quic-port`, shared by every mode that serves players: QUIC beside the
//! TCP port.

use clap::Args;
use switchboard::socket::quic::QuicConfig;
use switchboard::tls::Fingerprint;
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
pub(crate) fn announce(addr: Option<std::net::SocketAddr>, hashes: &[Fingerprint]) {
    let Some(addr) = addr else { return };
    println!("QUIC clients: quic://{addr}");
    if let Some((now, next)) = hashes.split_first() {
        let next: Vec<String> = next.iter().map(ToString::to_string).collect();
        println!(
            "WebTransport (browsers): https://{addr}/ trusting the certificate hash {now} \
             (next {}; a page served here reads them from /webtransport)",
            next.join(", ")
        );
    }
}
