//! The relay over loopback: a native client and JSON clients in zones.

#[path = "../../switchboard/tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{next_socket_event, WAIT};
use serde_json::{json, Value};
use switchboard::{BindScope, Message, SocketConfig, SocketEvent, SocketStream};
use switchboard_relay::{
    self as relay, Hello, RelayAction, RelayChannel, RelayConfig, RelayLimits, Relayed, Transform,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

struct JsonClient {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
}

impl JsonClient {
    async fn connect(addr: std::net::SocketAddr) -> (JsonClient, u64) {
        let (read, write) = TcpStream::connect(addr).await.unwrap().into_split();
        let mut client = JsonClient {
            lines: BufReader::new(read).lines(),
            write,
        };
        let welcome = client.next().await.expect("welcome");
        assert_eq!(welcome["type"], "welcome");
        let id = welcome["playerId"].as_u64().unwrap();
        (client, id)
    }

    async fn send(&mut self, line: &str) {
        self.write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    /// The next line, or None at EOF.
    async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("a line in time")
            .ok()??;
        Some(serde_json::from_str(&line).unwrap())
    }
}

/// No transform rate limit: for the tests of the send path, whose bursts
/// are far over a player's budget.
fn unlimited() -> RelayLimits {
    RelayLimits {
        transforms_per_second: 1e9,
        transform_burst: 1e9,
        ..RelayLimits::default()
    }
}

async fn native_client(addr: std::net::SocketAddr, name: &str) -> (SocketStream, u32) {
    let mut client = SocketStream::connect(addr, SocketConfig::default());
    assert!(matches!(
        next_socket_event(&mut client).await,
        SocketEvent::Connected
    ));
    let id = match next_socket_event(&mut client).await {
        SocketEvent::Received(m) => m.content::<u32>().unwrap(),
        other => panic!("{other:?}"),
    };
    let hello = Hello {
        name: name.into(),
        bot: false,
    };
    client
        .send(&Message::new(RelayChannel, RelayAction::Hello, &hello).unwrap())
        .unwrap();
    (client, id)
}

/// Waits until `count` players are in `zone`, or fails after [`WAIT`].
async fn until_in_zone(relay: &relay::RelayHandle, zone: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let clients = relay.clients().await;
        if clients
            .iter()
            .filter(|c| c.zone.as_deref() == Some(zone))
            .count()
            >= count
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} players in {zone}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn at(zone: &str, x: f32) -> Message {
    let transform = Transform {
        position: [x, 1.0, 2.0],
        zone: zone.into(),
        ..Transform::default()
    };
    Message::new(RelayChannel, RelayAction::Transform, &transform).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_native_clients_see_each_other_within_a_zone_only() {
    let config = RelayConfig {
        json_port: Some(0),
        ..RelayConfig::default()
    };
    let relay = relay::RelayServer::spawn(BindScope::Loopback, 0, config).unwrap();
    let json_addr = relay.json_addr().unwrap();
    let (mut native, native_id) = native_client(relay.native_addr(), "nat").await;
    let (mut town, town_id) = JsonClient::connect(json_addr).await;
    let (mut forest, _) = JsonClient::connect(json_addr).await;
    town.send(r#"{"type":"hello","name":"jay"}"#).await;
    forest
        .send(r#"{"type":"transform","x":0,"y":0,"z":0,"zone":"forest"}"#)
        .await;
    town.send(
        r#"{"type":"transform","x":1,"y":2,"z":3,"zone":"town","emote":"wave","gear":{"hat":3}}"#,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The native client enters town: the JSON client there sees it, stamped.
    native.send(&at("town", 7.0)).unwrap();
    let seen = town.next().await.unwrap();
    assert_eq!(seen["type"], "transform");
    assert_eq!(seen["playerId"].as_u64().unwrap(), u64::from(native_id));
    assert!(seen["serverTime"].as_u64().is_some());
    assert_eq!(seen["x"], 7.0);

    // The JSON client moves: the native one sees it, unknown fields intact.
    town.send(
        r#"{"type":"transform","x":4,"y":5,"z":6,"zone":"town","emote":"bow","gear":{"hat":4}}"#,
    )
    .await;
    // On entering town the native client was shown where jay stood (the
    // zone-entry snapshot); then it sees jay's move.
    let mut relayed_seen = Vec::new();
    let relayed = loop {
        if let SocketEvent::Received(m) = next_socket_event(&mut native).await {
            if m.action::<RelayAction>() == Some(RelayAction::Relayed) {
                let relayed = m.content::<Relayed>().unwrap();
                relayed_seen.push(relayed.transform.position);
                if relayed.transform.position == [4.0, 5.0, 6.0] {
                    break relayed;
                }
            }
        }
    };
    assert_eq!(
        relayed_seen[0],
        [1.0, 2.0, 3.0],
        "the snapshot on entering the zone"
    );
    assert_eq!(u64::from(relayed.player_id), town_id);
    assert_eq!(relayed.transform.position, [4.0, 5.0, 6.0]);
    assert_eq!(
        relayed.transform.extra.get("emote").map(String::as_str),
        Some("\"bow\"")
    );
    assert_eq!(
        relayed.transform.extra.get("gear").map(String::as_str),
        Some("{\"hat\":4}")
    );

    // The native client leaves: town is told; the forest never heard of it.
    let clients = relay.clients().await;
    assert_eq!(clients.len(), 3);
    assert!(clients
        .iter()
        .any(|c| c.name == "nat" && c.zone.as_deref() == Some("town")));
    native.close("bye");
    let gone = town.next().await.unwrap();
    assert_eq!(gone, json!({"type": "disconnect", "playerId": native_id}));
    forest
        .send(r#"{"type":"transform","x":1,"y":0,"z":0,"zone":"forest"}"#)
        .await;
    match tokio::time::timeout(Duration::from_millis(300), forest.lines.next_line()).await {
        Err(_) => {}
        Ok(line) => panic!("the forest heard something: {line:?}"),
    }
    let stats = relay.stats().await;
    assert_eq!(stats.players, 2);
    relay.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_lines_get_error_lines_and_repeated_garbage_disconnects() {
    let config = RelayConfig {
        json_port: Some(0),
        max_json_errors: 3,
        max_json_line: 256,
        ..RelayConfig::default()
    };
    let relay = relay::RelayServer::spawn(BindScope::Loopback, 0, config).unwrap();
    let (mut client, _) = JsonClient::connect(relay.json_addr().unwrap()).await;
    for (line, expect) in [
        ("this is not json", "invalid JSON"),
        ("[1,2,3]", "must be a JSON object"),
        (r#"{"type":"teleport"}"#, "unknown or missing"),
    ] {
        client.send(line).await;
        let reply = client.next().await.unwrap();
        assert_eq!(reply["type"], "error");
        assert!(
            reply["message"].as_str().unwrap().contains(expect),
            "{reply}"
        );
    }
    // A fourth is past the limit of three: told why, then cut off.
    client.send("{broken").await;
    let reply = client.next().await.unwrap();
    assert!(
        reply["message"].as_str().unwrap().contains("invalid JSON"),
        "{reply}"
    );
    let last = client.next().await.unwrap();
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("too many invalid lines"),
        "{last}"
    );
    assert!(client.next().await.is_none(), "disconnected");
    // An overlong line cannot be framed: an error line, then the end.
    let (mut long, _) = JsonClient::connect(relay.json_addr().unwrap()).await;
    long.send(&"x".repeat(1000)).await;
    let reply = long.next().await.unwrap();
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("longer than 256"),
        "{reply}"
    );
    assert!(long.next().await.is_none(), "disconnected");
    assert_eq!(relay.stats().await.malformed_lines, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_arrive_complete_and_in_order_with_and_without_the_send_tick() {
    // 0: each delivery written at once; 5 ms: the default tick; 100 ms: a
    // tick long enough that a whole burst waits in the queue for one write.
    for tick in [0, 5, 100] {
        let config = RelayConfig {
            send_interval: Duration::from_millis(tick),
            limits: unlimited(),
            ..RelayConfig::default()
        };
        let relay = relay::RelayServer::spawn(BindScope::Loopback, 0, config).unwrap();
        let (mut sender, sender_id) = native_client(relay.native_addr(), "a").await;
        let (mut receiver, _) = native_client(relay.native_addr(), "b").await;
        receiver.send(&at("arena", -1.0)).unwrap();
        // The receiver is in the arena before the sender's burst starts.
        until_in_zone(&relay, "arena", 1).await;
        for i in 0..200 {
            sender.send(&at("arena", i as f32)).unwrap();
        }
        let mut next = 0;
        while next < 200 {
            if let SocketEvent::Received(m) = next_socket_event(&mut receiver).await {
                if m.action::<RelayAction>() == Some(RelayAction::Relayed) {
                    let relayed = m.content::<Relayed>().unwrap();
                    assert_eq!(relayed.player_id, sender_id);
                    assert_eq!(relayed.transform.position[0], next as f32, "tick {tick}");
                    next += 1;
                }
            }
        }
        // The sender heard the receiver's entry and nothing of its own.
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(150), sender.next_event()).await
        {
            if let SocketEvent::Received(m) = event {
                if let Ok(relayed) = m.content::<Relayed>() {
                    assert_ne!(relayed.player_id, sender_id, "tick {tick}");
                }
            }
        }
        relay.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_dropped_and_its_zone_keeps_getting_everything() {
    // Deliveries are queued and flushed on the send tick: a client that
    // stops reading must still hit the outbound limit and be dropped as a
    // slow consumer, while the others in its zone miss nothing.
    let mut config = RelayConfig::default();
    config.server.socket.max_outbound_bytes = 128 * 1024;
    config.limits = unlimited();
    let relay = relay::RelayServer::spawn(BindScope::Loopback, 0, config).unwrap();
    let (sender, sender_id) = native_client(relay.native_addr(), "sender").await;
    let (mut fast, _) = native_client(relay.native_addr(), "fast").await;
    // The slow client's own event queue is one batch: once it is full its
    // reader stops reading, as a stuck game would.
    let small = SocketConfig {
        event_queue_len: 256,
        ..SocketConfig::default()
    };
    let mut slow = SocketStream::connect(relay.native_addr(), small);
    assert!(matches!(
        next_socket_event(&mut slow).await,
        SocketEvent::Connected
    ));
    let slow_id = match next_socket_event(&mut slow).await {
        SocketEvent::Received(m) => m.content::<u32>().unwrap(),
        other => panic!("{other:?}"),
    };
    for client in [&mut fast, &mut slow] {
        client.send(&at("hall", -1.0)).unwrap();
    }
    until_in_zone(&relay, "hall", 2).await;
    // 8,000 transforms of about 1 KiB (an extra field of random letters,
    // at the limit of 1 KiB) from the sender: about 8 MiB for each
    // listener, more than the slow one's socket buffers and queues hold.
    const N: u32 = 8000;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let noise: String = (0..1000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'a' + (seed % 26) as u8)
        })
        .collect();
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let taken = progress.clone();
    let send = tokio::spawn(async move {
        for i in 0..N {
            let mut transform = Transform {
                position: [i as f32, 0.0, 0.0],
                zone: "hall".into(),
                ..Transform::default()
            };
            transform
                .extra
                .insert("noise".into(), format!("\"{noise}\""));
            let message = Message::new(RelayChannel, RelayAction::Transform, &transform).unwrap();
            // Paced by what the fast client took (at most 32 KiB ahead of
            // it), so that only a client that does not read falls behind.
            while i > progress.load(std::sync::atomic::Ordering::Relaxed) + 32 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            sender.send(&message).unwrap();
        }
        sender
    });
    let mut next = 0;
    while next < N {
        if let SocketEvent::Received(m) = next_socket_event(&mut fast).await {
            if m.action::<RelayAction>() == Some(RelayAction::Relayed) {
                let relayed = m.content::<Relayed>().unwrap();
                if relayed.player_id == sender_id {
                    assert_eq!(relayed.transform.position[0], next as f32);
                    next += 1;
                    taken.store(next, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }
    let _sender = send.await.unwrap();
    // The slow client is gone from the relay, and the fast one was told.
    let deadline = tokio::time::Instant::now() + WAIT;
    while relay.clients().await.iter().any(|c| c.id == slow_id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the client that never reads is still connected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    loop {
        if let SocketEvent::Received(m) = next_socket_event(&mut fast).await {
            if m.action::<RelayAction>() == Some(RelayAction::Left) {
                assert_eq!(m.content::<u32>().unwrap(), slow_id);
                break;
            }
        }
    }
    relay.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_run_in_place_stops_when_its_shutdown_future_completes() {
    let (server, handle) =
        relay::RelayServer::bind(BindScope::Loopback, 0, RelayConfig::default()).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    let (mut client, _) = native_client(handle.native_addr(), "ann").await;
    assert!(handle.is_running());
    stop.send(()).unwrap();
    loop {
        if let SocketEvent::Disconnected(_) = next_socket_event(&mut client).await {
            break;
        }
    }
    tokio::time::timeout(WAIT, running).await.unwrap().unwrap();
    assert!(!handle.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transform_flood_from_a_native_client_is_disconnected_for_abuse() {
    let config = RelayConfig {
        json_port: Some(0),
        ..RelayConfig::default()
    };
    let relay = relay::RelayServer::spawn(BindScope::Loopback, 0, config).unwrap();
    let (mut flooder, _) = native_client(relay.native_addr(), "flood").await;
    let transform = Transform {
        zone: "town".into(),
        ..Transform::default()
    };
    let message = Message::new(RelayChannel, RelayAction::Transform, &transform).unwrap();
    for _ in 0..2_000 {
        if flooder.send(&message).is_err() {
            break;
        }
    }
    let reason = loop {
        if let SocketEvent::Disconnected(reason) = next_socket_event(&mut flooder).await {
            break reason;
        }
    };
    assert!(
        matches!(&reason, switchboard::DisconnectReason::ClosedByPeer { code, .. } if *code == switchboard::CloseCode::ABUSE),
        "{reason:?}"
    );
    // A JSON client that floods is dropped too, and leaves no ghost behind.
    let (mut json, _) = JsonClient::connect(relay.json_addr().unwrap()).await;
    let line = r#"{"type":"transform","x":1,"y":0,"z":0,"zone":"town"}"#;
    let mut burst = String::new();
    for _ in 0..2_000 {
        burst.push_str(line);
        burst.push('\n');
    }
    let _ = json.write.write_all(burst.as_bytes()).await;
    let mut last = None;
    while let Some(value) = json.next().await {
        last = Some(value);
    }
    let last = last.expect("told why");
    assert_eq!(last["type"], "error");
    assert!(
        last["message"].as_str().unwrap().contains("rate limit"),
        "{last}"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while relay.stats().await.players > 0 {
        assert!(tokio::time::Instant::now() < deadline, "ghost players left");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(relay.clients().await.len(), 0);
    relay.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_connection_exhaustion_is_capped_per_address_and_idle_ones_are_dropped() {
    let config = RelayConfig {
        json_port: Some(0),
        max_json_connections_per_ip: 3,
        json_idle_timeout: Duration::from_millis(300),
        ..RelayConfig::default()
    };
    let relay = relay::RelayServer::spawn(BindScope::Loopback, 0, config).unwrap();
    let json = relay.json_addr().unwrap();
    let from = |last: u8| async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, last], 0).into()).unwrap();
        socket.connect(json).await.unwrap()
    };
    // Three from one address are welcome; a fourth is closed at accept.
    let mut held = Vec::new();
    for _ in 0..3 {
        let stream = from(2).await;
        let mut lines = BufReader::new(stream).lines();
        let welcome = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .unwrap()
            .unwrap();
        assert!(welcome.unwrap().contains("welcome"));
        held.push(lines);
    }
    let mut fourth = BufReader::new(from(2).await).lines();
    let answer = tokio::time::timeout(WAIT, fourth.next_line())
        .await
        .unwrap();
    assert!(
        matches!(answer, Ok(None) | Err(_)),
        "closed without a welcome: {answer:?}"
    );
    // Another address is welcome.
    let mut other = BufReader::new(from(3).await).lines();
    let welcome = tokio::time::timeout(WAIT, other.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(welcome.unwrap().contains("welcome"));
    // Silent past the idle timeout: all of them are dropped, and leave.
    for lines in held.iter_mut().chain([&mut other]) {
        let end = tokio::time::timeout(WAIT, async {
            while let Ok(Some(_)) = lines.next_line().await {}
        })
        .await;
        assert!(end.is_ok(), "dropped when idle");
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while relay.stats().await.players > 0 {
        assert!(tokio::time::Instant::now() < deadline, "no ghost players");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Their slots are free again.
    let mut again = BufReader::new(from(2).await).lines();
    let welcome = tokio::time::timeout(WAIT, again.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(welcome.unwrap().contains("welcome"));
    relay.shutdown();
}
