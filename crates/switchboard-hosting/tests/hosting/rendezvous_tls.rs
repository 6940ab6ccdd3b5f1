//! The join-code relay sees only ciphertext: a player joining by code runs
//! TLS with the host, end to end inside the pipe. A recorder between the
//! relay and the host keeps every byte the relay forwards, and none of the
//! game's plaintext is in them; a browser's plain WebSocket player through
//! the same relay is found in them, so the recorder records.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard::prelude::*;
use switchboard::tls::ServerTrust;
use switchboard::ClientEvent;
use switchboard_hosting::{JoinCodes, RendezvousConfig};
use tokio::net::{TcpListener, TcpStream};

use super::rendezvous::{blocking, host, joined, relay, WAIT};

/// A TCP proxy to `to` that keeps every byte it carries, both ways.
async fn recorder(to: std::net::SocketAddr) -> (std::net::SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
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
