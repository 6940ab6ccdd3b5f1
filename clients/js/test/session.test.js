// Sessions against a real board server over WebSocket: join, updates,
// a rejected request with its reason, a reconnect that keeps the id.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { string, struct, bool, uuid, unit, u8 } from '../src/bincode.js';
import { RequestRejected, SessionClient } from '../src/session.js';
import { startServer, until } from './support.js';

// The board server's protocol (server/src/board.rs).
const BOARD = 16;
const Board = { say: 1, claim: 4, release: 5, line: 10 };
const Line = struct({ from: uuid, name: string, text: string, private: bool });

let server;
before(async () => {
  server = await startServer([], { SWITCHBOARD_PASSWORD: '' });
});
after(() => server.stop());

function client(name, options = {}) {
  return new SessionClient(server.ws, { name, ...options });
}

test('a JavaScript client joins and gets an id and a reconnect token', async () => {
  const ada = client('ada');
  const welcome = await ada.connect();
  assert.match(welcome.client, /^[0-9a-f]{8}-[0-9a-f]{4}-/);
  assert.equal(welcome.token.length, 32);
  assert.equal(welcome.resumed, false);
  assert.equal(welcome.grace_secs, 60);
  ada.close();
});

test('a request is accepted and its update reaches every client', async () => {
  const ada = client('ada');
  const bob = client('bob');
  await ada.connect();
  await bob.connect();
  const heard = [];
  bob.subscribe(BOARD, Board.line, Line, (line) => heard.push(line));
  await ada.request(BOARD, Board.say, string, 'hello from node');
  await until(() => heard.length === 1, 'the line');
  assert.equal(heard[0].text, 'hello from node');
  assert.equal(heard[0].from, ada.client, 'the server stamps the speaker');
  assert.equal(heard[0].name, 'ada');
  ada.close();
  bob.close();
});

test('a rejected request carries the reason for the player', async () => {
  const ada = client('ada');
  await ada.connect();
  await assert.rejects(ada.request(BOARD, Board.release, unit, null), (err) => {
    assert.ok(err instanceof RequestRejected);
    assert.equal(err.reason, 'you have no seat');
    return true;
  });
  await ada.request(BOARD, Board.claim, u8, 1);
  ada.close();
});

test('a dropped connection reconnects with the same id and keeps its seat', async () => {
  const ada = client('ada', { socket: { handshakeTimeoutMs: 2000 } });
  const first = await ada.connect();
  await ada.request(BOARD, Board.claim, u8, 2);
  const reconnecting = ada.once('reconnecting');
  const welcomed = new Promise((resolve) => {
    const off = ada.on('welcome', (welcome) => {
      off();
      resolve(welcome);
    });
  });
  ada.socket.drop();
  await reconnecting;
  const second = await welcomed;
  assert.equal(second.resumed, true);
  assert.equal(second.client, first.client, 'the same id after the reconnect');
  assert.notDeepEqual(second.token, first.token, 'the token rotates');
  // The seat is still ours: claiming it again says so.
  await assert.rejects(ada.request(BOARD, Board.claim, u8, 2), /you already sit there/);
  ada.close();
});

test('a wrong reconnect token is refused', async () => {
  const ada = client('ada', { reconnect: false });
  const welcome = await ada.connect();
  // Lost, not left: the session waits for its owner's token.
  ada.socket.drop();
  await ada.once('disconnected');
  const impostor = client('eve', { resume: { client: welcome.client, token: new Uint8Array(32) } });
  await assert.rejects(impostor.connect(), (err) => {
    assert.equal(err.code, 2);
    return true;
  });
});

test('requests made while the connection is down go when the session resumes, each applied once', async () => {
  const ada = client('ada');
  const bob = client('bob');
  await ada.connect();
  await bob.connect();
  const heard = [];
  bob.subscribe(BOARD, Board.line, Line, (line) => heard.push(line.text));
  const reconnecting = ada.once('reconnecting');
  ada.socket.drop();
  await reconnecting;
  // Down: kept, not refused; sent again (marked) once ada is back.
  const verdicts = ['one', 'two', 'three'].map((text) => ada.request(BOARD, Board.say, string, text));
  await Promise.all(verdicts);
  await until(() => heard.length === 3, 'the three lines');
  assert.deepEqual(heard, ['one', 'two', 'three'], 'each once, in order');
  ada.close();
  bob.close();
});
