//! [`RelayConfig`]: the relay's settings, each field with its default.

use std::time::Duration;

use switchboard::socket::{EndpointConfig, PacerConfig};

use crate::hub::RelayLimits;

/// The relay's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// The native listener's limits.
    pub server: EndpointConfig,
    /// The JSON compatibility listener's port (off by default; 0 picks one).
    pub json_port: Option<u16>,
    /// The longest JSON line (default 4096 bytes); a longer one gets an error
    /// line back and ends the connection (the rest of it cannot be framed).
    pub max_json_line: usize,
    /// Garbage lines (invalid JSON, not an object, unknown type, too long)
    /// a JSON client may send before it is disconnected (default 10).
    pub max_json_errors: u32,
    /// Lines waiting for a JSON client (default 1024); past it the client
    /// is disconnected as a slow consumer.
    pub json_queue: usize,
    /// Bytes waiting for a JSON client (default 256 KiB); past it the client
    /// is disconnected as a slow consumer, however few lines that is.
    pub json_queue_bytes: usize,
    /// When relayed messages are written (default [`PacerConfig::default`]).
    /// While the relay keeps up and is quiet (under `quiet_rate` deliveries
    /// a second) what arrived together is handled, then each player gets its
    /// messages at once, in one write. Busier, or once players' messages
    /// wait for the relay longer than `behind_after` (2 ms) on average, a
    /// player's messages wait up to `max_wait` (5 ms) to share a write: one
    /// system call for the relay and one wake-up for the player instead of
    /// one per message. (With 1,000 players at 10 Hz in zones of 20, a write
    /// per message saturates two cores.) A round of writes to
    /// `split_flush_at` players or more is shared among the runtime's
    /// workers.
    pub pacing: PacerConfig,
    /// Per-player limits: transforms per second, burst, strikes before a
    /// disconnect for abuse.
    pub limits: RelayLimits,
    /// Transforms a connection's datagrams (the moves channel) may bring
    /// before its hello or handover ticket is read, kept until it is and
    /// then relayed in order (default 4, a few ticks' worth: a datagram can
    /// overtake the stream). Older ones past it are dropped, as if lost.
    pub early_moves: usize,
    /// JSON connections open at once (default 1024). Further ones are
    /// closed at accept.
    pub max_json_connections: usize,
    /// JSON connections open at once from one address (default 16; an IPv6
    /// address counts per /64). Further ones are closed at accept.
    pub max_json_connections_per_address: usize,
    /// A JSON client that sends nothing for this long is disconnected
    /// (default 120 s; a client sends a line, a transform or a hello, at
    /// least this often).
    pub json_idle_timeout: Duration,
    /// A line to a JSON client that cannot be written within this long
    /// disconnects it (default 10 s): a client that stops reading does not
    /// hold a task and a socket forever.
    pub json_write_timeout: Duration,
    /// One relay of several (default none; `docs/SCALING.md`): each zone
    /// lives on one of them, and native players (TCP, or WebSocket when the
    /// zone's relay publishes a WebSocket address) are handed over to their
    /// zone's relay with their ids. JSON players stay where they connect.
    pub zones: Option<crate::ZoneRouting>,
    /// Interest by distance inside each zone (default none: a zone's
    /// players all hear each other). With it, a player hears those within
    /// the enter radius, at a rate that falls with distance, and is told
    /// when another comes into view (its last transform) and goes out of
    /// it (`Left`); the JSON listener's players see the same filtered
    /// stream. The zone stays the coarse filter. Checked at start
    /// ([`InterestConfig::check`](crate::interest::InterestConfig::check)).
    pub interest: Option<crate::interest::InterestConfig>,
    /// The precision of positions for clients that take compact transforms
    /// (`RelayOptions::compact`; default 0.01, a centimetre if the game's
    /// unit is the metre). A finite number above 0; positions are rounded
    /// to it, and clamped to ±2^31 − 1 of it.
    pub compact_precision: f32,
    /// Record every call into the relay's core to this file (default
    /// none; `relay --record FILE`, `docs/RECORDING.md`): `switchboard-server
    /// replay FILE` replays it and checks every answer. Written by a thread
    /// of its own through a queue of 65,536 records; when the disk falls
    /// that far behind the recording stops (its last record says why) and
    /// the relay goes on.
    pub record: Option<std::path::PathBuf>,
    /// Where recordings started from the admin page go (default
    /// `recordings`, created when the first starts; each named after the
    /// relay and the time). Such a recording begins with a snapshot of the
    /// relay's core.
    pub record_dir: std::path::PathBuf,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            server: EndpointConfig::default(),
            json_port: None,
            max_json_line: 4096,
            max_json_errors: 10,
            json_queue: 1024,
            json_queue_bytes: 256 * 1024,
            pacing: PacerConfig::default(),
            limits: RelayLimits::default(),
            early_moves: 4,
            max_json_connections: 1024,
            max_json_connections_per_address: 16,
            json_idle_timeout: Duration::from_secs(120),
            json_write_timeout: Duration::from_secs(10),
            zones: None,
            record: None,
            record_dir: "recordings".into(),
            interest: None,
            compact_precision: crate::compact::DEFAULT_PRECISION,
        }
    }
}
