//! Bytes from a peer into a live connection's reader (the production read
//! path: handshake, batched frames straight from the read buffer,
//! compressed frames, system frames, the inflate budget), cut into writes of
//! sizes the input picks. The connection must end or stay up without a
//! panic, and report every event in order. Shared by the fuzz target and
//! the corpus replay test.

use std::time::Duration;

use switchboard::{SocketConfig, SocketEvent, SocketStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Our side's hello, for inputs that start the conversation properly.
fn hello() -> Vec<u8> {
    let mut bytes = vec![0, 0, 0, 7, 0, b'S', b'W', b'B', b'D'];
    bytes.extend_from_slice(&switchboard::PROTOCOL_VERSION.to_be_bytes());
    bytes
}

pub fn run(data: &[u8]) {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let data = data.to_vec();
    let runtime = switchboard::runtime::handle();
    runtime.block_on(async move {
        let (ours, theirs) = tokio::io::duplex(256 * 1024);
        let config = SocketConfig {
            max_inflated_per_second: 1024 * 1024,
            ..SocketConfig::default()
        };
        let mut socket = SocketStream::from_stream(ours, config);
        let (mut read, mut write) = tokio::io::split(theirs);
        // What the socket writes (its hello, pongs, a close) is read and
        // dropped, so that it never waits on us.
        let sink = tokio::spawn(async move {
            let mut buf = vec![0; 64 * 1024];
            while matches!(read.read(&mut buf).await, Ok(n) if n > 0) {}
        });
        let feed = tokio::spawn(async move {
            let mut bytes = if mode & 1 == 0 { hello() } else { Vec::new() };
            bytes.extend_from_slice(&data);
            let chunk = usize::from(mode >> 1).max(1) * 7;
            for piece in bytes.chunks(chunk) {
                if write.write_all(piece).await.is_err() {
                    return;
                }
            }
            let _ = write.shutdown().await;
        });
        // Every input ends the connection: the peer hangs up after its
        // bytes. Events until then; a hang is a bug too.
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(event) = socket.next_event().await {
                if let SocketEvent::Disconnected(_) = event {
                    return;
                }
            }
        })
        .await;
        assert!(
            ended.is_ok(),
            "the connection did not end after the peer hung up"
        );
        feed.abort();
        sink.abort();
    });
}
