//! The pacer over real loopback TCP: a round of writes shared out among the
//! runtime's workers still reaches every peer, each peer's frames in order.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use switchboard::socket::{Pacer, PacerConfig};
use switchboard::{
    EndpointConfig, EndpointEvent, Message, PeerId, SocketConfig, SocketEvent, SocketStream,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_shared_among_workers_reaches_every_peer_in_order() {
    const PEERS: usize = 40;
    const FRAMES: u32 = 50;
    // No keep-alive within the test: it would flush what a lost share left
    // queued, and hide the loss.
    let quiet = SocketConfig {
        keepalive_interval: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(120),
        ..SocketConfig::default()
    };
    let mut server = start_server(EndpointConfig {
        socket: quiet.clone(),
        ..EndpointConfig::default()
    });
    let mut clients = Vec::new();
    let mut peers: Vec<PeerId> = Vec::new();
    for _ in 0..PEERS {
        let mut client = SocketStream::connect(server.local_addr(), quiet.clone());
        expect_connected(&mut client).await;
        match next_server_event(&mut server).await {
            EndpointEvent::PeerConnected { peer, .. } => peers.push(peer),
            other => panic!("{other:?}"),
        }
        clients.push(client);
    }
    let handle = server.handle();
    let config = PacerConfig {
        // Quiet: every delivery is due at once, all forty in one round,
        // shared out in rounds of four peers or more.
        split_flush_at: 4,
        ..PacerConfig::default()
    };
    let mut pacer = Pacer::new(config, Instant::now());
    // Rounds while other rounds' shares may still be writing: a peer's
    // frames must still leave in order.
    for i in 0..FRAMES {
        let encoded = handle
            .encode(&Message::new(Chan::Data, Act::Seq, &i).unwrap())
            .unwrap();
        assert_eq!(
            handle.queue_encoded_to_many(peers.iter().copied(), &encoded),
            PEERS
        );
        pacer.queued(&peers, PEERS, Instant::now());
        pacer.flush_due(&handle, Some(Instant::now()));
        assert_eq!(pacer.next_due(), None, "everything was due");
    }
    // Queued frames leave only when flushed: what arrives went through the
    // shares as much as through the caller's own writes.
    for client in &mut clients {
        for i in 0..FRAMES {
            match next_socket_event(client).await {
                SocketEvent::Received(message) => assert_eq!(message.content::<u32>().unwrap(), i),
                other => panic!("{other:?}"),
            }
        }
    }
}
