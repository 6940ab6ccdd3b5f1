//! Another client's round trips while one address sends zlib bombs, frames
//! of about 4 KiB that each inflate to 4 MiB, as fast as it can, reconnecting
//! whenever the server closes it (at least 2,000 of them, until the round
//! trips are measured). `cargo bench --bench inflate_attack`
//! (`BENCH_BOMBS`, default 2000; `BENCH_ROUNDS`, default 2000).
//!
//! The same run measures the quiet round trip, then the round trip under the
//! attack with the per-connection inflate budget (the default), then with
//! the budget lifted (what the server did before it had one). It prints the
//! p50 and p99 of each and their ratio to the quiet ones.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard::histogram::Histogram;
use switchboard::{
    BindScope, EndpointConfig, EndpointEvent, EndpointStream, Message, SocketConfig, SocketEvent,
    SocketStream,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A frame of about 4 KiB that inflates to 4 MiB: an application message.
fn bomb() -> Vec<u8> {
    let mut payload = vec![16u8, 1];
    payload.extend(vec![0u8; 4 * 1024 * 1024 - 16]);
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&payload).unwrap();
    let body = encoder.finish().unwrap();
    let mut frame = ((body.len() + 1) as u32).to_be_bytes().to_vec();
    frame.push(1);
    frame.extend_from_slice(&body);
    frame
}

/// An echo server for the round trips (action 2); what else arrives (the
/// bombs, once inflated) is counted and dropped.
fn echo_server(config: EndpointConfig, inflated: Arc<AtomicUsize>) -> std::net::SocketAddr {
    let mut server = EndpointStream::bind(BindScope::Loopback, 0, config).unwrap();
    let addr = server.local_addr();
    let handle = server.handle();
    tokio::spawn(async move {
        while let Some(event) = server.next_event().await {
            if let EndpointEvent::Received(incoming) = event {
                if incoming.message.action_id() == 2 {
                    let _ = handle.send_to(incoming.peer, &incoming.message);
                } else {
                    inflated.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    addr
}

/// Sends bombs from 127.0.0.2 until `count` went out and `stop` is set,
/// reconnecting after each close.
async fn attack(
    addr: std::net::SocketAddr,
    count: usize,
    sent: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let going = || sent.load(Ordering::Relaxed) < count || !stop.load(Ordering::Relaxed);
    let frame = bomb();
    let mut hello = vec![0, 0, 0, 7, 0, b'S', b'W', b'B', b'D'];
    hello.extend_from_slice(&switchboard::PROTOCOL_VERSION.to_be_bytes());
    while going() {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, 2], 0).into()).unwrap();
        let Ok(mut stream) = socket.connect(addr).await else {
            continue;
        };
        if stream.write_all(&hello).await.is_err() {
            continue;
        }
        let mut theirs = [0u8; 11];
        if stream.read_exact(&mut theirs).await.is_err() {
            continue;
        }
        let (mut read, mut write) = stream.into_split();
        // Drain what the server sends (echoes, the close) so it never
        // blocks on us.
        let drain = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = read.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        });
        while going() {
            if write.write_all(&frame).await.is_err() {
                break;
            }
            sent.fetch_add(1, Ordering::Relaxed);
        }
        drop(write);
        let _ = drain.await;
    }
}

/// Round trips of a 64-byte message until `rounds` are done or `stop`.
async fn round_trips(addr: std::net::SocketAddr, rounds: usize, stop: &AtomicBool) -> Histogram {
    let mut client = SocketStream::connect(addr, SocketConfig::default());
    while !matches!(client.next_event().await, Some(SocketEvent::Connected)) {}
    let message = Message::from_raw(16, 2, vec![7u8; 64].into());
    let mut times = Histogram::new();
    while (times.count() as usize) < rounds && !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        client.send(&message).unwrap();
        loop {
            match client.next_event().await {
                Some(SocketEvent::Received(_)) => break,
                Some(_) => continue,
                None => return times,
            }
        }
        times.record(start.elapsed());
    }
    times
}

/// Round trips measured while the attack runs; how many bombs were sent
/// and how many the server inflated.
async fn under_attack(
    config: EndpointConfig,
    bombs: usize,
    rounds: usize,
) -> (Histogram, usize, usize) {
    let inflated = Arc::new(AtomicUsize::new(0));
    let addr = echo_server(config, inflated.clone());
    let sent = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = tokio::spawn(attack(addr, bombs, sent.clone(), stop.clone()));
    while sent.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let never = AtomicBool::new(false);
    let times = round_trips(addr, rounds, &never).await;
    stop.store(true, Ordering::Relaxed);
    let _ = attacker.await;
    (
        times,
        sent.load(Ordering::Relaxed),
        inflated.load(Ordering::Relaxed),
    )
}

fn main() {
    let bombs = env("BENCH_BOMBS", 2000);
    let rounds = env("BENCH_ROUNDS", 2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let quiet_addr = echo_server(EndpointConfig::default(), Arc::default());
        let stop = AtomicBool::new(false);
        let quiet = round_trips(quiet_addr, rounds, &stop).await;
        let (q50, q99) = (quiet.percentile(0.5), quiet.percentile(0.99));
        println!("bombs of {} bytes, each inflating to 4 MiB, from one address (at least {bombs})", bomb().len());
        println!("quiet                      p50 {:>8.1} us  p99 {:>8.1} us  ({} rounds)", q50.as_secs_f64() * 1e6, q99.as_secs_f64() * 1e6, quiet.count());
        let budgets = [
            ("with the inflate budget", EndpointConfig::default()),
            ("budget lifted (before)", {
                let mut config = EndpointConfig::default();
                config.socket.max_inflated_per_second = usize::MAX / 2;
                config
            }),
        ];
        for (name, config) in budgets {
            let started = Instant::now();
            let (times, sent, inflated) = under_attack(config, bombs, rounds).await;
            let took = started.elapsed();
            let (p50, p99) = (times.percentile(0.5), times.percentile(0.99));
            println!(
                "{name:<26} p50 {:>8.1} us  p99 {:>8.1} us  p99 ratio {:.2}x  ({} rounds, {sent} bombs sent, {inflated} inflated, {took:.1?})",
                p50.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6,
                p99.as_secs_f64() / q99.as_secs_f64(),
                times.count(),
            );
        }
    });
}
