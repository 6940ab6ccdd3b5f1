// Frames and the message envelope (docs/PROTOCOL.md, sections 1 and 3).
//
//   | length u32 BE (flags + body) | flags u8 | body |
//
// Over WebSocket each frame is one binary message, unchanged. Bit 0 of the
// flags says the body is a zlib stream; it is inflated with the platform's
// DecompressionStream (browsers, node ≥ 18), never past a limit.

import { DecodeError, Reader, Writer } from './bincode.js';

export const HEADER_LEN = 5;
export const FLAG_COMPRESSED = 0x01;

/** The limits a receiver applies, as the Rust `CodecConfig` defaults. */
export const DEFAULT_LIMITS = Object.freeze({
  maxFrameLen: 1024 * 1024,
  maxDecompressedLen: 4 * 1024 * 1024,
});

/** A frame that breaks the format or a limit. */
export class FrameError extends Error {
  constructor(message) {
    super(message);
    this.name = 'FrameError';
  }
}

/** A raw frame around `payload` (a Uint8Array). */
export function encodeFrame(payload) {
  const frame = new Uint8Array(HEADER_LEN + payload.length);
  new DataView(frame.buffer).setUint32(0, payload.length + 1, false);
  frame[4] = 0;
  frame.set(payload, HEADER_LEN);
  return frame;
}

/**
 * A frame around `payload`, its body zlib-compressed when the payload is at
 * least `threshold` bytes and compression shrinks it (the Rust sender's
 * rule); raw otherwise.
 */
export async function encodeFrameCompressed(payload, threshold = 512) {
  if (payload.length < threshold) return encodeFrame(payload);
  const body = await pipe(payload, new CompressionStream('deflate'), Infinity);
  if (body.length >= payload.length) return encodeFrame(payload);
  const frame = new Uint8Array(HEADER_LEN + body.length);
  new DataView(frame.buffer).setUint32(0, body.length + 1, false);
  frame[4] = FLAG_COMPRESSED;
  frame.set(body, HEADER_LEN);
  return frame;
}

/**
 * Checks one whole frame (a WebSocket message) and returns its header:
 * `{ compressed, body }`. Throws FrameError.
 */
export function splitFrame(frame, limits = DEFAULT_LIMITS) {
  if (frame.length < HEADER_LEN) throw new FrameError(`a frame of ${frame.length} bytes is shorter than its header`);
  const length = new DataView(frame.buffer, frame.byteOffset, 4).getUint32(0, false);
  if (length === 0) throw new FrameError('frame length is zero');
  if (length > limits.maxFrameLen) throw new FrameError(`frame of ${length} bytes exceeds the limit of ${limits.maxFrameLen}`);
  if (length !== frame.length - 4) throw new FrameError('a message must hold exactly one frame');
  const flags = frame[4];
  if (flags & ~FLAG_COMPRESSED) throw new FrameError(`unknown flag bits ${flags}`);
  return { compressed: (flags & FLAG_COMPRESSED) !== 0, body: frame.subarray(HEADER_LEN) };
}

/**
 * Splits a byte stream (TCP, a WebTransport stream) into whole frames, each
 * handed to `onFrame` as an ArrayBuffer of its own, never buffering past the
 * frame limit: a header announcing a longer frame is handed on alone (with
 * one byte, so that `splitFrame` names the limit it breaks) and the stream
 * is not read further.
 */
export class FrameSplitter {
  constructor(limits, onFrame) {
    this.limits = limits;
    this.onFrame = onFrame;
    this.chunks = [];
    this.length = 0;
    this.stopped = false;
  }

  /** Takes `chunk` (a Uint8Array) and hands on every frame now whole. */
  push(chunk) {
    if (this.stopped) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
    while (this.length >= 4 && !this.stopped) {
      const head = this.peek(4);
      const length = new DataView(head.buffer, head.byteOffset, 4).getUint32(0, false);
      if (length > this.limits.maxFrameLen) {
        this.stopped = true;
        this.onFrame(new Uint8Array([...head, 0]).buffer);
        return;
      }
      if (this.length < 4 + length) return;
      this.onFrame(this.take(4 + length));
    }
  }

  /** Hands on nothing more (the connection ended). */
  stop() {
    this.stopped = true;
  }

  peek(n) {
    if (this.chunks[0].length < n) this.chunks = [this.joined()];
    return this.chunks[0].subarray(0, n);
  }

  /** The first `n` buffered bytes, as an ArrayBuffer of their own (one copy). */
  take(n) {
    const all = this.chunks.length === 1 ? this.chunks[0] : this.joined();
    const out = all.buffer.slice(all.byteOffset, all.byteOffset + n);
    const rest = all.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.length = rest.length;
    return out;
  }

  joined() {
    const all = new Uint8Array(this.length);
    let at = 0;
    for (const chunk of this.chunks) {
      all.set(chunk, at);
      at += chunk.length;
    }
    return all;
  }
}

/** The payload of one whole frame, inflated if need be. */
export async function decodeFrame(frame, limits = DEFAULT_LIMITS) {
  const { compressed, body } = splitFrame(frame, limits);
  return compressed ? inflate(body, limits.maxDecompressedLen) : body;
}

/** Inflates a zlib stream, failing as soon as it passes `max` bytes. */
export async function inflate(body, max) {
  try {
    return await pipe(body, new DecompressionStream('deflate'), max);
  } catch (err) {
    if (err instanceof FrameError) throw err;
    throw new FrameError(`corrupt zlib body: ${err.message}`);
  }
}

async function pipe(input, transform, max) {
  const writer = transform.writable.getWriter();
  writer.write(input).catch(() => {});
  writer.close().catch(() => {});
  const reader = transform.readable.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > max) {
      reader.cancel().catch(() => {});
      throw new FrameError(`compressed body inflates past the limit of ${max} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/**
 * The envelope of a payload: `{ channel, action, content }`, content being
 * the bytes of the value (decode it with a schema).
 */
export function decodeEnvelope(payload) {
  const r = new Reader(payload);
  try {
    const channel = r.varint(16);
    const action = r.varint(16);
    return { channel, action, content: payload.subarray(r.pos) };
  } catch (err) {
    throw new FrameError(`bad message envelope: ${err.message}`);
  }
}

/** A payload of `channel`, `action` and `value` encoded with `schema`. */
export function encodeEnvelope(channel, action, schema, value) {
  const w = new Writer();
  w.varint(channel);
  w.varint(action);
  schema.write(w, value);
  return w.bytes();
}

/** A whole raw frame of a message: what `send` puts on the wire. */
export function encodeMessage(channel, action, schema, value) {
  const w = new Writer();
  w.len = HEADER_LEN;
  w.varint(channel);
  w.varint(action);
  schema.write(w, value);
  const frame = w.bytes().slice();
  new DataView(frame.buffer).setUint32(0, frame.length - 4, false);
  frame[4] = 0;
  return frame;
}

export { DecodeError };
