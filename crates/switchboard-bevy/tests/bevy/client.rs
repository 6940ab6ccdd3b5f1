//! The client plugin in Bevy apps against real server processes: joining,
//! verdicts, typed messages, a reconnect through a cut with the same id,
//! the local server started and stopped with the app, a late frame.

use std::time::Duration;

use bevy_app::prelude::*;
use bevy_ecs::prelude::*;
use switchboard::client::{ClientEvent, RequestStatus, RequestTicket};
use switchboard_bevy::prelude::*;
use switchboard_server::board::{Board, Line};

use crate::support::{app, board_server, child, config, frames, id, seen, state, Proxy};

/// Every board message the app received, in order.
#[derive(Resource, Default)]
struct Heard(Vec<Board>);

fn hear(mut heard: ResMut<Heard>, mut received: MessageReader<Received<Board>>) {
    heard.0.extend(received.read().map(|r| r.0.clone()));
}

fn board_app(plugin: SwitchboardPlugin) -> App {
    let mut app = app(plugin);
    app.receive::<Board>()
        .init_resource::<Heard>()
        .add_systems(Update, hear);
    app
}

fn request(app: &mut App, message: Board) -> RequestTicket {
    app.world_mut()
        .non_send_mut::<Switchboard>()
        .request(message)
        .unwrap()
}

/// Runs frames until the verdict came as an event; returns it.
fn verdict(apps: &mut [&mut App], who: usize, ticket: RequestTicket) -> RequestStatus {
    let find = |app: &App| {
        seen(app).events.iter().find_map(|e| match e {
            ClientEvent::RequestDone { ticket: t, status } if *t == ticket => Some(status.clone()),
            _ => None,
        })
    };
    frames(apps, |apps| find(apps[who]).is_some());
    find(apps[who]).unwrap()
}

fn lines(app: &App) -> Vec<String> {
    app.world()
        .resource::<Heard>()
        .0
        .iter()
        .filter_map(|m| match m {
            Board::Line(Line { text, .. }) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_bevy_client_joins_and_its_connection_is_a_bevy_state() {
    let server = board_server();
    let mut ann = board_app(SwitchboardPlugin::connect(server.addr(), config("ann")));
    frames(&mut [&mut ann], |a| state(a[0]) == NetworkState::Online);
    let seen = seen(&ann);
    // Connecting from the first frame (the client starts at startup),
    // unless the welcome came before the first frame's end.
    assert!(
        seen.states == [NetworkState::Connecting, NetworkState::Online]
            || seen.states == [NetworkState::Online],
        "{:?}",
        seen.states
    );
    assert!(matches!(seen.events[0], ClientEvent::Connected));
    assert!(
        matches!(&seen.events[1], ClientEvent::Welcomed(w) if Some(w.client) == id(&ann)),
        "{:?}",
        seen.events
    );
}

#[test]
fn requests_from_systems_get_their_verdicts_as_messages_with_reasons() {
    let server = board_server();
    let mut ann = board_app(SwitchboardPlugin::connect(server.addr(), config("ann")));
    let mut bob = board_app(SwitchboardPlugin::connect(server.addr(), config("bob")));
    frames(&mut [&mut ann, &mut bob], |a| {
        a.iter().all(|a| state(a) == NetworkState::Online)
    });

    let claim = request(&mut ann, Board::Claim(1));
    assert_eq!(
        verdict(&mut [&mut ann, &mut bob], 0, claim),
        RequestStatus::Accepted
    );
    let taken = request(&mut bob, Board::Claim(1));
    assert_eq!(
        verdict(&mut [&mut ann, &mut bob], 1, taken),
        RequestStatus::Rejected("seat 1 is taken".into())
    );
    // The server's update arrives decoded, to both.
    let ann_id = id(&ann).unwrap();
    frames(&mut [&mut ann, &mut bob], |a| {
        a.iter().all(|a| {
            a.world()
                .resource::<Heard>()
                .0
                .iter()
                .any(|m| matches!(m, Board::Seats(s) if s.0.get(&1) == Some(&ann_id)))
        })
    });
}

#[test]
fn reconnect_after_a_cut_keeps_the_same_id_and_the_seat() {
    let server = board_server();
    let proxy = Proxy::start(server.addr());
    let mut ann = board_app(SwitchboardPlugin::connect(proxy.addr, config("ann")));
    frames(&mut [&mut ann], |a| state(a[0]) == NetworkState::Online);
    let before = id(&ann).unwrap();
    let claim = request(&mut ann, Board::Claim(2));
    assert_eq!(verdict(&mut [&mut ann], 0, claim), RequestStatus::Accepted);

    proxy.cut();
    frames(&mut [&mut ann], |a| {
        state(a[0]) == NetworkState::Reconnecting
    });
    frames(&mut [&mut ann], |a| state(a[0]) == NetworkState::Online);
    assert_eq!(id(&ann), Some(before), "the same id after the cut");
    let states = &seen(&ann).states;
    assert_eq!(
        &states[states.len() - 2..],
        [NetworkState::Reconnecting, NetworkState::Online]
    );
    // The seat is still this player's: claiming it again is refused so.
    let again = request(&mut ann, Board::Claim(2));
    assert_eq!(
        verdict(&mut [&mut ann], 0, again),
        RequestStatus::Rejected("you already sit there".into())
    );
}

#[test]
fn the_local_server_starts_with_the_app_and_stops_when_it_exits() {
    let options = child("child_board_server");
    let mut ann = board_app(SwitchboardPlugin::local(options, config("ann")));
    frames(&mut [&mut ann], |a| state(a[0]) == NetworkState::Online);
    let pid = {
        let net = ann.world().non_send::<Switchboard>();
        let server = net.local_server().expect("started by the plugin");
        assert!(server.addr().ip().is_loopback(), "single player: loopback");
        server.pid()
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(
        exe,
        std::env::current_exe().unwrap(),
        "the game's own executable"
    );
    let claim = request(&mut ann, Board::Say("alone".into()));
    assert_eq!(verdict(&mut [&mut ann], 0, claim), RequestStatus::Accepted);

    ann.world_mut().write_message(AppExit::Success);
    ann.update();
    assert!(ann.should_exit().is_some());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the local server stopped with the app and was waited for"
    );
    assert!(ann
        .world()
        .non_send::<Switchboard>()
        .local_server()
        .is_none());
}

#[test]
fn a_killed_local_server_is_told_to_the_game() {
    let mut ann = board_app(SwitchboardPlugin::local(
        child("child_board_server"),
        config("ann"),
    ));
    frames(&mut [&mut ann], |a| state(a[0]) == NetworkState::Online);
    let pid = ann
        .world()
        .non_send::<Switchboard>()
        .local_server()
        .unwrap()
        .pid();
    // SAFETY: kill(2) of our own child, by its pid.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    frames(&mut [&mut ann], |a| !seen(a[0]).stopped.is_empty());
    assert_eq!(seen(&ann).stopped, ["signal: 9 (SIGKILL)"]);
}

#[test]
fn a_late_frame_loses_nothing_and_keeps_the_order() {
    let server = board_server();
    let mut ann = board_app(SwitchboardPlugin::connect(server.addr(), config("ann")));
    let mut bob = board_app(SwitchboardPlugin::connect(server.addr(), config("bob")));
    frames(&mut [&mut ann, &mut bob], |a| {
        a.iter().all(|a| state(a) == NetworkState::Online)
    });
    // Bob talks while ann's game is stuck (loading, a long frame).
    let frames_in = |app: &App| {
        let net = app.world().non_send::<Switchboard>();
        net.client().map_or(0, |c| c.stats().frames_in)
    };
    let before = frames_in(&ann);
    let said: Vec<String> = (0..40).map(|i| format!("line {i}")).collect();
    let mut last = None;
    for line in &said {
        last = Some(request(&mut bob, Board::Say(line.clone())));
    }
    assert_eq!(
        verdict(&mut [&mut bob], 0, last.unwrap()),
        RequestStatus::Accepted
    );
    // Every line has reached ann's connection (read off the socket, not
    // yet taken by a frame).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while frames_in(&ann) < before + said.len() as u64 {
        assert!(
            std::time::Instant::now() < deadline,
            "the lines never arrived"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // One frame brings all of it.
    ann.update();
    assert_eq!(lines(&ann), said);
}

#[test]
fn a_system_on_entering_online_runs_once_per_welcome_resumed_ones_too() {
    // `OnEnter(NetworkState::Online)` runs once per welcome: a system there
    // sends what the game says on joining, and on coming back.
    let server = board_server();
    let proxy = Proxy::start(server.addr());
    let mut ann = board_app(SwitchboardPlugin::connect(proxy.addr, config("ann")));
    ann.add_systems(
        bevy_state::prelude::OnEnter(NetworkState::Online),
        |mut net: NonSendMut<Switchboard>| {
            net.request(Board::Say("hello from OnEnter".into()))
                .unwrap();
        },
    );
    frames(&mut [&mut ann], |a| lines(a[0]).len() == 1);
    proxy.cut();
    frames(&mut [&mut ann], |a| lines(a[0]).len() == 2);
    assert_eq!(lines(&ann), ["hello from OnEnter", "hello from OnEnter"]);
    let welcomes = seen(&ann)
        .events
        .iter()
        .filter(|e| matches!(e, ClientEvent::Welcomed(_)))
        .count();
    assert_eq!(welcomes, 2);
}

#[test]
fn a_refused_client_is_disconnected_with_the_reason() {
    // A hosted game with a password: this app hosts it (the child on every
    // interface), a second app without the password is refused, for good.
    let options = switchboard::LocalServerOptions {
        scope: switchboard::BindScope::AllInterfaces,
        password: Some("swordfish".into()),
        ..child("child_board_server")
    };
    let host_config = switchboard::ClientConfig {
        password: Some("swordfish".into()),
        ..config("host")
    };
    let mut host = board_app(SwitchboardPlugin::local(options, host_config));
    frames(&mut [&mut host], |a| state(a[0]) == NetworkState::Online);
    let port = host
        .world()
        .non_send::<Switchboard>()
        .local_server()
        .unwrap()
        .port();
    let mut guest = board_app(SwitchboardPlugin::connect(
        format!("127.0.0.1:{port}"),
        config("guest"),
    ));
    frames(&mut [&mut host, &mut guest], |a| {
        state(a[1]) == NetworkState::Disconnected
    });
    let refused = seen(&guest).events.iter().find_map(|e| match e {
        ClientEvent::Refused(refused) => Some(refused.reason.clone()),
        _ => None,
    });
    assert!(
        refused.as_deref().is_some_and(|r| r.contains("password")),
        "{:?}",
        seen(&guest).events
    );
}
