//! One AxisPy connection: its JSON messages translated to a Switchboard
//! session with the rooms server, and back.
//!
//! ```text
//!  Waiting ──join_request──▶ joining (hello, list, join or create: one join
//!     │                        at a time on the listener)
//!     │                        ├─ accepted ─▶ Joined ─disconnect / kick─▶ closed
//!     │                        └─ refused ──▶ Inert (open, forwards nothing)
//!     └─ socket lost ─▶ closed (a joined session waits out its grace)
//! ```
//!
//! The session is a real connection to the `ServerManager`, attached over an
//! in-memory pipe under the AxisPy client's own address: `RoomsLogic` is the
//! authority for everything (full rooms, started games, owners, stamps),
//! and per-address limits count the AxisPy client with everyone else.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use switchboard::manager::protocol::{self as session, RequestFrame};
use switchboard::message::{Message, TypedMessage};
use switchboard::session::RateLimiter;
use switchboard::socket::{CloseCode, SocketEvent, SocketStream};
use switchboard::tls::Secured;
use switchboard::ClientId;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode as WsCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::WebSocketStream;

use super::directory::Probe;
use super::wire::{self, SERVER_ID};
use super::{ListenerState, RoomAsk};
use switchboard_rooms::protocol::{EntityId, RoomAction};
use switchboard_rooms::RoomView;

/// Close codes this listener uses: 4xxx, so that the client waits a second
/// before it reconnects (1000, 1001 and 1005 bring it back at once).
pub(super) const KICKED: u16 = 4001;
const REPLACED: u16 = 4002;
pub(super) const LEFT: u16 = 4003;
const ABUSE: u16 = 4008;
pub(super) const GONE: u16 = 4011;

type Socket = WebSocketStream<Secured>;

/// The player this connection is, once joined.
pub(super) struct Me {
    /// Its AxisPy id.
    pub(super) id: String,
    pub(super) client: ClientId,
    /// The room it is in, by name.
    pub(super) room: String,
}

/// How the connection ended, for the log.
pub(super) enum End {
    Lost,
    Closed(&'static str),
}

pub(super) struct Bridge {
    pub(super) ws: Socket,
    pub(super) addr: SocketAddr,
    pub(super) ask: RoomAsk,
    pub(super) shared: Arc<ListenerState>,
    pub(super) conn: u64,
    pub(super) session: Option<SocketStream>,
    pub(super) me: Option<Me>,
    /// Refused: kept open, forwards nothing (the client would otherwise
    /// reconnect at once and ask again).
    pub(super) inert: bool,
    pub(super) view: RoomView,
    /// Full states of the entities this player owns (x, y, r and the union
    /// of vars), since owners send only what changed.
    pub(super) mine: HashMap<EntityId, Value>,
    /// Despawns this player asked for (it already removed them).
    pub(super) despawning: HashSet<EntityId>,
    next_request: u64,
    /// What each pending request was, when its rejection needs an answer.
    pub(super) pending: HashMap<u64, Pending>,
    pub(super) start_asked: bool,
    /// The client did not take a message within the write timeout.
    slow: bool,
    /// How AxisPy clients name the players seen in the room.
    pub(super) names: HashMap<ClientId, String>,
    limiter: RateLimiter,
    strikes: u32,
    probes: mpsc::Receiver<Probe>,
    pub(super) probe_tx: mpsc::Sender<Probe>,
    /// A probe being answered: its reply and deadline.
    probing: Option<(Probe, Instant)>,
    /// When the client last sent a message.
    heard: Instant,
    /// When the connection opened (for `join_wait`).
    opened: Instant,
    /// When the client was last sent a `ping`.
    pinged: Instant,
}

/// Requests whose rejection the client must hear about.
pub(super) enum Pending {
    /// A despawn: refused, the entity is sent back to the client.
    Despawn(EntityId),
}

impl Bridge {
    pub(super) fn new(
        ws: Socket,
        addr: SocketAddr,
        ask: RoomAsk,
        shared: Arc<ListenerState>,
    ) -> Self {
        let conn = shared
            .next_conn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (probe_tx, probes) = mpsc::channel(4);
        let limiter = RateLimiter::new(
            shared.config.message_rate,
            shared.config.byte_rate,
            Instant::now(),
        );
        Self {
            ws,
            addr,
            ask,
            shared,
            conn,
            session: None,
            me: None,
            inert: false,
            view: RoomView::default(),
            mine: HashMap::new(),
            despawning: HashSet::new(),
            next_request: 1,
            pending: HashMap::new(),
            start_asked: false,
            slow: false,
            names: HashMap::new(),
            limiter,
            strikes: 0,
            probes,
            probe_tx,
            probing: None,
            heard: Instant::now(),
            opened: Instant::now(),
            pinged: Instant::now(),
        }
    }

    pub(super) async fn run(mut self) {
        let end = self.serve().await;
        if let Some(me) = self.me.take() {
            self.shared
                .directory
                .lock()
                .expect("directory lock")
                .release(&me.id, self.conn, Instant::now());
        }
        if let Some(session) = self.session.take() {
            // Not a goodbye: the session waits out its grace for the
            // client's return (a leave or a kick closed it already).
            session
                .handle()
                .close(CloseCode::GOING_AWAY, "AxisPy connection ended");
        }
        match end {
            End::Lost => tracing::debug!(addr = %self.addr, "AxisPy connection lost"),
            End::Closed(why) => tracing::debug!(addr = %self.addr, why, "AxisPy connection closed"),
        }
    }

    async fn serve(&mut self) -> End {
        let config = self.shared.config.clone();
        // Often enough for the join wait too (a test may shorten it).
        let every = config
            .ping_interval
            .min(config.join_wait)
            .max(Duration::from_millis(10));
        let first = tokio::time::Instant::now() + every;
        let mut tick = tokio::time::interval_at(first, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.slow {
                return End::Closed("slow consumer");
            }
            let probe_deadline = self.probing.as_ref().map(|(_, at)| *at);
            tokio::select! {
                frame = self.ws.next() => {
                    // Any frame (a pong too) shows the peer is there for a
                    // probe; only messages count against the idle timer.
                    if let Some((reply, _)) = self.probing.take() {
                        let _ = reply.send(true);
                    }
                    match frame {
                        Some(Ok(Ws::Text(text))) => {
                            self.heard = Instant::now();
                            if let Err(end) = self.on_text(text.as_str()).await {
                                return end;
                            }
                        }
                        Some(Ok(Ws::Close(_))) | None | Some(Err(_)) => return End::Lost,
                        // Binary frames mean nothing here; pings are answered
                        // by the WebSocket layer.
                        Some(Ok(_)) => {}
                    }
                }
                event = next_session_event(&mut self.session) => {
                    if let Err(end) = self.on_session(event).await {
                        return end;
                    }
                }
                Some(probe) = self.probes.recv() => {
                    // Another connection claims our id: are we alive?
                    let _ = self.ws.send(Ws::Ping(Vec::new().into())).await;
                    self.probing = Some((probe, Instant::now() + config.probe_timeout));
                }
                _ = sleep_until(probe_deadline) => {
                    // Silent: the id goes to the newcomer.
                    if let Some((reply, _)) = self.probing.take() {
                        let _ = reply.send(false);
                    }
                    self.close(REPLACED, "replaced by a new connection").await;
                    return End::Closed("replaced");
                }
                _ = tick.tick() => {
                    if self.heard.elapsed() > config.idle_timeout {
                        self.close(GONE, "idle").await;
                        return End::Closed("idle");
                    }
                    let waiting = self.me.is_none() && !self.inert;
                    if waiting && self.opened.elapsed() > config.join_wait {
                        self.close(GONE, "no join request").await;
                        return End::Closed("no join");
                    }
                    if self.me.is_some() && self.pinged.elapsed() >= config.ping_interval {
                        self.pinged = Instant::now();
                        let ts = wire::unix_time();
                        self.send("ping", Some(SERVER_ID), json!({"ts": ts})).await;
                    }
                }
            }
        }
    }

    /// One text frame from the client.
    async fn on_text(&mut self, text: &str) -> Result<(), End> {
        let config = &self.shared.config;
        if text.len() > config.max_message_bytes {
            return self
                .strike(&format!("message over {} bytes", config.max_message_bytes))
                .await;
        }
        if !self.limiter.allow(text.len(), Instant::now()) {
            return self.strike("over the rate limit").await;
        }
        let message = match wire::parse(text, config.max_json_depth) {
            Ok(message) => message,
            Err(err) => return self.strike(&err.to_string()).await,
        };
        if self.inert {
            return match message.t.as_str() {
                "disconnect" => {
                    self.close(LEFT, "left").await;
                    Err(End::Closed("left"))
                }
                _ => Ok(()),
            };
        }
        match (&self.me, message.t.as_str()) {
            (None, "join_request") => self.join(message).await,
            (None, "disconnect") => {
                self.close(LEFT, "left").await;
                Err(End::Closed("left"))
            }
            // One player per connection; nothing but a join before it.
            (_, "join_request") | (None, _) => Ok(()),
            (Some(_), _) => self.on_joined(message).await,
        }
    }

    /// A bad message: an error the client can log; too many close it.
    pub(super) async fn strike(&mut self, why: &str) -> Result<(), End> {
        self.strikes += 1;
        self.shared
            .stats
            .bad_messages
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.send("error", Some(SERVER_ID), json!({ "message": why }))
            .await;
        if self.strikes > self.shared.config.max_strikes {
            self.close(ABUSE, "too many bad messages").await;
            return Err(End::Closed("abuse"));
        }
        Ok(())
    }

    /// The next message from the server; the session's end is an error
    /// with its reason.
    pub(super) async fn next_session_message(&mut self) -> Result<Message, String> {
        loop {
            match next_session_event(&mut self.session).await {
                Some(SocketEvent::Received(message)) => return Ok(message),
                Some(SocketEvent::Disconnected(reason)) => {
                    self.session = None;
                    return Err(reason.to_string());
                }
                None => {
                    self.session = None;
                    return Err("server connection lost".into());
                }
                Some(_) => continue,
            }
        }
    }

    /// Sends a rooms request; its id.
    pub(super) async fn request(&mut self, request: RoomAction) -> Result<u64, String> {
        let id = self.next_request;
        self.next_request += 1;
        let mut content = Vec::new();
        request
            .encode_content(&mut content)
            .map_err(|e| e.to_string())?;
        let frame = RequestFrame {
            id,
            channel: request.channel_id(),
            action: request.action_id(),
            content,
        };
        let session = self.session.as_ref().ok_or("not connected to the server")?;
        let message = session::session_message(session::REQUEST, &frame);
        session.send(&message).map_err(|e| e.to_string())?;
        Ok(id)
    }

    /// Sends an AxisPy message. A client that does not take it within
    /// the write timeout is dropped at the loop's next turn (a failed send
    /// ends the loop at its next read).
    pub(super) async fn send(&mut self, t: &str, from: Option<&str>, d: Value) {
        let text = wire::message(t, from, d);
        let timeout = self.shared.config.write_timeout;
        if tokio::time::timeout(timeout, self.ws.send(Ws::Text(text.into())))
            .await
            .is_err()
        {
            self.slow = true;
        }
    }

    /// Closes the WebSocket with `code` and `reason`, and waits (briefly)
    /// for the client's side of the close handshake, reading what it still
    /// sends: hanging up at once could reset the connection and lose the
    /// close frame on the way.
    pub(super) async fn close(&mut self, code: u16, reason: &str) {
        let frame = CloseFrame {
            code: WsCode::from(code),
            reason: reason.to_string().into(),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            self.ws.close(Some(frame)).await?;
            while let Some(frame) = self.ws.next().await {
                frame?;
            }
            Ok::<(), tokio_tungstenite::tungstenite::Error>(())
        })
        .await;
    }
}

/// The next event of the session, or never when there is none.
async fn next_session_event(session: &mut Option<SocketStream>) -> Option<SocketEvent> {
    match session {
        Some(session) => session.next_event().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// A rooms rejection as AxisPy clients show it (the original host's texts
/// where it had one).
pub(super) fn axispy_reason(reason: &str) -> String {
    match reason {
        "that room is full" => "Room is full".into(),
        "the game in that room has started" => "Game already started".into(),
        "that room is locked" => "Room is locked".into(),
        other => other.into(),
    }
}
