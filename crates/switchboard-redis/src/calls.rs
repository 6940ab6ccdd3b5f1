//! This process's calls to Redis, counted for `/metrics`: how many, how
//! many failed, and how long they took. One count per process, whatever
//! the number of [`RedisStore`](crate::RedisStore)s (a mode opens several).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use switchboard::admin::Counter;

/// The calls to Redis this process made so far ([`calls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisCalls {
    /// Calls answered or failed.
    pub calls: u64,
    /// Of those, failed: an error, or no answer in time.
    pub errors: u64,
    /// Calls at or under each of [`RedisCalls::BOUNDS_MICROS`] (not
    /// cumulative), the last slot for the slower ones.
    pub counts: [u64; RedisCalls::BOUNDS_MICROS.len() + 1],
    /// Their total time, microseconds.
    pub sum_micros: u64,
}

impl RedisCalls {
    /// The latency buckets' upper bounds: 100 µs to 500 ms (a call's
    /// deadline is the response timeout plus the connect timeout).
    pub const BOUNDS_MICROS: [u64; 9] = [
        100, 250, 500, 1_000, 2_500, 10_000, 50_000, 100_000, 500_000,
    ];

    /// As `/metrics` shows them: `switchboard_redis_calls_total`,
    /// `switchboard_redis_errors_total` and the histogram
    /// `switchboard_redis_call_duration_seconds`.
    pub fn counters(&self) -> Vec<Counter> {
        let mut counters = vec![
            Counter::total(
                "switchboard_redis_calls_total",
                "Calls to Redis, answered or failed.",
                self.calls,
            ),
            Counter::total(
                "switchboard_redis_errors_total",
                "Calls to Redis that failed: an error, or no answer in time.",
                self.errors,
            ),
        ];
        counters.extend(Counter::histogram_micros(
            "switchboard_redis_call_duration_seconds",
            "How long calls to Redis took, failed ones included.",
            &Self::BOUNDS_MICROS,
            &self.counts,
            self.sum_micros,
        ));
        counters
    }
}

struct Tally {
    opened: AtomicBool,
    calls: AtomicU64,
    errors: AtomicU64,
    counts: [AtomicU64; RedisCalls::BOUNDS_MICROS.len() + 1],
    sum_micros: AtomicU64,
}

static TALLY: Tally = Tally {
    opened: AtomicBool::new(false),
    calls: AtomicU64::new(0),
    errors: AtomicU64::new(0),
    counts: [const { AtomicU64::new(0) }; RedisCalls::BOUNDS_MICROS.len() + 1],
    sum_micros: AtomicU64::new(0),
};

/// This process's calls to Redis so far; `None` if it never opened a store.
pub fn calls() -> Option<RedisCalls> {
    if !TALLY.opened.load(Ordering::Relaxed) {
        return None;
    }
    Some(RedisCalls {
        calls: TALLY.calls.load(Ordering::Relaxed),
        errors: TALLY.errors.load(Ordering::Relaxed),
        counts: std::array::from_fn(|i| TALLY.counts[i].load(Ordering::Relaxed)),
        sum_micros: TALLY.sum_micros.load(Ordering::Relaxed),
    })
}

/// A store was opened: the counts are worth showing from now on.
pub(crate) fn opened() {
    TALLY.opened.store(true, Ordering::Relaxed);
}

/// Counts one call that took `took` and failed or not.
pub(crate) fn count(took: Duration, failed: bool) {
    let (slot, micros) = switchboard::histogram::slot(&RedisCalls::BOUNDS_MICROS, took);
    TALLY.counts[slot].fetch_add(1, Ordering::Relaxed);
    TALLY.sum_micros.fetch_add(micros, Ordering::Relaxed);
    TALLY.calls.fetch_add(1, Ordering::Relaxed);
    if failed {
        TALLY.errors.fetch_add(1, Ordering::Relaxed);
    }
}
