//! [`Histogram`]: the one histogram of times, for every figure the project
//! keeps: the manager's request times, the relay's queue waits, the Redis
//! calls, the load tester's latencies, the benchmarks'. Log-linear buckets
//! give percentiles within 1 %; [`Histogram::counts_at`] cuts the same
//! counts at a metric's bucket bounds for `/metrics`.

use std::time::Duration;

/// Parts of each power of two.
const SUB_BUCKETS: u64 = 128;
/// Powers of two covered: up to 2^26 µs, 67 s.
const POWERS: u32 = 26;
/// The top of the range, µs.
const TOP_US: u64 = 1 << POWERS;
/// Buckets in all: powers 0 to 6 share the first `SUB_BUCKETS` (1 µs
/// each).
const BUCKETS: usize = (SUB_BUCKETS as usize) * (POWERS as usize - 6);

/// Times in log-linear buckets: each power of two of microseconds is cut
/// into 128 equal parts, so a bucket is at most 1/128 of its value wide
/// (under 1 % error) from 1 µs to 67 s, in 20 KiB; with the count, the sum
/// and the largest time seen, exactly (an overloaded run reports its real
/// seconds, not a cap).
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum_micros: u64,
    max_micros: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("sum_micros", &self.sum_micros)
            .field("p50_ms", &self.percentile_ms(0.5))
            .field("p99_ms", &self.percentile_ms(0.99))
            .field("max_ms", &self.max_ms())
            .finish()
    }
}

impl Histogram {
    /// Empty.
    pub fn new() -> Self {
        Self {
            buckets: vec![0; BUCKETS],
            count: 0,
            sum_micros: 0,
            max_micros: 0,
        }
    }

    /// Below `SUB_BUCKETS` a bucket per µs; above, the power of two and the
    /// top seven bits under its leading one.
    fn bucket(us: u64) -> usize {
        let us = us.min(TOP_US - 1);
        if us < SUB_BUCKETS {
            return us as usize;
        }
        let power = 63 - u64::from(us.leading_zeros()); // 7 and up
        let sub = (us >> (power - 7)) - SUB_BUCKETS;
        ((power - 6) * SUB_BUCKETS + sub) as usize
    }

    /// The lowest and highest time of bucket `i`, µs.
    fn range(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB_BUCKETS {
            return (i, i);
        }
        let power = i / SUB_BUCKETS + 6;
        let width = 1u64 << (power - 7);
        let low = (SUB_BUCKETS + i % SUB_BUCKETS) * width;
        (low, low + width - 1)
    }

    /// The middle of bucket `i`, µs.
    fn middle(i: usize) -> f64 {
        let (low, high) = Self::range(i);
        (low + high) as f64 / 2.0 + 0.5
    }

    /// Counts one time.
    pub fn record(&mut self, took: Duration) {
        self.record_micros(took.as_micros().min(u128::from(u64::MAX)) as u64);
    }

    /// Counts one time of `us` microseconds.
    pub fn record_micros(&mut self, us: u64) {
        self.buckets[Self::bucket(us)] += 1;
        self.count += 1;
        self.sum_micros = self.sum_micros.saturating_add(us);
        self.max_micros = self.max_micros.max(us);
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += *b;
        }
        self.count += other.count;
        self.sum_micros = self.sum_micros.saturating_add(other.sum_micros);
        self.max_micros = self.max_micros.max(other.max_micros);
    }

    /// How many times were counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The times' sum, microseconds.
    pub fn sum_micros(&self) -> u64 {
        self.sum_micros
    }

    /// The largest time counted, in ms.
    pub fn max_ms(&self) -> f64 {
        self.max_micros as f64 / 1000.0
    }

    /// The time below which a fraction `p` of the counts lie, in ms
    /// (within 1 %; the largest is exact; 0 when empty).
    pub fn percentile_ms(&self, p: f64) -> f64 {
        self.percentile_micros(p) / 1000.0
    }

    /// The same as a `Duration` (whole nanoseconds).
    pub fn percentile(&self, p: f64) -> Duration {
        Duration::from_nanos((self.percentile_micros(p) * 1000.0) as u64)
    }

    fn percentile_micros(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((self.count as f64 * p).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += *n;
            if seen >= rank {
                if i + 1 == self.buckets.len() {
                    // The top bucket holds everything past the range.
                    break;
                }
                return Self::middle(i).min(self.max_micros as f64);
            }
        }
        self.max_micros as f64
    }

    /// The counts cut at `bounds_micros` (ascending), as a metric's
    /// buckets: how many times fell at or under each bound and above the
    /// one before (not cumulative), then how many above the last. A bucket
    /// of this histogram that a bound cuts counts under the bound when its
    /// middle is (an error within its width, under 1 %).
    pub fn counts_at(&self, bounds_micros: &[u64]) -> Vec<u64> {
        let mut out = vec![0; bounds_micros.len() + 1];
        let mut slot = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            if *n == 0 {
                continue;
            }
            let (low, high) = Self::range(i);
            let middle = (low + high).div_ceil(2);
            while slot < bounds_micros.len() && middle > bounds_micros[slot] {
                slot += 1;
            }
            out[slot] += *n;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_from_the_histogram_within_one_percent() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record_micros(us * 10);
        }
        for (p, exact) in [(0.5, 5.0), (0.99, 9.9)] {
            let got = h.percentile_ms(p);
            assert!(
                (got - exact).abs() / exact < 0.01,
                "p{p}: {got} for {exact}"
            );
        }
        assert_eq!(h.max_ms(), 10.0);
        assert_eq!(h.count(), 1000);
        assert_eq!(h.sum_micros(), 10 * 500 * 1001);
        // Seconds too, and past the top the largest is still exact.
        let mut slow = Histogram::new();
        for us in [150_200u64, 2_500_200, 2_500_200, 2_500_200, 90_000_000] {
            slow.record_micros(us);
        }
        let fifth = slow.percentile_ms(0.2);
        assert!((fifth - 150.2).abs() / 150.2 < 0.01, "{fifth}");
        let most = slow.percentile_ms(0.6);
        assert!((most - 2500.2).abs() / 2500.2 < 0.01, "{most}");
        assert_eq!(slow.percentile_ms(1.0), 90_000.0);
        assert_eq!(slow.percentile(1.0), Duration::from_secs(90));
        // Every value lands in a bucket whose range holds it and whose
        // middle is within 1 % of it.
        for us in (1..5_000_000u64).step_by(997) {
            let i = Histogram::bucket(us);
            let (low, high) = Histogram::range(i);
            assert!(low <= us && us <= high, "{us}: {low}..={high}");
            let middle = Histogram::middle(i);
            assert!(
                (middle - us as f64).abs() / (us as f64) < 0.01 || us < 100,
                "{us}: {middle}"
            );
        }
        assert_eq!(Histogram::new().percentile_ms(0.99), 0.0);
    }

    #[test]
    fn merged_histograms_count_as_one() {
        let (mut a, mut b, mut both) = (Histogram::new(), Histogram::new(), Histogram::new());
        for us in [3, 700, 12_000] {
            a.record_micros(us);
            both.record_micros(us);
        }
        for us in [40, 2_000_000] {
            b.record_micros(us);
            both.record_micros(us);
        }
        a.merge(&b);
        assert_eq!(a, both);
    }

    #[test]
    fn times_are_cut_at_a_metrics_bounds_where_they_fall() {
        let mut h = Histogram::new();
        for micros in [0, 10, 11, 100, 101, 5_000, 200_000] {
            h.record(Duration::from_micros(micros));
        }
        assert_eq!(h.counts_at(&[10, 100, 1_000, 100_000]), [2, 2, 1, 1, 1]);
        assert_eq!(h.counts_at(&[]), [7]);
        // Above 128 µs a bucket is wider than 1 µs (128 µs at 25 ms): a
        // time a bucket away from a bound falls on its side.
        let mut near = Histogram::new();
        near.record_micros(24_800);
        near.record_micros(25_300);
        assert_eq!(near.counts_at(&[25_000]), [1, 1]);
    }
}
