// One Switchboard connection over WebSocket (docs/PROTOCOL.md, sections 1-5):
// the hello handshake, pings and pongs, the close frame with its code and
// reason, keep-alive and idle timeout. What the Rust `ExtendedTcpSocket` is.
//
//   const socket = new SwitchboardSocket('ws://127.0.0.1:7101/');
//   socket.on('open', () => socket.send(16, 1, string, 'hello'));
//   socket.on('message', ({ channel, action, content }) => ...);
//   socket.on('close', ({ code, reason, byPeer }) => ...);

import { Reader, u16, u64, string } from './bincode.js';
import {
  DEFAULT_LIMITS,
  FrameError,
  decodeEnvelope,
  encodeEnvelope,
  encodeFrame,
  encodeMessage,
  inflate,
  splitFrame,
} from './frame.js';
import { WebTransportTransport } from './webtransport.js';

export const PROTOCOL_VERSION = 1;
const MAGIC = [0x53, 0x57, 0x42, 0x44]; // "SWBD"

/** Channel 0's actions. */
export const SYSTEM = Object.freeze({ channel: 0, ping: 1, pong: 2, close: 3 });

/** The relay's moves and view channels: datagrams wherever the transport has them (section 11a). */
export const DATAGRAM_CHANNELS = Object.freeze([4, 5]);
/** Channel 5, the relay's view: many senders, no newest-wins by the transport. */
const VIEW_CHANNEL = 5;
/** Channels a receiver keeps a newest sequence for (section 11a). */
const MAX_SEQUENCED_CHANNELS = 32;

/** Close codes (section 4). */
export const CloseCode = Object.freeze({
  NORMAL: 1000,
  GOING_AWAY: 1001,
  PROTOCOL_ERROR: 1002,
  VERSION_MISMATCH: 1003,
  ABUSE: 1007,
  SLOW_CONSUMER: 1008,
  REFUSED: 1010,
  TIMEOUT: 1011,
  REPLACED: 1012,
  SERVER_FULL: 1013,
  KICKED: 4000,
});

/** A minimal signal: `on(event, slot)` returns a function that disconnects it. */
export class Emitter {
  constructor() {
    this.slots = new Map();
  }

  on(event, slot) {
    if (!this.slots.has(event)) this.slots.set(event, new Set());
    this.slots.get(event).add(slot);
    return () => this.slots.get(event)?.delete(slot);
  }

  /** Resolves with the next emission of `event`. */
  once(event) {
    return new Promise((resolve) => {
      const off = this.on(event, (value) => {
        off();
        resolve(value);
      });
    });
  }

  emit(event, value) {
    for (const slot of [...(this.slots.get(event) ?? [])]) {
      try {
        slot(value);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}

const CLOSE_CONTENT = {
  write(w, v) {
    u16.write(w, v.code);
    string.write(w, v.reason);
  },
  read: (r) => ({ code: u16.read(r), reason: string.read(r) }),
};

/**
 * A Switchboard connection. Events: `open` (handshake done), `message`
 * (`{ channel, action, content }`), `error` (an Error), `close`
 * (`{ code, reason, byPeer, lost }`, always last; `lost` with code null when
 * the connection broke without a close frame).
 */
export class SwitchboardSocket extends Emitter {
  /**
   * @param {string|null} url `ws://host:port/` or `wss://host:port/`; in node, with
   *   `transport`, `tcp://host:port` or `tls://host:port`; null with
   *   `webtransport` alone (no WebSocket to fall back to)
   * @param {object} [options]
   * @param {typeof WebSocket} [options.WebSocket] the WebSocket class (default: the global one)
   * @param {Function} [options.transport] node only: the class `tcpTransport()`
   *   of `switchboard-client/node` returns, for the TCP port (TLS off this machine)
   * @param {number} [options.keepaliveMs] ping after this long without sending (5000)
   * @param {number} [options.idleTimeoutMs] give up after this long without hearing anything (15000)
   * @param {number} [options.handshakeTimeoutMs] (5000; from the WebSocket's start when WebTransport fell back)
   * @param {{maxFrameLen: number, maxDecompressedLen: number}} [options.limits]
   * @param {{url: string, hashes?: string[], openTimeoutMs?: number}} [options.webtransport]
   *   the server's WebTransport (what `webTransportOffer()` resolves with):
   *   tried first where the browser has WebTransport, `url` (WebSocket) if it
   *   does not open
   * @param {number[]} [options.sequencedChannels] application channels (16 and
   *   up) whose messages only the newest of matters: datagrams over
   *   WebTransport (the relay's channels 4 and 5 always are)
   */
  constructor(url, options = {}) {
    super();
    this.limits = options.limits ?? DEFAULT_LIMITS;
    this.keepaliveMs = options.keepaliveMs ?? 5000;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 15000;
    this.state = 'connecting';
    this.rttMs = null;
    /** Frames received but not yet handled, while one is being inflated. */
    this.inbox = Promise.resolve();
    this.inflating = 0;
    /** Channels sent as datagrams where the transport has them. */
    this.sequenced = new Set([...DATAGRAM_CHANNELS, ...(options.sequencedChannels ?? []).filter((c) => c >= 16)]);
    this.nextSequence = 0;
    this.datagramStats = { sent: 0, sentOnStream: 0, delivered: 0, stale: 0, refused: 0 };
    const webSocket = () => {
      if (options.transport) return new options.transport(url, this.limits);
      const WS = options.WebSocket ?? globalThis.WebSocket;
      if (!WS) throw new Error('no WebSocket class: pass options.WebSocket (node < 22: run with --experimental-websocket)');
      return new WS(url);
    };
    const web = options.webtransport;
    if (web && typeof globalThis.WebTransport === 'function') {
      // WebTransport first; WebSocket if it cannot open (UDP blocked, an
      // old server), with one API either way. With no `url` (a server
      // reached over WebTransport alone), there is no fallback.
      this.fallback = url ? webSocket : null;
      this.use(new WebTransportTransport(web.url, this.limits, web));
    } else {
      this.use(webSocket());
    }
    this.handshakeTimeoutMs = options.handshakeTimeoutMs ?? 5000;
    this.armHandshake();
  }

  armHandshake() {
    clearTimeout(this.handshakeTimer);
    this.handshakeTimer = setTimeout(() => {
      if (this.state === 'connecting') this.fail(CloseCode.TIMEOUT, 'handshake timed out');
    }, this.handshakeTimeoutMs);
  }

  /** Which transport carries the connection: 'webtransport', 'websocket', or a node transport's kind ('tcp'). */
  get transport() {
    if (this.ws instanceof WebTransportTransport) return 'webtransport';
    return this.ws.kind ?? 'websocket';
  }

  /** Wires `transport`'s events to this socket. */
  use(transport) {
    this.ws = transport;
    transport.binaryType = 'arraybuffer';
    transport.onopen = () => {
      this.lastSent = this.lastHeard = Date.now();
      transport.send(helloFrame());
    };
    transport.onmessage = (event) => this.receive(new Uint8Array(event.data));
    transport.ondatagram = (bytes) => this.takeDatagram(bytes);
    transport.onerror = () => {};
    // A transport that refused the server (its identity not trusted) says
    // why, and that is final; a lost connection may be retried.
    transport.onclose = (event) => {
      if (event?.neverOpened && this.fallback && this.state === 'connecting') {
        const next = this.fallback;
        this.fallback = null;
        this.use(next());
        return this.armHandshake();
      }
      this.finish(
        event?.refused
          ? { code: CloseCode.REFUSED, reason: event.reason, byPeer: false }
          : { code: null, reason: event?.reason || 'connection lost', byPeer: false, lost: true },
      );
    };
  }

  /**
   * Sends `value` encoded with `schema` on `channel` / `action`: as a
   * datagram on a sequenced channel when the transport has datagrams and it
   * fits, else as a frame.
   */
  send(channel, action, schema, value) {
    if (this.state === 'open' && this.ws.sendDatagram && this.sequenced.has(channel)) {
      const envelope = encodeEnvelope(channel, action, schema, value);
      const datagram = new Uint8Array(4 + envelope.length);
      new DataView(datagram.buffer).setUint32(0, this.nextSequence, false);
      this.nextSequence = (this.nextSequence + 1) >>> 0;
      datagram.set(envelope, 4);
      if (this.ws.sendDatagram(datagram)) {
        this.datagramStats.sent++;
        this.lastSent = Date.now();
        return;
      }
      this.datagramStats.sentOnStream++;
      return this.sendFrame(encodeFrame(envelope));
    }
    this.sendFrame(encodeMessage(channel, action, schema, value));
  }

  /**
   * One datagram: delivered as a message if it is newest on its channel
   * (any order on the relay's view channel); anything that is not a message
   * of a channel that may come so is counted and dropped, never fatal.
   */
  takeDatagram(bytes) {
    if (this.state !== 'open') return;
    this.lastHeard = Date.now();
    let message;
    try {
      if (bytes.length < 6) throw new FrameError('short');
      message = decodeEnvelope(bytes.subarray(4));
    } catch {
      this.datagramStats.refused++;
      return;
    }
    const { channel } = message;
    if (channel < 16 && !DATAGRAM_CHANNELS.includes(channel)) {
      this.datagramStats.refused++;
      return;
    }
    if (channel !== VIEW_CHANNEL) {
      const sequence = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, false);
      this.newest ??= new Map();
      const newest = this.newest.get(channel);
      if (newest === undefined && this.newest.size >= MAX_SEQUENCED_CHANNELS) {
        this.datagramStats.refused++;
        return;
      }
      // Newer: not the same, and less than half the sequence space ahead.
      if (newest !== undefined && (sequence === newest || ((sequence - newest) >>> 0) >= 2 ** 31)) {
        this.datagramStats.stale++;
        return;
      }
      this.newest.set(channel, sequence);
    }
    this.datagramStats.delivered++;
    this.emit('message', { ...message, datagram: true });
  }

  /** Sends a whole frame as it is. */
  sendFrame(frame) {
    if (this.state !== 'open' && this.state !== 'connecting') throw new Error(`the connection is ${this.state}`);
    if (this.state === 'connecting') {
      (this.queued ??= []).push(frame);
      return;
    }
    this.ws.send(frame);
    this.lastSent = Date.now();
  }

  /** Closes gracefully: the close frame with `code` and `reason`, then the WebSocket. */
  close(reason = 'closed', code = CloseCode.NORMAL) {
    if (this.state === 'closed' || this.state === 'closing') return;
    if (this.state === 'open') this.ws.send(encodeMessage(0, SYSTEM.close, CLOSE_CONTENT, { code, reason }));
    this.state = 'closing';
    this.closing = { code, reason, byPeer: false };
    this.ws.close(1000);
  }

  /** Drops the connection without a goodbye, as a network failure would (for tests). */
  drop() {
    this.ws.close(1000);
  }

  receive(frame) {
    this.lastHeard = Date.now();
    let header;
    try {
      header = splitFrame(frame, this.limits);
    } catch (err) {
      return this.fail(CloseCode.PROTOCOL_ERROR, err.message);
    }
    if (!header.compressed && this.inflating === 0) return this.handle(header.body);
    // A compressed frame is inflated asynchronously; frames behind it wait
    // their turn, so that order is kept.
    this.inflating++;
    this.inbox = this.inbox
      .then(async () => {
        const payload = header.compressed ? await inflate(header.body, this.limits.maxDecompressedLen) : header.body;
        this.handle(payload);
      })
      .catch((err) => this.fail(CloseCode.PROTOCOL_ERROR, err.message))
      .finally(() => this.inflating--);
  }

  handle(payload) {
    if (this.state === 'closed') return;
    if (this.state === 'connecting') return this.handshake(payload);
    let message;
    try {
      message = decodeEnvelope(payload);
    } catch (err) {
      return this.fail(CloseCode.PROTOCOL_ERROR, err.message);
    }
    if (message.channel !== SYSTEM.channel) return this.emit('message', message);
    switch (message.action) {
      case SYSTEM.ping:
        // The stamp goes back as it came.
        this.ws.send(encodeFrame(concat([0, SYSTEM.pong], message.content)));
        this.lastSent = Date.now();
        break;
      case SYSTEM.pong: {
        const sent = Number(u64.read(new Reader(message.content)));
        this.rttMs = Math.max(0, (Date.now() - this.opened) - sent);
        break;
      }
      case SYSTEM.close: {
        let close;
        try {
          close = CLOSE_CONTENT.read(new Reader(message.content));
        } catch {
          close = { code: CloseCode.PROTOCOL_ERROR, reason: 'bad close frame' };
        }
        this.finish({ ...close, byPeer: true });
        this.ws.close(1000);
        break;
      }
      default:
        this.emit('error', new Error(`unknown system action ${message.action}`));
    }
  }

  handshake(payload) {
    const magic = payload.length === 6 && MAGIC.every((b, i) => payload[i] === b);
    if (!magic) return this.fail(CloseCode.PROTOCOL_ERROR, 'the peer is not a Switchboard peer');
    const version = (payload[4] << 8) | payload[5];
    if (version !== PROTOCOL_VERSION) {
      return this.fail(CloseCode.VERSION_MISMATCH, `protocol version mismatch: ours ${PROTOCOL_VERSION}, theirs ${version}`);
    }
    clearTimeout(this.handshakeTimer);
    this.state = 'open';
    this.opened = Date.now();
    for (const frame of this.queued ?? []) this.ws.send(frame);
    this.queued = null;
    this.timer = setInterval(() => this.tick(), Math.min(this.keepaliveMs, 1000));
    this.emit('open');
  }

  /** Keep-alive: a ping after a quiet spell; the idle timeout. */
  tick() {
    const now = Date.now();
    if (now - this.lastHeard > this.idleTimeoutMs) return this.fail(CloseCode.TIMEOUT, 'idle timeout');
    if (now - this.lastSent >= this.keepaliveMs) {
      this.ws.send(encodeMessage(0, SYSTEM.ping, u64, now - this.opened));
      this.lastSent = now;
    }
  }

  /** Ends the connection because of a local error: tells the peer why. */
  fail(code, reason) {
    if (this.state === 'closed') return;
    this.emit('error', new FrameError(reason));
    if (this.state === 'open' || this.state === 'connecting') {
      try {
        this.ws.send(encodeMessage(0, SYSTEM.close, CLOSE_CONTENT, { code, reason }));
      } catch {
        // not open yet
      }
    }
    this.finish({ code, reason, byPeer: false });
    this.ws.close(1000);
  }

  finish(close) {
    if (this.state === 'closed') return;
    const wasClosing = this.closing;
    this.state = 'closed';
    clearTimeout(this.handshakeTimer);
    clearInterval(this.timer);
    this.emit('close', wasClosing ?? close);
  }
}

function helloFrame() {
  return encodeFrame(new Uint8Array([...MAGIC, PROTOCOL_VERSION >> 8, PROTOCOL_VERSION & 0xff]));
}

function concat(head, tail) {
  const out = new Uint8Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}

