//! The relay's logic, without IO: players, zones, and who hears what.

use crate::record::{Answer, RelayInput};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::interest::{InterestConfig, World};
use crate::transform::Transform;

pub use types::{Link, Outgoing, RelayClient, RelayEvent, RelayStats, QUEUE_WAIT_BOUNDS_MICROS};

/// Bits of a player id that number players within one relay of several.
pub const ID_BITS: u32 = 20;
const ID_MASK: u32 = (1 << ID_BITS) - 1;

/// Players and zones.
#[derive(Debug, Default)]
pub struct Relay {
    players: BTreeMap<u32, RelayClient>,
    budgets: HashMap<u32, Budget>,
    zones: HashMap<String, BTreeSet<u32>>,
    next_id: u32,
    /// Set when the relay is one of several (`with_id_prefix`): ids are
    /// this in their top bits, a counter in the low [`ID_BITS`].
    pub(crate) id_prefix: Option<u32>,
    pub(crate) limits: RelayLimits,
    /// Players to disconnect for abuse, and why; the driver takes them.
    abusive: Vec<(u32, String)>,
    stats: RelayStats,
    /// Interest by distance inside each zone, when on (`with_interest`).
    pub(crate) interest: Option<InterestConfig>,
    /// Each zone's players by place (interest by distance).
    worlds: HashMap<String, World>,
    /// Where its calls are recorded, when they are (`record_to`).
    pub(crate) recorder: Option<std::sync::Arc<crate::record::RelayRecorder>>,
}

impl Relay {
    /// No players, the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// No players, these limits.
    pub fn with_limits(limits: RelayLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Inside a zone, players hear only those near them
    /// ([`InterestConfig`]): the zone stays the coarse filter, distance the
    /// fine one.
    pub fn with_interest(mut self, interest: InterestConfig) -> Self {
        self.interest = Some(interest);
        self
    }

    /// Player ids start with `prefix` (in the bits above [`ID_BITS`]), so
    /// that the relays of one service never give out the same id and a
    /// player handed over keeps its own.
    pub fn with_id_prefix(mut self, prefix: u32) -> Self {
        self.id_prefix = Some(prefix);
        self
    }

    /// Gives the player who joined as `id` the id `wanted` (a handover
    /// from another relay), before it is in a zone. False, and nothing
    /// changed, if `wanted` is taken or `id` is not a fresh player.
    pub fn take_id(&mut self, id: u32, wanted: u32) -> bool {
        let taken = self.take_id_core(id, wanted);
        self.record(|| RelayInput::TakeId { id, wanted }, Answer::Flag(taken));
        taken
    }

    fn take_id_core(&mut self, id: u32, wanted: u32) -> bool {
        if wanted == 0 || self.players.contains_key(&wanted) {
            return false;
        }
        match self.players.get(&id) {
            Some(player) if player.zone.is_none() => {}
            _ => return false,
        }
        let mut player = self.players.remove(&id).expect("checked above");
        player.id = wanted;
        self.players.insert(wanted, player);
        if let Some(budget) = self.budgets.remove(&id) {
            self.budgets.insert(wanted, budget);
        }
        true
    }

    /// A player.
    pub fn player(&self, id: u32) -> Option<&RelayClient> {
        self.players.get(&id)
    }

    /// How many players are connected.
    pub fn player_count(&self) -> usize {
        self.players.len()
    }

    /// Players that must be disconnected for abuse, and why (each once).
    pub fn take_abusive(&mut self) -> Vec<(u32, String)> {
        let abusive = std::mem::take(&mut self.abusive);
        self.record(|| RelayInput::TakeAbusive, Answer::Abusive(&abusive));
        abusive
    }

    /// Zones with players in them.
    pub fn zone_count(&self) -> usize {
        self.zones.len()
    }

    /// A player connected: its number, and its welcome.
    pub fn join(
        &mut self,
        name: &str,
        addr: Option<SocketAddr>,
        link: Link,
        is_bot: bool,
    ) -> (u32, Vec<Outgoing>) {
        let (id, out) = self.join_core(name, addr, link, is_bot);
        let input = || RelayInput::Join {
            name: name.to_string(),
            addr,
            link,
            is_bot,
        };
        self.record(input, Answer::Joined(id, &out));
        (id, out)
    }

    fn join_core(
        &mut self,
        name: &str,
        addr: Option<SocketAddr>,
        link: Link,
        is_bot: bool,
    ) -> (u32, Vec<Outgoing>) {
        // Ids go up and wrap (past u32::MAX, or within the prefix's range),
        // never onto 0 or a live player.
        let mut id = self.next_id;
        loop {
            id = match self.id_prefix {
                None => id.wrapping_add(1),
                Some(prefix) => (prefix << ID_BITS) | (id.wrapping_add(1) & ID_MASK),
            };
            if id != 0 && !self.players.contains_key(&id) {
                break;
            }
        }
        self.next_id = id;
        self.players.insert(
            id,
            RelayClient {
                id,
                name: name.to_string(),
                addr,
                link,
                zone: None,
                last: None,
                is_bot,
                relayed: 0,
            },
        );
        (id, vec![(vec![id], RelayEvent::Welcome { player_id: id })])
    }

    /// Renames a player or marks it a bot.
    pub fn describe(&mut self, id: u32, name: &str, is_bot: bool) {
        self.describe_core(id, name, is_bot);
        let input = || RelayInput::Describe {
            id,
            name: name.to_string(),
            is_bot,
        };
        self.record(input, Answer::Nothing);
    }

    fn describe_core(&mut self, id: u32, name: &str, is_bot: bool) {
        if let Some(player) = self.players.get_mut(&id) {
            player.name = display_name(name);
            player.is_bot = is_bot;
        }
    }

    fn others_in(&self, zone: &str, except: u32) -> Vec<u32> {
        self.zones.get(zone).map_or_else(Vec::new, |ids| {
            ids.iter().copied().filter(|i| *i != except).collect()
        })
    }

    /// A player moved: stamp it, relay it to the others in its zone; a zone
    /// change is announced to the zone it left.
    pub fn transform(
        &mut self,
        id: u32,
        transform: Transform,
        server_time_ms: u64,
    ) -> Vec<Outgoing> {
        let recorded = self.recorder.is_some().then(|| transform.clone());
        let out = if self.admit_core(id, &transform, server_time_ms) {
            self.relay_admitted_core(id, transform, server_time_ms)
        } else {
            Vec::new()
        };
        if let Some(transform) = recorded {
            let input = || RelayInput::Transform {
                id,
                transform,
                now_ms: server_time_ms,
            };
            self.record(input, Answer::Out(&out));
        }
        out
    }

    /// Whether player `id` may send `transform` now (its rate, its shape):
    /// counted in, and against its rate. What is not admitted goes no
    /// further, not even to a zone directory.
    pub fn admit(&mut self, id: u32, transform: &Transform, server_time_ms: u64) -> bool {
        let admitted = self.admit_core(id, transform, server_time_ms);
        let input = || RelayInput::Admit {
            id,
            transform: transform.clone(),
            now_ms: server_time_ms,
        };
        self.record(input, Answer::Flag(admitted));
        admitted
    }

    fn admit_core(&mut self, id: u32, transform: &Transform, server_time_ms: u64) -> bool {
        self.stats.transforms_in += 1;
        if !self.players.contains_key(&id) {
            return false;
        }
        if !self.spend(id, server_time_ms) || transform.check().is_err() {
            self.stats.refused += 1;
            return false;
        }
        true
    }

    /// Relays a transform [`admit`](Self::admit) let in.
    pub fn relay_admitted(
        &mut self,
        id: u32,
        transform: Transform,
        server_time_ms: u64,
    ) -> Vec<Outgoing> {
        let recorded = self.recorder.is_some().then(|| transform.clone());
        let out = self.relay_admitted_core(id, transform, server_time_ms);
        if let Some(transform) = recorded {
            let input = || RelayInput::RelayAdmitted {
                id,
                transform,
                now_ms: server_time_ms,
            };
            self.record(input, Answer::Out(&out));
        }
        out
    }

    fn relay_admitted_core(
        &mut self,
        id: u32,
        transform: Transform,
        server_time_ms: u64,
    ) -> Vec<Outgoing> {
        if self.interest.is_some() {
            return self.relay_by_distance(id, transform, server_time_ms);
        }
        let Some(player) = self.players.get(&id) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // The zone's name is compared, not copied: a copy per transform
        // only when the player changes zone.
        if player.zone.as_deref() != Some(transform.zone.as_str()) {
            if let Some(old) = player.zone.clone() {
                self.out_of_zone(&old, id);
                let watchers = self.others_in(&old, id);
                if !watchers.is_empty() {
                    out.push((watchers, RelayEvent::Left { player_id: id }));
                }
            }
            // Whoever enters a zone is shown where everyone in it stands.
            for other in self.others_in(&transform.zone, id) {
                self.show(other, id, server_time_ms, &mut out);
            }
            self.zones
                .entry(transform.zone.clone())
                .or_default()
                .insert(id);
        }
        let recipients = self.others_in(&transform.zone, id);
        self.relay_to(id, transform, recipients, server_time_ms, &mut out);
        out
    }

    /// Shows player `to` where `other` stands: its last transform, if it
    /// sent one.
    fn show(&self, other: u32, to: u32, server_time_ms: u64, out: &mut Vec<Outgoing>) {
        if let Some(last) = self.players.get(&other).and_then(|p| p.last.clone()) {
            let event = RelayEvent::Transform {
                player_id: other,
                server_time_ms,
                transform: last,
            };
            out.push((vec![to], event));
        }
    }

    /// Takes `id` out of `zone`'s members; an empty zone is forgotten
    /// (fresh zone names cannot grow the relay).
    fn out_of_zone(&mut self, zone: &str, id: u32) {
        if let Some(ids) = self.zones.get_mut(zone) {
            ids.remove(&id);
            if ids.is_empty() {
                self.zones.remove(zone);
            }
        }
    }

    /// Keeps `transform` as `id`'s last (and its zone), and relays it to
    /// `recipients`.
    fn relay_to(
        &mut self,
        id: u32,
        transform: Transform,
        recipients: Vec<u32>,
        server_time_ms: u64,
        out: &mut Vec<Outgoing>,
    ) {
        self.stats.transforms_out += recipients.len() as u64;
        let transform = Arc::new(transform);
        if let Some(player) = self.players.get_mut(&id) {
            if player.zone.as_deref() != Some(transform.zone.as_str()) {
                player.zone = Some(transform.zone.clone());
            }
            player.last = Some(transform.clone());
            player.relayed += 1;
        }
        if !recipients.is_empty() {
            out.push((
                recipients,
                RelayEvent::Transform {
                    player_id: id,
                    server_time_ms,
                    transform,
                },
            ));
        }
    }

    /// A player left: those who could see it are told.
    pub fn leave(&mut self, id: u32) -> Vec<Outgoing> {
        let out = self.leave_core(id);
        self.record(|| RelayInput::Leave { id }, Answer::Out(&out));
        out
    }

    fn leave_core(&mut self, id: u32) -> Vec<Outgoing> {
        self.budgets.remove(&id);
        let Some(player) = self.players.remove(&id) else {
            return Vec::new();
        };
        let Some(zone) = player.zone else {
            return Vec::new();
        };
        self.out_of_zone(&zone, id);
        let watchers = match self.interest {
            Some(_) => self.leave_world(&zone, id),
            None => self.others_in(&zone, id),
        };
        if watchers.is_empty() {
            Vec::new()
        } else {
            vec![(watchers, RelayEvent::Left { player_id: id })]
        }
    }

    /// Counts a malformed line.
    pub fn malformed_line(&mut self) {
        self.stats.malformed_lines += 1;
        self.record(|| RelayInput::MalformedLine, Answer::Nothing);
    }

    /// A copy of every player.
    pub fn clients(&self) -> Vec<RelayClient> {
        self.players.values().cloned().collect()
    }

    /// A copy of the counters.
    pub fn stats(&self) -> RelayStats {
        RelayStats {
            players: self.players.len(),
            zones: self.zones.len(),
            view_recomputes: self.view_recomputes(),
            ..self.stats.clone()
        }
    }

    /// How a player is connected.
    pub fn link(&self, id: u32) -> Option<Link> {
        self.players.get(&id).map(|p| p.link)
    }
}

/// A name a player chose, as the relay keeps and shows it: control
/// characters dropped, at most [`MAX_NAME_CHARS`] characters, whatever its
/// connection's kind (a native hello has no length limit of its own).
///
/// [`MAX_NAME_CHARS`]: switchboard::session::MAX_NAME_CHARS
pub(crate) fn display_name(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_control())
        .take(switchboard::session::MAX_NAME_CHARS)
        .collect()
}

mod budget;
mod distance;
mod snapshot;
pub use snapshot::RelaySnapshotError;
mod types;

use budget::Budget;
pub use budget::RelayLimits;
#[cfg(test)]
mod tests;
