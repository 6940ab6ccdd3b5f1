//! What the rooms server tells a client, as typed values: [`RoomEvent`],
//! decoded from a message on the rooms channel, and [`RoomView`], the room as
//! a client knows it from those events.
//!
//! [`RoomClient`](crate::RoomClient) turns them into signals; a game in pull
//! style decodes them itself from `NetworkClient::drain`:
//!
//! ```no_run
//! # let mut client = switchboard::NetworkClient::connect("127.0.0.1:7000", Default::default());
//! use switchboard::ClientEvent;
//! use switchboard_rooms::{RoomEvent, RoomView};
//! let mut view = RoomView::default();
//! for event in client.drain() {
//!     if let ClientEvent::Message(message) = event {
//!         if let Some(room_event) = RoomEvent::decode(&message) {
//!             view.apply(&room_event);
//!         }
//!     }
//! }
//! ```

use switchboard::message::Message;
use switchboard::session::ClientId;

use crate::protocol::{
    CustomMessage, Entity, EntityId, PlayerLeft, RoomAction, RoomPlayer, RoomState, RoomSummary,
    RpcCall, StateSync, Transfer,
};
use switchboard::message::ROOMS_CHANNEL;

/// One thing the rooms server said.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RoomEvent {
    /// The whole room, on joining or coming back.
    State(RoomState),
    /// Someone joined your room.
    PlayerJoined(RoomPlayer),
    /// Someone left your room, and why.
    PlayerLeft(PlayerLeft),
    /// A player's ready flag or connection changed.
    PlayerChanged(RoomPlayer),
    /// The host changed.
    HostChanged(ClientId),
    /// The host started the game.
    Started,
    /// You were kicked, and why; nothing more of the room reaches you.
    Kicked(String),
    /// The public rooms.
    List(Vec<RoomSummary>),
    /// A custom message from another member.
    Custom(CustomMessage),
    /// An RPC for you.
    Rpc(RpcCall),
    /// An entity appeared.
    Spawned(Entity),
    /// An entity is gone.
    Despawned(EntityId),
    /// Entities changed since the last sync (each once, last state).
    StateUpdate(StateSync),
    /// An entity changed owner.
    OwnerChanged(Transfer),
}

impl RoomEvent {
    /// The event a message carries, if it is a rooms event. A message on
    /// another channel, a request action, or content that does not decode
    /// gives `None` (the last is logged).
    pub fn decode(message: &Message) -> Option<RoomEvent> {
        if message.channel_id() != ROOMS_CHANNEL {
            return None;
        }
        let action = message
            .typed::<RoomAction>()
            .map_err(|err| tracing::warn!(%err, "room event did not decode"))
            .ok()?;
        Some(match action {
            RoomAction::State(state) => RoomEvent::State(state),
            RoomAction::PlayerJoined(player) => RoomEvent::PlayerJoined(player),
            RoomAction::PlayerLeft(left) => RoomEvent::PlayerLeft(left),
            RoomAction::PlayerChanged(player) => RoomEvent::PlayerChanged(player),
            RoomAction::HostChanged(host) => RoomEvent::HostChanged(host),
            RoomAction::Started => RoomEvent::Started,
            RoomAction::Kicked(reason) => RoomEvent::Kicked(reason),
            RoomAction::List(list) => RoomEvent::List(list),
            RoomAction::CustomMessage(custom) => RoomEvent::Custom(custom),
            RoomAction::RpcCall(call) => RoomEvent::Rpc(call),
            RoomAction::Spawned(entity) => RoomEvent::Spawned(entity),
            RoomAction::Despawned(id) => RoomEvent::Despawned(id),
            RoomAction::StateUpdate(sync) => RoomEvent::StateUpdate(sync),
            RoomAction::OwnerChanged(transfer) => RoomEvent::OwnerChanged(transfer),
            _ => return None,
        })
    }
}

/// The room a client is in, as its events describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomView {
    room: Option<RoomState>,
}

impl RoomView {
    /// The room, if in one.
    pub fn room(&self) -> Option<&RoomState> {
        self.room.as_ref()
    }

    /// Forgets the room (after leaving it).
    pub fn clear(&mut self) {
        self.room = None;
    }

    /// Takes in one event.
    pub fn apply(&mut self, event: &RoomEvent) {
        if let RoomEvent::State(state) = event {
            self.room = Some(state.clone());
            return;
        }
        if let RoomEvent::Kicked(_) = event {
            self.room = None;
            return;
        }
        let Some(state) = self.room.as_mut() else {
            return;
        };
        match event {
            RoomEvent::PlayerJoined(player) => state.players.push(player.clone()),
            RoomEvent::PlayerLeft(left) => state.players.retain(|p| p.id != left.id),
            RoomEvent::PlayerChanged(player) => {
                if let Some(p) = state.players.iter_mut().find(|p| p.id == player.id) {
                    *p = player.clone();
                }
            }
            RoomEvent::HostChanged(host) => {
                for p in &mut state.players {
                    p.host = p.id == *host;
                }
            }
            RoomEvent::Started => state.started = true,
            RoomEvent::Spawned(entity) => {
                state.entities.retain(|e| e.id != entity.id);
                state.entities.push(entity.clone());
            }
            RoomEvent::Despawned(id) => state.entities.retain(|e| e.id != *id),
            RoomEvent::StateUpdate(sync) => {
                for update in &sync.updates {
                    if let Some(e) = state.entities.iter_mut().find(|e| e.id == update.id) {
                        e.state = update.state.clone();
                    }
                }
            }
            RoomEvent::OwnerChanged(transfer) => {
                if let Some(e) = state.entities.iter_mut().find(|e| e.id == transfer.id) {
                    e.owner = transfer.owner;
                }
            }
            _ => {}
        }
    }
}
