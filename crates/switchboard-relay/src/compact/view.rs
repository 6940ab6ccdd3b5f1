//! Compact transforms in datagrams (`RelayOptions::compact_datagrams`):
//! others' transforms as compact records on the view channel, each datagram
//! readable on its own. A record is whole, or the difference from the
//! sender's state in an earlier datagram this client **acknowledged**
//! ([`ViewAck`], on the moves channel): a lost datagram is never a baseline,
//! so it costs nothing after it, where the compact stream's differences
//! need every record before them.
//!
//! The relay keeps, per client and sender, the last [`VIEW_HISTORY`] states
//! it sent and the datagram each went in; a client keeps each sender's
//! states of the last [`VIEW_WINDOW`] datagrams. A record's baseline is at
//! most [`VIEW_WINDOW`] datagrams before it and acknowledged, so the client
//! holds it. The format byte by byte is in `docs/PROTOCOL.md`, section 10.

use std::collections::HashMap;
use std::sync::Arc;

use switchboard::socket::IdBuildHasher;

use super::decode::{bad, read_extra, read_position, read_rotation_and_state, text};
use super::encode::{put_extra, put_state};
use super::{flag, kind, CompactError, CompactFrame, Quantized};
use crate::transform::{Transform, MAX_ZONE};
use crate::wire::{put_signed, put_text, put_varint, Reader};

/// States the relay keeps per client and sender, to write differences
/// from.
pub const VIEW_HISTORY: usize = 8;
/// How many datagrams back a baseline may be, and how many an
/// acknowledgement covers besides its newest.
pub const VIEW_WINDOW: u64 = 32;
/// Bytes of records one datagram carries at most: with its head and
/// QUIC's, within the 1,200 bytes every QUIC path takes.
const RECORD_BYTES: usize = 1_000;
/// Senders a client holds states of at most (a relay cannot make it hold
/// more).
const MAX_SENDERS: usize = 1 << 16;

/// Client → relay (`RelayAction::ViewAck`, on the moves channel): the
/// view datagrams this client read whole, the newest and the
/// [`VIEW_WINDOW`] before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewAck {
    /// The newest datagram read (its number; 0: none yet).
    pub newest: u64,
    /// Bit `i`: datagram `newest - 1 - i` was read too.
    pub mask: u32,
}

impl ViewAck {
    /// Its content: `newest` as a varint, `mask` as 4 bytes little-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9);
        put_varint(&mut out, self.newest);
        out.extend_from_slice(&self.mask.to_le_bytes());
        out
    }

    /// Reads an acknowledgement; `None` if it is not one.
    pub fn read(content: &[u8]) -> Option<ViewAck> {
        let mut at = Reader(content);
        let newest = at.varint()?;
        let mask = u32::from_le_bytes(at.take(4)?.try_into().ok()?);
        at.is_empty().then_some(ViewAck { newest, mask })
    }

    /// Whether datagram `frame` was read.
    pub fn covers(&self, frame: u64) -> bool {
        frame != 0
            && (frame == self.newest
                || (frame < self.newest
                    && self.newest - frame <= VIEW_WINDOW
                    && self.mask & (1 << (self.newest - frame - 1)) != 0))
    }

    /// Datagram `frame` was read.
    fn add(&mut self, frame: u64) {
        if frame > self.newest {
            let shift = frame - self.newest;
            self.mask = match shift {
                _ if self.newest == 0 => 0,
                1..=31 => (self.mask << shift) | (1 << (shift - 1)),
                32 => 1 << 31,
                _ => 0,
            };
            self.newest = frame;
        } else if self.newest - frame <= VIEW_WINDOW && frame < self.newest {
            self.mask |= 1 << (self.newest - frame - 1);
        }
    }
}

/// One datagram being written: its number, the stamp its records' times
/// count from, and the records.
#[derive(Debug)]
struct Open {
    frame: u64,
    base: Option<u64>,
    last_stamp: u64,
    records: Vec<u8>,
}

/// The relay's side, one per client that asked: others' transforms as
/// records, each against a baseline the client acknowledged.
#[derive(Debug)]
pub struct ViewEncoder {
    precision: f32,
    acked: ViewAck,
    /// Per sender, the last states sent, with the datagram of each.
    sent: HashMap<u32, Vec<(u64, Quantized)>, IdBuildHasher>,
    open: Open,
    /// Datagrams full before the tick, waiting with the open one.
    closed: Vec<Open>,
    /// The last datagram handed out to be sent.
    sent_up_to: u64,
    /// When the histories were last pruned (a datagram number).
    pruned_at: u64,
}

impl ViewEncoder {
    /// A new connection's view, positions in units of `precision`.
    pub fn new(precision: f32) -> ViewEncoder {
        ViewEncoder {
            precision,
            acked: ViewAck::default(),
            sent: HashMap::default(),
            open: Open {
                frame: 1,
                base: None,
                last_stamp: 0,
                records: Vec::new(),
            },
            closed: Vec::new(),
            sent_up_to: 0,
            pruned_at: 0,
        }
    }

    /// Whether records wait for a write.
    pub fn is_empty(&self) -> bool {
        self.open.records.is_empty() && self.closed.is_empty()
    }

    /// Senders whose states this client's next records may be written
    /// against.
    pub fn senders(&self) -> usize {
        self.sent.len()
    }

    /// Bytes of records waiting.
    pub fn len(&self) -> usize {
        self.open.records.len() + self.closed.iter().map(|c| c.records.len()).sum::<usize>()
    }

    /// The client says what it read. One naming a datagram not sent yet is
    /// ignored; an older one than the newest known adds nothing.
    pub fn ack(&mut self, ack: ViewAck) {
        if ack.newest > self.sent_up_to || ack.newest < self.acked.newest {
            return;
        }
        if ack.newest == self.acked.newest {
            self.acked.mask |= ack.mask;
        } else {
            self.acked = ack;
        }
    }

    /// Player `player_id` left this client's view: its next record is
    /// whole.
    pub fn left(&mut self, player_id: u32) {
        self.sent.remove(&player_id);
    }

    /// Player `player_id`'s transform (stamped `stamp_ms`, quantized as
    /// `quantized`): whole, or what changed since the newest state of it
    /// the client acknowledged.
    pub fn transform(
        &mut self,
        player_id: u32,
        stamp_ms: u64,
        quantized: &Quantized,
        transform: &Arc<Transform>,
    ) {
        if self.open.records.len() >= RECORD_BYTES {
            let next = Open {
                frame: self.open.frame + 1,
                base: None,
                last_stamp: 0,
                records: Vec::new(),
            };
            self.closed.push(std::mem::replace(&mut self.open, next));
        }
        let open = &mut self.open;
        let frame = open.frame;
        let since = match open.base {
            Some(_) => open.last_stamp,
            None => *open.base.insert(stamp_ms),
        };
        open.last_stamp = stamp_ms;
        let history = self.sent.entry(player_id).or_default();
        let acked = &self.acked;
        let baseline = history
            .iter()
            .filter(|(f, _)| *f < frame && frame - f <= VIEW_WINDOW && acked.covers(*f))
            .max_by_key(|(f, _)| *f);
        let out = &mut open.records;
        let (head, age) = match baseline {
            None => (kind::TRANSFORM | flag::WHOLE, 0),
            Some((f, last)) => (kind::TRANSFORM | quantized.changes_since(last), frame - f),
        };
        out.push(head);
        put_varint(out, u64::from(player_id));
        put_varint(out, age);
        put_signed(out, stamp_ms.wrapping_sub(since) as i64);
        if head & flag::STILL == 0 {
            let from = baseline.map_or([0; 3], |(_, last)| last.position);
            for (now, then) in quantized.position.iter().zip(from) {
                put_signed(out, i64::from(*now) - i64::from(then));
            }
        }
        if head & flag::ROTATION != 0 {
            out.extend_from_slice(&quantized.rotation.to_le_bytes());
        }
        if head & flag::STATE != 0 {
            put_state(out, quantized);
        }
        if head & flag::ZONE != 0 {
            put_text(out, &transform.zone);
        }
        if head & flag::EXTRA != 0 {
            put_extra(out, &transform.extra);
        }
        // This datagram's state of the sender replaces an earlier one in
        // the same datagram, else the oldest past the history's length.
        if let Some(entry) = history.iter_mut().find(|(f, _)| *f == frame) {
            entry.1 = *quantized;
        } else if history.len() < VIEW_HISTORY {
            history.push((frame, *quantized));
        } else if let Some(oldest) = history.iter_mut().min_by_key(|(f, _)| *f) {
            *oldest = (frame, *quantized);
        }
    }

    /// The `CompactView` contents of what waits, one per datagram, each
    /// handed to `each`; the encoder is then empty. `tick` and `now_ms`
    /// (the time of a datagram with no record) head each one.
    pub fn finish(&mut self, tick: u64, now_ms: u64, mut each: impl FnMut(&[u8])) {
        if self.is_empty() {
            return;
        }
        let next = self.open.frame + 1;
        let open = std::mem::replace(
            &mut self.open,
            Open {
                frame: next,
                base: None,
                last_stamp: 0,
                records: Vec::new(),
            },
        );
        self.sent_up_to = open.frame;
        // A sender not sent within the window can be no baseline: its
        // history goes (one that went out of view without a `Left`, as when
        // this client changed zone, costs nothing after).
        if self.sent_up_to >= self.pruned_at + VIEW_WINDOW {
            let oldest = self.sent_up_to - VIEW_WINDOW;
            self.sent
                .retain(|_, history| history.iter().any(|(f, _)| *f >= oldest));
            self.pruned_at = self.sent_up_to;
        }
        let mut content = Vec::with_capacity(RECORD_BYTES + 32);
        for datagram in self.closed.drain(..).chain([open]) {
            content.clear();
            put_varint(&mut content, datagram.frame);
            put_varint(&mut content, tick);
            put_varint(&mut content, datagram.base.unwrap_or(now_ms));
            content.extend_from_slice(&self.precision.to_le_bytes());
            content.extend_from_slice(&datagram.records);
            each(&content);
        }
    }
}

/// A sender's state as the client holds it after one datagram.
#[derive(Debug, Clone)]
struct Held {
    units: [i64; 3],
    transform: Transform,
}

/// A transform a `CompactView` datagram carried, made whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewRecord<'a> {
    /// Who.
    pub player_id: u32,
    /// The relay's stamp, ms since it started.
    pub server_time_ms: u64,
    /// Where and how, positions and angles to the relay's precision.
    pub transform: &'a Transform,
    /// Whether the unknown fields came with this record.
    pub extra_changed: bool,
}

/// The client's side, one per connection: reads `CompactView` datagrams
/// (any order; one older than the newest read is dropped) and says which
/// it read ([`ack`](Self::ack)).
#[derive(Debug, Default)]
pub struct ViewDecoder {
    /// The newest datagram taken.
    newest: u64,
    /// Those read whole, for the acknowledgement.
    read: ViewAck,
    /// Per sender, its states in the datagrams of the window.
    held: HashMap<u32, Vec<(u64, Held)>, IdBuildHasher>,
    /// Whether something was read since the last acknowledgement.
    unacked: bool,
    /// Records whose baseline this client does not hold (a relay that
    /// broke the rule): skipped, and their datagram not acknowledged.
    unresolved: u64,
}

impl ViewDecoder {
    /// A new connection's view.
    pub fn new() -> ViewDecoder {
        ViewDecoder::default()
    }

    /// Records skipped because their baseline was not held.
    pub fn unresolved(&self) -> u64 {
        self.unresolved
    }

    /// Senders held.
    pub fn senders(&self) -> usize {
        self.held.len()
    }

    /// What to acknowledge (send it as `ViewAck` on the moves channel),
    /// if anything was read since the last time.
    pub fn ack(&mut self) -> Option<ViewAck> {
        std::mem::take(&mut self.unacked).then_some(self.read)
    }

    /// Reads one `CompactView` datagram, handing each transform to `each`.
    /// `Ok(None)`: older than one already read, dropped. An error: the
    /// bytes are not a relay's (the records before it were handed over).
    pub fn read(
        &mut self,
        content: &[u8],
        mut each: impl FnMut(ViewRecord<'_>),
    ) -> Result<Option<CompactFrame>, CompactError> {
        let mut at = Reader(content);
        let frame = at.varint().ok_or_else(|| bad("no datagram number"))?;
        let tick = at.varint().ok_or_else(|| bad("no tick"))?;
        let server_time_ms = at.varint().ok_or_else(|| bad("no time"))?;
        let precision = at.take(4).ok_or_else(|| bad("no precision"))?;
        let precision = f32::from_le_bytes(precision.try_into().expect("4 bytes"));
        if !(precision.is_finite() && precision > 0.0) {
            return Err(bad("a precision that is not a positive number"));
        }
        if frame <= self.newest {
            return Ok(None);
        }
        self.newest = frame;
        let mut whole = true;
        let mut stamp = server_time_ms;
        while !at.is_empty() {
            let head = at.byte().ok_or_else(|| bad("no record"))?;
            if head & 3 != kind::TRANSFORM {
                return Err(bad("a view record that is not a transform"));
            }
            if head & flag::FULL != 0 && head & flag::STILL != 0 {
                return Err(bad("a transform both whole and still"));
            }
            let player_id = at.varint_u32().ok_or_else(|| bad("a record's player"))?;
            let age = at.varint().ok_or_else(|| bad("a record's baseline"))?;
            if age > VIEW_WINDOW || age >= frame {
                return Err(bad("a baseline out of the window"));
            }
            let time = at.signed().ok_or_else(|| bad("a transform's time"))?;
            stamp = stamp.wrapping_add_signed(time);
            let states = self.held.get(&player_id);
            let baseline = match age {
                0 if head & flag::WHOLE != flag::WHOLE => {
                    return Err(bad("a record with no baseline is not whole"))
                }
                0 => Some(Held {
                    units: [0; 3],
                    transform: Transform::default(),
                }),
                _ => states
                    .and_then(|s| s.iter().find(|(f, _)| *f == frame - age))
                    .map(|(_, held)| held.clone()),
            };
            let resolved = baseline.is_some();
            let mut state = baseline.unwrap_or(Held {
                units: [0; 3],
                transform: Transform::default(),
            });
            read_position(
                &mut at,
                head,
                precision,
                &mut state.units,
                &mut state.transform,
            )?;
            read_rotation_and_state(&mut at, head, &mut state.transform)?;
            if head & flag::ZONE != 0 {
                state.transform.zone = text(&mut at, MAX_ZONE)?;
            }
            let extra_changed = head & flag::EXTRA != 0;
            if extra_changed {
                state.transform.extra = read_extra(&mut at)?;
            }
            if !resolved {
                self.unresolved += 1;
                whole = false;
                continue;
            }
            each(ViewRecord {
                player_id,
                server_time_ms: stamp,
                transform: &state.transform,
                extra_changed,
            });
            self.keep(player_id, frame, state);
        }
        if whole {
            self.read.add(frame);
            self.unacked = true;
        }
        // Senders not heard of within the window: nothing refers to them.
        if frame % VIEW_WINDOW == 0 {
            let oldest = frame.saturating_sub(VIEW_WINDOW);
            self.held
                .retain(|_, states| states.iter().any(|(f, _)| *f >= oldest));
        }
        Ok(Some(CompactFrame {
            tick,
            server_time_ms,
        }))
    }

    /// `player_id`'s state after datagram `frame`, kept as a baseline for
    /// the window.
    fn keep(&mut self, player_id: u32, frame: u64, state: Held) {
        if !self.held.contains_key(&player_id) && self.held.len() >= MAX_SENDERS {
            return;
        }
        let states = self.held.entry(player_id).or_default();
        let oldest = frame.saturating_sub(VIEW_WINDOW);
        states.retain(|(f, _)| *f >= oldest && *f != frame);
        states.push((frame, state));
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
