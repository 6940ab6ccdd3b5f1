//! Each half of the loopback path alone, to see which one bounds throughput:
//! Switchboard sending to a raw reader, and a raw writer sending to
//! Switchboard. `cargo bench --bench halves`. Compare each with the raw
//! baseline of `cargo bench --bench loopback`.

use std::time::Instant;

use bytes::Bytes;
use switchboard::{Message, SocketConfig, SocketEvent, SocketStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};

async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let (c, s) = tokio::join!(TcpStream::connect(a), l.accept());
    (c.unwrap(), s.unwrap().0)
}
fn hello() -> Vec<u8> {
    let mut b = vec![0, 0, 0, 7, 0, b'S', b'W', b'B', b'D'];
    b.extend_from_slice(&1u16.to_be_bytes());
    b
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let n: usize = std::env::var("BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    rt.block_on(async {
        // send path: SocketStream sends, raw reader counts
        let (c, mut s) = pair().await;
        let sock = SocketStream::from_stream(c, SocketConfig::default());
        s.write_all(&hello()).await.unwrap();
        let mut hb = [0u8; 11];
        s.read_exact(&mut hb).await.unwrap();
        let msg = Message::from_raw(16, 1, Bytes::from(vec![7u8; 64]))
            .encode(&Default::default())
            .unwrap();
        let frame_len = msg.wire_len();
        let h = sock.handle();
        let start = Instant::now();
        let sender = tokio::spawn(async move {
            let mut sent = 0;
            while sent < n {
                while h.stats().queued_frames > 2000 {
                    tokio::task::yield_now().await;
                }
                for _ in 0..1024.min(n - sent) {
                    h.send_encoded(&msg).unwrap();
                }
                sent += 1024.min(n - sent);
                tokio::task::yield_now().await;
            }
        });
        let mut buf = vec![0u8; frame_len * 1000];
        let mut got = 0usize;
        let mut r = tokio::io::BufReader::with_capacity(64 * 1024, &mut s);
        let mut total = 0usize;
        while total < n * frame_len {
            let k = r.read(&mut buf).await.unwrap();
            total += k;
            got += 1;
        }
        let el = start.elapsed();
        sender.await.unwrap();
        println!(
            "send path: {:.0} msg/s ({} reads)",
            n as f64 / el.as_secs_f64(),
            got
        );
        drop(sock);

        // receive path: raw writer, SocketStream receives
        let (c, mut s) = pair().await;
        let mut sock = SocketStream::from_stream(c, SocketConfig::default());
        s.write_all(&hello()).await.unwrap();
        let mut hb = [0u8; 11];
        s.read_exact(&mut hb).await.unwrap();
        assert!(matches!(
            sock.next_event().await,
            Some(SocketEvent::Connected)
        ));
        let frame = Message::from_raw(16, 1, Bytes::from(vec![7u8; 64]))
            .encode(&Default::default())
            .unwrap();
        let start = Instant::now();
        let writer = tokio::spawn(async move {
            let mut w = BufWriter::with_capacity(64 * 1024, s);
            for _ in 0..n {
                w.write_all(frame.as_bytes()).await.unwrap();
            }
            w.flush().await.unwrap();
            w
        });
        let consumer = tokio::spawn(async move {
            let mut got = 0;
            while got < n {
                match sock.next_event().await {
                    Some(SocketEvent::Received(_)) => got += 1,
                    Some(_) => {}
                    None => panic!(),
                }
            }
            sock
        });
        let sock = consumer.await.unwrap();
        let el = start.elapsed();
        drop(sock);
        drop(writer.await.unwrap());
        println!("receive path: {:.0} msg/s", n as f64 / el.as_secs_f64());
    });
}
