// Real servers for the tests: the `switchboard-server` binary of this
// workspace (built by `cargo test --workspace`, or here if missing), started
// on free ports and stopped after each test file.

import { spawn, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const binary = process.env.SWITCHBOARD_SERVER ?? `${root}target/debug/switchboard-server`;

/**
 * Starts `switchboard-server <args>` with a WebSocket port and resolves once it
 * listens: `{ ws, tcp, admin, fingerprint, stop() }` (`fingerprint` when it
 * speaks TLS: bound beyond loopback with `--bind all`).
 */
export async function startServer(args, env = {}) {
  if (!existsSync(binary)) {
    execFileSync('cargo', ['build', '-q', '-p', 'switchboard-server'], { cwd: root, stdio: 'inherit' });
  }
  const bind = args.includes('--bind') ? [] : ['--bind', 'loopback'];
  const child = spawn(binary, [...args, ...bind, '--port', '0', '--ws-port', '0'], {
    env: { ...process.env, RUST_LOG: 'warn', ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const found = {};
  const lines = createInterface({ input: child.stdout });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${JSON.stringify(found)}`)), 20000);
    child.on('exit', (code) => reject(new Error(`server exited with ${code}`)));
    lines.on('line', (line) => {
      const ready = line.match(/^SWITCHBOARD READY \d+ (\d+)$/);
      if (ready) found.tcp = Number(ready[1]);
      const ws = line.match(/^WebSocket clients: (wss?:\/\/\S+)$/);
      if (ws) found.ws = ws[1];
      const tls = line.match(/^tls: sha256 ([0-9a-f]{64})$/);
      if (tls) found.fingerprint = tls[1];
      const admin = line.match(/^admin: (http:\/\/[^/]+)/);
      if (admin) found.admin = admin[1];
      const wantAdmin = args.includes('--admin-port');
      if (found.tcp && found.ws && (!wantAdmin || found.admin)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  // Later lines, for `line(pattern)`.
  const later = [];
  const waiting = [];
  lines.on('line', (text) => {
    later.push(text);
    for (const wait of waiting.splice(0)) wait();
  });
  return {
    ...found,
    /** The first line (after the ready line) matching `pattern`, within 10 s. */
    async line(pattern) {
      const deadline = Date.now() + 10000;
      for (;;) {
        const hit = later.find((text) => pattern.test(text));
        if (hit) return hit.match(pattern);
        if (Date.now() > deadline) throw new Error(`no line matching ${pattern}`);
        await new Promise((resolve) => {
          waiting.push(resolve);
          setTimeout(resolve, 100);
        });
      }
    },
    stop() {
      child.kill('SIGTERM');
      return exited(child);
    },
    /** Kills it outright (SIGKILL): no goodbye, no last write. */
    kill() {
      child.kill('SIGKILL');
      return exited(child);
    },
  };
}

/**
 * Serves the recording `file` to spectators (`switchboard-server replay FILE
 * --serve 0 --serve-ws 0 --follow NAME`) and resolves once it listens:
 * `{ ws, done, stop() }`, `done` resolving with the exit code once the replay
 * ended (checked to its last input).
 */
export async function startReplay(file, follow) {
  const args = ['replay', file, '--serve', '0', '--serve-ws', '0', '--follow', follow];
  const { child, found, done } = await spawnUntil(args, /^WebSocket spectators: (ws:\/\/\S+)$/, 'the replay');
  return {
    ws: found[1],
    done,
    stop() {
      child.kill('SIGTERM');
      return exited(child);
    },
  };
}

/**
 * A delayed path to `to` (`host:port`): `switchboard-server netsim` with
 * `latencyMs` each way, no jitter, no stalls; `{ ws, stop() }`, `ws` the
 * WebSocket address through it. Every connection through it comes from one
 * address to the server, as players behind one NAT do.
 */
export async function startNetsim(to, latencyMs) {
  const args = ['netsim', '--to', to, '--latency-ms', `${latencyMs}`, '--jitter-ms', '0', '--stall-every-ms', '0'];
  const { child, found } = await spawnUntil(args, /^SWITCHBOARD READY \d+ (\d+)$/, 'netsim');
  return {
    ws: `ws://127.0.0.1:${found[1]}/`,
    stop() {
      child.kill('SIGTERM');
      return exited(child);
    },
  };
}

/**
 * Starts `switchboard-server <args>` and resolves with the first stdout line
 * matching `pattern` (its match), the child, and a promise of its exit code.
 */
async function spawnUntil(args, pattern, what) {
  const child = spawn(binary, args, { env: { ...process.env, RUST_LOG: 'warn' }, stdio: ['pipe', 'pipe', 'inherit'] });
  const done = new Promise((resolve) => child.on('exit', resolve));
  const lines = createInterface({ input: child.stdout });
  const found = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start`)), 20000);
    done.then((code) => reject(new Error(`${what} exited with ${code}`)));
    lines.on('line', (line) => {
      const match = line.match(pattern);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
  });
  return { child, found, done };
}

/** Resolves once `child` has exited (at once if it has). */
function exited(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.on('exit', resolve);
  });
}

/** A free TCP port on loopback. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Whether a Redis on `port` answers PING. */
function answers(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * A real `redis-server` (Debian's package; scripts/install-test-deps installs
 * it) on a free port, with no persistence: `{ url, stop() }`.
 */
export async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const deadline = Date.now() + 10000;
  while (!(await answers(port))) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('redis-server did not start (install Debian\'s redis-server)');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return {
    url: `redis://127.0.0.1:${port}/`,
    /** Runs one command; resolves with Redis's raw reply (e.g. ":1\r\n"). */
    command(...args) {
      return new Promise((resolve, reject) => {
        const request = `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
        const socket = connect(port, '127.0.0.1', () => socket.write(request));
        socket.on('data', (data) => {
          socket.destroy();
          resolve(data.toString());
        });
        socket.on('error', reject);
      });
    },
    stop() {
      child.kill('SIGKILL');
      return exited(child);
    },
  };
}

/**
 * Resolves when `predicate()` holds, polling (running `poll` first each
 * time, if given); fails after `ms`.
 */
export async function until(predicate, what, ms = 10000, poll = async () => {}) {
  const deadline = Date.now() + ms;
  await poll();
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
    await poll();
  }
}
