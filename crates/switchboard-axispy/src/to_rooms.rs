//! What a joined AxisPy client says, as rooms requests. Nothing it writes
//! names a sender: `from` and any player id in `d` are ignored, the server
//! stamps the session's player.

use serde_json::{json, Map, Value};
use switchboard::socket::CloseCode;

use super::bridge::{Bridge, End, Pending, LEFT};
use super::wire::{self, Incoming, SERVER_ID};
use switchboard_rooms::protocol::{
    CustomRequest, EntityId, EntityUpdate, RoomAction, RpcRequest, RpcTarget, SpawnRequest,
};

/// The spawn request an AxisPy client sends as a host RPC.
const SPAWN_RPC: &str = "_mp_spawn_request";

fn net_id(d: &Map<String, Value>) -> Option<EntityId> {
    d.get("net_id")?.as_str()?.parse().ok().map(EntityId)
}

/// AxisPy's truthiness for the ready flag (the original relayed whatever
/// came; the echo carries a boolean).
fn truthy(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        _ => false,
    }
}

impl Bridge {
    pub(super) async fn on_joined(&mut self, message: Incoming) -> Result<(), End> {
        let d = message.d;
        match message.t.as_str() {
            "player_ready" => {
                let ready = truthy(d.get("ready"));
                let _ = self.request(RoomAction::Ready(ready)).await;
            }
            "state_update" => return self.update(&d).await,
            "despawn_entity" => {
                if let Some(id) = net_id(&d) {
                    self.despawning.insert(id);
                    if let Ok(request) = self.request(RoomAction::Despawn(id)).await {
                        self.pending.insert(request, Pending::Despawn(id));
                    }
                }
            }
            "rpc_call" => self.rpc(&d).await,
            "custom" => {
                let channel = d.get("channel").and_then(Value::as_str).unwrap_or("");
                let payload = d.get("payload").cloned().unwrap_or(Value::Null);
                let custom = CustomRequest {
                    channel: channel.to_string(),
                    data: wire::to_native(&payload),
                };
                let _ = self.request(RoomAction::Custom(custom)).await;
            }
            // Only to the one who asked (the original broadcast it).
            "ping" => {
                let ts = d.get("ts").cloned().unwrap_or(json!(0));
                let from = self.me.as_ref().map(|_| SERVER_ID);
                self.send("pong", from, json!({ "ts": ts })).await;
            }
            "disconnect" => {
                // A leave at once (the client abandons its socket next).
                let _ = self.request(RoomAction::Leave).await;
                if let Some(session) = self.session.take() {
                    session.handle().close(CloseCode::NORMAL, "left");
                }
                if let Some(me) = self.me.take() {
                    self.shared
                        .directory
                        .lock()
                        .expect("directory lock")
                        .forget(&me.id);
                }
                self.close(LEFT, "left").await;
                return Err(End::Closed("left"));
            }
            // pong (heard already), spawn_entity from a client, state_sync,
            // ownership_transfer and anything unknown: nothing to do.
            _ => {}
        }
        Ok(())
    }

    /// `state_update` of an entity this player owns: merged into its full
    /// state (owners send only what changed), then an update the room
    /// syncs to the others. An update that would grow the merged state
    /// past `max_entity_state_bytes` is not merged: a strike.
    async fn update(&mut self, d: &Map<String, Value>) -> Result<(), End> {
        let (Some(id), Some(Value::Object(partial))) = (net_id(d), d.get("state")) else {
            return Ok(());
        };
        // Not ours (never was, or handed over): dropped, as the room would.
        let Some(entity) = self.mine.get(&id) else {
            return Ok(());
        };
        let mut merged = entity.clone();
        merge_state(&mut merged, partial);
        let state = wire::to_native(&merged);
        let max = self.shared.config.max_entity_state_bytes;
        if state.len() > max {
            return self
                .strike(&format!("entity {} state over {max} bytes", id.0))
                .await;
        }
        self.mine.insert(id, merged);
        let _ = self
            .request(RoomAction::Update(EntityUpdate { id, state }))
            .await;
        Ok(())
    }

    /// `rpc_call`: a spawn request, or an RPC to all (but the sender, who
    /// ran it), the host, or one player.
    async fn rpc(&mut self, d: &Map<String, Value>) {
        let method = d.get("method").and_then(Value::as_str).unwrap_or("");
        let args = d.get("args").cloned().unwrap_or_else(|| json!({}));
        let target = d.get("target").and_then(Value::as_str).unwrap_or("all");
        let Some(me) = self.me.as_ref() else { return };
        if method == SPAWN_RPC && target == "host" {
            // The owner must be the requester (the default policy).
            let owner = args.get("owner").and_then(Value::as_str).unwrap_or(&me.id);
            if owner != me.id {
                tracing::debug!(owner, "AxisPy spawn for another owner dropped");
                return;
            }
            let prefab = args.get("prefab").and_then(Value::as_str).unwrap_or("");
            let data = args.get("data").cloned().unwrap_or_else(|| json!({}));
            let spawn = SpawnRequest {
                kind: prefab.to_string(),
                state: wire::to_native(&json!({ "data": data, "state": {} })),
            };
            let _ = self.request(RoomAction::Spawn(spawn)).await;
            return;
        }
        let me_client = me.client;
        let target = match target {
            "all" => RpcTarget::Others,
            "host" => {
                let i_host = self
                    .view
                    .room()
                    .is_some_and(|room| room.players.iter().any(|p| p.id == me_client && p.host));
                if i_host {
                    // The host ran it already: consumed.
                    return;
                }
                RpcTarget::Host
            }
            id => {
                let named = self
                    .names
                    .iter()
                    .find(|(_, name)| *name == id)
                    .map(|(client, _)| *client);
                let client = named.or_else(|| {
                    self.shared
                        .directory
                        .lock()
                        .expect("directory lock")
                        .client_of(id)
                });
                match client {
                    Some(client) if client != me_client => RpcTarget::One(client),
                    _ => {
                        tracing::debug!(target = id, "AxisPy RPC to an unknown player dropped");
                        return;
                    }
                }
            }
        };
        let rpc = RpcRequest {
            method: method.to_string(),
            target,
            args: wire::to_native(&args),
        };
        let _ = self.request(RoomAction::Rpc(rpc)).await;
    }
}

/// Merges an owner's partial `state` into the entity's full one: keys
/// replaced, `vars` united.
fn merge_state(entity: &mut Value, partial: &Map<String, Value>) {
    if !entity.get("state").is_some_and(Value::is_object) {
        entity["state"] = json!({});
    }
    let Some(state) = entity["state"].as_object_mut() else {
        return;
    };
    for (key, value) in partial {
        match (key.as_str(), value, state.get_mut("vars")) {
            ("vars", Value::Object(vars), Some(Value::Object(known))) => {
                known.extend(vars.clone());
            }
            _ => {
                state.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_is_coerced_to_a_boolean() {
        assert!(truthy(Some(&json!(true))));
        assert!(truthy(Some(&json!(1))));
        assert!(!truthy(Some(&json!(0))));
        assert!(!truthy(Some(&json!(null))));
        assert!(!truthy(None));
    }

    use crate::to_axispy::entity_json;

    #[test]
    fn entity_json_keeps_data_and_state_and_wraps_native_json() {
        let ours = wire::to_native(&json!({"data": {"hp": 1}, "state": {"x": 2}}));
        assert_eq!(entity_json(&ours)["state"]["x"], 2);
        let native = wire::to_native(&json!({"hp": 3}));
        assert_eq!(
            entity_json(&native),
            json!({"data": {"hp": 3}, "state": {}})
        );
    }
}
