//! QUIC beside TCP: a client connects with `quic://`, messages cross on the
//! stream, sequenced channels as datagrams (newest wins, the stream when
//! one does not fit); a client that moves to a new socket keeps its
//! connection; the server is checked as over TCP off this machine; and the
//! attacks on the UDP port (a flood from one address, datagrams that are
//! not messages, more datagrams than the rate allows, streams the server
//! never reads).

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use switchboard::socket::quic::{AddressValidation, QuicConfig, QuicTransport};
use switchboard::socket::{Dialer, SocketHandle, Transport};
use switchboard::tls::{ServerIdentity, ServerTrust, TlsServer, TlsSettings};
use switchboard::{
    BindScope, EndpointConfig, EndpointEvent, EndpointStream, Message, PeerId, SocketConfig,
    SocketEvent, SocketStream,
};

const STATE: u16 = 20;
const CHAT: u16 = 21;

/// Runs `f` on the library's runtime.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    switchboard::runtime::handle().block_on(f)
}

/// A loopback server with a QUIC port of `quic`'s settings.
fn quic_server(quic: QuicConfig, config: EndpointConfig) -> EndpointStream {
    let config = EndpointConfig {
        quic: Some(quic),
        ..config
    };
    EndpointStream::bind(BindScope::Loopback, 0, config).expect("bind")
}

/// `quic://` the server's QUIC port.
fn quic_url(server: &EndpointStream) -> String {
    format!("quic://{}", server.quic_addr().expect("a QUIC port"))
}

/// A socket config whose `STATE` channel is sequenced.
fn sequenced() -> SocketConfig {
    SocketConfig {
        sequenced_channels: switchboard::socket::ChannelSet::of([STATE]),
        ..SocketConfig::default()
    }
}

/// Connects a client over QUIC and waits until both ends are open: the
/// client, its handle, and its peer id on the server.
fn connect(
    server: &mut EndpointStream,
    dialer: &Dialer,
    config: SocketConfig,
) -> (SocketStream, SocketHandle, PeerId) {
    let client = dialer.connect(&quic_url(server), config);
    let handle = client.handle();
    let mut client = client.into_stream();
    let peer = block_on(async {
        expect_connected(&mut client).await;
        loop {
            if let EndpointEvent::PeerConnected { peer, .. } = next_server_event(server).await {
                return peer;
            }
        }
    });
    (client, handle, peer)
}

fn message(channel: u16, action: u16, content: &[u8]) -> Message {
    Message::from_raw(channel, action, Bytes::copy_from_slice(content))
}

#[test]
fn a_client_connects_over_quic_and_messages_cross_both_ways() {
    let mut server = quic_server(QuicConfig::default(), EndpointConfig::default());
    let (mut client, handle, peer) =
        connect(&mut server, &Dialer::default(), SocketConfig::default());
    assert!(handle.is_quic());
    handle.send(&message(CHAT, 1, b"hello")).unwrap();
    let (from, got) = block_on(next_message(&mut server));
    assert_eq!((from, got.content_bytes().as_ref()), (peer, &b"hello"[..]));
    let server_side = server.handle().peer(peer).expect("the peer");
    assert!(server_side.is_quic());
    server_side.send(&message(CHAT, 2, b"back")).unwrap();
    let back = block_on(async {
        loop {
            if let SocketEvent::Received(m) = next_socket_event(&mut client).await {
                return m;
            }
        }
    });
    assert_eq!(back.content_bytes().as_ref(), b"back");
    // Nothing travelled as a datagram: no channel was declared sequenced.
    assert_eq!(handle.datagram_stats().unwrap().sent, 0);
}

#[test]
fn a_sequenced_channel_travels_as_datagrams_and_the_rest_on_the_stream() {
    let mut server = quic_server(QuicConfig::default(), EndpointConfig::default());
    let (_client, handle, _) = connect(&mut server, &Dialer::default(), sequenced());
    for i in 0..20u8 {
        handle.send(&message(STATE, 1, &[i])).unwrap();
    }
    handle.send(&message(CHAT, 1, b"said")).unwrap();
    // The chat line is reliable and comes; each state that comes is newer
    // than the one before it.
    let mut states = Vec::new();
    block_on(async {
        loop {
            let (_, got) = next_message(&mut server).await;
            match got.channel_id() {
                STATE => states.push(got.content_bytes()[0]),
                _ => {
                    assert_eq!(got.content_bytes().as_ref(), b"said");
                    break;
                }
            }
        }
    });
    let stats = handle.datagram_stats().unwrap();
    assert_eq!((stats.sent, stats.sent_on_stream), (20, 0), "{stats:?}");
    assert!(states.windows(2).all(|w| w[0] < w[1]), "{states:?}");
}

#[test]
fn a_sequenced_message_too_big_for_a_datagram_goes_on_the_stream() {
    let mut server = quic_server(QuicConfig::default(), EndpointConfig::default());
    let (_client, handle, _) = connect(&mut server, &Dialer::default(), sequenced());
    let max = handle.max_datagram_size().expect("datagrams on");
    let big = vec![7u8; max + 100];
    handle.send(&message(STATE, 1, &big)).unwrap();
    let (_, got) = block_on(next_message(&mut server));
    assert_eq!(got.content_bytes().len(), big.len());
    let stats = handle.datagram_stats().unwrap();
    assert_eq!((stats.sent, stats.sent_on_stream), (0, 1), "{stats:?}");
}

#[test]
fn a_client_that_moves_to_a_new_socket_keeps_its_connection() {
    let mut server = quic_server(QuicConfig::default(), EndpointConfig::default());
    let (mut client, handle, peer) = connect(&mut server, &Dialer::default(), sequenced());
    let server_side = server.handle().peer(peer).unwrap();
    let before = server_side.peer_addr().unwrap();
    // The phone leaves Wi-Fi: its packets now come from another port.
    let moved = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let new_port = moved.local_addr().unwrap().port();
    handle.rebind(moved).unwrap();
    handle.send(&message(CHAT, 1, b"after the move")).unwrap();
    let (from, got) = block_on(next_message(&mut server));
    assert_eq!(
        (from, got.content_bytes().as_ref()),
        (peer, &b"after the move"[..])
    );
    // Datagrams follow the connection to its new path too.
    handle.send(&message(STATE, 1, b"x")).unwrap();
    let (_, got) = block_on(next_message(&mut server));
    assert_eq!(got.channel_id(), STATE);
    let after = server_side.peer_addr().unwrap();
    assert_ne!(before.port(), after.port());
    assert_eq!(after.port(), new_port);
    // No reconnect: the same peer, and the client saw no end.
    assert_eq!(server.handle().peer_count(), 1);
    assert!(client_events_now(&mut client)
        .iter()
        .all(|e| !matches!(e, SocketEvent::Disconnected(_))));
}

/// The client's events already queued.
fn client_events_now(client: &mut SocketStream) -> Vec<SocketEvent> {
    let mut events = Vec::new();
    block_on(async {
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(50), client.next_event()).await
        {
            events.push(event);
        }
    });
    events
}

/// A server on every interface, speaking TLS with a fresh identity; the
/// address another machine would dial, and the identity's fingerprint.
fn beyond_loopback() -> Option<(EndpointStream, String, switchboard::tls::Fingerprint)> {
    let lan = switchboard::socket::lan_address()?;
    let identity = ServerIdentity::generate().unwrap();
    let config = EndpointConfig {
        tls: TlsSettings::serving(TlsServer::new(&identity).unwrap()),
        quic: Some(QuicConfig::default()),
        ..EndpointConfig::default()
    };
    let server = EndpointStream::bind(BindScope::AllInterfaces, 0, config).unwrap();
    let addr = format!("{lan}:{}", server.quic_addr().unwrap().port());
    Some((server, addr, identity.fingerprint()))
}

#[test]
fn a_server_beyond_loopback_is_checked_over_quic_as_over_tcp() {
    let Some((_server, addr, fingerprint)) = beyond_loopback() else {
        eprintln!("no address beyond loopback on this machine: skipped");
        return;
    };
    let stranger = ServerIdentity::generate().unwrap().fingerprint();
    let wrong = Dialer::default().trust(ServerTrust::pinned(stranger));
    let mut client = wrong
        .connect(&format!("quic://{addr}"), SocketConfig::default())
        .into_stream();
    let reason = block_on(expect_disconnected(&mut client)).to_string();
    assert!(reason.contains("not the pinned"), "{reason}");
    let right = Dialer::default().trust(ServerTrust::pinned(fingerprint));
    let mut client = right
        .connect(&format!("quic://{addr}"), SocketConfig::default())
        .into_stream();
    block_on(expect_connected(&mut client));
}

#[test]
fn a_client_that_must_prove_its_address_connects_after_a_retry() {
    let quic = QuicConfig {
        address_validation: AddressValidation::Always,
        ..QuicConfig::default()
    };
    let mut server = quic_server(quic, EndpointConfig::default());
    let (_client, handle, _) = connect(&mut server, &Dialer::default(), SocketConfig::default());
    handle.send(&message(CHAT, 1, b"validated")).unwrap();
    let (_, got) = block_on(next_message(&mut server));
    assert_eq!(got.content_bytes().as_ref(), b"validated");
    assert_eq!(server.handle().quic_retries(), 1);
}

#[test]
fn attack_a_flood_of_quic_connections_from_one_address_is_turned_away_and_told_why() {
    let config = EndpointConfig {
        max_connections: 8,
        max_connections_per_address: 2,
        ..EndpointConfig::default()
    };
    let mut server = quic_server(QuicConfig::default(), config);
    let dialer = Dialer::default();
    // Half of max_connections makes the server crowded: past it, one
    // address holds at most two.
    let mut kept = Vec::new();
    for _ in 0..4 {
        kept.push(connect(&mut server, &dialer, SocketConfig::default()));
    }
    let mut extra = dialer
        .connect(&quic_url(&server), SocketConfig::default())
        .into_stream();
    let reason = block_on(expect_disconnected(&mut extra));
    let text = reason.to_string();
    assert!(
        text.contains("too many connections from your address") && text.contains("retry"),
        "{text}"
    );
    assert_eq!(server.handle().peer_count(), 4);
    // Turned away only once it proved its address: telling costs a
    // handshake, which a spoofed source never gets.
    assert_eq!(server.handle().quic_retries(), 1);
}

/// A client that speaks the protocol by hand over QUIC: its connection and
/// its stream, the handshake done.
fn raw_client(
    server: &EndpointStream,
) -> (quinn::Connection, quinn::SendStream, quinn::RecvStream) {
    let addr = server.quic_addr().unwrap().to_string();
    block_on(async {
        let opened = Dialer::default()
            .open_quic(&addr, &SocketConfig::default())
            .await
            .expect("open");
        let Transport::Quic(quic) = opened else {
            panic!("not QUIC")
        };
        let (connection, mut send, mut recv) = QuicTransport::into_parts(quic);
        raw_handshake(&mut tokio::io::join(&mut recv, &mut send)).await;
        (connection, send, recv)
    })
}

/// Waits until the server has `peer`'s connection open.
fn server_peer(server: &mut EndpointStream) -> PeerId {
    block_on(async {
        loop {
            if let EndpointEvent::PeerConnected { peer, .. } = next_server_event(server).await {
                return peer;
            }
        }
    })
}

#[test]
fn attack_datagrams_that_are_not_messages_are_refused_and_the_connection_goes_on() {
    let mut server = quic_server(QuicConfig::default(), EndpointConfig::default());
    let (connection, _send, _recv) = raw_client(&server);
    let peer = server_peer(&mut server);
    let bad: [&[u8]; 4] = [
        &[1, 2],                   // too short
        &[0, 0, 0, 1, 0, 1],       // a ping, on the system channel
        &[0, 0, 0, 2, 251, 1],     // an envelope cut off
        &[0, 0, 0, 3, 3, 1, b'x'], // a framework channel that is stream-only
    ];
    for datagram in bad {
        connection
            .send_datagram(Bytes::copy_from_slice(datagram))
            .unwrap();
    }
    // Then a good one, and an older one after it (stale).
    connection
        .send_datagram(Bytes::from_static(&[0, 0, 0, 9, STATE as u8, 1, b'n']))
        .unwrap();
    let (_, got) = block_on(next_message(&mut server));
    assert_eq!(
        (got.channel_id(), got.content_bytes().as_ref()),
        (STATE, &b"n"[..])
    );
    connection
        .send_datagram(Bytes::from_static(&[0, 0, 0, 8, STATE as u8, 1, b'o']))
        .unwrap();
    let handle = server.handle().peer(peer).unwrap();
    let deadline = Instant::now() + WAIT;
    let stats = loop {
        let stats = handle.datagram_stats().unwrap();
        if stats.refused == 4 && stats.stale == 1 {
            break stats;
        }
        assert!(Instant::now() < deadline, "{stats:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(stats.delivered, 1, "{stats:?}");
    assert_eq!(server.handle().peer_count(), 1, "the connection goes on");
}

#[test]
fn attack_more_datagrams_than_the_rate_allows_are_dropped_not_delivered() {
    let quic = QuicConfig {
        max_datagrams_per_second: 10,
        ..QuicConfig::default()
    };
    let mut server = quic_server(quic, EndpointConfig::default());
    let (connection, _send, _recv) = raw_client(&server);
    let peer = server_peer(&mut server);
    for sequence in 0..200u32 {
        let mut datagram = sequence.to_be_bytes().to_vec();
        datagram.extend_from_slice(&[STATE as u8, 1, b'z']);
        // The client's own send buffer (4 KiB) drops some: what matters
        // is that the server never delivers more than its rate.
        let _ = connection.send_datagram(Bytes::from(datagram));
    }
    let handle = server.handle().peer(peer).unwrap();
    let deadline = Instant::now() + WAIT;
    let stats = loop {
        let stats = handle.datagram_stats().unwrap();
        if stats.dropped > 0 && stats.delivered + stats.dropped + stats.stale >= 60 {
            break stats;
        }
        assert!(Instant::now() < deadline, "{stats:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    // A burst of 10, and whatever a second refilled while they arrived.
    assert!(stats.delivered <= 20, "{stats:?}");
}

#[test]
fn attack_streams_the_server_never_reads_hold_at_most_their_window() {
    // A native client opens one of the unidirectional streams the port
    // allows for WebTransport's sake, and pours bytes into it: the server
    // never reads it, so the client's writes stall at the stream's window.
    let mut server = quic_server(QuicConfig::default(), EndpointConfig::default());
    let (connection, _send, _recv) = raw_client(&server);
    let _peer = server_peer(&mut server);
    const WINDOW: usize = 1_250_000;
    let chunk = vec![0u8; 64 * 1024];
    let accepted = block_on(async {
        let mut extra = connection.open_uni().await.unwrap();
        let mut accepted = 0;
        while let Ok(written) =
            tokio::time::timeout(Duration::from_millis(500), extra.write(&chunk)).await
        {
            accepted += written.expect("the stream stays open");
            assert!(
                accepted <= WINDOW,
                "{accepted} bytes taken on an unread stream"
            );
        }
        accepted
    });
    assert!(
        accepted >= WINDOW - chunk.len(),
        "stalled early: {accepted}"
    );
    assert_eq!(server.handle().peer_count(), 1, "the connection goes on");
}
