//! The relay with interest by distance inside its zones
//! (`Relay::with_interest`): each zone's players kept by place
//! ([`World`]), a transform relayed to those near its sender at their
//! distance band's rate, players told when another comes into view (with
//! its last state, as on entering a zone) and when it goes out of it.

use super::{Outgoing, Relay, RelayEvent};
use crate::interest::{ViewChanges, World};
use crate::transform::Transform;

impl Relay {
    /// [`relay_admitted`](Relay::relay_admitted) with interest by distance.
    pub(super) fn relay_by_distance(
        &mut self,
        id: u32,
        transform: Transform,
        server_time_ms: u64,
    ) -> Vec<Outgoing> {
        let Some(config) = self.interest else {
            return Vec::new();
        };
        let Some(player) = self.players.get(&id) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // Names are compared, not copied: a copy only on a zone change (or
        // a world that went missing).
        let same_zone = player.zone.as_deref() == Some(transform.zone.as_str());
        let (changes, recipients) = match self.worlds.get_mut(&transform.zone) {
            Some(world) if same_zone => world.moved(id, transform.position),
            // (A player's zone always has its world; were it missing, the
            // player would enter a fresh one.)
            _ if same_zone => self
                .worlds
                .entry(transform.zone.clone())
                .or_insert_with(|| World::new(config))
                .moved(id, transform.position),
            _ => {
                if let Some(old) = player.zone.clone() {
                    self.out_of_zone(&old, id);
                    let watchers = self.leave_world(&old, id);
                    if !watchers.is_empty() {
                        out.push((watchers, RelayEvent::Left { player_id: id }));
                    }
                }
                let zone = transform.zone.clone();
                self.zones.entry(zone.clone()).or_default().insert(id);
                let world = self
                    .worlds
                    .entry(zone)
                    .or_insert_with(|| World::new(config));
                let changes = world.enter(id, transform.position);
                (changes, world.recipients(id))
            }
        };
        self.tell_views(id, &changes, server_time_ms, &mut out);
        self.relay_to(id, transform, recipients, server_time_ms, &mut out);
        out
    }

    /// The mover `id` is shown everyone who came into its view where they
    /// stand (they get its transform as its recipients); both sides of a
    /// pair that went out of view are told.
    fn tell_views(
        &self,
        id: u32,
        changes: &ViewChanges,
        server_time_ms: u64,
        out: &mut Vec<Outgoing>,
    ) {
        for &(_, other) in &changes.entered {
            self.show(other, id, server_time_ms, out);
        }
        let gone: Vec<u32> = changes.left.iter().map(|&(_, other)| other).collect();
        for &other in &gone {
            out.push((vec![id], RelayEvent::Left { player_id: other }));
        }
        if !gone.is_empty() {
            out.push((gone, RelayEvent::Left { player_id: id }));
        }
    }

    /// Takes `id` out of `zone`'s world: who saw it.
    pub(super) fn leave_world(&mut self, zone: &str, id: u32) -> Vec<u32> {
        let Some(world) = self.worlds.get_mut(zone) else {
            return Vec::new();
        };
        let mut watchers = world.leave(id);
        if world.is_empty() {
            // Its count lives on in the total (a counter never goes down).
            self.stats.view_recomputes += world.recomputes();
            self.worlds.remove(zone);
        }
        watchers.sort_unstable();
        watchers
    }

    /// Views recomputed so far, in every zone's world, gone ones included
    /// (interest by distance; standing still recomputes nothing).
    pub fn view_recomputes(&self) -> u64 {
        let live: u64 = self.worlds.values().map(World::recomputes).sum();
        self.stats.view_recomputes + live
    }
}

#[cfg(test)]
mod tests;
