//! Limits as state machines with time passed in: token buckets per client
//! and per key, failures per address with a doubling wait, the address a
//! limit counts, an outage told once, connections counted per address
//! ([`ConnectionSlots`]) and a game server's gate ([`Gate`]: handshakes and
//! connections, per-address caps under pressure, the oldest handshake
//! evicted).

use std::net::IpAddr;

mod backoff;
mod gate;
mod outage;
mod rate;
mod slots;
mod strikes;

pub use backoff::{doubling, Backoff, BackoffPolicy};
pub use gate::{Gate, GateLimits, Turned};
pub use outage::Outage;
pub use rate::{Clock, KeyedLimiter, LogLimiter, Millis, RateLimit, RateLimiter, TokenBucket};
pub use slots::{ConnectionSlot, ConnectionSlots, SlotRefusal};
pub use strikes::Strikes;

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

/// The prefix a limit "per network" counts: an IPv4 /24, or an IPv6 /48
/// (a site), an IPv4-mapped IPv6 address counting as IPv4.
pub fn prefix_key(ip: IpAddr) -> IpAddr {
    match address_key(ip) {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::V4([a, b, c, 0].into())
        }
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[3..].fill(0);
            IpAddr::V6(segments.into())
        }
    }
}
