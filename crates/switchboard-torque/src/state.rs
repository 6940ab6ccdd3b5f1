//! The Torque side's state: info requests out and the wrong keys answered
//! to them, the rate limits, the cached queries, the bytes sent per
//! destination, the clients proven to be where they say.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use switchboard::session::{prefix_key, KeyedLimiter, RateLimit};
use switchboard::socket::address_key;

use switchboard_master::pending::Pending;
use switchboard_master::MasterConfig;

use crate::cache::QueryCache;
use crate::TorqueConfig;

/// The Torque side's state: requests out, rate limits, cached queries.
pub(crate) struct TorqueState {
    pub(crate) pending: Pending,
    /// Heartbeats per server (IP and port), and per IP.
    pub(crate) heartbeats: KeyedLimiter<SocketAddr>,
    pub(crate) heartbeats_ip: KeyedLimiter<IpAddr>,
    pub(crate) lists: KeyedLimiter<IpAddr>,
    pub(crate) cache: QueryCache,
    /// Wrong keys answered to the challenge out to each address, and when
    /// the first came.
    pub(crate) wrong_keys: HashMap<SocketAddr, (u32, Instant)>,
    /// Addresses whose challenge was dropped for wrong keys, and until
    /// when their heartbeats earn no new one.
    pub(crate) backed_off: HashMap<SocketAddr, Instant>,
    /// Bytes of list pages and game types sent, per destination, per
    /// prefix and in all: what a forged source can turn at anyone.
    pub(crate) sent_to: KeyedLimiter<IpAddr>,
    pub(crate) sent_to_prefix: KeyedLimiter<IpAddr>,
    pub(crate) sent: KeyedLimiter<()>,
    /// Clients that asked again within a session (a re-request, or the
    /// same request twice), and when: their first answers are no longer
    /// cut to a few times the request.
    pub(crate) proven: HashMap<IpAddr, Instant>,
    /// The game and mission types, and when they were read.
    pub(crate) game_types: Option<(Instant, Vec<String>, Vec<String>)>,
}

impl TorqueState {
    pub(crate) fn new(config: &TorqueConfig, master: &MasterConfig) -> Self {
        let per_minute = |n: f64, burst: f64| RateLimit {
            per_second: n / 60.0,
            burst,
        };
        let bytes = |per_second: usize| RateLimit {
            per_second: per_second as f64,
            burst: 4.0 * per_second as f64,
        };
        let keys = master.max_limited_addresses;
        Self {
            pending: Pending::new(master.max_pending, master.max_pending_per_address),
            heartbeats: KeyedLimiter::with_max_keys(
                per_minute(config.heartbeats_per_minute, master.heartbeat_burst),
                keys,
            ),
            heartbeats_ip: KeyedLimiter::with_max_keys(
                per_minute(
                    master.heartbeats_per_minute_per_address,
                    master.heartbeat_burst * 4.0,
                ),
                keys,
            ),
            lists: KeyedLimiter::with_max_keys(
                per_minute(config.lists_per_minute, config.lists_per_minute / 4.0),
                keys,
            ),
            cache: QueryCache::new(config.cached_addresses),
            wrong_keys: HashMap::new(),
            backed_off: HashMap::new(),
            sent_to: KeyedLimiter::with_max_keys(bytes(config.bytes_per_second_per_address), keys),
            sent_to_prefix: KeyedLimiter::with_max_keys(
                bytes(config.bytes_per_second_per_prefix),
                keys,
            ),
            sent: KeyedLimiter::with_max_keys(
                RateLimit {
                    per_second: config.bytes_per_second as f64,
                    burst: config.bytes_per_second as f64,
                },
                1,
            ),
            proven: HashMap::new(),
            game_types: None,
        }
    }

    pub(crate) fn tick(&mut self, now: Instant, config: &TorqueConfig, master: &MasterConfig) {
        self.pending.expire(now, master.query_timeout);
        self.cache.expire(now, config.query_ttl);
        let idle = Duration::from_secs(600);
        self.heartbeats.forget_idle(now, idle);
        self.heartbeats_ip.forget_idle(now, idle);
        self.lists.forget_idle(now, idle);
        self.sent_to.forget_idle(now, idle);
        self.sent_to_prefix.forget_idle(now, idle);
        self.wrong_keys
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < master.query_timeout);
        self.backed_off.retain(|_, until| *until > now);
        self.proven
            .retain(|_, at| now.saturating_duration_since(*at) < idle);
    }

    /// Whether `reply` may go to `to` within the bytes per second allowed
    /// to it, its prefix and in all (spent when it may).
    pub(crate) fn may_send(&mut self, to: SocketAddr, reply: &[u8], now: Instant) -> bool {
        let n = reply.len() as f64;
        self.sent.allow_n((), n, now)
            && self.sent_to_prefix.allow_n(prefix_key(to.ip()), n, now)
            && self.sent_to.allow_n(address_key(to.ip()), n, now)
    }

    /// Marks `from` as a client that asks again (it is where it says).
    pub(crate) fn prove(&mut self, from: SocketAddr, now: Instant, max: usize) {
        let key = address_key(from.ip());
        if self.proven.len() < max || self.proven.contains_key(&key) {
            self.proven.insert(key, now);
        }
    }

    pub(crate) fn is_proven(&self, from: SocketAddr) -> bool {
        self.proven.contains_key(&address_key(from.ip()))
    }
}
