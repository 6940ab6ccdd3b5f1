//! A small Bevy game, headless: players join a room and see each other's
//! ships move. Each player's ship flies a circle; every half second a
//! player prints where it sees the others' ships (drawn between the
//! states received, as a game with a window would draw them).
//!
//! ```text
//! cargo run -p switchboard-bevy --example room_game                  # host + a guest in this process, 5 s (--seconds N)
//! cargo run -p switchboard-bevy --example room_game -- --host 7100   # host for others (every interface)
//! cargo run -p switchboard-bevy --example room_game -- --join 127.0.0.1:7100 bob
//! ```
//!
//! The host's server is this very executable re-invoked (`serve_if_child`
//! first in `main`), stopped when the host quits.

use std::time::Duration;

use bevy_app::prelude::*;
use bevy_app::ScheduleRunnerPlugin;
use bevy_ecs::prelude::*;
use bevy_state::prelude::*;
use bevy_time::{Time, TimePlugin};
use switchboard::{BindScope, ClientConfig, LocalServerOptions};
use switchboard_bevy::prelude::*;
use switchboard_rooms::{CreateRoom, RoomEvent, RoomsLogic};

/// Who plays, and how.
#[derive(Resource, Clone)]
struct Player {
    name: String,
    /// Creates the room (the others list and join it).
    hosts: bool,
    /// Quits after this long (`None`: runs until stopped).
    seconds: Option<f32>,
}

/// This player's own ship.
#[derive(Component)]
struct Mine;

fn main() -> AppExit {
    // In the child this process started as its server: serve, never return.
    switchboard::process::serve_if_child(RoomsLogic::new);
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--join") => {
            let addr = args.get(1).expect("--join ADDR [NAME]");
            let name = args.get(2).cloned().unwrap_or_else(|| "guest".into());
            let plugin = SwitchboardPlugin::connect(addr, ClientConfig::named(&name));
            game(
                plugin,
                Player {
                    name,
                    hosts: false,
                    seconds: None,
                },
            )
            .run()
        }
        Some("--host") => {
            let port = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(7100);
            let options = LocalServerOptions {
                scope: BindScope::AllInterfaces,
                port,
                ..LocalServerOptions::default()
            };
            println!("hosting on port {port}: others join with --join THIS_HOST:{port}");
            let plugin = SwitchboardPlugin::local(options, ClientConfig::named("host"));
            let host = Player {
                name: "host".into(),
                hosts: true,
                seconds: None,
            };
            game(plugin, host).run()
        }
        Some("--seconds") => demo(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5.0)),
        _ => demo(5.0),
    }
}

/// The host (with its local server) and a guest, for `seconds`.
fn demo(seconds: f32) -> AppExit {
    let plugin =
        SwitchboardPlugin::local(LocalServerOptions::default(), ClientConfig::named("ann"));
    let mut ann = game(
        plugin,
        Player {
            name: "ann".into(),
            hosts: true,
            seconds: Some(seconds),
        },
    );
    // The guest needs the host's address: take one frame, then start it.
    ann.update();
    let addr = ann
        .world()
        .non_send::<Switchboard>()
        .local_server()
        .expect("the local server started")
        .addr();
    let guest = std::thread::spawn(move || {
        let plugin = SwitchboardPlugin::connect(addr, ClientConfig::named("bob"));
        game(
            plugin,
            Player {
                name: "bob".into(),
                hosts: false,
                seconds: Some(seconds - 0.5),
            },
        )
        .run()
    });
    let exit = ann.run();
    let _ = guest.join();
    exit
}

fn game(plugin: SwitchboardPlugin, player: Player) -> App {
    let mut app = App::new();
    app.add_plugins((
        TaskPoolPlugin::default(),
        TimePlugin,
        ScheduleRunnerPlugin::run_loop(Duration::from_secs_f64(1.0 / 60.0)),
    ))
    .add_plugins((plugin, RoomsPlugin))
    .replicate_smoothed::<NetTransform>("ship")
    .insert_resource(player)
    .add_systems(OnEnter(NetworkState::Online), enter_lobby)
    .add_systems(Update, (join_listed, launch, fly, report, quit));
    app
}

/// The host creates the room; a guest asks for the list.
fn enter_lobby(mut net: NonSendMut<Switchboard>, player: Res<Player>) {
    if net.room().is_some() {
        return; // back after a cut: still in the room
    }
    let Some(rooms) = net.rooms() else { return };
    let asked = if player.hosts {
        let room = CreateRoom {
            name: "skies".into(),
            max_players: 8,
            metadata: Default::default(),
            private: false,
        };
        rooms.create(&room)
    } else {
        rooms.list()
    };
    if let Err(err) = asked {
        eprintln!("{}: {err}", player.name);
    }
}

/// A guest joins the first room listed (asking again until there is one).
fn join_listed(
    mut messages: MessageReader<RoomMessage>,
    mut net: NonSendMut<Switchboard>,
    player: Res<Player>,
) {
    for RoomMessage(event) in messages.read() {
        let RoomEvent::List(list) = event else {
            continue;
        };
        let Some(rooms) = net.rooms() else { return };
        let asked = match list.first() {
            Some(room) => rooms.join(room.id),
            None => rooms.list(),
        };
        if let Err(err) = asked {
            eprintln!("{}: {err}", player.name);
        }
    }
}

/// In a room and no ship yet: spawn one, marked to replicate.
fn launch(mut commands: Commands, net: NonSend<Switchboard>, mine: Query<(), With<Mine>>) {
    if net.room().is_some() && mine.is_empty() {
        commands.spawn((NetTransform::default(), Replicate, Mine));
    }
}

/// The ship flies a circle, a different one per player.
fn fly(time: Res<Time>, player: Res<Player>, mut ship: Query<&mut NetTransform, With<Mine>>) {
    let radius = if player.hosts { 10.0 } else { 5.0 };
    let t = time.elapsed_secs();
    for mut ship in &mut ship {
        ship.position = [radius * t.cos(), radius * t.sin(), 0.0];
        ship.rotation = [0.0, 0.0, (t.to_degrees() + 90.0).rem_euclid(360.0)];
    }
}

/// Twice a second: where this player sees the others' ships.
fn report(
    time: Res<Time>,
    player: Res<Player>,
    net: NonSend<Switchboard>,
    mut last: Local<f32>,
    others: Query<(&RoomEntity, &NetTransform), Without<Mine>>,
) {
    let now = time.elapsed_secs();
    if now - *last < 0.5 {
        return;
    }
    *last = now;
    let Some(room) = net.room() else { return };
    for (entity, ship) in &others {
        let owner = room.players.iter().find(|p| p.id == entity.owner);
        let owner = owner.map_or("someone who left", |p| p.name.as_str());
        let [x, y, _] = ship.position;
        println!(
            "{} sees {owner}'s ship at ({x:6.2}, {y:6.2}) heading {:5.1}",
            player.name, ship.rotation[2]
        );
    }
}

fn quit(time: Res<Time>, player: Res<Player>, mut exit: MessageWriter<AppExit>) {
    if player.seconds.is_some_and(|s| time.elapsed_secs() >= s) {
        exit.write(AppExit::Success);
    }
}
