//! Failures per address, with a wait that doubles: how password guessing is
//! slowed down. Time is passed in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::address_key;

/// How long an address waits after failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BackoffPolicy {
    /// The wait after the first failure (default 1 s); it doubles with each
    /// failure after it.
    pub first: Duration,
    /// The longest wait (default 60 s).
    pub max: Duration,
    /// Addresses remembered at most (default 4096); past it the one that
    /// failed longest ago is forgotten.
    pub max_addresses: usize,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
            max_addresses: 4096,
        }
    }
}

impl BackoffPolicy {
    /// The wait after `failures` failures in a row (none: zero): `first`,
    /// doubled for each failure after the first, at most `max`.
    pub fn wait_after(&self, failures: u32) -> Duration {
        doubling(self.first, self.max, failures)
    }
}

/// The one doubling wait every retry and every failure in Switchboard
/// waits: none before the first attempt, `first` after it, doubled with
/// each one after that, never past `max` (password failures, a client's
/// reconnects, the Bevy relay's, a host's rendezvous).
pub fn doubling(first: Duration, max: Duration, attempts: u32) -> Duration {
    match attempts {
        0 => Duration::ZERO,
        n => first.saturating_mul(1 << (n - 1).min(20)).min(max),
    }
}

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Failures {
    count: u32,
    #[serde(with = "crate::record::clock::instant")]
    last: Instant,
    #[serde(with = "crate::record::clock::instant")]
    until: Instant,
}

/// Failures per address: an IPv4 address, or an IPv6 /64 ([`address_key`],
/// applied here whatever the caller passes).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Backoff {
    policy: BackoffPolicy,
    addresses: HashMap<IpAddr, Failures>,
}

impl Backoff {
    /// Nobody failed yet.
    pub fn new(policy: BackoffPolicy) -> Self {
        Self {
            policy,
            addresses: HashMap::new(),
        }
    }

    /// How long `ip` must still wait before it may try again (zero: now).
    pub fn wait(&self, ip: IpAddr, now: Instant) -> Duration {
        self.addresses
            .get(&address_key(ip))
            .map_or(Duration::ZERO, |f| f.until.saturating_duration_since(now))
    }

    /// `ip` failed at `now`: its wait doubles.
    pub fn failed(&mut self, ip: IpAddr, now: Instant) {
        let ip = address_key(ip);
        if !self.addresses.contains_key(&ip)
            && self.addresses.len() >= self.policy.max_addresses.max(1)
        {
            if let Some(oldest) = self
                .addresses
                .iter()
                .min_by_key(|(_, f)| f.last)
                .map(|(ip, _)| *ip)
            {
                self.addresses.remove(&oldest);
            }
        }
        let policy = self.policy;
        let entry = self.addresses.entry(ip).or_insert(Failures {
            count: 0,
            last: now,
            until: now,
        });
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        entry.until = now + policy.wait_after(entry.count);
    }

    /// `ip` succeeded: its failures are forgotten.
    pub fn succeeded(&mut self, ip: IpAddr) {
        self.addresses.remove(&address_key(ip));
    }

    /// Forgets addresses whose last failure is older than the longest wait
    /// (their next failure starts over).
    pub fn forget_old(&mut self, now: Instant) {
        let keep = self.policy.max;
        self.addresses
            .retain(|_, f| now.saturating_duration_since(f.last) <= keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doubling_wait_starts_after_the_first_attempt_and_stops_at_its_ceiling() {
        let (first, max) = (Duration::from_millis(250), Duration::from_secs(5));
        let waits: Vec<u64> = (0..8)
            .map(|n| doubling(first, max, n).as_millis() as u64)
            .collect();
        assert_eq!(waits, [0, 250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(doubling(first, max, u32::MAX), max, "no overflow");
        assert_eq!(doubling(Duration::MAX, Duration::MAX, 40), Duration::MAX);
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn the_wait_doubles_from_the_first_failure_up_to_the_most() {
        let policy = BackoffPolicy {
            first: Duration::from_millis(5),
            max: Duration::from_secs(1),
            max_addresses: 1,
        };
        assert_eq!(policy.wait_after(0), Duration::ZERO);
        assert_eq!(policy.wait_after(1), Duration::from_millis(5));
        assert_eq!(policy.wait_after(3), Duration::from_millis(20));
        assert_eq!(policy.wait_after(40), Duration::from_secs(1));
    }

    #[test]
    fn the_wait_doubles_with_each_failure_up_to_the_maximum() {
        let t0 = Instant::now();
        let mut backoff = Backoff::new(BackoffPolicy::default());
        assert_eq!(backoff.wait(ip(2), t0), Duration::ZERO);
        let mut waits = Vec::new();
        for _ in 0..8 {
            backoff.failed(ip(2), t0);
            waits.push(backoff.wait(ip(2), t0).as_secs());
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff.wait(ip(3), t0), Duration::ZERO, "another address");
        backoff.succeeded(ip(2));
        assert_eq!(backoff.wait(ip(2), t0), Duration::ZERO);
    }

    #[test]
    fn the_table_is_bounded_and_forgets_old_failures() {
        let t0 = Instant::now();
        let mut backoff = Backoff::new(BackoffPolicy {
            max_addresses: 3,
            ..BackoffPolicy::default()
        });
        for last in 2..10 {
            backoff.failed(ip(last), t0 + Duration::from_secs(last as u64));
        }
        assert_eq!(backoff.addresses.len(), 3);
        assert!(backoff.wait(ip(9), t0 + Duration::from_secs(9)) > Duration::ZERO);
        backoff.forget_old(t0 + Duration::from_secs(200));
        assert!(backoff.addresses.is_empty());
    }
}
