//! Validation of every rooms request: [`RoomsLogic::check`].

use super::*;

impl RoomsLogic {
    fn check_create(
        &self,
        client: ClientId,
        mut create: CreateRoom,
    ) -> Result<CreateRoom, Rejection> {
        create.name = match switchboard::session::checked_name(&create.name) {
            Ok(name) => name.to_string(),
            Err(why) => return invalid(format!("room name: {why}")),
        };
        if !(1..=64).contains(&create.max_players) {
            return invalid("rooms take 1 to 64 players");
        }
        if create.metadata.len() > 16
            || create
                .metadata
                .iter()
                .any(|(k, v)| k.len() > 32 || v.len() > 128)
        {
            return invalid("metadata: at most 16 pairs, keys of 32 bytes, values of 128");
        }
        if self.room_of.contains_key(&client) {
            return invalid("leave your room first");
        }
        if self.rooms.len() >= self.limits.max_rooms {
            return invalid("the server has no room for more rooms");
        }
        Ok(create)
    }

    fn check_join(&self, client: ClientId, id: RoomId) -> Result<(), Rejection> {
        let room = self
            .rooms
            .get(&id)
            .ok_or_else(|| Rejection::invalid("no such room"))?;
        if self.room_of.get(&client) == Some(&id) {
            // Already in: a client coming back; not "full", not a duplicate.
            return Ok(());
        }
        if self.room_of.contains_key(&client) {
            return invalid("you are in another room");
        }
        if room.started {
            return invalid("the game in that room has started");
        }
        if room.locked {
            return invalid("that room is locked");
        }
        if room.members.len() >= room.max_players as usize {
            return invalid("that room is full");
        }
        Ok(())
    }

    /// In directory mode rooms are created and joined with a matchmaker's
    /// reservation only: every seat was counted across the service.
    fn not_through_the_directory(&self) -> Result<(), Rejection> {
        if self.directory.is_some() {
            return invalid("rooms on this server are created and joined through the matchmaker");
        }
        Ok(())
    }

    /// The room `reservation` reserves a seat in (`None`: a room to
    /// create), if it admits anyone here now.
    fn check_reservation(&self, reservation: &Reservation) -> Result<Option<RoomId>, Rejection> {
        let Some(link) = &self.directory else {
            return invalid("this server takes no reservations: create or join directly");
        };
        link.admits(reservation).map_err(Rejection::invalid)
    }

    /// The rules: what each request may do, checked without changing
    /// anything.
    pub(super) fn check(&self, request: &Request<RoomAction>) -> Result<RoomCommand, Rejection> {
        let client = request.client;
        match &request.message {
            RoomAction::Create(create) => {
                self.not_through_the_directory()?;
                Ok(RoomCommand::Create(
                    self.check_create(client, create.clone())?,
                ))
            }
            RoomAction::CreateReserved(reserved) => {
                if self.check_reservation(&reserved.reservation)?.is_some() {
                    return invalid("the reservation is for a seat in a room, not a new one");
                }
                let create = self.check_create(client, reserved.room.clone())?;
                Ok(RoomCommand::CreateReserved(
                    create,
                    reserved.reservation.clone(),
                ))
            }
            RoomAction::JoinReserved(reservation) => {
                let id = self
                    .check_reservation(reservation)?
                    .ok_or_else(|| Rejection::invalid("the reservation is for a new room"))?;
                self.check_join(client, id)?;
                Ok(RoomCommand::JoinReserved(id, reservation.clone()))
            }
            RoomAction::ListRooms => Ok(RoomCommand::List),
            RoomAction::Join(id) => {
                let id = *id;
                // A member coming back needs no new seat.
                if self.room_of.get(&client) != Some(&id) {
                    self.not_through_the_directory()?;
                }
                self.check_join(client, id)?;
                Ok(RoomCommand::Join(id))
            }
            RoomAction::Leave => {
                self.room_of(client)?;
                Ok(RoomCommand::Leave)
            }
            RoomAction::Ready(ready) => {
                if self.room_of(client)?.started {
                    return invalid("the game has started");
                }
                Ok(RoomCommand::Ready(*ready))
            }
            RoomAction::Start => {
                let room = self.host_room(client)?;
                if room.started {
                    return invalid("the game has started already");
                }
                if let Some(waiting) = room.members.iter().find(|m| !m.ready) {
                    let name = self.names.get(&waiting.id).cloned().unwrap_or_default();
                    return invalid(format!("{name} is not ready"));
                }
                Ok(RoomCommand::Start)
            }
            RoomAction::Kick(kick) => {
                let room = self.host_room(client)?;
                if kick.player == client {
                    return invalid("the host cannot kick itself; leave instead");
                }
                if !room.members.iter().any(|m| m.id == kick.player) {
                    return invalid("no such player in your room");
                }
                Ok(RoomCommand::Kick(kick.clone()))
            }
            RoomAction::Lock(locked) => {
                self.host_room(client)?;
                Ok(RoomCommand::Lock(*locked))
            }
            RoomAction::Rpc(rpc) => {
                let room = self.room_of(client)?;
                self.check_rpc_rate(client)?;
                if rpc.method.is_empty() || rpc.method.len() > 64 {
                    return invalid("method names have 1 to 64 bytes");
                }
                if let RpcTarget::One(target) = rpc.target {
                    if !room.members.iter().any(|m| m.id == target) {
                        return invalid("no such player in your room");
                    }
                }
                Ok(RoomCommand::Rpc(rpc.clone()))
            }
            RoomAction::Custom(custom) => {
                self.room_of(client)?;
                self.check_rpc_rate(client)?;
                if custom.channel.len() > 32 {
                    return invalid("custom channel names have at most 32 bytes");
                }
                Ok(RoomCommand::Custom(custom.clone()))
            }
            RoomAction::Spawn(spawn) => {
                let room = self.room_of(client)?;
                let limits = &self.limits;
                if spawn.kind.len() > 32 || spawn.state.len() > limits.max_entity_state {
                    return invalid(format!(
                        "entity kinds have at most 32 bytes, states {} bytes",
                        limits.max_entity_state
                    ));
                }
                if room.entities.len() >= limits.max_entities {
                    return invalid("the room has the most entities it holds");
                }
                let owned = room.entities.values().filter(|e| e.owner == client).count();
                if owned >= limits.max_entities_per_player {
                    return invalid(format!("you own {owned} entities, the most a player may"));
                }
                self.check_room_state(room, 0, spawn.state.len())?;
                Ok(RoomCommand::Spawn(spawn.clone()))
            }
            RoomAction::Despawn(id) => {
                self.entity_of(client, *id)?;
                Ok(RoomCommand::Despawn(*id))
            }
            RoomAction::Update(update) => {
                let (room, entity) = self.entity_of(client, update.id)?;
                if update.state.len() > self.limits.max_entity_state {
                    return invalid(format!(
                        "entity states have at most {} bytes",
                        self.limits.max_entity_state
                    ));
                }
                self.check_room_state(room, entity.state.len(), update.state.len())?;
                Ok(RoomCommand::Update(update.clone()))
            }
            RoomAction::Transfer(transfer) => {
                let (room, _) = self.entity_of(client, transfer.id)?;
                if !room.members.iter().any(|m| m.id == transfer.owner) {
                    return invalid("the new owner is not in the room");
                }
                Ok(RoomCommand::Transfer(transfer.clone()))
            }
            other => Err(Rejection {
                kind: switchboard::manager::RejectionKind::UnknownAction,
                reason: format!("{} is an event, not a request", other.action_name()),
            }),
        }
    }

    /// Whether `client` may send one more RPC or custom message this second.
    fn check_rpc_rate(&self, client: ClientId) -> Result<(), Rejection> {
        let sent = self.rpcs.get(&client).copied().unwrap_or(0);
        if sent >= self.limits.max_rpcs_per_second {
            return invalid(format!(
                "at most {} RPCs and custom messages a second",
                self.limits.max_rpcs_per_second
            ));
        }
        Ok(())
    }

    /// Whether `room` may hold a state of `new` bytes in place of `old`.
    fn check_room_state(&self, room: &Room, old: usize, new: usize) -> Result<(), Rejection> {
        if room.state_bytes - old + new > self.limits.max_room_state {
            return invalid(format!(
                "the room's entities hold at most {} bytes of state",
                self.limits.max_room_state
            ));
        }
        Ok(())
    }
}
