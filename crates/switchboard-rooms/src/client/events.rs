//! How a room client's events reach the game: pulled ([`RoomDrain`]), with
//! the room view kept current, the room signals run and RPC handlers
//! called as each event is taken.

use std::collections::HashMap;
use std::time::Duration;

use switchboard::client::{ClientEvent, Drain, RequestStatus, RequestTicket};
use switchboard::message::ROOMS_CHANNEL;
use switchboard::session::ClientId;
use switchboard::signal::Signal;

use super::{Handler, RoomClient};
use crate::event::{RoomEvent, RoomView};
use crate::protocol::{
    CustomMessage, Entity, EntityId, PlayerLeft, RoomPlayer, RoomState, RoomSummary, StateSync,
    Transfer,
};

/// An RPC that could not run on this client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rpc {method} from {from}: {reason}")]
pub struct RpcError {
    /// Who called.
    pub from: ClientId,
    /// The method.
    pub method: String,
    /// Why: no handler of that name, or arguments of another type.
    pub reason: String,
}

/// The signals of a room client: each runs once per event, as the game
/// takes it (`drain`, `poll`).
#[derive(Debug, Default)]
pub struct RoomSignals {
    /// The whole room, on joining or coming back.
    pub room_state: Signal<RoomState>,
    /// Someone joined your room.
    pub player_joined: Signal<RoomPlayer>,
    /// Someone left your room, and why.
    pub player_left: Signal<PlayerLeft>,
    /// A player's ready flag or connection changed.
    pub player_changed: Signal<RoomPlayer>,
    /// The host changed.
    pub host_changed: Signal<ClientId>,
    /// The host started the game.
    pub game_started: Signal<()>,
    /// A join was refused, and why.
    pub join_rejected: Signal<String>,
    /// You were kicked, and why.
    pub kicked: Signal<String>,
    /// The public rooms.
    pub rooms_listed: Signal<Vec<RoomSummary>>,
    /// A custom message from another member.
    pub custom: Signal<CustomMessage>,
    /// An RPC for which no handler fits.
    pub rpc_error: Signal<RpcError>,
    /// An entity appeared.
    pub spawned: Signal<Entity>,
    /// An entity is gone.
    pub despawned: Signal<EntityId>,
    /// Entities changed since the last sync (each once, last state).
    pub state_updated: Signal<StateSync>,
    /// An entity changed owner.
    pub owner_changed: Signal<Transfer>,
}

/// What a [`RoomClient`] hands the game.
#[derive(Debug, Clone)]
pub enum RoomClientEvent {
    /// The rooms server said something.
    Room(RoomEvent),
    /// Anything else: the client's own events, messages on the game's
    /// channels, request verdicts.
    Client(ClientEvent),
}

impl RoomClient {
    /// Takes in what the network brought and hands the events over, in
    /// order (see [`NetworkClient::drain`](switchboard::NetworkClient::drain)).
    /// As each is taken, the room view follows it and its signal (or RPC
    /// handler) runs; events not taken stay queued.
    pub fn drain(&mut self) -> RoomDrain<'_> {
        self.drain_timeout(Duration::ZERO)
    }

    /// Like [`drain`](Self::drain), but first waits up to `timeout` for an
    /// event if none is queued.
    pub fn drain_timeout(&mut self, timeout: Duration) -> RoomDrain<'_> {
        RoomDrain {
            inner: self.client.drain_timeout(timeout),
            room: &mut self.room,
            signals: &self.signals,
            handlers: &mut self.handlers,
            joins: &mut self.joins,
        }
    }

    /// Takes every event, running only the signals and handlers; returns
    /// how many. Call once per frame when slots are all the game uses.
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), waiting up to `timeout` for an event.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        self.drain_timeout(timeout).count()
    }
}

/// The events [`RoomClient::drain`] hands over.
pub struct RoomDrain<'a> {
    inner: Drain<'a>,
    room: &'a mut RoomView,
    signals: &'a RoomSignals,
    handlers: &'a mut HashMap<String, Handler>,
    joins: &'a mut Vec<RequestTicket>,
}

impl std::fmt::Debug for RoomDrain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomDrain")
            .field("inner", &self.inner)
            .finish()
    }
}

impl Iterator for RoomDrain<'_> {
    type Item = RoomClientEvent;

    fn next(&mut self) -> Option<RoomClientEvent> {
        let event = self.inner.next()?;
        match event {
            ClientEvent::Message(message) if message.channel_id() == ROOMS_CHANNEL => {
                match RoomEvent::decode(&message) {
                    Some(room_event) => {
                        self.room.apply(&room_event);
                        self.emit(&room_event);
                        Some(RoomClientEvent::Room(room_event))
                    }
                    None => Some(RoomClientEvent::Client(ClientEvent::Message(message))),
                }
            }
            ClientEvent::RequestDone { ticket, status } => {
                if let Some(at) = self.joins.iter().position(|t| *t == ticket) {
                    self.joins.swap_remove(at);
                    match &status {
                        RequestStatus::Rejected(reason) => self.signals.join_rejected.emit(reason),
                        RequestStatus::Failed(err) => {
                            self.signals.join_rejected.emit(&err.to_string())
                        }
                        RequestStatus::Pending | RequestStatus::Accepted => {}
                    }
                }
                Some(RoomClientEvent::Client(ClientEvent::RequestDone {
                    ticket,
                    status,
                }))
            }
            other => Some(RoomClientEvent::Client(other)),
        }
    }
}

impl RoomDrain<'_> {
    /// Runs the signal of one event, or the RPC handler it names.
    fn emit(&mut self, event: &RoomEvent) {
        let signals = self.signals;
        match event {
            RoomEvent::State(state) => signals.room_state.emit(state),
            RoomEvent::PlayerJoined(player) => signals.player_joined.emit(player),
            RoomEvent::PlayerLeft(left) => signals.player_left.emit(left),
            RoomEvent::PlayerChanged(player) => signals.player_changed.emit(player),
            RoomEvent::HostChanged(host) => signals.host_changed.emit(host),
            RoomEvent::Started => signals.game_started.emit(&()),
            RoomEvent::Kicked(reason) => signals.kicked.emit(reason),
            RoomEvent::List(list) => signals.rooms_listed.emit(list),
            RoomEvent::Custom(custom) => signals.custom.emit(custom),
            RoomEvent::Spawned(entity) => signals.spawned.emit(entity),
            RoomEvent::Despawned(id) => signals.despawned.emit(id),
            RoomEvent::StateUpdate(updates) => signals.state_updated.emit(updates),
            RoomEvent::OwnerChanged(transfer) => signals.owner_changed.emit(transfer),
            RoomEvent::Rpc(call) => {
                let error = match self.handlers.get_mut(&call.method) {
                    Some(handler) => handler(call.from, &call.args).err().map(|e| e.to_string()),
                    None => Some(format!("no handler for {}", call.method)),
                };
                if let Some(reason) = error {
                    signals.rpc_error.emit(&RpcError {
                        from: call.from,
                        method: call.method.clone(),
                        reason,
                    });
                }
            }
        }
    }
}
