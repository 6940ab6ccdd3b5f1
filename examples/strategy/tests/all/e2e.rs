//! End to end with real processes: the `strategy` binary as single-player
//! game, as hosted server with a lobby, and as scenario editor.
//!
//! Longer than 500 lines on purpose: the reference game end to end in one place, one test per
//! scenario sharing the helpers at the top; split, they would repeat them.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use strategy::protocol::{GameAct, LobbyAct, Move};
use strategy::scenario::{NationId, UnitId};
use switchboard::process::{LocalServer, LocalServerOptions, ServerProgram};
use switchboard::socket::BindScope;
use switchboard::RequestStatus;

#[path = "../netem/mod.rs"]
mod netem;
use crate::player;
use crate::proxy;
use crate::scratch;
use player::{Player, WAIT};
use proxy::Proxy;
use scratch::Scratch;

const BIN: &str = env!("CARGO_BIN_EXE_strategy");

fn temp_dir(tag: &str) -> Scratch {
    Scratch::new(&format!("e2e-{tag}"))
}

fn server(args: &[&str], scope: BindScope) -> LocalServer {
    LocalServer::spawn(LocalServerOptions {
        program: ServerProgram::Path(BIN.into()),
        args: args.iter().map(|a| a.to_string()).collect(),
        scope,
        ..LocalServerOptions::default()
    })
    .unwrap()
}

fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| stat.contains(") Z"))
}

#[test]
fn single_player_plays_scripted_turns_and_leaves_no_process() {
    let saves = temp_dir("single");
    let output = Command::new(BIN)
        .args(["--bot", "3", "--scenario", "valley", "--saves"])
        .arg(&*saves)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("bot finished at turn 4 (started at 1)"),
        "{stdout}"
    );
    assert!(stdout.contains("turn 3 done"), "{stdout}");
    let pid: u32 = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("server pid ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .expect("the game printed its server's pid");
    assert!(gone(pid), "no server process left after the game quit");
}

#[test]
fn invalid_order_is_rejected_with_its_reason_and_not_applied() {
    let saves = temp_dir("invalid");
    let server = server(
        &["--scenario", "valley", "--saves", saves.to_str().unwrap()],
        BindScope::Loopback,
    );
    let mut ann = Player::join(server.addr(), "ann");
    assert_eq!(ann.view().you, Some(NationId(0)));
    let infantry = ann.view().unit_at(1, 3).unwrap().id;
    let too_far = Move {
        unit: infantry,
        x: 5,
        y: 3,
    };
    match ann.ask(GameAct::Move(too_far)) {
        RequestStatus::Rejected(reason) => {
            assert!(reason.contains("not enough movement"), "{reason}")
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    let into_the_river = Move {
        unit: UnitId(999),
        x: 2,
        y: 3,
    };
    assert_eq!(
        ann.ask(GameAct::Move(into_the_river)),
        RequestStatus::Rejected("no such unit".into())
    );
    // A valid order afterwards: the view it brings shows the unit unmoved.
    assert_eq!(ann.ask(GameAct::Claim(infantry)), RequestStatus::Accepted);
    let unit = *ann.view().units.iter().find(|u| u.id == infantry).unwrap();
    assert_eq!(
        (unit.x, unit.y),
        (1, 3),
        "the rejected move changed nothing"
    );
    assert_eq!(ann.view().tile(1, 3).unwrap().owner, Some(NationId(0)));
}

#[test]
fn fog_of_war_hides_what_the_nation_cannot_see() {
    let saves = temp_dir("fog");
    let server = server(
        &["--scenario", "valley", "--saves", saves.to_str().unwrap()],
        BindScope::Loopback,
    );
    let ann = Player::join(server.addr(), "ann");
    let view = ann.view();
    assert!(view.tile(1, 3).is_some());
    assert!(view.tile(11, 4).is_none(), "Blue's home is in the fog");
    assert!(view.tile(10, 4).is_none(), "so is Blue's army");
    assert!(
        view.units.iter().all(|u| u.nation == NationId(0)),
        "no enemy unit in sight: {:?}",
        view.units
    );
    let seen = view.tiles.iter().filter(|t| t.is_some()).count();
    assert!(
        seen < view.tiles.len() / 2,
        "most of the map is fogged ({seen} of {} seen)",
        view.tiles.len()
    );
}

#[test]
fn editor_creates_a_scenario_file_that_a_server_then_loads() {
    let dir = temp_dir("editor");
    let file = dir.join("test-land.swst");
    let script = "new 6 4 Test Land; nation Ann; nation Bot ai; terrain 3 0 water; \
                  unit 0 infantry 0 0; unit 1 cavalry 5 3; owner 0 0 0; validate; save";
    let output = Command::new(BIN)
        .arg("--edit")
        .arg(&file)
        .args(["--script", script])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The editor needed no server: it wrote the file alone.
    assert!(file.exists());

    let server = server(
        &[
            "--scenario",
            file.to_str().unwrap(),
            "--saves",
            dir.to_str().unwrap(),
        ],
        BindScope::Loopback,
    );
    let ann = Player::join(server.addr(), "ann");
    let view = ann.view();
    assert_eq!(view.scenario, "Test Land");
    assert_eq!((view.width, view.height), (6, 4));
    assert_eq!(view.nations.len(), 2);

    // A broken file is refused with a clear error, never a panic.
    let broken = dir.join("broken.swst");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&broken, &bytes[..bytes.len() - 3]).unwrap();
    let output = Command::new(BIN)
        .args(["--bot", "1", "--scenario"])
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("truncated"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn saves_and_loads_by_name_never_by_path() {
    let saves = temp_dir("saves");
    let server = server(
        &["--scenario", "valley", "--saves", saves.to_str().unwrap()],
        BindScope::Loopback,
    );
    let mut ann = Player::join(server.addr(), "ann");
    let infantry = ann.view().unit_at(1, 3).unwrap().id;
    assert_eq!(ann.ask(GameAct::Claim(infantry)), RequestStatus::Accepted);
    assert_eq!(
        ann.ask(GameAct::Save("slot-1".to_string())),
        RequestStatus::Accepted
    );
    assert!(saves.join("slot-1.swst").exists());
    for evil in ["../escape", "/etc/passwd", "a b"] {
        assert!(
            matches!(
                ann.ask(GameAct::Save(evil.to_string())),
                RequestStatus::Rejected(_)
            ),
            "{evil}"
        );
    }
    assert!(matches!(
        ann.ask(GameAct::Load("nothing-here".to_string())),
        RequestStatus::Rejected(_)
    ));
    assert_eq!(
        ann.ask(GameAct::Load("slot-1".to_string())),
        RequestStatus::Accepted
    );
    assert_eq!(
        ann.view().tile(1, 3).unwrap().owner,
        Some(NationId(0)),
        "the loaded game has the claim"
    );
}

/// A TCP forwarder whose connections can be cut, like a network failure.
fn hosted(tag: &str) -> (LocalServer, Scratch) {
    let saves = temp_dir(tag);
    let server = server(
        &[
            "--scenario",
            "valley",
            "--lobby",
            "--saves",
            saves.to_str().unwrap(),
        ],
        BindScope::AllInterfaces,
    );
    (server, saves)
}

/// Both players pick, ready up, and the host starts.
fn lobby_start(ann: &mut Player, bob: &mut Player) {
    assert_eq!(
        ann.ask(LobbyAct::Pick(NationId(0))),
        RequestStatus::Accepted
    );
    assert_eq!(
        bob.ask(LobbyAct::Pick(NationId(0))),
        RequestStatus::Rejected("that nation is taken".into())
    );
    assert_eq!(
        bob.ask(LobbyAct::Pick(NationId(1))),
        RequestStatus::Accepted
    );
    assert_eq!(ann.ask(LobbyAct::Ready(true)), RequestStatus::Accepted);
    assert_eq!(
        ann.ask(LobbyAct::Start),
        RequestStatus::Rejected("bob is not ready".into())
    );
    assert_eq!(
        bob.ask(LobbyAct::Start),
        RequestStatus::Rejected("only the host starts the game".into())
    );
    assert_eq!(bob.ask(LobbyAct::Ready(true)), RequestStatus::Accepted);
    assert_eq!(ann.ask(LobbyAct::Start), RequestStatus::Accepted);
    bob.until_playing(1);
    assert!(ann.lobby.borrow().as_ref().unwrap().started);
}

#[test]
fn hosted_game_lobby_then_a_dropped_player_comes_back_to_the_same_nation() {
    let (server, _saves) = hosted("host");
    let proxy = Proxy::start(server.addr());
    let mut ann = Player::join(server.addr(), "ann");
    let mut bob = Player::join(proxy.addr, "bob");
    assert_eq!(
        bob.view().you,
        None,
        "no nation before the lobby starts the game"
    );
    lobby_start(&mut ann, &mut bob);
    let id = bob.client.client_id();

    proxy.cut();
    bob.until(|p| !p.client.is_welcomed());
    bob.until(|p| p.client.is_welcomed());
    assert_eq!(bob.client.client_id(), id, "same id after the reconnect");
    bob.until_playing(1);
    let cavalry = bob.view().unit_at(10, 3).unwrap().id;
    assert_eq!(
        bob.ask(GameAct::Claim(cavalry)),
        RequestStatus::Accepted,
        "bob still commands Blue"
    );
}

#[test]
fn a_disconnected_player_never_stalls_the_turn() {
    let (server, _saves) = hosted("stall");
    let proxy = Proxy::start(server.addr());
    let mut ann = Player::join(server.addr(), "ann");
    let mut bob = Player::join(proxy.addr, "bob");
    lobby_start(&mut ann, &mut bob);
    // Bob's line goes dead and his client is not polled, so it does not come
    // back: his nation must not hold up the turn.
    proxy.cut();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ann.ask(GameAct::EndTurn), RequestStatus::Accepted);
    ann.until(|p| p.view.borrow().as_ref().is_some_and(|v| v.turn == 2));
    assert!(Path::new(BIN).exists());
}

#[test]
fn dedicated_server_with_two_bots_joining_by_address_one_over_quic() {
    let saves = temp_dir("dedicated");
    let mut server = Command::new(BIN)
        .args(["--serve", "--port", "0", "--quic-port", "0", "--saves"])
        .arg(&*saves)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(server.stdout.take().unwrap());
    let (mut port, mut quic) = (None, None);
    for line in std::io::BufRead::lines(stdout).map_while(Result::ok) {
        if let Some(ready) = line.strip_prefix("SWITCHBOARD READY 1 ") {
            port = ready.trim().parse::<u16>().ok();
        }
        if let Some(url) = line.strip_prefix("QUIC clients: ") {
            quic = Some(url.to_string());
        }
        if port.is_some() && quic.is_some() {
            break;
        }
    }
    let port = port.expect("ready line");
    let quic = quic.expect("the QUIC line");
    let addr = format!("127.0.0.1:{port}");
    // Whichever bot joins first hosts, and starts the game once both are
    // seated and ready.
    let host = Command::new(BIN)
        .args([
            "--join",
            &addr,
            "--name",
            "ann",
            "--text",
            "--bot",
            "2",
            "--players",
            "2",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let guest = Command::new(BIN)
        .args([
            "--join",
            &quic,
            "--name",
            "bob",
            "--text",
            "--bot",
            "2",
            "--players",
            "2",
        ])
        .output()
        .unwrap();
    let host = host.wait_with_output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    for (who, output) in [("ann", &host), ("bob", &guest)] {
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{who}: {text}");
        assert!(text.contains("bot finished at turn 3"), "{who}: {text}");
    }
    let both = format!(
        "{}{}",
        String::from_utf8_lossy(&host.stdout),
        String::from_utf8_lossy(&guest.stdout)
    );
    assert!(
        both.contains("you are Red") && both.contains("you are Blue"),
        "{both}"
    );
}

#[test]
fn host_and_two_joined_players_one_drops_and_gets_its_nation_back() {
    let saves = temp_dir("three");
    let server = server(
        &[
            "--scenario",
            "islands",
            "--lobby",
            "--saves",
            saves.to_str().unwrap(),
        ],
        BindScope::AllInterfaces,
    );
    let proxy = Proxy::start(server.addr());
    let mut host = Player::join(server.addr(), "host");
    let mut bob = Player::join(proxy.addr, "bob");
    let mut cat = Player::join(server.addr(), "cat");
    for (player, nation) in [(&mut host, 0u8), (&mut bob, 1), (&mut cat, 2)] {
        assert_eq!(
            player.ask(LobbyAct::Pick(NationId(nation))),
            RequestStatus::Accepted
        );
        assert_eq!(player.ask(LobbyAct::Ready(true)), RequestStatus::Accepted);
    }
    assert_eq!(host.ask(LobbyAct::Start), RequestStatus::Accepted);
    for (player, nation) in [(&mut bob, 1u8), (&mut cat, 2)] {
        player.until_playing(nation);
    }
    // Bob's line drops mid-game; the others play on; he comes back as East.
    proxy.cut();
    bob.until(|p| !p.client.is_welcomed());
    assert_eq!(host.ask(GameAct::EndTurn), RequestStatus::Accepted);
    bob.until(|p| p.client.is_welcomed());
    bob.until_playing(1);
    let unit = bob.unit_of(1);
    assert_eq!(bob.ask(GameAct::Claim(unit)), RequestStatus::Accepted);
    assert_eq!(cat.view().you, Some(NationId(2)));
}

/// Runs the game with `args` plus `--master` (a master in this process)
/// until the master lists a strategy server, and returns the list.
async fn listed_through_a_master(tag: &str, args: &[&str]) -> Vec<switchboard_master::Listed> {
    use switchboard_master::{self as master, Filter, MasterServer};
    let master = MasterServer::builder().spawn().unwrap();
    let master_addr = master.local_addr().to_string();
    let saves = temp_dir(tag);
    let mut game = Command::new(BIN)
        .args(args)
        .args(["--master", &master_addr, "--saves"])
        .arg(&*saves)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(saves.join("game.log")).unwrap())
        .spawn()
        .unwrap();
    let filter = Filter {
        game_type: Some("strategy".into()),
        not_full: true,
        ..Filter::default()
    };
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let listed = master::fetch_list(master.local_addr(), filter.clone(), WAIT)
            .await
            .unwrap();
        if !listed.is_empty() || Instant::now() > deadline {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = game.kill();
    let _ = game.wait();
    listed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedicated_server_is_found_through_a_master_server() {
    let args = ["--serve", "--port", "0", "--name", "Valley Wars"];
    let listed = listed_through_a_master("listed", &args).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].info.name, "Valley Wars");
    assert_eq!(listed[0].info.scenario, "The Valley");
    assert!(listed[0].info.dedicated);
}

/// The hosted game's server is a child process: the listing reaches it
/// through its environment (`LocalServerOptions::env`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_game_is_found_through_a_master_server() {
    let args = [
        "--host",
        "--name",
        "ann",
        "--bot",
        "1",
        "--players",
        "2",
        "--text",
    ];
    let listed = listed_through_a_master("hosted-listed", &args).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].info.name, "ann");
    assert!(!listed[0].info.dedicated);
}

#[test]
fn hosted_game_takes_a_websocket_player_beside_a_tcp_player() {
    let saves = temp_dir("ws");
    // A free port for the child's WebSocket listener: found free, then
    // closed, so another test may take it before the child binds it; then
    // the child fails to start, and another port is tried.
    let (host, ws_port) = (0..5)
        .find_map(|_| {
            let ws_port = std::net::TcpListener::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port()
                .to_string();
            let args = [
                "--scenario",
                "valley",
                "--lobby",
                "--saves",
                saves.to_str().unwrap(),
                "--ws-port",
                &ws_port,
            ];
            let spawned = LocalServer::spawn(LocalServerOptions {
                program: ServerProgram::Path(BIN.into()),
                args: args.iter().map(|a| a.to_string()).collect(),
                scope: BindScope::AllInterfaces,
                ..LocalServerOptions::default()
            });
            match spawned {
                Ok(host) => Some((host, ws_port)),
                Err(err) if err.to_string().contains("Address already in use") => None,
                Err(err) => panic!("{err}"),
            }
        })
        .expect("a free WebSocket port in five tries");
    let mut ann = Player::join(host.addr(), "ann");
    let mut bob = Player::join(format!("ws://127.0.0.1:{ws_port}/"), "bob");
    lobby_start(&mut ann, &mut bob);
    // One game, started by the TCP host with the WebSocket player ready:
    // each plays its own nation.
    assert_eq!(ann.view().you, Some(NationId(0)));
    assert_eq!(bob.view().you, Some(NationId(1)));
    host.shutdown().unwrap();
}
