// Several servers sharing a real Redis (docs/SCALING.md): the board server a
// JavaScript client plays on is killed outright and the client resumes on the
// other with its id; a browser player whose zone lives on another relay is
// handed over there with its id.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { string } from '../src/bincode.js';
import { RelayClient } from '../src/relay.js';
import { SessionClient } from '../src/session.js';
import { startRedis, startServer, until } from './support.js';

// The board server's protocol (server/src/board.rs).
const BOARD = 16;
const Board = { say: 1 };

test('a client whose server is killed resumes on another server of the service with its id', async () => {
  const redis = await startRedis();
  const env = { SWITCHBOARD_PASSWORD: '' };
  const a = await startServer(['--redis', redis.url, '--grace-secs', '30'], env);
  const b = await startServer(['--redis', redis.url, '--grace-secs', '30'], env);
  try {
    const ada = new SessionClient(a.ws, { name: 'ada', fallbackUrls: [b.ws] });
    const welcomes = [];
    ada.on('welcome', (welcome) => welcomes.push(welcome));
    const first = await ada.connect();
    await ada.request(BOARD, Board.say, string, 'on a');
    // The server writes the session to Redis just after its welcome; once
    // it is there, the server is killed outright.
    const key = `switchboard:session:${first.client}`;
    let stored = false;
    await until(() => stored, 'the session in Redis', 10000, async () => {
      stored = (await redis.command('EXISTS', key)).startsWith(':1');
    });
    await a.kill();
    await until(() => welcomes.length === 2, 'the welcome on the other server', 15000);
    assert.equal(welcomes[1].client, first.client, 'the same id');
    assert.equal(welcomes[1].resumed, true);
    await ada.request(BOARD, Board.say, string, 'on b');
    ada.close();
  } finally {
    await a.stop();
    await b.stop();
    await redis.stop();
  }
});

test('a browser player whose zone lives on another relay is handed over with its id', async () => {
  const redis = await startRedis();
  const one = await startServer(['relay', '--redis', redis.url, '--threads', '1']);
  const two = await startServer(['relay', '--redis', redis.url, '--threads', '1']);
  const ann = new RelayClient(one.ws, { name: 'ann' });
  const bob = new RelayClient(two.ws, { name: 'bob' });
  try {
    const ids = [await ann.ready, await bob.ready];
    assert.notEqual(ids[0], ids[1]);
    // Both play in one zone: it lives on one of the two relays.
    const moving = setInterval(() => {
      ann.move({ position: [1, 0, 0], zone: 'harbour' });
      bob.move({ position: [2, 0, 0], zone: 'harbour' });
    }, 50);
    try {
      await until(() => ann.players.has(ids[1]) && bob.players.has(ids[0]), 'the two players to meet', 15000);
    } finally {
      clearInterval(moving);
    }
    assert.deepEqual([ann.id, bob.id], ids, 'ids kept across the handover');
    assert.equal([ann, bob].filter((p) => p.handedOver).length, 1, 'exactly one was handed over');
  } finally {
    ann.close();
    bob.close();
    await one.stop();
    await two.stop();
    await redis.stop();
  }
});
