//! The Torque port's settings and counters. What it shares with the master
//! (challenges out at most, the IP rate of heartbeats, the addresses
//! remembered, the query timeout) it reads from `MasterConfig`.

use std::time::Duration;

use switchboard::admin::Counter;

/// The Torque port's limits and timers; each field says its default.
/// (Formerly the `torque_*` fields of `MasterConfig`.)
#[derive(Debug, Clone, PartialEq)]
pub struct TorqueConfig {
    /// A Torque server not heard from for this long is dropped (default
    /// 180 s, above the engine's 120 s heartbeat).
    pub expiry: Duration,
    /// Torque heartbeats per minute answered per server (default 30,
    /// bursts of the master's `heartbeat_burst`): each earns an info
    /// request to its source, so a forged one is reflected at most this
    /// often.
    pub heartbeats_per_minute: f64,
    /// List, page and game types requests answered per minute per source
    /// IP (default 120, bursts of a quarter of it). A request is answered
    /// with one page at most.
    pub lists_per_minute: f64,
    /// How many times its own size the first answer to a client may be
    /// until that client has asked again in a session (default 4: a
    /// 23-byte list request draws a page 0 of at most 92 bytes; the client
    /// re-requests the other pages, as it does for every page past the
    /// first). Reflection from a forged source is bounded by this factor
    /// at first and by the bytes per second below after.
    pub unproven_reply_factor: f64,
    /// Bytes of list pages and game types sent per second to one address
    /// (default 16 KiB, bursts of four times it: a 10,000-server list is
    /// about 61 KB). Past it a request is dropped and counted
    /// ([`TorqueStats::bytes_refused`]).
    pub bytes_per_second_per_address: usize,
    /// The same for an IPv4 /24 or an IPv6 /48 together (default 64 KiB,
    /// bursts of four times it).
    pub bytes_per_second_per_prefix: usize,
    /// The same for every destination together (default 4 MiB, bursts of
    /// as much).
    pub bytes_per_second: usize,
    /// Wrong keys answered to one info request before it is dropped
    /// (default 3). The key is 32 random bits.
    pub max_wrong_keys: u32,
    /// How long an address whose info request was dropped for wrong keys
    /// gets no new one (default 30 s; a listed server stays listed, its
    /// heartbeats still refresh it). Counted in [`TorqueStats::backed_off`].
    pub wrong_key_backoff: Duration,
    /// How long the game and mission types answered to clients are reused
    /// before being read again (default 5 s).
    pub game_types_cache: Duration,
    /// Server addresses held in all by the cached queries (default
    /// 100,000, about 3 MB): the oldest query goes first.
    pub cached_addresses: usize,
    /// How long a query's pages are kept for its re-requests (default
    /// 30 s; the engine gives up on a master after 6 s).
    pub query_ttl: Duration,
}

impl Default for TorqueConfig {
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs(180),
            heartbeats_per_minute: 30.0,
            lists_per_minute: 120.0,
            unproven_reply_factor: 4.0,
            bytes_per_second_per_address: 16 * 1024,
            bytes_per_second_per_prefix: 64 * 1024,
            bytes_per_second: 4 * 1024 * 1024,
            max_wrong_keys: 3,
            wrong_key_backoff: Duration::from_secs(30),
            game_types_cache: Duration::from_secs(5),
            cached_addresses: 100_000,
            query_ttl: Duration::from_secs(30),
        }
    }
}

/// The Torque port's counters (formerly the `torque_*` fields of
/// `MasterStats`); the refusals every port shares (`refused_full`,
/// `refused_per_address`, `challenges_evicted`) stay in `MasterStats`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TorqueStats {
    /// Datagrams received on the Torque port.
    pub datagrams: u64,
    /// Packets dropped: truncated, of an unknown type, or with info over
    /// the limits.
    pub dropped: u64,
    /// Heartbeats received.
    pub heartbeats: u64,
    /// Heartbeats over the per-address rate.
    pub rate_limited: u64,
    /// Info responses that answered no request of ours.
    pub unsolicited: u64,
    /// Servers that got listed.
    pub registered: u64,
    /// Initial list requests answered.
    pub lists: u64,
    /// List pages sent.
    pub pages: u64,
    /// Requests over the per-address rate.
    pub lists_refused: u64,
    /// Page re-requests for no cached query.
    pub cache_misses: u64,
    /// Info responses with a wrong key for the request out to their
    /// address.
    pub wrong_keys: u64,
    /// Heartbeats given no info request: their address answered wrong
    /// keys.
    pub backed_off: u64,
    /// Bytes of list pages and game types sent.
    pub bytes_sent: u64,
    /// Answers not sent: over the bytes per second of their destination,
    /// its prefix or the master.
    pub bytes_refused: u64,
}

impl TorqueStats {
    /// The counters as the admin page and `/metrics` show them
    /// (`switchboard_master_torque_*_total`).
    pub fn counters(&self) -> Vec<Counter> {
        [
            (
                "datagrams",
                "Datagrams received on the Torque port.",
                self.datagrams,
            ),
            (
                "dropped",
                "Torque packets dropped: truncated, unknown, or over the limits.",
                self.dropped,
            ),
            ("heartbeats", "Torque heartbeats received.", self.heartbeats),
            (
                "heartbeats_rate_limited",
                "Torque heartbeats over the per-address rate.",
                self.rate_limited,
            ),
            (
                "unsolicited",
                "Torque info responses that answered no request.",
                self.unsolicited,
            ),
            (
                "registered",
                "Torque servers that got listed.",
                self.registered,
            ),
            ("lists", "Torque list requests answered.", self.lists),
            ("pages", "Torque list pages sent.", self.pages),
            (
                "lists_refused",
                "Torque requests over the per-address rate.",
                self.lists_refused,
            ),
            (
                "cache_misses",
                "Torque page re-requests for no cached query.",
                self.cache_misses,
            ),
            (
                "wrong_keys",
                "Torque info responses with a wrong key.",
                self.wrong_keys,
            ),
            (
                "backed_off",
                "Torque heartbeats given no request: their address answered wrong keys.",
                self.backed_off,
            ),
            (
                "bytes_sent",
                "Bytes of Torque list pages and game types sent.",
                self.bytes_sent,
            ),
            (
                "bytes_refused",
                "Torque answers not sent: over the bytes per second of their destination.",
                self.bytes_refused,
            ),
        ]
        .into_iter()
        .map(|(name, help, value)| {
            Counter::total(
                &format!("switchboard_master_torque_{name}_total"),
                help,
                value,
            )
        })
        .collect()
    }
}
