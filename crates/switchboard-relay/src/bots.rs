//! Bots: synthetic players that connect through the normal socket like any
//! other client and move by a script, at about 10 Hz.
//!
//! Bots mark their transforms with the extra field `"bot": true` (kept and
//! relayed like any unknown field), so that other bots can tell real players
//! from bots.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::client_core::{RelayClientCore, RelayClientEvent};
use crate::server::{RelayAction, RelayChannel};
use crate::transform::{MovementState, Transform};
use switchboard::socket::{SocketConfig, SocketEvent, SocketStream};

/// What a bot does.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Script {
    /// Stands still; a keep-alive transform every second, speed 0.
    Idle,
    /// Walks in a straight line toward the lowest-id real player with a
    /// position, to three [`spacings`](BotConfig::spacing) past it on x
    /// (150 units by default), then stops and idles.
    WalkToPlayer,
    /// Walks a circle of this radius around where it started.
    WalkCircle {
        /// The radius.
        radius: f32,
    },
    /// Walks a square of this side.
    WalkSquare {
        /// The side.
        side: f32,
    },
    /// Keeps one [`spacing`](BotConfig::spacing) behind the lowest-id real
    /// player on x (50 units by default).
    FollowPlayer,
    /// Jumps: in the air half of every second.
    JumpLoop,
    /// Toggles sneaking every second.
    SneakToggle,
    /// Jumps to a new spot every second, on a grid of 7 × 5 spots two
    /// [`spacings`](BotConfig::spacing) apart from where it started.
    Teleport,
    /// Leaves its zone for a second, then comes back, over and over.
    LeaveZoneAndReturn,
    /// Idles, then disconnects after this long.
    DisconnectAfter(Duration),
}

/// A bot's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BotConfig {
    /// Its name.
    pub name: String,
    /// Its zone.
    pub zone: String,
    /// Where it starts.
    pub start: [f32; 3],
    /// Units per second when walking.
    pub speed: f32,
    /// Transforms per second while moving (default 10).
    pub rate: f32,
    /// The distance its scripts keep, in units (default 50): `follow`
    /// stays one behind, `walk_to_player` stops three past, `teleport`
    /// jumps two apart. Small in a small world (the browser demo's is
    /// 100 × 75).
    pub spacing: f32,
}

impl BotConfig {
    /// A bot called `name` in `zone` at the origin, walking 100 units/s at 10 Hz.
    pub fn new(name: &str, zone: &str) -> Self {
        Self {
            name: name.into(),
            zone: zone.into(),
            start: [0.0; 3],
            speed: 100.0,
            rate: 10.0,
            spacing: 50.0,
        }
    }
}

/// A running bot.
#[derive(Debug)]
pub struct Bot {
    script: watch::Sender<Script>,
    task: tokio::task::JoinHandle<()>,
    /// Its player id, once the relay welcomed it (0 before).
    id: Arc<AtomicU32>,
}

impl Bot {
    /// Connects a bot to the relay at `addr` and starts its script, on the
    /// current tokio runtime.
    pub fn spawn(addr: SocketAddr, config: BotConfig, script: Script) -> Bot {
        let (tx, rx) = watch::channel(script);
        let id = Arc::new(AtomicU32::new(0));
        let task = tokio::spawn(run(addr, config, rx, id.clone()));
        Bot {
            script: tx,
            task,
            id,
        }
    }

    /// Its player id in the relay, once welcomed.
    pub fn player_id(&self) -> Option<u32> {
        Some(self.id.load(Ordering::Relaxed)).filter(|id| *id != 0)
    }

    /// Changes the script of the running bot.
    pub fn set_script(&self, script: Script) {
        let _ = self.script.send(script);
    }

    /// Whether it still runs.
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Stops it (it disconnects).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Bot {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Attempts a bot makes to join a relay that turns it away for now.
const BOT_JOIN_ATTEMPTS: u32 = 10;

struct State {
    position: [f32; 3],
    state: MovementState,
    zone: String,
    since: Instant,
    idle: bool,
}

async fn run(
    addr: SocketAddr,
    config: BotConfig,
    mut script: watch::Receiver<Script>,
    player_id: Arc<AtomicU32>,
) {
    let connect = || async move { Some(SocketStream::dial(addr, SocketConfig::default())) };
    let Some(first) = connect().await else { return };
    // A relay busy with handshakes may ask it to come back later.
    let Ok(mut socket) = first.until_admitted(connect, BOT_JOIN_ATTEMPTS).await else {
        return;
    };
    let mut core = RelayClientCore::new(config.name.clone(), true);
    for message in core.opened() {
        let _ = socket.send(&message);
    }
    // Real players' last positions, by id.
    let mut players: BTreeMap<u32, [f32; 3]> = BTreeMap::new();
    let mut me = State {
        position: config.start,
        state: MovementState::default(),
        zone: config.zone.clone(),
        since: Instant::now(),
        idle: false,
    };
    let tick = Duration::from_secs_f32(1.0 / config.rate.max(0.1));
    let mut ticker = tokio::time::interval(tick);
    let mut last_sent = Instant::now() - Duration::from_secs(10);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let current = script.borrow().clone();
                if let Script::DisconnectAfter(after) = current {
                    if me.since.elapsed() >= after {
                        socket.close("script: disconnect");
                        let _ = tokio::time::timeout(Duration::from_secs(2), async {
                            while socket.next_event().await.is_some() {}
                        }).await;
                        return;
                    }
                }
                let moved = step(&current, &mut me, &players, &config, tick.as_secs_f32());
                // Idle bots send a keep-alive transform once a second.
                if moved || last_sent.elapsed() >= Duration::from_secs(1) {
                    let mut extra = BTreeMap::new();
                    extra.insert("bot".to_string(), "true".to_string());
                    let transform = Transform {
                        position: me.position,
                        rotation: [0.0; 3],
                        zone: me.zone.clone(),
                        state: Some(me.state.clone()),
                        extra,
                    };
                    if socket.send_value(RelayChannel, RelayAction::Transform, &transform).is_err() {
                        return;
                    }
                    last_sent = Instant::now();
                }
            }
            changed = script.changed() => {
                if changed.is_err() {
                    return;
                }
                me.since = Instant::now();
                me.idle = false;
            }
            event = socket.next_event() => match event {
                Some(SocketEvent::Received(message)) => core.received(&message, |event| match event {
                    RelayClientEvent::Welcome(id) => player_id.store(id, Ordering::Relaxed),
                    RelayClientEvent::Transform(heard) => {
                        // Real players only: bots mark theirs.
                        if let Some(peek) = heard.peek("bot") {
                            if peek.field.is_none() {
                                players.insert(peek.player_id, peek.position);
                            }
                        }
                    }
                    RelayClientEvent::Left(id) => {
                        players.remove(&id);
                    }
                    _ => {}
                }),
                Some(SocketEvent::Disconnected(_)) | None => return,
                Some(_) => {}
            },
        }
    }
}

/// Moves `me` by one tick of `script`; returns whether it moved (or
/// changed state) and so should tell the others.
fn step(
    script: &Script,
    me: &mut State,
    players: &BTreeMap<u32, [f32; 3]>,
    config: &BotConfig,
    dt: f32,
) -> bool {
    let t = me.since.elapsed().as_secs_f32();
    let stride = config.speed * dt;
    let walk_to = |me: &mut State, target: [f32; 3]| -> bool {
        let d = [
            target[0] - me.position[0],
            target[1] - me.position[1],
            target[2] - me.position[2],
        ];
        let dist = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        if dist < 0.5 {
            let was_moving = me.state.moving;
            me.state.moving = false;
            me.state.speed = 0.0;
            return was_moving;
        }
        let k = (stride / dist).min(1.0);
        for (axis, delta) in me.position.iter_mut().zip(d) {
            *axis += delta * k;
        }
        me.state.moving = true;
        me.state.speed = config.speed;
        true
    };
    match script {
        Script::Idle | Script::DisconnectAfter(_) => {
            me.state = MovementState::default();
            false
        }
        Script::WalkToPlayer => {
            if me.idle {
                return false;
            }
            let Some(target) = players.values().next().copied() else {
                return false;
            };
            let past = 3.0 * config.spacing;
            let moved = walk_to(me, [target[0] + past, target[1], target[2]]);
            if !me.state.moving {
                me.idle = true;
            }
            moved
        }
        Script::FollowPlayer => match players.values().next().copied() {
            Some(target) => walk_to(me, [target[0] - config.spacing, target[1], target[2]]),
            None => false,
        },
        Script::WalkCircle { radius } => {
            let angle = t * config.speed / radius.max(1.0);
            let center = config.start;
            me.position = [
                center[0] + radius * angle.cos(),
                center[1],
                center[2] + radius * angle.sin(),
            ];
            me.state.moving = true;
            me.state.speed = config.speed;
            true
        }
        Script::WalkSquare { side } => {
            let side = side.max(1.0);
            let along = (t * config.speed) % (4.0 * side);
            let (edge, offset) = ((along / side) as u32, along % side);
            let s = config.start;
            me.position = match edge {
                0 => [s[0] + offset, s[1], s[2]],
                1 => [s[0] + side, s[1], s[2] + offset],
                2 => [s[0] + side - offset, s[1], s[2] + side],
                _ => [s[0], s[1], s[2] + side - offset],
            };
            me.state.moving = true;
            me.state.speed = config.speed;
            true
        }
        Script::JumpLoop => {
            let jumping = t.fract() < 0.5;
            let changed = jumping != me.state.jumping;
            me.state.jumping = jumping;
            me.position[1] = config.start[1] + if jumping { 1.0 } else { 0.0 };
            changed
        }
        Script::SneakToggle => {
            let sneaking = (t as u64) % 2 == 1;
            let changed = sneaking != me.state.sneaking;
            me.state.sneaking = sneaking;
            changed
        }
        Script::Teleport => {
            let n = t as u64;
            let spot = [
                config.start[0] + (n % 7) as f32 * 2.0 * config.spacing,
                config.start[1],
                config.start[2] + (n % 5) as f32 * 2.0 * config.spacing,
            ];
            let changed = spot != me.position;
            me.position = spot;
            changed
        }
        Script::LeaveZoneAndReturn => {
            let away = (t as u64) % 2 == 1;
            let zone = if away {
                format!("{}-away", config.zone)
            } else {
                config.zone.clone()
            };
            let changed = zone != me.zone;
            me.zone = zone;
            changed
        }
    }
}
