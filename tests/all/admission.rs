//! Per-address admission over real sockets, from several loopback addresses
//! (127.0.0.2, 127.0.0.3, ... all reach a server on 127.0.0.1): an attacking
//! address is limited, a client from another address always gets in.

use crate::common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use common::{start_server, turned_away_at_once, WAIT};
use switchboard::{EndpointConfig, SocketConfig, SocketEvent, SocketStream};
use tokio::net::{TcpSocket, TcpStream};

fn loopback(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// A raw TCP connection from `127.0.0.<from>`.
async fn tcp_from(from: u8, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(loopback(from), 0)).unwrap();
    socket.connect(to).await.unwrap()
}

/// Asserts that `client`'s first event is the server turning it away for
/// now: `SERVER_FULL`, with a retry-after.
async fn expect_told_to_come_back(client: &mut SocketStream) {
    match tokio::time::timeout(WAIT, client.next_event()).await {
        Ok(Some(SocketEvent::Disconnected(switchboard::DisconnectReason::ClosedByPeer {
            code,
            reason,
        }))) => {
            assert_eq!(code, switchboard::CloseCode::SERVER_FULL);
            assert!(
                switchboard::socket::retry_after_of(&reason).is_some(),
                "{reason}"
            );
        }
        other => panic!("the first event should say why: {other:?}"),
    }
}

/// Whether a Switchboard client from `127.0.0.<from>` completes its
/// handshake within `within`.
async fn gets_in(from: u8, to: SocketAddr, within: Duration) -> bool {
    let stream = tcp_from(from, to).await;
    let mut client = SocketStream::from_stream(stream, SocketConfig::default());
    matches!(
        tokio::time::timeout(within, client.next_event()).await,
        Ok(Some(SocketEvent::Connected))
    )
}

/// Whether a connection from `from` gets in within `WAIT`, opened again
/// each time it is told to come back ([`SocketStream::until_admitted`], as
/// the bots join).
async fn gets_in_once_room(from: u8, to: SocketAddr) -> bool {
    let open = || async move {
        let stream = tcp_from(from, to).await;
        Some(SocketStream::from_stream(stream, SocketConfig::default()))
    };
    let first = open().await.expect("a connection");
    let admitted = tokio::time::timeout(WAIT, first.until_admitted(open, 10)).await;
    matches!(admitted, Ok(Ok(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_exhaustion_from_one_address_cannot_lock_out_another() {
    let server = start_server(EndpointConfig::default());
    let addr = server.local_addr();
    // 70 silent connections from one address (what locked 17 of 24 others
    // out before the per-address limit).
    let mut silent = Vec::new();
    for _ in 0..70 {
        silent.push(tcp_from(2, addr).await);
    }
    let mut turned = 0;
    for stream in &mut silent {
        if turned_away_at_once(stream).await {
            turned += 1;
        }
    }
    // Until half the pending table (32 of 64) is taken the server is not
    // busy and takes everyone; then the address's cap (8) holds.
    assert_eq!(
        turned,
        70 - 32,
        "the address holds half the pending table, no more"
    );
    for attempt in 0..24 {
        assert!(
            gets_in(3, addr, WAIT).await,
            "attempt {attempt} from another address"
        );
    }
    assert!(server.handle().refused() >= 38);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_exhaustion_from_many_addresses_evicts_the_oldest_silent_one() {
    let config = EndpointConfig {
        max_pending_handshakes: 16,
        max_pending_handshakes_per_address: 2,
        pending_handshake_grace: Duration::from_millis(100),
        ..EndpointConfig::default()
    };
    let server = start_server(config);
    let addr = server.local_addr();
    // 40 silent connections from 20 addresses: the pending table (16) is
    // full; each newcomer evicts the oldest once it had its grace.
    let mut silent = Vec::new();
    for from in 2..22 {
        for _ in 0..2 {
            silent.push(tcp_from(from, addr).await);
        }
    }
    // Each from its own address: the server counts a handshake as pending
    // until just after its welcome is out, so a client that got in and
    // left at once may still hold one of its address's two places.
    for attempt in 0..10 {
        assert!(
            gets_in(100 + attempt, addr, Duration::from_secs(2)).await,
            "newcomer {attempt} got in past a full pending table"
        );
    }
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_joins_beyond_the_pending_table_waits_its_turn_and_nobody_is_evicted() {
    let config = EndpointConfig {
        max_pending_handshakes: 4,
        // Longer than the test: only completed handshakes make room.
        pending_handshake_grace: Duration::from_secs(60),
        ..EndpointConfig::default()
    };
    let server = start_server(config);
    let addr = server.local_addr();
    // 40 connections open before any says hello: the server takes 4 and
    // leaves the rest in its backlog (it used to take all 40 and evict 36).
    let mut streams = Vec::new();
    for from in 2..7 {
        for _ in 0..8 {
            streams.push(tcp_from(from, addr).await);
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let joins = streams.into_iter().map(|stream| async move {
        let mut client = SocketStream::from_stream(stream, SocketConfig::default());
        let first = tokio::time::timeout(WAIT, client.next_event()).await;
        (matches!(first, Ok(Some(SocketEvent::Connected))), client)
    });
    let joined = futures::future::join_all(joins).await;
    let connected = joined.iter().filter(|(ok, _)| *ok).count();
    assert_eq!(connected, 40, "every client of the burst got in");
    assert_eq!(server.handle().handshake_failures(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_exhaustion_from_one_address_is_capped_per_address() {
    // Crowded (half of its 8 connections open) once the four are in: the
    // per-address cap holds from then on.
    let config = EndpointConfig {
        max_connections: 8,
        max_connections_per_address: 4,
        ..EndpointConfig::default()
    };
    let server = start_server(config);
    let addr = server.local_addr();
    let mut held = Vec::new();
    for _ in 0..4 {
        let stream = tcp_from(2, addr).await;
        let mut client = SocketStream::from_stream(stream, SocketConfig::default());
        assert!(matches!(
            tokio::time::timeout(WAIT, client.next_event()).await,
            Ok(Some(SocketEvent::Connected))
        ));
        held.push(client);
    }
    let mut fifth = tcp_from(2, addr).await;
    assert!(
        turned_away_at_once(&mut fifth).await,
        "a fifth from the same address"
    );
    assert!(gets_in(3, addr, WAIT).await, "another address is welcome");
    // A closed connection frees its address's slot (once the server has
    // seen it close: until then a newcomer is turned away and tries again).
    drop(held.pop());
    assert!(gets_in_once_room(2, addr).await);
}

#[tokio::test]
async fn attached_connections_are_admitted_under_the_address_they_name() {
    let mut server = start_server(EndpointConfig {
        max_connections: 4,
        max_connections_per_address: 2,
        ..EndpointConfig::default()
    });
    let handle = server.handle();
    let far = SocketAddr::new(IpAddr::from([203, 0, 113, 7]), 5000);
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let peer = handle.attach(theirs, far).expect("admitted");
        let mut client = SocketStream::from_stream(ours, SocketConfig::default());
        assert!(matches!(
            tokio::time::timeout(WAIT, client.next_event())
                .await
                .unwrap(),
            Some(SocketEvent::Connected)
        ));
        clients.push((peer, client));
    }
    // The server sees the named address, and counts it: a third is refused.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        if let switchboard::EndpointEvent::PeerConnected { addr, .. } =
            common::next_server_event(&mut server).await
        {
            seen.push(addr);
        }
    }
    assert_eq!(seen, [far, far]);
    let (_, theirs) = tokio::io::duplex(1024);
    assert!(
        handle.attach(theirs, far).is_none(),
        "over the address's limit"
    );
    // Another address still gets in.
    let (_, theirs) = tokio::io::duplex(1024);
    let near = SocketAddr::new(IpAddr::from([203, 0, 113, 8]), 5000);
    assert!(handle.attach(theirs, near).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_turned_away_at_accept_hears_why_and_is_never_connected() {
    // Regression: the hello and the close came as `Connected` then
    // `Disconnected`, so `until_admitted` took a turned-away connection
    // for an admitted one and never came back.
    let server = start_server(EndpointConfig::default());
    let addr = server.local_addr();
    // The pending table half full from 127.0.0.2: the server is busy and
    // the address past its cap.
    let mut silent = Vec::new();
    for _ in 0..40 {
        silent.push(tcp_from(2, addr).await);
    }
    let stream = tcp_from(2, addr).await;
    let mut client = SocketStream::from_stream(stream, SocketConfig::default());
    expect_told_to_come_back(&mut client).await;
    // Told to come back, a joiner does, and gets in once the silent ones
    // are gone.
    let open = move || async move {
        let stream = tcp_from(2, addr).await;
        Some(SocketStream::from_stream(stream, SocketConfig::default()))
    };
    let first = open().await.unwrap();
    let joining = tokio::spawn(first.until_admitted(open, 5));
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(silent);
    let admitted = tokio::time::timeout(WAIT, joining).await.unwrap().unwrap();
    assert!(admitted.is_ok(), "{admitted:?}");
    assert!(server.handle().refused() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_turned_away_at_accept_hears_the_retry_after_not_plaintext() {
    // Regression: a busy TLS server tells a client it turns away in
    // plaintext (a hello and a close, before any TLS); the client's TLS
    // read that as "a plain server", and the retry-after was lost.
    use switchboard::tls::{ServerIdentity, ServerTrust, TlsClient, TlsServer, TlsSettings};
    let identity = ServerIdentity::generate().unwrap();
    let config = EndpointConfig {
        tls: TlsSettings::serving(TlsServer::new(&identity).unwrap()),
        ..EndpointConfig::default()
    };
    let server =
        switchboard::EndpointStream::bind(switchboard::BindScope::AllInterfaces, 0, config)
            .expect("bind");
    let addr = SocketAddr::new(loopback(1), server.local_addr().port());
    let mut silent = Vec::new();
    for _ in 0..40 {
        silent.push(tcp_from(2, addr).await);
    }
    let stream = tcp_from(2, addr).await;
    let tls = TlsClient::new(ServerTrust::pinned(identity.fingerprint()));
    let opening: switchboard::socket::Opening = Box::pin(async move {
        let (stream, _) = tls.handshake(stream, &addr.to_string()).await?;
        Ok(switchboard::socket::Transport::Stream(Box::new(stream)))
    });
    let mut client =
        switchboard::Socket::connect_with(opening, SocketConfig::default()).into_stream();
    expect_told_to_come_back(&mut client).await;
}
