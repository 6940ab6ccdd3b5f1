//! Challenges sent and not yet answered, capped in all and per address; a
//! full table gives up its oldest challenge for a new one, so spoofed
//! heartbeats cannot keep real servers from registering.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Why a challenge was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The address has `max_per_address` challenges out already.
    Address,
}

/// Challenges out: at most `max` in all and `max_per_address` to one
/// address (an IPv6 /64 as one); a full table gives up its oldest.
#[derive(Debug)]
pub struct Pending {
    max: usize,
    max_per_address: usize,
    by_addr: HashMap<SocketAddr, (u64, Instant)>,
    /// Oldest first; entries answered or replaced since are skipped.
    order: VecDeque<(SocketAddr, Instant)>,
    per_address: HashMap<IpAddr, usize>,
}

impl Pending {
    /// An empty table holding at most `max` challenges, `max_per_address`
    /// to one address.
    pub fn new(max: usize, max_per_address: usize) -> Self {
        Self {
            max: max.max(1),
            max_per_address: max_per_address.max(1),
            by_addr: HashMap::new(),
            order: VecDeque::new(),
            per_address: HashMap::new(),
        }
    }

    /// Records `challenge` sent to `to`; returns whether an older one was
    /// given up for it.
    pub fn insert(&mut self, to: SocketAddr, challenge: u64, now: Instant) -> Result<bool, Full> {
        let ip = switchboard::socket::address_key(to.ip());
        let known = self.by_addr.contains_key(&to);
        if !known && self.per_address.get(&ip).copied().unwrap_or(0) >= self.max_per_address {
            return Err(Full::Address);
        }
        let mut evicted = false;
        if !known && self.by_addr.len() >= self.max {
            while let Some((old, at)) = self.order.pop_front() {
                if self.by_addr.get(&old).is_some_and(|(_, sent)| *sent == at) {
                    self.remove(old);
                    evicted = true;
                    break;
                }
            }
        }
        if !known {
            *self.per_address.entry(ip).or_default() += 1;
        }
        self.by_addr.insert(to, (challenge, now));
        self.order.push_back((to, now));
        // Entries answered or replaced leave stale marks: keep the order
        // queue within twice the table.
        if self.order.len() > 2 * self.max {
            let by_addr = &self.by_addr;
            self.order
                .retain(|(a, at)| by_addr.get(a).is_some_and(|(_, sent)| sent == at));
        }
        Ok(evicted)
    }

    /// The challenge sent to `from`, if one is out.
    pub fn get(&self, from: SocketAddr) -> Option<u64> {
        self.by_addr.get(&from).map(|(challenge, _)| *challenge)
    }

    /// Forgets the challenge sent to `from` (answered, or given up).
    pub fn remove(&mut self, from: SocketAddr) {
        if self.by_addr.remove(&from).is_some() {
            let ip = switchboard::socket::address_key(from.ip());
            if let Some(n) = self.per_address.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.per_address.remove(&ip);
                }
            }
        }
    }

    /// Forgets challenges older than `timeout`.
    pub fn expire(&mut self, now: Instant, timeout: Duration) {
        let late: Vec<SocketAddr> = self
            .by_addr
            .iter()
            .filter(|(_, (_, sent))| now.saturating_duration_since(*sent) > timeout)
            .map(|(addr, _)| *addr)
            .collect();
        for addr in late {
            self.remove(addr);
        }
        let by_addr = &self.by_addr;
        self.order
            .retain(|(a, at)| by_addr.get(a).is_some_and(|(_, sent)| sent == at));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_addr.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ip: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, ip], port))
    }

    #[test]
    fn spoofed_heartbeats_from_one_address_are_capped() {
        let t0 = Instant::now();
        let mut pending = Pending::new(100, 4);
        for port in 0..4 {
            assert_eq!(pending.insert(addr(1, port), 1, t0), Ok(false));
        }
        assert_eq!(pending.insert(addr(1, 99), 1, t0), Err(Full::Address));
        assert_eq!(pending.insert(addr(2, 1), 7, t0), Ok(false));
        assert_eq!(pending.get(addr(2, 1)), Some(7));
    }

    #[test]
    fn a_full_table_gives_up_its_oldest_challenge() {
        let t0 = Instant::now();
        let mut pending = Pending::new(3, 4);
        for i in 1..=3u8 {
            pending
                .insert(addr(i, 1), i as u64, t0 + Duration::from_millis(i as u64))
                .unwrap();
        }
        assert_eq!(
            pending.insert(addr(9, 1), 9, t0 + Duration::from_secs(1)),
            Ok(true)
        );
        assert_eq!(pending.get(addr(1, 1)), None, "the oldest gave way");
        assert_eq!(pending.get(addr(9, 1)), Some(9));
        assert_eq!(pending.len(), 3);
        pending.expire(t0 + Duration::from_secs(30), Duration::from_secs(10));
        assert_eq!(pending.len(), 0);
        assert!(pending.per_address.is_empty() && pending.order.is_empty());
    }
}
