//! AxisPy compatibility: unchanged AxisPy games (their `MultiplayerComponent`
//! in client mode) join Switchboard rooms as if Switchboard were their host.
//!
//! AxisPy speaks WebSocket with one JSON object per text frame
//! (`../shared/compat/axispy-protocol.md`; `docs/COMPAT.md` says what works
//! and what differs). The listener translates each AxisPy connection into a
//! Switchboard session with the rooms server, attached to the
//! [`ServerManager`](switchboard::ServerManager) over an in-memory pipe
//! under the client's own address: [`RoomsLogic`](switchboard_rooms::RoomsLogic) is the
//! authority, native, JavaScript and AxisPy players meet in the same rooms,
//! and the per-address limits count them all together.
//!
//! The room: the WebSocket path names it (`ws://host:8765/duel`), or the
//! query (`?room=duel`); `/` is the room "Lobby". It is created (public, at
//! most `?max_players=N`, default 8) by the first player who asks for it.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | the root | [`AxisPyListener`] started by its [`AxisPyBuilder`] as a [`RunningAxisPy`], [`AxisPyConfig`]: the listener, its limits, its counters |
//! | `wire.rs` | the JSON envelope, room and player dicts, payloads to and from native clients |
//! | `directory.rs` | AxisPy ids across connections: sessions, takeover rules, kicks |
//! | `bridge.rs` | one connection: its loop |
//! | `join.rs` | the join: the id's claim, the session, the room |
//! | `to_rooms.rs`, `to_axispy.rs` | the translation each way |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod bridge;
mod directory;
mod join;
mod to_axispy;
mod to_rooms;
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard::lifecycle::ListenOptions;

use switchboard::lifecycle::{Running, StopHandle};
use switchboard::session::RateLimit;
use switchboard::socket::{
    accept_upgrade, forbid, Listener, ListenerLimits, Upgrade, UpgradeRules,
};
use switchboard::tls::{secure, TlsServer, PLAINTEXT_REFUSED};
use switchboard::ManagerHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// AxisPy's customary port.
pub const DEFAULT_PORT: u16 = 8765;

/// The AxisPy listener's settings; every limit with its default.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisPyConfig {
    /// Bytes of one message (default 64 KiB; AxisPy itself takes up to
    /// 1 MiB, and this listener never sends it more). Larger messages get
    /// an error message and a strike.
    pub max_message_bytes: usize,
    /// Nesting of a message's JSON (default 32). Deeper ones are refused
    /// before they are parsed: an error message and a strike.
    pub max_json_depth: usize,
    /// Messages a client may send (default 60 a second, bursts of 120).
    /// Past it: dropped, an error message, a strike.
    pub message_rate: RateLimit,
    /// Bytes a client may send (default 64 KiB a second, bursts of 256 KiB).
    pub byte_rate: RateLimit,
    /// Strikes (bad JSON, over a limit) before the connection is closed
    /// with code 4008 (default 20).
    pub max_strikes: u32,
    /// Connections open at once, joined or not (default 1,024); more are
    /// closed at accept.
    pub max_connections: usize,
    /// Connections open at once from one address (an IPv6 /64 counts as
    /// one; default 32, the sessions a manager allows one address); more
    /// are closed at accept.
    pub max_connections_per_address: usize,
    /// Connections in their WebSocket handshake at once (default 64); more
    /// are closed at once (the client retries a second later).
    pub max_pending_handshakes: usize,
    /// Connections from one address in their WebSocket handshake at once
    /// (default 4); more are closed at once, so that silent connections
    /// from one address never hold the others' handshakes up.
    pub max_pending_handshakes_per_address: usize,
    /// Web pages (`Origin` headers) allowed to connect (default none).
    /// AxisPy's client sends no `Origin`; a browser always does, so by
    /// default no web page a player opens can connect from the player's own
    /// address (the proof an id takeover relies on). Refused with 403.
    pub allowed_origins: Vec<String>,
    /// Bytes of the WebSocket upgrade's HTTP request head (default 8 KiB);
    /// a longer one is answered 431 (as are more than
    /// `switchboard::socket::MAX_HEADERS` headers).
    pub max_request_head: usize,
    /// How long the WebSocket handshake may take (default 10 s).
    pub handshake_timeout: Duration,
    /// How long a join (session, room list, join or create) may take
    /// (default 10 s); past it the client is refused.
    pub join_timeout: Duration,
    /// How long a connection may stay open without asking to join
    /// (default 10 s; AxisPy's client asks at once); past it it is closed
    /// with 4011.
    pub join_wait: Duration,
    /// A connection that sends no message for this long is closed with
    /// 4011 (default 60 s). WebSocket pings do not count (AxisPy's client
    /// sends them every 20 s from a thread of its own, even when its game
    /// is frozen); a joined client answers the listener's `ping` messages.
    pub idle_timeout: Duration,
    /// How long a client has to take a message (default 10 s); one that
    /// does not read is dropped as a slow consumer, its session waiting
    /// out its grace.
    pub write_timeout: Duration,
    /// Interval of the listener's `ping` to joined clients, and of the idle
    /// check (default 5 s).
    pub ping_interval: Duration,
    /// How long the connection holding an id has to show it is alive when
    /// another claims the id (default 2 s).
    pub probe_timeout: Duration,
    /// AxisPy ids remembered at most, for reconnects and kicks (default
    /// 10,000); past it new ids are refused "server full".
    pub max_known_players: usize,
    /// AxisPy ids remembered per address at most (default 32): a new one
    /// past it makes the address's id released the longest ago be
    /// forgotten; when all are held, it is refused "too many players from
    /// your address".
    pub max_known_players_per_address: usize,
    /// Bytes of an entity's merged state (owners send only what changed;
    /// the listener keeps the union) as JSON (default 16 KiB, the rooms
    /// server's own limit). An update that would grow it past this is not
    /// merged: an error message and a strike.
    pub max_entity_state_bytes: usize,
    /// How long a disconnected AxisPy id is remembered (default 60 s: the
    /// session grace of a default `ManagerConfig`).
    pub grace: Duration,
    /// Players needed for the automatic start (default 2): the room's host
    /// starts the game once every member is ready.
    pub auto_start_min_players: usize,
    /// Bytes of the in-memory pipe to the manager, each way (default 256 KiB).
    pub pipe_bytes: usize,
    /// How it speaks to other machines (default: `wss://` with the
    /// server's own identity, as the game's ports; see
    /// [`TlsSettings`](switchboard::tls::TlsSettings)). A plain `ws://`
    /// request from another machine is answered 403 saying so; AxisPy games
    /// off this machine join with `wss://HOST:PORT/room`. The TLS handshake
    /// counts within `handshake_timeout`.
    pub tls: switchboard::tls::TlsSettings,
}

impl Default for AxisPyConfig {
    fn default() -> Self {
        // The rates and strikes of any client of a manager.
        let manager = switchboard::ManagerConfig::default();
        Self {
            max_message_bytes: 64 * 1024,
            max_json_depth: 32,
            message_rate: manager.rules.message_rate,
            byte_rate: manager.rules.byte_rate,
            max_strikes: manager.rules.max_strikes,
            max_connections: 1024,
            max_connections_per_address: 32,
            max_pending_handshakes: 64,
            max_pending_handshakes_per_address: 4,
            allowed_origins: Vec::new(),
            max_request_head: 8 * 1024,
            handshake_timeout: Duration::from_secs(10),
            join_timeout: Duration::from_secs(10),
            join_wait: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(2),
            max_known_players: 10_000,
            max_known_players_per_address: 32,
            max_entity_state_bytes: switchboard_rooms::MAX_ENTITY_STATE,
            grace: Duration::from_secs(60),
            auto_start_min_players: 2,
            pipe_bytes: 256 * 1024,
            tls: switchboard::tls::TlsSettings::default(),
        }
    }
}

/// Counters of the listener.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) connections: AtomicU64,
    pub(crate) bad_messages: AtomicU64,
}

/// The room a connection asks for.
#[derive(Debug, Clone)]
pub(crate) struct RoomAsk {
    pub(crate) name: String,
    pub(crate) max_players: u8,
}

impl RoomAsk {
    /// From the request's path and query.
    fn of(path_and_query: &str) -> Self {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let mut name = path.trim_matches('/').to_string();
        let mut max_players = 8;
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("room", value)) if !value.is_empty() => name = value.to_string(),
                Some(("max_players", value)) => {
                    max_players = value.parse::<u8>().unwrap_or(8).clamp(2, 64)
                }
                _ => {}
            }
        }
        let name: String = percent_decode(&name)
            .chars()
            .filter(|c| !c.is_control())
            .take(32)
            .collect();
        Self {
            name: if name.trim().is_empty() {
                "Lobby".into()
            } else {
                name.trim().to_string()
            },
            max_players,
        }
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3)) {
            (b'%', Some(hex)) => match std::str::from_utf8(hex)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => out.push(b'%'),
            },
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the connections of one listener share.
pub(crate) struct ListenerState {
    pub(crate) config: AxisPyConfig,
    pub(crate) manager: ManagerHandle,
    pub(crate) directory: Mutex<directory::Directory>,
    /// Rooms are found by name: one join at a time.
    pub(crate) join_lock: tokio::sync::Mutex<()>,
    pub(crate) next_conn: AtomicU64,
    pub(crate) stats: Stats,
}

/// A running AxisPy listener's handle: where it listens, and the way to
/// stop it.
#[derive(Debug, Clone)]
pub struct AxisPyListener {
    addr: SocketAddr,
    stop: CancellationToken,
}

/// An AxisPy listener about to start, made by [`AxisPyListener::builder`]:
/// the same shape as the relay's and a game server's builders.
#[derive(Debug)]
pub struct AxisPyBuilder {
    manager: ManagerHandle,
    config: AxisPyConfig,
    listen: ListenOptions,
}

/// The listener's accept loop, bound, ready to [`run`](Self::run).
pub struct AxisPyServer {
    listener: TcpListener,
    shared: Arc<ListenerState>,
    tls: Option<TlsServer>,
    stop: CancellationToken,
}

impl std::fmt::Debug for AxisPyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AxisPyServer").finish_non_exhaustive()
    }
}

/// An AxisPy listener running in this process: reads like its
/// [`AxisPyListener`]; `shutdown().await` stops accepting (connections end
/// with the manager).
pub type RunningAxisPy = Running<AxisPyListener, ()>;

impl StopHandle for AxisPyListener {
    fn stop(&self) {
        self.stop.cancel();
    }
}

impl AxisPyBuilder {
    /// Its limits and TLS (default [`AxisPyConfig::default`]).
    pub fn config(mut self, config: AxisPyConfig) -> Self {
        self.config = config;
        self
    }

    switchboard::listen_setters!("The port (default 0: a free one, read with `local_addr`).");

    /// Binds and returns the accept loop and its handle, for tokio code
    /// that runs it itself (`server.run().await`).
    pub fn build(self) -> std::io::Result<(AxisPyServer, AxisPyListener)> {
        let addr = self.listen.addr();
        let listener = switchboard::lifecycle::tcp_listener(addr)?;
        let addr = listener.local_addr()?;
        let config = self.config;
        let manager = self.manager;
        let tls = config.tls.for_address(addr)?;
        let shared = Arc::new(ListenerState {
            directory: Mutex::new(directory::Directory::new(
                manager.player_ids().clone(),
                config.max_known_players,
                config.max_known_players_per_address,
                config.grace,
            )),
            config,
            manager,
            join_lock: tokio::sync::Mutex::new(()),
            next_conn: AtomicU64::new(1),
            stats: Stats::default(),
        });
        let stop = CancellationToken::new();
        tracing::info!(%addr, "listening for AxisPy clients");
        let handle = AxisPyListener {
            addr,
            stop: stop.clone(),
        };
        let server = AxisPyServer {
            listener,
            shared,
            tls,
            stop,
        };
        Ok((server, handle))
    }

    /// Binds and runs the listener on the background runtime (or the
    /// current one).
    pub fn spawn(self) -> std::io::Result<RunningAxisPy> {
        let (server, handle) = self.build()?;
        Ok(Running::spawn(handle, server.run()))
    }
}

impl AxisPyServer {
    /// Accepts AxisPy clients until its handle stops it.
    pub async fn run(self) {
        accept_loop(self.listener, self.shared, self.tls, self.stop).await;
    }
}

impl AxisPyListener {
    /// Starts describing a listener that joins AxisPy clients to the rooms
    /// of the manager `manager` runs (its logic must be
    /// [`RoomsLogic`](switchboard_rooms::RoomsLogic)): loopback, a free
    /// port, default limits, until told otherwise.
    pub fn builder(manager: ManagerHandle) -> AxisPyBuilder {
        AxisPyBuilder {
            manager,
            config: AxisPyConfig::default(),
            listen: ListenOptions::default(),
        }
    }

    /// Where AxisPy clients connect (`ws://<this>/<room>`).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting; connections end with the manager.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<ListenerState>,
    tls: Option<TlsServer>,
    stop: CancellationToken,
) {
    let config = &shared.config;
    let limits = ListenerLimits {
        max_connections: config.max_connections,
        max_connections_per_address: config.max_connections_per_address,
        max_pending: config.max_pending_handshakes,
        max_pending_per_address: config.max_pending_handshakes_per_address,
    };
    // The one server-side WebSocket handshake of the project, with this
    // listener's limits (no subprotocol: AxisPy's client fails a handshake
    // that names one).
    let rules = Arc::new(UpgradeRules {
        max_request_head: config.max_request_head,
        allowed_origins: Some(config.allowed_origins.clone()),
        max_message: config.max_message_bytes,
        pages: Vec::new(),
        webtransport: None,
    });
    Listener::new(listener, "AxisPy", limits, stop)
        .serve(|arrival| {
            shared.stats.connections.fetch_add(1, Ordering::Relaxed);
            let (shared, rules, tls) = (shared.clone(), rules.clone(), tls.clone());
            async move {
                let (stream, addr, mut places) = arrival.into_parts();
                let timeout = shared.config.handshake_timeout;
                // TLS (off loopback) and the upgrade, within one deadline.
                let upgraded = tokio::time::timeout(timeout, async {
                    match secure(stream, addr, tls.as_ref()).await? {
                        Ok(stream) => accept_upgrade(stream, &rules).await,
                        Err(mut plain) => {
                            forbid(&mut plain, PLAINTEXT_REFUSED).await?;
                            Ok(Upgrade::Refused("plaintext from another machine"))
                        }
                    }
                })
                .await;
                places.handshake_done();
                if let Ok(Ok(Upgrade::WebSocket { ws, path })) = upgraded {
                    bridge::Bridge::new(*ws, addr, RoomAsk::of(&path), shared)
                        .run()
                        .await;
                }
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_comes_from_the_path_or_the_query() {
        let ask = RoomAsk::of("/");
        assert_eq!((ask.name.as_str(), ask.max_players), ("Lobby", 8));
        assert_eq!(RoomAsk::of("/duel").name, "duel");
        assert_eq!(
            RoomAsk::of("/x?room=Big%20Hall&max_players=4").name,
            "Big Hall"
        );
        assert_eq!(RoomAsk::of("/?max_players=4").max_players, 4);
        assert_eq!(RoomAsk::of("/?max_players=1000").max_players, 8);
        assert_eq!(RoomAsk::of(&format!("/{}", "a".repeat(100))).name.len(), 32);
    }
}
