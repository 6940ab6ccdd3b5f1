//! The room's entities as Bevy entities. Every entity of the room this
//! client is in has a [`RoomEntity`] (its id, owner and kind) and a
//! [`NetState`] (its last state as received); the kinds a game registers
//! with `app.replicate::<C>(kind)` get their component decoded from it
//! (`replicate.rs`). Spawns, updates, despawns and ownership follow the
//! server; a full room state (on joining, on coming back after a cut)
//! reconciles the lot.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use bevy_app::{App, Plugin, PostUpdate, PreUpdate};
use bevy_ecs::prelude::*;

use switchboard::client::{ClientEvent, RequestStatus, RequestTicket};
use switchboard::ClientId;
use switchboard_rooms::{Entity as NetEntity, EntityId, RoomEvent};

use crate::client::{RoomMessage, Switchboard, SwitchboardEvent, SwitchboardSystems};

/// An entity of the room, mirrored here.
#[derive(Component, Debug, Clone, PartialEq, Eq)]
pub struct RoomEntity {
    /// Its id in the room.
    pub id: EntityId,
    /// Who may update it (besides the host).
    pub owner: ClientId,
    /// What it is, as the game named it at spawn.
    pub kind: String,
}

/// An entity's state as the server last sent it (encoded): what a
/// registered kind decodes into its component, and what a game reads
/// itself for kinds it did not register.
#[derive(Component, Debug, Clone, PartialEq)]
pub struct NetState {
    /// The encoded state.
    pub bytes: Vec<u8>,
    /// The server's clock when the state was sent, ms (from the room's
    /// sync; `None` for a spawn or a full room state).
    pub server_ms: Option<f64>,
}

/// Put on an entity the game spawns to create it in the room (with the
/// component of a kind registered by `app.replicate`), and on those this
/// client owns: its changes are sent, at most at the kind's send rate.
/// Removed when ownership passes to someone else; added when it passes to
/// this client.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replicate;

/// The server refused to create this entity in the room (the room's
/// entity limit, a state too large), or the connection was lost before
/// it answered, and why. It is not asked again while this stays: remove
/// it to try again.
#[derive(Component, Debug, Clone, PartialEq, Eq)]
pub struct ReplicationRefused(pub String);

/// On a local entity whose spawn in the room was asked for.
#[derive(Component, Debug, Clone, Copy)]
pub(crate) struct SpawnAsked;

/// Which Bevy entity is which room entity, and the spawns this client
/// asked for that the server has not confirmed yet.
#[derive(Resource, Debug)]
pub struct RoomMirror {
    by_id: HashMap<EntityId, Entity>,
    ids: HashMap<Entity, EntityId>,
    /// Per kind, the local entities whose spawn was asked for, in order:
    /// the server creates them in that order, so its `Spawned` owned by
    /// this client and of that kind is the first one.
    pending: HashMap<String, VecDeque<(RequestTicket, Entity)>>,
    /// When the plugin started: the clock interpolation runs on.
    pub(crate) epoch: Instant,
    /// Room entities of this client's whose local entity was despawned
    /// before the room confirmed them: to despawn in the room.
    orphans: Vec<EntityId>,
}

impl Default for RoomMirror {
    fn default() -> Self {
        Self {
            by_id: HashMap::new(),
            ids: HashMap::new(),
            pending: HashMap::new(),
            epoch: Instant::now(),
            orphans: Vec::new(),
        }
    }
}

impl RoomMirror {
    /// The Bevy entity mirroring room entity `id`.
    pub fn entity(&self, id: EntityId) -> Option<Entity> {
        self.by_id.get(&id).copied()
    }

    /// The room entity a Bevy entity mirrors.
    pub fn id(&self, entity: Entity) -> Option<EntityId> {
        self.ids.get(&entity).copied()
    }

    /// How many room entities are mirrored.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub(crate) fn ask_spawn(&mut self, kind: &str, ticket: RequestTicket, entity: Entity) {
        self.pending
            .entry(kind.to_string())
            .or_default()
            .push_back((ticket, entity));
    }

    fn link(&mut self, id: EntityId, entity: Entity) {
        self.by_id.insert(id, entity);
        self.ids.insert(entity, id);
    }

    fn unlink(&mut self, id: EntityId) -> Option<Entity> {
        let entity = self.by_id.remove(&id)?;
        self.ids.remove(&entity);
        Some(entity)
    }
}

/// Mirrors the room's entities (needs `SwitchboardPlugin`). Register the
/// game's kinds with `app.replicate::<C>(kind)` or
/// `app.replicate_smoothed::<C>(kind)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoomsPlugin;

impl Plugin for RoomsPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<RoomMirror>()
            .add_systems(PreUpdate, mirror.in_set(SwitchboardSystems::Apply))
            .add_systems(PreUpdate, refused_spawns.in_set(SwitchboardSystems::Apply))
            .add_systems(PostUpdate, despawned_here);
    }
}

/// Follows the server's room events.
pub(crate) fn mirror(
    mut commands: Commands,
    mut messages: MessageReader<RoomMessage>,
    net: NonSend<Switchboard>,
    mut mirror: ResMut<RoomMirror>,
    mut entities: Query<(&mut RoomEntity, &mut NetState)>,
) {
    let me = net.client_id();
    for RoomMessage(event) in messages.read() {
        match event {
            RoomEvent::State(state) => {
                // Whole (most rooms): what it lacks is gone. In pages (the
                // rest follow as spawns), nothing is taken for gone: an
                // entity of a later page must not be despawned and spawned
                // again.
                if state.more_entities == 0 {
                    let live: HashSet<EntityId> = state.entities.iter().map(|e| e.id).collect();
                    let gone: Vec<EntityId> = mirror
                        .by_id
                        .keys()
                        .filter(|id| !live.contains(id))
                        .copied()
                        .collect();
                    for id in gone {
                        forget(&mut commands, &mut mirror, id);
                    }
                }
                for entity in &state.entities {
                    put(&mut commands, &mut mirror, &mut entities, entity, me);
                }
            }
            RoomEvent::Spawned(entity) => {
                put(&mut commands, &mut mirror, &mut entities, entity, me);
            }
            RoomEvent::Despawned(id) => forget(&mut commands, &mut mirror, *id),
            RoomEvent::StateUpdate(sync) => {
                for update in &sync.updates {
                    let Some(entity) = mirror.entity(update.id) else {
                        continue;
                    };
                    if let Ok((_, mut state)) = entities.get_mut(entity) {
                        state.bytes.clone_from(&update.state);
                        state.server_ms = Some(sync.server_time_ms as f64);
                    }
                }
            }
            RoomEvent::OwnerChanged(transfer) => {
                let Some(entity) = mirror.entity(transfer.id) else {
                    continue;
                };
                if let Ok((mut known, _)) = entities.get_mut(entity) {
                    known.owner = transfer.owner;
                }
                if Some(transfer.owner) == me {
                    commands.entity(entity).try_insert(Replicate);
                } else {
                    commands.entity(entity).try_remove::<Replicate>();
                }
            }
            RoomEvent::Kicked(_) => {
                let all: Vec<EntityId> = mirror.by_id.keys().copied().collect();
                for id in all {
                    forget(&mut commands, &mut mirror, id);
                }
            }
            _ => {}
        }
    }
    // Left the room (a `leave` accepted): nothing of it stays.
    let in_room = net.room().is_some();
    if !in_room && !mirror.is_empty() {
        let all: Vec<EntityId> = mirror.by_id.keys().copied().collect();
        for id in all {
            forget(&mut commands, &mut mirror, id);
        }
    }
}

/// A room entity the server says exists: updated if mirrored, linked to
/// the local entity whose spawn it answers, or spawned.
fn put(
    commands: &mut Commands,
    mirror: &mut RoomMirror,
    entities: &mut Query<(&mut RoomEntity, &mut NetState)>,
    entity: &NetEntity,
    me: Option<ClientId>,
) {
    let known = RoomEntity {
        id: entity.id,
        owner: entity.owner,
        kind: entity.kind.clone(),
    };
    let state = NetState {
        bytes: entity.state.clone(),
        server_ms: None,
    };
    if let Some(local) = mirror.entity(entity.id) {
        if let Ok((mut was, mut had)) = entities.get_mut(local) {
            if *was != known {
                *was = known;
            }
            if had.bytes != state.bytes {
                *had = state;
            }
        }
        return;
    }
    let mine = Some(entity.owner) == me;
    let asked = mine
        .then(|| mirror.pending.get_mut(&entity.kind)?.pop_front())
        .flatten();
    let local = match asked {
        Some((_, local)) => match commands.get_entity(local) {
            Ok(mut spawned) => {
                spawned
                    .try_insert((known, state))
                    .try_remove::<SpawnAsked>();
                local
            }
            // The game despawned it before the room had it: it goes from
            // the room too (`despawned_here` asks).
            Err(_) => {
                mirror.orphans.push(entity.id);
                return;
            }
        },
        None if mine => commands.spawn((known, state, Replicate)).id(),
        None => commands.spawn((known, state)).id(),
    };
    mirror.link(entity.id, local);
}

/// A room entity that is gone is despawned here, this client's own too:
/// the server removed it (despawned, or its owner left the room).
fn forget(commands: &mut Commands, mirror: &mut RoomMirror, id: EntityId) {
    let Some(entity) = mirror.unlink(id) else {
        return;
    };
    commands.entity(entity).try_despawn();
}

/// A spawn the server refused is not asked again; the game reads why.
fn refused_spawns(
    mut commands: Commands,
    mut events: MessageReader<SwitchboardEvent>,
    mut mirror: ResMut<RoomMirror>,
) {
    for event in events.read() {
        let ClientEvent::RequestDone { ticket, status } = &event.0 else {
            continue;
        };
        let reason = match status {
            RequestStatus::Rejected(reason) => reason.clone(),
            RequestStatus::Failed(err) => err.to_string(),
            _ => continue,
        };
        for queue in mirror.pending.values_mut() {
            if let Some(at) = queue.iter().position(|(t, _)| t == ticket) {
                let (_, entity) = queue.remove(at).expect("position is in the queue");
                tracing::warn!(%reason, "the room refused an entity");
                if let Ok(mut entity) = commands.get_entity(entity) {
                    entity
                        .try_remove::<SpawnAsked>()
                        .try_insert(ReplicationRefused(reason));
                }
                break;
            }
        }
    }
}

/// The game despawned (or stripped) a mirrored entity: one this client
/// owns is despawned in the room too; another's is only forgotten here
/// (the server still has it, and a full room state brings it back).
fn despawned_here(
    mut removed: RemovedComponents<RoomEntity>,
    mut net: NonSendMut<Switchboard>,
    mut mirror: ResMut<RoomMirror>,
) {
    let me = net.client_id();
    let orphans = std::mem::take(&mut mirror.orphans);
    if let Some(rooms) = net.rooms() {
        for id in orphans {
            if let Err(err) = rooms.despawn(id) {
                tracing::warn!(entity = id.0, %err, "a despawn could not be sent");
            }
        }
    }
    for entity in removed.read() {
        let Some(id) = mirror.id(entity) else {
            continue;
        };
        mirror.unlink(id);
        let Some(rooms) = net.rooms() else {
            continue;
        };
        let mine = rooms
            .room_ref()
            .and_then(|room| room.entities.iter().find(|e| e.id == id))
            .is_some_and(|e| Some(e.owner) == me);
        if mine {
            if let Err(err) = rooms.despawn(id) {
                tracing::warn!(entity = id.0, %err, "a despawn could not be sent");
            }
        }
    }
}
