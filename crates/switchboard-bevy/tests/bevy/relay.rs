//! The relay in Bevy apps, against a relay on loopback with a native bot
//! in it: the others appear as entities drawn between the transforms
//! received, a player who changes zone leaves the others' worlds, and a
//! relay that goes away and comes back is joined again.

use std::time::{Duration, Instant};

use bevy_app::prelude::*;
use bevy_ecs::prelude::*;
use switchboard_bevy::prelude::*;
use switchboard_bevy::Smoothed;
use switchboard_bevy::{Relay, RelayAvatar, RelayEvent, RelayPlayer, RelayPlugin, RelaySettings};
use switchboard_relay::{Bot, BotConfig, RelayServer, Script};

use crate::support::frames;

/// What the app heard from the relay.
#[derive(Resource, Default)]
struct Heard(Vec<RelayEvent>);

fn hear(mut heard: ResMut<Heard>, mut events: MessageReader<RelayEvent>) {
    heard.0.extend(events.read().cloned());
}

fn player(addr: impl ToString, name: &str, zone: &str) -> App {
    let mut app = App::new();
    app.add_plugins((TaskPoolPlugin::default(), bevy_time::TimePlugin))
        .add_plugins(RelayPlugin::new(RelaySettings::new(addr, name, zone)))
        .init_resource::<Heard>()
        .add_systems(Update, hear);
    app.world_mut()
        .spawn((NetTransform::default(), RelayAvatar));
    app
}

/// The others this app sees: (relay id, where).
fn others(app: &mut App) -> Vec<(u32, [f32; 3])> {
    let mut query = app.world_mut().query::<(&RelayPlayer, &NetTransform)>();
    let mut all: Vec<_> = query
        .iter(app.world())
        .map(|(p, t)| (p.id, t.position))
        .collect();
    all.sort_by_key(|(id, _)| *id);
    all
}

fn id(app: &App) -> Option<u32> {
    app.world().non_send::<Relay>().player_id()
}

fn move_avatar(app: &mut App, x: f32) {
    let mut query = app
        .world_mut()
        .query_filtered::<&mut NetTransform, With<RelayAvatar>>();
    query.single_mut(app.world_mut()).unwrap().position = [x, 1.0, 0.0];
}

#[test]
fn relay_players_appear_move_smoothly_and_leave_with_their_zone() {
    let relay = RelayServer::builder().spawn().unwrap();
    let addr = relay.native_addr();
    // Bots run on the library's runtime, as the load tester's do.
    let _runtime = switchboard::runtime::handle().enter();
    let bot = Bot::spawn(
        addr,
        BotConfig::new("walker", "field"),
        Script::WalkCircle { radius: 3.0 },
    );
    let mut ann = player(addr, "ann", "field");
    let mut bob = player(addr, "bob", "field");
    frames(&mut [&mut ann, &mut bob], |a| {
        id(a[0]).is_some() && id(a[1]).is_some() && bot.player_id().is_some()
    });
    let (ann_id, bot_id) = (id(&ann).unwrap(), bot.player_id().unwrap());

    // Bob sees ann and the bot; ann walks, bob sees her follow.
    let mut x = 0.0;
    frames(&mut [&mut ann, &mut bob], |a| {
        x += 0.02;
        move_avatar(a[0], x);
        let seen = others(a[1]);
        seen.iter().any(|(id, _)| *id == bot_id)
            && seen
                .iter()
                .any(|(id, at)| *id == ann_id && at[0] > 1.0 && at[1] == 1.0)
    });
    let stats = {
        let on_bob = bob.world().non_send::<Relay>().player(ann_id).unwrap();
        bob.world()
            .get::<Smoothed<NetTransform>>(on_bob)
            .unwrap()
            .stats()
    };
    assert!(stats.interpolated > 0, "{stats:?}");
    // The bot's walk reaches bob too, drawn between its transforms.
    let bot_at = |app: &mut App| others(app).into_iter().find(|(id, _)| *id == bot_id);
    let first = bot_at(&mut bob).unwrap().1;
    frames(&mut [&mut ann, &mut bob], |a| {
        bot_at(a[1]).is_some_and(|(_, at)| at != first)
    });

    // Ann goes to another zone: she leaves bob's world, and his hers.
    ann.world_mut().non_send_mut::<Relay>().set_zone("cave");
    frames(&mut [&mut ann, &mut bob], |a| {
        !others(a[1]).iter().any(|(id, _)| *id == ann_id)
    });
    assert!(bob
        .world()
        .resource::<Heard>()
        .0
        .contains(&RelayEvent::Left(ann_id)));
    frames(&mut [&mut ann, &mut bob], |a| others(a[0]).is_empty());
    bot.stop();
}

#[test]
fn a_relay_that_goes_away_is_joined_again_when_it_comes_back() {
    let relay = RelayServer::builder().spawn().unwrap();
    let addr = relay.native_addr();
    let mut ann = player(addr, "ann", "field");
    frames(&mut [&mut ann], |a| id(a[0]).is_some());

    relay.shutdown_blocking().unwrap();
    frames(&mut [&mut ann], |a| {
        a[0].world()
            .resource::<Heard>()
            .0
            .iter()
            .any(|e| matches!(e, RelayEvent::Disconnected(_)))
    });
    assert_eq!(id(&ann), None);
    // A relay on the same port again (as soon as the port is free): the
    // plugin connects by itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        match RelayServer::builder().port(addr.port()).spawn() {
            Ok(relay) => break relay,
            Err(err) => assert!(Instant::now() < deadline, "the port stays taken: {err}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    frames(&mut [&mut ann], |a| id(a[0]).is_some());
    let welcomes = ann
        .world()
        .resource::<Heard>()
        .0
        .iter()
        .filter(|e| matches!(e, RelayEvent::Welcome(_)))
        .count();
    assert_eq!(welcomes, 2);
    again.shutdown_blocking().unwrap();
}
