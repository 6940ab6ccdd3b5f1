// Sessions shared through a real Redis by two board servers (docs/SCALING.md):
// the server a JavaScript client plays on is killed outright, and the client
// resumes on the other with its id.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { string } from '../src/bincode.js';
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
