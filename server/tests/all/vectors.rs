//! Wire vectors shared with the JavaScript client (`tests/vectors/wire.json`):
//! bytes and the value they carry, for every type a client exchanges. This
//! test checks that the Rust encoding of each value is exactly the bytes in
//! the file and that the bytes decode back to the value; the JavaScript tests
//! (`clients/js/test/vectors.test.js`) check the same file, so the two codecs
//! cannot drift apart.
//!
//! After a deliberate change to the wire format, regenerate the file with
//! `SWITCHBOARD_WRITE_VECTORS=1 cargo test -p switchboard-server --test all vectors::`.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use switchboard::codec::{self, CodecConfig};
use switchboard::manager::protocol::{
    ErrorCode, ErrorReply, Refused, Rejected, RequestFrame, Resume, SessionHello, Welcome,
};
use switchboard::session::ReconnectToken;
use switchboard::ClientId;
use switchboard_relay::{MovementState, Relayed, Transform};
use switchboard_rooms::protocol::{
    CreateRoom, CustomMessage, CustomRequest, Entity, EntityId, EntityUpdate, Kick, PlayerLeft,
    RoomId, RoomPlayer, RoomState, RoomSummary, RpcCall, RpcRequest, RpcTarget, SpawnRequest,
    StateSync, Transfer,
};

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/wire.json");

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// A vector of a value of type `ty`.
fn value<T: Serialize>(name: &str, ty: &str, value: &T) -> Value {
    json!({
        "name": name,
        "type": ty,
        "value": serde_json::to_value(value).unwrap(),
        "hex": hex(&codec::encode_value(value).unwrap()),
    })
}

fn player(n: u128) -> ClientId {
    ClientId::from_u128(0x0123_4567_89ab_cdef_0000_0000_0000_0000 + n)
}

fn transform() -> Transform {
    Transform {
        position: [1.5, -2.0, 100.25],
        rotation: [0.0, 90.0, 0.0],
        zone: "town".into(),
        state: Some(MovementState {
            moving: true,
            speed: 3.5,
            ..MovementState::default()
        }),
        extra: BTreeMap::from([("emote".to_string(), "\"wave\"".to_string())]),
    }
}

/// Every vector, in the file's order.
fn vectors() -> Vec<Value> {
    let token = ReconnectToken(std::array::from_fn(|i| i as u8 * 7));
    let metadata = BTreeMap::from([
        ("map".to_string(), "dunes".to_string()),
        ("mode".to_string(), "duel".to_string()),
    ]);
    let a_player = RoomPlayer {
        id: player(1),
        name: "ada".into(),
        host: true,
        ready: false,
        connected: true,
        latency_ms: 42,
    };
    let entity = Entity {
        id: EntityId(7),
        owner: player(1),
        kind: "tank".into(),
        state: vec![1, 2, 3],
    };
    let mut all = vec![
        value("u8 max", "u8", &255u8),
        value("u16 one byte", "u16", &250u16),
        value("u16 marker 251", "u16", &251u16),
        value("u16 max", "u16", &u16::MAX),
        value("u32 marker 252", "u32", &65_536u32),
        value("u64 marker 253", "u64", &(1u64 << 40)),
        value("i32 zig-zag negative", "i32", &-1i32),
        value("i32 zig-zag wide", "i32", &-300i32),
        value("i64 positive", "i64", &123_456_789_012i64),
        value("f32", "f32", &-0.25f32),
        value("f64", "f64", &1234.5f64),
        value("bool", "bool", &true),
        value("string utf-8", "string", &"héllo ✓"),
        value("bytes", "bytes", &vec![0u8, 1, 255]),
        value("option none", "option<string>", &None::<String>),
        value("option some", "option<string>", &Some("x".to_string())),
        value("vec of u32", "vec<u32>", &vec![1u32, 300, 70_000]),
        value("map in key order", "map<string,string>", &metadata),
        value("client id", "ClientId", &player(1)),
        value(
            "hello, new session",
            "Hello",
            &SessionHello {
                name: "ada".into(),
                password: Some("sesame".into()),
                credentials: vec![9, 9],
                resume: None,
            },
        ),
        value(
            "hello, resuming",
            "Hello",
            &SessionHello {
                name: "ada".into(),
                password: None,
                credentials: vec![],
                resume: Some(Resume {
                    client: player(1),
                    token: token.clone(),
                }),
            },
        ),
        value(
            "welcome",
            "Welcome",
            &Welcome {
                client: player(1),
                token,
                resumed: true,
                grace_secs: 60,
            },
        ),
        value(
            "refused",
            "Refused",
            &Refused {
                code: 4,
                reason: "server full".into(),
            },
        ),
        value(
            "request",
            "RequestFrame",
            &RequestFrame {
                id: 300,
                channel: 2,
                action: 1,
                content: vec![3, b'a', b'b', b'c'],
            },
        ),
        value(
            "rejected",
            "Rejected",
            &Rejected {
                id: 7,
                reason: "not your turn".into(),
            },
        ),
        value(
            "error reply",
            "ErrorReply",
            &ErrorReply {
                id: 0,
                code: ErrorCode::RateLimited,
                detail: "over the rate limit".into(),
            },
        ),
        value(
            "create room",
            "CreateRoom",
            &CreateRoom {
                name: "duel".into(),
                max_players: 2,
                metadata: metadata.clone(),
                private: false,
            },
        ),
        value("room id", "RoomId", &RoomId(3)),
        value(
            "kick",
            "Kick",
            &Kick {
                player: player(2),
                reason: "afk".into(),
            },
        ),
        value(
            "rpc to all",
            "RpcRequest",
            &RpcRequest {
                method: "boom".into(),
                target: RpcTarget::All,
                args: vec![1],
            },
        ),
        value(
            "rpc to one",
            "RpcRequest",
            &RpcRequest {
                method: "whisper".into(),
                target: RpcTarget::One(player(2)),
                args: vec![],
            },
        ),
        value(
            "rpc call",
            "RpcCall",
            &RpcCall {
                from: player(1),
                method: "boom".into(),
                args: vec![1],
            },
        ),
        value(
            "custom request",
            "CustomRequest",
            &CustomRequest {
                channel: "chat".into(),
                data: b"hi".to_vec(),
            },
        ),
        value(
            "custom message",
            "CustomMessage",
            &CustomMessage {
                from: player(2),
                channel: "chat".into(),
                data: b"hi".to_vec(),
            },
        ),
        value(
            "spawn",
            "SpawnRequest",
            &SpawnRequest {
                kind: "tank".into(),
                state: vec![1, 2, 3],
            },
        ),
        value(
            "entity update",
            "EntityUpdate",
            &EntityUpdate {
                id: EntityId(7),
                state: vec![4],
            },
        ),
        value(
            "state sync",
            "StateSync",
            &StateSync {
                server_time_ms: 1_250,
                updates: vec![EntityUpdate {
                    id: EntityId(7),
                    state: vec![4],
                }],
            },
        ),
        value(
            "transfer",
            "Transfer",
            &Transfer {
                id: EntityId(7),
                owner: player(2),
            },
        ),
        value("room player", "RoomPlayer", &a_player),
        value(
            "player left",
            "PlayerLeft",
            &PlayerLeft {
                id: player(2),
                reason: "kicked: afk".into(),
            },
        ),
        value(
            "room state",
            "RoomState",
            &RoomState {
                id: RoomId(3),
                name: "duel".into(),
                max_players: 2,
                metadata: metadata.clone(),
                locked: false,
                started: true,
                players: vec![a_player],
                entities: vec![entity.clone()],
                more_entities: 0,
            },
        ),
        value(
            "room list",
            "vec<RoomSummary>",
            &vec![RoomSummary {
                id: RoomId(3),
                name: "duel".into(),
                players: 1,
                max_players: 2,
                metadata,
                locked: false,
                started: false,
            }],
        ),
        value("entity", "Entity", &entity),
        value(
            "relay hello",
            "RelayHello",
            &switchboard_relay::RelayHello {
                name: "ada".into(),
                bot: false,
            },
        ),
        value("transform", "Transform", &transform()),
        value(
            "transform, no state",
            "Transform",
            &Transform {
                zone: "default".into(),
                ..Transform::default()
            },
        ),
        value(
            "relayed",
            "Relayed",
            &Relayed {
                player_id: 9,
                server_time_ms: 123_456,
                transform: transform(),
            },
        ),
        value(
            "redirect to another relay",
            "Redirect",
            &switchboard_relay::Redirect {
                addr: "10.0.0.2:7200".into(),
                websocket: Some("10.0.0.2:7201".into()),
                ticket: switchboard_relay::Handover {
                    player_id: (2 << 20) | 5,
                    name: "ada".into(),
                    bot: false,
                    process: 3,
                    expires_ms: 1_764_547_200_000,
                    nonce: [7; 16],
                    mac: [0xAB; 32],
                },
                // Only on the wire to a QUIC or WebTransport client
                // (`Redirect::encode`).
                quic: None,
                webtransport: None,
            },
        ),
    ];
    all.extend(frames());
    all
}

/// Whole frames: the hello, a raw message, and a compressed one.
fn frames() -> Vec<Value> {
    let frame = |name: &str, payload: &[u8]| {
        let bytes = codec::encode_frame(payload, &CodecConfig::default()).unwrap();
        json!({
            "name": name,
            "type": "Frame",
            "value": { "compressed": bytes[4] == 1, "payload": hex(payload) },
            "hex": hex(&bytes),
        })
    };
    let mut hello = b"SWBD".to_vec();
    hello.extend_from_slice(&switchboard::PROTOCOL_VERSION.to_be_bytes());
    // An envelope: varint channel, varint action, then the content.
    let envelope = |channel: u16, action: u16, content: &[u8]| {
        let mut payload = codec::encode_value(&(channel, action)).unwrap();
        payload.extend_from_slice(content);
        payload
    };
    vec![
        frame("hello frame", &hello),
        frame("message frame", &envelope(300, 7, b"xy")),
        frame(
            "compressed frame",
            &envelope(16, 1, "dots ".repeat(400).as_bytes()),
        ),
    ]
}

/// Decodes `hex` as a `T` and checks it is `value`.
fn decodes_to<T: Serialize + DeserializeOwned>(hex_text: &str, value: &Value) {
    let decoded: T = codec::decode_value(&unhex(hex_text)).unwrap();
    assert_eq!(&serde_json::to_value(decoded).unwrap(), value);
}

fn check_decoding(vector: &Value) {
    let (ty, hex_text, value) = (
        vector["type"].as_str().unwrap(),
        vector["hex"].as_str().unwrap(),
        &vector["value"],
    );
    match ty {
        "u8" => decodes_to::<u8>(hex_text, value),
        "u16" => decodes_to::<u16>(hex_text, value),
        "u32" => decodes_to::<u32>(hex_text, value),
        "u64" => decodes_to::<u64>(hex_text, value),
        "i32" => decodes_to::<i32>(hex_text, value),
        "i64" => decodes_to::<i64>(hex_text, value),
        "f32" => decodes_to::<f32>(hex_text, value),
        "f64" => decodes_to::<f64>(hex_text, value),
        "bool" => decodes_to::<bool>(hex_text, value),
        "string" => decodes_to::<String>(hex_text, value),
        "bytes" => decodes_to::<Vec<u8>>(hex_text, value),
        "option<string>" => decodes_to::<Option<String>>(hex_text, value),
        "vec<u32>" => decodes_to::<Vec<u32>>(hex_text, value),
        "map<string,string>" => decodes_to::<BTreeMap<String, String>>(hex_text, value),
        "ClientId" => decodes_to::<ClientId>(hex_text, value),
        "Hello" => decodes_to::<SessionHello>(hex_text, value),
        "Welcome" => decodes_to::<Welcome>(hex_text, value),
        "Refused" => decodes_to::<Refused>(hex_text, value),
        "RequestFrame" => decodes_to::<RequestFrame>(hex_text, value),
        "Rejected" => decodes_to::<Rejected>(hex_text, value),
        "ErrorReply" => decodes_to::<ErrorReply>(hex_text, value),
        "CreateRoom" => decodes_to::<CreateRoom>(hex_text, value),
        "RoomId" => decodes_to::<RoomId>(hex_text, value),
        "Kick" => decodes_to::<Kick>(hex_text, value),
        "RpcRequest" => decodes_to::<RpcRequest>(hex_text, value),
        "RpcCall" => decodes_to::<RpcCall>(hex_text, value),
        "CustomRequest" => decodes_to::<CustomRequest>(hex_text, value),
        "CustomMessage" => decodes_to::<CustomMessage>(hex_text, value),
        "SpawnRequest" => decodes_to::<SpawnRequest>(hex_text, value),
        "EntityUpdate" => decodes_to::<EntityUpdate>(hex_text, value),
        "StateSync" => decodes_to::<StateSync>(hex_text, value),
        "Transfer" => decodes_to::<Transfer>(hex_text, value),
        "RoomPlayer" => decodes_to::<RoomPlayer>(hex_text, value),
        "PlayerLeft" => decodes_to::<PlayerLeft>(hex_text, value),
        "RoomState" => decodes_to::<RoomState>(hex_text, value),
        "vec<RoomSummary>" => decodes_to::<Vec<RoomSummary>>(hex_text, value),
        "Entity" => decodes_to::<Entity>(hex_text, value),
        "RelayHello" => decodes_to::<switchboard_relay::RelayHello>(hex_text, value),
        "Transform" => decodes_to::<Transform>(hex_text, value),
        "Relayed" => decodes_to::<Relayed>(hex_text, value),
        "Redirect" => decodes_to::<switchboard_relay::Redirect>(hex_text, value),
        "Frame" => {
            let mut decoder = codec::FrameDecoder::new(CodecConfig::default());
            let mut buf = bytes::BytesMut::from(&unhex(hex_text)[..]);
            let frame = decoder.decode(&mut buf).unwrap().unwrap();
            assert!(buf.is_empty());
            assert_eq!(frame.compressed, value["compressed"].as_bool().unwrap());
            assert_eq!(hex(&frame.payload), value["payload"].as_str().unwrap());
        }
        other => panic!("no Rust type for vector type {other}"),
    }
}

#[test]
fn the_wire_vectors_are_what_the_rust_codec_writes_and_reads() {
    let expected = Value::Array(vectors());
    if std::env::var_os("SWITCHBOARD_WRITE_VECTORS").is_some() {
        let text = serde_json::to_string_pretty(&expected).unwrap() + "\n";
        std::fs::write(FILE, text).unwrap();
    }
    let file: Value = serde_json::from_str(&std::fs::read_to_string(FILE).unwrap()).unwrap();
    let (file, expected) = (file.as_array().unwrap(), expected.as_array().unwrap());
    assert_eq!(file.len(), expected.len(), "vectors added or removed");
    for (in_file, ours) in file.iter().zip(expected) {
        assert_eq!(
            in_file, ours,
            "the Rust encoding changed for {}",
            ours["name"]
        );
        check_decoding(in_file);
    }
    assert!(file.iter().any(|v| v["value"]["compressed"] == true));
}
