// Rooms, lobby, RPC and replication (docs/PROTOCOL.md, section 9) over a
// SessionClient: what the Rust `RoomClient` is.
//
//   const rooms = new RoomClient(session);
//   const room = await rooms.create({ name: 'duel', max_players: 2 });
//   rooms.on('playerJoined', (player) => ...);
//   await rooms.ready(true);
//
// Requests return promises (RequestRejected carries the server's reason);
// events are emitted by name, and `rooms.room` holds the room as the
// events describe it (players and entities by id).

import {
  bool,
  bytes,
  decode,
  enumOf,
  map,
  string,
  struct,
  u32,
  u64,
  u8,
  unit,
  uuid,
  vec,
} from './bincode.js';
import { Emitter } from './socket.js';

export const ROOMS_CHANNEL = 2;
export const RoomAction = Object.freeze({
  create: 1,
  listRooms: 2,
  join: 3,
  leave: 4,
  ready: 5,
  start: 6,
  kick: 7,
  lock: 8,
  rpc: 9,
  custom: 10,
  spawn: 11,
  despawn: 12,
  update: 13,
  transfer: 14,
  state: 20,
  playerJoined: 21,
  playerLeft: 22,
  hostChanged: 23,
  started: 24,
  playerChanged: 25,
  rpcCall: 26,
  customMessage: 27,
  kicked: 28,
  list: 29,
  spawned: 30,
  despawned: 31,
  stateUpdate: 32,
  ownerChanged: 33,
});

const metadata = map(string, string);
export const RoomId = u32;
export const EntityId = u32;
export const CreateRoom = struct({ name: string, max_players: u8, metadata, private: bool });
export const Kick = struct({ player: uuid, reason: string });
export const RpcTarget = enumOf(['All', 'Others', ['One', uuid], 'Host']);
export const RpcRequest = struct({ method: string, target: RpcTarget, args: bytes });
export const RpcCall = struct({ from: uuid, method: string, args: bytes });
export const CustomRequest = struct({ channel: string, data: bytes });
export const CustomMessage = struct({ from: uuid, channel: string, data: bytes });
export const SpawnRequest = struct({ kind: string, state: bytes });
export const EntityUpdate = struct({ id: EntityId, state: bytes });
/** A sync of changed entities, stamped with the server's time (ms): what SnapshotBuffer interpolates by. */
export const StateSync = struct({ server_time_ms: u64, updates: vec(EntityUpdate) });
export const Transfer = struct({ id: EntityId, owner: uuid });
export const RoomPlayer = struct({
  id: uuid,
  name: string,
  host: bool,
  ready: bool,
  connected: bool,
  latency_ms: u32,
});
export const PlayerLeft = struct({ id: uuid, reason: string });
export const Entity = struct({ id: EntityId, owner: uuid, kind: string, state: bytes });
export const RoomState = struct({
  id: RoomId,
  name: string,
  max_players: u8,
  metadata,
  locked: bool,
  started: bool,
  players: vec(RoomPlayer),
  entities: vec(Entity),
  more_entities: u32,
});
export const RoomSummary = struct({
  id: RoomId,
  name: string,
  players: u8,
  max_players: u8,
  metadata,
  locked: bool,
  started: bool,
});

/** Event schemas by action, and the name each is emitted as. */
const EVENTS = new Map([
  [RoomAction.state, ['state', RoomState]],
  [RoomAction.playerJoined, ['playerJoined', RoomPlayer]],
  [RoomAction.playerLeft, ['playerLeft', PlayerLeft]],
  [RoomAction.hostChanged, ['hostChanged', uuid]],
  [RoomAction.started, ['started', unit]],
  [RoomAction.playerChanged, ['playerChanged', RoomPlayer]],
  [RoomAction.rpcCall, ['rpc', RpcCall]],
  [RoomAction.customMessage, ['custom', CustomMessage]],
  [RoomAction.kicked, ['kicked', string]],
  [RoomAction.list, ['list', vec(RoomSummary)]],
  [RoomAction.spawned, ['spawned', Entity]],
  [RoomAction.despawned, ['despawned', EntityId]],
  [RoomAction.stateUpdate, ['stateUpdate', StateSync]],
  [RoomAction.ownerChanged, ['ownerChanged', Transfer]],
]);

/**
 * Rooms over a connected SessionClient. Events (each with its decoded
 * value): state, playerJoined, playerLeft, hostChanged, started,
 * playerChanged, rpc, custom, kicked, list, spawned, despawned,
 * stateUpdate, ownerChanged.
 */
export class RoomClient extends Emitter {
  constructor(session) {
    super();
    this.session = session;
    /** The room this client is in, as the events describe it; null when in none. */
    this.room = null;
    session.on('message', ({ channel, action, content }) => {
      if (channel !== ROOMS_CHANNEL) return;
      const event = EVENTS.get(action);
      if (!event) return this.emit('error', new Error(`unknown rooms event ${action}`));
      let value;
      try {
        value = decode(event[1], content);
      } catch (err) {
        return this.emit('error', err);
      }
      this.apply(event[0], value);
      this.emit(event[0], value);
    });
  }

  /** Keeps `room` in step with an event. */
  apply(name, value) {
    const room = this.room;
    switch (name) {
      case 'state':
        this.room = {
          ...value,
          players: new Map(value.players.map((p) => [p.id, p])),
          entities: new Map(value.entities.map((e) => [e.id, e])),
        };
        return;
      case 'kicked':
        this.room = null;
        return;
    }
    if (!room) return;
    switch (name) {
      case 'playerJoined':
      case 'playerChanged':
        room.players.set(value.id, value);
        break;
      case 'playerLeft':
        room.players.delete(value.id);
        break;
      case 'hostChanged':
        for (const player of room.players.values()) player.host = player.id === value;
        break;
      case 'started':
        room.started = true;
        break;
      case 'spawned':
        room.entities.set(value.id, value);
        break;
      case 'despawned':
        room.entities.delete(value);
        break;
      case 'stateUpdate':
        for (const update of value.updates) {
          const entity = room.entities.get(update.id);
          if (entity) entity.state = update.state;
        }
        break;
      case 'ownerChanged': {
        const entity = room.entities.get(value.id);
        if (entity) entity.owner = value.owner;
        break;
      }
    }
  }

  request(action, schema, value) {
    return this.session.request(ROOMS_CHANNEL, action, schema, value);
  }

  /** Sends a request and resolves with the next `event` it brings. */
  async expect(event, action, schema, value) {
    let off;
    const next = new Promise((resolve) => {
      off = this.on(event, (got) => {
        off();
        resolve(got);
      });
    });
    try {
      await this.request(action, schema, value);
    } catch (err) {
      off();
      throw err;
    }
    return next;
  }

  /** Creates a room and joins it as host; resolves with its state. */
  create({ name, max_players = 8, metadata = {}, private: hidden = false }) {
    return this.expect('state', RoomAction.create, CreateRoom, { name, max_players, metadata, private: hidden });
  }

  /** The public rooms. */
  list() {
    return this.expect('list', RoomAction.listRooms, unit, null);
  }

  /** Joins a room by id; resolves with its state. */
  join(id) {
    return this.expect('state', RoomAction.join, RoomId, id);
  }

  async leave() {
    await this.request(RoomAction.leave, unit, null);
    this.room = null;
  }

  ready(ready = true) {
    return this.request(RoomAction.ready, bool, ready);
  }

  start() {
    return this.request(RoomAction.start, unit, null);
  }

  kick(player, reason) {
    return this.request(RoomAction.kick, Kick, { player, reason });
  }

  lock(locked = true) {
    return this.request(RoomAction.lock, bool, locked);
  }

  /** Calls `method` on `target` ('All', 'Others', 'Host' or { One: id }) with encoded `args`. */
  rpc(method, target, args = new Uint8Array()) {
    return this.request(RoomAction.rpc, RpcRequest, { method, target, args });
  }

  custom(channel, data) {
    return this.request(RoomAction.custom, CustomRequest, { channel, data });
  }

  /** Spawns an entity this client owns; resolves with it. */
  async spawn(kind, state) {
    const me = this.session.client;
    const spawned = new Promise((resolve) => {
      const off = this.on('spawned', (entity) => {
        if (entity.owner === me && entity.kind === kind) {
          off();
          resolve(entity);
        }
      });
    });
    await this.request(RoomAction.spawn, SpawnRequest, { kind, state });
    return spawned;
  }

  despawn(id) {
    return this.request(RoomAction.despawn, EntityId, id);
  }

  update(id, state) {
    return this.request(RoomAction.update, EntityUpdate, { id, state });
  }

  transfer(id, owner) {
    return this.request(RoomAction.transfer, Transfer, { id, owner });
  }
}
