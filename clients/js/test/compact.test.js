// Compact transforms: the conformance vectors shared with the Rust relay
// (tests/vectors/compact.json) read exactly as the Rust decoder reads them,
// and a damaged stream is refused, never half-read silently.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { DecodeError, encode } from '../src/bincode.js';
import { CompactDecoder, ViewAck, ViewDecoder } from '../src/compact.js';

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

test('compact view datagrams: the vectors of docs/PROTOCOL.md, acknowledged and stale', () => {
  const decoder = new ViewDecoder();
  const whole = decoder.read(unhex('010264' + '0ad7233c' + '7c070000' + 'c800fb9001' + '00001000' + '80' + '017a' + '00'));
  assert.equal(whole.frame, 1);
  const [first] = whole.records;
  assert.equal(first.player_id, 7);
  assert.equal(first.server_time_ms, 100);
  assert.deepEqual(first.transform.position, [1, 0, 2].map(Math.fround));
  assert.deepEqual(first.transform.rotation, [0, 90, 0]);
  assert.equal(first.transform.zone, 'z');
  assert.equal(first.transform.state, null);
  assert.deepEqual(decoder.ack(), { newest: 1, mask: 0 });
  assert.equal(decoder.ack(), null, 'nothing new since');
  assert.equal(Buffer.from(encode(ViewAck, { newest: 1, mask: 0 })).toString('hex'), '0100000000');
  const step = decoder.read(unhex('020396' + '0ad7233c' + '00070100' + '640000'));
  assert.deepEqual(step.records[0].transform.position, [1.5, 0, 2].map(Math.fround));
  assert.equal(step.records[0].server_time_ms, 150);
  assert.equal(step.records[0].transform.zone, 'z', 'kept from the baseline');
  assert.deepEqual(decoder.ack(), { newest: 2, mask: 1 });
  // Older than the newest read: dropped.
  assert.equal(decoder.read(unhex('010264' + '0ad7233c')), null);
  // A baseline not held: skipped, and the datagram not acknowledged.
  const orphan = decoder.read(unhex('050396' + '0ad7233c' + '00090100' + '640000'));
  assert.deepEqual(orphan.records, []);
  assert.equal(decoder.unresolved, 1);
  assert.equal(decoder.ack(), null);
  assert.throws(() => new ViewDecoder().read(unhex('010264' + '0ad7233c' + '00070000')), /not whole/);
});
