//! Each player's transform budget: a rate and a burst, strikes past them,
//! and past the strikes the player marked abusive (`Relay::take_abusive`),
//! all on the relay's millisecond clock (no OS clock: a replay gives the
//! same verdicts).

use std::time::Duration;

use switchboard::session::{Millis, RateLimit, Strikes, TokenBucket};

use super::Relay;

/// The relay's limits per player; each field says its default.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RelayLimits {
    /// Transforms a player may send per second, sustained (default 60;
    /// players send at 10 to 20 Hz). One over it is dropped and counted as a
    /// strike.
    pub transforms_per_second: f64,
    /// Transforms a player may send at once (default 120).
    pub transform_burst: f64,
    /// Strikes within `strike_window_ms` before the player is disconnected
    /// for abuse (default 100).
    pub max_strikes: u32,
    /// The window strikes count in, milliseconds (default 10,000).
    pub strike_window_ms: u64,
}

impl Default for RelayLimits {
    fn default() -> Self {
        Self {
            transforms_per_second: 60.0,
            transform_burst: 120.0,
            max_strikes: 100,
            strike_window_ms: 10_000,
        }
    }
}

/// A player's transform budget and strikes, on the relay's millisecond clock.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Budget {
    bucket: TokenBucket<Millis>,
    strikes: Strikes<Millis>,
}

impl RelayLimits {
    fn transforms(&self) -> RateLimit {
        RateLimit {
            per_second: self.transforms_per_second,
            burst: self.transform_burst,
        }
    }
}

impl Relay {
    /// Spends one transform of `id`'s budget at `now_ms`; past the budget,
    /// a strike, and past the strikes, the player is marked abusive.
    pub(super) fn spend(&mut self, id: u32, now_ms: u64) -> bool {
        let (limits, now) = (self.limits, Millis(now_ms));
        let rate = limits.transforms();
        let budget = self.budgets.entry(id).or_insert_with(|| Budget {
            bucket: TokenBucket::full(&rate, now),
            strikes: Strikes::new(),
        });
        if budget.bucket.take(&rate, 1.0, now) {
            return true;
        }
        let window = Duration::from_millis(limits.strike_window_ms);
        if budget.strikes.strike(now, limits.max_strikes, window) {
            self.abusive
                .push((id, "too many transforms: over the rate limit".into()));
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_in_a_snapshot_keeps_the_bytes_it_had_before_the_one_token_bucket() {
        // Before: a budget was written as its level, its millisecond, then
        // its strikes' milliseconds.
        let rate = RelayLimits::default().transforms();
        let mut budget = Budget {
            bucket: TokenBucket::full(&rate, Millis(1_000)),
            strikes: Strikes::new(),
        };
        assert!(budget.bucket.take(&rate, 1.0, Millis(1_000)));
        budget
            .strikes
            .strike(Millis(1_200), 100, Duration::from_secs(10));
        let bytes = switchboard::codec::encode_value(&budget).unwrap();
        let before = (rate.burst - 1.0, 1_000u64, vec![1_200u64]);
        assert_eq!(bytes, switchboard::codec::encode_value(&before).unwrap());
    }
}
