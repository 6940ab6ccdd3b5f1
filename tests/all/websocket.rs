//! The WebSocket listener: the same protocol as TCP, one frame per binary
//! message, in the same peer table under the same limits; pages on plain
//! GETs; the origin allow-list; and what a hostile WebSocket peer gets.

use crate::common;

use std::time::Duration;

use common::*;
use futures::{SinkExt, StreamExt};
use switchboard::{
    CloseCode, DisconnectReason, EndpointConfig, EndpointEvent, Message, SocketConfig, SocketEvent,
    SocketStream, WebSocketConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::WebSocketStream;

fn ws_server(ws: WebSocketConfig) -> switchboard::EndpointStream {
    start_server(EndpointConfig {
        websocket: Some(ws),
        ..EndpointConfig::default()
    })
}

fn ws_url(server: &switchboard::EndpointStream) -> String {
    format!(
        "ws://{}/",
        server.websocket_addr().expect("a WebSocket port")
    )
}

/// A raw WebSocket peer: the upgrade done by tungstenite, the Switchboard
/// bytes by hand.
async fn raw_ws(url: &str, origin: Option<&str>) -> Result<WebSocketStream<TcpStream>, String> {
    let mut request = url.into_client_request().unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("Origin", origin.parse().unwrap());
    }
    let addr = url.trim_start_matches("ws://").trim_end_matches('/');
    let stream = TcpStream::connect(addr).await.unwrap();
    tokio_tungstenite::client_async(request, stream)
        .await
        .map(|(ws, _)| ws)
        .map_err(|err| err.to_string())
}

async fn next_binary(ws: &mut WebSocketStream<TcpStream>) -> Vec<u8> {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a message in time")
            .expect("a message before the end")
            .expect("a good message");
        if let WsMessage::Binary(bytes) = message {
            return bytes.to_vec();
        }
    }
}

/// Opens a raw WebSocket peer and completes the Switchboard handshake over
/// it: one hello each, each one binary message.
async fn raw_ws_peer(server: &mut switchboard::EndpointStream) -> WebSocketStream<TcpStream> {
    let mut ws = raw_ws(&ws_url(server), None).await.unwrap();
    ws.send(WsMessage::Binary(
        hello(switchboard::PROTOCOL_VERSION).into(),
    ))
    .await
    .unwrap();
    let theirs = next_binary(&mut ws).await;
    assert_eq!(
        theirs,
        hello(switchboard::PROTOCOL_VERSION),
        "one hello frame, whole"
    );
    match next_server_event(server).await {
        EndpointEvent::PeerConnected { .. } => {}
        other => panic!("{other:?}"),
    }
    ws
}

/// The close frame in a binary message: (code, reason).
async fn ws_close(ws: &mut WebSocketStream<TcpStream>) -> (u16, String) {
    loop {
        let frame = next_binary(ws).await;
        let mut stream = std::io::Cursor::new(frame);
        if let Ok((0, body)) = read_raw_frame(&mut stream).await {
            if body[..2] == [0, 3] {
                let code = body[2] as u16; // the codes used here are > 250: marker 251
                let (code, rest) = if code == 251 {
                    (u16::from_le_bytes([body[3], body[4]]), &body[5..])
                } else {
                    (code, &body[3..])
                };
                let len = rest[0] as usize;
                return (code, String::from_utf8(rest[1..1 + len].to_vec()).unwrap());
            }
        }
    }
}

/// Waits for the server's one peer to end with a protocol error.
async fn ends_in_a_protocol_error(server: &mut switchboard::EndpointStream) {
    loop {
        match next_server_event(server).await {
            EndpointEvent::PeerDisconnected { reason, .. } => {
                assert!(
                    matches!(reason, DisconnectReason::ProtocolError(_)),
                    "{reason:?}"
                );
                return;
            }
            EndpointEvent::PeerError { .. } => {}
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_websocket_client_and_a_tcp_client_share_one_server() {
    let mut server = ws_server(WebSocketConfig::default());
    let mut tcp = SocketStream::connect(server.local_addr(), SocketConfig::default());
    let mut ws = SocketStream::connect_ws(&ws_url(&server), SocketConfig::default());
    expect_connected(&mut tcp).await;
    expect_connected(&mut ws).await;
    let mut peers = Vec::new();
    while peers.len() < 2 {
        if let EndpointEvent::PeerConnected { peer, .. } = next_server_event(&mut server).await {
            peers.push(peer);
        }
    }
    assert_eq!(server.handle().peer_count(), 2, "one peer table");

    // Each client's message arrives as the same kind of event.
    ws.send(&Message::new(Chan::Chat, Act::Say, &"from the browser").unwrap())
        .unwrap();
    tcp.send(&Message::new(Chan::Chat, Act::Say, &"from the native client").unwrap())
        .unwrap();
    let mut heard = Vec::new();
    while heard.len() < 2 {
        if let EndpointEvent::Received(incoming) = next_server_event(&mut server).await {
            heard.push(incoming.message.content::<String>().unwrap());
        }
    }
    heard.sort();
    assert_eq!(heard, ["from the browser", "from the native client"]);

    // A broadcast reaches both, large (compressed) messages included.
    let big = "dots ".repeat(20_000);
    let sent = server
        .handle()
        .broadcast(&Message::new(Chan::Data, Act::Seq, &big).unwrap())
        .unwrap();
    assert_eq!(sent, 2);
    for client in [&mut tcp, &mut ws] {
        match next_socket_event(client).await {
            SocketEvent::Received(message) => assert_eq!(message.content::<String>().unwrap(), big),
            other => panic!("{other:?}"),
        }
    }

    // A close travels with its code and reason over either.
    server
        .handle()
        .close_peer_with(peers[1], CloseCode::KICKED, "bye");
    server
        .handle()
        .close_peer_with(peers[0], CloseCode::KICKED, "bye");
    for client in [&mut tcp, &mut ws] {
        match expect_disconnected(client).await {
            DisconnectReason::ClosedByPeer { code, reason } => {
                assert_eq!((code, reason.as_str()), (CloseCode::KICKED, "bye"))
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn each_frame_travels_as_one_binary_message() {
    let mut server = ws_server(WebSocketConfig::default());
    let mut ws = raw_ws_peer(&mut server).await;
    // Several frames queued at once still leave as one message each.
    let peer = server.handle().peers()[0];
    for n in 0..5u32 {
        server
            .handle()
            .send_to(peer, &Message::new(Chan::Data, Act::Seq, &n).unwrap())
            .unwrap();
    }
    for n in 0..5u8 {
        let message = next_binary(&mut ws).await;
        // length 4, raw, channel 17, action 2, the number
        assert_eq!(message, [0, 0, 0, 4, 0, 17, 2, n]);
    }
    // And a frame from the peer arrives as a message.
    ws.send(WsMessage::Binary(
        raw_frame(0, &[16, 1, 2, b'h', b'i']).into(),
    ))
    .await
    .unwrap();
    match next_server_event(&mut server).await {
        EndpointEvent::Received(incoming) => {
            assert_eq!(incoming.message.content::<String>().unwrap(), "hi")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn websocket_text_message_is_a_protocol_error() {
    let mut server = ws_server(WebSocketConfig::default());
    let mut ws = raw_ws_peer(&mut server).await;
    ws.send(WsMessage::Text("{\"hello\":1}".into()))
        .await
        .unwrap();
    let (code, reason) = ws_close(&mut ws).await;
    assert_eq!(code, CloseCode::PROTOCOL_ERROR.0);
    assert!(reason.contains("binary"), "{reason}");
    ends_in_a_protocol_error(&mut server).await;
}

#[tokio::test]
async fn websocket_message_with_half_a_frame_is_refused() {
    let mut server = ws_server(WebSocketConfig::default());
    let mut ws = raw_ws_peer(&mut server).await;
    let frame = raw_frame(0, &[16, 1, 2, b'h', b'i']);
    // Split across two messages: each must be a whole frame on its own.
    ws.send(WsMessage::Binary(frame[..3].to_vec().into()))
        .await
        .unwrap();
    let (code, reason) = ws_close(&mut ws).await;
    assert_eq!(code, CloseCode::PROTOCOL_ERROR.0);
    assert!(reason.contains("frame header"), "{reason}");
}

#[tokio::test]
async fn websocket_message_with_two_frames_is_refused() {
    let mut server = ws_server(WebSocketConfig::default());
    let mut ws = raw_ws_peer(&mut server).await;
    let mut two = raw_frame(0, &[16, 1, 0]);
    two.extend(raw_frame(0, &[16, 1, 0]));
    ws.send(WsMessage::Binary(two.into())).await.unwrap();
    let (code, reason) = ws_close(&mut ws).await;
    assert_eq!(code, CloseCode::PROTOCOL_ERROR.0);
    assert!(reason.contains("exactly one frame"), "{reason}");
}

#[tokio::test]
async fn websocket_message_past_the_frame_limit_is_refused() {
    let mut config = EndpointConfig {
        websocket: Some(WebSocketConfig::default()),
        ..EndpointConfig::default()
    };
    config.socket.codec.max_frame_len = 1024;
    let mut server = start_server(config);
    let mut ws = raw_ws_peer(&mut server).await;
    let _ = ws
        .send(WsMessage::Binary(
            raw_frame(0, &vec![7u8; 64 * 1024]).into(),
        ))
        .await;
    ends_in_a_protocol_error(&mut server).await;
}

/// Sends `request` raw and returns the whole response as text.
async fn http(addr: std::net::SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response))
        .await
        .expect("a response in time")
        .unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn a_plain_get_is_served_its_page_and_others_get_404() {
    let server = ws_server(WebSocketConfig::default().with_page(
        "/",
        "text/html; charset=utf-8",
        "<h1>dots</h1>",
    ));
    let addr = server.websocket_addr().unwrap();
    let page = http(addr, "GET /?room=3 HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(
        page.contains("Content-Type: text/html; charset=utf-8\r\n"),
        "{page}"
    );
    assert!(page.ends_with("\r\n\r\n<h1>dots</h1>"), "{page}");
    let missing = http(addr, "GET /secret HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
    let post = http(addr, "POST / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    let garbage = http(addr, "\x16\x03\x01 hello tls\r\n\r\n").await;
    assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
}

#[tokio::test]
async fn an_origin_outside_the_allow_list_gets_403() {
    let mut server = ws_server(WebSocketConfig {
        allowed_origins: vec!["https://game.example".into()],
        ..WebSocketConfig::default()
    });
    let url = ws_url(&server);
    let refused = raw_ws(&url, Some("https://evil.example"))
        .await
        .unwrap_err();
    assert!(refused.contains("403"), "{refused}");
    // The allowed origin, and a client that is not a browser (no Origin).
    let mut allowed = raw_ws(&url, Some("https://game.example")).await.unwrap();
    allowed
        .send(WsMessage::Binary(
            hello(switchboard::PROTOCOL_VERSION).into(),
        ))
        .await
        .unwrap();
    let mut native = SocketStream::connect_ws(&url, SocketConfig::default());
    expect_connected(&mut native).await;
    let mut connected = 0;
    while connected < 2 {
        if let EndpointEvent::PeerConnected { .. } = next_server_event(&mut server).await {
            connected += 1;
        }
    }
    assert_eq!(
        server.handle().handshake_failures(),
        1,
        "the refusal is counted"
    );
}

#[tokio::test]
async fn oversized_http_request_head_gets_431() {
    let server = ws_server(WebSocketConfig {
        max_request_head: 1024,
        ..WebSocketConfig::default()
    });
    let addr = server.websocket_addr().unwrap();
    let request = format!("GET / HTTP/1.1\r\nX-Junk: {}\r\n\r\n", "a".repeat(4096));
    let response = http(addr, &request).await;
    assert!(response.starts_with("HTTP/1.1 431 "), "{response}");
}

#[tokio::test]
async fn slowloris_http_request_head_is_dropped_at_the_handshake_timeout() {
    let mut config = EndpointConfig {
        websocket: Some(WebSocketConfig::default()),
        ..EndpointConfig::default()
    };
    config.socket.handshake_timeout = Duration::from_millis(300);
    let server = start_server(config);
    let mut slow = TcpStream::connect(server.websocket_addr().unwrap())
        .await
        .unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    // Never finishes its head: the server lets go after the timeout.
    tokio::time::timeout(WAIT, slow.read_to_end(&mut rest))
        .await
        .expect("dropped in time")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        rest.is_empty(),
        "nothing is answered to a head that never ends"
    );
    assert_eq!(server.handle().handshake_failures(), 1);
}

#[tokio::test]
async fn per_address_connection_limit_counts_websocket_and_tcp_together() {
    // Crowded (half of 4 open) once two are in: the per-address cap holds.
    let mut server = start_server(EndpointConfig {
        websocket: Some(WebSocketConfig::default()),
        max_connections: 4,
        max_connections_per_address: 2,
        ..EndpointConfig::default()
    });
    let url = ws_url(&server);
    let mut tcp = SocketStream::connect(server.local_addr(), SocketConfig::default());
    let mut ws = SocketStream::connect_ws(&url, SocketConfig::default());
    expect_connected(&mut tcp).await;
    expect_connected(&mut ws).await;
    // A third from the same address, over either transport, is turned away
    // and told when to come back (a WebSocket by HTTP 503 and Retry-After).
    let told = |reason: &DisconnectReason| {
        matches!(reason, DisconnectReason::ClosedByPeer { code, reason }
            if *code == CloseCode::SERVER_FULL
                && switchboard::socket::retry_after_of(reason).is_some())
    };
    let mut third = SocketStream::connect_ws(&url, SocketConfig::default());
    let reason = expect_disconnected(&mut third).await;
    assert!(told(&reason), "{reason:?}");
    let mut fourth = SocketStream::connect(server.local_addr(), SocketConfig::default());
    let reason = expect_disconnected(&mut fourth).await;
    assert!(told(&reason), "{reason:?}");
    assert_eq!(server.handle().refused(), 2);
    let mut connected = 0;
    while connected < 2 {
        if let EndpointEvent::PeerConnected { .. } = next_server_event(&mut server).await {
            connected += 1;
        }
    }
    assert_eq!(server.handle().peer_count(), 2);
}

#[tokio::test]
async fn a_websocket_peer_that_never_reads_is_dropped_as_a_slow_consumer() {
    let mut config = EndpointConfig {
        websocket: Some(WebSocketConfig::default()),
        ..EndpointConfig::default()
    };
    config.socket.max_outbound_bytes = 256 * 1024;
    let mut server = start_server(config);
    // Handshake, then never read again.
    let _ws = raw_ws_peer(&mut server).await;
    let peer = server.handle().peers()[0];
    // Bytes that do not compress: what is sent is what piles up.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..16 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let chunk = Message::new(Chan::Data, Act::Seq, &noise).unwrap();
    let mut sent = 0usize;
    let deadline = std::time::Instant::now() + WAIT;
    // The kernel's buffers and tungstenite's bounded one fill, then the
    // connection's queue: past its bytes, the peer is dropped.
    while server.handle().send_to(peer, &chunk).is_ok() {
        sent += 1;
        assert!(
            std::time::Instant::now() < deadline,
            "never dropped after {sent} messages"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    loop {
        match next_server_event(&mut server).await {
            EndpointEvent::PeerDisconnected { reason, .. } => {
                assert_eq!(
                    reason,
                    DisconnectReason::SlowConsumer,
                    "after {sent} messages"
                );
                break;
            }
            _ => continue,
        }
    }
}
