//! Rooms, lobby and RPC for any game, with no game code on the server:
//! [`RoomsLogic`] is a [`GameLogic`](switchboard::GameLogic) a `ServerManager`
//! runs, [`RoomClient`] the client side with its signals.
//!
//! A server hosts any number of rooms; players create, list, join and leave
//! them, mark themselves ready, and the host starts the game, kicks players
//! and locks the room. RPCs go to everyone, the others, one player or the
//! host; custom messages on named channels reach every other member. The
//! server stamps the sender of everything, so a client cannot speak as
//! someone else.
//!
//! Entities replicate: a player spawns one and owns it; only the owner (or
//! the host) updates, despawns or hands it over; changed states go out at the
//! sync rate (20 Hz by default), each changed entity once with its last
//! state; a late joiner gets every live entity with the room. A leaving
//! player's entities are despawned.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`protocol`] | what travels on the rooms channel (2): requests, events, their types |
//! | `logic` | [`RoomsLogic`]: the rules (`validate.rs`), what accepted requests do (`apply.rs`), the rooms published in directory mode (`publish.rs`) |
//! | `event` | [`RoomEvent`] decoded from a message, [`RoomView`] the room as a client knows it |
//! | `client` | [`RoomClient`]: a `NetworkClient` with room signals and RPC handlers |
//! | [`directory`] | rooms across processes: the snapshots a process publishes, seat reservations ([`directory::Reservation`]) |
//!
//! Unchanged AxisPy games join the same rooms through `switchboard-axispy`,
//! which translates their JSON into this crate's requests and events.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod client;
pub mod directory;
mod event;
mod logic;
pub mod protocol;

pub use client::{RoomClient, RoomClientEvent, RoomDrain, RoomSignals, RpcError};
pub use event::{RoomEvent, RoomView};
pub use logic::{
    RoomCommand, RoomLimits, RoomsLogic, MAX_ENTITIES, MAX_ENTITY_STATE, MAX_ROOMS, PAGE_BYTES,
};
pub use protocol::{
    CreateRoom, CustomMessage, Entity, EntityId, EntityUpdate, PlayerLeft, RoomId, RoomPlayer,
    RoomState, RoomSummary, RpcCall, RpcTarget, StateSync, Transfer,
};
