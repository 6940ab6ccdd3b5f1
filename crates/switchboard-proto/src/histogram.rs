//! [`Histogram`]: how long something took, counted in buckets of
//! microseconds (the relay's queue waits, ...), and [`slot`], the bucket a
//! time falls in for any such count.

use std::time::Duration;

/// Times counted at or under each of its bounds (not cumulative), the
/// last slot for the slower ones, with their sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    bounds_micros: &'static [u64],
    counts: Vec<u64>,
    sum_micros: u64,
}

impl Default for Histogram {
    /// No bounds: one bucket for everything.
    fn default() -> Self {
        Self::new(&[])
    }
}

impl Histogram {
    /// Empty, with buckets up to each of `bounds_micros` (ascending).
    pub fn new(bounds_micros: &'static [u64]) -> Self {
        Self {
            bounds_micros,
            counts: vec![0; bounds_micros.len() + 1],
            sum_micros: 0,
        }
    }

    /// Counts one time.
    pub fn observe(&mut self, took: Duration) {
        let (slot, micros) = slot(self.bounds_micros, took);
        self.counts[slot] += 1;
        self.sum_micros = self.sum_micros.saturating_add(micros);
    }

    /// The buckets' upper bounds, microseconds.
    pub fn bounds_micros(&self) -> &'static [u64] {
        self.bounds_micros
    }

    /// How many times fell in each bucket (one more than the bounds).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// The times' sum, microseconds.
    pub fn sum_micros(&self) -> u64 {
        self.sum_micros
    }

    /// How many times were counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The bucket `took` falls in among `bounds_micros` (`bounds_micros.len()`
/// past the last), and `took` in whole microseconds.
pub fn slot(bounds_micros: &[u64], took: Duration) -> (usize, u64) {
    let micros = took.as_micros().min(u64::MAX as u128) as u64;
    let slot = bounds_micros
        .iter()
        .position(|bound| micros <= *bound)
        .unwrap_or(bounds_micros.len());
    (slot, micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_fall_in_the_first_bucket_that_holds_them_and_the_rest_past_the_last() {
        let mut h = Histogram::new(&[10, 100]);
        for micros in [0, 10, 11, 100, 101, 5_000] {
            h.observe(Duration::from_micros(micros));
        }
        assert_eq!(h.counts(), &[2, 2, 2]);
        assert_eq!(h.count(), 6);
        assert_eq!(h.sum_micros(), 5_222);
    }
}
