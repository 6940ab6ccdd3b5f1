//! Each Torque list query's pages, kept per (client address, session) so
//! that its re-requests, which carry zeroed filters and a new key (quirk 3),
//! get the same pages. Bounded by the addresses held in all; the oldest
//! query goes first, and a query lives `torque_query_ttl`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A client's address and its query session.
pub(super) type QueryKey = (SocketAddr, u16);

/// One query's pages, and whether they are Torque3D's (type 40).
pub(super) struct Cached {
    pub(super) pages: Vec<Vec<SocketAddr>>,
    pub(super) new_style: bool,
    at: Instant,
}

impl Cached {
    fn addresses(&self) -> usize {
        self.pages.iter().map(Vec::len).sum::<usize>() + 1
    }
}

pub(super) struct QueryCache {
    max_addresses: usize,
    held: usize,
    queries: HashMap<QueryKey, Cached>,
    /// Oldest first; entries replaced since are skipped.
    order: VecDeque<(QueryKey, Instant)>,
}

impl QueryCache {
    pub(super) fn new(max_addresses: usize) -> Self {
        Self {
            max_addresses: max_addresses.max(1),
            held: 0,
            queries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub(super) fn insert(
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
        while self.held + size > self.max_addresses && self.evict_oldest() {}
        if self.held + size > self.max_addresses {
            // One query bigger than the whole cache: not kept (its pages
            // past the first cannot be re-requested).
            return;
        }
        self.held += size;
        self.order.push_back((key, now));
        self.queries.insert(key, cached);
    }

    pub(super) fn get(&self, key: QueryKey) -> Option<&Cached> {
        self.queries.get(&key)
    }

    fn remove(&mut self, key: QueryKey) {
        if let Some(old) = self.queries.remove(&key) {
            self.held -= old.addresses();
        }
    }

    /// Drops the oldest query still held; false when there is none.
    fn evict_oldest(&mut self) -> bool {
        while let Some((key, at)) = self.order.pop_front() {
            if self.queries.get(&key).is_some_and(|c| c.at == at) {
                self.remove(key);
                return true;
            }
        }
        false
    }

    pub(super) fn expire(&mut self, now: Instant, ttl: Duration) {
        while let Some(&(key, at)) = self.order.front() {
            if now.saturating_duration_since(at) < ttl {
                break;
            }
            self.order.pop_front();
            if self.queries.get(&key).is_some_and(|c| c.at == at) {
                self.remove(key);
            }
        }
    }
}
