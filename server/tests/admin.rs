//! The admin server of a real `switchboard-server relay` process: started
//! with `--admin-port` and a token file, scraped over HTTP, stopped with
//! the process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn relay_process_serves_its_admin_api_and_metrics_on_the_port_asked() {
    let dir = std::env::temp_dir().join(format!("sb-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard-server"))
        .args([
            "relay",
            "--bind",
            "loopback",
            "--port",
            "0",
            "--admin-port",
            "0",
        ])
        .arg("--admin-token-file")
        .arg(&token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut admin = None;
    for _ in 0..5 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if let Some(rest) = line.strip_prefix("admin: http://") {
            admin = rest.strip_suffix("/api/overview\n").map(str::to_string);
            break;
        }
    }
    let admin = admin.expect("the admin address on stdout");
    let (status, body) = get(&admin, "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains("switchboard_up{mode=\"relay\"} 1\n"),
        "{body}"
    );
    assert!(body.contains("switchboard_relay_players 0\n"), "{body}");
    let (status, body) = get(&admin, "/api/overview");
    assert_eq!(status, 200);
    assert!(body.contains("\"mode\":\"relay\""), "{body}");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

fn post(addr: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn board_process_admin_shows_a_player_with_its_traffic_and_kicks_it_for_good() {
    use switchboard::{ClientConfig, ClientEvent, CloseCode, DisconnectReason, NetworkClient};
    let dir = std::env::temp_dir().join(format!("sb-admin-board-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard-server"))
        .args(["--port", "0", "--admin-port", "0"])
        .arg("--admin-token-file")
        .arg(&token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let (mut port, mut admin) = (None, None);
    while admin.is_none() {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the server's lines"
        );
        if let Some(p) = line.strip_prefix("SWITCHBOARD READY 1 ") {
            port = p.trim().parse::<u16>().ok();
        }
        if let Some(rest) = line.strip_prefix("admin: http://") {
            admin = rest.strip_suffix("/api/overview\n").map(str::to_string);
        }
    }
    let (port, admin) = (port.unwrap(), admin.unwrap());
    let mut ann = NetworkClient::connect(format!("127.0.0.1:{port}"), ClientConfig::named("ann"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ann.is_welcomed() {
        assert!(std::time::Instant::now() < deadline, "ann welcomed");
        ann.poll_timeout(std::time::Duration::from_millis(20));
    }
    let id = ann.client_id().unwrap().to_string();
    let (status, clients) = get(&admin, "/api/clients");
    assert_eq!(status, 200);
    let clients: serde_json::Value = serde_json::from_str(&clients).unwrap();
    assert_eq!(clients[0]["id"], id);
    assert_eq!(clients[0]["name"], "ann");
    assert!(
        clients[0]["messages_in"].as_u64().unwrap() >= 1,
        "{clients}"
    );
    let (_, metrics) = get(&admin, "/metrics");
    assert!(
        metrics.contains("switchboard_up{mode=\"board\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("switchboard_clients 1\n"), "{metrics}");
    assert!(metrics.contains("switchboard_requests_total{verdict=\"accepted\"} 0\n"));
    // Kicked: told why, and it does not come back.
    let (status, body) = post(
        &admin,
        &format!("/api/clients/{id}/kick"),
        "t0ken",
        r#"{"reason":"be nice"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let reason = loop {
        assert!(std::time::Instant::now() < deadline, "ann disconnected");
        let events: Vec<ClientEvent> = ann
            .drain_timeout(std::time::Duration::from_millis(20))
            .collect();
        if let Some(reason) = events.into_iter().find_map(|e| match e {
            ClientEvent::Disconnected(reason) => Some(reason),
            _ => None,
        }) {
            break reason;
        }
    };
    assert_eq!(
        reason,
        DisconnectReason::ClosedByPeer {
            code: CloseCode::KICKED,
            reason: "be nice".into()
        }
    );
    let (_, clients) = get(&admin, "/api/clients");
    assert_eq!(clients, "[]");
    // The log tail has it all, and filters.
    let (status, log) = get(&admin, "/api/log");
    assert_eq!(status, 200);
    assert!(log.contains("joined as \\\"ann\\\""), "{log}");
    let (_, warnings) = get(&admin, "/api/log?level=warn&q=kicked");
    let warnings: serde_json::Value = serde_json::from_str(&warnings).unwrap();
    assert_eq!(warnings.as_array().unwrap().len(), 1, "{warnings}");
    assert!(warnings[0]["text"]
        .as_str()
        .unwrap()
        .contains("kicked by the operator: be nice"));
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
