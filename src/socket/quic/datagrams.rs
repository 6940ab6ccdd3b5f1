//! A QUIC connection's datagrams: the sending side a connection's handle
//! uses for its sequenced channels, and the task that reads them in.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::socket::events::{Batch, Credit, Wrap};
use crate::socket::{SocketEvent, SocketHandle, SocketState};
use switchboard_proto::codec::ContentError;
use switchboard_proto::connection::datagram::{self, Newest};
use switchboard_proto::limits::{RateLimit, TokenBucket};

/// What a connection's datagrams did, counted since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DatagramStats {
    /// Datagrams sent.
    pub sent: u64,
    /// Sequenced messages sent on the stream instead, too big for one
    /// datagram on this path.
    pub sent_on_stream: u64,
    /// Datagrams received and delivered.
    pub delivered: u64,
    /// Datagrams received older than the newest of their channel, dropped.
    pub stale: u64,
    /// Datagrams dropped unread: over the rate limit, or the owner's queue
    /// full (a newer one will come).
    pub dropped: u64,
    /// Datagrams refused: not a message, on a framework channel, or on too
    /// many channels.
    pub refused: u64,
}

#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    sent_on_stream: AtomicU64,
    delivered: AtomicU64,
    stale: AtomicU64,
    dropped: AtomicU64,
    refused: AtomicU64,
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// What carries a connection's datagrams: a native QUIC connection, or a
/// browser's WebTransport session on one (whose datagrams start with the
/// session's id, which `wtransport` adds and strips).
#[derive(Debug)]
pub(crate) enum Carrier {
    /// ALPN `switchboard`.
    Quic(quinn::Connection),
    /// ALPN `h3`: a WebTransport session.
    WebTransport(wtransport::Connection),
}

impl Carrier {
    /// The QUIC connection underneath.
    pub(crate) fn quic(&self) -> &quinn::Connection {
        match self {
            Self::Quic(connection) => connection,
            Self::WebTransport(session) => session.quic_connection(),
        }
    }

    fn max_datagram_size(&self) -> Option<usize> {
        match self {
            Self::Quic(connection) => connection.max_datagram_size(),
            Self::WebTransport(session) => session.max_datagram_size(),
        }
    }

    /// `Ok(true)`: sent; `Ok(false)`: the connection is lost (its stream's
    /// end says so); `Err(())`: it cannot go as a datagram.
    fn send_datagram(&self, bytes: Vec<u8>) -> Result<bool, ()> {
        match self {
            Self::Quic(connection) => match connection.send_datagram(Bytes::from(bytes)) {
                Ok(()) => Ok(true),
                Err(quinn::SendDatagramError::ConnectionLost(_)) => Ok(false),
                Err(_) => Err(()),
            },
            Self::WebTransport(session) => match session.send_datagram(bytes) {
                Ok(()) => Ok(true),
                Err(wtransport::error::SendDatagramError::NotConnected) => Ok(false),
                Err(_) => Err(()),
            },
        }
    }

    /// The next datagram's payload; `None` once the connection is lost.
    async fn read_datagram(&self) -> Option<Bytes> {
        match self {
            Self::Quic(connection) => connection.read_datagram().await.ok(),
            Self::WebTransport(session) => session
                .receive_datagram()
                .await
                .ok()
                .map(|datagram| datagram.payload()),
        }
    }
}

/// One QUIC connection's datagrams, shared by its handle (which sends) and
/// the task that receives.
#[derive(Debug)]
pub(crate) struct Datagrams {
    connection: Carrier,
    /// The client's endpoint (its UDP socket), kept for a rebind, and the
    /// runtime it runs on; `None` on a server, whose endpoint is every
    /// connection's.
    endpoint: Option<(quinn::Endpoint, tokio::runtime::Handle)>,
    next_sequence: AtomicU32,
    /// Datagrams a peer may send per second (a server's limit on its
    /// clients; `None` on a client).
    limit: Option<RateLimit>,
    counters: Counters,
}

impl Datagrams {
    /// Called on the connection's runtime.
    pub(crate) fn new(
        connection: Carrier,
        endpoint: Option<quinn::Endpoint>,
        per_second: Option<u32>,
    ) -> Arc<Self> {
        Arc::new(Self {
            connection,
            endpoint: endpoint.map(|e| (e, tokio::runtime::Handle::current())),
            next_sequence: AtomicU32::new(0),
            limit: per_second.map(|n| RateLimit {
                per_second: f64::from(n),
                burst: f64::from(n.max(1)),
            }),
            counters: Counters::default(),
        })
    }

    /// Sends one message whose envelope `write` puts after the sequence
    /// (`datagram::put_head` layout; `capacity`: about how many bytes) as a
    /// datagram. `false`: it does not fit
    /// the path (or the peer takes no datagrams); the caller sends it on the
    /// stream.
    pub(crate) fn send_with(
        &self,
        capacity: usize,
        write: impl FnOnce(&mut Vec<u8>, u32) -> Result<(), ContentError>,
    ) -> Result<bool, ContentError> {
        let Some(max) = self.connection.max_datagram_size() else {
            add(&self.counters.sent_on_stream);
            return Ok(false);
        };
        let sequence = self.next_sequence.fetch_add(1, Ordering::Relaxed);
        // Made as big as it will be: a view of a thousand bytes grown from
        // a small buffer was reallocated four times.
        let mut buf = Vec::with_capacity(capacity.min(max + datagram::MAX_HEAD_LEN));
        write(&mut buf, sequence)?;
        if buf.len() > max {
            add(&self.counters.sent_on_stream);
            return Ok(false);
        }
        Ok(match self.connection.send_datagram(buf) {
            Ok(sent) => {
                if sent {
                    add(&self.counters.sent);
                }
                true
            }
            Err(()) => {
                add(&self.counters.sent_on_stream);
                false
            }
        })
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> DatagramStats {
        let c = &self.counters;
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        DatagramStats {
            sent: load(&c.sent),
            sent_on_stream: load(&c.sent_on_stream),
            delivered: load(&c.delivered),
            stale: load(&c.stale),
            dropped: load(&c.dropped),
            refused: load(&c.refused),
        }
    }

    /// The largest datagram the path takes now (`None`: the peer takes
    /// none).
    pub(crate) fn max_size(&self) -> Option<usize> {
        self.connection.max_datagram_size()
    }

    /// The peer's address now (it changes when the peer migrates).
    pub(crate) fn remote_address(&self) -> std::net::SocketAddr {
        self.connection.quic().remote_address()
    }

    /// Moves a client's connection to `socket`, a new UDP socket (a phone
    /// off Wi-Fi onto mobile data): the connection, and its session, go on
    /// from the new address.
    pub(crate) fn rebind(&self, socket: std::net::UdpSocket) -> std::io::Result<()> {
        match &self.endpoint {
            Some((endpoint, runtime)) => {
                let _inside = runtime.enter();
                endpoint.rebind(socket)
            }
            None => Err(std::io::Error::other(
                "a server's connections share its endpoint: only a client rebinds",
            )),
        }
    }

    /// Whether this is a client's connection.
    pub(crate) fn is_client(&self) -> bool {
        self.endpoint.is_some()
    }

    /// The QUIC connection itself (the driver closes it at the end).
    pub(crate) fn connection(&self) -> &quinn::Connection {
        self.connection.quic()
    }

    /// Whether a browser's WebTransport session carries it.
    pub(crate) fn is_webtransport(&self) -> bool {
        matches!(self.connection, Carrier::WebTransport(_))
    }
}

/// Reads the connection's datagrams and delivers each that is newest on its
/// channel as a message, while the connection is open; runs until the
/// connection is lost (then the stream's reader reports the end), so the
/// caller drops it when the connection's task ends.
pub(crate) async fn receive<E>(
    link: Arc<Datagrams>,
    handle: SocketHandle,
    events: mpsc::Sender<Batch<E>>,
    wrap: Wrap<E>,
    credit: Option<Arc<Credit>>,
) {
    let mut newest = Newest::default();
    let mut bucket = link
        .limit
        .as_ref()
        .map(|limit| TokenBucket::full(limit, Instant::now()));
    let counters = &link.counters;
    while let Some(bytes) = link.connection.read_datagram().await {
        let len = bytes.len() as u64;
        handle.shared.counters.read(0, len);
        if handle.state() != SocketState::Open {
            add(&counters.dropped);
            continue;
        }
        if let (Some(bucket), Some(limit)) = (bucket.as_mut(), link.limit.as_ref()) {
            if !bucket.take(limit, 1.0, Instant::now()) {
                add(&counters.dropped);
                continue;
            }
        }
        let message = match datagram::decode(bytes) {
            Ok((sequence, message)) => match newest.take(message.channel_id(), sequence) {
                Ok(true) => message,
                Ok(false) => {
                    add(&counters.stale);
                    continue;
                }
                Err(err) => {
                    refuse(&link, &handle, err);
                    continue;
                }
            },
            Err(err) => {
                refuse(&link, &handle, err);
                continue;
            }
        };
        // Never waits: with the queue full it is dropped, and a newer one
        // will come.
        let Ok(permit) = events.try_reserve() else {
            add(&counters.dropped);
            continue;
        };
        let mut batch = Batch::one(SocketEvent::Received(message), &wrap);
        if let Some(credit) = &credit {
            if !credit.try_acquire(len) {
                add(&counters.dropped);
                continue;
            }
            batch = batch.counted(credit.clone(), len);
        }
        // Counted before it is handed over: whoever reads the message may
        // read the counters at once.
        handle.shared.counters.read(1, 0);
        add(&counters.delivered);
        permit.send(batch);
    }
    std::future::pending::<()>().await;
}

/// Counts and logs a refused datagram; it is dropped, the connection goes
/// on (a datagram is the peer's to lose).
fn refuse(link: &Datagrams, handle: &SocketHandle, err: datagram::DatagramError) {
    add(&link.counters.refused);
    tracing::debug!(peer = ?handle.peer_addr(), %err, "datagram refused");
}
