// bincode 2 "standard" encoding (docs/PROTOCOL.md, section 3) for the types
// games use, as small composable schemas: a schema is `{ write(w, v), read(r) }`.
//
//   const Point = struct({ x: f32, y: f32 });
//   const bytes = encode(Point, { x: 1, y: 2 });
//   const point = decode(Point, bytes);
//
// Unsigned integers are varints, signed ones zig-zag varints; u64/i64 read
// as a number when it is safe (≤ 2^53 - 1) and as a BigInt otherwise, and
// accept either when written.

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** Bytes that are not one value of the schema they are read with. */
export class DecodeError extends Error {
  constructor(message) {
    super(message);
    this.name = 'DecodeError';
  }
}

/** A growable buffer values are written into. */
export class Writer {
  constructor(capacity = 64) {
    this.buf = new Uint8Array(capacity);
    this.view = new DataView(this.buf.buffer);
    this.len = 0;
  }

  /** Makes room for `n` more bytes. */
  reserve(n) {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
    this.view = new DataView(grown.buffer);
  }

  u8(v) {
    this.reserve(1);
    this.buf[this.len++] = v & 0xff;
  }

  raw(bytes) {
    this.reserve(bytes.length);
    this.buf.set(bytes, this.len);
    this.len += bytes.length;
  }

  /** An unsigned varint of up to 64 bits (number or BigInt). */
  varint(v) {
    if (typeof v === 'bigint') {
      if (v < 0n || v > 0xffffffffffffffffn) throw new RangeError(`varint out of range: ${v}`);
      if (v <= 0xffffffffn) return this.varint(Number(v));
      this.reserve(9);
      this.buf[this.len++] = 253;
      this.view.setBigUint64(this.len, v, true);
      this.len += 8;
      return;
    }
    if (!Number.isInteger(v) || v < 0) throw new RangeError(`not an unsigned integer: ${v}`);
    this.reserve(9);
    if (v < 251) {
      this.buf[this.len++] = v;
    } else if (v <= 0xffff) {
      this.buf[this.len++] = 251;
      this.view.setUint16(this.len, v, true);
      this.len += 2;
    } else if (v <= 0xffffffff) {
      this.buf[this.len++] = 252;
      this.view.setUint32(this.len, v, true);
      this.len += 4;
    } else {
      if (!Number.isSafeInteger(v)) throw new RangeError(`unsafe integer, use a BigInt: ${v}`);
      this.buf[this.len++] = 253;
      this.view.setBigUint64(this.len, BigInt(v), true);
      this.len += 8;
    }
  }

  f32(v) {
    this.reserve(4);
    this.view.setFloat32(this.len, v, true);
    this.len += 4;
  }

  f64(v) {
    this.reserve(8);
    this.view.setFloat64(this.len, v, true);
    this.len += 8;
  }

  /** The bytes written so far (a view, valid until the next write). */
  bytes() {
    return this.buf.subarray(0, this.len);
  }
}

/** Reads values from bytes, refusing anything out of bounds. */
export class Reader {
  constructor(bytes) {
    this.buf = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
  }

  need(n) {
    if (this.pos + n > this.buf.length) {
      throw new DecodeError(`unexpected end: ${n} more bytes needed at ${this.pos}`);
    }
  }

  u8() {
    this.need(1);
    return this.buf[this.pos++];
  }

  raw(n) {
    this.need(n);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** An unsigned varint no wider than `bits`; a number, or a BigInt past 2^53. */
  varint(bits = 64) {
    const marker = this.u8();
    let v;
    if (marker < 251) return marker;
    if (marker === 251) {
      this.need(2);
      v = this.view.getUint16(this.pos, true);
      this.pos += 2;
    } else if (marker === 252 && bits >= 32) {
      this.need(4);
      v = this.view.getUint32(this.pos, true);
      this.pos += 4;
    } else if (marker === 253 && bits >= 64) {
      this.need(8);
      v = this.view.getBigUint64(this.pos, true);
      this.pos += 8;
      if (v <= BigInt(Number.MAX_SAFE_INTEGER)) v = Number(v);
    } else {
      throw new DecodeError(`varint marker ${marker} too wide for u${bits}`);
    }
    if (bits < 16 && v > 0xff) throw new DecodeError(`u${bits} out of range: ${v}`);
    return v;
  }

  f32() {
    this.need(4);
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }

  f64() {
    this.need(8);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }

  /** Whether every byte was read. */
  done() {
    return this.pos === this.buf.length;
  }
}

/** Encodes `value` with `schema` into fresh bytes. */
export function encode(schema, value) {
  const w = new Writer();
  schema.write(w, value);
  return w.bytes().slice();
}

/** Decodes exactly one value of `schema` from `bytes`. */
export function decode(schema, bytes) {
  const r = new Reader(bytes);
  const value = schema.read(r);
  if (!r.done()) throw new DecodeError(`${bytes.length - r.pos} bytes left after the value`);
  return value;
}

// Integers.

export const u8 = { write: (w, v) => w.u8(checkInt(v, 0, 0xff)), read: (r) => r.u8() };
export const i8 = {
  write: (w, v) => w.u8(checkInt(v, -0x80, 0x7f) & 0xff),
  read: (r) => (r.u8() << 24) >> 24,
};
export const u16 = { write: (w, v) => w.varint(checkInt(v, 0, 0xffff)), read: (r) => r.varint(16) };
export const u32 = {
  write: (w, v) => w.varint(checkInt(v, 0, 0xffffffff)),
  read: (r) => r.varint(32),
};
export const u64 = { write: (w, v) => w.varint(v), read: (r) => r.varint(64) };
export const i16 = signed(16);
export const i32 = signed(32);
export const i64 = signed(64);

function checkInt(v, min, max) {
  if (!Number.isInteger(v) || v < min || v > max) throw new RangeError(`${v} not in ${min}..=${max}`);
  return v;
}

/** Zig-zag: 0 → 0, -1 → 1, 1 → 2, -2 → 3 ... */
function signed(bits) {
  const limit = 2n ** BigInt(bits - 1);
  return {
    write(w, v) {
      const n = BigInt(v);
      if (n < -limit || n >= limit) throw new RangeError(`${v} out of range for i${bits}`);
      w.varint(n >= 0n ? n * 2n : -n * 2n - 1n);
    },
    read(r) {
      const z = BigInt(r.varint(bits));
      const n = z & 1n ? -(z >> 1n) - 1n : z >> 1n;
      return n >= -BigInt(Number.MAX_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(n)
        : n;
    },
  };
}

// Other scalars.

export const bool = {
  write: (w, v) => w.u8(v ? 1 : 0),
  read(r) {
    const b = r.u8();
    if (b > 1) throw new DecodeError(`invalid bool ${b}`);
    return b === 1;
  },
};
export const f32 = { write: (w, v) => w.f32(v), read: (r) => r.f32() };
export const f64 = { write: (w, v) => w.f64(v), read: (r) => r.f64() };
export const unit = { write: () => {}, read: () => null };

/** `Vec<u8>`: a varint length, then the bytes (a Uint8Array). */
export const bytes = {
  write(w, v) {
    w.varint(v.length);
    w.raw(v);
  },
  read: (r) => r.raw(r.varint()).slice(),
};

export const string = {
  write(w, v) {
    const utf8 = encoder.encode(v);
    w.varint(utf8.length);
    w.raw(utf8);
  },
  read(r) {
    try {
      return decoder.decode(r.raw(r.varint()));
    } catch (err) {
      if (err instanceof DecodeError) throw err;
      throw new DecodeError('invalid UTF-8 in a string');
    }
  },
};

/** `[u8; n]`: exactly `n` bytes, no length. */
export function fixedBytes(n) {
  return {
    write(w, v) {
      if (v.length !== n) throw new RangeError(`expected ${n} bytes, got ${v.length}`);
      w.raw(v);
    },
    read: (r) => r.raw(n).slice(),
  };
}

/** A UUID (a `ClientId`) as its text form; on the wire serde's byte form. */
export const uuid = {
  write(w, v) {
    const hex = v.replace(/-/g, '');
    if (!/^[0-9a-fA-F]{32}$/.test(hex)) throw new RangeError(`not a UUID: ${v}`);
    w.varint(16);
    for (let i = 0; i < 32; i += 2) w.u8(parseInt(hex.slice(i, i + 2), 16));
  },
  read(r) {
    const len = r.varint();
    if (len !== 16) throw new DecodeError(`a UUID has 16 bytes, not ${len}`);
    const hex = Array.from(r.raw(16), (b) => b.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  },
};

// Compound types.

/** `Option<T>`: null or undefined for none. */
export function option(inner) {
  return {
    write(w, v) {
      if (v === null || v === undefined) return w.u8(0);
      w.u8(1);
      inner.write(w, v);
    },
    read(r) {
      const tag = r.u8();
      if (tag === 0) return null;
      if (tag !== 1) throw new DecodeError(`invalid option tag ${tag}`);
      return inner.read(r);
    },
  };
}

/** `Vec<T>`: an array. `limit` bounds what a reader accepts. */
export function vec(inner, limit = 1 << 20) {
  return {
    write(w, v) {
      w.varint(v.length);
      for (const item of v) inner.write(w, item);
    },
    read(r) {
      const len = r.varint();
      if (len > limit || len > r.buf.length - r.pos) throw new DecodeError(`sequence of ${len} is too long`);
      const out = new Array(len);
      for (let i = 0; i < len; i++) out[i] = inner.read(r);
      return out;
    },
  };
}

/** `[T; n]`: exactly `n` values, no length. */
export function array(inner, n) {
  return {
    write(w, v) {
      if (v.length !== n) throw new RangeError(`expected ${n} items, got ${v.length}`);
      for (const item of v) inner.write(w, item);
    },
    read(r) {
      const out = new Array(n);
      for (let i = 0; i < n; i++) out[i] = inner.read(r);
      return out;
    },
  };
}

/** `(A, B, ...)`: an array of the values. */
export function tuple(...items) {
  return {
    write(w, v) {
      items.forEach((item, i) => item.write(w, v[i]));
    },
    read: (r) => items.map((item) => item.read(r)),
  };
}

/**
 * A map (`BTreeMap`, `HashMap`): a plain object for string keys, written in
 * key order as a `BTreeMap` is. Reads into an object when `key` is `string`,
 * otherwise into a `Map`.
 */
export function map(key, value) {
  return {
    write(w, v) {
      const entries = v instanceof Map ? [...v.entries()] : Object.entries(v);
      entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      w.varint(entries.length);
      for (const [k, item] of entries) {
        key.write(w, k);
        value.write(w, item);
      }
    },
    read(r) {
      const len = r.varint();
      if (len > r.buf.length - r.pos) throw new DecodeError(`map of ${len} is too long`);
      const out = key === string ? {} : new Map();
      for (let i = 0; i < len; i++) {
        const k = key.read(r);
        const item = value.read(r);
        if (out instanceof Map) out.set(k, item);
        else out[k] = item;
      }
      return out;
    },
  };
}

/** A struct: its fields in declaration order. `fields` maps name → schema. */
export function struct(fields) {
  const entries = Object.entries(fields);
  return {
    write(w, v) {
      for (const [name, schema] of entries) schema.write(w, v[name]);
    },
    read(r) {
      const out = {};
      for (const [name, schema] of entries) out[name] = schema.read(r);
      return out;
    },
  };
}

/** A newtype (`struct RoomId(u32)`): the inner value as it is. */
export const newtype = (inner) => inner;

/**
 * An enum: `variants` lists `[name, schema]` (or just `name` for a unit
 * variant) by variant index. A unit variant's value is its name; another's
 * is `{ [name]: value }`, as serde writes it in JSON.
 */
export function enumOf(variants) {
  const list = variants.map((v) => (Array.isArray(v) ? v : [v, null]));
  return {
    write(w, v) {
      const name = typeof v === 'string' ? v : Object.keys(v)[0];
      const index = list.findIndex(([n]) => n === name);
      if (index < 0) throw new RangeError(`unknown variant ${name}`);
      w.varint(index);
      const schema = list[index][1];
      if (schema) schema.write(w, v[name]);
    },
    read(r) {
      const index = r.varint(32);
      if (index >= list.length) throw new DecodeError(`unknown variant index ${index}`);
      const [name, schema] = list[index];
      return schema ? { [name]: schema.read(r) } : name;
    },
  };
}
