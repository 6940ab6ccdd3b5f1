//! Who may come in: connections in their handshake and open connections,
//! counted in total and per address, as a state machine with no socket.
//!
//! ```text
//!  accepted ──admit──▶ pending ──opened──▶ open ──ended──▶ (gone)
//!     │ over the per-address      │ server full
//!     ▼ pending or connection cap ▼ (told so, closed)
//!  dropped                     (gone)
//!  A newcomer that finds the pending table full evicts its oldest entry:
//!  silent connections cannot keep everyone else out.
//! ```

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// The limits the gate enforces (from `ServerConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GateLimits {
    pub(crate) max_pending: usize,
    pub(crate) max_pending_per_ip: usize,
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_ip: usize,
}

/// Why a connection was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turned {
    /// Its address has `max_pending_per_ip` handshakes under way already.
    PendingFromAddress,
    /// Its address has `max_connections_per_ip` connections already.
    ConnectionsFromAddress,
    /// The server has `max_connections` open connections.
    Full,
}

/// The address a limit counts: an IPv4 address, or an IPv6 /64 (one
/// subscriber's network), an IPv4-mapped IPv6 address counting as IPv4.
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

/// Pending and open connections; `T` is what the caller needs to close an
/// evicted one (a socket handle).
#[derive(Debug)]
pub(crate) struct Gate<T> {
    limits: GateLimits,
    /// Oldest first.
    pending: VecDeque<(u64, IpAddr, T)>,
    /// Connections per address, pending and open.
    per_ip: HashMap<IpAddr, (usize, usize)>,
    open: HashMap<u64, IpAddr>,
}

impl<T> Gate<T> {
    pub(crate) fn new(limits: GateLimits) -> Self {
        Self {
            limits,
            pending: VecDeque::new(),
            per_ip: HashMap::new(),
            open: HashMap::new(),
        }
    }

    /// A connection from `ip` was accepted as `ticket`. Returns the
    /// connection it evicted, if the pending table was full.
    pub(crate) fn admit(&mut self, ticket: u64, ip: IpAddr, value: T) -> Result<Option<T>, Turned> {
        let ip = address_key(ip);
        let (pending, open) = self.per_ip.get(&ip).copied().unwrap_or_default();
        if pending >= self.limits.max_pending_per_ip.max(1) {
            return Err(Turned::PendingFromAddress);
        }
        if pending + open >= self.limits.max_connections_per_ip.max(1) {
            return Err(Turned::ConnectionsFromAddress);
        }
        let evicted = if self.pending.len() >= self.limits.max_pending.max(1) {
            self.pending.pop_front().map(|(_, old_ip, old)| {
                self.count(old_ip, |p, _| *p -= 1);
                old
            })
        } else {
            None
        };
        self.pending.push_back((ticket, ip, value));
        self.count(ip, |p, _| *p += 1);
        Ok(evicted)
    }

    /// `ticket` completed its handshake: it is open, unless the server is
    /// full (then it is gone and must be told so).
    pub(crate) fn opened(&mut self, ticket: u64) -> Result<(), Turned> {
        let Some(at) = self.pending.iter().position(|(t, _, _)| *t == ticket) else {
            // Evicted meanwhile.
            return Err(Turned::Full);
        };
        let (_, ip, _) = self.pending.remove(at).expect("position is in range");
        self.count(ip, |p, _| *p -= 1);
        if self.open.len() >= self.limits.max_connections {
            return Err(Turned::Full);
        }
        self.open.insert(ticket, ip);
        self.count(ip, |_, o| *o += 1);
        Ok(())
    }

    /// `ticket` is gone, whatever its state.
    pub(crate) fn ended(&mut self, ticket: u64) {
        if let Some(ip) = self.open.remove(&ticket) {
            self.count(ip, |_, o| *o -= 1);
        } else if let Some(at) = self.pending.iter().position(|(t, _, _)| *t == ticket) {
            let (_, ip, _) = self.pending.remove(at).expect("position is in range");
            self.count(ip, |p, _| *p -= 1);
        }
    }

    /// Connections in their handshake.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Open connections.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.open.len()
    }

    fn count(&mut self, ip: IpAddr, change: impl FnOnce(&mut usize, &mut usize)) {
        let entry = self.per_ip.entry(ip).or_default();
        change(&mut entry.0, &mut entry.1);
        if *entry == (0, 0) {
            self.per_ip.remove(&ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn gate() -> Gate<u64> {
        Gate::new(GateLimits {
            max_pending: 4,
            max_pending_per_ip: 2,
            max_connections: 3,
            max_connections_per_ip: 2,
        })
    }

    #[test]
    fn one_address_holds_at_most_its_share_of_pending_handshakes() {
        let mut g = gate();
        assert_eq!(g.admit(1, ip(2), 1), Ok(None));
        assert_eq!(g.admit(2, ip(2), 2), Ok(None));
        assert_eq!(g.admit(3, ip(2), 3), Err(Turned::PendingFromAddress));
        assert_eq!(g.admit(4, ip(3), 4), Ok(None), "another address is let in");
    }

    #[test]
    fn a_full_pending_table_evicts_its_oldest_entry_for_a_newcomer() {
        let mut g = gate();
        for t in 1..=4 {
            assert_eq!(g.admit(t, ip(t as u8 + 1), t), Ok(None));
        }
        assert_eq!(g.admit(5, ip(9), 5), Ok(Some(1)), "the oldest gives way");
        assert_eq!(g.pending(), 4);
        assert_eq!(
            g.opened(1),
            Err(Turned::Full),
            "the evicted one never opens"
        );
        assert_eq!(g.opened(5), Ok(()));
    }

    #[test]
    fn connections_per_address_count_pending_and_open() {
        let mut g = gate();
        g.admit(1, ip(2), 1).unwrap();
        g.opened(1).unwrap();
        g.admit(2, ip(2), 2).unwrap();
        assert_eq!(g.admit(3, ip(2), 3), Err(Turned::ConnectionsFromAddress));
        g.ended(1);
        assert_eq!(g.admit(3, ip(2), 3), Ok(None), "a slot freed by a close");
    }

    #[test]
    fn the_server_is_full_at_max_connections_and_frees_slots_on_close() {
        let mut g = gate();
        for t in 1..=3 {
            g.admit(t, ip(t as u8 + 1), t).unwrap();
            g.opened(t).unwrap();
        }
        g.admit(4, ip(9), 4).unwrap();
        assert_eq!(g.opened(4), Err(Turned::Full));
        assert_eq!(g.open(), 3);
        g.ended(2);
        g.admit(5, ip(9), 5).unwrap();
        assert_eq!(g.opened(5), Ok(()));
        g.ended(4); // already gone: nothing changes
        assert_eq!((g.open(), g.pending()), (3, 0));
        assert!(
            g.per_ip.values().all(|(p, o)| p + o > 0),
            "no empty entries kept"
        );
    }

    #[test]
    fn ipv6_addresses_count_per_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(address_key(mapped), ip(2));
    }
}
