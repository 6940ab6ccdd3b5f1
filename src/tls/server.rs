//! The server's side: its TLS settings, and the first step of every
//! connection a listener that speaks TLS takes in.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use super::{Fingerprint, ServerIdentity, TlsError, TlsStream};

/// The first byte of every TLS record that opens a session (a handshake
/// record): a plain Switchboard hello starts with its length's high byte,
/// zero; an HTTP request with a letter.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A listening server's TLS: TLS 1.3 only, its identity, no session
/// tickets (a reconnect is rare and a full handshake costs one round
/// trip). Cheap to clone; two are equal when they present the same
/// certificate.
#[derive(Clone)]
pub struct TlsServer {
    config: Arc<rustls::ServerConfig>,
    fingerprint: Fingerprint,
}

impl fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServer")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl PartialEq for TlsServer {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Eq for TlsServer {}

impl TlsServer {
    /// Serves `identity`.
    pub fn new(identity: &ServerIdentity) -> Result<Self, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(super::provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(identity.chain.clone(), identity.key.clone_key())?;
        config.send_tls13_tickets = 0;
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        Ok(Self {
            config: Arc::new(config),
            fingerprint: identity.fingerprint(),
        })
    }

    /// The fingerprint of the certificate it presents.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Its rustls settings with `alpn` as the only protocol offered: what a
    /// QUIC listener serves (`socket::quic`), the same identity as on TCP.
    pub(crate) fn with_alpn(&self, alpn: &[u8]) -> rustls::ServerConfig {
        let mut config = (*self.config).clone();
        config.alpn_protocols = vec![alpn.to_vec()];
        config
    }

    /// Runs the server's side of a TLS handshake over `stream`.
    pub async fn handshake(&self, stream: TcpStream) -> std::io::Result<TlsStream> {
        TlsStream::accept(stream, self.config.clone()).await
    }
}

/// How a connection to a listener that speaks TLS came in.
#[derive(Debug)]
pub enum Accepted {
    /// It spoke TLS; the handshake is done.
    Tls(TlsStream),
    /// It spoke plain, from this machine: nothing it says leaves it.
    Plain(TcpStream),
    /// It spoke plain from another machine: the server says it speaks
    /// only TLS to other machines, in the plain protocol of its port, and
    /// closes.
    PlaintextRefused(TcpStream),
}

/// The first step of a connection to a listener that speaks TLS: its first
/// byte (read without taking it) tells TLS from plain; a TLS peer gets its
/// handshake, a plain one is let through only from this machine. The
/// caller bounds the time this takes (its handshake timeout: a slow TLS
/// client is dropped with its connection).
pub async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    tls: &TlsServer,
) -> std::io::Result<Accepted> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    if first[0] == TLS_HANDSHAKE_RECORD {
        return Ok(Accepted::Tls(tls.handshake(stream).await?));
    }
    Ok(if super::is_loopback(peer.ip()) {
        Accepted::Plain(stream)
    } else {
        Accepted::PlaintextRefused(stream)
    })
}

/// What a server that speaks only TLS to other machines tells a plain
/// client from one (the reason of its close).
pub const PLAINTEXT_REFUSED: &str = "this server speaks only TLS to other machines: \
    connect with TLS (tls://host:port, wss://), not in plaintext";

/// A server's side of a connection, in TLS or plain: what a listener
/// whose protocol is not the game's (HTTP, JSON lines) runs over.
#[derive(Debug)]
pub enum Secured {
    /// Plain (from this machine, or on a loopback or plaintext listener).
    Plain(TcpStream),
    /// In TLS.
    Tls(TlsStream),
}

/// The first step of a listener whose protocol is not the game's: `Ok`
/// with the stream to speak over (plain when `tls` is `None`: a loopback
/// or plaintext listener), or `Err` with a plain stream from another
/// machine that the listener refuses in its own protocol's words
/// ([`PLAINTEXT_REFUSED`]) before it closes. The caller bounds the time
/// this takes.
pub async fn secure(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&TlsServer>,
) -> std::io::Result<Result<Secured, TcpStream>> {
    let Some(tls) = tls else {
        return Ok(Ok(Secured::Plain(stream)));
    };
    Ok(match accept(stream, peer, tls).await? {
        Accepted::Tls(stream) => Ok(Secured::Tls(stream)),
        Accepted::Plain(stream) => Ok(Secured::Plain(stream)),
        Accepted::PlaintextRefused(stream) => Err(stream),
    })
}

impl tokio::io::AsyncRead for Secured {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Secured::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Secured::Tls(s) => std::pin::Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Secured {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Secured::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Secured::Tls(s) => std::pin::Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Secured::Plain(s) => std::pin::Pin::new(s).poll_write_vectored(cx, bufs),
            Secured::Tls(s) => std::pin::Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Secured::Plain(s) => s.is_write_vectored(),
            Secured::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Secured::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Secured::Tls(s) => std::pin::Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Secured::Plain(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Secured::Tls(s) => std::pin::Pin::new(s).poll_shutdown(cx),
        }
    }
}
