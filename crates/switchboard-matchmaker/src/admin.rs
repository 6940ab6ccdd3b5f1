//! The matchmaker seen from its admin server (`switchboard_admin`): its
//! answers, refusals and the room directory's errors in `/metrics`. It has
//! no players to list or kick: a connection asks, is answered, and goes.

use switchboard::admin::BoxFuture;
use switchboard::admin::{AdminSource, Counter, Snapshot};

use crate::MatchmakerHandle;

/// A running matchmaker as an [`AdminSource`].
#[derive(Debug)]
pub struct MatchmakerAdmin {
    matchmaker: MatchmakerHandle,
}

impl MatchmakerAdmin {
    /// The admin view of `matchmaker`.
    pub fn new(matchmaker: MatchmakerHandle) -> Self {
        Self { matchmaker }
    }
}

impl AdminSource for MatchmakerAdmin {
    fn mode(&self) -> &'static str {
        "matchmaker"
    }

    fn snapshot(&self) -> BoxFuture<'_, Snapshot> {
        let s = self.matchmaker.stats();
        let total = |name: &str, help: &str, value: u64| Counter::total(name, help, value);
        let counters = vec![
            Counter::gauge(
                "switchboard_matchmaker_connections",
                "Connections open now.",
                s.connections as f64,
            ),
            total(
                "switchboard_matchmaker_lists_total",
                "Room lists answered.",
                s.lists,
            ),
            total(
                "switchboard_matchmaker_seats_total",
                "Seats reserved, in a new room or an existing one.",
                s.seats,
            ),
            total(
                "switchboard_matchmaker_refused_total",
                "Requests refused with their reason.",
                s.refused,
            ),
            total(
                "switchboard_matchmaker_directory_errors_total",
                "Requests refused because the room directory (Redis) could not be reached.",
                s.directory_errors,
            ),
            total(
                "switchboard_matchmaker_allocations_total",
                "Game servers the Agones allocator handed over for new matches.",
                s.allocations,
            ),
            total(
                "switchboard_matchmaker_rate_limited_total",
                "Connections closed for asking too often.",
                s.rate_limited,
            ),
        ];
        Box::pin(async move {
            Snapshot {
                clients: Vec::new(),
                counters,
                places: Vec::new(),
            }
        })
    }

    fn kick(&self, _id: String, _reason: String) -> BoxFuture<'_, bool> {
        Box::pin(async { false })
    }
}
