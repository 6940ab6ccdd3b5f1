//! This process's calls to Redis, counted for `/metrics`: how many, how
//! many failed, and how long they took. One count per process, whatever
//! the number of [`RedisStore`](crate::RedisStore)s (a mode opens several).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use switchboard::admin::Counter;
use switchboard::histogram::Histogram;

/// The calls to Redis this process made so far ([`calls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisCalls {
    /// Calls answered or failed.
    pub calls: u64,
    /// Of those, failed: an error, or no answer in time.
    pub errors: u64,
    /// How long they took (on `/metrics` in buckets of
    /// [`RedisCalls::BOUNDS_MICROS`]).
    pub times: Histogram,
}

impl RedisCalls {
    /// The `/metrics` buckets' upper bounds: 100 µs to 500 ms (a call's
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
            &self.times,
        ));
        counters
    }
}

/// Whether a store was opened.
static OPENED: AtomicBool = AtomicBool::new(false);
/// The failed calls, and the times of all.
static TALLY: Mutex<Option<(u64, Histogram)>> = Mutex::new(None);

/// This process's calls to Redis so far; `None` if it never opened a store.
pub fn calls() -> Option<RedisCalls> {
    if !OPENED.load(Ordering::Relaxed) {
        return None;
    }
    let tally = TALLY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (errors, times) = tally.clone().unwrap_or_default();
    Some(RedisCalls {
        calls: times.count(),
        errors,
        times,
    })
}

/// A store was opened: the counts are worth showing from now on.
pub(crate) fn opened() {
    OPENED.store(true, Ordering::Relaxed);
}

/// Counts one call that took `took` and failed or not (a lock held for a
/// few additions, against a call's round trip to Redis).
pub(crate) fn count(took: Duration, failed: bool) {
    let mut tally = TALLY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (errors, times) = tally.get_or_insert_with(Default::default);
    times.record(took);
    *errors += u64::from(failed);
}
