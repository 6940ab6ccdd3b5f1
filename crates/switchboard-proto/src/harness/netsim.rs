//! A simulated network link for tests and demos, with a seed so that a run
//! repeats: latency, jitter, a bandwidth cap, and what loss does to a
//! reliable transport (TCP, WebSocket): nothing is lost, but a lost segment
//! stalls the stream until it is sent again, then what waited arrives in a
//! burst. Order is kept, as on one TCP connection.
//!
//! ```text
//!  send(now, item) ──▶ [ latency + jitter, the cap's queue, stalls ] ──▶ poll(now) → item, in order
//! ```

use std::collections::VecDeque;
use std::time::Duration;

/// A link's behaviour.
#[derive(Debug, Clone, PartialEq)]
pub struct NetSimConfig {
    /// One-way delay every item takes.
    pub latency: Duration,
    /// Up to this much more, drawn per item (uniform).
    pub jitter: Duration,
    /// Bytes per second the link carries (0: no cap); items wait their turn.
    pub bandwidth: u64,
    /// A stall (a retransmission) starts this often (zero: never)...
    pub stall_every: Duration,
    /// ...and holds everything for this long.
    pub stall: Duration,
    /// The seed of the jitter.
    pub seed: u64,
}

impl Default for NetSimConfig {
    /// 75 ms one way (150 ms round trip), 20 ms of jitter, a 200 ms stall
    /// every 3 s, no cap.
    fn default() -> Self {
        Self {
            latency: Duration::from_millis(75),
            jitter: Duration::from_millis(20),
            bandwidth: 0,
            stall_every: Duration::from_secs(3),
            stall: Duration::from_millis(200),
            seed: 1,
        }
    }
}

/// One direction of a simulated connection. Time is whatever the caller
/// says it is (a `Duration` since some start), so a test runs as fast as
/// it computes.
#[derive(Debug)]
pub struct Link<T> {
    config: NetSimConfig,
    /// Items in flight and when each arrives (non-decreasing: order kept).
    queue: VecDeque<(Duration, T)>,
    /// When the link's cap is free again.
    busy_until: Duration,
    /// The last arrival time given out: no item overtakes another.
    last_arrival: Duration,
    rng: u64,
}

impl<T> Link<T> {
    /// An empty link.
    pub fn new(config: NetSimConfig) -> Self {
        Self {
            rng: config.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            config,
            queue: VecDeque::new(),
            busy_until: Duration::ZERO,
            last_arrival: Duration::ZERO,
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// When a stall that covers `at` ends, if one does.
    fn stall_end(&self, at: Duration) -> Option<Duration> {
        let every = self.config.stall_every.as_nanos();
        if every == 0 || self.config.stall.is_zero() {
            return None;
        }
        let start = at.as_nanos() / every * every;
        let end = start + self.config.stall.as_nanos();
        (at.as_nanos() < end).then(|| Duration::from_nanos(end as u64))
    }

    /// Sends `item` of `len` bytes at `now`.
    pub fn send(&mut self, now: Duration, item: T, len: usize) {
        let mut leaves = now;
        if self.config.bandwidth > 0 {
            leaves = leaves.max(self.busy_until);
            let on_wire = Duration::from_secs_f64(len as f64 / self.config.bandwidth as f64);
            self.busy_until = leaves + on_wire;
            leaves = self.busy_until;
        }
        let jitter = self.config.jitter.as_nanos() as u64;
        let extra = if jitter == 0 {
            0
        } else {
            self.next_random() % (jitter + 1)
        };
        let mut arrives = leaves + self.config.latency + Duration::from_nanos(extra);
        // A stall holds the stream: what would arrive in it waits for its end.
        if let Some(end) = self.stall_end(arrives) {
            arrives = end;
        }
        arrives = arrives.max(self.last_arrival);
        self.last_arrival = arrives;
        self.queue.push_back((arrives, item));
    }

    /// The next item that has arrived by `now`, in order.
    pub fn poll(&mut self, now: Duration) -> Option<T> {
        if self.queue.front().is_some_and(|(at, _)| *at <= now) {
            return self.queue.pop_front().map(|(_, item)| item);
        }
        None
    }

    /// When the next item arrives, if one is in flight.
    pub fn next_arrival(&self) -> Option<Duration> {
        self.queue.front().map(|(at, _)| *at)
    }

    /// Items in flight.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}
