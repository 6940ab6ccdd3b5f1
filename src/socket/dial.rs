//! How a client's connection opens, by the form of its address: `host:port`
//! (TCP) and `ws://host:port/` (WebSocket) are the socket's own; any other
//! form is a [`Connector`]'s, plugged in by the feature that owns it (the
//! hosting crate's join codes, `CODE@relay:port`; the next transports). The
//! socket knows no feature's protocol: a connector hands it a byte stream
//! with its own first bytes already exchanged, and the framed protocol runs
//! over it as over any TCP stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{Socket, SocketConfig};

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
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Tcp(stream) => f.debug_tuple("Tcp").field(stream).finish(),
            Transport::Stream(_) => f.write_str("Stream(..)"),
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
    fn open(&self, addr: &str) -> Opening;
}

/// The connectors a client dials with: the socket's own address forms, and
/// those of the connectors added. Cheap to clone.
#[derive(Clone, Default)]
pub struct Dialer {
    connectors: Vec<Arc<dyn Connector>>,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("connectors", &self.connectors.len())
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

    /// Starts connecting to `addr` as its form says, and returns at once
    /// (see [`Socket::connect`]).
    pub fn connect(&self, addr: &str, config: SocketConfig) -> Socket {
        if let Some(connector) = self.connectors.iter().find(|c| c.accepts(addr)) {
            return Socket::connect_with(connector.open(addr), config);
        }
        if addr.starts_with("ws://") {
            return Socket::connect_ws(addr, config);
        }
        if let Some((code, at)) = addr.split_once('@') {
            // Not an address TCP can resolve: say what it looks like.
            let why = format!(
                "{addr:?} looks like a join code ({code}) at {at}: this client has no connector \
                 for it (join codes: switchboard_hosting::JoinCodes, docs/HOSTING.md)"
            );
            let failed: Opening =
                Box::pin(
                    async move { Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why)) },
                );
            return Socket::connect_with(failed, config);
        }
        Socket::connect(addr.to_string(), config)
    }
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

        fn open(&self, addr: &str) -> Opening {
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

        fn open(&self, _: &str) -> Opening {
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
