// A browser player joins a game hosted behind a join-code relay: a real
// `switchboard-server rendezvous` and a board server linked to it
// (docs/HOSTING.md): the code is the WebSocket URL's path.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { u8 } from '../src/bincode.js';
import { RequestRejected, SessionClient } from '../src/session.js';
import { startServer } from './support.js';

const BOARD = 16;
const CLAIM = 4;

let relay;
let board;
before(async () => {
  relay = await startServer(['rendezvous']);
  board = await startServer(['--rendezvous', `127.0.0.1:${relay.tcp}`], { SWITCHBOARD_PASSWORD: '' });
});
after(async () => {
  await board.stop();
  await relay.stop();
});

test('a JavaScript player joins by code at the relay and the host\'s rules answer', async () => {
  const [, code] = await board.line(/^join-code relay: join code (\w+):/);
  const ada = new SessionClient(`${relay.ws}${code}`, { name: 'ada' });
  const bob = new SessionClient(`${relay.ws}${code.toLowerCase()}`, { name: 'bob' });
  await ada.connect();
  await bob.connect();
  await ada.request(BOARD, CLAIM, u8, 3);
  await assert.rejects(bob.request(BOARD, CLAIM, u8, 3), (err) => {
    assert.ok(err instanceof RequestRejected);
    assert.equal(err.reason, 'seat 3 is taken');
    return true;
  });
  ada.close();
  bob.close();
});

test('an unknown code is refused with the relay\'s reason', async () => {
  const eve = new SessionClient(`${relay.ws}ZZZZZZ`, { name: 'eve' });
  await assert.rejects(eve.connect(), /no game has the join code/);
});
