//! Where the master keeps its servers, behind a small trait so that a shared
//! store can back several master instances later; and the master's logic as a
//! state machine with time passed in.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use crate::pending::Pending;
use crate::protocol::{self, Datagram, ListPage, ListRequest, Listed, ServerInfo, MAX_PAGE};
use crate::{MasterConfig, MasterStats};
use switchboard::session::{KeyedLimiter, RateLimit};

/// The store of listed servers.
pub trait Registry: Send {
    /// Lists or refreshes a server.
    fn upsert(&mut self, addr: SocketAddr, info: ServerInfo, now: Instant);
    /// Marks a listed server as heard from; false if it is not listed.
    fn touch(&mut self, addr: SocketAddr, now: Instant) -> bool;
    /// Drops servers not heard from since `now - expiry`; returns how many.
    fn expire(&mut self, now: Instant, expiry: Duration) -> usize;
    /// One page of the servers matching `request.filter`, and how many match.
    fn query(&self, request: &ListRequest) -> ListPage;
    /// How many servers are listed.
    fn len(&self) -> usize;
    /// Whether none are.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// How many listed servers share this IP.
    fn count_for_ip(&self, ip: IpAddr) -> usize;
    /// Whether this address is listed.
    fn contains(&self, addr: SocketAddr) -> bool;
}

/// The in-memory registry.
#[derive(Debug, Default)]
pub struct MemoryRegistry {
    servers: BTreeMap<SocketAddr, (ServerInfo, Instant)>,
}

impl Registry for MemoryRegistry {
    fn upsert(&mut self, addr: SocketAddr, info: ServerInfo, now: Instant) {
        self.servers.insert(addr, (info, now));
    }

    fn touch(&mut self, addr: SocketAddr, now: Instant) -> bool {
        match self.servers.get_mut(&addr) {
            Some((_, seen)) => {
                *seen = now;
                true
            }
            None => false,
        }
    }

    fn expire(&mut self, now: Instant, expiry: Duration) -> usize {
        let before = self.servers.len();
        self.servers
            .retain(|_, (_, seen)| now.saturating_duration_since(*seen) <= expiry);
        before - self.servers.len()
    }

    fn query(&self, request: &ListRequest) -> ListPage {
        let size = request.page_size.clamp(1, MAX_PAGE) as usize;
        let matching: Vec<Listed> = self
            .servers
            .iter()
            .filter(|(_, (info, _))| request.filter.matches(info))
            .map(|(addr, (info, _))| Listed {
                addr: *addr,
                info: info.clone(),
            })
            .collect();
        let total = matching.len() as u32;
        let servers = matching
            .into_iter()
            .skip(request.page as usize * size)
            .take(size)
            .collect();
        ListPage {
            servers,
            page: request.page,
            total,
        }
    }

    fn len(&self) -> usize {
        self.servers.len()
    }

    fn count_for_ip(&self, ip: IpAddr) -> usize {
        self.servers.keys().filter(|a| a.ip() == ip).count()
    }

    fn contains(&self, addr: SocketAddr) -> bool {
        self.servers.contains_key(&addr)
    }
}

/// The master's logic: datagrams in, datagrams out, time passed in.
pub struct Master<R: Registry> {
    config: MasterConfig,
    registry: R,
    /// Challenges sent and not yet answered.
    pending: Pending,
    limits: KeyedLimiter<IpAddr>,
    stats: MasterStats,
}

impl<R: Registry> Master<R> {
    /// A master over `registry`.
    pub fn new(config: MasterConfig, registry: R) -> Self {
        let limit = RateLimit {
            per_second: config.heartbeats_per_minute / 60.0,
            burst: config.heartbeat_burst,
        };
        Self {
            pending: Pending::new(config.max_pending, config.max_pending_per_ip),
            limits: KeyedLimiter::with_max_keys(limit, config.max_limited_addresses),
            config,
            registry,
            stats: MasterStats::default(),
        }
    }

    /// Handles one datagram from `from`; returns what to send, and where.
    pub fn on_datagram(
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
            Datagram::Heartbeat { .. } => self.on_heartbeat(from, bytes.len(), now),
            Datagram::InfoReply { challenge, info } => {
                self.on_info(from, challenge, info, now);
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
    fn on_heartbeat(
        &mut self,
        from: SocketAddr,
        len: usize,
        now: Instant,
    ) -> Option<(SocketAddr, Vec<u8>)> {
        self.stats.heartbeats += 1;
        // A heartbeat keeps a listed server alive even when the query it
        // would trigger is rate-limited.
        self.registry.touch(from, now);
        let config = &self.config;
        if !self.limits.allow(from.ip(), now) {
            self.stats.rate_limited += 1;
            return None;
        }
        let known = self.registry.contains(from);
        if !known {
            if self.registry.len() >= config.max_servers {
                self.stats.refused_full += 1;
                return None;
            }
            if self.registry.count_for_ip(from.ip()) >= config.max_servers_per_ip {
                self.stats.refused_per_ip += 1;
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
                self.stats.refused_per_ip += 1;
                return None;
            }
        }
        // Always to the address the heartbeat came from, never one named in
        // a packet.
        Some((from, query))
    }

    fn on_info(&mut self, from: SocketAddr, challenge: u64, info: ServerInfo, now: Instant) {
        if self.pending.get(from) != Some(challenge) {
            self.stats.unsolicited += 1;
            return;
        }
        self.pending.remove(from);
        if let Err(err) = info.check() {
            self.stats.malformed += 1;
            tracing::debug!(%from, %err, "server info refused");
            return;
        }
        if !self.registry.contains(from) {
            self.stats.registered += 1;
            tracing::info!(%from, name = %info.name.escape_debug(), "server listed");
        }
        self.registry.upsert(from, info, now);
    }

    /// Drops expired servers and stale challenges.
    pub fn tick(&mut self, now: Instant) {
        let expired = self.registry.expire(now, self.config.expiry);
        self.stats.expired += expired as u64;
        self.pending.expire(now, self.config.query_timeout);
        self.limits.forget_idle(now, Duration::from_secs(600));
    }

    /// The settings.
    pub fn config(&self) -> &MasterConfig {
        &self.config
    }

    /// The registry, for reading.
    pub fn registry(&self) -> &R {
        &self.registry
    }

    /// Counts a list request refused for its rate.
    pub fn list_refused(&mut self) {
        self.stats.lists_refused += 1;
    }

    /// A page of servers.
    pub fn list(&mut self, request: &ListRequest) -> ListPage {
        self.stats.lists += 1;
        self.registry.query(request)
    }

    /// The counters, and how many servers are listed.
    pub fn stats(&self) -> MasterStats {
        MasterStats {
            listed: self.registry.len() as u64,
            ..self.stats.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Filter;

    fn addr(last: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], port))
    }

    fn info(name: &str) -> ServerInfo {
        ServerInfo {
            name: name.into(),
            max_players: 8,
            ..ServerInfo::default()
        }
    }

    fn challenge_of(reply: Option<(SocketAddr, Vec<u8>)>) -> (SocketAddr, u64) {
        let (to, bytes) = reply.expect("an info query");
        match protocol::decode(&bytes).unwrap() {
            Datagram::InfoQuery { challenge, .. } => (to, challenge),
            other => panic!("{other:?}"),
        }
    }

    /// Heartbeat, query, answer; false when the master sent no query.
    fn register(
        master: &mut Master<MemoryRegistry>,
        from: SocketAddr,
        name: &str,
        now: Instant,
    ) -> bool {
        let Some(query) = master.on_datagram(from, &protocol::heartbeat(), now) else {
            return false;
        };
        let (to, challenge) = challenge_of(Some(query));
        assert_eq!(to, from, "queries go to the heartbeat's source");
        let reply = protocol::encode(&Datagram::InfoReply {
            challenge,
            info: info(name),
        });
        master.on_datagram(from, &reply, now);
        true
    }

    fn all(master: &mut Master<MemoryRegistry>) -> Vec<String> {
        let request = ListRequest {
            filter: Filter::default(),
            page: 0,
            page_size: 100,
        };
        master
            .list(&request)
            .servers
            .into_iter()
            .map(|l| l.info.name)
            .collect()
    }

    #[test]
    fn listed_only_after_answering_the_challenge_then_expires() {
        let t0 = Instant::now();
        let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
        let a = addr(1, 7000);
        let (_, challenge) = challenge_of(master.on_datagram(a, &protocol::heartbeat(), t0));
        assert!(all(&mut master).is_empty(), "not listed before it answers");
        // A reply with the wrong challenge, or from elsewhere, lists nothing.
        let wrong = protocol::encode(&Datagram::InfoReply {
            challenge: challenge ^ 1,
            info: info("a"),
        });
        master.on_datagram(a, &wrong, t0);
        let elsewhere = protocol::encode(&Datagram::InfoReply {
            challenge,
            info: info("a"),
        });
        master.on_datagram(addr(2, 7000), &elsewhere, t0);
        assert!(all(&mut master).is_empty());
        assert_eq!(master.stats().unsolicited, 2);
        master.on_datagram(a, &elsewhere, t0);
        assert_eq!(all(&mut master), ["a"]);

        let expiry = MasterConfig::default().expiry;
        master.tick(t0 + expiry);
        assert_eq!(all(&mut master), ["a"], "still within the expiry");
        master.tick(t0 + expiry + Duration::from_secs(1));
        assert!(
            all(&mut master).is_empty(),
            "silent past the expiry: dropped"
        );
        assert_eq!(master.stats().expired, 1);
    }

    #[test]
    fn heartbeat_flood_from_one_address_is_limited() {
        let t0 = Instant::now();
        let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
        let beat = protocol::heartbeat();
        let answered = (0..1000)
            .filter(|_| master.on_datagram(addr(9, 1), &beat, t0).is_some())
            .count();
        assert_eq!(answered, MasterConfig::default().heartbeat_burst as usize);
        assert_eq!(master.stats().rate_limited, 1000 - answered as u64);
        // Another address is not affected.
        assert!(master.on_datagram(addr(8, 1), &beat, t0).is_some());
    }

    #[test]
    fn servers_per_address_and_registry_size_are_bounded() {
        let t0 = Instant::now();
        let config = MasterConfig {
            max_servers_per_ip: 2,
            max_servers: 3,
            ..MasterConfig::default()
        };
        let mut master = Master::new(config, MemoryRegistry::default());
        assert!(register(&mut master, addr(1, 1), "p1", t0));
        assert!(register(&mut master, addr(1, 2), "p2", t0));
        assert!(
            !register(&mut master, addr(1, 3), "p3", t0),
            "a third on the same IP"
        );
        assert_eq!(all(&mut master).len(), 2, "two per IP");
        assert!(register(&mut master, addr(2, 1), "b", t0));
        assert!(
            !register(&mut master, addr(3, 1), "c", t0),
            "the registry is full"
        );
        assert_eq!(all(&mut master).len(), 3, "three in all");
        assert!(master.stats().refused_per_ip >= 1 && master.stats().refused_full >= 1);
    }

    #[test]
    fn garbage_is_counted_and_dropped() {
        let t0 = Instant::now();
        let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
        for junk in [&b""[..], b"hello", b"SWMS\x01\xff", &[0u8; 1200][..]] {
            assert!(master.on_datagram(addr(1, 1), junk, t0).is_none());
        }
        assert_eq!(master.stats().malformed, 4);
    }

    #[test]
    fn pages_and_filters() {
        let t0 = Instant::now();
        let mut master = Master::new(MasterConfig::default(), MemoryRegistry::default());
        for i in 0..25u8 {
            assert!(register(
                &mut master,
                addr(i, 7000),
                &format!("s{i:02}"),
                t0
            ));
        }
        let page = master.list(&ListRequest {
            filter: Filter::default(),
            page: 2,
            page_size: 10,
        });
        assert_eq!((page.total, page.servers.len()), (25, 5));
        let named = Filter {
            game_type: Some("none".into()),
            ..Filter::default()
        };
        assert_eq!(
            master
                .list(&ListRequest {
                    filter: named,
                    page: 0,
                    page_size: 10
                })
                .total,
            0
        );
    }
}
