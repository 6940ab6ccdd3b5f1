//! The relay over loopback: native clients in zones, the send path, abuse.

use crate::common;
use crate::support;

use std::time::Duration;

use common::{next_socket_event, WAIT};
use support::{at, native_client, unlimited, until_in_zone, JsonClient};
use switchboard::socket::PacerConfig;
use switchboard::{Message, SocketConfig, SocketEvent, SocketStream};
use switchboard_relay::{
    self as relay, RelayAction, RelayChannel, RelayConfig, Relayed, Transform,
};
use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_arrive_complete_and_in_order_with_and_without_the_send_tick() {
    // 0: each delivery written at once; 5 ms: the default tick; 100 ms: a
    // tick long enough that a whole burst waits in the queue for one write.
    for tick in [0, 5, 100] {
        let config = RelayConfig {
            pacing: PacerConfig {
                max_wait: Duration::from_millis(tick),
                ..PacerConfig::default()
            },
            limits: unlimited(),
            ..RelayConfig::default()
        };
        let relay = relay::RelayServer::builder()
            .config(config)
            .spawn()
            .unwrap();
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
        // The relay timed how long each round's oldest message waited for
        // it: at least one round, and no more rounds than events (two
        // connections with their hellos, 201 transforms).
        let waits = relay.stats().await.queue_wait;
        let rounds = waits.count();
        assert!((1..=205).contains(&rounds), "{rounds} rounds, tick {tick}");
        relay.shutdown().await.unwrap();
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
    let relay = relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap();
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
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_run_in_place_stops_when_its_shutdown_future_completes() {
    let (server, handle) = relay::RelayServer::builder().build().unwrap();
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
    let relay = relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap();
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
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_hello_with_a_huge_name_is_cut_and_logged_short() {
    let relay = relay::RelayServer::builder().spawn().unwrap();
    let (client, id) = native_client(relay.native_addr(), "first").await;
    // 200 KB of name, a few hundred bytes on the wire once compressed.
    let hello = relay::RelayHello {
        name: "\u{7}ab\n".repeat(50_000),
        bot: false,
    };
    client
        .send(&Message::new(RelayChannel, RelayAction::Hello, &hello).unwrap())
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    let name = loop {
        let clients = relay.clients().await;
        let name = clients.iter().find(|c| c.id == id).map(|c| c.name.clone());
        if let Some(name) = name.filter(|n| n != "first" && !n.is_empty()) {
            break name;
        }
        assert!(tokio::time::Instant::now() < deadline, "hello never taken");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(name.chars().count(), switchboard::session::MAX_NAME_CHARS);
    assert!(!name.chars().any(char::is_control), "{name:?}");
    let longest = relay.log().iter().map(|l| l.text.len()).max().unwrap();
    assert!(longest < 300, "a log line of {longest} bytes");
}

/// A zone directory that never answers: every fresh zone waits.
struct SilentDirectory;

impl relay::ZoneDirectory for SilentDirectory {
    fn owner<'a>(&'a self, _zone: &'a str) -> relay::ZoneFuture<'a, relay::ZoneOwner> {
        Box::pin(std::future::pending())
    }
    fn set_players(&self, _players: usize) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_fresh_zone_flood_waiting_on_the_directory_is_rate_limited() {
    let routing = relay::ZoneRouting::new(std::sync::Arc::new(SilentDirectory), 1, [7; 32]);
    let config = RelayConfig {
        zones: Some(routing),
        ..RelayConfig::default()
    };
    let relay = relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap();
    let (mut flooder, _) = native_client(relay.native_addr(), "flood").await;
    // Thousands of fresh zones a second, each waiting for the directory:
    // the rate limit cuts the sender as it would for one zone.
    let cut = async {
        for i in 0.. {
            if flooder.send(&at(&format!("zone-{i}"), 0.0)).is_err() {
                return;
            }
            if i % 100 == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                while let Ok(Some(event)) =
                    tokio::time::timeout(Duration::from_millis(1), flooder.next_event()).await
                {
                    if matches!(event, SocketEvent::Disconnected(_)) {
                        return;
                    }
                }
            }
        }
    };
    tokio::time::timeout(WAIT, cut)
        .await
        .expect("a flood of fresh zones was never cut");
    assert!(relay.stats().await.refused > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_client_changing_zone_is_told_it_left_those_it_held() {
    use relay::compact::{CompactDecoder, CompactRecord};
    let relay = relay::RelayServer::builder()
        .config(RelayConfig {
            limits: unlimited(),
            ..RelayConfig::default()
        })
        .spawn()
        .unwrap();
    let (mut others, mut other_ids) = (Vec::new(), Vec::new());
    for name in ["a", "b"] {
        let (client, id) = native_client(relay.native_addr(), name).await;
        others.push(client);
        other_ids.push(id);
    }
    let (mut me, _) = native_client(relay.native_addr(), "compact").await;
    let options = relay::RelayOptions {
        batch: false,
        compact: true,
        datagrams: false,
        webtransport_redirects: false,
        compact_datagrams: false,
    };
    me.send_value(RelayChannel, RelayAction::Options, &options)
        .unwrap();
    for other in &mut others {
        other.send(&at("hall", 1.0)).unwrap();
    }
    until_in_zone(&relay, "hall", 2).await;
    me.send(&at("hall", 2.0)).unwrap();
    let mut decoder = CompactDecoder::new();
    let mut held = std::collections::BTreeSet::new();
    let mut left = Vec::new();
    let mut moved = false;
    // Both come into view with their last transforms; once they have, the
    // player moves on to another zone and is told it left both.
    while left.len() < 2 {
        let SocketEvent::Received(m) = next_socket_event(&mut me).await else {
            continue;
        };
        assert_ne!(m.action::<RelayAction>(), Some(RelayAction::Relayed));
        if m.action::<RelayAction>() != Some(RelayAction::Compact) {
            continue;
        }
        decoder
            .read(m.content_bytes(), |record| match record {
                CompactRecord::Transform { player_id, .. } => {
                    held.insert(player_id);
                }
                CompactRecord::Left { player_id } => left.push(player_id),
                CompactRecord::Message { .. } => {}
            })
            .unwrap();
        if held.len() == 2 && !moved {
            me.send(&at("yard", 0.0)).unwrap();
            moved = true;
        }
    }
    left.sort_unstable();
    other_ids.sort_unstable();
    assert_eq!(left, other_ids);
    assert_eq!(decoder.senders(), 0);
}
