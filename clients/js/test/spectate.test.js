// A recorded game watched from JavaScript: a board server records a game
// played by two JavaScript clients; `switchboard-server replay --serve-ws`
// serves it back, and a JavaScript spectator over WebSocket hears what the
// followed player heard and is told it may only watch.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { string, struct, bool, uuid } from '../src/bincode.js';
import { RequestRejected, SessionClient } from '../src/session.js';
import { startReplay, startServer, until } from './support.js';

// The board server's protocol (server/src/board.rs).
const BOARD = 16;
const Board = { say: 1, line: 10 };
const Line = struct({ from: uuid, name: string, text: string, private: bool });

test('a JavaScript spectator watches a recorded game over WebSocket', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-spectate-'));
  const file = join(dir, 'game.swrec');
  try {
    const server = await startServer(['--record', file], { SWITCHBOARD_PASSWORD: '' });
    const ada = new SessionClient(server.ws, { name: 'ada' });
    const bob = new SessionClient(server.ws, { name: 'bob' });
    await ada.connect();
    await bob.connect();
    const heard = [];
    bob.subscribe(BOARD, Board.line, Line, (line) => heard.push(line.text));
    await ada.request(BOARD, Board.say, string, 'hello from the record');
    await until(() => heard.length === 1, 'the line, live');
    // A second of play after the line: the replay is still running when
    // the spectator, having heard it, asks for something.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    ada.close();
    bob.close();
    await server.stop();

    const replay = await startReplay(file, 'bob');
    const watcher = new SessionClient(replay.ws, { name: 'watcher', reconnect: false });
    const seen = [];
    watcher.subscribe(BOARD, Board.line, Line, (line) => seen.push(line.text));
    // Welcomed before the replay starts (it waits for its first spectator),
    // then sent what bob was sent.
    await watcher.connect();
    await until(() => seen.includes('hello from the record'), "bob's line, replayed");
    await assert.rejects(watcher.request(BOARD, Board.say, string, 'hi'), (err) => {
      assert.ok(err instanceof RequestRejected);
      assert.equal(err.reason, 'this is a replay: watch only');
      return true;
    });
    assert.equal(await replay.done, 0, 'the replay ran to its end, every output identical');
    watcher.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
