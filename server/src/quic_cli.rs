//! `--quic-port`, shared by every mode that serves players: QUIC beside the
//! TCP port.

use clap::Args;
use switchboard::socket::quic::QuicConfig;
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
    /// Puts the QUIC port into `server` when one was given.
    pub(crate) fn apply(&self, server: &mut EndpointConfig) {
        if let Some(port) = self.quic_port {
            server.quic = Some(QuicConfig::on(port));
        }
    }
}

/// Prints where QUIC clients connect, if they can.
pub(crate) fn announce(addr: Option<std::net::SocketAddr>) {
    if let Some(addr) = addr {
        println!("QUIC clients: quic://{addr}");
    }
}
