//! Switchboard over loopback beside raw tokio TCP carrying the same payload
//! bytes, in the same run: messages per second one way, and round-trip
//! latency p50 / p99, for 64-byte messages.
//!
//! The headline is the typed path a game takes: a struct of 16 `f32` built
//! into a message and sent per message, decoded with `content` on arrival;
//! beside it the same struct through tokio-util's `LengthDelimitedCodec` with
//! bincode (what a user would write by hand), and raw TCP carrying 64 bytes.
//! The pre-encoded figures (`send_encoded` of one frame again and again)
//! follow.
//!
//! `cargo bench --bench loopback` (set `BENCH_MESSAGES` / `BENCH_ROUNDS` for
//! longer runs, `BENCH_PLACEMENT=thread` or `task` for one owner placement). Ratios are what to read: absolute figures on a shared
//! machine are noise.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use switchboard::histogram::Histogram;
use switchboard::{
    BindScope, EndpointConfig, EndpointEvent, EndpointStream, Message, SocketConfig, SocketEvent,
    SocketStream,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

const PAYLOAD: usize = 64;

/// What a game sends many of: 16 floats (a pose), 64 bytes in bincode.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Pose([f32; 16]);

fn pose(i: usize) -> Pose {
    let mut v = [0.5f32; 16];
    v[0] = i as f32;
    Pose(v)
}

switchboard::channels! { enum Chan { World = 16 } }
switchboard::actions! { enum Act { Pose = 1 } }

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard()
}

/// The hand-written path: tokio-util's `LengthDelimitedCodec` carrying
/// bincode, `feed` per message and one `flush` per 1,024, decoded on arrival.
async fn codec_throughput(messages: usize) -> f64 {
    let (client, server) = raw_pair().await;
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let mut sink = FramedWrite::new(client, LengthDelimitedCodec::new());
        for i in 0..messages {
            let bytes = bincode::serde::encode_to_vec(pose(i), bincode_config()).unwrap();
            sink.feed(Bytes::from(bytes)).await.unwrap();
            if i % 1024 == 1023 {
                SinkExt::<Bytes>::flush(&mut sink).await.unwrap();
            }
        }
        SinkExt::<Bytes>::flush(&mut sink).await.unwrap();
        sink
    });
    let mut source = FramedRead::new(server, LengthDelimitedCodec::new());
    let mut sum = 0.0f32;
    for _ in 0..messages {
        let frame = source.next().await.unwrap().unwrap();
        let (pose, _): (Pose, usize) =
            bincode::serde::decode_from_slice(&frame, bincode_config()).unwrap();
        sum += pose.0[0];
    }
    let elapsed = start.elapsed();
    drop(writer.await.unwrap());
    std::hint::black_box(sum);
    messages as f64 / elapsed.as_secs_f64()
}

/// How the typed bench's sender builds and hands over each `Pose`.
#[derive(Clone, Copy, PartialEq)]
enum Typed {
    /// `Message::new`, then `send`.
    NewAndSend,
    /// `send_value`: straight into a frame.
    SendValue,
    /// `queue_value` per message and one `flush` per burst (a frame loop).
    QueueValue,
}

/// Switchboard's typed path: a `Pose` built into a message per message and
/// sent, decoded with `content` on arrival.
async fn typed_throughput(messages: usize, typed: Typed) -> f64 {
    let (client, mut server, _) = switchboard_pair().await;
    let start = Instant::now();
    let sender = tokio::spawn(async move {
        let handle = client.handle();
        let mut sent = 0;
        while sent < messages {
            let burst = (messages - sent).min(1024);
            while handle.stats().queued_frames > 2000 {
                tokio::task::yield_now().await;
            }
            for i in sent..sent + burst {
                match typed {
                    Typed::NewAndSend => {
                        let message = Message::new(Chan::World, Act::Pose, &pose(i)).unwrap();
                        handle.send(&message).unwrap()
                    }
                    Typed::SendValue => {
                        handle.send_value(Chan::World, Act::Pose, &pose(i)).unwrap()
                    }
                    Typed::QueueValue => handle
                        .queue_value(Chan::World, Act::Pose, &pose(i))
                        .unwrap(),
                }
            }
            if typed == Typed::QueueValue {
                handle.flush();
            }
            sent += burst;
            tokio::task::yield_now().await;
        }
        client
    });
    let mut sum = 0.0f32;
    let mut got = 0;
    while got < messages {
        match server.next_event().await {
            Some(EndpointEvent::Received(incoming)) => {
                sum += incoming.message.content::<Pose>().unwrap().0[0];
                got += 1;
            }
            Some(other) => panic!("{other:?}"),
            None => panic!("server stream ended"),
        }
    }
    let elapsed = start.elapsed();
    drop(sender.await.unwrap());
    std::hint::black_box(sum);
    messages as f64 / elapsed.as_secs_f64()
}

async fn raw_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let client = client.unwrap();
    let server = server.unwrap().0;
    client.set_nodelay(true).unwrap();
    server.set_nodelay(true).unwrap();
    (client, server)
}

/// Raw baseline, one way: u32 length + 64 bytes per message, buffered writes.
async fn raw_throughput(messages: usize) -> f64 {
    let (client, mut server) = raw_pair().await;
    let payload = [7u8; PAYLOAD];
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let mut out = BufWriter::with_capacity(64 * 1024, client);
        for _ in 0..messages {
            out.write_all(&(PAYLOAD as u32).to_be_bytes())
                .await
                .unwrap();
            out.write_all(&payload).await.unwrap();
        }
        out.flush().await.unwrap();
        out
    });
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, &mut server);
    let mut buf = [0u8; PAYLOAD];
    for _ in 0..messages {
        let len = reader.read_u32().await.unwrap() as usize;
        reader.read_exact(&mut buf[..len]).await.unwrap();
    }
    let elapsed = start.elapsed();
    drop(writer.await.unwrap());
    messages as f64 / elapsed.as_secs_f64()
}

async fn switchboard_pair() -> (SocketStream, EndpointStream, switchboard::PeerId) {
    let mut server =
        EndpointStream::bind(BindScope::Loopback, 0, EndpointConfig::default()).unwrap();
    let mut client = SocketStream::connect(server.local_addr(), SocketConfig::default());
    assert!(matches!(
        client.next_event().await,
        Some(SocketEvent::Connected)
    ));
    let peer = match server.next_event().await {
        Some(EndpointEvent::PeerConnected { peer, .. }) => peer,
        other => panic!("{other:?}"),
    };
    (client, server, peer)
}

/// How the bench's sender hands messages over.
#[derive(Clone, Copy, PartialEq)]
enum Sending {
    /// `send_encoded` per message: the writer task writes them.
    Send,
    /// `queue_encoded` per message and one `flush` per burst, as a game
    /// loop would flush once per frame: the sender writes them itself.
    QueueAndFlush,
}

/// Switchboard, one way: the client sends, the server's event stream counts.
async fn switchboard_throughput(messages: usize, sending: Sending) -> f64 {
    let (client, mut server, _) = switchboard_pair().await;
    let message = Message::from_raw(1, 1, Bytes::from(vec![7u8; PAYLOAD]));
    // Sends never block; keep the queue below its limit by sending in slices
    // and yielding, as a game loop sending per frame would.
    let start = Instant::now();
    let sender = tokio::spawn(async move {
        let handle = client.handle();
        let encoded = message.encode(&Default::default()).unwrap();
        let mut sent = 0;
        while sent < messages {
            let burst = (messages - sent).min(1024);
            while handle.stats().queued_frames > 2000 {
                tokio::task::yield_now().await;
            }
            for _ in 0..burst {
                match sending {
                    Sending::Send => handle.send_encoded(&encoded).unwrap(),
                    Sending::QueueAndFlush => handle.queue_encoded(&encoded).unwrap(),
                }
            }
            if sending == Sending::QueueAndFlush {
                handle.flush();
            }
            sent += burst;
            tokio::task::yield_now().await;
        }
        client
    });
    let mut got = 0;
    while got < messages {
        match server.next_event().await {
            Some(EndpointEvent::Received(_)) => got += 1,
            Some(other) => panic!("{other:?}"),
            None => panic!("server stream ended"),
        }
    }
    let elapsed = start.elapsed();
    drop(sender.await.unwrap());
    messages as f64 / elapsed.as_secs_f64()
}

/// Raw baseline round trip: write 4+64 bytes, the other side echoes them.
async fn raw_round_trips(rounds: usize) -> Histogram {
    let (mut client, mut server) = raw_pair().await;
    let echo = tokio::spawn(async move {
        let mut buf = [0u8; 4 + PAYLOAD];
        for _ in 0..rounds {
            server.read_exact(&mut buf).await.unwrap();
            server.write_all(&buf).await.unwrap();
        }
    });
    let mut frame = (PAYLOAD as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[7u8; PAYLOAD]);
    let mut buf = [0u8; 4 + PAYLOAD];
    let mut times = Histogram::new();
    for _ in 0..rounds {
        let start = Instant::now();
        client.write_all(&frame).await.unwrap();
        client.read_exact(&mut buf).await.unwrap();
        times.record(start.elapsed());
    }
    echo.await.unwrap();
    times
}

/// Switchboard round trip: client sends, the server's owner echoes it back
/// through its handle, the client's event stream receives it.
async fn switchboard_round_trips(rounds: usize) -> Histogram {
    let (mut client, mut server, peer) = switchboard_pair().await;
    let handle = server.handle();
    let echo = tokio::spawn(async move {
        for _ in 0..rounds {
            match server.next_event().await {
                Some(EndpointEvent::Received(incoming)) => {
                    handle.send_to(peer, &incoming.message).unwrap()
                }
                other => panic!("{other:?}"),
            }
        }
        server
    });
    let message = Message::from_raw(1, 1, Bytes::from(vec![7u8; PAYLOAD]));
    let mut times = Histogram::new();
    for _ in 0..rounds {
        let start = Instant::now();
        client.send(&message).unwrap();
        match client.next_event().await {
            Some(SocketEvent::Received(_)) => {}
            other => panic!("{other:?}"),
        }
        times.record(start.elapsed());
    }
    drop(echo.await.unwrap());
    times
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let messages = env_or("BENCH_MESSAGES", 300_000);
    let rounds = env_or("BENCH_ROUNDS", 5_000);
    // The owner of the events (the code that reads them) either on a thread
    // of its own, as a game's frame loop is, or in a task on the runtime's
    // workers, as tokio code is. The baseline's reader sits in the same place.
    // `BENCH_PLACEMENT=thread` or `task` runs one placement only.
    let placement = std::env::var("BENCH_PLACEMENT").unwrap_or_default();
    if placement != "task" {
        println!("== owner on its own thread (a game's frame loop) ==");
        runtime.block_on(suite(messages, rounds));
    }
    if placement != "thread" {
        println!("== owner in a tokio task ==");
        runtime
            .block_on(runtime.spawn(suite(messages, rounds)))
            .unwrap();
    }
}

async fn suite(messages: usize, rounds: usize) {
    // Warm up every path once.
    raw_throughput(10_000).await;
    codec_throughput(10_000).await;
    typed_throughput(10_000, Typed::SendValue).await;
    switchboard_throughput(10_000, Sending::Send).await;

    let mut runs: [Vec<f64>; 7] = Default::default();
    for _ in 0..3 {
        runs[0].push(raw_throughput(messages).await);
        runs[1].push(codec_throughput(messages).await);
        runs[2].push(typed_throughput(messages, Typed::NewAndSend).await);
        runs[3].push(typed_throughput(messages, Typed::SendValue).await);
        runs[4].push(typed_throughput(messages, Typed::QueueValue).await);
        runs[5].push(switchboard_throughput(messages, Sending::Send).await);
        runs[6].push(switchboard_throughput(messages, Sending::QueueAndFlush).await);
    }
    let [raw, codec, new_send, send_value, queue_value, sb, flushed] = runs.map(|mut r| {
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        r[1]
    });
    println!("one way, {PAYLOAD}-byte messages, {messages} per run, median of 3:");
    println!("  raw tokio TCP (64 bytes)          {raw:>12.0} msg/s");
    let by_hand = "tokio-util + bincode (by hand)";
    println!(
        "  {by_hand:<33} {codec:>12.0} msg/s   {:>5.2}x raw",
        codec / raw
    );
    for (name, rate) in [
        ("typed: Message::new + send", new_send),
        ("typed: send_value", send_value),
        ("typed: queue_value + flush", queue_value),
    ] {
        println!(
            "  {name:<33} {rate:>12.0} msg/s   {:>5.2}x raw   {:>5.2}x by hand",
            rate / raw,
            rate / codec
        );
    }
    for (name, rate) in [
        ("pre-encoded: send_encoded", sb),
        ("pre-encoded: queue + flush", flushed),
    ] {
        println!("  {name:<33} {rate:>12.0} msg/s   {:>5.2}x raw", rate / raw);
    }

    let raw_rt = raw_round_trips(rounds).await;
    let sb_rt = switchboard_round_trips(rounds).await;
    let (raw50, raw99) = (raw_rt.percentile(0.5), raw_rt.percentile(0.99));
    let (sb50, sb99) = (sb_rt.percentile(0.5), sb_rt.percentile(0.99));
    println!("round trip, {PAYLOAD}-byte messages, {rounds} rounds:");
    println!(
        "  raw tokio TCP   p50 {:>8.1} us   p99 {:>8.1} us",
        us(raw50),
        us(raw99)
    );
    println!(
        "  switchboard     p50 {:>8.1} us   p99 {:>8.1} us",
        us(sb50),
        us(sb99)
    );
    println!(
        "  ratio           p50 {:>8.2}x     p99 {:>8.2}x",
        us(sb50) / us(raw50),
        us(sb99) / us(raw99)
    );
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
