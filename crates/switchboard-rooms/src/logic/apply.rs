//! What an accepted rooms request does: [`RoomsLogic::carry_out`].

use super::*;

impl RoomsLogic {
    /// Carries out a validated request and tells exactly the members
    /// concerned.
    pub(super) fn carry_out(&mut self, client: ClientId, command: RoomCommand, out: &mut Outbox) {
        match command {
            RoomCommand::CreateReserved(create, reservation) => {
                if let Some(link) = &mut self.directory {
                    link.take(&reservation);
                }
                self.carry_out(client, RoomCommand::Create(create), out);
            }
            RoomCommand::JoinReserved(id, reservation) => {
                if let Some(link) = &mut self.directory {
                    link.take(&reservation);
                }
                self.carry_out(client, RoomCommand::Join(id), out);
            }
            RoomCommand::Create(create) => {
                self.next_room += 1;
                let id = match &self.directory {
                    Some(link) => link.room_id(self.next_room),
                    None => RoomId(self.next_room),
                };
                let room = Room {
                    id,
                    name: create.name.trim().to_string(),
                    max_players: create.max_players,
                    metadata: create.metadata,
                    private: create.private,
                    locked: false,
                    started: false,
                    host: client,
                    members: vec![Member {
                        id: client,
                        ready: false,
                        connected: true,
                        latency_ms: 0,
                    }],
                    entities: BTreeMap::new(),
                    dirty: Default::default(),
                    state_bytes: 0,
                    next_entity: 0,
                };
                self.send_state(out, client, &room);
                self.rooms.insert(id, room);
                self.room_of.insert(client, id);
            }
            RoomCommand::List => {
                let list: Vec<RoomSummary> = self
                    .rooms
                    .values()
                    .filter(|r| !r.private)
                    .map(Self::summary)
                    .collect();
                out.send(Audience::One(client), RoomAction::List(list));
            }
            RoomCommand::Join(id) => {
                let Some(room) = self.rooms.get_mut(&id) else {
                    return;
                };
                if !room.members.iter().any(|m| m.id == client) {
                    let others = Self::members(room);
                    room.members.push(Member {
                        id: client,
                        ready: false,
                        connected: true,
                        latency_ms: 0,
                    });
                    self.room_of.insert(client, id);
                    let room = room.clone();
                    let joined = self.player(&room, room.members.last().expect("just pushed"));
                    out.send(Audience::Only(others), RoomAction::PlayerJoined(joined));
                }
                // Late joiners (and returning members) get the whole room.
                if let Some(room) = self.rooms.get(&id) {
                    self.send_state(out, client, room);
                }
            }
            RoomCommand::Leave => self.remove(client, "left", out),
            RoomCommand::Ready(ready) => {
                let Some(room) = self.room_mut(client) else {
                    return;
                };
                if let Some(member) = room.members.iter_mut().find(|m| m.id == client) {
                    member.ready = ready;
                }
                let room = room.clone();
                if let Some(member) = room.members.iter().find(|m| m.id == client) {
                    let player = self.player(&room, member);
                    to_members(out, &room, RoomAction::PlayerChanged(player));
                }
            }
            RoomCommand::Start => {
                let Some(room) = self.room_mut(client) else {
                    return;
                };
                room.started = true;
                to_members(out, room, RoomAction::Started);
            }
            RoomCommand::Kick(kick) => {
                self.remove(kick.player, &format!("kicked: {}", kick.reason), out);
                out.send(Audience::One(kick.player), RoomAction::Kicked(kick.reason));
            }
            RoomCommand::Lock(locked) => {
                if let Some(room) = self.room_mut(client) {
                    room.locked = locked;
                }
            }
            RoomCommand::Rpc(rpc) => {
                *self.rpcs.entry(client).or_default() += 1;
                let Ok(room) = self.room_of(client) else {
                    return;
                };
                let audience = match rpc.target {
                    RpcTarget::All => Audience::Only(Self::members(room)),
                    RpcTarget::Others => Audience::Only(
                        Self::members(room)
                            .into_iter()
                            .filter(|m| *m != client)
                            .collect(),
                    ),
                    RpcTarget::One(target) => Audience::One(target),
                    RpcTarget::Host => Audience::One(room.host),
                };
                let call = RpcCall {
                    from: client,
                    method: rpc.method,
                    args: rpc.args,
                };
                out.send(audience, RoomAction::RpcCall(call));
            }
            RoomCommand::Custom(custom) => {
                *self.rpcs.entry(client).or_default() += 1;
                let Ok(room) = self.room_of(client) else {
                    return;
                };
                let others: Vec<ClientId> = Self::members(room)
                    .into_iter()
                    .filter(|m| *m != client)
                    .collect();
                let message = CustomMessage {
                    from: client,
                    channel: custom.channel,
                    data: custom.data,
                };
                out.send(Audience::Only(others), RoomAction::CustomMessage(message));
            }
            RoomCommand::Spawn(spawn) => {
                let Some(room) = self.room_mut(client) else {
                    return;
                };
                room.next_entity += 1;
                let entity = Entity {
                    id: EntityId(room.next_entity),
                    owner: client,
                    kind: spawn.kind,
                    state: spawn.state,
                };
                room.state_bytes += entity.state.len();
                room.entities.insert(entity.id, entity.clone());
                to_members(out, room, RoomAction::Spawned(entity));
            }
            RoomCommand::Despawn(id) => {
                let Some(room) = self.room_mut(client) else {
                    return;
                };
                if let Some(entity) = room.entities.remove(&id) {
                    room.state_bytes -= entity.state.len();
                }
                room.dirty.remove(&id);
                to_members(out, room, RoomAction::Despawned(id));
            }
            RoomCommand::Update(update) => {
                let Some(room) = self.room_mut(client) else {
                    return;
                };
                if let Some(entity) = room.entities.get_mut(&update.id) {
                    if entity.state != update.state {
                        room.state_bytes =
                            room.state_bytes - entity.state.len() + update.state.len();
                        entity.state = update.state;
                        room.dirty.insert(update.id);
                    }
                }
            }
            RoomCommand::Transfer(transfer) => {
                let Some(room) = self.room_mut(client) else {
                    return;
                };
                if let Some(entity) = room.entities.get_mut(&transfer.id) {
                    entity.owner = transfer.owner;
                }
                to_members(out, room, RoomAction::OwnerChanged(transfer));
            }
        }
    }
}
