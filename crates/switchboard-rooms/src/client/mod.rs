//! The client side of rooms: a [`NetworkClient`] with room signals and RPC
//! handlers registered by name.

mod events;

use std::collections::HashMap;
use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

use switchboard::client::{
    ClientConfig, NetworkClient, RequestError, RequestStatus, RequestTicket,
};
use switchboard::codec;
use switchboard::session::ClientId;

use crate::event::RoomView;
use crate::protocol::{
    CreateRoom, CustomRequest, EntityId, EntityUpdate, Kick, RoomAction, RoomId, RoomState,
    RpcRequest, RpcTarget, SpawnRequest, Transfer,
};

pub use events::{RoomClientEvent, RoomDrain, RoomSignals, RpcError};

type Handler = Box<dyn FnMut(ClientId, &[u8]) -> Result<(), codec::ContentError>>;

/// A client of a server running [`RoomsLogic`](crate::RoomsLogic).
///
/// Its events are pulled like a [`NetworkClient`]'s:
/// [`drain`](Self::drain) hands over each [`RoomClientEvent`] once (the
/// room events decoded, everything else as the client's own events), and
/// as it does, keeps [`room`](Self::room) current and runs the room
/// signals, the client's signals and the registered RPC handlers;
/// [`poll`](Self::poll) does the same for a game that uses only slots.
pub struct RoomClient {
    client: NetworkClient,
    signals: RoomSignals,
    handlers: HashMap<String, Handler>,
    room: RoomView,
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
        Self::connect_via(switchboard::socket::Dialer::default(), addr, config)
    }

    /// Like [`connect`](Self::connect), dialing through `dialer`: its
    /// trust in the server (a pinned fingerprint), its connectors (join
    /// codes).
    pub fn connect_via(
        dialer: switchboard::socket::Dialer,
        addr: impl ToString,
        config: ClientConfig,
    ) -> Self {
        Self {
            client: NetworkClient::connect_via(dialer, addr, config),
            signals: RoomSignals::default(),
            handlers: HashMap::new(),
            room: RoomView::default(),
            joins: Vec::new(),
        }
    }

    /// The room signals: each runs once per event, as the game takes it.
    pub fn signals(&self) -> &RoomSignals {
        &self.signals
    }

    /// The underlying client (its own signals: welcomed, connection lost...).
    pub fn client(&self) -> &NetworkClient {
        &self.client
    }

    /// The underlying client, to send on the game's own channels.
    pub fn client_mut(&mut self) -> &mut NetworkClient {
        &mut self.client
    }

    /// Where a request stands (see [`NetworkClient::status`]).
    pub fn status(&self, ticket: RequestTicket) -> RequestStatus {
        self.client.status(ticket)
    }

    /// Runs the network side until `ticket` has its verdict or `timeout`
    /// passes (see [`NetworkClient::wait`]); events wait for `drain`.
    pub fn wait(&mut self, ticket: RequestTicket, timeout: Duration) -> RequestStatus {
        self.client.wait(ticket, timeout)
    }

    /// Leaves the server for good (see [`NetworkClient::close`]): the others
    /// in your room are told.
    pub fn close(&mut self, reason: &str) {
        self.client.close(reason);
    }

    /// The room you are in, as last heard.
    pub fn room(&self) -> Option<RoomState> {
        self.room.room().cloned()
    }

    /// [`room`](Self::room) without the copy: for what a game checks every
    /// frame (am I in a room, who owns that entity).
    pub fn room_ref(&self) -> Option<&RoomState> {
        self.room.room()
    }

    fn ask(&mut self, request: RoomAction) -> Result<RequestTicket, RequestError> {
        self.client.request(request)
    }

    /// Creates a room and joins it as host.
    pub fn create(&mut self, room: &CreateRoom) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Create(room.clone()))
    }

    /// Asks for the public rooms; `rooms_listed` answers.
    pub fn list(&mut self) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::ListRooms)
    }

    /// Joins a room; `room_state` or `join_rejected` answers.
    pub fn join(&mut self, room: RoomId) -> Result<RequestTicket, RequestError> {
        let ticket = self.ask(RoomAction::Join(room))?;
        self.joins.push(ticket);
        Ok(ticket)
    }

    /// Joins the room a matchmaker reserved a seat in (connect to the
    /// seat's `addr` first); answered like [`join`](Self::join).
    pub fn join_reserved(
        &mut self,
        reservation: &crate::directory::Reservation,
    ) -> Result<RequestTicket, RequestError> {
        let ticket = self.ask(RoomAction::JoinReserved(reservation.clone()))?;
        self.joins.push(ticket);
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
        self.ask(RoomAction::CreateReserved(reserved))
    }

    /// Leaves the room.
    pub fn leave(&mut self) -> Result<RequestTicket, RequestError> {
        self.room.clear();
        self.ask(RoomAction::Leave)
    }

    /// Marks yourself ready or not.
    pub fn set_ready(&mut self, ready: bool) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Ready(ready))
    }

    /// Starts the game (host; everyone ready).
    pub fn start(&mut self) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Start)
    }

    /// Kicks a player (host).
    pub fn kick(&mut self, player: ClientId, reason: &str) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Kick(Kick {
            player,
            reason: reason.to_string(),
        }))
    }

    /// Locks or unlocks the room (host).
    pub fn lock(&mut self, locked: bool) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Lock(locked))
    }

    /// Registers the handler of RPC `method`, taking arguments of type `T`.
    pub fn register_rpc<T: DeserializeOwned + 'static>(
        &mut self,
        method: &str,
        mut handler: impl FnMut(ClientId, T) + 'static,
    ) {
        let handler: Handler = Box::new(move |from, args| {
            handler(from, codec::decode_value(args)?);
            Ok(())
        });
        self.handlers.insert(method.to_string(), handler);
    }

    /// Calls `method` on `target` with `args`; the server routes it.
    pub fn call<T: Serialize + ?Sized>(
        &mut self,
        target: RpcTarget,
        method: &str,
        args: &T,
    ) -> Result<RequestTicket, RequestError> {
        let args = codec::encode_value(args)?;
        self.ask(RoomAction::Rpc(RpcRequest {
            method: method.to_string(),
            target,
            args,
        }))
    }

    /// Sends `data` on a named channel to every other member.
    pub fn send_custom<T: Serialize + ?Sized>(
        &mut self,
        channel: &str,
        data: &T,
    ) -> Result<RequestTicket, RequestError> {
        let data = codec::encode_value(data)?;
        self.ask(RoomAction::Custom(CustomRequest {
            channel: channel.to_string(),
            data,
        }))
    }

    /// Spawns an entity you own.
    pub fn spawn<T: Serialize + ?Sized>(
        &mut self,
        kind: &str,
        state: &T,
    ) -> Result<RequestTicket, RequestError> {
        let state = codec::encode_value(state)?;
        self.ask(RoomAction::Spawn(SpawnRequest {
            kind: kind.to_string(),
            state,
        }))
    }

    /// Sets an entity's state (owner or host); the others get it at the
    /// next sync.
    pub fn update<T: Serialize + ?Sized>(
        &mut self,
        id: EntityId,
        state: &T,
    ) -> Result<RequestTicket, RequestError> {
        let state = codec::encode_value(state)?;
        self.ask(RoomAction::Update(EntityUpdate { id, state }))
    }

    /// Despawns an entity (owner or host).
    pub fn despawn(&mut self, id: EntityId) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Despawn(id))
    }

    /// Hands an entity to another member (owner or host).
    pub fn transfer(
        &mut self,
        id: EntityId,
        owner: ClientId,
    ) -> Result<RequestTicket, RequestError> {
        self.ask(RoomAction::Transfer(Transfer { id, owner }))
    }
}
