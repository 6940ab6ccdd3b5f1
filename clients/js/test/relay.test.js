// The relay over WebSocket with a native Rust bot in the same zone: the
// bot's transforms reach the JavaScript client, and the JavaScript client's
// reach the bot (it follows the JavaScript player: 5 units behind on x, the
// admin's bots keeping distances that fit the demo's world).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { RelayClient } from '../src/relay.js';
import { startServer, until } from './support.js';

const TOKEN = 'relay-test-token';
let server;
before(async () => {
  server = await startServer(['relay', '--admin-port', '0'], { SWITCHBOARD_ADMIN_TOKEN: TOKEN });
});
after(() => server.stop());

async function spawnBots(body) {
  const response = await fetch(`${server.admin}/api/bots`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(response.status, 200, await response.text());
}

test('transforms cross between a JavaScript client and a native bot', async () => {
  const js = new RelayClient(server.ws, { name: 'node' });
  const id = await js.ready;
  assert.ok(id > 0);
  // Near where the admin starts its bots (the demo page's world, at a
  // walking pace), so the bot reaches its place in well under a second.
  const me = [80, 0, 20];
  const moving = setInterval(() => js.move({ position: me, zone: 'js-zone' }), 100);
  try {
    await spawnBots({ count: 1, script: 'follow', place: 'js-zone' });
    // The bot's transforms arrive...
    await until(() => js.players.size === 1, 'the bot in the zone');
    const [botId] = js.players.keys();
    assert.notEqual(botId, id);
    // ...and it moved to 5 units behind us on x: it heard our transforms.
    await until(() => Math.abs(js.players.get(botId).transform.position[0] - (me[0] - 5)) < 1, 'the bot following us', 15000);
    const relayed = js.players.get(botId);
    assert.equal(relayed.transform.zone, 'js-zone');
    assert.ok(relayed.server_time_ms > 0);
  } finally {
    clearInterval(moving);
    js.close();
  }
});

test('a notice from the operator reaches the JavaScript client', async () => {
  const js = new RelayClient(server.ws, { name: 'node' });
  await js.ready;
  const notice = js.once('notice');
  const response = await fetch(`${server.admin}/api/notice`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ text: 'restart in 5 minutes' }),
  });
  assert.equal(response.status, 200);
  assert.equal(await notice, 'restart in 5 minutes');
  js.close();
});

test('a compact client and a plain one see each other the same', async () => {
  const plain = new RelayClient(server.ws, { name: 'plain' });
  const compact = new RelayClient(server.ws, { name: 'compact', compact: true });
  const [plainId, compactId] = await Promise.all([plain.ready, compact.ready]);
  let step = 0;
  const moving = setInterval(() => {
    step += 1;
    plain.move({ position: [10 + step * 0.25, 0, 5], rotation: [0, 90, 0], zone: 'compact-zone', extra: { emote: '"wave"' } });
    compact.move({ position: [20, 1.5, 5 - step * 0.5], zone: 'compact-zone', state: { moving: true, sprinting: false, sneaking: false, jumping: false, weapon_drawn: false, speed: 2.5 } });
  }, 50);
  try {
    await until(() => compact.players.has(plainId) && plain.players.has(compactId) && step > 10, 'both in view');
    const steps = step;
    await until(() => compact.players.get(plainId).transform.position[0] > 10 + steps * 0.25, 'the plain one moving');
    // What the compact client holds: the plain one's transform, to the centimetre.
    const heard = compact.players.get(plainId);
    assert.equal(heard.transform.zone, 'compact-zone');
    assert.deepEqual(heard.transform.rotation, [0, 90, 0]);
    assert.deepEqual(heard.transform.extra, { emote: '"wave"' });
    assert.equal(heard.transform.position[2], 5);
    assert.ok(heard.server_time_ms > 0);
    // And the plain client sees the compact one as before.
    const seen = plain.players.get(compactId);
    assert.equal(seen.transform.state.speed, 2.5);
    // Leaving is told to the compact client too.
    const left = compact.once('left');
    clearInterval(moving);
    plain.close();
    assert.equal(await left, plainId);
  } finally {
    clearInterval(moving);
    plain.close();
    compact.close();
  }
});

test('a client taking compact view datagrams hears every step, acknowledging as it moves', async () => {
  // Over WebSocket the view "datagrams" ride the stream; the records, their
  // baselines and the acknowledgements are the same as over WebTransport.
  const plain = new RelayClient(server.ws, { name: 'plain' });
  const viewer = new RelayClient(server.ws, { name: 'viewer', compact: true, datagrams: true });
  const [plainId, viewerId] = await Promise.all([plain.ready, viewer.ready]);
  const heard = [];
  viewer.on('relayed', (r) => r.player_id === plainId && heard.push(r.transform.position[0]));
  let step = 0;
  const moving = setInterval(() => {
    step += 1;
    plain.move({ position: [10 + step * 0.25, 0, 5], rotation: [0, 90, 0], zone: 'view-zone', extra: { emote: '"wave"' } });
    viewer.move({ position: [20, 1.5, 5], zone: 'view-zone' });
  }, 50);
  try {
    await until(() => heard.length > 20 && plain.players.has(viewerId), 'twenty steps heard');
    // Every step, in order, to the centimetre, against acknowledged baselines.
    const steps = heard.map((x) => Math.round((x - 10) / 0.25));
    for (let i = 1; i < steps.length; i++) assert.equal(steps[i], steps[i - 1] + 1, `${steps}`);
    const last = viewer.players.get(plainId).transform;
    assert.deepEqual([last.zone, last.rotation, last.extra], ['view-zone', [0, 90, 0], { emote: '"wave"' }]);
    assert.ok(viewer.compactView.acked.newest > 10, 'datagrams read and acknowledged');
    assert.equal(viewer.compactView.unresolved, 0);
  } finally {
    clearInterval(moving);
    plain.close();
    viewer.close();
  }
});
