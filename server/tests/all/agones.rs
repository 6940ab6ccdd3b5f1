//! `--agones`: real server processes against a fake Agones SDK server over
//! real gRPC (`switchboard_agones::fake`).

use std::process::Command;
use std::time::{Duration, Instant};

use switchboard::{ClientConfig, NetworkClient};
use switchboard_agones::fake::{FakeSdk, GameServerSetup, Seen};

use crate::support::{self, Proc};

const WAIT: Duration = Duration::from_secs(15);

/// A fake sidecar on its own runtime, and the server command pointed at it.
struct Fleet {
    runtime: tokio::runtime::Runtime,
    sdk: FakeSdk,
}

impl Fleet {
    fn new(setup: GameServerSetup) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let sdk = runtime.block_on(FakeSdk::start(setup)).unwrap();
        Self { runtime, sdk }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(support::BIN);
        command
            .args(args)
            .arg("--agones")
            .env("AGONES_SDK_GRPC_PORT", self.sdk.port().to_string());
        command
    }

    fn start(&self, args: &[&str]) -> (Proc, u16) {
        let mut command = self.command(args);
        command.args(["--port", "0"]);
        support::start_command(command)
    }

    /// Started with a fast health interval (0.2 s): what the test shows
    /// does not need Agones's 2 s.
    fn start_fast(&self, args: &[&str]) -> (Proc, u16) {
        let mut command = self.command(args);
        command.args(["--port", "0", "--agones-health-secs", "0.2"]);
        support::start_command(command)
    }

    fn wait_for(&self, what: &str, done: impl Fn(&Seen) -> bool) -> Seen {
        self.runtime
            .block_on(self.sdk.wait_for(WAIT, done))
            .unwrap_or_else(|seen| panic!("{what}: not in time; the sidecar saw {seen:?}"))
    }
}

fn players_and_rooms() -> GameServerSetup {
    GameServerSetup {
        lists: vec![("players".into(), 100)],
        counters: vec![("rooms".into(), 0)],
        ..GameServerSetup::default()
    }
}

fn welcomed(port: u16, name: &str) -> NetworkClient {
    let mut client = NetworkClient::connect(format!("127.0.0.1:{port}"), ClientConfig::named(name));
    support::wait_until("welcome", WAIT, || {
        client.poll();
        client.is_welcomed()
    });
    client
}

fn exit_status(proc: &mut Proc, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = proc.0.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "{what}: the server did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn without_a_sidecar_agones_fails_at_start_with_a_clear_error() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let out = Command::new(support::BIN)
        .args(["--agones", "--agones-connect-secs", "0.5", "--port", "0"])
        .env("AGONES_SDK_GRPC_PORT", port.to_string())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no Agones SDK server answered"), "{stderr}");
    assert!(stderr.contains("sidecar"), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("SWITCHBOARD READY"),
        "it never listened"
    );
}

#[test]
fn a_server_whose_ready_agones_refuses_stops_and_exits_1() {
    let fleet = Fleet::new(GameServerSetup::default());
    fleet.sdk.refuse_ready();
    let (mut server, _port) = fleet.start(&[]);
    let status = exit_status(&mut server, "Ready refused");
    assert_eq!(status.code(), Some(1));
}

#[test]
fn ready_after_listening_then_health_every_two_seconds() {
    let fleet = Fleet::new(GameServerSetup::default());
    let (_server, port) = fleet.start(&[]);
    let seen = fleet.wait_for("Ready", |s| s.ready == 1);
    assert_eq!(seen.state, "Ready");
    // Ready came after the port listened: a player gets in at once.
    let _player = welcomed(port, "ann");
    let seen = fleet.wait_for("two health pings", |s| s.health.len() >= 2);
    let gaps: Vec<Duration> = seen.health.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter()
            .all(|gap| *gap > Duration::from_millis(1500) && *gap < Duration::from_millis(3500)),
        "Health every 2 s: {gaps:?}"
    );
}

#[test]
fn health_stops_while_the_server_is_stuck_and_resumes() {
    let fleet = Fleet::new(GameServerSetup::default());
    let (server, _port) = fleet.start_fast(&[]);
    fleet.wait_for("first health", |s| !s.health.is_empty());
    // The whole process stuck (its runtime, its loop and all) for ten
    // health intervals.
    support::signal(&server.0, libc::SIGSTOP);
    let stuck_at = Instant::now();
    let pings = fleet.sdk.seen().health.len();
    std::thread::sleep(Duration::from_secs(2));
    let seen = fleet.sdk.seen();
    assert!(
        seen.health.len() <= pings + 1,
        "at most one ping already on its way: {} then {}",
        pings,
        seen.health.len()
    );
    support::signal(&server.0, libc::SIGCONT);
    let seen = fleet.wait_for("health again", |s| s.health.len() > pings + 1);
    assert!(seen.longest_health_gap(stuck_at) >= Duration::from_millis(1800));
}

#[test]
fn players_and_rooms_counted_as_they_come_and_go() {
    let fleet = Fleet::new(players_and_rooms());
    let (_server, port) = fleet.start_fast(&["rooms"]);
    fleet.wait_for("Ready", |s| s.ready == 1);
    let seen = fleet.wait_for("the rooms capacity", |s| s.counters["rooms"].1 == 1000);
    assert_eq!(seen.counters["rooms"].0, 0);
    let mut ann = welcomed(port, "ann");
    let mut bob = switchboard_rooms::RoomClient::connect(
        format!("127.0.0.1:{port}"),
        ClientConfig::named("bob"),
    );
    support::wait_until("bob welcomed", WAIT, || {
        bob.poll();
        bob.client().is_welcomed()
    });
    let seen = fleet.wait_for("two players listed", |s| s.lists["players"].len() == 2);
    // A first player on a Ready server: it allocated itself.
    assert_eq!(seen.state, "Allocated");
    assert_eq!(seen.allocate, 1);
    let ids = [&ann, bob.client()].map(|c| c.client_id().expect("welcomed").to_string());
    let mut listed = seen.lists["players"].clone();
    listed.sort();
    let mut expected = ids.to_vec();
    expected.sort();
    assert_eq!(listed, expected, "listed by their ids");
    let room = switchboard_rooms::CreateRoom {
        name: "duel".into(),
        max_players: 2,
        metadata: Default::default(),
        private: false,
    };
    let ticket = bob.create(&room).unwrap();
    assert!(bob.wait(ticket, WAIT).is_accepted());
    fleet.wait_for("one room counted", |s| s.counters["rooms"].0 == 1);
    ann.close("bye");
    let seen = fleet.wait_for("ann unlisted", |s| s.lists["players"] == [ids[1].clone()]);
    assert_eq!(seen.shutdown, 0, "one player left: the match goes on");
}

#[test]
fn allocated_then_empty_for_the_set_time_it_shuts_down_and_exits() {
    let fleet = Fleet::new(GameServerSetup::default());
    let (mut server, _port) = fleet.start_fast(&["--agones-empty-shutdown", "1"]);
    fleet.wait_for("Ready", |s| s.ready == 1);
    fleet
        .sdk
        .allocate(&[("switchboard.dev/scenario", "islands")]);
    let seen = fleet.wait_for("Shutdown", |s| s.shutdown == 1);
    assert_eq!(seen.state, "Shutdown");
    assert!(exit_status(&mut server, "after Shutdown").success());
}

#[test]
fn a_relay_counts_its_players_in_a_label() {
    let fleet = Fleet::new(GameServerSetup::default());
    let (_relay, port) = fleet.start_fast(&["relay"]);
    fleet.wait_for("Ready", |s| s.ready == 1);
    fleet.wait_for("no player yet", |s| {
        s.labels.get("agones.dev/sdk-players").map(String::as_str) == Some("0")
    });
    let bots = Command::new(support::BIN)
        .args(["bots", "--count", "2", "--rate", "1", "--seconds", "60"])
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _bots = Proc(bots);
    let seen = fleet.wait_for("two players", |s| {
        s.labels.get("agones.dev/sdk-players").map(String::as_str) == Some("2")
    });
    assert_eq!(seen.state, "Allocated", "a first player allocates");
}

#[test]
fn sigterm_drains_tells_the_players_and_exits_zero() {
    let fleet = Fleet::new(GameServerSetup::default());
    let (mut server, port) = fleet.start(&[]);
    fleet.wait_for("Ready", |s| s.ready == 1);
    let mut player = welcomed(port, "ann");
    let reason = std::rc::Rc::new(std::cell::RefCell::new(None));
    let heard = reason.clone();
    player
        .signals()
        .disconnected
        .connect(move |why| *heard.borrow_mut() = Some(why.to_string()));
    support::signal(&server.0, libc::SIGTERM);
    assert!(exit_status(&mut server, "SIGTERM").success());
    support::wait_until("the player told", WAIT, || {
        player.poll();
        reason.borrow().is_some()
    });
    let reason = reason.borrow().clone().unwrap();
    assert!(reason.contains("server shutting down"), "{reason}");
}

#[test]
fn the_matchmaker_places_a_new_room_on_the_rooms_server_agones_allocates() {
    use switchboard_agones::allocator::AllocatedServer;
    use switchboard_agones::fake::{FakeAllocator, FakePki};

    let redis = switchboard_redis::testing::RedisProcess::start().unwrap();
    // Agones mapped the rooms server's game port: it advertises the
    // node's address and that port in the room directory.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let game_port = free.local_addr().unwrap().port();
    drop(free);
    let fleet = Fleet::new(GameServerSetup {
        ports: vec![("game".into(), i32::from(game_port))],
        ..players_and_rooms()
    });
    let mut rooms = fleet.command(&["rooms", "--redis", &redis.url()]);
    rooms.args(["--port", &game_port.to_string()]);
    let (_rooms, port) = support::start_command(rooms);
    assert_eq!(port, game_port);
    let dir = tempfile::tempdir().unwrap();
    let pki = FakePki::write(dir.path()).unwrap();
    let allocated = AllocatedServer {
        name: "switchboard-rooms-x7k2p".into(),
        address: "127.0.0.1".into(),
        ports: [("game".to_string(), game_port)].into(),
    };
    let allocator = fleet
        .runtime
        .block_on(FakeAllocator::start(&pki, vec![allocated]))
        .unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (_matchmaker, matchmaker_port) = support::start(&[
        "matchmaker",
        "--port",
        "0",
        "--redis",
        &redis.url(),
        "--agones-allocator",
        &allocator.url(),
        "--agones-allocator-ca",
        &path(&pki.ca),
        "--agones-allocator-cert",
        &path(&pki.client.0),
        "--agones-allocator-key",
        &path(&pki.client.1),
    ]);
    let matchmaker = format!("127.0.0.1:{matchmaker_port}").parse().unwrap();
    let seat = fleet
        .runtime
        .block_on(switchboard_rooms::directory::reserve_new_room(
            matchmaker, WAIT,
        ))
        .expect("a seat on the allocated server");
    assert_eq!(seat.addr, format!("127.0.0.1:{game_port}"));
    let mut host = switchboard_rooms::RoomClient::connect(&seat.addr, ClientConfig::named("ann"));
    let room = switchboard_rooms::CreateRoom {
        name: "final".into(),
        max_players: 2,
        metadata: Default::default(),
        private: false,
    };
    support::wait_until("ann welcomed", WAIT, || {
        host.poll();
        host.client().is_welcomed()
    });
    let ticket = host.create_reserved(&seat.reservation, &room).unwrap();
    assert!(host.wait(ticket, WAIT).is_accepted());
    assert_eq!(allocator.asked().len(), 1);
    fleet.wait_for("the room counted", |s| s.counters["rooms"].0 == 1);
}
