//! Helpers shared by the relay's loopback tests.
#![allow(dead_code)]

use std::time::Duration;

use crate::common::{next_socket_event, WAIT};
use serde_json::Value;
use switchboard::{Message, SocketConfig, SocketEvent, SocketStream};
use switchboard_relay::{
    self as relay, RelayAction, RelayChannel, RelayHello, RelayLimits, Transform,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub struct JsonClient {
    pub lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    pub write: tokio::net::tcp::OwnedWriteHalf,
}

impl JsonClient {
    pub async fn connect(addr: std::net::SocketAddr) -> (JsonClient, u64) {
        let (read, write) = TcpStream::connect(addr).await.unwrap().into_split();
        let mut client = JsonClient {
            lines: BufReader::new(read).lines(),
            write,
        };
        let welcome = client.next().await.expect("welcome");
        assert_eq!(welcome["type"], "welcome");
        let id = welcome["playerId"].as_u64().unwrap();
        (client, id)
    }

    pub async fn send(&mut self, line: &str) {
        self.write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    /// The next line, or None at EOF.
    pub async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("a line in time")
            .ok()??;
        Some(serde_json::from_str(&line).unwrap())
    }
}

/// No transform rate limit: for the tests of the send path, whose bursts
/// are far over a player's budget.
pub fn unlimited() -> RelayLimits {
    RelayLimits {
        transforms_per_second: 1e9,
        transform_burst: 1e9,
        ..RelayLimits::default()
    }
}

pub async fn native_client(addr: std::net::SocketAddr, name: &str) -> (SocketStream, u32) {
    let mut client = SocketStream::connect(addr, SocketConfig::default());
    assert!(matches!(
        next_socket_event(&mut client).await,
        SocketEvent::Connected
    ));
    let id = match next_socket_event(&mut client).await {
        SocketEvent::Received(m) => m.content::<u32>().unwrap(),
        other => panic!("{other:?}"),
    };
    let hello = RelayHello {
        name: name.into(),
        bot: false,
    };
    client
        .send(&Message::new(RelayChannel, RelayAction::Hello, &hello).unwrap())
        .unwrap();
    (client, id)
}

/// Waits until `count` players are in `zone`, or fails after [`WAIT`].
pub async fn until_in_zone(relay: &relay::RelayHandle, zone: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let clients = relay.clients().await;
        if clients
            .iter()
            .filter(|c| c.zone.as_deref() == Some(zone))
            .count()
            >= count
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} players in {zone}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn at(zone: &str, x: f32) -> Message {
    let transform = Transform {
        position: [x, 1.0, 2.0],
        zone: zone.into(),
        ..Transform::default()
    };
    Message::new(RelayChannel, RelayAction::Transform, &transform).unwrap()
}

/// A relay on loopback and its admin server (on loopback, with `token` if
/// given).
pub async fn relay_with_admin(
    token: Option<&str>,
) -> (relay::RunningRelay, switchboard_admin::RunningAdmin) {
    let config = switchboard_admin::AdminConfig {
        token: token.map(str::to_string),
        ..switchboard_admin::AdminConfig::default()
    };
    relay_with_admin_config(config).await
}

/// A relay with its admin server under `config`.
#[allow(dead_code)]
pub async fn relay_with_admin_config(
    config: switchboard_admin::AdminConfig,
) -> (relay::RunningRelay, switchboard_admin::RunningAdmin) {
    let relay = relay::RelayServer::builder().spawn().unwrap();
    let source = std::sync::Arc::new(relay::RelayAdmin::new(relay.clone()));
    let admin = switchboard_admin::AdminServer::builder(source)
        .config(config)
        .spawn()
        .unwrap();
    (relay, admin)
}

/// One request on `stream`, naming `host`: (status, body).
pub async fn http_on<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut response))
        .await
        .unwrap()
        .unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
