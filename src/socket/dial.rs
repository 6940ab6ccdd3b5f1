//! How a client's connection opens, by the form of its address: `host:port`
//! (TCP), `tls://host:port`, `ws://host:port/` and `wss://host:port/`
//! (WebSocket), `quic://host:port` (QUIC) are the socket's own; any other form is a [`Connector`]'s,
//! plugged in by the feature that owns it (the hosting crate's join codes,
//! `CODE@relay:port`; the next transports). The socket knows no feature's
//! protocol: a connector hands it a byte stream with its own first bytes
//! already exchanged, and the framed protocol runs over it as over any TCP
//! stream.
//!
//! What leaves the machine is encrypted: `host:port` of another machine is
//! dialed with TLS, checked by the dialer's [`ServerTrust`]; `ws://` to
//! another machine is refused (say `wss://`). Only a dialer made
//! [`insecure_plaintext`](Dialer::insecure_plaintext) speaks plain to
//! another machine, and it logs a warning each time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{websocket, Socket, SocketConfig};
use crate::tls::{is_loopback_host, ServerTrust, TlsClient};

/// Any byte stream the framed protocol can run over.
pub trait ByteStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> ByteStream for T {}

/// What a [`Connector`] opens: the layer the connection's protocol runs
/// over. A TCP stream runs as [`Socket::connect`]'s do (senders write to it
/// directly while its writer idles); any other byte stream (a TLS session
/// over TCP, a tunnel) through the same connection task.
pub enum Transport {
    /// A plain TCP stream.
    Tcp(TcpStream),
    /// Any other byte stream.
    Stream(Box<dyn ByteStream>),
    /// A QUIC connection (`quic://host:port`): its stream, and datagrams
    /// for the sequenced channels.
    Quic(super::quic::QuicTransport),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Tcp(stream) => f.debug_tuple("Tcp").field(stream).finish(),
            Transport::Stream(_) => f.write_str("Stream(..)"),
            Transport::Quic(quic) => f.debug_tuple("Quic").field(quic).finish(),
        }
    }
}

impl Transport {
    /// The stream, whichever it is, for a protocol read and written as
    /// bytes.
    pub fn into_stream(self) -> Box<dyn ByteStream> {
        match self {
            Transport::Tcp(stream) => Box::new(stream),
            Transport::Stream(stream) => stream,
            Transport::Quic(quic) => Box::new(quic.into_stream()),
        }
    }
}

impl From<TcpStream> for Transport {
    fn from(stream: TcpStream) -> Self {
        Transport::Tcp(stream)
    }
}

/// A transport being opened by a [`Connector`].
pub type Opening = Pin<Box<dyn Future<Output = std::io::Result<Transport>> + Send>>;

/// Opens the transport for addresses of one form.
pub trait Connector: Send + Sync + 'static {
    /// Whether this connector opens `addr`.
    fn accepts(&self, addr: &str) -> bool;
    /// Opens a transport to `addr` (one it [`accepts`](Self::accepts)),
    /// with whatever it needs exchanged first already done (a relay's join
    /// frame, a TLS handshake): the framed protocol's hello goes next.
    /// `tls` is the dialer's TLS (`None`: its owner chose plaintext), for a
    /// connector that runs TLS inside its own transport (the join-code
    /// relay's pipe, end to end with the host).
    fn open(&self, addr: &str, tls: Option<&TlsClient>) -> Opening;
}

/// The connectors a client dials with: the socket's own address forms, and
/// those of the connectors added; and how it checks servers off this
/// machine. Cheap to clone.
#[derive(Clone, Default)]
pub struct Dialer {
    connectors: Vec<Arc<dyn Connector>>,
    tls: TlsClient,
    plaintext: bool,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("connectors", &self.connectors.len())
            .field("tls", &self.tls)
            .field("plaintext", &self.plaintext)
            .finish()
    }
}

impl Dialer {
    /// This dialer with `connector` too (asked before the ones added
    /// earlier, and before the socket's own forms).
    pub fn with(mut self, connector: impl Connector) -> Self {
        self.connectors.insert(0, Arc::new(connector));
        self
    }

    /// Checks servers off this machine by `trust` (default
    /// [`ServerTrust::default`]: the platform's roots, then trust on first
    /// use).
    pub fn trust(mut self, trust: ServerTrust) -> Self {
        self.tls = TlsClient::new(trust);
        self
    }

    /// Checks servers off this machine with `tls`, a client already made
    /// (its trust and its known hosts), as [`trust`](Self::trust) does.
    pub fn with_tls(mut self, tls: TlsClient) -> Self {
        self.tls = tls;
        self
    }

    /// Speaks plaintext to other machines too (`host:port`, `ws://`), each
    /// time with a warning in the log: everything (the password, the
    /// reconnect token, every message) travels in the clear. `tls://` and
    /// `wss://` still speak TLS.
    pub fn insecure_plaintext(mut self) -> Self {
        self.plaintext = true;
        self
    }

    /// The TLS it speaks off this machine (for a connector that runs TLS
    /// inside its own transport, as the join-code relay's does).
    pub fn tls(&self) -> Option<&TlsClient> {
        (!self.plaintext).then_some(&self.tls)
    }

    /// Starts connecting to `addr` as its form says, and returns at once
    /// (see [`Socket::connect`]).
    pub fn connect(&self, addr: &str, config: SocketConfig) -> Socket {
        if let Some(connector) = self.connectors.iter().find(|c| c.accepts(addr)) {
            return Socket::connect_with(connector.open(addr, self.tls()), config);
        }
        if let Some(server) = addr.strip_prefix("tls://") {
            return Socket::connect_with(tls_opening(self.tls.clone(), server), config);
        }
        if let Some(server) = addr.strip_prefix("quic://") {
            return Socket::connect_with(self.open_quic(server, &config), config);
        }
        if addr.starts_with("wss://") {
            return Socket::connect_with(wss_opening(self.tls.clone(), addr, &config), config);
        }
        if let Some(rest) = addr.strip_prefix("ws://") {
            let authority = rest.split(['/', '?']).next().unwrap_or_default();
            if !is_loopback_host(authority) && !self.plaintext_to(addr) {
                let why = format!(
                    "{addr} is another machine and ws:// is plaintext: connect with wss:// \
                     (or, on a network you trust end to end, with an insecure-plaintext dialer)"
                );
                return Socket::connect_with(failed(why), config);
            }
            return Socket::connect_ws(addr, config);
        }
        if let Some((code, at)) = addr.split_once('@') {
            // Not an address TCP can resolve: say what it looks like.
            let why = format!(
                "{addr:?} looks like a join code ({code}) at {at}: this client has no connector \
                 for it (join codes: switchboard_hosting::JoinCodes, docs/HOSTING.md)"
            );
            return Socket::connect_with(failed(why), config);
        }
        if !is_loopback_host(addr) && !self.plaintext_to(addr) {
            return Socket::connect_with(tls_opening(self.tls.clone(), addr), config);
        }
        Socket::connect(addr.to_string(), config)
    }

    /// Opens a byte stream to `addr` (`host:port`, or `tls://host:port`) by
    /// the rules [`connect`](Self::connect) follows: TLS to another machine,
    /// checked by this dialer's trust; plain to this one. For a protocol
    /// that is not the framed one (a join-code host's link to its relay).
    pub fn open_stream(&self, addr: &str) -> Opening {
        if let Some(server) = addr.strip_prefix("tls://") {
            return tls_opening(self.tls.clone(), server);
        }
        if !is_loopback_host(addr) && !self.plaintext_to(addr) {
            return tls_opening(self.tls.clone(), addr);
        }
        let addr = addr.to_string();
        Box::pin(async move {
            let stream = TcpStream::connect(&addr).await?;
            let _ = stream.set_nodelay(true);
            Ok(Transport::Tcp(stream))
        })
    }

    /// Opens a QUIC connection to `server` (`host:port`) and its stream,
    /// checked by this dialer's trust (a server on this machine is not),
    /// without starting the protocol: for a tool that speaks it by hand.
    pub fn open_quic(&self, server: &str, config: &SocketConfig) -> Opening {
        super::quic::opening(self.tls().cloned(), server, config, None)
    }

    /// [`open_quic`](Self::open_quic) from a UDP socket bound to `from`
    /// (one of this machine's addresses): a load tester's bots spread over
    /// loopback addresses, as players come from many.
    pub fn open_quic_from(
        &self,
        server: &str,
        config: &SocketConfig,
        from: std::net::IpAddr,
    ) -> Opening {
        super::quic::opening(self.tls().cloned(), server, config, Some(from))
    }

    /// Whether this dialer speaks plain to `addr`, another machine (and
    /// says so in the log).
    fn plaintext_to(&self, addr: &str) -> bool {
        if self.plaintext {
            tracing::warn!(
                server = addr,
                "INSECURE PLAINTEXT to another machine: everything travels in the clear"
            );
        }
        self.plaintext
    }
}

/// A server turned the connection away for now before it opened (a
/// WebSocket listener's 503 with its `Retry-After`, or a TLS port's
/// plaintext hello and `SERVER_FULL` close): the opening's error, which
/// the connection reports as `ClosedByPeer` with `SERVER_FULL`, as a TCP
/// client that is told at accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub(crate) struct TurnedAway {
    /// The server's words, with the retry-after.
    pub(crate) why: String,
}

/// An opening that fails at once, saying `why`.
fn failed(why: String) -> Opening {
    Box::pin(async move { Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why)) })
}

/// TCP to `server` (`host:port`), then TLS checked by `tls`.
fn tls_opening(tls: TlsClient, server: &str) -> Opening {
    let server = server.to_string();
    Box::pin(async move {
        let stream = TcpStream::connect(&server).await?;
        let _ = stream.set_nodelay(true);
        let (stream, _) = tls.handshake(stream, &server).await?;
        Ok(Transport::Stream(Box::new(stream)))
    })
}

/// TCP to the server of a `wss://` `url`, TLS checked by `tls`, then the
/// WebSocket upgrade inside it.
fn wss_opening(tls: TlsClient, url: &str, config: &SocketConfig) -> Opening {
    let url = url.to_string();
    let codec = config.codec.clone();
    Box::pin(async move {
        let target = websocket::WsUrl::parse(&url)?;
        let server = target.authority();
        let stream = TcpStream::connect((target.host.as_str(), target.port)).await?;
        let _ = stream.set_nodelay(true);
        let (stream, _) = tls.handshake(stream, &server).await?;
        let ws = websocket::client_handshake(&url, stream, &codec).await?;
        Ok(Transport::Stream(Box::new(websocket::FrameStream::new(ws))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::DisconnectReason;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// Dials `addr` and returns how the connection ended.
    fn ending(dialer: &Dialer, addr: &str) -> DisconnectReason {
        let mut socket = dialer.connect(addr, SocketConfig::default());
        let end = Arc::new(Mutex::new(None));
        let seen = end.clone();
        socket
            .signals()
            .disconnected
            .connect(move |reason| *seen.lock().unwrap() = Some(reason.clone()));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            socket.poll_timeout(Duration::from_millis(20));
            if let Some(reason) = end.lock().unwrap().take() {
                return reason;
            }
            assert!(Instant::now() < deadline, "no end for {addr}");
        }
    }

    #[test]
    fn a_join_code_without_its_connector_fails_saying_what_it_needs() {
        let reason = ending(&Dialer::default(), "K7PQ2MXB@127.0.0.1:9");
        assert!(
            matches!(&reason, DisconnectReason::ConnectFailed(e) if e.to_string().contains("JoinCodes")),
            "{reason}"
        );
    }

    /// A connector that opens nothing, and says which address it was given.
    struct Refusing;

    impl Connector for Refusing {
        fn accepts(&self, addr: &str) -> bool {
            addr.starts_with("test:")
        }

        fn open(&self, addr: &str, _: Option<&TlsClient>) -> Opening {
            let why = format!("refusing {addr}");
            Box::pin(async move { Err(std::io::Error::other(why)) })
        }
    }

    /// A connector whose transport is an in-memory pipe to a peer core.
    struct Piped(std::sync::Mutex<Option<tokio::io::DuplexStream>>);

    impl Connector for Piped {
        fn accepts(&self, addr: &str) -> bool {
            addr == "pipe:"
        }

        fn open(&self, _: &str, _: Option<&TlsClient>) -> Opening {
            let end = self.0.lock().unwrap().take();
            Box::pin(async move {
                let end = end.ok_or_else(|| std::io::Error::other("opened once"))?;
                Ok(Transport::Stream(Box::new(end)))
            })
        }
    }

    #[test]
    fn a_connector_s_byte_stream_carries_the_protocol() {
        // The far end of the pipe is a plain socket over the other half:
        // the two handshake, then a message crosses.
        let (near, far) = tokio::io::duplex(64 * 1024);
        let dialer = Dialer::default().with(Piped(std::sync::Mutex::new(Some(near))));
        let mut socket = dialer
            .connect("pipe:", SocketConfig::default())
            .into_stream();
        let mut peer = crate::socket::SocketStream::from_stream(far, SocketConfig::default());
        let connected = crate::runtime::handle().block_on(async {
            let wait = Duration::from_secs(10);
            let mine = tokio::time::timeout(wait, socket.next_event()).await;
            let theirs = tokio::time::timeout(wait, peer.next_event()).await;
            (mine, theirs)
        });
        assert!(
            matches!(
                connected,
                (
                    Ok(Some(crate::socket::SocketEvent::Connected)),
                    Ok(Some(crate::socket::SocketEvent::Connected))
                )
            ),
            "{connected:?}"
        );
    }

    #[test]
    fn an_address_a_connector_accepts_is_opened_by_it() {
        let reason = ending(&Dialer::default().with(Refusing), "test:somewhere");
        assert!(
            matches!(&reason, DisconnectReason::ConnectFailed(e) if e.to_string().contains("refusing test:somewhere")),
            "{reason}"
        );
    }
}
