//! Encode + decode cost of one message, beside copying the same bytes into a
//! length-prefixed buffer (the floor any framing pays).
//!
//! `cargo bench --bench codec`. Prints ns per encode+decode and the ratio to
//! the copy baseline measured in the same run; then what decoding a message's
//! content costs (`Message::content`) beside bincode's own decode of the same
//! bytes, with no limit (the floor) and with its byte limit (what bounded
//! allocations before).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use switchboard::codec::{CodecConfig, FrameDecoder};
use switchboard::Message;

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
    content_decoding(budget);
}

/// What a game sends many of: 16 floats (a pose).
#[derive(Serialize, Deserialize)]
struct Pose([f32; 16]);

/// A value with strings and a map, like the relay's transforms.
#[derive(Serialize, Deserialize)]
struct Tagged {
    position: [f32; 3],
    zone: String,
    extra: std::collections::BTreeMap<String, String>,
}

fn content_decoding(budget: Duration) {
    println!(
        "\n{:<28} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "content::<T>()", "bincode ns", "limited ns", "sb ns", "× bincode", "× limited"
    );
    let tagged = Tagged {
        position: [1.0, 2.0, 3.0],
        zone: "zone-17".into(),
        extra: [("bot".to_string(), "true".to_string())].into(),
    };
    row::<Pose>("16 f32", &Pose([0.5; 16]), budget);
    row::<Tagged>("3 f32, a string, a map", &tagged, budget);
}

fn row<T: Serialize + DeserializeOwned>(name: &str, value: &T, budget: Duration) {
    let bytes = Bytes::from(switchboard::codec::encode_value(value).unwrap());
    let message = Message::from_raw(16, 1, bytes.clone());
    let standard = bincode::config::standard();
    let limited = standard.with_limit::<{ 4 << 20 }>();
    let plain_ns = time_per_call(budget, || {
        let decoded: (T, usize) = bincode::serde::decode_from_slice(&bytes, standard).unwrap();
        black_box(decoded);
    });
    let limited_ns = time_per_call(budget, || {
        let decoded: (T, usize) = bincode::serde::decode_from_slice(&bytes, limited).unwrap();
        black_box(decoded);
    });
    let sb_ns = time_per_call(budget, || {
        black_box(message.content::<T>().unwrap());
    });
    println!(
        "{:<28} {:>12.1} {:>12.1} {:>12.1} {:>8.2}x {:>8.2}x",
        name,
        plain_ns,
        limited_ns,
        sb_ns,
        sb_ns / plain_ns,
        sb_ns / limited_ns
    );
}
