//! The load tester's stamp: a bot's sequence number and send time, carried
//! in one extra field of its transforms (`"stamp": [seq, sent_us]`, valid
//! JSON for JSON clients too), and read back from a relayed message without
//! allocating: the bots' process decodes 380,000 of them a second at 1,000
//! bots × 20 Hz, and must not cost more than the relay it measures.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::transform::MovementState;

/// The extra field's name.
pub(crate) const FIELD: &str = "stamp";

/// A bot's stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) seq: u64,
    pub(crate) sent_us: u64,
}

impl Stamp {
    /// The extra field's value.
    #[cfg(test)]
    pub(crate) fn text(self) -> String {
        let mut text = String::new();
        self.write(&mut text);
        text
    }

    /// Writes the extra field's value over `text` (no allocation once
    /// `text` has held a stamp).
    pub(crate) fn write(self, text: &mut String) {
        use std::fmt::Write;
        text.clear();
        let _ = write!(text, "[{},{}]", self.seq, self.sent_us);
    }

    fn parse(text: &str) -> Option<Stamp> {
        let (seq, sent_us) = text.strip_prefix('[')?.strip_suffix(']')?.split_once(',')?;
        Some(Stamp {
            seq: seq.parse().ok()?,
            sent_us: sent_us.parse().ok()?,
        })
    }
}

/// A relayed transform as the bots read it: every field borrowed or plain,
/// the extra fields looked through for the stamp and not kept.
/// (bincode reads fields by position: these follow `Relayed` and
/// `Transform` field for field.)
#[derive(Deserialize)]
struct RelayedView<'a> {
    player_id: u32,
    _server_time_ms: u64,
    #[serde(borrow)]
    transform: TransformView<'a>,
}

#[derive(Deserialize)]
struct TransformView<'a> {
    _position: [f32; 3],
    _rotation: [f32; 3],
    _zone: &'a str,
    _state: Option<MovementState>,
    extra: StampField,
}

/// The stamp among the extra fields, if there is one.
struct StampField(Option<Stamp>);

impl<'de> Deserialize<'de> for StampField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Find;
        impl<'de> Visitor<'de> for Find {
            type Value = StampField;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of extra fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StampField, A::Error> {
                let mut stamp = None;
                while let Some(key) = map.next_key::<&str>()? {
                    if key == FIELD {
                        stamp = Stamp::parse(map.next_value::<&str>()?);
                    } else {
                        map.next_value::<&str>()?;
                    }
                }
                Ok(StampField(stamp))
            }
        }
        deserializer.deserialize_map(Find)
    }
}

/// The sender and stamp of a relayed message's content, without
/// allocating; `None` if it does not decode or carries no stamp.
pub(crate) fn read(content: &[u8]) -> Option<(u32, Stamp)> {
    let config = bincode::config::standard();
    let (view, _): (RelayedView, usize) =
        bincode::serde::borrow_decode_from_slice(content, config).ok()?;
    Some((view.player_id, view.transform.extra.0?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Relayed;
    use crate::transform::Transform;

    #[test]
    fn a_stamp_travels_in_an_extra_field_and_reads_back_from_the_relayed_bytes() {
        let stamp = Stamp {
            seq: 41,
            sent_us: 1_234_567,
        };
        let mut transform = Transform {
            position: [1.0, 2.0, 3.0],
            zone: "hall".into(),
            ..Transform::default()
        };
        transform.extra.insert("emote".into(), "\"wave\"".into());
        transform.extra.insert(FIELD.into(), stamp.text());
        let relayed = Relayed {
            player_id: 7,
            server_time_ms: 99,
            transform,
        };
        let bytes = switchboard::codec::encode_value(&relayed).unwrap();
        assert_eq!(read(&bytes), Some((7, stamp)));
        // The field is JSON, for JSON clients.
        let json: serde_json::Value = serde_json::from_str(&stamp.text()).unwrap();
        assert_eq!(json, serde_json::json!([41, 1_234_567]));
        // Without a stamp, or not a relayed transform: nothing.
        let mut plain = relayed.clone();
        plain.transform.extra.remove(FIELD);
        assert_eq!(
            read(&switchboard::codec::encode_value(&plain).unwrap()),
            None
        );
        assert_eq!(read(b"\x01\x02"), None);
    }
}
