//! What a hostile or broken peer can send, and what it gets back. Each test is
//! named after the attack. None may panic the other side or grow its memory
//! past the configured limits. The attacks a connection answers on its own
//! are in the conformance suite (`conformance/cases.rs`), run on every
//! driver; those here need a server's view (its gate, its shared budgets,
//! its queue) or a paused clock.

use crate::common;

use std::io::Write;
use std::time::Duration;

use common::*;
use switchboard::{
    CloseCode, DisconnectReason, EndpointConfig, EndpointEvent, SocketConfig, SocketStream,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connects a raw peer to a fresh server and completes its handshake.
async fn raw_peer(config: EndpointConfig) -> (switchboard::EndpointStream, TcpStream) {
    let mut server = start_server(config);
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw_handshake(&mut raw).await;
    match next_server_event(&mut server).await {
        EndpointEvent::PeerConnected { .. } => {}
        other => panic!("{other:?}"),
    }
    (server, raw)
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test]
async fn garbage_content_is_a_typed_error_for_the_receiver_not_a_disconnect() {
    let (mut server, mut raw) = raw_peer(EndpointConfig::default()).await;
    // Channel 16, action 1, then bytes that are no String.
    raw.write_all(&raw_frame(0, &[16, 1, 0xfd, 0xff]))
        .await
        .unwrap();
    match next_server_event(&mut server).await {
        EndpointEvent::Received(incoming) => {
            let err = incoming.message.content::<String>().unwrap_err();
            assert!(err.to_string().contains("String"), "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.handle().peer_count(), 1, "still connected");
}

#[tokio::test]
async fn wrong_magic_is_not_a_switchboard_peer() {
    let server = start_server(EndpointConfig::default());
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (_, hello) = read_raw_frame(&mut raw).await.unwrap();
    assert_eq!(&hello[..4], b"SWBD");
    let (code, text) = read_close(&mut raw).await;
    assert_eq!(code, CloseCode::PROTOCOL_ERROR.0);
    assert!(text.contains("not a Switchboard peer"), "{text}");
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, raw.read_to_end(&mut rest))
        .await
        .unwrap()
        .ok();
    assert_eq!(server.handle().handshake_failures(), 1);
    assert_eq!(server.handle().peer_count(), 0);
}

#[tokio::test]
async fn wrong_version_is_refused_with_both_versions_named() {
    let server = start_server(EndpointConfig::default());
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    raw.write_all(&hello(99)).await.unwrap();
    read_raw_frame(&mut raw).await.unwrap();
    let (code, text) = read_close(&mut raw).await;
    assert_eq!(code, CloseCode::VERSION_MISMATCH.0);
    assert!(text.contains("speaks 1") && text.contains("99"), "{text}");
}

#[tokio::test]
async fn client_meeting_another_version_reports_the_mismatch() {
    let (ours, mut theirs) = tokio::io::duplex(1024);
    let mut client = SocketStream::from_stream(ours, SocketConfig::default());
    theirs.write_all(&hello(7)).await.unwrap();
    assert_eq!(
        expect_disconnected(&mut client).await,
        DisconnectReason::VersionMismatch {
            ours: switchboard::PROTOCOL_VERSION,
            theirs: 7
        }
    );
}

#[tokio::test(start_paused = true)]
async fn silent_peer_is_dropped_at_the_handshake_deadline() {
    let (ours, mut theirs) = tokio::io::duplex(1024);
    let config = SocketConfig {
        handshake_timeout: Duration::from_secs(3),
        ..SocketConfig::default()
    };
    let mut client = SocketStream::from_stream(ours, config);
    let started = tokio::time::Instant::now();
    assert_eq!(
        expect_disconnected(&mut client).await,
        DisconnectReason::HandshakeTimeout
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
    // The silent side is told why.
    read_raw_frame(&mut theirs).await.unwrap();
    assert_eq!(read_close(&mut theirs).await.0, CloseCode::IDLE_TIMEOUT.0);
}

#[tokio::test]
async fn server_drops_a_peer_that_never_says_hello() {
    let mut config = EndpointConfig::default();
    config.socket.handshake_timeout = Duration::from_millis(200);
    let server = start_server(config);
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    read_raw_frame(&mut raw).await.unwrap();
    assert_eq!(read_close(&mut raw).await.0, CloseCode::IDLE_TIMEOUT.0);
    assert_eq!(server.handle().handshake_failures(), 1);
}

#[tokio::test(start_paused = true)]
async fn peer_that_goes_silent_is_dropped_after_idle_timeout() {
    let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
    let config = SocketConfig {
        idle_timeout: Duration::from_secs(8),
        ..SocketConfig::default()
    };
    let mut client = SocketStream::from_stream(ours, config);
    raw_handshake(&mut theirs).await;
    expect_connected(&mut client).await;
    let started = tokio::time::Instant::now();
    assert_eq!(
        expect_disconnected(&mut client).await,
        DisconnectReason::IdleTimeout
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(9),
        "{waited:?}"
    );
    assert_eq!(read_close(&mut theirs).await.0, CloseCode::IDLE_TIMEOUT.0);
}

#[tokio::test]
async fn handshake_flood_beyond_the_per_address_pending_limit_is_dropped() {
    // Busy (half of its 8 pending places taken) once the four silent ones
    // are in: the per-address cap holds from then on.
    let config = EndpointConfig {
        max_pending_handshakes: 8,
        max_pending_handshakes_per_address: 4,
        ..EndpointConfig::default()
    };
    let server = start_server(config);
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(server.local_addr()).await.unwrap());
    }
    // More connections until one is turned away (told why and when to
    // come back, before it said a word): the four silent ones (and any
    // extra the accept loop took before them) fill the address's slots.
    let mut refused_seen = false;
    for _ in 0..20 {
        let mut extra = TcpStream::connect(server.local_addr()).await.unwrap();
        if turned_away_at_once(&mut extra).await {
            refused_seen = true;
            break;
        }
        idle.push(extra);
    }
    assert!(
        refused_seen,
        "a connection past the address's pending limit was turned away"
    );
    assert!(server.handle().refused() >= 1);
    // A legitimate client still gets in once the silent ones are gone (told
    // to come back while the server has not yet seen them go).
    drop(idle);
    let addr = server.local_addr();
    let open = || async move { Some(SocketStream::connect(addr, SocketConfig::default())) };
    let first = SocketStream::connect(addr, SocketConfig::default());
    let admitted = tokio::time::timeout(WAIT, first.until_admitted(open, 5)).await;
    assert!(matches!(admitted, Ok(Ok(_))), "{admitted:?}");
}

#[tokio::test]
async fn message_flood_from_a_peer_is_backpressured_not_buffered() {
    // The server owner does not poll: its event queue (16) fills, the reader
    // stops, TCP pushes back on the flooder. Nothing is dropped: once the
    // owner drains, every message is there in order.
    let mut config = EndpointConfig::default();
    config.socket.event_queue_len = 16;
    let mut server = start_server(config);
    let mut client = SocketStream::connect(server.local_addr(), SocketConfig::default());
    expect_connected(&mut client).await;
    for i in 0..3000u32 {
        client
            .send(&switchboard::Message::new(Chan::Data, Act::Seq, &i).unwrap())
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut next = 0u32;
    while next < 3000 {
        match next_server_event(&mut server).await {
            EndpointEvent::Received(incoming) => {
                assert_eq!(incoming.message.content::<u32>().unwrap(), next);
                next += 1;
            }
            EndpointEvent::PeerConnected { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    match tokio::time::timeout(Duration::from_millis(100), client.next_event()).await {
        Err(_) => {}
        Ok(event) => panic!("the flooder was not disconnected: {event:?}"),
    }
}

#[tokio::test]
async fn compressed_hello_bomb_is_refused_without_inflating_it() {
    let server = start_server(EndpointConfig::default());
    let mut raw = TcpStream::connect(server.local_addr()).await.unwrap();
    // "SWBD", the version, and 4 MiB of zeros, compressed to a few KiB.
    let mut hello = b"SWBD".to_vec();
    hello.extend_from_slice(&switchboard::PROTOCOL_VERSION.to_be_bytes());
    hello.extend(vec![0u8; 4 * 1024 * 1024]);
    raw.write_all(&raw_frame(1, &zlib(&hello))).await.unwrap();
    // The server's hello, then the end: no welcome, nothing inflated.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(WAIT, raw.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "closed in time");
    let handle = server.handle();
    let deadline = tokio::time::Instant::now() + WAIT;
    while handle.handshake_failures() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "counted as a failed handshake"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn inflate_bomb_stream_is_closed_at_the_connection_s_inflate_budget() {
    let (mut server, mut raw) = raw_peer(EndpointConfig::default()).await;
    // Frames of about 4 KiB that each inflate to 4 MiB (an application
    // message on channel 16): the budget is 8 MiB a second, one 4 MiB frame
    // at once beyond it.
    let mut payload = vec![16, 1];
    payload.extend(vec![0u8; 4 * 1024 * 1024 - 16]);
    let frame = raw_frame(1, &zlib(&payload));
    assert!(frame.len() < 8 * 1024, "{} bytes on the wire", frame.len());
    let mut burst = Vec::new();
    for _ in 0..50 {
        burst.extend_from_slice(&frame);
    }
    let _ = raw.write_all(&burst).await;
    let mut received = 0;
    let mut error = String::new();
    let reason = loop {
        match next_server_event(&mut server).await {
            EndpointEvent::Received(_) => received += 1,
            EndpointEvent::PeerError { error: err, .. } => error = err.to_string(),
            EndpointEvent::PeerDisconnected { reason, .. } => break reason,
            other => panic!("{other:?}"),
        }
    };
    assert!(error.contains("inflate past the budget"), "{error}");
    assert!(
        matches!(reason, DisconnectReason::ProtocolError(_)),
        "{reason:?}"
    );
    assert!(received <= 3, "{received} frames of 4 MiB inflated, not 50");
}

#[tokio::test]
async fn inflate_bomb_by_reconnecting_does_not_refill_the_address_s_budget() {
    let mut server = start_server(EndpointConfig::default());
    let mut payload = vec![16, 1];
    payload.extend(vec![0u8; 4 * 1024 * 1024 - 16]);
    let frame = raw_frame(1, &zlib(&payload));
    // Connects from 127.0.0.<from>, sends `count` bombs, and returns how many
    // the server inflated before it closed the connection.
    async fn bombs(
        server: &mut switchboard::EndpointStream,
        from: u8,
        frame: &[u8],
        count: usize,
    ) -> usize {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, from], 0).into()).unwrap();
        let mut raw = socket.connect(server.local_addr()).await.unwrap();
        raw_handshake(&mut raw).await;
        let mut burst = Vec::new();
        for _ in 0..count {
            burst.extend_from_slice(frame);
        }
        let _ = raw.write_all(&burst).await;
        // Only this connection's events count (earlier ones may still be
        // reporting their end).
        let ours = raw.local_addr().unwrap();
        let mut peer = None;
        let mut inflated = 0;
        loop {
            match next_server_event(server).await {
                EndpointEvent::PeerConnected { peer: p, addr } if addr == ours => peer = Some(p),
                EndpointEvent::Received(m) if Some(m.peer) == peer => inflated += 1,
                EndpointEvent::PeerDisconnected { peer: p, .. } if Some(p) == peer => {
                    return inflated
                }
                _ => {}
            }
            if inflated == count {
                return inflated;
            }
        }
    }
    let first = bombs(&mut server, 2, &frame, 10).await;
    assert!(
        (1..=3).contains(&first),
        "{first} inflated on the first connection"
    );
    // Right after, the address may not even connect: reconnecting is no way
    // around its budget, nor a cheap way to make the server accept and close.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, 2], 0).into()).unwrap();
    let mut again = socket.connect(server.local_addr()).await.unwrap();
    assert!(
        turned_away_at_once(&mut again).await,
        "turned away at accept"
    );
    // Once half the budget has come back (8 MiB a second), it may.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(bombs(&mut server, 2, &frame, 1).await, 1);
    let other = bombs(&mut server, 3, &frame, 1).await;
    assert_eq!(other, 1, "another address has its own budget");
}
