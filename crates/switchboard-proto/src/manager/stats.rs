//! What a server can report about itself.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::session::ClientId;

/// One connected client, as of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientStats {
    /// Its id.
    pub id: ClientId,
    /// Its name.
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// How long ago this connection opened.
    pub connected_for: Duration,
    /// How long ago it last sent anything.
    pub idle_for: Duration,
    /// Frames received from it.
    pub messages_in: u64,
    /// Bytes received from it.
    pub bytes_in: u64,
    /// Frames sent to it.
    pub messages_out: u64,
    /// Bytes sent to it.
    pub bytes_out: u64,
    /// Last measured round-trip time, microseconds.
    pub rtt_micros: u64,
}

/// A copy of the server's counters; later events do not change it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Clients connected and welcomed now.
    pub clients: Vec<ClientStats>,
    /// The traffic of every connection since the start, those that ended
    /// included (frames and bytes in and out, as the transport counts
    /// them; filled in by the server that runs the core, zero in a
    /// harness). It only grows.
    pub traffic: crate::connection::SocketStats,
    /// Sessions held, connected or within their grace period.
    pub sessions: usize,
    /// Connections accepted since the start.
    pub connections_total: u64,
    /// Clients admitted (new sessions) since the start.
    pub joins_total: u64,
    /// Reconnects that resumed a session.
    pub resumes_total: u64,
    /// Requests sent again after a reconnect that had been handled: their
    /// verdict went again, the request was not applied twice.
    pub repeated_requests_total: u64,
    /// Hellos refused (password, auth, token, full, name, address).
    pub refused_total: u64,
    /// Offline sessions that ended early to make room for a newcomer.
    pub evicted_total: u64,
    /// Requests accepted.
    pub accepted_total: u64,
    /// Requests rejected by the rules.
    pub rejected_total: u64,
    /// Error replies (unknown channel or action, bad content, too early).
    pub errors_total: u64,
    /// Messages dropped by the rate limit (each answered with an error).
    pub rate_limited_total: u64,
    /// Connections ended, by reason.
    pub disconnects: BTreeMap<String, u64>,
    /// Log lines about peers skipped by `ManagerRules::peer_log_rate`.
    pub logs_skipped_total: u64,
    /// Requests accepted, by channel (at most [`MAX_CHANNEL_KEYS`] channels;
    /// the rest under [`OTHER_CHANNEL`]).
    pub accepted_by_channel: BTreeMap<u16, u64>,
    /// Requests rejected by the rules, by channel (as above).
    pub rejected_by_channel: BTreeMap<u16, u64>,
    /// Error replies by code (`UnknownChannel`, `RateLimited`, ...).
    pub errors_by_code: BTreeMap<String, u64>,
    /// How long the server took to handle each request (validate, apply,
    /// queue the updates and the answer).
    pub request_time: RequestTimes,
    /// Where the clients are, as the game describes it
    /// ([`GameLogic::places`](super::logic::GameLogic::places)).
    pub places: Vec<super::logic::Place>,
}

/// Channels counted apart in the per-channel request counters; requests on
/// further channels count under [`OTHER_CHANNEL`], so that the counters
/// stay bounded whatever clients send.
pub const MAX_CHANNEL_KEYS: usize = 64;

/// The key the requests of channels past [`MAX_CHANNEL_KEYS`] count under.
pub const OTHER_CHANNEL: u16 = u16::MAX;

/// Counts one more for `channel` in `map`, within [`MAX_CHANNEL_KEYS`].
pub(crate) fn count_channel(map: &mut BTreeMap<u16, u64>, channel: u16) {
    let key = if map.len() < MAX_CHANNEL_KEYS || map.contains_key(&channel) {
        channel
    } else {
        OTHER_CHANNEL
    };
    *map.entry(key).or_default() += 1;
}

/// A histogram of request handling times, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTimes {
    /// Requests at or under each of [`RequestTimes::BOUNDS_MICROS`] (not
    /// cumulative), the last slot for the slower ones.
    pub counts: [u64; RequestTimes::BOUNDS_MICROS.len() + 1],
    /// Their total time, microseconds.
    pub sum_micros: u64,
}

impl Default for RequestTimes {
    fn default() -> Self {
        Self {
            counts: [0; RequestTimes::BOUNDS_MICROS.len() + 1],
            sum_micros: 0,
        }
    }
}

impl RequestTimes {
    /// The buckets' upper bounds: 10 µs to 100 ms.
    pub const BOUNDS_MICROS: [u64; 10] = [10, 25, 50, 100, 250, 500, 1_000, 5_000, 25_000, 100_000];

    /// Counts one request that took `took`.
    pub fn observe(&mut self, took: Duration) {
        let (slot, micros) = crate::histogram::slot(&Self::BOUNDS_MICROS, took);
        self.counts[slot] += 1;
        self.sum_micros = self.sum_micros.saturating_add(micros);
    }

    /// Requests counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_times_fall_in_their_buckets_and_add_up() {
        let mut times = RequestTimes::default();
        for micros in [5, 10, 11, 700, 200_000] {
            times.observe(Duration::from_micros(micros));
        }
        assert_eq!(times.counts[0], 2, "at or under 10 µs");
        assert_eq!(times.counts[1], 1, "at or under 25 µs");
        assert_eq!(times.counts[6], 1, "at or under 1 ms");
        assert_eq!(
            times.counts[RequestTimes::BOUNDS_MICROS.len()],
            1,
            "over 100 ms"
        );
        assert_eq!((times.count(), times.sum_micros), (5, 200_726));
    }

    #[test]
    fn channel_flood_keeps_the_per_channel_counters_bounded() {
        let mut map = BTreeMap::new();
        for channel in 16..16 + 10_000u16 {
            count_channel(&mut map, channel);
        }
        count_channel(&mut map, 16);
        assert_eq!(map.len(), MAX_CHANNEL_KEYS + 1);
        assert_eq!(map[&16], 2, "a channel already counted keeps its own key");
        assert_eq!(map[&OTHER_CHANNEL], 10_000 - MAX_CHANNEL_KEYS as u64);
    }
}
