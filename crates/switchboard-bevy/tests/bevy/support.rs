//! What the Bevy tests share: apps with MinimalPlugins' own plugins, frames
//! run until a condition holds, what the apps saw, and servers as real
//! child processes (this test executable re-invoked, as a game's own
//! executable is).

use std::time::{Duration, Instant};

use bevy_app::prelude::*;
use bevy_ecs::prelude::*;
use bevy_state::prelude::*;
use switchboard::client::ClientEvent;
use switchboard::{LocalServer, LocalServerOptions};
use switchboard_bevy::prelude::*;
use switchboard_rooms::RoomsLogic;
use switchboard_server::board::BoardLogic;

pub use crate::common::{Proxy, WAIT};

/// The child's entry point for a board server: in the child
/// (SWITCHBOARD_CHILD set) it serves and never returns.
#[test]
#[ignore = "entry point of a child server process"]
fn child_board_server() {
    switchboard::process::serve_if_child(BoardLogic::default);
}

/// The same for a rooms server.
#[test]
#[ignore = "entry point of a child server process"]
fn child_rooms_server() {
    switchboard::process::serve_if_child(RoomsLogic::new);
}

/// Options that start this executable as a board or rooms server.
pub fn child(entry: &str) -> LocalServerOptions {
    LocalServerOptions {
        args: [
            &format!("support::{entry}"),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ]
        .map(String::from)
        .to_vec(),
        ..LocalServerOptions::default()
    }
}

/// A board server in a child process.
pub fn board_server() -> LocalServer {
    LocalServer::spawn(child("child_board_server")).unwrap()
}

/// A rooms server in a child process.
pub fn rooms_server() -> LocalServer {
    LocalServer::spawn(child("child_rooms_server")).unwrap()
}

/// A client config that comes back quickly after a cut.
pub fn config(name: &str) -> switchboard::ClientConfig {
    switchboard::ClientConfig {
        reconnect: switchboard::ReconnectPolicy {
            initial_delay: Duration::from_millis(50),
            ..Default::default()
        },
        ..switchboard::ClientConfig::named(name)
    }
}

/// What an app saw, in order.
#[derive(Resource, Default, Debug)]
pub struct Seen {
    /// Every client event.
    pub events: Vec<ClientEvent>,
    /// Every connection state entered.
    pub states: Vec<NetworkState>,
    /// Every `LocalServerStopped`.
    pub stopped: Vec<String>,
}

fn record(
    mut seen: ResMut<Seen>,
    mut events: MessageReader<SwitchboardEvent>,
    mut stopped: MessageReader<LocalServerStopped>,
    state: Res<State<NetworkState>>,
) {
    seen.events.extend(events.read().map(|e| e.0.clone()));
    seen.stopped
        .extend(stopped.read().map(|s| s.status.clone()));
    if state.is_changed() || seen.states.is_empty() {
        seen.states.push(*state.get());
    }
}

/// An app as a headless game has it: MinimalPlugins' task pool and time,
/// the Switchboard plugin, and a system recording what it saw.
pub fn app(plugin: SwitchboardPlugin) -> App {
    let mut app = App::new();
    app.add_plugins((TaskPoolPlugin::default(), bevy_time::TimePlugin))
        .add_plugins(plugin)
        .init_resource::<Seen>()
        .add_systems(Update, record);
    app
}

/// Runs frames of every app (1 ms apart) until `done` holds.
pub fn frames(apps: &mut [&mut App], mut done: impl FnMut(&mut [&mut App]) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        for app in apps.iter_mut() {
            app.update();
        }
        if done(apps) {
            return;
        }
        assert!(Instant::now() < deadline, "not reached within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The app's connection state now.
pub fn state(app: &App) -> NetworkState {
    *app.world().resource::<State<NetworkState>>().get()
}

/// The app's client id.
pub fn id(app: &App) -> Option<switchboard::ClientId> {
    app.world().non_send::<Switchboard>().client_id()
}

/// What the app saw.
pub fn seen(app: &App) -> &Seen {
    app.world().resource::<Seen>()
}
