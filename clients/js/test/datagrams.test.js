// Datagrams as the socket and the relay client handle them over WebTransport
// (docs/PROTOCOL.md sections 10, 11a and 11b), on a transport made for the
// test: what goes as a datagram and in which bytes, what is delivered, what
// is dropped as stale or refused, and the relay view's order per player.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { encode, u32 } from '../src/bincode.js';
import { encodeFrame, encodeMessage } from '../src/frame.js';
import { RelayAction, RelayClient, Batch, Relayed, RELAY_VIEW_CHANNEL } from '../src/relay.js';
import { SwitchboardSocket } from '../src/socket.js';

const unhex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
/** Content written as it is. */
const raw = { write: (w, v) => w.raw(v) };
const HELLO = encodeFrame(new Uint8Array([0x53, 0x57, 0x42, 0x44, 0, 1]));

/** A transport with datagrams that keeps what the socket sends. */
function fakeTransport(maxDatagramSize = 1200) {
  return class {
    constructor() {
      this.frames = [];
      this.datagrams = [];
      this.maxDatagramSize = maxDatagramSize;
      fakeTransport.last = this;
    }
    send(frame) {
      this.frames.push(frame);
    }
    sendDatagram(bytes) {
      if (bytes.length > this.maxDatagramSize) return false;
      this.datagrams.push(bytes);
      return true;
    }
    close() {}
  };
}

/** A socket on a fake transport, open (the server's hello taken). */
function openSocket(options = {}, maxDatagramSize) {
  const socket = new SwitchboardSocket('fake://', { transport: fakeTransport(maxDatagramSize), ...options });
  const transport = fakeTransport.last;
  transport.onopen();
  transport.onmessage({ data: HELLO.buffer });
  assert.equal(socket.state, 'open');
  return { socket, transport };
}

test('a sequenced channel goes as datagrams in the layout of section 11a, the rest as frames', () => {
  const { socket, transport } = openSocket({ sequencedChannels: [20] });
  socket.send(20, 3, raw, new TextEncoder().encode('xyz'));
  socket.send(20, 3, raw, new TextEncoder().encode('xyz'));
  socket.send(21, 1, raw, new Uint8Array([1]));
  assert.deepEqual(transport.datagrams.map(hex), ['00000000140378797a', '00000001140378797a']);
  // The hello, then channel 21 as a frame.
  assert.equal(transport.frames.length, 2);
  assert.equal(hex(transport.frames[1]), hex(encodeMessage(21, 1, raw, new Uint8Array([1]))));
  assert.equal(socket.datagramStats.sent, 2);
  socket.close();
});

test('a sequenced message too big for a datagram goes on the stream', () => {
  const { socket, transport } = openSocket({ sequencedChannels: [20] }, 8);
  socket.send(20, 3, raw, new Uint8Array(100));
  assert.equal(transport.datagrams.length, 0);
  assert.equal(transport.frames.length, 2);
  assert.equal(socket.datagramStats.sentOnStream, 1);
  socket.close();
});

test('newest wins per channel; framework channels, short and bad datagrams are refused, never fatal', () => {
  const { socket, transport } = openSocket();
  const got = [];
  socket.on('message', (m) => got.push([m.channel, hex(m.content)]));
  const datagram = (seq, rest) => unhex(seq.toString(16).padStart(8, '0') + rest);
  transport.ondatagram(datagram(5, '1401aa'));
  transport.ondatagram(datagram(4, '1401bb')); // older: stale
  transport.ondatagram(datagram(5, '1401cc')); // repeated: stale
  transport.ondatagram(datagram(6, '1401dd'));
  transport.ondatagram(datagram(7, '0301ee')); // channel 3: stream only
  transport.ondatagram(unhex('0000')); // short
  transport.ondatagram(datagram(8, 'fb')); // an envelope cut off
  // Sequences wrap: 0 is newer than 2^32 - 1.
  transport.ondatagram(datagram(0xffffffff, '1501aa'));
  transport.ondatagram(datagram(0, '1501bb'));
  assert.deepEqual(got, [
    [20, 'aa'],
    [20, 'dd'],
    [21, 'aa'],
    [21, 'bb'],
  ]);
  assert.deepEqual(socket.datagramStats, { sent: 0, sentOnStream: 0, delivered: 4, stale: 2, refused: 3 });
  assert.equal(socket.state, 'open');
  socket.close();
});

test("the relay's view keeps each player's newest, and none from before it left", () => {
  const relay = new RelayClient('fake://', { socket: { transport: fakeTransport() }, datagrams: true });
  // No relay welcomes it here; closing at the end rejects `ready`.
  relay.ready.catch(() => {});
  const transport = fakeTransport.last;
  transport.onopen();
  transport.onmessage({ data: HELLO.buffer });
  // The hello and the options (datagrams on) went on the stream.
  assert.equal(transport.frames.length, 3);
  const heard = [];
  relay.on('relayed', (r) => heard.push([r.player_id, r.server_time_ms]));
  relay.on('left', (id) => heard.push(['left', id]));
  const transform = { position: [1, 0, 2], rotation: [0, 0, 0], zone: 'z', state: null, extra: {} };
  const relayed = (player_id, server_time_ms) => [
    RelayAction.relayed,
    encode(Relayed, { player_id, server_time_ms, transform }),
  ];
  let sequence = 0;
  const view = (at, messages) => {
    const envelope = encodeMessage(RELAY_VIEW_CHANNEL, RelayAction.batch, Batch, { tick: 1, server_time_ms: at, messages });
    const datagram = new Uint8Array(4 + envelope.length - 5);
    new DataView(datagram.buffer).setUint32(0, sequence++, false);
    datagram.set(envelope.subarray(5), 4);
    transport.ondatagram(datagram);
  };
  view(100, [relayed(7, 100)]);
  view(90, [relayed(7, 90)]); // came late: older than what the page has
  view(120, [relayed(7, 120), relayed(8, 110)]);
  // Player 7 leaves at 200 (on the stream); a datagram of before that
  // arrives after it and must not bring it back.
  const left = encodeMessage(3, RelayAction.batch, Batch, {
    tick: 2,
    server_time_ms: 200,
    messages: [[RelayAction.left, encode(u32, 7)]],
  });
  transport.onmessage({ data: left.buffer });
  view(150, [relayed(7, 150)]);
  assert.deepEqual(heard, [
    [7, 100],
    [7, 120],
    [8, 110],
    ['left', 7],
  ]);
  assert.equal(relay.players.has(7), false);
  // Own moves go on the moves channel, as datagrams.
  relay.move({ position: [1, 2, 3] });
  assert.equal(transport.datagrams.length, 1);
  assert.equal(transport.datagrams[0][4], 4);
  relay.close();
});
