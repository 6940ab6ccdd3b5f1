//! [`Listener`]: the one accept loop of every server in the project (the
//! game's TCP and WebSocket ports, the relay's JSON-lines port, the AxisPy
//! port, the admin HTTP port, the join-code relay). It accepts until its
//! stop token is cancelled, backs off when accepting fails (out of file
//! descriptors above all: the process's open-file limit is shared among its
//! listeners by `process::share_descriptors`), and lets a connection in
//! only within its caps: open connections in total and per address, and
//! connections still in their handshake (before the server knows what they
//! are) in total and per address. A connection over a cap is closed at
//! accept, before a byte is read, and counted.
//!
//! The game server's own ports admit through its gate instead of caps
//! (per-address caps that hold only when the server is under pressure, the
//! oldest pending handshake evicted, a turned-away peer told why): they
//! use the same loop with [`ListenerLimits::UNCAPPED`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use switchboard_proto::limits::{BackoffPolicy, ConnectionSlot, ConnectionSlots};

/// The caps of a [`Listener`]; each server documents them as its own
/// config fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one address (an IPv6 /64 as one).
    pub max_connections_per_address: usize,
    /// Connections in their handshake at once (until the server calls
    /// [`Arrival::handshake_done`]).
    pub max_pending: usize,
    /// Connections in their handshake at once from one address.
    pub max_pending_per_address: usize,
}

impl ListenerLimits {
    /// No caps: the server admits by its own rules.
    pub const UNCAPPED: ListenerLimits = ListenerLimits {
        max_connections: usize::MAX,
        max_connections_per_address: usize::MAX,
        max_pending: usize::MAX,
        max_pending_per_address: usize::MAX,
    };

    /// Caps on open connections only (every connection's handshake counts
    /// within them).
    pub fn open(max_connections: usize, max_connections_per_address: usize) -> Self {
        Self {
            max_connections,
            max_connections_per_address,
            ..Self::UNCAPPED
        }
    }
}

/// A listener's caps as counts of what is open: clones share them, so that
/// several listeners (a server's TCP and WebSocket ports) can share one set.
#[derive(Debug, Clone)]
pub struct ListenerCaps {
    /// `None`: uncapped.
    slots: Option<(ConnectionSlots, ConnectionSlots)>,
}

impl ListenerCaps {
    /// Fresh counts under `limits`.
    pub fn new(limits: ListenerLimits) -> Self {
        Self {
            slots: (limits != ListenerLimits::UNCAPPED).then(|| {
                (
                    ConnectionSlots::new(
                        limits.max_connections,
                        limits.max_connections_per_address,
                    ),
                    ConnectionSlots::new(limits.max_pending, limits.max_pending_per_address),
                )
            }),
        }
    }

    /// Connections open now under these caps (0 uncapped).
    pub fn open(&self) -> usize {
        self.slots.as_ref().map_or(0, |(open, _)| open.open())
    }

    /// Of those, connections still in their handshake (0 uncapped).
    pub fn pending(&self) -> usize {
        self.slots.as_ref().map_or(0, |(_, pending)| pending.open())
    }
}

/// A connection let in: its stream (`TCP_NODELAY` set), the peer's
/// address, and its places under the caps, held while it lives.
#[derive(Debug)]
pub struct Arrival {
    /// The connection.
    pub stream: TcpStream,
    /// The peer.
    pub addr: SocketAddr,
    /// Connections open under the caps as it came in, itself included.
    pub open: usize,
    places: Places,
}

impl Arrival {
    /// The connection finished its handshake: its pending place is given
    /// back (its open place stays until it is dropped).
    pub fn handshake_done(&mut self) {
        self.places.handshake_done();
    }

    /// The connection's places, to keep while it lives (with the stream
    /// moved elsewhere).
    pub fn into_parts(self) -> (TcpStream, SocketAddr, Places) {
        (self.stream, self.addr, self.places)
    }
}

/// A connection's places under its listener's caps; given back on drop.
#[derive(Debug)]
pub struct Places {
    _open: Option<ConnectionSlot>,
    pending: Option<ConnectionSlot>,
}

impl Places {
    /// The handshake is done: the pending place is given back.
    pub fn handshake_done(&mut self) {
        self.pending = None;
    }
}

/// How long the loop waits after failed accepts in a row: 5 ms, doubling,
/// at most a second (the project's one backoff rule).
const ACCEPT_BACKOFF: BackoffPolicy = BackoffPolicy {
    first: Duration::from_millis(5),
    max: Duration::from_secs(1),
    max_addresses: 1,
};

/// A listening socket, its caps and its stop.
#[derive(Debug)]
pub struct Listener {
    listener: TcpListener,
    name: &'static str,
    caps: ListenerCaps,
    stop: CancellationToken,
    refused: Arc<AtomicU64>,
    failures: u32,
}

impl Listener {
    /// Accepts on `listener` (`name` for logs) within `limits`, until `stop`.
    pub fn new(
        listener: TcpListener,
        name: &'static str,
        limits: ListenerLimits,
        stop: CancellationToken,
    ) -> Self {
        Self::with_caps(listener, name, ListenerCaps::new(limits), stop)
    }

    /// Like [`new`](Self::new), within caps shared with other listeners.
    pub fn with_caps(
        listener: TcpListener,
        name: &'static str,
        caps: ListenerCaps,
        stop: CancellationToken,
    ) -> Self {
        Self {
            listener,
            name,
            caps,
            stop,
            refused: Arc::default(),
            failures: 0,
        }
    }

    /// Counts its refusals in `counter` (a server's own statistics) rather
    /// than a counter of its own.
    pub fn counting_refusals_in(mut self, counter: Arc<AtomicU64>) -> Self {
        self.refused = counter;
        self
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Connections closed at accept for a cap, so far (shared: it may be
    /// read from elsewhere).
    pub fn refused(&self) -> Arc<AtomicU64> {
        self.refused.clone()
    }

    /// Connections open now under this listener's caps (0 uncapped).
    pub fn open(&self) -> usize {
        self.caps.open()
    }

    /// The next connection let in; `None` once the stop token is cancelled.
    /// Connections over a cap are closed here (logged at DEBUG, counted in
    /// [`refused`](Self::refused)).
    pub async fn next(&mut self) -> Option<Arrival> {
        loop {
            let accepted = tokio::select! {
                biased;
                () = self.stop.cancelled() => return None,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, addr) = match accepted {
                Ok(accepted) => {
                    self.failures = 0;
                    accepted
                }
                Err(err) => {
                    // Out of file descriptors and the like: wait, go on.
                    self.failures = self.failures.saturating_add(1);
                    let wait = ACCEPT_BACKOFF.wait_after(self.failures);
                    tracing::warn!(listener = self.name, %err, ?wait, "accept failed");
                    tokio::select! {
                        () = self.stop.cancelled() => return None,
                        () = tokio::time::sleep(wait) => {}
                    }
                    continue;
                }
            };
            let places = match &self.caps.slots {
                None => Ok((None, None)),
                Some((open, pending)) => open
                    .take(addr.ip())
                    .and_then(|open| Ok((Some(open), Some(pending.take(addr.ip())?)))),
            };
            match places {
                Ok((open, pending)) => {
                    let _ = stream.set_nodelay(true);
                    return Some(Arrival {
                        stream,
                        addr,
                        open: self.open(),
                        places: Places {
                            _open: open,
                            pending,
                        },
                    });
                }
                Err(why) => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(listener = self.name, %addr, %why, "over the caps: closed at accept");
                }
            }
        }
    }

    /// Runs `serve` on a task of its own for each connection let in, until
    /// the stop token is cancelled (the connections' tasks end their own
    /// way: most watch the same token).
    pub async fn serve<F, Fut>(mut self, mut serve: F)
    where
        F: FnMut(Arrival) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        while let Some(arrival) = self.next().await {
            tokio::spawn(serve(arrival));
        }
        tracing::debug!(listener = self.name, "stopped accepting");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_connection_over_a_cap_is_closed_at_accept_and_counted() {
        let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = CancellationToken::new();
        let limits = ListenerLimits {
            max_pending_per_address: 1,
            ..ListenerLimits::open(8, 2)
        };
        let mut listener = Listener::new(socket, "test", limits, stop.clone());
        let refused = listener.refused();
        let (arrived, mut arrivals) = tokio::sync::mpsc::unbounded_channel();
        let accepting = tokio::spawn(async move {
            while let Some(arrival) = listener.next().await {
                arrived.send(arrival).unwrap();
            }
        });
        let mut byte = [0u8; 1];
        let _first = TcpStream::connect(addr).await.unwrap();
        let mut first_in = arrivals.recv().await.expect("the first is let in");
        // A second from the same address while the first is in its
        // handshake: over the pending cap, closed without a byte.
        let mut second = TcpStream::connect(addr).await.unwrap();
        assert_eq!(second.read(&mut byte).await.unwrap(), 0, "closed at once");
        assert_eq!(refused.load(Ordering::Relaxed), 1);
        first_in.handshake_done();
        let _third = TcpStream::connect(addr).await.unwrap();
        let mut third_in = arrivals.recv().await.expect("the third is let in");
        third_in.handshake_done();
        // Two open from the address: the next is over the open cap.
        let mut fourth = TcpStream::connect(addr).await.unwrap();
        assert_eq!(fourth.read(&mut byte).await.unwrap(), 0, "closed at once");
        assert_eq!(refused.load(Ordering::Relaxed), 2);
        // A place given back is taken again.
        drop(first_in);
        let _fifth = TcpStream::connect(addr).await.unwrap();
        let fifth_in = arrivals.recv().await.expect("the fifth is let in");
        stop.cancel();
        accepting.await.unwrap();
        assert!(arrivals.recv().await.is_none(), "nothing once stopped");
        drop((third_in, fifth_in));
    }
}
