//! What a malicious server can do to a `NetworkClient`: flood it, send it
//! nonsense in the session protocol. The game's frame must still end, its
//! memory stay bounded, and nothing panic.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use switchboard::manager::protocol::{self, Welcome};
use switchboard::session::ReconnectToken;
use switchboard::{
    ClientConfig, ClientEvent, ClientId, EndpointConfig, EndpointEvent, EndpointStream, Message,
    NetworkClient,
};

/// A server that welcomes its first client, then sends `flood` to it as
/// fast as its queue takes them, until the test ends.
fn hostile(flood: impl Fn(u64) -> Message + Send + 'static) -> std::net::SocketAddr {
    let runtime = switchboard::runtime::handle();
    let mut server: EndpointStream =
        runtime.block_on(async { start_server(EndpointConfig::default()) });
    let addr = server.local_addr();
    runtime.spawn(async move {
        let handle = server.handle();
        let peer = loop {
            if let EndpointEvent::PeerConnected { peer, .. } = next_server_event(&mut server).await
            {
                break peer;
            }
        };
        let welcome = Welcome {
            client: ClientId::random(),
            token: ReconnectToken::generate(),
            resumed: false,
            grace_secs: u32::MAX,
        };
        let _ = handle.send_to(
            peer,
            &protocol::session_message(protocol::WELCOME, &welcome),
        );
        let mut n = 0;
        // Keep the server's own queue fed (below its slow-consumer limit),
        // nothing more.
        while let Some(socket) = handle.peer(peer) {
            while socket.stats().queued_frames < 2000 {
                if socket.send(&flood(n)).is_err() {
                    return;
                }
                n += 1;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            while let Some(Some(_)) = futures::FutureExt::now_or_never(server.next_event()) {}
        }
    });
    addr
}

#[test]
fn message_flood_from_a_server_cannot_keep_a_drain_or_a_poll_from_returning() {
    let addr = hostile(|n| Message::new(Chan::Data, Act::Seq, &n).unwrap());
    let mut client = NetworkClient::connect(addr, ClientConfig::named("ann"));
    let deadline = Instant::now() + WAIT;
    while !client.is_welcomed() {
        assert!(Instant::now() < deadline, "welcomed by the hostile server");
        client.poll_timeout(Duration::from_millis(10));
    }
    // The game is busy for a while; the flood fills the socket's queue.
    std::thread::sleep(Duration::from_millis(300));
    let limit = switchboard::SocketConfig::default().event_queue_len;
    let deadline = Instant::now() + WAIT;
    let mut seen = 0;
    while seen < 5 * limit {
        let started = Instant::now();
        let events = client.drain_timeout(Duration::from_millis(5)).count();
        assert!(events <= limit + 8, "one drain handed out {events} events");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "a drain that took {:?}",
            started.elapsed()
        );
        seen += events;
        assert!(
            Instant::now() < deadline,
            "the flood reached the game: {seen} events"
        );
    }
    // Signals too: one poll delivers a bounded number.
    let started = Instant::now();
    let delivered = client.poll();
    assert!(delivered <= limit + 8, "one poll delivered {delivered}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(client.is_welcomed(), "the flood is not a reason to leave");
    assert!(!matches!(
        client.drain().last(),
        Some(ClientEvent::Disconnected(_))
    ));
}
