//! The master server, which lists game servers, and the two sides that talk
//! to it: game servers announcing themselves, and browsers listing them.
//!
//! ```text
//!  game server ──heartbeat (UDP, from its game port)──▶ master
//!  game server ◀──info query + challenge (UDP, to that same address)── master
//!  game server ──info + challenge (UDP)──▶ master        (listed from now on)
//!  browser ──list request (TCP, a Switchboard connection)──▶ master ──page──▶ browser
//!  browser ──ping / info query (UDP)──▶ game server ──pong / info──▶ browser
//! ```
//!
//! The master never trusts an address named inside a packet: it queries the
//! address a heartbeat came from, lists it only once it answers with the
//! challenge, and answers heartbeats at a bounded rate per address, so it
//! cannot be used to reflect traffic at someone else. Its default port is
//! [`DEFAULT_PORT`] (27900), UDP and TCP.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`protocol`] | the datagrams and the list request/pages, byte for byte |
//! | `master` | [`Master`]: heartbeats, challenges, goodbyes, expiry, per-IP limits (no IO) |
//! | `registry` | [`Registry`], [`MemoryRegistry`]: where the listed servers are kept |
//! | `server` | [`MasterServer`]: the master's UDP sides (read on a task of their own into a bounded queue, so that no list request leaves heartbeats unread) and TCP side |
//! | `builder` | [`MasterBuilder`]: where it listens, its settings, registry and second listing port; started as a [`RunningMaster`] |
//! | `announce` | [`Announce`]: a game server's heartbeats and answers; its listing hook for `ManagerConfig::listing` |
//! | `browser` | [`fetch_list`], [`ping_servers`], [`query_info`]: the browser's side |
//! | `port` | [`ListingPort`]: a second listing protocol on a UDP port of its own, over the same registry (Torque's, in `switchboard-torque`), and the [`Lister`] it is handed |
//! | [`pending`] | [`Pending`](pending::Pending): challenges out, capped in all and per address |

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod admin;
mod announce;
mod browser;
mod builder;
mod master;
pub mod pending;
mod port;
mod probe;
pub mod protocol;
mod registry;
mod server;

use std::time::Duration;

pub use admin::MasterAdmin;
pub use announce::{Announce, Announcer, ENV_ANNOUNCE};
pub use browser::{fetch_list, master_stats, ping_servers, query_info, Browsed, MAX_LISTED};
pub use builder::{MasterBuilder, RunningMaster};
pub use master::Master;
pub use port::{Lister, ListingPort, NoPort};
pub use probe::probe_reachable;
pub use protocol::{
    Filter, ListPage, ListRequest, Listed, ListedTransport, ListingError, Offered, ProbeResult,
    ServerInfo,
};
pub use registry::{page_of, Heard, Limits, MemoryRegistry, Registry, RegistryError, Upserted};
pub use server::{MasterHandle, MasterServer, MasterSnapshot};

/// The master's port unless told otherwise, UDP and TCP.
pub const DEFAULT_PORT: u16 = 27900;

/// The master's limits and timers; each field says its default.
#[derive(Debug, Clone, PartialEq)]
pub struct MasterConfig {
    /// A server not heard from for this long is dropped (default 20 s: four
    /// heartbeats of an [`Announce`] at its default 5 s). A server that
    /// stops cleanly says goodbye and is dropped at once.
    pub expiry: Duration,
    /// An info query not answered within this long is forgotten (default
    /// 10 s); a late answer lists nothing.
    pub query_timeout: Duration,
    /// Heartbeats per minute answered per server (its IP and port),
    /// sustained (default 30: one every 2 s, where an [`Announce`] sends
    /// one every 5 s). Past it a heartbeat earns no query; from the exact
    /// address of a server listed here it still refreshes it (at most once
    /// a second), so that heartbeats forged from a server's address cannot
    /// delist it. Counted in [`MasterStats::rate_limited`].
    pub heartbeats_per_minute: f64,
    /// Heartbeats per minute answered per source IP, all its servers
    /// together (default 600: 32 servers on one dedicated box at one
    /// every 5 s take 384); past it as past `heartbeats_per_minute`. An
    /// IPv6 address counts per /64.
    pub heartbeats_per_minute_per_address: f64,
    /// Heartbeats per server answered at once (default 4; four times as
    /// many per IP).
    pub heartbeat_burst: f64,
    /// Datagrams read and waiting for the master at most (default
    /// 16,384, under 20 MB): the UDP ports are read on a task of their
    /// own, so that a list request's work never leaves heartbeats unread.
    /// Past it a datagram is dropped and counted
    /// ([`MasterStats::datagrams_missed`]), and the master expires nothing
    /// for one expiry, since a silent server may have been unheard.
    pub max_queued_datagrams: usize,
    /// Servers listed at most (default 10,000). Past it a new server is
    /// listed only if the IP holding the most servers holds at least two
    /// more than its own: one of those (the one heard from longest ago)
    /// gives way once the newcomer has answered its challenge, so that a
    /// few hundred addresses filling the list cannot keep new servers out.
    /// (The in-memory registry; a shared Redis registry refuses newcomers
    /// when full.)
    pub max_servers: usize,
    /// Servers listed per IP at most (default 32: a dedicated box's
    /// servers; an IPv6 address counts per /64).
    pub max_servers_per_address: usize,
    /// Unanswered info queries held at most (default 10,000); a new one
    /// past it replaces the oldest, so spoofed heartbeats cannot keep real
    /// servers from registering.
    pub max_pending: usize,
    /// Unanswered info queries to one address at most (default 16; an IPv6
    /// address counts per /64). Past it its heartbeats get no query.
    pub max_pending_per_address: usize,
    /// Source addresses whose heartbeat rate is remembered at most (default
    /// 65,536); past it those whose budget refilled are forgotten first.
    pub max_limited_addresses: usize,
    /// List requests answered per minute per address (default 600, bursts
    /// of a sixth of it: a browser reading 10,000 servers asks 100 pages).
    /// Past it the connection is closed with a reason.
    pub lists_per_minute: f64,
    /// The longest list request frame (default 4 KiB): the list port closes
    /// a connection that sends a longer one.
    pub max_request_len: usize,
    /// Reachability probes (a host asking to be connected back to) answered
    /// per minute per address (default 6). Past it the request is answered
    /// "not checked: too many probes" without a connection.
    pub probes_per_minute: f64,
    /// Probes in flight at once, from every address (default 64); past it
    /// likewise.
    pub max_probes_in_flight: usize,
    /// Probes in flight at once for one address (default 2; an IPv6
    /// address counts per /64): 32 addresses are needed to hold every
    /// slot, not 11. Past it likewise.
    pub max_probes_in_flight_per_address: usize,
    /// How long a probe waits to connect and read the host's hello
    /// (default 3 s).
    pub probe_timeout: Duration,
    /// How often expiry runs (default 1 s).
    pub tick_interval: Duration,
}

impl Default for MasterConfig {
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs(20),
            query_timeout: Duration::from_secs(10),
            heartbeats_per_minute: 30.0,
            heartbeats_per_minute_per_address: 600.0,
            heartbeat_burst: 4.0,
            max_queued_datagrams: 16_384,
            max_servers: 10_000,
            max_servers_per_address: 32,
            max_pending: 10_000,
            max_pending_per_address: 16,
            max_limited_addresses: 65_536,
            lists_per_minute: 600.0,
            max_request_len: 4096,
            probes_per_minute: 6.0,
            max_probes_in_flight: 64,
            max_probes_in_flight_per_address: 2,
            probe_timeout: Duration::from_secs(3),
            tick_interval: Duration::from_secs(1),
        }
    }
}

/// The master's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MasterStats {
    /// Servers listed now.
    pub listed: u64,
    /// Datagrams received.
    pub datagrams: u64,
    /// Datagrams that did not decode, or were of a kind the master does
    /// not take, or carried info over the limits.
    pub malformed: u64,
    /// Heartbeats received.
    pub heartbeats: u64,
    /// Heartbeats over the per-server or per-IP rate.
    pub rate_limited: u64,
    /// Datagrams dropped unread because the master's queue was full (it
    /// then expired nothing for one expiry).
    pub datagrams_missed: u64,
    /// Heartbeats shorter than the query they would earn (not padded):
    /// dropped, so that a forged one cannot be amplified.
    pub short_heartbeats: u64,
    /// New servers refused because the registry or the query table was full.
    pub refused_full: u64,
    /// New servers refused because their IP has the most servers allowed.
    #[serde(alias = "refused_per_ip")]
    pub refused_per_address: u64,
    /// Info replies that answered no query of ours.
    pub unsolicited: u64,
    /// Servers that got listed.
    pub registered: u64,
    /// Unanswered queries given up for newer ones (the table was full).
    pub challenges_evicted: u64,
    /// List requests over the per-address rate.
    pub lists_refused: u64,
    /// Servers dropped as silent.
    pub expired: u64,
    /// Servers that took themselves off the list (a verified goodbye).
    pub goodbyes: u64,
    /// List requests served.
    pub lists: u64,
    /// Registry calls that failed (a shared store down or too slow): each
    /// left a heartbeat unanswered, a server unlisted or a list unserved.
    pub registry_errors: u64,
    /// Reachability probes made (a host connected back to).
    pub probes: u64,
    /// Probe requests answered without a connection (over the rate, or too
    /// many in flight).
    pub probes_refused: u64,
    /// The second listing port's counters by name (Torque's, say:
    /// `switchboard_master_torque_datagrams_total`); empty without one.
    #[serde(default)]
    pub port: Vec<(String, u64)>,
}
