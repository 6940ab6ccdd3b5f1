//! Instants in a snapshot (a recording started mid-game): written as
//! signed offsets from the moment the snapshot was taken, read back
//! against the replay's clock, so that every wait, rate limit and timeout
//! stands where it stood.
//!
//! A type with `Instant` fields derives serde and marks them
//! `#[serde(with = "switchboard::record::clock::instant")]` (or `option`,
//! `deque` for `Option<Instant>` and `VecDeque<Instant>`), and is written
//! with [`encode_at`] and read with [`decode_at`]; outside those two calls
//! the fields refuse to serialize (an `Instant` has no meaning of its own).

use std::cell::Cell;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::codec::{self, ContentError};

thread_local! {
    /// The moment offsets count from, while encoding or decoding.
    static BASE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// How far before the base the earliest instant written lies.
    static REACH: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// Sets the base for the call, and puts the old one back after it (also
/// when the call panics).
fn with_base<R>(base: Instant, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BASE.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BASE.with(|b| b.replace(Some(base))));
    f()
}

/// `value` in Switchboard's codec, its instants as offsets from `base`.
pub fn encode_at<T: Serialize>(base: Instant, value: &T) -> Result<Vec<u8>, ContentError> {
    with_base(base, || codec::encode_value(value))
}

/// A value [`encode_at`] wrote, its instants placed relative to `base`.
pub fn decode_at<T: DeserializeOwned>(base: Instant, bytes: &[u8]) -> Result<T, ContentError> {
    with_base(base, || codec::decode_value(bytes))
}

/// Runs `f` (which encodes), and says how far before `base` the earliest
/// instant it wrote lies: a replay starts its clock that much later, so
/// that no instant falls before the replaying machine's clock began.
pub(crate) fn reach_of<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let old = REACH.with(|r| r.replace(Duration::ZERO));
    let result = f();
    let reach = REACH.with(|r| r.replace(old));
    (result, reach)
}

fn offset_of(at: Instant) -> Result<i64, String> {
    let base = BASE
        .with(Cell::get)
        .ok_or("an instant is written only in a snapshot (clock::encode_at)")?;
    Ok(match at.checked_duration_since(base) {
        Some(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        None => {
            let before = base.duration_since(at);
            REACH.with(|r| r.set(r.get().max(before)));
            -i64::try_from(before.as_nanos()).unwrap_or(i64::MAX)
        }
    })
}

fn at_offset(nanos: i64) -> Result<Instant, String> {
    let base = BASE
        .with(Cell::get)
        .ok_or("an instant is read only from a snapshot (clock::decode_at)")?;
    let shift = Duration::from_nanos(nanos.unsigned_abs());
    let at = if nanos >= 0 {
        base.checked_add(shift)
    } else {
        base.checked_sub(shift)
    };
    at.ok_or_else(|| "an instant of the snapshot is outside this machine's clock".to_string())
}

/// `#[serde(with = "...::clock::instant")]` for an `Instant`.
pub mod instant {
    use super::*;

    /// Writes it as an offset from the snapshot's moment.
    pub fn serialize<S: Serializer>(at: &Instant, s: S) -> Result<S::Ok, S::Error> {
        offset_of(*at)
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }

    /// Reads it back against the replay's clock.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        at_offset(i64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "...::clock::option")]` for an `Option<Instant>`.
pub mod option {
    use super::*;

    /// Writes it as an offset from the snapshot's moment, if any.
    pub fn serialize<S: Serializer>(at: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
        at.map(offset_of)
            .transpose()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }

    /// Reads it back against the replay's clock.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
        Option::<i64>::deserialize(d)?
            .map(at_offset)
            .transpose()
            .map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "...::clock::deque")]` for a `VecDeque<Instant>`.
pub mod deque {
    use super::*;

    /// Writes each as an offset from the snapshot's moment.
    pub fn serialize<S: Serializer>(all: &VecDeque<Instant>, s: S) -> Result<S::Ok, S::Error> {
        all.iter()
            .map(|at| offset_of(*at))
            .collect::<Result<Vec<i64>, String>>()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }

    /// Reads them back against the replay's clock.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VecDeque<Instant>, D::Error> {
        Vec::<i64>::deserialize(d)?
            .into_iter()
            .map(at_offset)
            .collect::<Result<VecDeque<Instant>, String>>()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Timed {
        #[serde(with = "instant")]
        at: Instant,
        #[serde(with = "option")]
        maybe: Option<Instant>,
        #[serde(with = "deque")]
        strikes: VecDeque<Instant>,
    }

    #[test]
    fn instants_keep_their_distance_from_the_snapshot_moment() {
        let now = Instant::now() + Duration::from_secs(100);
        let value = Timed {
            at: now - Duration::from_secs(30),
            maybe: Some(now + Duration::from_millis(1500)),
            strikes: [now - Duration::from_secs(2), now].into(),
        };
        let (bytes, reach) = reach_of(|| encode_at(now, &value).unwrap());
        assert_eq!(reach, Duration::from_secs(30));
        let later = now + Duration::from_secs(3600);
        let back: Timed = decode_at(later, &bytes).unwrap();
        assert_eq!(back.at, later - Duration::from_secs(30));
        assert_eq!(back.maybe, Some(later + Duration::from_millis(1500)));
        assert_eq!(
            back.strikes,
            VecDeque::from([later - Duration::from_secs(2), later])
        );
    }

    #[test]
    fn instants_outside_a_snapshot_are_an_error_not_a_guess() {
        let value = Timed {
            at: Instant::now(),
            maybe: None,
            strikes: VecDeque::new(),
        };
        assert!(codec::encode_value(&value).is_err());
    }
}
