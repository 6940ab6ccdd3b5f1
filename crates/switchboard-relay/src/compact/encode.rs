//! The relay's side: one [`CompactEncoder`] per client that asked for
//! compact transforms, fed each delivery as it is decided and emptied into
//! one `Compact` frame when the pacer writes to that client.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use switchboard::socket::IdBuildHasher;

use super::{flag, kind, pack_rotation, pack_state, quantize, NO_STATE};
use crate::transform::Transform;
use crate::wire::{put_signed, put_text, put_varint};

/// A transform's quantized fields, and the versions of its zone and
/// unknown fields: computed once per relayed transform, shared by every
/// compact recipient, and all a recipient keeps of it (32 bytes: a
/// thousand players' baselines of twenty others stay in cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantized {
    pub(super) position: [i32; 3],
    pub(super) rotation: u32,
    pub(super) speed: i32,
    pub(super) state: u8,
    pub(super) zone: u32,
    pub(super) extra: u32,
}

impl Quantized {
    /// A transform record's flags for what changed since `then`: still,
    /// rotation, movement state, zone, unknown fields.
    pub(super) fn changes_since(&self, then: &Quantized) -> u8 {
        [
            (self.position == then.position, flag::STILL),
            (self.rotation != then.rotation, flag::ROTATION),
            (
                (self.state, self.speed) != (then.state, then.speed),
                flag::STATE,
            ),
            (self.zone != then.zone, flag::ZONE),
            (self.extra != then.extra, flag::EXTRA),
        ]
        .into_iter()
        .filter(|(changed, _)| *changed)
        .fold(0, |head, (_, bit)| head | bit)
    }

    /// `transform` of `player_id`: its position in units of `precision`,
    /// its rotation in 32 bits, its movement state in a byte and a speed,
    /// and which of the sender's zones and sets of unknown fields it holds
    /// (`versions` numbers them).
    pub fn of(
        player_id: u32,
        transform: &Arc<Transform>,
        precision: f32,
        versions: &mut Versions,
    ) -> Quantized {
        let (state, speed) = pack_state(transform.state.as_ref());
        let (zone, extra) = versions.of(player_id, transform);
        Quantized {
            // Within ±MAX_UNITS, which is i32's range.
            position: transform.position.map(|v| quantize(v, precision) as i32),
            rotation: pack_rotation(transform.rotation),
            speed: speed as i32,
            state,
            zone,
            extra,
        }
    }
}

/// Each sender's last transform, and the version of its zone and of its
/// unknown fields: a new version when they change. Recipients compare
/// versions (two numbers) instead of strings and maps, once per delivery.
#[derive(Debug, Default)]
pub struct Versions(HashMap<u32, (Arc<Transform>, u32, u32), IdBuildHasher>);

impl Versions {
    /// The versions of `transform`'s zone and unknown fields, `player_id`'s
    /// latest.
    fn of(&mut self, player_id: u32, transform: &Arc<Transform>) -> (u32, u32) {
        let entry = self
            .0
            .entry(player_id)
            .or_insert_with(|| (Arc::clone(transform), 0, 0));
        let (last, zone, extra) = entry;
        if !Arc::ptr_eq(last, transform) {
            *zone += u32::from(last.zone != transform.zone);
            *extra += u32::from(last.extra != transform.extra);
            *last = Arc::clone(transform);
        }
        (*zone, *extra)
    }

    /// `player_id` left the relay.
    pub fn forget(&mut self, player_id: u32) {
        self.0.remove(&player_id);
    }
}

/// What this client last got from one sender: the baseline of the next.
#[derive(Debug)]
struct Sent {
    slot: u32,
    quantized: Quantized,
}

/// Zones a client has been given numbers for. Past [`ZONES_PER_CLIENT`]
/// the numbers start again from 0 (a `Zone` record redefines a number), so
/// a client that wanders through many zones costs a bounded table.
#[derive(Debug, Default)]
struct ZoneTable {
    ids: HashMap<String, u32>,
}

/// Zone numbers one client is given before they are reused.
const ZONES_PER_CLIENT: usize = 4096;

impl ZoneTable {
    /// `zone`'s number, defined first (a `Zone` record in `out`) if new.
    fn id(&mut self, zone: &str, out: &mut Vec<u8>) -> u32 {
        if let Some(id) = self.ids.get(zone) {
            return *id;
        }
        if self.ids.len() >= ZONES_PER_CLIENT {
            self.ids.clear();
        }
        let id = self.ids.len() as u32;
        self.ids.insert(zone.to_string(), id);
        out.push(kind::OTHER | kind::ZONE << 2);
        put_varint(out, u64::from(id));
        put_text(out, zone);
        id
    }
}

/// One client's compact stream: its senders' slots and baselines, its
/// zone numbers, and the records waiting for the next write.
#[derive(Debug)]
pub struct CompactEncoder {
    precision: f32,
    senders: HashMap<u32, Sent, IdBuildHasher>,
    free: Vec<u32>,
    next_slot: u32,
    zones: ZoneTable,
    records: Vec<u8>,
    /// The stamp the waiting records' times count from (the frame's
    /// `server_time_ms`), and the last one written.
    base: Option<u64>,
    last_stamp: u64,
    set_up: bool,
}

impl CompactEncoder {
    /// A new client's stream, positions in units of `precision`.
    pub fn new(precision: f32) -> CompactEncoder {
        CompactEncoder {
            precision,
            senders: HashMap::default(),
            free: Vec::new(),
            next_slot: 0,
            zones: ZoneTable::default(),
            records: Vec::new(),
            base: None,
            last_stamp: 0,
            set_up: false,
        }
    }

    /// Whether records wait for a write.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The precision positions are quantized to.
    pub fn precision(&self) -> f32 {
        self.precision
    }

    /// Bytes of records waiting.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Senders this client holds a baseline of.
    pub fn senders(&self) -> usize {
        self.senders.len()
    }

    /// The stream's first record says the precision.
    fn set_up(&mut self) {
        if !self.set_up {
            self.set_up = true;
            self.records.push(kind::OTHER | kind::SETUP << 2);
            self.records
                .extend_from_slice(&self.precision.to_le_bytes());
        }
    }

    /// Player `player_id`'s transform (stamped `stamp_ms` by the relay, its
    /// fields quantized as `quantized`): whole if this client has no
    /// baseline of it, else what changed.
    pub fn transform(
        &mut self,
        player_id: u32,
        stamp_ms: u64,
        quantized: &Quantized,
        transform: &Arc<Transform>,
    ) {
        self.set_up();
        let out = &mut self.records;
        // The frame's first transform sets its time; each counts from the
        // one before.
        let since = match self.base {
            Some(_) => self.last_stamp,
            None => *self.base.insert(stamp_ms),
        };
        let time = stamp_ms.wrapping_sub(since) as i64;
        self.last_stamp = stamp_ms;
        let Some(sent) = self.senders.get_mut(&player_id) else {
            let slot = self.free.pop().unwrap_or_else(|| {
                self.next_slot += 1;
                self.next_slot - 1
            });
            let zone = self.zones.id(&transform.zone, out);
            out.push(kind::ENTER);
            put_varint(out, u64::from(slot));
            put_varint(out, u64::from(player_id));
            out.push(kind::TRANSFORM | flag::WHOLE);
            put_varint(out, u64::from(slot));
            put_signed(out, time);
            for units in quantized.position {
                put_signed(out, units.into());
            }
            put_fields(out, quantized, zone, &transform.extra);
            let quantized = *quantized;
            self.senders.insert(player_id, Sent { slot, quantized });
            return;
        };
        let last = &sent.quantized;
        let moved =
            [0, 1, 2].map(|i| i64::from(quantized.position[i]) - i64::from(last.position[i]));
        let head = kind::TRANSFORM | quantized.changes_since(last);
        let zone = (head & flag::ZONE != 0).then(|| self.zones.id(&transform.zone, out));
        let extra_changed = head & flag::EXTRA != 0;
        out.push(head);
        put_varint(out, u64::from(sent.slot));
        put_signed(out, time);
        if head & flag::STILL == 0 {
            for units in moved {
                put_signed(out, units);
            }
        }
        if head & flag::ROTATION != 0 {
            out.extend_from_slice(&quantized.rotation.to_le_bytes());
        }
        if head & flag::STATE != 0 {
            put_state(out, quantized);
        }
        if let Some(zone) = zone {
            put_varint(out, u64::from(zone));
        }
        if extra_changed {
            put_extra(out, &transform.extra);
        }
        sent.quantized = *quantized;
    }

    /// Player `player_id` left this client's view: its slot is free again.
    pub fn left(&mut self, player_id: u32) {
        self.set_up();
        match self.senders.remove(&player_id) {
            Some(sent) => {
                self.records.push(kind::LEAVE);
                put_varint(&mut self.records, u64::from(sent.slot));
                self.free.push(sent.slot);
            }
            None => {
                let mut content = Vec::with_capacity(5);
                put_varint(&mut content, u64::from(player_id));
                let left = switchboard::message::Action::id(crate::server::RelayAction::Left);
                self.message(left, &content);
            }
        }
    }

    /// This client left everyone it holds (it changed zone): a `Leave`
    /// for each, in slot order.
    pub fn left_everyone(&mut self) {
        let mut held: Vec<u32> = self.senders.keys().copied().collect();
        held.sort_unstable_by_key(|id| self.senders[id].slot);
        for player_id in held {
            self.left(player_id);
        }
    }

    /// Any other relay message (`Welcome`, ...), in its place in the stream.
    pub fn message(&mut self, action: u16, content: &[u8]) {
        self.set_up();
        let out = &mut self.records;
        out.push(kind::OTHER | kind::MESSAGE << 2);
        put_varint(out, u64::from(action));
        put_varint(out, content.len() as u64);
        out.extend_from_slice(content);
    }

    /// The `Compact` content of what waits (`tick`, the frame's time, the
    /// records), appended to `out`; the encoder is then empty. `now_ms`
    /// is the frame's time when no transform set it.
    pub fn finish(&mut self, tick: u64, now_ms: u64, out: &mut Vec<u8>) {
        put_varint(out, tick);
        put_varint(out, self.base.take().unwrap_or(now_ms));
        out.extend_from_slice(&self.records);
        self.records.clear();
    }
}

/// A whole transform's rotation, state, zone and unknown fields.
fn put_fields(out: &mut Vec<u8>, q: &Quantized, zone: u32, extra: &BTreeMap<String, String>) {
    out.extend_from_slice(&q.rotation.to_le_bytes());
    put_state(out, q);
    put_varint(out, u64::from(zone));
    put_extra(out, extra);
}

pub(super) fn put_state(out: &mut Vec<u8>, q: &Quantized) {
    out.push(q.state);
    if q.state & NO_STATE == 0 {
        put_signed(out, q.speed.into());
    }
}

pub(super) fn put_extra(out: &mut Vec<u8>, extra: &BTreeMap<String, String>) {
    put_varint(out, extra.len() as u64);
    for (key, value) in extra {
        put_text(out, key);
        put_text(out, value);
    }
}
