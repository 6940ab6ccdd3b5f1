//! A mixed room: a native `RoomClient` and an AxisPy client (its JSON
//! written here by hand, from `../shared/compat/axispy-protocol.md`) in one
//! room, through a real `ServerManager` and the AxisPy listener. Each sees
//! the other's entities, RPCs and custom messages; a game's payloads cross
//! as JSON text (a `String` on the native side).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use switchboard::{ClientConfig, ClientId, ServerManager};
use switchboard_axispy::{AxisPyConfig, AxisPyListener};
use switchboard_rooms::{CreateRoom, RoomClient, RoomsLogic, RpcTarget};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::WebSocketStream;

const WAIT: Duration = Duration::from_secs(10);
const BOB: &str = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb";

/// An AxisPy client: what it sends and what it has heard.
struct AxisPy {
    ws: WebSocketStream<TcpStream>,
    heard: Vec<Value>,
}

impl AxisPy {
    async fn connect(url: &str) -> AxisPy {
        let addr = url.trim_start_matches("ws://").split('/').next().unwrap();
        let stream = TcpStream::connect(addr).await.unwrap();
        let (ws, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
        AxisPy {
            ws,
            heard: Vec::new(),
        }
    }

    async fn send(&mut self, t: &str, d: Value) {
        let text = json!({ "t": t, "ts": 1.0, "from": BOB, "d": d }).to_string();
        self.ws.send(Ws::Text(text.into())).await.unwrap();
    }

    /// Reads until a message of type `t` that `check` accepts, while
    /// `native` is polled (its slots run on this thread).
    async fn expect(
        &mut self,
        t: &str,
        native: &mut RoomClient,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(i) = self.heard.iter().position(|m| m["t"] == t && check(m)) {
                return self.heard.remove(i);
            }
            assert!(Instant::now() < deadline, "no {t}: heard {:?}", self.heard);
            native.poll();
            if let Ok(Some(Ok(Ws::Text(text)))) =
                tokio::time::timeout(Duration::from_millis(5), self.ws.next()).await
            {
                self.heard
                    .push(serde_json::from_str(text.as_str()).unwrap());
            }
        }
    }

    /// Polls `native` (and reads) until `done` holds.
    async fn until(
        &mut self,
        native: &mut RoomClient,
        mut done: impl FnMut(&mut RoomClient) -> bool,
    ) {
        let deadline = Instant::now() + WAIT;
        while !done(native) {
            assert!(Instant::now() < deadline, "condition not reached in time");
            native.poll();
            if let Ok(Some(Ok(Ws::Text(text)))) =
                tokio::time::timeout(Duration::from_millis(5), self.ws.next()).await
            {
                self.heard
                    .push(serde_json::from_str(text.as_str()).unwrap());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_and_an_axispy_player_share_entities_rpcs_and_custom_messages() {
    let manager = ServerManager::builder(RoomsLogic::new()).spawn().unwrap();
    let listener = AxisPyListener::builder(manager.clone())
        .config(AxisPyConfig::default())
        .spawn()
        .unwrap();

    // Ann (native) makes the room; Bob (AxisPy) joins it by its name.
    let mut ann = RoomClient::connect(manager.local_addr(), ClientConfig::named("ann"));
    let got: Rc<RefCell<Vec<(ClientId, String)>>> = Rc::default();
    let g = got.clone();
    ann.register_rpc("greet", move |from, text: String| {
        g.borrow_mut().push((from, text))
    });
    let customs = Rc::new(RefCell::new(Vec::new()));
    let c = customs.clone();
    ann.signals()
        .custom
        .connect(move |m| c.borrow_mut().push(m.clone()));
    let mut bob = AxisPy::connect(&format!("ws://{}/mixed", listener.local_addr())).await;
    bob.until(&mut ann, |a| a.client().is_welcomed()).await;
    let room = CreateRoom {
        name: "mixed".into(),
        max_players: 4,
        metadata: BTreeMap::new(),
        private: false,
    };
    ann.create(&room).unwrap();
    bob.until(&mut ann, |a| a.room().is_some()).await;
    let ann_id = ann.client().client_id().unwrap();
    bob.send(
        "join_request",
        json!({ "player_id": BOB, "player_name": "Bob" }),
    )
    .await;
    let accepted = bob.expect("join_accepted", &mut ann, |_| true).await;
    let players = &accepted["d"]["room"]["players"];
    assert_eq!(
        players[ann_id.to_string()]["name"],
        "ann",
        "natives appear under their id"
    );
    assert_eq!(players[BOB]["name"], "Bob");
    bob.until(&mut ann, |a| a.room().is_some_and(|r| r.players.len() == 2))
        .await;
    let bob_id = ann
        .room()
        .unwrap()
        .players
        .iter()
        .find(|p| p.name == "Bob")
        .unwrap()
        .id;

    // Bob's entity: Ann sees it, its data and its synced state as JSON text.
    bob.send(
        "rpc_call",
        json!({ "method": "_mp_spawn_request", "target": "host",
                "args": { "prefab": "prefabs/tank.json", "owner": BOB, "data": { "hp": 100 } } }),
    )
    .await;
    let spawned = bob.expect("spawn_entity", &mut ann, |_| true).await;
    let net_id = spawned["d"]["net_id"].as_str().unwrap().to_string();
    bob.until(&mut ann, |a| {
        a.room().is_some_and(|r| r.entities.len() == 1)
    })
    .await;
    let tank = ann.room().unwrap().entities[0].clone();
    assert_eq!(
        (tank.owner, tank.kind.as_str()),
        (bob_id, "prefabs/tank.json")
    );
    let json: Value = serde_json::from_str(&tank.value::<String>().unwrap()).unwrap();
    assert_eq!(json["data"], json!({ "hp": 100 }));
    bob.send(
        "state_update",
        json!({ "net_id": net_id, "state": { "x": 4.5, "y": 1.0 } }),
    )
    .await;
    bob.until(&mut ann, |a| {
        a.room().is_some_and(|r| {
            let json: Value =
                serde_json::from_str(&r.entities[0].value::<String>().unwrap()).unwrap();
            json["state"]["x"] == 4.5
        })
    })
    .await;

    // Ann's entity, its state a JSON string: Bob gets it with her as owner.
    ann.spawn("flag", &json!({ "team": "red" }).to_string())
        .unwrap();
    let flag = bob
        .expect("spawn_entity", &mut ann, |m| m["d"]["prefab"] == "flag")
        .await;
    assert_eq!(flag["d"]["owner"], ann_id.to_string());
    assert_eq!(flag["d"]["data"], json!({ "team": "red" }));

    // RPCs both ways, stamped; arguments as JSON text.
    ann.call(
        RpcTarget::One(bob_id),
        "boom",
        &json!({ "power": 3 }).to_string(),
    )
    .unwrap();
    let call = bob.expect("rpc_call", &mut ann, |_| true).await;
    assert_eq!(call["from"], ann_id.to_string());
    assert_eq!(call["d"]["args"], json!({ "power": 3 }));
    assert_eq!(call["d"]["target"], BOB);
    bob.send(
        "rpc_call",
        json!({ "method": "greet", "args": { "text": "hi" }, "target": ann_id.to_string() }),
    )
    .await;
    bob.until(&mut ann, |_| !got.borrow().is_empty()).await;
    let (from, text) = got.borrow()[0].clone();
    assert_eq!(from, bob_id, "stamped by the server, whatever `from` said");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({ "text": "hi" })
    );

    // Custom messages both ways.
    bob.send(
        "custom",
        json!({ "channel": "chat", "payload": { "text": "gg" } }),
    )
    .await;
    bob.until(&mut ann, |_| !customs.borrow().is_empty()).await;
    let custom = customs.borrow()[0].clone();
    assert_eq!((custom.from, custom.channel.as_str()), (bob_id, "chat"));
    let payload: String = switchboard::codec::decode_value(&custom.data).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&payload).unwrap(),
        json!({ "text": "gg" })
    );
    ann.send_custom("chat", &json!({ "text": "wp" }).to_string())
        .unwrap();
    let custom = bob.expect("custom", &mut ann, |_| true).await;
    assert_eq!(custom["from"], ann_id.to_string());
    assert_eq!(
        custom["d"],
        json!({ "channel": "chat", "payload": { "text": "wp" } })
    );
}
