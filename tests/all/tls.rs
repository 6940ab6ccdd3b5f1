//! TLS off this machine: a server beyond loopback serves TLS with its
//! identity, a client checks it by a pin, known hosts or the roots; what
//! each side does when the other is not what it expects; and the attacks
//! (a man in the middle with another key, on the pinned, the known-hosts
//! and the CA path; a downgrade to plaintext, a slow TLS client, a flood of
//! handshakes from one address).

use crate::common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use switchboard::socket::Dialer;
use switchboard::tls::{Fingerprint, KnownHosts, ServerIdentity, ServerTrust, TlsServer};
use switchboard::{
    BindScope, CloseCode, DisconnectReason, EndpointConfig, EndpointEvent, EndpointStream, Message,
    PeerId, SocketConfig, SocketEvent, SocketStream, WebSocketConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A fresh identity and the TLS that serves it.
fn identity() -> (TlsServer, Fingerprint) {
    let identity = ServerIdentity::generate().unwrap();
    (TlsServer::new(&identity).unwrap(), identity.fingerprint())
}

/// A server on every interface speaking `tls`.
fn tls_server(tls: TlsServer, config: EndpointConfig) -> EndpointStream {
    let config = EndpointConfig {
        tls: switchboard::tls::TlsSettings::serving(tls),
        ..config
    };
    EndpointStream::bind(BindScope::AllInterfaces, 0, config).expect("bind")
}

/// `127.0.0.1:port` of a server.
fn local(server: &EndpointStream) -> String {
    format!("127.0.0.1:{}", server.local_addr().port())
}

/// A path in the temp directory of its own.
fn temp_path(name: &str) -> PathBuf {
    let fingerprint = ServerIdentity::generate().unwrap().fingerprint();
    std::env::temp_dir().join(format!(
        "switchboard-{name}-{}",
        &fingerprint.to_string()[..12]
    ))
}

/// Runs `f` on the library's runtime.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    switchboard::runtime::handle().block_on(f)
}

/// The first event of a client, within the deadline.
async fn first_event(client: &mut SocketStream) -> SocketEvent {
    tokio::time::timeout(WAIT, client.next_event())
        .await
        .expect("an event in time")
        .expect("an event")
}

/// How a client's connection ended, within the deadline.
async fn ending(client: &mut SocketStream) -> DisconnectReason {
    loop {
        match first_event(client).await {
            SocketEvent::Disconnected(reason) => return reason,
            SocketEvent::Connected => panic!("connected where it should have been refused"),
            _ => {}
        }
    }
}

/// Why `dialer` could not connect to `addr`.
fn refused(dialer: &Dialer, addr: &str) -> String {
    let mut client = dialer.connect(addr, SocketConfig::default()).into_stream();
    failure(&block_on(ending(&mut client)))
}

/// The text of a failed connection's reason.
fn failure(reason: &DisconnectReason) -> String {
    match reason {
        DisconnectReason::ConnectFailed(err) => err.to_string(),
        other => panic!("expected a failure to connect, got {other}"),
    }
}

async fn next_server_event(server: &mut EndpointStream) -> EndpointEvent {
    tokio::time::timeout(WAIT, server.next_event())
        .await
        .expect("a server event in time")
        .expect("a server event")
}

/// `dialer` connected to `addr`, and `server` announcing it: the client
/// and its peer id on the server.
fn connected(dialer: &Dialer, addr: &str, server: &mut EndpointStream) -> (SocketStream, PeerId) {
    let mut client = dialer.connect(addr, SocketConfig::default()).into_stream();
    let peer = block_on(async {
        assert!(matches!(
            first_event(&mut client).await,
            SocketEvent::Connected
        ));
        match next_server_event(server).await {
            EndpointEvent::PeerConnected { peer, .. } => peer,
            other => panic!("{other:?}"),
        }
    });
    (client, peer)
}

#[test]
fn a_pinned_client_and_a_tls_server_exchange_messages() {
    let (tls, fingerprint) = identity();
    let mut server = tls_server(tls, EndpointConfig::default());
    assert_eq!(server.handle().tls_fingerprint(), Some(fingerprint));
    let dialer = Dialer::default().trust(ServerTrust::pinned(fingerprint));
    let addr = format!("tls://{}", local(&server));
    let (mut client, peer) = connected(&dialer, &addr, &mut server);
    block_on(async {
        client
            .send(&Message::new(Chan::Chat, Act::Say, "over TLS").unwrap())
            .unwrap();
        match next_server_event(&mut server).await {
            EndpointEvent::Received(incoming) => {
                assert_eq!(incoming.peer, peer);
                assert_eq!(incoming.message.content::<String>().unwrap(), "over TLS");
            }
            other => panic!("{other:?}"),
        }
        server
            .handle()
            .send_to(peer, &Message::new(Chan::Chat, Act::Say, "back").unwrap())
            .unwrap();
        match first_event(&mut client).await {
            SocketEvent::Received(message) => {
                assert_eq!(message.content::<String>().unwrap(), "back")
            }
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn a_man_in_the_middle_with_another_key_is_refused_by_a_pinned_client() {
    // The "server" the client reaches holds another key than the pinned
    // one: a man in the middle with a certificate of his own.
    let (mallory, presented) = identity();
    let (_, pinned) = identity();
    let server = tls_server(mallory, EndpointConfig::default());
    let dialer = Dialer::default().trust(ServerTrust::pinned(pinned));
    let why = refused(&dialer, &format!("tls://{}", local(&server)));
    assert!(
        why.contains(&presented.to_string()) && why.contains(&pinned.to_string()),
        "{why}"
    );
    assert!(why.contains("not the pinned"), "{why}");
}

#[test]
fn a_man_in_the_middle_with_another_key_is_refused_by_known_hosts() {
    let (tls, real) = identity();
    let server = tls_server(tls, EndpointConfig::default());
    let known_hosts = temp_path("known-hosts");
    let trust = ServerTrust::nothing().known_hosts(&known_hosts);
    let dialer = Dialer::default().trust(trust);
    let addr = format!("tls://{}", local(&server));
    // First use: trusted, and remembered.
    let mut first = dialer.connect(&addr, SocketConfig::default()).into_stream();
    assert!(matches!(
        block_on(first_event(&mut first)),
        SocketEvent::Connected
    ));
    assert_eq!(
        KnownHosts::lookup(&known_hosts, &local(&server)).unwrap(),
        Some(real)
    );
    // An address remembered with the real key now answers with another.
    let (mallory, presented) = identity();
    let impostor = tls_server(mallory, EndpointConfig::default());
    KnownHosts::remember(&known_hosts, &local(&impostor), real).unwrap();
    let why = refused(&dialer, &format!("tls://{}", local(&impostor)));
    assert!(why.contains("HAS CHANGED"), "{why}");
    assert!(
        why.contains(&real.to_string()) && why.contains(&presented.to_string()),
        "{why}"
    );
    assert!(
        why.contains("--forget-host"),
        "says how to accept it: {why}"
    );
    std::fs::remove_file(&known_hosts).unwrap();
}

#[test]
fn a_tls_client_meeting_a_plain_server_is_told_it_answered_in_plaintext() {
    let server = start_server(EndpointConfig::default());
    let dialer = Dialer::default().trust(ServerTrust::nothing());
    let why = refused(&dialer, &format!("tls://{}", local(&server)));
    assert!(why.contains("answered in plaintext"), "{why}");
}

#[test]
fn a_downgrade_to_plaintext_from_another_machine_is_refused_with_its_reason() {
    let Some(ip) = switchboard::socket::lan_address() else {
        eprintln!("skipped: this machine has no address but loopback");
        return;
    };
    let (tls, _) = identity();
    let server = tls_server(
        tls,
        EndpointConfig {
            websocket: Some(WebSocketConfig::on_port(0)),
            ..EndpointConfig::default()
        },
    );
    let addr = SocketAddr::new(ip, server.local_addr().port()).to_string();
    let mut plain = Dialer::default()
        .insecure_plaintext()
        .connect(&addr, SocketConfig::default())
        .into_stream();
    // Told as a full server tells a turned-away client: its hello, then a
    // close with the reason.
    let told = block_on(async {
        loop {
            if let SocketEvent::Disconnected(reason) = first_event(&mut plain).await {
                return reason;
            }
        }
    });
    match told {
        DisconnectReason::ClosedByPeer { code, reason } => {
            assert_eq!(code, CloseCode::REFUSED);
            assert!(reason.contains("only TLS"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(
        wait_until(|| server.handle().handshake_failures() == 1),
        "counted as a failed handshake"
    );
    // From this machine, plain is let in: nothing leaves it.
    let mut local_plain = SocketStream::connect(local(&server), SocketConfig::default());
    assert!(matches!(
        block_on(first_event(&mut local_plain)),
        SocketEvent::Connected
    ));
    // The WebSocket port the same: a plain ws:// from another machine is
    // answered 403, saying why.
    let ws_port = server.websocket_addr().unwrap().port();
    let why = refused(
        &Dialer::default().insecure_plaintext(),
        &format!("ws://{}/", SocketAddr::new(ip, ws_port)),
    );
    assert!(why.contains("403") && why.contains("only TLS"), "{why}");
}

#[test]
fn a_client_speaks_tls_to_another_machine_unless_told_otherwise() {
    let Some(ip) = switchboard::socket::lan_address() else {
        eprintln!("skipped: this machine has no address but loopback");
        return;
    };
    // A plain server beyond loopback (the operator's choice), reached by a
    // default client: it speaks TLS, so a path that strips TLS (or a
    // plain server) is found out, not trusted.
    let server = EndpointStream::bind(
        BindScope::AllInterfaces,
        0,
        EndpointConfig {
            tls: switchboard::tls::TlsSettings::insecure_plaintext(),
            ..EndpointConfig::default()
        },
    )
    .unwrap();
    let addr = SocketAddr::new(ip, server.local_addr().port()).to_string();
    let why = refused(&Dialer::default().trust(ServerTrust::nothing()), &addr);
    assert!(why.contains("answered in plaintext"), "{why}");
    // And ws:// to another machine is refused before a byte is sent.
    let why = refused(&Dialer::default(), &format!("ws://{addr}/"));
    assert!(why.contains("wss://"), "{why}");
}

#[test]
fn a_wss_client_joins_the_websocket_port_through_tls() {
    let (tls, fingerprint) = identity();
    let mut server = tls_server(
        tls,
        EndpointConfig {
            websocket: Some(WebSocketConfig::on_port(0)),
            ..EndpointConfig::default()
        },
    );
    let port = server.websocket_addr().unwrap().port();
    let dialer = Dialer::default().trust(ServerTrust::pinned(fingerprint));
    let (client, _) = connected(&dialer, &format!("wss://127.0.0.1:{port}/"), &mut server);
    block_on(async {
        client
            .send(&Message::new(Chan::Chat, Act::Say, "wss").unwrap())
            .unwrap();
        assert!(matches!(
            next_server_event(&mut server).await,
            EndpointEvent::Received(_)
        ));
    });
}

#[test]
fn a_slow_tls_client_is_timed_out() {
    let (tls, _) = identity();
    let handshake_timeout = Duration::from_millis(300);
    let server = tls_server(
        tls,
        EndpointConfig {
            socket: SocketConfig {
                handshake_timeout,
                ..SocketConfig::default()
            },
            ..EndpointConfig::default()
        },
    );
    let addr = local(&server);
    block_on(async {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        // The first bytes of a TLS record, then nothing.
        stream.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
        let started = Instant::now();
        let mut sink = [0u8; 64];
        let read = tokio::time::timeout(WAIT, stream.read(&mut sink))
            .await
            .expect("closed in time");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        // The bound tested: the handshake timeout, not the test's deadline.
        assert!(
            started.elapsed() < handshake_timeout * 5,
            "{:?}",
            started.elapsed()
        );
    });
    assert!(wait_until(|| server.handle().handshake_failures() == 1));
}

#[test]
fn a_tls_handshake_flood_from_one_address_is_capped_like_pending_handshakes() {
    let (tls, fingerprint) = identity();
    let server = tls_server(
        tls,
        EndpointConfig {
            max_pending_handshakes: 8,
            max_pending_handshakes_per_address: 2,
            pending_handshake_grace: Duration::from_secs(30),
            ..EndpointConfig::default()
        },
    );
    let addr = local(&server);
    block_on(async {
        // Half-open TLS handshakes from one address: past the per-address
        // cap under pressure, further ones are turned away at accept.
        let mut flood = Vec::new();
        for _ in 0..8 {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            stream.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
            flood.push(stream);
        }
        assert!(
            wait_until(|| server.handle().refused() >= 4),
            "refused {}",
            server.handle().refused()
        );
        drop(flood);
    });
    // And once the flood has gone, a real client gets in.
    let mut client = Dialer::default()
        .trust(ServerTrust::pinned(fingerprint))
        .connect(&format!("tls://{addr}"), SocketConfig::default())
        .into_stream();
    assert!(matches!(
        block_on(first_event(&mut client)),
        SocketEvent::Connected
    ));
}

/// Waits until `done` holds, within the deadline.
fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

/// An operator's CA, and a server certificate it issued for `name`, with
/// its key: the identity a server of a fleet would be given.
fn issued_by_ca(name: &str) -> (ServerIdentity, Vec<u8>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let chain = format!("{}{}", cert.pem(), ca.pem());
    let identity = ServerIdentity::from_pem(chain.as_bytes(), key.serialize_pem().as_bytes());
    (identity.unwrap(), ca.der().to_vec())
}

#[test]
fn a_ca_issued_certificate_is_trusted_by_its_authority_and_a_man_in_the_middle_is_not() {
    let (issued, authority) = issued_by_ca("localhost");
    let mut server = tls_server(TlsServer::new(&issued).unwrap(), EndpointConfig::default());
    let port = server.local_addr().port();
    // Nothing pinned, no known hosts: the authority alone vouches.
    let trust = ServerTrust::nothing().root(authority.clone());
    let dialer = Dialer::default().trust(trust);
    let _client = connected(&dialer, &format!("tls://localhost:{port}"), &mut server);
    // A man in the middle: a certificate of his own for the same name, or
    // one the authority issued for another name, is refused.
    let (mallory, presented) = identity();
    let impostor = tls_server(mallory, EndpointConfig::default());
    let why = refused(
        &dialer,
        &format!("tls://localhost:{}", impostor.local_addr().port()),
    );
    assert!(
        why.contains(&presented.to_string()) && why.contains("nothing here trusts"),
        "{why}"
    );
    let (elsewhere, _) = issued_by_ca("evil.example");
    let other_name = tls_server(
        TlsServer::new(&elsewhere).unwrap(),
        EndpointConfig::default(),
    );
    let why = refused(
        &Dialer::default().trust(ServerTrust::nothing().root(authority)),
        &format!("tls://localhost:{}", other_name.local_addr().port()),
    );
    assert!(why.contains("nothing here trusts"), "{why}");
}
