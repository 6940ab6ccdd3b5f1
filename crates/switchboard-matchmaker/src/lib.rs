//! The matchmaker: one request/answer port (Switchboard frames on the
//! rooms channel) in front of the room directory in Redis. It lists the
//! rooms of every process, sends a new room to the least-loaded process
//! (or, on Agones, to the game server the fleet's allocator hands it:
//! [`MatchmakerBuilder::allocator`]), and reserves a seat in an existing
//! room on the process that holds it (`switchboard_rooms::directory`). It keeps no state of its own: run as
//! many as you like (`switchboard-server matchmaker --redis URL`).
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | the root | [`Matchmaker`] started by its [`MatchmakerBuilder`] as a [`RunningMatchmaker`], [`MatchmakerConfig`], [`MatchmakerHandle`], [`MatchmakerStats`]: the port, its limits, the answers |
//! | `admin` | [`MatchmakerAdmin`]: the matchmaker as its admin server and `/metrics` see it |
//!
//! What it reads and counts in Redis is `switchboard_redis::RoomDirectory`'s.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard::lifecycle::ListenOptions;

use switchboard::lifecycle::{Running, StopHandle};
use switchboard::message::Message;
use switchboard::session::ticket::unix_ms;
use switchboard::session::{KeyedLimiter, RateLimit};
use switchboard::socket::{
    address_key, Endpoint, EndpointConfig, EndpointEvent, EndpointStream, PeerId,
};
use switchboard::token::TokenKey;
use switchboard_rooms::directory::{Reservation, Seat};
use switchboard_rooms::protocol::{RoomAction, RoomId, RoomSummary};
use tokio_util::sync::CancellationToken;

use switchboard_agones::allocator::Allocator;
use switchboard_redis::{ProcessReach, RedisStore, RoomDirectory, SeatAsk, StoreError};

mod admin;

pub use admin::MatchmakerAdmin;

/// The matchmaker's limits; each field says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchmakerConfig {
    /// Requests answered per minute per address (default 600, bursts of
    /// 100). Past it the connection is closed with the reason.
    pub requests_per_minute: f64,
    /// A reservation is good, and its seat held, for this long (default
    /// 5 s): the client must reach the room's process within it (a join
    /// takes milliseconds); an unused seat is free again after it.
    pub reservation_ttl: Duration,
    /// Live reservations one address holds at once (an IPv6 /64 counts as
    /// one; default 2), counted in Redis across every matchmaker. Past it
    /// the address's oldest one gives its seat back: asking again and
    /// again never holds more than this many seats.
    pub max_reservations_per_address: usize,
    /// Rooms one list holds at most (default 1,000).
    pub max_listed: usize,
    /// The longest request frame (default 4 KiB).
    pub max_request_len: usize,
}

impl Default for MatchmakerConfig {
    fn default() -> Self {
        Self {
            requests_per_minute: 600.0,
            reservation_ttl: Duration::from_secs(5),
            max_reservations_per_address: 2,
            max_listed: 1000,
            max_request_len: 4096,
        }
    }
}

/// What a matchmaker has done since it started (its admin view and
/// `/metrics`: [`MatchmakerAdmin`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MatchmakerStats {
    /// Connections open now.
    pub connections: u64,
    /// Room lists answered.
    pub lists: u64,
    /// Seats reserved, in a new room or an existing one.
    pub seats: u64,
    /// Requests refused, each with its reason (a full or locked room, no
    /// such room, a malformed request, the directory unreachable).
    pub refused: u64,
    /// Of those, refused because the room directory (Redis) could not be
    /// reached.
    pub directory_errors: u64,
    /// Game servers the Agones allocator handed over for new matches.
    pub allocations: u64,
    /// Connections closed for asking more often than
    /// [`MatchmakerConfig::requests_per_minute`].
    pub rate_limited: u64,
}

/// A handle to a running matchmaker.
#[derive(Debug, Clone)]
pub struct MatchmakerHandle {
    local_addr: SocketAddr,
    stop: CancellationToken,
    stats: Arc<Mutex<MatchmakerStats>>,
}

impl MatchmakerHandle {
    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What it has done so far.
    pub fn stats(&self) -> MatchmakerStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops it.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

/// A bound matchmaker, ready to [`run`](Self::run).
pub struct Matchmaker {
    directory: RoomDirectory,
    config: MatchmakerConfig,
    tcp: EndpointStream,
    stop: CancellationToken,
    /// The service's reservation key, read on first need.
    key: Option<[u8; 32]>,
    /// The room directory's outages, told once each.
    outage: switchboard::session::Outage,
    stats: Arc<Mutex<MatchmakerStats>>,
    /// New matches on game servers Agones allocates, when set.
    allocator: Option<Allocator>,
}

/// Why a request gets no seat or list: told to the client.
type Refusal = String;

/// What a request gets.
enum Answer {
    Rooms(Vec<RoomSummary>),
    Seat(Seat),
}

/// A matchmaker about to start, made by [`Matchmaker::builder`]: the same
/// shape as the relay's and a game server's builders.
#[derive(Debug)]
pub struct MatchmakerBuilder {
    store: RedisStore,
    config: MatchmakerConfig,
    listen: ListenOptions,
    allocator: Option<Allocator>,
}

/// A matchmaker running in this process: reads like its
/// [`MatchmakerHandle`]; `shutdown().await` (or `shutdown_blocking()`)
/// stops it and closes its connections.
pub type RunningMatchmaker = Running<MatchmakerHandle, ()>;

impl StopHandle for MatchmakerHandle {
    fn stop(&self) {
        self.shutdown();
    }
}

impl MatchmakerBuilder {
    /// Its limits (default [`MatchmakerConfig::default`]).
    pub fn config(mut self, config: MatchmakerConfig) -> Self {
        self.config = config;
        self
    }

    switchboard::listen_setters!("The port (default 0: a free one, read with `local_addr`).");

    /// Places each new match on a game server the fleet's Agones allocator
    /// hands over (a server with a room free first, else a Ready one)
    /// instead of on the least-loaded listed process; the server must be
    /// one of the directory's rooms processes (it advertises the address
    /// Agones gives, `switchboard-server rooms --agones --redis`).
    pub fn allocator(mut self, allocator: Allocator) -> Self {
        self.allocator = Some(allocator);
        self
    }

    /// Binds and returns the matchmaker and its handle, for tokio code that
    /// runs it itself (`matchmaker.run(stop).await`). It does not need
    /// Redis until the first request.
    pub fn build(self) -> std::io::Result<(Matchmaker, MatchmakerHandle)> {
        let addr = self.listen.addr();
        let (mut matchmaker, handle) = Matchmaker::bind(addr, self.store, self.config)?;
        matchmaker.allocator = self.allocator;
        Ok((matchmaker, handle))
    }

    /// Binds and runs the matchmaker on the background runtime (or the
    /// current one).
    pub fn spawn(self) -> std::io::Result<RunningMatchmaker> {
        let (matchmaker, handle) = self.build()?;
        Ok(Running::spawn(
            handle,
            matchmaker.run(std::future::pending()),
        ))
    }
}

impl Matchmaker {
    /// Starts describing a matchmaker in front of the room directory in
    /// `store`: loopback, a free port, default limits, until told
    /// otherwise.
    pub fn builder(store: RedisStore) -> MatchmakerBuilder {
        MatchmakerBuilder {
            store,
            config: MatchmakerConfig::default(),
            listen: ListenOptions::default(),
            allocator: None,
        }
    }

    /// Binds its port.
    fn bind(
        addr: SocketAddr,
        store: RedisStore,
        config: MatchmakerConfig,
    ) -> std::io::Result<(Self, MatchmakerHandle)> {
        let mut tcp_config = EndpointConfig::default();
        tcp_config.socket.codec.max_frame_len = config.max_request_len;
        tcp_config.socket.codec.max_decompressed_len = config.max_request_len;
        let tcp = Endpoint::bind_addr(addr, tcp_config)?;
        let stop = CancellationToken::new();
        let stats = Arc::default();
        let handle = MatchmakerHandle {
            local_addr: tcp.local_addr(),
            stop: stop.clone(),
            stats: Arc::clone(&stats),
        };
        let matchmaker = Self {
            directory: RoomDirectory::new(store),
            config,
            tcp: tcp.into_stream(),
            stop,
            key: None,
            outage: switchboard::session::Outage::new("room directory"),
            stats,
            allocator: None,
        };
        Ok((matchmaker, handle))
    }

    /// Answers requests until `shutdown` completes or the handle stops it.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let handle = self.tcp.handle();
        let per_minute = self.config.requests_per_minute;
        let mut limits = KeyedLimiter::with_max_keys(
            RateLimit {
                per_second: per_minute / 60.0,
                burst: (per_minute / 6.0).max(1.0),
            },
            65_536,
        );
        let mut addresses: HashMap<PeerId, IpAddr> = HashMap::new();
        loop {
            tokio::select! {
                event = self.tcp.next_event() => match event {
                    Some(EndpointEvent::PeerConnected { peer, addr }) => {
                        addresses.insert(peer, address_key(addr.ip()));
                        self.count(|s| s.connections = addresses.len() as u64);
                    }
                    Some(EndpointEvent::PeerDisconnected { peer, .. }) => {
                        addresses.remove(&peer);
                        self.count(|s| s.connections = addresses.len() as u64);
                    }
                    Some(EndpointEvent::Received(incoming)) => {
                        let ip = addresses.get(&incoming.peer).copied();
                        if ip.is_some_and(|ip| !limits.allow(ip, Instant::now())) {
                            self.count(|s| s.rate_limited += 1);
                            handle.close_peer(incoming.peer, "too many matchmaker requests; slow down");
                            continue;
                        }
                        let Some(ip) = ip else { continue };
                        let answer = self.answer(&incoming.message, ip).await;
                        self.track(&answer);
                        let reply = match answer {
                            Ok(Answer::Rooms(rooms)) => RoomAction::Listed(rooms),
                            Ok(Answer::Seat(seat)) => RoomAction::SeatReserved(seat),
                            Err(why) => RoomAction::MatchRefused(why),
                        };
                        if handle.send_to(incoming.peer, &reply).is_err() {
                            handle.close_peer(incoming.peer, "the answer could not be sent");
                        }
                    }
                    Some(_) => {}
                    None => break,
                },
                _ = &mut shutdown => break,
                _ = self.stop.cancelled() => break,
            }
        }
        handle.shutdown("matchmaker shutting down");
    }

    async fn answer(&mut self, message: &Message, asker: IpAddr) -> Result<Answer, Refusal> {
        let unavailable = directory_unavailable;
        let malformed = || "unknown or malformed request".to_string();
        match message.typed::<RoomAction>() {
            Ok(RoomAction::MatchList) => {
                let rooms = self.directory.list(self.config.max_listed).await;
                Ok(Answer::Rooms(rooms.map_err(unavailable)?))
            }
            Ok(RoomAction::MatchCreate) => Ok(Answer::Seat(self.seat_in_new_room().await?)),
            Ok(RoomAction::MatchJoin(room)) => Ok(Answer::Seat(self.seat_in(room, asker).await?)),
            _ => Err(malformed()),
        }
    }

    /// Counts the answer, and tells the log of the directory's outages,
    /// once each: an answer is a call that reached it, unless it is the
    /// outage's refusal.
    fn track(&mut self, answer: &Result<Answer, Refusal>) {
        match answer {
            Err(why) if why == UNAVAILABLE => {
                self.count(|s| {
                    s.refused += 1;
                    s.directory_errors += 1;
                });
                self.outage
                    .failed(&"a call to Redis failed (debug logs each)");
            }
            Err(_) => self.count(|s| s.refused += 1),
            Ok(answer) => {
                let seat = matches!(answer, Answer::Seat(_));
                self.count(|s| *if seat { &mut s.seats } else { &mut s.lists } += 1);
                self.outage.succeeded();
            }
        }
    }

    fn count(&self, change: impl FnOnce(&mut MatchmakerStats)) {
        change(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The service's reservation key, read from the directory once.
    async fn key(&mut self) -> Result<TokenKey, Refusal> {
        if let Some(key) = self.key {
            return Ok(TokenKey(key));
        }
        let key = self
            .directory
            .signing_key()
            .await
            .map_err(directory_unavailable)?
            .ok_or_else(|| "no rooms server is running".to_string())?;
        self.key = Some(key);
        Ok(TokenKey(key))
    }

    /// A reservation's expiry, in Unix seconds (its token's granularity:
    /// rounded up, so it lives at least `reservation_ttl`).
    fn expiry(&self) -> u64 {
        (unix_ms() + self.config.reservation_ttl.as_millis() as u64).div_ceil(1000)
    }

    /// A reservation to create a room on the live process with the fewest
    /// players, or on the game server Agones allocates.
    async fn seat_in_new_room(&mut self) -> Result<Seat, Refusal> {
        let key = self.key().await?;
        let reach = match self.allocator.clone() {
            Some(allocator) => self.allocated(&allocator).await?,
            None => self
                .directory
                .least_loaded()
                .await
                .map_err(directory_unavailable)?
                .ok_or_else(|| "no rooms server is running".to_string())?,
        };
        let reservation = Reservation::seal_new(&key, None, reach.process, self.expiry());
        Ok(seat(reach, reservation))
    }

    /// The rooms process of a game server the allocator hands over.
    async fn allocated(&mut self, allocator: &Allocator) -> Result<ProcessReach, Refusal> {
        let server = allocator
            .allocate(&Default::default())
            .await
            .map_err(|err| {
                tracing::warn!(%err, "no game server allocated");
                err.to_string()
            })?;
        self.count(|s| s.allocations += 1);
        let addr = server.addr("game").ok_or_else(|| {
            format!(
                "the allocated server {} has no port named game",
                server.name
            )
        })?;
        self.directory
            .reach_at(&addr)
            .await
            .map_err(directory_unavailable)?
            .ok_or_else(|| {
                format!(
                    "the allocated server {} ({addr}) is not in the room directory yet; retry shortly",
                    server.name
                )
            })
    }

    /// A seat in `room` for `asker`, counted in Redis with the room's
    /// members and against the asker's live reservations.
    async fn seat_in(&mut self, room: RoomId, asker: IpAddr) -> Result<Seat, Refusal> {
        let key = self.key().await?;
        // The seat is counted under the reservation's own number (the room's
        // process, once it takes the reservation, stops counting it); the
        // reservation is signed once the process is known.
        let nonce = switchboard::session::ticket::token_nonce();
        let ask = SeatAsk {
            room,
            asker,
            nonce,
            ttl: self.config.reservation_ttl,
            max_per_asker: self.config.max_reservations_per_address,
        };
        let process = self
            .directory
            .hold_seat(ask)
            .await
            .map_err(directory_unavailable)?
            .map_err(|refusal| refusal.to_string())?;
        let reach = self
            .directory
            .reach(process)
            .await
            .map_err(directory_unavailable)?
            .ok_or_else(|| "the room's server is gone".to_string())?;
        let reservation = Reservation::seal(&key, Some(room), process, self.expiry(), nonce);
        Ok(seat(reach, reservation))
    }
}

/// A seat on the process `reach` names, pinned by its fingerprint.
fn seat(reach: ProcessReach, reservation: Reservation) -> Seat {
    Seat {
        addr: reach.addr,
        reservation,
        tls: reach.fingerprint.map(|f| f.0),
    }
}

/// What a client is told when the room directory cannot be read: a stable,
/// short reason. The store's own words go to the log, once per outage
/// (`Matchmaker::track`).
const UNAVAILABLE: &str = "room directory unavailable; retry shortly";

fn directory_unavailable(err: StoreError) -> Refusal {
    tracing::debug!(%err, "room directory call failed");
    UNAVAILABLE.to_string()
}
