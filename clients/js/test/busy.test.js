// Players behind one address (a LAN party, a school, a carrier's NAT) joining
// a real board server at once through a 50 ms path: the server, busy with
// their handshakes, turns some away for now with a retry-after (close 1013,
// "... (retry after N ms)", inside the WebSocket), and the JavaScript client
// waits that long and joins.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { SessionClient, retryAfterMs } from '../src/session.js';
import { startNetsim, startServer } from './support.js';

let server;
let path;
before(async () => {
  server = await startServer([], { SWITCHBOARD_PASSWORD: '' });
  path = await startNetsim(new URL(server.ws).host, 50);
});
after(async () => {
  await path.stop();
  await server.stop();
});

test('a retry-after reads back from a close reason', () => {
  assert.equal(retryAfterMs('busy (retry after 1500 ms)'), 1500);
  assert.equal(retryAfterMs('server full'), null);
  assert.equal(retryAfterMs(undefined), null);
});

test('sixty JavaScript players behind one address are all welcomed, those turned away after waiting', async () => {
  const players = Array.from({ length: 60 }, (_, i) => new SessionClient(path.ws, { name: `p${i}` }));
  let toldToWait = 0;
  for (const player of players) {
    player.on('reconnecting', ({ close }) => {
      if (close.code === 1013 && retryAfterMs(close.reason) !== null) toldToWait += 1;
    });
  }
  const welcomes = await Promise.all(players.map((player) => player.connect()));
  assert.equal(welcomes.length, 60);
  assert.equal(new Set(welcomes.map((w) => w.client)).size, 60, 'sixty ids');
  assert.ok(toldToWait > 0, 'some were told to come back (the server was busy)');
  for (const player of players) player.close();
});
