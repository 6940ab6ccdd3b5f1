//! Rate limits: token buckets, per client (messages and bytes) and per key
//! (such as a source IP).

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::address_key;

/// One limit: a sustained rate and a burst.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RateLimit {
    /// Units per second refilled.
    pub per_second: f64,
    /// Units that may be spent at once.
    pub burst: f64,
}

/// One bucket per key (a source IP, say), created full on first use, for at
/// most `max_keys` keys (default 65,536): when a new key finds the table
/// full, the keys whose buckets have refilled are forgotten (a full bucket
/// is what a new key gets anyway), and if none has, one key is.
#[derive(Debug)]
pub struct KeyedLimiter<K> {
    limit: RateLimit,
    buckets: HashMap<K, TokenBucket>,
    max_keys: usize,
}

impl<K: Eq + Hash + Clone> KeyedLimiter<K> {
    /// Buckets of `limit` for every key.
    pub fn new(limit: RateLimit) -> Self {
        Self::with_max_keys(limit, 65_536)
    }

    /// Buckets of `limit`, for at most `max_keys` keys at once.
    pub fn with_max_keys(limit: RateLimit, max_keys: usize) -> Self {
        Self {
            limit,
            buckets: HashMap::new(),
            max_keys: max_keys.max(1),
        }
    }

    /// Spends one unit of `key`'s bucket if it has one.
    pub fn allow(&mut self, key: K, now: Instant) -> bool {
        self.allow_n(key, 1.0, now)
    }

    /// Spends `n` units of `key`'s bucket (bytes, say) if it has them all;
    /// otherwise spends nothing.
    pub fn allow_n(&mut self, key: K, n: f64, now: Instant) -> bool {
        if !self.buckets.contains_key(&key) && self.buckets.len() >= self.max_keys {
            self.forget_refilled(now);
            if self.buckets.len() >= self.max_keys {
                let any = self.buckets.keys().next().cloned();
                if let Some(any) = any {
                    self.buckets.remove(&any);
                }
            }
        }
        let limit = &self.limit;
        self.buckets
            .entry(key)
            .or_insert_with(|| TokenBucket::full(limit, now))
            .take(limit, n, now)
    }

    /// Forgets keys unused for `idle` (a full bucket is what a new key gets
    /// anyway), so that the table stays bounded by recent senders.
    pub fn forget_idle(&mut self, now: Instant, idle: Duration) {
        self.buckets.retain(|_, b| now.since(b.at) < idle);
    }

    /// Forgets keys whose buckets are full again.
    fn forget_refilled(&mut self, now: Instant) {
        let limit = &self.limit;
        self.buckets.retain(|_, b| {
            b.refill(limit, now);
            b.level < limit.burst
        });
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

/// Log lines about peers, limited per address so that no peer can flood
/// the operator's log: each address (an IPv6 /64 as one) has a bucket of
/// lines; a line over it is skipped and counted, and the next line let
/// through says how many were.
#[derive(Debug)]
pub struct LogLimiter {
    lines: KeyedLimiter<IpAddr>,
    skipped: u64,
    skipped_total: u64,
}

impl LogLimiter {
    /// `limit` lines for every address.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            lines: KeyedLimiter::new(limit),
            skipped: 0,
            skipped_total: 0,
        }
    }

    /// Whether a line about a peer at `ip` may be logged now: `Some(n)` if
    /// it may, `n` being the lines (from any address) skipped since the
    /// last one let through; `None` if it is skipped.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> Option<u64> {
        if !self.lines.allow(address_key(ip), now) {
            self.skipped += 1;
            self.skipped_total += 1;
            return None;
        }
        Some(std::mem::take(&mut self.skipped))
    }

    /// Lines skipped since the start.
    pub fn skipped_total(&self) -> u64 {
        self.skipped_total
    }
}

/// A time the limits count in: the OS clock's [`Instant`], or
/// [`Millis`] on a clock of the caller's own (the relay's, so that a replay
/// gives the same verdicts). Written in a snapshot as such: an `Instant` as
/// an offset from the snapshot's moment (`record::clock`), `Millis` as is.
pub trait Clock: Copy + Ord + std::fmt::Debug {
    /// How long after `earlier` this is (zero if before).
    fn since(self, earlier: Self) -> Duration;
    /// Writes it in a snapshot.
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
    /// Reads it from a snapshot.
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

impl Clock for Instant {
    fn since(self, earlier: Self) -> Duration {
        self.saturating_duration_since(earlier)
    }

    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::record::clock::instant::serialize(self, s)
    }

    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::record::clock::instant::deserialize(d)
    }
}

/// Milliseconds on a clock of the caller's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);

impl Clock for Millis {
    fn since(self, earlier: Self) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }

    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64::deserialize(d).map(Millis)
    }
}

fn write_at<T: Clock, S: Serializer>(at: &T, s: S) -> Result<S::Ok, S::Error> {
    at.write(s)
}

fn read_at<'de, T: Clock, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    T::read(d)
}

/// The one token bucket: up to a [`RateLimit`]'s burst, refilled at its
/// rate, on a [`Clock`]; the limit is the caller's (one per kind of unit,
/// not one per bucket). Behind [`RateLimiter`], [`KeyedLimiter`] and the
/// relay's per-player budget.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(bound = "T: Clock")]
pub struct TokenBucket<T: Clock = Instant> {
    level: f64,
    #[serde(serialize_with = "write_at", deserialize_with = "read_at")]
    at: T,
}

impl<T: Clock> TokenBucket<T> {
    /// A full bucket at `now`.
    pub fn full(limit: &RateLimit, now: T) -> Self {
        Self {
            level: limit.burst,
            at: now,
        }
    }

    /// Refills it for the time since it was last refilled (never back in
    /// time: an earlier `now` refills nothing).
    pub fn refill(&mut self, limit: &RateLimit, now: T) {
        let elapsed = now.since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * limit.per_second).min(limit.burst);
        self.at = self.at.max(now);
    }

    /// Refills it, then spends `n` units if it has them all; otherwise
    /// spends nothing.
    pub fn take(&mut self, limit: &RateLimit, n: f64, now: T) -> bool {
        self.refill(limit, now);
        if self.level < n {
            return false;
        }
        self.level -= n;
        true
    }

    /// Units in it, as of its last refill.
    pub fn level(&self) -> f64 {
        self.level
    }

    /// When it was last refilled.
    pub fn at(&self) -> T {
        self.at
    }

    /// How long until it holds `n` units at `limit`'s rate (at most an
    /// hour).
    pub fn wait_for(&self, limit: &RateLimit, n: f64) -> Duration {
        let seconds = (n - self.level).max(0.0) / limit.per_second.max(f64::MIN_POSITIVE);
        Duration::from_secs_f64(seconds.min(3600.0))
    }
}

/// A client's two buckets: messages and bytes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RateLimiter {
    messages: Limited,
    bytes: Limited,
}

/// A bucket with its limit (as a snapshot writes them: the limit, then the
/// bucket).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Limited {
    limit: RateLimit,
    bucket: TokenBucket,
}

impl Limited {
    fn new(limit: RateLimit, now: Instant) -> Self {
        Self {
            bucket: TokenBucket::full(&limit, now),
            limit,
        }
    }
}

impl RateLimiter {
    /// Full buckets at `now`.
    pub fn new(messages: RateLimit, bytes: RateLimit, now: Instant) -> Self {
        Self {
            messages: Limited::new(messages, now),
            bytes: Limited::new(bytes, now),
        }
    }

    /// Spends one message of `len` bytes if both buckets allow it; otherwise
    /// spends nothing and returns false.
    pub fn allow(&mut self, len: usize, now: Instant) -> bool {
        let (messages, bytes) = (&mut self.messages, &mut self.bytes);
        messages.bucket.refill(&messages.limit, now);
        bytes.bucket.refill(&bytes.limit, now);
        if messages.bucket.level < 1.0 || bytes.bucket.level < len as f64 {
            return false;
        }
        messages.bucket.level -= 1.0;
        bytes.bucket.level -= len as f64;
        true
    }

    /// How long until one more message of `len` bytes would be allowed.
    pub fn retry_after(&self, len: usize) -> Duration {
        let (messages, bytes) = (&self.messages, &self.bytes);
        messages
            .bucket
            .wait_for(&messages.limit, 1.0)
            .max(bytes.bucket.wait_for(&bytes.limit, len as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSGS: RateLimit = RateLimit {
        per_second: 10.0,
        burst: 5.0,
    };
    const BYTES: RateLimit = RateLimit {
        per_second: 1000.0,
        burst: 1000.0,
    };

    #[test]
    fn burst_then_sustained_rate() {
        let t0 = Instant::now();
        let mut limiter = RateLimiter::new(MSGS, BYTES, t0);
        assert!((0..5).all(|_| limiter.allow(10, t0)));
        assert!(!limiter.allow(10, t0), "burst spent");
        assert!(!limiter.allow(10, t0 + Duration::from_millis(50)));
        assert!(
            limiter.allow(10, t0 + Duration::from_millis(100)),
            "one refilled after 100 ms"
        );
        assert!(limiter.retry_after(10) > Duration::ZERO);
    }

    #[test]
    fn keyed_limiter_keeps_keys_apart_and_forgets_idle_ones() {
        let t0 = Instant::now();
        let mut limiter = KeyedLimiter::new(RateLimit {
            per_second: 1.0,
            burst: 2.0,
        });
        assert!(limiter.allow("a", t0) && limiter.allow("a", t0));
        assert!(!limiter.allow("a", t0));
        assert!(limiter.allow("b", t0), "another key has its own bucket");
        assert!(limiter.allow("a", t0 + Duration::from_secs(1)));
        limiter.forget_idle(t0 + Duration::from_secs(100), Duration::from_secs(10));
        assert!(limiter.buckets.is_empty());
    }

    #[test]
    fn a_limiter_in_a_snapshot_keeps_the_bytes_it_had_before_the_one_token_bucket() {
        // Before: each bucket was written as its limit, its level, then its
        // instant (an offset from the snapshot's moment, nanoseconds).
        let t0 = Instant::now();
        let mut limiter = RateLimiter::new(MSGS, BYTES, t0);
        assert!(limiter.allow(100, t0));
        let bytes = crate::record::clock::encode_at(t0, &limiter).unwrap();
        let before = (MSGS, 4.0f64, 0i64, BYTES, 900.0f64, 0i64);
        assert_eq!(bytes, crate::codec::encode_value(&before).unwrap());
        let back: RateLimiter = crate::record::clock::decode_at(t0, &bytes).unwrap();
        assert_eq!(back.retry_after(1000), limiter.retry_after(1000));
    }

    #[test]
    fn bytes_limit_counts_size() {
        let t0 = Instant::now();
        let mut limiter = RateLimiter::new(MSGS, BYTES, t0);
        assert!(limiter.allow(900, t0));
        assert!(!limiter.allow(200, t0), "only 100 bytes left");
        assert!(limiter.allow(100, t0));
        assert!(limiter.allow(500, t0 + Duration::from_millis(500)));
    }

    #[test]
    fn spoofed_sources_cannot_grow_the_keyed_limiter_past_its_bound() {
        let t0 = Instant::now();
        let limit = RateLimit {
            per_second: 0.1,
            burst: 4.0,
        };
        let mut limiter = KeyedLimiter::with_max_keys(limit, 100);
        for i in 0..10_000u32 {
            limiter.allow(i, t0);
        }
        assert!(limiter.len() <= 100, "{} keys", limiter.len());
        // A key being limited keeps its state while others come and go.
        let mut busy = KeyedLimiter::with_max_keys(limit, 100);
        for _ in 0..4 {
            assert!(busy.allow(u32::MAX, t0));
        }
        assert!(!busy.allow(u32::MAX, t0));
    }
}
