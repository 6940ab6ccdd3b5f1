//! Inflate budgets: what a peer's compressed frames may cost in inflation,
//! per second (`SocketConfig::max_inflated_per_second`). A client's
//! connection has one of its own; a server's connections from one address
//! share one ([`AddressBudgets`]), so reconnecting does not refill it. The
//! time is passed in, as everywhere in this crate.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A token bucket of inflated bytes: `per_second` a second, and room for
/// one frame of `max_frame` at once.
#[derive(Debug)]
pub struct InflateBudget {
    per_second: usize,
    max_frame: usize,
    level: f64,
    at: Instant,
}

/// A budget as connections share it.
pub type SharedBudget = Arc<Mutex<InflateBudget>>;

impl InflateBudget {
    /// A full budget of `per_second`, with room for one frame of
    /// `max_frame` at once.
    pub fn new(per_second: usize, max_frame: usize, now: Instant) -> Self {
        Self {
            per_second,
            max_frame,
            level: Self::cap(per_second, max_frame),
            at: now,
        }
    }

    fn cap(per_second: usize, max_frame: usize) -> f64 {
        per_second.max(max_frame) as f64
    }

    /// Bytes that may be inflated now.
    pub fn room(&mut self, now: Instant) -> usize {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        let cap = Self::cap(self.per_second, self.max_frame);
        self.level = (self.level + elapsed * self.per_second as f64).min(cap);
        self.at = self.at.max(now);
        self.level as usize
    }

    /// `inflated` bytes were inflated.
    pub fn spend(&mut self, inflated: usize) {
        self.level = (self.level - inflated as f64).max(0.0);
    }

    /// Whether less than half of the budget is left at `now`: the address
    /// waits for it before it may connect again.
    pub fn is_spent(&mut self, now: Instant) -> bool {
        (self.room(now) as f64) < Self::cap(self.per_second, self.max_frame) / 2.0
    }

    /// The rate.
    pub fn per_second(&self) -> usize {
        self.per_second
    }

    /// Whether the bucket is full again at `now` (nothing to remember).
    fn is_full(&mut self, now: Instant) -> bool {
        self.room(now) as f64 >= Self::cap(self.per_second, self.max_frame)
    }
}

/// The budgets of a server's addresses. An address's budget outlives its
/// connections until it has refilled; the table is swept as it grows, so it
/// holds about as many entries as addresses seen in the last few seconds.
#[derive(Debug)]
pub struct AddressBudgets {
    per_second: usize,
    max_frame: usize,
    budgets: HashMap<IpAddr, SharedBudget>,
    sweep_at: usize,
}

impl AddressBudgets {
    /// An empty table whose budgets are `per_second`, with room for one
    /// frame of `max_frame`.
    pub fn new(per_second: usize, max_frame: usize) -> Self {
        Self {
            per_second,
            max_frame,
            budgets: HashMap::new(),
            sweep_at: 64,
        }
    }

    /// The budget of `ip` (an address key), shared with its other
    /// connections.
    pub fn of(&mut self, ip: IpAddr, now: Instant) -> SharedBudget {
        if self.budgets.len() >= self.sweep_at {
            // Forget the budgets no connection holds that have refilled.
            self.budgets.retain(|_, budget| {
                Arc::strong_count(budget) > 1 || !budget.lock().expect("budget lock").is_full(now)
            });
            self.sweep_at = (self.budgets.len() * 2).max(64);
        }
        let (per_second, max_frame) = (self.per_second, self.max_frame);
        self.budgets
            .entry(ip)
            .or_insert_with(|| Arc::new(Mutex::new(InflateBudget::new(per_second, max_frame, now))))
            .clone()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.budgets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn a_budget_allows_one_big_frame_then_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut budget = InflateBudget::new(8 * MIB, 4 * MIB, t0);
        assert_eq!(budget.room(t0), 8 * MIB);
        budget.spend(8 * MIB);
        assert_eq!(budget.room(t0), 0);
        assert_eq!(budget.room(t0 + Duration::from_millis(500)), 4 * MIB);
        assert_eq!(budget.room(t0 + Duration::from_secs(10)), 8 * MIB, "capped");
    }

    #[test]
    fn reconnecting_does_not_refill_an_address_s_budget() {
        let t0 = Instant::now();
        let mut budgets = AddressBudgets::new(8 * MIB, 4 * MIB);
        let ip = IpAddr::from([127, 0, 0, 2]);
        let first = budgets.of(ip, t0);
        first.lock().unwrap().spend(8 * MIB);
        drop(first);
        let again = budgets.of(ip, t0);
        assert_eq!(
            again.lock().unwrap().room(t0),
            0,
            "same budget, still empty"
        );
        let other = budgets.of(IpAddr::from([127, 0, 0, 3]), t0);
        assert_eq!(other.lock().unwrap().room(t0), 8 * MIB);
    }

    #[test]
    fn refilled_budgets_nobody_holds_are_forgotten() {
        let t0 = Instant::now();
        let mut budgets = AddressBudgets::new(8 * MIB, 4 * MIB);
        for i in 0..200u32 {
            let ip = IpAddr::from(i.to_be_bytes());
            budgets.of(ip, t0);
        }
        assert!(budgets.len() <= 128, "{} kept", budgets.len());
    }
}
