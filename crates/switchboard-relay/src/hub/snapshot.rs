//! The relay's core as it stands ([`Relay::snapshot`]), for a recording
//! started while the relay runs: its replay puts it back
//! ([`Relay::restore`]) before the first call, and answers from there as
//! the recorded relay did. Everything the core decides by is in it: the
//! players (their zones and last transforms), their budgets and strikes,
//! the zones, the worlds of interest by distance (views in their order),
//! the next id and the abusive players not yet taken. The counters
//! (`RelayStats`) are not: they decide nothing. The core keeps no OS clock
//! (its time comes with each call), so nothing needs re-basing.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Budget, Relay, RelayClient};
use crate::interest::World;

/// What is written (and read back as [`State`], field for field).
#[derive(Serialize)]
struct StateRef<'a> {
    players: &'a BTreeMap<u32, RelayClient>,
    budgets: Vec<(u32, &'a Budget)>,
    zones: Vec<(&'a String, &'a BTreeSet<u32>)>,
    next_id: u32,
    abusive: &'a [(u32, String)],
    worlds: Vec<(&'a String, &'a World)>,
}

#[derive(Deserialize)]
struct State {
    players: BTreeMap<u32, RelayClient>,
    budgets: Vec<(u32, Budget)>,
    zones: Vec<(String, BTreeSet<u32>)>,
    next_id: u32,
    abusive: Vec<(u32, String)>,
    worlds: Vec<(String, World)>,
}

/// Why the relay's core could not be captured or put back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelaySnapshotError {
    /// The state did not encode, or does not decode (another build wrote
    /// it, or the bytes are damaged).
    #[error("the relay's snapshot: {0}")]
    Codec(#[from] switchboard::codec::ContentError),
    /// A snapshot is put back only into a fresh relay (no player yet).
    #[error("a snapshot is restored into a fresh relay")]
    NotFresh,
    /// A world of interest by distance in it breaks its own rules.
    #[error("the snapshot's world {zone:?}: {why}")]
    World {
        /// The world's zone.
        zone: String,
        /// What is wrong with it.
        why: String,
    },
}

impl Relay {
    /// The core as it stands, in Switchboard's codec (tables in a fixed
    /// order: the same core gives the same bytes).
    pub fn snapshot(&self) -> Result<Vec<u8>, RelaySnapshotError> {
        let mut budgets: Vec<(u32, &Budget)> =
            self.budgets.iter().map(|(id, b)| (*id, b)).collect();
        budgets.sort_by_key(|(id, _)| *id);
        let mut zones: Vec<_> = self.zones.iter().collect();
        zones.sort_by(|a, b| a.0.cmp(b.0));
        let mut worlds: Vec<_> = self.worlds.iter().collect();
        worlds.sort_by(|a, b| a.0.cmp(b.0));
        let state = StateRef {
            players: &self.players,
            budgets,
            zones,
            next_id: self.next_id,
            abusive: &self.abusive,
            worlds,
        };
        Ok(switchboard::codec::encode_value(&state)?)
    }

    /// Puts a fresh core (no player yet, the same limits, interest and id
    /// prefix) where `snapshot` says.
    pub fn restore(&mut self, snapshot: &[u8]) -> Result<(), RelaySnapshotError> {
        if !self.players.is_empty() {
            return Err(RelaySnapshotError::NotFresh);
        }
        let state: State = switchboard::codec::decode_value(snapshot)?;
        for (zone, world) in &state.worlds {
            world.check().map_err(|why| RelaySnapshotError::World {
                zone: zone.clone(),
                why,
            })?;
        }
        self.players = state.players;
        self.budgets = state.budgets.into_iter().collect();
        self.zones = state.zones.into_iter().collect();
        self.next_id = state.next_id;
        self.abusive = state.abusive;
        self.worlds = state.worlds.into_iter().collect();
        Ok(())
    }
}
