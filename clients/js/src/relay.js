// The real-time relay (docs/PROTOCOL.md, section 10) over a SwitchboardSocket:
// transforms relayed to the other players in your zone.
//
//   const relay = new RelayClient('ws://127.0.0.1:7201/', { name: 'ada' });
//   relay.on('relayed', ({ player_id, transform }) => draw(player_id, transform));
//   await relay.ready;                       // resolves with your player id
//   relay.move({ position: [1, 0, 2], zone: 'town' });

import { array, bool, decode, f32, fixedBytes, map, option, string, struct, u32, u64 } from './bincode.js';
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
  redirect: 8,
  handover: 9,
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
/** A relay's ticket for a player handed over to another relay (opaque). */
export const Handover = struct({
  player_id: u32,
  name: string,
  bot: bool,
  process: u32,
  expires_ms: u64,
  nonce: fixedBytes(16),
  mac: fixedBytes(32),
});
export const Redirect = struct({ addr: string, websocket: option(string), ticket: Handover });

const EVENTS = new Map([
  [RelayAction.welcome, ['welcome', u32]],
  [RelayAction.relayed, ['relayed', Relayed]],
  [RelayAction.left, ['left', u32]],
  [RelayAction.error, ['error', string]],
  [RelayAction.notice, ['notice', string]],
]);

/**
 * A relay player. Events: welcome (your id), relayed (`Relayed`), left (a
 * player id), error (the relay's message), notice (the operator's),
 * redirect (handed over to the relay of your zone: the same id there),
 * close. `players` holds the last transform of everyone in your zone.
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
    this.options = options;
    /** Whether the last welcome came after a handover to another relay. */
    this.handedOver = false;
    this.attach(url, () =>
      this.socket.send(RELAY_CHANNEL, RelayAction.hello, RelayHello, {
        name: options.name ?? 'web player',
        bot: options.bot ?? false,
      }),
    );
    /** Resolves with this player's id once the relay welcomed it. */
    this.ready = new Promise((resolve, reject) => {
      this.on('welcome', resolve);
      this.on('close', (close) => reject(new Error(close.reason)));
    });
  }

  /** Connects to `url`, says `greet` once open, and takes its events. */
  attach(url, greet) {
    const socket = new SwitchboardSocket(url, this.options.socket);
    this.socket = socket;
    socket.on('open', greet);
    socket.on('message', ({ channel, action, content }) => {
      if (channel !== RELAY_CHANNEL) return;
      if (action === RelayAction.redirect) return this.follow(decode(Redirect, content));
      const event = EVENTS.get(action);
      if (!event) return;
      const value = decode(event[1], content);
      if (event[0] === 'welcome') this.id = value;
      if (event[0] === 'relayed') this.players.set(value.player_id, value);
      if (event[0] === 'left') this.players.delete(value);
      this.emit(event[0], value);
    });
    // A socket left for another relay closes without a word to the game.
    socket.on('close', (close) => socket === this.socket && this.emit('close', close));
  }

  /**
   * The zone lives on another relay of the service: go there with the
   * ticket, keeping the id (a `redirect` event, then `welcome` again). A
   * relay without a WebSocket address to give serves the player itself.
   */
  follow(redirect) {
    if (!redirect.websocket) return;
    const previous = this.socket;
    this.players.clear();
    this.handedOver = true;
    this.attach(`ws://${redirect.websocket}/`, () =>
      this.socket.send(RELAY_CHANNEL, RelayAction.handover, Handover, redirect.ticket),
    );
    previous.close('handed over');
    this.emit('redirect', redirect);
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
