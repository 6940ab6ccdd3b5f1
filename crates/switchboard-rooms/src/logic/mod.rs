//! The server side of rooms: a [`GameLogic`] that needs no game code.
//!
//! Rules: a player is in at most one room; a full, locked or started room
//! refuses joiners; only the host starts (once everyone is ready), kicks and
//! locks; when the host leaves, the longest-present player becomes host (the
//! room closes when its last player leaves). A player whose connection drops
//! keeps their place for the session's grace period. The server stamps the
//! sender of every RPC and custom message.

mod apply;
mod pages;
mod publish;
mod snapshot;
mod validate;

pub use pages::PAGE_BYTES;

use std::collections::{BTreeMap, HashMap};

use switchboard::manager::{Audience, GameLogic, Outbox, Place, Rejection, Request};
use switchboard::message::TypedMessage;
use switchboard::session::ClientId;

use crate::directory::{DirectoryLink, DirectorySnapshot, Reservation, RoomRecord};
use crate::protocol::{
    CreateRoom, CustomMessage, CustomRequest, Entity, EntityId, EntityUpdate, Kick, PlayerLeft,
    RoomAction, RoomId, RoomPlayer, RoomState, RoomSummary, RpcCall, RpcRequest, RpcTarget,
    SpawnRequest, StateSync, Transfer,
};

/// The most rooms a server holds.
pub const MAX_ROOMS: usize = 1000;
/// The most entities in one room.
pub const MAX_ENTITIES: usize = 4096;
/// The largest entity state, in bytes.
pub const MAX_ENTITY_STATE: usize = 16 * 1024;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Member {
    id: ClientId,
    ready: bool,
    connected: bool,
    latency_ms: u32,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Room {
    id: RoomId,
    name: String,
    max_players: u8,
    metadata: BTreeMap<String, String>,
    private: bool,
    locked: bool,
    started: bool,
    host: ClientId,
    /// In the order they joined.
    members: Vec<Member>,
    entities: BTreeMap<EntityId, Entity>,
    /// Entities whose state changed since the last sync.
    dirty: std::collections::BTreeSet<EntityId>,
    /// Bytes of all its entities' states.
    state_bytes: usize,
    next_entity: u32,
}

/// A validated room request.
#[derive(Debug)]
pub enum RoomCommand {
    /// Create a room.
    Create(CreateRoom),
    /// Send the list to the asker.
    List,
    /// Join (or, for a member, resend the room's state).
    Join(RoomId),
    /// Leave.
    Leave,
    /// Set the ready flag.
    Ready(bool),
    /// Start.
    Start,
    /// Kick a player.
    Kick(Kick),
    /// Lock or unlock.
    Lock(bool),
    /// Route an RPC.
    Rpc(RpcRequest),
    /// Relay a custom message.
    Custom(CustomRequest),
    /// Spawn an entity.
    Spawn(SpawnRequest),
    /// Despawn an entity.
    Despawn(EntityId),
    /// Store a new state, synced later.
    Update(EntityUpdate),
    /// Change an entity's owner.
    Transfer(Transfer),
    /// Create a room, taking the matchmaker's reservation.
    CreateReserved(CreateRoom, Reservation),
    /// Join a room, taking the matchmaker's reservation.
    JoinReserved(RoomId, Reservation),
}

/// The rooms' quotas; each field says its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoomLimits {
    /// Rooms a server holds (default [`MAX_ROOMS`], 1000). A create past it
    /// is rejected.
    pub max_rooms: usize,
    /// Entities in one room (default [`MAX_ENTITIES`], 4096).
    pub max_entities: usize,
    /// Entities one player owns at once (default 256).
    pub max_entities_per_player: usize,
    /// Bytes of one entity's state (default [`MAX_ENTITY_STATE`], 16 KiB).
    pub max_entity_state: usize,
    /// Bytes of all the entity states in one room (default 4 MiB): what a
    /// late joiner is sent, so it stays under a connection's outbound limit
    /// (8 MiB). A spawn or update past it is rejected.
    pub max_room_state: usize,
    /// RPCs and custom messages one player may send per second (default
    /// 30): each fans out to the room. Past it they are rejected until the
    /// next second.
    pub max_rpcs_per_second: u32,
}

impl Default for RoomLimits {
    fn default() -> Self {
        Self {
            max_rooms: MAX_ROOMS,
            max_entities: MAX_ENTITIES,
            max_entities_per_player: 256,
            max_entity_state: MAX_ENTITY_STATE,
            max_room_state: 4 * 1024 * 1024,
            max_rpcs_per_second: 30,
        }
    }
}

/// Rooms, lobby, RPC and entity replication for any game.
#[derive(Debug)]
pub struct RoomsLogic {
    limits: RoomLimits,
    rooms: BTreeMap<RoomId, Room>,
    room_of: HashMap<ClientId, RoomId>,
    names: HashMap<ClientId, String>,
    next_room: u32,
    sync_interval: std::time::Duration,
    last_sync: Option<std::time::Instant>,
    /// RPCs and custom messages each player sent since `rpc_window` began.
    rpcs: HashMap<ClientId, u32>,
    rpc_window: Option<std::time::Instant>,
    /// Its place among the service's rooms processes, in directory mode.
    directory: Option<DirectoryLink>,
    /// The last snapshot published, and when.
    published: Option<(std::time::Instant, DirectorySnapshot)>,
    /// The first tick: the server's time in syncs counts from it.
    epoch: Option<std::time::Instant>,
}

impl Default for RoomsLogic {
    fn default() -> Self {
        Self {
            limits: RoomLimits::default(),
            rooms: BTreeMap::new(),
            room_of: HashMap::new(),
            names: HashMap::new(),
            next_room: 0,
            sync_interval: std::time::Duration::from_millis(50),
            last_sync: None,
            rpcs: HashMap::new(),
            rpc_window: None,
            directory: None,
            published: None,
            epoch: None,
        }
    }
}

fn invalid<T>(reason: impl Into<String>) -> Result<T, Rejection> {
    Err(Rejection::invalid(reason))
}

/// Sends to every member of `room`.
fn to_members(out: &mut Outbox, room: &Room, event: RoomAction) {
    out.send(Audience::Only(RoomsLogic::members(room)), event);
}

impl RoomsLogic {
    /// No rooms yet; entity states sync at 20 Hz (the logic asks its server
    /// for a tick at that rate: [`GameLogic::tick_interval`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A player gone for good, and why (the others hear it).
    fn forget(&mut self, client: ClientId, reason: &str, out: &mut Outbox) {
        self.remove(client, reason, out);
        self.names.remove(&client);
        self.rpcs.remove(&client);
    }

    /// These quotas instead of the defaults.
    pub fn with_limits(limits: RoomLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    fn summary(room: &Room) -> RoomSummary {
        RoomSummary {
            id: room.id,
            name: room.name.clone(),
            players: room.members.len() as u8,
            max_players: room.max_players,
            metadata: room.metadata.clone(),
            locked: room.locked,
            started: room.started,
        }
    }

    /// Entity states sync every `interval` instead.
    pub fn with_sync_interval(interval: std::time::Duration) -> Self {
        Self {
            sync_interval: interval,
            ..Self::default()
        }
    }

    fn entity_of(&self, client: ClientId, id: EntityId) -> Result<(&Room, &Entity), Rejection> {
        let room = self.room_of(client)?;
        let entity = room
            .entities
            .get(&id)
            .ok_or_else(|| Rejection::invalid("no such entity"))?;
        if entity.owner != client && room.host != client {
            return invalid("only the entity's owner or the host may do that");
        }
        Ok((room, entity))
    }

    fn room_of(&self, client: ClientId) -> Result<&Room, Rejection> {
        self.room_of
            .get(&client)
            .and_then(|id| self.rooms.get(id))
            .ok_or_else(|| Rejection::invalid("you are not in a room"))
    }

    /// The room `client` is in, to change it.
    fn room_mut(&mut self, client: ClientId) -> Option<&mut Room> {
        let id = self.room_of.get(&client)?;
        self.rooms.get_mut(id)
    }

    fn host_room(&self, client: ClientId) -> Result<&Room, Rejection> {
        let room = self.room_of(client)?;
        if room.host != client {
            return invalid("only the host may do that");
        }
        Ok(room)
    }

    fn player(&self, room: &Room, member: &Member) -> RoomPlayer {
        RoomPlayer {
            id: member.id,
            name: self.names.get(&member.id).cloned().unwrap_or_default(),
            host: room.host == member.id,
            ready: member.ready,
            connected: member.connected,
            latency_ms: member.latency_ms,
        }
    }

    fn members(room: &Room) -> Vec<ClientId> {
        room.members.iter().map(|m| m.id).collect()
    }

    /// Takes `client` out of its room, telling the others why; migrates the
    /// host or closes an empty room.
    fn remove(&mut self, client: ClientId, reason: &str, out: &mut Outbox) {
        let Some(room_id) = self.room_of.remove(&client) else {
            return;
        };
        let Some(room) = self.rooms.get_mut(&room_id) else {
            return;
        };
        room.members.retain(|m| m.id != client);
        if room.members.is_empty() {
            self.rooms.remove(&room_id);
            return;
        }
        let others = Self::members(room);
        let left = PlayerLeft {
            id: client,
            reason: reason.to_string(),
        };
        out.send(Audience::Only(others.clone()), RoomAction::PlayerLeft(left));
        // A leaver's entities go with it.
        let owned: Vec<EntityId> = room
            .entities
            .values()
            .filter(|e| e.owner == client)
            .map(|e| e.id)
            .collect();
        for id in owned {
            if let Some(entity) = room.entities.remove(&id) {
                room.state_bytes -= entity.state.len();
            }
            room.dirty.remove(&id);
            out.send(Audience::Only(others.clone()), RoomAction::Despawned(id));
        }
        if room.host == client {
            room.host = room.members[0].id;
            out.send(Audience::Only(others), RoomAction::HostChanged(room.host));
        }
    }

    fn set_connected(&mut self, client: ClientId, connected: bool, out: &mut Outbox) {
        let Some(room) = self.room_mut(client) else {
            return;
        };
        if let Some(member) = room.members.iter_mut().find(|m| m.id == client) {
            member.connected = connected;
        }
        let room = room.clone();
        let member = room.members.iter().find(|m| m.id == client).cloned();
        if let Some(member) = member {
            let player = self.player(&room, &member);
            to_members(out, &room, RoomAction::PlayerChanged(player));
            if connected {
                self.send_state(out, client, &room);
            }
        }
    }
}

impl GameLogic for RoomsLogic {
    type Message = RoomAction;
    type Command = RoomCommand;

    fn validate(&self, request: &Request<RoomAction>) -> Result<RoomCommand, Rejection> {
        self.check(request)
    }

    fn apply(&mut self, client: ClientId, command: RoomCommand, out: &mut Outbox) {
        self.carry_out(client, command, out)
    }

    /// The sync rate: the manager ticks the rooms this often, whatever its
    /// own `tick_interval`.
    fn tick_interval(&self) -> Option<std::time::Duration> {
        Some(self.sync_interval)
    }

    /// At the sync rate: each room's changed entities, once, to its members
    /// (changed-only: an entity updated ten times between syncs is sent
    /// once, with its last state; an unchanged one not at all).
    fn on_tick(&mut self, now: std::time::Instant, out: &mut Outbox) {
        if self
            .rpc_window
            .is_none_or(|at| now.saturating_duration_since(at) >= std::time::Duration::from_secs(1))
        {
            self.rpc_window = Some(now);
            self.rpcs.clear();
        }
        self.publish(now);
        if self
            .last_sync
            .is_some_and(|at| now.saturating_duration_since(at) < self.sync_interval)
        {
            return;
        }
        self.last_sync = Some(now);
        let epoch = *self.epoch.get_or_insert(now);
        let server_time_ms = now.saturating_duration_since(epoch).as_millis() as u64;
        for room in self.rooms.values_mut() {
            if room.dirty.is_empty() {
                continue;
            }
            let updates: Vec<EntityUpdate> = std::mem::take(&mut room.dirty)
                .into_iter()
                .filter_map(|id| room.entities.get(&id))
                .map(|e| EntityUpdate {
                    id: e.id,
                    state: e.state.clone(),
                })
                .collect();
            pages::send_updates(out, room, updates, server_time_ms);
        }
    }

    fn on_join(&mut self, client: ClientId, name: &str, _: &mut Outbox) {
        self.names.insert(client, name.to_string());
    }

    fn on_reconnect(&mut self, client: ClientId, out: &mut Outbox) {
        self.set_connected(client, true, out);
    }

    fn on_connection_lost(&mut self, client: ClientId, out: &mut Outbox) {
        self.set_connected(client, false, out);
    }

    /// Keeps each player's latency current; a change of 5 ms or more is
    /// announced to the room.
    fn snapshot(&self, now: std::time::Instant) -> Result<Vec<u8>, String> {
        self.snapshot_at(now)
    }

    fn restore(&mut self, state: &[u8], now: std::time::Instant) -> Result<(), String> {
        self.restore_at(state, now)
    }

    fn on_latency(&mut self, latencies: &[(ClientId, std::time::Duration)], out: &mut Outbox) {
        for (client, rtt) in latencies {
            let ms = rtt.as_millis().min(u32::MAX as u128) as u32;
            let Some(room) = self.room_mut(*client) else {
                continue;
            };
            let Some(member) = room.members.iter_mut().find(|m| m.id == *client) else {
                continue;
            };
            if member.latency_ms.abs_diff(ms) < 5 {
                continue;
            }
            member.latency_ms = ms;
            let member = member.clone();
            let room = room.clone();
            let player = self.player(&room, &member);
            to_members(out, &room, RoomAction::PlayerChanged(player));
        }
    }

    fn on_leave(&mut self, client: ClientId, out: &mut Outbox) {
        // The goodbye reaches the others whether the player left or its
        // grace period ran out.
        self.forget(client, "disconnected", out);
    }

    /// Every room, for the operator: members, who is ready, started,
    /// locked, entities.
    fn places(&self) -> Vec<Place> {
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
        self.rooms
            .values()
            .map(|room| {
                let name_of = |id: &ClientId| self.names.get(id).cloned().unwrap_or_default();
                let ready: Vec<String> = room
                    .members
                    .iter()
                    .filter(|m| m.ready)
                    .map(|m| name_of(&m.id))
                    .collect();
                Place {
                    name: format!("#{} {}", room.id.0, room.name),
                    members: room.members.iter().map(|m| m.id).collect(),
                    facts: vec![
                        (
                            "players".into(),
                            format!("{}/{}", room.members.len(), room.max_players),
                        ),
                        ("host".into(), name_of(&room.host)),
                        ("ready".into(), ready.join(", ")),
                        ("started".into(), yes_no(room.started)),
                        ("locked".into(), yes_no(room.locked)),
                        ("private".into(), yes_no(room.private)),
                        ("entities".into(), room.entities.len().to_string()),
                    ],
                }
            })
            .collect()
    }

    fn on_kicked(&mut self, client: ClientId, reason: &str, out: &mut Outbox) {
        self.forget(client, &format!("kicked: {reason}"), out);
    }
}

#[cfg(test)]
mod tests;
