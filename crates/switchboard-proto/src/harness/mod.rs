//! An in-memory network for tests: client cores joined to a manager core,
//! no socket, no thread, and a clock the test moves.
//!
//! Everything `switchboard`'s `ServerManager` and `NetworkClient` decide is
//! decided by [`ManagerCore`] and [`ClientCore`]; the harness carries their
//! messages to each other at once and in order, so a game's rules, sessions
//! and reconnects are tested fast and deterministically (in the manner of
//! quinn-proto's `Pair`): the clock is the test's, the server's randomness
//! a fixed seed. Sockets and processes keep their own tests over loopback.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use switchboard_proto::client::{ClientConfig, ClientEvent, RequestStatus};
//! use switchboard_proto::harness::Harness;
//! use switchboard_proto::manager::config::ManagerRules;
//! use switchboard_proto::manager::logic::{GameLogic, Outbox, Rejection, Request};
//! use switchboard_proto::session::ClientId;
//!
//! switchboard_proto::channels! { enum Chan { Count = 16 } }
//! switchboard_proto::actions! { enum Count in Chan::Count { Add(u32) = 1 } }
//!
//! #[derive(Default)]
//! struct Counter(u32);
//! impl GameLogic for Counter {
//!     type Message = Count;
//!     type Command = u32;
//!     fn validate(&self, request: &Request<Count>) -> Result<u32, Rejection> {
//!         let Count::Add(n) = request.message;
//!         if n > 10 { return Err(Rejection::invalid("at most 10 at once")); }
//!         Ok(n)
//!     }
//!     fn apply(&mut self, _: ClientId, n: u32, _: &mut Outbox) { self.0 += n; }
//! }
//!
//! let mut net = Harness::new(ManagerRules::default(), Counter::default(), Instant::now());
//! let ann = net.join(ClientConfig::named("ann"));
//! net.request(ann, Count::Add(3)).unwrap();
//! let no = net.request(ann, Count::Add(30)).unwrap();
//! assert_eq!(net.logic().0, 3);
//! assert_eq!(net.verdict(ann, no), RequestStatus::Rejected("at most 10 at once".into()));
//! let verdicts: Vec<_> = net.events(ann).into_iter()
//!     .filter_map(|e| match e { ClientEvent::RequestDone { status, .. } => Some(status), _ => None })
//!     .collect();
//! assert_eq!(verdicts.len(), 2);
//! net.advance(Duration::from_secs(1));
//! ```

pub mod netsim;
mod wire;

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::client::{
    ClientAction, ClientConfig, ClientCore, ClientEvent, RequestError, RequestStatus, RequestTicket,
};
use crate::connection::SocketEvent;
use crate::entropy::Seeded;
use crate::manager::config::ManagerRules;
use crate::manager::core::{ManagerAction, ManagerCore, ManagerEvent};
use crate::manager::logic::GameLogic;
use crate::manager::stats::ServerStats;
use crate::manager::LogEntry;
use crate::message::{Message, PeerId, TypedMessage};
use crate::reason::{CloseCode, DisconnectReason, IoFailure};
use crate::session::ClientId;
use netsim::{Link, NetSimConfig};

/// A client in the harness (its index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Player(usize);

/// Who is at the far end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A client core.
    Client(usize),
    /// A raw peer the test speaks for.
    Raw,
}

/// One message or event on its way.
#[derive(Debug)]
enum Delivery {
    ToServer(ManagerEvent),
    ToClient(usize, SocketEvent),
}

/// What a raw peer heard.
#[derive(Debug, Default)]
struct RawPeer {
    inbox: Vec<Message>,
    closed: Option<DisconnectReason>,
}

/// Client cores and a manager core on one in-memory network.
pub struct Harness<L: GameLogic> {
    server: ManagerCore<L>,
    clients: Vec<SimClient>,
    raw: HashMap<PeerId, RawPeer>,
    links: HashMap<PeerId, End>,
    queue: VecDeque<Delivery>,
    /// Deliveries a simulated link let through, to be handled as they are.
    arrived: VecDeque<Delivery>,
    log: Vec<LogEntry>,
    now: Instant,
    /// The clock's start: simulated links count from it.
    origin: Instant,
    next_peer: u64,
    next_tick: Instant,
}

struct SimClient {
    core: ClientCore,
    peer: Option<PeerId>,
    addr: SocketAddr,
    reachable: bool,
    /// Deliveries to and from it are held (a stalled link).
    stalled: bool,
    held: Vec<Delivery>,
    /// Its simulated network, one link each way (`set_network`).
    network: Option<Box<[Link<Delivery>; 2]>>,
    events: Vec<ClientEvent>,
}

impl<L: GameLogic> std::fmt::Debug for Harness<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("clients", &self.clients.len())
            .field("raw", &self.raw.len())
            .finish()
    }
}

impl<L: GameLogic> Harness<L> {
    /// A server running `logic` with `rules`, and nobody connected; the
    /// clock starts at `start` (any instant: only its differences count).
    pub fn new(rules: ManagerRules, logic: L, start: Instant) -> Self {
        let now = start;
        let server = ManagerCore::new(rules, logic, Box::new(Seeded::new(0x5eed)));
        let next_tick = now + server.tick_interval();
        Self {
            server,
            clients: Vec::new(),
            raw: HashMap::new(),
            links: HashMap::new(),
            queue: VecDeque::new(),
            arrived: VecDeque::new(),
            log: Vec::new(),
            now,
            origin: now,
            next_peer: 1,
            next_tick,
        }
    }

    /// The harness's clock.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The game's logic on the server.
    pub fn logic(&self) -> &L {
        self.server.logic()
    }

    /// The manager core.
    pub fn server(&mut self) -> &mut ManagerCore<L> {
        &mut self.server
    }

    /// The server's counters now.
    pub fn stats(&self) -> ServerStats {
        self.server.snapshot(self.now, |_| None)
    }

    /// Every line the server logged so far.
    pub fn log(&self) -> &[LogEntry] {
        &self.log
    }

    /// A client that connects with `config` and says hello; returns once the
    /// server has answered (see [`events`](Self::events) for the welcome).
    pub fn join(&mut self, config: ClientConfig) -> Player {
        self.join_from(IpAddr::V4(Ipv4Addr::LOCALHOST), config)
    }

    /// Like [`join`](Self::join), from address `ip` (the server's
    /// per-address limits see it).
    pub fn join_from(&mut self, ip: IpAddr, config: ClientConfig) -> Player {
        let index = self.clients.len();
        let addr = SocketAddr::new(ip, 40_000u16.wrapping_add(index as u16));
        let mut core = ClientCore::new(config, 0x5eed_0000 + index as u64);
        core.start();
        self.clients.push(SimClient {
            core,
            peer: None,
            addr,
            reachable: true,
            stalled: false,
            held: Vec::new(),
            network: None,
            events: Vec::new(),
        });
        self.settle();
        Player(index)
    }

    /// The events `player` heard since the last call, in order.
    pub fn events(&mut self, player: Player) -> Vec<ClientEvent> {
        std::mem::take(&mut self.clients[player.0].events)
    }

    /// Where `player`'s request stands (the client core's answer).
    pub fn verdict(&self, player: Player, ticket: RequestTicket) -> RequestStatus {
        self.clients[player.0].core.status(ticket)
    }

    /// The player's client core.
    pub fn client(&self, player: Player) -> &ClientCore {
        &self.clients[player.0].core
    }

    /// Sends a request from `player` (a typed message, or a built
    /// [`Message`]) and delivers everything it causes. Returns its ticket.
    pub fn request(
        &mut self,
        player: Player,
        message: impl TypedMessage,
    ) -> Result<RequestTicket, RequestError> {
        let now = self.now;
        let ticket = self.clients[player.0].core.request(&message, now)?;
        self.settle();
        Ok(ticket)
    }

    /// Sends a plain message (no request id) from `player`.
    pub fn send(&mut self, player: Player, message: Message) {
        if let Some(peer) = self.clients[player.0].peer {
            self.queue
                .push_back(Delivery::ToServer(ManagerEvent::Received { peer, message }));
            self.settle();
        }
    }

    /// The operator kicks `client` ([`ManagerCore::kick`]); whether it was
    /// connected. Everything it causes is delivered before this returns.
    pub fn kick(&mut self, client: ClientId, reason: &str) -> bool {
        let now = self.now;
        let (kicked, actions) = self.server.kick(client, reason, now);
        let actions: Vec<ManagerAction> = actions.collect();
        self.route_server(actions);
        self.settle();
        kicked
    }

    /// The player leaves with a goodbye.
    pub fn close(&mut self, player: Player, reason: &str) {
        self.clients[player.0].core.close(reason);
        self.settle();
    }

    /// The player's connection breaks without a goodbye (a cable pulled);
    /// what a stalled link held is lost. Its client will try to come back on
    /// its own as the clock moves.
    pub fn cut(&mut self, player: Player) {
        let client = &mut self.clients[player.0];
        client.stalled = false;
        client.held.clear();
        if let Some(peer) = client.peer.take() {
            self.links.remove(&peer);
            let lost = || {
                DisconnectReason::ConnectionLost(IoFailure::new(
                    ErrorKind::ConnectionReset,
                    "cut by the test",
                ))
            };
            self.queue
                .push_back(Delivery::ToServer(ManagerEvent::Disconnected {
                    peer,
                    reason: lost(),
                }));
            self.queue.push_back(Delivery::ToClient(
                player.0,
                SocketEvent::Disconnected(lost()),
            ));
            self.settle();
        }
    }

    /// Whether the player's connection attempts reach the server (default
    /// true); unreachable, they fail with "connection refused".
    pub fn set_reachable(&mut self, player: Player, reachable: bool) {
        self.clients[player.0].reachable = reachable;
    }

    /// Puts the player behind a simulated network (`None`: back to instant
    /// delivery): what it sends and what it is sent each take a link of
    /// its own with `net`'s latency, jitter, cap and stalls, seeded, and
    /// arrive as [`advance`](Self::advance) moves the clock past them.
    pub fn set_network(&mut self, player: Player, net: Option<NetSimConfig>) {
        self.clients[player.0].network = net.map(|net| {
            let down = NetSimConfig {
                seed: net.seed.wrapping_add(1),
                ..net.clone()
            };
            Box::new([Link::new(net), Link::new(down)])
        });
    }

    /// Stalls the player's link (nothing moves either way, the connection
    /// stays open: a frozen route) or lets what was held through, in order.
    pub fn stall(&mut self, player: Player, stalled: bool) {
        let client = &mut self.clients[player.0];
        client.stalled = stalled;
        if !stalled {
            let held = std::mem::take(&mut client.held);
            self.queue.extend(held);
            self.settle();
        }
    }

    /// Opens a connection the test speaks for itself (a hand-made hello, a
    /// forged token, garbage).
    pub fn open_raw(&mut self) -> PeerId {
        let peer = self.new_peer();
        self.links.insert(peer, End::Raw);
        self.raw.insert(peer, RawPeer::default());
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 30_000);
        self.queue
            .push_back(Delivery::ToServer(ManagerEvent::Connected { peer, addr }));
        self.settle();
        peer
    }

    /// Sends `message` from a raw connection.
    pub fn send_raw(&mut self, peer: PeerId, message: Message) {
        if self.links.get(&peer) == Some(&End::Raw) {
            self.queue
                .push_back(Delivery::ToServer(ManagerEvent::Received { peer, message }));
            self.settle();
        }
    }

    /// What a raw connection heard since the last call.
    pub fn raw_inbox(&mut self, peer: PeerId) -> Vec<Message> {
        self.raw
            .get_mut(&peer)
            .map(|raw| std::mem::take(&mut raw.inbox))
            .unwrap_or_default()
    }

    /// How a raw connection was closed by the server, if it was.
    pub fn raw_closed(&self, peer: PeerId) -> Option<&DisconnectReason> {
        self.raw.get(&peer)?.closed.as_ref()
    }

    /// Moves the clock by `by`, running the server's ticks at its interval
    /// and the clients' timers (request expiry, reconnects) on the way.
    pub fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        loop {
            let next_client = self
                .clients
                .iter()
                .filter_map(|c| c.core.next_deadline())
                .min();
            let next_arrival = self
                .clients
                .iter()
                .filter_map(|c| c.network.as_ref())
                .flat_map(|links| links.iter().filter_map(Link::next_arrival))
                .min()
                .map(|at| self.origin + at);
            let next = [next_client, next_arrival]
                .into_iter()
                .flatten()
                .fold(self.next_tick, Instant::min);
            if next > end {
                break;
            }
            self.now = self.now.max(next);
            if self.now >= self.next_tick {
                self.next_tick = self.now + self.server.tick_interval();
                let actions: Vec<ManagerAction> = self
                    .server
                    .tick(self.now, |_| Some(Duration::ZERO))
                    .collect();
                self.route_server(actions);
            }
            let now = self.now;
            let since = now.saturating_duration_since(self.origin);
            for client in &mut self.clients {
                for link in client.network.iter_mut().flat_map(|links| links.iter_mut()) {
                    while let Some(delivery) = link.poll(since) {
                        self.arrived.push_back(delivery);
                    }
                }
                client.core.tick(now);
            }
            self.settle();
        }
        self.now = end;
        self.settle();
    }
}
