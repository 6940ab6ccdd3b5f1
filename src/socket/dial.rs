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

use tokio::net::TcpStream;

use super::{Socket, SocketConfig};

/// A byte stream being opened by a [`Connector`].
pub type Opening = Pin<Box<dyn Future<Output = std::io::Result<TcpStream>> + Send>>;

/// Opens the transport for addresses of one form.
pub trait Connector: Send + Sync + 'static {
    /// Whether this connector opens `addr`.
    fn accepts(&self, addr: &str) -> bool;
    /// Opens a stream to `addr` (one it [`accepts`](Self::accepts)), with
    /// whatever it needs sent first already sent: the framed protocol's
    /// hello goes next.
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

    #[test]
    fn an_address_a_connector_accepts_is_opened_by_it() {
        let reason = ending(&Dialer::default().with(Refusing), "test:somewhere");
        assert!(
            matches!(&reason, DisconnectReason::ConnectFailed(e) if e.to_string().contains("refusing test:somewhere")),
            "{reason}"
        );
    }
}
