// The wire vectors shared with the Rust tests (tests/vectors/wire.json):
// every value must encode to exactly the file's bytes, and the bytes must
// decode to exactly the value.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import * as b from '../src/bincode.js';
import { decodeFrame, encodeFrame, splitFrame } from '../src/frame.js';
import * as session from '../src/session.js';
import * as rooms from '../src/rooms.js';
import * as relay from '../src/relay.js';

const vectors = JSON.parse(readFileSync(new URL('../../../tests/vectors/wire.json', import.meta.url)));

const schemas = {
  u8: b.u8,
  u16: b.u16,
  u32: b.u32,
  u64: b.u64,
  i32: b.i32,
  i64: b.i64,
  f32: b.f32,
  f64: b.f64,
  bool: b.bool,
  string: b.string,
  bytes: b.bytes,
  'option<string>': b.option(b.string),
  'vec<u32>': b.vec(b.u32),
  'map<string,string>': b.map(b.string, b.string),
  ClientId: b.uuid,
  Hello: session.Hello,
  Welcome: session.Welcome,
  Refused: session.Refused,
  RequestFrame: session.RequestFrame,
  Rejected: session.Rejected,
  ErrorReply: session.ErrorReply,
  CreateRoom: rooms.CreateRoom,
  RoomId: rooms.RoomId,
  Kick: rooms.Kick,
  RpcRequest: rooms.RpcRequest,
  RpcCall: rooms.RpcCall,
  CustomRequest: rooms.CustomRequest,
  CustomMessage: rooms.CustomMessage,
  SpawnRequest: rooms.SpawnRequest,
  EntityUpdate: rooms.EntityUpdate,
  StateSync: rooms.StateSync,
  Transfer: rooms.Transfer,
  RoomPlayer: rooms.RoomPlayer,
  PlayerLeft: rooms.PlayerLeft,
  RoomState: rooms.RoomState,
  'vec<RoomSummary>': b.vec(rooms.RoomSummary),
  Entity: rooms.Entity,
  RelayHello: relay.RelayHello,
  Transform: relay.Transform,
  Relayed: relay.Relayed,
  Redirect: relay.Redirect,
};

const hex = (bytes) => Buffer.from(bytes).toString('hex');
const unhex = (text) => new Uint8Array(Buffer.from(text, 'hex'));

/** Values as JSON has them: byte arrays as arrays of numbers. */
function plain(value) {
  if (value instanceof Uint8Array) return Array.from(value);
  if (typeof value === 'bigint') return Number(value);
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

test('the file has vectors of every kind', () => {
  assert.ok(vectors.length > 40);
  const types = new Set(vectors.map((v) => v.type));
  for (const type of types) assert.ok(type === 'Frame' || schemas[type], `no schema for ${type}`);
});

for (const vector of vectors.filter((v) => v.type !== 'Frame')) {
  test(`vector: ${vector.name}`, () => {
    const schema = schemas[vector.type];
    assert.deepEqual(plain(b.decode(schema, unhex(vector.hex))), vector.value);
    assert.equal(hex(b.encode(schema, vector.value)), vector.hex);
  });
}

for (const vector of vectors.filter((v) => v.type === 'Frame')) {
  test(`frame vector: ${vector.name}`, async () => {
    const frame = unhex(vector.hex);
    assert.equal(splitFrame(frame).compressed, vector.value.compressed);
    assert.equal(hex(await decodeFrame(frame)), vector.value.payload);
    if (!vector.value.compressed) assert.equal(hex(encodeFrame(unhex(vector.value.payload))), vector.hex);
  });
}

test('a redirect reads with the QUIC address and the WebTransport hashes after the vector', () => {
  const vector = vectors.find((v) => v.type === 'Redirect');
  const base = unhex(vector.hex);
  assert.equal(relay.readRedirect(base).quic, null);
  assert.equal(relay.readRedirect(base).webtransport, null);
  // docs/PROTOCOL.md: Some("10.0.0.2:7202"), then Some of two 64-digit hashes.
  const quic = Buffer.concat([base, Buffer.from([1, 13]), Buffer.from('10.0.0.2:7202')]);
  const hashes = ['ab'.repeat(32), 'cd'.repeat(32)];
  const web = Buffer.concat([quic, Buffer.from([1, 2, 64]), Buffer.from(hashes[0]), Buffer.from([64]), Buffer.from(hashes[1])]);
  assert.equal(relay.readRedirect(new Uint8Array(quic)).quic, '10.0.0.2:7202');
  const read = relay.readRedirect(new Uint8Array(web));
  assert.deepEqual([read.quic, read.webtransport], ['10.0.0.2:7202', hashes]);
  assert.throws(() => relay.readRedirect(new Uint8Array([...web, 0])), /bytes left after a redirect/);
  // A hash that is not SHA-256 in hex is refused, not handed to the browser.
  const bad = Buffer.concat([quic, Buffer.from([1, 1, 3]), Buffer.from('xyz')]);
  assert.throws(() => relay.readRedirect(new Uint8Array(bad)), /not SHA-256 in hex/);
});
