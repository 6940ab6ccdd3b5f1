//! Sockets over real loopback TCP: delivery, order, slow consumers, closing.
//!
//! Longer than 500 lines on purpose: one connection's whole life in one place, one test per
//! scenario sharing the helpers at the top; split, they would repeat them.

use crate::common;

use std::time::Duration;

use common::*;
use switchboard::{
    CloseCode, DisconnectReason, EndpointConfig, EndpointEvent, Message, PeerId, SocketConfig,
    SocketEvent, SocketStream,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_messages_arrive_complete_and_in_order_both_ways() {
    let mut server = start_server(EndpointConfig::default());
    let mut client = SocketStream::connect(server.local_addr(), SocketConfig::default());
    expect_connected(&mut client).await;
    let peer = match next_server_event(&mut server).await {
        EndpointEvent::PeerConnected { peer, .. } => peer,
        other => panic!("expected PeerConnected, got {other:?}"),
    };

    const N: u32 = 10_000;
    // Every 10th message is large and compressible, so both frame kinds mix.
    let content = |i: u32| {
        (
            i,
            if i % 10 == 0 {
                "x".repeat(2000)
            } else {
                String::new()
            },
        )
    };
    // Sends never block: a burst larger than the outbound queue (4096 frames)
    // would be a slow consumer. Send as a game would, in slices, letting the
    // writer drain between them.
    async fn drain(handle: &switchboard::socket::SocketHandle) {
        while handle.stats().queued_frames > 1000 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let client_handle = client.handle();
    for i in 0..N {
        client
            .send(&Message::new(Chan::Data, Act::Seq, &content(i)).unwrap())
            .unwrap();
        if i % 1000 == 999 {
            drain(&client_handle).await;
        }
    }
    let handle = server.handle();
    let peer_handle = handle.peer(peer).unwrap();
    for i in 0..N {
        handle
            .send_to(
                peer,
                &Message::new(Chan::Data, Act::Seq, &content(i)).unwrap(),
            )
            .unwrap();
        if i % 1000 == 999 {
            drain(&peer_handle).await;
        }
    }

    let mut expected = 0;
    while expected < N {
        match next_server_event(&mut server).await {
            EndpointEvent::Received(incoming) => {
                assert_eq!(incoming.peer, peer);
                let got: (u32, String) = incoming.message.content().unwrap();
                assert_eq!(got, content(expected));
                expected += 1;
            }
            other => panic!("unexpected server event {other:?}"),
        }
    }
    let mut expected = 0;
    while expected < N {
        match next_socket_event(&mut client).await {
            SocketEvent::Received(message) => {
                let got: (u32, String) = message.content().unwrap();
                assert_eq!(got, content(expected));
                expected += 1;
            }
            other => panic!("unexpected client event {other:?}"),
        }
    }
    let stats = client.handle().stats();
    assert!(
        stats.frames_out >= N as u64 && stats.frames_in >= N as u64,
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reading_peer_is_dropped_as_slow_consumer_while_another_keeps_receiving() {
    let mut config = EndpointConfig::default();
    config.socket.max_outbound_bytes = 256 * 1024;
    config.socket.codec.compress_threshold = usize::MAX;
    let mut server = start_server(config);
    let addr = server.local_addr();

    // The stalled peer: completes the handshake, then never reads again. Its
    // receive buffer is kept small: loopback may otherwise autotune it to
    // 32 MiB and swallow the whole test.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    raw_handshake(&mut stalled).await;
    let stalled_id = match next_server_event(&mut server).await {
        EndpointEvent::PeerConnected { peer, .. } => peer,
        other => panic!("{other:?}"),
    };
    let mut reader = SocketStream::connect(addr, SocketConfig::default());
    expect_connected(&mut reader).await;
    let reader_id = match next_server_event(&mut server).await {
        EndpointEvent::PeerConnected { peer, .. } => peer,
        other => panic!("{other:?}"),
    };

    // The healthy reader counts what it gets in its own task.
    let counter = tokio::spawn(async move {
        let mut got = 0u32;
        loop {
            match next_socket_event(&mut reader).await {
                SocketEvent::Received(message) => {
                    let (i, _): (u32, Vec<u8>) = message.content().unwrap();
                    assert_eq!(i, got, "in order, none lost");
                    got += 1;
                    if got == 2000 {
                        return got;
                    }
                }
                other => panic!("healthy reader got {other:?}"),
            }
        }
    });

    let handle = server.handle();
    let blob = vec![0xA5u8; 8 * 1024];
    let mut stalled_gone = None;
    for i in 0..2000u32 {
        handle
            .broadcast(&Message::new(Chan::Data, Act::Seq, &(i, &blob)).unwrap())
            .unwrap();
        // Keep the healthy reader's queue well under its 256 KiB limit,
        // however loaded the machine is; the stalled peer never drains, and
        // its queue fills.
        // (Gone once the reader has all 2,000 and hangs up: it may be done
        // before the last broadcast's check.)
        while handle
            .peer(reader_id)
            .is_some_and(|healthy| healthy.stats().queued_bytes > 96 * 1024)
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        while let Ok(Some(event)) = tokio::time::timeout(Duration::ZERO, server.next_event()).await
        {
            if let EndpointEvent::PeerDisconnected { peer, reason } = event {
                if peer == stalled_id {
                    stalled_gone = Some((peer, reason));
                }
            }
        }
    }
    assert_eq!(
        counter.await.unwrap(),
        2000,
        "the healthy reader got everything"
    );
    // (The healthy reader, done, hangs up too: skip its goodbye.)
    let (peer, reason) = match stalled_gone {
        Some(gone) => gone,
        None => loop {
            if let EndpointEvent::PeerDisconnected { peer, reason } =
                next_server_event(&mut server).await
            {
                if peer == stalled_id {
                    break (peer, reason);
                }
            }
        },
    };
    assert_eq!(peer, stalled_id);
    assert_eq!(reason, DisconnectReason::SlowConsumer);
    assert!(handle.peer(stalled_id).is_none());
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_flushes_queued_messages_then_the_reason() {
    let mut server = start_server(EndpointConfig::default());
    let mut client = SocketStream::connect(server.local_addr(), SocketConfig::default());
    expect_connected(&mut client).await;
    for i in 0..1000u32 {
        client
            .send(&Message::new(Chan::Data, Act::Seq, &i).unwrap())
            .unwrap();
    }
    client.close("bye for now");
    assert!(client
        .send(&Message::new(Chan::Data, Act::Seq, &0u32).unwrap())
        .is_err());

    let mut got = 0u32;
    let reason = loop {
        match next_server_event(&mut server).await {
            EndpointEvent::PeerConnected { .. } => {}
            EndpointEvent::Received(incoming) => {
                assert_eq!(incoming.message.content::<u32>().unwrap(), got);
                got += 1;
            }
            EndpointEvent::PeerDisconnected { reason, .. } => break reason,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(got, 1000, "every queued message arrived before the close");
    assert_eq!(
        reason,
        DisconnectReason::ClosedByPeer {
            code: CloseCode::NORMAL,
            reason: "bye for now".into()
        }
    );
    assert_eq!(
        expect_disconnected(&mut client).await,
        DisconnectReason::Closed {
            code: CloseCode::NORMAL,
            reason: "bye for now".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_shutdown_flushes_and_tells_every_client_why() {
    let mut server = start_server(EndpointConfig::default());
    let mut a = SocketStream::connect(server.local_addr(), SocketConfig::default());
    let mut b = SocketStream::connect(server.local_addr(), SocketConfig::default());
    expect_connected(&mut a).await;
    expect_connected(&mut b).await;
    let mut connected = 0;
    while connected < 2 {
        if let EndpointEvent::PeerConnected { .. } = next_server_event(&mut server).await {
            connected += 1;
        }
    }
    let handle = server.handle();
    for i in 0..500u32 {
        handle
            .broadcast(&Message::new(Chan::Data, Act::Seq, &i).unwrap())
            .unwrap();
    }
    handle.shutdown("maintenance");
    for client in [&mut a, &mut b] {
        let mut got = 0u32;
        let reason = loop {
            match next_socket_event(client).await {
                SocketEvent::Received(m) => {
                    assert_eq!(m.content::<u32>().unwrap(), got);
                    got += 1;
                }
                SocketEvent::Disconnected(reason) => break reason,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(got, 500, "no queued update lost in shutdown");
        assert_eq!(
            reason,
            DisconnectReason::ClosedByPeer {
                code: CloseCode::GOING_AWAY,
                reason: "maintenance".into()
            }
        );
    }
    // The server's stream ends once every connection is gone.
    let mut disconnected = 0;
    while let Some(event) = tokio::time::timeout(WAIT, server.next_event())
        .await
        .unwrap()
    {
        if let EndpointEvent::PeerDisconnected { .. } = event {
            disconnected += 1;
        }
    }
    assert_eq!(disconnected, 2);
    assert!(handle.wait_closed(WAIT).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_holds_a_quiet_connection_and_measures_rtt() {
    // Pings every 50 ms against a 1.5 s idle timeout: a wide margin, so that
    // a loaded machine delaying a few pings does not fail the test.
    let quick = SocketConfig {
        keepalive_interval: Duration::from_millis(50),
        idle_timeout: Duration::from_millis(1500),
        ..SocketConfig::default()
    };
    let config = EndpointConfig {
        socket: quick.clone(),
        ..EndpointConfig::default()
    };
    let mut server = start_server(config);
    let mut client = SocketStream::connect(server.local_addr(), quick);
    expect_connected(&mut client).await;
    // Longer than the idle timeout without a word from the application.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(client.handle().state(), switchboard::SocketState::Open);
    assert!(
        client.handle().stats().rtt_micros > 0,
        "pongs measured the round trip"
    );
    match next_server_event(&mut server).await {
        EndpointEvent::PeerConnected { peer, .. } => {
            assert!(server.handle().peer(peer).is_some())
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_answering_a_ping_does_not_put_our_pings_off_forever() {
    // The writer once took every wake-up for a send: a pong written after
    // the keep-alive timer was armed put the ping off, the timer's early
    // wake-up put it off again, and so on forever. A peer that pinged once
    // and then only listened was never pinged again, and idle connections
    // timed out (found holding 3,000 idle bots: two thirds dropped).
    let quick = SocketConfig {
        keepalive_interval: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(30),
        ..SocketConfig::default()
    };
    let server = start_server(EndpointConfig {
        socket: quick,
        ..EndpointConfig::default()
    });
    let mut raw = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    raw_handshake(&mut raw).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    // One ping (system channel 0, action 1, stamp 7), then only listen.
    tokio::io::AsyncWriteExt::write_all(&mut raw, &raw_frame(0, &[0, 1, 7]))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let (mut pings, mut pong) = (0, false);
    while let Ok(frame) = tokio::time::timeout_at(deadline, read_raw_frame(&mut raw)).await {
        let (_, body) = frame.unwrap();
        match (body[0], body[1]) {
            (0, 1) => pings += 1,
            (0, 2) => pong = body[2] == 7,
            _ => {}
        }
    }
    assert!(pong, "our ping was answered");
    // About 14 at 200 ms; a loaded machine may delay a few.
    assert!(pings >= 3, "{pings} pings in 3 s at a 200 ms interval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_messages_wait_for_the_flush_then_leave_in_order() {
    let mut server = start_server(EndpointConfig {
        socket: SocketConfig {
            outbound_queue_len: 40,
            ..SocketConfig::default()
        },
        ..EndpointConfig::default()
    });
    let mut client = SocketStream::connect(server.local_addr(), SocketConfig::default());
    expect_connected(&mut client).await;
    let peer = match next_server_event(&mut server).await {
        EndpointEvent::PeerConnected { peer, .. } => peer,
        other => panic!("{other:?}"),
    };
    let handle = server.handle();
    // A writer busy with earlier frames takes queued ones with them; the
    // promise is about an idle writer. One message there and back, and a
    // moment, and the new connection's writer is idle.
    handle
        .send_to(peer, &Message::new(Chan::Data, Act::Seq, &999u32).unwrap())
        .unwrap();
    assert!(matches!(
        next_socket_event(&mut client).await,
        SocketEvent::Received(_)
    ));
    tokio::time::sleep(Duration::from_millis(50)).await;
    for i in 0..30u32 {
        let encoded = handle
            .encode(&Message::new(Chan::Data, Act::Seq, &i).unwrap())
            .unwrap();
        assert_eq!(handle.queue_encoded_to_many([peer], &encoded), 1);
    }
    let socket = handle.peer(peer).unwrap();
    assert_eq!(socket.stats().queued_frames, 30);
    // Nothing leaves before the flush.
    let early = tokio::time::timeout(Duration::from_millis(200), client.next_event()).await;
    assert!(early.is_err(), "{early:?}");
    handle.flush_peers([peer]);
    for i in 0..30u32 {
        match next_socket_event(&mut client).await {
            SocketEvent::Received(message) => assert_eq!(message.content::<u32>().unwrap(), i),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(socket.stats().queued_frames, 0);
    // The queue's limits hold for queued messages too: past them the peer
    // is a slow consumer.
    let encoded = handle
        .encode(&Message::new(Chan::Data, Act::Seq, &0u32).unwrap())
        .unwrap();
    let queued = (0..41)
        .map(|_| handle.queue_encoded_to_many([peer], &encoded))
        .sum::<usize>();
    assert_eq!(queued, 40);
    let reason = expect_disconnected(&mut client).await;
    assert!(reason.to_string().contains("slow"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_server_tells_the_extra_client_why() {
    let config = EndpointConfig {
        max_connections: 1,
        ..EndpointConfig::default()
    };
    let server = start_server(config);
    let mut first = SocketStream::connect(server.local_addr(), SocketConfig::default());
    expect_connected(&mut first).await;
    // The client is connected once it has the server's hello; the server
    // counts it once it has the client's. Only then is the server full.
    let deadline = tokio::time::Instant::now() + WAIT;
    while server.handle().peers().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server counts the first"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut second = SocketStream::connect(server.local_addr(), SocketConfig::default());
    let reason = expect_disconnected(&mut second).await;
    assert!(
        matches!(
            reason,
            DisconnectReason::ClosedByPeer {
                code: CloseCode::SERVER_FULL,
                ..
            }
        ),
        "{reason:?}"
    );
    assert_eq!(server.handle().peers(), vec![PeerId(1)]);
}

#[tokio::test]
async fn connect_to_a_closed_port_fails_with_a_reason() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut client = SocketStream::connect(("127.0.0.1", port), SocketConfig::default());
    assert!(matches!(
        expect_disconnected(&mut client).await,
        DisconnectReason::ConnectFailed(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_and_queued_writes_keep_order_and_content_with_large_frames() {
    // Sparse sends go straight to the socket, bursts through the writer,
    // and a large frame may be written in part directly and in part by the
    // writer: whatever the mix, the peer must see every byte in order.
    let mut config = EndpointConfig::default();
    config.socket.codec.compress_threshold = usize::MAX;
    let mut server = start_server(config);
    let mut client = SocketStream::connect(server.local_addr(), SocketConfig::default());
    expect_connected(&mut client).await;
    let peer = match next_server_event(&mut server).await {
        EndpointEvent::PeerConnected { peer, .. } => peer,
        other => panic!("{other:?}"),
    };
    let handle = server.handle();
    let blob = |i: u32, len: usize| -> Vec<u8> { (0..len).map(|k| (k as u32 ^ i) as u8).collect() };
    let sizes = [10usize, 600_000, 10, 10, 300_000, 10, 900_000, 10];
    let reader = tokio::spawn(async move {
        let mut i = 0u32;
        while (i as usize) < sizes.len() * 10 {
            match next_socket_event(&mut client).await {
                SocketEvent::Received(m) => {
                    let (n, bytes): (u32, Vec<u8>) = m.content().unwrap();
                    assert_eq!(n, i, "in order");
                    assert_eq!(bytes, blob(n, sizes[n as usize % sizes.len()]), "intact");
                    i += 1;
                }
                other => panic!("{other:?}"),
            }
        }
    });
    for i in 0..(sizes.len() * 10) as u32 {
        let msg = Message::new(
            Chan::Data,
            Act::Seq,
            &(i, blob(i, sizes[i as usize % sizes.len()])),
        )
        .unwrap();
        handle.send_to(peer, &msg).unwrap();
        if i % 3 == 0 {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    reader.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_split_anyhow_across_reads_arrive_whole_and_in_order() {
    // The reader slices whole uncompressed frames out of its buffer and
    // hands compressed or incomplete ones to the decoder: a raw peer mixes
    // small, compressed and large incompressible frames and writes them in
    // pieces of random sizes, with pauses, so that frames straddle reads.
    let mut server = start_server(EndpointConfig::default());
    let mut raw = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    raw.set_nodelay(true).unwrap();
    raw_handshake(&mut raw).await;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut expected = Vec::new();
    let mut wire = Vec::new();
    let config = switchboard::codec::CodecConfig::default();
    let (mut compressed, mut large_raw) = (0, 0);
    for i in 0..3000u32 {
        let content: Vec<u8> = match next() % 10 {
            // Compressible: travels zlib-compressed.
            0 => format!("{i} ").repeat(400).into_bytes(),
            // Incompressible and over the threshold: travels raw.
            1 => (0..700).map(|_| next() as u8).collect(),
            _ => (0..next() % 120).map(|_| next() as u8).collect(),
        };
        let message = Message::from_raw(16, 2, bytes::Bytes::from(content.clone()));
        let encoded = message.encode(&config).unwrap();
        let frame = encoded.as_bytes();
        if frame[4] & 1 == 1 {
            compressed += 1;
        } else if frame.len() > 512 {
            large_raw += 1;
        }
        wire.extend_from_slice(frame);
        expected.push(content);
    }
    assert!(
        compressed > 100 && large_raw > 100,
        "{compressed} {large_raw}"
    );
    let writer = tokio::spawn(async move {
        let mut at = 0;
        let mut pieces = 0u64;
        while at < wire.len() {
            let len = (1 + next() as usize % 3000).min(wire.len() - at);
            tokio::io::AsyncWriteExt::write_all(&mut raw, &wire[at..at + len])
                .await
                .unwrap();
            at += len;
            pieces += 1;
            if pieces % 7 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        raw
    });
    let mut got = 0;
    let mut peer = None;
    while got < expected.len() {
        match next_server_event(&mut server).await {
            EndpointEvent::Received(incoming) => {
                peer = Some(incoming.peer);
                assert_eq!(incoming.message.channel_id(), 16);
                assert_eq!(incoming.message.action_id(), 2);
                assert_eq!(
                    incoming.message.content_bytes().as_ref(),
                    &expected[got][..],
                    "message {got}"
                );
                got += 1;
            }
            EndpointEvent::PeerConnected { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    let _raw = writer.await.unwrap();
    let stats = server.handle().peer(peer.unwrap()).unwrap().stats();
    assert_eq!(stats.frames_in, expected.len() as u64, "{stats:?}");
}
