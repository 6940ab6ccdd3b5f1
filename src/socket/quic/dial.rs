//! A client's QUIC connection: `quic://host:port`, the server checked as
//! over TCP, one stream opened for the connection's protocol.

use std::net::SocketAddr;
use std::sync::Arc;

use super::{transport, Carrier, Datagrams, QuicConfig, ALPN};
use crate::socket::dial::{Opening, Transport};
use crate::socket::SocketConfig;
use crate::tls::{is_loopback, ServerTrust, TlsClient};

/// What a `quic://` connector opens: the connection's stream, and its
/// datagrams for the sequenced channels.
pub struct QuicTransport {
    pub(crate) link: Arc<Datagrams>,
    pub(crate) send: quinn::SendStream,
    pub(crate) recv: quinn::RecvStream,
}

impl std::fmt::Debug for QuicTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicTransport")
            .field("remote", &self.link.remote_address())
            .finish_non_exhaustive()
    }
}

impl QuicTransport {
    /// The stream alone, for a protocol read and written as bytes (its
    /// datagrams unused).
    pub fn into_stream(self) -> tokio::io::Join<quinn::RecvStream, quinn::SendStream> {
        tokio::io::join(self.recv, self.send)
    }

    /// Its parts: the QUIC connection, and the stream's halves (a tool or
    /// a test that speaks the protocol by hand).
    pub fn into_parts(self) -> (quinn::Connection, quinn::SendStream, quinn::RecvStream) {
        (self.link.connection().clone(), self.send, self.recv)
    }
}

/// Bytes of datagrams a client keeps waiting to be read (a server's is its
/// `QuicConfig::datagram_buffer`; to be sent, the default of
/// `QuicConfig::datagram_send_buffer`).
const CLIENT_DATAGRAM_BUFFER: usize = 256 * 1024;

/// Opens a QUIC connection to `server` (`host:port`) and its stream. The
/// server is checked by `tls` (`None`: the dialer's owner chose plaintext,
/// which QUIC does not have: any certificate, with a warning); a server on
/// this machine is not checked (its certificate is made at its start, and
/// nothing leaves the machine).
pub(in crate::socket) fn opening(
    tls: Option<TlsClient>,
    server: &str,
    config: &SocketConfig,
    from: Option<std::net::IpAddr>,
) -> Opening {
    let server = server.to_string();
    let transport = transport(
        config,
        &QuicConfig {
            datagram_buffer: CLIENT_DATAGRAM_BUFFER,
            // A client takes no streams from its server.
            webtransport: None,
            ..QuicConfig::default()
        },
    );
    Box::pin(async move {
        let addr = resolve(&server).await?;
        let tls = match tls {
            _ if is_loopback(addr.ip()) => TlsClient::new(ServerTrust::this_machine()),
            Some(tls) => tls,
            None => {
                tracing::warn!(
                    server,
                    "INSECURE: QUIC to another machine with its certificate unchecked"
                );
                TlsClient::new(ServerTrust::this_machine())
            }
        };
        let (rustls, verifier) = tls.config(&server, vec![ALPN.to_vec()])?;
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(rustls)
            .map_err(std::io::Error::other)?;
        let mut client = quinn::ClientConfig::new(Arc::new(crypto));
        client.transport_config(Arc::new(transport));
        let local: SocketAddr = match from {
            Some(ip) => (ip, 0).into(),
            None if addr.is_ipv6() => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
            None => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        };
        let endpoint = quinn::Endpoint::client(local)?;
        let host = crate::tls::host_of(&server);
        crate::tls::server_name(&server)?;
        let connecting = endpoint
            .connect_with(client, addr, host)
            .map_err(std::io::Error::other)?;
        let connection = connecting.await.map_err(|err| {
            match verifier.refused.lock().expect("refused lock").take() {
                Some(why) => std::io::Error::other(format!("refusing {server}: {why}")),
                None => std::io::Error::other(format!("QUIC with {server} failed: {err}")),
            }
        })?;
        if verifier.seen.lock().expect("seen lock").is_none() {
            return Err(std::io::Error::other("no certificate seen"));
        }
        let (send, recv) = connection.open_bi().await?;
        let link = Datagrams::new(Carrier::Quic(connection), Some(endpoint), None);
        Ok(Transport::Quic(QuicTransport { link, send, recv }))
    })
}

/// The first address of `server`.
async fn resolve(server: &str) -> std::io::Result<SocketAddr> {
    tokio::net::lookup_host(server)
        .await?
        .next()
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{server} resolves to no address"),
            )
        })
}
