//! Each Torque list query's pages, kept per (client address, session) so
//! that its re-requests, which carry zeroed filters and a new key (quirk 3),
//! get the same pages. Bounded by the addresses held in all, and fair per
//! client: when it is full, the client holding the most gives up its
//! oldest query, so that one address asking again and again evicts its own
//! queries, never another's. A query lives `torque_query_ttl`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use switchboard::socket::address_key;

/// A client's address and its query session.
pub(crate) type QueryKey = (SocketAddr, u16);

/// One query's pages, and whether they are Torque3D's (type 40).
pub(crate) struct Cached {
    pub(crate) pages: Vec<Vec<SocketAddr>>,
    pub(crate) new_style: bool,
    at: Instant,
}

impl Cached {
    fn addresses(&self) -> usize {
        self.pages.iter().map(Vec::len).sum::<usize>() + 1
    }
}

/// What one client (an IP, an IPv6 /64 as one) holds.
#[derive(Default)]
struct Client {
    held: usize,
    /// Its queries, oldest first; entries replaced since are skipped.
    order: VecDeque<(QueryKey, Instant)>,
}

pub(crate) struct QueryCache {
    max_addresses: usize,
    held: usize,
    queries: HashMap<QueryKey, Cached>,
    /// Every query, oldest first, for the TTL; entries replaced since are
    /// skipped.
    order: VecDeque<(QueryKey, Instant)>,
    clients: HashMap<IpAddr, Client>,
    /// The clients by what they hold, to find the heaviest at once.
    by_held: BTreeSet<(usize, IpAddr)>,
}

impl QueryCache {
    pub(crate) fn new(max_addresses: usize) -> Self {
        Self {
            max_addresses: max_addresses.max(1),
            held: 0,
            queries: HashMap::new(),
            order: VecDeque::new(),
            clients: HashMap::new(),
            by_held: BTreeSet::new(),
        }
    }

    pub(crate) fn insert(
        &mut self,
        key: QueryKey,
        pages: Vec<Vec<SocketAddr>>,
        new_style: bool,
        now: Instant,
    ) {
        self.remove(key);
        let cached = Cached {
            pages,
            new_style,
            at: now,
        };
        let size = cached.addresses();
        if size > self.max_addresses {
            // One query bigger than the whole cache: not kept (its pages
            // past the first cannot be re-requested).
            return;
        }
        while self.held + size > self.max_addresses && self.evict_from_heaviest(key.0, size) {}
        if self.held + size > self.max_addresses {
            return;
        }
        self.held += size;
        self.order.push_back((key, now));
        let client = address_key(key.0.ip());
        self.adjust(client, size as isize);
        if let Some(c) = self.clients.get_mut(&client) {
            c.order.push_back((key, now));
        }
        self.queries.insert(key, cached);
    }

    pub(crate) fn get(&self, key: QueryKey) -> Option<&Cached> {
        self.queries.get(&key)
    }

    fn remove(&mut self, key: QueryKey) {
        if let Some(old) = self.queries.remove(&key) {
            let size = old.addresses();
            self.held -= size;
            self.adjust(address_key(key.0.ip()), -(size as isize));
        }
    }

    /// Changes what `client` holds by `delta`, keeping `by_held` in step.
    fn adjust(&mut self, client: IpAddr, delta: isize) {
        let entry = self.clients.entry(client).or_default();
        self.by_held.remove(&(entry.held, client));
        entry.held = entry.held.saturating_add_signed(delta);
        if entry.held == 0 {
            self.clients.remove(&client);
        } else {
            self.by_held.insert((entry.held, client));
        }
    }

    /// Drops the oldest query of the client that holds the most, counting
    /// the one `newcomer` is about to add; false when nothing can go.
    fn evict_from_heaviest(&mut self, newcomer: SocketAddr, size: usize) -> bool {
        let newcomer = address_key(newcomer.ip());
        let heaviest = self.by_held.last().copied();
        let mine = self.clients.get(&newcomer).map_or(0, |c| c.held) + size;
        let victim = match heaviest {
            // The newcomer would hold the most: it makes room from its own.
            Some((held, _)) if mine >= held => newcomer,
            Some((_, ip)) => ip,
            None => return false,
        };
        let Some(client) = self.clients.get_mut(&victim) else {
            return false;
        };
        while let Some((key, at)) = client.order.pop_front() {
            if self.queries.get(&key).is_some_and(|c| c.at == at) {
                self.remove(key);
                return true;
            }
        }
        false
    }

    pub(crate) fn expire(&mut self, now: Instant, ttl: Duration) {
        while let Some(&(key, at)) = self.order.front() {
            if now.saturating_duration_since(at) < ttl {
                break;
            }
            self.order.pop_front();
            if self.queries.get(&key).is_some_and(|c| c.at == at) {
                self.remove(key);
            }
        }
        // Stale marks of what expired or was replaced.
        let queries = &self.queries;
        for client in self.clients.values_mut() {
            client
                .order
                .retain(|(key, at)| queries.get(key).is_some_and(|c| c.at == *at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(n: usize) -> Vec<Vec<SocketAddr>> {
        vec![(0..n)
            .map(|i| SocketAddr::from(([10, 1, (i / 256) as u8, i as u8], 28000)))
            .collect()]
    }

    #[test]
    fn a_client_asking_again_and_again_evicts_its_own_queries_never_anothers() {
        let t0 = Instant::now();
        let mut cache = QueryCache::new(1000);
        let honest = SocketAddr::from(([192, 0, 2, 1], 28000));
        cache.insert((honest, 1), pages(199), false, t0);
        let flooder = |port| SocketAddr::from(([198, 51, 100, 7], port));
        for session in 0..100u16 {
            cache.insert((flooder(session), session), pages(199), false, t0);
        }
        assert!(cache.get((honest, 1)).is_some(), "the honest query is kept");
        assert!(cache.held <= 1000);
        assert!(cache.get((flooder(99), 99)).is_some(), "the newest is kept");
        assert!(cache.get((flooder(0), 0)).is_none(), "its own oldest went");
    }
}
