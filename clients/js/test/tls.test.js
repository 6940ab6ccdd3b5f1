// The TCP port from node, TLS through node's `tls`, against a real board
// server bound beyond loopback with its own self-signed key: pinned by the
// fingerprint it printed, trusted on first use through a known-hosts file,
// a man in the middle (another key) refused for good, a plain server
// answering a TLS client found out.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { string, struct, bool, uuid } from '../src/bincode.js';
import { CloseCode } from '../src/socket.js';
import { SessionClient } from '../src/session.js';
import { tcpTransport } from '../src/node.js';
import { startServer, until } from './support.js';

const BOARD = 16;
const Board = { say: 1, line: 10 };
const Line = struct({ from: uuid, name: string, text: string, private: bool });

let server;
let data;
before(async () => {
  data = mkdtempSync(join(tmpdir(), 'switchboard-js-tls-'));
  server = await startServer(['--bind', 'all', '--data-dir', data], { SWITCHBOARD_PASSWORD: '' });
});
after(async () => {
  await server.stop();
  rmSync(data, { recursive: true, force: true });
});

function client(name, url, transport, options = {}) {
  return new SessionClient(url, { name, socket: { transport }, ...options });
}

test('a pinned node client plays over TLS beside a plain one on loopback', async () => {
  assert.match(server.fingerprint, /^[0-9a-f]{64}$/, 'the server printed its fingerprint');
  const ada = client('ada', `tls://127.0.0.1:${server.tcp}`, tcpTransport({ trust: server.fingerprint }));
  // The same port, plain from this machine's loopback.
  const bob = client('bob', `tcp://127.0.0.1:${server.tcp}`, tcpTransport());
  await ada.connect();
  await bob.connect();
  const heard = [];
  bob.subscribe(BOARD, Board.line, Line, (line) => heard.push(line));
  await ada.request(BOARD, Board.say, string, 'sealed on the way');
  await until(() => heard.length === 1, 'the line');
  assert.equal(heard[0].text, 'sealed on the way');
  assert.equal(heard[0].from, ada.client);
  ada.close();
  bob.close();
});

test('a man in the middle with another key is refused, and not retried', async () => {
  const eve = client('eve', `tls://127.0.0.1:${server.tcp}`, tcpTransport({ trust: 'ab'.repeat(32) }));
  const refused = await eve.connect().then(
    () => assert.fail('joined through the wrong key'),
    (err) => err,
  );
  assert.equal(refused.code, CloseCode.REFUSED, 'final: a changed key is not a lost connection');
  assert.match(refused.message, /not the pinned/);
  assert.ok(refused.message.includes(server.fingerprint), refused.message);
});

test('a server no authority vouches for is refused without a pin, and says how to pin it', async () => {
  const cy = client('cy', `tls://127.0.0.1:${server.tcp}`, tcpTransport(), { reconnect: false });
  const refused = await cy.connect().then(
    () => assert.fail('joined an unknown key'),
    (err) => err,
  );
  assert.match(refused.message, /no authority vouches/);
  assert.ok(refused.message.includes(`trust: '${server.fingerprint}'`), refused.message);
});

test('trust on first use remembers the key, and a changed key is refused', async () => {
  const knownHosts = join(data, 'known_hosts');
  const url = `tls://127.0.0.1:${server.tcp}`;
  const first = client('dee', url, tcpTransport({ knownHosts }), { reconnect: false });
  await first.connect();
  first.close();
  const remembered = readFileSync(knownHosts, 'utf8');
  assert.equal(remembered, `127.0.0.1:${server.tcp} ${server.fingerprint}\n`);
  // The same server again: the remembered key matches.
  const again = client('dee', url, tcpTransport({ knownHosts }), { reconnect: false });
  await again.connect();
  again.close();
  // The file remembers another key for this address: what a man in the
  // middle looks like from here.
  writeFileSync(knownHosts, `127.0.0.1:${server.tcp} ${'cd'.repeat(32)}\n`);
  const changed = client('dee', url, tcpTransport({ knownHosts }), { reconnect: false });
  const refused = await changed.connect().then(
    () => assert.fail('joined a changed key'),
    (err) => err,
  );
  assert.match(refused.message, /now presents the key/);
  assert.match(refused.message, /remove its line/);
});

test('a plain server answering a TLS client is found out', async () => {
  const plain = await startServer([], { SWITCHBOARD_PASSWORD: '' });
  try {
    const ed = client('ed', `tls://127.0.0.1:${plain.tcp}`, tcpTransport({ trust: server.fingerprint }), {
      reconnect: false,
    });
    const refused = await ed.connect().then(
      () => assert.fail('a plain server passed for TLS'),
      (err) => err,
    );
    assert.match(refused.message, /answered in plaintext/);
  } finally {
    await plain.stop();
  }
});
