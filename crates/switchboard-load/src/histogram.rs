//! The load tester's latency histogram.

/// Latencies in log-linear buckets: each power of two of microseconds is
/// cut into `SUB_BUCKETS` (128) equal parts, so a bucket is at most 1/128 of its
/// value wide (under 1% error) from 1 µs to `TOP_US` (67 s), in 10 KiB
/// (one per group of bots); and the largest seen, exactly (an overloaded run reports its
/// real seconds, not a cap).
#[derive(Debug)]
pub struct Histogram {
    buckets: Vec<u32>,
    max_us: u64,
    count: u64,
}

/// Parts of each power of two.
const SUB_BUCKETS: u64 = 128;
/// Powers of two covered: up to 2^26 µs, 67 s.
const POWERS: u32 = 26;
/// The top of the range, µs.
const TOP_US: u64 = 1 << POWERS;

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// Empty.
    pub fn new() -> Self {
        Self {
            // Powers 0 to 6 share the first SUB_BUCKETS (1 µs each).
            buckets: vec![0; (SUB_BUCKETS as usize) * (POWERS as usize - 6)],
            max_us: 0,
            count: 0,
        }
    }

    /// Below `SUB_BUCKETS` a bucket per µs; above, the power of two and the
    /// top seven bits under its leading one.
    fn bucket(us: u64) -> usize {
        let us = us.min(TOP_US - 1);
        if us < SUB_BUCKETS {
            return us as usize;
        }
        let power = 63 - us.leading_zeros() as u64; // 7 and up
        let sub = (us >> (power - 7)) - SUB_BUCKETS;
        ((power - 6) * SUB_BUCKETS + sub) as usize
    }

    /// The middle of bucket `i`, µs.
    fn middle(i: usize) -> f64 {
        let i = i as u64;
        if i < SUB_BUCKETS {
            return i as f64 + 0.5;
        }
        let power = i / SUB_BUCKETS + 6;
        let sub = i % SUB_BUCKETS;
        let width = 1u64 << (power - 7);
        ((SUB_BUCKETS + sub) * width) as f64 + width as f64 / 2.0
    }

    /// Counts one latency of `us` microseconds.
    pub fn record(&mut self, us: u64) {
        let i = Self::bucket(us);
        self.buckets[i] = self.buckets[i].saturating_add(1);
        self.max_us = self.max_us.max(us);
        self.count += 1;
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a = a.saturating_add(*b);
        }
        self.max_us = self.max_us.max(other.max_us);
        self.count += other.count;
    }

    /// The largest latency counted, in ms.
    pub fn max_ms(&self) -> f64 {
        self.max_us as f64 / 1000.0
    }

    /// The latency below which a fraction `p` of the counts lie, in ms.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = (self.count as f64 * p).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= rank && i + 1 < self.buckets.len() {
                return Self::middle(i).min(self.max_us as f64) / 1000.0;
            }
            if seen >= rank {
                // The top bucket holds everything past the range.
                break;
            }
        }
        self.max_us as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_from_the_histogram_within_one_percent() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record(us * 10);
        }
        for (p, exact) in [(0.5, 5.0), (0.99, 9.9)] {
            let got = h.percentile_ms(p);
            assert!(
                (got - exact).abs() / exact < 0.01,
                "p{p}: {got} for {exact}"
            );
        }
        assert_eq!(h.max_us, 10_000);
        // Seconds too, and past the top the largest is still exact.
        let mut slow = Histogram::new();
        for us in [150_200u64, 2_500_200, 2_500_200, 2_500_200, 90_000_000] {
            slow.record(us);
        }
        let quarter = slow.percentile_ms(0.2);
        assert!((quarter - 150.2).abs() / 150.2 < 0.01, "{quarter}");
        let most = slow.percentile_ms(0.6);
        assert!((most - 2500.2).abs() / 2500.2 < 0.01, "{most}");
        assert_eq!(slow.max_us, 90_000_000);
        assert_eq!(slow.percentile_ms(1.0), 90_000.0);
        // Every value lands in a bucket whose middle is within 1% of it.
        for us in (1..5_000_000u64).step_by(997) {
            let middle = Histogram::middle(Histogram::bucket(us));
            assert!(
                (middle - us as f64).abs() / (us as f64) < 0.01 || us < 100,
                "{us}: {middle}"
            );
        }
        // 10 KiB.
        assert_eq!(std::mem::size_of::<u32>() * h.buckets.len(), 10 * 1024);
    }
}
