// Real servers for the tests: the `switchboard-server` binary of this
// workspace (built by `cargo test --workspace`, or here if missing), started
// on free ports and stopped after each test file.

import { spawn, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const binary = process.env.SWITCHBOARD_SERVER ?? `${root}target/debug/switchboard-server`;

/**
 * Starts `switchboard-server <args>` with a WebSocket port and resolves once it
 * listens: `{ ws, tcp, admin, stop() }`.
 */
export async function startServer(args, env = {}) {
  if (!existsSync(binary)) {
    execFileSync('cargo', ['build', '-q', '-p', 'switchboard-server'], { cwd: root, stdio: 'inherit' });
  }
  const child = spawn(binary, [...args, '--bind', 'loopback', '--port', '0', '--ws-port', '0'], {
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
      const ws = line.match(/^WebSocket clients: (ws:\/\/\S+)$/);
      if (ws) found.ws = ws[1];
      const admin = line.match(/^admin: (http:\/\/[^/]+)/);
      if (admin) found.admin = admin[1];
      const wantAdmin = args.includes('--admin-port');
      if (found.tcp && found.ws && (!wantAdmin || found.admin)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return {
    ...found,
    stop() {
      child.kill('SIGTERM');
      return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', resolve)));
    },
  };
}

/** Resolves when `predicate()` holds, polling; fails after `ms`. */
export async function until(predicate, what, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
