//! The join-code relay sees only ciphertext: a player joining by code runs
//! TLS with the host, end to end inside the pipe. A recorder between the
//! relay and the host keeps every byte the relay forwards, and none of the
//! game's plaintext is in them; a browser's plain WebSocket player through
//! the same relay is found in them, so the recorder records. A relay on
//! another machine speaks TLS to its hosts and browsers: the code never
//! crosses in the clear, and a plain host or browser from afar is refused.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard::prelude::*;
use switchboard::socket::Dialer;
use switchboard::tls::{Fingerprint, ServerIdentity, ServerTrust, TlsServer, TlsSettings};
use switchboard::ClientEvent;
use switchboard_hosting::{
    HostConfig, HostStatus, JoinCodes, RendezvousConfig, RendezvousServer, RunningRendezvous,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::rendezvous::{blocking, host, host_linked, joined, joined_with, relay, WAIT};

/// A TCP proxy to `to` that keeps every byte it carries, both ways.
async fn recorder(to: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    recorder_on("127.0.0.1".parse().unwrap(), to).await
}

/// A recorder listening on `ip`.
async fn recorder_on(ip: IpAddr, to: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(to).await else {
                    return;
                };
                let (mut in_read, mut in_write) = inbound.into_split();
                let (mut out_read, mut out_write) = outbound.into_split();
                let up = pump(&mut in_read, &mut out_write, kept.clone());
                let down = pump(&mut out_read, &mut in_write, kept);
                let _ = tokio::join!(up, down);
            });
        }
    });
    (addr, seen)
}

/// Copies `from` to `to`, keeping what passes.
async fn pump(
    from: &mut (impl tokio::io::AsyncRead + Unpin),
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
    kept: Arc<Mutex<Vec<u8>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        kept.lock().unwrap().extend_from_slice(&buf[..n]);
    }
    let _ = to.shutdown().await;
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_relay_forwards_only_ciphertext_between_a_player_and_its_host() {
    let relay = relay(RendezvousConfig::default()).await;
    // The host reaches the relay through the recorder: every byte the
    // relay forwards to the host (and back) passes it.
    let (via, seen) = recorder(relay.local_addr()).await;
    let (server, _link, code) = host(via.to_string()).await;
    let tcp = format!("{code}@{}", relay.local_addr());
    let ws = format!("ws://{}/{code}", relay.websocket_addr().unwrap());
    let handle = server.handle();
    let names = blocking(move || {
        // Over TCP: TLS with the host, end to end.
        let _secret = joined(tcp, "ann-whose-name-is-secret");
        // A browser's WebSocket through the relay is plain (no TLS inside
        // a browser's WebSocket): the recorder's control.
        let _plain = joined(ws, "bob-who-speaks-plain");
        let stats = handle.stats_blocking(WAIT).unwrap();
        stats
            .clients
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    })
    .await;
    assert!(
        names.contains(&"ann-whose-name-is-secret".to_string()),
        "{names:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert!(
        contains(&seen, "bob-who-speaks-plain"),
        "the recorder saw the plain player's hello ({} bytes)",
        seen.len()
    );
    assert!(
        !contains(&seen, "ann-whose-name-is-secret"),
        "the TLS player's name crossed the relay in the clear"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_host_posed_as_by_another_key_is_refused() {
    // The relay (or anyone on the path) cannot pose as the host: a player
    // pinning another key than the host's is refused.
    let relay = relay(RendezvousConfig::default()).await;
    let (_server, _link, code) = host(relay.local_addr().to_string()).await;
    let addr = format!("{code}@{}", relay.local_addr());
    let why = blocking(move || {
        let dialer =
            JoinCodes::dialer().trust(ServerTrust::pinned(switchboard::tls::Fingerprint([9; 32])));
        let mut client = NetworkClient::connect_via(dialer, addr, ClientConfig::named("eve"));
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            for event in client
                .drain_timeout(Duration::from_millis(20))
                .collect::<Vec<_>>()
            {
                if let ClientEvent::Disconnected(reason) | ClientEvent::ConnectionLost(reason) =
                    event
                {
                    return reason.to_string();
                }
            }
        }
        panic!("not refused");
    })
    .await;
    assert!(why.contains("not the pinned"), "{why}");
}

/// A relay with an identity of its own, bound to every interface, and the
/// address other machines reach it at (this machine's on its network):
/// `None` on a machine without one.
async fn public_relay() -> Option<(RunningRendezvous, IpAddr, Fingerprint)> {
    let ip = switchboard::socket::lan_address()?;
    let identity = ServerIdentity::generate().unwrap();
    let config = RendezvousConfig {
        tls: TlsSettings::serving(TlsServer::new(&identity).unwrap()),
        ..RendezvousConfig::default()
    };
    let relay = RendezvousServer::builder()
        .bind(switchboard::socket::BindScope::AllInterfaces)
        .websocket_port(0)
        .config(config)
        .spawn()
        .unwrap();
    assert_eq!(relay.tls_fingerprint(), Some(identity.fingerprint()));
    Some((relay, ip, identity.fingerprint()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_relay_on_another_machine_speaks_tls_to_its_host_and_browsers() {
    let Some((relay, ip, relay_key)) = public_relay().await else {
        panic!("this machine has no address besides loopback to test from");
    };
    let relay_at = SocketAddr::new(ip, relay.local_addr().port());
    // Every byte between the host and the relay passes the recorder, which
    // listens on the network address too: the relay sees another machine.
    let (via, seen) = recorder_on(ip, relay_at).await;
    let config = HostConfig {
        dialer: Dialer::default().trust(ServerTrust::pinned(relay_key)),
        ..HostConfig::new(via.to_string())
    };
    let (_server, _link, status) = host_linked(config).await;
    let HostStatus::Ready { code, .. } = status else {
        panic!("{status}");
    };
    let host_key = ServerIdentity::load_or_create(&switchboard::tls::default_data_dir())
        .unwrap()
        .fingerprint();
    let tcp = format!("{code}@{relay_at}");
    let wss = format!(
        "wss://{ip}:{}/{code}",
        relay.websocket_addr().unwrap().port()
    );
    blocking(move || {
        // A native player: its code in plain, then TLS with the host.
        let _ann = joined(tcp, "ann");
        // A browser's way: wss:// to the relay (its frames are plain
        // inside, so the host's data connection for it is TLS too).
        let trust = ServerTrust::pinned(relay_key).pin(host_key);
        let _bob = joined_with(JoinCodes::dialer().trust(trust), wss, "bob-over-wss");
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() > 1000, "the recorder saw {} bytes", seen.len());
    assert!(
        !contains(&seen, &code),
        "the code crossed between host and relay in the clear"
    );
    assert!(
        !contains(&seen, "bob-over-wss"),
        "the browser's hello crossed between relay and host in the clear"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_plaintext_host_from_another_machine_is_refused() {
    let Some((relay, ip, _)) = public_relay().await else {
        panic!("this machine has no address besides loopback to test from");
    };
    let config = HostConfig {
        dialer: Dialer::default().insecure_plaintext(),
        ..HostConfig::new(SocketAddr::new(ip, relay.local_addr().port()).to_string())
    };
    let (_server, _link, status) = host_linked(config).await;
    let HostStatus::Refused(why) = status else {
        panic!("a plain host was let in: {status}");
    };
    assert!(why.contains("only TLS"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_code_plaintext_browser_from_another_machine_is_answered_403() {
    let Some((relay, ip, _)) = public_relay().await else {
        panic!("this machine has no address besides loopback to test from");
    };
    let mut browser = TcpStream::connect((ip, relay.websocket_addr().unwrap().port()))
        .await
        .unwrap();
    let request = "GET /K7PQ2MXB HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\n\
                   Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
                   Sec-WebSocket-Version: 13\r\n\r\n";
    browser.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let read = browser.read_to_string(&mut answer);
    tokio::time::timeout(WAIT, read).await.unwrap().unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("only TLS"), "{answer}");
}
