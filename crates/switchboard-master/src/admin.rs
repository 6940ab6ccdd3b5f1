//! The master seen from its admin server (`switchboard_admin`): the listed
//! servers (in the clients table, by address), heartbeats, expiries and the
//! other counters in `/metrics`.

use switchboard::admin::BoxFuture;
use switchboard::admin::{AdminClient, AdminSource, Counter, Snapshot};

use crate::server::MasterHandle;

/// A running master as an [`AdminSource`]. It has no players to kick: a
/// listed server leaves the list when it stops its heartbeats.
#[derive(Debug)]
pub struct MasterAdmin {
    master: MasterHandle,
}

impl MasterAdmin {
    /// The admin view of `master`.
    pub fn new(master: MasterHandle) -> Self {
        Self { master }
    }
}

impl AdminSource for MasterAdmin {
    fn mode(&self) -> &'static str {
        "master"
    }

    fn snapshot(&self) -> BoxFuture<'_, Snapshot> {
        Box::pin(async move {
            let Some(snapshot) = self.master.snapshot().await else {
                return Snapshot::default();
            };
            let clients = snapshot
                .servers
                .iter()
                .map(|listed| AdminClient {
                    id: listed.addr.to_string(),
                    name: listed.info.name.clone(),
                    addr: Some(listed.addr.to_string()),
                    // Grouped by game type on the page's places table.
                    place: Some(listed.info.game_type.clone()),
                    // A second port's server (its `protocol` tag: a
                    // Torque game's), or a native one.
                    kind: match listed.info.tags.iter().find(|(k, _)| k == "protocol") {
                        Some((_, protocol)) => format!("{protocol} server"),
                        None => "game server".into(),
                    },
                    traffic: None,
                })
                .collect();
            let s = &snapshot.stats;
            let total = |name: &'static str, help: &'static str, value: u64| {
                Counter::total(name, help, value)
            };
            let mut counters = vec![
                Counter::gauge(
                    "switchboard_master_servers_listed",
                    "Servers listed now.",
                    s.listed as f64,
                ),
                total(
                    "switchboard_master_datagrams_total",
                    "Datagrams received.",
                    s.datagrams,
                ),
                total(
                    "switchboard_master_heartbeats_total",
                    "Heartbeats received.",
                    s.heartbeats,
                ),
                total(
                    "switchboard_master_heartbeats_rate_limited_total",
                    "Heartbeats over the per-address rate.",
                    s.rate_limited,
                ),
                total(
                    "switchboard_master_registered_total",
                    "Servers that got listed.",
                    s.registered,
                ),
                total(
                    "switchboard_master_expired_total",
                    "Servers dropped as silent.",
                    s.expired,
                ),
                total(
                    "switchboard_master_goodbyes_total",
                    "Servers that took themselves off the list.",
                    s.goodbyes,
                ),
                total(
                    "switchboard_master_malformed_total",
                    "Datagrams that did not decode or broke the limits.",
                    s.malformed,
                ),
                total(
                    "switchboard_master_lists_total",
                    "List requests served.",
                    s.lists,
                ),
                total(
                    "switchboard_master_registry_errors_total",
                    "Registry calls that failed (a shared store down or too slow).",
                    s.registry_errors,
                ),
                total(
                    "switchboard_master_lists_refused_total",
                    "List requests over the per-address rate.",
                    s.lists_refused,
                ),
            ];
            counters.extend(snapshot.port_counters);
            Snapshot {
                clients,
                counters,
                places: Vec::new(),
            }
        })
    }

    fn kick(&self, _id: String, _reason: String) -> BoxFuture<'_, bool> {
        Box::pin(async { false })
    }
}
