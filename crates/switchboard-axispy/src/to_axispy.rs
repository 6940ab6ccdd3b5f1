//! What the rooms server says, as an AxisPy client hears it.

use serde_json::{json, Value};
use switchboard::manager::protocol as session;
use switchboard::message::SESSION_CHANNEL;
use switchboard::socket::{CloseCode, DisconnectReason, SocketEvent};
use switchboard::ClientId;

use super::bridge::{Bridge, End, Pending};
use super::wire::{self, SERVER_ID};
use switchboard_rooms::protocol::{Entity, RoomAction, RoomState};
use switchboard_rooms::RoomEvent;

/// An entity's JSON as the listener stores it: `{"data": ..., "state":
/// ...}` (spawn data, and the synced state: `x`, `y`, `r`, `vars`).
pub(super) fn entity_json(bytes: &[u8]) -> Value {
    match wire::from_native(bytes) {
        Value::Object(object) if object.contains_key("data") || object.contains_key("state") => {
            Value::Object(object)
        }
        // A native entity: its JSON is its data.
        other => json!({ "data": other, "state": {} }),
    }
}

impl Bridge {
    /// `join_accepted`, then what a joiner needs: the start it missed when
    /// it comes back, the entities (spawned only for a first join: a
    /// returning client still has them) and their states.
    pub(super) async fn accepted(&mut self, id: &str, state: RoomState, resumed: bool) {
        self.remember_players(&state);
        let room = self.room_dict(&state);
        self.send(
            "join_accepted",
            None,
            json!({ "player_id": id, "room": room }),
        )
        .await;
        if resumed && state.started {
            self.send("game_start", Some(SERVER_ID), json!({})).await;
        }
        for entity in &state.entities {
            if Some(entity.owner) == self.me_client() {
                self.mine.insert(entity.id, entity_json(&entity.state));
            }
            if !resumed {
                self.send_spawn(entity).await;
            }
            self.send_state(entity.id, entity.owner, &entity.state)
                .await;
        }
        self.maybe_start().await;
    }

    fn me_client(&self) -> Option<ClientId> {
        self.me.as_ref().map(|me| me.client)
    }

    /// How AxisPy clients name `client`.
    pub(super) fn name_of(&self, client: ClientId) -> String {
        if let Some(name) = self.names.get(&client) {
            return name.clone();
        }
        self.shared
            .directory
            .lock()
            .expect("directory lock")
            .name_of(client)
    }

    /// The names of the room's players, and no others (players who left
    /// are forgotten).
    fn remember_players(&mut self, state: &RoomState) {
        self.names
            .retain(|client, _| state.players.iter().any(|p| p.id == *client));
        for player in &state.players {
            let name = self.name_of(player.id);
            self.names.insert(player.id, name);
        }
    }

    fn room_dict(&self, state: &RoomState) -> Value {
        let mut directory = self.shared.directory.lock().expect("directory lock");
        let players: Vec<_> = state
            .players
            .iter()
            .map(|p| {
                let name = self
                    .names
                    .get(&p.id)
                    .cloned()
                    .unwrap_or_else(|| directory.name_of(p.id));
                (name, directory.number(p.id), p.clone())
            })
            .collect();
        wire::room(state, players)
    }

    async fn send_spawn(&mut self, entity: &Entity) {
        let json = entity_json(&entity.state);
        let data = match json.get("data") {
            Some(Value::Object(data)) => Value::Object(data.clone()),
            _ => json!({}),
        };
        let d = json!({
            "net_id": entity.id.0.to_string(),
            "prefab": entity.kind,
            "owner": self.name_of(entity.owner),
            "data": data,
        });
        self.send("spawn_entity", Some(SERVER_ID), d).await;
    }

    /// A `state_update` for an entity the client does not own, when it has
    /// a state.
    async fn send_state(
        &mut self,
        id: switchboard_rooms::protocol::EntityId,
        owner: ClientId,
        bytes: &[u8],
    ) {
        if Some(owner) == self.me_client() {
            return;
        }
        let state = entity_json(bytes).get("state").cloned().unwrap_or_default();
        if state.as_object().is_none_or(|s| s.is_empty()) {
            return;
        }
        let d = json!({ "net_id": id.0.to_string(), "state": state });
        let from = self.name_of(owner);
        self.send("state_update", Some(&from), d).await;
    }

    /// One event of the session.
    pub(super) async fn on_session(&mut self, event: Option<SocketEvent>) -> Result<(), End> {
        let message = match event {
            Some(SocketEvent::Received(message)) => message,
            Some(SocketEvent::Disconnected(reason)) => {
                self.session = None;
                if let DisconnectReason::ClosedByPeer { code, reason } = &reason {
                    if *code == CloseCode::KICKED {
                        return self.kicked(reason).await;
                    }
                }
                self.close(super::bridge::GONE, &reason.to_string()).await;
                return Err(End::Closed("server connection ended"));
            }
            Some(_) => return Ok(()),
            None => {
                self.session = None;
                self.close(super::bridge::GONE, "server connection ended")
                    .await;
                return Err(End::Closed("server connection ended"));
            }
        };
        if message.channel_id() == SESSION_CHANNEL {
            return self.on_answer(&message).await;
        }
        let Some(event) = RoomEvent::decode(&message) else {
            return Ok(());
        };
        self.translate(&event).await
    }

    /// An answer to a request: a refused despawn is repaired (the client
    /// already removed the entity).
    async fn on_answer(&mut self, message: &switchboard::Message) -> Result<(), End> {
        match message.action_id() {
            session::ACCEPTED => {
                if let Ok(id) = message.content::<u64>() {
                    self.pending.remove(&id);
                }
            }
            session::REJECTED => {
                let Ok(rejected) = message.content::<session::Rejected>() else {
                    return Ok(());
                };
                if let Some(Pending::Despawn(id)) = self.pending.remove(&rejected.id) {
                    self.despawning.remove(&id);
                    let entity = self
                        .view
                        .room()
                        .and_then(|room| room.entities.iter().find(|e| e.id == id).cloned());
                    if let Some(entity) = entity {
                        self.send_spawn(&entity).await;
                        self.send_state(entity.id, entity.owner, &entity.state)
                            .await;
                    }
                }
                tracing::debug!(reason = %rejected.reason, "AxisPy request rejected");
            }
            _ => {}
        }
        Ok(())
    }

    /// An event in AxisPy's terms, then into the view.
    async fn translate(&mut self, event: &RoomEvent) -> Result<(), End> {
        let me = self.me_client();
        match event {
            RoomEvent::State(state) => {
                self.remember_players(state);
                let room = self.room_dict(state);
                self.send("lobby_state", Some(SERVER_ID), json!({ "room": room }))
                    .await;
            }
            RoomEvent::PlayerJoined(player) => {
                let name = self.name_of(player.id);
                self.names.insert(player.id, name.clone());
                if Some(player.id) != me {
                    let number = self
                        .shared
                        .directory
                        .lock()
                        .expect("directory lock")
                        .number(player.id);
                    let dict = wire::player(&name, number, player);
                    self.send("player_joined", Some(SERVER_ID), json!({ "player": dict }))
                        .await;
                }
                self.start_asked = false;
            }
            RoomEvent::PlayerLeft(left) => {
                if Some(left.id) != me {
                    let reason = if left.reason.starts_with("kicked") {
                        "kicked"
                    } else {
                        "disconnected"
                    };
                    let d = json!({ "player_id": self.name_of(left.id), "reason": reason });
                    self.send("player_left", Some(SERVER_ID), d).await;
                }
                self.names.remove(&left.id);
            }
            RoomEvent::PlayerChanged(player) => {
                let before = self
                    .view
                    .room()
                    .and_then(|room| room.players.iter().find(|p| p.id == player.id))
                    .map(|p| p.ready);
                if before != Some(player.ready) {
                    let d = json!({ "player_id": self.name_of(player.id), "ready": player.ready });
                    self.send("player_ready", Some(SERVER_ID), d).await;
                }
                self.start_asked = false;
            }
            RoomEvent::HostChanged(_) => self.start_asked = false,
            RoomEvent::Started => self.send("game_start", Some(SERVER_ID), json!({})).await,
            RoomEvent::Kicked(reason) => return self.kicked(reason).await,
            RoomEvent::Custom(custom) => {
                let from = self.name_of(custom.from);
                let d = json!({ "channel": custom.channel, "payload": wire::from_native(&custom.data) });
                self.send("custom", Some(&from), d).await;
            }
            RoomEvent::Rpc(call) => {
                // Delivered to this player: the target is its own id, the
                // one target an AxisPy client always runs.
                let from = self.name_of(call.from);
                let target = self.me.as_ref().map(|m| m.id.clone()).unwrap_or_default();
                let d = json!({ "method": call.method, "args": wire::from_native(&call.args), "target": target });
                self.send("rpc_call", Some(&from), d).await;
            }
            RoomEvent::Spawned(entity) => {
                if Some(entity.owner) == me {
                    self.mine.insert(entity.id, entity_json(&entity.state));
                }
                self.send_spawn(entity).await;
            }
            RoomEvent::Despawned(id) => {
                self.mine.remove(id);
                if !self.despawning.remove(id) {
                    self.send(
                        "despawn_entity",
                        Some(SERVER_ID),
                        json!({ "net_id": id.0.to_string() }),
                    )
                    .await;
                }
            }
            RoomEvent::StateUpdate(sync) => {
                for update in &sync.updates {
                    let owner = self
                        .view
                        .room()
                        .and_then(|room| room.entities.iter().find(|e| e.id == update.id))
                        .map(|e| e.owner);
                    if let Some(owner) = owner {
                        self.send_state(update.id, owner, &update.state).await;
                    }
                }
            }
            RoomEvent::OwnerChanged(transfer) => {
                let d = json!({ "net_id": transfer.id.0.to_string(), "new_owner": self.name_of(transfer.owner) });
                self.send("ownership_transfer", Some(SERVER_ID), d).await;
                if Some(transfer.owner) == me {
                    let state = self
                        .view
                        .room()
                        .and_then(|room| room.entities.iter().find(|e| e.id == transfer.id))
                        .map(|e| entity_json(&e.state))
                        .unwrap_or_else(|| json!({ "data": {}, "state": {} }));
                    self.mine.insert(transfer.id, state);
                } else {
                    self.mine.remove(&transfer.id);
                }
            }
            // The room list, and any event a later rooms server adds, has
            // no word in AxisPy's protocol: the view still takes it.
            _ => {}
        }
        self.view.apply(event);
        if matches!(
            event,
            RoomEvent::State(_)
                | RoomEvent::PlayerJoined(_)
                | RoomEvent::PlayerChanged(_)
                | RoomEvent::HostChanged(_)
        ) {
            self.maybe_start().await;
        }
        Ok(())
    }

    /// Section 5.8: the kicked player hears its own `player_left`, then
    /// `disconnect`, then a 4xxx close; its id stays out of the room.
    async fn kicked(&mut self, _reason: &str) -> Result<(), End> {
        if let Some(me) = self.me.take() {
            self.send(
                "player_left",
                Some(SERVER_ID),
                json!({ "player_id": me.id, "reason": "kicked" }),
            )
            .await;
            self.shared
                .directory
                .lock()
                .expect("directory lock")
                .kick(&me.id, &me.room);
        }
        self.send("disconnect", None, json!({ "reason": "kicked" }))
            .await;
        if let Some(session) = self.session.take() {
            session.handle().close(CloseCode::NORMAL, "kicked");
        }
        self.close(super::bridge::KICKED, "kicked").await;
        Err(End::Closed("kicked"))
    }

    /// The start is the server's policy for AxisPy rooms (clients cannot ask
    /// for it): when this player hosts the room, and every member (at least
    /// `auto_start_min_players`) is ready, it asks for the start.
    pub(super) async fn maybe_start(&mut self) {
        let Some(me) = self.me_client() else { return };
        let Some(room) = self.view.room() else { return };
        let ready = !room.started
            && room.players.len() >= self.shared.config.auto_start_min_players
            && room.players.iter().all(|p| p.ready)
            && room.players.iter().any(|p| p.id == me && p.host);
        if ready && !self.start_asked {
            self.start_asked = true;
            let _ = self.request(RoomAction::Start).await;
        }
    }
}
