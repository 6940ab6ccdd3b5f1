//! AxisPy's messages on the wire: one compact JSON object per text frame,
//! `{"t", "ts", "from"?, "d"?}` (`../shared/compat/axispy-protocol.md`,
//! section 2), and the room and player dicts it shows.

use serde_json::{json, Map, Value};
use switchboard::ClientId;

use switchboard_rooms::protocol::{RoomPlayer, RoomState};

/// The id the server speaks as (`from` of what the server itself says).
pub(crate) const SERVER_ID: &str = "00000000-0000-4000-8000-000000000000";

/// A message from a client, checked for shape.
#[derive(Debug)]
pub(crate) struct Incoming {
    /// Its type.
    pub(crate) t: String,
    /// Its payload (`{}` when absent).
    pub(crate) d: Map<String, Value>,
}

/// Why a frame is not a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WireError {
    TooDeep(usize),
    NotJson(String),
    NotAnObject,
    NoType,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::TooDeep(max) => write!(f, "JSON nested deeper than {max} levels"),
            WireError::NotJson(err) => write!(f, "invalid JSON: {err}"),
            WireError::NotAnObject => f.write_str("a message must be a JSON object"),
            WireError::NoType => f.write_str("a message needs a string \"t\""),
        }
    }
}

/// Parses a text frame. The depth is checked on the raw text first, so
/// that no deep document is ever built.
pub(crate) fn parse(text: &str, max_depth: usize) -> Result<Incoming, WireError> {
    if depth(text) > max_depth {
        return Err(WireError::TooDeep(max_depth));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| WireError::NotJson(e.to_string()))?;
    let Value::Object(mut object) = value else {
        return Err(WireError::NotAnObject);
    };
    let Some(Value::String(t)) = object.remove("t") else {
        return Err(WireError::NoType);
    };
    let d = match object.remove("d") {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    Ok(Incoming { t, d })
}

/// How deeply arrays and objects nest in `text` (strings skipped).
fn depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A message as the server writes it: keys in the order `t, ts, from, d`;
/// `from` only when there is a sender, `d` only when it is a non-empty
/// object (a `"d": null` would make the client lose the rest of its poll).
pub(crate) fn message(t: &str, from: Option<&str>, d: Value) -> String {
    let ts = unix_time();
    let mut text = format!("{{\"t\":{},\"ts\":{ts}", Value::from(t));
    if let Some(from) = from {
        text.push_str(&format!(",\"from\":{}", Value::from(from)));
    }
    if d.as_object().is_some_and(|d| !d.is_empty()) {
        text.push_str(&format!(",\"d\":{d}"));
    }
    text.push('}');
    text
}

/// Now, in Unix seconds: AxisPy's `ts`.
pub(crate) fn unix_time() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// Whether `id` is what AxisPy makes: a 36-character lowercase hyphenated
/// UUID.
pub(crate) fn is_player_id(id: &str) -> bool {
    id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// A native player's id as text, and back: the same UUID form.
pub(crate) fn parse_client_id(text: &str) -> Option<ClientId> {
    if !is_player_id(text) {
        return None;
    }
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    u128::from_str_radix(&hex, 16).ok().map(ClientId::from_u128)
}

/// A player dict (`Player.to_dict`): all six keys.
pub(crate) fn player(id: &str, number: u32, p: &RoomPlayer) -> Value {
    json!({
        "id": id,
        "name": p.name,
        "client_id": number,
        "is_host": p.host,
        "is_ready": p.ready,
        "custom_data": {},
    })
}

/// A room dict; `ids` names each player as AxisPy clients know it.
pub(crate) fn room(
    state: &RoomState,
    players: impl IntoIterator<Item = (String, u32, RoomPlayer)>,
) -> Value {
    let players: Map<String, Value> = players
        .into_iter()
        .map(|(id, number, p)| {
            let dict = player(&id, number, &p);
            (id, dict)
        })
        .collect();
    json!({
        "name": state.name,
        "max_players": state.max_players.max(2),
        "started": state.started,
        "players": players,
    })
}

/// A game's payload (RPC arguments, custom data, entity state) as native
/// clients get it: the JSON text, encoded as a `String`.
pub(crate) fn to_native(value: &Value) -> Vec<u8> {
    switchboard::codec::encode_value(&value.to_string()).unwrap_or_default()
}

/// A native payload as AxisPy clients get it: the JSON a native client
/// wrote as a `String`; anything else as `{"native_bytes": "<hex>"}`.
pub(crate) fn from_native(bytes: &[u8]) -> Value {
    switchboard::codec::decode_value::<String>(bytes)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            json!({ "native_bytes": hex })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_keep_the_key_order_and_never_send_an_empty_or_null_d() {
        let text = message("game_start", Some(SERVER_ID), json!({}));
        assert!(text.starts_with("{\"t\":\"game_start\",\"ts\":"), "{text}");
        assert!(
            text.ends_with(&format!(",\"from\":\"{SERVER_ID}\"}}")),
            "{text}"
        );
        assert!(!text.contains("\"d\""));
        let text = message("join_rejected", None, json!({"reason": "Room is full"}));
        assert!(!text.contains("from"));
        assert!(
            text.ends_with(",\"d\":{\"reason\":\"Room is full\"}}"),
            "{text}"
        );
        assert!(!message("x", None, Value::Null).contains("\"d\""));
    }

    #[test]
    fn parse_takes_objects_with_a_type_and_refuses_the_rest() {
        let m = parse(r#"{"t":"ping","ts":1.5,"d":{"ts":1.5}}"#, 32).unwrap();
        assert_eq!((m.t.as_str(), m.d["ts"].as_f64()), ("ping", Some(1.5)));
        assert_eq!(parse(r#"{"t":"game_start"}"#, 32).unwrap().d.len(), 0);
        assert_eq!(parse("[1]", 32).unwrap_err(), WireError::NotAnObject);
        assert_eq!(parse(r#"{"d":{}}"#, 32).unwrap_err(), WireError::NoType);
        assert!(matches!(parse("{nope", 32), Err(WireError::NotJson(_))));
    }

    #[test]
    fn json_depth_bomb_is_refused_before_parsing() {
        let bomb = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(parse(&bomb, 32).unwrap_err(), WireError::TooDeep(32));
        // Brackets inside strings do not count.
        let text = format!(
            r#"{{"t":"custom","d":{{"payload":"{}"}}}}"#,
            "[".repeat(100)
        );
        assert!(parse(&text, 32).is_ok());
    }

    #[test]
    fn player_ids_are_lowercase_hyphenated_uuids() {
        assert!(is_player_id("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"));
        for bad in [
            "",
            "AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA",
            "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaa",
            "aaaaaaaaaaaaa4aaa-8aaa-aaaaaaaaaaaa",
            "gaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa",
        ] {
            assert!(!is_player_id(bad), "{bad}");
        }
        let id = ClientId::from_u128(0xaaaaaaaa_aaaa_4aaa_8aaa_aaaaaaaaaaaa);
        assert_eq!(parse_client_id(&id.to_string()), Some(id));
    }

    #[test]
    fn payloads_cross_to_native_clients_as_json_text() {
        let value = json!({"amount": 10});
        let bytes = to_native(&value);
        assert_eq!(
            switchboard::codec::decode_value::<String>(&bytes).unwrap(),
            "{\"amount\":10}"
        );
        assert_eq!(from_native(&bytes), value);
        assert_eq!(from_native(&[1, 2]), json!({"native_bytes": "0102"}));
    }
}
