//! Counts this process's open file descriptors, so it lives alone in its
//! own test binary: no other test may open sockets meanwhile.

mod common;

use std::time::Duration;

use common::*;
use switchboard::{EndpointConfig, EndpointEvent, SocketConfig, SocketStream};

#[test]
fn ended_connections_release_their_sockets_even_while_handles_are_held() {
    fn open_fds() -> usize {
        std::fs::read_dir("/proc/self/fd").unwrap().count()
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut server = start_server(EndpointConfig::default());
        let before = open_fds();
        let mut clients = Vec::new();
        for _ in 0..20 {
            let mut client = SocketStream::connect(server.local_addr(), SocketConfig::default());
            expect_connected(&mut client).await;
            clients.push(client);
        }
        let mut held = Vec::new();
        while held.len() < 20 {
            if let EndpointEvent::PeerConnected { peer, .. } = next_server_event(&mut server).await
            {
                held.push(server.handle().peer(peer).unwrap());
            }
        }
        for client in &clients {
            client.close("done");
        }
        let mut gone = 0;
        while gone < 20 {
            if let EndpointEvent::PeerDisconnected { .. } = next_server_event(&mut server).await {
                gone += 1;
            }
        }
        for client in &mut clients {
            expect_disconnected(client).await;
        }
        // Both ends of every connection are closed although `held` still
        // has a handle to each server-side connection.
        let deadline = std::time::Instant::now() + WAIT;
        while open_fds() > before {
            assert!(
                std::time::Instant::now() < deadline,
                "{} fds open, {before} before",
                open_fds()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(held
            .iter()
            .all(|h| h.state() == switchboard::SocketState::Closed));
    });
}
