//! [`Strikes`]: the one count of a peer's offences within a window, past
//! which it is out: the manager's invalid messages, the relay's transforms
//! over the budget.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Clock;

/// A peer's strikes, on a [`Clock`]: when they are more than `max` within
/// `window`, it is out. Holds at most `max + 1` times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strikes<T: Clock = Instant> {
    times: VecDeque<T>,
}

impl<T: Clock> Default for Strikes<T> {
    fn default() -> Self {
        Self {
            times: VecDeque::new(),
        }
    }
}

impl<T: Clock> Strikes<T> {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One more strike at `now`: whether the strikes within `window` are
    /// now more than `max`. Then they are forgotten (the peer is put out;
    /// a new connection starts afresh).
    pub fn strike(&mut self, now: T, max: u32, window: Duration) -> bool {
        self.times.push_back(now);
        while self.times.front().is_some_and(|at| now.since(*at) > window) {
            self.times.pop_front();
        }
        if self.times.len() > max as usize {
            self.times.clear();
            return true;
        }
        false
    }

    /// Strikes remembered (those within the window as of the last one).
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }
}

/// Written in a snapshot as the sequence of its times.
impl<T: Clock> Serialize for Strikes<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct At<'a, T>(&'a T);
        impl<T: Clock> Serialize for At<'_, T> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.0.write(s)
            }
        }
        s.collect_seq(self.times.iter().map(At))
    }
}

impl<'de, T: Clock> Deserialize<'de> for Strikes<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct At<T>(T);
        impl<'de, T: Clock> Deserialize<'de> for At<T> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                T::read(d).map(At)
            }
        }
        let times: Vec<At<T>> = Vec::deserialize(d)?;
        Ok(Self {
            times: times.into_iter().map(|At(at)| at).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Millis;

    #[test]
    fn more_strikes_than_the_most_within_the_window_put_the_peer_out() {
        let mut strikes = Strikes::new();
        let window = Duration::from_secs(10);
        for at in 0..3 {
            assert!(!strikes.strike(Millis(at * 1000), 3, window));
        }
        // The fourth within ten seconds is one too many; they start afresh.
        assert!(strikes.strike(Millis(3_000), 3, window));
        assert!(strikes.is_empty());
        // Spread out, they never add up.
        for at in 0..20 {
            assert!(!strikes.strike(Millis(10_000 + at * 4_000), 3, window));
        }
        assert!(strikes.len() <= 3);
    }

    #[test]
    fn strikes_in_a_snapshot_read_back_as_they_were() {
        let mut strikes = Strikes::new();
        strikes.strike(Millis(5), 10, Duration::from_secs(1));
        strikes.strike(Millis(7), 10, Duration::from_secs(1));
        let bytes = crate::codec::encode_value(&strikes).unwrap();
        // The same bytes as the sequence of times.
        assert_eq!(bytes, crate::codec::encode_value(&vec![5u64, 7]).unwrap());
        let back: Strikes<Millis> = crate::codec::decode_value(&bytes).unwrap();
        assert_eq!(back, strikes);
        // On the OS clock, as offsets from the snapshot's moment.
        let now = Instant::now();
        let mut strikes = Strikes::new();
        strikes.strike(now, 10, Duration::from_secs(1));
        let bytes = crate::record::clock::encode_at(now, &strikes).unwrap();
        let back: Strikes = crate::record::clock::decode_at(now, &bytes).unwrap();
        assert_eq!(back, strikes);
    }
}
