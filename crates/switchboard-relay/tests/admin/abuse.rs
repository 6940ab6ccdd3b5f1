//! The admin server's places and token under abuse, over real HTTP from
//! several loopback addresses: half headers, keep-alive connections without
//! the token, DNS rebinding, token guessing. A module of the admin tests'
//! binary.

use std::time::Duration;

use super::common;
use super::support::{self, http_on, relay_with_admin};
use switchboard_admin::AdminHandle;
use switchboard_relay as relay;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "s3cret-admin-token";

/// A TCP connection to `to` from loopback address 127.0.0.`from`.
async fn tcp_from(from: u8, to: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, from], 0)))
        .unwrap();
    socket.connect(to).await.unwrap()
}

/// Whether the server closed `stream` within `within`.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 256];
    matches!(
        tokio::time::timeout(within, stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_connections_with_half_a_header_are_capped_and_timed_out() {
    let config = switchboard_admin::AdminConfig {
        token: Some(TOKEN.into()),
        max_connections_per_address: 4,
        header_read_timeout: Duration::from_millis(1000),
        ..switchboard_admin::AdminConfig::default()
    };
    let (_relay, admin) = support::relay_with_admin_config(config).await;
    let at = admin.local_addr();
    let mut held = Vec::new();
    for _ in 0..12 {
        let mut stream = tcp_from(1, at).await;
        stream
            .write_all(b"GET /api/overview HTTP/1.1\r\nHost: 127.")
            .await
            .unwrap();
        held.push(stream);
    }
    // Past the address's four, each is closed at accept; the four wait
    // for the rest of their header.
    for stream in &mut held[4..] {
        assert!(closed_within(stream, Duration::from_millis(200)).await);
    }
    for stream in &mut held[..4] {
        assert!(!closed_within(stream, Duration::from_millis(10)).await);
    }
    // A bystander from another address is served meanwhile.
    let stream = tcp_from(2, at).await;
    let (status, _) = http_on(stream, &at.to_string(), "GET", "/api/overview", None, "").await;
    assert_eq!(status, 200);
    // The four half headers are cut at the header-read timeout.
    for stream in &mut held {
        assert!(closed_within(stream, Duration::from_secs(3)).await);
    }
    let stream = tcp_from(1, at).await;
    let (status, _) = http_on(stream, &at.to_string(), "GET", "/api/overview", None, "").await;
    assert_eq!(status, 200, "the address's places are free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reads_refuse_a_dns_rebinding_host() {
    let (_relay, admin) = relay_with_admin(Some(TOKEN)).await;
    let at = admin.local_addr();
    let stream = tcp_from(1, at).await;
    let (status, body) = http_on(
        stream,
        "attacker.example:7280",
        "GET",
        "/api/clients",
        None,
        "",
    )
    .await;
    assert_eq!(status, 421, "{body}");
    for host in [at.to_string(), format!("localhost:{}", at.port())] {
        let stream = tcp_from(1, at).await;
        let (status, _) = http_on(stream, &host, "GET", "/api/clients", None, "").await;
        assert_eq!(status, 200, "{host}");
    }
}

/// A notice posted from 127.0.0.`from` with `token`: (status, body).
async fn notice_from(admin: &AdminHandle, from: u8, token: &str) -> (u16, String) {
    let at = admin.local_addr();
    let stream = tcp_from(from, at).await;
    let body = "{\"text\":\"x\"}";
    http_on(
        stream,
        &at.to_string(),
        "POST",
        "/api/notice",
        Some(token),
        body,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_guessing_is_throttled_per_address() {
    let (_relay, admin) = relay_with_admin(Some(TOKEN)).await;
    let mut statuses = Vec::new();
    for i in 0..20 {
        let (status, _) = notice_from(&admin, 1, &format!("guess-number-{i:04}")).await;
        statuses.push(status);
    }
    // Five free guesses, then the address waits: its guesses are not even
    // compared, the right token neither.
    assert_eq!(&statuses[..5], &[401; 5]);
    assert!(statuses[6..].iter().all(|s| *s == 429), "{statuses:?}");
    assert_eq!(notice_from(&admin, 1, TOKEN).await.0, 429);
    // Another address is not held up by it.
    let (status, body) = notice_from(&admin, 2, TOKEN).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_shorter_than_sixteen_characters_is_refused_at_start() {
    let relay = relay::RelayServer::builder()
        .config(relay::RelayConfig::default())
        .spawn()
        .unwrap();
    let config = switchboard_admin::AdminConfig {
        token: Some("hunter2".into()),
        ..switchboard_admin::AdminConfig::default()
    };
    let source = std::sync::Arc::new(relay::RelayAdmin::new(relay.clone()));
    let err = switchboard_admin::AdminServer::builder(source)
        .config(config)
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, switchboard_admin::AdminError::WeakToken),
        "{err}"
    );
}

/// Sends a keep-alive GET of `/api/overview` on `stream` (with `token`, if
/// any) and reads its answer's head: the status and whether the server
/// said it closes the connection.
async fn keep_alive_get(stream: &mut tokio::net::TcpStream, token: Option<&str>) -> (u16, bool) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let host = stream.peer_addr().unwrap();
    let request = format!("GET /api/overview HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = tokio::time::timeout(common::WAIT, stream.read(&mut byte)).await;
        assert_eq!(read.unwrap().unwrap(), 1, "an answer: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    // The body, so that the next answer's head comes next.
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    tokio::time::timeout(common::WAIT, stream.read_exact(&mut body))
        .await
        .unwrap()
        .unwrap();
    (
        head[9..12].parse().unwrap(),
        head.contains("connection: close"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_places_held_by_keep_alive_connections_without_the_token_leave_the_operator_served() {
    // The audit: 4 addresses x 16 keep-alive connections without a token
    // held all 64 places; the operator's download was served 2 of 15 times.
    let config = switchboard_admin::AdminConfig {
        token: Some(TOKEN.into()),
        ..switchboard_admin::AdminConfig::default()
    };
    let (_relay, admin) = support::relay_with_admin_config(config).await;
    let at = admin.local_addr();
    // Keep-alive without the token: answered, then closed.
    let mut idle = tcp_from(3, at).await;
    assert_eq!(keep_alive_get(&mut idle, None).await, (200, true));
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(2), idle.read_to_end(&mut rest)).await;
    assert!(matches!(ended, Ok(Ok(_))), "closed after its answer");
    // With it: kept open for the next request.
    let mut operator = tcp_from(4, at).await;
    assert_eq!(
        keep_alive_get(&mut operator, Some(TOKEN)).await,
        (200, false)
    );
    assert_eq!(
        keep_alive_get(&mut operator, Some(TOKEN)).await,
        (200, false)
    );
    drop(operator);
    // Eight addresses hold every free place (8 each: no fewer can) with
    // half a header; the places kept for the token still serve it.
    let defaults = switchboard_admin::AdminConfig::default();
    let mut held = Vec::new();
    for from in 10..10 + 8 {
        for _ in 0..defaults.max_connections_per_address {
            let mut stream = tcp_from(from, at).await;
            stream
                .write_all(b"GET /api/overview HTTP/1.1\r\nHost: 127.")
                .await
                .unwrap();
            held.push(stream);
        }
    }
    // Accepted in order: every place is counted before the stranger's.
    let mut stranger = tcp_from(30, at).await;
    let (status, _) = keep_alive_get(&mut stranger, None).await;
    assert_eq!(status, 503, "a place kept for the token, asked without it");
    for attempt in 0..5 {
        let mut operator = tcp_from(31, at).await;
        let (status, _) = keep_alive_get(&mut operator, Some(TOKEN)).await;
        assert_eq!(status, 200, "the operator's request {attempt}");
    }
}
