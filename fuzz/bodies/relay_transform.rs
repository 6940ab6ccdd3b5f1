//! Arbitrary transforms into the relay's hub, native (bincode) and JSON:
//! decoded, checked, relayed within zones. Any panic is a bug. Shared by the
//! fuzz target and the corpus replay test.

use serde_json::Value;
use switchboard_relay::{Link, Relay, Transform};

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
        let transform = if who % 2 == 0 {
            switchboard::codec::decode_value::<Transform>(body).ok()
        } else {
            match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(object)) => Transform::from_json(&object).ok(),
                _ => None,
            }
        };
        if let Some(transform) = transform {
            if let Some(player) = [a, b].get(i % 2) {
                let _ = transform.to_json(*player, at);
                let _ = relay.transform(*player, transform, at);
            }
        }
        if who == 255 {
            relay.leave(a);
        }
    }
    let _ = relay.take_abusive();
    let _ = relay.stats();
}
