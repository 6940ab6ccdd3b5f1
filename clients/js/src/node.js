// Node only: Switchboard's TCP port (docs/PROTOCOL.md, sections 1 and 1a),
// TLS 1.3 through node's `tls` when the server is on another machine, its
// identity checked as the Rust client checks it. Not exported by index.js,
// so that browser bundles never meet `node:tls`.
//
//   import { tcpTransport } from 'switchboard-client/node';
//   const transport = tcpTransport({ trust: 'sha256 fingerprint the server printed' });
//   const ada = new SessionClient('tls://game.example:7100', { name: 'ada', socket: { transport } });
//
// `tls://host:port` is always TLS; `tcp://host:port` is plain to this
// machine's loopback and TLS to any other (plaintext to another machine
// only with `insecurePlaintext: true`, as `--insecure-plaintext`).

import { connect as connectPlain } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';

import { DEFAULT_LIMITS, FrameSplitter } from './frame.js';

/**
 * A transport class for `SwitchboardSocket`'s `transport` option: frames
 * over the TCP port, through TLS where the address asks for it.
 *
 * @param {object} [options]
 * @param {string} [options.trust] the server's SHA-256 fingerprint (64 hex
 *   digits, colons and a `sha256:` prefix allowed): that key is trusted
 *   whatever signed it, any other refused (a man in the middle)
 * @param {string|Buffer} [options.ca] certificate authorities (PEM) trusted
 *   beside node's own roots
 * @param {string} [options.knownHosts] a known-hosts file (the Rust client's
 *   format: `host:port fingerprint` lines): a server no authority vouches
 *   for is trusted on first use and remembered there; a changed key is
 *   refused, as ssh does
 * @param {boolean} [options.insecurePlaintext] `tcp://` to another machine
 *   without TLS (default false)
 */
export function tcpTransport(options = {}) {
  const pinned = options.trust == null ? null : parseFingerprint(options.trust);
  return class TcpTransport {
    constructor(url, limits = DEFAULT_LIMITS) {
      this.binaryType = 'arraybuffer';
      this.kind = 'tcp';
      this.frames = new FrameSplitter(limits, (data) => this.onmessage?.({ data }));
      this.closed = false;
      const { tls, host, port } = target(url, options.insecurePlaintext === true);
      this.server = `${host}:${port}`;
      if (!tls) {
        this.socket = connectPlain({ host, port }, () => this.onopen?.());
      } else {
        this.socket = connectTls({
          host,
          port,
          servername: isIp(host) ? undefined : host,
          ca: options.ca,
          minVersion: 'TLSv1.3',
          // Checked below, as the Rust client does: an authority's
          // signature, or the pinned key, or the known-hosts file.
          rejectUnauthorized: false,
        });
        this.socket.on('secureConnect', () => {
          const refusal = this.verify();
          if (refusal) return this.refuse(refusal);
          this.onopen?.();
        });
      }
      this.socket.setNoDelay(true);
      this.socket.on('data', (chunk) => this.frames.push(chunk));
      this.socket.on('error', (err) => {
        this.error = this.explain(err, tls);
      });
      this.socket.on('close', () => this.finish({ reason: this.error ?? 'connection lost' }));
    }

    /** The server's identity against the trust the transport was given. */
    verify() {
      const presented = parseFingerprint(this.socket.getPeerCertificate().fingerprint256 ?? '');
      if (this.socket.authorized) return null;
      if (pinned) {
        if (presented === pinned) return null;
        return `${this.server} presented the key ${presented}, not the pinned ${pinned}: a man in the middle, or the server's key changed`;
      }
      if (options.knownHosts) return checkKnownHost(options.knownHosts, this.server, presented);
      return `${this.server} presented the key ${presented}, which no authority vouches for (${this.socket.authorizationError}): pin it with trust: '${presented}' if that is the server's fingerprint`;
    }

    explain(err, tls) {
      if (tls && /wrong version number|packet length too long|record layer failure/i.test(err.message)) {
        return `${this.server} answered in plaintext, not TLS: it is a plain server (bound to loopback, or run with --insecure-plaintext); use tcp:// for a server on this machine`;
      }
      return `${this.server}: ${err.message}`;
    }

    refuse(reason) {
      this.refusal = reason;
      this.socket.destroy();
    }

    send(frame) {
      if (!this.closed) this.socket.write(frame);
    }

    close() {
      if (!this.closed) this.socket.end();
    }

    finish({ reason }) {
      if (this.closed) return;
      this.closed = true;
      this.frames.stop();
      this.onclose?.(this.refusal ? { refused: true, reason: this.refusal } : { reason });
    }
  };
}

/** `{ tls, host, port }` of a `tls://` or `tcp://` address. */
function target(url, insecurePlaintext) {
  const parsed = new URL(url);
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const port = Number(parsed.port);
  if (!port) throw new Error(`${url}: the address needs a port`);
  if (parsed.protocol === 'tls:') return { tls: true, host, port };
  if (parsed.protocol !== 'tcp:') throw new Error(`${url}: tcpTransport speaks tcp:// and tls://`);
  return { tls: !isLoopback(host) && !insecurePlaintext, host, port };
}

function isLoopback(host) {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

function isIp(host) {
  return /^[0-9.]+$/.test(host) || host.includes(':');
}

/** A fingerprint in one form: 64 lowercase hex digits. */
export function parseFingerprint(text) {
  const hex = text.trim().replace(/^sha256:/i, '').replaceAll(':', '').toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`not a SHA-256 fingerprint: ${text}`);
  return hex;
}

/** Trust on first use: null when `server` may go on, else why not. */
function checkKnownHost(path, server, presented) {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (err.code !== 'ENOENT') return `the known-hosts file ${path}: ${err.message}`;
  }
  for (const line of text.split('\n')) {
    const [host, fingerprint] = line.replace(/#.*/, '').trim().split(/\s+/);
    if (host !== server || !fingerprint) continue;
    if (fingerprint === presented) return null;
    return `${server} now presents the key ${presented}, not the ${fingerprint} remembered in ${path}: a man in the middle, or the server's key changed; if you know it did, remove its line from ${path}`;
  }
  mkdirSync(dirname(path), { recursive: true });
  appendFileSync(path, `${server} ${presented}\n`, { mode: 0o600 });
  console.warn(`switchboard: trusting ${server} on first use (sha256 ${presented}), remembered in ${path}`);
  return null;
}
