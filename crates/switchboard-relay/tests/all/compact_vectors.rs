//! Conformance vectors of compact transforms (`tests/vectors/compact.json`),
//! shared with the JavaScript and Python clients: a stream of `Compact`
//! contents as the relay's encoder writes them, and what a client reads
//! in each. This test checks that the encoder writes exactly those bytes
//! and that the Rust decoder reads exactly those records; the clients'
//! tests (`clients/js/test/compact.test.js`,
//! `clients/python/tests/test_compact.py`) decode the same bytes.
//!
//! After a deliberate change to the format, regenerate the file with
//! `SWITCHBOARD_WRITE_VECTORS=1 cargo test -p switchboard-relay --test all compact_vectors::`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};
use switchboard_relay::compact::{
    CompactDecoder, CompactEncoder, CompactRecord, Quantized, Versions,
};
use switchboard_relay::{MovementState, Transform};

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/vectors/compact.json"
);
const PRECISION: f32 = 0.01;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One step of the script: what the relay hands the encoder.
enum Step {
    Moved(u32, u64, Transform),
    Left(u32),
    Message(u16, Vec<u8>),
    /// The frame is written, at this tick and time.
    Write(u64, u64),
}

fn at(position: [f32; 3], yaw: f32, zone: &str) -> Transform {
    Transform {
        position,
        rotation: [0.0, yaw, 0.0],
        zone: zone.into(),
        ..Transform::default()
    }
}

/// A stream with every kind of record: entries, differences, standing
/// still, each field changing alone, a leaving, a slot given again, a
/// message, a sender far away (wide varints), an entry snapshot older than
/// the frame.
fn script() -> Vec<Step> {
    use Step::*;
    let mut running = at([1.5, 0.0, -2.0], 90.0, "town");
    running.state = Some(MovementState {
        moving: true,
        sprinting: true,
        speed: 6.5,
        ..MovementState::default()
    });
    running.extra = BTreeMap::from([("emote".into(), "\"wave\"".into())]);
    let mut turned = running.clone();
    turned.position = [2.0, 0.0, -2.0];
    turned.rotation = [-10.0, 180.0, 370.0];
    let mut stopped = turned.clone();
    stopped.state = None;
    stopped.extra.clear();
    let mut moved_zone = stopped.clone();
    moved_zone.zone = "docks".into();
    moved_zone.position = [2.03, 0.5, -1.99];
    vec![
        Moved(70_000, 1_000, at([1.5, 0.0, -2.0], 90.0, "town")),
        Write(20, 1_010),
        Moved(70_000, 1_100, at([2.0, 0.0, -2.0], 90.0, "town")),
        Moved(7, 1_090, running.clone()),
        Write(22, 1_110),
        Moved(7, 1_150, turned),
        Moved(70_000, 1_160, at([2.0, 0.0, -2.0], 90.0, "town")),
        Moved(7, 1_170, stopped),
        Write(23, 1_200),
        Moved(7, 1_250, moved_zone),
        Left(70_000),
        Left(12),
        Message(7, b"\x05hello".to_vec()),
        Write(25, 1_260),
        Moved(300_000, 900, at([-25_000.0, 1e4, 0.004], 359.9, "town")),
        Write(26, 1_300),
    ]
}

fn record_json(record: &CompactRecord<'_>) -> Value {
    match record {
        CompactRecord::Transform {
            player_id,
            server_time_ms,
            transform,
            extra_changed,
        } => json!({
            "type": "transform",
            "player_id": player_id,
            "server_time_ms": server_time_ms,
            "transform": serde_json::to_value(transform).unwrap(),
            "extra_changed": extra_changed,
        }),
        CompactRecord::Left { player_id } => json!({"type": "left", "player_id": player_id}),
        CompactRecord::Message { action, content } => {
            json!({"type": "message", "action": action, "content": hex(content)})
        }
    }
}

/// The vectors: each frame's bytes and what the Rust decoder reads in it.
fn vectors() -> Value {
    let mut encoder = CompactEncoder::new(PRECISION);
    let mut versions = Versions::default();
    let mut decoder = CompactDecoder::new();
    let mut frames = Vec::new();
    for step in script() {
        match step {
            Step::Moved(player, stamp, transform) => {
                let transform = Arc::new(transform);
                let quantized = Quantized::of(player, &transform, PRECISION, &mut versions);
                encoder.transform(player, stamp, &quantized, &transform);
            }
            Step::Left(player) => encoder.left(player),
            Step::Message(action, content) => encoder.message(action, &content),
            Step::Write(tick, now) => {
                let mut content = Vec::new();
                encoder.finish(tick, now, &mut content);
                let mut records = Vec::new();
                let frame = decoder
                    .read(&content, |record| records.push(record_json(&record)))
                    .unwrap();
                frames.push(json!({
                    "hex": hex(&content),
                    "tick": frame.tick,
                    "server_time_ms": frame.server_time_ms,
                    "records": records,
                }));
            }
        }
    }
    json!({"precision": PRECISION, "frames": frames})
}

#[test]
fn the_compact_vectors_are_what_the_relay_writes_and_a_client_reads() {
    let expected = vectors();
    if std::env::var_os("SWITCHBOARD_WRITE_VECTORS").is_some() {
        let text = serde_json::to_string_pretty(&expected).unwrap() + "\n";
        std::fs::write(FILE, text).unwrap();
    }
    let file: Value = serde_json::from_str(&std::fs::read_to_string(FILE).unwrap()).unwrap();
    assert_eq!(
        file, expected,
        "the compact format changed: regenerate (see the top)"
    );
    // What the stream shows, in words: the far sender's wide numbers, the
    // freed slot given again, every kind of record.
    let text = expected.to_string();
    for kind in ["\"transform\"", "\"left\"", "\"message\""] {
        assert!(text.contains(kind), "{kind}");
    }
}
