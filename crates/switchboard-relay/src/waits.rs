//! [`QueueWaits`]: how long messages waited for the relay to take them, as
//! a histogram (the relay's own latency, `/metrics`).

use std::time::Duration;

/// How long the oldest message of each round of the relay's loop waited
/// between its connection's task and the relay (native and WebSocket
/// players; a relay that keeps up takes them within microseconds, one
/// short of CPU sees this grow). A histogram in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueWaits {
    /// Rounds at or under each of [`QueueWaits::BOUNDS_MICROS`] (not
    /// cumulative), the last slot for the slower ones.
    pub counts: [u64; QueueWaits::BOUNDS_MICROS.len() + 1],
    /// Their total wait, microseconds.
    pub sum_micros: u64,
}

impl Default for QueueWaits {
    fn default() -> Self {
        Self {
            counts: [0; QueueWaits::BOUNDS_MICROS.len() + 1],
            sum_micros: 0,
        }
    }
}

impl QueueWaits {
    /// The buckets' upper bounds: 10 µs to 250 ms.
    pub const BOUNDS_MICROS: [u64; 10] =
        [10, 50, 100, 250, 500, 1_000, 2_500, 10_000, 50_000, 250_000];

    /// Counts one round whose oldest message waited `wait`.
    pub fn observe(&mut self, wait: Duration) {
        let micros = wait.as_micros().min(u64::MAX as u128) as u64;
        let slot = Self::BOUNDS_MICROS
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(Self::BOUNDS_MICROS.len());
        self.counts[slot] += 1;
        self.sum_micros = self.sum_micros.saturating_add(micros);
    }
}
