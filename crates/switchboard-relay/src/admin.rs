//! The relay seen from its admin server (`switchboard_admin`): players,
//! zones, counters, and the operator's kick.

use switchboard_admin::source::BoxFuture;
use switchboard_admin::{AdminClient, AdminSource, Counter, Snapshot};

use crate::hub::Link;
use crate::server::RelayHandle;

impl AdminSource for RelayHandle {
    fn mode(&self) -> &'static str {
        "relay"
    }

    fn snapshot(&self) -> BoxFuture<'_, Snapshot> {
        Box::pin(async move {
            let (clients, stats) = (self.clients().await, self.stats().await);
            let clients = clients
                .into_iter()
                .map(|c| AdminClient {
                    id: c.id.to_string(),
                    name: c.name,
                    addr: c.addr.map(|a| a.to_string()),
                    place: c.zone,
                    kind: match (c.is_bot, c.link) {
                        (true, _) => "bot",
                        (false, Link::Native) => "native",
                        (false, Link::Json) => "json",
                    }
                    .to_string(),
                })
                .collect();
            let counters = vec![
                Counter::gauge(
                    "switchboard_relay_players",
                    "Players connected now.",
                    stats.players as f64,
                ),
                Counter::gauge(
                    "switchboard_relay_zones",
                    "Zones with a player in them now.",
                    stats.zones as f64,
                ),
                Counter::total(
                    "switchboard_relay_transforms_received_total",
                    "Transforms received from players.",
                    stats.transforms_in,
                ),
                Counter::total(
                    "switchboard_relay_deliveries_total",
                    "Transforms delivered, one per recipient.",
                    stats.transforms_out,
                ),
                Counter::total(
                    "switchboard_relay_refused_total",
                    "Transforms refused: over the rate or the limits.",
                    stats.refused,
                ),
                Counter::total(
                    "switchboard_relay_malformed_lines_total",
                    "JSON lines that were no use.",
                    stats.malformed_lines,
                ),
            ];
            Snapshot { clients, counters }
        })
    }

    fn kick(&self, id: String, reason: String) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match id.parse::<u32>() {
                Ok(id) => RelayHandle::kick(self, id, &reason).await,
                Err(_) => false,
            }
        })
    }
}
