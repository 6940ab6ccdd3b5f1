//! No byte a peer sent waits for some later, unrelated event on its socket
//! (a keep-alive, seconds away) before the server reads it.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use switchboard::{EndpointConfig, EndpointEvent, Message};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The server writes its hello first and then reads the peer's, so a quick
/// peer's first message can land while the server is still taking that
/// hello off the socket. It used to clear the socket's readiness after such
/// a read, and a message that landed in between waited for the keep-alive
/// (5 s) to be read: a game's first request answered seconds late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_the_moment_the_handshake_ends_is_read_at_once() {
    let mut server = start_server(EndpointConfig::default());
    let addr = server.local_addr();
    let frame = Message::from_raw(16, 1, Bytes::from_static(b"first"))
        .encode(&Default::default())
        .unwrap();
    for attempt in 0..300 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        raw_handshake(&mut stream).await;
        stream.write_all(frame.as_bytes()).await.unwrap();
        let received = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                if let EndpointEvent::Received(incoming) = next_server_event(&mut server).await {
                    break incoming.message.content_bytes().to_vec();
                }
            }
        })
        .await;
        assert_eq!(
            received.as_deref().ok(),
            Some(&b"first"[..]),
            "attempt {attempt}: the message was not read within a second"
        );
    }
}
