//! The real-time relay in Bevy: the game's avatar (an entity with a
//! [`NetTransform`] and [`RelayAvatar`]) is sent to the relay at a set
//! rate, and every other player in its zone is an entity with
//! [`RelayPlayer`] and a `NetTransform` drawn between the transforms
//! received (the relay stamps each with its clock). Players who leave the
//! zone, or the relay, are despawned.
//!
//! The relay keeps no sessions: after a lost connection the plugin
//! connects again (backoff 0.25 s doubling to 5 s) and the relay gives a
//! new player id. A redirect to the relay that owns the zone is followed
//! with its ticket, keeping the id.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bevy_app::{App, Plugin, PostUpdate, PreUpdate};
use bevy_ecs::prelude::*;

use switchboard::message::Message as NetMessage;
use switchboard::smoothing::{SmoothingConfig, SnapshotBuffer};
use switchboard::socket::Dialer;
use switchboard::tls::ServerTrust;
use switchboard::{Socket, SocketConfig, SocketEvent};
use switchboard_relay::client_core::{RelayClientCore, RelayClientEvent};
use switchboard_relay::{RelayAction, RelayChannel, RelayOptions, Transform};

use crate::client::SwitchboardSystems;
use crate::replicate::{NetTransform, Smoothed};

/// How the relay plugin plays; each field says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct RelaySettings {
    /// The relay's native address ("host:port").
    pub addr: String,
    /// The player's name, in the hello.
    pub name: String,
    /// The zone to play in (the relay's interest filter); change it with
    /// [`Relay::set_zone`].
    pub zone: String,
    /// Transforms sent per second at most while the avatar moves (default
    /// 20; the relay's default limit is 60).
    pub send_hz: f64,
    /// A still avatar's transform is sent again this often (default 1 s),
    /// so that players who enter the zone see it.
    pub keep_alive: Duration,
    /// How the others are drawn between the transforms received.
    pub smoothing: SmoothingConfig,
    /// Ask the relay for compact transforms (default true): a few bytes
    /// each instead of about fifty, positions to the relay's precision
    /// (1 cm by default), the same events.
    pub compact: bool,
    /// How a relay on another machine is trusted (default none: the
    /// platform's roots, then trust on first use); it is always spoken to
    /// in TLS, a relay on this machine in plain.
    pub trust: Option<ServerTrust>,
}

impl RelaySettings {
    /// Plays as `name` in `zone` of the relay at `addr`, with the defaults.
    pub fn new(addr: impl ToString, name: &str, zone: &str) -> Self {
        Self {
            addr: addr.to_string(),
            name: name.to_string(),
            zone: zone.to_string(),
            send_hz: 20.0,
            keep_alive: Duration::from_secs(1),
            smoothing: SmoothingConfig::default(),
            compact: true,
            trust: None,
        }
    }
}

/// The connection to the relay (a non-`Send` resource: `NonSend<Relay>`).
pub struct Relay {
    settings: RelaySettings,
    socket: Option<Socket>,
    /// Where to connect next.
    target: String,
    /// The relay session: what to say first on a connection (a hello, or
    /// a redirect's ticket), the player id, the compact stream.
    core: RelayClientCore,
    /// When to connect again after a loss.
    retry: Option<Instant>,
    last_sent: Option<Instant>,
    /// The avatar changed since its last transform went.
    dirty: bool,
    /// Connections lost in a row (0 once welcomed).
    failures: u32,
    /// Other players' entities, by their relay id.
    players: HashMap<u32, Entity>,
    /// Entities of the zone the avatar left, despawned next frame.
    left_behind: Vec<Entity>,
    epoch: Instant,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("target", &self.target)
            .field("player_id", &self.core.player_id())
            .field("zone", &self.settings.zone)
            .finish()
    }
}

impl Relay {
    /// This player's id on the relay (after its welcome).
    pub fn player_id(&self) -> Option<u32> {
        self.core.player_id()
    }

    /// The zone the avatar is in.
    pub fn zone(&self) -> &str {
        &self.settings.zone
    }

    /// Moves the avatar to another zone with its next transform: the
    /// players there appear as their transforms come, those of the zone it
    /// leaves are despawned in the next frame (the relay tells the others
    /// that this player left, not this player that they did).
    pub fn set_zone(&mut self, zone: &str) {
        if zone == self.settings.zone {
            return;
        }
        self.settings.zone = zone.to_string();
        self.last_sent = None;
        self.left_behind
            .extend(self.players.drain().map(|(_, e)| e));
    }

    /// The entity of another player, by relay id.
    pub fn player(&self, id: u32) -> Option<Entity> {
        self.players.get(&id).copied()
    }

    fn connect(&mut self) {
        let dialer = match &self.settings.trust {
            Some(trust) => Dialer::default().trust(trust.clone()),
            None => Dialer::default(),
        };
        self.socket = Some(dialer.connect(&self.target, SocketConfig::default()));
        self.core.lost();
        self.last_sent = None;
    }

    fn send(&self, action: RelayAction, content: &impl serde::Serialize) {
        let Some(socket) = &self.socket else { return };
        match NetMessage::new(RelayChannel, action, content) {
            Ok(message) => {
                if let Err(err) = socket.send(&message) {
                    tracing::debug!(%err, "relay message not sent");
                }
            }
            Err(err) => tracing::warn!(%err, "relay message not encoded"),
        }
    }
}

/// The game's own avatar: its `NetTransform` is sent to the relay.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayAvatar;

/// Another player in the avatar's zone.
#[derive(Component, Debug, Clone, PartialEq, Eq)]
pub struct RelayPlayer {
    /// Its relay id.
    pub id: u32,
}

/// What the relay said besides transforms.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub enum RelayEvent {
    /// This player's id (on each connection).
    Welcome(u32),
    /// A player left the zone, the relay, or (with interest by distance)
    /// the avatar's view; its entity is despawned.
    Left(u32),
    /// A notice from the operator, for every player.
    Notice(String),
    /// The relay could not use a message of ours, and why.
    Error(String),
    /// The connection was lost, and why; the plugin connects again.
    Disconnected(String),
}

/// The relay in a Bevy app: `RelayPlugin::new(RelaySettings::new(addr,
/// name, zone))`.
#[derive(Debug, Clone)]
pub struct RelayPlugin {
    settings: RelaySettings,
}

impl RelayPlugin {
    /// Plays on the relay with `settings`, connecting at once.
    pub fn new(settings: RelaySettings) -> Self {
        Self { settings }
    }
}

impl Plugin for RelayPlugin {
    fn build(&self, app: &mut App) {
        let mut relay = Relay {
            target: self.settings.addr.clone(),
            settings: self.settings.clone(),
            socket: None,
            core: RelayClientCore::new(self.settings.name.clone(), false).with_options(
                RelayOptions {
                    batch: false,
                    compact: self.settings.compact,
                    datagrams: false,
                    webtransport_redirects: false,
                    compact_datagrams: false,
                },
            ),
            retry: None,
            last_sent: None,
            dirty: false,
            failures: 0,
            players: HashMap::new(),
            left_behind: Vec::new(),
            epoch: Instant::now(),
        };
        relay.connect();
        app.insert_non_send(relay)
            .add_message::<RelayEvent>()
            .add_systems(
                PreUpdate,
                (receive, draw).chain().in_set(SwitchboardSystems::Apply),
            )
            .add_systems(PostUpdate, send_avatar);
    }
}

/// Backoff after a lost connection: 0.25 s doubling, at most 5 s.
fn backoff(attempt: u32) -> Duration {
    switchboard::session::doubling(
        Duration::from_millis(250),
        Duration::from_secs(5),
        attempt + 1,
    )
}

fn receive(
    mut relay: NonSendMut<Relay>,
    mut commands: Commands,
    mut events: MessageWriter<RelayEvent>,
    mut others: Query<&mut Smoothed<NetTransform>>,
) {
    let relay = &mut *relay;
    if relay.retry.is_some_and(|at| Instant::now() >= at) {
        relay.retry = None;
        relay.connect();
        tracing::info!(addr = relay.target, "connecting to the relay again");
    }
    for entity in relay.left_behind.drain(..) {
        commands.entity(entity).try_despawn();
    }
    let now = relay.epoch.elapsed();
    let mut lost = None;
    while let Some(event) = relay
        .socket
        .as_mut()
        .and_then(|s| s.next_event_blocking(Duration::ZERO))
    {
        match event {
            SocketEvent::Connected => {
                if let Some(socket) = &relay.socket {
                    for message in relay.core.opened() {
                        if let Err(err) = socket.send(&message) {
                            tracing::debug!(%err, "relay message not sent");
                        }
                    }
                }
            }
            SocketEvent::Received(message) => on_message(
                relay,
                &message,
                now,
                &mut commands,
                &mut events,
                &mut others,
            ),
            SocketEvent::Error(err) => {
                events.write(RelayEvent::Error(err.to_string()));
            }
            SocketEvent::Disconnected(reason) => {
                // A relay too busy to take this connection now says when
                // to come back: never sooner.
                let told = match &reason {
                    switchboard::DisconnectReason::ClosedByPeer { code, reason }
                        if *code == switchboard::CloseCode::SERVER_FULL =>
                    {
                        switchboard::socket::retry_after_of(reason)
                    }
                    _ => None,
                };
                lost = Some((reason.to_string(), told.unwrap_or_default()));
                break;
            }
        }
    }
    if let Some((reason, told)) = lost {
        relay.socket = None;
        relay.core.lost();
        for (_, entity) in relay.players.drain() {
            commands.entity(entity).try_despawn();
        }
        // A redirect is followed at once; a loss waits, longer each time.
        let wait = if relay.core.redirected() {
            Duration::ZERO
        } else {
            relay.failures += 1;
            backoff(relay.failures - 1).max(told)
        };
        relay.retry = Some(Instant::now() + wait);
        events.write(RelayEvent::Disconnected(reason));
    }
}

fn on_message(
    relay: &mut Relay,
    message: &NetMessage,
    now: Duration,
    commands: &mut Commands,
    events: &mut MessageWriter<RelayEvent>,
    others: &mut Query<&mut Smoothed<NetTransform>>,
) {
    // The core reads; what it reads changes the relay's entities, which
    // live beside it: its events are taken in after it read the message.
    let mut heard = Vec::new();
    let mut broken = None;
    let zone = &relay.settings.zone;
    relay.core.received(message, |event| match event {
        // Only the pose is kept (no copy of the transform's zone or
        // unknown fields); one from the zone we just left (in flight when
        // the avatar moved) is dropped here.
        RelayClientEvent::Transform(transform) => match transform.decode() {
            Some((id, time, transform)) if transform.zone == *zone => {
                let pose = NetTransform {
                    position: transform.position,
                    rotation: transform.rotation,
                };
                heard.push(Heard::Moved(id, time, pose));
            }
            Some(_) => {}
            None => tracing::warn!("a relayed transform did not decode"),
        },
        RelayClientEvent::Welcome(id) => heard.push(Heard::Welcome(id)),
        RelayClientEvent::Left(id) => heard.push(Heard::Left(id)),
        RelayClientEvent::Notice(text) => heard.push(Heard::Said(RelayEvent::Notice(text))),
        RelayClientEvent::Error(text) => heard.push(Heard::Said(RelayEvent::Error(text))),
        RelayClientEvent::Redirect(redirect) => {
            tracing::info!(to = redirect.addr, "the zone lives on another relay");
            heard.push(Heard::Redirect(redirect.addr));
        }
        RelayClientEvent::Broken(why) => broken = Some(why),
        _ => {}
    });
    for event in heard {
        match event {
            Heard::Moved(id, time, pose) => {
                on_relayed(relay, (id, time), pose, now, commands, others)
            }
            Heard::Welcome(id) => {
                relay.failures = 0;
                events.write(RelayEvent::Welcome(id));
            }
            Heard::Left(id) => on_left(relay, id, commands, events),
            Heard::Said(event) => {
                events.write(event);
            }
            Heard::Redirect(addr) => relay.target = addr,
        }
    }
    if let Some(why) = broken {
        // The stream cannot be followed past it: connect again.
        events.write(RelayEvent::Error(why.clone()));
        if let Some(socket) = relay.socket.as_mut() {
            socket.close(&why);
        }
    }
}

/// What one message told, in order, once the core has read it.
enum Heard {
    Moved(u32, u64, NetTransform),
    Welcome(u32),
    Left(u32),
    Said(RelayEvent),
    Redirect(String),
}

/// Another player's transform, stamped by the relay: its entity spawned
/// or its buffer fed.
fn on_relayed(
    relay: &mut Relay,
    (player_id, server_time_ms): (u32, u64),
    pose: NetTransform,
    now: Duration,
    commands: &mut Commands,
    others: &mut Query<&mut Smoothed<NetTransform>>,
) {
    // Our own echo.
    if Some(player_id) == relay.core.player_id() {
        return;
    }
    let server_ms = server_time_ms as f64;
    match relay.players.get(&player_id) {
        Some(&entity) => {
            if let Ok(mut smoothed) = others.get_mut(entity) {
                smoothed.buffer.push(server_ms, now, pose);
            }
        }
        None => {
            let mut buffer = SnapshotBuffer::new(relay.settings.smoothing.clone());
            buffer.push(server_ms, now, pose);
            let entity = commands
                .spawn((RelayPlayer { id: player_id }, pose, Smoothed { buffer }))
                .id();
            relay.players.insert(player_id, entity);
        }
    }
}

/// Another player left the zone or the relay.
fn on_left(
    relay: &mut Relay,
    id: u32,
    commands: &mut Commands,
    events: &mut MessageWriter<RelayEvent>,
) {
    if let Some(entity) = relay.players.remove(&id) {
        commands.entity(entity).try_despawn();
    }
    events.write(RelayEvent::Left(id));
}

/// Each frame the others are drawn from their buffers.
fn draw(
    relay: NonSend<Relay>,
    mut others: Query<(&mut Smoothed<NetTransform>, &mut NetTransform)>,
) {
    let now = relay.epoch.elapsed();
    for (mut smoothed, mut pose) in &mut others {
        if let Some(sample) = smoothed.buffer.sample(now) {
            *pose = sample.value;
        }
    }
}

/// The avatar's transform goes out when it changed (at most at
/// `send_hz`) and every `keep_alive` while it stands still.
fn send_avatar(mut relay: NonSendMut<Relay>, avatar: Query<Ref<NetTransform>, With<RelayAvatar>>) {
    let Ok(pose) = avatar.single() else { return };
    relay.dirty |= pose.is_changed();
    if relay.core.player_id().is_none() || relay.socket.is_none() {
        return;
    }
    let now = Instant::now();
    let since = relay.last_sent.map(|at| now - at);
    let interval = Duration::from_secs_f64(1.0 / relay.settings.send_hz.max(0.001));
    let due = match since {
        None => true,
        Some(since) => (relay.dirty && since >= interval) || since >= relay.settings.keep_alive,
    };
    if !due {
        return;
    }
    let transform = Transform {
        position: pose.position,
        rotation: pose.rotation,
        zone: relay.settings.zone.clone(),
        state: None,
        extra: BTreeMap::new(),
    };
    relay.send(RelayAction::Transform, &transform);
    relay.last_sent = Some(now);
    relay.dirty = false;
}
