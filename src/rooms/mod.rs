//! Rooms, lobby and RPC for any game, with no game code on the server:
//! [`RoomsLogic`] is a [`GameLogic`](crate::GameLogic) a `ServerManager`
//! runs, [`RoomClient`] the client side with its signals.
//!
//! A server hosts any number of rooms; players create, list, join and leave
//! them, mark themselves ready, and the host starts the game, kicks players
//! and locks the room. RPCs go to everyone, the others, one player or the
//! host; custom messages on named channels reach every other member. The
//! server stamps the sender of everything, so a client cannot speak as
//! someone else.

mod client;
mod logic;
pub mod protocol;

pub use client::{RoomClient, RoomSignals, RpcError};
pub use logic::{RoomCommand, RoomsLogic, MAX_ROOMS};
pub use protocol::{
    CreateRoom, CustomMessage, PlayerLeft, RoomId, RoomPlayer, RoomState, RoomSummary, RpcCall,
    RpcTarget,
};
