//! The relay's one task: takes native and JSON players' events, runs the
//! [`Relay`], and delivers what it says, paced by [`Pacing`].

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard::histogram::Histogram;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::hub::{Link, Outgoing, Relay};
use crate::json::{error_line, json_line_of, JsonEvent, JsonQueue};
use crate::server::{Control, RelayAction, RelayChannel, RelayConfig, RelayHello};
use crate::transform::Transform;
use crate::zones::{Handover, ZoneOwner, Zones};
use crate::StartRecordingError;
use switchboard::message::EncodedMessage;
use switchboard::socket::{
    CloseCode, EndpointEvent, EndpointHandle, EndpointStream, IdBuildHasher, Pacer, PeerId,
};

mod batch;
mod deliver;
mod handover;
mod native;

use native::Peer;

use deliver::deliver;
pub(crate) use deliver::plain_frame;

/// Events taken in one go before the deliveries they caused may leave.
const BATCH: usize = 256;

/// How a player is reached.
enum Route {
    Native(PeerId),
    Json { lines: JsonQueue, errors: u32 },
}

/// The relay and the ways to reach its players.
struct Dispatch {
    relay: Relay,
    routes: HashMap<u32, Route, IdBuildHasher>,
    ids: HashMap<PeerId, Peer, IdBuildHasher>,
    handle: EndpointHandle,
    /// When native players' queued deliveries leave.
    pacer: Pacer,
    /// How long messages waited for this task, round by round.
    waits: Histogram,
    config: RelayConfig,
    started: Instant,
    log: crate::log::RelayLog,
    /// Zones across relays, when this is one of several.
    zones: Option<Zones>,
    /// Native players who asked for batches.
    batches: batch::Batches,
    /// The recording now, if any (the handle's too).
    recording: crate::record::Current,
}

impl Dispatch {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Writes to the players whose deliveries' wait is over at `now`
    /// (everyone at `None`), their batches first.
    fn flush(&mut self, now: Option<Instant>) {
        let due = self.pacer.take_due(now);
        self.queue_batches(&due);
        self.pacer.flush(&self.handle, due, now.is_some());
    }

    /// Queues the batches of `peers`, stamped with the tick and the time.
    fn queue_batches(&mut self, peers: &[PeerId]) {
        let now_ms = self.now_ms();
        let tick_ms = self.config.pacing.max_wait.as_millis() as u64;
        let tick = now_ms.checked_div(tick_ms).unwrap_or(0);
        self.batches.queue(peers, &self.handle, tick, now_ms);
    }

    fn on_native(&mut self, event: EndpointEvent) -> Vec<Outgoing> {
        match event {
            EndpointEvent::PeerConnected { peer, addr } => {
                let (id, out) = self.relay.join("", Some(addr), Link::Native, false);
                self.log
                    .info(format!("player {id} joined (native) from {addr}"));
                self.routes.insert(id, Route::Native(peer));
                self.ids.insert(peer, Peer::new(id));
                out
            }
            EndpointEvent::Received(incoming) => self.on_message(incoming.peer, incoming.message),
            EndpointEvent::PeerDisconnected { peer, reason } => match self.ids.remove(&peer) {
                Some(Peer { id, .. }) => {
                    self.batches.forget(peer);
                    self.log
                        .info(format!("player {id} left ({})", reason.kind()));
                    self.routes.remove(&id);
                    if let Some(zones) = &mut self.zones {
                        zones.forget(id);
                    }
                    self.leave(id)
                }
                None => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn on_json(&mut self, event: JsonEvent) -> Vec<Outgoing> {
        let now_ms = self.now_ms();
        match event {
            JsonEvent::Joined {
                addr,
                lines,
                id: reply,
            } => {
                let (id, out) = self.relay.join("", Some(addr), Link::Json, false);
                self.log
                    .info(format!("player {id} joined (JSON) from {addr}"));
                self.routes.insert(id, Route::Json { lines, errors: 0 });
                let _ = reply.send(id);
                out
            }
            JsonEvent::Line { id, line } => {
                let parsed = line.and_then(|line| {
                    serde_json::from_str::<Value>(&line).map_err(|e| format!("invalid JSON: {e}"))
                });
                let relay = &mut self.relay;
                let result = match parsed {
                    Ok(Value::Object(object)) => match object.get("type").and_then(Value::as_str) {
                        Some("transform") => Transform::from_json(&object)
                            .map(|t| relay.transform(id, t, now_ms))
                            .map_err(|err| err.to_string()),
                        Some("hello") => {
                            let name = object.get("name").and_then(Value::as_str).unwrap_or("");
                            let bot = object.get("bot").and_then(Value::as_bool).unwrap_or(false);
                            relay.describe(id, name, bot);
                            Ok(Vec::new())
                        }
                        _ => Err("unknown or missing \"type\"".to_string()),
                    },
                    Ok(_) => Err("a line must be a JSON object".into()),
                    Err(err) => Err(err),
                };
                result.unwrap_or_else(|message| self.garbage(id, &message))
            }
            JsonEvent::Gone { id } => {
                if self.routes.remove(&id).is_some() {
                    self.log.info(format!("player {id} left (JSON)"));
                }
                self.leave(id)
            }
        }
    }

    /// A native player's transform. A compact client that changes zone is
    /// told it left those it held (plain ones forget them themselves), so
    /// that neither side keeps them.
    fn route_native(
        &mut self,
        peer: PeerId,
        id: u32,
        transform: Transform,
        now_ms: u64,
    ) -> Vec<Outgoing> {
        let zone_of = |relay: &Relay| relay.player(id).and_then(|p| p.zone.clone());
        let moving = self.batches.is_compact(peer)
            && self.relay.player(id).and_then(|p| p.zone.as_deref()) != Some(&transform.zone);
        let before = moving.then(|| zone_of(&self.relay));
        let out = self.route(id, transform, now_ms);
        if let Some(before) = before {
            if zone_of(&self.relay) != before && self.batches.left_everyone(peer) > 0 {
                // The pacer writes them like any delivery.
                self.pacer.queued(&[peer], 1, Instant::now());
            }
        }
        out
    }

    /// Player `id` leaves the relay: out of its zone, forgotten.
    fn leave(&mut self, id: u32) -> Vec<Outgoing> {
        self.batches.forget_player(id);
        self.relay.leave(id)
    }

    /// A JSON player sent a line that is no use: told why; past its
    /// allowance, dropped (and out of its zone at once).
    fn garbage(&mut self, id: u32, message: &str) -> Vec<Outgoing> {
        self.relay.malformed_line();
        let cut = match self.routes.get_mut(&id) {
            Some(Route::Json { lines, errors }) => {
                *errors += 1;
                lines.push(&error_line(message));
                *errors > self.config.max_json_errors
            }
            _ => false,
        };
        if !cut {
            return Vec::new();
        }
        if let Some(Route::Json { lines, .. }) = self.routes.remove(&id) {
            lines.push(&error_line("too many invalid lines: disconnecting"));
            self.log
                .warn(format!("player {id} dropped: too many invalid lines"));
        }
        self.leave(id)
    }

    /// Disconnects player `id` for the operator: told why, out of its zone
    /// at once. `false` if there is no such player.
    fn kick(&mut self, id: u32, reason: &str) -> bool {
        match self.routes.remove(&id) {
            Some(Route::Native(peer)) => {
                self.handle.close_peer_with(peer, CloseCode::KICKED, reason)
            }
            Some(Route::Json { lines, .. }) => {
                lines.push(&error_line(&format!("kicked: {reason}")));
            }
            None => return false,
        }
        self.log.warn(format!(
            "player {id} kicked by the operator: {}",
            reason.escape_debug()
        ));
        let out = self.leave(id);
        self.deliver_all(out);
        true
    }

    /// Starts recording now, from a snapshot of the core; a stopped
    /// recording before it finishes on its own thread.
    fn start_recording(&mut self, path: std::path::PathBuf) -> Result<(), StartRecordingError> {
        if let Some(status) = self.recording.get().map(|r| r.status()) {
            if status.recording {
                return Err(StartRecordingError::AlreadyRecording(status.path));
            }
        }
        let snapshot = self
            .relay
            .snapshot()
            .map_err(StartRecordingError::Snapshot)?;
        let header = self.relay.record_header();
        let recorder =
            crate::record::RelayRecorder::create_from(&path, header, Some(snapshot), 65_536)
                .map_err(|source| StartRecordingError::File {
                    path: path.clone(),
                    source,
                })?;
        let recorder = std::sync::Arc::new(recorder);
        self.relay.record_to(recorder.clone());
        if let Some(old) = self.recording.replace(recorder) {
            std::thread::spawn(move || old.finish());
        }
        self.log
            .info(format!("recording to {} from now on", path.display()));
        Ok(())
    }

    /// Sends every player the operator's `text`; returns how many it
    /// reached.
    fn notice(&mut self, text: &str) -> usize {
        self.log
            .info(format!("notice to every player: {}", text.escape_debug()));
        let codec = &self.handle.config().socket.codec;
        let native = EncodedMessage::of(RelayChannel, RelayAction::Notice, text, codec).ok();
        let line = json_line_of(json!({"type": "notice", "text": text}).to_string());
        let mut reached = 0;
        for route in self.routes.values() {
            let sent = match route {
                Route::Native(peer) => native
                    .as_ref()
                    .is_some_and(|m| self.handle.send_encoded_to(*peer, m).is_ok()),
                Route::Json { lines, .. } => lines.push(&line),
            };
            reached += usize::from(sent);
        }
        reached
    }

    /// Delivers `outgoing`; a player dropped on the way (too slow, abusive)
    /// leaves its zone at once, and its leaving is delivered like any other
    /// event.
    fn deliver_all(&mut self, outgoing: Vec<Outgoing>) {
        let mut outgoing = VecDeque::from(outgoing);
        loop {
            while let Some((to, event)) = outgoing.pop_front() {
                let (slow, native, delivered) =
                    deliver(&self.routes, &self.handle, &mut self.batches, &to, &event);
                self.pacer.queued(&native, delivered, Instant::now());
                for id in slow {
                    tracing::debug!(player = id, "JSON client too slow; dropped");
                    self.log
                        .warn(format!("player {id} dropped: too slow (JSON)"));
                    self.routes.remove(&id);
                    outgoing.extend(self.leave(id));
                }
            }
            let full = self.batches.take_full();
            if !full.is_empty() {
                // Their batches leave now; the pacer writes them.
                self.queue_batches(&full);
            }
            let abusive = self.relay.take_abusive();
            if abusive.is_empty() {
                return;
            }
            for (id, reason) in abusive {
                tracing::warn!(player = id, %reason, "disconnected for abuse");
                self.log
                    .warn(format!("player {id} disconnected for abuse: {reason}"));
                match self.routes.remove(&id) {
                    Some(Route::Native(peer)) => {
                        self.handle.close_peer_with(peer, CloseCode::ABUSE, &reason)
                    }
                    // Told why; the queue closes with the route, and the
                    // connection with it.
                    Some(Route::Json { lines, .. }) => {
                        lines.push(&error_line(&reason));
                    }
                    None => {}
                }
                outgoing.extend(self.leave(id));
            }
        }
    }
}

/// The zone directory's next answer; never, without zones.
async fn next_zone_answer(zones: &mut Option<Zones>) -> (String, Result<ZoneOwner, String>) {
    match zones {
        Some(zones) => zones.next_answer().await,
        None => std::future::pending().await,
    }
}

/// The relay's task, until `stop` or the native listener ends.
pub(crate) async fn run(
    mut native: EndpointStream,
    mut json: mpsc::Receiver<JsonEvent>,
    mut control: mpsc::Receiver<Control>,
    config: RelayConfig,
    stop: CancellationToken,
    log: crate::log::RelayLog,
    recording: crate::record::Current,
) {
    let started = Instant::now();
    let config_precision = config.compact_precision;
    let mut hub = Dispatch {
        relay: {
            let mut relay = crate::hub::Relay::with_limits(config.limits);
            if let Some(zones) = &config.zones {
                relay = relay.with_id_prefix(zones.process);
            }
            if let Some(interest) = &config.interest {
                relay = relay.with_interest(*interest);
            }
            if let Some(recorder) = recording.get() {
                relay.record_to(recorder);
            }
            relay
        },
        zones: config.zones.clone().map(Zones::new),
        routes: HashMap::default(),
        ids: HashMap::default(),
        handle: native.handle(),
        pacer: Pacer::new(config.pacing, started),
        waits: Histogram::new(),
        config,
        started,
        log,
        batches: batch::Batches::new(config_precision),
        recording,
    };
    let wake = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(wake);
    let mut armed = false;
    loop {
        tokio::select! {
            event = native.next_event() => {
                let Some(event) = event else { break };
                let out = hub.on_native(event);
                hub.deliver_all(out);
                // What else has arrived goes with it.
                for _ in 0..BATCH {
                    let Some(event) = native.try_next_event() else { break };
                    let out = hub.on_native(event);
                    hub.deliver_all(out);
                }
                let wait = native.take_queue_wait();
                hub.waits.record(wait);
                hub.pacer.took(wait);
            }
            Some(event) = json.recv() => {
                let out = hub.on_json(event);
                hub.deliver_all(out);
                for _ in 0..BATCH {
                    let Ok(event) = json.try_recv() else { break };
                    let out = hub.on_json(event);
                    hub.deliver_all(out);
                }
            }
            Some(request) = control.recv() => match request {
                Control::Clients(reply) => { let _ = reply.send(hub.relay.clients()); }
                Control::Stats(reply) => {
                    let stats = crate::hub::RelayStats { queue_wait: hub.waits.clone(), ..hub.relay.stats() };
                    let _ = reply.send(stats);
                }
                Control::Kick { id, reason, done } => {
                    let _ = done.send(hub.kick(id, &reason));
                }
                Control::Notice { text, done } => {
                    let _ = done.send(hub.notice(&text));
                }
                Control::StartRecording { path, done } => {
                    let _ = done.send(hub.start_recording(path));
                }
            },
            (zone, owner) = next_zone_answer(&mut hub.zones) => {
                let out = hub.on_zone_answer(zone, owner);
                hub.deliver_all(out);
            }
            _ = &mut wake, if armed => armed = false,
            _ = stop.cancelled() => break,
        }
        if let Some(zones) = &hub.zones {
            zones
                .routing()
                .directory
                .set_players(hub.relay.player_count());
        }
        hub.flush(Some(Instant::now()));
        if let Some(due) = hub.pacer.next_due() {
            if !armed || wake.deadline() > due.into() {
                wake.as_mut().reset(due.into());
                armed = true;
            }
        }
    }
    hub.flush(None);
    hub.handle.shutdown("relay stopping");
}
