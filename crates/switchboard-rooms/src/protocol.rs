//! What travels on the rooms channel (2).

use std::collections::BTreeMap;

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use switchboard::codec::{self, ContentError};
use switchboard::message::ROOMS_CHANNEL;
use switchboard::session::ClientId;

switchboard::framework_channel! {
    /// The rooms channel, as a [`Channel`](switchboard::Channel).
    RoomsChannel = ROOMS_CHANNEL, "Rooms"
}

switchboard::actions! {
    /// Requests (client → server), events (server → client) and the
    /// matchmaker's messages on the rooms channel, each with its content.
    #[derive(Debug, Clone, PartialEq)]
    pub enum RoomAction in RoomsChannel {
        /// Request: create a room; the creator joins as host.
        Create(CreateRoom) = 1,
        /// Request: the list of public rooms; answered with `List`.
        ListRooms = 2,
        /// Request: join a room.
        Join(RoomId) = 3,
        /// Request: leave the room.
        Leave = 4,
        /// Request: ready or not.
        Ready(bool) = 5,
        /// Request (host): start the game.
        Start = 6,
        /// Request (host): kick a player.
        Kick(Kick) = 7,
        /// Request (host): lock or unlock the room.
        Lock(bool) = 8,
        /// Request: an RPC to route.
        Rpc(RpcRequest) = 9,
        /// Request: a custom message for every other member.
        Custom(CustomRequest) = 10,
        /// Request: spawn an entity; the requester owns it.
        Spawn(SpawnRequest) = 11,
        /// Request (owner or host): despawn an entity.
        Despawn(EntityId) = 12,
        /// Request (owner or host): an entity's new state, synced to the
        /// others at the sync rate.
        Update(EntityUpdate) = 13,
        /// Request (owner or host): hand an entity to another member.
        Transfer(Transfer) = 14,
        /// Request: join with a matchmaker's seat; a server in directory
        /// mode takes no other join.
        JoinReserved(crate::directory::Reservation) = 15,
        /// Request: create with a matchmaker's reservation.
        CreateReserved(crate::directory::CreateReserved) = 16,
        /// Event: the whole room, to a player who joins or comes back.
        State(RoomState) = 20,
        /// Event: a player joined.
        PlayerJoined(RoomPlayer) = 21,
        /// Event: a player left.
        PlayerLeft(PlayerLeft) = 22,
        /// Event: the host changed.
        HostChanged(ClientId) = 23,
        /// Event: the game started.
        Started = 24,
        /// Event: a player's ready flag (or connection, or latency) changed.
        PlayerChanged(RoomPlayer) = 25,
        /// Event: an RPC for you.
        RpcCall(RpcCall) = 26,
        /// Event: a custom message.
        CustomMessage(CustomMessage) = 27,
        /// Event: you were kicked, and why; nothing more of the room
        /// reaches you.
        Kicked(String) = 28,
        /// Event: the room list, answering `ListRooms`.
        List(Vec<RoomSummary>) = 29,
        /// Event: an entity appeared.
        Spawned(Entity) = 30,
        /// Event: an entity is gone.
        Despawned(EntityId) = 31,
        /// Event: entities whose state changed since the last sync, with
        /// the server's time.
        StateUpdate(StateSync) = 32,
        /// Event: an entity has a new owner.
        OwnerChanged(Transfer) = 33,
        /// Matchmaker request: every listed room of the service; answered
        /// with `Listed`.
        MatchList = 40,
        /// Matchmaker request: a seat in a new room on the least-loaded
        /// process; answered with `SeatReserved`.
        MatchCreate = 41,
        /// Matchmaker request: a seat in a room; answered with
        /// `SeatReserved`.
        MatchJoin(RoomId) = 42,
        /// Matchmaker answer: the rooms.
        Listed(Vec<RoomSummary>) = 43,
        /// Matchmaker answer: a seat.
        SeatReserved(crate::directory::Seat) = 44,
        /// Matchmaker answer: why not.
        MatchRefused(String) = 45,
    }
}

/// A room's number on its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RoomId(pub u32);

/// Create a room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateRoom {
    /// Its name (1..=32 characters).
    pub name: String,
    /// Players it takes (1..=64).
    pub max_players: u8,
    /// Free key = value pairs shown in the list.
    pub metadata: BTreeMap<String, String>,
    /// Not shown in the list; joined by id.
    pub private: bool,
}

/// Kick a player.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kick {
    /// Whom.
    pub player: ClientId,
    /// Why (they are told).
    pub reason: String,
}

/// Who an RPC is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RpcTarget {
    /// Every member, the caller included.
    All,
    /// Every member but the caller.
    Others,
    /// One member.
    One(ClientId),
    /// The room's host.
    Host,
}

/// An RPC as the caller sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcRequest {
    /// The method's name.
    pub method: String,
    /// Who runs it.
    pub target: RpcTarget,
    /// The encoded arguments.
    pub args: Vec<u8>,
}

/// An RPC as its target receives it: the server stamps the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcCall {
    /// Who called (stamped by the server; never what a client claims).
    pub from: ClientId,
    /// The method's name.
    pub method: String,
    /// The encoded arguments.
    pub args: Vec<u8>,
}

/// A custom message as the sender sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomRequest {
    /// A named channel of the game's (free text, ≤ 32 bytes).
    pub channel: String,
    /// The encoded content.
    pub data: Vec<u8>,
}

/// A custom message as the others receive it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomMessage {
    /// Who sent it (stamped by the server).
    pub from: ClientId,
    /// The named channel.
    pub channel: String,
    /// The encoded content.
    pub data: Vec<u8>,
}

impl CustomMessage {
    /// The content as the game's type.
    pub fn value<T: DeserializeOwned>(&self) -> Result<T, ContentError> {
        codec::decode_value(&self.data)
    }
}

/// A player in a room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomPlayer {
    /// Their id.
    pub id: ClientId,
    /// Their name.
    pub name: String,
    /// Whether they host the room.
    pub host: bool,
    /// Whether they are ready.
    pub ready: bool,
    /// Whether their connection is up (false while within a reconnect grace).
    pub connected: bool,
    /// Their measured round trip to the server, in milliseconds (0 until
    /// measured; keep-alive pings measure it every few seconds).
    pub latency_ms: u32,
}

/// A player left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerLeft {
    /// Who.
    pub id: ClientId,
    /// Why: "left", "kicked: ...", "disconnected".
    pub reason: String,
}

/// The whole room, for a player who joins or comes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomState {
    /// Which room.
    pub id: RoomId,
    /// Its name.
    pub name: String,
    /// Players it takes.
    pub max_players: u8,
    /// Its metadata.
    pub metadata: BTreeMap<String, String>,
    /// Whether it is locked.
    pub locked: bool,
    /// Whether the game started.
    pub started: bool,
    /// Everyone in it.
    pub players: Vec<RoomPlayer>,
    /// The room's live entities, as many as fit one page (64 KiB of state).
    pub entities: Vec<Entity>,
    /// Entities that did not fit: they follow at once as `Spawned` events
    /// (0 for most rooms). The snapshot is whole once they have arrived.
    pub more_entities: u32,
}

/// A room as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomSummary {
    /// Which room.
    pub id: RoomId,
    /// Its name.
    pub name: String,
    /// Players in it.
    pub players: u8,
    /// Players it takes.
    pub max_players: u8,
    /// Its metadata.
    pub metadata: BTreeMap<String, String>,
    /// Whether it is locked.
    pub locked: bool,
    /// Whether the game started.
    pub started: bool,
}

/// A networked entity's number in its room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityId(pub u32);

/// A networked entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entity {
    /// Its number.
    pub id: EntityId,
    /// Who may update it (besides the host).
    pub owner: ClientId,
    /// What it is, for the game (≤ 32 bytes).
    pub kind: String,
    /// Its encoded state.
    pub state: Vec<u8>,
}

/// Spawn an entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// What it is.
    pub kind: String,
    /// Its first state.
    pub state: Vec<u8>,
}

/// The entities of a room whose state changed since the last sync, and
/// when: the server's time (ms since the rooms server started), what a
/// client interpolates them by (`switchboard::smoothing`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSync {
    /// The server's time of this sync, ms.
    pub server_time_ms: u64,
    /// Each changed entity, once, with its last state.
    pub updates: Vec<EntityUpdate>,
}

/// A new state for an entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityUpdate {
    /// Which entity.
    pub id: EntityId,
    /// Its encoded state.
    pub state: Vec<u8>,
}

impl Entity {
    /// The state as the game's type (what `RoomClient::spawn` and `update`
    /// were given).
    pub fn value<T: DeserializeOwned>(&self) -> Result<T, ContentError> {
        codec::decode_value(&self.state)
    }
}

impl EntityUpdate {
    /// The new state as the game's type.
    pub fn value<T: DeserializeOwned>(&self) -> Result<T, ContentError> {
        codec::decode_value(&self.state)
    }
}

/// A change of owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// Which entity.
    pub id: EntityId,
    /// The new owner (a member of the room).
    pub owner: ClientId,
}
