//! Each player's transform budget: a rate and a burst, strikes past them,
//! and past the strikes the player marked abusive (`Relay::take_abusive`),
//! all on the relay's millisecond clock (no OS clock: a replay gives the
//! same verdicts).

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
    level: f64,
    at_ms: u64,
    strikes: std::collections::VecDeque<u64>,
}

impl Relay {
    /// Spends one transform of `id`'s budget at `now_ms`; past the budget,
    /// a strike, and past the strikes, the player is marked abusive.
    pub(super) fn spend(&mut self, id: u32, now_ms: u64) -> bool {
        let limits = self.limits;
        let budget = self.budgets.entry(id).or_insert(Budget {
            level: limits.transform_burst,
            at_ms: now_ms,
            strikes: std::collections::VecDeque::new(),
        });
        let elapsed = now_ms.saturating_sub(budget.at_ms) as f64 / 1000.0;
        budget.level =
            (budget.level + elapsed * limits.transforms_per_second).min(limits.transform_burst);
        budget.at_ms = budget.at_ms.max(now_ms);
        if budget.level >= 1.0 {
            budget.level -= 1.0;
            return true;
        }
        budget.strikes.push_back(now_ms);
        while budget
            .strikes
            .front()
            .is_some_and(|t| now_ms.saturating_sub(*t) > limits.strike_window_ms)
        {
            budget.strikes.pop_front();
        }
        if budget.strikes.len() > limits.max_strikes as usize {
            budget.strikes.clear();
            self.abusive
                .push((id, "too many transforms: over the rate limit".into()));
        }
        false
    }
}
