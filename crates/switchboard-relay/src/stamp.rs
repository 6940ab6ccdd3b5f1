//! The load tester's stamp: a bot's sequence number and send time, carried
//! in one extra field of its transforms (`"stamp": [seq, sent_us]`, valid
//! JSON for JSON clients too), and read back from a relayed message without
//! allocating: the bots' process decodes 380,000 of them a second at 1,000
//! bots × 20 Hz, and must not cost more than the relay it measures.

use crate::wire::Reader;

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

    /// The stamp among a transform's unknown fields, if there is one.
    pub(crate) fn of_extra(extra: &std::collections::BTreeMap<String, String>) -> Option<Stamp> {
        Stamp::parse(extra.get(FIELD)?)
    }

    fn parse(text: &str) -> Option<Stamp> {
        let (seq, sent_us) = text.strip_prefix('[')?.strip_suffix(']')?.split_once(',')?;
        Some(Stamp {
            seq: seq.parse().ok()?,
            sent_us: sent_us.parse().ok()?,
        })
    }
}

/// A relayed message as the bots read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Heard {
    pub(crate) player_id: u32,
    pub(crate) position: [f32; 3],
    /// The stamp, on the transforms that carry one.
    pub(crate) stamp: Option<Stamp>,
}

/// The sender, position and stamp of a relayed message's content, without
/// allocating; `None` if it does not decode.
///
/// Read by hand along `Relayed`'s bincode layout (standard config: varint
/// integers and lengths), skipping what the bots do not need: 26 ns where
/// serde's borrowed decode of the same fields took 80, for each of the
/// 380,000 messages a second the bots take in at 1,000 bots × 20 Hz. The
/// round-trip test below holds it to `Relayed`'s encoding.
pub(crate) fn read(content: &[u8]) -> Option<Heard> {
    let mut at = Reader(content);
    let player_id = u32::try_from(at.varint()?).ok()?;
    at.varint()?; // server_time_ms
    let mut position = [0f32; 3];
    for axis in &mut position {
        *axis = f32::from_le_bytes(at.take(4)?.try_into().ok()?);
    }
    at.skip(12)?; // rotation: three f32
    let zone = at.varint()?;
    at.skip(usize::try_from(zone).ok()?)?;
    match at.byte()? {
        0 => {}
        1 => at.skip(9)?, // MovementState: five bools and an f32
        _ => return None,
    }
    let mut stamp = None;
    for _ in 0..at.varint()? {
        let key = at.text()?;
        let value = at.text()?;
        if key == FIELD.as_bytes() {
            stamp = Some(Stamp::parse(std::str::from_utf8(value).ok()?)?);
        }
    }
    Some(Heard {
        player_id,
        position,
        stamp,
    })
}

/// The messages of a `Batch`'s content, (action, content) each, read in
/// place; `None` if its head does not decode. The iterator stops at the
/// first entry that does not.
pub(crate) fn batch_messages(content: &[u8]) -> Option<impl Iterator<Item = (u16, &[u8])>> {
    let mut at = Reader(content);
    at.varint()?; // tick
    at.varint()?; // server_time_ms
    let count = at.varint()?;
    Some((0..count).map_while(move |_| {
        let action = u16::try_from(at.varint()?).ok()?;
        Some((action, at.text()?))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batchs_messages_read_in_place() {
        let batch = crate::server::Batch {
            tick: 3,
            server_time_ms: 70_000,
            messages: vec![(4, vec![1, 2, 3]), (5, vec![9; 300])],
        };
        let bytes = switchboard::codec::encode_value(&batch).unwrap();
        let read: Vec<(u16, Vec<u8>)> = batch_messages(&bytes)
            .unwrap()
            .map(|(a, c)| (a, c.to_vec()))
            .collect();
        assert_eq!(read, batch.messages);
        for cut in 0..bytes.len() {
            // A cut batch reads as fewer messages, never a panic.
            let n = batch_messages(&bytes[..cut]).map_or(0, Iterator::count);
            assert!(n < 2, "{cut}");
        }
    }
    use crate::server::Relayed;
    use crate::transform::{MovementState, Transform};

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
        let heard = Heard {
            player_id: 7,
            position: [1.0, 2.0, 3.0],
            stamp: Some(stamp),
        };
        assert_eq!(read(&bytes), Some(heard));
        // The field is JSON, for JSON clients.
        let json: serde_json::Value = serde_json::from_str(&stamp.text()).unwrap();
        assert_eq!(json, serde_json::json!([41, 1_234_567]));
        // Without a stamp: the rest; not a relayed transform: nothing.
        let mut plain = relayed.clone();
        plain.transform.extra.remove(FIELD);
        assert_eq!(
            read(&switchboard::codec::encode_value(&plain).unwrap()),
            Some(Heard {
                stamp: None,
                ..heard
            })
        );
        assert_eq!(read(b"\x01\x02"), None);
        // Every shape the layout can take: wide integers (varint markers),
        // a movement state, a long zone, a stamp among other fields; and
        // every truncation of it reads as nothing, without a panic.
        let mut wide = relayed;
        wide.player_id = 70_000;
        wide.server_time_ms = 5_000_000_000;
        wide.transform.zone = "z".repeat(300);
        wide.transform.state = Some(MovementState {
            moving: true,
            speed: 2.5,
            ..MovementState::default()
        });
        wide.transform.extra.insert("zz".into(), "1".into());
        let bytes = switchboard::codec::encode_value(&wide).unwrap();
        let whole = Some(Heard {
            player_id: 70_000,
            ..heard
        });
        assert_eq!(read(&bytes), whole);
        for cut in 0..bytes.len() {
            let got = read(&bytes[..cut]);
            assert!(got.is_none() || got == whole, "{cut}");
        }
    }
}
