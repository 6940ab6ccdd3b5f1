// WebTransport (docs/PROTOCOL.md, section 11b): the server's QUIC port, from a
// browser. The frames of sections 1-10 run on one bidirectional stream, as
// over TCP; sequenced channels (the relay's transforms) travel as datagrams,
// which no lost packet holds back. `SwitchboardSocket` uses it through its
// `webtransport` option and falls back to WebSocket where the browser has
// no WebTransport or the connection cannot be made.
//
//   const offer = await webTransportOffer();   // asks the page's own server
//   const socket = new SwitchboardSocket('ws://host:7201/', { webtransport: offer });

import { DEFAULT_LIMITS, FrameSplitter } from './frame.js';

/**
 * How this page reaches its server's WebTransport: `GET /webtransport` on
 * the server that served the page (its WebSocket port) answers the QUIC
 * port and the hashes of the certificates it serves browsers (valid at most
 * 14 days, rotated by the server: ask again on each connection). Resolves
 * with `{ url, hashes }`, or null when the browser has no WebTransport or
 * the server offers none.
 *
 * @param {string|URL} [base] the server's http(s) address (default: the page's)
 */
export async function webTransportOffer(base = globalThis.location?.href) {
  if (typeof globalThis.WebTransport !== 'function' || !base) return null;
  try {
    const response = await fetch(new URL('/webtransport', base), { cache: 'no-store' });
    if (!response.ok) return null;
    const { port, hashes } = await response.json();
    const host = new URL(base).hostname;
    const bracketed = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
    return { url: `https://${bracketed}:${port}/`, hashes };
  } catch {
    return null;
  }
}

/**
 * A transport for `SwitchboardSocket`: frames on one WebTransport stream,
 * datagrams beside it. The WebSocket-like face the socket drives (`onopen`,
 * `onmessage`, `onclose`, `send`, `close`), and `sendDatagram`,
 * `ondatagram`, `maxDatagramSize` for sequenced channels.
 */
export class WebTransportTransport {
  /**
   * @param {string} url `https://host:port/` of the server's QUIC port
   * @param {object} [limits] frame limits, as for the socket
   * @param {object} [options]
   * @param {string[]} [options.hashes] SHA-256 hashes (64 hex digits) of the
   *   certificates to trust (a self-signed server); without them the browser
   *   checks the certificate as for any https site
   * @param {number} [options.openTimeoutMs] give up opening after this long (3000)
   */
  constructor(url, limits = DEFAULT_LIMITS, options = {}) {
    this.binaryType = 'arraybuffer';
    this.url = url;
    this.opened = false;
    this.closed = false;
    this.frames = new FrameSplitter(limits, (data) => this.onmessage?.({ data }));
    const hashes = (options.hashes ?? []).map((hex) => ({ algorithm: 'sha-256', value: hexBytes(hex) }));
    this.session = new globalThis.WebTransport(url, hashes.length > 0 ? { serverCertificateHashes: hashes } : {});
    this.session.closed.then(
      (info) => this.finish(info?.reason || 'WebTransport session closed'),
      (err) => this.finish(`WebTransport: ${err?.message ?? err}`),
    );
    this.openTimer = setTimeout(() => {
      if (!this.opened) this.abandon('WebTransport did not open in time');
    }, options.openTimeoutMs ?? 3000);
    this.open().catch((err) => this.abandon(`WebTransport: ${err?.message ?? err}`));
  }

  async open() {
    await this.session.ready;
    const stream = await this.session.createBidirectionalStream();
    if (this.closed) return;
    this.writer = stream.writable.getWriter();
    this.datagrams = this.session.datagrams.writable.getWriter();
    this.opened = true;
    clearTimeout(this.openTimer);
    this.pump(stream.readable.getReader(), (chunk) => this.frames.push(chunk));
    this.pump(this.session.datagrams.readable.getReader(), (datagram) => this.ondatagram?.(datagram));
    this.onopen?.();
  }

  /** Reads `reader` to its end, handing each chunk to `take`. */
  async pump(reader, take) {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || this.closed) return;
        take(value);
      }
    } catch {
      // The session's end says why.
    }
  }

  /** The largest datagram the path takes now. */
  get maxDatagramSize() {
    return this.session.datagrams.maxDatagramSize ?? 1200;
  }

  send(frame) {
    if (!this.closed && this.writer) this.writer.write(frame).catch(() => {});
  }

  /** Sends `bytes` as one datagram; false when it does not fit (send it on the stream). */
  sendDatagram(bytes) {
    if (this.closed || !this.datagrams || bytes.length > this.maxDatagramSize) return false;
    this.datagrams.write(bytes).catch(() => {});
    return true;
  }

  /** Ends the stream (after what was written), then the session. */
  close() {
    if (this.closed) return;
    const writer = this.writer;
    const end = writer ? writer.close().catch(() => {}) : Promise.resolve();
    end.then(() => this.session.close({ closeCode: 0, reason: 'closed' }));
  }

  /** Gives up before it opened: the socket may fall back to WebSocket. */
  abandon(reason) {
    try {
      this.session.close();
    } catch {
      // never opened
    }
    this.finish(reason);
  }

  finish(reason) {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.openTimer);
    this.frames.stop();
    this.onclose?.({ reason, neverOpened: !this.opened });
  }
}

function hexBytes(hex) {
  const digits = hex.replace(/^sha256:/i, '').replaceAll(':', '');
  if (!/^[0-9a-fA-F]{64}$/.test(digits)) throw new Error(`not a SHA-256 hash: ${hex}`);
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(digits.slice(2 * i, 2 * i + 2), 16);
  return out;
}
