// The real-time relay (docs/PROTOCOL.md, section 10) over a SwitchboardSocket:
// transforms relayed to the other players in your zone.
//
//   const relay = new RelayClient('ws://127.0.0.1:7201/', { name: 'ada' });
//   relay.on('relayed', ({ player_id, transform }) => draw(player_id, transform));
//   await relay.ready;                       // resolves with your player id
//   relay.move({ position: [1, 0, 2], zone: 'town' });

import { DecodeError, Reader, array, bool, bytes, decode, f32, fixedBytes, map, option, string, struct, tuple, u16, u32, u64, vec } from './bincode.js';
import { CompactDecoder, ViewAck, ViewDecoder } from './compact.js';
import { Emitter, SwitchboardSocket } from './socket.js';

export const RELAY_CHANNEL = 3;
/** Your own transforms, as datagrams over WebTransport (section 10). */
export const RELAY_MOVES_CHANNEL = 4;
/** Others' transforms, as datagrams over WebTransport (section 10). */
export const RELAY_VIEW_CHANNEL = 5;
/** How old a transform may be, behind the newest batch, and how long a player who left is remembered. */
const VIEW_MEMORY_MS = 10_000;
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
  options: 10,
  batch: 11,
  compact: 12,
  compactView: 13,
  viewAck: 14,
});

export const RelayHello = struct({ name: string, bot: bool });
/** What a client asks of the relay (sent after the hello); fields are only ever appended. */
export const RelayOptions = struct({
  batch: bool,
  compact: bool,
  datagrams: bool,
  webtransport_redirects: bool,
  /** Compact view datagrams (section 10): asked for with `compact` over WebTransport. */
  compact_datagrams: bool,
});
/** Several relay messages in one (action 11): each as it would have come alone. */
export const Batch = struct({ tick: u64, server_time_ms: u64, messages: vec(tuple(u16, bytes)) });
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

/**
 * A redirect as the relay sends it: to a player on QUIC or WebTransport with
 * the other relay's QUIC address appended (`quic`, null otherwise), and to a
 * WebTransport player that follows WebTransport redirects the hashes of its
 * WebTransport certificates after it (`webtransport`: 64 hex digits each,
 * empty when it serves one browsers trust; null when it has no WebTransport
 * or they were not sent).
 */
export function readRedirect(bytes) {
  const r = new Reader(bytes);
  const redirect = Redirect.read(r);
  redirect.quic = r.done() ? null : option(string).read(r);
  redirect.webtransport = r.done() ? null : option(vec(string)).read(r);
  if (!r.done()) throw new DecodeError(`${bytes.length - r.pos} bytes left after a redirect`);
  if (redirect.webtransport && !redirect.webtransport.every((hash) => /^[0-9a-f]{64}$/i.test(hash))) {
    throw new DecodeError('a redirect whose WebTransport hashes are not SHA-256 in hex');
  }
  return redirect;
}

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
 * With `compact: true` the relay sends transforms as compact records
 * (a few bytes each instead of about fifty; positions to the relay's
 * precision, 1 cm by default): the events are the same. Over WebTransport
 * (`socket: { webtransport }`) transforms travel as datagrams both ways
 * (`datagrams`, on by default there): a lost one delays nothing behind it,
 * and a late one older than what you have is dropped. With `compact` too,
 * others' transforms come as compact view datagrams, each against what this
 * client acknowledged (with its moves).
 */
export class RelayClient extends Emitter {
  /**
   * @param {string} url `ws://host:port/` of the relay's WebSocket port
   * @param {{name?: string, bot?: boolean, compact?: boolean, datagrams?: boolean, socket?: object}} [options]
   */
  constructor(url, options = {}) {
    super();
    this.id = null;
    this.players = new Map();
    this.options = options;
    /** Whether the last welcome came after a handover to another relay. */
    this.handedOver = false;
    this.attach(url, () => {
      this.socket.send(RELAY_CHANNEL, RelayAction.hello, RelayHello, {
        name: options.name ?? 'web player',
        bot: options.bot ?? false,
      });
      this.askOptions();
    });
    /** Resolves with this player's id once the relay welcomed it. */
    this.ready = new Promise((resolve, reject) => {
      this.on('welcome', resolve);
      this.on('close', (close) => reject(new Error(close.reason)));
    });
  }

  /** Whether transforms travel on the datagram channels (4 and 5): plain, or compact view datagrams. */
  get datagrams() {
    return this.options.datagrams ?? this.socket.transport === 'webtransport';
  }

  /**
   * Asks the relay for compact transforms or datagrams, if this client wants
   * them; over WebTransport, to be handed over to another relay's
   * WebTransport (`webtransport_redirects`).
   */
  askOptions() {
    const compact = this.options.compact ?? false;
    const datagrams = this.datagrams;
    const webtransport_redirects = this.socket.transport === 'webtransport';
    if (!compact && !datagrams && !webtransport_redirects) return;
    this.socket.send(RELAY_CHANNEL, RelayAction.options, RelayOptions, {
      batch: false,
      compact,
      datagrams: datagrams && !compact,
      webtransport_redirects,
      compact_datagrams: datagrams && compact,
    });
  }

  /** Connects to `url` (with `socketOptions`), says `greet` once open, and takes its events. */
  attach(url, greet, socketOptions = this.options.socket) {
    const socket = new SwitchboardSocket(url, socketOptions);
    this.socket = socket;
    // A new connection's compact stream and view start from nothing.
    this.compact = new CompactDecoder();
    this.compactView = new ViewDecoder();
    this.view = { newest: new Map(), nowMs: 0 };
    socket.on('open', greet);
    socket.on('message', ({ channel, action, content }) => {
      if (channel !== RELAY_CHANNEL && channel !== RELAY_VIEW_CHANNEL) return;
      if (action === RelayAction.batch) return this.takeBatch(content, channel === RELAY_VIEW_CHANNEL);
      if (action === RelayAction.compactView && channel === RELAY_VIEW_CHANNEL) return this.takeCompactView(content);
      if (channel !== RELAY_CHANNEL) return;
      if (action === RelayAction.compact) return this.takeCompact(content);
      this.take(action, content);
    });
    // A socket left for another relay closes without a word to the game.
    socket.on('close', (close) => socket === this.socket && this.emit('close', close));
  }

  /** One relay message, as it came alone or out of a compact frame. */
  take(action, content) {
    if (action === RelayAction.redirect) {
      let redirect;
      try {
        redirect = readRedirect(content);
      } catch (err) {
        this.socket.close(`a relay redirect: ${err.message}`);
        return;
      }
      return this.follow(redirect);
    }
    const event = EVENTS.get(action);
    if (!event) return;
    this.show(event[0], decode(event[1], content));
  }

  show(kind, value) {
    if (kind === 'welcome') this.id = value;
    if (kind === 'relayed') this.players.set(value.player_id, value);
    if (kind === 'left') this.players.delete(value);
    this.emit(kind, value);
  }

  /**
   * A batch: its messages one by one. On the view channel only others'
   * transforms, each kept if newer than what this client has of its sender
   * (datagrams come in any order), and none of a player from before it left.
   */
  takeBatch(content, view) {
    let batch;
    try {
      batch = decode(Batch, content);
    } catch (err) {
      this.socket.close(`a relay batch: ${err.message}`);
      return;
    }
    const at = batch.server_time_ms;
    this.view.nowMs = Math.max(this.view.nowMs, at);
    for (const [action, message] of batch.messages) {
      if (view && action !== RelayAction.relayed) continue;
      if (action === RelayAction.relayed) {
        const relayed = decode(Relayed, message);
        if (!this.newer(relayed.player_id, relayed.server_time_ms)) continue;
        this.show('relayed', relayed);
        continue;
      }
      if (action === RelayAction.left) this.view.newest.set(decode(u32, message), at);
      if (action !== RelayAction.batch && action !== RelayAction.compact) this.take(action, message);
    }
  }

  /** Whether `player`'s transform stamped `at` is newer than what this client has; it is if so. */
  newer(player, at) {
    const { newest, nowMs } = this.view;
    if (at + VIEW_MEMORY_MS < nowMs) return false;
    const known = newest.get(player);
    if (known !== undefined && at <= known) return false;
    if (known === undefined && newest.size >= 4096) {
      for (const [id, when] of newest) if (when < nowMs - VIEW_MEMORY_MS) newest.delete(id);
    }
    newest.set(player, at);
    return true;
  }

  /** A compact view datagram: each transform newer than what this client has of its sender. */
  takeCompactView(content) {
    let frame;
    try {
      frame = this.compactView.read(content);
    } catch (err) {
      this.socket.close(`compact view: ${err.message}`);
      return;
    }
    if (!frame) return;
    this.view.nowMs = Math.max(this.view.nowMs, frame.server_time_ms);
    for (const { player_id, server_time_ms, transform } of frame.records) {
      if (this.newer(player_id, server_time_ms)) this.show('relayed', { player_id, server_time_ms, transform });
    }
  }

  /** A compact frame: its transforms, leavings and other messages, in order. */
  takeCompact(content) {
    let frame;
    try {
      frame = this.compact.read(content);
    } catch (err) {
      // The stream cannot be followed past it.
      this.socket.close(`compact transforms: ${err.message}`);
      return;
    }
    for (const record of frame.records) {
      if (record.type === 'transform') {
        const { player_id, server_time_ms, transform } = record;
        this.show('relayed', { player_id, server_time_ms, transform });
      } else if (record.type === 'left') {
        this.show('left', record.player_id);
      } else {
        this.take(record.action, record.content);
      }
    }
  }

  /**
   * The zone lives on another relay of the service: go there with the
   * ticket, keeping the id (a `redirect` event, then `welcome` again). Over
   * WebTransport to the other relay's WebTransport, trusting the certificate
   * hashes the redirect carries (its WebSocket if WebTransport does not
   * open); otherwise to its WebSocket. A relay with neither to give serves
   * the player itself.
   */
  follow(redirect) {
    const web = this.socket.transport === 'webtransport' && redirect.webtransport && redirect.quic;
    if (!web && !redirect.websocket) return;
    const previous = this.socket;
    this.players.clear();
    this.handedOver = true;
    const greet = () => {
      this.socket.send(RELAY_CHANNEL, RelayAction.handover, Handover, redirect.ticket);
      this.askOptions();
    };
    const socket = this.options.socket ?? {};
    const webtransport = web
      ? { ...socket.webtransport, url: `https://${redirect.quic}/`, hashes: redirect.webtransport }
      : null;
    const url = redirect.websocket ? `ws://${redirect.websocket}/` : null;
    this.attach(url, greet, { ...socket, webtransport });
    previous.close('handed over');
    this.emit('redirect', redirect);
  }

  /**
   * Sends a transform. Missing fields take defaults: rotation [0, 0, 0],
   * zone 'default', no movement state, no extra fields.
   */
  move({ position, rotation = [0, 0, 0], zone = 'default', state = null, extra = {} }) {
    const channel = this.datagrams ? RELAY_MOVES_CHANNEL : RELAY_CHANNEL;
    // What this client read of its compact view, just before the move: on
    // the moves channel the newest wins, and the move must be it.
    const ack = this.compactView.ack();
    if (ack) this.socket.send(RELAY_MOVES_CHANNEL, RelayAction.viewAck, ViewAck, ack);
    this.socket.send(channel, RelayAction.transform, Transform, { position, rotation, zone, state, extra });
  }

  close(reason = 'bye') {
    this.socket.close(reason);
  }
}
