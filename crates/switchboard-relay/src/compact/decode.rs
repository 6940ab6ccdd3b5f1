//! The client's side: one [`CompactDecoder`] per connection to a relay,
//! which turns each `Compact` frame back into transforms, leavings and
//! messages.

use std::collections::BTreeMap;

use super::{
    dequantize, flag, kind, unpack_rotation, unpack_state, MAX_SLOTS, MAX_UNITS, MAX_ZONES,
};
use crate::transform::{Transform, MAX_EXTRA, MAX_EXTRA_LEN};
use crate::wire::Reader;

/// A `Compact` frame's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactFrame {
    /// The relay's tick when it wrote the frame (0 when it does not pace).
    pub tick: u64,
    /// The relay's clock (ms since it started) at the frame's first
    /// transform, or when it was written if it holds none.
    pub server_time_ms: u64,
}

/// One thing a `Compact` frame says, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum CompactRecord<'a> {
    /// A player's transform, whole again (the decoder applied the change):
    /// what a `Relayed` message would have carried, positions and angles
    /// to the relay's precision.
    Transform {
        /// Who.
        player_id: u32,
        /// The relay's stamp, ms since it started.
        server_time_ms: u64,
        /// Where and how, as the sender's last transform.
        transform: &'a Transform,
        /// Whether the unknown fields came with this record (they changed,
        /// or the sender just came into view); otherwise they are the ones
        /// held from before.
        extra_changed: bool,
    },
    /// A player left this client's view, zone or the relay (`Left`).
    Left {
        /// Who.
        player_id: u32,
    },
    /// Any other relay message (`Welcome`, `Error`, ...): its action and
    /// content, as it would have come alone.
    Message {
        /// The `RelayAction`.
        action: u16,
        /// Its content.
        content: &'a [u8],
    },
}

/// A `Compact` frame that does not decode: the stream cannot be followed
/// past it (the relay is not one, or the bytes were damaged), and the
/// connection should be closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("compact transforms: {0}")]
pub struct CompactError(String);

pub(super) fn bad(what: &str) -> CompactError {
    CompactError(what.to_string())
}

/// A sender as this client holds it.
#[derive(Debug)]
struct Slot {
    player_id: u32,
    /// Its quantized position: the baseline of the next difference.
    units: [i64; 3],
    /// Its transform so far (none before its first, whole, record).
    transform: Option<Transform>,
}

/// One connection's compact stream, read frame by frame.
#[derive(Debug, Default)]
pub struct CompactDecoder {
    precision: Option<f32>,
    slots: Vec<Option<Slot>>,
    zones: Vec<Option<String>>,
}

impl CompactDecoder {
    /// A new connection's decoder.
    pub fn new() -> CompactDecoder {
        CompactDecoder::default()
    }

    /// The precision the relay quantizes positions to, once it said.
    pub fn precision(&self) -> Option<f32> {
        self.precision
    }

    /// Senders held.
    pub fn senders(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// Reads one `Compact` frame's content, handing each record to `each`
    /// in order. On an error the records before it were handed over and
    /// the stream cannot be followed further.
    pub fn read(
        &mut self,
        content: &[u8],
        mut each: impl FnMut(CompactRecord<'_>),
    ) -> Result<CompactFrame, CompactError> {
        let mut at = Reader(content);
        let tick = at.varint().ok_or_else(|| bad("no tick"))?;
        let server_time_ms = at.varint().ok_or_else(|| bad("no time"))?;
        let mut stamp = server_time_ms;
        while !at.is_empty() {
            let head = at.byte().ok_or_else(|| bad("no record"))?;
            match head & 3 {
                kind::TRANSFORM => {
                    let (player_id, transform, extra_changed) =
                        self.transform(&mut at, head, &mut stamp)?;
                    each(CompactRecord::Transform {
                        player_id,
                        server_time_ms: stamp,
                        transform,
                        extra_changed,
                    });
                }
                kind::ENTER => {
                    let slot = slot_of(&mut at)?;
                    let player_id = at.varint_u32().ok_or_else(|| bad("an entry's player"))?;
                    if self.slots.len() <= slot {
                        self.slots.resize_with(slot + 1, || None);
                    }
                    self.slots[slot] = Some(Slot {
                        player_id,
                        units: [0; 3],
                        transform: None,
                    });
                }
                kind::LEAVE => {
                    let slot = slot_of(&mut at)?;
                    let gone = self.slots.get_mut(slot).and_then(Option::take);
                    let gone = gone.ok_or_else(|| bad("a leaving from an empty slot"))?;
                    each(CompactRecord::Left {
                        player_id: gone.player_id,
                    });
                }
                _ => match head >> 2 {
                    kind::SETUP => {
                        let bytes = at.take(4).ok_or_else(|| bad("a cut setup"))?;
                        let precision = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
                        if !(precision.is_finite() && precision > 0.0) {
                            return Err(bad("a precision that is not a positive number"));
                        }
                        self.precision = Some(precision);
                    }
                    kind::ZONE => {
                        let id = at.varint_u32().filter(|id| *id < MAX_ZONES);
                        let id = id.ok_or_else(|| bad("a zone number out of range"))? as usize;
                        let name = text(&mut at, crate::transform::MAX_ZONE)?;
                        if self.zones.len() <= id {
                            self.zones.resize(id + 1, None);
                        }
                        self.zones[id] = Some(name);
                    }
                    kind::MESSAGE => {
                        let action = at.varint().and_then(|a| u16::try_from(a).ok());
                        let action = action.ok_or_else(|| bad("a message's action"))?;
                        let content = at.text().ok_or_else(|| bad("a cut message"))?;
                        each(CompactRecord::Message { action, content });
                    }
                    other => return Err(CompactError(format!("unknown record kind 3.{other}"))),
                },
            }
        }
        Ok(CompactFrame {
            tick,
            server_time_ms,
        })
    }

    /// A transform record after its head: its sender's transform updated.
    fn transform(
        &mut self,
        at: &mut Reader<'_>,
        head: u8,
        stamp: &mut u64,
    ) -> Result<(u32, &Transform, bool), CompactError> {
        let precision = self
            .precision
            .ok_or_else(|| bad("a transform before the setup record"))?;
        if head & flag::FULL != 0 && head & flag::STILL != 0 {
            return Err(bad("a transform both whole and still"));
        }
        let slot = slot_of(at)?;
        let time = at.signed().ok_or_else(|| bad("a transform's time"))?;
        *stamp = stamp.wrapping_add_signed(time);
        let zones = &self.zones;
        let held = self.slots.get_mut(slot).and_then(Option::as_mut);
        let held = held.ok_or_else(|| bad("a transform for an empty slot"))?;
        if held.transform.is_none() && head & flag::WHOLE != flag::WHOLE {
            return Err(bad("a sender's first transform is not whole"));
        }
        let transform = held.transform.get_or_insert_with(Transform::default);
        read_position(at, head, precision, &mut held.units, transform)?;
        read_rotation_and_state(at, head, transform)?;
        if head & flag::ZONE != 0 {
            let id = at.varint().and_then(|id| usize::try_from(id).ok());
            let zone = id.and_then(|id| zones.get(id)?.as_ref());
            transform.zone = zone.ok_or_else(|| bad("an undefined zone"))?.clone();
        }
        let extra_changed = head & flag::EXTRA != 0;
        if extra_changed {
            transform.extra = read_extra(at)?;
        }
        Ok((held.player_id, transform, extra_changed))
    }
}

/// A record's position, unless its head says it did not move: absolute
/// (`FULL`) or the difference from `units`, which it updates.
pub(super) fn read_position(
    at: &mut Reader<'_>,
    head: u8,
    precision: f32,
    units: &mut [i64; 3],
    transform: &mut Transform,
) -> Result<(), CompactError> {
    if head & flag::STILL != 0 {
        return Ok(());
    }
    for (axis, units) in units.iter_mut().enumerate() {
        let value = at.signed().ok_or_else(|| bad("a cut position"))?;
        let next = if head & flag::FULL != 0 {
            Some(value)
        } else {
            units.checked_add(value)
        };
        let value = next
            .filter(|n| n.unsigned_abs() <= MAX_UNITS as u64)
            .map(|n| (n, dequantize(n, precision)))
            .filter(|(_, v)| v.is_finite());
        let (n, v) = value.ok_or_else(|| bad("a position out of range"))?;
        *units = n;
        transform.position[axis] = v;
    }
    Ok(())
}

/// A record's rotation and movement state, where its head says they
/// changed.
pub(super) fn read_rotation_and_state(
    at: &mut Reader<'_>,
    head: u8,
    transform: &mut Transform,
) -> Result<(), CompactError> {
    if head & flag::ROTATION != 0 {
        let bytes = at.take(4).ok_or_else(|| bad("a cut rotation"))?;
        transform.rotation = unpack_rotation(u32::from_le_bytes(bytes.try_into().expect("4")));
    }
    if head & flag::STATE != 0 {
        let bits = at.byte().ok_or_else(|| bad("a cut movement state"))?;
        let speed = if bits & super::NO_STATE == 0 {
            at.signed().ok_or_else(|| bad("a cut speed"))?
        } else {
            0
        };
        transform.state = unpack_state(bits, speed);
    }
    Ok(())
}

/// A record's unknown fields, whole.
pub(super) fn read_extra(at: &mut Reader<'_>) -> Result<BTreeMap<String, String>, CompactError> {
    let count = at.varint().ok_or_else(|| bad("a cut field count"))?;
    if count > MAX_EXTRA as u64 {
        return Err(bad("too many unknown fields"));
    }
    let mut extra = BTreeMap::new();
    for _ in 0..count {
        let key = text(at, MAX_EXTRA_LEN)?;
        extra.insert(key, text(at, MAX_EXTRA_LEN)?);
    }
    Ok(extra)
}

/// A slot number, in range.
fn slot_of(at: &mut Reader<'_>) -> Result<usize, CompactError> {
    let slot = at.varint_u32().filter(|slot| *slot < MAX_SLOTS);
    Ok(slot.ok_or_else(|| bad("a slot number out of range"))? as usize)
}

/// A string of at most `max` bytes.
pub(super) fn text(at: &mut Reader<'_>, max: usize) -> Result<String, CompactError> {
    let bytes = at.text().ok_or_else(|| bad("a cut string"))?;
    if bytes.len() > max {
        return Err(bad("a string over its limit"));
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| bad("a string that is not UTF-8"))
}
