//! The client's side: its handshake, checked by a [`ServerTrust`], with
//! errors that name their cause.

use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Fingerprint, ServerTrust};

/// A client's TLS: TLS 1.3 only, servers checked by its [`ServerTrust`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsClient {
    trust: ServerTrust,
}

impl TlsClient {
    /// Checks servers by `trust`.
    pub fn new(trust: ServerTrust) -> Self {
        Self { trust }
    }

    /// Runs the client's side of a TLS handshake with `server` (`host:port`
    /// as dialed: the known-hosts entry, and the name a CA-issued
    /// certificate must carry) over `stream`. The error says what went
    /// wrong in words a player can act on: a server that answered in
    /// plaintext, a key that changed, a key nothing trusts.
    pub async fn handshake<S>(
        &self,
        stream: S,
        server: &str,
    ) -> std::io::Result<(tokio_rustls::client::TlsStream<S>, Fingerprint)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let (config, verifier) = self.config(server, Vec::new())?;
        let name = server_name(server)?;
        let connecting = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream);
        match connecting.await {
            Ok(stream) => {
                let seen = verifier.seen.lock().expect("seen lock").take();
                let seen = seen.ok_or_else(|| std::io::Error::other("no certificate seen"))?;
                Ok((stream, seen))
            }
            Err(err) => Err(explain(err, server)),
        }
    }
}

impl TlsClient {
    /// The rustls settings for one server (`host:port` as dialed), offering
    /// `alpn`, and the verifier that will say which certificate it saw.
    pub(crate) fn config(
        &self,
        server: &str,
        alpn: Vec<Vec<u8>>,
    ) -> std::io::Result<(rustls::ClientConfig, Arc<super::Verifier>)> {
        let provider = super::provider();
        let verifier = Arc::new(self.trust.verifier(server, &provider));
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(std::io::Error::other)?
            .dangerous()
            .with_custom_certificate_verifier(verifier.clone())
            .with_no_client_auth();
        config.alpn_protocols = alpn;
        Ok((config, verifier))
    }
}

/// The name to check a CA-issued certificate against: the host of
/// `host:port` (of a join code, the relay's).
pub(crate) fn server_name(server: &str) -> std::io::Result<ServerName<'static>> {
    let host = super::host_of(server);
    ServerName::try_from(host.to_string()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{host:?} is not a host name or address"),
        )
    })
}

/// A handshake's error, said so that its cause is plain.
fn explain(err: std::io::Error, server: &str) -> std::io::Error {
    let kind = err.kind();
    let rustls_error = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let why = match rustls_error {
        // A plain server answers a ClientHello with its own hello, or a
        // close: not TLS records.
        Some(rustls::Error::InvalidMessage(_))
        | Some(rustls::Error::InappropriateMessage { .. }) => {
            format!(
                "{server} answered in plaintext, not TLS: it is a plain server (bound to \
                 loopback, or started with --insecure-plaintext); connect to it in plaintext \
                 only if you trust every network in between"
            )
        }
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))) => {
            format!("refusing {server}: {}", other.0)
        }
        Some(other) => format!("TLS with {server} failed: {other}"),
        None if kind == std::io::ErrorKind::UnexpectedEof => format!(
            "{server} closed the connection during the TLS handshake (it may not speak TLS, \
             or it refused this client)"
        ),
        None => format!("TLS with {server} failed: {err}"),
    };
    std::io::Error::new(kind, why)
}
