//! The client side of rooms: a [`NetworkClient`] with room signals and RPC
//! handlers registered by name.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

use switchboard::client::{
    ClientConfig, NetworkClient, RequestError, RequestStatus, RequestTicket,
};
use switchboard::codec;
use switchboard::session::ClientId;
use switchboard::signal::Signal;

use crate::event::{RoomEvent, RoomView};
use crate::protocol::{
    CreateRoom, CustomMessage, CustomRequest, Entity, EntityId, EntityUpdate, Kick, PlayerLeft,
    RoomAction, RoomId, RoomPlayer, RoomState, RoomSummary, RoomsChannel, RpcRequest, RpcTarget,
    SpawnRequest, Transfer,
};

/// An RPC that could not run on this client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// Who called.
    pub from: ClientId,
    /// The method.
    pub method: String,
    /// Why: no handler of that name, or arguments of another type.
    pub reason: String,
}

/// The signals of a room client; slots run inside [`RoomClient::poll`].
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
    pub state_updated: Signal<Vec<EntityUpdate>>,
    /// An entity changed owner.
    pub owner_changed: Signal<Transfer>,
}

type Handler = Box<dyn FnMut(ClientId, &[u8]) -> Result<(), codec::ContentError>>;

/// A client of a server running [`RoomsLogic`](crate::RoomsLogic).
pub struct RoomClient {
    client: NetworkClient,
    signals: Rc<RoomSignals>,
    handlers: Rc<RefCell<HashMap<String, Handler>>>,
    room: Rc<RefCell<RoomView>>,
    joins: Vec<RequestTicket>,
}

impl std::fmt::Debug for RoomClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomClient")
            .field("client", &self.client)
            .finish()
    }
}

impl RoomClient {
    /// Connects like [`NetworkClient::connect`].
    pub fn connect(addr: impl ToString, config: ClientConfig) -> Self {
        let client = NetworkClient::connect(addr, config);
        let signals = Rc::new(RoomSignals::default());
        let handlers: Rc<RefCell<HashMap<String, Handler>>> = Rc::default();
        let room: Rc<RefCell<RoomView>> = Rc::default();
        let (s, h, r) = (signals.clone(), handlers.clone(), room.clone());
        client.subscribe(RoomsChannel, move |delivery| {
            let Some(event) = RoomEvent::decode(&delivery.message) else {
                return;
            };
            r.borrow_mut().apply(&event);
            emit(event, &s, &h);
        });
        Self {
            client,
            signals,
            handlers,
            room,
            joins: Vec::new(),
        }
    }

    /// The room signals.
    pub fn signals(&self) -> &RoomSignals {
        &self.signals
    }

    /// The underlying client (its own signals: welcomed, connection lost...).
    pub fn client(&self) -> &NetworkClient {
        &self.client
    }

    /// Leaves the server for good (see [`NetworkClient::close`]): the others
    /// in your room are told.
    pub fn close(&mut self, reason: &str) {
        self.client.close(reason);
    }

    /// The room you are in, as last heard.
    pub fn room(&self) -> Option<RoomState> {
        self.room.borrow().room().cloned()
    }

    fn ask<T: Serialize + ?Sized>(
        &mut self,
        action: RoomAction,
        content: &T,
    ) -> Result<RequestTicket, RequestError> {
        self.client.request(RoomsChannel, action, content)
    }

    /// Creates a room and joins it as host.
    pub fn create(&mut self, room: &CreateRoom) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Create, room)
    }

    /// Asks for the public rooms; `rooms_listed` answers.
    pub fn list(&mut self) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::ListRooms, &())
    }

    /// Joins a room; `room_state` or `join_rejected` answers.
    pub fn join(&mut self, room: RoomId) -> Result<RequestTicket, RequestError> {
        let ticket = self.ask(RoomAction::Join, &room)?;
        self.joins.push(ticket.clone());
        Ok(ticket)
    }

    /// Joins the room a matchmaker reserved a seat in (connect to the
    /// seat's `addr` first); answered like [`join`](Self::join).
    pub fn join_reserved(
        &mut self,
        reservation: &crate::directory::Reservation,
    ) -> Result<RequestTicket, RequestError> {
        let ticket = self.ask(RoomAction::JoinReserved, reservation)?;
        self.joins.push(ticket.clone());
        Ok(ticket)
    }

    /// Creates a room where a matchmaker reserved it (connect to the
    /// seat's `addr` first), and joins it as host.
    pub fn create_reserved(
        &mut self,
        reservation: &crate::directory::Reservation,
        room: &CreateRoom,
    ) -> Result<RequestTicket, RequestError> {
        let reserved = crate::directory::CreateReserved {
            reservation: reservation.clone(),
            room: room.clone(),
        };
        self.ask(RoomAction::CreateReserved, &reserved)
    }

    /// Leaves the room.
    pub fn leave(&mut self) -> Result<RequestTicket, RequestError> {
        self.room.borrow_mut().clear();
        self.ask(RoomAction::Leave, &())
    }

    /// Marks yourself ready or not.
    pub fn set_ready(&mut self, ready: bool) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Ready, &ready)
    }

    /// Starts the game (host; everyone ready).
    pub fn start(&mut self) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Start, &())
    }

    /// Kicks a player (host).
    pub fn kick(&mut self, player: ClientId, reason: &str) -> Result<RequestTicket, RequestError> {
        self.ask(
            RoomAction::Kick,
            &Kick {
                player,
                reason: reason.to_string(),
            },
        )
    }

    /// Locks or unlocks the room (host).
    pub fn lock(&mut self, locked: bool) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Lock, &locked)
    }

    /// Registers the handler of RPC `method`, taking arguments of type `T`.
    pub fn register_rpc<T: DeserializeOwned + 'static>(
        &self,
        method: &str,
        mut handler: impl FnMut(ClientId, T) + 'static,
    ) {
        let handler: Handler = Box::new(move |from, args| {
            handler(from, codec::decode_value(args)?);
            Ok(())
        });
        self.handlers
            .borrow_mut()
            .insert(method.to_string(), handler);
    }

    /// Calls `method` on `target` with `args`; the server routes it.
    pub fn call<T: Serialize + ?Sized>(
        &mut self,
        target: RpcTarget,
        method: &str,
        args: &T,
    ) -> Result<RequestTicket, RequestError> {
        let args = codec::encode_value(args)?;
        self.ask(
            RoomAction::Rpc,
            &RpcRequest {
                method: method.to_string(),
                target,
                args,
            },
        )
    }

    /// Sends `data` on a named channel to every other member.
    pub fn send_custom<T: Serialize + ?Sized>(
        &mut self,
        channel: &str,
        data: &T,
    ) -> Result<RequestTicket, RequestError> {
        let data = codec::encode_value(data)?;
        self.ask(
            RoomAction::Custom,
            &CustomRequest {
                channel: channel.to_string(),
                data,
            },
        )
    }

    /// Spawns an entity you own.
    pub fn spawn<T: Serialize + ?Sized>(
        &mut self,
        kind: &str,
        state: &T,
    ) -> Result<RequestTicket, RequestError> {
        let state = codec::encode_value(state)?;
        self.ask(
            RoomAction::Spawn,
            &SpawnRequest {
                kind: kind.to_string(),
                state,
            },
        )
    }

    /// Sets an entity's state (owner or host); the others get it at the
    /// next sync.
    pub fn update<T: Serialize + ?Sized>(
        &mut self,
        id: EntityId,
        state: &T,
    ) -> Result<RequestTicket, RequestError> {
        let state = codec::encode_value(state)?;
        self.ask(RoomAction::Update, &EntityUpdate { id, state })
    }

    /// Despawns an entity (owner or host).
    pub fn despawn(&mut self, id: EntityId) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Despawn, &id)
    }

    /// Hands an entity to another member (owner or host).
    pub fn transfer(
        &mut self,
        id: EntityId,
        owner: ClientId,
    ) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Transfer, &Transfer { id, owner })
    }

    /// Delivers events to signals, handlers and subscribers on this thread.
    pub fn poll(&mut self) -> usize {
        self.poll_timeout(Duration::ZERO)
    }

    /// Like [`poll`](Self::poll), waiting up to `timeout` for an event.
    pub fn poll_timeout(&mut self, timeout: Duration) -> usize {
        let delivered = self.client.poll_timeout(timeout);
        let signals = self.signals.clone();
        self.joins.retain(|ticket| match ticket.status() {
            RequestStatus::Pending => true,
            RequestStatus::Rejected(reason) => {
                signals.join_rejected.emit(&reason);
                false
            }
            RequestStatus::Failed(err) => {
                signals.join_rejected.emit(&err.to_string());
                false
            }
            RequestStatus::Accepted => false,
        });
        delivered
    }
}

/// Emits the signal of one event, and runs the RPC handler an RPC names.
fn emit(event: RoomEvent, signals: &RoomSignals, handlers: &RefCell<HashMap<String, Handler>>) {
    match event {
        RoomEvent::State(state) => signals.room_state.emit(&state),
        RoomEvent::PlayerJoined(player) => signals.player_joined.emit(&player),
        RoomEvent::PlayerLeft(left) => signals.player_left.emit(&left),
        RoomEvent::PlayerChanged(player) => signals.player_changed.emit(&player),
        RoomEvent::HostChanged(host) => signals.host_changed.emit(&host),
        RoomEvent::Started => signals.game_started.emit(&()),
        RoomEvent::Kicked(reason) => signals.kicked.emit(&reason),
        RoomEvent::List(list) => signals.rooms_listed.emit(&list),
        RoomEvent::Custom(custom) => signals.custom.emit(&custom),
        RoomEvent::Spawned(entity) => signals.spawned.emit(&entity),
        RoomEvent::Despawned(id) => signals.despawned.emit(&id),
        RoomEvent::StateUpdate(updates) => signals.state_updated.emit(&updates),
        RoomEvent::OwnerChanged(transfer) => signals.owner_changed.emit(&transfer),
        RoomEvent::Rpc(call) => {
            // Taken out while it runs, so that a handler may register others.
            let handler = handlers.borrow_mut().remove(&call.method);
            let error = match handler {
                Some(mut handler) => {
                    let result = handler(call.from, &call.args);
                    handlers
                        .borrow_mut()
                        .entry(call.method.clone())
                        .or_insert(handler);
                    result.err().map(|e| e.to_string())
                }
                None => Some(format!("no handler for {}", call.method)),
            };
            if let Some(reason) = error {
                signals.rpc_error.emit(&RpcError {
                    from: call.from,
                    method: call.method,
                    reason,
                });
            }
        }
    }
}
