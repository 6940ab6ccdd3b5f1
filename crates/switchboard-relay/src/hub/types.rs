//! What the relay's core hands out: its players as copies, the events
//! players are sent, its counters.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::transform::Transform;

/// How a player is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Link {
    /// A Switchboard connection.
    Native,
    /// The newline-delimited JSON compatibility listener.
    Json,
}

/// One player, as a snapshot shows it (a copy, not live state).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RelayClient {
    /// Its number (the JSON protocol's `playerId`).
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Where it connected from.
    pub addr: Option<SocketAddr>,
    /// How.
    pub link: Link,
    /// Its zone, once it sent a transform.
    pub zone: Option<String>,
    /// Its last transform (shared: what is relayed, kept and shown in zone
    /// entries is one value, never copied).
    pub last: Option<Arc<Transform>>,
    /// Whether it said it is a bot.
    pub is_bot: bool,
    /// Transforms of its that the relay relayed.
    pub relayed: u64,
}

/// What the relay tells players.
#[derive(Debug, Clone, PartialEq)]
pub enum RelayEvent {
    /// Your number.
    Welcome {
        /// It.
        player_id: u32,
    },
    /// Someone in your zone moved.
    Transform {
        /// Who (stamped by the server).
        player_id: u32,
        /// The server's clock, milliseconds (stamped by the server).
        server_time_ms: u64,
        /// Where and how.
        transform: Arc<Transform>,
    },
    /// Someone you could see left, or left your zone.
    Left {
        /// Who.
        player_id: u32,
    },
}

/// An event and everyone who gets it.
pub type Outgoing = (Vec<u32>, RelayEvent);

/// The relay's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Players connected now.
    pub players: usize,
    /// Zones with a player in them now.
    pub zones: usize,
    /// Transforms received.
    pub transforms_in: u64,
    /// Transform deliveries (one per recipient).
    pub transforms_out: u64,
    /// Transforms refused (over the limits).
    pub refused: u64,
    /// Malformed JSON lines.
    pub malformed_lines: u64,
    /// Views recomputed by interest by distance (`RelayConfig::interest`;
    /// 0 without it): one per move past `min_move`, none for players
    /// standing still.
    pub view_recomputes: u64,
    /// How long the oldest message of each round of the relay's loop
    /// waited between its connection's task and the relay (on `/metrics`
    /// in buckets of [`QUEUE_WAIT_BOUNDS_MICROS`]; filled in by the relay's task; a
    /// [`Relay`](super::Relay) without one leaves it empty). A relay that keeps up takes
    /// messages within microseconds; one short of CPU sees this grow.
    pub queue_wait: switchboard::histogram::Histogram,
}

/// The `/metrics` buckets of [`RelayStats::queue_wait`]: 10 µs to 250 ms.
pub const QUEUE_WAIT_BOUNDS_MICROS: [u64; 10] =
    [10, 50, 100, 250, 500, 1_000, 2_500, 10_000, 50_000, 250_000];
