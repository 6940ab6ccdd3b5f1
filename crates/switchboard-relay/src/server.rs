//! The relay's IO: native players over Switchboard (channel 3), JSON players
//! over newline-delimited JSON, one hub task that owns the [`Relay`].

use std::collections::HashMap;
use std::collections::{HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;

use crate::hub::{Link, Relay, RelayClient, RelayEvent, RelayLimits, RelayStats};
use crate::transform::Transform;
use switchboard::message::Message;
use switchboard::runtime;
use switchboard::socket::{
    BindScope, CloseCode, PeerId, ServerConfig, ServerEvent, ServerHandle, ServerStream,
};

pub use switchboard::message::RELAY_CHANNEL;

switchboard::framework_channel! {
    /// The relay channel, as a [`Channel`](switchboard::Channel).
    RelayChannel = RELAY_CHANNEL, "Relay"
}

switchboard::actions! {
    /// What travels on the relay channel.
    pub enum RelayAction {
        /// Client → relay: [`Hello`] (name, bot flag).
        Hello = 1,
        /// Client → relay: a [`Transform`].
        Transform = 2,
        /// Relay → client: your player id (`u32`).
        Welcome = 3,
        /// Relay → client: a [`Relayed`] transform of someone in your zone.
        Relayed = 4,
        /// Relay → client: someone you could see left (`u32`).
        Left = 5,
        /// Relay → client: a message could not be used (`String`).
        Error = 6,
    }
}

/// A native client's introduction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Its name.
    pub name: String,
    /// Whether it is a bot.
    pub bot: bool,
}

/// A transform as the relay sends it on: stamped with the sender and the
/// server time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relayed {
    /// The sender.
    pub player_id: u32,
    /// The server's clock, milliseconds since it started.
    pub server_time_ms: u64,
    /// The transform.
    pub transform: Transform,
}

/// The relay's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// The native listener's limits.
    pub server: ServerConfig,
    /// The JSON compatibility listener's port (off by default; 0 picks one).
    pub json_port: Option<u16>,
    /// The longest JSON line (default 4096 bytes); a longer one gets an error
    /// line back and ends the connection (the rest of it cannot be framed).
    pub max_json_line: usize,
    /// Garbage lines (invalid JSON, not an object, unknown type, too long)
    /// a JSON client may send before it is disconnected (default 10).
    pub max_json_errors: u32,
    /// Lines waiting for a JSON client (default 1024); past it the client
    /// is disconnected as a slow consumer.
    pub json_queue: usize,
    /// Bytes waiting for a JSON client (default 256 KiB); past it the client
    /// is disconnected as a slow consumer, however few lines that is.
    pub json_queue_bytes: usize,
    /// How often relayed messages leave for native clients (default 5 ms,
    /// a 200 Hz send tick). What a client is sent within one tick leaves in
    /// one write: one system call for the relay and one wake-up for the
    /// client instead of one per transform. With 1,000 players at 10 Hz in
    /// zones of 20 on 2 cores, sending each transform at once saturates the
    /// relay (about 135,000 of the 190,000 deliveries a second, latency
    /// growing past seconds); the 5 ms tick carries all of them with half a
    /// core and p99 latency under 15 ms. It adds at most one tick (2.5 ms on
    /// average). Zero sends each message at once.
    pub send_interval: Duration,
    /// Per-player limits: transforms per second, burst, strikes before a
    /// disconnect for abuse.
    pub limits: RelayLimits,
    /// JSON connections open at once (default 1024). Further ones are
    /// closed at accept.
    pub max_json_connections: usize,
    /// JSON connections open at once from one address (default 16; an IPv6
    /// address counts per /64). Further ones are closed at accept.
    pub max_json_connections_per_ip: usize,
    /// A JSON client that sends nothing for this long is disconnected
    /// (default 120 s; a client sends a line, a transform or a hello, at
    /// least this often).
    pub json_idle_timeout: Duration,
    /// A line to a JSON client that cannot be written within this long
    /// disconnects it (default 10 s): a client that stops reading does not
    /// hold a task and a socket forever.
    pub json_write_timeout: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            server: ServerConfig::default(),
            json_port: None,
            max_json_line: 4096,
            max_json_errors: 10,
            json_queue: 1024,
            json_queue_bytes: 256 * 1024,
            send_interval: Duration::from_millis(5),
            limits: RelayLimits::default(),
            max_json_connections: 1024,
            max_json_connections_per_ip: 16,
            json_idle_timeout: Duration::from_secs(120),
            json_write_timeout: Duration::from_secs(10),
        }
    }
}

enum Route {
    Native(PeerId),
    Json { lines: JsonQueue, errors: u32 },
}

/// The lines waiting for one JSON client, bounded in lines and in bytes:
/// the hub's end. Dropping every sender ends the connection's writer.
struct JsonQueue {
    lines: mpsc::Sender<JsonLine>,
    bytes: Arc<AtomicUsize>,
    max_bytes: usize,
}

/// The connection writer's end of a [`JsonQueue`].
struct JsonLines {
    lines: mpsc::Receiver<JsonLine>,
    bytes: Arc<AtomicUsize>,
}

impl JsonQueue {
    fn new(config: &RelayConfig) -> (Self, JsonLines) {
        let (lines, rx) = mpsc::channel(config.json_queue.max(1));
        let bytes = Arc::new(AtomicUsize::new(0));
        let queue = JsonQueue {
            lines,
            bytes: bytes.clone(),
            max_bytes: config.json_queue_bytes,
        };
        (queue, JsonLines { lines: rx, bytes })
    }

    /// Queues `line`; `false` when the client is too far behind (in lines
    /// or in bytes) and must be dropped as a slow consumer.
    fn push(&self, line: &JsonLine) -> bool {
        let queued = self.bytes.fetch_add(line.len(), Ordering::Relaxed) + line.len();
        if queued > self.max_bytes || self.lines.try_send(line.clone()).is_err() {
            self.bytes.fetch_sub(line.len(), Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl JsonLines {
    /// Writes the queued lines until the hub drops the queue, a write fails
    /// or one takes longer than `timeout`; then hangs up.
    async fn write_to(mut self, mut write: OwnedWriteHalf, timeout: Duration) {
        while let Some(line) = self.lines.recv().await {
            let written = tokio::time::timeout(timeout, write.write_all(line.as_bytes())).await;
            self.bytes.fetch_sub(line.len(), Ordering::Relaxed);
            if !matches!(written, Ok(Ok(()))) {
                break;
            }
        }
        let _ = tokio::time::timeout(timeout, write.shutdown()).await;
    }
}

enum JsonEvent {
    Joined {
        addr: SocketAddr,
        lines: JsonQueue,
        id: oneshot::Sender<u32>,
    },
    Line {
        id: u32,
        line: Result<String, String>,
    },
    Gone {
        id: u32,
    },
}

enum Control {
    Clients(oneshot::Sender<Vec<RelayClient>>),
    Stats(oneshot::Sender<RelayStats>),
}

/// A running relay: its addresses, snapshots, and the way to stop it.
#[derive(Debug, Clone)]
pub struct RelayHandle {
    native_addr: SocketAddr,
    json_addr: Option<SocketAddr>,
    stop: CancellationToken,
    control: mpsc::Sender<Control>,
}

impl RelayHandle {
    /// Where native clients connect.
    pub fn native_addr(&self) -> SocketAddr {
        self.native_addr
    }

    /// Where JSON clients connect, when the listener is on.
    pub fn json_addr(&self) -> Option<SocketAddr> {
        self.json_addr
    }

    /// Stops the relay.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// Whether it still runs.
    pub fn is_running(&self) -> bool {
        !self.stop.is_cancelled() && !self.control.is_closed()
    }

    /// A copy of every client (not live state).
    pub async fn clients(&self) -> Vec<RelayClient> {
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Clients(tx)).await.is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// A copy of the counters.
    pub async fn stats(&self) -> RelayStats {
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Stats(tx)).await.is_err() {
            return RelayStats::default();
        }
        rx.await.unwrap_or_default()
    }
}

/// A relay bound to its ports, ready to [`run`](Self::run); or started at
/// once with [`spawn`](Self::spawn).
pub struct RelayServer {
    native: ServerStream,
    json: Option<TcpListener>,
    json_events: (mpsc::Sender<JsonEvent>, mpsc::Receiver<JsonEvent>),
    control: mpsc::Receiver<Control>,
    config: RelayConfig,
    stop: CancellationToken,
}

impl std::fmt::Debug for RelayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayServer")
            .field("native", &self.native.local_addr())
            .finish()
    }
}

impl RelayServer {
    /// Listens on `port` of `scope` (0 picks a free port), and on
    /// `config.json_port` for JSON-lines clients when set.
    pub fn bind(
        scope: BindScope,
        port: u16,
        config: RelayConfig,
    ) -> std::io::Result<(RelayServer, RelayHandle)> {
        let native = ServerStream::bind(scope, port, config.server.clone())?;
        let json = match config.json_port {
            Some(port) => {
                let _entered = runtime::handle().enter();
                let listener = std::net::TcpListener::bind(SocketAddr::new(scope.ip(), port))?;
                listener.set_nonblocking(true)?;
                Some(TcpListener::from_std(listener)?)
            }
            None => None,
        };
        let json_addr = json.as_ref().map(|l| l.local_addr()).transpose()?;
        let stop = CancellationToken::new();
        let (control_tx, control) = mpsc::channel(16);
        let handle = RelayHandle {
            native_addr: native.local_addr(),
            json_addr,
            stop: stop.clone(),
            control: control_tx,
        };
        let server = RelayServer {
            native,
            json,
            json_events: mpsc::channel(1024),
            control,
            config,
            stop,
        };
        Ok((server, handle))
    }

    /// Binds and runs the relay on the current tokio runtime (or the
    /// background one); [`RelayHandle::shutdown`] stops it.
    pub fn spawn(scope: BindScope, port: u16, config: RelayConfig) -> std::io::Result<RelayHandle> {
        let (server, handle) = Self::bind(scope, port, config)?;
        runtime::handle().spawn(server.run(std::future::pending::<()>()));
        Ok(handle)
    }

    /// Relays until `shutdown` completes or [`RelayHandle::shutdown`] is
    /// called, then closes every connection.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let (json_tx, json_rx) = self.json_events;
        if let Some(listener) = self.json {
            tokio::spawn(accept_json(
                listener,
                json_tx,
                self.config.clone(),
                self.stop.clone(),
            ));
        }
        let stop = self.stop.clone();
        let hub = hub(self.native, json_rx, self.control, self.config, self.stop);
        tokio::pin!(hub, shutdown);
        tokio::select! {
            _ = &mut hub => return,
            _ = &mut shutdown => stop.cancel(),
        }
        // The hub sees the cancellation and closes every connection.
        hub.await;
    }
}

/// A line for JSON clients, newline included, shared by every recipient.
type JsonLine = Arc<str>;

fn json_line_of(mut text: String) -> JsonLine {
    text.push('\n');
    text.into()
}

fn error_line(message: &str) -> JsonLine {
    json_line_of(json!({"type": "error", "message": message}).to_string())
}

/// Open JSON connections, in total and per address.
#[derive(Debug, Default)]
struct JsonCount {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Takes a JSON connection out of the count when it ends.
struct JsonSlot {
    count: Arc<Mutex<JsonCount>>,
    ip: IpAddr,
}

impl Drop for JsonSlot {
    fn drop(&mut self) {
        let mut count = self.count.lock().expect("json count lock");
        count.total -= 1;
        if let Some(n) = count.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                count.per_ip.remove(&self.ip);
            }
        }
    }
}

/// A JSON connection from `ip` may open, within the caps.
fn json_slot(count: &Arc<Mutex<JsonCount>>, ip: IpAddr, config: &RelayConfig) -> Option<JsonSlot> {
    let ip = switchboard::socket::address_key(ip);
    let mut counts = count.lock().expect("json count lock");
    let from_ip = counts.per_ip.get(&ip).copied().unwrap_or(0);
    if counts.total >= config.max_json_connections || from_ip >= config.max_json_connections_per_ip
    {
        return None;
    }
    counts.total += 1;
    *counts.per_ip.entry(ip).or_default() += 1;
    Some(JsonSlot {
        count: count.clone(),
        ip,
    })
}

async fn accept_json(
    listener: TcpListener,
    events: mpsc::Sender<JsonEvent>,
    config: RelayConfig,
    stop: CancellationToken,
) {
    let count = Arc::new(Mutex::new(JsonCount::default()));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.cancelled() => return,
        };
        let (stream, addr) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors and the like: back off, go on.
                tracing::warn!(%err, "JSON accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = json_slot(&count, addr.ip(), &config) else {
            tracing::debug!(%addr, "JSON connection over the caps: closed at accept");
            continue;
        };
        tokio::spawn(json_connection(
            stream,
            addr,
            events.clone(),
            config.clone(),
            slot,
        ));
    }
}

async fn json_connection(
    stream: TcpStream,
    addr: SocketAddr,
    events: mpsc::Sender<JsonEvent>,
    config: RelayConfig,
    _slot: JsonSlot,
) {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let (queue, queued) = JsonQueue::new(&config);
    let (id_tx, id_rx) = oneshot::channel();
    if events
        .send(JsonEvent::Joined {
            addr,
            lines: queue,
            id: id_tx,
        })
        .await
        .is_err()
    {
        return;
    }
    let Ok(id) = id_rx.await else { return };
    // The writer ends when the hub drops this client (garbage, slow, abuse,
    // stop); the reader stops with it, so the player leaves its zone at once.
    let mut writer = tokio::spawn(queued.write_to(write, config.json_write_timeout));
    let mut writer_done = false;
    let mut lines = FramedRead::new(read, LinesCodec::new_with_max_length(config.max_json_line));
    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(config.json_idle_timeout, lines.next()) => next,
            _ = &mut writer => {
                writer_done = true;
                break;
            }
        };
        let line = match next {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(_) => {
                tracing::debug!(%addr, "JSON client idle: disconnected");
                break;
            }
        };
        let line = match line {
            Ok(line) => Ok(line),
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                Err(format!("line longer than {} bytes", config.max_json_line))
            }
            Err(LinesCodecError::Io(_)) => break,
        };
        if events.send(JsonEvent::Line { id, line }).await.is_err() {
            break;
        }
    }
    // The hub drops this client's line queue on `Gone`; the writer then
    // sends what is queued (an error line, say) and hangs up.
    let _ = events.send(JsonEvent::Gone { id }).await;
    if !writer_done
        && tokio::time::timeout(Duration::from_secs(2), &mut writer)
            .await
            .is_err()
    {
        writer.abort();
    }
}

/// Encodes an event once per kind of link, then hands it to every recipient.
/// Native recipients are queued and added to `pending` when the relay sends
/// on a tick, sent at once when `pending` is `None`. Returns the JSON
/// recipients too far behind to take it: slow consumers, to be dropped.
fn deliver(
    routes: &HashMap<u32, Route>,
    native: &ServerHandle,
    pending: Option<&mut HashSet<PeerId>>,
    to: &[u32],
    event: &RelayEvent,
) -> Vec<u32> {
    let message = match event {
        RelayEvent::Welcome { player_id } => {
            Message::new(RelayChannel, RelayAction::Welcome, player_id)
        }
        RelayEvent::Left { player_id } => Message::new(RelayChannel, RelayAction::Left, player_id),
        RelayEvent::Transform {
            player_id,
            server_time_ms,
            transform,
        } => {
            let relayed = Relayed {
                player_id: *player_id,
                server_time_ms: *server_time_ms,
                transform: (**transform).clone(),
            };
            Message::new(RelayChannel, RelayAction::Relayed, &relayed)
        }
    };
    let encoded = message.ok().and_then(|m| native.encode(&m).ok());
    let mut json_line = None;
    let mut slow = Vec::new();
    let mut native_peers = Vec::new();
    for id in to {
        match routes.get(id) {
            Some(Route::Native(peer)) => native_peers.push(*peer),
            Some(Route::Json { lines, .. }) => {
                // Encoded once, shared by every JSON recipient.
                let line = json_line.get_or_insert_with(|| {
                    let value = match event {
                        RelayEvent::Welcome { player_id } => {
                            json!({"type": "welcome", "playerId": player_id})
                        }
                        RelayEvent::Left { player_id } => {
                            json!({"type": "disconnect", "playerId": player_id})
                        }
                        RelayEvent::Transform {
                            player_id,
                            server_time_ms,
                            transform,
                        } => transform.to_json(*player_id, *server_time_ms),
                    };
                    json_line_of(value.to_string())
                });
                if !lines.push(line) {
                    slow.push(*id);
                }
            }
            None => {}
        }
    }
    if let Some(encoded) = &encoded {
        match pending {
            Some(pending) => {
                native.queue_encoded_to_many(native_peers.iter().copied(), encoded);
                pending.extend(native_peers);
            }
            None => {
                native.send_encoded_to_many(native_peers, encoded);
            }
        }
    }
    slow
}

async fn hub(
    mut native: ServerStream,
    mut json: mpsc::Receiver<JsonEvent>,
    mut control: mpsc::Receiver<Control>,
    config: RelayConfig,
    stop: CancellationToken,
) {
    let started = Instant::now();
    let handle = native.handle();
    let mut relay = Relay::with_limits(config.limits);
    let mut routes: HashMap<u32, Route> = HashMap::new();
    let mut ids: HashMap<PeerId, u32> = HashMap::new();
    let ticking = !config.send_interval.is_zero();
    let mut pending: HashSet<PeerId> = HashSet::new();
    let mut tick = tokio::time::interval(config.send_interval.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let now_ms = started.elapsed().as_millis() as u64;
        let outgoing = tokio::select! {
            event = native.next_event() => match event {
                Some(ServerEvent::PeerConnected { peer, addr }) => {
                    let (id, out) = relay.join("", Some(addr), Link::Native, false);
                    routes.insert(id, Route::Native(peer));
                    ids.insert(peer, id);
                    out
                }
                Some(ServerEvent::Received(incoming)) => {
                    let Some(&id) = ids.get(&incoming.peer) else { continue };
                    let message = incoming.message;
                    match (message.channel::<RelayChannel>(), message.action::<RelayAction>()) {
                        (Some(_), Some(RelayAction::Transform)) => match message.content::<Transform>() {
                            Ok(transform) => relay.transform(id, transform, now_ms),
                            Err(err) => {
                                let reply = Message::new(RelayChannel, RelayAction::Error, &err.to_string());
                                if let Ok(reply) = reply {
                                    let _ = handle.send_to(incoming.peer, &reply);
                                }
                                Vec::new()
                            }
                        },
                        (Some(_), Some(RelayAction::Hello)) => {
                            if let Ok(hello) = message.content::<Hello>() {
                                relay.describe(id, &hello.name, hello.bot);
                            }
                            Vec::new()
                        }
                        _ => {
                            if let Ok(reply) = Message::new(RelayChannel, RelayAction::Error, "unknown channel or action") {
                                let _ = handle.send_to(incoming.peer, &reply);
                            }
                            Vec::new()
                        }
                    }
                }
                Some(ServerEvent::PeerDisconnected { peer, .. }) => match ids.remove(&peer) {
                    Some(id) => {
                        routes.remove(&id);
                        relay.leave(id)
                    }
                    None => Vec::new(),
                },
                Some(_) => Vec::new(),
                None => break,
            },
            Some(event) = json.recv() => match event {
                JsonEvent::Joined { addr, lines, id: reply } => {
                    let (id, out) = relay.join("", Some(addr), Link::Json, false);
                    routes.insert(id, Route::Json { lines, errors: 0 });
                    let _ = reply.send(id);
                    out
                }
                JsonEvent::Line { id, line } => {
                    let parsed = line.and_then(|line| serde_json::from_str::<Value>(&line).map_err(|e| format!("invalid JSON: {e}")));
                    let result = match parsed {
                        Ok(Value::Object(object)) => match object.get("type").and_then(Value::as_str) {
                            Some("transform") => Transform::from_json(&object).map(|t| relay.transform(id, t, now_ms)),
                            Some("hello") => {
                                let name = object.get("name").and_then(Value::as_str).unwrap_or("").chars().take(32).collect::<String>();
                                let bot = object.get("bot").and_then(Value::as_bool).unwrap_or(false);
                                relay.describe(id, &name, bot);
                                Ok(Vec::new())
                            }
                            _ => Err("unknown or missing \"type\"".to_string()),
                        },
                        Ok(_) => Err("a line must be a JSON object".into()),
                        Err(err) => Err(err),
                    };
                    match result {
                        Ok(out) => out,
                        Err(message) => {
                            relay.malformed_line();
                            let cut = match routes.get_mut(&id) {
                                Some(Route::Json { lines, errors }) => {
                                    *errors += 1;
                                    lines.push(&error_line(&message));
                                    *errors > config.max_json_errors
                                }
                                _ => false,
                            };
                            if cut {
                                if let Some(Route::Json { lines, .. }) = routes.remove(&id) {
                                    lines.push(&error_line("too many invalid lines: disconnecting"));
                                }
                                relay.leave(id)
                            } else {
                                Vec::new()
                            }
                        }
                    }
                }
                JsonEvent::Gone { id } => {
                    routes.remove(&id);
                    relay.leave(id)
                }
            },
            Some(request) = control.recv() => {
                match request {
                    Control::Clients(reply) => { let _ = reply.send(relay.clients()); }
                    Control::Stats(reply) => { let _ = reply.send(relay.stats()); }
                }
                Vec::new()
            }
            _ = tick.tick(), if ticking => {
                handle.flush_peers(pending.drain());
                Vec::new()
            }
            _ = stop.cancelled() => break,
        };
        // A player dropped here (too slow, abusive) leaves its zone at once,
        // and its leaving is delivered like any other event.
        let mut outgoing = VecDeque::from(outgoing);
        loop {
            while let Some((to, event)) = outgoing.pop_front() {
                let pending = ticking.then_some(&mut pending);
                for id in deliver(&routes, &handle, pending, &to, &event) {
                    tracing::debug!(player = id, "JSON client too slow; dropped");
                    routes.remove(&id);
                    outgoing.extend(relay.leave(id));
                }
            }
            let abusive = relay.take_abusive();
            if abusive.is_empty() {
                break;
            }
            for (id, reason) in abusive {
                tracing::warn!(player = id, %reason, "disconnected for abuse");
                match routes.remove(&id) {
                    Some(Route::Native(peer)) => {
                        handle.close_peer_with(peer, CloseCode::ABUSE, &reason)
                    }
                    // Told why; the queue closes with the route, and the
                    // connection with it.
                    Some(Route::Json { lines, .. }) => {
                        lines.push(&error_line(&reason));
                    }
                    None => {}
                }
                outgoing.extend(relay.leave(id));
            }
        }
    }
    handle.flush_peers(pending.drain());
    handle.shutdown("relay stopping");
}
