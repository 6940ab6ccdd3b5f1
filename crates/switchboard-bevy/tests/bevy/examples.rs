//! The examples run as their docs say: the headless board client plays
//! against a real board server process, and the room game's demo (a host
//! with its own server as a child process, and a guest) shows each player
//! the other's ship moving.

use std::path::PathBuf;
use std::process::Command;

use crate::common::WAIT;
use switchboard::{ClientConfig, NetworkClient, RequestStatus};
use switchboard_server::board::Board;

fn example(name: &str) -> PathBuf {
    // `cargo test` builds the examples next to the test binaries.
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(path.exists(), "{} (built by cargo test)", path.display());
    path
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_bevy_board_client_takes_a_free_seat_and_hears_why_a_taken_one_is_refused() {
    let server = crate::support::board_server();
    let addr = server.addr().to_string();
    // Someone sits at seat 1 already.
    let mut holder = NetworkClient::connect(&addr, ClientConfig::named("zoe"));
    let ticket = holder.request(Board::Claim(1)).unwrap();
    assert_eq!(holder.wait(ticket, WAIT), RequestStatus::Accepted);

    let ann = run(Command::new(example("board_client")).args([&addr, "ann"]));
    assert!(ann.contains("seat 1: seat 1 is taken"), "{ann}");
    assert!(ann.contains("seat 2: mine"), "{ann}");
    assert!(ann.contains("board: seat_2 = ann"), "{ann}");
    assert!(ann.contains("ann: ann sits at 2"), "{ann}");
    // Ann's app said goodbye as it exited: her seat is free at once, not
    // held through the server's grace period.
    let bob = run(Command::new(example("board_client")).args([&addr, "bob"]));
    assert!(bob.contains("seat 2: mine"), "{bob}");
}

#[test]
fn the_room_game_demo_shows_each_player_the_others_ship_moving() {
    let out = run(Command::new(example("room_game")).args(["--seconds", "2.5"]));
    for (who, whose) in [("ann", "bob"), ("bob", "ann")] {
        let seen: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with(&format!("{who} sees {whose}'s ship at")))
            .collect();
        assert!(
            seen.len() >= 3,
            "{who} saw {whose}'s ship too rarely:\n{out}"
        );
        let distinct: std::collections::HashSet<&str> = seen
            .iter()
            .map(|l| &l[..l.find(" heading").unwrap()])
            .collect();
        assert!(
            distinct.len() >= 3,
            "{whose}'s ship did not move for {who}:\n{out}"
        );
    }
}
