//! The relay's admin server over real HTTP: clients listed, counters in
//! Prometheus text, a kick that needs the token and disconnects.

use crate::common;
use crate::support;

#[path = "../admin/abuse.rs"]
mod abuse;

use std::sync::Arc;
use std::time::Duration;

use common::{next_socket_event, WAIT};
use support::{at, http_on, native_client, relay_with_admin, until_in_zone};
use switchboard::socket::BindScope;
use switchboard::{CloseCode, DisconnectReason, SocketEvent};
use switchboard_admin::{AdminConfig, AdminHandle, AdminServer};
use switchboard_relay::{self as relay, RelayAction, RelayAdmin};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request on a fresh connection: (status, body).
async fn http(
    admin: &AdminHandle,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, String) {
    let addr = admin.local_addr();
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    http_on(stream, &addr.to_string(), method, path, token, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_lists_clients_exports_metrics_and_kicks_only_with_the_token() {
    let (relay, admin) = relay_with_admin(Some("s3cret-admin-token")).await;
    let (mut ann, ann_id) = native_client(relay.native_addr(), "ann").await;
    ann.send(&at("hall", 1.0)).unwrap();
    until_in_zone(&relay, "hall", 1).await;

    // Reads are open on loopback.
    let (status, body) = http(&admin, "GET", "/api/clients", None, "").await;
    assert_eq!(status, 200, "{body}");
    let clients: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(clients[0]["id"], ann_id.to_string());
    assert_eq!(clients[0]["name"], "ann");
    assert_eq!(clients[0]["place"], "hall");
    let (status, body) = http(&admin, "GET", "/api/overview", None, "").await;
    assert_eq!(status, 200);
    let overview: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (overview["mode"].as_str(), overview["clients"].as_u64()),
        (Some("relay"), Some(1))
    );
    let (status, metrics) = http(&admin, "GET", "/metrics", None, "").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("# TYPE switchboard_relay_players gauge\nswitchboard_relay_players 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("switchboard_relay_zones 1\n"));
    // Every port's series: ann came over TCP.
    assert!(
        metrics.contains("switchboard_endpoint_connections{transport=\"tcp\"} 1\n")
            && metrics.contains("switchboard_endpoint_connections{transport=\"webtransport\"} 0\n")
            && metrics.contains("switchboard_endpoint_handshake_failures_total 0\n"),
        "{metrics}"
    );
    assert!(metrics.contains("switchboard_up{mode=\"relay\"} 1\n"));

    // A kick without the token, or with a wrong one: 401, and nothing changes.
    let path = format!("/api/clients/{ann_id}/kick");
    let reason = r#"{"reason":"be nice"}"#;
    for token in [None, Some("guess")] {
        let (status, _) = http(&admin, "POST", &path, token, reason).await;
        assert_eq!(status, 401);
    }
    assert_eq!(relay.clients().await.len(), 1);
    // No such client: 404.
    let (status, _) = http(
        &admin,
        "POST",
        "/api/clients/999/kick",
        Some("s3cret-admin-token"),
        reason,
    )
    .await;
    assert_eq!(status, 404);
    // With it: ann is told why and leaves.
    let (status, body) = http(&admin, "POST", &path, Some("s3cret-admin-token"), reason).await;
    assert_eq!(status, 200, "{body}");
    loop {
        match next_socket_event(&mut ann).await {
            SocketEvent::Disconnected(DisconnectReason::ClosedByPeer { code, reason }) => {
                assert_eq!((code, reason.as_str()), (CloseCode::KICKED, "be nice"));
                break;
            }
            SocketEvent::Disconnected(other) => panic!("{other:?}"),
            _ => {}
        }
    }
    assert!(relay.clients().await.is_empty());
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_spawns_bots_with_a_script_sends_a_notice_and_removes_the_bots() {
    let (relay, admin) = relay_with_admin(Some("s3cret-admin-token")).await;
    let (mut ann, _) = native_client(relay.native_addr(), "ann").await;
    ann.send(&at("hall", 1.0)).unwrap();
    until_in_zone(&relay, "hall", 1).await;
    let token = Some("s3cret-admin-token");
    // An unknown script, or too many bots: refused with the reason.
    let (status, body) = http(
        &admin,
        "POST",
        "/api/bots",
        token,
        r#"{"count":5,"script":"dance"}"#,
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("scripts: idle"), "{body}");
    let (status, _) = http(&admin, "POST", "/api/bots", token, r#"{"count":100000}"#).await;
    assert_eq!(status, 400);
    // Five bots walking circles in the hall: the clients table shows them.
    let body = r#"{"count":5,"script":"circle","place":"hall"}"#;
    let (status, reply) = http(&admin, "POST", "/api/bots", token, body).await;
    assert_eq!((status, reply.as_str()), (200, r#"{"spawned":5}"#));
    until_in_zone(&relay, "hall", 6).await;
    let (_, clients) = http(&admin, "GET", "/api/clients", None, "").await;
    assert_eq!(clients.matches(r#""kind":"bot""#).count(), 5, "{clients}");
    // A notice reaches every player.
    let (status, reply) = http(
        &admin,
        "POST",
        "/api/notice",
        token,
        r#"{"text":"restart at noon"}"#,
    )
    .await;
    assert_eq!((status, reply.as_str()), (200, r#"{"reached":6}"#));
    loop {
        if let SocketEvent::Received(m) = next_socket_event(&mut ann).await {
            if m.action::<RelayAction>() == Some(RelayAction::Notice) {
                assert_eq!(m.content::<String>().unwrap(), "restart at noon");
                break;
            }
        }
    }
    // Removed: they leave.
    let (status, reply) = http(&admin, "DELETE", "/api/bots", token, "").await;
    assert_eq!((status, reply.as_str()), (200, r#"{"removed":5}"#));
    let deadline = tokio::time::Instant::now() + WAIT;
    while relay.clients().await.len() > 1 {
        assert!(tokio::time::Instant::now() < deadline, "the bots left");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    relay.shutdown().await.unwrap();
}

#[tokio::test]
async fn admin_server_off_loopback_needs_a_token_and_without_one_controls_are_off() {
    let relay = relay::RelayServer::builder().spawn().unwrap();
    let refused = AdminServer::builder(Arc::new(RelayAdmin::new(relay.clone())))
        .bind(BindScope::AllInterfaces)
        .spawn();
    assert!(matches!(
        refused,
        Err(switchboard_admin::AdminError::NeedsToken(_))
    ));
    // On loopback without a token: reads yes, controls no.
    let admin = AdminServer::builder(Arc::new(RelayAdmin::new(relay.clone())))
        .spawn()
        .unwrap();
    assert_eq!(http(&admin, "GET", "/api/clients", None, "").await.0, 200);
    let (status, body) = http(&admin, "POST", "/api/clients/1/kick", None, "{}").await;
    assert_eq!(status, 403, "{body}");
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_server_off_loopback_speaks_https_and_refuses_plaintext_from_other_machines() {
    use switchboard::tls::{ServerIdentity, ServerTrust, TlsClient, TlsServer, TlsSettings};
    let relay = relay::RelayServer::builder().spawn().unwrap();
    let identity = ServerIdentity::generate().unwrap();
    let token = "s3cret-admin-token";
    let admin = AdminServer::builder(Arc::new(RelayAdmin::new(relay.clone())))
        .bind(BindScope::AllInterfaces)
        .config(AdminConfig {
            token: Some(token.into()),
            tls: TlsSettings::serving(TlsServer::new(&identity).unwrap()),
            ..AdminConfig::default()
        })
        .spawn()
        .unwrap();
    let port = admin.local_addr().port();
    let here = format!("127.0.0.1:{port}");
    // HTTPS, the server pinned: the token crosses encrypted.
    let tls = TlsClient::new(ServerTrust::pinned(identity.fingerprint()));
    let stream = tokio::net::TcpStream::connect(&here).await.unwrap();
    let (stream, _) = tls.handshake(stream, &here).await.unwrap();
    let (status, body) = http_on(stream, &here, "GET", "/api/clients", Some(token), "").await;
    assert_eq!(status, 200, "{body}");
    // Plain HTTP from this machine still reads (the operator's own browser).
    let stream = tokio::net::TcpStream::connect(&here).await.unwrap();
    assert_eq!(
        http_on(stream, &here, "GET", "/metrics", Some(token), "")
            .await
            .0,
        200
    );
    // Plain HTTP from another machine's address: 403, saying why, the
    // token never read.
    if let Some(ip) = switchboard::socket::lan_address() {
        let there = format!("{ip}:{port}");
        let stream = tokio::net::TcpStream::connect(&there).await.unwrap();
        let (status, body) = http_on(stream, &there, "GET", "/metrics", Some(token), "").await;
        assert_eq!(status, 403);
        assert!(body.contains("only TLS"), "{body}");
    } else {
        eprintln!("the plaintext half skipped: this machine has no address but loopback");
    }
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_whole_and_offline_and_the_live_stream_sends_snapshots() {
    let (relay, admin) = relay_with_admin(None).await;
    let (status, page) = http(&admin, "GET", "/", None, "").await;
    assert_eq!(status, 200);
    assert!(page.contains("<canvas id=\"chart\"") && page.contains("id=\"clients\""));
    // Nothing fetched from elsewhere: no CDN, no external script or style.
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "external references"
    );
    assert!(
        !page.contains("innerHTML"),
        "peer-chosen names go in as text"
    );

    let (_ann, ann_id) = native_client(relay.native_addr(), "ann").await;
    let mut stream = tokio::net::TcpStream::connect(admin.local_addr())
        .await
        .unwrap();
    stream
        .write_all(b"GET /api/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let snapshot = tokio::time::timeout(WAIT, async {
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the stream ended: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            if let Some(at) = seen.find("event: snapshot\ndata: ") {
                let rest = &seen[at + "event: snapshot\ndata: ".len()..];
                if let Some(end) = rest.find('\n') {
                    return rest[..end].to_string();
                }
            }
        }
    })
    .await
    .expect("a snapshot within the wait");
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen
        .to_lowercase()
        .contains("content-type: text/event-stream"));
    let snapshot: serde_json::Value = serde_json::from_str(&snapshot).unwrap();
    assert_eq!(snapshot["mode"], "relay");
    assert_eq!(snapshot["clients"][0]["id"], ann_id.to_string());
    relay.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_s_log_tail_shows_joins_names_kicks_and_leaves_with_names_escaped() {
    let (relay, admin) = relay_with_admin(Some("s3cret-admin-token")).await;
    let (_ann, id) = native_client(relay.native_addr(), "ann\u{1b}[31m").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !relay.log().iter().any(|l| l.text.contains("is \"ann")) {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", relay.log());
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let path = format!("/api/clients/{id}/kick");
    let (status, _) = http(
        &admin,
        "POST",
        &path,
        Some("s3cret-admin-token"),
        "{\"reason\":\"afk\"}",
    )
    .await;
    assert_eq!(status, 200);
    let (status, log) = http(&admin, "GET", "/api/log", None, "").await;
    assert_eq!(status, 200);
    assert!(
        log.contains(&format!("player {id} joined (native) from 127.0.0.1:")),
        "{log}"
    );
    // A player's name loses its control characters (and is escaped): no
    // terminal escape reaches the log.
    assert!(log.contains(r#"is \"ann[31m\" (a player)"#), "{log}");
    assert!(!log.contains('\u{1b}') && !log.contains("u{1b}"), "{log}");
    assert!(
        log.contains(&format!("player {id} kicked by the operator: afk")),
        "{log}"
    );
    let (_, warnings) = http(&admin, "GET", "/api/log?level=warn", None, "").await;
    assert!(
        warnings.contains("kicked") && !warnings.contains("joined"),
        "{warnings}"
    );
}

/// The relay's recording from its admin page: where it stands, stopped by
/// the operator with the token (the relay goes on), downloaded whole, and
/// the download replays with every answer the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_relay_stopped_downloaded_and_started_again_from_the_admin_page_replays_identically()
{
    let path = std::env::temp_dir().join(format!("switchboard-admin-{}.swrl", std::process::id()));
    let dir = std::env::temp_dir().join(format!("switchboard-admin-rec-{}", std::process::id()));
    let config = relay::RelayConfig {
        record: Some(path.clone()),
        ..relay::RelayConfig::default()
    };
    let relay = relay::RelayServer::builder()
        .config(config)
        .spawn()
        .unwrap();
    let source = Arc::new(RelayAdmin::new(relay.clone()).with_recordings(&dir));
    let admin_config = AdminConfig {
        token: Some("record-admin-t0ken".into()),
        ..AdminConfig::default()
    };
    let admin = AdminServer::builder(source)
        .config(admin_config)
        .spawn()
        .unwrap();
    let (ann, _) = native_client(relay.native_addr(), "ann").await;
    for step in 0..5 {
        ann.send(&at("hall", step as f32)).unwrap();
    }
    until_in_zone(&relay, "hall", 1).await;
    let (status, body) = http(&admin, "GET", "/api/recording", None, "").await;
    assert_eq!(status, 200, "{body}");
    let status_now: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status_now["recording"], true, "{body}");
    // Not complete yet: no download.
    let (status, _) = as_operator(&admin, "GET", "/api/recording/file").await;
    assert_eq!(status, 409);
    let (status, _) = http(&admin, "POST", "/api/recording/stop", None, "").await;
    assert_eq!(status, 401);
    let (status, body) = as_operator(&admin, "POST", "/api/recording/stop").await;
    assert_eq!(status, 200, "{body}");
    // The relay goes on.
    ann.send(&at("hall", 9.0)).unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let body = loop {
        let (status, body) = http(&admin, "GET", "/api/recording", None, "").await;
        assert_eq!(status, 200);
        if body.contains("\"complete\":true") || std::time::Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(body.contains("stopped by the operator"), "{body}");
    let report = relay::record::replay(&download(&admin).await[..]).unwrap();
    assert_eq!(report.divergence, None);
    assert_eq!(report.stopped.as_deref(), Some("stopped by the operator"));
    // A join and at least the transforms sent before the stop.
    assert!(report.calls >= 2, "{report:?}");

    // Started again from the page while ann stands in the hall: a new
    // file in the relay's directory, beginning with a snapshot. Bob comes
    // in and is shown ann where she stands: only the snapshot knows.
    let (status, body) = as_operator(&admin, "POST", "/api/recording/start").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("relay-"), "{body}");
    let (bob, _) = native_client(relay.native_addr(), "bob").await;
    bob.send(&at("hall", 1.0)).unwrap();
    ann.send(&at("hall", 2.0)).unwrap();
    until_in_zone(&relay, "hall", 2).await;
    let (status, _) = as_operator(&admin, "POST", "/api/recording/stop").await;
    assert_eq!(status, 200);
    let file = download(&admin).await;
    let report = relay::record::replay(&file[..]).unwrap();
    assert_eq!(report.divergence, None, "{report:?}");
    assert!(
        report.calls >= 3,
        "bob's join and two transforms: {report:?}"
    );
    let named = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(named, 1, "the file is in the relay's record_dir");
    drop((ann, bob));
    relay.shutdown().await.unwrap();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A call to the admin page with the recording test's token.
async fn as_operator(admin: &AdminHandle, method: &str, path: &str) -> (u16, String) {
    http(admin, method, path, Some("record-admin-t0ken"), "").await
}

/// The complete recording, from the admin page (once it is complete).
async fn download(admin: &AdminHandle) -> Vec<u8> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let addr = admin.local_addr();
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "GET /api/recording/file HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer record-admin-t0ken\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        if response.starts_with(b"HTTP/1.1 200") {
            let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
            return response[split + 4..].to_vec();
        }
        assert!(std::time::Instant::now() < deadline, "never complete");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
