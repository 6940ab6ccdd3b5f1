//! Snapshot interpolation: what a client draws between the states a
//! server sent. Each snapshot carries the server's time; the buffer renders
//! a moment a little in the past (about two send intervals plus the
//! lateness it measured), blending the two snapshots around it, so that
//! uneven arrivals draw as even motion.
//!
//! ```text
//!  push(server_ms, now, value) ──▶ [ snapshots by server time ] ──▶ sample(now) → value at (server now - delay)
//!                                   delay = 2 × send interval + lateness (largest minus smallest
//!                                   one-way delay seen over the window: jitter, stalls)
//! ```
//!
//! When snapshots stop, it extrapolates from the last two for at most
//! `max_extrapolation`, then holds the last. When the delay it aims at
//! moves (the network got better or worse), playback runs up to
//! `catch_up` faster or slower until it is back on target, without a jump;
//! only a drift past `snap_after` jumps.

use std::collections::VecDeque;
use std::time::Duration;

/// A value that can be blended between two snapshots.
pub trait Interpolate: Clone {
    /// `self` at `t = 0`, `other` at `t = 1`; past 1, beyond `other` along
    /// the same motion (extrapolation).
    fn lerp(&self, other: &Self, t: f32) -> Self;
}

impl Interpolate for f32 {
    fn lerp(&self, other: &Self, t: f32) -> Self {
        self + (other - self) * t
    }
}

impl Interpolate for [f32; 3] {
    fn lerp(&self, other: &Self, t: f32) -> Self {
        [0, 1, 2].map(|i| self[i].lerp(&other[i], t))
    }
}

/// An angle in degrees, blended the short way round (350° to 10° passes
/// through 0°, not 180°).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Degrees(pub f32);

impl Interpolate for Degrees {
    fn lerp(&self, other: &Self, t: f32) -> Self {
        let delta = (other.0 - self.0 + 540.0).rem_euclid(360.0) - 180.0;
        Degrees((self.0 + delta * t).rem_euclid(360.0))
    }
}

/// A position and a rotation (Euler angles in degrees, as the relay's
/// transforms carry them), each angle blended the short way round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pose {
    /// Where.
    pub position: [f32; 3],
    /// Which way, in degrees.
    pub rotation: [f32; 3],
}

impl Interpolate for Pose {
    fn lerp(&self, other: &Self, t: f32) -> Self {
        Pose {
            position: self.position.lerp(&other.position, t),
            rotation: [0, 1, 2].map(|i| {
                Degrees(self.rotation[i])
                    .lerp(&Degrees(other.rotation[i]), t)
                    .0
            }),
        }
    }
}

/// How a buffer renders; each field says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct SmoothingConfig {
    /// Send intervals of delay before lateness is added (default 2).
    pub buffer_intervals: f64,
    /// Over how long lateness is measured (default 10 s): a stall seen
    /// within it keeps the delay long enough to ride the next one out.
    pub window: Duration,
    /// How far past the last snapshot it extrapolates (default 250 ms);
    /// then it holds.
    pub max_extrapolation: Duration,
    /// How much faster or slower than real time playback may run to get
    /// back to its target delay (default 0.1: ±10 %).
    pub catch_up: f64,
    /// A drift from the target past this jumps instead (default 1 s).
    pub snap_after: Duration,
    /// Snapshots kept at most (default 128).
    pub capacity: usize,
}

impl Default for SmoothingConfig {
    fn default() -> Self {
        Self {
            buffer_intervals: 2.0,
            window: Duration::from_secs(10),
            max_extrapolation: Duration::from_millis(250),
            catch_up: 0.1,
            snap_after: Duration::from_secs(1),
            capacity: 128,
        }
    }
}

/// How a rendered value was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleKind {
    /// Blended between two snapshots: what should be every frame.
    Interpolated,
    /// Past the last snapshot, along its motion (snapshots are late).
    Extrapolated,
    /// The last (or first) snapshot as it is.
    Held,
}

/// A rendered value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<T> {
    /// The value to draw.
    pub value: T,
    /// How it was made.
    pub kind: SampleKind,
    /// The server time it shows, ms.
    pub server_ms: f64,
    /// How far behind the newest server time it could show, ms: the delay
    /// interpolation adds.
    pub delay_ms: f64,
}

/// Counts of what a buffer rendered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmoothingStats {
    /// Frames sampled.
    pub frames: u64,
    /// Of which interpolated.
    pub interpolated: u64,
    /// Of which extrapolated.
    pub extrapolated: u64,
    /// Of which held.
    pub held: u64,
    /// Jumps back onto the target delay (a drift past `snap_after`).
    pub snaps: u64,
}

/// One entity's snapshots, rendered at an adaptive delay. Time is passed
/// in (`now` since any start); nothing here reads a clock.
#[derive(Debug, Clone)]
pub struct SnapshotBuffer<T> {
    config: SmoothingConfig,
    snapshots: VecDeque<(f64, T)>,
    /// (local ms, local ms - server ms) of each arrival within the window.
    offsets: VecDeque<(f64, f64)>,
    /// The send interval, ms (a moving average).
    interval: Option<f64>,
    /// The server time being shown, and when it was last advanced.
    playback: Option<(f64, f64)>,
    stats: SmoothingStats,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl<T: Interpolate> SnapshotBuffer<T> {
    /// An empty buffer.
    pub fn new(config: SmoothingConfig) -> Self {
        Self {
            config,
            snapshots: VecDeque::new(),
            offsets: VecDeque::new(),
            interval: None,
            playback: None,
            stats: SmoothingStats::default(),
        }
    }

    /// A snapshot stamped `server_ms` by the server arrived at `now`. One
    /// older than the newest is dropped (it changes nothing already drawn).
    pub fn push(&mut self, server_ms: f64, now: Duration, value: T) {
        let local = ms(now);
        if let Some(&(newest, _)) = self.snapshots.back() {
            if server_ms <= newest {
                return;
            }
            let step = server_ms - newest;
            self.interval = Some(self.interval.map_or(step, |i| i + (step - i) * 0.1));
        }
        self.snapshots.push_back((server_ms, value));
        while self.snapshots.len() > self.config.capacity.max(2) {
            self.snapshots.pop_front();
        }
        self.offsets.push_back((local, local - server_ms));
        let window = ms(self.config.window);
        while self
            .offsets
            .front()
            .is_some_and(|(at, _)| local - at > window)
        {
            self.offsets.pop_front();
        }
    }

    /// The delay it aims at now, ms behind the newest server time it could
    /// show: `buffer_intervals` send intervals plus the lateness seen.
    pub fn target_delay_ms(&self) -> f64 {
        let (low, high) = self
            .offsets
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), (_, o)| {
                (lo.min(*o), hi.max(*o))
            });
        let lateness = if self.offsets.is_empty() {
            0.0
        } else {
            high - low
        };
        self.interval.unwrap_or(0.0) * self.config.buffer_intervals + lateness
    }

    /// The value to draw at `now`, if any snapshot arrived.
    pub fn sample(&mut self, now: Duration) -> Option<Sample<T>> {
        let local = ms(now);
        let base = self
            .offsets
            .iter()
            .map(|(_, o)| *o)
            .fold(f64::MAX, f64::min);
        if self.snapshots.is_empty() || base == f64::MAX {
            return None;
        }
        // The newest server time this client could know of now.
        let server_now = local - base;
        let target = server_now - self.target_delay_ms();
        let shown = match self.playback {
            None => target,
            Some((shown, at)) => {
                let elapsed = (local - at).max(0.0);
                let drift = target - (shown + elapsed);
                if drift.abs() > ms(self.config.snap_after) {
                    self.stats.snaps += 1;
                    target
                } else {
                    // Run a little fast or slow until the drift is gone,
                    // never backwards.
                    let interval = self.interval.unwrap_or(50.0).max(1.0);
                    let rate = 1.0
                        + (drift / (interval * 4.0))
                            .clamp(-self.config.catch_up, self.config.catch_up);
                    shown + elapsed * rate
                }
            }
        };
        self.playback = Some((shown, local));
        self.stats.frames += 1;
        let (value, kind) = self.at(shown);
        match kind {
            SampleKind::Interpolated => self.stats.interpolated += 1,
            SampleKind::Extrapolated => self.stats.extrapolated += 1,
            SampleKind::Held => self.stats.held += 1,
        }
        // What is behind the snapshot before the one shown is not needed.
        while self.snapshots.len() > 2 && self.snapshots[1].0 <= shown {
            self.snapshots.pop_front();
        }
        Some(Sample {
            value,
            kind,
            server_ms: shown,
            delay_ms: server_now - shown,
        })
    }

    /// The value at server time `t`.
    fn at(&self, t: f64) -> (T, SampleKind) {
        let first = &self.snapshots[0];
        if t <= first.0 {
            return (first.1.clone(), SampleKind::Held);
        }
        for pair in self.snapshots.iter().zip(self.snapshots.iter().skip(1)) {
            let ((t0, a), (t1, b)) = pair;
            if t <= *t1 {
                let f = ((t - t0) / (t1 - t0)) as f32;
                return (a.lerp(b, f), SampleKind::Interpolated);
            }
        }
        let n = self.snapshots.len();
        let (t1, last) = &self.snapshots[n - 1];
        let past = t - t1;
        if n >= 2 && past <= ms(self.config.max_extrapolation) {
            let (t0, before) = &self.snapshots[n - 2];
            let f = ((t - t0) / (t1 - t0)) as f32;
            return (before.lerp(last, f), SampleKind::Extrapolated);
        }
        (last.clone(), SampleKind::Held)
    }

    /// What it rendered so far.
    pub fn stats(&self) -> SmoothingStats {
        self.stats
    }
}
