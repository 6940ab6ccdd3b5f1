// Smooth motion on real networks (docs/SMOOTHING.md), as the Rust
// `switchboard::smoothing`: a SnapshotBuffer renders an entity's stamped
// snapshots interpolated at an adaptive delay (two send intervals plus the
// lateness it measured), catching up or slowing down instead of jumping,
// extrapolating briefly when they stop; a Link simulates a network
// (latency, jitter, stalls; seeded) for tests and demos.
//
//   const remote = new SnapshotBuffer(lerpPose);
//   relay.on('relayed', (r) => remote.push(r.server_time_ms, performance.now(), r.transform));
//   // every frame:
//   const sample = remote.sample(performance.now());   // { value, kind, serverMs, delayMs }
//
// Times are milliseconds on any one clock the caller keeps.

/** `a` at t = 0, `b` at t = 1; past 1 along the same motion. */
export const lerp = (a, b, t) => a + (b - a) * t;

/** Vectors of any length. */
export const lerpVec = (a, b, t) => a.map((x, i) => lerp(x, b[i], t));

/** Degrees, the short way round (350 to 10 passes 0). */
export function lerpDegrees(a, b, t) {
  const delta = ((((b - a + 540) % 360) + 360) % 360) - 180;
  return (((a + delta * t) % 360) + 360) % 360;
}

/** A relay transform's position and rotation (degrees, the short way); the rest from `b`. */
export function lerpPose(a, b, t) {
  return {
    ...b,
    position: lerpVec(a.position, b.position, t),
    rotation: a.rotation.map((x, i) => lerpDegrees(x, b.rotation[i], t)),
  };
}

/** The Rust SmoothingConfig's defaults, in milliseconds. */
export const DEFAULT_SMOOTHING = Object.freeze({
  bufferIntervals: 2,
  windowMs: 10000,
  maxExtrapolationMs: 250,
  catchUp: 0.1,
  snapAfterMs: 1000,
  capacity: 128,
});

/** One entity's snapshots, rendered at an adaptive delay. */
export class SnapshotBuffer {
  /**
   * @param {(a: any, b: any, t: number) => any} blend how two values mix (lerpPose, lerpVec, lerp)
   * @param {Partial<typeof DEFAULT_SMOOTHING>} [config]
   */
  constructor(blend, config = {}) {
    this.blend = blend;
    this.config = { ...DEFAULT_SMOOTHING, ...config };
    this.snapshots = []; // [serverMs, value], oldest first
    this.offsets = []; // [localMs, localMs - serverMs]
    this.interval = null;
    this.playback = null; // [serverMs shown, localMs]
    this.stats = { frames: 0, interpolated: 0, extrapolated: 0, held: 0, snaps: 0 };
  }

  /** A snapshot stamped `serverMs` arrived at `nowMs`; one not newer than the newest is dropped. */
  push(serverMs, nowMs, value) {
    const newest = this.snapshots.at(-1);
    if (newest) {
      if (serverMs <= newest[0]) return;
      const step = serverMs - newest[0];
      this.interval = this.interval === null ? step : this.interval + (step - this.interval) * 0.1;
    }
    this.snapshots.push([serverMs, value]);
    while (this.snapshots.length > Math.max(2, this.config.capacity)) this.snapshots.shift();
    this.offsets.push([nowMs, nowMs - serverMs]);
    while (this.offsets.length && nowMs - this.offsets[0][0] > this.config.windowMs) this.offsets.shift();
  }

  /** The delay it aims at, ms behind the newest server time it could show. */
  targetDelayMs() {
    let low = Infinity;
    let high = -Infinity;
    for (const [, o] of this.offsets) {
      low = Math.min(low, o);
      high = Math.max(high, o);
    }
    const lateness = this.offsets.length ? high - low : 0;
    return (this.interval ?? 0) * this.config.bufferIntervals + lateness;
  }

  /** The value to draw at `nowMs`: `{ value, kind, serverMs, delayMs }`, or null before any snapshot. */
  sample(nowMs) {
    if (!this.snapshots.length || !this.offsets.length) return null;
    const base = Math.min(...this.offsets.map(([, o]) => o));
    const serverNow = nowMs - base;
    const target = serverNow - this.targetDelayMs();
    let shown = target;
    if (this.playback) {
      const [was, at] = this.playback;
      const elapsed = Math.max(0, nowMs - at);
      const drift = target - (was + elapsed);
      if (Math.abs(drift) > this.config.snapAfterMs) {
        this.stats.snaps++;
      } else {
        const interval = Math.max(1, this.interval ?? 50);
        const c = this.config.catchUp;
        const rate = 1 + Math.min(c, Math.max(-c, drift / (interval * 4)));
        shown = was + elapsed * rate;
      }
    }
    this.playback = [shown, nowMs];
    this.stats.frames++;
    const [value, kind] = this.at(shown);
    this.stats[kind]++;
    while (this.snapshots.length > 2 && this.snapshots[1][0] <= shown) this.snapshots.shift();
    return { value, kind, serverMs: shown, delayMs: serverNow - shown };
  }

  at(t) {
    const s = this.snapshots;
    if (t <= s[0][0]) return [s[0][1], 'held'];
    for (let i = 1; i < s.length; i++) {
      if (t <= s[i][0]) {
        const [t0, a] = s[i - 1];
        const [t1, b] = s[i];
        return [this.blend(a, b, (t - t0) / (t1 - t0)), 'interpolated'];
      }
    }
    const [t1, last] = s.at(-1);
    if (s.length >= 2 && t - t1 <= this.config.maxExtrapolationMs) {
      const [t0, before] = s.at(-2);
      return [this.blend(before, last, (t - t0) / (t1 - t0)), 'extrapolated'];
    }
    return [last, 'held'];
  }
}

/**
 * One direction of a simulated network, seeded: latency, jitter, a
 * bandwidth cap (bytes a second, 0: none), stalls (every `stallEveryMs`,
 * everything waits `stallMs`, then arrives), order kept.
 */
export class Link {
  constructor({ latencyMs = 75, jitterMs = 20, bandwidth = 0, stallEveryMs = 3000, stallMs = 200, seed = 1 } = {}) {
    Object.assign(this, { latencyMs, jitterMs, bandwidth, stallEveryMs, stallMs });
    this.queue = [];
    this.busyUntil = 0;
    this.lastArrival = 0;
    this.rng = (seed * 2654435761) >>> 0 || 1;
  }

  random() {
    // xorshift32
    let x = this.rng;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    this.rng = x >>> 0;
    return this.rng / 4294967296;
  }

  /** Sends `item` of `bytes` at `nowMs`. */
  send(nowMs, item, bytes = 0) {
    let leaves = nowMs;
    if (this.bandwidth > 0) {
      leaves = Math.max(leaves, this.busyUntil) + (bytes / this.bandwidth) * 1000;
      this.busyUntil = leaves;
    }
    let arrives = leaves + this.latencyMs + (this.jitterMs ? this.random() * this.jitterMs : 0);
    if (this.stallEveryMs > 0 && this.stallMs > 0) {
      const start = Math.floor(arrives / this.stallEveryMs) * this.stallEveryMs;
      if (arrives < start + this.stallMs) arrives = start + this.stallMs;
    }
    arrives = Math.max(arrives, this.lastArrival);
    this.lastArrival = arrives;
    this.queue.push([arrives, item]);
  }

  /** Every item that has arrived by `nowMs`, in order. */
  poll(nowMs) {
    let n = 0;
    while (n < this.queue.length && this.queue[n][0] <= nowMs) n++;
    return this.queue.splice(0, n).map(([, item]) => item);
  }
}

/**
 * Client-side prediction with server reconciliation, as the Rust
 * `Predictor`: inputs applied at once with the game's own `step(state,
 * input)`, numbered (send the number with the input); a server state
 * `{ state, last_input }` starts the prediction again from it with the
 * inputs it has not seen, and what was drawn blends into the corrected
 * path over `correctionMs` instead of jumping.
 */
export class Predictor {
  /**
   * @param {any} state where it starts
   * @param {(state: any, input: any) => any} step one input's effect
   * @param {(a: any, b: any, t: number) => any} blend how two states mix (lerpVec, lerpPose)
   * @param {{ correctionMs?: number, maxHistory?: number }} [options]
   */
  constructor(state, step, blend, { correctionMs = 100, maxHistory = 256 } = {}) {
    Object.assign(this, { predicted: state, step, blend, correctionMs, maxHistory });
    this.history = []; // [number, input]
    this.next = 1;
    this.blending = null; // { old, doneMs }
    this.corrections = 0;
  }

  /** Applies `input` now; returns its number, to send with it. */
  input(input) {
    const number = this.next;
    this.next = (this.next + 1) >>> 0;
    this.predicted = this.step(this.predicted, input);
    if (this.blending) this.blending.old = this.step(this.blending.old, input);
    this.history.push([number, input]);
    while (this.history.length > this.maxHistory) this.history.shift();
    return number;
  }

  /** The server's `{ state, last_input }`: replays what it has not seen. */
  reconcile({ state, last_input: lastInput }) {
    // Numbers up to lastInput (wrapping, as u32) are done.
    while (this.history.length && ((lastInput - this.history[0][0]) >>> 0) < 2 ** 31) this.history.shift();
    let corrected = state;
    for (const [, input] of this.history) corrected = this.step(corrected, input);
    const drawn = this.drawn();
    this.predicted = corrected;
    this.blending = { old: drawn, doneMs: 0 };
    this.corrections++;
  }

  /** Moves the blend on by `elapsedMs` (once a frame, before drawing). */
  advance(elapsedMs) {
    if (!this.blending) return;
    this.blending.doneMs += elapsedMs;
    if (this.blending.doneMs >= this.correctionMs) this.blending = null;
  }

  /** What to draw: the prediction, or the old path on its way into it. */
  drawn() {
    if (!this.blending || this.correctionMs <= 0) return this.predicted;
    return this.blend(this.blending.old, this.predicted, Math.min(1, this.blending.doneMs / this.correctionMs));
  }
}
