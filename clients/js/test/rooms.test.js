// Rooms against a real `switchboard-server rooms` over WebSocket: create,
// join, ready, start, RPC, custom messages, entities, and the refusals.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { decode, encode, string, struct, f32 } from '../src/bincode.js';
import { RequestRejected, SessionClient } from '../src/session.js';
import { RoomClient } from '../src/rooms.js';
import { startServer, until } from './support.js';

let server;
before(async () => {
  server = await startServer(['rooms']);
});
after(() => server.stop());

async function player(name) {
  const session = new SessionClient(server.ws, { name });
  await session.connect();
  return new RoomClient(session);
}

const Position = struct({ x: f32, y: f32 });

test('create, join, ready, start, RPC and entities between two JavaScript players', async () => {
  const ann = await player('ann');
  const bob = await player('bob');
  const created = await ann.create({ name: 'duel', max_players: 2, metadata: { map: 'dunes' } });
  assert.equal(created.name, 'duel');
  assert.deepEqual(created.metadata, { map: 'dunes' });
  assert.equal(created.players[0].host, true);

  const listed = await bob.list();
  assert.ok(listed.some((room) => room.id === created.id && room.players === 1));

  const joined = await bob.join(created.id);
  assert.equal(joined.players.length, 2);
  await until(() => ann.room.players.size === 2, 'ann sees bob');

  // Only the host starts, and only when everyone is ready.
  await assert.rejects(bob.start(), RequestRejected);
  await ann.ready(true);
  await assert.rejects(ann.start(), RequestRejected);
  await bob.ready(true);
  const started = bob.once('started');
  await ann.start();
  await started;
  assert.equal(bob.room.started, true);

  // RPC to the host, stamped with the caller by the server.
  const rpc = ann.once('rpc');
  await bob.rpc('greet', 'Host', encode(string, 'hi host'));
  const call = await rpc;
  assert.equal(call.from, bob.session.client);
  assert.equal(call.method, 'greet');
  assert.equal(decode(string, call.args), 'hi host');

  // To one player by id.
  const whisper = bob.once('rpc');
  await ann.rpc('whisper', { One: bob.session.client }, encode(string, 'psst'));
  assert.equal(decode(string, (await whisper).args), 'psst');

  // Custom messages reach the others.
  const custom = ann.once('custom');
  await bob.custom('chat', new TextEncoder().encode('gg'));
  assert.equal(new TextDecoder().decode((await custom).data), 'gg');

  // Entities: spawn, update (synced), transfer, and owner-only rules.
  const tank = await ann.spawn('tank', encode(Position, { x: 1, y: 2 }));
  await until(() => bob.room.entities.has(tank.id), 'bob sees the tank');
  await assert.rejects(bob.update(tank.id, encode(Position, { x: 9, y: 9 })), RequestRejected);
  await ann.update(tank.id, encode(Position, { x: 3, y: 4 }));
  await until(() => decode(Position, bob.room.entities.get(tank.id).state).x === 3, 'the synced state');
  await ann.transfer(tank.id, bob.session.client);
  await until(() => bob.room.entities.get(tank.id).owner === bob.session.client, 'the new owner');
  await bob.despawn(tank.id);
  await until(() => !ann.room.entities.has(tank.id), 'the tank is gone');

  ann.session.close();
  bob.session.close();
});

test('a full room refuses with the reason, and joins after the start are refused', async () => {
  const ann = await player('ann');
  const bob = await player('bob');
  const cat = await player('cat');
  const room = await ann.create({ name: 'pair', max_players: 2 });
  await bob.join(room.id);
  await assert.rejects(cat.join(room.id), (err) => err instanceof RequestRejected && /full/.test(err.reason));
  await assert.rejects(cat.join(9999), (err) => err.reason === 'no such room');
  // A started room takes nobody new.
  await ann.leave();
  const solo = await ann.create({ name: 'solo', max_players: 4 });
  await ann.ready(true);
  await ann.start();
  await assert.rejects(cat.join(solo.id), (err) => err instanceof RequestRejected && /started/.test(err.reason));
  for (const c of [ann, bob, cat]) c.session.close();
});
