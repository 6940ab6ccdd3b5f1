//! Compact transforms (`RelayOptions::compact`): what a relay sends one
//! client as a stream of small records inside one `Compact` frame per
//! write, instead of a `Relayed` message of fifty bytes per transform.
//!
//! - positions quantized to the relay's precision (1 cm by default) and sent
//!   as the difference from the last position this client got from that
//!   sender: a walking player's step is three bytes;
//! - rotations in 32 bits (Euler angles of 10, 12 and 10 bits), movement
//!   state, zone and unknown fields sent only when they changed;
//! - senders and zones named by small numbers this client was given once
//!   (`Enter`, `Zone` records), not by ids and names in every message;
//! - the relay's stamp as the difference from the previous one in the frame.
//!
//! On the stream the transport is reliable and ordered, so "the last one
//! this client got" is the baseline both sides hold; a sender that comes into view is sent
//! whole, and a new connection starts from nothing. The format byte by byte
//! is in `docs/PROTOCOL.md`, section 10; [`CompactEncoder`] writes it (one
//! per client, in the relay), [`CompactDecoder`] reads it (one per
//! connection, in a client).
//!
//! In datagrams (`RelayOptions::compact_datagrams`), [`ViewEncoder`] and
//! [`ViewDecoder`] write and read the same records against baselines the
//! client acknowledged ([`ViewAck`]): see `view`.

mod decode;
mod encode;
#[cfg(test)]
mod tests;
mod view;

pub use decode::{CompactDecoder, CompactError, CompactFrame, CompactRecord};
pub use encode::{CompactEncoder, Quantized, Versions};
pub use view::{ViewAck, ViewDecoder, ViewEncoder, ViewRecord, VIEW_HISTORY, VIEW_WINDOW};

use crate::transform::MovementState;

/// The default precision of positions: 1 cm (in the game's units, metres).
pub const DEFAULT_PRECISION: f32 = 0.01;

/// The largest slot (sender) number a decoder accepts: a client cannot be
/// made to hold more senders than this.
pub const MAX_SLOTS: u32 = 1 << 16;
/// The largest zone number a decoder accepts.
pub const MAX_ZONES: u32 = 1 << 16;
/// A quantized position's coordinates are clamped to ±this (2^31 − 1
/// units: 21,474 km at 1 cm).
pub const MAX_UNITS: i64 = i32::MAX as i64;

/// A record's kind: the head byte's two low bits.
pub(crate) mod kind {
    pub(crate) const TRANSFORM: u8 = 0;
    pub(crate) const ENTER: u8 = 1;
    pub(crate) const LEAVE: u8 = 2;
    pub(crate) const OTHER: u8 = 3;
    /// Kind 3's sub-kinds, the head's six high bits.
    pub(crate) const SETUP: u8 = 0;
    pub(crate) const ZONE: u8 = 1;
    pub(crate) const MESSAGE: u8 = 2;
}

/// A transform record's flags: the head byte's six high bits.
pub(crate) mod flag {
    /// The position is absolute, not a difference.
    pub(crate) const FULL: u8 = 0x04;
    pub(crate) const ROTATION: u8 = 0x08;
    pub(crate) const STATE: u8 = 0x10;
    pub(crate) const ZONE: u8 = 0x20;
    pub(crate) const EXTRA: u8 = 0x40;
    /// No position: it did not change.
    pub(crate) const STILL: u8 = 0x80;
    /// What the first transform of a sender carries.
    pub(crate) const WHOLE: u8 = FULL | ROTATION | STATE | ZONE | EXTRA;
}

/// The movement state byte's "no state at all" bit.
pub(crate) const NO_STATE: u8 = 0x80;

/// `v` in units of `precision`, clamped to ±[`MAX_UNITS`].
pub(crate) fn quantize(v: f32, precision: f32) -> i64 {
    let units = (f64::from(v) / f64::from(precision)).round();
    (units as i64).clamp(-MAX_UNITS, MAX_UNITS)
}

/// A quantized coordinate back in the game's units.
pub(crate) fn dequantize(units: i64, precision: f32) -> f32 {
    (units as f64 * f64::from(precision)) as f32
}

/// Bits of each Euler angle: x, y (the heading: finest), z.
const ANGLE_BITS: [u32; 3] = [10, 12, 10];

/// Three Euler angles (degrees) in 32 bits: x in bits 0–9, y in 10–21, z
/// in 22–31, each the angle in [0, 360) as a fraction of a turn.
pub(crate) fn pack_rotation(rotation: [f32; 3]) -> u32 {
    let mut packed = 0u32;
    let mut shift = 0;
    for (angle, bits) in rotation.into_iter().zip(ANGLE_BITS) {
        let steps = 1u32 << bits;
        let turn = f64::from(angle).rem_euclid(360.0) / 360.0;
        let q = ((turn * f64::from(steps)).round() as u32) % steps;
        packed |= q << shift;
        shift += bits;
    }
    packed
}

/// The angles [`pack_rotation`] packed, in degrees in [0, 360).
pub(crate) fn unpack_rotation(packed: u32) -> [f32; 3] {
    let mut rotation = [0f32; 3];
    let mut shift = 0;
    for (angle, bits) in rotation.iter_mut().zip(ANGLE_BITS) {
        let steps = 1u32 << bits;
        let q = (packed >> shift) & (steps - 1);
        *angle = (f64::from(q) * 360.0 / f64::from(steps)) as f32;
        shift += bits;
    }
    rotation
}

/// A movement state as its byte (moving 1, sprinting 2, sneaking 4,
/// jumping 8, weapon drawn 16; [`NO_STATE`] for none) and its speed in
/// hundredths.
pub(crate) fn pack_state(state: Option<&MovementState>) -> (u8, i64) {
    let Some(s) = state else {
        return (NO_STATE, 0);
    };
    let bits = [s.moving, s.sprinting, s.sneaking, s.jumping, s.weapon_drawn]
        .iter()
        .enumerate()
        .fold(0u8, |acc, (i, on)| acc | (u8::from(*on) << i));
    let speed = (f64::from(s.speed) * 100.0).round() as i64;
    (bits, speed.clamp(-MAX_UNITS, MAX_UNITS))
}

/// The movement state [`pack_state`] packed.
pub(crate) fn unpack_state(bits: u8, speed: i64) -> Option<MovementState> {
    (bits & NO_STATE == 0).then(|| MovementState {
        moving: bits & 1 != 0,
        sprinting: bits & 2 != 0,
        sneaking: bits & 4 != 0,
        jumping: bits & 8 != 0,
        weapon_drawn: bits & 16 != 0,
        speed: (speed as f64 / 100.0) as f32,
    })
}
