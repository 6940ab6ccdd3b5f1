//! Who may come in: connections in their handshake and open connections,
//! counted in total and per address, as a state machine with no socket.
//!
//! ```text
//!  accepted ──admit──▶ pending ──opened──▶ open ──ended──▶ (gone)
//!     │ over the per-address      │ server full
//!     ▼ pending or connection cap ▼ (told so, closed)
//!  dropped                     (gone)
//!  The per-address caps hold only while the server is busy: half its
//!  pending table taken (for the pending cap) or half its connections open
//!  or in their handshake (for the connection cap), as SYN cookies engage only under load; until
//!  then players behind one address (a LAN party, a school, a carrier's
//!  NAT) are all let in.
//!  A newcomer that finds the pending table full evicts its oldest entry:
//!  silent connections cannot keep everyone else out. The listeners do not
//!  take a newcomer while every pending entry is younger than the grace
//!  (`full_until`): a burst of joins waits in the kernel's backlog instead
//!  of evicting handshakes that are merely waiting for a turn of the CPU.
//! ```

use std::collections::{HashMap, VecDeque};

use super::address_key;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The limits the gate enforces (a game server's `EndpointConfig`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateLimits {
    /// Connections in their handshake at once; a newcomer past it evicts
    /// the oldest (once its grace is over).
    pub max_pending: usize,
    /// Handshakes from one address at once, while the server is busy.
    pub max_pending_per_address: usize,
    /// Connections open or in their handshake at once.
    pub max_connections: usize,
    /// Connections from one address, while the server is crowded.
    pub max_connections_per_address: usize,
    /// How old the oldest pending handshake must be before a newcomer may
    /// evict it.
    pub handshake_grace: Duration,
}

/// Why a connection was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turned {
    /// Its address has `max_pending_per_address` handshakes under way already.
    PendingFromAddress,
    /// Its address has `max_connections_per_address` connections already.
    ConnectionsFromAddress,
    /// The server has `max_connections` open connections.
    Full,
}

/// Pending and open connections; `T` is what the caller needs to close an
/// evicted one (a socket handle).
#[derive(Debug)]
pub struct Gate<T> {
    limits: GateLimits,
    /// Oldest first, each with when it was admitted.
    pending: VecDeque<(u64, IpAddr, Instant, T)>,
    /// Connections per address, pending and open.
    per_address: HashMap<IpAddr, (usize, usize)>,
    open: HashMap<u64, IpAddr>,
}

impl<T> Gate<T> {
    /// An empty gate with `limits`.
    pub fn new(limits: GateLimits) -> Self {
        Self {
            limits,
            pending: VecDeque::new(),
            per_address: HashMap::new(),
            open: HashMap::new(),
        }
    }

    /// When the listeners may take a newcomer again: `None` while the
    /// pending table has room or its oldest entry has had its grace, else
    /// when that entry's grace ends (a completed or failed handshake frees
    /// a place sooner).
    pub fn full_until(&self, now: Instant) -> Option<Instant> {
        if self.pending.len() < self.limits.max_pending.max(1) {
            return None;
        }
        let (_, _, admitted, _) = self.pending.front()?;
        let ends = *admitted + self.limits.handshake_grace;
        (ends > now).then_some(ends)
    }

    /// Whether the server is busy: half its pending handshakes taken (then
    /// the per-address pending cap applies, and a QUIC port validates
    /// addresses before it spends a handshake).
    pub fn busy(&self) -> bool {
        2 * self.pending.len() >= self.limits.max_pending.max(1)
    }

    /// A connection from `ip` was accepted as `ticket` at `now`. Returns
    /// the connection it evicted, if the pending table was full.
    pub fn admit(
        &mut self,
        ticket: u64,
        ip: IpAddr,
        value: T,
        now: Instant,
    ) -> Result<Option<T>, Turned> {
        let ip = address_key(ip);
        let (pending, open) = self.per_address.get(&ip).copied().unwrap_or_default();
        let busy = self.busy();
        let crowded =
            2 * (self.open.len() + self.pending.len()) >= self.limits.max_connections.max(1);
        if busy && pending >= self.limits.max_pending_per_address.max(1) {
            return Err(Turned::PendingFromAddress);
        }
        if crowded && pending + open >= self.limits.max_connections_per_address.max(1) {
            return Err(Turned::ConnectionsFromAddress);
        }
        let evicted = if self.pending.len() >= self.limits.max_pending.max(1) {
            self.pending.pop_front().map(|(_, old_ip, _, old)| {
                self.count(old_ip, |p, _| *p -= 1);
                old
            })
        } else {
            None
        };
        self.pending.push_back((ticket, ip, now, value));
        self.count(ip, |p, _| *p += 1);
        Ok(evicted)
    }

    /// `ticket` completed its handshake: it is open, unless the server is
    /// full (then it is gone and must be told so).
    pub fn opened(&mut self, ticket: u64) -> Result<(), Turned> {
        let Some(at) = self.pending.iter().position(|(t, ..)| *t == ticket) else {
            // Evicted meanwhile.
            return Err(Turned::Full);
        };
        let (_, ip, ..) = self.pending.remove(at).expect("position is in range");
        self.count(ip, |p, _| *p -= 1);
        if self.open.len() >= self.limits.max_connections {
            return Err(Turned::Full);
        }
        self.open.insert(ticket, ip);
        self.count(ip, |_, o| *o += 1);
        Ok(())
    }

    /// `ticket` is gone, whatever its state.
    pub fn ended(&mut self, ticket: u64) {
        if let Some(ip) = self.open.remove(&ticket) {
            self.count(ip, |_, o| *o -= 1);
        } else if let Some(at) = self.pending.iter().position(|(t, ..)| *t == ticket) {
            let (_, ip, ..) = self.pending.remove(at).expect("position is in range");
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
        let entry = self.per_address.entry(ip).or_default();
        change(&mut entry.0, &mut entry.1);
        if *entry == (0, 0) {
            self.per_address.remove(&ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    /// `ms` milliseconds after one fixed instant.
    fn at(ms: u64) -> Instant {
        static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *BASE.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    fn gate() -> Gate<u64> {
        Gate::new(GateLimits {
            max_pending: 4,
            max_pending_per_address: 2,
            max_connections: 3,
            max_connections_per_address: 2,
            handshake_grace: Duration::from_millis(500),
        })
    }

    #[test]
    fn players_behind_one_address_are_all_let_in_while_the_server_is_not_busy() {
        let mut g = Gate::new(GateLimits {
            max_pending: 64,
            max_pending_per_address: 8,
            max_connections: 1024,
            max_connections_per_address: 64,
            handshake_grace: Duration::from_millis(500),
        });
        // 100 players of one address, joining a few at a time.
        for t in 0..100u64 {
            assert_eq!(g.admit(t, ip(2), t, at(0)), Ok(None), "player {t}");
            g.opened(t).unwrap();
        }
        assert_eq!(g.open(), 100);
        // Thirty handshakes of that address at once: past 8 while the table
        // is half full, the per-address cap holds.
        let turned = (100..130u64)
            .filter(|t| g.admit(*t, ip(2), *t, at(0)).is_err())
            .count();
        assert_eq!(turned, 0, "under half of 64 pending: nobody turned away");
        let turned: Vec<_> = (130..160u64)
            .filter_map(|t| g.admit(t, ip(2), t, at(0)).err())
            .collect();
        assert!(!turned.is_empty() && turned.iter().all(|t| *t == Turned::PendingFromAddress));
        assert_eq!(g.admit(200, ip(3), 200, at(0)), Ok(None), "another address");
    }

    #[test]
    fn one_address_holds_at_most_its_share_of_pending_handshakes() {
        let mut g = gate();
        assert_eq!(g.admit(1, ip(2), 1, at(0)), Ok(None));
        assert_eq!(g.admit(2, ip(2), 2, at(0)), Ok(None));
        assert_eq!(g.admit(3, ip(2), 3, at(0)), Err(Turned::PendingFromAddress));
        assert_eq!(
            g.admit(4, ip(3), 4, at(0)),
            Ok(None),
            "another address is let in"
        );
    }

    #[test]
    fn a_full_pending_table_evicts_its_oldest_entry_for_a_newcomer() {
        let mut g = gate();
        for t in 1..=4 {
            assert_eq!(g.admit(t, ip(t as u8 + 1), t, at(0)), Ok(None));
        }
        assert_eq!(
            g.admit(5, ip(9), 5, at(0)),
            Ok(Some(1)),
            "the oldest gives way"
        );
        assert_eq!(g.pending(), 4);
        assert_eq!(
            g.opened(1),
            Err(Turned::Full),
            "the evicted one never opens"
        );
        assert_eq!(g.opened(5), Ok(()));
    }

    #[test]
    fn a_full_pending_table_takes_no_newcomer_until_its_oldest_had_its_grace() {
        let mut g = gate();
        assert_eq!(g.full_until(at(0)), None, "empty");
        for t in 1..=4 {
            g.admit(t, ip(t as u8 + 1), t, at(t * 100)).unwrap();
        }
        assert_eq!(g.full_until(at(400)), Some(at(600)), "the oldest's grace");
        assert_eq!(g.full_until(at(600)), None, "the oldest may be evicted");
        g.opened(1).unwrap();
        assert_eq!(
            g.full_until(at(400)),
            None,
            "a completed handshake frees a place"
        );
        g.admit(5, ip(9), 5, at(450)).unwrap();
        assert_eq!(
            g.full_until(at(450)),
            Some(at(700)),
            "now the second is oldest"
        );
        g.ended(2);
        assert_eq!(
            g.full_until(at(450)),
            None,
            "a failed one frees a place too"
        );
    }

    #[test]
    fn connections_per_address_count_pending_and_open() {
        let mut g = gate();
        // Another address's connection: with this one, the server is
        // crowded (half of its 3 open), and the per-address cap holds.
        g.admit(9, ip(9), 9, at(0)).unwrap();
        g.opened(9).unwrap();
        g.admit(1, ip(2), 1, at(0)).unwrap();
        g.opened(1).unwrap();
        g.admit(2, ip(2), 2, at(0)).unwrap();
        assert_eq!(
            g.admit(3, ip(2), 3, at(0)),
            Err(Turned::ConnectionsFromAddress)
        );
        g.ended(1);
        assert_eq!(
            g.admit(3, ip(2), 3, at(0)),
            Ok(None),
            "a slot freed by a close"
        );
    }

    #[test]
    fn the_server_is_full_at_max_connections_and_frees_slots_on_close() {
        let mut g = gate();
        for t in 1..=3 {
            g.admit(t, ip(t as u8 + 1), t, at(0)).unwrap();
            g.opened(t).unwrap();
        }
        g.admit(4, ip(9), 4, at(0)).unwrap();
        assert_eq!(g.opened(4), Err(Turned::Full));
        assert_eq!(g.open(), 3);
        g.ended(2);
        g.admit(5, ip(9), 5, at(0)).unwrap();
        assert_eq!(g.opened(5), Ok(()));
        g.ended(4); // already gone: nothing changes
        assert_eq!((g.open(), g.pending()), (3, 0));
        assert!(
            g.per_address.values().all(|(p, o)| p + o > 0),
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
