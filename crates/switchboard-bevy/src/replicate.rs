//! A kind of room entity as a component of the game's:
//! `app.replicate::<Ship>("ship")`. Mirrored entities of that kind get
//! their `Ship` decoded from each state the server sends; an entity the
//! game spawns with a `Ship` and [`Replicate`] is created in the room, and
//! its changes are sent at the kind's rate. `replicate_smoothed` also
//! interpolates the others' entities between the states received
//! (`switchboard::smoothing`).

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use bevy_app::{App, PostUpdate, PreUpdate};
use bevy_ecs::component::Mutable;
use bevy_ecs::prelude::*;
use bevy_state::condition::in_state;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use switchboard::client::RequestError;
use switchboard::codec;
use switchboard::smoothing::{Interpolate, Pose, SmoothingConfig, SmoothingStats, SnapshotBuffer};
use switchboard_rooms::EntityId;

use crate::client::{NetworkState, Switchboard, SwitchboardSystems};
use crate::rooms::{NetState, Replicate, ReplicationRefused, RoomEntity, RoomMirror, SpawnAsked};

/// How a kind replicates; each field says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct KindConfig {
    /// How often this client sends an owned entity's changes at most
    /// (default 20 Hz, the rooms server's sync rate: faster only costs).
    /// A change between two sends is not lost: the last state goes at the
    /// next one.
    pub send_hz: f64,
    /// How the others' entities are interpolated (`replicate_smoothed`).
    pub smoothing: SmoothingConfig,
}

impl Default for KindConfig {
    fn default() -> Self {
        Self {
            send_hz: 20.0,
            smoothing: SmoothingConfig::default(),
        }
    }
}

/// Registers the game's kinds of room entity.
pub trait ReplicateAppExt {
    /// Entities of `kind` carry a `C`: decoded from the server's states
    /// for the others' entities, sent from this client's own.
    fn replicate<C: Replicated>(&mut self, kind: &str) -> &mut Self {
        self.replicate_with::<C>(kind, KindConfig::default())
    }

    /// Like [`replicate`](Self::replicate), and the others' entities of
    /// `kind` are drawn between the states received, a little in the past
    /// (`switchboard::smoothing::SnapshotBuffer`), not jumping at the
    /// server's sync rate.
    fn replicate_smoothed<C: Replicated + Interpolate>(&mut self, kind: &str) -> &mut Self {
        self.replicate_smoothed_with::<C>(kind, KindConfig::default())
    }

    /// [`replicate`](Self::replicate) with a config of its own.
    fn replicate_with<C: Replicated>(&mut self, kind: &str, config: KindConfig) -> &mut Self;

    /// [`replicate_smoothed`](Self::replicate_smoothed) with a config of
    /// its own.
    fn replicate_smoothed_with<C: Replicated + Interpolate>(
        &mut self,
        kind: &str,
        config: KindConfig,
    ) -> &mut Self;
}

/// What a replicated component needs: a component that serializes.
pub trait Replicated:
    Component<Mutability = Mutable> + Serialize + DeserializeOwned + Clone
{
}

impl<C> Replicated for C where
    C: Component<Mutability = Mutable> + Serialize + DeserializeOwned + Clone
{
}

/// A kind's name and config, per component type.
#[derive(Resource)]
struct Kind<C> {
    name: String,
    config: KindConfig,
    smoothed: bool,
    _c: PhantomData<fn() -> C>,
}

/// When an owned entity last sent its state, and whether it changed since.
#[derive(Component, Debug, Clone, Copy, Default)]
struct Sending {
    last: Option<Instant>,
    dirty: bool,
}

/// The states received for one of the others' entities, drawn a little in
/// the past (`replicate_smoothed`).
#[derive(Component)]
pub struct Smoothed<C: Interpolate + Send + Sync + 'static> {
    pub(crate) buffer: SnapshotBuffer<C>,
}

impl<C: Interpolate + Send + Sync + 'static> Smoothed<C> {
    /// How it has been drawn so far: interpolated, extrapolated, held.
    pub fn stats(&self) -> SmoothingStats {
        self.buffer.stats()
    }
}

impl ReplicateAppExt for App {
    fn replicate_with<C: Replicated>(&mut self, kind: &str, config: KindConfig) -> &mut Self {
        register::<C>(self, kind, config, false)
    }

    fn replicate_smoothed_with<C: Replicated + Interpolate>(
        &mut self,
        kind: &str,
        config: KindConfig,
    ) -> &mut Self {
        register::<C>(self, kind, config, true).add_systems(
            PreUpdate,
            (smooth::<C>, draw::<C>)
                .chain()
                .in_set(SwitchboardSystems::Apply)
                .after(crate::rooms::mirror),
        )
    }
}

fn register<'a, C: Replicated>(
    app: &'a mut App,
    kind: &str,
    config: KindConfig,
    smoothed: bool,
) -> &'a mut App {
    if let Some(was) = app.world().get_resource::<Kind<C>>() {
        panic!(
            "{} is replicated as {:?} already: one kind per component type",
            std::any::type_name::<C>(),
            was.name
        );
    }
    app.insert_resource(Kind::<C> {
        name: kind.to_string(),
        config,
        smoothed,
        _c: PhantomData,
    })
    .add_systems(
        PreUpdate,
        decode::<C>
            .in_set(SwitchboardSystems::Apply)
            .after(crate::rooms::mirror),
    )
    .add_systems(
        PostUpdate,
        (ask_spawn::<C>, send_changes::<C>).run_if(in_state(NetworkState::Online)),
    )
}

/// A mirrored entity whose state changed: is it ours, has it a `C` yet.
type ChangedState<'a, C> = (Entity, &'a RoomEntity, &'a NetState, Has<Replicate>, Has<C>);
/// The same, with its buffer if it has one.
type ChangedSmoothed<'a, C> = (
    Entity,
    &'a RoomEntity,
    &'a NetState,
    Option<&'a mut Smoothed<C>>,
);
/// The game's own new entities not yet asked for (nor refused).
type NotYetAsked = (
    With<Replicate>,
    Without<RoomEntity>,
    Without<SpawnAsked>,
    Without<ReplicationRefused>,
);
/// An owned entity's component, and when it last went.
type OwnedState<'a, C> = (Entity, &'a RoomEntity, Ref<'a, C>, Option<&'a mut Sending>);

fn decoded<C: Replicated>(kind: &str, id: EntityId, bytes: &[u8]) -> Option<C> {
    codec::decode_value::<C>(bytes)
        .map_err(
            |err| tracing::warn!(kind, entity = id.0, %err, "an entity's state did not decode"),
        )
        .ok()
}

/// The others' entities of this kind take each state received; this
/// client's own take one only when they have none yet (mirrored back
/// after a reconnect): they are the authority.
fn decode<C: Replicated>(
    kind: Res<Kind<C>>,
    mut commands: Commands,
    changed: Query<ChangedState<C>, Changed<NetState>>,
) {
    for (entity, known, state, mine, has) in &changed {
        if known.kind != kind.name || (mine && has) {
            continue;
        }
        // A smoothed kind takes the server's stamped states through its
        // buffer (`smooth`); spawns and full states come unstamped.
        if kind.smoothed && !mine && state.server_ms.is_some() && has {
            continue;
        }
        if let Some(value) = decoded::<C>(&kind.name, known.id, &state.bytes) {
            commands.entity(entity).try_insert(value);
        }
    }
}

fn now(mirror: &RoomMirror) -> Duration {
    mirror.epoch.elapsed()
}

/// Stamped states of the others' entities go into their buffers.
fn smooth<C: Replicated + Interpolate>(
    kind: Res<Kind<C>>,
    mirror: Res<RoomMirror>,
    mut commands: Commands,
    mut changed: Query<ChangedSmoothed<C>, (Changed<NetState>, Without<Replicate>)>,
) {
    let now = now(&mirror);
    for (entity, known, state, buffer) in &mut changed {
        if known.kind != kind.name {
            continue;
        }
        let Some(server_ms) = state.server_ms else {
            // A spawn or a full state: drawn as it is, from a fresh buffer.
            commands.entity(entity).try_remove::<Smoothed<C>>();
            continue;
        };
        let Some(value) = decoded::<C>(&kind.name, known.id, &state.bytes) else {
            continue;
        };
        match buffer {
            Some(mut smoothed) => smoothed.buffer.push(server_ms, now, value),
            None => {
                let mut buffer = SnapshotBuffer::new(kind.config.smoothing.clone());
                buffer.push(server_ms, now, value);
                commands.entity(entity).try_insert(Smoothed { buffer });
            }
        }
    }
}

/// Each frame, the others' smoothed entities show their buffer's value.
fn draw<C: Replicated + Interpolate>(
    mirror: Res<RoomMirror>,
    mut drawn: Query<(&mut Smoothed<C>, &mut C), Without<Replicate>>,
) {
    let now = now(&mirror);
    for (mut smoothed, mut value) in &mut drawn {
        if let Some(sample) = smoothed.buffer.sample(now) {
            *value = sample.value;
        }
    }
}

/// The game's own new entities of this kind are created in the room.
fn ask_spawn<C: Replicated>(
    kind: Res<Kind<C>>,
    mut net: NonSendMut<Switchboard>,
    mut mirror: ResMut<RoomMirror>,
    mut commands: Commands,
    new: Query<(Entity, &C), NotYetAsked>,
) {
    let Some(rooms) = net.rooms().filter(|r| r.room_ref().is_some()) else {
        return;
    };
    for (entity, value) in &new {
        match rooms.spawn(&kind.name, value) {
            Ok(ticket) => {
                mirror.ask_spawn(&kind.name, ticket, entity);
                commands
                    .entity(entity)
                    .try_insert((SpawnAsked, Sending::default()));
            }
            // Asked again next frame.
            Err(RequestError::NotConnected | RequestError::TooManyPending) => break,
            Err(err) => {
                tracing::warn!(kind = kind.name, %err, "an entity could not be sent");
                commands
                    .entity(entity)
                    .try_insert(ReplicationRefused(err.to_string()));
            }
        }
    }
}

/// The game's own entities send their changes, at most at the kind's rate;
/// the last change always goes.
fn send_changes<C: Replicated>(
    kind: Res<Kind<C>>,
    mut net: NonSendMut<Switchboard>,
    mut commands: Commands,
    mut owned: Query<OwnedState<C>, With<Replicate>>,
) {
    let Some(rooms) = net.rooms() else {
        return;
    };
    let interval = Duration::from_secs_f64(1.0 / kind.config.send_hz.max(0.001));
    let now = Instant::now();
    for (entity, known, value, sending) in &mut owned {
        let mut now_sending = sending.as_deref().copied().unwrap_or_default();
        now_sending.dirty |= value.is_changed();
        let due = now_sending.last.is_none_or(|last| now - last >= interval);
        if now_sending.dirty && due {
            match rooms.update(known.id, &*value) {
                Ok(_) => {
                    now_sending.last = Some(now);
                    now_sending.dirty = false;
                }
                Err(err) => tracing::debug!(%err, "an entity's change waits"),
            }
        }
        match sending {
            Some(mut sending) => *sending = now_sending,
            None => {
                commands.entity(entity).try_insert(now_sending);
            }
        }
    }
}

/// A position and a rotation for the room (Euler angles in degrees, as the
/// relay's transforms carry them), interpolated the short way round: the
/// component to replicate for things that move. Copy it into a `Transform`
/// in a system of the game's.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NetTransform {
    /// Where.
    pub position: [f32; 3],
    /// Which way, in degrees.
    pub rotation: [f32; 3],
}

impl Interpolate for NetTransform {
    fn lerp(&self, other: &Self, t: f32) -> Self {
        let pose = |p: &NetTransform| Pose {
            position: p.position,
            rotation: p.rotation,
        };
        let Pose { position, rotation } = pose(self).lerp(&pose(other), t);
        NetTransform { position, rotation }
    }
}
