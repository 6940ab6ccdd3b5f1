//! The client's side: its handshake, checked by a [`ServerTrust`], with
//! errors that name their cause.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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
    /// plaintext, a key that changed, a key nothing trusts. A server that
    /// turned the client away before TLS (a hello and a close frame, in
    /// plaintext: a busy server tells why at accept) is heard: its close
    /// comes back as the error, `SERVER_FULL` with its retry-after as a
    /// connection turned away for now (which `Socket::connect_with` reports
    /// as `ClosedByPeer`, and a client retries).
    pub async fn handshake<S>(
        &self,
        stream: S,
        server: &str,
    ) -> std::io::Result<(ClientTlsStream<S>, Fingerprint)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let (config, verifier) = self.config(server, Vec::new())?;
        let name = server_name(server)?;
        let recorded = Recorded {
            inner: stream,
            first: Some(Vec::new()),
        };
        let connecting = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, recorded)
            .into_fallible();
        match connecting.await {
            Ok(mut stream) => {
                stream.get_mut().0.first = None;
                let seen = verifier.seen.lock().expect("seen lock").take();
                let seen = seen.ok_or_else(|| std::io::Error::other("no certificate seen"))?;
                Ok((stream, seen))
            }
            Err((err, recorded)) => {
                let first = recorded.first.unwrap_or_default();
                Err(plain_refusal(&first, server).unwrap_or_else(|| explain(err, server)))
            }
        }
    }
}

/// A client's TLS stream ([`TlsClient::handshake`]).
pub type ClientTlsStream<S> = tokio_rustls::client::TlsStream<Recorded<S>>;

/// Bytes of a server's first answer kept while a handshake runs.
const KEPT: usize = 1024;

/// A client's stream under its TLS: while the handshake runs it keeps a
/// copy of the first bytes read (up to 1 KiB), so that a server that
/// answered in plaintext can be heard; after it, it only passes bytes on.
#[derive(Debug)]
pub struct Recorded<S> {
    inner: S,
    first: Option<Vec<u8>>,
}

impl<S> Recorded<S> {
    /// The stream underneath.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Recorded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Some(first) = &mut this.first {
            let read = &buf.filled()[before..];
            let room = KEPT.saturating_sub(first.len());
            first.extend_from_slice(&read[..read.len().min(room)]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Recorded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What a server that answered in plaintext said, if it was a Switchboard
/// hello and a close frame turning the client away: the close as the
/// handshake's error (a busy server's `SERVER_FULL`, with its retry-after,
/// as turned away for now; a join-code relay's refusal in its words).
/// `None` for a plain server that only could not read the TLS hello.
fn plain_refusal(first: &[u8], server: &str) -> Option<std::io::Error> {
    use switchboard_proto::connection::control;
    let config = crate::codec::CodecConfig::default();
    let mut buffered = bytes::BytesMut::from(first);
    let hello = crate::codec::FrameDecoder::new(config.clone())
        .decode(&mut buffered)
        .ok()??;
    if control::parse_hello(&hello.payload) == control::PeerHello::NotSwitchboard {
        return None;
    }
    let close = control::close_behind_hello(&buffered, &config)?;
    use crate::socket::CloseCode;
    match close.code {
        CloseCode::SERVER_FULL => {
            return Some(std::io::Error::other(crate::socket::TurnedAway {
                why: close.reason,
            }))
        }
        // A plain server that read the TLS hello as a bad frame: "answered
        // in plaintext" says what to do.
        CloseCode::PROTOCOL_ERROR | CloseCode::VERSION_MISMATCH => return None,
        _ => {}
    }
    Some(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("{server} refused: {} ({})", close.reason, close.code),
    ))
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
