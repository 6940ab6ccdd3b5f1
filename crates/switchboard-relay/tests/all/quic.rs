//! The relay over QUIC: a player who asked for datagrams and a TCP player
//! in one zone, in tick mode.

use crate::common::{next_socket_event, WAIT};
use crate::support::{at, native_client};

use std::time::{Duration, Instant};

use switchboard::socket::quic::QuicConfig;
use switchboard::socket::PacerConfig;
use switchboard::{Message, SocketConfig, SocketEvent, SocketStream};
use switchboard_relay::client_core::{RelayClientCore, RelayClientEvent};
use switchboard_relay::{
    RelayAction, RelayConfig, RelayMovesChannel, RelayOptions, RelayServer, Relayed, Transform,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_player_and_a_tcp_player_in_one_zone_see_each_other_with_transforms_as_datagrams() {
    let mut config = RelayConfig {
        // Tick mode at 20 Hz: each player's deliveries leave once a tick.
        pacing: PacerConfig {
            max_wait: Duration::from_millis(50),
            ..PacerConfig::default()
        },
        ..RelayConfig::default()
    };
    config.server.quic = Some(QuicConfig::on(0));
    let relay = RelayServer::builder().config(config).spawn().unwrap();
    let url = format!("quic://{}", relay.quic_addr().expect("a QUIC port"));
    let mut quic = SocketStream::dial(&url, SocketConfig::default());
    assert!(matches!(
        next_socket_event(&mut quic).await,
        SocketEvent::Connected
    ));
    let mut core = RelayClientCore::new("quic", false).with_options(RelayOptions {
        datagrams: true,
        ..RelayOptions::default()
    });
    assert!(core.datagrams());
    for message in core.opened() {
        quic.send(&message).unwrap();
    }
    let mut quic_id = None;
    while quic_id.is_none() {
        if let SocketEvent::Received(message) = next_socket_event(&mut quic).await {
            core.received(&message, |event| {
                if let RelayClientEvent::Welcome(id) = event {
                    quic_id = Some(id);
                }
            });
        }
    }
    let (mut tcp, tcp_id) = native_client(relay.native_addr(), "tcp").await;

    // What each heard of the other: positions, in the order delivered.
    let (mut quic_heard, mut tcp_heard) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + WAIT;
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    let mut x = 0.0f32;
    while quic_heard.len() < 20 || tcp_heard.len() < 20 {
        assert!(
            Instant::now() < deadline,
            "the QUIC player heard {} and the TCP player {}",
            quic_heard.len(),
            tcp_heard.len()
        );
        tokio::select! {
            _ = ticker.tick() => {
                x += 1.0;
                let mine = Transform {
                    position: [x, 0.0, 0.0],
                    zone: "arena".into(),
                    ..Transform::default()
                };
                quic.send_value(RelayMovesChannel, RelayAction::Transform, &mine).unwrap();
                tcp.send(&at("arena", x)).unwrap();
            }
            Some(SocketEvent::Received(message)) = quic.next_event() => {
                core.received(&message, |event| match event {
                    RelayClientEvent::Transform(heard) => {
                        let peek = heard.peek("").unwrap();
                        assert_eq!(peek.player_id, tcp_id, "only the other player");
                        quic_heard.push(peek.position[0]);
                    }
                    other => panic!("{other:?}"),
                });
            }
            Some(SocketEvent::Received(message)) = tcp.next_event() => {
                if message.action::<RelayAction>() == Some(RelayAction::Relayed) {
                    let relayed = message.content::<Relayed>().unwrap();
                    assert_eq!(Some(relayed.player_id), quic_id);
                    tcp_heard.push(relayed.transform.position[0]);
                }
            }
        }
    }
    // Newest wins: nothing older than what was delivered before it.
    for heard in [&quic_heard, &tcp_heard] {
        assert!(heard.windows(2).all(|w| w[0] < w[1]), "{heard:?}");
    }
    let stats = quic.handle().datagram_stats().expect("a QUIC connection");
    assert!(stats.sent >= 20, "its transforms as datagrams: {stats:?}");
    assert!(stats.delivered >= 1, "its view as datagrams: {stats:?}");
    assert_eq!(stats.refused, 0, "{stats:?}");
    // What else the relay says stays on the stream: a message the relay
    // cannot use gets its error there.
    answered(&mut quic).await;
}

/// A datagram can overtake the stream: a handed-over player's first move
/// could reach the relay before its ticket, and put it in a zone under its
/// connection's id, so that the ticket is refused. The moves read before
/// the hello (or ticket) wait for it, the newest four, and go on after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moves_datagram_that_overtakes_the_hello_waits_for_it() {
    let (relay, mut quic) = quic_relay_and_player().await;
    let step = |x: f32| Transform {
        position: [x, 0.0, 0.0],
        zone: "arena".into(),
        ..Transform::default()
    };
    // No hello yet: moves as datagrams, then a stream message the relay
    // answers, read after them.
    for x in 1..=5 {
        quic.send_value(RelayMovesChannel, RelayAction::Transform, &step(x as f32))
            .unwrap();
    }
    answered(&mut quic).await;
    let zones: Vec<Option<String>> = relay.clients().await.into_iter().map(|c| c.zone).collect();
    assert_eq!(zones, [None], "no zone before the hello");
    // The hello: the newest of the moves before it goes on.
    let mut core = RelayClientCore::new("late", false).with_options(RelayOptions {
        datagrams: true,
        ..RelayOptions::default()
    });
    for message in core.opened() {
        quic.send(&message).unwrap();
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let clients = relay.clients().await;
        if clients[0].zone.is_some() {
            assert_eq!(clients[0].zone.as_deref(), Some("arena"));
            assert_eq!(clients[0].last.as_ref().unwrap().position[0], 5.0);
            assert_eq!(clients[0].name, "late");
            break;
        }
        assert!(Instant::now() < deadline, "never in the zone: {clients:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The attack: a connection that never says hello floods the moves channel
/// so that the relay keeps every move for it, then says hello to have them
/// all relayed at once. At most `RelayConfig::early_moves` (4) are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_flooded_before_the_hello_are_kept_four_at_most() {
    let (relay, mut quic) = quic_relay_and_player().await;
    for x in 0..100 {
        let step = Transform {
            position: [x as f32, 0.0, 0.0],
            zone: "arena".into(),
            ..Transform::default()
        };
        quic.send_value(RelayMovesChannel, RelayAction::Transform, &step)
            .unwrap();
    }
    // A stream message the relay answers: the datagrams sent before it
    // were read (or lost) by then.
    answered(&mut quic).await;
    let mut core = RelayClientCore::new("flood", false);
    for message in core.opened() {
        quic.send(&message).unwrap();
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let clients = relay.clients().await;
        if clients[0].relayed > 0 {
            // Within the transform burst (120): only the cap stopped more.
            assert!(clients[0].relayed <= 4, "{clients:?}");
            assert_eq!(clients[0].zone.as_deref(), Some("arena"));
            break;
        }
        assert!(Instant::now() < deadline, "nothing relayed: {clients:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A relay with a QUIC port, and a connection to it, open (no hello yet).
async fn quic_relay_and_player() -> (switchboard_relay::RunningRelay, SocketStream) {
    let mut config = RelayConfig::default();
    config.server.quic = Some(QuicConfig::on(0));
    let relay = RelayServer::builder().config(config).spawn().unwrap();
    let url = format!("quic://{}", relay.quic_addr().expect("a QUIC port"));
    let mut quic = SocketStream::dial(&url, SocketConfig::default());
    assert!(matches!(
        next_socket_event(&mut quic).await,
        SocketEvent::Connected
    ));
    (relay, quic)
}

/// Sends a message the relay cannot use and waits for its `Error` on the
/// stream: what was sent before it was read (or lost) by then.
async fn answered(quic: &mut SocketStream) {
    quic.send(&Message::from_raw(3, 999, bytes::Bytes::new()))
        .unwrap();
    loop {
        if let SocketEvent::Received(message) = next_socket_event(quic).await {
            if message.action::<RelayAction>() == Some(RelayAction::Error) {
                return;
            }
        }
    }
}
