//! Fairness in a server's shared event queue: one peer's big or fast frames
//! cannot queue up ahead of everyone else's messages.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use switchboard::codec::CodecConfig;
use switchboard::{EndpointConfig, EndpointEvent, Message, SocketConfig, SocketStream};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// 200 KiB of bytes that do not compress.
fn noise(seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..200 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// How many of a flooder's 200 KiB messages the server's owner takes
/// between the moment another peer sends one small message and the moment
/// that message arrives, with a share of `per_peer` bytes per connection.
async fn flood_ahead_of_a_quiet_peer(per_peer: usize) -> usize {
    let config = EndpointConfig {
        max_queued_bytes_per_peer: per_peer,
        ..EndpointConfig::default()
    };
    let mut server = start_server(config);
    let addr = server.local_addr();
    // The flooder writes frames as fast as TCP takes them.
    let mut flooder = TcpStream::connect(addr).await.unwrap();
    raw_handshake(&mut flooder).await;
    let frames: Vec<Vec<u8>> = (0..4)
        .map(|i| {
            let message = Message::new(Chan::Data, Act::Seq, &noise(i)).unwrap();
            let encoded = message.encode(&CodecConfig::default()).unwrap();
            encoded.as_bytes().to_vec()
        })
        .collect();
    let flooding = tokio::spawn(async move {
        for i in 0.. {
            if flooder.write_all(&frames[i % 4]).await.is_err() {
                break;
            }
        }
    });
    let mut quiet = SocketStream::connect(addr, SocketConfig::default());
    expect_connected(&mut quiet).await;
    // The owner is slow (5 ms a message), so the queue fills with the
    // flood: the worst case for whoever comes next. (Slow enough too that
    // the quiet message's own trip, while the owner goes on, is worth less
    // than a message.)
    let sent = Arc::new(AtomicBool::new(false));
    let mut taken_while_waiting = 0;
    let mut taken = 0;
    loop {
        match next_server_event(&mut server).await {
            EndpointEvent::PeerConnected { .. } => {}
            EndpointEvent::Received(incoming) => {
                if incoming.message.action_id() == Act::Say as u16 {
                    break;
                }
                taken += 1;
                if sent.load(Ordering::Relaxed) {
                    taken_while_waiting += 1;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                // Once the owner has worked through a good part of the
                // flood, the queue is as full as it gets: the quiet peer
                // speaks.
                if taken == 40 {
                    sent.store(true, Ordering::Relaxed);
                    quiet
                        .send(&Message::new(Chan::Chat, Act::Say, "hello").unwrap())
                        .unwrap();
                }
            }
            other => panic!("{other:?}"),
        }
    }
    flooding.abort();
    taken_while_waiting
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_frame_flood_from_one_peer_cannot_queue_ahead_of_another_peer_s_message() {
    // With the default share (1 MiB), at most about 1 MiB of the flood (5
    // messages) and a batch of two past it, plus the batch being handed out,
    // is ahead of the quiet peer's message: 9.
    let shared =
        flood_ahead_of_a_quiet_peer(EndpointConfig::default().max_queued_bytes_per_peer).await;
    // Without a share, the whole queue (16 batches of two messages) may be.
    let unshared = flood_ahead_of_a_quiet_peer(usize::MAX).await;
    eprintln!("flood messages ahead of the quiet one: {shared} with the share, {unshared} without");
    assert!(shared <= 12, "{shared} flood messages were ahead");
    assert!(unshared > shared, "{unshared} without the share");
}
