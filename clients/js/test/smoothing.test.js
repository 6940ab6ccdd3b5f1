// The JavaScript SnapshotBuffer measured as the Rust one is
// (crates/switchboard-proto/src/smoothing/tests.rs): a sender on a circle at
// 20 Hz through a simulated 75 ms one way, 20 ms of jitter and a 200 ms
// stall every 3 s, drawn at 60 Hz.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Link, Predictor, SnapshotBuffer, lerpDegrees, lerpPose, lerpVec } from '../src/smoothing.js';

const truth = (ms) => [10 * Math.cos(ms / 1000), 0, 10 * Math.sin(ms / 1000)];
const distance = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);

function run(link, seconds) {
  const buffer = new SnapshotBuffer(lerpVec);
  const figures = { frames: 0, interpolated: 0, worstError: 0, worstStep: 0, rawWorstStep: 0, delay: 0 };
  let nextSend = 0;
  let last = null;
  let raw = null;
  let lastRaw = null;
  for (let frame = 0; frame < seconds * 60; frame++) {
    const now = (frame * 1000) / 60;
    for (; nextSend <= now; nextSend += 50) link.send(nextSend, [nextSend, truth(nextSend)], 40);
    for (const [serverMs, position] of link.poll(now)) {
      buffer.push(serverMs, now, position);
      raw = position;
    }
    const sample = buffer.sample(now);
    if (!sample) continue;
    if (now >= 2000) {
      figures.frames++;
      if (sample.kind === 'interpolated') figures.interpolated++;
      figures.worstError = Math.max(figures.worstError, distance(sample.value, truth(sample.serverMs)));
      figures.delay += sample.delayMs;
      if (last) figures.worstStep = Math.max(figures.worstStep, distance(last, sample.value));
      if (lastRaw && raw) figures.rawWorstStep = Math.max(figures.rawWorstStep, distance(lastRaw, raw));
    }
    last = sample.value;
    lastRaw = raw;
  }
  figures.delay /= figures.frames;
  return figures;
}

test('interpolation through 150 ms RTT, 20 ms jitter and stalls is smooth', () => {
  const figures = run(new Link(), 60);
  const share = figures.interpolated / figures.frames;
  console.log(
    `interpolation (JavaScript): ${(share * 100).toFixed(2)} % of ${figures.frames} frames interpolated, ` +
      `worst error ${figures.worstError.toFixed(3)}, worst step ${figures.worstStep.toFixed(3)} (raw ${figures.rawWorstStep.toFixed(3)}), ` +
      `added delay ${figures.delay.toFixed(0)} ms`,
  );
  assert.ok(share >= 0.99, JSON.stringify(figures));
  assert.ok(figures.worstStep < 0.5, JSON.stringify(figures));
  assert.ok(figures.worstError < 0.05, JSON.stringify(figures));
  assert.ok(figures.rawWorstStep > 0.5, JSON.stringify(figures));
});

test('on a clean link the delay is two send intervals', () => {
  const figures = run(new Link({ jitterMs: 0, stallEveryMs: 0 }), 20);
  assert.equal(figures.interpolated, figures.frames);
  assert.ok(figures.delay >= 95 && figures.delay <= 110, JSON.stringify(figures));
});

test('when snapshots stop it extrapolates for a bounded time, then holds', () => {
  const buffer = new SnapshotBuffer(lerpVec);
  for (let i = 0; i < 10; i++) buffer.push(i * 50, i * 50 + 75, [i, 0, 0]);
  const kinds = [];
  for (let ms = 475; ms < 2000; ms += 50) kinds.push(buffer.sample(ms).kind);
  const firstHold = kinds.indexOf('held');
  assert.ok(kinds.slice(0, firstHold).includes('extrapolated'), kinds.join());
  assert.ok(kinds.slice(firstHold).every((k) => k === 'held'), kinds.join());
  assert.deepEqual(buffer.sample(3000).value, [9, 0, 0]);
});

test('angles take the short way round, and a pose keeps its other fields', () => {
  const half = lerpDegrees(350, 10, 0.5);
  assert.ok(half < 1e-9 || Math.abs(half - 360) < 1e-9, String(half));
  assert.ok(Math.abs(lerpDegrees(10, 350, 0.25) - 5) < 1e-9);
  const mid = lerpPose({ position: [0, 0, 0], rotation: [170, 0, 0], zone: 'a' }, { position: [2, 0, 0], rotation: [-170, 0, 0], zone: 'b' }, 0.5);
  assert.deepEqual(mid.position, [1, 0, 0]);
  assert.ok(Math.abs(mid.rotation[0] - 180) < 1e-9);
  assert.equal(mid.zone, 'b');
});

test('the simulated link keeps order, repeats with its seed, and stalls', () => {
  const arrivals = (seed) => {
    const link = new Link({ seed });
    for (let i = 0; i < 400; i++) link.send(i * 10, i, 10);
    const got = [];
    for (let ms = 0; ms < 5000; ms++) for (const i of link.poll(ms)) got.push([ms, i]);
    return got;
  };
  const one = arrivals(7);
  assert.deepEqual(one, arrivals(7));
  assert.notDeepEqual(one, arrivals(8));
  assert.ok(one.every(([, i], k) => k === 0 || one[k - 1][1] < i));
  assert.ok(!one.some(([ms]) => ms >= 3000 && ms < 3200));
});

// As the Rust test: walking at 10 units a second into a wall at x = 5 only
// the server knows, 75 ms each way, states at 20 Hz.
function walkIntoAWall(correctionMs) {
  const clientStep = (s, i) => s.map((x, k) => x + i[k]);
  const serverStep = (s, i) => [Math.min(5, s[0] + i[0]), s[1] + i[1], s[2] + i[2]];
  const up = new Link({ jitterMs: 0, stallEveryMs: 0 });
  const down = new Link({ jitterMs: 0, stallEveryMs: 0, seed: 2 });
  const me = new Predictor([0, 0, 0], clientStep, lerpVec, { correctionMs });
  let server = [0, 0, 0];
  let serverLast = 0;
  let drawn = me.drawn();
  let worst = 0;
  for (let n = 0; n < 240; n++) {
    const now = (n * 1000) / 60;
    if (n < 120) {
      const input = [10 / 60, 0, 0];
      up.send(now, [me.input(input), input]);
    }
    for (const [number, input] of up.poll(now)) {
      server = serverStep(server, input);
      serverLast = number;
    }
    if (n % 3 === 0) down.send(now, { state: server, last_input: serverLast });
    for (const acked of down.poll(now)) me.reconcile(acked);
    me.advance(1000 / 60);
    const next = me.drawn();
    worst = Math.max(worst, distance(drawn, next));
    drawn = next;
  }
  return { worst, drawn, server };
}

test('prediction corrected by the server converges without a jump', () => {
  const blended = walkIntoAWall(100);
  const snapped = walkIntoAWall(0);
  assert.ok(blended.worst < 0.2, String(blended.worst));
  assert.ok(snapped.worst > 0.45, String(snapped.worst));
  assert.ok(distance(blended.drawn, blended.server) < 1e-6);
  assert.equal(blended.server[0], 5);
});

test('prediction moves at once and replays what the server has not seen', () => {
  const me = new Predictor(0, (s, i) => s + i, (a, b, t) => a + (b - a) * t, { correctionMs: 0 });
  const first = me.input(1);
  me.input(2);
  me.input(3);
  assert.equal(me.predicted, 6);
  me.reconcile({ state: 0.5, last_input: first });
  assert.equal(me.predicted, 5.5);
  assert.equal(me.history.length, 2);
});
