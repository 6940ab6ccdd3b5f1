//! Arbitrary transforms and hellos into the relay's hub, native (bincode)
//! and JSON: decoded, checked, relayed within zones; a hello's name kept
//! within its limit whatever it was. Any panic is a bug. Shared by the fuzz
//! target and the corpus replay test.

use serde_json::Value;
use switchboard_relay::{Link, Relay, RelayHello, Transform};

pub fn run(data: &[u8]) {
    let mut relay = Relay::new();
    let (a, _) = relay.join("a", None, Link::Native, false);
    let (b, _) = relay.join("b", None, Link::Json, false);
    let mut at = 0u64;
    for (i, line) in data.split(|byte| *byte == b'\n').enumerate() {
        at += 7;
        let (who, body) = match line.split_first() {
            Some((first, body)) => (*first, body),
            None => continue,
        };
        let player = [a, b][i % 2];
        if who >= 253 {
            // A hello: bincode (253) or a JSON line's name (254, 255).
            let hello = if who == 253 {
                switchboard::codec::decode_value::<RelayHello>(body).ok()
            } else {
                serde_json::from_slice::<Value>(body)
                    .ok()
                    .map(|v| RelayHello {
                        name: v.get("name").and_then(Value::as_str).unwrap_or("").into(),
                        bot: v.get("bot").and_then(Value::as_bool).unwrap_or(false),
                    })
            };
            if let Some(hello) = hello {
                relay.describe(player, &hello.name, hello.bot);
                if let Some(kept) = relay.player(player) {
                    assert!(kept.name.chars().count() <= switchboard::session::MAX_NAME_CHARS);
                    assert!(!kept.name.chars().any(char::is_control));
                }
            }
        }
        let transform = if who % 2 == 0 {
            switchboard::codec::decode_value::<Transform>(body).ok()
        } else {
            match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(object)) => Transform::from_json(&object).ok(),
                _ => None,
            }
        };
        if let Some(transform) = transform {
            let _ = transform.to_json(player, at);
            let _ = relay.transform(player, transform, at);
        }
        if who == 255 {
            relay.leave(a);
        }
    }
    let _ = relay.take_abusive();
    let _ = relay.stats();
}
