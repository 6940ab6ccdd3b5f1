//! The master's logic as a state machine with time passed in: heartbeats
//! answered with challenges, servers listed once they answer, goodbyes,
//! expiry, list requests; the listed servers in a [`Registry`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use crate::pending::Pending;
use crate::port::{Lister, ListingPort, NoPort};
use crate::protocol::{self, Datagram, ListPage, ListRequest, ServerInfo};
use crate::registry::{Heard, Limits, Registry, RegistryError, Upserted};
use crate::{MasterConfig, MasterStats};
use switchboard::session::{KeyedLimiter, Outage, RateLimit};

/// The master's logic: datagrams in, datagrams out, time passed in; `P`
/// a second listing protocol on a port of its own ([`ListingPort`]).
pub struct Master<R: Registry, P = NoPort> {
    config: MasterConfig,
    pub(crate) registry: R,
    /// Challenges sent and not yet answered.
    pending: Pending,
    /// Heartbeats answered per server (its IP and port).
    limits: KeyedLimiter<SocketAddr>,
    /// Heartbeats answered per IP (an IPv6 /64 as one), all its servers
    /// together.
    ip_limits: KeyedLimiter<IpAddr>,
    /// Until when nothing expires: datagrams were missed (the queue of
    /// read datagrams was full), so a silent server may not be silent.
    deaf_until: Option<Instant>,
    pub(crate) stats: MasterStats,
    /// The registry's outages, told once each.
    outage: Outage,
    /// Each listed server's last answered challenge: what its goodbye must
    /// carry. At most `max_servers`; a server past it is not known here
    /// and its goodbye is ignored (it expires instead). With it, when its
    /// heartbeat last refreshed it over its rate.
    answered: HashMap<SocketAddr, (u64, Option<Instant>)>,
    /// The second port's protocol; out of here only while it handles a
    /// datagram (it is handed the master then).
    port: Option<P>,
}

impl<R: Registry> Master<R> {
    /// A master over `registry`, serving its own protocol only.
    pub fn new(config: MasterConfig, registry: R) -> Self {
        Self::with_port(config, registry, |_| NoPort)
    }
}

impl<R: Registry, P: ListingPort<R>> Master<R, P> {
    /// A master over `registry` with a second listing protocol, made from
    /// the master's settings by `port`.
    pub fn with_port(
        config: MasterConfig,
        registry: R,
        port: impl FnOnce(&MasterConfig) -> P,
    ) -> Self {
        let limit = RateLimit {
            per_second: config.heartbeats_per_minute / 60.0,
            burst: config.heartbeat_burst,
        };
        let ip_limit = RateLimit {
            per_second: config.heartbeats_per_minute_per_address / 60.0,
            burst: config.heartbeat_burst * 4.0,
        };
        Self {
            pending: Pending::new(config.max_pending, config.max_pending_per_address),
            limits: KeyedLimiter::with_max_keys(limit, config.max_limited_addresses),
            ip_limits: KeyedLimiter::with_max_keys(ip_limit, config.max_limited_addresses),
            deaf_until: None,
            port: Some(port(&config)),
            config,
            registry,
            stats: MasterStats::default(),
            outage: Outage::new("server list"),
            answered: HashMap::new(),
        }
    }

    /// Handles one datagram from `from` on the second port; returns the one
    /// datagram to send back (always to `from`), if any.
    pub async fn on_port_datagram(
        &mut self,
        from: SocketAddr,
        bytes: &[u8],
        now: Instant,
    ) -> Option<(SocketAddr, Vec<u8>)> {
        let mut port = self.port.take()?;
        let reply = port
            .on_datagram(Lister { master: self }, from, bytes, now)
            .await;
        self.port = Some(port);
        reply.map(|reply| (from, reply))
    }

    /// The second port's protocol (its own counters, say).
    pub fn port(&self) -> Option<&P> {
        self.port.as_ref()
    }

    /// Handles one datagram from `from`; returns what to send, and where.
    pub async fn on_datagram(
        &mut self,
        from: SocketAddr,
        bytes: &[u8],
        now: Instant,
    ) -> Option<(SocketAddr, Vec<u8>)> {
        self.stats.datagrams += 1;
        let datagram = match protocol::decode(bytes) {
            Ok(datagram) => datagram,
            Err(err) => {
                self.stats.malformed += 1;
                tracing::debug!(%from, %err, "malformed datagram dropped");
                return None;
            }
        };
        match datagram {
            Datagram::Heartbeat { .. } => self.on_heartbeat(from, bytes.len(), now).await,
            Datagram::InfoReply { challenge, info } => {
                self.on_info(from, challenge, info, now).await;
                None
            }
            Datagram::Goodbye { challenge } => {
                self.on_goodbye(from, challenge).await;
                None
            }
            _ => {
                self.stats.malformed += 1;
                None
            }
        }
    }

    /// A heartbeat of `len` bytes from `from`: the query it earns goes back
    /// to `from`, and only when it is no longer than the heartbeat.
    async fn on_heartbeat(
        &mut self,
        from: SocketAddr,
        len: usize,
        now: Instant,
    ) -> Option<(SocketAddr, Vec<u8>)> {
        self.stats.heartbeats += 1;
        // Over its rate (its own, or its IP's), a heartbeat earns no query;
        // it still refreshes a server listed here from that exact address
        // (at most once a second), so that heartbeats forged from a
        // server's address cannot use up its rate and delist it. Any other
        // is dropped before it costs the registry anything.
        if !self.heartbeat_allowed(from, now) {
            self.stats.rate_limited += 1;
            self.refresh_over_rate(from, now, self.registry_limits())
                .await;
            return None;
        }
        let heard = self
            .registry
            .heartbeat(from, now, self.registry_limits())
            .await;
        self.registry_answered(&heard);
        match heard {
            Ok(Heard::Listed | Heard::New) => {}
            Ok(Heard::Full) => {
                self.stats.refused_full += 1;
                return None;
            }
            Ok(Heard::IpFull) => {
                self.stats.refused_per_address += 1;
                return None;
            }
            Err(err) => {
                self.registry_failed(&err);
                return None;
            }
        }
        let mut challenge = [0u8; 8];
        getrandom::fill(&mut challenge).expect("the OS random source failed");
        let challenge = u64::from_le_bytes(challenge);
        let query = protocol::encode(&Datagram::InfoQuery {
            challenge,
            padding: Vec::new(),
        });
        if query.len() > len {
            // Unpadded: answering would amplify a forged heartbeat.
            self.stats.short_heartbeats += 1;
            return None;
        }
        match self.pending.insert(from, challenge, now) {
            Ok(true) => self.stats.challenges_evicted += 1,
            Ok(false) => {}
            Err(_) => {
                self.stats.refused_per_address += 1;
                return None;
            }
        }
        // Always to the address the heartbeat came from, never one named in
        // a packet.
        Some((from, query))
    }

    /// Whether a heartbeat from `from` is within its server's rate and its
    /// IP's.
    fn heartbeat_allowed(&mut self, from: SocketAddr, now: Instant) -> bool {
        self.limits.allow(from, now)
            && self
                .ip_limits
                .allow(switchboard::socket::address_key(from.ip()), now)
    }

    /// Refreshes the server listed here at `from` (heard over its rate),
    /// once a second at most.
    pub(super) async fn refresh_over_rate(
        &mut self,
        from: SocketAddr,
        now: Instant,
        limits: Limits,
    ) {
        let Some((_, refreshed)) = self.answered.get_mut(&from) else {
            return;
        };
        if refreshed.is_some_and(|at| now.saturating_duration_since(at) < Duration::from_secs(1)) {
            return;
        }
        *refreshed = Some(now);
        let heard = self.registry.heartbeat(from, now, limits).await;
        self.checked(heard);
    }

    /// Remembers the challenge (or a second port's key) a listed server
    /// answered: what its goodbye must carry, and that a heartbeat from its
    /// address refreshes it over its rate.
    pub(super) fn remember_answered(&mut self, from: SocketAddr, challenge: u64) {
        if self.answered.len() < self.config.max_servers || self.answered.contains_key(&from) {
            self.answered.insert(from, (challenge, None));
        }
    }

    /// Tells the master that `count` datagrams could not be read (its
    /// queue was full): it then expires nothing for a whole expiry (the
    /// second port's when it is longer), so that every server has had a
    /// heartbeat heard before its silence counts.
    pub fn missed_datagrams(&mut self, count: u64, now: Instant) {
        if count == 0 {
            return;
        }
        self.stats.datagrams_missed += count;
        let window = match &self.port {
            Some(port) => self.config.expiry.max(port.expiry()),
            None => self.config.expiry,
        };
        self.deaf_until = Some(now + window);
        tracing::warn!(
            count,
            "datagrams missed (the master was too busy to read them): nothing expires for {window:?}"
        );
    }

    /// A server stopping: off the list at once, if the goodbye carries the
    /// challenge it last answered here.
    async fn on_goodbye(&mut self, from: SocketAddr, challenge: u64) {
        if self.answered.get(&from).map(|(c, _)| *c) != Some(challenge) {
            self.stats.unsolicited += 1;
            return;
        }
        self.answered.remove(&from);
        let removed = self.registry.remove(from).await;
        self.registry_answered(&removed);
        match removed {
            Ok(true) => {
                self.stats.goodbyes += 1;
                tracing::info!(%from, "server left the list (goodbye)");
            }
            Ok(false) => {}
            Err(err) => self.registry_failed(&err),
        }
    }

    async fn on_info(&mut self, from: SocketAddr, challenge: u64, info: ServerInfo, now: Instant) {
        if self.pending.get(from) != Some(challenge) {
            self.stats.unsolicited += 1;
            return;
        }
        self.pending.remove(from);
        self.remember_answered(from, challenge);
        if let Err(err) = info.check() {
            self.stats.malformed += 1;
            tracing::debug!(%from, %err, "server info refused");
            return;
        }
        let name = info.name.escape_debug().to_string();
        let upserted = self
            .registry
            .upsert(from, info, now, self.registry_limits())
            .await;
        self.registry_answered(&upserted);
        match upserted {
            Ok(Upserted::Added) => {
                self.stats.registered += 1;
                tracing::info!(%from, %name, "server listed");
            }
            Ok(Upserted::Refreshed) => {}
            Ok(Upserted::Full) => self.stats.refused_full += 1,
            Ok(Upserted::IpFull) => self.stats.refused_per_address += 1,
            Err(err) => self.registry_failed(&err),
        }
    }

    pub(super) fn registry_limits(&self) -> Limits {
        Limits {
            max_servers: self.config.max_servers,
            max_servers_per_address: self.config.max_servers_per_address,
            expiry: self.config.expiry,
            grace: Duration::ZERO,
        }
    }

    /// A registry call's result, its failure counted and logged.
    pub(super) fn checked<T>(&mut self, result: Result<T, RegistryError>) -> Option<T> {
        self.registry_answered(&result);
        match result {
            Ok(value) => Some(value),
            Err(err) => {
                self.registry_failed(&err);
                None
            }
        }
    }

    /// Counts a failed registry call; the log hears of the outage once
    /// (and of its end once, with the count).
    fn registry_failed(&mut self, err: &RegistryError) {
        self.stats.registry_errors += 1;
        self.outage.failed(err);
    }

    /// Ends an outage on a call that succeeded.
    fn registry_answered<T>(&mut self, result: &Result<T, RegistryError>) {
        if result.is_ok() {
            self.outage.succeeded();
        }
    }

    /// Drops expired servers and stale challenges.
    pub async fn tick(&mut self, now: Instant) {
        if self.deaf_until.is_some_and(|until| now >= until) {
            self.deaf_until = None;
        }
        if self.deaf_until.is_none() {
            let expired = self.registry.expire(now, self.config.expiry).await;
            self.registry_answered(&expired);
            match expired {
                Ok(expired) => self.stats.expired += expired as u64,
                Err(err) => self.registry_failed(&err),
            }
        }
        self.pending.expire(now, self.config.query_timeout);
        if let Some(port) = &mut self.port {
            port.tick(now, &self.config);
        }
        // Challenges of servers that expired are forgotten once the map is
        // full (a live server's next answer puts its own back).
        if self.answered.len() >= self.config.max_servers {
            self.answered.clear();
        }
        self.limits.forget_idle(now, Duration::from_secs(600));
        self.ip_limits.forget_idle(now, Duration::from_secs(600));
    }

    /// The registry, to reach it from outside the master's calls (a test
    /// that takes it down, say).
    pub fn registry_mut(&mut self) -> &mut R {
        &mut self.registry
    }

    /// The settings.
    pub fn config(&self) -> &MasterConfig {
        &self.config
    }

    /// Counts a list request refused for its rate.
    pub fn list_refused(&mut self) {
        self.stats.lists_refused += 1;
    }

    /// Counts a reachability probe: made, or refused without a connection.
    pub fn probed(&mut self, made: bool) {
        if made {
            self.stats.probes += 1;
        } else {
            self.stats.probes_refused += 1;
        }
    }

    /// A page of servers, or why there is none.
    pub async fn list(&mut self, request: &ListRequest) -> Result<ListPage, RegistryError> {
        self.stats.lists += 1;
        let page = self.registry.query(request).await;
        self.registry_answered(&page);
        if let Err(err) = &page {
            self.registry_failed(err);
        }
        page
    }

    /// The registry, to read it whole (not counted as a list request).
    pub async fn query(&mut self, request: &ListRequest) -> Result<ListPage, RegistryError> {
        self.registry.query(request).await
    }

    /// The counters, and how many servers are listed; the second port's
    /// by name in `port`.
    pub fn stats(&self) -> MasterStats {
        let port = self.port_counters().into_iter();
        MasterStats {
            listed: self.registry.len() as u64,
            port: port.map(|c| (c.name, c.value as u64)).collect(),
            ..self.stats.clone()
        }
    }

    /// The second port's counters (none without one).
    pub fn port_counters(&self) -> Vec<switchboard::admin::Counter> {
        self.port.as_ref().map_or_else(Vec::new, P::counters)
    }
}

#[cfg(test)]
mod tests;
