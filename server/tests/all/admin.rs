//! The admin server of real `switchboard-server` processes (the relay and
//! the board game): started with `--admin-port` and a token file, used over
//! HTTP, stopped with the process.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use switchboard::{ClientConfig, ClientEvent, CloseCode, DisconnectReason, NetworkClient};

/// One HTTP/1.1 request on a fresh connection: (status, body).
fn request(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let (status, body) = support::http(addr, method, path, token, body);
    (status, String::from_utf8(body).unwrap())
}

fn get(addr: &str, path: &str) -> (u16, String) {
    request(addr, "GET", path, None, "")
}

/// A server process started with `args`, an admin port and a token file
/// ("t0ken-t0ken-t0ken"); killed when dropped.
struct Server {
    _proc: support::Proc,
    port: u16,
    admin: String,
    dir: std::path::PathBuf,
}

impl Server {
    fn start(name: &str, args: &[&str]) -> Server {
        let dir = std::env::temp_dir().join(format!("sb-admin-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::write(&token, "t0ken-t0ken-t0ken\n").unwrap();
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        all.extend(
            ["--port", "0", "--admin-port", "0", "--admin-token-file"].map(std::ffi::OsStr::new),
        );
        all.push(token.as_os_str());
        let (proc, port, admin) = support::start_with_admin(&all);
        Server {
            _proc: proc,
            port,
            admin,
            dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn relay_process_serves_its_admin_api_and_metrics_on_the_port_asked() {
    let relay = Server::start("relay", &["relay", "--bind", "loopback"]);
    let (status, body) = get(&relay.admin, "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains("switchboard_up{mode=\"relay\"} 1\n"),
        "{body}"
    );
    assert!(body.contains("switchboard_relay_players 0\n"), "{body}");
    assert!(
        body.contains("# TYPE process_resident_memory_bytes gauge\n"),
        "{body}"
    );
    assert!(
        body.contains("# TYPE process_cpu_seconds_total counter\n"),
        "{body}"
    );
    let (status, body) = get(&relay.admin, "/api/overview");
    assert_eq!(status, 200);
    assert!(body.contains("\"mode\":\"relay\""), "{body}");
}

#[test]
fn board_process_admin_shows_a_player_with_its_traffic_and_kicks_it_for_good() {
    let board = Server::start("board", &[]);
    let admin = board.admin.as_str();
    let addr = format!("127.0.0.1:{}", board.port);
    let mut ann = NetworkClient::connect(addr, ClientConfig::named("ann"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ann.is_welcomed() {
        assert!(Instant::now() < deadline, "ann welcomed");
        ann.poll_timeout(Duration::from_millis(20));
    }
    let id = ann.client_id().unwrap().to_string();
    let (status, clients) = get(admin, "/api/clients");
    assert_eq!(status, 200);
    let clients: serde_json::Value = serde_json::from_str(&clients).unwrap();
    let row = clients
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id.as_str())
        .unwrap_or_else(|| panic!("ann in {clients}"));
    assert_eq!(row["name"], "ann");
    assert!(row["messages_in"].as_u64().unwrap() >= 1, "{row}");
    let (_, metrics) = get(admin, "/metrics");
    assert!(
        metrics.contains("switchboard_up{mode=\"board\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE switchboard_manager_clients gauge\n"),
        "{metrics}"
    );
    assert!(metrics.contains("switchboard_manager_request_duration_seconds_count 0\n"));
    // Kicked: told why, and it does not come back.
    let path = format!("/api/clients/{id}/kick");
    let (status, body) = request(
        admin,
        "POST",
        &path,
        Some("t0ken-t0ken-t0ken"),
        r#"{"reason":"be nice"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let reason = loop {
        assert!(Instant::now() < deadline, "ann disconnected");
        let events: Vec<ClientEvent> = ann.drain_timeout(Duration::from_millis(20)).collect();
        if let Some(reason) = events.into_iter().find_map(|e| match e {
            ClientEvent::Disconnected(reason) => Some(reason),
            _ => None,
        }) {
            break reason;
        }
    };
    let kicked = DisconnectReason::ClosedByPeer {
        code: CloseCode::KICKED,
        reason: "be nice".into(),
    };
    assert_eq!(reason, kicked);
    // (Only ann's absence is checked: another test's client may reach this
    // port, reused by the system, at any moment.)
    let (_, clients) = get(admin, "/api/clients");
    assert!(!clients.contains(&id), "{clients}");
    // The log tail has it all, and filters.
    let (status, log) = get(admin, "/api/log");
    assert_eq!(status, 200);
    assert!(log.contains("joined as \\\"ann\\\""), "{log}");
    let (_, warnings) = get(admin, "/api/log?level=warn&q=kicked");
    let warnings: serde_json::Value = serde_json::from_str(&warnings).unwrap();
    assert_eq!(warnings.as_array().unwrap().len(), 1, "{warnings}");
    let text = warnings[0]["text"].as_str().unwrap();
    assert!(text.contains("kicked by the operator: be nice"), "{text}");
}

#[test]
fn rooms_process_admin_shows_its_rooms_with_members_ready_and_entities() {
    let rooms = Server::start("rooms", &["rooms", "--bind", "loopback"]);
    let addr = format!("127.0.0.1:{}", rooms.port);
    let mut ann = switchboard_rooms::RoomClient::connect(addr, ClientConfig::named("ann"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let until = |ann: &mut switchboard_rooms::RoomClient,
                 what: &str,
                 done: &dyn Fn(&switchboard_rooms::RoomClient) -> bool| {
        while !done(ann) {
            assert!(Instant::now() < deadline, "{what}");
            ann.poll_timeout(Duration::from_millis(20));
        }
    };
    until(&mut ann, "welcomed", &|a| a.client().is_welcomed());
    let room = switchboard_rooms::CreateRoom {
        name: "duel".into(),
        max_players: 2,
        metadata: Default::default(),
        private: false,
    };
    ann.create(&room).unwrap();
    until(&mut ann, "in the room", &|a| a.room().is_some());
    ann.set_ready(true).unwrap();
    ann.spawn("tank", &1u32).unwrap();
    until(&mut ann, "ready with a tank", &|a| {
        a.room()
            .is_some_and(|r| r.players[0].ready && r.entities.len() == 1)
    });
    let (status, places) = get(&rooms.admin, "/api/places");
    assert_eq!(status, 200);
    let places: serde_json::Value = serde_json::from_str(&places).unwrap();
    let place = &places[0];
    assert_eq!(place["name"], "#1 duel", "{places}");
    let id = ann.client().client_id().unwrap().to_string();
    assert_eq!(place["members"], serde_json::json!([id]));
    let facts: Vec<(String, String)> = serde_json::from_value(place["facts"].clone()).unwrap();
    for fact in [
        ("players", "1/2"),
        ("host", "ann"),
        ("ready", "ann"),
        ("started", "no"),
        ("entities", "1"),
    ] {
        assert!(
            facts.contains(&(fact.0.into(), fact.1.into())),
            "{fact:?} in {facts:?}"
        );
    }
    // The clients table names the room.
    let (_, clients) = get(&rooms.admin, "/api/clients");
    assert!(clients.contains("\"place\":\"#1 duel\""), "{clients}");
    // Requests by verdict and channel, and how long they took.
    let ticket = ann.join(switchboard_rooms::RoomId(42)).unwrap();
    until(&mut ann, "the join answered", &|a| {
        a.status(ticket).is_done()
    });
    let (_, metrics) = get(&rooms.admin, "/metrics");
    for line in [
        "switchboard_manager_requests_total{verdict=\"accepted\",channel=\"2\"} 3\n",
        "switchboard_manager_requests_total{verdict=\"rejected\",channel=\"2\"} 1\n",
        "# TYPE switchboard_manager_request_duration_seconds histogram\n",
        "switchboard_manager_request_duration_seconds_bucket{le=\"+Inf\"} 4\n",
        "switchboard_manager_request_duration_seconds_count 4\n",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}

#[test]
fn master_process_admin_lists_a_registered_server_and_counts_heartbeats() {
    let master = Server::start("master", &["master", "--bind", "loopback"]);
    let mut game = Command::new(env!("CARGO_BIN_EXE_switchboard-server"))
        .args(["--port", "0", "--name", "Alpha", "--heartbeat-secs", "0.2"])
        .arg("--register-with")
        .arg(format!("127.0.0.1:{}", master.port))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let clients = loop {
        let (status, clients) = get(&master.admin, "/api/clients");
        assert_eq!(status, 200);
        if clients.contains("\"name\":\"Alpha\"") {
            break clients;
        }
        assert!(Instant::now() < deadline, "Alpha listed: {clients}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(clients.contains("\"kind\":\"game server\""), "{clients}");
    assert!(clients.contains("\"place\":\"board\""), "{clients}");
    let (_, metrics) = get(&master.admin, "/metrics");
    assert!(
        metrics.contains("switchboard_master_servers_listed 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchboard_master_heartbeats_total "),
        "{metrics}"
    );
    let _ = game.kill();
    let _ = game.wait();
}

#[test]
fn admin_history_keeps_a_point_a_second_on_the_server() {
    let board = Server::start("board-history", &[]);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", board.port).parse().unwrap();
    let mut ann = NetworkClient::connect(addr, ClientConfig::named("ann"));
    let points = |of: &str| -> Vec<serde_json::Value> {
        let (status, body) = get(&board.admin, &format!("/api/history?of={of}"));
        assert_eq!(status, 200, "{body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        body["points"].as_array().unwrap().clone()
    };
    // A point a second, once ann is in: she is counted, with the CPU as a
    // percentage of a core and the traffic as rates.
    let deadline = Instant::now() + Duration::from_secs(10);
    let point = loop {
        ann.poll_timeout(Duration::from_millis(20));
        if let Some(point) = points("seconds").into_iter().find(|p| p["clients"] == 1.0) {
            break point;
        }
        assert!(Instant::now() < deadline, "a point with ann");
    };
    assert!(point["cpu_percent"].as_f64().unwrap() >= 0.0, "{point}");
    assert!(point["memory_bytes"].as_f64().unwrap() > 1e6, "{point}");
    assert!(
        point["rates"]["switchboard_manager_sent_bytes_total"].is_number(),
        "{point}"
    );
    // Minutes fill a minute at a time; an unknown range is refused.
    assert!(points("minutes").len() <= 1);
    let (status, body) = get(&board.admin, "/api/history?of=hours");
    assert_eq!(status, 400);
    assert!(body.contains("seconds or minutes"), "{body}");
}
