//! Encode + decode cost of one message, beside copying the same bytes into a
//! length-prefixed buffer (the floor any framing pays).
//!
//! `cargo bench --bench codec`. Prints ns per encode+decode and the ratio to
//! the copy baseline measured in the same run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use switchboard::codec::{CodecConfig, FrameDecoder};
use switchboard::Message;
use tokio_util::codec::Decoder;

/// Runs `f` repeatedly for about `budget`, returns ns per call (median of 5).
fn time_per_call(budget: Duration, mut f: impl FnMut()) -> f64 {
    let mut samples = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let mut calls = 0u64;
        while start.elapsed() < budget / 5 {
            for _ in 0..64 {
                f();
            }
            calls += 64;
        }
        samples.push(start.elapsed().as_nanos() as f64 / calls as f64);
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples[2]
}

fn content(len: usize, compressible: bool) -> Vec<u8> {
    if compressible {
        // Game-state-like: repeated small structures.
        (0..len).map(|i| (i % 7) as u8).collect()
    } else {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1500),
    );
    let config = CodecConfig::default();
    println!(
        "{:<28} {:>12} {:>12} {:>8} {:>10}",
        "case", "copy ns", "sb ns", "ratio", "wire bytes"
    );
    for (name, len, compressible) in [
        ("64 B", 64, false),
        ("16 KiB incompressible", 16 * 1024, false),
        ("16 KiB compressible", 16 * 1024, true),
    ] {
        let bytes = Bytes::from(content(len, compressible));
        let message = Message::from_raw(1, 1, bytes.clone());
        let wire_len = message.encode(&config).unwrap().wire_len();

        let copy_ns = time_per_call(budget, || {
            let mut frame = BytesMut::with_capacity(5 + bytes.len());
            frame.extend_from_slice(&((bytes.len() + 1) as u32).to_be_bytes());
            frame.extend_from_slice(&[0]);
            frame.extend_from_slice(&bytes);
            let frame = frame.freeze();
            black_box(frame.slice(5..).to_vec());
        });
        let mut decoder = FrameDecoder::new(config.clone());
        let sb_ns = time_per_call(budget, || {
            let encoded = message.encode(&config).unwrap();
            let mut buf = BytesMut::from(&encoded.as_bytes()[..]);
            let frame = decoder.decode(&mut buf).unwrap().unwrap();
            black_box(Message::decode(frame.payload).unwrap());
        });
        println!(
            "{:<28} {:>12.0} {:>12.0} {:>7.1}x {:>10}",
            name,
            copy_ns,
            sb_ns,
            sb_ns / copy_ns,
            wire_len
        );
    }
}
