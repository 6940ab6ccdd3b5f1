//! What a server can report about itself.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::session::ClientId;

/// One connected client, as of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientStats {
    /// Its id.
    pub id: ClientId,
    /// Its name.
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// How long ago this connection opened.
    pub connected_for: Duration,
    /// How long ago it last sent anything.
    pub idle_for: Duration,
    /// Frames received from it.
    pub messages_in: u64,
    /// Bytes received from it.
    pub bytes_in: u64,
    /// Frames sent to it.
    pub messages_out: u64,
    /// Bytes sent to it.
    pub bytes_out: u64,
    /// Last measured round-trip time, microseconds.
    pub rtt_micros: u64,
}

/// A copy of the server's counters; later events do not change it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Clients connected and welcomed now.
    pub clients: Vec<ClientStats>,
    /// Sessions held, connected or within their grace period.
    pub sessions: usize,
    /// Connections accepted since the start.
    pub connections_total: u64,
    /// Clients admitted (new sessions) since the start.
    pub joins_total: u64,
    /// Reconnects that resumed a session.
    pub resumes_total: u64,
    /// Hellos refused (password, auth, token, full, name, address).
    pub refused_total: u64,
    /// Offline sessions that ended early to make room for a newcomer.
    pub evicted_total: u64,
    /// Requests accepted.
    pub accepted_total: u64,
    /// Requests rejected by the rules.
    pub rejected_total: u64,
    /// Error replies (unknown channel or action, bad content, too early).
    pub errors_total: u64,
    /// Messages dropped by the rate limit (each answered with an error).
    pub rate_limited_total: u64,
    /// Connections ended, by reason.
    pub disconnects: BTreeMap<String, u64>,
    /// Log lines about peers skipped by `ManagerConfig::peer_log_rate`.
    pub logs_skipped_total: u64,
    /// Where the clients are, as the game describes it
    /// ([`GameLogic::places`](super::GameLogic::places)).
    pub places: Vec<super::Place>,
}
