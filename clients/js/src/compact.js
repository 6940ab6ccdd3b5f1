// Compact transforms (docs/PROTOCOL.md, section 10, "Compact transforms"):
// the relay's `Compact` frames read back into whole transforms. One decoder
// per connection: each frame is written against what this connection got
// before (the last transform of each sender), so frames are read in order,
// and a new connection starts a new decoder.
//
//   const decoder = new CompactDecoder();
//   const { tick, records } = decoder.read(content);
//   for (const r of records) if (r.type === 'transform') draw(r.player_id, r.transform);

import { DecodeError, Reader } from './bincode.js';

const MAX_SLOTS = 1 << 16;
const MAX_ZONES = 1 << 16;
const MAX_UNITS = 2 ** 31 - 1;
const MAX_EXTRA = 32;
const MAX_EXTRA_LEN = 1024;
const MAX_ZONE = 64;

const FULL = 0x04;
const ROTATION = 0x08;
const STATE = 0x10;
const ZONE = 0x20;
const EXTRA = 0x40;
const STILL = 0x80;
const WHOLE = FULL | ROTATION | STATE | ZONE | EXTRA;
const NO_STATE = 0x80;
const ANGLE_BITS = [10, 12, 10];

const text = new TextDecoder('utf-8', { fatal: true });

function signed(r) {
  const z = r.varint(64);
  if (typeof z === 'bigint') return Number(z & 1n ? -(z >> 1n) - 1n : z >> 1n);
  return z % 2 ? -(z + 1) / 2 : z / 2;
}

function string(r, max) {
  const len = r.varint(64);
  if (len > max) throw new DecodeError(`a string over its limit (${len} > ${max})`);
  try {
    return text.decode(r.raw(len));
  } catch {
    throw new DecodeError('a string that is not UTF-8');
  }
}

function rotation(packed) {
  const out = [];
  let shift = 0;
  for (const bits of ANGLE_BITS) {
    const steps = 2 ** bits;
    const q = Math.floor(packed / 2 ** shift) % steps;
    out.push(Math.fround((q * 360) / steps));
    shift += bits;
  }
  return out;
}

function movement(bits, speed) {
  if (bits & NO_STATE) return null;
  return {
    moving: (bits & 1) !== 0,
    sprinting: (bits & 2) !== 0,
    sneaking: (bits & 4) !== 0,
    jumping: (bits & 8) !== 0,
    weapon_drawn: (bits & 16) !== 0,
    speed: Math.fround(speed / 100),
  };
}

/** One connection's compact stream, read frame by frame. */
export class CompactDecoder {
  constructor() {
    /** Metres (game units) per unit of a quantized position, once the relay said. */
    this.precision = null;
    this.slots = new Map();
    this.zones = new Map();
  }

  /**
   * Reads one `Compact` frame's content: `{ tick, server_time_ms, records }`,
   * each record `{ type: 'transform', player_id, server_time_ms, transform,
   * extra_changed }`, `{ type: 'left', player_id }` or `{ type: 'message',
   * action, content }`. Throws `DecodeError` on bytes it cannot follow: the
   * connection should then be closed.
   */
  read(content) {
    const r = new Reader(content);
    const tick = r.varint(64);
    const server_time_ms = r.varint(64);
    let stamp = server_time_ms;
    const records = [];
    while (!r.done()) {
      const head = r.u8();
      switch (head & 3) {
        case 0: {
          const record = this.transform(r, head, stamp);
          stamp = record.server_time_ms;
          records.push(record);
          break;
        }
        case 1: {
          const slot = slotOf(r);
          const player_id = r.varint(32);
          this.slots.set(slot, { player_id, units: [0, 0, 0], transform: null });
          break;
        }
        case 2: {
          const slot = slotOf(r);
          const gone = this.slots.get(slot);
          if (!gone) throw new DecodeError('a leaving from an empty slot');
          this.slots.delete(slot);
          records.push({ type: 'left', player_id: gone.player_id });
          break;
        }
        default:
          switch (head >> 2) {
            case 0: {
              const precision = r.f32();
              if (!(Number.isFinite(precision) && precision > 0)) {
                throw new DecodeError('a precision that is not a positive number');
              }
              this.precision = precision;
              break;
            }
            case 1: {
              const id = r.varint(32);
              if (id >= MAX_ZONES) throw new DecodeError('a zone number out of range');
              this.zones.set(id, string(r, MAX_ZONE));
              break;
            }
            case 2: {
              const action = r.varint(16);
              const content = r.raw(r.varint(64));
              records.push({ type: 'message', action, content });
              break;
            }
            default:
              throw new DecodeError(`unknown record kind 3.${head >> 2}`);
          }
      }
    }
    return { tick, server_time_ms, records };
  }

  transform(r, head, previous) {
    if (this.precision === null) throw new DecodeError('a transform before the setup record');
    if (head & FULL && head & STILL) throw new DecodeError('a transform both whole and still');
    const slot = slotOf(r);
    const server_time_ms = previous + signed(r);
    const held = this.slots.get(slot);
    if (!held) throw new DecodeError('a transform for an empty slot');
    if (!held.transform && (head & WHOLE) !== WHOLE) {
      throw new DecodeError("a sender's first transform is not whole");
    }
    const base = { units: held.units, transform: held.transform ?? EMPTY };
    const zoneOf = () => {
      const zone = this.zones.get(r.varint(32));
      if (zone === undefined) throw new DecodeError('an undefined zone');
      return zone;
    };
    const { units, transform, extra_changed } = fields(r, head, base, this.precision, zoneOf);
    held.units = units;
    held.transform = transform;
    return { type: 'transform', player_id: held.player_id, server_time_ms, transform, extra_changed };
  }
}

const EMPTY = Object.freeze({ position: [0, 0, 0], rotation: [0, 0, 0], zone: '', state: null, extra: {} });

/**
 * A transform record's fields after its ids and time, as its `head` says,
 * from `base` (`{ units, transform }`: the sender's quantized position and
 * transform it differs from); `zoneOf()` reads a zone. Returns the sender's
 * new `{ units, transform, extra_changed }`.
 */
function fields(r, head, base, precision, zoneOf) {
  const units = [...base.units];
  const next = { ...base.transform, position: [...base.transform.position] };
  if (!(head & STILL)) {
    for (let axis = 0; axis < 3; axis++) {
      const value = signed(r);
      const n = head & FULL ? value : units[axis] + value;
      if (Math.abs(n) > MAX_UNITS) throw new DecodeError('a position out of range');
      const shown = Math.fround(n * precision);
      if (!Number.isFinite(shown)) throw new DecodeError('a position out of range');
      units[axis] = n;
      next.position[axis] = shown;
    }
  }
  if (head & ROTATION) {
    const bytes = r.raw(4);
    next.rotation = rotation(new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true));
  }
  if (head & STATE) {
    const bits = r.u8();
    next.state = movement(bits, bits & NO_STATE ? 0 : signed(r));
  }
  if (head & ZONE) next.zone = zoneOf();
  const extra_changed = (head & EXTRA) !== 0;
  if (extra_changed) {
    const count = r.varint(64);
    if (count > MAX_EXTRA) throw new DecodeError('too many unknown fields');
    next.extra = {};
    for (let i = 0; i < count; i++) {
      const key = string(r, MAX_EXTRA_LEN);
      next.extra[key] = string(r, MAX_EXTRA_LEN);
    }
  }
  return { units, transform: next, extra_changed };
}

/** How many datagrams back a view record's baseline may be (section 10). */
export const VIEW_WINDOW = 32;

/**
 * A `ViewAck`'s content: the newest `CompactView` datagram read (varint) and a
 * mask of the 32 before it (u32 little-endian; bit i: datagram newest - 1 - i).
 */
export const ViewAck = {
  write(w, { newest, mask }) {
    w.varint(newest);
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setUint32(0, mask >>> 0, true);
    w.raw(bytes);
  },
  read(r) {
    const newest = Number(r.varint(64));
    const bytes = r.raw(4);
    return { newest, mask: new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) };
  },
};

/**
 * Compact view datagrams (`RelayOptions.compact_datagrams`, section 10): each
 * `CompactView` read alone, its records whole or against a sender's state in
 * an earlier datagram this client acknowledged (`ack()`, sent as `ViewAck`
 * on the moves channel just before a move). One per connection.
 */
export class ViewDecoder {
  constructor() {
    this.newest = 0;
    this.acked = { newest: 0, mask: 0 };
    this.unacked = false;
    /** Records whose baseline this client does not hold (a relay's fault): skipped. */
    this.unresolved = 0;
    /** Per sender, its states in the datagrams of the window: frame -> { units, transform }. */
    this.held = new Map();
  }

  /**
   * Reads one `CompactView`: `{ frame, tick, server_time_ms, records }`, each
   * record `{ player_id, server_time_ms, transform, extra_changed }`; null if
   * it is older than one already read. Throws `DecodeError` on bytes that are
   * not a relay's.
   */
  read(content) {
    const r = new Reader(content);
    const frame = Number(r.varint(64));
    const tick = Number(r.varint(64));
    const server_time_ms = Number(r.varint(64));
    const precision = r.f32();
    if (!(Number.isFinite(precision) && precision > 0)) {
      throw new DecodeError('a precision that is not a positive number');
    }
    if (frame <= this.newest) return null;
    this.newest = frame;
    let whole = true;
    let stamp = server_time_ms;
    const records = [];
    while (!r.done()) {
      const head = r.u8();
      if ((head & 3) !== 0) throw new DecodeError('a view record that is not a transform');
      if (head & FULL && head & STILL) throw new DecodeError('a transform both whole and still');
      const player_id = r.varint(32);
      const age = Number(r.varint(64));
      if (age > VIEW_WINDOW || age >= frame) throw new DecodeError('a baseline out of the window');
      stamp += signed(r);
      if (age === 0 && (head & WHOLE) !== WHOLE) throw new DecodeError('a record with no baseline is not whole');
      const states = this.held.get(player_id);
      const base = age === 0 ? { units: [0, 0, 0], transform: EMPTY } : states?.get(frame - age);
      const { units, transform, extra_changed } = fields(r, head, base ?? { units: [0, 0, 0], transform: EMPTY }, precision, () => string(r, MAX_ZONE));
      if (!base) {
        this.unresolved++;
        whole = false;
        continue;
      }
      records.push({ player_id, server_time_ms: stamp, transform, extra_changed });
      this.keep(player_id, frame, { units, transform });
    }
    if (whole) {
      this.add(frame);
      this.unacked = true;
    }
    if (frame % VIEW_WINDOW === 0) {
      for (const [id, states] of this.held) {
        if (![...states.keys()].some((f) => f >= frame - VIEW_WINDOW)) this.held.delete(id);
      }
    }
    return { frame, tick, server_time_ms, records };
  }

  /** What to acknowledge (`{ newest, mask }`, for `ViewAck`), if anything was read since the last time. */
  ack() {
    if (!this.unacked) return null;
    this.unacked = false;
    return { ...this.acked };
  }

  keep(player_id, frame, state) {
    if (!this.held.has(player_id) && this.held.size >= MAX_SLOTS) return;
    const states = this.held.get(player_id) ?? new Map();
    for (const f of states.keys()) if (f < frame - VIEW_WINDOW) states.delete(f);
    states.set(frame, state);
    this.held.set(player_id, states);
  }

  add(frame) {
    const { newest, mask } = this.acked;
    const shift = frame - newest;
    let next = 0;
    if (newest !== 0 && shift <= 31) next = ((mask << shift) | (1 << (shift - 1))) >>> 0;
    else if (newest !== 0 && shift === 32) next = 0x80000000;
    this.acked = { newest: frame, mask: next };
  }
}

function slotOf(r) {
  const slot = r.varint(32);
  if (slot >= MAX_SLOTS) throw new DecodeError('a slot number out of range');
  return slot;
}
