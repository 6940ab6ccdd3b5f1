//! Memory of idle connections: N clients complete the handshake and stay
//! silent; the process's resident memory grows by about N times the server's
//! cost per connection (the raw clients themselves hold little: a socket and
//! a few bytes). `cargo bench --bench idle` (`BENCH_IDLE`, default 5000;
//! each connection takes two file descriptors in this one process).

use std::time::Duration;

use switchboard::{BindScope, ServerConfig, ServerEvent, ServerStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let n: usize = std::env::var("BENCH_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = ServerConfig {
            max_connections: n + 10,
            max_pending_handshakes: n + 10,
            // Every client comes from this one address.
            max_pending_handshakes_per_ip: n + 10,
            max_connections_per_ip: n + 10,
            ..ServerConfig::default()
        };
        let mut server = ServerStream::bind(BindScope::Loopback, 0, config).unwrap();
        let addr = server.local_addr();
        let before = rss_kib();
        let mut hello = vec![0, 0, 0, 7, 0, b'S', b'W', b'B', b'D'];
        hello.extend_from_slice(&switchboard::PROTOCOL_VERSION.to_be_bytes());
        let mut clients = Vec::with_capacity(n);
        for _ in 0..n {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(&hello).await.unwrap();
            let mut theirs = [0u8; 11];
            stream.read_exact(&mut theirs).await.unwrap();
            clients.push(stream);
        }
        let mut connected = 0;
        while connected < n {
            if let Some(ServerEvent::PeerConnected { .. }) = server.next_event().await {
                connected += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_kib();
        let per = (after.saturating_sub(before)) as f64 * 1024.0 / n as f64;
        println!(
            "{n} idle connections: RSS {before} KiB -> {after} KiB, {:.0} bytes per connection",
            per
        );
        drop(clients);
    });
}
