//! Open connections counted in total and per address (the caps of
//! `switchboard::socket::Listener`): a connection holds a
//! [`ConnectionSlot`] while it lives.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::address_key;

/// The caps of one listener: `max_total` connections at once, and
/// `max_per_address` from one address ([`address_key`]: an IPv6 /64 counts
/// as one).
#[derive(Debug, Clone)]
pub struct ConnectionSlots {
    inner: Arc<Mutex<Counts>>,
    max_total: usize,
    max_per_address: usize,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// Why a connection was not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotRefusal {
    /// Its address holds `max_per_address` connections already.
    FromAddress,
    /// The listener holds `max_total` connections.
    Full,
}

impl std::fmt::Display for SlotRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SlotRefusal::FromAddress => "too many connections from your address",
            SlotRefusal::Full => "server full",
        })
    }
}

/// One connection's place, given back when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    inner: Arc<Mutex<Counts>>,
    ip: IpAddr,
}

impl ConnectionSlots {
    /// Caps of `max_total` connections and `max_per_address` per address
    /// (each at least 1).
    pub fn new(max_total: usize, max_per_address: usize) -> Self {
        Self {
            inner: Arc::default(),
            max_total: max_total.max(1),
            max_per_address: max_per_address.max(1),
        }
    }

    /// A place for a connection from `ip`, if the caps allow it.
    pub fn take(&self, ip: IpAddr) -> Result<ConnectionSlot, SlotRefusal> {
        let ip = address_key(ip);
        let mut counts = self.inner.lock().expect("slots lock");
        if counts.per_address.get(&ip).copied().unwrap_or(0) >= self.max_per_address {
            return Err(SlotRefusal::FromAddress);
        }
        if counts.total >= self.max_total {
            return Err(SlotRefusal::Full);
        }
        counts.total += 1;
        *counts.per_address.entry(ip).or_default() += 1;
        Ok(ConnectionSlot {
            inner: self.inner.clone(),
            ip,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.inner.lock().expect("slots lock").total
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.inner.lock().expect("slots lock");
        counts.total -= 1;
        if let Some(n) = counts.per_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.per_address.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_fills_its_share_and_others_still_get_in() {
        let slots = ConnectionSlots::new(3, 2);
        let a = IpAddr::from([10, 0, 0, 1]);
        let b = IpAddr::from([10, 0, 0, 2]);
        let first = slots.take(a).unwrap();
        let _second = slots.take(a).unwrap();
        assert_eq!(slots.take(a).unwrap_err(), SlotRefusal::FromAddress);
        let _third = slots.take(b).unwrap();
        assert_eq!(slots.take(b).unwrap_err(), SlotRefusal::Full);
        drop(first);
        assert_eq!(slots.open(), 2);
        assert!(slots.take(b).is_ok(), "a place given back is taken again");
    }

    #[test]
    fn an_ipv6_subnet_counts_as_one_address() {
        let slots = ConnectionSlots::new(10, 1);
        let _one = slots.take("2001:db8::1".parse().unwrap()).unwrap();
        assert_eq!(
            slots.take("2001:db8::2".parse().unwrap()).unwrap_err(),
            SlotRefusal::FromAddress
        );
    }
}
