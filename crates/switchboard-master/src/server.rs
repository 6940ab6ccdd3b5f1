//! The master server's IO: one UDP socket for heartbeats and info, one
//! Switchboard listener for list requests, on the same port.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::builder::ListingPortSpec;
use crate::master::Master;
use crate::port::{ListingPort, NoPort};
use crate::probe;
use crate::protocol::{
    ListRequest, Listed, MasterAction, MasterChannel, ProbeRequest, ProbeResult, MAX_DATAGRAM,
};
use crate::registry::{MemoryRegistry, Registry};
use crate::{MasterConfig, MasterStats};
use switchboard::message::Message;
use switchboard::runtime;
use switchboard::session::{KeyedLimiter, RateLimit};
use switchboard::socket::{
    ConnectionSlots, Endpoint, EndpointConfig, EndpointEvent, EndpointStream, PeerId,
};

/// A UDP socket bound to `addr`, on the runtime.
fn udp_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let udp = std::net::UdpSocket::bind(addr)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot bind UDP {addr}: {e}")))?;
    udp.set_nonblocking(true)?;
    UdpSocket::from_std(udp)
}

/// A datagram read off one of the master's UDP ports, and when.
struct Inbound {
    /// Read on the second port (else the native one).
    on_port: bool,
    from: SocketAddr,
    /// Empty when it was longer than the port reads (a native datagram
    /// over [`MAX_DATAGRAM`]): the master drops it as malformed.
    bytes: Vec<u8>,
    at: Instant,
}

/// Reads the master's UDP ports on a task of its own, into a queue of at
/// most `capacity` datagrams, so that no work of the master (a list
/// request's, a slow shared registry's) leaves heartbeats unread in the
/// kernel's buffer: they wait here with the time they came. A datagram
/// that finds the queue full is counted in `missed`, and the master then
/// knows it could not hear every server (`Master::missed_datagrams`).
fn read_datagrams(
    native: Arc<UdpSocket>,
    port: Option<(Arc<UdpSocket>, usize)>,
    queue: mpsc::Sender<Inbound>,
    missed: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; MAX_DATAGRAM + 1];
        let (port, port_max) = port.unzip();
        let mut port_buf = vec![0u8; port_max.unwrap_or(0)];
        loop {
            let inbound = tokio::select! {
                received = native.recv_from(&mut buf) => match received {
                    // One byte more than the limit was read: too long.
                    Ok((len, from)) => Inbound {
                        on_port: false,
                        from,
                        bytes: if len > MAX_DATAGRAM { Vec::new() } else { buf[..len].to_vec() },
                        at: Instant::now(),
                    },
                    Err(err) => {
                        tracing::debug!(%err, "udp receive failed");
                        continue;
                    }
                },
                received = recv_port(port.as_deref(), &mut port_buf) => match received {
                    Ok((len, from)) => Inbound {
                        on_port: true,
                        from,
                        bytes: port_buf[..len].to_vec(),
                        at: Instant::now(),
                    },
                    Err(err) => {
                        tracing::debug!(%err, "udp receive failed on the second port");
                        continue;
                    }
                },
            };
            match queue.try_send(inbound) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    missed.fetch_add(1, Ordering::Relaxed);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => break,
            }
        }
    })
}

/// The next datagram on the second port; never, when there is none.
async fn recv_port(
    socket: Option<&UdpSocket>,
    buf: &mut [u8],
) -> std::io::Result<(usize, SocketAddr)> {
    match socket {
        Some(socket) => socket.recv_from(buf).await,
        None => std::future::pending().await,
    }
}

/// What a client is told when the registry cannot be read: a stable,
/// short reason (the store's error text stays in the server's log).
const PUBLIC_UNAVAILABLE: &str = "server list unavailable; retry shortly";
/// A bound master server, ready to [`run`](Self::run).
pub struct MasterServer<R: Registry = MemoryRegistry, P = NoPort> {
    master: Master<R, P>,
    udp: Arc<UdpSocket>,
    /// The second port, when [`MasterBuilder::listing_port`](crate::MasterBuilder::listing_port) asked for one.
    port: Option<UdpSocket>,
    tcp: EndpointStream,
    tick: std::time::Duration,
    stop: CancellationToken,
    snapshots: mpsc::Receiver<oneshot::Sender<MasterSnapshot>>,
}

/// A handle to a running master: its address, snapshots, and the way to
/// stop it.
#[derive(Debug, Clone)]
pub struct MasterHandle {
    local_addr: SocketAddr,
    stop: CancellationToken,
    snapshots: mpsc::Sender<oneshot::Sender<MasterSnapshot>>,
    port_addr: Option<SocketAddr>,
}

/// What a master holds at one moment, for its operator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MasterSnapshot {
    /// Its counters.
    pub stats: MasterStats,
    /// The servers it lists (at most [`MasterSnapshot::MAX_SERVERS`]).
    pub servers: Vec<Listed>,
    /// The second listing port's counters, with their help (none without
    /// one).
    pub port_counters: Vec<switchboard::admin::Counter>,
}

impl MasterSnapshot {
    /// Servers a snapshot holds at most.
    pub const MAX_SERVERS: usize = 1000;
}

impl MasterHandle {
    /// The address it listens on (UDP and TCP).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops it.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// The second listing port's address, when
    /// [`MasterBuilder::listing_port`](crate::MasterBuilder::listing_port) opened one.
    pub fn listing_port_addr(&self) -> Option<SocketAddr> {
        self.port_addr
    }

    /// Its counters and listed servers now; `None` once it stopped.
    pub async fn snapshot(&self) -> Option<MasterSnapshot> {
        let (tx, rx) = oneshot::channel();
        self.snapshots.send(tx).await.ok()?;
        rx.await.ok()
    }
}

impl<R: Registry, P: ListingPort<R>> MasterServer<R, P> {
    /// Binds UDP and TCP on `addr` (port 0: a free port, the same for both)
    /// with `registry`, and the second port when it has one.
    pub(crate) fn bind_with(
        addr: SocketAddr,
        config: MasterConfig,
        registry: R,
        listing_port: ListingPortSpec<P>,
    ) -> std::io::Result<(Self, MasterHandle)> {
        let runtime = runtime::handle();
        let _entered = runtime.enter();
        let second = match listing_port.port {
            Some(port) => Some(udp_socket(SocketAddr::new(addr.ip(), port))?),
            None => None,
        };
        let port_addr = second.as_ref().map(UdpSocket::local_addr).transpose()?;
        let mut second = second;
        let mut make = Some(listing_port.make);
        // A port free for TCP may be taken for UDP: try a few.
        let mut last_err = None;
        for _ in 0..8 {
            // List requests are small: a connection that sends a bigger
            // frame (or one that inflates bigger) is closed.
            let mut tcp_config = EndpointConfig::default();
            tcp_config.socket.codec.max_frame_len = config.max_request_len;
            tcp_config.socket.codec.max_decompressed_len = config.max_request_len;
            let tcp = Endpoint::bind_addr(addr, tcp_config)?;
            let port = tcp.local_addr().port();
            let udp = udp_socket(SocketAddr::new(addr.ip(), port));
            match udp {
                Ok(udp) => {
                    let stop = CancellationToken::new();
                    let (snapshots_tx, snapshots) = mpsc::channel(4);
                    let handle = MasterHandle {
                        local_addr: tcp.local_addr(),
                        stop: stop.clone(),
                        snapshots: snapshots_tx,
                        port_addr,
                    };
                    let tick = config.tick_interval;
                    let make = make
                        .take()
                        .expect("the loop returns once it made the master");
                    let server = Self {
                        master: Master::with_port(config, registry, make),
                        udp: Arc::new(udp),
                        port: second.take(),
                        tcp: tcp.into_stream(),
                        tick,
                        stop,
                        snapshots,
                    };
                    return Ok((server, handle));
                }
                Err(err) if addr.port() == 0 => last_err = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last_err.unwrap_or_else(|| std::io::Error::other("no port free for both UDP and TCP")))
    }

    /// Serves until `shutdown` completes or the handle stops it.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut tick = tokio::time::interval(self.tick);
        let handle = self.tcp.handle();
        // List requests per address, and where each connection comes from.
        let config = self.master.config().clone();
        let mut lists = KeyedLimiter::with_max_keys(
            RateLimit {
                per_second: config.lists_per_minute / 60.0,
                burst: (config.lists_per_minute / 6.0).max(1.0),
            },
            config.max_limited_addresses,
        );
        // Each connection's address: the key its limits count (an IPv6 /64)
        // and the address itself (where a probe connects back to).
        let mut addresses: HashMap<PeerId, (IpAddr, IpAddr)> = HashMap::new();
        let mut probes = KeyedLimiter::with_max_keys(
            RateLimit {
                per_second: config.probes_per_minute / 60.0,
                burst: config.probes_per_minute.max(1.0),
            },
            config.max_limited_addresses,
        );
        let in_flight = ConnectionSlots::new(
            config.max_probes_in_flight,
            config.max_probes_in_flight_per_address,
        );
        let second = self.port.take().map(Arc::new);
        let udp = self.udp.clone();
        let (queue, mut inbound) = mpsc::channel(config.max_queued_datagrams.max(1));
        let missed = Arc::new(AtomicU64::new(0));
        let reading = second.clone().map(|socket| (socket, P::MAX_DATAGRAM));
        let reader = read_datagrams(udp.clone(), reading, queue, missed.clone());
        loop {
            tokio::select! {
                Some(datagram) = inbound.recv() => {
                    self.on_inbound(datagram, &udp, second.as_deref()).await;
                }
                event = self.tcp.next_event() => match event {
                    Some(EndpointEvent::PeerConnected { peer, addr }) => {
                        addresses.insert(peer, (switchboard::socket::address_key(addr.ip()), addr.ip()));
                    }
                    Some(EndpointEvent::PeerDisconnected { peer, .. }) => {
                        addresses.remove(&peer);
                    }
                    Some(EndpointEvent::Received(incoming)) => {
                        let from = addresses.get(&incoming.peer).copied();
                        if from.is_some_and(|(key, _)| !lists.allow(key, Instant::now())) {
                            self.master.list_refused();
                            handle.close_peer(incoming.peer, "too many list requests; slow down");
                            continue;
                        }
                        if incoming.message.action::<MasterAction>() == Some(MasterAction::Probe) {
                            let Some((key, ip)) = from else { continue };
                            let Ok(request) = incoming.message.content::<ProbeRequest>() else {
                                handle.close_peer(incoming.peer, "unknown or malformed request");
                                continue;
                            };
                            let target = SocketAddr::new(ip, request.port);
                            let permit = in_flight.take(key).ok();
                            let allowed = probes.allow(key, Instant::now());
                            self.master.probed(allowed && permit.is_some());
                            let (handle, timeout, peer) = (handle.clone(), config.probe_timeout, incoming.peer);
                            tokio::spawn(async move {
                                let result = match permit.filter(|_| allowed) {
                                    Some(_permit) => probe::connect_back(target, timeout).await,
                                    None => ProbeResult {
                                        addr: target,
                                        reachable: false,
                                        detail: "not checked: too many probes; try again in a minute".into(),
                                    },
                                };
                                let reply = Message::new(MasterChannel::Master, MasterAction::ProbeReply, &result);
                                if let Ok(reply) = reply {
                                    let _ = handle.send_to(peer, &reply);
                                }
                            });
                            continue;
                        }
                        match self.answer(&incoming.message).await {
                            Ok(message) => {
                                let _ = handle.send_to(incoming.peer, &message);
                            }
                            Err(reason) => handle.close_peer(incoming.peer, &reason),
                        }
                    }
                    Some(_) => {}
                    None => break,
                },
                _ = tick.tick() => {
                    // What was heard comes before what expires: every
                    // heartbeat read so far refreshes its server first.
                    while let Ok(datagram) = inbound.try_recv() {
                        self.on_inbound(datagram, &udp, second.as_deref()).await;
                    }
                    let now = Instant::now();
                    self.master.missed_datagrams(missed.swap(0, Ordering::Relaxed), now);
                    self.master.tick(now).await;
                }
                Some(reply) = self.snapshots.recv() => {
                    let _ = reply.send(self.snapshot().await);
                }
                _ = &mut shutdown => break,
                _ = self.stop.cancelled() => break,
            }
        }
        reader.abort();
        handle.shutdown("master shutting down");
    }

    /// One datagram read by the reader task, answered on its own port.
    async fn on_inbound(&mut self, datagram: Inbound, udp: &UdpSocket, second: Option<&UdpSocket>) {
        let Inbound {
            on_port,
            from,
            bytes,
            at,
        } = datagram;
        if on_port {
            let reply = self.master.on_port_datagram(from, &bytes, at).await;
            if let (Some((to, reply)), Some(socket)) = (reply, second) {
                let _ = socket.send_to(&reply, to).await;
            }
        } else if let Some((to, reply)) = self.master.on_datagram(from, &bytes, at).await {
            let _ = udp.send_to(&reply, to).await;
        }
    }

    /// The reply to a list or stats request, or why the connection closes.
    async fn answer(&mut self, message: &Message) -> Result<Message, String> {
        let malformed = || "unknown or malformed request".to_string();
        let reply = match message.action::<MasterAction>() {
            Some(MasterAction::List) => {
                let request = message.content::<ListRequest>().map_err(|_| malformed())?;
                request
                    .filter
                    .check()
                    .map_err(|why| format!("list request refused: {why}"))?;
                let page = self
                    .master
                    .list(&request)
                    .await
                    // The store's own words are in the log (`Master::list`).
                    .map_err(|_| PUBLIC_UNAVAILABLE.to_string())?;
                Message::new(MasterChannel::Master, MasterAction::Page, &page)
            }
            Some(MasterAction::Stats) => Message::new(
                MasterChannel::Master,
                MasterAction::StatsReply,
                &self.master.stats(),
            ),
            _ => return Err(malformed()),
        };
        reply.map_err(|_| malformed())
    }

    /// The counters so far.
    pub fn stats(&self) -> MasterStats {
        self.master.stats()
    }

    /// The counters and the listed servers, page by page (not counted as
    /// list requests).
    async fn snapshot(&mut self) -> MasterSnapshot {
        let stats = self.master.stats();
        let mut servers = Vec::new();
        for page in 0.. {
            let request = ListRequest {
                filter: Default::default(),
                page,
                page_size: crate::protocol::MAX_PAGE,
            };
            let Ok(listed) = self.master.query(&request).await else {
                break;
            };
            let listed = listed.servers;
            let done = listed.len() < crate::protocol::MAX_PAGE as usize;
            servers.extend(listed);
            if done || servers.len() >= MasterSnapshot::MAX_SERVERS {
                break;
            }
        }
        servers.truncate(MasterSnapshot::MAX_SERVERS);
        MasterSnapshot {
            stats,
            servers,
            port_counters: self.master.port_counters(),
        }
    }
}
