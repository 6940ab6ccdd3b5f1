//! The load tester's stamp: a bot's sequence number and send time, carried
//! in one extra field of its transforms (`"stamp": [seq, sent_us]`, valid
//! JSON for JSON clients too), and read back from a relayed message without
//! allocating (`Heard::peek` of the relay's client core): the bots' process
//! decodes 380,000 of them a second at 1,000 bots × 20 Hz, and must not
//! cost more than the relay it measures.

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

    /// The stamp in the extra field's value, if it is one.
    pub(crate) fn parse(text: &str) -> Option<Stamp> {
        let (seq, sent_us) = text.strip_prefix('[')?.strip_suffix(']')?.split_once(',')?;
        Some(Stamp {
            seq: seq.parse().ok()?,
            sent_us: sent_us.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_json_and_reads_back_from_the_relayed_bytes() {
        use switchboard_relay::client_core::Heard;
        use switchboard_relay::{Relayed, Transform};
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
        let peek = Heard::Encoded(&bytes).peek(FIELD).unwrap();
        assert_eq!(peek.field.and_then(Stamp::parse), Some(stamp));
        // The field is JSON, for JSON clients.
        let json: serde_json::Value = serde_json::from_str(&stamp.text()).unwrap();
        assert_eq!(json, serde_json::json!([41, 1_234_567]));
        for bad in ["", "[1]", "[a,2]", "1,2", "[1,2"] {
            assert_eq!(Stamp::parse(bad), None, "{bad}");
        }
    }
}
