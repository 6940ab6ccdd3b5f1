//! Attacks on the AxisPy listener, each named after what it tried
//! (`docs/SECURITY.md`): ids that are not the attacker's, connections that
//! never join, silent handshakes, an entity state grown without end, and a
//! web page connecting from the player's own address.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use switchboard::{ClientConfig, ClientId, RunningServer, ServerManager};
use switchboard_axispy::{AxisPyConfig, AxisPyListener, RunningAxisPy};
use switchboard_rooms::{RoomClient, RoomsLogic};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::WebSocketStream;

const WAIT: Duration = Duration::from_secs(10);
const SERVER_ID: &str = "00000000-0000-4000-8000-000000000000";

type Socket = WebSocketStream<TcpStream>;

async fn start(config: AxisPyConfig) -> (RunningServer<RoomsLogic>, RunningAxisPy) {
    let manager = ServerManager::builder(RoomsLogic::new()).spawn().unwrap();
    let listener = AxisPyListener::builder(manager.clone())
        .config(config)
        .spawn()
        .unwrap();
    (manager, listener)
}

/// A TCP connection to `to` from loopback address 127.0.0.`from`.
async fn tcp_from(from: u8, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from(([127, 0, 0, from], 0)))?;
    socket.connect(to).await
}

/// An AxisPy client from 127.0.0.`from`, upgraded (or why not).
async fn axispy_from(from: u8, to: SocketAddr) -> Result<Socket, String> {
    let stream = tcp_from(from, to).await.map_err(|e| e.to_string())?;
    let url = format!("ws://{to}/Lobby");
    let upgraded = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(url, stream)).await;
    match upgraded {
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("handshake timed out".into()),
    }
}

async fn send(ws: &mut Socket, t: &str, d: Value) {
    let text = json!({ "t": t, "ts": 1.0, "d": d }).to_string();
    ws.send(Ws::Text(text.into())).await.unwrap();
}

/// The next message of type `t` (others skipped).
async fn expect(ws: &mut Socket, t: &str) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next())
            .await
            .unwrap_or_else(|_| panic!("no {t} in time"));
        match frame {
            Some(Ok(Ws::Text(text))) => {
                let message: Value = serde_json::from_str(text.as_str()).unwrap();
                if message["t"] == t {
                    return message;
                }
            }
            Some(Ok(_)) => {}
            other => panic!("connection ended before {t}: {other:?}"),
        }
    }
}

async fn join(ws: &mut Socket, id: &str) -> Value {
    send(
        ws,
        "join_request",
        json!({ "player_id": id, "player_name": "p" }),
    )
    .await;
    loop {
        let deadline = tokio::time::Instant::now() + WAIT;
        let frame = tokio::time::timeout_at(deadline, ws.next()).await.unwrap();
        let Some(Ok(Ws::Text(text))) = frame else {
            panic!("no answer to the join: {frame:?}");
        };
        let message: Value = serde_json::from_str(text.as_str()).unwrap();
        if message["t"] == "join_accepted" || message["t"] == "join_rejected" {
            return message;
        }
    }
}

/// Whether the listener closed `ws` within `within`.
async fn closed_within(ws: &mut Socket, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return false,
            Ok(None | Some(Err(_)) | Some(Ok(Ws::Close(_)))) => return true,
            Ok(Some(Ok(_))) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axispy_id_collision_with_the_server_id_or_a_native_players_id_is_refused() {
    let (manager, listener) = start(AxisPyConfig::default()).await;
    let mut ann = RoomClient::connect(manager.local_addr(), ClientConfig::named("ann"));
    let deadline = Instant::now() + WAIT;
    let ann_id: ClientId = loop {
        ann.poll();
        if let Some(id) = ann.client().client_id() {
            break id;
        }
        assert!(Instant::now() < deadline, "ann never welcomed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let at = listener.local_addr();

    let mut attacker = axispy_from(1, at).await.unwrap();
    let refused = join(&mut attacker, SERVER_ID).await;
    assert_eq!(refused["d"]["reason"], "reserved player id", "{refused}");
    let mut attacker = axispy_from(1, at).await.unwrap();
    let refused = join(&mut attacker, &ann_id.to_string()).await;
    assert_eq!(refused["d"]["reason"], "duplicate player id", "{refused}");

    // An honest AxisPy id is admitted, and held against everyone else.
    let honest = "cccccccc-cccc-4ccc-8ccc-cccccccccccc";
    let mut carol = axispy_from(1, at).await.unwrap();
    assert_eq!(join(&mut carol, honest).await["t"], "join_accepted");
    assert!(manager
        .player_ids()
        .contains(ClientId(honest.parse().unwrap())));
    let mut other = axispy_from(2, at).await.unwrap();
    let refused = join(&mut other, honest).await;
    assert_eq!(refused["d"]["reason"], "duplicate player id");
    ann.poll();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axispy_connections_that_never_join_are_capped_per_address_and_closed() {
    let config = AxisPyConfig {
        max_connections_per_address: 4,
        join_wait: Duration::from_millis(400),
        ..AxisPyConfig::default()
    };
    let (_manager, listener) = start(config).await;
    let at = listener.local_addr();
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..20 {
        match axispy_from(1, at).await {
            Ok(ws) => held.push(ws),
            Err(_) => refused += 1,
        }
    }
    assert_eq!((held.len(), refused), (4, 16), "the address's cap holds");

    // A bystander from another address gets in and joins.
    let mut bystander = axispy_from(2, at).await.unwrap();
    let joined = join(&mut bystander, "dddddddd-dddd-4ddd-8ddd-dddddddddddd").await;
    assert_eq!(joined["t"], "join_accepted", "{joined}");

    // WebSocket pings do not keep a connection that never joins: closed
    // after the join wait.
    let mut first = held.remove(0);
    let pinging = async {
        loop {
            if first.send(Ws::Ping(Vec::new().into())).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Ok(Some(Ok(Ws::Close(_))) | Some(Err(_)) | None) =
                tokio::time::timeout(Duration::from_millis(1), first.next()).await
            {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(3), pinging)
        .await
        .expect("closed despite its pings");
    for mut ws in held {
        assert!(closed_within(&mut ws, Duration::from_secs(3)).await);
    }
    drop(first);
    // Their places are free again once the listener has closed them (its
    // side of each close handshake waits up to 2 s for the client's).
    let deadline = Instant::now() + Duration::from_secs(5);
    while axispy_from(1, at).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the address's places never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axispy_silent_handshakes_from_one_address_do_not_hold_up_others() {
    let (_manager, listener) = start(AxisPyConfig::default()).await;
    let at = listener.local_addr();
    // 200 connections that never say a word of HTTP.
    let mut silent = Vec::new();
    for _ in 0..200 {
        if let Ok(stream) = tcp_from(1, at).await {
            silent.push(stream);
        }
    }
    let started = Instant::now();
    let mut bystander = axispy_from(2, at).await.expect("the bystander's handshake");
    let joined = join(&mut bystander, "eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee").await;
    assert_eq!(joined["t"], "join_accepted");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "joined in {:?}",
        started.elapsed()
    );
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axispy_state_merge_bomb_is_cut_at_the_entity_limit() {
    let config = AxisPyConfig {
        max_entity_state_bytes: 4096,
        ..AxisPyConfig::default()
    };
    let (_manager, listener) = start(config).await;
    let mut owner = axispy_from(1, listener.local_addr()).await.unwrap();
    let me = "ffffffff-ffff-4fff-8fff-ffffffffffff";
    assert_eq!(join(&mut owner, me).await["t"], "join_accepted");
    send(
        &mut owner,
        "rpc_call",
        json!({ "method": "_mp_spawn_request", "target": "host",
                "args": { "prefab": "tank", "owner": me, "data": {} } }),
    )
    .await;
    let spawned = expect(&mut owner, "spawn_entity").await;
    let net_id = spawned["d"]["net_id"].as_str().unwrap().to_string();
    // Each update adds 1 KiB of fresh vars: the merged state would grow
    // without end; the listener stops merging at 4 KiB and says why.
    let mut cut = None;
    for i in 0..10 {
        let vars = json!({ format!("v{i}"): "x".repeat(1024) });
        send(
            &mut owner,
            "state_update",
            json!({ "net_id": net_id, "state": { "vars": vars } }),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Ok(Some(Ok(Ws::Text(text)))) =
            tokio::time::timeout(Duration::from_millis(500), async {
                loop {
                    let frame = owner.next().await;
                    match &frame {
                        Some(Ok(Ws::Text(text))) if text.contains("\"error\"") => return frame,
                        Some(Ok(_)) => continue,
                        _ => return frame,
                    }
                }
            })
            .await
        {
            cut = Some((i, text.to_string()));
            break;
        }
    }
    let (at, why) = cut.expect("the merge was never cut");
    assert!(why.contains("over 4096 bytes"), "{why}");
    // The fourth or fifth KiB passes the limit (a slow machine may answer
    // one update late).
    assert!((3..=5).contains(&at), "cut at update {at}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axispy_port_refuses_a_web_pages_origin() {
    let (_manager, listener) = start(AxisPyConfig::default()).await;
    let at = listener.local_addr();
    let stream = tcp_from(1, at).await.unwrap();
    let mut request = format!("ws://{at}/Lobby").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Origin", "https://evil.example".parse().unwrap());
    let err = tokio_tungstenite::client_async(request, stream)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
    // AxisPy's own client sends no Origin and gets in.
    assert!(axispy_from(1, at).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axispy_upgrade_with_an_oversized_request_head_gets_431() {
    // The AxisPy port upgrades through the game's one WebSocket handshake,
    // with its limits: a head past `max_request_head` is answered 431.
    let config = AxisPyConfig {
        max_request_head: 1024,
        ..AxisPyConfig::default()
    };
    let (_manager, listener) = start(config).await;
    let at = listener.local_addr();
    let stream = tcp_from(1, at).await.unwrap();
    let mut request = format!("ws://{at}/Lobby").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("X-Padding", "x".repeat(2000).parse().unwrap());
    let err = tokio_tungstenite::client_async(request, stream)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("431"), "{err}");
    assert!(
        axispy_from(1, at).await.is_ok(),
        "a plain client still gets in"
    );
}
