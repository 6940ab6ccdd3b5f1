//! The relay's JSON-lines listener over loopback: JSON and native players
//! together, garbage, and the limits on JSON connections.

use crate::common;
use crate::support;

use std::time::Duration;

use common::{next_socket_event, WAIT};
use serde_json::json;
use support::{at, native_client, unlimited, until_in_zone, JsonClient};
use switchboard::{Message, SocketEvent};
use switchboard_relay::{
    self as relay, RelayAction, RelayChannel, RelayConfig, Relayed, Transform,
};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A relay with `config` and a JSON listener on a free port.
fn with_json(config: RelayConfig) -> relay::RunningRelay {
    let config = RelayConfig {
        json_port: Some(0),
        ..config
    };
    relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_native_clients_see_each_other_within_a_zone_only() {
    let relay = with_json(RelayConfig::default());
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
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_lines_get_error_lines_and_repeated_garbage_disconnects() {
    let config = RelayConfig {
        json_port: Some(0),
        max_json_errors: 3,
        max_json_line: 256,
        ..RelayConfig::default()
    };
    let relay = relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap();
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
async fn json_connection_exhaustion_is_capped_per_address_and_idle_ones_are_dropped() {
    let config = RelayConfig {
        json_port: Some(0),
        max_json_connections_per_address: 3,
        json_idle_timeout: Duration::from_millis(300),
        ..RelayConfig::default()
    };
    let relay = relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap();
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
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_client_that_never_reads_is_dropped_by_its_queued_bytes_and_leaves_its_zone() {
    // Transforms of about 32 KiB (32 extra fields of 1,000 letters) to a
    // JSON client that never reads: its queue passes 256 KiB long before
    // its 1,024 lines, so the byte bound is what drops it.
    let mut config = RelayConfig {
        json_port: Some(0),
        limits: unlimited(),
        ..RelayConfig::default()
    };
    // The letters compress well: lift the sender's inflation budget.
    config.server.socket.max_inflated_per_second = usize::MAX;
    assert_eq!(config.json_queue_bytes, 256 * 1024);
    let relay = relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap();
    let (mut stuck, stuck_id) = JsonClient::connect(relay.json_addr().unwrap()).await;
    stuck
        .send(r#"{"type":"transform","x":0,"y":0,"z":0,"zone":"hall"}"#)
        .await;
    let (sender, _) = native_client(relay.native_addr(), "sender").await;
    let (mut watcher, _) = native_client(relay.native_addr(), "watcher").await;
    watcher.send(&at("hall", 0.0)).unwrap();
    until_in_zone(&relay, "hall", 2).await;
    // The watcher reads all along, until the zone is told the stuck one left.
    let told = tokio::spawn(async move {
        loop {
            if let SocketEvent::Received(m) = next_socket_event(&mut watcher).await {
                if m.action::<RelayAction>() == Some(RelayAction::Left) {
                    return u64::from(m.content::<u32>().unwrap());
                }
            }
        }
    });
    let mut transform = Transform {
        zone: "hall".into(),
        ..Transform::default()
    };
    for field in 0..32 {
        let letter = char::from(b'a' + field as u8 % 26);
        transform.extra.insert(
            format!("f{field}"),
            format!("\"{}\"", letter.to_string().repeat(1000)),
        );
    }
    // 800 of them, about 26 MB: more than the loopback's socket buffers
    // and the queue hold, fewer than the queue's 1,024 lines.
    let mut sent = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while relay
        .clients()
        .await
        .iter()
        .any(|c| c.id as u64 == stuck_id)
    {
        assert!(
            sent < 800 && tokio::time::Instant::now() < deadline,
            "a JSON client that never reads is still in the relay after {sent} transforms"
        );
        for _ in 0..20 {
            transform.position[0] = sent as f32;
            sender
                .send(&Message::new(RelayChannel, RelayAction::Transform, &transform).unwrap())
                .unwrap();
            sent += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The zone was told it left.
    assert_eq!(told.await.unwrap(), stuck_id);
    // And its connection is closed: what was queued, then the end.
    let end = tokio::time::timeout(WAIT, async {
        while let Ok(Some(_)) = stuck.lines.next_line().await {}
    })
    .await;
    assert!(end.is_ok(), "the connection ends");
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interest_by_distance_filters_native_and_json_players_alike() {
    let relay = with_json(RelayConfig {
        interest: Some(relay::interest::InterestConfig::default()),
        ..RelayConfig::default()
    });
    let json_addr = relay.json_addr().unwrap();
    let (mut native, native_id) = native_client(relay.native_addr(), "nat").await;
    let (mut near, _) = JsonClient::connect(json_addr).await;
    let (mut far, far_id) = JsonClient::connect(json_addr).await;
    let line = |x: f32| format!(r#"{{"type":"transform","x":{x},"y":0,"z":0,"zone":"w"}}"#);
    near.send(&line(10.0)).await;
    far.send(&line(500.0)).await;
    until_in_zone(&relay, "w", 2).await;
    native.send(&at("w", 0.0)).unwrap();

    // The near JSON player hears the native one; the far one, in the same
    // zone, does not.
    let seen = near.next().await.unwrap();
    assert_eq!(seen["playerId"].as_u64().unwrap(), u64::from(native_id));
    let nothing = tokio::time::timeout(Duration::from_millis(300), far.next()).await;
    assert!(nothing.is_err(), "the far player heard {nothing:?}");

    // The far one walks up: it is shown the two others where they stand,
    // and the native player hears it.
    far.send(&line(20.0)).await;
    let mut shown = Vec::new();
    for _ in 0..2 {
        let line = far.next().await.unwrap();
        assert_eq!(line["type"], "transform");
        shown.push(line["playerId"].as_u64().unwrap());
    }
    assert!(shown.contains(&u64::from(native_id)), "{shown:?}");
    let heard = loop {
        if let SocketEvent::Received(m) = next_socket_event(&mut native).await {
            if let Ok(r) = m.content::<Relayed>() {
                if u64::from(r.player_id) == far_id {
                    break r;
                }
            }
        }
    };
    assert_eq!(heard.transform.position[0], 20.0);

    // And walks away again: both sides are told it left their view.
    far.send(&line(400.0)).await;
    let mut gone = Vec::new();
    while gone.len() < 2 {
        let line = far.next().await.unwrap();
        if line["type"] == "disconnect" {
            gone.push(line["playerId"].as_u64().unwrap());
        }
    }
    assert!(gone.contains(&u64::from(native_id)), "{gone:?}");
    loop {
        if let SocketEvent::Received(m) = next_socket_event(&mut native).await {
            if m.action::<RelayAction>() == Some(RelayAction::Left) {
                assert_eq!(u64::from(m.content::<u32>().unwrap()), far_id);
                break;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_compact_native_clients_see_each_other() {
    use relay::compact::{CompactDecoder, CompactRecord};
    let relay = with_json(RelayConfig::default());
    let (mut native, native_id) = native_client(relay.native_addr(), "nat").await;
    let options = relay::RelayOptions {
        batch: false,
        compact: true,
        datagrams: false,
        webtransport_redirects: false,
        compact_datagrams: false,
    };
    native
        .send_value(RelayChannel, RelayAction::Options, &options)
        .unwrap();
    let (mut json, json_id) = JsonClient::connect(relay.json_addr().unwrap()).await;
    json.send(r#"{"type":"transform","x":1.25,"y":2,"z":3,"zone":"town","emote":"wave"}"#)
        .await;
    until_in_zone(&relay, "town", 1).await;
    native.send(&at("town", 7.0)).unwrap();
    // The JSON player sees the compact one as any other...
    let seen = json.next().await.unwrap();
    assert_eq!(seen["playerId"].as_u64(), Some(u64::from(native_id)));
    assert_eq!(seen["x"], 7.0);
    // ...and the compact one gets the JSON one's transform, unknown
    // fields intact, positions to the centimetre.
    let mut decoder = CompactDecoder::new();
    let mut heard = None;
    while heard.is_none() {
        let SocketEvent::Received(m) = next_socket_event(&mut native).await else {
            continue;
        };
        if m.action::<RelayAction>() != Some(RelayAction::Compact) {
            continue;
        }
        decoder
            .read(m.content_bytes(), |record| {
                if let CompactRecord::Transform {
                    player_id,
                    transform,
                    ..
                } = record
                {
                    heard = Some((player_id, transform.clone()));
                }
            })
            .unwrap();
    }
    let (player_id, transform) = heard.unwrap();
    assert_eq!(u64::from(player_id), json_id);
    assert_eq!(transform.position, [1.25, 2.0, 3.0]);
    assert_eq!(transform.zone, "town");
    assert_eq!(transform.extra["emote"], "\"wave\"");
}
