//! Every bot script doing what it says, against a real relay over loopback.

use crate::common;

use std::time::{Duration, Instant};

use common::{next_socket_event, WAIT};
use switchboard::{Message, SocketConfig, SocketEvent, SocketStream};
use switchboard_relay::{
    self as relay, self, Bot, BotConfig, MovementState, RelayAction, RelayChannel, RelayClient,
    RelayHandle, RelayHello, Script, Transform,
};

/// A real (non-bot) player standing at `x` in town.
async fn real_player(relay: &RelayHandle, x: f32) -> SocketStream {
    let mut client = SocketStream::connect(relay.native_addr(), SocketConfig::default());
    assert!(matches!(
        next_socket_event(&mut client).await,
        SocketEvent::Connected
    ));
    let hello = RelayHello {
        name: "human".into(),
        bot: false,
    };
    client
        .send(&Message::new(RelayChannel, RelayAction::Hello, &hello).unwrap())
        .unwrap();
    let transform = Transform {
        position: [x, 0.0, 0.0],
        zone: "town".into(),
        ..Transform::default()
    };
    client
        .send(&Message::new(RelayChannel, RelayAction::Transform, &transform).unwrap())
        .unwrap();
    client
}

/// Waits until the bot called `name` satisfies `done`, and returns it.
async fn until(
    relay: &RelayHandle,
    name: &str,
    done: impl Fn(&RelayClient) -> bool,
) -> RelayClient {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(bot) = relay
            .clients()
            .await
            .into_iter()
            .find(|c| c.name == name && c.last.is_some())
        {
            if done(&bot) {
                return bot;
            }
        }
        assert!(Instant::now() < deadline, "bot {name} never got there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn x(c: &RelayClient) -> f32 {
    c.last.as_ref().unwrap().position[0]
}

/// Whether the client's last transform has a movement state that `test`
/// accepts.
fn state_is(c: &RelayClient, test: impl FnOnce(&MovementState) -> bool) -> bool {
    c.last.as_ref().unwrap().state.as_ref().is_some_and(test)
}

fn moving(c: &RelayClient) -> bool {
    state_is(c, |s| s.moving)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walk_to_player_reaches_the_offset_point_and_stops_then_scripts_change_on_the_fly() {
    let relay = relay::RelayServer::builder().spawn().unwrap();
    let _human = real_player(&relay, 100.0).await;
    let config = BotConfig {
        speed: 600.0,
        rate: 20.0,
        ..BotConfig::new("walker", "town")
    };
    let bot = Bot::spawn(relay.native_addr(), config, Script::WalkToPlayer);
    let arrived = until(&relay, "walker", |b| {
        (x(b) - 250.0).abs() < 0.6 && !moving(b)
    })
    .await;
    assert!(arrived.is_bot);
    // It stays there, idle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = until(&relay, "walker", |_| true).await;
    assert!((x(&still) - 250.0).abs() < 0.6 && !moving(&still));

    // A new script on the running bot: a circle of radius 50 around its start.
    bot.set_script(Script::WalkCircle { radius: 50.0 });
    let circling = until(&relay, "walker", |b| {
        moving(b) && (x(b).abs() - 50.0).abs() < 51.0 && x(b) != x(&still)
    })
    .await;
    let p = circling.last.unwrap().position;
    assert!(
        ((p[0] * p[0] + p[2] * p[2]).sqrt() - 50.0).abs() < 0.5,
        "on the circle: {p:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_square_jump_sneak_teleport_and_zone_hopping() {
    let relay = relay::RelayServer::builder().spawn().unwrap();
    let _human = real_player(&relay, 400.0).await;
    let fast = |name: &str| BotConfig {
        speed: 800.0,
        rate: 20.0,
        ..BotConfig::new(name, "town")
    };
    let _follow = Bot::spawn(relay.native_addr(), fast("follower"), Script::FollowPlayer);
    let _square = Bot::spawn(
        relay.native_addr(),
        fast("square"),
        Script::WalkSquare { side: 100.0 },
    );
    let _jump = Bot::spawn(relay.native_addr(), fast("jumper"), Script::JumpLoop);
    let _sneak = Bot::spawn(relay.native_addr(), fast("sneaker"), Script::SneakToggle);
    let _teleport = Bot::spawn(relay.native_addr(), fast("teleporter"), Script::Teleport);
    let _hop = Bot::spawn(
        relay.native_addr(),
        fast("hopper"),
        Script::LeaveZoneAndReturn,
    );
    let _idle = Bot::spawn(relay.native_addr(), fast("idler"), Script::Idle);

    until(&relay, "follower", |b| (x(b) - 350.0).abs() < 0.6).await;
    let on_square = until(&relay, "square", |b| {
        let p = b.last.as_ref().unwrap().position;
        (p[0] - 100.0).abs() < 0.01 && p[2] > 1.0
    })
    .await;
    assert!(on_square.last.unwrap().position[2] <= 100.0);
    until(&relay, "jumper", |b| state_is(b, |s| s.jumping)).await;
    until(&relay, "jumper", |b| state_is(b, |s| !s.jumping)).await;
    until(&relay, "sneaker", |b| state_is(b, |s| s.sneaking)).await;
    let first = x(&until(&relay, "teleporter", |_| true).await);
    until(&relay, "teleporter", |b| x(b) != first).await;
    until(&relay, "hopper", |b| b.zone.as_deref() == Some("town-away")).await;
    until(&relay, "hopper", |b| b.zone.as_deref() == Some("town")).await;
    let idle = until(&relay, "idler", |_| true).await;
    assert_eq!(x(&idle), 0.0);
    assert!(!moving(&idle));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_after_a_delay_leaves_the_relay() {
    let relay = relay::RelayServer::builder().spawn().unwrap();
    let bot = Bot::spawn(
        relay.native_addr(),
        BotConfig::new("leaver", "town"),
        Script::DisconnectAfter(Duration::from_millis(300)),
    );
    until(&relay, "leaver", |_| true).await;
    let deadline = Instant::now() + WAIT;
    while relay.clients().await.iter().any(|c| c.name == "leaver") {
        assert!(Instant::now() < deadline, "the bot never left");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its task ends once the close is through, which the relay may hear
    // first.
    while bot.is_running() {
        assert!(Instant::now() < deadline, "the bot's task never ended");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
