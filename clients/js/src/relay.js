// The real-time relay (docs/PROTOCOL.md, section 10) over a SwitchboardSocket:
// transforms relayed to the other players in your zone.
//
//   const relay = new RelayClient('ws://127.0.0.1:7201/', { name: 'ada' });
//   relay.on('relayed', ({ player_id, transform }) => draw(player_id, transform));
//   await relay.ready;                       // resolves with your player id
//   relay.move({ position: [1, 0, 2], zone: 'town' });

import { array, bool, f32, map, option, string, struct, u32, u64, decode } from './bincode.js';
import { Emitter, SwitchboardSocket } from './socket.js';

export const RELAY_CHANNEL = 3;
export const RelayAction = Object.freeze({
  hello: 1,
  transform: 2,
  welcome: 3,
  relayed: 4,
  left: 5,
  error: 6,
  notice: 7,
});

export const RelayHello = struct({ name: string, bot: bool });
export const MovementState = struct({
  moving: bool,
  sprinting: bool,
  sneaking: bool,
  jumping: bool,
  weapon_drawn: bool,
  speed: f32,
});
export const Transform = struct({
  position: array(f32, 3),
  rotation: array(f32, 3),
  zone: string,
  state: option(MovementState),
  extra: map(string, string),
});
export const Relayed = struct({ player_id: u32, server_time_ms: u64, transform: Transform });

const EVENTS = new Map([
  [RelayAction.welcome, ['welcome', u32]],
  [RelayAction.relayed, ['relayed', Relayed]],
  [RelayAction.left, ['left', u32]],
  [RelayAction.error, ['error', string]],
  [RelayAction.notice, ['notice', string]],
]);

/**
 * A relay player. Events: welcome (your id), relayed (`Relayed`), left (a
 * player id), error (the relay's message), notice (the operator's), close.
 * `players` holds the last transform of everyone in your zone.
 */
export class RelayClient extends Emitter {
  /**
   * @param {string} url `ws://host:port/` of the relay's WebSocket port
   * @param {{name?: string, bot?: boolean, socket?: object}} [options]
   */
  constructor(url, options = {}) {
    super();
    this.id = null;
    this.players = new Map();
    this.socket = new SwitchboardSocket(url, options.socket);
    this.socket.on('open', () => {
      this.socket.send(RELAY_CHANNEL, RelayAction.hello, RelayHello, {
        name: options.name ?? 'web player',
        bot: options.bot ?? false,
      });
    });
    this.socket.on('message', ({ channel, action, content }) => {
      const event = channel === RELAY_CHANNEL && EVENTS.get(action);
      if (!event) return;
      const value = decode(event[1], content);
      if (event[0] === 'welcome') this.id = value;
      if (event[0] === 'relayed') this.players.set(value.player_id, value);
      if (event[0] === 'left') this.players.delete(value);
      this.emit(event[0], value);
    });
    this.socket.on('close', (close) => this.emit('close', close));
    /** Resolves with this player's id once the relay welcomed it. */
    this.ready = new Promise((resolve, reject) => {
      this.on('welcome', resolve);
      this.on('close', (close) => reject(new Error(close.reason)));
    });
  }

  /**
   * Sends a transform. Missing fields take defaults: rotation [0, 0, 0],
   * zone 'default', no movement state, no extra fields.
   */
  move({ position, rotation = [0, 0, 0], zone = 'default', state = null, extra = {} }) {
    this.socket.send(RELAY_CHANNEL, RelayAction.transform, Transform, { position, rotation, zone, state, extra });
  }

  close(reason = 'bye') {
    this.socket.close(reason);
  }
}
