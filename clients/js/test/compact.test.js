// Compact transforms: the conformance vectors shared with the Rust relay
// (tests/vectors/compact.json) read exactly as the Rust decoder reads them,
// and a damaged stream is refused, never half-read silently.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { DecodeError } from '../src/bincode.js';
import { CompactDecoder } from '../src/compact.js';

const vectors = JSON.parse(readFileSync(new URL('../../../tests/vectors/compact.json', import.meta.url)));

const unhex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

/** The file's numbers are f32 values written as doubles: compare as f32. */
function asF32(value) {
  if (typeof value === 'number' && !Number.isInteger(value)) return Math.fround(value);
  if (Array.isArray(value)) return value.map(asF32);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asF32(v)]));
  }
  return value;
}

function plain(record) {
  if (record.type === 'message') return { ...record, content: hex(record.content) };
  return record;
}

test('the compact vectors read as the Rust decoder reads them', () => {
  const decoder = new CompactDecoder();
  assert.ok(vectors.frames.length >= 4);
  for (const frame of vectors.frames) {
    const got = decoder.read(unhex(frame.hex));
    assert.equal(got.tick, frame.tick);
    assert.equal(got.server_time_ms, frame.server_time_ms);
    assert.deepEqual(asF32(got.records.map(plain)), asF32(frame.records));
  }
  assert.equal(decoder.precision, Math.fround(vectors.precision));
});

test('a cut or damaged compact stream is a DecodeError', () => {
  const first = unhex(vectors.frames[0].hex);
  for (let cut = 1; cut < first.length; cut++) {
    const decoder = new CompactDecoder();
    try {
      const { records } = decoder.read(first.subarray(0, cut));
      assert.equal(records.length, 0, `cut at ${cut}`);
    } catch (err) {
      assert.ok(err instanceof DecodeError, `${cut}: ${err}`);
    }
  }
  // A difference for a slot never given.
  assert.throws(() => new CompactDecoder().read(unhex(vectors.frames[1].hex)), DecodeError);
  // A record kind this client does not know.
  assert.throws(() => new CompactDecoder().read(unhex('0000ff')), /unknown record kind/);
});
