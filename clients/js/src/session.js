// Sessions with a `ServerManager` (docs/PROTOCOL.md, section 6): hello and
// welcome, an id that survives reconnects (kept with a secret token),
// requests answered with accepted / rejected / error, and updates by channel.
//
//   const client = new SessionClient('ws://127.0.0.1:7101/', { name: 'ada' });
//   const welcome = await client.connect();
//   client.on(16, 2, string, (text) => console.log(text));   // an update
//   await client.request(16, 1, string, 'hello');            // throws Rejected
//
// Field names are the protocol's own (snake_case), as in the Rust types.

import {
  bool,
  bytes,
  decode,
  encode,
  enumOf,
  fixedBytes,
  option,
  string,
  struct,
  u16,
  u32,
  u64,
  uuid,
} from './bincode.js';
import { CloseCode, Emitter, SwitchboardSocket } from './socket.js';

export const SESSION_CHANNEL = 1;
export const SessionAction = Object.freeze({
  hello: 1,
  welcome: 2,
  refused: 3,
  request: 4,
  accepted: 5,
  rejected: 6,
  error: 7,
  requestAgain: 8,
});

export const Resume = struct({ client: uuid, token: fixedBytes(32) });
export const Hello = struct({ name: string, password: option(string), credentials: bytes, resume: option(Resume) });
export const Welcome = struct({ client: uuid, token: fixedBytes(32), resumed: bool, grace_secs: u32 });
export const Refused = struct({ code: u16, reason: string });
export const RequestFrame = struct({ id: u64, channel: u16, action: u16, content: bytes });
export const Rejected = struct({ id: u64, reason: string });
export const ErrorCode = enumOf([
  'UnknownChannel',
  'UnknownAction',
  'BadContent',
  'NotWelcomed',
  'RateLimited',
  'UnknownSessionAction',
  'AlreadyHandled',
]);
export const ErrorReply = struct({ id: u64, code: ErrorCode, detail: string });

/** Refusal codes that say "do not come back with the same credentials". */
/**
 * The retry-after a close reason ends with (`"... (retry after 500 ms)"`,
 * docs/PROTOCOL.md section 2), in milliseconds, or null.
 */
export function retryAfterMs(reason) {
  const match = /\(retry after (\d+) ms\)$/.exec(reason ?? '');
  return match ? Number(match[1]) : null;
}

const FINAL_CLOSE = new Set([CloseCode.NORMAL, CloseCode.REFUSED, CloseCode.REPLACED, CloseCode.KICKED, CloseCode.ABUSE]);

/** The server rejected a request; `reason` is for the player. */
export class RequestRejected extends Error {
  constructor(reason) {
    super(reason);
    this.name = 'RequestRejected';
    this.reason = reason;
  }
}

/** The server could not handle a request (`code`: an ErrorCode name). */
export class RequestFailed extends Error {
  constructor(code, detail) {
    super(`${code}: ${detail}`);
    this.name = 'RequestFailed';
    this.code = code;
    this.detail = detail;
  }
}

/**
 * A client of a `ServerManager`. Events: `welcome` (each welcome, resumed or
 * not), `refused` (`{ code, reason }`), `reconnecting` (`{ attempt, delayMs }`),
 * `disconnected` (the close, once the client gives up or is closed),
 * `message` (every update `{ channel, action, content }`), `error`.
 */
export class SessionClient extends Emitter {
  /**
   * @param {string} url
   * @param {object} options
   * @param {string} options.name the player's name
   * @param {string} [options.password] the server's join password
   * @param {Uint8Array} [options.credentials] for the game's authentication hook
   * @param {{client: string, token: Uint8Array}} [options.resume] a session to resume
   * @param {boolean} [options.reconnect] reconnect with the same id after a loss (true)
   * @param {number} [options.maxAttempts] reconnect attempts before giving up (30)
   * @param {string[]} [options.fallbackUrls] other servers of the same service
   *   (sessions shared through Redis, docs/SCALING.md): after a loss the first
   *   attempt goes back to the server the session was on, each further one to
   *   the next of these in turn
   * @param {number} [options.requestTimeoutMs] a request's whole wait for its
   *   verdict, through a reconnect too, before it rejects with a timeout (30000)
   * @param {object} [options.socket] options of each SwitchboardSocket
   */
  constructor(url, options) {
    super();
    this.url = url;
    this.urls = [url, ...(options.fallbackUrls ?? [])];
    // Which of `urls` last welcomed us, and which the attempt goes to.
    this.home = 0;
    this.target = 0;
    this.options = { reconnect: true, maxAttempts: 30, requestTimeoutMs: 30000, ...options };
    this.resume = options.resume ?? null;
    this.client = null;
    // Request ids are the session's (docs/PROTOCOL.md, "Requests across a
    // reconnect"): each pending request keeps its frame and the number of
    // the connection it last went on (0: none yet).
    this.nextId = 1;
    this.pending = new Map();
    this.connection = 0;
    this.welcomed = false;
    this.subscriptions = new Map();
    this.closedByUs = false;
  }

  /** Connects and resolves with the welcome (rejects with the refusal). */
  connect() {
    return new Promise((resolve, reject) => {
      const done = () => offs.forEach((off) => off());
      const offs = [
        this.on('welcome', (welcome) => {
          done();
          resolve(welcome);
        }),
        this.on('refused', (refused) => {
          done();
          reject(Object.assign(new Error(refused.reason), refused));
        }),
        this.on('disconnected', (close) => {
          done();
          reject(Object.assign(new Error(close.reason), close));
        }),
      ];
      this.open(0);
    });
  }

  /**
   * Replaces the fallback URLs (a directory said where the service is now);
   * the next attempts go round the first URL, then these.
   */
  setFallbackUrls(urls) {
    this.urls = [this.url, ...urls];
    this.home = 0;
    this.target = 0;
  }

  open(attempt) {
    this.target = attempt === 0 ? this.home : (this.home + attempt - 1) % this.urls.length;
    const socket = new SwitchboardSocket(this.urls[this.target], this.options.socket);
    this.socket = socket;
    this.connection += 1;
    this.welcomed = false;
    socket.on('open', () => {
      const hello = {
        name: this.options.name,
        password: this.options.password ?? null,
        credentials: this.options.credentials ?? new Uint8Array(),
        resume: this.resume,
      };
      socket.send(SESSION_CHANNEL, SessionAction.hello, Hello, hello);
    });
    socket.on('message', (message) => this.dispatch(message));
    socket.on('error', (err) => this.emit('error', err));
    socket.on('close', (close) => this.lost(close, attempt));
  }

  dispatch({ channel, action, content }) {
    if (channel !== SESSION_CHANNEL) {
      this.emit('message', { channel, action, content });
      for (const slot of this.subscriptions.get(key(channel, action)) ?? []) slot(content);
      return;
    }
    switch (action) {
      case SessionAction.welcome: {
        const welcome = decode(Welcome, content);
        this.client = welcome.client;
        // The token rotates with every welcome: only the latest is good.
        this.resume = { client: welcome.client, token: welcome.token };
        this.attempt = 0;
        this.home = this.target;
        this.welcomed = true;
        this.sendAgain(welcome.resumed);
        this.emit('welcome', welcome);
        break;
      }
      case SessionAction.refused:
        this.refused = decode(Refused, content);
        this.emit('refused', this.refused);
        break;
      case SessionAction.accepted: {
        const id = decode(u64, content);
        this.settle(id, (p) => p.resolve());
        break;
      }
      case SessionAction.rejected: {
        const { id, reason } = decode(Rejected, content);
        if (!this.settle(id, (p) => p.reject(new RequestRejected(reason)))) this.emit('rejected', reason);
        break;
      }
      case SessionAction.error: {
        const { id, code, detail } = decode(ErrorReply, content);
        if (!this.settle(id, (p) => p.reject(new RequestFailed(code, detail)))) {
          this.emit('error', new RequestFailed(code, detail));
        }
        break;
      }
      default:
        this.emit('error', new Error(`unknown session action ${action}`));
    }
  }

  settle(id, how) {
    const pending = this.pending.get(id);
    if (!pending) return false;
    this.pending.delete(id);
    clearTimeout(pending.timer);
    how(pending);
    return true;
  }

  lost(close, attempt) {
    this.welcomed = false;
    const final = this.closedByUs || this.refused || (!close.lost && FINAL_CLOSE.has(close.code));
    const next = attempt + 1;
    // A server too busy to take this connection now says when to come
    // back (close 1013, "... (retry after N ms)"): a first join waits and
    // tries again too.
    const toldToWait = close.code === CloseCode.SERVER_FULL ? retryAfterMs(close.reason) : null;
    const mayRetry = this.resume || toldToWait !== null;
    if (final || !this.options.reconnect || !mayRetry || next > this.options.maxAttempts) {
      // No session to come back to: what waited for a verdict is lost.
      this.retry = null;
      for (const id of [...this.pending.keys()]) {
        this.settle(id, (p) => p.reject(new Error(`disconnected: ${close.reason}`)));
      }
      this.emit('disconnected', close);
      return;
    }
    // 200 ms doubling up to 5 s, each wait drawn between half and all of
    // it, and never shorter than the server asked.
    const ceiling = Math.min(5000, 200 * 2 ** (next - 1));
    const delayMs = Math.max(ceiling / 2 + Math.random() * (ceiling / 2), toldToWait ?? 0);
    this.emit('reconnecting', { attempt: next, delayMs, close });
    this.retry = setTimeout(() => this.open(next), delayMs);
  }

  /**
   * Sends a request; resolves once the server accepted it (its updates
   * have arrived by then), rejects with RequestRejected or RequestFailed.
   */
  request(channel, action, schema, value) {
    const id = this.nextId++;
    const frame = { id, channel, action, content: encode(schema, value) };
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => this.settle(id, (p) => p.reject(new Error(`request ${id} timed out`))),
        this.options.requestTimeoutMs,
      );
      const pending = { resolve, reject, frame, sentOn: 0, timer };
      this.pending.set(id, pending);
      // On a reconnect nothing new goes before the session is back and the
      // older ones went again: the server sees them in the order made.
      const open = this.socket?.state === 'open' || this.socket?.state === 'connecting';
      if (!open && !this.retry) {
        this.settle(id, (p) => p.reject(new Error('not connected')));
        return;
      }
      if (open && (this.welcomed || this.resume === null)) {
        try {
          this.socket.send(SESSION_CHANNEL, SessionAction.request, RequestFrame, frame);
          pending.sentOn = this.connection;
        } catch (err) {
          this.settle(id, (p) => p.reject(err));
        }
      }
    });
  }

  /**
   * The session is back (`resumed`) or a new one began: requests not yet
   * sent on this connection go again, marked so that the server applies
   * none twice; in a new session (which cannot know them) they fail.
   */
  sendAgain(resumed) {
    const stale = [...this.pending.entries()]
      .filter(([, p]) => p.sentOn !== this.connection)
      .sort(([a], [b]) => a - b);
    for (const [id, pending] of stale) {
      if (!resumed) {
        this.settle(id, (p) => p.reject(new Error('disconnected: a new session began')));
        continue;
      }
      this.socket.send(SESSION_CHANNEL, SessionAction.requestAgain, RequestFrame, pending.frame);
      pending.sentOn = this.connection;
    }
  }

  /** Sends a plain message (a request without an answer unless it fails). */
  send(channel, action, schema, value) {
    this.socket.send(channel, action, schema, value);
  }

  /**
   * Calls `slot(value)` for every update on `channel` / `action`, decoded
   * with `schema`. Returns a function that unsubscribes.
   */
  subscribe(channel, action, schema, slot) {
    const k = key(channel, action);
    if (!this.subscriptions.has(k)) this.subscriptions.set(k, new Set());
    const wrapped = (content) => {
      let value;
      try {
        value = decode(schema, content);
      } catch (err) {
        return this.emit('error', err);
      }
      slot(value);
    };
    this.subscriptions.get(k).add(wrapped);
    return () => this.subscriptions.get(k)?.delete(wrapped);
  }

  /** Leaves: the session ends at once on the server. */
  close(reason = 'goodbye') {
    this.closedByUs = true;
    clearTimeout(this.retry);
    this.retry = null;
    this.socket?.close(reason);
  }
}

function key(channel, action) {
  return channel * 65536 + action;
}
