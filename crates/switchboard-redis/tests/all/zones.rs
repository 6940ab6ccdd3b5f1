//! Zones across relay processes over a real Redis: a zone lives on one
//! relay, a player whose zone lives elsewhere is handed over with its id,
//! handover tickets are honoured once and cannot be forged, and a zone
//! whose relay stopped moves to a live one.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use switchboard::socket::{SocketConfig, SocketEvent, SocketStream};
use switchboard_redis::testing::RedisProcess;
use switchboard_redis::{RedisZones, PRESENCE_TTL};
use switchboard_relay::{
    Handover, Redirect, RelayAction, RelayChannel, RelayConfig, RelayHandle, RelayHello,
    RelayServer, Relayed, RunningRelay, Transform,
};

const WAIT: Duration = Duration::from_secs(10);

async fn relay(redis: &RedisProcess) -> RunningRelay {
    relay_with(redis, true).await
}

/// A relay of the service; `websocket`: whether its WebSocket address is
/// published (browsers are handed over only to relays that publish one).
async fn relay_with(redis: &RedisProcess, websocket: bool) -> RunningRelay {
    let (zones, serving) = RedisZones::join(redis.store()).await.unwrap();
    let mut config = RelayConfig {
        zones: Some(zones),
        ..RelayConfig::default()
    };
    config.server.websocket = Some(switchboard::WebSocketConfig::on_port(0));
    config.server.quic = Some(switchboard::socket::quic::QuicConfig::on(0));
    let relay = RelayServer::builder().config(config).spawn().unwrap();
    let addr = relay.native_addr().to_string();
    let ws = relay.websocket_addr().filter(|_| websocket);
    serving.at_all_with_webtransport(
        addr,
        ws.map(|a| a.to_string()),
        relay.quic_addr().map(|a| a.to_string()),
        relay.webtransport(),
    );
    relay
}

/// Waits until every one of `relays` is in the directory (in its set of
/// processes, with its address): zones are placed only on relays it knows.
async fn until_published(redis: &RedisProcess, relays: &[&RunningRelay]) {
    let store = redis.store();
    let (set, prefix) = (store.key("relay:processes"), store.key("relay:process:"));
    let deadline = Instant::now() + WAIT;
    loop {
        let set = set.clone();
        let processes: Vec<u32> = store
            .run(|mut c| async move {
                redis::cmd("ZRANGE")
                    .arg(set)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut c)
                    .await
            })
            .await
            .unwrap();
        let mut published = Vec::new();
        for process in processes {
            let key = format!("{prefix}{process}");
            let addr: Option<String> = store
                .run(|mut c| async move {
                    redis::cmd("HGET")
                        .arg(key)
                        .arg("addr")
                        .query_async(&mut c)
                        .await
                })
                .await
                .unwrap();
            published.extend(addr);
        }
        if relays
            .iter()
            .all(|relay| published.contains(&relay.native_addr().to_string()))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "relays published in time: {published:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A player: its connection, the relay it is on, its id.
struct Player {
    socket: SocketStream,
    on: SocketAddr,
    id: u32,
    heard: Vec<u32>,
    handed_over: Option<Handover>,
    errors: Vec<String>,
    /// The transport it plays over (and follows redirects on).
    over: Over,
    /// Welcomed by the relay it was handed over to.
    rewelcomed: bool,
}

/// How a player connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    Tcp,
    /// The relay's WebSocket port (as a browser).
    WebSocket,
    /// The relay's QUIC port.
    Quic,
}

impl Over {
    fn dial(self, to: SocketAddr) -> SocketStream {
        let config = SocketConfig::default();
        match self {
            Over::Tcp => SocketStream::connect(to, config),
            Over::WebSocket => SocketStream::connect_ws(&format!("ws://{to}/"), config),
            Over::Quic => SocketStream::dial(format!("quic://{to}"), config),
        }
    }
}

fn transform(zone: &str) -> Transform {
    Transform {
        zone: zone.into(),
        ..Transform::default()
    }
}

impl Player {
    async fn connect(to: SocketAddr, name: &str) -> Player {
        Self::over(Over::Tcp, to, name).await
    }

    /// A player over the relay's WebSocket port (as a browser).
    async fn connect_ws(to: SocketAddr, name: &str) -> Player {
        Self::over(Over::WebSocket, to, name).await
    }

    async fn over(over: Over, to: SocketAddr, name: &str) -> Player {
        let socket = over.dial(to);
        let hello = RelayHello {
            name: name.into(),
            bot: false,
        };
        socket
            .send_value(RelayChannel, RelayAction::Hello, &hello)
            .unwrap();
        let mut player = Player {
            socket,
            on: to,
            id: 0,
            heard: Vec::new(),
            handed_over: None,
            errors: Vec::new(),
            over,
            rewelcomed: false,
        };
        player.until(|p| p.id != 0).await;
        player
    }

    /// Sends a transform in `zone`, then takes events (following a
    /// redirect) for 20 ms.
    async fn step(&mut self, zone: &str) {
        let _ = self
            .socket
            .send_value(RelayChannel, RelayAction::Transform, &transform(zone));
        let until = tokio::time::Instant::now() + Duration::from_millis(20);
        while let Ok(event) = tokio::time::timeout_at(until, self.socket.next_event()).await {
            self.take(event).await;
        }
    }

    /// Takes events (following a redirect) until `done`, sending a
    /// transform in `zone` every 50 ms.
    async fn play_until(&mut self, zone: &str, done: impl Fn(&Player) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        while !done(self) {
            assert!(tokio::time::Instant::now() < deadline, "not in time");
            tokio::select! {
                _ = tick.tick() => {
                    let _ = self.socket.send_value(RelayChannel, RelayAction::Transform, &transform(zone));
                }
                event = self.socket.next_event() => self.take(event).await,
            }
        }
    }

    async fn until(&mut self, done: impl Fn(&Player) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !done(self) {
            let event = tokio::time::timeout_at(deadline, self.socket.next_event())
                .await
                .expect("not in time");
            self.take(event).await;
        }
    }

    async fn take(&mut self, event: Option<SocketEvent>) {
        let Some(SocketEvent::Received(message)) = event else {
            return;
        };
        match message.action::<RelayAction>() {
            Some(RelayAction::Welcome) => {
                self.id = message.content().unwrap();
                self.rewelcomed = self.handed_over.is_some();
            }
            Some(RelayAction::Relayed) => {
                let relayed: Relayed = message.content().unwrap();
                self.heard.push(relayed.player_id);
            }
            Some(RelayAction::Error) => self.errors.push(message.content().unwrap()),
            Some(RelayAction::Redirect) => {
                let redirect = Redirect::read(message.content_bytes()).unwrap();
                let to: SocketAddr = match (&redirect.websocket, &redirect.quic, self.over) {
                    (Some(ws), _, Over::WebSocket) => ws.parse().unwrap(),
                    (_, Some(quic), Over::Quic) => quic.parse().unwrap(),
                    _ => redirect.addr.parse().unwrap(),
                };
                self.socket = self.over.dial(to);
                self.socket
                    .send_value(RelayChannel, RelayAction::Handover, &redirect.ticket)
                    .unwrap();
                self.on = to;
                self.handed_over = Some(redirect.ticket);
            }
            _ => {}
        }
    }
}

/// Both play in `zone` until each has heard the other (following
/// redirects).
async fn meet(ann: &mut Player, bob: &mut Player, zone: &str) {
    let deadline = Instant::now() + WAIT;
    while !(ann.heard.contains(&bob.id) && bob.heard.contains(&ann.id)) {
        assert!(Instant::now() < deadline, "they never met in {zone}");
        ann.step(zone).await;
        bob.step(zone).await;
    }
}

/// A zone the directory places on `relay`.
async fn zone_on(redis: &RedisProcess, relay: &RelayHandle) -> String {
    let (directory, _not_serving) = RedisZones::join(redis.store()).await.unwrap();
    for n in 0..64 {
        let name = format!("zone-{n}");
        let owner = directory.directory.owner(&name).await.unwrap();
        if owner.addr == relay.native_addr().to_string() {
            return name;
        }
    }
    panic!("no zone on that relay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_whose_zone_lives_on_another_relay_is_handed_over_with_its_id() {
    let redis = RedisProcess::start().unwrap();
    let (one, two) = (relay(&redis).await, relay(&redis).await);
    // Both relays published themselves before the first zone is placed.
    until_published(&redis, &[&one, &two]).await;
    let mut ann = Player::connect(one.native_addr(), "ann").await;
    let mut bob = Player::connect(two.native_addr(), "bob").await;
    let ids = (ann.id, bob.id);
    assert_ne!(ids.0, ids.1, "ids are unique across relays");
    // Both play in "dock": it lives on one relay, and whoever is on the
    // other is handed over.
    meet(&mut ann, &mut bob, "dock").await;
    assert_eq!(ann.on, bob.on, "both on the zone's relay");
    assert_eq!((ann.id, bob.id), ids, "ids kept across the handover");
    let handed = [&ann, &bob]
        .iter()
        .filter(|p| p.handed_over.is_some())
        .count();
    assert_eq!(handed, 1, "exactly one of them was on the other relay");
    assert!(ann.errors.is_empty() && bob.errors.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_ticket_is_honoured_once_and_a_forged_one_not_at_all() {
    let redis = RedisProcess::start().unwrap();
    let (one, two) = (relay(&redis).await, relay(&redis).await);
    until_published(&redis, &[&one, &two]).await;
    // A zone that lives on relay two, played from relay one.
    let zone = zone_on(&redis, &two).await;
    let mut ann = Player::connect(one.native_addr(), "ann").await;
    ann.play_until(&zone, |p| p.handed_over.is_some()).await;
    assert_eq!(ann.on, two.native_addr());
    ann.until(|p| p.rewelcomed).await;
    let ticket = ann.handed_over.clone().unwrap();

    // Presented again, by anyone: refused.
    let mut eve = Player::connect(two.native_addr(), "eve").await;
    eve.socket
        .send_value(RelayChannel, RelayAction::Handover, &ticket)
        .unwrap();
    eve.until(|p| !p.errors.is_empty()).await;
    assert!(eve.errors[0].contains("used"), "{:?}", eve.errors);
    // Altered: refused.
    let mut forged = ticket.clone();
    forged.player_id += 1;
    forged.nonce[0] ^= 1;
    eve.socket
        .send_value(RelayChannel, RelayAction::Handover, &forged)
        .unwrap();
    eve.until(|p| p.errors.len() == 2).await;
    assert!(eve.errors[1].contains("not valid"), "{:?}", eve.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_whose_relay_stopped_moves_to_a_live_one() {
    let redis = RedisProcess::start().unwrap();
    let (one, two) = (relay(&redis).await, relay(&redis).await);
    until_published(&redis, &[&one, &two]).await;
    // The directory, as any relay asks it.
    let (directory, _not_serving) = RedisZones::join(redis.store()).await.unwrap();
    let owner = directory.directory.owner("plaza").await.unwrap();
    let (gone, survivor) = if owner.addr == one.native_addr().to_string() {
        (one, two)
    } else {
        (two, one)
    };
    assert_eq!(owner.addr, gone.native_addr().to_string());
    // Its relay stops; once its presence lapses, "plaza" is the survivor's.
    gone.shutdown().await.unwrap();
    tokio::time::sleep(PRESENCE_TTL + Duration::from_millis(500)).await;
    let moved = directory.directory.owner("plaza").await.unwrap();
    assert_eq!(moved.addr, survivor.native_addr().to_string());
    let mut bob = Player::connect(survivor.native_addr(), "bob").await;
    let mut cat = Player::connect(survivor.native_addr(), "cat").await;
    meet(&mut bob, &mut cat, "plaza").await;
    assert!(
        bob.handed_over.is_none() && cat.handed_over.is_none(),
        "served where they are"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_players_are_served_where_they_are_when_the_zone_s_relay_has_no_websocket() {
    let redis = RedisProcess::start().unwrap();
    let (one, two) = (
        relay_with(&redis, false).await,
        relay_with(&redis, false).await,
    );
    until_published(&redis, &[&one, &two]).await;
    let zone = zone_on(&redis, &two).await;
    let ws = one.websocket_addr().unwrap();
    let mut ann = Player::connect_ws(ws, "ann").await;
    let mut bob = Player::connect_ws(ws, "bob").await;
    meet(&mut ann, &mut bob, &zone).await;
    assert!(ann.handed_over.is_none() && bob.handed_over.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_player_is_handed_over_to_the_zone_s_relay_websocket_with_its_id() {
    let redis = RedisProcess::start().unwrap();
    let (one, two) = (relay(&redis).await, relay(&redis).await);
    until_published(&redis, &[&one, &two]).await;
    let (one_ws, two_ws) = (one.websocket_addr().unwrap(), two.websocket_addr().unwrap());
    let mut ann = Player::connect_ws(one_ws, "ann").await;
    let mut bob = Player::connect_ws(two_ws, "bob").await;
    let ids = (ann.id, bob.id);
    meet(&mut ann, &mut bob, "harbour").await;
    assert_eq!(ann.on, bob.on, "both on the zone's relay, over WebSocket");
    assert_eq!((ann.id, bob.id), ids, "ids kept across the handover");
    let handed = [&ann, &bob]
        .iter()
        .filter(|p| p.handed_over.is_some())
        .count();
    assert_eq!(handed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_player_is_handed_over_to_the_zone_s_relay_over_quic_with_its_id() {
    let redis = RedisProcess::start().unwrap();
    let (one, two) = (relay(&redis).await, relay(&redis).await);
    until_published(&redis, &[&one, &two]).await;
    let (one_quic, two_quic) = (one.quic_addr().unwrap(), two.quic_addr().unwrap());
    let mut ann = Player::over(Over::Quic, one_quic, "ann").await;
    let mut bob = Player::over(Over::Quic, two_quic, "bob").await;
    let ids = (ann.id, bob.id);
    meet(&mut ann, &mut bob, "quay").await;
    assert_eq!(ann.on, bob.on, "both on the zone's relay");
    assert!(
        [one_quic, two_quic].contains(&ann.on),
        "on its QUIC port, not its TCP one: {}",
        ann.on
    );
    assert!(ann.socket.handle().is_quic() && bob.socket.handle().is_quic());
    assert_eq!((ann.id, bob.id), ids, "ids kept across the handover");
}

/// A browser on WebTransport is handed over to the zone's relay's
/// WebTransport: the directory gives the certificate hashes that relay
/// publishes (the one it serves, then the next), read at each refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_directory_gives_a_zone_s_relay_s_webtransport_hashes() {
    let redis = RedisProcess::start().unwrap();
    let (one, two) = (relay(&redis).await, relay(&redis).await);
    until_published(&redis, &[&one, &two]).await;
    let zone = zone_on(&redis, &two).await;
    let (directory, _not_serving) = RedisZones::join(redis.store()).await.unwrap();
    let owner = directory.directory.owner(&zone).await.unwrap();
    let hashes: Vec<String> = two
        .webtransport()
        .expect("WebTransport on the QUIC port")
        .hashes()
        .iter()
        .map(|hash| hash.to_string())
        .collect();
    assert_eq!(hashes.len(), 2, "the served certificate's and the next");
    assert!(hashes.iter().all(|h| h.len() == 64), "{hashes:?}");
    assert_eq!(owner.webtransport, Some(hashes));
    assert_eq!(owner.quic, two.quic_addr().map(|a| a.to_string()));
}
