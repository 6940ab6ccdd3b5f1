// Types of src/node.js (node only: the TCP port, TLS off this machine).

import type { Limits } from './index.js';

export interface TcpTransportOptions {
  /** The server's SHA-256 fingerprint: that key trusted, any other refused. */
  trust?: string;
  /** Certificate authorities (PEM) trusted beside node's own roots. */
  ca?: string | Buffer;
  /** A known-hosts file: trust on first use, a changed key refused. */
  knownHosts?: string;
  /** `tcp://` to another machine without TLS (default false). */
  insecurePlaintext?: boolean;
}

/** The transport class for `SocketOptions.transport`. */
export function tcpTransport(options?: TcpTransportOptions): new (url: string, limits: Limits) => unknown;

/** A fingerprint as 64 lowercase hex digits (colons and `sha256:` accepted). */
export function parseFingerprint(text: string): string;
