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
    /// ([`Histogram`](crate::histogram::Histogram): percentiles, and
    /// the `/metrics` buckets at [`REQUEST_TIME_BOUNDS_MICROS`].)
    pub request_time: crate::histogram::Histogram,
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

/// The buckets of [`ServerStats::request_time`] on `/metrics`
/// (`switchboard_manager_request_duration_seconds`): 10 µs to 100 ms.
pub const REQUEST_TIME_BOUNDS_MICROS: [u64; 10] =
    [10, 25, 50, 100, 250, 500, 1_000, 5_000, 25_000, 100_000];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_times_fall_in_the_metrics_buckets_and_add_up() {
        let mut stats = ServerStats::default();
        for micros in [5, 10, 11, 700, 200_000] {
            stats.request_time.record(Duration::from_micros(micros));
        }
        let counts = stats.request_time.counts_at(&REQUEST_TIME_BOUNDS_MICROS);
        assert_eq!(counts[0], 2, "at or under 10 µs");
        assert_eq!(counts[1], 1, "at or under 25 µs");
        assert_eq!(counts[6], 1, "at or under 1 ms");
        assert_eq!(counts[REQUEST_TIME_BOUNDS_MICROS.len()], 1, "over 100 ms");
        let times = &stats.request_time;
        assert_eq!((times.count(), times.sum_micros()), (5, 200_726));
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
