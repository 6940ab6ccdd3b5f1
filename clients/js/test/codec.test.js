// The codec on its own: round trips, and bytes a hostile peer could send.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deflateSync } from 'node:zlib';

import * as b from '../src/bincode.js';
import { FrameError, decodeEnvelope, decodeFrame, encodeFrameCompressed, encodeMessage, splitFrame } from '../src/frame.js';

test('integers round-trip at every varint width, BigInt past 2^53', () => {
  for (const v of [0, 250, 251, 65535, 65536, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER]) {
    assert.equal(b.decode(b.u64, b.encode(b.u64, v)), v);
  }
  assert.equal(b.decode(b.u64, b.encode(b.u64, 2n ** 64n - 1n)), 2n ** 64n - 1n);
  for (const v of [0, -1, 1, -300, 2 ** 31 - 1, -(2 ** 31)]) assert.equal(b.decode(b.i32, b.encode(b.i32, v)), v);
  assert.throws(() => b.encode(b.u16, 65536), RangeError);
  assert.throws(() => b.encode(b.u8, -1), RangeError);
});

test('a varint too wide for its type is refused', () => {
  assert.throws(() => b.decode(b.u16, new Uint8Array([252, 0, 0, 1, 0])), b.DecodeError);
  assert.throws(() => b.decode(b.u32, new Uint8Array([253, 0, 0, 0, 0, 0, 0, 0, 0])), b.DecodeError);
  assert.throws(() => b.decode(b.u64, new Uint8Array([255])), b.DecodeError);
});

test('truncated values, bad tags and trailing bytes are refused', () => {
  assert.throws(() => b.decode(b.string, new Uint8Array([5, 104, 105])), b.DecodeError);
  assert.throws(() => b.decode(b.bool, new Uint8Array([2])), b.DecodeError);
  assert.throws(() => b.decode(b.option(b.u8), new Uint8Array([7, 1])), b.DecodeError);
  assert.throws(() => b.decode(b.u8, new Uint8Array([1, 2])), b.DecodeError);
  assert.throws(() => b.decode(b.string, new Uint8Array([2, 0xff, 0xfe])), b.DecodeError);
  // A sequence claiming more items than there are bytes allocates nothing.
  assert.throws(() => b.decode(b.vec(b.u32), new Uint8Array([252, 255, 255, 255, 255])), b.DecodeError);
  assert.throws(() => b.decode(b.enumOf(['A', 'B']), new Uint8Array([2])), b.DecodeError);
});

test('a frame that is not exactly one frame, or breaks a limit, is refused', () => {
  assert.throws(() => splitFrame(new Uint8Array([0, 0, 0])), FrameError);
  assert.throws(() => splitFrame(new Uint8Array([0, 0, 0, 0, 0])), /zero/);
  assert.throws(() => splitFrame(new Uint8Array([0, 0, 0, 2, 0])), /exactly one frame/);
  assert.throws(() => splitFrame(new Uint8Array([0, 0, 0, 1, 0x80])), /flag/);
  assert.throws(() => splitFrame(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0])), /exceeds/);
  assert.throws(() => decodeEnvelope(new Uint8Array([252, 0, 0, 0, 0])), FrameError);
});

test('a zlib bomb stops at the inflate limit', async () => {
  const body = deflateSync(new Uint8Array(1024 * 1024));
  const frame = new Uint8Array(5 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length + 1);
  frame[4] = 1;
  frame.set(body, 5);
  await assert.rejects(decodeFrame(frame, { maxFrameLen: 1 << 20, maxDecompressedLen: 64 * 1024 }), /inflates past the limit/);
  assert.equal((await decodeFrame(frame)).length, 1024 * 1024);
});

test('corrupt zlib is a frame error', async () => {
  await assert.rejects(decodeFrame(new Uint8Array([0, 0, 0, 4, 1, 1, 2, 3])), FrameError);
});

test('compression is used only when it pays', async () => {
  const small = encodeMessage(16, 1, b.string, 'hi');
  assert.equal((await encodeFrameCompressed(small.subarray(5)))[4], 0);
  const big = encodeMessage(16, 1, b.string, 'dots '.repeat(1000)).subarray(5);
  const frame = await encodeFrameCompressed(big);
  assert.equal(frame[4], 1);
  assert.ok(frame.length < big.length / 10);
  assert.deepEqual(await decodeFrame(frame), big);
  const random = crypto.getRandomValues(new Uint8Array(4096));
  assert.equal((await encodeFrameCompressed(random))[4], 0, 'dense bytes stay raw');
});
