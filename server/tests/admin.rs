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
